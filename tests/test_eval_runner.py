"""The evaluation runner: concurrency bound, per-sample timeout, failures kept per sample,
inputs (images, point, choices), scoring by the entry's metric, resume from the store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from hammr.agent import AgentResult
from hammr.eval.runner import (
    EvalProgress,
    default_metric_factory,
    plan_samples,
    question_text,
    run_eval,
)
from hammr.eval.store import RunStore
from hammr.eval.suites import SuiteEntry
from hammr.eval.types import Metric, RunRecord, Sample, Score
from hammr.tools.base import ToolContext
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Image


def Entry(
    question_type: str = "spatial_reasoning",
    dataset: str = "gqa",
    metric: str = "exact_match",
    name: str = "",
) -> SuiteEntry:
    return SuiteEntry(
        name=name or dataset,
        dataset=dataset,
        file=f"{dataset}.jsonl",
        metric=metric,
        question_type=question_type,
    )


class Echo:
    """Answers what the question says after 'say ', after an optional delay; 'boom' raises."""

    name = "echo"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.in_flight = 0
        self.most = 0
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def run(
        self, question: str, inputs: Mapping[str, Any] | None = None, *, ctx: Any = None
    ) -> AgentResult:
        assert isinstance(ctx, ToolContext)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            self.seen.append((question, dict(inputs or {})))
            if "sleep" in question:
                await asyncio.sleep(30)
            await asyncio.sleep(self.delay)
            if "boom" in question:
                raise RuntimeError("the tool fell over")
            answer = question.split("say ", 1)[1].split("\n")[0] if "say " in question else None
            trace = Trace(agent="echo", question=question, answer=answer, model="m")
            trace.inputs = {k: encode_value(v, trace.images) for k, v in (inputs or {}).items()}
            trace.steps.append(Step(index=0, finish=answer, usage=StepUsage(10, 2)))
            trace.status = "finished" if answer is not None else "step_limit"
            return AgentResult(answer, trace)
        finally:
            self.in_flight -= 1


@pytest.fixture
def image(tmp_path: Path) -> Path:
    p = tmp_path / "img.png"
    PILImage.new("RGB", (64, 48), (200, 30, 30)).save(p)
    return p


def sample(sid: str, question: str, answer: str, image: Path, **kw: Any) -> Sample:
    return Sample(
        id=sid, dataset="gqa", question=question, answers=(answer,), images={"image": image}, **kw
    )


async def test_runs_scores_and_stores_every_sample_within_the_concurrency_bound(
    tmp_path: Path, image: Path
) -> None:
    e = Entry()
    samples = [
        (e, sample(f"q{i}", f"say {'yes' if i % 3 else 'no'}", "yes", image)) for i in range(20)
    ]
    system = Echo(delay=0.02)
    seen: list[RunRecord] = []
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "echo")
        out = await run_eval(
            system, samples, store=store, run_name="r", concurrency=4, on_result=seen.append
        )
        assert system.most == 4
        assert (out.total, out.ran, out.skipped, out.errors, out.timeouts) == (20, 20, 0, 0, 0)
        assert len(seen) == 20 and out.score_sum == 13
        assert store.summary("r").mean == pytest.approx(13 / 20)
        rec = store.get("r", "gqa", "q1")
        assert (rec.prediction, rec.score, rec.judge, rec.status) == (
            "yes",
            1.0,
            "",
            "finished",
        )
        assert rec.question_type == "spatial_reasoning" and rec.prompt_tokens == 10
        assert rec.trace is not None and rec.trace.images  # the input image went with it
        assert store.records("r", traces=False, filters={"dataset": "gqa"})[0].run == "r"
        assert system.seen[0][1]["image"].width == 64


async def test_a_timeout_and_an_exception_are_stored_and_the_run_goes_on(
    tmp_path: Path, image: Path
) -> None:
    e = Entry()
    samples = [
        (e, sample("ok", "say yes", "yes", image)),
        (e, sample("slow", "sleep then say yes", "yes", image)),
        (e, sample("bad", "boom say yes", "yes", image)),
        (e, sample("none", "nothing to say", "yes", image)),
        (e, sample("noimg", "say yes", "yes", tmp_path / "missing.png")),
    ]
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "echo")
        # 1 s: the other samples work for next to nothing; the rest is margin for a busy machine
        out = await run_eval(Echo(), samples, store=store, run_name="r", timeout_s=1.0)
        assert out.ran == 5 and out.timeouts == 1 and out.errors == 2
        by_id = {r.sample_id: r for r in store.records("r")}
        assert by_id["ok"].score == 1.0
        slow = by_id["slow"]
        assert (slow.status, slow.score, slow.prediction) == ("timeout", 0.0, None)
        assert slow.error == "no answer within 1 s of work" and slow.latency_s >= 1.0
        bad = by_id["bad"]
        assert (bad.status, bad.score) == ("error", 0.0)
        assert bad.error == "RuntimeError: the tool fell over"
        none = by_id["none"]
        assert (none.status, none.score, none.prediction) == ("step_limit", 0.0, None)
        assert by_id["noimg"].status == "error" and "image file not found" in str(
            by_id["noimg"].error
        )


async def test_rerun_skips_what_is_stored(tmp_path: Path, image: Path) -> None:
    e = Entry()
    samples = [(e, sample(f"q{i}", "say yes", "yes", image)) for i in range(6)]
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "echo")
        first = Echo()
        await run_eval(first, samples[:4], store=store, run_name="r")
        again = Echo()
        out = await run_eval(again, samples + samples[:2], store=store, run_name="r")
        assert (out.total, out.skipped, out.ran, out.duplicates) == (6, 4, 2, 2)
        assert len(again.seen) == 2
        assert store.count("r") == 6 and set(store.sample_counts("r").values()) == {1}
        plan = plan_samples(samples, store.done_keys("r"))
        assert plan.todo == [] and plan.skipped == 6


async def test_point_and_choices_reach_the_system_and_mc_is_scored(
    tmp_path: Path, image: Path
) -> None:
    mc = Entry(question_type="", dataset="vstar", metric="multiple_choice")
    pointing = Entry(question_type="local_pointing", dataset="pointqa_local")
    samples = [
        (
            mc,
            Sample(
                id="m1",
                dataset="vstar",
                question="say B",
                answers=("B",),
                images={"image": image},
                choices=("red", "blue"),
            ),
        ),
        (
            pointing,
            Sample(
                id="p1",
                dataset="pointqa_local",
                question="say red",
                answers=("red",),
                images={"image": image, "image2": image},
                point=(10, 20),
                question_type="local_pointing",
            ),
        ),
    ]
    assert question_text(samples[0][1]) == (
        "say B\nOptions:\nA. red\nB. blue\nAnswer with the letter of the correct option."
    )
    system = Echo()
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "echo")
        await run_eval(system, samples, store=store, run_name="r")
        by_id = {r.sample_id: r for r in store.records("r")}
    assert by_id["m1"].score == 1.0 and by_id["p1"].score == 1.0
    inputs = {q.split("\n")[0]: i for q, i in system.seen}
    assert inputs["say red"]["point"] == (10.0, 20.0)
    assert isinstance(inputs["say red"]["image2"], Image)
    assert by_id["p1"].question_type == "local_pointing" and by_id["m1"].question_type == ""


class Broken:
    name = "broken"

    async def score(self, prediction: str, sample: Sample) -> Score:
        raise ValueError("judge unavailable")


async def test_a_failing_metric_is_an_error_of_that_sample_only(
    tmp_path: Path, image: Path
) -> None:
    broken = Entry(name="judged")
    samples = [
        (broken, sample("a", "say yes", "yes", image)),
        (Entry(metric="no_such_metric", dataset="x"), sample("b", "say yes", "yes", image)),
        (Entry(), sample("c", "say yes", "yes", image)),
    ]
    default = default_metric_factory()

    def metrics(entry: SuiteEntry) -> Metric:
        return Broken() if entry is broken else default(entry)

    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "echo")
        out = await run_eval(Echo(), samples, store=store, run_name="r", metrics=metrics)
        by_id = {r.sample_id: r for r in store.records("r")}
    assert out.ran == 3 and out.errors == 2
    assert by_id["a"].error == "scoring failed: ValueError: judge unavailable"
    b = by_id["b"]
    assert b.status == "error" and b.dataset == "x"
    assert "no metric 'no_such_metric': ValueError: unknown metric" in str(b.error)
    assert by_id["c"].score == 1.0


async def test_entries_sharing_an_adapter_keep_their_samples_apart(
    tmp_path: Path, image: Path
) -> None:
    one = Entry(name="signs", dataset="jsonl", question_type="ocr_reasoning")
    two = Entry(name="counts", dataset="jsonl", question_type="complex_counting")
    samples = [
        (e, replace(sample("1", "say yes", "yes", image), dataset="jsonl")) for e in (one, two)
    ]
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "echo")
        out = await run_eval(Echo(), samples, store=store, run_name="r")
        assert out.ran == 2 and out.duplicates == 0
        assert store.done_keys("r") == {("signs", "1"), ("counts", "1")}


async def test_bad_arguments(tmp_path: Path, image: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(ValueError, match="not in the store"):
            await run_eval(Echo(), [], store=store, run_name="r")
        store.open_run("r", "tiny", "echo")
        with pytest.raises(ValueError, match="concurrency"):
            await run_eval(Echo(), [], store=store, run_name="r", concurrency=0)


def test_progress_counts_and_stays_quiet_off_a_terminal() -> None:
    with EvalProgress(4, done=2, score_sum=1.0, enabled=False) as bar:
        bar.on_result(RunRecord("r", "a", "d", "", "q", ("x",), "x", 1.0))
        bar.on_result(RunRecord("r", "b", "d", "", "q", ("x",), None, 0.0, status="timeout"))
    assert bar.done == 4 and bar.mean == pytest.approx(0.5) and bar.failed == 1
    with EvalProgress(2, enabled=True) as shown:  # rich to stderr; must not raise
        shown.on_result(RunRecord("r", "a", "d", "", "q", ("x",), "x", 1.0))
    assert shown.mean == 1.0


def test_a_plain_progress_line_says_how_long_is_left_at_this_runs_pace() -> None:
    bar = EvalProgress(5, done=2)  # two answered before this invocation: not its pace
    bar._started -= 300  # this invocation has run 5 min
    bar.done = 3
    line = bar.line(RunRecord("r", "a", "d", "", "q", ("x",), "x", 1.0))
    assert line.endswith("about 10 min left")  # 1 answered in 5 min, 2 to go
    bar.done = 5
    assert "left" not in bar.line(RunRecord("r", "b", "d", "", "q", ("x",), "x", 1.0))
