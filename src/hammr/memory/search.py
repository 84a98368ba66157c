"""Searching the experience bank: wide (top k under one viewpoint) and deep (successive
viewpoints), MuSEAgent section 3.3.

**Similarity** is cosine (rows and queries are unit vectors, so a dot product). Under
``ann_min_rows`` distinct vectors per viewpoint (default 50,000) the search is exact with
numpy; from there on it uses an approximate index from faiss (``pip install
'hammr[memory]'``: faiss-cpu), an inverted file (IVF-flat): k-means cells (``ivf_lists``,
default 4 sqrt(rows): 4,000 at 1M rows), of which a query scans the ``ivf_probe`` nearest
(default 128) exactly. The index is built with the bank (``hammr memory build`` calls
:func:`build_indexes` once the vectors are in) and kept beside it
(``BANK.ann/VIEWPOINT.FINGERPRINT.faiss``, written to a temporary file and renamed; the
fingerprint covers the embedder, the viewpoint's rows and the index settings, so a changed
viewpoint gets a new file and the old one is removed). A search loads it; where it is
missing or stale (a bank built before indexes were, a viewpoint extended since) the search
builds and keeps it, and says so in :attr:`SearchResult.notes`. Without faiss the search
stays exact and says so. The approximate index returns more candidates than asked
(``oversample`` times k, growing while filters and de-duplication leave too few) and falls
back to exact search when even that is not enough.

Why an inverted file and not a graph (HNSW, used before): on two cores faiss's HNSW (M=32,
efConstruction=80) took 135-250 s to build over 1M rows (more on a busy machine), and the
cheaper graphs that build in under 3 minutes (efConstruction 40, M 16 to 32) lose their way
between clusters (recall@3 0.82-0.92 at 1M clustered rows, whatever efSearch); hnswlib builds
the same graphs no faster. IVF-flat builds 1M rows in 36-95 s at recall@3 0.98-0.99, on
every kind of rows but uniform noise (queries: about 2 ms at 1M, under the 5 ms target; the
graph's were 0.3-0.5 ms). ``benchmarks/memory_search.py`` measures both (docs/benchmarks.md
has the figures).

**Filters** (:class:`SearchSettings`):

* ``min_score`` (default 5): keep experiences the annotator scored at least this. The paper
  keeps the transitions whose quality score reaches the threshold (its Eq. 2; Table 6 calls
  9.0 "a strict threshold [that] limits the bank to near-perfect experiences", so 9 itself
  is kept: the comparison is inclusive). Unannotated experiences never pass a threshold;
  ``None`` turns the filter off (and lets them through).
* ``sources``: ``"both"`` (default), ``"correct"`` (experiences from correctly answered
  samples: learned from success) or ``"incorrect"`` (learned from failure).
* ``dedupe`` (default on): one hit per source task (run, dataset, sample): the most similar
  one. Off, every experience counts on its own.
* ``out_of_domain`` (default off): leave out experiences from the query state's own dataset
  (its :class:`~hammr.memory.experiences.Task` ``dataset``), as the paper's out-of-domain
  setting does; a query with no dataset (``""``) leaves nothing out.

**Wide** search (:meth:`ExperienceSearcher.wide`) returns the top ``k`` under one viewpoint.
**Deep** search (:meth:`ExperienceSearcher.deep`) searches under each viewpoint of an ordered
list (at most ``max_rounds``), each round adding up to ``k`` hits whose source task no
earlier round found; every hit records the round and viewpoint that found it, and the later
viewpoints that also ranked its source within their top k (``also_found_by``).

**Per-round** deep search (:meth:`ExperienceSearcher.deep_per_round`) is the paper's form of
it (its Eqs. 5-6): the viewpoint of each round is not fixed up front but chosen by a
:data:`Chooser` (the agent's model, in :mod:`hammr.muse.viewpoint_choice`) after it has seen
what the earlier rounds found, and the chooser may stop before ``max_rounds``. A deep search
spread over several calls (the ``SearchExperiences`` tool, one viewpoint a call) carries the
earlier calls' hits in ``exclude_ids`` and numbers its rounds on from ``first_round``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hammr.memory.bank import BankError, ExperienceBank, SourceColumns, StoredExperience, ViewRows
from hammr.memory.embedders import normalised
from hammr.memory.experiences import Experience, Provenance, State
from hammr.memory.viewpoints import view_content, view_input, viewpoint_name
from hammr.values import Image

ANN_LIBRARY = "faiss-cpu"
ANN_INSTALL_HINT = "pip install 'hammr[memory]'"
DEFAULT_ANN_MIN_ROWS = 50_000
DEFAULT_IVF_PROBE = 128
IVF_TRAIN_PER_LIST = 40
"""Rows k-means trains on per cell (a sample of the rows; faiss asks for at least 39)."""
INDEX_KIND = "ivf-flat"
"""Written into the index files' fingerprint: a file of another kind of index is stale."""

