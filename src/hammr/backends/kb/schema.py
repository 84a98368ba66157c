"""The layout of a knowledge-base SQLite file, shared by its builder and its reader.

Tables: ``articles`` (the pages, whole), ``aliases`` (redirects and other names),
``articles_fts`` (an external-content FTS5 index over title and text) and ``meta`` (the
build's source and progress; see :mod:`hammr.backends.kb.build`). Titles and aliases are
looked up by :func:`title_key`.
"""

from __future__ import annotations

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


def title_key(title: str) -> str:
    """The form titles are compared in: ``_`` as spaces, single spaces, case-folded."""
    return " ".join(title.replace("_", " ").split()).casefold()
