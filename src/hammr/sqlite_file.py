"""One SQLite file behind a long-lived object (the run store, the experience bank): opened in
WAL mode with explicit transactions, shared by threads under one lock."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)


class SqliteFile:
    """Opens ``path`` (its folder made if needed) and runs ``schema``; ``error`` (named after
    the file and ``what`` it should be) when it is not a usable SQLite file, or when it is
    another kind of file of ours: a database holding tables the schema does not make (a run
    store opened as an experience bank) is refused, never added to."""

    def __init__(
        self,
        path: str | Path,
        schema: str,
        *,
        error: type[Exception],
        what: str,
        reentrant: bool = False,
    ) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise error(f"{self.path}: cannot open a {what} there ({e})") from None
        self._db = db
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL under WAL: what was committed survives the process being killed
            # (only an OS crash or power loss may lose the last few transactions).
            db.execute("PRAGMA synchronous=NORMAL")
            foreign = self._foreign_tables(schema)
            if not foreign:
                db.executescript(schema)
        except sqlite3.DatabaseError as e:
            db.close()
            raise error(f"{self.path}: not a usable {what} ({e})") from None
        if foreign:
            db.close()
            a = "an" if what[:1].lower() in "aeiou" else "a"
            raise error(
                f"{self.path} is not {a} {what}: it holds other tables "
                f"({', '.join(foreign)}); give the path of {a} {what}, or a new file"
            )
        self._lock: threading.Lock | threading.RLock = (
            threading.RLock() if reentrant else threading.Lock()
        )

    def _foreign_tables(self, schema: str) -> list[str]:
        ours = {name.lower() for name in _TABLE.findall(schema)}
        present = self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        return sorted(str(r[0]) for r in present if str(r[0]).lower() not in ours)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
