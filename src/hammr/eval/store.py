"""Evaluation runs in one SQLite file: every finished sample, its trace and the trace's images.

Each sample is committed in its own transaction the moment it finishes, keyed by
``(run, dataset, sample_id)``, so a run that is killed loses at most the samples in flight
and a rerun under the same name skips what is stored (nothing is ever counted twice).
Trace images live once per content hash in ``images`` and are referenced from the trace
JSON by the ``{"$image": hash}`` objects that :meth:`hammr.trace.Trace.to_dict` writes.

The store is safe to share between threads (one connection behind a lock) and between
processes (WAL journal, busy timeout). One process at a time drives a run
(:meth:`RunStore.driving`, :mod:`hammr.eval.driver_lock`): a second ``hammr eval`` on a live
run is refused.

A failed sample asked again (``--retry-failed``) keeps its record until the new answer is
stored: :meth:`RunStore.add` with ``replace_failed`` swaps the whole row in one transaction
and counts the ``attempt``, so a retry that fails again or is killed leaves the old record,
and the run never shows fewer samples than it had.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hammr.eval.driver_lock import (
    BEAT_EVERY_S,
    LEASE_S,
    Driver,
    busy_message,
    is_alive,
    this_driver,
)
from hammr.eval.types import RunRecord
from hammr.sqlite_file import SqliteFile
from hammr.trace import Trace, image_refs
from hammr.values import Image

SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    name     TEXT PRIMARY KEY,
    suite    TEXT NOT NULL,
    system   TEXT NOT NULL,
    config   TEXT NOT NULL DEFAULT '{}',
    created  TEXT NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS samples (
    run               TEXT NOT NULL,
    dataset           TEXT NOT NULL,
    sample_id         TEXT NOT NULL,
    question_type     TEXT NOT NULL DEFAULT '',
    question          TEXT NOT NULL,
    answers           TEXT NOT NULL,
    prediction        TEXT,
    score             REAL NOT NULL,
    judge             TEXT NOT NULL DEFAULT '',
    metric            TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    error             TEXT,
    latency_s         REAL NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    llm_calls         INTEGER NOT NULL DEFAULT 0,
    trace             TEXT,
    finished          TEXT NOT NULL,
    agent             TEXT,
    error_kinds       TEXT,
    attempt           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run, dataset, sample_id)
);
CREATE INDEX IF NOT EXISTS samples_by_group ON samples (run, question_type, dataset);
CREATE TABLE IF NOT EXISTS images (
    hash TEXT PRIMARY KEY,
    png  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS drivers (
    run         TEXT PRIMARY KEY,
    token       TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    pid_started TEXT NOT NULL,
    since       TEXT NOT NULL,
    heartbeat   REAL NOT NULL,
    pid_ns      TEXT NOT NULL DEFAULT ''
);
"""
_DRIVER_NAMESPACE = ("pid_ns", "TEXT NOT NULL DEFAULT ''")
"""The drivers' PID namespace (see :mod:`hammr.eval.driver_lock`): added to a store made
before it by the first driver that holds a run there (never by a reading command); a row
without it reads as ``''``, judged by its host name alone."""
_DRIVER_COLUMNS = "token, host, pid, pid_started, since, heartbeat"

# Columns added by schema version 2 (filled when a sample is added; a store made before them
# gets them on open, backfilled from the stored traces): see :func:`trace_facets`.
_FACET_COLUMNS = (("agent", "TEXT"), ("error_kinds", "TEXT"))
# Added by schema version 3: the attempt a record is (see RunRecord.attempt).
_ATTEMPT_COLUMN = ("attempt", "INTEGER NOT NULL DEFAULT 0")
_FACET_INDEXES = """
CREATE INDEX IF NOT EXISTS samples_by_agent ON samples (run, agent);
CREATE INDEX IF NOT EXISTS samples_by_error_kinds ON samples (run, error_kinds);
CREATE INDEX IF NOT EXISTS samples_by_score ON samples (run, score);
"""
BACKFILL_BATCH = 500
_REPLACED_COLUMNS = (
    *("question_type", "question", "answers", "prediction", "score", "judge", "metric"),
    *("status", "error", "latency_s", "prompt_tokens", "completion_tokens", "llm_calls"),
    *("trace", "finished", "agent", "error_kinds"),
)
"""What a retry replaces of a failed record: everything but its key, place and attempt."""

