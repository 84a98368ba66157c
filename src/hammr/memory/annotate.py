"""Hindsight annotation (MuSEAgent section 3.2): a model reads a finished trajectory, knowing
whether it ended in a correct answer, and scores every decision in it.

For each step it gives a **score** 0-10 (how good that decision was where it was taken; the
same scale for trajectories that succeeded and ones that failed: high means worth imitating)
and one or two sentences of **guidance** an agent in a similar state could reuse, without the
answer to this question.

* **Trajectories.** The bank's experiences are grouped by their trace (run, dataset, sample,
  trace path: a child agent's trace is a trajectory of its own, with its own question) and
  ordered by step: :func:`pending_trajectories` gives those with a step still unannotated.
* **The model** (:class:`HindsightAnnotator`) may differ from the agent's. It is told the
  question, the task descriptor, whether the final answer was correct and, for an incorrect
  one, the prediction and the ground truth (to judge by; the guidance is checked not to
  repeat it), then the numbered ``action -> observation`` steps; a model that sees images
  also gets the trajectory's input images. Its reply is JSON, ``{"steps": [{"step": 1,
  "score": 7, "guidance": "..."}, ...]}``, constrained by a GBNF grammar that fixes the number
  of steps where the backend takes one (llama.cpp, vLLM, SGLang), else by a JSON schema where
  the server takes one, else only asked for (:mod:`hammr.memory.annotation_replies`).
* **Checking.** A reply must be JSON with every step exactly once, whole scores 0-10 and
  guidance that is not empty, at most 300 characters and two
  sentences, and does not contain the ground-truth answer (answers of 3 or more characters;
  for an option letter, the option's text when the question lists it). A bad reply is
  answered with what was wrong and asked again (``max_attempts`` calls in all); after the last
  one the trajectory's failure (why, and the reply) is kept in the bank and the run goes on.
* **Resumable.** :func:`annotate_bank` writes each trajectory's annotations as soon as they
  are checked, so an interrupted run keeps its finished work, and a rerun asks only for the
  trajectories still unannotated (annotated experiences are never asked for again). The LLM
  response cache of :func:`hammr.factory.build_llm` also applies.

:class:`Annotator` is the protocol: anything with a ``name`` and ``async annotate(trajectory)``
(a scripted annotator in tests, a human's imported file) can fill the bank.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from hammr.backends.llm.base import (
    LLM,
    LLMError,
    LLMRequest,
    Message,
    sees_images,
    vision_limits_of,
)
from hammr.backends.llm.meter import Meter, metered, metering
from hammr.grammar_bounds import tokens_for
from hammr.memory.annotation_replies import (
    ReplyProblem,
    answer_mentions,
    answer_terms,
    check_reply,
    reply_grammar,
    reply_schema,
    takes_json_schema,
)
from hammr.memory.bank import (
    Annotation,
    AnnotationFailure,
    ExperienceBank,
    StoredExperience,
)
from hammr.memory.experiences import Experience, clip_text
from hammr.terminal_text import safe_console
from hammr.values import Image
from hammr.vision import ImageBudget

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_CONCURRENCY = 4
TOKENS_PER_STEP = 120
"""Reply tokens allowed per step (a score and up to 300 characters of guidance)."""


class AnnotationFailed(Exception):
    """An annotator gave up on a trajectory: ``reason``, its last ``reply``, calls made."""

    def __init__(self, reason: str, reply: str = "", attempts: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.reply = reply
        self.attempts = attempts


# -- trajectories ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Trajectory:
    """The steps of one trace of one sample, in order, as the bank holds them."""

    steps: tuple[StoredExperience, ...]
    images: tuple[Image, ...] = ()
    """The trajectory's input images (loaded only for an annotator that sees)."""

    @property
    def first(self) -> Experience:
        return self.steps[0].experience

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(run, dataset, sample id, trace path)."""
        p = self.first.provenance
        return (p.run, p.dataset, p.sample_id, p.trace_path)

    @property
    def todo(self) -> tuple[str, ...]:
        """Ids of the steps without an annotation."""
        return tuple(s.id for s in self.steps if s.annotation is None)

    def place(self) -> str:
        """``run/dataset/sample`` and the trace path of a child agent's trace."""
        run, dataset, sample_id, path = self.key
        return f"{run}/{dataset}/{sample_id}" + (f" {path}" if path else "")


