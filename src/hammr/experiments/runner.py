"""``hammr experiment run``: every step of an experiment not yet finished, into the run store.

The steps go in :meth:`~hammr.experiments.spec.Experiment.order` (a memory after the run it
learns from, a run after the memory it reads). Each run is one :func:`hammr.eval.evaluate.
evaluate` (so exactly what ``hammr eval`` would store), named by
:func:`~hammr.experiments.spec.stored_run_name`; each memory step is one ``hammr memory
build | reflect | insights`` as a function, writing its file beside the store
(:func:`hammr.experiments.state.memory_path`).

Idempotent and resumable:

* before anything starts, every stored run's identity (system, suite and entries, split,
  limit, seeds, step limit, settings, the memory it reads, data folder, demo) and its
  configuration (the model, and every other setting that changes answers:
  :mod:`hammr.eval.resume`) are compared with what this invocation would run; any
  difference refuses the whole command, naming the run and the first differing setting
  (:class:`RunnerError`), so no run's cells ever mix two models;
* a run whose planned samples are all stored is skipped without building its system or its
  model (no model call); a killed run asks only its missing samples (the eval runner skips
  stored ones, so nothing is counted twice); a memory file made from the same identity is
  kept;
* a suite entry whose file is missing under the data folder is left out of its run, with
  the reason; a run none of whose entries has data is ``no_data`` (and the steps that need
  it), and the other runs still go.

A run whose stored samples are failures (every one, or more than half for one cause:
:mod:`hammr.eval.run_health`) is a failed step, named with its cause, whether it ran now or
before; the steps that need it do not run, the others still do.

The suite entry is the unit of data: a run whose suite has some entries without their files
runs the others (warned about, and the report's cells of the missing entries say why); a
run with no entry's data at all is ``no_data``.

Exit status (:attr:`ExperimentOutcome.exit_code`): 0 when every step finished (some of its
entries may have lacked data: warned about, one line each), 1 when a step failed, stopped
partway or had no data at all, 2 for bad input (refused before anything ran), 130 when
interrupted.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hammr.experiments.spec import (
    Experiment,
    ExperimentError,
    MemoryStep,
    Run,
    check_prefix,
    stored_run_name,
)
from hammr.experiments.state import (
    RecordError,
    StepState,
    check_record,
    failed_reason,
    fingerprint,
    memory_path,
    read_record,
    state_path,
    step_key,
    step_states,
    update_record,
)

if TYPE_CHECKING:
    from hammr.config import Config
    from hammr.eval.store import RunStore
    from hammr.eval.suites import Suite

Echo = Callable[[str], None]

IDENTITY_KEYS = (
    "system",
    "suite",
    "entries",
    "split",
    "split_seed",
    "limit",
    "seed",
    "max_steps",
    "settings",
    "memory",
    "data_dir",
    "demo",
)
"""What a stored run must share with this invocation to be resumed or skipped, in the order a
refusal names the first difference."""


class RunnerError(Exception):
    """The experiment cannot run (nothing was started): one line, and the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RunOptions:
    """``hammr experiment run``'s options."""

    data_dir: Path
    demo: bool = False
    limit: int | None = None
    """Samples per suite entry (default: the file's [data] limit; none: all)."""
    prefix: str = ""
    seed: int = 0
    store_path: Path | None = None
    config_path: Path | None = None
    config: Config | None = None
    """Used instead of reading ``config_path``."""
    executor: str = "local"
    ray_address: str | None = None
    workers: int = 2
    concurrency: int | None = None
    timeout_s: float | None = None
    judge: str = "auto"
    bem_checkpoint: Path | None = None
    retry_failed: bool = False
    progress: bool | None = None
    share: bool = True
    """Take finished answers and memory files made the same way by another experiment
    (:mod:`hammr.experiments.sharing`) instead of asking again."""


def _judge_problem(options: RunOptions, base: Config) -> str | None:
    """Why --judge and --bem-checkpoint (or their settings) cannot judge every run (as
    ``hammr eval`` says)."""
    from hammr.eval.job import JudgeChoice

    return JudgeChoice.of(options.judge, options.bem_checkpoint, base).problem()


