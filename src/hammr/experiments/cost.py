"""What an experiment will cost before it starts: questions, model calls and tokens.

Each run's estimate is its number of questions times what one question took when measured,
from the first of:

1. the run's own stored questions (a run under way);
2. stored runs of the same system with the same model (``llm.backend`` and ``llm.model``),
   made the same way (demo or not), in the store;
3. the embedded model's first ``--demo`` run of the bundled experiment (benchmark (s),
   :mod:`hammr.experiments.demo_time`), under the demo budget.

The number of questions is counted from the data when ``--data-dir`` holds it (the same
draw ``hammr experiment run`` makes), else bounded by the limit per suite entry. Memory
steps ask the model too (a reflection per wrong answer, insights, hindsight annotation);
their calls are not stored per question, so they are not in the estimate, and it says so.

``hammr experiment run`` records each run's estimate with the run (``estimate`` in its
stored settings) before asking anything, so ``hammr experiment report`` puts the estimate a
user was shown beside what the run took.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hammr.eval.store import RunStore
    from hammr.experiments.spec import Experiment, Run


class PlannedStep(Protocol):
    """A run as an invocation would make it (:class:`hammr.experiments.runner.PlannedRun`)."""

    run: Run
    stored_as: str
    suite: str
    entries: tuple[str, ...]
    limit: int | None


@dataclass(frozen=True)
class PerQuestion:
    """What one question took, on average, where it was measured."""

    calls: float
    prompt_tokens: float
    completion_tokens: float
    questions: int
    source: str

    @classmethod
    def of(cls, usage: Sequence[int], source: str) -> PerQuestion | None:
        n, calls, prompt, completion = usage
        if n <= 0:
            return None
        return cls(calls / n, prompt / n, completion / n, n, source)


@dataclass(frozen=True)
class RunEstimate:
    run: str
    system: str
    questions: int | None
    """None: unknown (no limit and no data to count)."""
    bound: str
    """Why ``questions`` is only an upper bound, the limit per entry ('' when counted)."""
    per_question: PerQuestion | None

    @property
    def calls(self) -> float | None:
        if self.questions is None or self.per_question is None:
            return None
        return self.questions * self.per_question.calls

    def totals(self) -> tuple[float, float, float] | None:
        if self.questions is None or self.per_question is None:
            return None
        p = self.per_question
        return (
            self.questions * p.calls,
            self.questions * p.prompt_tokens,
            self.questions * p.completion_tokens,
        )

    def recorded(self) -> dict[str, Any]:
        """What ``hammr experiment run`` keeps with the run."""
        out: dict[str, Any] = {"questions": self.questions}
        totals = self.totals()
        if totals is not None and self.per_question is not None:
            out.update(
                calls=round(totals[0], 1),
                prompt_tokens=round(totals[1]),
                completion_tokens=round(totals[2]),
                source=self.per_question.source,
            )
        return out


def _model(config: Mapping[str, Any]) -> tuple[Any, Any]:
    return config.get("llm.backend"), config.get("llm.model")


def stored_per_question(
    store: RunStore, system: str, config: Mapping[str, Any], *, demo: bool, skip: Sequence[str]
) -> PerQuestion | None:
    """Per question over the stored runs of ``system`` made with this model, demo or not
    as asked (``skip``: runs left out)."""
    runs: list[str] = []
    for name in store.run_names():
        if name in skip:
            continue
        info = store.run_info(name)
        if info is None or info.system != system or _model(info.config) != _model(config):
            continue
        if bool(info.settings.get("demo")) != demo:
            continue
        runs.append(name)
    backend, model = _model(config)
    where = f"{len(runs)} stored run{'' if len(runs) == 1 else 's'} of {system} with {backend} "
    return PerQuestion.of(store.usage(runs), f"{where}{model or ''}".rstrip())


def bundled_per_question(experiment: str, run: str) -> PerQuestion | None:
    """Per question in the embedded model's first --demo run of a bundled experiment."""
    from hammr.experiments.demo_time import read_durations

    measured = read_durations().get(experiment)
    if measured is None:
        return None
    figures = measured.runs.get(run)
    if not figures:
        return None
    usage = [int(figures.get(k, 0)) for k in ("questions", "calls", "prompt_tokens",
                                                "completion_tokens")]  # fmt: skip
    return PerQuestion.of(
        usage,
        f"the embedded model's first --demo run of {experiment} ({measured.date}, demo budget)",
    )


def per_question(
    store: RunStore | None,
    experiment: Experiment,
    step: PlannedStep,
    config: Mapping[str, Any],
    *,
    demo: bool,
) -> PerQuestion | None:
    """What one question of ``step`` takes, from the first source that measured it (see the
    module docstring)."""
    if store is not None:
        own = PerQuestion.of(store.usage([step.stored_as]), "its own stored questions")
        if own is not None:
            return own
        found = stored_per_question(store, step.run.system, config, demo=demo,
                                    skip=(step.stored_as,))  # fmt: skip
        if found is not None:
            return found
    return bundled_per_question(experiment.name, step.run.name)