def trajectories(stored: Iterable[StoredExperience]) -> list[Trajectory]:
    """``stored`` grouped by trace, each in step order, in the order first seen."""
    groups: dict[tuple[str, str, str, str], list[StoredExperience]] = {}
    for s in stored:
        p = s.experience.provenance
        groups.setdefault((p.run, p.dataset, p.sample_id, p.trace_path), []).append(s)
    return [
        Trajectory(tuple(sorted(g, key=lambda s: s.experience.provenance.step)))
        for g in groups.values()
    ]


def pending_trajectories(bank: ExperienceBank) -> list[Trajectory]:
    """Every trajectory of the bank with at least one step not annotated yet (whole: the
    annotator sees all its steps)."""
    todo = {
        (p.run, p.dataset, p.sample_id, p.trace_path)
        for p in (s.experience.provenance for s in bank.experiences(annotated=False))
    }
    if not todo:
        return []
    return [t for t in trajectories(bank.experiences()) if t.key in todo]


# -- the prompt -----------------------------------------------------------------------------

_GUIDE = """\
Below is a finished attempt by an AI agent at a question about one or more images. Looking \
back at it, judge every decision the agent made, so that agents facing similar situations \
later can learn from it.

For each step give:
- "score": a whole number from 0 to 10 for how good that decision was at that point of the \
attempt: 10 = exactly the right move, worth copying; 5 = reasonable but not decisive; \
0 = harmful or a waste of a step. Use the same scale whether the final answer was right or \
wrong: a good step in a failed attempt can score high, a lucky step in a successful one low.
- "guidance": one or two short sentences telling an agent in a similar situation what to \
do (which tool or approach, and why). Make it hold for other questions too, and never state \
the answer to this question.

Reply with JSON only, in this form:
{{"steps": [{{"step": 1, "score": 7, "guidance": "..."}}, ...]}}
with exactly {n} entries, steps 1 to {n} in order.
"""


def _quoted(values: Sequence[str]) -> str:
    return " or ".join(json.dumps(v, ensure_ascii=False) for v in values) or "(none recorded)"


def trajectory_prompt(t: Trajectory, *, image_note: str = "") -> str:
    """The annotator's prompt for ``t`` (text; images are attached after it)."""
    e = t.first
    p = e.provenance
    lines = [_GUIDE.format(n=len(t.steps)), f"Question: {e.state.question}"]
    lines.append(f"Task: {e.state.task.text() or '(unknown)'}")
    if p.trace_path:
        lines.append(
            f"(These are the steps of a helper agent, {p.agent}, that the main agent called; "
            "the outcome is the main agent's.)"
        )
    if p.correct:
        lines.append("Outcome: the final answer was judged CORRECT.")
    else:
        said = "no answer" if p.prediction is None else json.dumps(p.prediction)
        lines.append(f"Outcome: the final answer was judged WRONG. The agent answered {said}.")
        lines.append(
            f"Correct answer: {_quoted(p.answers)} (to judge by only: do not put it in the "
            "guidance)"
        )
    if image_note:
        lines.append(image_note)
    lines.append("")
    lines.append("Steps (action -> observation):")
    for i, s in enumerate(t.steps, 1):
        x = s.experience
        lines.append(f"{i}. {x.action} -> {x.observation}" if x.observation else f"{i}. {x.action}")
    return "\n".join(lines)


# -- annotators -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TrajectoryAnnotation:
    """An annotator's verdict on a trajectory: one annotation per step, in order."""

    annotations: tuple[Annotation, ...]
    attempts: int = 1
    """Model calls it took."""


@runtime_checkable
class Annotator(Protocol):
    """Annotates whole trajectories; raises :class:`AnnotationFailed` when it cannot. One
    that wants the input images says so with ``wants_images = True`` (optional)."""

    @property
    def name(self) -> str: ...

    async def annotate(self, trajectory: Trajectory) -> TrajectoryAnnotation: ...


