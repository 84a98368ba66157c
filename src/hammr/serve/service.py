"""What `hammr serve` does with a question, apart from HTTP: which systems it offers as
models, how many questions run at once and how many may wait, and how each one is asked,
answered (a multiple-choice question with its letter) and recorded in the run store.

Every question, whatever becomes of it, is one record of the run ``serve-SESSION-SYSTEM``
(suite ``served``), committed once, whole, when the question ends: answered, without an
answer, failed, timed out, or cancelled because its client went away or the server shut
down (then with the trace it had so far). `hammr view`, `report` and `errors` read these runs
as they read evaluations.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hammr.agents.system import System
from hammr.backends.llm.slots import Lane, conversation_lane
from hammr.config import Config
from hammr.eval.metrics.choice import extract_choice, lettered_options
from hammr.eval.runner import keep_partial, take_trace
from hammr.eval.store import SERVED_SUITE, RunStore
from hammr.eval.types import RunRecord
from hammr.serve.chat_request import ChatQuestion, OpenAIError
from hammr.serve.image_source import ImagePolicy, load_image
from hammr.terminal_text import echo
from hammr.tools.base import ToolContext
from hammr.trace import Status, Trace
from hammr.values import Value

SUITE = SERVED_SUITE
"""The suite (and dataset) name of every served question's record."""
DEFAULT_MAX_QUEUE = 32
INLINE_COMMIT_PIXELS = 1_000_000
"""Up to this many pixels of images in a question's trace, its record is committed on the
event loop; past it, in a thread (PNG encoding of large images takes milliseconds)."""
STEP_TEXT = 300
"""Characters of a step's thought and observation sent in a streamed step event."""


@dataclass(frozen=True)
class ServedModel:
    id: str
    status: str
    """'ready' or 'limited' (runs with less than it needs: `hammr systems` says what)."""
    paper: str = ""
    problems: tuple[str, ...] = ()


@dataclass
class Outcome:
    """How a question ended, as the client is told."""

    id: str
    model: str
    run: str
    answer: str | None
    status: str
    error: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    stored: bool = True
    """Whether the question is in the run store (False: the store could not take it)."""

    def hammr_field(self) -> dict[str, Any]:
        return {
            "trace_id": self.id,
            "run": self.run,
            "status": self.status,
            "error": self.error,
            "llm_calls": self.llm_calls,
            "stored": self.stored,
        }


@dataclass(eq=False)
class Job:
    """One question in the server: waiting, running, then done."""

    question: ChatQuestion
    inputs: dict[str, Value] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)
    """The question's lettered options (a multiple-choice question), else []."""
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))
    events: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    cancel_reason: str = "the server stopped it"
    task: asyncio.Task[Outcome] | None = None

    def cancel(self, reason: str) -> None:
        if self.task is not None and not self.task.done():
            self.cancel_reason = reason
            self.task.cancel()


