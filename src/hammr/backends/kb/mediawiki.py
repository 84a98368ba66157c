"""The 'kb' capability online: articles and search from a MediaWiki API (Wikipedia).

:meth:`MediaWikiKB.article` asks for the plain-text extract of one title, following
redirects (``action=query&prop=extracts&explaintext=1&redirects=1``);
:meth:`MediaWikiKB.search` runs ``list=search`` and then fetches the lead section of each
hit. Network failures and API errors raise :class:`~hammr.tools.base.ToolError` with a
one-line message.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from hammr.tools.base import ToolError
from hammr.values import Page

DEFAULT_API_URL = "https://en.wikipedia.org/w/api.php"
USER_AGENT = "hammr/0.1 (visual question answering; set tools.kb.user_agent to add a contact)"


def _strip_html(text: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", text).split())


class MediaWikiKB:
    """A MediaWiki API as a knowledge base (English Wikipedia by default)."""

    def __init__(
        self,
        api_url: str = DEFAULT_API_URL,
        timeout_s: float = 15.0,
        user_agent: str = USER_AGENT,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.api_url = api_url
        self.timeout_s = timeout_s
        self.headers = {"User-Agent": user_agent, "Accept": "application/json"}

    async def _get(self, params: dict[str, str]) -> dict[str, Any]:
        query = {"format": "json", "formatversion": "2", **params}
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers) as client:
                r = await client.get(self.api_url, params=query)
        except httpx.TimeoutException:
            raise ToolError(
                f"the MediaWiki API at {self.api_url} did not answer in {self.timeout_s:g} s"
            ) from None
        except httpx.HTTPError as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ToolError(
                f"the MediaWiki API at {self.api_url} is unreachable: {reason}"
            ) from None
        if r.status_code != 200:
            raise ToolError(f"the MediaWiki API at {self.api_url} answered HTTP {r.status_code}")
        try:
            data = r.json()
        except ValueError:
            raise ToolError(f"the MediaWiki API at {self.api_url} did not return JSON") from None
        if not isinstance(data, dict):
            raise ToolError(f"the MediaWiki API at {self.api_url} returned an unexpected reply")
        if "error" in data:
            err = data["error"] if isinstance(data["error"], dict) else {}
            info = err.get("info") or err.get("code") or "unknown error"
            raise ToolError(f"the MediaWiki API at {self.api_url} refused the query: {info}")
        return data

    @staticmethod
    def _pages(data: dict[str, Any]) -> list[dict[str, Any]]:
        pages = (data.get("query") or {}).get("pages") or []
        if isinstance(pages, dict):  # formatversion=1 servers
            pages = list(pages.values())
        return [p for p in pages if isinstance(p, dict)]

    def _to_page(self, p: dict[str, Any]) -> Page | None:
        if p.get("missing") is not None and p.get("missing") is not False:
            return None
        if "invalid" in p or not isinstance(p.get("title"), str):
            return None
        url = p.get("fullurl") if isinstance(p.get("fullurl"), str) else None
        return Page(title=p["title"], text=str(p.get("extract") or ""), url=url)

    async def article(self, title: str) -> Page | None:
        title = " ".join(title.replace("_", " ").split())
        if not title:
            return None
        data = await self._get(
            {
                "action": "query",
                "prop": "extracts|info",
                "inprop": "url",
                "explaintext": "1",
                "redirects": "1",
                "titles": title,
            }
        )
        for p in self._pages(data):
            page = self._to_page(p)
            if page is not None:
                return page
        return None

    async def search(self, query: str, k: int = 5) -> list[Page]:
        if not query.strip() or k <= 0:
            return []
        data = await self._get(
            {"action": "query", "list": "search", "srsearch": query, "srlimit": str(min(k, 50))}
        )
        hits = [h for h in (data.get("query") or {}).get("search") or [] if isinstance(h, dict)]
        titles = [str(h["title"]) for h in hits if isinstance(h.get("title"), str)][:k]
        if not titles:
            return []
        leads = await self._get(
            {
                "action": "query",
                "prop": "extracts|info",
                "inprop": "url",
                "exintro": "1",
                "explaintext": "1",
                "exlimit": "max",
                "titles": "|".join(titles),
            }
        )
        by_title = {p.title: p for p in map(self._to_page, self._pages(leads)) if p is not None}
        out: list[Page] = []
        for h in hits[:k]:
            t = h.get("title")
            if not isinstance(t, str):
                continue
            page = by_title.get(t)
            if page is None or not page.text:
                page = Page(t, _strip_html(str(h.get("snippet") or "")), page.url if page else None)
            out.append(page)
        return out


OPTIONS: dict[str, type] = {"api_url": str, "timeout_s": float, "user_agent": str}


def from_config(options: dict[str, Any]) -> MediaWikiKB:
    """The ``[tools.kb] backend = "mediawiki"`` factory (needs network access)."""
    from hammr.backends.registry import parse_options

    return MediaWikiKB(**parse_options("tools.kb", options, OPTIONS))
