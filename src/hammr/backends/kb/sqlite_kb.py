"""A knowledge base in one SQLite file with an FTS5 index.

Tables: ``articles`` (the pages, whole), ``aliases`` (redirects and other names),
``articles_fts`` (an external-content FTS5 index over title and text) and ``meta`` (the
build's source and progress; see :mod:`hammr.backends.kb.build`).

:meth:`SqliteKB.article` looks a title up exactly (case-insensitive, ``_`` read as a space),
then among the aliases, then takes the best full-text hit containing every word of the title
(in the title first, then anywhere). :meth:`SqliteKB.search` ranks with FTS5's bm25, the
title weighing ten times the text.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from hammr.values import Page

SCHEMA_VERSION = "1"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS articles (
    id INTEGER PRIMARY KEY,
    source_key TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    title_key TEXT NOT NULL,
    text TEXT NOT NULL,
    url TEXT
);
CREATE INDEX IF NOT EXISTS articles_title_key ON articles (title_key);
CREATE TABLE IF NOT EXISTS aliases (
    alias_key TEXT NOT NULL,
    article_id INTEGER NOT NULL REFERENCES articles (id),
    PRIMARY KEY (alias_key, article_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS articles_fts USING fts5 (
    title, text, content='articles', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""

TITLE_WEIGHT = 10.0
"""bm25 weight of the title column against the text column (1.0)."""

BUNDLED_NAME = "mini_wiki"


class KBError(RuntimeError):
    """A knowledge-base file is missing, unreadable, or not finished building."""


def title_key(title: str) -> str:
    """The form titles are compared in: ``_`` as spaces, single spaces, case-folded."""
    return " ".join(title.replace("_", " ").split()).casefold()


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
        if not self.path.is_file():
            raise KBError(
                f"no knowledge base at {self.path}; build one with "
                f"`hammr kb build DUMP --out {self.path}`"
            )
        try:
            self._con = sqlite3.connect(
                f"file:{self.path.resolve()}?mode=ro", uri=True, check_same_thread=False
            )
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
        with self._lock:
            (n,) = self._con.execute("SELECT count(*) FROM articles").fetchone()
        return int(n)

    # -- synchronous lookups -------------------------------------------------------------

    def _page(self, row: tuple[Any, ...] | None) -> Page | None:
        if row is None:
            return None
        return Page(title=row[0], text=row[1], url=row[2])

    def _fts(self, match: str, k: int) -> list[Page]:
        sql = (
            "SELECT a.title, a.text, a.url FROM articles_fts f JOIN articles a ON a.id = f.rowid "
            f"WHERE articles_fts MATCH ? ORDER BY bm25(articles_fts, {TITLE_WEIGHT}, 1.0), a.id "
            "LIMIT ?"
        )
        with self._lock:
            rows = self._con.execute(sql, (match, k)).fetchall()
        return [Page(title=r[0], text=r[1], url=r[2]) for r in rows]

    def article_sync(self, title: str) -> Page | None:
        key = title_key(title)
        if not key:
            return None
        with self._lock:
            row = self._con.execute(
                "SELECT title, text, url FROM articles WHERE title_key = ? ORDER BY id LIMIT 1",
                (key,),
            ).fetchone()
            if row is None:
                row = self._con.execute(
                    "SELECT a.title, a.text, a.url FROM aliases s JOIN articles a "
                    "ON a.id = s.article_id WHERE s.alias_key = ? ORDER BY a.id LIMIT 1",
                    (key,),
                ).fetchone()
        page = self._page(row)
        if page is not None:
            return page
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
    from hammr.backends.kb.build import build_kb

    src = bundled_jsonl()
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    out = (directory or cache_dir()) / f"{BUNDLED_NAME}.sqlite"
    if out.is_file():
        try:
            con = sqlite3.connect(f"file:{out.resolve()}?mode=ro", uri=True)
            try:
                meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
            finally:
                con.close()
            if meta.get("complete") == "1" and meta.get("source_sha256") == digest:
                return out
        except sqlite3.DatabaseError:
            pass
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        build_kb(src, tmp, fmt="jsonl", progress=False, extra_meta={"source_sha256": digest})
        os.replace(tmp, out)
    finally:
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
