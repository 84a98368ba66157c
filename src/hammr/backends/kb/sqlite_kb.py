"""A knowledge base in one SQLite file with an FTS5 index.

The tables are laid out in :mod:`hammr.backends.kb.schema`; :mod:`hammr.backends.kb.build`
fills them.

:meth:`SqliteKB.article` looks a title up exactly (case-insensitive, ``_`` read as a space),
then among the aliases, then takes the best full-text hit containing every word of the title
(in the title first, then anywhere). :meth:`SqliteKB.search` ranks with FTS5's bm25, the
title weighing ten times the text.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import sqlite3
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from hammr.backends.kb.build import KBBuildError, build_kb
from hammr.backends.kb.schema import title_key
from hammr.input_file import input_problem, read_input_bytes
from hammr.sqlite_file import connect_read_only
from hammr.values import Page

TITLE_WEIGHT = 10.0
"""bm25 weight of the title column against the text column (1.0)."""

BUNDLED_NAME = "mini_wiki"

MAX_K = 2**63 - 1
"""The most hits one search asks SQLite for (its largest integer; more would overflow)."""


class KBError(RuntimeError):
    """A knowledge-base file is missing, unreadable, or not finished building."""


def fts_terms(text: str) -> list[str]:
    """The words of ``text`` quoted for an FTS5 query (so no word is read as an operator)."""
    return ['"' + w + '"' for w in re.findall(r"\w+", text.lower())]


def fts5_available() -> bool:
    try:
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return True


class SqliteKB:
    """Articles from a SQLite file built by :func:`hammr.backends.kb.build.build_kb`.

    The file is opened read-only; queries run in a worker thread, one at a time.
    """

    def __repr__(self) -> str:
        return f"SqliteKB({str(self.path)!r})"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        problem = input_problem(self.path)
        if problem == "does not exist":
            raise KBError(
                f"no knowledge base at {self.path}; build one with "
                f"`hammr kb build DUMP --out {self.path}`"
            )
        if problem is not None:
            raise KBError(f"the knowledge base {self.path} {problem}")
        try:
            self._con = connect_read_only(self.path)
            rows = dict(self._con.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as e:
            raise KBError(f"{self.path} is not a hammr knowledge base ({e})") from None
        if rows.get("complete") != "1":
            raise KBError(
                f"the knowledge base {self.path} is not finished building; run "
                f"`hammr kb build` again with the same dump to resume"
            )
        self.meta: dict[str, str] = rows
        self._lock = threading.Lock()

    def close(self) -> None:
        self._con.close()

    def __len__(self) -> int:
        ((n,),) = self._query("SELECT count(*) FROM articles", ())
        return int(n)

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of one query; a damaged file raises :class:`KBError`, not sqlite3's."""
        try:
            with self._lock:
                return self._con.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise KBError(
                f"cannot read the knowledge base {self.path} ({e}); it may be damaged: build it "
                "again with `hammr kb build`"
            ) from None

    # -- synchronous lookups -------------------------------------------------------------

    def _fts(self, match: str, k: int) -> list[Page]:
        sql = (
            "SELECT a.title, a.text, a.url FROM articles_fts f JOIN articles a ON a.id = f.rowid "
            f"WHERE articles_fts MATCH ? ORDER BY bm25(articles_fts, {TITLE_WEIGHT}, 1.0), a.id "
            "LIMIT ?"
        )
        rows = self._query(sql, (match, min(k, MAX_K)))
        return [Page(title=r[0], text=r[1], url=r[2]) for r in rows]

    def article_sync(self, title: str) -> Page | None:
        key = title_key(title)
        if not key:
            return None
        rows = self._query(
            "SELECT title, text, url FROM articles WHERE title_key = ? ORDER BY id LIMIT 1",
            (key,),
        ) or self._query(
            "SELECT a.title, a.text, a.url FROM aliases s JOIN articles a "
            "ON a.id = s.article_id WHERE s.alias_key = ? ORDER BY a.id LIMIT 1",
            (key,),
        )
        if rows:
            return Page(title=rows[0][0], text=rows[0][1], url=rows[0][2])
        terms = fts_terms(title)
        if not terms:
            return None
        every = " AND ".join(terms)
        for match in (f"title : ({every})", every):
            hits = self._fts(match, 1)
            if hits:
                return hits[0]
        return None

    def search_sync(self, query: str, k: int = 5) -> list[Page]:
        terms = fts_terms(query)
        if not terms or k <= 0:
            return []
        return self._fts(" OR ".join(terms), k)

    # -- the KnowledgeBase protocol ------------------------------------------------------

    async def article(self, title: str) -> Page | None:
        return await asyncio.to_thread(self.article_sync, title)

    async def search(self, query: str, k: int = 5) -> list[Page]:
        return await asyncio.to_thread(self.search_sync, query, k)


# -- the bundled mini knowledge base ----------------------------------------------------------


def bundled_jsonl() -> Path:
    """The JSONL source of the bundled knowledge base (inside the installed package)."""
    return Path(str(resources.files("hammr") / "data" / "kb" / f"{BUNDLED_NAME}.jsonl"))


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "hammr" / "kb"


def bundled_kb_path(directory: Path | None = None) -> Path:
    """The bundled knowledge base as SQLite, built into the cache the first time (and again
    whenever the bundled JSONL changes). Safe with concurrent callers: each builds into its
    own temporary file and moves it into place."""
    src = bundled_jsonl()
    digest = hashlib.sha256(read_input_bytes(src)).hexdigest()
    out = (directory or cache_dir()) / f"{BUNDLED_NAME}.sqlite"
    if out.is_file():
        try:
            con = connect_read_only(out)
            try:
                meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
            finally:
                con.close()
            if meta.get("complete") == "1" and meta.get("source_sha256") == digest:
                return out
        except sqlite3.DatabaseError:
            pass
    tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        build_kb(src, tmp, fmt="jsonl", progress=False, extra_meta={"source_sha256": digest})
        os.replace(tmp, out)
    except (KBBuildError, OSError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise KBError(f"cannot build the bundled knowledge base into {out}: {reason}") from None
    finally:
        with contextlib.suppress(OSError):  # e.g. never made: its folder could not be
            tmp.unlink(missing_ok=True)
    return out


OPTIONS: dict[str, type] = {"path": str}


def from_config(options: dict[str, Any]) -> SqliteKB:
    """The ``[tools.kb] backend = "sqlite"`` factory; ``path`` defaults to the bundled KB."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options("tools.kb", options, OPTIONS)
    if not fts5_available():
        raise BackendUnavailable(
            "this Python's SQLite was built without FTS5; use a Python whose sqlite3 has FTS5 "
            "(python.org and Debian builds do)"
        )
    try:
        path = Path(opts["path"]).expanduser() if "path" in opts else bundled_kb_path()
        return SqliteKB(path)
    except KBError as e:
        raise BackendUnavailable(str(e)) from None