@dataclass
class PlannedRun:
    """One run as this invocation would make it."""

    run: Run
    stored_as: str
    suite: str
    entries: tuple[str, ...]
    limit: int | None
    identity: dict[str, Any]
    memory_file: Path | None
    settings: dict[str, Any] = field(default_factory=dict)
    """The run's config overrides (with --demo, the demo budget over them)."""


@dataclass
class PlannedMemory:
    step: MemoryStep
    source: PlannedRun
    path: Path
    identity: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    """The file's [settings], the step's over them (with --demo, the demo budget over both)."""


@dataclass
class ExperimentOutcome:
    states: dict[str, StepState] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    """Keys of the steps that did work in this invocation."""
    skipped: list[str] = field(default_factory=list)
    """Keys of the steps already finished before it."""

    @property
    def exit_code(self) -> int:
        bad = [
            s
            for s in self.states.values()
            if s.status in ("failed", "partial", "not_run", "no_data")
        ]
        return 1 if bad else 0


# --- planning --------------------------------------------------------------------------------


def store_path_of(options: RunOptions) -> Path:
    from hammr.eval.store import default_store_path

    path = options.store_path if options.store_path is not None else default_store_path()
    return path.expanduser()


def demo_entries(experiment: Experiment, run: str) -> tuple[str, ...]:
    """The entries of the demo suite that ``run``'s cells need (empty: every entry).

    On the demo data a run answers only what its table cells show: a column of one question
    type asks only that type's questions, so a smoke run of a table over two datasets costs two
    entries, not the demo set's eight. A run that feeds a memory or a figure, or a cell over
    everything (overall, explanation scores, labels, steps), keeps every entry."""
    from hammr.experiments.validate import demo_cell, load_run_suite

    suite_name = experiment.data.demo_suite
    if suite_name is None:
        return ()
    if any(m.source == run for m in experiment.memories) or any(
        run in f.runs for f in experiment.figures
    ):
        return ()
    suite = load_run_suite(suite_name)
    wanted: set[str] = set()
    for table in experiment.tables:
        for row in table.rows:
            if row.run != run:
                continue
            for column in table.columns:
                cell = demo_cell(experiment, column.cell)
                if cell.kind == "entry":
                    wanted.add(cell.arg)
                elif cell.kind == "aggregate":
                    wanted.update(next(a.entries for a in suite.aggregates if a.name == cell.arg))
                elif cell.kind == "type":
                    typed = [e.name for e in suite.entries if e.question_type == cell.arg]
                    untyped = [e.name for e in suite.entries if not e.question_type]
                    wanted.update(typed + untyped)
                else:
                    return ()
    if not wanted or wanted == {e.name for e in suite.entries}:
        return ()
    return tuple(e.name for e in suite.entries if e.name in wanted)


