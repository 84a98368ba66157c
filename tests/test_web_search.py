from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from fake_http_server import LocalServer, QuietHandler
from hammr.backends.registry import BackendUnavailable
from hammr.backends.web import ddgs_search, searxng, serpapi
from hammr.backends.web.ddgs_search import DdgsSearch, pages_from_ddgs
from hammr.backends.web.searxng import SearxngSearch
from hammr.backends.web.serpapi import SerpApiSearch
from hammr.tools.base import (
    BadArguments,
    CapabilityMissing,
    ToolContext,
    ToolError,
    bind_arguments,
)
from hammr.tools.web_tools import WebSearch
from hammr.values import Page


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0


class FakeSearchServer(LocalServer):
    """A GET-only JSON server on 127.0.0.1: scripted replies, recorded paths and queries."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.seen: list[tuple[str, dict[str, list[str]]]] = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                outer.seen.append((parts.path, parse_qs(parts.query)))
                reply = outer.script.pop(0) if outer.script else Reply()
                if reply.delay:
                    outer.stop.wait(reply.delay)
                self.send_json(reply.status, reply.body)

        super().__init__(Handler)
        self.url = f"http://127.0.0.1:{self.port}"


@pytest.fixture
def server() -> Iterator[FakeSearchServer]:
    s = FakeSearchServer()
    yield s
    s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


SEARXNG_REPLY = {
    "query": "eiffel tower height",
    "results": [
        {
            "title": "Eiffel Tower - Wikipedia",
            "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
            "content": "The tower is 330 metres tall.",
            "engine": "wikipedia",
        },
        {"title": "Facts", "url": "https://example.org/facts", "content": ""},
        "not a dict",
        {"content": "no title, no url: skipped"},
        {"title": "Third", "url": "https://example.org/3", "content": "three"},
    ],
}


# -- SearXNG ---------------------------------------------------------------------------------


async def test_searxng_results_parsed(server: FakeSearchServer) -> None:
    server.script = [Reply(body=SEARXNG_REPLY)]
    pages = await SearxngSearch(server.url + "/").search("eiffel tower height", k=5)
    assert pages == [
        Page(
            "Eiffel Tower - Wikipedia",
            "The tower is 330 metres tall.",
            "https://en.wikipedia.org/wiki/Eiffel_Tower",
        ),
        Page("Facts", "", "https://example.org/facts"),
        Page("Third", "three", "https://example.org/3"),
    ]
    path, query = server.seen[0]
    assert path == "/search"
    assert query["q"] == ["eiffel tower height"] and query["format"] == ["json"]


async def test_searxng_k_and_language(server: FakeSearchServer) -> None:
    server.script = [Reply(body=SEARXNG_REPLY)]
    pages = await SearxngSearch(server.url, language="fr").search("x", k=1)
    assert [p.title for p in pages] == ["Eiffel Tower - Wikipedia"]
    assert server.seen[0][1]["language"] == ["fr"]


async def test_searxng_json_disabled_403_has_a_hint(server: FakeSearchServer) -> None:
    server.script = [Reply(status=403, body=b"<html>Forbidden</html>")]
    with pytest.raises(ToolError) as e:
        await SearxngSearch(server.url).search("x")
    msg = str(e.value)
    assert "HTTP 403" in msg and "settings.yml" in msg and "\n" not in msg


async def test_searxng_bad_json(server: FakeSearchServer) -> None:
    server.script = [Reply(body=b"<html>\n<body>oops</body>\n</html>")]
    with pytest.raises(ToolError) as e:
        await SearxngSearch(server.url).search("x")
    assert "not JSON" in str(e.value) and "\n" not in str(e.value)
    server.script = [Reply(body={"answers": []})]
    with pytest.raises(ToolError, match="no 'results' list"):
        await SearxngSearch(server.url).search("x")


async def test_searxng_slow(server: FakeSearchServer) -> None:
    server.script = [Reply(body=SEARXNG_REPLY, delay=2.0)]
    with pytest.raises(ToolError, match=r"did not answer within 0\.2 s"):
        await SearxngSearch(server.url, timeout_s=0.2).search("x")


async def test_searxng_down() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(ToolError) as e:
        await SearxngSearch(url, timeout_s=2).search("x")
    msg = str(e.value)
    assert msg == f"web search: SearXNG at {url} is unreachable (connection refused)"


def test_searxng_from_config() -> None:
    with pytest.raises(BackendUnavailable, match="base_url"):
        searxng.from_config({})
    with pytest.raises(ValueError, match=r"unknown setting tools\.web\.api_key"):
        searxng.from_config({"base_url": "http://x", "api_key": "k"})
    backend = searxng.from_config({"base_url": "http://localhost:8888", "timeout_s": "3"})
    assert backend.base_url == "http://localhost:8888" and backend.timeout_s == 3.0


# -- SerpAPI ---------------------------------------------------------------------------------

SERPAPI_REPLY = {
    "search_metadata": {"status": "Success"},
    "answer_box": {"title": "Eiffel Tower, Height", "answer": "330 m"},
    "organic_results": [
        {
            "position": 1,
            "title": "Eiffel Tower - Wikipedia",
            "link": "https://en.wikipedia.org/wiki/Eiffel_Tower",
            "snippet": "The tower is 330 metres tall.",
        },
        {"position": 2, "title": "Facts", "link": "https://example.org/facts"},
        {"position": 3, "title": "Third", "link": "https://example.org/3", "snippet": "3"},
    ],
}


async def test_serpapi_results_parsed(
    server: FakeSearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERPAPI_API_KEY", "secret-key")
    server.script = [Reply(body=SERPAPI_REPLY)]
    pages = await SerpApiSearch(base_url=server.url).search("eiffel tower height", k=3)
    assert pages == [
        Page("Eiffel Tower, Height", "330 m", None),
        Page(
            "Eiffel Tower - Wikipedia",
            "The tower is 330 metres tall.",
            "https://en.wikipedia.org/wiki/Eiffel_Tower",
        ),
        Page("Facts", "", "https://example.org/facts"),
    ]
    path, query = server.seen[0]
    assert path == "/search.json"
    assert query["engine"] == ["google"] and query["q"] == ["eiffel tower height"]
    assert query["api_key"] == ["secret-key"]


async def test_serpapi_401_names_the_env_var_not_the_key(
    server: FakeSearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERP_KEY", "secret-key")
    server.script = [Reply(status=401, body={"error": "Invalid API key."})]
    with pytest.raises(ToolError) as e:
        await SerpApiSearch(api_key_env="MY_SERP_KEY", base_url=server.url).search("x")
    msg = str(e.value)
    assert "HTTP 401" in msg and "Invalid API key." in msg and "MY_SERP_KEY" in msg
    assert "secret-key" not in msg and "\n" not in msg


async def test_serpapi_no_results_is_empty(
    server: FakeSearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERPAPI_API_KEY", "k")
    server.script = [
        Reply(body={"error": "Google hasn't returned any results for this query."}),
        Reply(body={"error": "Your account has run out of searches."}),
    ]
    backend = SerpApiSearch(base_url=server.url)
    assert await backend.search("zzz") == []
    with pytest.raises(ToolError, match="run out of searches"):
        await backend.search("zzz")


async def test_serpapi_down_and_bad_json(
    server: FakeSearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERPAPI_API_KEY", "secret-key")
    down = SerpApiSearch(base_url=f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(ToolError) as e:
        await down.search("x")
    assert str(e.value) == "web search: SerpAPI is unreachable (connection refused)"
    server.script = [Reply(body=b"not json")]
    with pytest.raises(ToolError, match="not JSON"):
        await SerpApiSearch(base_url=server.url).search("x")


def test_serpapi_missing_key_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPAPI_API_KEY", raising=False)
    with pytest.raises(BackendUnavailable, match="SERPAPI_API_KEY"):
        serpapi.from_config({})
    monkeypatch.setenv("OTHER_KEY", "k")
    backend = serpapi.from_config({"api_key_env": "OTHER_KEY"})
    assert "k" not in repr(backend).replace("api_key_env", "")
    assert backend.base_url == "https://serpapi.com"


# -- ddgs (no network: parsing and the missing package only) ---------------------------------


def test_ddgs_result_dicts_parsed() -> None:
    results = [
        {"title": "Eiffel Tower", "href": "https://example.org/e", "body": "330 m tall"},
        {"title": "", "href": "https://example.org/no-title", "body": "b"},
        {"body": "nothing to cite"},
        None,
        {"title": "Last", "href": "https://example.org/l", "body": "l"},
    ]
    assert pages_from_ddgs(results, k=2) == [
        Page("Eiffel Tower", "330 m tall", "https://example.org/e"),
        Page("https://example.org/no-title", "b", "https://example.org/no-title"),
    ]
    assert pages_from_ddgs([], k=5) == []


def test_ddgs_missing_package_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ddgs_search.importlib.util.find_spec
    monkeypatch.setattr(
        ddgs_search.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ddgs" else real(name, *a),
    )
    with pytest.raises(BackendUnavailable, match="pip install ddgs"):
        ddgs_search.from_config({})


async def test_ddgs_errors_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self: DdgsSearch, query: str, k: int) -> list[Any]:
        raise RuntimeError("Ratelimit\nhttps://duckduckgo.com 202")

    monkeypatch.setattr(DdgsSearch, "_search", failing)
    with pytest.raises(ToolError) as e:
        await DdgsSearch().search("x")
    assert (
        str(e.value)
        == "web search: ddgs failed (RuntimeError: Ratelimit https://duckduckgo.com 202)"
    )

    def canned(self: DdgsSearch, query: str, k: int) -> list[Any]:
        return [{"title": "T", "href": "https://t", "body": "b"}] * 10

    monkeypatch.setattr(DdgsSearch, "_search", canned)
    assert await DdgsSearch().search("x", k=3) == [Page("T", "b", "https://t")] * 3


# -- the WebSearch tool ----------------------------------------------------------------------


class ScriptedWeb:
    def __init__(self, pages: list[Page]) -> None:
        self.pages = pages
        self.calls: list[tuple[str, int]] = []

    async def search(self, query: str, k: int = 5) -> list[Page]:
        self.calls.append((query, k))
        return self.pages


async def run(ctx: ToolContext, *args: Any, **kwargs: Any) -> Any:
    return await WebSearch.invoke(bind_arguments(WebSearch, list(args), kwargs), ctx)


async def test_web_search_tool_shows_snippets() -> None:
    fake = ScriptedWeb(
        [Page("A", "alpha " * 100, "https://a"), Page("B", "beta", None), Page("C", "", "u")]
    )
    result = await run(ToolContext(backends={"web": fake}), "  eiffel   tower ", k=2)
    assert fake.calls == [("eiffel tower", 2)]
    assert [p.title for p in result.value] == ["A", "B"]
    lines = result.observation.splitlines()
    assert lines[0] == "2 web results for 'eiffel tower':"
    assert lines[1].startswith("1. A <https://a>: alpha alpha") and lines[1].endswith("...")
    assert lines[2] == "2. B: beta"


async def test_web_search_tool_against_fake_searxng(server: FakeSearchServer) -> None:
    server.script = [Reply(body=SEARXNG_REPLY)]
    ctx = ToolContext(backends={"web": SearxngSearch(server.url)})
    result = await run(ctx, "eiffel tower height")
    assert len(result.value) == 3
    assert "The tower is 330 metres tall." in result.observation
    empty = await run(ToolContext(backends={"web": ScriptedWeb([])}), "x")
    assert empty.value == [] and empty.observation == "no web results for 'x'"


async def test_web_search_tool_rejections() -> None:
    ctx = ToolContext(backends={"web": ScriptedWeb([])})
    with pytest.raises(BadArguments, match="non-empty query"):
        await run(ctx, "   ")
    with pytest.raises(BadArguments, match="between 1 and 10"):
        await run(ctx, "x", k=50)
    with pytest.raises(CapabilityMissing, match=r"capability 'web' has no backend configured"):
        await run(ToolContext(), "x")
    assert WebSearch.capability == "web"
    assert WebSearch.card().startswith("WebSearch(query: text, k: integer = 5)")
