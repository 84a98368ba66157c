"""Run a system over a suite's samples: bounded concurrency, a timeout per sample, scoring,
and one committed row per finished sample in a :class:`~hammr.eval.store.RunStore`.

A sample that is already stored under the run's name is skipped, so running the same
command again after a crash or Ctrl-C finishes the run without asking anything twice.
Nothing that goes wrong inside one sample (a timeout, an exception in the system, an
unreadable image, a metric that fails) stops the run: it is stored with status 'timeout'
or 'error', score 0 and the message.

The timeout counts a sample's own work (:mod:`hammr.work_clock`): time a sample spends
queued for a shared model slot (the embedded model answers one call at a time) is not
counted, and with a work clock (the embedded model's) neither is time its threads wait for a
processor that other programs hold.
A sample that times out keeps the trace it had so far, with status 'timeout' and the step
it was in, so ``hammr errors`` and the viewer can say where it was stuck; its model calls are
cancelled, not left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hammr.agents.system import System
from hammr.backends.llm.slots import Lane, conversation_lane
from hammr.eval.store import FAILED_STATUSES, RunStore
from hammr.eval.types import Metric, RunRecord, Sample
from hammr.terminal_text import echo, safe_console, safe_line
from hammr.tools.base import ToolContext
from hammr.trace import Status, Trace
from hammr.values import DEFAULT_MAX_PIXELS, Image, Value
from hammr.work_clock import WorkClock, WorkDeadline

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class EntryLike(Protocol):
    """What the runner reads of a suite entry (:class:`hammr.eval.suites.SuiteEntry`)."""

    @property
    def name(self) -> str:
        """Unique in its suite; the store's 'dataset' column (so two entries reading the same
        adapter, or the same file for two question types, never share sample keys)."""
        ...

    @property
    def question_type(self) -> str: ...

    @property
    def dataset(self) -> str: ...

    @property
    def metric(self) -> Any: ...


CtxFactory = Callable[[], ToolContext]
MetricFactory = Callable[[EntryLike], Metric]
OnResult = Callable[[RunRecord], None]


@dataclass
class EvalOutcome:
    """What one call of :func:`run_eval` did."""

    total: int = 0
    """Distinct samples asked for."""
    skipped: int = 0
    """Already stored under this run's name before the call (not asked again)."""
    ran: int = 0
    """Answered and stored by this call."""
    duplicates: int = 0
    """Samples whose (dataset, id) repeated an earlier one in the list; only the first ran."""
    score_sum: float = 0.0
    """Sum of the scores of the samples run by this call."""
    statuses: dict[str, int] = field(default_factory=dict)
    """Statuses of the samples run by this call."""
    elapsed_s: float = 0.0

    @property
    def errors(self) -> int:
        return self.statuses.get("error", 0)

    @property
    def timeouts(self) -> int:
        return self.statuses.get("timeout", 0)

    @property
    def per_second(self) -> float:
        return self.ran / self.elapsed_s if self.elapsed_s > 0 else 0.0


def sample_key(entry: EntryLike, sample: Sample) -> tuple[str, str]:
    """(dataset, sample id): the sample's primary key within a run. The 'dataset' is the
    suite entry's name (which defaults to its adapter's name, e.g. 'gqa')."""
    return (entry.name or sample.dataset or entry.dataset, sample.id)


def question_type_of(entry: EntryLike, sample: Sample) -> str:
    """The suite entry's question type (a row of the suite's table), else the sample's own."""
    return entry.question_type or sample.question_type


def question_text(sample: Sample) -> str:
    """The question as the system sees it: multiple-choice options are appended, lettered."""
    if not sample.choices:
        return sample.question
    if len(sample.choices) > len(LETTERS):
        raise ValueError(f"{len(sample.choices)} choices; at most {len(LETTERS)} can be lettered")
    options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(sample.choices))
    return (
        f"{sample.question.rstrip()}\nOptions:\n{options}\n"
        "Answer with the letter of the correct option."
    )


