"""Experiences from stored runs: every step of every trace becomes one (state, action) unit.

MuSEAgent (section 3.2) cuts trajectories into atomic state-action transitions. Here each
step of a stored trace, and each step of every child agent's trace nested in it, becomes an
:class:`Experience`:

* **state** (:class:`State`): the question the agent that took the step was answering (a
  child agent's own question for its steps), the task descriptor (:class:`Task`: the
  sample's dataset and sub-task, i.e. its ``question_type``), the images seen so far (the
  content hashes of the trace's input images, then of the images earlier steps returned, in
  order, each once) and the history (one ``action -> observation`` line per earlier step of
  the same trace, clipped);
* **action**: the step's action text as the agent wrote it (``boxes = DetectObjects(image,
  'car')``), else ``Tool(arg=...)`` from its tool and arguments, ``[Finish]: answer`` for a
  finish, or what went wrong for a step that made no valid action;
* **observation**: what the step returned (clipped);
* **provenance** (:class:`Provenance`): run, dataset, sample id, the trace path (``""`` for
  the top trace, ``"2.child"`` for the child agent called at the top trace's step 2,
  ``"2.child.0.child"`` below it), the step's position in its trace, the agent, whether the
  sample was answered correctly (its score at least ``correct_at``, 1 by default), its score,
  the ground-truth answers (for the annotator; never shown to an agent) and the prediction.

An experience's ``id`` is a stable hash of (run, dataset, sample id, trace path, step), so
harvesting a run twice gives the same ids and the bank stores each once. A sample whose
failed record ``hammr eval --retry-failed`` replaced has a new trace: its ``attempt`` (1, 2,
...) joins the hash, so the new steps never pass for the old ones a bank already holds.

A trace may refer to an image the run store does not hold (a store copied without its
images table, a hand-edited trace): the experience keeps the hash in ``images`` and lists it
in ``missing_images``; nothing fails. Samples whose status says they got no fair try
(``error``, ``timeout``, ``llm_failure``: :data:`hammr.eval.store.FAILED_STATUSES`) are left
out unless asked for, and so are samples without a trace; a run with no sample left to
learn from is an :class:`ExperienceError` naming the run.

:func:`state_at` builds the same :class:`State` from a live trace, so a query made while an
agent runs matches what the bank stored.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hammr.eval.store import FAILED_STATUSES, RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace, image_refs


class ExperienceError(ValueError):
    """Experiences cannot be made from what was given (unknown run, nothing finished)."""


@dataclass(frozen=True)
class Clip:
    """How much text an experience keeps."""

    observation: int = 400
    """Characters of a step's own observation."""
    history_line: int = 240
    """Characters of one history line (``action -> observation``)."""
    history_lines: int = 12
    """The most recent lines kept; older ones are summarised as ``(N earlier steps)``."""


DEFAULT_CLIP = Clip()


@dataclass(frozen=True)
class Task:
    """The task descriptor of a state: the sample's dataset and sub-task."""

    dataset: str
    sub_task: str = ""

    def text(self) -> str:
        return f"{self.dataset} / {self.sub_task}" if self.sub_task else self.dataset


@dataclass(frozen=True)
class State:
    """What the agent knew when it chose an action (MuSEAgent's s_t)."""

    question: str
    task: Task
    images: tuple[str, ...] = ()
    """Content hashes of the images seen so far, inputs first, each once."""
    history: tuple[str, ...] = ()
    """``action -> observation`` lines of the earlier steps, oldest first (clipped)."""

    @classmethod
    def of(
        cls,
        question: str,
        dataset: str = "",
        sub_task: str = "",
        *,
        images: Sequence[str] = (),
        history: Sequence[str] = (),
    ) -> State:
        """A state from its parts (a query typed by hand, a test)."""
        return cls(question, Task(dataset, sub_task), tuple(images), tuple(history))


@dataclass(frozen=True)
class Provenance:
    """Where an experience came from."""

    run: str
    dataset: str
    sample_id: str
    trace_path: str
    """``""`` for the sample's top trace; ``"2.child"`` for the child trace of its step 2."""
    step: int
    """The step's position in its trace (0-based)."""
    agent: str
    correct: bool
    """The sample was answered correctly (its score at least the harvest's ``correct_at``)."""
    sample_score: float
    answers: tuple[str, ...] = ()
    """The sample's ground truth, for the annotator (never shown to an agent)."""
    prediction: str | None = None
    attempt: int = 0
    """The stored record's attempt (:attr:`hammr.eval.types.RunRecord.attempt`)."""

    @property
    def source(self) -> tuple[str, str, str]:
        """The source task: one sample of one run."""
        return (self.run, self.dataset, self.sample_id)

    def place(self) -> str:
        """``run/dataset/sample_id`` and the step, e.g. ``r1/vstar/17 step 3`` or
        ``r1/vstar/17 2.child step 0``."""
        where = f"{self.run}/{self.dataset}/{self.sample_id}"
        return f"{where} {self.trace_path + ' ' if self.trace_path else ''}step {self.step}"


