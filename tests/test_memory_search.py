"""Searching the experience bank: the score threshold (inclusive), source selection,
de-duplication per source task (the best step kept), wide vs deep search (which round and
viewpoint found each hit), and the approximate index (recall against exact, its cache beside
the bank, built with the bank and loaded by the search, rebuilt by the search when missing or
stale, exact with a note when faiss is missing)."""

from __future__ import annotations

import importlib.util
import re
import zlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hammr.memory import (
    Annotation,
    BankError,
    Experience,
    ExperienceBank,
    ExperienceSearcher,
    Provenance,
    SearchSettings,
    State,
    Task,
    experiences_from_runs,
)
from hammr.memory import search as search_module
from hammr.memory.experiences import experience_id
from hammr.memory.search import ExactIndex, IVFIndex, build_indexes, ivf_lists, recall_at_k
from test_memory_bank import WordsEmbedder, make_store, scripted_annotator

needs_faiss = pytest.mark.skipif(
    importlib.util.find_spec("faiss") is None, reason="faiss-cpu is not installed (hammr[memory])"
)


def exp(
    sample: str,
    step: int,
    question: str,
    *,
    history: Sequence[str] = (),
    correct: bool = True,
    sub_task: str = "attribute",
    run: str = "r",
    action: str = "act",
) -> Experience:
    prov = Provenance(run, "vstar", sample, "", step, "Agent", correct, float(correct))
    return Experience(
        experience_id(run, "vstar", sample, "", step),
        State(question, Task("vstar", sub_task), (), tuple(history)),
        action,
        None,
        "obs",
        prov,
    )


async def bank_of(
    path: Path,
    items: Sequence[tuple[Experience, int | None]],
    viewpoints: Sequence[str] = ("question", "history", "question+task", "question+history"),
) -> ExperienceBank:
    bank = ExperienceBank(path, WordsEmbedder(), viewpoints=viewpoints)
    bank.add([e for e, _ in items])
    bank.annotate(
        {e.id: Annotation(s, f"guidance of {e.id[:6]}", "t") for e, s in items if s is not None}
    )
    await bank.build()
    return bank


UMBRELLA = "what colour is the umbrella"
CARS = "how many cars are parked on the street"


def samples_of(hits: Sequence[object]) -> list[str]:
    return [h.experience.provenance.sample_id for h in hits]  # type: ignore[attr-defined]


async def test_the_score_threshold_is_inclusive_and_can_be_off(tmp_path: Path) -> None:
    items = [(exp("s4", 0, UMBRELLA), 4), (exp("s5", 0, UMBRELLA), 5),
             (exp("s6", 0, UMBRELLA), 6), (exp("sn", 0, UMBRELLA), None)]  # fmt: skip
    with await bank_of(tmp_path / "b.db", items) as bank:
        query = State.of(UMBRELLA)

        async def found(min_score: int | None) -> set[str]:
            s = ExperienceSearcher(bank, SearchSettings(k=10, min_score=min_score))
            return set(samples_of((await s.wide(query, "question")).hits))

        assert await found(5) == {"s5", "s6"}  # the paper's default; 5 itself is kept
        assert await found(6) == {"s6"}
        assert await found(None) == {"s4", "s5", "s6", "sn"}
        default = await ExperienceSearcher(bank).wide(query, "question")
        assert default.settings.min_score == 5 and set(samples_of(default.hits)) == {"s5", "s6"}
        hit = default.hits[0]
        assert hit.score in (5, 6) and hit.guidance.startswith("guidance of ")


async def test_unannotated_banks_say_why_nothing_passes(tmp_path: Path) -> None:
    with await bank_of(tmp_path / "b.db", [(exp("s", 0, UMBRELLA), None)]) as bank:
        result = await ExperienceSearcher(bank).wide(State.of(UMBRELLA), "question")
        assert result.hits == () and "is annotated yet" in result.notes[0]
        assert result.rounds[0].eligible == 0


async def test_sources_select_success_or_failure(tmp_path: Path) -> None:
    items = [(exp("ok1", 0, UMBRELLA), 8), (exp("ok2", 0, UMBRELLA), 8),
             (exp("bad1", 0, UMBRELLA, correct=False), 8),
             (exp("bad2", 0, UMBRELLA, correct=False), 8)]  # fmt: skip
    with await bank_of(tmp_path / "b.db", items) as bank:
        query = State.of(UMBRELLA)
        for sources, want, tag in (("correct", {"ok1", "ok2"}, {"success"}),
                                   ("incorrect", {"bad1", "bad2"}, {"failure"})):  # fmt: skip
            s = ExperienceSearcher(bank, SearchSettings(k=10, sources=sources))  # type: ignore[arg-type]
            hits = (await s.wide(query, "question")).hits
            assert set(samples_of(hits)) == want and {h.learned_from for h in hits} == tag
        both = (await ExperienceSearcher(bank, SearchSettings(k=10)).wide(query, "question")).hits
        assert len(both) == 4 and {h.learned_from for h in both} == {"success", "failure"}