def plan(experiment: Experiment, options: RunOptions) -> list[PlannedRun | PlannedMemory]:
    """Every step of ``experiment`` as ``options`` would run it, in order, with the
    identities stored runs and memory files are compared against. RunnerError for --demo on
    a file without a demo suite."""
    data = experiment.data
    if options.demo and data.demo_suite is None:
        raise RunnerError(
            f"experiment {experiment.name!r} has no [data] demo_suite, so --demo cannot run it"
        )
    store_path = store_path_of(options)
    limit = options.limit if options.limit is not None else data.limit
    budget: dict[str, Any] = {}
    if options.demo:
        limit = options.limit if options.limit is not None else data.demo_questions
        budget = data.demo_budget
    data_dir = str(options.data_dir.expanduser().resolve())
    runs: dict[str, PlannedRun] = {}
    memories: dict[str, PlannedMemory] = {}
    out: list[PlannedRun | PlannedMemory] = []

    def name(step: str) -> str:
        return stored_run_name(experiment.name, step, prefix=options.prefix, demo=options.demo)

    for step in experiment.order():
        if isinstance(step, Run):
            suite = data.demo_suite if options.demo and data.demo_suite else step.suite
            entries = demo_entries(experiment, step.name) if options.demo else step.entries
            memory = memories[step.memory] if step.memory is not None else None
            settings = {**step.settings, **budget}
            identity = {
                "system": step.system,
                "suite": suite,
                "entries": list(entries),
                "split": step.split,
                "split_seed": step.split_seed,
                "limit": limit,
                "seed": options.seed,
                "max_steps": step.max_steps,
                "settings": dict(sorted(settings.items())),
                "memory": memory.identity if memory is not None else None,
                "data_dir": data_dir,
                "demo": options.demo,
            }
            planned_run = PlannedRun(
                step,
                name(step.name),
                suite,
                entries,
                limit,
                identity,
                memory.path if memory is not None else None,
                settings,
            )
            runs[step.name] = planned_run
            out.append(planned_run)
        else:
            source = runs[step.source]
            path = memory_path(
                store_path, experiment.name, step.name, prefix=options.prefix, demo=options.demo
            )
            settings = {**experiment.settings, **step.settings, **budget}
            identity = {
                "command": step.command,
                "from": source.stored_as,
                "source": fingerprint(source.identity),
                "settings": dict(sorted({**step.settings, **budget}.items())),
            }
            planned_memory = PlannedMemory(step, source, path, identity, settings)
            memories[step.name] = planned_memory
            out.append(planned_memory)
    return out


def _first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """The first key (dotted into ``settings``) whose value differs, as ``KEY = OLD (now
    NEW)``; None when they agree."""
    for key in (*IDENTITY_KEYS, *sorted(set(old) | set(new) - set(IDENTITY_KEYS))):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key == "settings" and isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    return f"setting {k} = {a.get(k, '(unset)')!r} (now {b.get(k, '(unset)')!r})"
        return f"{key} = {a!r} (now {b!r})"
    return None


def check_identities(
    experiment: Experiment,
    steps: list[PlannedRun | PlannedMemory],
    store: RunStore,
    record: Any,
    configs: Mapping[str, Config] | None = None,
) -> None:
    """Refuse (RunnerError, one line) when a stored run or memory file of this experiment was
    made otherwise than this invocation would make it: its identity, or (``configs``: step
    key -> the configuration this invocation gives it) a setting of its configuration that
    changes answers, the model above all (:func:`hammr.eval.resume.config_changes`)."""
    from hammr.eval.evaluate import recorded_config
    from hammr.eval.resume import config_changes

    for step in steps:
        if isinstance(step, PlannedRun):
            info = store.run_info(step.stored_as)
            if info is None:
                continue
            stored = info.settings.get("identity")
            if not isinstance(stored, dict) or info.settings.get("experiment") != experiment.name:
                raise RunnerError(
                    f"run {step.run.name!r}: the store already holds a run named "
                    f"{step.stored_as!r} that this experiment did not make; rename with --prefix"
                )
            diff = _first_difference(stored, step.identity)
            cfg = (configs or {}).get(step_key(step.run))
            if diff is None and cfg is not None:
                diff = config_changes(info.config, recorded_config(cfg))[0]
            if diff is not None:
                raise RunnerError(
                    f"run {step.run.name!r} is stored as {step.stored_as!r} with {diff}; "
                    "rename with --prefix to keep both"
                )
        else:
            entry = record.get(step_key(step.step)) or {}
            stored_identity = entry.get("identity")
            if step.path.exists() and isinstance(stored_identity, dict):
                diff = _first_difference(stored_identity, step.identity)
                if diff is not None:
                    raise RunnerError(
                        f"memory step {step.step.name!r}: {step.path} was made with {diff}; "
                        "rename with --prefix to keep both"
                    )


# --- running ---------------------------------------------------------------------------------


def missing_entries(suite: Suite, data_dir: Path) -> dict[str, str]:
    """The suite's entries whose file is not under ``data_dir``, each with why (an entry is
    the unit of data: the others still run)."""
    out: dict[str, str] = {}
    for entry in suite.entries:
        path = entry.file_path(data_dir)
        if not path.exists():
            out[entry.name] = (
                f"entry {entry.name!r} needs {path} ({entry.file!r} under the data folder)"
            )
    return out