Sources = Literal["correct", "incorrect", "both"]


def ann_available() -> bool:
    """Whether faiss (the approximate index) is installed."""
    return importlib.util.find_spec("faiss") is not None


@dataclass(frozen=True)
class SearchSettings:
    k: int = 3
    """Hits per search (the paper's breadth; 3 is best in its Fig. 2)."""
    max_rounds: int = 3
    """Viewpoints a deep search goes through at most (its depth; 3 is best)."""
    min_score: int | None = 5
    """Keep experiences scored at least this (inclusive); None: no score filter."""
    sources: Sources = "both"
    dedupe: bool = True
    """One hit per source task (run, dataset, sample)."""
    out_of_domain: bool = False
    """Leave out experiences from the query state's dataset."""
    ann: Literal["auto", "exact", "approximate"] = "auto"
    """auto: approximate from ``ann_min_rows`` distinct vectors on, when faiss is installed."""
    ann_min_rows: int = DEFAULT_ANN_MIN_ROWS
    ivf_lists: int | None = None
    """k-means cells of the approximate index; None: 4 sqrt(rows) (4,000 at 1M rows), at most
    one per 39 rows (what k-means needs to train)."""
    ivf_probe: int = DEFAULT_IVF_PROBE
    """Cells a query scans, nearest first (recall@3 0.98 at 1M rows: see the module docstring)."""
    oversample: int = 8
    """The approximate index is asked for this many times k candidates at first."""
    cache_ann: bool = True
    """Keep approximate indexes beside the bank file."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k is at least 1, got {self.k}")
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds is at least 1, got {self.max_rounds}")
        if self.sources not in ("correct", "incorrect", "both"):
            raise ValueError(f"sources is correct, incorrect or both, got {self.sources!r}")
        if self.ann not in ("auto", "exact", "approximate"):
            raise ValueError(f"ann is auto, exact or approximate, got {self.ann!r}")
        if self.ivf_probe < 1 or (self.ivf_lists is not None and self.ivf_lists < 1):
            raise ValueError(
                f"ivf_probe and ivf_lists are at least 1, got {self.ivf_probe}, {self.ivf_lists}"
            )


@dataclass(frozen=True)
class Hit:
    """One retrieved experience."""

    id: str
    similarity: float
    """Cosine similarity of the query and the experience under :attr:`viewpoint`."""
    viewpoint: str
    round: int
    """1 for a wide search; the deep-search round (1-based) that found it."""
    learned_from: Literal["success", "failure"]
    score: int | None
    guidance: str
    annotator: str
    experience: Experience
    also_found_by: tuple[str, ...] = ()
    """Later viewpoints of a deep search that also ranked this source within their top k."""

    @property
    def provenance(self) -> Provenance:
        return self.experience.provenance

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe summary (what a trace records): no ground truth."""
        p = self.experience.provenance
        return {
            "id": self.id,
            "similarity": round(self.similarity, 4),
            "viewpoint": self.viewpoint,
            "round": self.round,
            "learned_from": self.learned_from,
            "score": self.score,
            "guidance": self.guidance,
            "action": self.experience.action,
            "source": {
                "run": p.run,
                "dataset": p.dataset,
                "sample_id": p.sample_id,
                "trace_path": p.trace_path,
                "step": p.step,
            },
            "also_found_by": list(self.also_found_by),
        }


@dataclass(frozen=True)
class SearchRound:
    round: int
    viewpoint: str
    method: Literal["exact", "approximate"]
    eligible: int
    """Rows under the viewpoint that pass the filters."""
    found: int
    """New hits this round."""


@dataclass(frozen=True)
class SearchResult:
    hits: tuple[Hit, ...]
    rounds: tuple[SearchRound, ...]
    notes: tuple[str, ...] = ()
    settings: SearchSettings = field(default_factory=SearchSettings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hits": [h.to_dict() for h in self.hits],
            "rounds": [asdict(r) for r in self.rounds],
            "notes": list(self.notes),
        }