async def test_one_hit_per_source_task_the_best_one(tmp_path: Path) -> None:
    items = [
        (exp("a", 0, UMBRELLA, history=()), 6),
        (exp("a", 1, UMBRELLA, history=("locate umbrella boxes",)), 6),
        (exp("a", 2, UMBRELLA, history=("locate umbrella boxes", "crop zoom region")), 6),
        (exp("b", 0, CARS, history=("count cars detector",)), 6),
    ]
    with await bank_of(tmp_path / "b.db", items) as bank:
        query = State.of(UMBRELLA, history=("locate umbrella boxes", "crop zoom region"))
        deduped = await ExperienceSearcher(bank, SearchSettings(k=5)).wide(
            query, "question+history"
        )
        assert samples_of(deduped.hits) == ["a", "b"]
        assert deduped.hits[0].experience.provenance.step == 2  # the most similar step of a
        assert deduped.hits[0].similarity == pytest.approx(1.0)
        every = await ExperienceSearcher(bank, SearchSettings(k=5, dedupe=False)).wide(
            query, "question+history"
        )
        assert [h.experience.provenance.step for h in every.hits[:3]] == [2, 1, 0]
        sims = [h.similarity for h in every.hits]
        assert sims == sorted(sims, reverse=True)


async def test_deep_search_goes_through_viewpoints_in_order(tmp_path: Path) -> None:
    items = [
        (exp("A", 0, UMBRELLA, history=("locate umbrella boxes",)), 7),
        (exp("B", 0, UMBRELLA, history=("ocr text reading",), sub_task="relation"), 7),
        (exp("C", 0, CARS, history=("crop zoom region tiny",)), 7),
        (exp("D", 0, CARS, history=("count cars detector",)), 7),
    ]
    with await bank_of(tmp_path / "b.db", items) as bank:
        searcher = ExperienceSearcher(bank, SearchSettings(k=1))
        query = State.of(UMBRELLA, "vstar", "attribute", history=("crop zoom region tiny",))
        wide = await searcher.wide(query, "question")
        assert samples_of(wide.hits) == ["A"]
        assert (wide.hits[0].round, wide.hits[0].viewpoint) == (1, "question")
        wide2 = await searcher.wide(query, "question", k=2)
        assert samples_of(wide2.hits) == ["A", "B"]  # equal questions: insertion order
        # deep: round 1 by the question finds A; round 2 by the history finds C
        deep = await searcher.deep(query, ["question", "history"])
        assert [(samples_of([h])[0], h.round, h.viewpoint) for h in deep.hits] == [
            ("A", 1, "question"),
            ("C", 2, "history"),
        ]
        assert [(r.round, r.viewpoint, r.found, r.method) for r in deep.rounds] == [
            (1, "question", 1, "exact"),
            (2, "history", 1, "exact"),
        ]
        # a later round skips sources already found and records that it ranked them too
        deep2 = await searcher.deep(query, ["question", "question+task", "history"], k=1)
        assert [(samples_of([h])[0], h.round, h.viewpoint) for h in deep2.hits] == [
            ("A", 1, "question"),
            ("B", 2, "question+task"),
            ("C", 3, "history"),
        ]
        assert deep2.hits[0].also_found_by == ("question+task",)
        # depth is limited by max_rounds; k new hits per round
        short = await searcher.deep(query, ["question", "history", "question+task"], max_rounds=2)
        assert len(short.rounds) == 2 and samples_of(short.hits) == ["A", "C"]
        wider = await searcher.deep(query, ["history", "question"], k=2)
        assert [(samples_of([h])[0], h.round) for h in wider.hits] == [
            ("C", 1), ("A", 1), ("B", 2), ("D", 2),
        ]  # fmt: skip
        with pytest.raises(BankError, match="named twice"):
            await searcher.deep(query, ["question", "question"])
        doc = deep.to_dict()
        assert doc["hits"][0]["source"]["sample_id"] == "A" and "answers" not in str(doc)