def _run_config(base: Config, experiment: Experiment, step: PlannedRun) -> Config:
    from hammr.config import ConfigError, with_settings

    settings = dict(step.settings)
    if step.memory_file is not None:
        settings["memory.path"] = str(step.memory_file)
    try:
        return with_settings(base, settings, f"experiment {experiment.name} run {step.run.name}")
    except ConfigError as e:
        raise RunnerError(str(e)) from None


def _memory_config(base: Config, experiment: Experiment, step: PlannedMemory) -> Config:
    from hammr.config import ConfigError, with_settings

    settings = step.settings
    try:
        return with_settings(
            base, settings, f"experiment {experiment.name} memory {step.step.name}"
        )
    except ConfigError as e:
        raise RunnerError(str(e)) from None


def _quiet(_: str) -> None:
    return None


def run_experiment(
    experiment: Experiment, options: RunOptions, *, say: Echo = _quiet, note: Echo = _quiet
) -> ExperimentOutcome:
    """Run what is not yet finished of ``experiment`` (see the module docstring). Raises
    RunnerError before anything starts for bad input or a stored run made otherwise, and
    RunnerError with code 130 when interrupted (what is stored stays)."""
    from hammr.config import ConfigError, load_config
    from hammr.eval.store import RunStore, StoreError
    from hammr.experiments.validate import load_run_suite, validate

    try:
        base = (
            copy.deepcopy(options.config)
            if options.config is not None
            else load_config(options.config_path)
        )
    except ConfigError as e:
        raise RunnerError(str(e)) from None
    try:
        check_prefix(options.prefix)
        validate(experiment, agent_dir=str(base.get("agent.dir") or ""))
    except ExperimentError as e:
        raise RunnerError(str(e)) from None
    judge_problem = _judge_problem(options, base)
    if judge_problem is not None:  # refused before any step makes the store
        raise RunnerError(judge_problem)
    steps = plan(experiment, options)
    data_dir = options.data_dir.expanduser()
    if not data_dir.is_dir():
        raise RunnerError(f"--data-dir {options.data_dir}: no such folder")
    store_path = store_path_of(options)
    record_path = state_path(store_path, experiment.name, prefix=options.prefix, demo=options.demo)
    try:
        check_record(record_path)
    except RecordError as e:
        raise RunnerError(str(e)) from None
    try:
        store = RunStore(store_path)
    except (StoreError, OSError) as e:
        raise RunnerError(str(e)) from None
    outcome = ExperimentOutcome()
    try:
        record = read_record(record_path)
        # configurations first: a bad setting refuses the whole command before anything runs
        configs: dict[str, Config] = {}
        for step in steps:
            key = step_key(step.run if isinstance(step, PlannedRun) else step.step)
            if isinstance(step, PlannedRun):
                configs[key] = _run_config(base, experiment, step)
            else:
                configs[key] = _memory_config(base, experiment, step)
        check_identities(experiment, steps, store, record, configs)
        if options.demo:
            _forecast_first_demo(experiment, steps, store, base, note)
        blocked: dict[str, str] = {}  # step key -> why it cannot go (a step it needs did not)
        total = len(steps)
        for i, step in enumerate(steps, 1):
            if isinstance(step, PlannedRun):
                _do_run(
                    experiment, step, i, total, configs[step_key(step.run)], store, options,
                    record_path, blocked, outcome, note, load_run_suite,
                )  # fmt: skip
            else:
                _do_memory(
                    step, i, total, configs[step_key(step.step)], store, store_path, options,
                    record_path, blocked, outcome, note,
                )  # fmt: skip
        outcome.states = step_states(store, experiment, prefix=options.prefix, demo=options.demo)
    finally:
        store.close()
    return outcome


def _forecast_first_demo(
    experiment: Experiment,
    steps: Sequence[PlannedRun | PlannedMemory],
    store: RunStore,
    base: Config,
    note: Echo,
) -> None:
    """Before a first --demo run (none of its runs stored), how long it took when measured."""
    from hammr.eval.evaluate import recorded_config
    from hammr.experiments.demo_time import first_demo_forecast

    if any(store.run_info(s.stored_as) is not None for s in steps if isinstance(s, PlannedRun)):
        return
    line = first_demo_forecast(experiment.name, recorded_config(base))
    if line is not None:
        note(line)


