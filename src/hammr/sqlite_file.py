"""One SQLite file behind a long-lived object (the run store, the experience bank): opened in
WAL mode with explicit transactions, shared by threads under one lock.

A file is opened only when it is already ours (an SQLite database holding no table but the
schema's) or when none exists and ``create`` allows making one. Anything else (an empty
file, text, another program's database, a folder) is refused with one line naming what it
is, and never written to: a command asked to read a file must not turn it into one of ours.
A new file is made complete (schema and first rows) under a temporary name and linked into
place, so no half-made file is ever seen there, even after a kill.

Nothing but SQLite ever opens one of these files (this module holds every
``sqlite3.connect`` of the package). A plain ``open()`` and ``close()`` of a database file
drops every POSIX lock the whole process holds on it (a documented pitfall of POSIX
advisory locks that SQLite works around only for its own connections), so another
process's connection would take itself for the last one, checkpoint and delete the WAL
under a live writer, and what the writer committed next would be lost. What a file is is
therefore told by ``stat`` (which opens nothing) and by SQLite itself (its
``SQLITE_NOTADB`` error for a file that is no database)."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
Seed = Sequence[tuple[str, Sequence[Any]]]
"""Statements (with their parameters) that give a new file its first rows."""


def _a(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def read_only_uri(path: Path) -> str:
    """An SQLite URI opening ``path`` read-only (any character of the path quoted).

    In a folder this process cannot write, with no ``-wal`` file beside it, the file is
    opened ``immutable``: SQLite could not make the ``-shm`` file a WAL database needs even
    to be read, and with no WAL and no way to make one, nobody is writing it."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    folder = path.resolve().parent
    if not os.access(folder, os.W_OK) and not os.path.lexists(f"{path}-wal"):
        uri += "&immutable=1"
    return uri


