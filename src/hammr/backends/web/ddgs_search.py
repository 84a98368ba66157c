"""Web search through DuckDuckGo and friends with the ``ddgs`` package (no key, no server).

``ddgs`` scrapes public search pages, so it can be rate-limited or break when those pages
change; it is for casual use, SearXNG or SerpAPI for anything that matters.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import Iterable
from typing import Any

from hammr.backends.http_errors import one_line
from hammr.backends.web._http import text_field
from hammr.tools.base import ToolError
from hammr.values import Page

OPTIONS: dict[str, type] = {"region": str, "safesearch": str, "timeout_s": float, "backend": str}


def pages_from_ddgs(results: Iterable[Any], k: int) -> list[Page]:
    """Pages from ``DDGS().text(...)`` result dicts (title, href, body)."""
    pages: list[Page] = []
    for item in results or []:
        if not isinstance(item, dict):
            continue
        title = text_field(item, "title")
        url = text_field(item, "href", "url") or None
        if title or url:
            pages.append(Page(title or url or "", text_field(item, "body", "snippet"), url))
        if len(pages) >= k:
            break
    return pages


class DdgsSearch:
    """The 'web' capability over ``ddgs.DDGS().text``, run in a worker thread."""

    def __init__(
        self,
        region: str = "us-en",
        safesearch: str = "moderate",
        timeout_s: float = 15.0,
        backend: str = "auto",
    ) -> None:
        if safesearch not in ("on", "moderate", "off"):
            raise ValueError(f"safesearch must be on, moderate or off, got {safesearch!r}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.region = region
        self.safesearch = safesearch
        self.timeout_s = timeout_s
        self.backend = backend

    def _search(self, query: str, k: int) -> list[Any]:
        ddgs = importlib.import_module("ddgs")
        client = ddgs.DDGS(timeout=max(1, round(self.timeout_s)))
        results = client.text(
            query,
            region=self.region,
            safesearch=self.safesearch,
            max_results=k,
            backend=self.backend,
        )
        return list(results or [])

    async def search(self, query: str, k: int = 5) -> list[Page]:
        try:
            results = await asyncio.wait_for(
                asyncio.to_thread(self._search, query, k), self.timeout_s + 5
            )
        except TimeoutError:
            raise ToolError(
                f"web search: ddgs did not answer within {self.timeout_s:g} s"
            ) from None
        except Exception as e:  # ddgs raises its own exception types; show one line
            text = one_line(str(e), 120) or type(e).__name__
            if "no results" in text.lower():
                return []
            raise ToolError(f"web search: ddgs failed ({type(e).__name__}: {text})") from None
        return pages_from_ddgs(results, k)


def from_config(options: dict[str, Any]) -> DdgsSearch:
    """The ``[tools.web] backend = "ddgs"`` factory (needs ``pip install ddgs``)."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options("tools.web", options, OPTIONS)
    if importlib.util.find_spec("ddgs") is None:
        raise BackendUnavailable("ddgs web search needs the ddgs package: pip install ddgs")
    return DdgsSearch(**opts)
