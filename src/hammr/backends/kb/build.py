"""Build a :class:`~hammr.backends.kb.sqlite_kb.SqliteKB` file from a dump, incrementally.

Two input formats:

* ``evqa``: the Encyclopedic-VQA knowledge base (``encyclopedic_kb_wiki.json``, unzipped):
  one JSON object mapping a Wikipedia URL to ``{"title", "section_titles", "section_texts",
  "image_urls", "image_reference_descriptions", "image_section_indices", "url"}``. The first
  section is the lead (its title repeats the article's); an article's text is its sections
  joined by blank lines, each later section starting with its title on a line of its own.
* ``jsonl``: one JSON object a line, ``{"title", "text", "url"?, "aliases"?: [..]}``.

Both are read as streams: the EVQA object is walked one entry at a time with
:meth:`json.JSONDecoder.raw_decode` over a growing buffer, so memory stays about one
entry plus one read chunk (1 MiB) whatever the size of the file.

Records are inserted in batches, one transaction each, and the same transaction records in
``meta`` how far into the dump (in bytes) the build has got. A build that is stopped (killed,
Ctrl-C, ``limit``) leaves a consistent file; running it again with the same dump seeks to
that offset and goes on, and the result is the same file an uninterrupted build makes. A
record whose key (URL, else title) is already in the file is skipped (the first one wins).
"""

from __future__ import annotations

import codecs
import json
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

from hammr.backends.kb.schema import SCHEMA, SCHEMA_VERSION, title_key
from hammr.input_file import input_problem, open_input
from hammr.sqlite_file import connect
from hammr.terminal_text import safe_console

Format = Literal["auto", "evqa", "jsonl"]

CHUNK = 1 << 20


class KBBuildError(RuntimeError):
    """The dump is missing, corrupt or not in the expected format (message says which)."""


@dataclass(frozen=True)
class Record:
    key: str
    title: str
    text: str
    url: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass
class BuildStats:
    path: Path
    format: str
    added: int = 0
    """Records read by this run (including duplicates skipped)."""
    records: int = 0
    """Records read in all runs so far."""
    articles: int = 0
    complete: bool = False
    resumed: bool = False
    notes: list[str] = field(default_factory=list)


# -- readers ---------------------------------------------------------------------------------


def _evqa_record(key: str, entry: Any) -> Record:
    if not isinstance(entry, dict):
        raise KBBuildError(f"entry {key!r} is not an object (Encyclopedic-VQA format expected)")
    title = entry.get("title")
    titles = entry.get("section_titles") or []
    texts = entry.get("section_texts") or []
    if not isinstance(title, str) or not isinstance(titles, list) or not isinstance(texts, list):
        raise KBBuildError(
            f"entry {key!r} lacks a title or section lists (Encyclopedic-VQA format expected)"
        )
    parts: list[str] = []
    for i, body in enumerate(texts):
        body = str(body or "").strip()
        head = str(titles[i]).strip() if i < len(titles) and titles[i] is not None else ""
        if i == 0 or not head or head == title:
            if body:
                parts.append(body)
        else:
            parts.append(f"{head}\n{body}" if body else head)
    url = entry.get("url") if isinstance(entry.get("url"), str) else key
    return Record(key=key, title=title, text="\n\n".join(parts), url=url)


def _jsonl_record(obj: Any, line_no: int) -> Record:
    if not isinstance(obj, dict):
        raise KBBuildError(f"line {line_no}: expected an object {{title, text, url?, aliases?}}")
    title, text, url = obj.get("title"), obj.get("text"), obj.get("url")
    aliases = obj.get("aliases") or []
    if not isinstance(title, str) or not title.strip() or not isinstance(text, str):
        raise KBBuildError(f"line {line_no}: 'title' and 'text' must be strings")
    if url is not None and not isinstance(url, str):
        raise KBBuildError(f"line {line_no}: 'url' must be a string")
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise KBBuildError(f"line {line_no}: 'aliases' must be a list of strings")
    return Record(key=url or title, title=title, text=text, url=url, aliases=tuple(aliases))


def iter_jsonl(f: BinaryIO, start: int = 0) -> Iterator[tuple[Record, int]]:
    """(record, byte offset just after it) for each non-blank line from byte ``start``."""
    f.seek(start)
    offset = start
    line_no = 0
    for raw in f:
        line_no += 1
        offset += len(raw)
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            where = f"byte {offset - len(raw)}" if start else f"line {line_no}"
            raise KBBuildError(f"{where}: not valid JSON ({e})") from None
        yield _jsonl_record(obj, line_no), offset


