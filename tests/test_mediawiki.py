"""MediaWikiKB against a fake MediaWiki API on 127.0.0.1 (never the real site)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from hammr.backends.kb.mediawiki import MediaWikiKB, from_config
from hammr.tools.base import ToolContext, ToolError
from hammr.tools.knowledge_tools import WikipediaArticle

ARTICLES = {
    "Eiffel Tower": "The Eiffel Tower is a lattice tower in Paris.\n\nHistory\nIt opened in 1889.",
    "Gustave Eiffel": "Gustave Eiffel was a French civil engineer.",
}
REDIRECTS = {"Tour Eiffel": "Eiffel Tower"}


class FakeMediaWiki:
    """Answers action=query with prop=extracts (following redirects) and list=search."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.status = 200
        self.raw: bytes | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                q = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
                outer.seen.append(q)
                body = outer.raw if outer.raw is not None else json.dumps(outer.answer(q)).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/w/api.php"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def answer(self, q: dict[str, str]) -> dict[str, Any]:
        if q.get("action") != "query" or q.get("format") != "json":
            return {"error": {"code": "badparams", "info": "Unrecognized parameters."}}
        if q.get("list") == "search":
            words = q["srsearch"].lower().split()
            hits = [t for t, text in ARTICLES.items() if any(w in text.lower() for w in words)]
            hits = hits[: int(q.get("srlimit", "10"))]
            return {
                "query": {
                    "search": [
                        {"ns": 0, "title": t, "snippet": f'<span class="m">{t}</span> ...'}
                        for t in hits
                    ]
                }
            }
        out: dict[str, Any] = {"query": {"pages": []}}
        for title in q.get("titles", "").split("|"):
            if q.get("redirects") and title in REDIRECTS:
                out["query"].setdefault("redirects", []).append(
                    {"from": title, "to": REDIRECTS[title]}
                )
                title = REDIRECTS[title]
            if title in ARTICLES:
                text = ARTICLES[title]
                if q.get("exintro"):
                    text = text.split("\n\n")[0]
                out["query"]["pages"].append(
                    {
                        "pageid": 1 + list(ARTICLES).index(title),
                        "ns": 0,
                        "title": title,
                        "extract": text,
                        "fullurl": "https://en.wikipedia.org/wiki/" + title.replace(" ", "_"),
                    }
                )
            else:
                out["query"]["pages"].append({"ns": 0, "title": title, "missing": True})
        return out

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def wiki() -> Iterator[FakeMediaWiki]:
    server = FakeMediaWiki()
    yield server
    server.close()


async def test_article_follows_redirects(wiki: FakeMediaWiki) -> None:
    kb = MediaWikiKB(api_url=wiki.url, timeout_s=5)
    page = await kb.article("Tour_Eiffel")
    assert page is not None
    assert page.title == "Eiffel Tower"
    assert page.text.endswith("It opened in 1889.")
    assert page.url == "https://en.wikipedia.org/wiki/Eiffel_Tower"
    q = wiki.seen[0]
    assert q["prop"] == "extracts|info" and q["explaintext"] == "1" and q["redirects"] == "1"
    assert q["titles"] == "Tour Eiffel" and "exintro" not in q


async def test_missing_page(wiki: FakeMediaWiki) -> None:
    kb = MediaWikiKB(api_url=wiki.url)
    assert await kb.article("Atlantis") is None
    assert await kb.article("  ") is None
    ctx = ToolContext(backends={"kb": kb})
    with pytest.raises(ToolError, match="no article found for 'Atlantis'"):
        await WikipediaArticle.invoke({"entity": "Atlantis"}, ctx)
    found = await WikipediaArticle.invoke({"entity": "Gustave Eiffel"}, ctx)
    assert found.value.text == "Gustave Eiffel was a French civil engineer."


async def test_search(wiki: FakeMediaWiki) -> None:
    kb = MediaWikiKB(api_url=wiki.url)
    pages = await kb.search("eiffel", k=2)
    assert [p.title for p in pages] == ["Eiffel Tower", "Gustave Eiffel"]
    assert pages[0].text == "The Eiffel Tower is a lattice tower in Paris."  # the lead only
    assert wiki.seen[0]["list"] == "search" and wiki.seen[0]["srlimit"] == "2"
    assert (
        wiki.seen[1]["exintro"] == "1" and wiki.seen[1]["titles"] == "Eiffel Tower|Gustave Eiffel"
    )
    assert [p.title for p in await kb.search("eiffel", k=1)] == ["Eiffel Tower"]
    assert await kb.search("zebra") == []
    assert await kb.search("") == []


async def test_server_down_is_a_one_line_tool_error(wiki: FakeMediaWiki) -> None:
    url = wiki.url
    wiki.close()
    kb = MediaWikiKB(api_url=url, timeout_s=2)
    with pytest.raises(ToolError) as e:
        await kb.article("Eiffel Tower")
    assert str(e.value).startswith(f"the MediaWiki API at {url} is unreachable")
    assert "\n" not in str(e.value)
    with pytest.raises(ToolError, match="unreachable"):
        await kb.search("eiffel")


async def test_http_and_api_errors(wiki: FakeMediaWiki) -> None:
    kb = MediaWikiKB(api_url=wiki.url)
    wiki.status = 503
    with pytest.raises(ToolError, match="answered HTTP 503"):
        await kb.article("Eiffel Tower")
    wiki.status = 200
    wiki.raw = b"<html>maintenance</html>"
    with pytest.raises(ToolError, match="did not return JSON"):
        await kb.article("Eiffel Tower")
    wiki.raw = json.dumps({"error": {"code": "ratelimited", "info": "Slow down."}}).encode()
    with pytest.raises(ToolError, match=r"refused the query: Slow down\."):
        await kb.article("Eiffel Tower")


def test_from_config(wiki: FakeMediaWiki) -> None:
    kb = from_config({"api_url": wiki.url, "timeout_s": "3"})
    assert kb.api_url == wiki.url and kb.timeout_s == 3.0
    assert from_config({}).api_url == "https://en.wikipedia.org/w/api.php"
    with pytest.raises(ValueError, match="unknown setting"):
        from_config({"lang": "de"})