# -- vector indexes ------------------------------------------------------------------------


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest scores, largest first."""
    n = scores.shape[0]
    if k >= n:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class ExactIndex:
    """Cosine top-k by a matrix product over every row."""

    method: Literal["exact", "approximate"] = "exact"

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Every row's dot product with ``query``. einsum runs its own single-threaded SIMD
        loop: as fast as one BLAS thread for one query, without the wake-ups of BLAS's
        thread pool, which cost whole scheduler ticks (4 ms and more) on a busy machine."""
        out: np.ndarray = np.einsum("ij,j->i", self.vectors, np.asarray(query, dtype=np.float32))
        return out

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, similarities) of the ``k`` nearest rows, nearest first."""
        scores = self.scores(query)
        pos = top_k(scores, k)
        return pos, scores[pos]


def _faiss() -> Any:
    try:
        return importlib.import_module("faiss")
    except ImportError as e:
        raise ImportError(f"the approximate index needs {ANN_LIBRARY}; {ANN_INSTALL_HINT}") from e


def ivf_lists(rows: int, wanted: int | None = None) -> int:
    """The k-means cells of an index over ``rows`` rows: ``wanted``, or 4 sqrt(rows); at most
    one per 39 rows, at least one."""
    n = int(rows)
    lists = int(wanted) if wanted is not None else round(4 * n**0.5)
    return max(1, min(lists, n // (IVF_TRAIN_PER_LIST - 1)))


class IVFIndex:
    """An approximate cosine index: faiss's inverted file (IVF-flat) over inner products of
    unit rows. k-means splits the rows into cells; a query scans, exactly, the rows of its
    ``probe`` nearest cells. Built in seconds where a graph index (HNSW) of the same recall
    takes minutes (see the module docstring)."""

    method: Literal["exact", "approximate"] = "approximate"

    def __init__(self, index: Any, probe: int) -> None:
        self.index = index
        self.probe = int(probe)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @property
    def lists(self) -> int:
        return int(self.index.nlist)

    @classmethod
    def build(
        cls, vectors: np.ndarray, *, lists: int | None = None, probe: int = DEFAULT_IVF_PROBE
    ) -> IVFIndex:
        """Train the cells on a sample of ``vectors`` (IVF_TRAIN_PER_LIST rows a cell, the
        same sample every time) and add every row; faiss works on every core (OpenMP)."""
        faiss = _faiss()
        data = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = int(data.shape[0]), int(data.shape[1])
        nlist = ivf_lists(n, lists)
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = min(n, IVF_TRAIN_PER_LIST * nlist)
        if sample < n:
            pick = np.sort(np.random.default_rng(0).choice(n, sample, replace=False))
            index.train(data[pick])
        else:
            index.train(data)
        for start in range(0, n, 100_000):
            index.add(data[start : start + 100_000])
        return cls(index, probe)

    @classmethod
    def load(cls, path: Path, probe: int) -> IVFIndex:
        return cls(_faiss().read_index(str(path)), probe)

    def save(self, path: Path) -> None:
        """Written whole to a temporary file, then renamed over ``path``."""
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            _faiss().write_index(self.index, str(tmp))
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, similarities) of about the ``k`` nearest rows, nearest first."""
        k = min(int(k), len(self))
        self.index.nprobe = max(1, min(self.probe, self.lists))
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        sims, ids = self.index.search(q, k)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), sims[0][keep]


# -- the searcher --------------------------------------------------------------------------


@dataclass
class _View:
    rows: ViewRows
    exact: ExactIndex
    ann: IVFIndex | None
    starts: np.ndarray
    """CSR over rows grouped by vector: rows of vector i are order[starts[i]:starts[i+1]]."""
    order: np.ndarray
    identity: bool
    """Every row has its own vector, in row order (no gather needed)."""
    filters: tuple[int, np.ndarray, int, np.ndarray] | None = None
    """(columns generation, rows passing the filters, how many, dedupe key per row)."""


