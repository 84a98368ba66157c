"""One SQLite file behind a long-lived object (the run store, the experience bank): opened in
WAL mode with explicit transactions, shared by threads under one lock.

A file is opened only when it is already ours (an SQLite database holding no table but the
schema's) or when none exists and ``create`` allows making one. Anything else (an empty
file, text, another program's database, a folder) is refused with one line naming what it
is, and never written to: a command asked to read a file must not turn it into one of ours.
A new file is made complete (schema and first rows) under a temporary name and linked into
place, so no half-made file is ever seen there, even after a kill."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
SQLITE_HEADER = b"SQLite format 3\x00"
Seed = Sequence[tuple[str, Sequence[Any]]]
"""Statements (with their parameters) that give a new file its first rows."""


def _a(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def read_only_uri(path: Path) -> str:
    """An SQLite URI opening ``path`` read-only (any character of the path quoted)."""
    return f"file:{quote(str(path.resolve()))}?mode=ro"


class SqliteFile:
    """Opens ``path`` and runs ``schema``; ``error`` (named after the file and ``what`` it
    should be) when it is not one of ours (see the module docstring), or when it is another
    kind of file of ours: a database holding tables the schema does not make (a run store
    opened as an experience bank) is refused, never added to.

    ``create``: make the file (its folder too) when none exists, with the rows of ``seed``;
    False: it must exist, and opening it writes nothing (it is not switched to WAL mode).
    ``hint`` ends every refusal (e.g. how to make the right file). :attr:`created` says
    whether this object made the file (see :meth:`removed_on_failure`)."""

    def __init__(
        self,
        path: str | Path,
        schema: str,
        *,
        error: type[Exception],
        what: str,
        create: bool = True,
        seed: Seed = (),
        hint: str = "",
        reentrant: bool = False,
    ) -> None:
        self.path = Path(path).expanduser()
        self._lock: threading.Lock | threading.RLock = (
            threading.RLock() if reentrant else threading.Lock()
        )
        self.created = False
        if not os.path.lexists(self.path):
            if not create:
                raise error(f"{self.path}: no {what} there{hint}")
            self.created = self._create(schema, seed, error=error, what=what)
        if not self.created:
            refusal = self._not_ours(schema, what, hint)
            if refusal is not None:
                raise error(refusal)
        try:
            db = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise error(f"{self.path}: cannot open a {what} there ({e})") from None
        self._db = db
        try:
            if create:
                db.execute("PRAGMA journal_mode=WAL")
            # NORMAL under WAL: what was committed survives the process being killed
            # (only an OS crash or power loss may lose the last few transactions).
            db.execute("PRAGMA synchronous=NORMAL")
            foreign = self._foreign_tables(schema)
            # a reader runs it only to bring one of ours made by an older hammr up to date
            if not foreign and (create or self._missing_tables(schema)):
                db.executescript(schema)
        except sqlite3.DatabaseError as e:
            db.close()
            raise error(f"{self.path}: not a usable {what} ({e})") from None
        if foreign:
            db.close()
            raise error(self._foreign_message(foreign, what, hint))

    # -- what the file is ----------------------------------------------------------------

    def _create(self, schema: str, seed: Seed, *, error: type[Exception], what: str) -> bool:
        """Make the file complete under a temporary name, then link it into place; False
        when another process made it first (it is then checked like any existing file)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.new")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(schema)
                db.execute("BEGIN IMMEDIATE")
                for sql, params in seed:
                    db.execute(sql, tuple(params))
                db.execute("COMMIT")
            finally:
                db.close()
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links
                if os.path.lexists(self.path):
                    return False
                os.rename(tmp, self.path)
            return True
        except (OSError, sqlite3.Error) as e:
            raise error(f"{self.path}: cannot create a {what} there ({e})") from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                with contextlib.suppress(OSError):
                    leftover.unlink()

    def _not_ours(self, schema: str, what: str, hint: str) -> str | None:
        """Why the existing file is not one of ours (None when it is), found without
        writing to it; ``hint`` ends the reason."""
        foreign = []
        reason = self._what_else(what)
        if reason is None:
            try:
                db = sqlite3.connect(read_only_uri(self.path), uri=True)
                try:
                    tables = _tables(db)
                finally:
                    db.close()
            except sqlite3.Error as e:
                return f"{self.path}: not a usable {what} ({e}){hint}"
            if not tables:
                reason = f"{self.path} is an empty SQLite database, not {_a(what)} {what}"
            foreign = _foreign(tables, schema)
        if foreign:
            return self._foreign_message(foreign, what, hint)
        return None if reason is None else reason + hint

    def _what_else(self, what: str) -> str | None:
        """What the file is when it is no SQLite database (None when it may be one)."""
        a = f"{_a(what)} {what}"
        try:
            mode = self.path.stat().st_mode
            if stat.S_ISDIR(mode):
                return f"{self.path} is a directory, not {a}"
            if not stat.S_ISREG(mode):
                return f"{self.path} is not a regular file, so not {a}"
            with self.path.open("rb") as f:
                head = f.read(len(SQLITE_HEADER))
        except OSError as e:
            return f"{self.path}: cannot read it ({e.strerror or e})"
        if not head:
            return f"{self.path} is an empty file, not {a}"
        if head != SQLITE_HEADER:
            return f"{self.path} is not {a} (not an SQLite file)"
        return None

    def _foreign_message(self, foreign: Sequence[str], what: str, hint: str) -> str:
        a = f"{_a(what)} {what}"
        return f"{self.path} is not {a}: it holds other tables ({', '.join(foreign)})" + (
            hint or f"; give the path of {a}, or a new file"
        )

    def _foreign_tables(self, schema: str) -> list[str]:
        return _foreign(_tables(self._db), schema)

    def _missing_tables(self, schema: str) -> bool:
        have = {t.lower() for t in _tables(self._db)}
        return any(name.lower() not in have for name in _TABLE.findall(schema))

    # -- life ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def removed_on_failure(self, finished: Callable[[], bool]) -> Iterator[Self]:
        """Within it, a failure (any exception, a clean exit of the command included)
        removes the file when this object made it and ``finished()`` is False: a create that
        fails leaves no file behind, while one that got somewhere keeps what it finished to
        go on from."""
        try:
            yield self
        except BaseException:
            if self.created and not finished():
                self.close()
                for path in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
                    with contextlib.suppress(OSError):
                        path.unlink()
            raise

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, tuple(params)).fetchall()


def _tables(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _foreign(tables: Iterable[str], schema: str) -> list[str]:
    ours = {name.lower() for name in _TABLE.findall(schema)}
    return sorted(t for t in tables if t.lower() not in ours)