def questions(step: PlannedStep, data_dir: Path | None, seed: int) -> tuple[int | None, str]:
    """(how many questions the run asks, why that is only a bound or ''): counted from the
    data when ``data_dir`` holds its files, else the limit times its entries."""
    from hammr.experiments.validate import load_run_suite

    suite = load_run_suite(step.suite, step.entries)
    missing = [
        e.name for e in suite.entries if data_dir is None or not e.file_path(data_dir).exists()
    ]
    why = "no --data-dir to count in"
    if data_dir is not None and missing:
        why = f"not counted: {data_dir} lacks {', '.join(missing)}"
    elif data_dir is not None:
        try:
            samples = suite.samples(data_dir, limit=step.limit, seed=seed, half=step.run.split,
                                    split_seed=step.run.split_seed)  # fmt: skip
            return len(samples), ""
        except (ValueError, OSError) as e:
            why = f"not counted: {e}"
    bound = 0
    for entry in suite.entries:
        drawn = entry.draw if entry.draw is None or not step.run.split else -(-entry.draw // 2)
        known = [n for n in (step.limit, drawn) if n is not None]
        if not known:
            return None, why
        bound += min(known)
    return bound, why


def estimate_runs(
    experiment: Experiment,
    runs: Sequence[PlannedStep],
    store: RunStore | None,
    config: Mapping[str, Any],
    *,
    data_dir: Path | None,
    seed: int,
    demo: bool,
) -> list[RunEstimate]:
    """Each run's estimate (see the module docstring); ``store``, when given, is read."""
    out: list[RunEstimate] = []
    for step in runs:
        n, bound = questions(step, data_dir, seed)
        found = per_question(store, experiment, step, config, demo=demo)
        out.append(RunEstimate(step.run.name, step.run.system, n, bound, found))
    return out


def _count(x: float) -> str:
    return f"{x:,.0f}"


def estimate_lines(estimates: Sequence[RunEstimate], *, memory_steps: int) -> list[str]:
    """The estimate as ``hammr experiment show`` prints it."""
    out = ["cost estimate (questions x what one question took where it was measured):"]
    total = [0.0, 0.0, 0.0]
    asked = 0
    unknown: list[str] = []
    for e in estimates:
        if e.questions is None:
            out.append(f"  run {e.run} ({e.system}): questions unknown ({e.bound}, and no "
                       "limit per entry bounds them)")  # fmt: skip
            unknown.append(e.run)
            continue
        n = f"{'up to ' if e.bound else ''}{e.questions:,} questions"
        if e.bound:
            n += f" ({e.bound})"
        totals = e.totals()
        if totals is None or e.per_question is None:
            why = "nothing measured yet (run it with --demo first)"
            out.append(f"  run {e.run} ({e.system}): {n}; {why}")
            unknown.append(e.run)
            continue
        p = e.per_question
        out.append(
            f"  run {e.run} ({e.system}): {n} x {p.calls:.1f} calls "
            f"({_count(p.prompt_tokens)} prompt / {_count(p.completion_tokens)} completion "
            f"tokens) = {_count(totals[0])} calls, {_count(totals[1])} prompt / "
            f"{_count(totals[2])} completion tokens; per question from {p.source} "
            f"({p.questions} questions)"
        )
        total = [a + b for a, b in zip(total, totals, strict=True)]
        asked += e.questions or 0
    line = (
        f"  total: {asked:,} questions, about {_count(total[0])} model calls, "
        f"{_count(total[1])} prompt / {_count(total[2])} completion tokens"
    )
    if unknown:
        line += f" (without run{'' if len(unknown) == 1 else 's'} {', '.join(unknown)})"
    out.append(line)
    if memory_steps:
        out.append(
            f"  not counted: the {memory_steps} memory step{'' if memory_steps == 1 else 's'} "
            "(they ask the model too: reflections, insights or hindsight annotations)"
        )
    out.append(
        "  runs another experiment already asked the same way are shared, not asked again; "
        "a real run with more steps than a demo's takes more per question"
    )
    return out


def actual_lines(store: RunStore, stored: Mapping[str, str]) -> list[str]:
    """Per run (name in the file -> its name in the store): what its stored questions took
    beside the estimate recorded when it started."""
    from hammr.experiments.sharing import shared_counts

    out: list[str] = []
    for run, name in stored.items():
        info = store.run_info(name)
        if info is None:
            continue
        n, calls, prompt, completion = store.usage([name])
        said = (
            f"run {run}: {n:,} questions took {calls:,} model calls, {prompt:,} prompt / "
            f"{completion:,} completion tokens"
        )
        shared = sum(shared_counts(info.settings).values())
        if shared:
            said += f" ({shared:,} of the questions shared: asked once, by the run they came from)"
        before = info.settings.get("estimate")
        if isinstance(before, Mapping) and isinstance(before.get("calls"), int | float):
            said += (
                f"; estimated {_count(float(before['calls']))} calls, "
                f"{_count(float(before.get('prompt_tokens', 0)))} prompt / "
                f"{_count(float(before.get('completion_tokens', 0)))} completion tokens "
                f"(per question from {before.get('source', '?')})"
            )
        elif isinstance(before, Mapping):
            said += "; no estimate (nothing was measured before it started)"
        out.append(said)
    return out


__all__ = [
    "PerQuestion",
    "RunEstimate",
    "actual_lines",
    "bundled_per_question",
    "estimate_lines",
    "estimate_runs",
    "per_question",
    "questions",
    "stored_per_question",
]