def _fingerprint(bank: ExperienceBank, rows: ViewRows, settings: SearchSettings) -> str:
    import hashlib

    doc = json.dumps(
        [
            bank.embedder_name,
            rows.viewpoint,
            rows.generation,
            int(rows.vectors.shape[0]),
            INDEX_KIND,
            ivf_lists(int(rows.vectors.shape[0]), settings.ivf_lists),
        ]
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def _build_index(
    rows: ViewRows, settings: SearchSettings, path: Path | None
) -> tuple[IVFIndex, float]:
    """Build the approximate index of ``rows`` (and save it at ``path``, replacing the
    viewpoint's older files); returns it and the seconds the build took."""
    t0 = time.perf_counter()
    index = IVFIndex.build(rows.vectors, lists=settings.ivf_lists, probe=settings.ivf_probe)
    seconds = time.perf_counter() - t0
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(f"{rows.viewpoint}.*.faiss"):
            old.unlink(missing_ok=True)
        index.save(path)
    return index, seconds


@dataclass(frozen=True)
class IndexBuild:
    """One viewpoint's approximate index, as :func:`build_indexes` or a search left it."""

    viewpoint: str
    vectors: int
    """Distinct vectors indexed."""
    seconds: float
    """Time spent building it (0 when an up-to-date file was kept)."""
    built: bool
    """False: the index file beside the bank was already up to date, and kept."""
    path: Path | None
    """The index file (None: not cached)."""


@dataclass(frozen=True)
class IndexReport:
    """What :func:`build_indexes` did for a bank."""

    indexes: tuple[IndexBuild, ...]
    needed: tuple[str, ...]
    """Viewpoints searched approximately (past the threshold)."""
    missing: str = ""
    """Why none was built although some were needed ("" when built or none needed)."""
    min_rows: int = DEFAULT_ANN_MIN_ROWS

    def line(self) -> str:
        """One line for ``hammr memory build``."""
        if self.missing:
            return f"approximate index: not built for {', '.join(self.needed)}: {self.missing}"
        if not self.indexes:
            return (
                f"approximate index: none needed (every viewpoint under {self.min_rows} "
                "vectors is searched exactly)"
            )
        built = [b for b in self.indexes if b.built]
        kept = ", ".join(b.viewpoint for b in self.indexes if not b.built)
        if not built:
            return f"approximate index: up to date for {kept} (kept)"
        parts = ", ".join(f"{b.viewpoint} ({b.vectors} vectors, {b.seconds:.1f} s)" for b in built)
        text = (
            f"approximate index built for {len(built)} viewpoint(s) in "
            f"{sum(b.seconds for b in built):.1f} s: {parts}"
        )
        return text + (f"; up to date: {kept}" if kept else "")


def build_indexes(
    bank: ExperienceBank,
    settings: SearchSettings | None = None,
    viewpoints: Sequence[str] | None = None,
) -> IndexReport:
    """Build the approximate index file of every viewpoint of ``bank`` (default: every one
    built) that a search with ``settings`` would search approximately, so that no search has
    to: ``hammr memory build`` calls it once the vectors are in. An index file already up to
    date (same fingerprint) is kept without being read. Without the index library, or with
    ``cache_ann`` off (nothing to keep the index in), nothing is built and the report says so.
    """
    searcher = ExperienceSearcher(bank, settings)
    s = searcher.settings
    counts = {v.name: v.vectors for v in bank.info().viewpoints if v.vectors}
    names = [viewpoint_name(v) for v in viewpoints] if viewpoints is not None else list(counts)
    needed = tuple(vp for vp in names if searcher.wants_ann(counts.get(vp, 0)))
    if not needed:
        return IndexReport((), (), "", s.ann_min_rows)
    if not ann_available():
        why = f"needs {ANN_LIBRARY} ({ANN_INSTALL_HINT}); their searches stay exact"
        return IndexReport((), needed, why, s.ann_min_rows)
    if not s.cache_ann:
        return IndexReport((), needed, "cache_ann is off (built at each search)", s.ann_min_rows)
    out: list[IndexBuild] = []
    for vp in needed:
        rows = bank.view_rows(vp)
        path = searcher.index_path(rows)
        n = int(rows.vectors.shape[0])
        if path.exists():
            out.append(IndexBuild(vp, n, 0.0, False, path))
            continue
        _, seconds = _build_index(rows, s, path)
        out.append(IndexBuild(vp, n, seconds, True, path))
        del rows
    return IndexReport(tuple(out), needed, "", s.ann_min_rows)


class ExperienceSearcher:
    """Wide and deep search over one bank (see the module docstring). Loaded rows and
    approximate indexes are kept, and reloaded when the bank changes."""

    def __init__(self, bank: ExperienceBank, settings: SearchSettings | None = None) -> None:
        self.bank = bank
        self.settings = settings or SearchSettings()
        self._views: dict[str, _View] = {}
        self._columns: SourceColumns | None = None
        self._datasets: tuple[int, np.ndarray, dict[str, int]] | None = None
        """(bank generation, dataset code per bank row number, code of each dataset)."""
        self.index_builds: list[IndexBuild] = []
        """Approximate indexes this searcher built (not loaded), in order."""

    def close(self) -> None:
        """Let go of the bank (its SQLite connection)."""
        self.bank.close()

    # -- loading ---------------------------------------------------------------------------

    def ann_dir(self) -> Path:
        return self.bank.path.with_name(self.bank.path.name + ".ann")

    def _view(self, viewpoint: str, notes: list[str]) -> _View:
        vp = viewpoint_name(viewpoint)
        cached = self._views.get(vp)
        if cached is not None and cached.rows.generation == self.bank.generation(vp):
            self._maybe_ann(cached, notes)
            return cached
        rows = self.bank.view_rows(vp)
        order = np.argsort(rows.vector_of, kind="stable")
        counts = np.bincount(rows.vector_of, minlength=rows.vectors.shape[0])
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        identity = bool(
            rows.vector_of.shape[0] == rows.vectors.shape[0]
            and np.array_equal(rows.vector_of, np.arange(rows.vector_of.shape[0]))
        )
        view = _View(rows, ExactIndex(rows.vectors), None, starts, order, identity)
        self._views[vp] = view
        self._maybe_ann(view, notes)
        return view

    def index_path(self, rows: ViewRows) -> Path:
        """Where the approximate index of these rows is cached: its name holds a fingerprint
        of the rows (embedder, viewpoint, generation, count) and of the index settings."""
        fingerprint = _fingerprint(self.bank, rows, self.settings)
        return self.ann_dir() / f"{rows.viewpoint}.{fingerprint}.faiss"

    def wants_ann(self, vectors: int) -> bool:
        """Whether a viewpoint of this many distinct vectors is searched approximately."""
        s = self.settings
        return s.ann == "approximate" or (s.ann == "auto" and vectors >= s.ann_min_rows)

    def _maybe_ann(self, view: _View, notes: list[str]) -> None:
        s = self.settings
        n = len(view.exact)
        if not self.wants_ann(n) or view.ann is not None:
            return
        if not ann_available():
            notes.append(
                f"exact search over {n} vectors of {view.rows.viewpoint}: the approximate "
                f"index needs {ANN_LIBRARY} ({ANN_INSTALL_HINT})"
            )
            return
        path: Path | None = None
        why = "not cached (cache_ann is off)"
        if s.cache_ann:
            path = self.index_path(view.rows)
            why = "no index file beside the bank"
            if path.exists():
                try:
                    view.ann = IVFIndex.load(path, s.ivf_probe)
                except RuntimeError:
                    view.ann = None
                if view.ann is not None and len(view.ann) == n:
                    return
                why = "its index file could not be read"
            elif any(path.parent.glob(f"{view.rows.viewpoint}.*.faiss")):
                why = "its index file is stale (the viewpoint or the index settings changed)"
        view.ann, seconds = _build_index(view.rows, s, path)
        self.index_builds.append(IndexBuild(view.rows.viewpoint, n, seconds, True, path))
        notes.append(
            f"built the approximate index of {view.rows.viewpoint} at this search ({n} vectors, "
            f"{seconds:.1f} s): {why}; `hammr memory build` builds it with the bank"
        )

    def prepare(self, viewpoints: Sequence[str] | None = None) -> list[str]:
        """Load the rows of these viewpoints (default: every one the bank can search) and
        build or load their approximate indexes now rather than at the first search; returns
        the notes a search would give (exact for want of faiss)."""
        notes: list[str] = []
        names = list(viewpoints) if viewpoints is not None else list(self.bank.info().built())
        for vp in names:
            self._view(vp, notes)
        return notes

    def _cols(self) -> SourceColumns:
        if self._columns is None or self._columns.generation != self.bank.generation():
            self._columns = self.bank.source_columns()
        return self._columns

    def _filters(self, view: _View) -> tuple[np.ndarray, int, np.ndarray]:
        """(rows passing the score and source filters, how many, the de-duplication key of
        each row), kept until the bank's annotations or rows change."""
        cols = self._cols()
        if view.filters is not None and view.filters[0] == cols.generation:
            return view.filters[1], view.filters[2], view.filters[3]
        seqs = view.rows.seqs
        ok = np.ones(seqs.shape[0], dtype=bool)
        s = self.settings
        if s.min_score is not None:
            ok &= cols.score[seqs] >= s.min_score
        if s.sources == "correct":
            ok &= cols.correct[seqs]
        elif s.sources == "incorrect":
            ok &= ~cols.correct[seqs]
        keys = cols.source[seqs] if s.dedupe else seqs
        view.filters = (cols.generation, ok, int(ok.sum()), keys)
        return ok, view.filters[2], keys

    def _dataset_codes(self) -> tuple[np.ndarray, dict[str, int]]:
        """The dataset of every bank row (as a code), read once per bank generation."""
        gen = self.bank.generation()
        if self._datasets is None or self._datasets[0] != gen:
            stored = self.bank.experiences()
            size = max((e.seq for e in stored), default=0) + 1
            codes: dict[str, int] = {}
            column = np.full(size, -1, dtype=np.int64)
            for e in stored:
                column[e.seq] = codes.setdefault(e.experience.provenance.dataset, len(codes))
            self._datasets = (gen, column, codes)
        return self._datasets[1], self._datasets[2]

    def _outside(self, view: _View, ok: np.ndarray, dataset: str | None) -> tuple[np.ndarray, int]:
        """``ok`` less the rows from ``dataset`` (None: nothing left out)."""
        if not dataset:
            return ok, int(ok.sum())
        column, codes = self._dataset_codes()
        code = codes.get(dataset)
        if code is None:
            return ok, int(ok.sum())
        seqs = view.rows.seqs
        inside = np.zeros(seqs.shape[0], dtype=bool)
        known = seqs < column.shape[0]
        inside[known] = column[seqs[known]] == code
        kept = ok & ~inside
        return kept, int(kept.sum())

    # -- embedding queries -----------------------------------------------------------------

    async def embed_query(
        self, state: State, viewpoint: str, images: Mapping[str, Image] | None = None
    ) -> np.ndarray:
        """The query vector of ``state`` under ``viewpoint``; ``images`` holds the state's
        images by hash (those missing are left out)."""
        emb = self.bank.embedder
        if emb is None:
            raise BankError("searching by state needs the bank opened with an embedder")
        vp = self.bank.require_viewpoint(viewpoint)
        held = images or {}
        content = view_content(state, vp, max_images=self.bank.max_images)
        inp = view_input(content, held.get)
        if not inp.text and not inp.images:
            raise BankError(f"the state has nothing to search by under {vp!r} (no images)")
        row: np.ndarray = normalised(await emb.embed([inp]), 1, emb.name)[0]
        return row

    # -- searching -------------------------------------------------------------------------

    async def wide(
        self,
        state: State,
        viewpoint: str,
        *,
        k: int | None = None,
        images: Mapping[str, Image] | None = None,
    ) -> SearchResult:
        """The top ``k`` experiences under one viewpoint."""
        query = await self.embed_query(state, viewpoint, images)
        return self.search_vectors([(viewpoint, query)], k=k, exclude_dataset=self._own(state))

    async def deep(
        self,
        state: State,
        viewpoints: Sequence[str],
        *,
        k: int | None = None,
        max_rounds: int | None = None,
        images: Mapping[str, Image] | None = None,
        exclude_ids: Iterable[str] = (),
        first_round: int = 1,
    ) -> SearchResult:
        """Up to ``k`` new hits under each viewpoint in turn (at most ``max_rounds``);
        ``exclude_ids`` and ``first_round`` as :meth:`search_vectors` has them."""
        names = self._rounds(viewpoints, max_rounds)
        queries = [(vp, await self.embed_query(state, vp, images)) for vp in names]
        return self.search_vectors(
            queries,
            k=k,
            exclude_dataset=self._own(state),
            exclude_ids=exclude_ids,
            first_round=first_round,
        )

    async def deep_per_round(
        self,
        state: State,
        viewpoints: Sequence[str],
        choose: Chooser,
        *,
        k: int | None = None,
        max_rounds: int | None = None,
        images: Mapping[str, Image] | None = None,
        exclude_ids: Iterable[str] = (),
        first_round: int = 1,
    ) -> SearchResult:
        """A deep search whose every round's viewpoint ``choose`` picks, from those of
        ``viewpoints`` not yet searched, after seeing the hits of the rounds before (see the
        module docstring); it ends when ``choose`` returns None, after ``max_rounds`` rounds
        or when no viewpoint is left. BankError when ``choose`` names one not offered."""
        offered = list(dict.fromkeys(viewpoint_name(v) for v in viewpoints))
        if not offered:
            raise BankError("a deep search needs at least one viewpoint")
        limit = self.settings.max_rounds if max_rounds is None else max_rounds
        search = _DeepSearch(self, k, self._own(state), exclude_ids, first_round)
        for _ in range(max(1, limit)):
            left = tuple(v for v in offered if v not in search.searched)
            if not left:
                break
            chosen = await choose(search.round, left, search.result())
            if chosen is None:
                break
            vp = viewpoint_name(chosen)
            if vp not in left:
                raise BankError(
                    f"round {search.round} may search {', '.join(left)}, not {chosen!r}"
                )
            search.add(vp, await self.embed_query(state, vp, images))
        return search.result()

    def _own(self, state: State) -> str | None:
        """The dataset an out-of-domain search leaves out (None: none)."""
        return (state.task.dataset or None) if self.settings.out_of_domain else None

    def _rounds(self, viewpoints: Sequence[str], max_rounds: int | None) -> list[str]:
        names = [viewpoint_name(v) for v in viewpoints]
        if not names:
            raise BankError("a deep search needs at least one viewpoint")
        dup = sorted({v for v in names if names.count(v) > 1})
        if dup:
            raise BankError(
                f"a deep search goes through different viewpoints; {', '.join(dup)} is named twice"
            )
        limit = self.settings.max_rounds if max_rounds is None else max_rounds
        return names[: max(1, limit)]

    def search_vectors(
        self,
        queries: Sequence[tuple[str, np.ndarray]],
        *,
        k: int | None = None,
        exclude_dataset: str | None = None,
        exclude_ids: Iterable[str] = (),
        first_round: int = 1,
    ) -> SearchResult:
        """Search with query vectors already made: one (viewpoint, vector) per round (one for
        a wide search). The rounds are taken in order, as :meth:`deep` does.
        ``exclude_dataset`` leaves out that dataset's experiences (the out-of-domain setting;
        :meth:`wide` and :meth:`deep` pass the state's when ``out_of_domain`` is on);
        ``exclude_ids`` leaves out the source tasks of these experiences (earlier rounds of
        a deep search made in several calls), whose rounds are numbered from ``first_round``."""
        search = _DeepSearch(self, k, exclude_dataset, exclude_ids, first_round)
        for viewpoint, query in queries:
            search.add(viewpoint, query)
        return search.result()

    @staticmethod
    def _hit(stored: StoredExperience, sim: float, vp: str, r: int, also: tuple[str, ...]) -> Hit:
        exp = stored.experience
        ann = stored.annotation
        return Hit(
            id=exp.id,
            similarity=float(sim),
            viewpoint=vp,
            round=r,
            learned_from="success" if exp.provenance.correct else "failure",
            score=ann.score if ann else None,
            guidance=ann.guidance if ann else "",
            annotator=ann.annotator if ann else "",
            experience=exp,
            also_found_by=also,
        )

    def _rank(
        self,
        view: _View,
        q: np.ndarray,
        ok: np.ndarray,
        eligible: int,
        keys: np.ndarray,
        taken: set[int],
        k: int,
    ) -> tuple[list[tuple[int, float]], list[int], Literal["exact", "approximate"]]:
        """(new hits as (row, similarity), keys of earlier rounds' hits this round ranked
        within its top k, method); see :func:`_walk`."""
        if eligible == 0:
            return [], [], "exact"
        if view.ann is not None:
            walked = self._walk_ann(view, q, ok, keys, taken, k)
            if walked is not None:
                return (*walked, "approximate")
        sims = view.exact.scores(q)
        if not view.identity:
            sims = sims[view.rows.vector_of]
        if eligible < sims.shape[0]:
            sims = np.where(ok, sims, -np.inf)
        m = min(eligible, max(4 * k, 16))
        while True:
            order = top_k(sims, m)
            new, also, done = _walk(
                ((int(i), float(sims[i])) for i in order if ok[i]), keys, taken, k
            )
            if done or m >= eligible:
                return new, also, "exact"
            m = min(eligible, m * 4)

    def _walk_ann(
        self,
        view: _View,
        q: np.ndarray,
        ok: np.ndarray,
        keys: np.ndarray,
        taken: set[int],
        k: int,
    ) -> tuple[list[tuple[int, float]], list[int]] | None:
        assert view.ann is not None
        n = len(view.ann)
        want = min(n, max(k * self.settings.oversample, 16))
        while True:
            vec_ids, sims = view.ann.search(q, want)
            new, also, done = _walk(_expand(view, vec_ids, sims, ok), keys, taken, k)
            if done or want >= n:
                return new, also
            if want >= 4096:
                return None  # filters leave too little near the query: exact instead
            want = min(n, want * 4)


Chooser = Callable[[int, tuple[str, ...], SearchResult], Awaitable[str | None]]
"""Picks a per-round deep search's next viewpoint: called with the round about to be made,
the viewpoints it may search and what the earlier rounds found; None ends the search."""


class _DeepSearch:
    """One search in progress: its rounds so far and the source tasks they took."""

    def __init__(
        self,
        searcher: ExperienceSearcher,
        k: int | None,
        exclude_dataset: str | None,
        exclude_ids: Iterable[str],
        first_round: int,
    ) -> None:
        self.searcher = searcher
        self.k = searcher.settings.k if k is None else int(k)
        if self.k < 1:
            raise ValueError(f"k is at least 1, got {self.k}")
        self.exclude_dataset = exclude_dataset
        self.round = int(first_round)
        """The number the next round gets."""
        self.notes: list[str] = []
        self.taken: dict[int, int] = {}
        """dedupe key -> position in ``found``."""
        self.found: list[tuple[int, float, str, int, list[str]]] = []
        self.rounds: list[SearchRound] = []
        self.searched: list[str] = []
        self.earlier = self._keys_of(list(exclude_ids))
        """dedupe keys of the experiences earlier calls found."""

    def _keys_of(self, ids: Sequence[str]) -> set[int]:
        if not ids:
            return set()
        bank = self.searcher.bank
        seqs = [e.seq for e in bank.experiences(ids=ids)]  # ids the bank no longer has: none
        if not self.searcher.settings.dedupe:
            return set(seqs)
        source = self.searcher._cols().source
        return {int(source[q]) for q in seqs if q < source.shape[0]}

    def add(self, viewpoint: str, query: np.ndarray) -> None:
        """One round: up to k hits under ``viewpoint`` whose source no earlier round took."""
        s = self.searcher
        view = s._view(viewpoint, self.notes)
        vp = view.rows.viewpoint
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != view.rows.vectors.shape[1]:
            raise BankError(
                f"a query of {q.shape[0]} numbers cannot search {vp!r}, whose rows have "
                f"{view.rows.vectors.shape[1]} (embedder {s.bank.embedder_name})"
            )
        ok, eligible, keys = s._filters(view)
        if self.exclude_dataset:
            ok, eligible = s._outside(view, ok, self.exclude_dataset)
        taken = set(self.taken) | self.earlier
        new, also, method = s._rank(view, q, ok, eligible, keys, taken, self.k)
        for key in also:
            if key in self.taken:
                self.found[self.taken[key]][4].append(vp)
        for row, sim in new:
            key = int(keys[row])
            self.taken[key] = len(self.found)
            self.found.append((int(view.rows.seqs[row]), sim, vp, self.round, []))
        self.rounds.append(SearchRound(self.round, vp, method, eligible, len(new)))
        self.searched.append(vp)
        self.round += 1

    def result(self) -> SearchResult:
        """The search so far: its hits in the order found, its rounds and notes."""
        s = self.searcher
        notes = list(self.notes)
        if s.settings.min_score is not None and not bool((s._cols().score >= 0).any()):
            notes.append(
                "no experience in the bank is annotated yet; none passes the score "
                f"threshold {s.settings.min_score}"
            )
        stored = s.bank.by_seq([f[0] for f in self.found])
        hits = tuple(
            s._hit(stored[seq], sim, vp, r, tuple(also)) for seq, sim, vp, r, also in self.found
        )
        return SearchResult(hits, tuple(self.rounds), tuple(notes), s.settings)


def _expand(
    view: _View, vec_ids: np.ndarray, sims: np.ndarray, ok: np.ndarray
) -> Iterator[tuple[int, float]]:
    """The eligible rows of each vector found, as (row, similarity), in the order found."""
    for v, sim in zip(vec_ids.tolist(), sims.tolist(), strict=True):
        for i in view.order[view.starts[v] : view.starts[v + 1]].tolist():
            if ok[i]:
                yield i, float(sim)


def _walk(
    ranked: Iterable[tuple[int, float]], keys: np.ndarray, taken: set[int], k: int
) -> tuple[list[tuple[int, float]], list[int], bool]:
    """Walk (row, similarity) best first: up to ``k`` rows of keys not in ``taken`` and not
    seen before in this walk; also the taken keys among this walk's first ``k`` distinct
    keys (the round's own top k). The flag says whether ``k`` new rows were found."""
    new: list[tuple[int, float]] = []
    also: list[int] = []
    seen: set[int] = set()
    for row, sim in ranked:
        key = int(keys[row])
        if key in seen:
            continue
        seen.add(key)
        if key in taken:
            if len(seen) <= k:
                also.append(key)
            continue
        new.append((row, sim))
        if len(new) >= k:
            return new, also, True
    return new, also, False


def recall_at_k(found: Sequence[Sequence[int]], truth: Sequence[Sequence[int]], k: int) -> float:
    """Mean fraction of the true top ``k`` that ``found`` holds, over queries."""
    if not truth:
        return 0.0
    total = 0.0
    for f, t in zip(found, truth, strict=True):
        t_k = list(t)[:k]
        total += len(set(list(f)[:k]) & set(t_k)) / max(1, len(t_k))
    return total / len(truth)


__all__ = [
    "ANN_INSTALL_HINT",
    "ANN_LIBRARY",
    "DEFAULT_ANN_MIN_ROWS",
    "DEFAULT_IVF_PROBE",
    "Chooser",
    "ExactIndex",
    "ExperienceSearcher",
    "Hit",
    "IVFIndex",
    "IndexBuild",
    "IndexReport",
    "SearchResult",
    "SearchRound",
    "SearchSettings",
    "ann_available",
    "build_indexes",
    "ivf_lists",
    "recall_at_k",
    "top_k",
]
