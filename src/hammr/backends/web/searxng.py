"""Web search through a SearXNG instance's JSON API (``/search?format=json``).

The instance must allow the JSON format: ``search: formats: [html, json]`` in its
settings.yml (otherwise it answers 403).
"""

from __future__ import annotations

from typing import Any

from hammr.backends.web._http import get_json, text_field
from hammr.tools.base import ToolError
from hammr.values import Page

OPTIONS: dict[str, type] = {"base_url": str, "timeout_s": float, "language": str}


def pages_from_searxng(data: dict[str, Any], k: int) -> list[Page]:
    """Pages from a SearXNG JSON reply: title, the result's snippet as text, url."""
    results = data.get("results")
    if not isinstance(results, list):
        raise ToolError("web search: SearXNG's reply has no 'results' list")
    pages: list[Page] = []
    for item in results:
        if not isinstance(item, dict):
            continue
        title = text_field(item, "title")
        url = text_field(item, "url") or None
        if not title and not url:
            continue
        pages.append(Page(title or url or "", text_field(item, "content"), url))
        if len(pages) >= k:
            break
    return pages


class SearxngSearch:
    """The 'web' capability over a SearXNG instance."""

    def __init__(self, base_url: str, timeout_s: float = 10.0, language: str | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"SearXNG base_url must start with http:// or https://, got {base_url!r}"
            )
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.language = language

    async def search(self, query: str, k: int = 5) -> list[Page]:
        params: dict[str, str | int] = {"q": query, "format": "json"}
        if self.language:
            params["language"] = self.language
        data = await get_json(
            f"SearXNG at {self.base_url}",
            f"{self.base_url}/search",
            params,
            self.timeout_s,
            hints={403: "enable the json format in the instance's settings.yml search.formats"},
        )
        return pages_from_searxng(data, k)


def from_config(options: dict[str, Any]) -> SearxngSearch:
    """The ``[tools.web] backend = "searxng"`` factory (needs ``base_url``)."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options("tools.web", options, OPTIONS)
    if not opts.get("base_url"):
        raise BackendUnavailable(
            "SearXNG web search needs the instance's address: [tools.web] base_url = "
            '"http://localhost:8888"'
        )
    return SearxngSearch(**opts)
