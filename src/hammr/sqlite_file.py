"""One SQLite file behind a long-lived object (the run store, the experience bank): opened in
WAL mode with explicit transactions, shared by threads under one lock."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self


class SqliteFile:
    """Opens ``path`` (its folder made if needed) and runs ``schema``; ``error`` (named after
    the file and ``what`` it should be) when it is not a usable SQLite file."""

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
            self._db = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL under WAL: what was committed survives the process being killed
            # (only an OS crash or power loss may lose the last few transactions).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(schema)
        except sqlite3.DatabaseError as e:
            raise error(f"{self.path}: not a usable {what} ({e})") from None
        self._lock: threading.Lock | threading.RLock = (
            threading.RLock() if reentrant else threading.Lock()
        )

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