def _fetch_hint(
    suite: Suite, missing: Mapping[str, str], data_dir: Path, experiment: Experiment,
    options: RunOptions,
) -> str:  # fmt: skip
    """ "; to fetch it: hammr data get ..." for the entries without their file (none on the
    demo data, which is bundled)."""
    from hammr.datasets.hints import get_command

    if options.demo:
        return ""
    command = get_command(
        [(suite.name, name) for name in missing], data_dir,
        experiment=experiment.name, limit=options.limit,
    )  # fmt: skip
    return f"; to fetch it: {command}" if command else ""


def _do_run(
    experiment: Experiment,
    step: PlannedRun,
    i: int,
    total: int,
    cfg: Config,
    store: RunStore,
    options: RunOptions,
    record_path: Path,
    blocked: dict[str, str],
    outcome: ExperimentOutcome,
    note: Echo,
    load_run_suite: Callable[..., Suite],
) -> None:
    from hammr.eval.evaluate import EvalError, EvalRequest, evaluate, result_lines
    from hammr.eval.runner import planned

    run = step.run
    key = step_key(run)
    head = f"step {i}/{total} run {run.name} ({step.stored_as})"
    if run.memory is not None and f"memory:{run.memory}" in blocked:
        why = blocked[f"memory:{run.memory}"]
        status = "no_data" if why.startswith("no data") else "not_run"
        reason = why if status == "no_data" else f"its memory {run.memory!r} was not made: {why}"
        update_record(record_path, key, {"status": status, "reason": reason})
        blocked[key] = reason
        note(f"{head}: skipped, {reason}")
        return
    suite = load_run_suite(step.suite, step.entries)
    data_dir = options.data_dir.expanduser()
    missing = missing_entries(suite, data_dir)
    present = tuple(e.name for e in suite.entries if e.name not in missing)
    hint = _fetch_hint(suite, missing, data_dir, experiment, options) if missing else ""
    if not present:
        reason = f"no data: suite {suite.name!r}: " + "; ".join(missing.values())
        update_record(record_path, key, {"status": "no_data", "reason": reason})
        blocked[key] = reason
        note(f"hammr: warning: {head}: {reason}{hint}")
        return
    done_entry: dict[str, Any] = {"status": "done"}
    if missing:
        suite = suite.select(present)
        done_entry["missing_entries"] = missing
        note(
            f"hammr: warning: {head}: no data for {len(missing)} of "
            f"{len(missing) + len(present)} entries ({'; '.join(missing.values())}); "
            f"running the other {len(present)}{hint}"
        )
    try:
        samples = suite.samples(
            data_dir, limit=step.limit, seed=options.seed, half=run.split, split_seed=run.split_seed
        )
    except (ValueError, OSError) as e:
        reason = f"cannot read its data: {e}"
        update_record(record_path, key, {"status": "failed", "reason": reason})
        blocked[key] = reason
        note(f"hammr: warning: {head}: {reason}")
        return
    if not samples:
        reason = f"no data: suite {step.suite!r} has no samples in {data_dir}"
        update_record(record_path, key, {"status": "no_data", "reason": reason})
        blocked[key] = reason
        note(f"hammr: warning: {head}: {reason}")
        return
    run_plan, _ = planned(store, step.stored_as, samples, retry_failed=options.retry_failed)
    stored = store.run_info(step.stored_as)
    if stored is not None and stored.settings.get("planned") != run_plan.total:
        # more (or less) of its data is there than when it started: its plan is this one's
        store.update_settings(step.stored_as, {"planned": run_plan.total})
    if stored is not None and not run_plan.todo:
        if not _failed(store, step, key, head, record_path, blocked, note):
            update_record(record_path, key, done_entry)
            outcome.skipped.append(key)
            note(f"{head}: done ({run_plan.total} samples stored)")
        return
    request = EvalRequest(
        suite=step.suite,
        data_dir=data_dir,
        system=run.system,
        limit=step.limit,
        concurrency=options.concurrency,
        run_name=step.stored_as,
        timeout_s=options.timeout_s,
        seed=options.seed,
        half=run.split,
        split_seed=run.split_seed,
        store_path=store.path,
        retry_failed=options.retry_failed and store.run_info(step.stored_as) is not None,
        judge=options.judge,
        bem_checkpoint=options.bem_checkpoint,
        max_steps=run.max_steps,
        executor=options.executor,
        ray_address=options.ray_address,
        workers=options.workers,
        progress=options.progress,
        config=cfg,
        entries=present if missing else step.entries,
        extra_settings={
            "experiment": experiment.name,
            "experiment_run": run.name,
            "demo": options.demo,
            "identity": step.identity,
            "planned": run_plan.total,
            "estimate": _estimate(experiment, step, store, cfg, options, run_plan.total),
        },
        progress_label=f"step {i}/{total} run {run.name}",
        share_from=_run_sources(store, step, cfg) if options.share and run_plan.todo else (),
    )
    outcome.ran.append(key)
    try:
        result = evaluate(request, note=note)
    except EvalError as e:
        if e.code == 130:
            update_record(record_path, key, {"status": "failed", "reason": "interrupted"})
            raise RunnerError(
                f"interrupted in run {run.name!r} ({e}); run the same command again to resume",
                code=130,
            ) from None
        reason = str(e)
        update_record(record_path, key, {"status": "failed", "reason": reason})
        blocked[key] = reason
        note(f"hammr: warning: {head}: failed: {reason}")
        return
    for line in result_lines(result):
        note(f"{head}: {line}")
    if not _failed(store, step, key, head, record_path, blocked, note):
        update_record(record_path, key, done_entry)


