"""``hammr kb``: build and query local knowledge bases.

Errors are one line on stderr (``hammr: error: ...``), as for every command: exit status 2
for bad input, 1 when ``kb article`` finds no article, 130 when interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from hammr.backends.kb.build import KBBuildError, build_kb
from hammr.backends.kb.sqlite_kb import KBError, SqliteKB, bundled_kb_path, fts_terms
from hammr.cli_common import fail
from hammr.terminal_text import echo, safe_line


@click.group(name="kb")
def kb() -> None:
    """Build and search local knowledge bases (the 'kb' tool capability)."""


@kb.command(name="build")
@click.argument("dump", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The SQLite file to write (resumed when it holds an unfinished build).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "evqa", "jsonl"]),
    default="auto",
    show_default=True,
    help="evqa: the Encyclopedic-VQA knowledge-base JSON; jsonl: {title, text, url, aliases}.",
)
@click.option("--batch-size", default=500, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Stop after this many records."
)
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar (default: when on a terminal)."
)
def build_cmd(
    dump: Path, out: Path, fmt: str, batch_size: int, limit: int | None, progress: bool | None
) -> None:
    """Build the knowledge base OUT from DUMP; re-run to resume an interrupted build."""
    try:
        stats = build_kb(
            dump,
            out,
            fmt=fmt,  # type: ignore[arg-type]
            batch_size=batch_size,
            limit=limit,
            progress=progress,
        )
    except KBBuildError as e:
        fail(str(e))
    except KeyboardInterrupt:
        fail(f"interrupted; run the same command again to resume building {out}", code=130)
    if stats.complete and stats.added == 0 and not stats.resumed:
        echo(f"{out}: already built ({stats.articles} articles)")
    elif stats.complete:
        echo(f"{out}: done, {stats.articles} articles ({stats.format})")
    else:
        echo(
            f"{out}: stopped after {stats.records} records ({stats.articles} articles); "
            "run again to continue"
        )


def _open(path: Path) -> SqliteKB:
    try:
        return SqliteKB(bundled_kb_path() if str(path) == "bundled" else path)
    except KBError as e:
        fail(str(e))


@kb.command(name="search")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("query")
@click.option(
    "-k",
    default=5,
    show_default=True,
    type=click.IntRange(min=1),
    help="How many articles to show, best first.",
)
def search_cmd(path: Path, query: str, k: int) -> None:
    """Full-text search the knowledge base PATH ('bundled' for the bundled one)."""
    if not fts_terms(query):
        fail("the query has no words to search for" if query.strip() else "the query is empty")
    base = _open(path)
    try:
        pages = base.search_sync(query, k)
    except KBError as e:
        fail(str(e))
    finally:
        base.close()
    if not pages:
        echo("no results")
    for i, page in enumerate(pages, 1):
        snippet = " ".join(page.text.split()[:30])
        # the knowledge base is a file's text: made safe for a terminal
        echo(safe_line(f"{i}. {page.title}" + (f" <{page.url}>" if page.url else "")))
        echo(safe_line(f"   {snippet}..."))


@kb.command(name="article")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("title")
def article_cmd(path: Path, title: str) -> None:
    """Print the article the 'kb' capability returns for TITLE."""
    if not title.strip():
        fail("the title is empty")
    base = _open(path)
    try:
        page = base.article_sync(title)
    except KBError as e:
        fail(str(e))
    finally:
        base.close()
    if page is None:
        fail(f"no article found for {title!r}", code=1)
    echo(safe_line(f"# {page.title}" + (f" <{page.url}>" if page.url else "")))
    echo(page.text)
