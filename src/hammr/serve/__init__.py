"""`hammr serve`: every hammr system as a model behind OpenAI's chat-completions API."""
