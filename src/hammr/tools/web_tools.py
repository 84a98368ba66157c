"""The WebSearch tool: result snippets from the configured 'web' backend (off by default)."""

from __future__ import annotations

from hammr.tools.base import BadArguments, ToolContext, ToolError, ToolResult, tool
from hammr.values import Page

MAX_RESULTS = 10
_SNIPPET_CHARS = 300


def _observation(query: str, pages: list[Page]) -> str:
    if not pages:
        return f"no web results for {query!r}"
    lines = [f"{len(pages)} web results for {query!r}:"]
    for i, p in enumerate(pages, 1):
        text = " ".join(p.text.split())
        if len(text) > _SNIPPET_CHARS:
            text = text[: _SNIPPET_CHARS - 3] + "..."
        line = f"{i}. {p.title}"
        if p.url:
            line += f" <{p.url}>"
        if text:
            line += f": {text}"
        lines.append(line)
    return "\n".join(lines)


async def _web_search(query: str, k: int = 5, *, ctx: ToolContext) -> ToolResult:
    """Search the web for up-to-date facts; returns result pages with their snippets.

    Args:
        query: a few keywords, e.g. 'Eiffel Tower height'.
        k: how many results, 1 to 10.

    Returns:
        a list of pages (title, snippet text, url)
    """
    query = " ".join(query.split())
    if not query:
        raise BadArguments("WebSearch needs a non-empty query")
    if not 1 <= k <= MAX_RESULTS:
        raise BadArguments(f"WebSearch k must be between 1 and {MAX_RESULTS}, got {k}")
    pages = await ctx.backend("web").search(query, k)
    if not isinstance(pages, list) or not all(isinstance(p, Page) for p in pages):
        raise ToolError("web backend did not return a list of pages")
    pages = pages[:k]
    return ToolResult(pages, observation=_observation(query, pages))


WebSearch = tool(_web_search, name="WebSearch", capability="web")