FILTER_COLUMNS = ("dataset", "question_type", "status", "judge", "metric", "agent")
"""Columns :meth:`RunStore.records` can filter on (a value, or a list of accepted values).
The extra filter ``correct`` (bool) keeps samples with score 1 (True) or below 1 (False);
``error_kind`` (a kind, or a list of kinds) keeps samples whose trace recorded that error
kind anywhere (in a child agent too)."""

FAILED_STATUSES = ("error", "timeout", "llm_failure")
"""Statuses of samples that got no fair try (an exception, the time limit, an LLM server
that failed); ``hammr eval --retry-failed`` asks them again."""


SERVED_SUITE = "served"
"""The suite of the runs `hammr serve` records: questions its clients asked."""
ASKED_ELSEWHERE = {
    SERVED_SUITE: "ask them again through the server's client (a question `hammr serve` "
    "answered is asked by its client, not again from the store)",
    "trace": "ask it again with `hammr ask`",
}
"""Runs whose questions no `hammr eval` can ask again, by suite: how to ask them again."""


class StoreError(ValueError):
    """The store cannot do what was asked (unknown run, run name taken, bad filter, ...)."""


class RunBusy(StoreError):
    """Another live process drives the run (:meth:`RunStore.driving`); the message names it."""


def default_store_path() -> Path:
    """``$XDG_CACHE_HOME/hammr/runs.sqlite``, else ``~/.cache/hammr/runs.sqlite``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "hammr" / "runs.sqlite"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunInfo:
    name: str
    suite: str
    system: str
    config: dict[str, Any]
    created: str
    settings: dict[str, Any]


@dataclass(frozen=True)
class GroupSummary:
    question_type: str
    dataset: str
    done: int
    mean: float


@dataclass(frozen=True)
class RunSummary:
    info: RunInfo
    done: int
    """Samples stored."""
    mean: float
    """Mean score over every stored sample (0 when none)."""
    statuses: dict[str, int]
    groups: list[GroupSummary] = field(default_factory=list)
    """Per (question_type, dataset), in order of first appearance."""
    latency_s: float = 0.0
    """Mean latency per sample."""
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class ScoreRow:
    """The few columns the report needs, without the trace."""

    sample_id: str
    dataset: str
    question_type: str
    metric: str
    judge: str
    status: str
    score: float


def _trace_refs(trace: Trace) -> set[str]:
    refs: set[str] = set()
    refs.update(image_refs(trace.inputs))
    for s in trace.steps:
        refs.update(image_refs(s.arguments))
        refs.update(image_refs(s.output))
    return refs


def trace_facets(trace: Mapping[str, Any] | None) -> tuple[str, str]:
    """(agent, error_kinds) of one trace in :meth:`Trace.to_dict` form, as the store indexes
    them: ``agent`` is the agent the top agent handed the question to (the first step whose
    call reached a child agent: the specialist a dispatcher called), else the top agent
    itself; ``error_kinds`` is every distinct error kind of the trace and its children,
    sorted, as ``',kind1,kind2,'`` (``''`` when none) so that ``LIKE '%,kind,%'`` finds one."""
    if not isinstance(trace, Mapping):
        return "", ""
    agent = str(trace.get("agent") or "")
    for step in trace.get("steps") or ():
        child = step.get("child") if isinstance(step, Mapping) else None
        if isinstance(child, Mapping):
            agent = str(child.get("agent") or step.get("tool") or agent)
            break
    kinds: set[str] = set()

    def walk(t: Mapping[str, Any]) -> None:
        for step in t.get("steps") or ():
            if not isinstance(step, Mapping):
                continue
            kind = step.get("error_kind")
            if kind:
                kinds.add(str(kind))
            child = step.get("child")
            if isinstance(child, Mapping):
                walk(child)

    walk(trace)
    return agent, (f",{','.join(sorted(kinds))}," if kinds else "")


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _walk(trace: Trace) -> Iterator[Trace]:
    yield trace
    for s in trace.steps:
        if s.child is not None:
            yield from _walk(s.child)


@dataclass
class _Hold:
    """This store object's hold on one run (:meth:`RunStore.driving`)."""

    driver: Driver
    stop: threading.Event
    beat: threading.Thread
    count: int = 0


def _json_value(value: Any) -> Any:
    """``value`` as SQLite's ``json_extract`` gives it back: a list or a mapping as compact
    JSON text, anything else as it is."""
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