def sample_inputs(sample: Sample, max_pixels: int = DEFAULT_MAX_PIXELS) -> dict[str, Value]:
    """The system's input variables: every image (loaded and checked) and the point."""
    inputs: dict[str, Value] = {
        name: Image.open(path, max_pixels=max_pixels) for name, path in sample.images.items()
    }
    if sample.point is not None:
        inputs["point"] = (float(sample.point[0]), float(sample.point[1]))
    return inputs


def metric_name(entry: EntryLike) -> str:
    m = entry.metric
    return m if isinstance(m, str) else str(getattr(m, "name", type(m).__name__))


def default_metric_factory(
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> MetricFactory:
    """Metrics by the entry's metric name through ``get_metric``, built with
    ``options[name]`` (e.g. ``{"encvqa": {"judge": "llm", "llm": llm}}``), one instance per
    name; an entry whose metric is already a Metric object is used as it is."""
    cache: dict[str, Metric] = {}
    chosen = {k: dict(v) for k, v in (options or {}).items()}

    def make(entry: EntryLike) -> Metric:
        if not isinstance(entry.metric, str):
            return entry.metric  # type: ignore[no-any-return]
        if entry.metric not in cache:
            from hammr.eval.metrics import get_metric

            cache[entry.metric] = get_metric(entry.metric, **chosen.get(entry.metric, {}))
        return cache[entry.metric]

    return make


def _error_text(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def unanswered(entry: EntryLike, sample: Sample, run_name: str) -> RunRecord:
    """The record of a sample before (or without) an answer: score 0, no prediction."""
    dataset, sample_id = sample_key(entry, sample)
    return RunRecord(
        run=run_name,
        sample_id=sample_id,
        dataset=dataset,
        question_type=question_type_of(entry, sample),
        question=sample.question,
        answers=tuple(sample.answers),
        prediction=None,
        score=0.0,
    )


async def _answer_and_score(
    system: System,
    entry: EntryLike,
    sample: Sample,
    metric: Metric | str,
    *,
    run_name: str,
    ctx_factory: CtxFactory,
    timeout_s: float | None,
    max_pixels: int,
    work_clock: WorkClock | None = None,
) -> RunRecord:
    record = unanswered(entry, sample, run_name)
    started = time.perf_counter()
    deadline = WorkDeadline(None)
    partial: list[Trace] = []
    try:
        inputs = await asyncio.to_thread(sample_inputs, sample, max_pixels)
        question = question_text(sample)
        ctx = replace(
            ctx_factory(),
            on_trace=partial.append,
            task=(record.dataset, record.question_type),
        )
        deadline = WorkDeadline(timeout_s, work_clock)
        async with deadline:
            result = await system.run(question, inputs, ctx=ctx)
    except TimeoutError as e:
        # Only our deadline is a timeout; a TimeoutError raised inside the system is an error.
        record.latency_s = time.perf_counter() - started
        if not deadline.expired():
            record.status, record.error = "error", _error_text(e)
            return record
        record.status = "timeout"
        record.error = timeout_message(
            timeout_s,
            deadline.queued_s,
            partial[-1] if partial else None,
            counts=getattr(work_clock, "counts", "work clock") if work_clock else None,
        )
        if partial:
            keep_partial(record, partial[-1], "timeout", record.error)
        return record
    except Exception as e:
        record.status = "error"
        record.error = _error_text(e)
        record.latency_s = time.perf_counter() - started
        return record
    record.latency_s = time.perf_counter() - started
    trace = getattr(result, "trace", None)
    record.trace = trace
    record.prediction = getattr(result, "answer", None)
    if trace is not None:
        take_trace(record, trace)
    if record.prediction is not None:
        try:
            if isinstance(metric, str):
                raise ValueError(metric)
            score = await metric.score(record.prediction, sample)
        except Exception as e:
            record.status = "error"
            record.error = f"scoring failed: {_error_text(e)}"
            return record
        record.score = float(score.value)
        record.judge = score.judge
    return record


def timeout_message(
    timeout_s: float | None, queued_s: float, trace: Trace | None, *, counts: str | None = None
) -> str:
    """Why a sample timed out, and where its run was (the deepest step in flight).
    ``counts``: what the work clock counted, when it was not the wall clock."""
    text = f"no answer within {timeout_s or 0:g} s of work"
    if counts:
        text += f" ({counts})"
    if queued_s >= 0.05:
        text += f" (plus {queued_s:.1f} s queued for the model, not counted)"
    where = _deepest_step(trace) if trace is not None else None
    if where is not None:
        agent, step = where
        doing = step.action or ("choosing a specialist" if step.router else "waiting for the model")
        text += f"; stopped in {agent} step {step.index + 1}: {doing}"
    return text


def _deepest_step(trace: Trace) -> tuple[str, Any] | None:
    found: tuple[str, Any] | None = None
    while trace.steps:
        step = trace.steps[-1]
        found = (trace.agent, step)
        if step.child is None or step.child.status not in ("running", "cancelled"):
            break
        trace = step.child
    return found


def keep_partial(record: RunRecord, trace: Trace, status: Status, reason: str) -> None:
    """Give ``record`` the trace of a run cut short (a timeout, a cancellation), marked with
    the same status and reason as the record."""
    trace.status, trace.error = status, reason
    take_trace(record, trace)


def take_trace(record: RunRecord, trace: Trace) -> None:
    """Give ``record`` the trace with its status, error and model usage (an evaluation's
    sample and a served question are recorded alike)."""
    record.trace = trace
    record.status = str(trace.status)
    record.error = trace.error
    record.prompt_tokens = trace.prompt_tokens
    record.completion_tokens = trace.completion_tokens
    record.llm_calls = trace.llm_calls


async def prepare(*parts: object) -> None:
    """Each part's one-time setup (``async prepare()``: load a model, embed a router's
    labelled questions) before the first sample, so that no sample's timeout pays for it.
    A failure is left for the samples to meet and report."""
    for part in parts:
        setup = getattr(part, "prepare", None)
        if setup is not None:
            with contextlib.suppress(Exception):
                await setup()


@dataclass
class Plan:
    todo: list[tuple[EntryLike, Sample]]
    """The samples still to ask, in the given order."""
    total: int
    """Distinct samples."""
    skipped: int
    """Already stored."""
    duplicates: int
    """Repeats of an earlier (dataset, id) in the list, dropped."""


def plan_samples(samples: Sequence[tuple[EntryLike, Sample]], done: set[tuple[str, str]]) -> Plan:
    """Which of ``samples`` still need asking, given the keys already stored."""
    plan = Plan([], 0, 0, 0)
    seen: set[tuple[str, str]] = set()
    for entry, sample in samples:
        key = sample_key(entry, sample)
        if key in seen:
            plan.duplicates += 1
            continue
        seen.add(key)
        if key in done:
            plan.skipped += 1
        else:
            plan.todo.append((entry, sample))
    plan.total = len(seen)
    return plan


Answer = Callable[[EntryLike, Sample], Awaitable[RunRecord]]
"""Asks one sample and scores it; never raises for trouble inside the sample (it is in the
record's status). :func:`local_answerer` runs in this process; the Ray executor's runs in
its workers."""


def local_answerer(
    system: System,
    *,
    run_name: str,
    ctx_factory: CtxFactory = ToolContext,
    timeout_s: float | None = None,
    metrics: MetricFactory | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    work_clock: WorkClock | None = None,
) -> Answer:
    """Answers samples with ``system`` in this process, scoring with each entry's metric
    (built once per entry name and metric). ``timeout_s`` is counted on ``work_clock``
    (None: the wall clock; see :mod:`hammr.work_clock`)."""
    metric_for = metrics or default_metric_factory()
    metric_cache: dict[tuple[str, str], Metric | str] = {}

    def metric_of(entry: EntryLike) -> Metric | str:
        """The entry's metric, or why there is none."""
        key = (entry.name, metric_name(entry))
        if key not in metric_cache:
            try:
                metric_cache[key] = metric_for(entry)
            except Exception as e:
                metric_cache[key] = f"no metric {metric_name(entry)!r}: {_error_text(e)}"
        return metric_cache[key]

    async def answer(entry: EntryLike, sample: Sample) -> RunRecord:
        return await _answer_and_score(
            system,
            entry,
            sample,
            metric_of(entry),
            run_name=run_name,
            ctx_factory=ctx_factory,
            timeout_s=timeout_s,
            max_pixels=max_pixels,
            work_clock=work_clock,
        )

    return answer


async def run_eval(
    system: System,
    samples: Sequence[tuple[EntryLike, Sample]],
    *,
    store: RunStore,
    run_name: str,
    ctx_factory: CtxFactory = ToolContext,
    concurrency: int = 8,
    timeout_s: float | None = None,
    on_result: OnResult | None = None,
    metrics: MetricFactory | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    work_clock: WorkClock | None = None,
) -> EvalOutcome:
    """Ask ``system`` every sample not yet stored under ``run_name``, score each answer with
    its entry's metric and commit it to ``store`` as soon as it is done.

    At most ``concurrency`` samples are in flight; each gets ``timeout_s`` seconds of work
    (None: no limit), counted on ``work_clock`` (None: the wall clock, less time queued), and
    a fresh context from ``ctx_factory``. ``on_result`` is called (on the event
    loop) with every record stored. The run must exist in the store (:meth:`RunStore.open_run`).
    Problems with the store itself (disk full, ...) do stop the run: nothing more could be kept.
    """
    answer = local_answerer(
        system,
        run_name=run_name,
        ctx_factory=ctx_factory,
        timeout_s=timeout_s,
        metrics=metrics,
        max_pixels=max_pixels,
        work_clock=work_clock,
    )

    async def setup() -> None:
        await prepare(system, ctx_factory().llm)

    return await run_samples(
        answer,
        samples,
        store=store,
        run_name=run_name,
        concurrency=concurrency,
        on_result=on_result,
        setup=setup,
    )


async def run_samples(
    answer: Answer,
    samples: Sequence[tuple[EntryLike, Sample]],
    *,
    store: RunStore,
    run_name: str,
    concurrency: int = 8,
    on_result: OnResult | None = None,
    setup: Callable[[], Awaitable[None]] | None = None,
    retry_failed: bool = False,
    lanes: Sequence[Lane] = (),
) -> EvalOutcome:
    """The executor-independent part of a run: skip what is stored, keep ``concurrency``
    samples in flight through ``answer``, commit each record the moment it comes back (this
    process alone writes the store, one transaction per sample), count the outcome.
    ``setup`` runs once before the first sample, only when there is something to ask.
    ``lanes``: where each of the ``concurrency`` workers sends its questions' model calls
    (a served model's slots, :mod:`hammr.backends.llm.slots`; worker i takes lane i modulo
    their number), so a question's conversations keep their prefix cached.

    The run is held (:meth:`RunStore.driving`) throughout, so a second process on the same
    run is refused with :class:`~hammr.eval.store.RunBusy` before it asks anything, whatever
    the executor. ``retry_failed`` asks again the samples stored with a failed status; each
    keeps its record until its new one replaces it (:meth:`RunStore.add`)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if store.run_info(run_name) is None:
        raise ValueError(f"run {run_name!r} is not in the store; open it first")
    with store.driving(run_name):
        return await _run_held(
            answer,
            samples,
            store=store,
            run_name=run_name,
            concurrency=concurrency,
            on_result=on_result,
            setup=setup,
            retry_failed=retry_failed,
            lanes=lanes,
        )


def planned(
    store: RunStore,
    run_name: str,
    samples: Sequence[tuple[EntryLike, Sample]],
    *,
    retry_failed: bool = False,
) -> tuple[Plan, set[tuple[str, str]]]:
    """The plan of a run given what is stored, and the keys of the failed records it asks
    again (``retry_failed``; empty otherwise): those count as to do, not as done."""
    done = store.done_keys(run_name)
    again = store.failed_keys(run_name) if retry_failed else set()
    plan = plan_samples(samples, done - again)
    todo = {sample_key(e, s) for e, s in plan.todo}
    return plan, again & todo


async def _run_held(
    answer: Answer,
    samples: Sequence[tuple[EntryLike, Sample]],
    *,
    store: RunStore,
    run_name: str,
    concurrency: int,
    on_result: OnResult | None,
    setup: Callable[[], Awaitable[None]] | None,
    retry_failed: bool,
    lanes: Sequence[Lane],
) -> EvalOutcome:
    outcome = EvalOutcome()
    started = time.perf_counter()

    plan, again = planned(store, run_name, samples, retry_failed=retry_failed)
    outcome.total, outcome.skipped, outcome.duplicates = plan.total, plan.skipped, plan.duplicates
    todo = plan.todo
    if todo and setup is not None:
        await setup()
    work: Iterator[tuple[EntryLike, Sample]] = iter(todo)

    async def worker(lane: Lane | None) -> None:
        for entry, sample in work:
            with conversation_lane(lane):
                record = await answer(entry, sample)
            stored = await asyncio.to_thread(
                store.add,
                record,
                metric=metric_name(entry),
                replace_failed=sample_key(entry, sample) in again,
            )
            if not stored:  # another process finished it meanwhile
                outcome.skipped += 1
                continue
            outcome.ran += 1
            outcome.score_sum += record.score
            outcome.statuses[record.status] = outcome.statuses.get(record.status, 0) + 1
            if on_result is not None:
                on_result(record)

    async with asyncio.TaskGroup() as tasks:
        for i in range(min(concurrency, len(todo))):
            tasks.create_task(worker(lanes[i % len(lanes)] if lanes else None))
    outcome.elapsed_s = time.perf_counter() - started
    return outcome


class EvalProgress:
    """Progress on stderr: a rich bar with the live mean score when stderr is a terminal (or
    ``enabled`` is True), else one plain line per sample as it is stored (a log, CI, a
    pipe), nothing with ``enabled`` False. Use as a context manager and pass
    :meth:`on_result` to :func:`run_eval`."""

    def __init__(
        self,
        total: int,
        *,
        done: int = 0,
        score_sum: float = 0.0,
        label: str = "evaluating",
        enabled: bool | None = None,
    ) -> None:
        self.total = total
        self.done = done
        self.score_sum = score_sum
        self.failed = 0
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.lines = enabled is None and not self.enabled
        """One plain line per sample (stderr is no terminal, and no one said otherwise)."""
        self._started = time.perf_counter()
        self._done_before = done
        self._progress: Any = None
        self._task: Any = None

    @property
    def mean(self) -> float:
        return self.score_sum / self.done if self.done else 0.0

    def _fields(self) -> dict[str, str]:
        extra = f" · {self.failed} failed" if self.failed else ""
        return {"accuracy": f"{100 * self.mean:.1f}%{extra}"}

    def __enter__(self) -> EvalProgress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("acc {task.fields[accuracy]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=safe_console(stderr=True),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(
                self.label, total=self.total, completed=self.done, **self._fields()
            )
        return self

    def on_result(self, record: RunRecord) -> None:
        self.done += 1
        self.score_sum += record.score
        if record.status in FAILED_STATUSES:
            self.failed += 1
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, **self._fields())
        elif self.lines:
            echo(self.line(record), err=True)

    def line(self, record: RunRecord) -> str:
        """The plain progress line of ``record``, just stored."""
        from hammr.eval.duration import spoken

        elapsed = time.perf_counter() - self._started
        answered, left = self.done - self._done_before, self.total - self.done
        # the pace of this invocation so far, at the concurrency it runs with
        rest = f", about {spoken(elapsed / answered * left)} left" if answered and left else ""
        return (
            f"{self.label}: {self.done}/{self.total} {safe_line(record.dataset)}/"
            f"{safe_line(record.sample_id)} {record.status}, score {record.score:.2f} in "
            f"{record.latency_s:.1f} s; acc {100 * self.mean:.1f}%"
            f"{f', {self.failed} failed' if self.failed else ''}; {elapsed:.0f} s so far{rest}"
        )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