class _Stream:
    """A text buffer over a binary file that knows the byte offset of its start."""

    def __init__(self, f: BinaryIO, start: int) -> None:
        f.seek(start)
        self.f = f
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.base = start
        self.eof = False

    def more(self, at_least: int = CHUNK) -> bool:
        if self.eof:
            return False
        data = self.f.read(max(CHUNK, at_least))
        try:
            self.buf += self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            raise KBBuildError(f"not UTF-8 text near byte {self.base}: {e}") from None
        if not data:
            self.eof = True
        return True

    def skip_ws(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def consume(self) -> None:
        """Drop what has been read so far from the buffer, advancing ``base``."""
        self.base += len(self.buf[: self.pos].encode("utf-8"))
        self.buf = self.buf[self.pos :]
        self.pos = 0

    def value(self, decoder: json.JSONDecoder, what: str) -> Any:
        while True:
            try:
                obj, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self.more(len(self.buf)):
                    continue
                raise KBBuildError(
                    f"corrupt or truncated JSON in {what} near byte {self.base}: {e.msg}"
                ) from None
            if end >= len(self.buf) and not self.eof and self.more():
                continue  # a number may go on in the next chunk
            self.pos = end
            return obj


def iter_evqa(f: BinaryIO, start: int = 0) -> Iterator[tuple[Record, int]]:
    """(record, byte offset just after it) for each entry of the top-level object.

    ``start`` 0 reads from the opening brace; any other value must be an offset this
    function yielded (just after an entry).
    """
    s = _Stream(f, start)
    decoder = json.JSONDecoder()
    if start == 0:
        if s.skip_ws() != "{":
            raise KBBuildError(
                "not an Encyclopedic-VQA knowledge base: expected a JSON object "
                "{url: {title, section_titles, section_texts, ...}, ...}"
            )
        s.pos += 1
        expect_first = True
    else:
        expect_first = False
    while True:
        c = s.skip_ws()
        if not expect_first:
            if c == "}":
                return
            if c != ",":
                raise KBBuildError(f"corrupt JSON near byte {s.base}: expected ',' or '}}'")
            s.pos += 1
            c = s.skip_ws()
        elif c == "}":
            return
        expect_first = False
        if c != '"':
            raise KBBuildError(f"corrupt or truncated JSON near byte {s.base}: expected a key")
        key = s.value(decoder, "a key")
        if s.skip_ws() != ":":
            raise KBBuildError(f"corrupt JSON near byte {s.base}: expected ':' after {key!r}")
        s.pos += 1
        s.skip_ws()
        entry = s.value(decoder, f"entry {key!r}")
        s.consume()
        yield _evqa_record(str(key), entry), s.base


def detect_format(path: Path) -> Literal["evqa", "jsonl"]:
    """jsonl for .jsonl/.ndjson files or when the first line is a complete object with a
    title and text; evqa otherwise."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    with open_input(path, binary=True) as f:
        first = f.readline(CHUNK)
    try:
        obj = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "evqa"
    if isinstance(obj, dict) and isinstance(obj.get("title"), str) and "text" in obj:
        return "jsonl"
    return "evqa"


# -- the builder -----------------------------------------------------------------------------


def _insert(con: sqlite3.Connection, batch: list[Record]) -> None:
    for r in batch:
        cur = con.execute(
            "INSERT OR IGNORE INTO articles (source_key, title, title_key, text, url) "
            "VALUES (?, ?, ?, ?, ?)",
            (r.key, r.title, title_key(r.title), r.text, r.url),
        )
        if cur.rowcount != 1:
            continue
        rowid = cur.lastrowid
        con.execute(
            "INSERT INTO articles_fts (rowid, title, text) VALUES (?, ?, ?)",
            (rowid, r.title, r.text),
        )
        for alias in dict.fromkeys(title_key(a) for a in r.aliases):
            if alias:
                con.execute(
                    "INSERT OR IGNORE INTO aliases (alias_key, article_id) VALUES (?, ?)",
                    (alias, rowid),
                )


def _set_meta(con: sqlite3.Connection, values: dict[str, str]) -> None:
    con.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", values.items())


def build_kb(
    dump: str | Path,
    out: str | Path,
    *,
    fmt: Format = "auto",
    batch_size: int = 500,
    limit: int | None = None,
    progress: bool | None = None,
    extra_meta: dict[str, str] | None = None,
) -> BuildStats:
    """Build (or resume building) the knowledge base ``out`` from ``dump``.

    ``limit`` stops after that many records of this run, leaving a resumable file.
    ``progress`` shows a progress bar on stderr; None shows one when stderr is a terminal.
    """
    dump, out = Path(dump), Path(out)
    if not dump.exists():
        raise KBBuildError(f"dump not found: {dump}")
    problem = input_problem(dump)
    if problem is not None:
        raise KBBuildError(f"the dump {dump} {problem}")
    if dump.suffix.lower() in (".zip", ".gz", ".bz2", ".xz"):
        raise KBBuildError(f"{dump} is compressed; unpack it first (e.g. unzip {dump.name})")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    try:
        size = dump.stat().st_size
        kind: Literal["evqa", "jsonl"] = detect_format(dump) if fmt == "auto" else fmt
    except OSError as e:
        raise KBBuildError(f"cannot read the dump {dump}: {e.strerror or e}") from None
    if size == 0:
        raise KBBuildError(f"dump is empty: {dump}")
    if out.is_dir():
        raise KBBuildError(f"{out} is a folder; name the knowledge-base file to write")
    source = {"format": kind, "source_name": dump.name, "source_size": str(size)}
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KBBuildError(f"cannot create the folder {out.parent}: {e.strerror or e}") from None
    try:
        con = connect(out)
    except sqlite3.Error as e:
        raise KBBuildError(f"cannot write {out} ({e})") from None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:
            raise KBBuildError(
                f"{out} is a SQLite database but not a hammr knowledge base; delete it or "
                "choose another --out"
            )
        con.executescript(SCHEMA)
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if meta:
            theirs = {k: meta.get(k) for k in source}
            if theirs != source:
                raise KBBuildError(
                    f"{out} was built from another dump ({meta.get('source_name')}, "
                    f"{meta.get('source_size')} bytes, {meta.get('format')}); delete it or "
                    f"choose another --out"
                )
        else:
            with con:
                _set_meta(
                    con,
                    {
                        **source,
                        **(extra_meta or {}),
                        "schema_version": SCHEMA_VERSION,
                        "offset": "0",
                        "records": "0",
                        "complete": "0",
                    },
                )
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        stats = BuildStats(path=out, format=kind, records=int(meta["records"]))
        if meta.get("complete") == "1":
            stats.complete = True
            stats.articles = con.execute("SELECT count(*) FROM articles").fetchone()[0]
            return stats
        start = int(meta["offset"])
        stats.resumed = start > 0
        _run(con, dump, kind, start, size, stats, batch_size, limit, progress)
        stats.articles = con.execute("SELECT count(*) FROM articles").fetchone()[0]
        return stats
    except sqlite3.OperationalError as e:  # locked, read-only, disk full, I/O error
        raise KBBuildError(f"cannot write {out} ({e})") from None
    except sqlite3.DatabaseError as e:
        raise KBBuildError(
            f"{out} exists and is not a hammr knowledge base, or is damaged ({e}); delete it "
            "or choose another --out"
        ) from None
    except OSError as e:
        raise KBBuildError(f"cannot read the dump {dump}: {e.strerror or e}") from None
    finally:
        con.close()


def _run(
    con: sqlite3.Connection,
    dump: Path,
    kind: Literal["evqa", "jsonl"],
    start: int,
    size: int,
    stats: BuildStats,
    batch_size: int,
    limit: int | None,
    progress: bool | None,
) -> None:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    show = sys.stderr.isatty() if progress is None else progress
    bar = Progress(
        TextColumn("[bold]building[/] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[records]} records"),
        TimeRemainingColumn(),
        console=safe_console(stderr=True),
        disable=not show,
        transient=False,
    )
    batch: list[Record] = []
    offset = start

    def flush(done: bool) -> None:
        with con:  # one transaction: the records and how far the build has got
            _insert(con, batch)
            _set_meta(
                con,
                {
                    "offset": str(offset),
                    "records": str(stats.records),
                    "complete": "1" if done else "0",
                },
            )
        batch.clear()

    with open_input(dump, binary=True) as f, bar:
        task = bar.add_task(dump.name, total=size, completed=start, records=stats.records)
        reader = iter_evqa(f, start) if kind == "evqa" else iter_jsonl(f, start)
        stopped = False
        for record, end in reader:
            batch.append(record)
            offset = end
            stats.added += 1
            stats.records += 1
            if len(batch) >= batch_size:
                flush(False)
                bar.update(task, completed=offset, records=stats.records)
            if limit is not None and stats.added >= limit:
                stopped = True
                break
        if stopped:
            # Done when nothing but the closing brace / blank lines is left.
            stopped = _has_more(f, kind, offset)
        flush(not stopped)
        bar.update(task, completed=size if not stopped else offset, records=stats.records)
    stats.complete = not stopped


def _has_more(f: BinaryIO, kind: str, offset: int) -> bool:
    reader = iter_evqa(f, offset) if kind == "evqa" else iter_jsonl(f, offset)
    try:
        next(reader)
    except StopIteration:
        return False
    except KBBuildError:
        return True
    return True
