"""Google results through SerpAPI (``/search.json?engine=google``); needs an API key."""

from __future__ import annotations

import os
from typing import Any

from hammr.backends.web._http import get_json, text_field
from hammr.tools.base import ToolError
from hammr.values import Page

OPTIONS: dict[str, type] = {
    "api_key_env": str,
    "base_url": str,
    "timeout_s": float,
    "engine": str,
}


def pages_from_serpapi(data: dict[str, Any], k: int) -> list[Page]:
    """Pages from a SerpAPI reply: a direct answer box first when there is one, then the
    organic results (title, snippet, link)."""
    if isinstance(data.get("error"), str) and not data.get("organic_results"):
        error = data["error"]
        if "hasn't returned any results" in error:
            return []
        raise ToolError(f"web search: SerpAPI: {error}")
    pages: list[Page] = []
    box = data.get("answer_box")
    if isinstance(box, dict):
        text = text_field(box, "answer", "snippet", "result")
        if text:
            title = text_field(box, "title") or "Answer"
            pages.append(Page(title, text, text_field(box, "link") or None))
    results = data.get("organic_results") or []
    if not isinstance(results, list):
        raise ToolError("web search: SerpAPI's 'organic_results' is not a list")
    for item in results:
        if len(pages) >= k:
            break
        if not isinstance(item, dict):
            continue
        title = text_field(item, "title")
        url = text_field(item, "link") or None
        if title or url:
            pages.append(Page(title or url or "", text_field(item, "snippet"), url))
    return pages[:k]


class SerpApiSearch:
    """The 'web' capability over SerpAPI's Google engine; the key comes from an env var."""

    def __init__(
        self,
        api_key_env: str = "SERPAPI_API_KEY",
        base_url: str = "https://serpapi.com",
        timeout_s: float = 20.0,
        engine: str = "google",
    ) -> None:
        key = os.environ.get(api_key_env, "").strip()
        if not key:
            raise ValueError(f"SerpAPI needs an API key in the environment variable {api_key_env}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.api_key_env = api_key_env
        self._api_key = key
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.engine = engine

    def __repr__(self) -> str:  # never show the key
        return f"SerpApiSearch(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    async def search(self, query: str, k: int = 5) -> list[Page]:
        data = await get_json(
            "SerpAPI",
            f"{self.base_url}/search.json",
            {"engine": self.engine, "q": query, "num": max(k, 1), "api_key": self._api_key},
            self.timeout_s,
            hints={
                401: f"check the API key in {self.api_key_env}",
                429: "out of searches or rate-limited",
            },
        )
        return pages_from_serpapi(data, k)


def from_config(options: dict[str, Any]) -> SerpApiSearch:
    """The ``[tools.web] backend = "serpapi"`` factory (needs the key's env var set)."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options("tools.web", options, OPTIONS)
    env = opts.get("api_key_env", "SERPAPI_API_KEY")
    if not os.environ.get(env, "").strip():
        raise BackendUnavailable(
            f"SerpAPI web search needs an API key: set the environment variable {env}"
        )
    return SerpApiSearch(**opts)