async def test_search_over_a_bank_made_from_stored_runs(tmp_path: Path) -> None:
    store = make_store(tmp_path / "runs.sqlite")
    with ExperienceBank(
        tmp_path / "bank.db", WordsEmbedder(), viewpoints=["question+history"]
    ) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        bank.annotate({s.id: scripted_annotator(s.experience) for s in bank.experiences()})
        await bank.build()
        # the OCR step (score 1) never passes the threshold; the cup's finish (4) neither
        searcher = ExperienceSearcher(bank, SearchSettings(k=10, dedupe=False))
        hits = (
            await searcher.wide(State.of("Is the cup left of the plate?"), "question+history")
        ).hits
        assert {h.experience.tool for h in hits} == {
            "LocateObjects",
            "CropImage",
            "AttributeAgent",
            "VQA",
            None,
        }
        assert all(h.learned_from == "success" for h in hits)
    store.close()


# -- the approximate index ------------------------------------------------------------------


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 50), dim)).astype(np.float32)
    rows = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, dim)).astype(
        np.float32
    )
    out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


@needs_faiss
@pytest.mark.parametrize("kind", ["clustered", "uniform"])
def test_ivf_recall_against_exact(kind: str) -> None:
    dim, n = 64, 20_000
    rng = np.random.default_rng(1)
    if kind == "clustered":
        data = clustered(n, dim, 1)
    else:
        data = rng.standard_normal((n, dim)).astype(np.float32)
        data /= np.linalg.norm(data, axis=1, keepdims=True)
    queries = data[rng.choice(n, 100, replace=False)] + 0.3 * rng.standard_normal(
        (100, dim)
    ).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact, ann = ExactIndex(data), IVFIndex.build(data)
    # 4 sqrt(n) cells, at most one per 39 rows: a query scans 128 of 512, a quarter of the rows
    assert (ann.lists, ivf_lists(n), ivf_lists(1_000_000), ivf_lists(30)) == (512, 512, 4000, 1)
    truth = [exact.search(q, 3)[0].tolist() for q in queries]
    found = [ann.search(q, 3)[0].tolist() for q in queries]
    recall = recall_at_k(found, truth, 3)
    # uniform noise has no neighbourhoods for the cells to follow: the worst case
    assert recall >= (0.95 if kind == "clustered" else 0.85), recall
    # scanning every cell is exact
    ann.probe = ann.lists
    assert recall_at_k([ann.search(q, 3)[0].tolist() for q in queries], truth, 3) == 1.0
    # the similarities agree with the exact ones for what both found
    pos, sims = ann.search(queries[0], 3)
    assert np.allclose(sims, data[pos] @ queries[0], atol=1e-5)


class RandomEmbedder:
    """Each distinct text becomes a fixed random unit vector (seeded by the text)."""

    cache_key = "stub-random-32"

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        out = np.stack(
            [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(32) for t in texts]
        ).astype(np.float32)
        result: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
        return result

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        return await self.embed_queries(texts)


async def big_bank(path: Path, n: int) -> ExperienceBank:
    bank = ExperienceBank(path, RandomEmbedder(), viewpoints=["question"])
    items = [exp(f"s{i}", 0, f"question number {i}", correct=i % 2 == 0) for i in range(n)]
    bank.add(items)
    bank.annotate({e.id: Annotation(3 + i % 7, "g") for i, e in enumerate(items)})
    await bank.build(batch_size=1000)
    return bank


@needs_faiss
async def test_the_searcher_goes_approximate_past_the_threshold_and_caches_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.db"
    with await big_bank(path, 3000) as bank:
        rows = bank.view_rows("question")
        rng = np.random.default_rng(7)
        picks = rng.choice(len(rows.seqs), 60, replace=False)
        queries = rows.vectors[rows.vector_of[picks]] + 0.2 * rng.standard_normal((60, 32))
        exact = ExperienceSearcher(bank, SearchSettings(ann="exact"))
        approx = ExperienceSearcher(bank, SearchSettings(ann_min_rows=2000))
        truth, found = [], []
        for q in queries:
            e = exact.search_vectors([("question", q)])
            a = approx.search_vectors([("question", q)])
            assert e.rounds[0].method == "exact" and a.rounds[0].method == "approximate"
            # the filters hold on the approximate path too
            assert all(h.score is not None and h.score >= 5 for h in a.hits)
            truth.append([h.id for h in e.hits])
            found.append([h.id for h in a.hits])
        assert recall_at_k(found, truth, 3) >= 0.95
        cached = list((tmp_path / "big.db.ann").glob("question.*.faiss"))
        assert len(cached) == 1

        # a new searcher loads the cached index instead of building one
        def no_build(*a: object, **kw: object) -> IVFIndex:
            raise AssertionError("the cached index should have been used")

        monkeypatch.setattr(IVFIndex, "build", no_build)
        again = ExperienceSearcher(bank, SearchSettings(ann_min_rows=2000))
        assert again.prepare() == []
        assert again._views["question"].ann is not None
        assert again.search_vectors([("question", queries[0])]).rounds[0].method == "approximate"
        monkeypatch.undo()
        # the viewpoint changes: a new index replaces the old file
        bank.add([exp("extra", 0, "one more question")])
        await bank.build()
        again.search_vectors([("question", queries[0])])
        now = list((tmp_path / "big.db.ann").glob("question.*.faiss"))
        assert len(now) == 1 and now != cached