class RunStore(SqliteFile):
    """Evaluation runs in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        """``create`` False: the store must exist (a command reading it); see
        :class:`~hammr.sqlite_file.SqliteFile`."""
        super().__init__(path, _SCHEMA, error=StoreError, what="run store", create=create)
        try:
            with self._lock:  # the connection is shared with this process's other objects
                current = self._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
                if self.read_only and not current:
                    raise sqlite3.DatabaseError(self.OLDER)
                if not self.read_only:
                    self._migrate()
                    if not current:
                        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            self.close()
            raise StoreError(f"{self.path}: not a usable run store ({e})") from None

    def _migrate(self) -> None:
        """Bring a store made by an older hammr up to this schema: add the ``agent`` and
        ``error_kinds`` columns and fill them from the stored traces, in batches (each its
        own transaction, so a large store is never locked for long and an interrupted
        backfill simply goes on at the next open)."""
        have = {r[1] for r in self._db.execute("PRAGMA table_info(samples)")}
        for name, kind in (*_FACET_COLUMNS, _ATTEMPT_COLUMN):
            if name not in have:
                self._db.execute(f"ALTER TABLE samples ADD COLUMN {name} {kind}")
        self._db.executescript(_FACET_INDEXES)
        while True:
            rows = self._db.execute(
                "SELECT rowid, trace FROM samples WHERE agent IS NULL OR error_kinds IS NULL "
                "LIMIT ?",
                (BACKFILL_BATCH,),
            ).fetchall()
            if not rows:
                return
            updates = []
            for rowid, trace_json in rows:
                try:
                    doc = json.loads(trace_json) if trace_json else None
                except json.JSONDecodeError:
                    doc = None
                updates.append((*trace_facets(doc), rowid))
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "UPDATE samples SET agent = ?, error_kinds = ? WHERE rowid = ?", updates
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- runs ------------------------------------------------------------------------------

    def open_run(
        self,
        name: str,
        suite: str,
        system: str,
        *,
        config: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> tuple[RunInfo, bool]:
        """The run called ``name``, created if new; returns (info, created).

        An existing run is resumed only with the same suite and system; anything else is a
        different experiment and raises :class:`StoreError`.
        """
        if not name.strip():
            raise StoreError("a run needs a name")
        with self._transaction() as db:
            row = db.execute("SELECT * FROM runs WHERE name = ?", (name,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO runs (name, suite, system, config, created, settings) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        suite,
                        system,
                        json.dumps(dict(config or {}), sort_keys=True, default=str),
                        _now(),
                        json.dumps(dict(settings or {}), sort_keys=True, default=str),
                    ),
                )
        if row is not None:
            info = self._info(row)
            if (info.suite, info.system) != (suite, system):
                raise StoreError(
                    f"run {name!r} already exists with suite {info.suite!r} and system "
                    f"{info.system!r}; choose another name to evaluate suite {suite!r} "
                    f"with system {system!r}"
                )
            return info, False
        info_now = self.run_info(name)
        assert info_now is not None
        return info_now, True

    @staticmethod
    def _info(row: tuple[Any, ...]) -> RunInfo:
        name, suite, system, config, created, settings = row
        return RunInfo(name, suite, system, json.loads(config), created, json.loads(settings))

    def run_info(self, name: str) -> RunInfo | None:
        rows = self._query(
            "SELECT name, suite, system, config, created, settings FROM runs WHERE name = ?",
            (name,),
        )
        return self._info(rows[0]) if rows else None

    def run_names(self) -> list[str]:
        """Every run, oldest first."""
        return [r[0] for r in self._query("SELECT name FROM runs ORDER BY created, rowid")]

    def delete_samples(self, run: str, statuses: Iterable[str]) -> int:
        """Forget the samples of ``run`` with these statuses (so a rerun asks them again)."""
        wanted = list(statuses)
        if not wanted:
            return 0
        marks = ", ".join("?" for _ in wanted)
        with self._transaction() as db:
            cur = db.execute(
                f"DELETE FROM samples WHERE run = ? AND status IN ({marks})", (run, *wanted)
            )
            return cur.rowcount

    # -- writing ---------------------------------------------------------------------------

    def add(self, record: RunRecord, *, metric: str = "", replace_failed: bool = False) -> bool:
        """Commit one finished sample with its trace and the trace's images.

        Returns False (and changes nothing of the sample) when it is already stored, unless
        ``replace_failed`` and the stored record has a failed status
        (:data:`FAILED_STATUSES`): that record is then replaced whole, in this one
        transaction, keeping its place in the run's order, and the new one is its next
        ``attempt`` (``record.attempt`` is set to it). Until then the old record, its trace
        included, stays as it was.
        """
        trace_json: str | None = None
        images: dict[str, Image] = {}
        facets = ("", "")
        if isinstance(record.trace, Trace):
            doc = record.trace.to_dict()
            trace_json = json.dumps(doc, ensure_ascii=False, default=str)
            images = record.trace.all_images()
            facets = trace_facets(doc)
        elif record.trace is not None:
            trace_json = json.dumps(record.trace, ensure_ascii=False, default=str)
            facets = trace_facets(record.trace if isinstance(record.trace, Mapping) else None)
        missing = self._missing_images(images)
        # Encode outside the lock: PNG compression is the slow part of a commit.
        pngs = [(h, images[h].png_bytes()) for h in missing]
        insert = (
            f"INSERT {'' if replace_failed else 'OR IGNORE '}INTO samples (run, dataset, "
            "sample_id, question_type, "
            "question, answers, prediction, score, judge, metric, status, error, latency_s, "
            "prompt_tokens, completion_tokens, llm_calls, trace, finished, agent, error_kinds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        )
        if replace_failed:
            marks = ", ".join("?" for _ in FAILED_STATUSES)
            insert += (
                "ON CONFLICT (run, dataset, sample_id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in _REPLACED_COLUMNS)
                + f", attempt = samples.attempt + 1 WHERE samples.status IN ({marks})"
            )
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO images (hash, png) VALUES (?, ?)", pngs)
            cur = db.execute(
                insert,
                (
                    record.run,
                    record.dataset,
                    record.sample_id,
                    record.question_type,
                    record.question,
                    json.dumps(list(record.answers), ensure_ascii=False),
                    record.prediction,
                    float(record.score),
                    record.judge,
                    metric,
                    record.status,
                    record.error,
                    float(record.latency_s),
                    int(record.prompt_tokens),
                    int(record.completion_tokens),
                    int(record.llm_calls),
                    trace_json,
                    _now(),
                    *facets,
                    *(FAILED_STATUSES if replace_failed else ()),
                ),
            )
            if cur.rowcount != 1:
                return False
            if replace_failed:
                record.attempt = int(
                    db.execute(
                        "SELECT attempt FROM samples WHERE run = ? AND dataset = ? "
                        "AND sample_id = ?",
                        (record.run, record.dataset, record.sample_id),
                    ).fetchone()[0]
                )
            return True

    def copy_samples(self, source: str, run: str, keys: Iterable[tuple[str, str]]) -> int:
        """Copy the stored records of ``source`` with these (dataset, sample_id) keys into
        ``run``, trace and all (its images are shared by hash), in one transaction; records
        with a failed status (:data:`FAILED_STATUSES`) and keys ``run`` already holds are
        left out. Returns how many were copied (a shared run: ``hammr experiment run``)."""
        wanted = set(keys)
        if not wanted or source == run:
            return 0
        marks = ", ".join("?" for _ in FAILED_STATUSES)
        have = self._query(
            "SELECT dataset, sample_id FROM samples WHERE run = ? "
            f"AND status NOT IN ({marks}) ORDER BY rowid",
            (source, *FAILED_STATUSES),
        )
        todo = [(r[0], r[1]) for r in have if (r[0], r[1]) in wanted]
        if not todo:
            return 0
        columns = ", ".join(("dataset", "sample_id", *_REPLACED_COLUMNS, "attempt"))
        copied = 0
        with self._transaction() as db:
            for dataset, sample_id in todo:  # in the source's order
                cur = db.execute(
                    f"INSERT OR IGNORE INTO samples (run, {columns}) SELECT ?, {columns} "
                    "FROM samples WHERE run = ? AND dataset = ? AND sample_id = ?",
                    (run, source, dataset, sample_id),
                )
                copied += cur.rowcount
        return copied

    def add_shared(self, run: str, source: str, n: int) -> None:
        """Count in ``run``'s stored settings (key ``shared_from``: source run -> samples)
        that ``n`` of its records were copied from ``source`` (:meth:`copy_samples`)."""
        if n <= 0:
            return

        def count(settings: dict[str, Any]) -> None:
            shared = settings.get("shared_from")
            shared = dict(shared) if isinstance(shared, dict) else {}
            shared[source] = int(shared.get(source, 0)) + n
            settings["shared_from"] = shared

        self._change_settings(run, count)

    def update_settings(self, run: str, values: Mapping[str, Any]) -> None:
        """Set these keys of ``run``'s stored settings (the others stay)."""
        self._change_settings(run, lambda settings: settings.update(values))

    def _change_settings(self, run: str, change: Callable[[dict[str, Any]], None]) -> None:
        with self._transaction() as db:
            row = db.execute("SELECT settings FROM runs WHERE name = ?", (run,)).fetchone()
            if row is None:
                return
            settings = json.loads(row[0])
            change(settings)
            db.execute(
                "UPDATE runs SET settings = ? WHERE name = ?",
                (json.dumps(settings, sort_keys=True, default=str), run),
            )

    def _missing_images(self, images: Mapping[str, Image]) -> list[str]:
        if not images:
            return []
        hashes = list(images)
        marks = ", ".join("?" for _ in hashes)
        have = {
            r[0] for r in self._query(f"SELECT hash FROM images WHERE hash IN ({marks})", hashes)
        }
        return [h for h in hashes if h not in have]

    # -- reading ---------------------------------------------------------------------------

    def done_keys(self, run: str) -> set[tuple[str, str]]:
        """(dataset, sample_id) of every stored sample of ``run``."""
        return {
            (r[0], r[1])
            for r in self._query("SELECT dataset, sample_id FROM samples WHERE run = ?", (run,))
        }

    def failed_keys(self, run: str) -> set[tuple[str, str]]:
        """(dataset, sample_id) of the samples of ``run`` stored with a failed status."""
        marks = ", ".join("?" for _ in FAILED_STATUSES)
        return {
            (r[0], r[1])
            for r in self._query(
                f"SELECT dataset, sample_id FROM samples WHERE run = ? AND status IN ({marks})",
                (run, *FAILED_STATUSES),
            )
        }

    # -- who drives a run ------------------------------------------------------------------

    @contextmanager
    def driving(self, run: str, *, lease_s: float = LEASE_S) -> Iterator[Driver]:
        """Hold ``run`` as its one driver while inside (see :mod:`hammr.eval.driver_lock`):
        raises :class:`RunBusy` (one line naming the live driver) when another live process
        holds it; a dead holder is taken over. A heartbeat thread keeps the hold fresh, and
        leaving lets go. Re-entrant within one store object (the command holds the run
        before it prints anything; the executor it calls holds it too)."""
        held: dict[str, _Hold] = self.__dict__.setdefault("_driving", {})
        if run not in held:
            me = this_driver()
            holder = self._take_driver(run, me, lease_s)
            if holder is not None:
                raise RunBusy(busy_message(run, holder, lease_s))
            stop = threading.Event()
            beat = threading.Thread(
                target=self._beat, args=(run, me.token, stop), name="hammr-driver-heartbeat"
            )
            beat.daemon = True
            held[run] = _Hold(me, stop, beat)
            beat.start()
        hold = held[run]
        hold.count += 1
        try:
            yield hold.driver
        finally:
            hold.count -= 1
            if hold.count == 0:  # the last one out lets go
                del held[run]
                hold.stop.set()
                hold.beat.join()
                with contextlib.suppress(sqlite3.Error), self._transaction() as db:
                    db.execute(
                        "DELETE FROM drivers WHERE run = ? AND token = ?", (run, hold.driver.token)
                    )

    def driver(self, run: str) -> Driver | None:
        """The process recorded as driving ``run`` (alive or not), if any."""
        with self._lock:
            return self._driver_row(self._db, run)

    @staticmethod
    def _driver_row(db: sqlite3.Connection, run: str) -> Driver | None:
        have = {r[1] for r in db.execute("PRAGMA table_info(drivers)")}
        namespace = _DRIVER_NAMESPACE[0] if _DRIVER_NAMESPACE[0] in have else "''"
        row = db.execute(
            f"SELECT {_DRIVER_COLUMNS}, {namespace} FROM drivers WHERE run = ?", (run,)
        ).fetchone()
        return Driver(*row) if row is not None else None

    def _take_driver(self, run: str, me: Driver, lease_s: float) -> Driver | None:
        """Record ``me`` as the driver of ``run`` unless a live one holds it (returned)."""
        with self._transaction() as db:
            holder = self._driver_row(db, run)
            if holder is not None and is_alive(holder, lease_s=lease_s):
                return holder
            name, kind = _DRIVER_NAMESPACE
            if name not in {r[1] for r in db.execute("PRAGMA table_info(drivers)")}:
                db.execute(f"ALTER TABLE drivers ADD COLUMN {name} {kind}")  # an older store
            db.execute(
                f"INSERT OR REPLACE INTO drivers (run, {_DRIVER_COLUMNS}, {name}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run, me.token, me.host, me.pid, me.pid_started, me.since, me.heartbeat, me.pid_ns),
            )
        return None

    def _beat(self, run: str, token: str, stop: threading.Event) -> None:
        while not stop.wait(BEAT_EVERY_S):
            with contextlib.suppress(sqlite3.Error), self._transaction() as db:
                db.execute(
                    "UPDATE drivers SET heartbeat = ? WHERE run = ? AND token = ?",
                    (time.time(), run, token),
                )

    @staticmethod
    def _where(run: str, filters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
        clauses = ["run = ?"]
        params: list[Any] = [run]
        for key, value in (filters or {}).items():
            if key == "correct":
                clauses.append("score >= 1" if value else "score < 1")
            elif key == "error_kind":
                kinds = [value] if isinstance(value, str) else list(value)
                if kinds:
                    clauses.append(
                        "(" + " OR ".join("error_kinds LIKE ? ESCAPE '\\'" for _ in kinds) + ")"
                    )
                    params.extend(f"%,{_like_escape(str(k))},%" for k in kinds)
            elif key in FILTER_COLUMNS:
                values = [value] if isinstance(value, str) else list(value)
                clauses.append(f"{key} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
            else:
                raise StoreError(
                    f"cannot filter on {key!r}; use one of: {', '.join(FILTER_COLUMNS)}, "
                    "correct, error_kind"
                )
        return " AND ".join(clauses), params

    def count(self, run: str, filters: Mapping[str, Any] | None = None) -> int:
        where, params = self._where(run, filters)
        return int(self._query(f"SELECT COUNT(*) FROM samples WHERE {where}", params)[0][0])

    def records(
        self,
        run: str,
        offset: int = 0,
        limit: int | None = 100,
        filters: Mapping[str, Any] | None = None,
        *,
        traces: bool = True,
        images: bool = False,
    ) -> list[RunRecord]:
        """One page of ``run``'s samples in the order they finished.

        ``traces=False`` skips parsing the traces (faster for large pages); ``images=True``
        attaches every image a trace references (as :meth:`Trace.load` does from files).
        """
        where, params = self._where(run, filters)
        return self._load(where, params, offset, limit, traces=traces, images=images)

    def get(self, run: str, dataset: str, sample_id: str, *, images: bool = True) -> RunRecord:
        """One stored sample with its trace (and the trace's images)."""
        found = self._load(
            "run = ? AND dataset = ? AND sample_id = ?",
            [run, dataset, sample_id],
            0,
            1,
            traces=True,
            images=images,
        )
        if not found:
            raise StoreError(f"run {run!r} has no sample {dataset}/{sample_id}")
        return found[0]

    def _load(
        self,
        where: str,
        params: list[Any],
        offset: int,
        limit: int | None,
        *,
        traces: bool,
        images: bool,
    ) -> list[RunRecord]:
        cols = (
            "run, sample_id, dataset, question_type, question, answers, prediction, score, "
            "judge, status, error, latency_s, prompt_tokens, completion_tokens, llm_calls, "
            "attempt"
        )
        sql = f"SELECT {cols}, {'trace' if traces else 'NULL'} FROM samples WHERE {where} "
        sql += "ORDER BY rowid LIMIT ? OFFSET ?"
        rows = self._query(sql, [*params, -1 if limit is None else limit, max(0, offset)])
        out: list[RunRecord] = []
        for r in rows:
            trace = Trace.from_dict(json.loads(r[16])) if r[16] else None
            if trace is not None and images:
                self._attach(trace)
            out.append(
                RunRecord(
                    run=r[0],
                    sample_id=r[1],
                    dataset=r[2],
                    question_type=r[3],
                    question=r[4],
                    answers=tuple(json.loads(r[5])),
                    prediction=r[6],
                    score=r[7],
                    judge=r[8],
                    status=r[9],
                    error=r[10],
                    latency_s=r[11],
                    prompt_tokens=r[12],
                    completion_tokens=r[13],
                    llm_calls=r[14],
                    attempt=r[15],
                    trace=trace,
                )
            )
        return out

    _LIST_COLUMNS = (
        "dataset, sample_id, question_type, question, answers, prediction, score, status, "
        "agent, error_kinds, latency_s, prompt_tokens, llm_calls"
    )

    def list_page(
        self,
        run: str,
        offset: int = 0,
        limit: int = 50,
        filters: Mapping[str, Any] | None = None,
    ) -> tuple[int, list[dict[str, Any]]]:
        """(matching samples, one page of them as plain dicts) in the order they finished,
        without traces: what a list view shows. Paged in SQL (the page's rowids are chosen
        from the indexes first), so the cost does not grow with the run's size beyond the
        count and the skipped index entries."""
        where, params = self._where(run, filters)
        total = int(self._query(f"SELECT COUNT(*) FROM samples WHERE {where}", params)[0][0])
        rows = self._query(
            f"SELECT {self._LIST_COLUMNS} FROM samples WHERE rowid IN ("
            f"SELECT rowid FROM samples WHERE {where} ORDER BY rowid LIMIT ? OFFSET ?"
            ") ORDER BY rowid",
            [*params, max(0, limit), max(0, offset)],
        )
        return total, [self._list_item(r) for r in rows]

    @staticmethod
    def _list_item(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "dataset": r[0],
            "sample_id": r[1],
            "question_type": r[2],
            "question": r[3],
            "answers": json.loads(r[4]),
            "prediction": r[5],
            "score": r[6],
            "status": r[7],
            "agent": r[8] or "",
            "error_kinds": [k for k in (r[9] or "").split(",") if k],
            "latency_s": r[10],
            "prompt_tokens": r[11],
            "llm_calls": r[12],
        }

    def compare_page(
        self, run_a: str, run_b: str, offset: int = 0, limit: int = 50, *, only_differ: bool = True
    ) -> tuple[int, list[dict[str, Any]]]:
        """Samples of two runs side by side, keyed by (dataset, sample_id) and sorted by it;
        a side is None where that run lacks the sample. ``only_differ`` keeps the samples
        stored in one run only or whose score or prediction differ."""
        keys = (
            "SELECT dataset, sample_id FROM samples WHERE run = ? "
            "UNION SELECT dataset, sample_id FROM samples WHERE run = ?"
        )
        joined = (
            f"FROM ({keys}) AS k "
            "LEFT JOIN samples AS a ON a.run = ? AND a.dataset = k.dataset "
            "AND a.sample_id = k.sample_id "
            "LEFT JOIN samples AS b ON b.run = ? AND b.dataset = k.dataset "
            "AND b.sample_id = k.sample_id"
        )
        where = ""
        if only_differ:
            where = (
                " WHERE a.rowid IS NULL OR b.rowid IS NULL OR a.score IS NOT b.score "
                "OR a.prediction IS NOT b.prediction"
            )
        params = [run_a, run_b, run_a, run_b]
        total = int(self._query(f"SELECT COUNT(*) {joined}{where}", params)[0][0])
        rows = self._query(
            "SELECT k.dataset, k.sample_id, COALESCE(a.question_type, b.question_type), "
            "COALESCE(a.question, b.question), COALESCE(a.answers, b.answers), "
            "a.rowid, a.prediction, a.score, a.status, b.rowid, b.prediction, b.score, b.status "
            f"{joined}{where} ORDER BY k.dataset, k.sample_id LIMIT ? OFFSET ?",
            [*params, max(0, limit), max(0, offset)],
        )
        items = []
        for r in rows:
            items.append(
                {
                    "dataset": r[0],
                    "sample_id": r[1],
                    "question_type": r[2],
                    "question": r[3],
                    "answers": json.loads(r[4]) if r[4] else [],
                    "a": None
                    if r[5] is None
                    else {"prediction": r[6], "score": r[7], "status": r[8]},
                    "b": None
                    if r[9] is None
                    else {"prediction": r[10], "score": r[11], "status": r[12]},
                }
            )
        return total, items

    def image_png(self, hash_: str) -> bytes | None:
        """The stored PNG bytes of one image, as stored (no decoding)."""
        rows = self._query("SELECT png FROM images WHERE hash = ?", (hash_,))
        return bytes(rows[0][0]) if rows else None

    def image(self, hash_: str) -> Image | None:
        rows = self._query("SELECT png FROM images WHERE hash = ?", (hash_,))
        return Image.from_bytes(bytes(rows[0][0]), source=f"store:{hash_}") if rows else None

    def _attach(self, trace: Trace) -> None:
        loaded: dict[str, Image | None] = {}
        for t in _walk(trace):
            for h in sorted(_trace_refs(t)):
                if h not in t.images:
                    if h not in loaded:
                        loaded[h] = self.image(h)
                    img = loaded[h]
                    if img is not None:
                        t.images[h] = img

    def score_rows(self, run: str) -> list[ScoreRow]:
        """Every sample's score and grouping columns, sorted by (dataset, sample_id) so that
        anything computed from them does not depend on the order samples finished in."""
        rows = self._query(
            "SELECT sample_id, dataset, question_type, metric, judge, status, score "
            "FROM samples WHERE run = ? ORDER BY dataset, sample_id",
            (run,),
        )
        return [ScoreRow(*r) for r in rows]

    def latencies(self, system: str, model: Mapping[str, Any], *, last: int = 200) -> list[float]:
        """The seconds the ``last`` questions answered (finished or at their step limit) by
        ``system`` on the model ``model`` names (config keys, e.g. ``llm.backend`` and
        ``llm.model``: see :func:`hammr.eval.duration.model_keys`) took, newest first, over
        every run in the store."""
        where = " AND ".join(f"json_extract(r.config, '$.\"{key}\"') IS ?" for key in model)
        rows = self._query(
            "SELECT s.latency_s FROM samples s JOIN runs r ON r.name = s.run "
            f"WHERE r.system = ? AND {where or '1'} AND s.status IN ('finished', 'step_limit') "
            "AND s.latency_s > 0 ORDER BY s.finished DESC LIMIT ?",
            (system, *map(_json_value, model.values()), last),
        )
        return [float(r[0]) for r in rows]

    def summary(self, run: str) -> RunSummary:
        info = self.run_info(run)
        if info is None:
            raise StoreError(self.unknown_run_message(run))
        done, mean, latency, p_tok, c_tok = self._query(
            "SELECT COUNT(*), COALESCE(AVG(score), 0), COALESCE(AVG(latency_s), 0), "
            "COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) "
            "FROM samples WHERE run = ?",
            (run,),
        )[0]
        statuses = dict(
            self._query(
                "SELECT status, COUNT(*) FROM samples WHERE run = ? GROUP BY status "
                "ORDER BY COUNT(*) DESC, status",
                (run,),
            )
        )
        groups = [
            GroupSummary(qt, ds, n, m)
            for qt, ds, n, m, _ in self._query(
                "SELECT question_type, dataset, COUNT(*), AVG(score), MIN(rowid) AS first "
                "FROM samples WHERE run = ? GROUP BY question_type, dataset ORDER BY first",
                (run,),
            )
        ]
        return RunSummary(info, done, mean, statuses, groups, latency, p_tok, c_tok)

    def usage(self, runs: Iterable[str]) -> tuple[int, int, int, int]:
        """(samples, model calls, prompt tokens, completion tokens) stored over ``runs``."""
        names = list(runs)
        if not names:
            return 0, 0, 0, 0
        marks = ", ".join("?" for _ in names)
        row = self._query(
            "SELECT COUNT(*), COALESCE(SUM(llm_calls), 0), COALESCE(SUM(prompt_tokens), 0), "
            f"COALESCE(SUM(completion_tokens), 0) FROM samples WHERE run IN ({marks})",
            names,
        )[0]
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    def has_ground_truth(self, run: str) -> bool:
        """Whether any sample of ``run`` has a ground truth. A run of questions asked without
        one (served by `hammr serve`, a trace from `hammr ask`) has scores of 0 that mean
        nothing: reports show it as unscored."""
        return bool(
            self._query("SELECT 1 FROM samples WHERE run = ? AND answers != '[]' LIMIT 1", (run,))
        )

    def unknown_run_message(self, run: str) -> str:
        names = self.run_names()
        known = (
            f"; runs in {self.path}: {', '.join(names)}" if names else f" ({self.path} is empty)"
        )
        return f"no run named {run!r}{known}"

    def sample_counts(self, run: str) -> dict[tuple[str, str], int]:
        """Rows per (dataset, sample_id): all 1 by construction (the tests check it)."""
        return {
            (r[0], r[1]): r[2]
            for r in self._query(
                "SELECT dataset, sample_id, COUNT(*) FROM samples WHERE run = ? "
                "GROUP BY dataset, sample_id",
                (run,),
            )
        }