class ChatService:
    """Answers chat questions with the systems of one configuration.

    ``llm`` replaces the configured model (tests and benchmarks give a scripted one);
    ``systems`` replaces how a system is built from its name.
    """

    def __init__(
        self,
        cfg: Config,
        models: Mapping[str, ServedModel],
        *,
        store: RunStore | None,
        session: str,
        llm: Any,
        concurrency: int,
        lanes: Sequence[Lane] = (),
        max_queue: int = DEFAULT_MAX_QUEUE,
        timeout_s: float | None = None,
        images: ImagePolicy | None = None,
        build: Callable[[str], tuple[System, Mapping[str, Any]]] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.cfg = cfg
        self.models = dict(models)
        self.store = store
        self.session = session
        self.llm = llm
        self.concurrency = concurrency
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.images = images or ImagePolicy(max_pixels=int(cfg.get("images.max_pixels")))
        self._build = build or self._build_from_config
        self._built: dict[str, tuple[System, Mapping[str, Any]]] = {}
        self._build_lock = asyncio.Lock()
        self._runs_open: set[str] = set()
        self._runs_lock = threading.Lock()
        self._slots = asyncio.Semaphore(concurrency)
        self._free_lanes: list[Lane | None] = [
            lanes[i % len(lanes)] if lanes else None for i in range(concurrency)
        ]
        """Where the questions running now send their model calls: a served model's slots,
        one per question (:mod:`hammr.backends.llm.slots`)."""
        self.waiting = 0
        self.running = 0
        self.jobs: set[Job] = set()
        self._latencies: deque[float] = deque(maxlen=50)
        self._unstored_ids: set[str] = set()
        """Questions the store could not take (see :meth:`_commit`)."""

    # -- models ----------------------------------------------------------------------------

    def _build_from_config(self, name: str) -> tuple[System, Mapping[str, Any]]:
        from hammr.systems import build_system

        return build_system(self.cfg, name)

    async def system(self, name: str) -> tuple[System, Mapping[str, Any]]:
        """The system ``name``, built once (in a thread: building may load models)."""
        if name in self._built:
            return self._built[name]
        async with self._build_lock:
            if name not in self._built:
                self._built[name] = await asyncio.to_thread(self._build, name)
        return self._built[name]

    def check_model(self, name: str) -> None:
        if name not in self.models:
            known = ", ".join(self.models) or "none"
            raise OpenAIError(
                404,
                f"the model {name[:80]!r} does not exist here; the models (hammr systems) this "
                f"server runs: {known}",
                param="model",
                code="model_not_found",
            )

    def run_name(self, model: str) -> str:
        return f"serve-{self.session}-{model}"

    # -- admission -------------------------------------------------------------------------

    async def prepare(self, question: ChatQuestion) -> dict[str, Value]:
        """The question's input variables (its images decoded), once its model is known and
        built: OpenAIError for an unknown model, one that cannot be built, or a bad image.
        Nothing is recorded for a question refused here: it was never asked."""
        self.check_model(question.model)
        try:
            await self.system(question.model)
        except Exception as e:
            raise OpenAIError(
                503,
                f"the model {question.model!r} cannot run here: {e}",
                type="server_error",
                param="model",
                code="model_unavailable",
            ) from None
        inputs: dict[str, Value] = {}
        for name, ref in zip(("image", "image2"), question.images, strict=False):
            inputs[name] = await load_image(ref, self.images)
        return inputs

    def admit(self, question: ChatQuestion, inputs: dict[str, Value]) -> Job:
        """A job for ``question`` (prepared: :meth:`prepare`), or 429 when the queue is
        full."""
        busy = self.running >= self.concurrency
        if busy and self.waiting >= self.max_queue:
            raise OpenAIError(
                429,
                f"the server is busy: {self.running} questions running and {self.waiting} "
                "waiting; try again later",
                type="rate_limit_error",
                code="queue_full",
                headers={"Retry-After": str(self.retry_after_s())},
            )
        job = Job(question, inputs, lettered_options(question.question))
        self.jobs.add(job)
        job.task = asyncio.create_task(self._answer(job), name=f"hammr-serve-{job.id}")
        job.task.add_done_callback(lambda _t: self.jobs.discard(job))
        return job

    def retry_after_s(self) -> int:
        """Seconds until a place is likely free: the median recent question's time for each
        round of ``concurrency`` questions ahead (1 when nothing is known yet)."""
        typical = statistics.median(self._latencies) if self._latencies else 1.0
        rounds = (self.waiting + 1) / self.concurrency
        return max(1, min(600, math.ceil(typical * rounds)))

    # -- answering -------------------------------------------------------------------------

    async def _answer(self, job: Job) -> Outcome:
        q = job.question
        record = RunRecord(
            run=self.run_name(q.model),
            sample_id=job.id,
            dataset=SUITE,
            question_type="multiple_choice" if job.options else "",
            question=q.question,
            answers=(),
            prediction=None,
            score=0.0,
        )
        partial: list[Trace] = []
        started = time.perf_counter()
        self.waiting += 1
        try:
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
        except asyncio.CancelledError:
            self._cut_short(
                record, [], "cancelled", f"cancelled before it started: {job.cancel_reason}"
            )
            record.latency_s = time.perf_counter() - started
            self._commit(record)
            raise
        self.running += 1
        lane = self._free_lanes.pop()
        try:
            with conversation_lane(lane):
                return await self._run(job, record, partial)
        except asyncio.CancelledError:
            where = partial[-1].error if partial and partial[-1].error else "cancelled"
            self._cut_short(record, partial, "cancelled", f"{where}: {job.cancel_reason}")
            record.latency_s = time.perf_counter() - started
            self._commit(record)
            raise
        finally:
            self.running -= 1
            self._free_lanes.append(lane)
            self._slots.release()

    async def _run(self, job: Job, record: RunRecord, partial: list[Trace]) -> Outcome:
        q = job.question
        system, backends = await self.system(q.model)

        def on_step(agent: str, depth: int, step: Any) -> None:
            if q.steps:
                job.events.put_nowait(step_event(agent, depth, step))

        ctx = ToolContext(backends=dict(backends), llm=self.llm, on_step=on_step)
        ctx.on_trace = partial.append
        ctx.task = (SUITE, record.question_type)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await system.run(q.question, job.inputs, ctx=ctx)
        except TimeoutError:
            reason = f"no answer within {self.timeout_s:g} s (--timeout-s)"
            self._cut_short(record, partial, "timeout", reason)
            await self._finish(record, started)
            return self._outcome(job, record)
        except Exception as e:
            if partial:
                take_trace(record, partial[-1])  # the trace as the exception left it
            record.status, record.error = "error", f"{type(e).__name__}: {e}".strip()
            await self._finish(record, started)
            return self._outcome(job, record)
        take_trace(record, result.trace)
        record.prediction = result.answer
        if result.answer is not None and job.options:
            chosen = extract_choice(result.answer, job.options).letter
            record.prediction = chosen or result.answer
        await self._finish(record, started)
        return self._outcome(job, record)

    @staticmethod
    def _cut_short(record: RunRecord, partial: list[Trace], status: Status, reason: str) -> None:
        """Mark the record (and the trace it had so far, if any) ended by ``status``."""
        if partial:
            keep_partial(record, partial[-1], status, reason)
        record.status, record.error = status, reason

    async def _finish(self, record: RunRecord, started: float) -> None:
        """Time the question and commit it: here when its images are small (a commit is a
        fraction of a millisecond, less than a thread's hand-over), else in a thread, so
        that encoding large images as PNG does not hold the event loop (a cancellation
        meanwhile still waits for the commit)."""
        record.latency_s = time.perf_counter() - started
        self._latencies.append(record.latency_s)
        trace = record.trace
        pixels = sum(i.width * i.height for i in trace.all_images().values()) if trace else 0
        if pixels <= INLINE_COMMIT_PIXELS:
            self._commit(record)
        else:
            await asyncio.shield(asyncio.to_thread(self._commit, record))

    def _outcome(self, job: Job, record: RunRecord) -> Outcome:
        return Outcome(
            id=job.id,
            model=job.question.model,
            run=record.run,
            answer=record.prediction,
            status=record.status,
            error=record.error,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            llm_calls=record.llm_calls,
            stored=self.store is not None and self.stored(record.sample_id),
        )

    def _commit(self, record: RunRecord) -> None:
        """Store the record whole, in one transaction (its run opened on first use). A store
        that cannot take it (a full disk, a file gone read-only) costs the record, not the
        answer: the client still gets it, told ``stored: false``, and the server log says
        why."""
        try:
            self._store(record)
        except Exception as e:
            self._unstored_ids.add(record.sample_id)
            echo(
                f"hammr serve: question {record.sample_id} not recorded in the store: {e}", err=True
            )

    @property
    def unstored(self) -> int:
        return len(self._unstored_ids)

    def stored(self, question_id: str) -> bool:
        return question_id not in self._unstored_ids

    def _store(self, record: RunRecord) -> None:
        if self.store is None:
            return
        with self._runs_lock:
            if record.run not in self._runs_open:
                self.store.open_run(
                    record.run,
                    SUITE,
                    record.run[len(self.run_name("")) :],
                    config={"served": True, "session": self.session},
                    settings={"concurrency": self.concurrency, "timeout_s": self.timeout_s},
                )
                self._runs_open.add(record.run)
        self.store.add(record)

    # -- streaming -------------------------------------------------------------------------

    async def events(self, job: Job) -> AsyncIterator[dict[str, Any] | Outcome]:
        """The job's step events as they come, then its :class:`Outcome`."""
        assert job.task is not None
        while True:
            getter = asyncio.ensure_future(job.events.get())
            try:
                done, _ = await asyncio.wait(
                    {getter, job.task}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                if not getter.done():
                    getter.cancel()
            if getter in done:
                yield getter.result()
                continue
            while not job.events.empty():
                yield job.events.get_nowait()
            yield job.task.result()
            return

    async def shutdown(self, reason: str = "the server shut down") -> None:
        """Cancel every question still waiting or running; each is recorded as cancelled."""
        jobs = [j for j in self.jobs if j.task is not None]
        for job in jobs:
            job.cancel(reason)
        for job in jobs:
            assert job.task is not None
            with contextlib.suppress(BaseException):
                await job.task


def step_event(agent: str, depth: int, step: Any) -> dict[str, Any]:
    """What a client asking for steps (``hammr_steps``) is sent for one step, as it starts
    and again when it has finished."""

    def clip(text: str | None) -> str:
        text = text or ""
        return text if len(text) <= STEP_TEXT else text[: STEP_TEXT - 1] + "…"

    finished = bool(step.observation or step.error_kind or step.finish)
    return {
        "agent": agent,
        "depth": depth,
        "step": step.index + 1,
        "thought": clip(step.thought),
        "action": step.action,
        "observation": clip(step.observation),
        "error": step.error_kind,
        "finished": finished,
    }