async def test_without_faiss_the_search_is_exact_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "ann_available", lambda: False)
    with await big_bank(tmp_path / "b.db", 300) as bank:
        searcher = ExperienceSearcher(bank, SearchSettings(ann_min_rows=100))
        result = await searcher.wide(State.of("question number 9"), "question")
        assert (
            result.rounds[0].method == "exact" and "pip install 'hammr[memory]'" in result.notes[0]
        )
        assert samples_of(result.hits)[0] == "s9"  # s7 is scored 3: filtered out
        assert not (tmp_path / "b.db.ann").exists()


def test_settings_are_checked() -> None:
    for bad in ({"k": 0}, {"max_rounds": 0}, {"sources": "mine"}, {"ann": "fast"},
                {"ivf_probe": 0}, {"ivf_lists": 0}):  # fmt: skip
        with pytest.raises(ValueError):
            SearchSettings(**bad)  # type: ignore[arg-type]


@needs_faiss
async def test_a_missing_or_stale_index_is_built_at_search_and_says_so(tmp_path: Path) -> None:
    settings = SearchSettings(ann_min_rows=100)
    folder = tmp_path / "b.db.ann"
    with await big_bank(tmp_path / "b.db", 300) as bank:
        query = bank.view_rows("question").vectors[5]
        report = build_indexes(bank, settings)  # what `hammr memory build` does
        assert [(b.viewpoint, b.vectors, b.built) for b in report.indexes] == [
            ("question", 300, True)
        ]
        assert re.fullmatch(
            r"approximate index built for 1 viewpoint\(s\) in [\d.]+ s: question \(300 vectors, "
            r"[\d.]+ s\)",
            report.line(),
        ), report.line()
        (file,) = folder.glob("question.*.faiss")
        built_at = file.stat().st_mtime_ns
        assert not build_indexes(bank, settings).indexes[0].built  # up to date: kept

        # the bank's index is loaded, not built
        loaded = ExperienceSearcher(bank, settings)
        result = loaded.search_vectors([("question", query)])
        assert result.rounds[0].method == "approximate" and result.notes == ()
        assert loaded.index_builds == [] and file.stat().st_mtime_ns == built_at

        # missing (an old bank): built at the search, which says so, and written again
        file.unlink()
        missing = ExperienceSearcher(bank, settings)
        result = missing.search_vectors([("question", query)])
        assert result.rounds[0].method == "approximate"
        assert [b.viewpoint for b in missing.index_builds] == ["question"]
        note = result.notes[0]
        assert "built the approximate index of question at this search (300 vectors" in note
        assert "no index file beside the bank" in note
        assert "`hammr memory build` builds it with the bank" in note
        assert file.exists()
        assert missing.search_vectors([("question", query)]).notes == ()  # once

        # stale: the viewpoint changed since; the new index replaces the old file
        bank.add([exp("extra", 0, "one more question")])
        await bank.build()
        stale = ExperienceSearcher(bank, settings)
        result = stale.search_vectors([("question", query)])
        assert len(stale.index_builds) == 1 and "its index file is stale" in result.notes[0]
        (now,) = folder.glob("question.*.faiss")
        assert now != file

        # other index settings are another index too
        other = ExperienceSearcher(bank, replace(settings, ivf_lists=3))
        assert "stale" in other.search_vectors([("question", query)]).notes[0]


async def test_without_faiss_the_bank_build_says_no_index_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "ann_available", lambda: False)
    with await big_bank(tmp_path / "b.db", 120) as bank:
        report = build_indexes(bank, SearchSettings(ann_min_rows=100))
        assert report.indexes == () and report.needed == ("question",)
        assert report.line() == (
            "approximate index: not built for question: needs faiss-cpu (pip install "
            "'hammr[memory]'); their searches stay exact"
        )
        small = build_indexes(bank, SearchSettings(ann_min_rows=1000))
        assert small.needed == () and "none needed" in small.line()
    assert not (tmp_path / "b.db.ann").exists()