def writable(path: Path) -> bool:
    """Whether this process may write the file and make files beside it (a WAL database
    needs both)."""
    return os.access(path, os.W_OK) and os.access(path.resolve().parent, os.W_OK)


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
    ) -> None:
        self.path = Path(path).expanduser()
        self.created = False
        self._closed = False
        if not os.path.lexists(self.path):
            if not create:
                raise error(f"{self.path}: no {what} there{hint}")
            self.created = self._create(schema, seed, error=error, what=what)
        if not self.created:
            refusal = self._not_ours(schema, what, hint)
            if refusal is not None:
                raise error(refusal)
        # a reader of a file it may not write (a read-only file or folder) reads it read-only
        self.read_only = not create and not writable(self.path)
        try:
            self._key, self._shared = _connection_to(self.path, read_only=self.read_only)
        except (OSError, sqlite3.Error) as e:
            raise error(f"{self.path}: cannot open {_a(what)} {what} there ({e})") from None
        self._db = db = self._shared.db
        self._lock = self._shared.lock
        try:
            with self._lock:  # no transaction of another object on the file is open
                if create:
                    db.execute("PRAGMA journal_mode=WAL")
                # NORMAL under WAL: what was committed survives the process being killed
                # (only an OS crash or power loss may lose the last few transactions).
                db.execute("PRAGMA synchronous=NORMAL")
                foreign = self._foreign_tables(schema)
                # a reader runs it only to bring one of ours made by an older hammr up to date
                missing = not foreign and not create and self._missing_tables(schema)
                if missing and self.read_only:
                    raise sqlite3.DatabaseError(self.OLDER)
                if not foreign and (create or missing):
                    db.executescript(schema)
        except sqlite3.DatabaseError as e:
            self.close()
            raise error(f"{self.path}: not a usable {what} ({e})") from None
        if foreign:
            self.close()
            raise error(self._foreign_message(foreign, what, hint))

    OLDER = (
        "made by an older hammr, and this process may not bring it up to date: open it once "
        "where it can be written"
    )
    """Why a read-only file in an older layout cannot be read."""

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
            raise error(f"{self.path}: cannot create {_a(what)} {what} there ({e})") from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                with contextlib.suppress(OSError):
                    leftover.unlink()

    def _not_ours(self, schema: str, what: str, hint: str) -> str | None:
        """Why the existing file is not one of ours (None when it is), found without
        writing to it and without opening it but through SQLite; ``hint`` ends the reason."""
        reason = self._what_else(what)
        if reason is not None:
            return reason + hint
        try:
            tables = read_tables(self.path)
        except NotADatabase:
            return f"{self.path} is not {_a(what)} {what} (not an SQLite file){hint}"
        except sqlite3.Error as e:
            return f"{self.path}: not a usable {what} ({e}){hint}"
        if not tables:
            return f"{self.path} is an empty SQLite database, not {_a(what)} {what}{hint}"
        foreign = _foreign(tables, schema)
        if foreign:
            return self._foreign_message(foreign, what, hint)
        return None

    def _what_else(self, what: str) -> str | None:
        """What the file is when ``stat`` alone tells it is no SQLite database (None when
        it may be one)."""
        a = f"{_a(what)} {what}"
        try:
            st = self.path.stat()
        except OSError as e:
            return f"{self.path}: cannot read it ({e.strerror or e})"
        if stat.S_ISDIR(st.st_mode):
            return f"{self.path} is a directory, not {a}"
        if not stat.S_ISREG(st.st_mode):
            return f"{self.path} is not a regular file, so not {a}"
        if st.st_size == 0:
            return f"{self.path} is an empty file, not {a}"
        if not os.access(self.path, os.R_OK):
            return f"{self.path}: cannot read it (permission denied)"
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
        """Let go of the file; the connection closes with the last object of this process
        that uses it. Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _release(self._key, self._shared)

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


@dataclass
class _Shared:
    """The one connection of this process to one file, and the lock its users share."""

    db: sqlite3.Connection
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 1


_OPEN: dict[tuple[int, int, bool], _Shared] = {}
"""Open connections by the file's (device, inode) and whether read-only: one per file per
process (two when one object of it may not write the file)."""
_OPEN_LOCK = threading.Lock()


def _connection_to(path: Path, *, read_only: bool) -> tuple[tuple[int, int, bool], _Shared]:
    """This process's connection to the file at ``path``, made if it has none. Every object
    on one file shares it (and its lock), so a process never holds two connections to a
    file of ours: transactions of two objects are serialised by the lock instead of waiting
    on each other's SQLite locks, and there is one set of POSIX locks to keep."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, read_only)
    with _OPEN_LOCK:
        shared = _OPEN.get(key)
        if shared is not None:
            shared.users += 1
            return key, shared
        where = read_only_uri(path) if read_only else str(path)
        db = sqlite3.connect(
            where, uri=read_only, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        shared = _OPEN[key] = _Shared(db)
        return key, shared


def _release(key: tuple[int, int, bool], shared: _Shared) -> None:
    with _OPEN_LOCK:
        shared.users -= 1
        if shared.users > 0:
            return
        if _OPEN.get(key) is shared:
            del _OPEN[key]
    with shared.lock:
        shared.db.close()


def connections_open(path: str | Path) -> int:
    """How many objects of this process use the connection to ``path`` (0: none open)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0
    with _OPEN_LOCK:
        return sum(
            shared.users for key, shared in _OPEN.items() if key[:2] == (st.st_dev, st.st_ino)
        )


class NotADatabase(sqlite3.DatabaseError):
    """The file exists but is no SQLite database (SQLite's own ``SQLITE_NOTADB``)."""


def connect(path: Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A read-write connection to ``path`` for a writer that manages its own file (the
    knowledge-base builder); long-lived files of ours are :class:`SqliteFile` objects."""
    return sqlite3.connect(path, timeout=timeout, check_same_thread=False)


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path``: nothing is created or written.
    Opening is lazy in SQLite; use :func:`read_tables` to learn what the file is."""
    return sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=False)


def read_tables(path: Path) -> list[str]:
    """The tables of the SQLite file ``path``, read through SQLite alone (see the module
    docstring); :class:`NotADatabase` when it is no SQLite file, another
    ``sqlite3.Error`` when SQLite cannot use it."""
    try:
        db = connect_read_only(path)
    except sqlite3.Error as e:
        raise _as_not_a_database(e) from None
    try:
        return _tables(db)
    except sqlite3.Error as e:
        raise _as_not_a_database(e) from None
    finally:
        db.close()


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of the SQLite file ``source`` at ``target`` (a memory file one
    experiment shares with another): SQLite's online backup into a file beside ``target``,
    renamed over it when whole, so a kill never leaves half a copy there. ``sqlite3.Error``
    or OSError when it cannot be made (nothing is left at ``target`` then)."""
    part = target.with_name(f"{target.name}.part")
    with contextlib.suppress(FileNotFoundError):
        part.unlink()
    src = connect_read_only(source)
    try:
        dst = sqlite3.connect(part)
        try:
            src.backup(dst)
        finally:
            dst.close()
        os.replace(part, target)
    except BaseException:
        with contextlib.suppress(OSError):
            part.unlink()
        raise
    finally:
        src.close()


def _as_not_a_database(e: sqlite3.Error) -> sqlite3.Error:
    if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
        return NotADatabase(str(e))
    return e


def _tables(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _foreign(tables: Iterable[str], schema: str) -> list[str]:
    ours = {name.lower() for name in _TABLE.findall(schema)}
    return sorted(t for t in tables if t.lower() not in ours)