@dataclass(frozen=True)
class Experience:
    """One (state, action) unit of a stored trajectory (see the module docstring)."""

    id: str
    state: State
    action: str
    tool: str | None
    observation: str
    provenance: Provenance
    missing_images: tuple[str, ...] = ()
    """Hashes in ``state.images`` that the run store did not hold."""

    @property
    def learned_from(self) -> str:
        """``"success"`` when the source sample was answered correctly, else ``"failure"``."""
        return "success" if self.provenance.correct else "failure"


def experience_id(
    run: str, dataset: str, sample_id: str, trace_path: str, step: int, attempt: int = 0
) -> str:
    """The stable id of the experience made from one step (24 hex digits); ``attempt`` (of a
    retried sample) counts only when it is not 0, so first answers keep their ids."""
    parts: list[object] = [run, dataset, sample_id, trace_path, step]
    if attempt:
        parts.append(attempt)
    key = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


# -- text of steps ----------------------------------------------------------------------------


def clip_text(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs made one space), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def _arg_text(value: Any) -> str:
    if isinstance(value, dict):
        if "$image" in value:
            return "<image>"
        if "$box" in value:
            return f"box{value['$box']}"
        if "$page" in value:
            return f"<page {value['$page']}>"
        if "$entity" in value:
            return f"<entity {value['$entity']}>"
        return "{" + ", ".join(f"{k}: {_arg_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_arg_text(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, default=str)


def action_text(step: Step) -> str:
    """What the step did, as one line (see the module docstring)."""
    if step.action:
        return step.action
    if step.tool:
        args = ", ".join(f"{k}={_arg_text(v)}" for k, v in step.arguments.items())
        return f"{step.tool}({args})"
    if step.finish is not None:
        return f"[Finish]: {step.finish}"
    if step.error_kind:
        return f"(no valid action: {step.error_kind})"
    return "(no action)"


def observation_text(step: Step) -> str:
    """What the step returned (its observation; a finish step's answer)."""
    if step.observation:
        return step.observation
    if step.error:
        return f"#ERROR#: {step.error}"
    if step.finish is not None and step.action:
        return step.finish
    return ""


def history_line(step: Step, clip: Clip = DEFAULT_CLIP) -> str:
    obs = observation_text(step)
    line = f"{action_text(step)} -> {obs}" if obs else action_text(step)
    return clip_text(line, clip.history_line)


def _history(lines: list[str], clip: Clip) -> tuple[str, ...]:
    keep = max(0, clip.history_lines)
    if len(lines) <= keep:
        return tuple(lines)
    dropped = len(lines) - keep
    recent = lines[len(lines) - keep :]
    return (f"({dropped} earlier step{'s' if dropped != 1 else ''})", *recent)


def _add_refs(seen: list[str], value: Any) -> None:
    for h in image_refs(value):
        if h not in seen:
            seen.append(h)


def _states(trace: Trace, task: Task, clip: Clip) -> Iterator[tuple[Step | None, State]]:
    """(step, the state before it) for each step of ``trace``, then (None, the state after
    the last step)."""
    images: list[str] = []
    _add_refs(images, trace.inputs)
    lines: list[str] = []
    for step in trace.steps:
        yield step, State(trace.question, task, tuple(images), _history(lines, clip))
        _add_refs(images, step.output)
        lines.append(history_line(step, clip))
    yield None, State(trace.question, task, tuple(images), _history(lines, clip))


def state_at(trace: Trace, step: int, task: Task, clip: Clip = DEFAULT_CLIP) -> State:
    """The state the agent of ``trace`` was in before its step ``step`` (a position; the
    number of steps gives the state after the last one, where a running agent is now):
    question, task, the images seen so far and the history of the earlier steps."""
    if not 0 <= step <= len(trace.steps):
        raise ExperienceError(f"step {step} is outside the trace's {len(trace.steps)} steps")
    for i, (_, state) in enumerate(_states(trace, task, clip)):
        if i == step:
            return state
    raise AssertionError("unreachable")


# -- harvesting -------------------------------------------------------------------------------


class ImageLookup(Protocol):
    """Where image bytes come from by content hash (a :class:`RunStore` is one)."""

    def image_png(self, hash_: str) -> bytes | None: ...


def _walk(trace: Trace, path: str) -> Iterator[tuple[str, Trace]]:
    yield path, trace
    for i, s in enumerate(trace.steps):
        if s.child is not None:
            yield from _walk(s.child, f"{path}.{i}.child" if path else f"{i}.child")


def experiences_from_trace(
    trace: Trace,
    source: Provenance,
    task: Task,
    *,
    clip: Clip = DEFAULT_CLIP,
    has_image: Callable[[str], bool] | None = None,
) -> list[Experience]:
    """Every step of ``trace`` and of its children as experiences. ``source`` gives the
    sample's fields (its ``trace_path``, ``step`` and ``agent`` are set per step), ``task``
    the task descriptor; ``has_image`` says whether an image hash can be had (default: the
    trace holds the image)."""
    held = trace.all_images()
    known = has_image or held.__contains__
    out: list[Experience] = []
    for path, t in _walk(trace, ""):
        for i, (step, state) in enumerate(_states(t, task, clip)):
            if step is None:
                break
            prov = replace(source, trace_path=path, step=i, agent=t.agent)
            out.append(
                Experience(
                    id=experience_id(prov.run, prov.dataset, prov.sample_id, path, i, prov.attempt),
                    state=state,
                    action=action_text(step),
                    tool=step.tool,
                    observation=clip_text(observation_text(step), clip.observation),
                    provenance=prov,
                    missing_images=tuple(h for h in state.images if not known(h)),
                )
            )
    return out


@dataclass(frozen=True)
class Harvest:
    """The experiences of some runs, and what was left out."""

    experiences: tuple[Experience, ...]
    samples: int
    """Samples whose traces gave the experiences."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Samples left out, by reason (``status error``, ``no trace``, ...)."""
    missing_images: frozenset[str] = frozenset()
    """Image hashes the traces refer to that the store does not hold."""

    def by_source(self) -> dict[tuple[str, str, str], list[Experience]]:
        """The experiences of each sample (run, dataset, sample id), in trace order."""
        out: dict[tuple[str, str, str], list[Experience]] = {}
        for e in self.experiences:
            out.setdefault(e.provenance.source, []).append(e)
        return out


PAGE = 200
"""Samples read from the store at a time."""


def sample_experiences(
    record: RunRecord,
    *,
    correct_at: float = 1.0,
    clip: Clip = DEFAULT_CLIP,
    has_image: Callable[[str], bool] | None = None,
) -> list[Experience]:
    """The experiences of one stored sample (none when it has no trace)."""
    trace = record.trace
    if not isinstance(trace, Trace):
        return []
    template = Provenance(
        run=record.run,
        dataset=record.dataset,
        sample_id=record.sample_id,
        trace_path="",
        step=0,
        agent=trace.agent,
        correct=float(record.score) >= correct_at,
        sample_score=float(record.score),
        answers=tuple(record.answers),
        prediction=record.prediction,
        attempt=record.attempt,
    )
    task = Task(record.dataset, record.question_type)
    return experiences_from_trace(trace, template, task, clip=clip, has_image=has_image)


def experiences_from_runs(
    store: RunStore,
    runs: str | Iterable[str],
    *,
    correct_at: float = 1.0,
    include_failed: bool = False,
    clip: Clip = DEFAULT_CLIP,
) -> Harvest:
    """Every step of every stored trace of ``runs`` (child traces too) as experiences, in the
    order the samples finished. ``correct_at``: the score from which a sample counts as
    answered correctly. ``include_failed`` keeps samples with a failed status (see the
    module docstring). Raises :class:`ExperienceError` for an unknown run, or a run with no
    finished sample to learn from (the message names the run and what it holds)."""
    names = [runs] if isinstance(runs, str) else list(runs)
    if not names:
        raise ExperienceError("no run given to take experiences from")
    for name in names:
        if store.run_info(name) is None:
            raise ExperienceError(store.unknown_run_message(name))
    present: dict[str, bool] = {}

    def has_image(h: str) -> bool:
        if h not in present:
            present[h] = store.image_png(h) is not None
        return present[h]

    experiences: list[Experience] = []
    skipped: Counter[str] = Counter()
    samples = 0
    for name in names:
        used = 0
        left_out: Counter[str] = Counter()
        offset = 0
        while True:
            page = store.records(name, offset, PAGE, traces=True, images=False)
            if not page:
                break
            offset += len(page)
            for record in page:
                if record.status in FAILED_STATUSES and not include_failed:
                    left_out[f"status {record.status}"] += 1
                    continue
                if not isinstance(record.trace, Trace):
                    left_out["no trace"] += 1
                    continue
                found = sample_experiences(
                    record, correct_at=correct_at, clip=clip, has_image=has_image
                )
                if not found:
                    left_out["no steps"] += 1
                    continue
                experiences.extend(found)
                used += 1
        if used == 0:
            stored = sum(left_out.values())
            why = ", ".join(f"{n} {reason}" for reason, n in sorted(left_out.items()))
            raise ExperienceError(
                f"run {name!r} has no finished samples to take experiences from "
                + (f"({stored} stored: {why})" if stored else "(it has no stored samples)")
            )
        samples += used
        skipped.update(left_out)
    missing = frozenset(h for h, ok in present.items() if not ok)
    return Harvest(tuple(experiences), samples, dict(sorted(skipped.items())), missing)


__all__ = [
    "DEFAULT_CLIP",
    "Clip",
    "Experience",
    "ExperienceError",
    "Harvest",
    "ImageLookup",
    "Provenance",
    "State",
    "Task",
    "action_text",
    "clip_text",
    "experience_id",
    "experiences_from_runs",
    "experiences_from_trace",
    "history_line",
    "observation_text",
    "sample_experiences",
    "state_at",
]
