"""Web search backends for the 'web' capability (off by default): SearXNG, SerpAPI, DDGS."""
