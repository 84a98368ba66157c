"""The run store: round trip of records with traces and images, resume keys, paging, filters."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from PIL import Image as PILImage

from hammr.eval.store import RunStore, StoreError, default_store_path
from hammr.eval.types import RunRecord
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Box, Image


def traced(question: str, colour: tuple[int, int, int] = (10, 200, 10)) -> Trace:
    root = Image(PILImage.new("RGB", (40, 30), colour))
    crop = Image(root.pixels.crop((5, 5, 15, 25)), parent=root, crop_box=Box(5, 5, 10, 20))
    t = Trace(agent="Dispatcher", question=question, model="m", answer="x", status="finished")
    t.inputs = {"image": encode_value(root, t.images)}
    child = Trace(agent="Child", question="sub?", answer="x", status="finished")
    child.steps.append(
        Step(
            index=0,
            action="c = CropImage(image, [5, 5, 10, 20])",
            tool="CropImage",
            arguments={"image": encode_value(root, child.images)},
            output_var="c",
            output=encode_value(crop, child.images),
            usage=StepUsage(100, 9),
        )
    )
    child.steps.append(Step(index=1, finish="x", usage=StepUsage(120, 4)))
    t.steps.append(
        Step(index=0, action="Child('sub?', image)", tool="Child", child=child, output="x")
    )
    t.steps.append(Step(index=1, finish="x", usage=StepUsage(50, 2)))
    return t


def record(run: str, sid: str, score: float = 1.0, **kw: object) -> RunRecord:
    base: dict[str, object] = {
        "run": run,
        "sample_id": sid,
        "dataset": "gqa",
        "question_type": "spatial_reasoning",
        "question": f"question {sid}?",
        "answers": ("left", "to the left"),
        "prediction": "left",
        "score": score,
        "judge": "exact",
    }
    base.update(kw)
    return RunRecord(**base)  # type: ignore[arg-type]


def test_round_trip_with_a_trace_and_its_images(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    trace = traced("Which side?")
    with RunStore(path) as store:
        info, created = store.open_run(
            "r1", "generic-vqa", "hammr", config={"llm.model": "m"}, settings={"limit": 3}
        )
        assert created and info.config == {"llm.model": "m"} and info.settings == {"limit": 3}
        rec = record(
            "r1",
            "q1",
            trace=trace,
            latency_s=1.5,
            prompt_tokens=trace.prompt_tokens,
            completion_tokens=trace.completion_tokens,
            llm_calls=trace.llm_calls,
        )
        assert store.add(rec, metric="exact_match")
    # a fresh connection (another process would see the same) reads everything back
    with RunStore(path) as store:
        [back] = store.records("r1", images=True)
        assert back.trace is not None
        assert back.trace.to_dict() == trace.to_dict()
        assert set(back.trace.all_images()) == set(trace.all_images()) and len(trace.all_images())
        for h, img in trace.all_images().items():
            assert back.trace.all_images()[h] == img  # same pixels
        child = back.trace.steps[0].child
        assert child is not None and set(child.images) == set(trace.steps[0].child.images)  # type: ignore[union-attr]
        for field in ("run", "sample_id", "dataset", "question_type", "question", "answers"):
            assert getattr(back, field) == getattr(rec, field)
        assert (back.prediction, back.score, back.judge, back.status) == (
            "left",
            1.0,
            "exact",
            "finished",
        )
        assert (back.latency_s, back.prompt_tokens, back.completion_tokens, back.llm_calls) == (
            1.5,
            trace.prompt_tokens,
            trace.completion_tokens,
            trace.llm_calls,
        )
        # without images, refs stay as they are and nothing is attached
        [light] = store.records("r1")
        assert light.trace is not None and light.trace.images == {}
        [bare] = store.records("r1", traces=False)
        assert bare.trace is None and bare.score == 1.0
        got = store.get("r1", "gqa", "q1")
        assert got.trace is not None and got.trace.all_images().keys() == trace.all_images().keys()
        with pytest.raises(StoreError, match="no sample gqa/nope"):
            store.get("r1", "gqa", "nope")
    # one file holds it all: the images are rows, not files beside it
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("runs.sqlite")) == []
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM images").fetchone()[0] == len(trace.all_images())


def test_images_are_stored_once_across_samples_and_runs(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("a", "s", "naive")
        store.open_run("b", "s", "naive")
        for run in ("a", "b"):
            for i in range(3):
                store.add(record(run, f"q{i}", trace=traced(f"q{i}")))
        assert store._query("SELECT COUNT(*) FROM images")[0][0] == 2  # root + crop


def test_a_stored_sample_is_never_stored_twice(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "s", "naive")
        assert store.add(record("r", "q1", score=1.0))
        assert not store.add(record("r", "q1", score=0.0, prediction="right"))
        assert store.add(record("r", "q1", dataset="tallyqa"))  # another dataset's q1
        assert store.done_keys("r") == {("gqa", "q1"), ("tallyqa", "q1")}
        [first] = store.records("r", filters={"dataset": "gqa"})
        assert first.score == 1.0 and first.prediction == "left"  # the first one stays
        assert set(store.sample_counts("r").values()) == {1}


def test_concurrent_adds_from_threads(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "s", "naive")

        def add(k: int) -> None:
            for i in range(25):
                store.add(record("r", f"q{i}", score=float(k % 2), trace=traced(f"q{i}")))

        threads = [threading.Thread(target=add, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.count("r") == 25
        assert set(store.sample_counts("r").values()) == {1}


def test_paging_filters_and_summary(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "generic-vqa", "hammr")
        for i in range(10):
            store.add(record("r", f"g{i}", score=1.0 if i < 6 else 0.0, latency_s=2.0))
        for i in range(5):
            store.add(
                record(
                    "r",
                    f"t{i}",
                    score=0.0,
                    dataset="tallyqa",
                    question_type="complex_counting",
                    status="timeout" if i == 0 else "finished",
                    prediction=None if i == 0 else "3",
                    latency_s=2.0,
                )
            )
        pages = [store.records("r", offset=o, limit=4, traces=False) for o in range(0, 16, 4)]
        assert [len(p) for p in pages] == [4, 4, 4, 3]
        ids = [r.sample_id for p in pages for r in p]
        assert ids == [f"g{i}" for i in range(10)] + [f"t{i}" for i in range(5)]
        assert store.count("r", {"dataset": "tallyqa"}) == 5
        assert store.count("r", {"status": ["timeout", "error"]}) == 1
        assert store.count("r", {"correct": True}) == 6
        assert store.count("r", {"correct": False, "question_type": "spatial_reasoning"}) == 4
        with pytest.raises(StoreError, match="cannot filter on 'prediction'"):
            store.count("r", {"prediction": "x"})
        s = store.summary("r")
        assert s.done == 15 and s.mean == pytest.approx(6 / 15)
        assert s.statuses == {"finished": 14, "timeout": 1}
        assert s.latency_s == pytest.approx(2.0)
        assert [(g.question_type, g.dataset, g.done) for g in s.groups] == [
            ("spatial_reasoning", "gqa", 10),
            ("complex_counting", "tallyqa", 5),
        ]
        assert store.delete_samples("r", ["timeout"]) == 1
        assert ("tallyqa", "t0") not in store.done_keys("r")


def test_runs_resume_only_as_the_same_experiment(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        _, created = store.open_run("r", "generic-vqa", "hammr")
        assert created
        info, created = store.open_run("r", "generic-vqa", "hammr", config={"x": 1})
        assert not created and info.config == {}  # the run keeps what it started with
        with pytest.raises(StoreError, match="already exists with suite 'generic-vqa'"):
            store.open_run("r", "generic-vqa", "naive")
        store.open_run("q", "s", "naive")
        assert store.run_names() == ["r", "q"]
        with pytest.raises(StoreError, match=r"no run named .zz.; runs in .*: r, q"):
            store.summary("zz")


def test_default_location_respects_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "hammr" / "runs.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_store_path() == Path.home() / ".cache" / "hammr" / "runs.sqlite"


def test_a_file_that_is_not_a_store_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match=r"is not a run store \(not an SQLite file\)"):
        RunStore(bad)