def _estimate(
    experiment: Experiment,
    step: PlannedRun,
    store: RunStore,
    cfg: Config,
    options: RunOptions,
    questions: int,
) -> dict[str, Any]:
    """The run's cost as estimated before it asks anything (kept with a new run, for the
    report to put beside what it took: :mod:`hammr.experiments.cost`)."""
    from hammr.eval.evaluate import recorded_config
    from hammr.experiments.cost import RunEstimate, per_question

    found = per_question(store, experiment, step, recorded_config(cfg), demo=options.demo)
    return RunEstimate(step.run.name, step.run.system, questions, "", found).recorded()


def _run_sources(store: RunStore, step: PlannedRun, cfg: Config) -> tuple[str, ...]:
    from hammr.eval.evaluate import recorded_config
    from hammr.experiments.sharing import run_sources

    return tuple(run_sources(store, step.stored_as, step.identity, recorded_config(cfg)))


def _failed(
    store: RunStore,
    step: PlannedRun,
    key: str,
    head: str,
    record_path: Path,
    blocked: dict[str, str],
    note: Echo,
) -> bool:
    """Whether the stored run is FAILED (:mod:`hammr.eval.run_health`); if so it is recorded
    failed with the cause, the steps that need it are blocked, and a warning names it."""
    from hammr.eval.run_health import stored_verdict

    verdict = stored_verdict(store, step.stored_as)
    if verdict is None:
        return False
    reason = failed_reason(verdict)
    update_record(record_path, key, {"status": "failed", "reason": reason})
    blocked[key] = f"failed: {reason}"
    note(f"hammr: warning: {head}: failed: {reason}")
    return True


