"""What an experiment file names, checked against hammr before anything runs.

:mod:`hammr.experiments.spec` checks the file's own shape; this checks that every system is
registered (or an agent's name), every suite loads and holds the entries a run names, every
setting is a known configuration key with a valid value, every cell resolves against its
run's suite (and, with ``[data] demo_suite``, against the demo suite), and every memory step
makes the kind of memory the system reading it takes. Nothing here builds a model or reads a
data folder: ``hammr experiment show`` and ``run`` call :func:`validate` first, and a test
calls it on every bundled file.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from hammr.experiments.spec import Cell, Experiment, ExperimentError, Run

if TYPE_CHECKING:
    from hammr.config import Config
    from hammr.eval.suites import Suite

MEMORY_READERS: dict[str, tuple[str, ...]] = {
    "build": ("muse",),
    "reflect": ("reflexion",),
    "insights": ("expel",),
}
"""Memory command -> the systems that read the file it makes (an experience bank is also read
by the HAMMR agents named in ``memory.agents``)."""

EXPLAIN_METRICS: tuple[str, ...] = (
    "Bleu_1",
    "Bleu_2",
    "Bleu_3",
    "Bleu_4",
    "METEOR",
    "ROUGE_L",
    "CIDEr",
    "SPICE",
    "grounding",
    "detection",
    "accuracy",
    "accuracy_normalised",
)
"""What an ``explain:M`` cell may show: ``hammr explain``'s language metrics (as its table
names them), REX grounding, SME detection, and MEVQA's answer accuracy (official, and
normalised)."""


def _where(experiment: Experiment) -> str:
    return str(experiment.path) if experiment.path is not None else experiment.name


@cache
def _agent_names(agent_dir: str) -> tuple[str, ...]:
    """HAMMR's systems and every agent's name; ExperimentError with the agent files' own
    line (:class:`~hammr.agents.spec.SpecError`, as `hammr ask` and `hammr systems` print
    it) when ``agent_dir`` holds a broken one."""
    from hammr.agents.catalog import AgentCatalog
    from hammr.agents.spec import SpecError
    from hammr.agents.system import HAMMR, NAIVE

    try:
        catalog = AgentCatalog.load(None if not agent_dir else _path(agent_dir))
    except SpecError as e:
        raise ExperimentError(str(e)) from None
    return (HAMMR, NAIVE, *catalog.specs)


def _path(text: str) -> Any:
    from pathlib import Path

    return Path(text).expanduser()


def system_names(agent_dir: str = "") -> list[str]:
    """Every name a run's ``system`` may take: the registered systems and every agent's
    name (the built-in agent files, plus ``agent.dir``'s); no model is built.
    ExperimentError when an agent file cannot be read."""
    from hammr.systems import registered_systems

    return list(dict.fromkeys([*registered_systems(), *_agent_names(agent_dir)]))


@cache
def _suite(name: str) -> Suite:
    from hammr.eval.suites import load_suite

    return load_suite(name)


def load_run_suite(name: str, entries: tuple[str, ...] = ()) -> Suite:
    """The suite ``name`` restricted to ``entries`` (all when empty); ValueError naming what
    is unknown."""
    suite = _suite(name)
    return suite.select(entries) if entries else suite


def _base_config() -> Config:
    from hammr.config import DEFAULTS, Config

    return Config(copy.deepcopy(DEFAULTS))


def check_settings(
    settings: Mapping[str, Any], where: str, source: str, base: Config | None = None
) -> Config:
    """``base`` (default: the defaults) with ``settings`` applied; ExperimentError (one line,
    starting with ``where``) for an unknown key or a bad value."""
    from hammr.config import ConfigError, with_settings

    try:
        return with_settings(base if base is not None else _base_config(), settings, source)
    except ConfigError as e:
        raise ExperimentError(f"{where}: {e}") from None


def cell_problem(cell: Cell, suite: Suite) -> str | None:
    """Why ``cell`` cannot be shown for a run on ``suite`` (its selected entries); None when
    it can."""
    from hammr.eval.analysis.labelling import LABELS

    if cell.kind == "type":
        types = [e.question_type for e in suite.entries]
        if "" in types:  # an entry keeps its adapter's per-sample types: not known here
            return None
        if cell.arg not in types:
            return (
                f"question type {cell.arg!r} is not in it (types: {', '.join(sorted(set(types)))})"
            )
    elif cell.kind == "entry":
        names = [e.name for e in suite.entries]
        if cell.arg not in names:
            return f"entry {cell.arg!r} is not in it (entries: {', '.join(names)})"
    elif cell.kind == "aggregate":
        names = [a.name for a in suite.aggregates]
        if cell.arg not in names:
            have = ", ".join(names) or "none"
            return f"aggregate {cell.arg!r} is not in it (aggregates: {have})"
    elif cell.kind == "explain":
        if cell.arg not in EXPLAIN_METRICS:
            return (
                f"explanation metric {cell.arg!r} is not one of hammr explain's "
                f"({', '.join(EXPLAIN_METRICS)})"
            )
    elif cell.kind == "label" and cell.arg not in LABELS:
        return f"label {cell.arg!r} is not one of the labelling flow's ({', '.join(LABELS)})"
    return None


def _cells(experiment: Experiment) -> Iterator[tuple[str, Run, Cell]]:
    for table in experiment.tables:
        for row in table.rows:
            for column in table.columns:
                where = f"table {table.name!r} row {row.label!r} column {column.label!r}"
                yield where, experiment.run(row.run), column.cell


def validate(experiment: Experiment, *, agent_dir: str = "") -> None:
    """Check what ``experiment`` names against hammr; ExperimentError (one line, naming the
    file and the part) for the first problem. ``agent_dir``: a folder of extra agent files
    (``agent.dir``), whose agents are systems too."""
    where = _where(experiment)
    known = system_names(agent_dir)
    suites: dict[str, Suite] = {}
    for run in experiment.runs:
        part = f"{where} run {run.name!r}"
        if run.system not in known:
            raise ExperimentError(
                f"{part}: unknown system {run.system!r} (systems: {', '.join(known)})"
            )
        try:
            suites[run.name] = load_run_suite(run.suite, run.entries)
        except (ValueError, FileNotFoundError) as e:
            raise ExperimentError(f"{part}: {e}") from None
        cfg = check_settings(run.settings, part, "its settings")
        if run.memory is not None:
            step = experiment.memory(run.memory)
            readers = MEMORY_READERS[step.command]
            bank_agents = step.command == "build" and bool(cfg.get("memory.agents"))
            if run.system not in readers and not bank_agents:
                raise ExperimentError(
                    f"{part}: reads memory {step.name!r}, made by `memory {step.command}`, "
                    f"which only {' or '.join(readers)} reads (system {run.system!r})"
                )
        elif not cfg.get("memory.path"):
            for command, readers in MEMORY_READERS.items():
                if run.system in readers:
                    raise ExperimentError(
                        f"{part}: system {run.system!r} reads a memory; give the run "
                        f"memory = NAME of a [[memory]] step with command = {command!r}"
                    )
    for step in experiment.memories:
        check_settings(step.settings, f"{where} memory {step.name!r}", "its settings")
    _validate_prompt_style(experiment, where)
    for part, run, cell in _cells(experiment):
        problem = cell_problem(cell, suites[run.name])
        if problem is not None:
            raise ExperimentError(
                f"{where} {part}: cell {str(cell)!r} does not resolve against run "
                f"{run.name!r}'s suite {run.suite!r}: {problem}"
            )
    _validate_demo(experiment, where)


PAPER_PROMPT_READERS = {"avis.prompts": ("avis", "avis-autonomous")}
"""The systems that have paper prompts, per setting that selects them."""


def _validate_prompt_style(experiment: Experiment, where: str) -> None:
    """A paper prompt setting no run's system reads is a mistake, not a no-op."""
    for key, readers in PAPER_PROMPT_READERS.items():
        setters = [r for r in experiment.runs if r.settings.get(key) == "paper"]
        if setters and not any(r.system in readers for r in setters):
            raise ExperimentError(
                f"{where} run {setters[0].name!r}: {key} = 'paper' selects the paper's prompts "
                f"of {' and '.join(readers)}, and no run here is one (system "
                f"{setters[0].system!r} has no paper prompts)"
            )


def _validate_demo(experiment: Experiment, where: str) -> None:
    data = experiment.data
    if data.demo_suite is None:
        for key, given in (
            ("demo_cells", data.demo_cells),
            ("demo_limit", data.demo_limit is not None),
            ("demo_settings", data.demo_settings),
        ):
            if given:
                raise ExperimentError(f"{where} [data]: {key} without a demo_suite")
        return
    check_settings(data.demo_budget, f"{where} [data]", "its demo_settings")
    try:
        demo = load_run_suite(data.demo_suite)
    except (ValueError, FileNotFoundError) as e:
        raise ExperimentError(f"{where} [data] demo_suite: {e}") from None
    used = {str(cell) for _, _, cell in _cells(experiment)}
    for written in data.demo_cells:
        if str(Cell.parse(written)) not in used:
            raise ExperimentError(
                f"{where} [data] demo_cells: {written!r} is not a cell of any table"
            )
    for part, _, cell in _cells(experiment):
        shown = demo_cell(experiment, cell)
        problem = cell_problem(shown, demo)
        if problem is not None:
            instead = "" if shown == cell else f" (shown as {str(shown)!r})"
            raise ExperimentError(
                f"{where} {part}: with --demo, cell {str(cell)!r}{instead} does not resolve "
                f"against the demo suite {data.demo_suite!r}: {problem}; map it in [data] "
                "demo_cells"
            )


def demo_cell(experiment: Experiment, cell: Cell) -> Cell:
    """The cell shown in place of ``cell`` when the experiment ran with --demo."""
    for written, shown in experiment.data.demo_cells.items():
        if Cell.parse(written) == cell:
            return shown
    return cell


__all__ = [
    "EXPLAIN_METRICS",
    "MEMORY_READERS",
    "cell_problem",
    "check_settings",
    "demo_cell",
    "load_run_suite",
    "system_names",
    "validate",
]