class HindsightAnnotator:
    """An LLM (or VLM) as the hindsight model (see the module docstring).

    ``grammar``: True/None use the GBNF grammar or JSON schema where the backend takes one
    (None: "auto"), False asks in words only. ``name``: what annotations record as their
    annotator (default the model's name)."""

    def __init__(
        self,
        llm: LLM,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        grammar: bool | None = None,
        name: str | None = None,
        tokens_per_step: int = TOKENS_PER_STEP,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts is at least 1, got {max_attempts}")
        self.llm = llm
        self.max_attempts = max_attempts
        self.grammar = grammar
        self._name = name or llm.name
        self.tokens_per_step = tokens_per_step

    @property
    def name(self) -> str:
        return self._name

    @property
    def wants_images(self) -> bool:
        return sees_images(self.llm)

    def first_message(self, t: Trajectory) -> Message:
        if not (self.wants_images and t.images):
            return Message("user", trajectory_prompt(t))
        shown = t.images[: vision_limits_of(self.llm).max_images]
        budget = ImageBudget(vision_limits_of(self.llm))
        text = trajectory_prompt(
            t, image_note=f"The question's image{'s are' if len(shown) > 1 else ' is'} below."
        )
        labelled = [(f"input {i}" if len(shown) > 1 else "input", im) for i, im in enumerate(shown)]
        return Message("user", budget.turn(text, labelled))

    def request(self, messages: Sequence[Message], n: int) -> LLMRequest:
        grammar = schema = None
        if self.grammar is not False:
            if self.llm.grammar_support == "gbnf":
                grammar = reply_grammar(n)
            elif takes_json_schema(self.llm):
                schema = reply_schema(n)
        return LLMRequest(
            messages=tuple(messages),
            # room for the grammar's longest reply: a reply cut short is not JSON
            max_tokens=tokens_for(grammar, 40 + self.tokens_per_step * n),
            temperature=0.0,
            grammar=grammar,
            json_schema=schema,
        )

    async def annotate(self, trajectory: Trajectory) -> TrajectoryAnnotation:
        t = trajectory
        n = len(t.steps)
        e = t.first
        forbidden = answer_terms(e.state.question, e.provenance.answers)
        mentions = answer_mentions(e.state.question, e.provenance.answers)
        messages: list[Message] = [self.first_message(t)]
        reply, problem = "", ""
        model = metered(self.llm)  # its usage goes to the build's meter (annotate_bank)
        for attempt in range(1, self.max_attempts + 1):
            try:
                resp = await model.complete(self.request(messages, n))
            except LLMError as err:
                raise AnnotationFailed(f"the model failed: {err}", reply, attempt) from None
            reply = resp.text
            try:
                checked = check_reply(reply, n, forbidden, mentions=mentions)
            except ReplyProblem as err:
                problem = str(err)
                messages += [
                    Message("assistant", reply),
                    Message(
                        "user",
                        f"That reply cannot be used: {problem}. Reply again with JSON only, "
                        f"one entry for each of the {n} steps.",
                    ),
                ]
                continue
            notes = tuple(Annotation(score, text, self.name) for score, text in checked)
            return TrajectoryAnnotation(notes, attempt)
        raise AnnotationFailed(
            f"no usable reply in {self.max_attempts} attempts; the last: {problem}",
            reply,
            self.max_attempts,
        )


# -- annotating a bank ----------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotationReport:
    """What :func:`annotate_bank` did."""

    annotator: str
    annotated: int
    """Experiences annotated now."""
    trajectories: int
    """Trajectories annotated now."""
    failed: tuple[AnnotationFailure, ...]
    skipped: int
    """Experiences already annotated, left as they were."""
    attempts: int
    """Annotator calls, retries included."""
    seconds: float = 0.0
    pending: int = 0
    """Trajectories that were to annotate."""
    usage: Meter | None = None
    """The model calls the annotator made (retries included) and their tokens; None for an
    annotator that asks no model (a scripted one, an imported file). No question's trace
    holds them: a bank is built outside any question."""

    def lines(self) -> list[str]:
        spent = f"{self.attempts} calls"
        if self.usage is not None and self.usage.calls:
            u = self.usage.usage
            spent += f", {u.prompt_tokens}+{u.completion_tokens} tokens"
            if self.usage.cached_calls:
                spent += f", {self.usage.cached_calls} from hammr's cache"
        out = [
            f"annotated: {self.annotated} experiences in {self.trajectories} of {self.pending} "
            f"trajectories by {self.annotator} ({spent}, {self.seconds:.1f} s); "
            f"{self.skipped} already annotated"
        ]
        if self.failed:
            out.append(f"not annotated: {len(self.failed)} trajectories (rerun to try again):")
            out += [f"  {f.place()}: {clip_text(f.reason, 200)}" for f in self.failed[:10]]
            if len(self.failed) > 10:
                out.append(f"  ... and {len(self.failed) - 10} more (`hammr memory show`)")
        return out


@dataclass
class _Tally:
    annotated: int = 0
    trajectories: int = 0
    attempts: int = 0
    failed: list[AnnotationFailure] = field(default_factory=list)


def _load_images(bank: ExperienceBank, t: Trajectory, limit: int) -> tuple[Image, ...]:
    found = (bank.image(h) for h in t.first.state.images[:limit])
    return tuple(im for im in found if im is not None)


async def annotate_bank(
    bank: ExperienceBank,
    annotator: Annotator,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: bool = False,
    limit: int | None = None,
    on_trajectory: Callable[[Trajectory, bool], None] | None = None,
) -> AnnotationReport:
    """Annotate every trajectory of ``bank`` with an unannotated step, ``concurrency`` at a
    time, each written as soon as it is checked (see the module docstring). ``limit``: at
    most this many trajectories. ``progress``: a bar on stderr. Never raises for a
    trajectory that cannot be annotated: it is in the report's ``failed`` and in
    :meth:`ExperienceBank.annotation_failures`."""
    if concurrency < 1:
        raise ValueError(f"concurrency is at least 1, got {concurrency}")
    t0 = time.perf_counter()
    pending = pending_trajectories(bank)
    if limit is not None:
        pending = pending[: max(0, limit)]
    skipped = bank.info().annotated
    tally = _Tally()
    slots = asyncio.Semaphore(concurrency)
    wants_images = getattr(annotator, "wants_images", False) is True
    max_images = vision_limits_of(getattr(annotator, "llm", None)).max_images
    bar = _bar(progress, len(pending), annotator.name)

    def failed(t: Trajectory, reason: str, reply: str, attempts: int) -> None:
        run, dataset, sample_id, path = t.key
        f = AnnotationFailure(
            run, dataset, sample_id, path, annotator.name, reason, reply, attempts
        )
        bank.record_annotation_failure(f)
        tally.failed.append(f)

    async def one(t: Trajectory) -> None:
        async with slots:
            if wants_images:
                t = Trajectory(t.steps, _load_images(bank, t, max_images))
            ok = False
            try:
                result = await annotator.annotate(t)
                if len(result.annotations) != len(t.steps):
                    raise AnnotationFailed(
                        f"{len(result.annotations)} annotations for {len(t.steps)} steps",
                        attempts=result.attempts,
                    )
            except AnnotationFailed as e:
                tally.attempts += e.attempts
                failed(t, e.reason, e.reply, e.attempts)
            except Exception as e:  # a plugged-in annotator's bug must not end the run
                failed(t, f"{type(e).__name__}: {e}", "", 1)
                tally.attempts += 1
            else:
                tally.attempts += result.attempts
                todo = set(t.todo)
                notes = {
                    s.id: a
                    for s, a in zip(t.steps, result.annotations, strict=True)
                    if s.id in todo
                }
                bank.annotate(notes)
                bank.clear_annotation_failure(*t.key)
                tally.annotated += len(notes)
                tally.trajectories += 1
                ok = True
            if bar is not None:
                bar.advance()
            if on_trajectory is not None:
                on_trajectory(t, ok)

    meter = Meter()  # every model call of the build (the annotator's tasks share it)
    try:
        with metering(meter):
            await asyncio.gather(*(one(t) for t in pending))
    finally:
        if bar is not None:
            bar.close()
    return AnnotationReport(
        annotator=annotator.name,
        annotated=tally.annotated,
        trajectories=tally.trajectories,
        failed=tuple(tally.failed),
        skipped=skipped,
        attempts=tally.attempts,
        seconds=time.perf_counter() - t0,
        pending=len(pending),
        usage=meter if meter.calls else None,
    )


class _Bar:
    def __init__(self, total: int, who: str) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("annotating ({task.description})"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trajectories"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=safe_console(stderr=True),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(who, total=total)

    def advance(self) -> None:
        self._progress.advance(self._task)

    def close(self) -> None:
        self._progress.stop()


def _bar(show: bool, total: int, who: str) -> _Bar | None:
    return _Bar(total, who) if show and total else None


__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_MAX_ATTEMPTS",
    "AnnotationFailed",
    "AnnotationReport",
    "Annotator",
    "HindsightAnnotator",
    "Trajectory",
    "TrajectoryAnnotation",
    "annotate_bank",
    "pending_trajectories",
    "trajectories",
    "trajectory_prompt",
]
