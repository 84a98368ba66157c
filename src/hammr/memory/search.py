"""Searching the experience bank: wide (top k under one viewpoint) and deep (successive
viewpoints), MuSEAgent section 3.3.

**Similarity** is cosine (rows and queries are unit vectors, so a dot product). Under
``ann_min_rows`` distinct vectors per viewpoint (default 50,000) the search is exact with
numpy; from there on it uses an approximate HNSW index from faiss (``pip install
'hammr[memory]'``: faiss-cpu), built the first time the viewpoint is searched and cached
beside the bank (``BANK.ann/VIEWPOINT.FINGERPRINT.faiss``; a changed viewpoint gets a new
file, the old one is removed). Without faiss the search stays exact and says so in
:attr:`SearchResult.notes`. The approximate index returns more candidates than asked
(``oversample`` times k, growing while filters and de-duplication leave too few) and falls
back to exact search when even that is not enough.

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
    hnsw_m: int = 32
    """HNSW graph degree."""
    hnsw_ef_construction: int = 80
    hnsw_ef_search: int = 64
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


class HNSWIndex:
    """An approximate cosine index: faiss's HNSW over inner products of unit rows."""

    method: Literal["exact", "approximate"] = "approximate"

    def __init__(self, index: Any, ef_search: int) -> None:
        self.index = index
        self.ef_search = int(ef_search)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @classmethod
    def build(
        cls, vectors: np.ndarray, *, m: int = 32, ef_construction: int = 80, ef_search: int = 64
    ) -> HNSWIndex:
        faiss = _faiss()
        data = np.ascontiguousarray(vectors, dtype=np.float32)
        index = faiss.IndexHNSWFlat(int(data.shape[1]), int(m), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(ef_construction)
        for start in range(0, data.shape[0], 100_000):
            index.add(data[start : start + 100_000])
        return cls(index, ef_search)

    @classmethod
    def load(cls, path: Path, ef_search: int) -> HNSWIndex:
        return cls(_faiss().read_index(str(path)), ef_search)

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        _faiss().write_index(self.index, str(tmp))
        tmp.replace(path)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, similarities) of about the ``k`` nearest rows, nearest first."""
        k = min(int(k), len(self))
        self.index.hnsw.efSearch = max(self.ef_search, k)
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        sims, ids = self.index.search(q, k)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), sims[0][keep]


# -- the searcher --------------------------------------------------------------------------


@dataclass
class _View:
    rows: ViewRows
    exact: ExactIndex
    ann: HNSWIndex | None
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
            settings.hnsw_m,
            settings.hnsw_ef_construction,
        ]
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


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

    def _maybe_ann(self, view: _View, notes: list[str]) -> None:
        s = self.settings
        n = len(view.exact)
        wanted = s.ann == "approximate" or (s.ann == "auto" and n >= s.ann_min_rows)
        if not wanted or view.ann is not None:
            return
        if not ann_available():
            notes.append(
                f"exact search over {n} vectors of {view.rows.viewpoint}: the approximate "
                f"index needs {ANN_LIBRARY} ({ANN_INSTALL_HINT})"
            )
            return
        path: Path | None = None
        if s.cache_ann:
            folder = self.ann_dir()
            path = folder / f"{view.rows.viewpoint}.{_fingerprint(self.bank, view.rows, s)}.faiss"
            if path.exists():
                try:
                    view.ann = HNSWIndex.load(path, s.hnsw_ef_search)
                except RuntimeError:
                    view.ann = None
                if view.ann is not None and len(view.ann) == n:
                    return
        view.ann = HNSWIndex.build(
            view.rows.vectors,
            m=s.hnsw_m,
            ef_construction=s.hnsw_ef_construction,
            ef_search=s.hnsw_ef_search,
        )
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            for old in path.parent.glob(f"{view.rows.viewpoint}.*.faiss"):
                old.unlink(missing_ok=True)
            view.ann.save(path)

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
    "Chooser",
    "ExactIndex",
    "ExperienceSearcher",
    "HNSWIndex",
    "Hit",
    "SearchResult",
    "SearchRound",
    "SearchSettings",
    "ann_available",
    "recall_at_k",
    "top_k",
]
