"""Knowledge bases: the 'kb' capability (encyclopedic articles by title, and search).

:class:`~hammr.backends.kb.sqlite_kb.SqliteKB` serves a local SQLite file (FTS5) built with
``hammr kb build`` from an Encyclopedic-VQA knowledge-base JSON or a plain JSONL dump; the
default is a small bundled knowledge base. :class:`~hammr.backends.kb.mediawiki.MediaWikiKB`
asks a MediaWiki API (Wikipedia) online.
"""