def _do_memory(
    step: PlannedMemory,
    i: int,
    total: int,
    cfg: Config,
    store: RunStore,
    store_path: Path,
    options: RunOptions,
    record_path: Path,
    blocked: dict[str, str],
    outcome: ExperimentOutcome,
    note: Echo,
) -> None:
    from hammr.eval.evaluate import recorded_config
    from hammr.experiments.sharing import memory_entry
    from hammr.memory.command_error import MemoryCommandError

    memory = step.step
    key = step_key(memory)
    head = f"step {i}/{total} memory {memory.name} ({memory.command} from {memory.source})"
    source_key = f"run:{memory.source}"
    if source_key in blocked:
        why = blocked[source_key]
        status = "no_data" if why.startswith("no data") else "not_run"
        reason = why if status == "no_data" else f"its run {memory.source!r} did not finish: {why}"
        update_record(record_path, key, {"status": status, "reason": reason})
        blocked[key] = reason
        note(f"{head}: skipped, {reason}")
        return
    info = store.run_info(step.source.stored_as)
    planned_n = info.settings.get("planned") if info is not None else None
    if info is None or not isinstance(planned_n, int) or store.count(info.name) < planned_n:
        reason = f"its run {memory.source!r} did not finish"
        update_record(record_path, key, {"status": "not_run", "reason": reason})
        blocked[key] = reason
        note(f"{head}: skipped, {reason}")
        return
    recorded = read_record(record_path).get(key) or {}
    samples = store.count(info.name)
    if (
        step.path.exists()
        and recorded.get("status") == "done"
        and recorded.get("identity") == step.identity
        and recorded.get("samples", samples) == samples  # made before its run grew
    ):
        outcome.skipped.append(key)
        note(f"{head}: done ({step.path})")
        return
    made_with = recorded_config(cfg)
    step.path.parent.mkdir(parents=True, exist_ok=True)
    outcome.ran.append(key)
    if options.share and _share_memory(
        step, store_path, made_with, samples, head, record_path, note
    ):
        return
    note(f"{head}: writing {step.path}")
    show = bool(options.progress)
    runs = [step.source.stored_as]
    try:
        if memory.command == "build":
            from hammr.memory.memory_cli import build_bank

            build_bank(runs, step.path, store_path=store_path, config=cfg, progress=show, say=note)
        elif memory.command == "reflect":
            from hammr.muse.baselines_cli import reflect

            reflect(runs, step.path, store_path=store_path, config=cfg, progress=show, say=note,
                    note=note)  # fmt: skip
        else:
            from hammr.muse.baselines_cli import insights

            insights(runs, step.path, store_path=store_path, config=cfg, progress=show, say=note,
                     note=note)  # fmt: skip
    except MemoryCommandError as e:
        reason = str(e)
        update_record(
            record_path, key, {"status": "failed", "reason": reason, "identity": step.identity}
        )
        blocked[key] = reason
        note(f"hammr: warning: {head}: failed: {reason}")
        return
    except KeyboardInterrupt:
        update_record(record_path, key, {"status": "failed", "reason": "interrupted"})
        raise RunnerError(
            f"interrupted in memory step {memory.name!r}; run the same command again to resume",
            code=130,
        ) from None
    update_record(record_path, key, memory_entry(step.path, step.identity, made_with, samples))


def _share_memory(
    step: PlannedMemory,
    store_path: Path,
    made_with: Mapping[str, Any],
    samples: int,
    head: str,
    record_path: Path,
    note: Echo,
) -> bool:
    """Copy a memory file another experiment made the same way to ``step.path``; whether
    one was (a copy that fails is said, and the step builds its own)."""
    import sqlite3

    from hammr.experiments.sharing import memory_entry, memory_source
    from hammr.sqlite_file import copy_database

    source = memory_source(store_path, step.path, step.identity, made_with, samples)
    if source is None:
        return False
    try:
        copy_database(source, step.path)
    except (sqlite3.Error, OSError) as e:
        note(f"hammr: warning: {head}: cannot copy the same memory from {source} ({e}); "
             "building it")  # fmt: skip
        return False
    entry = {
        **memory_entry(step.path, step.identity, made_with, samples),
        "shared_from": str(source),
    }
    update_record(record_path, step_key(step.step), entry)
    note(f"{head}: shared: copied {source}, made from the same run with the same settings "
         "and model, to " + str(step.path))  # fmt: skip
    return True


__all__ = [
    "ExperimentOutcome",
    "PlannedMemory",
    "PlannedRun",
    "RunOptions",
    "RunnerError",
    "check_identities",
    "plan",
    "run_experiment",
    "store_path_of",
]
