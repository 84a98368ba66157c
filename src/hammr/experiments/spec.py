"""The experiment file: what runs a paper's table needs, and the table it fills.

An experiment is data, not a script (TOML; the bundled ones are in
``hammr/experiments/bundled/``, ``hammr experiment list`` names them)::

    name = "hammr-table3"                  # the file's stem
    title = "HAMMR against the naive agent on generic VQA"
    paper = "hammr"                        # hammr | avis | mulprog | muse
    source = "HAMMR (arXiv 2404.05465), Table 3"
    description = "..."                    # optional
    deviations = [                         # what stands between this file and the paper
      "LLM: whatever hammr.toml configures; the paper ran PaLI-X (55B)",
    ]

    [settings]                             # config overrides every run gets (dotted keys)
    "agent.router" = "llm"

    [data]
    suite = "generic-vqa"                  # every run's suite unless it names its own
    limit = 1000                           # samples per suite entry the paper drew (optional)
    demo_suite = "demo"                    # what --demo runs instead, on examples/demo
    demo_cells = { "type:unseen_question" = "type:single_hop" }   # optional, for --demo
    demo_limit = 2                         # optional: questions per entry with --demo
    demo_settings = { "agent.max_steps" = 6 }   # optional: over the demo budget

    [[run]]                                # one `hammr eval`
    name = "hammr"                         # unique in the file
    system = "hammr"
    suite = "generic-vqa"                  # optional (default: data.suite)
    entries = ["gqa", "textvqa"]           # optional: only these suite entries
    split = "evaluation"                   # optional: exploration | evaluation
    split_seed = 0                         # optional
    max_steps = 8                          # optional
    memory = "bank"                        # optional: a [[memory]] step's file (memory.path)
    settings = { "memory.k" = 3 }          # optional, over the file's [settings]

    [[memory]]                             # one `hammr memory build|reflect|insights`
    name = "bank"
    command = "build"                      # build | reflect | insights
    from = "explore"                       # the run it learns from
    settings = { "memory.min_score" = 5 }  # optional

    [[table]]
    name = "table3"                        # unique in the file
    title = "Accuracy (%) per dataset"
    source = "HAMMR, Table 3"              # optional (default: the file's source)
    columns = [
      { label = "GQA", cell = "type:spatial_reasoning" },
      { label = "TextVQA", cell = "type:ocr_reasoning" },
    ]
    [[table.row]]
    label = "HAMMR (ours)"
    run = "hammr"
    paper = { "GQA" = 56.4, "TextVQA" = "not reported" }

    [[figure]]                             # a picture a report carries (--html)
    name = "fig2"
    kind = "scaling"                       # see FIGURE_KINDS
    runs = ["react", "muse-d1"]
    title = "Accuracy against search depth and breadth"
    source = "MuSEAgent, Figure 2"

A cell names what of its row's run it shows (:data:`CELL_KINDS`): ``type:Q`` (accuracy on the
samples of question type Q), ``entry:E`` (on suite entry E), ``aggregate:A`` (a suite
aggregate, e.g. Infoseek's final score), ``overall`` (every sample), ``explain:M`` (an
explanation metric of ``hammr explain``), ``label:L`` (the share of error label L from the
labelling flow, HAMMR's Table 4) and ``steps:S`` (statistics of the traces).

Every cell needs the paper's number, or ``"not reported"`` where the paper gives none: a
report never shows a cell without saying what the paper had.

This module reads and checks the file's own shape (names, references between its parts, the
paper's numbers); :mod:`hammr.experiments.validate` checks what it names against hammr
(systems, suites and their entries, configuration keys).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hammr.config import flatten_settings
from hammr.toml_file import TomlFileError, read_toml

PAPERS = ("hammr", "avis", "mulprog", "muse")
MEMORY_COMMANDS = ("build", "reflect", "insights")
SPLITS = ("exploration", "evaluation")
CELL_KINDS = ("type", "entry", "aggregate", "overall", "explain", "label", "steps")
"""What a cell may show; each but ``overall`` takes an argument after a colon."""
FIGURE_KINDS = ("scaling", "avis", "shuffle")
"""scaling: accuracy against memory.depth and memory.k (MuSEAgent Fig. 2); avis: AVIS's
analyses of a run's traces (its Figs. 6-13); shuffle: grounding and detection before and after
shuffling the generated explanations' tokens (MulProg Fig. 11)."""
NOT_REPORTED = "not reported"
"""A paper cell's value where the paper gives no number."""


class ExperimentError(ValueError):
    """An experiment file is invalid; the message names the file and the part, in one line."""


@dataclass(frozen=True)
class Cell:
    """What a cell shows: ``kind`` (one of :data:`CELL_KINDS`) and its argument."""

    kind: str
    arg: str = ""

    @classmethod
    def parse(cls, text: str) -> Cell:
        kind, colon, arg = text.partition(":")
        kind, arg = kind.strip(), arg.strip()
        if kind not in CELL_KINDS:
            raise ValueError(f"cell {text!r}: the kind must be one of {', '.join(CELL_KINDS)}")
        if kind == "overall":
            if colon:
                raise ValueError(f"cell {text!r}: 'overall' takes no argument")
        elif not arg:
            raise ValueError(f"cell {text!r}: '{kind}' needs an argument ({kind}:NAME)")
        return cls(kind, arg)

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


@dataclass(frozen=True)
class Run:
    """One evaluation the experiment needs (a ``hammr eval``)."""

    name: str
    system: str
    suite: str
    entries: tuple[str, ...] = ()
    split: str | None = None
    split_seed: int = 0
    max_steps: int | None = None
    memory: str | None = None
    """The name of the [[memory]] step whose file this run reads."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Config overrides, the file's [settings] already merged under the run's own."""


@dataclass(frozen=True)
class MemoryStep:
    """One ``hammr memory build|reflect|insights`` from a run's records."""

    name: str
    command: str
    source: str
    """The run it learns from (``from`` in the file)."""
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    label: str
    cell: Cell


@dataclass(frozen=True)
class Row:
    label: str
    run: str
    paper: Mapping[str, float | str]
    """Column label -> the paper's number, or :data:`NOT_REPORTED`."""


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    source: str
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    note: str = ""


@dataclass(frozen=True)
class Figure:
    name: str
    kind: str
    runs: tuple[str, ...]
    title: str
    source: str
    note: str = ""


DEMO_LIMIT = 1
"""Questions per suite entry a --demo run draws unless the file's [data] demo_limit or
--limit says otherwise: a smoke run shows every step of the pipeline working on real
models, tools and stores; it measures nothing."""

DEMO_BUDGET: Mapping[str, Any] = {
    "agent.max_steps": 4,
    "avis.max_steps": 5,
    "llm.max_tokens": 96,
    "llm.n_ctx": 4096,
}
"""Settings every --demo run gets over the file's own, so that each bundled experiment's
demo finishes in minutes on the embedded model (docs/experiments.md lists the durations):
fewer steps, shorter replies, and a smaller context, which keeps the prompts that pool
every worked example (the naive agent's) to the examples that fit. A file's [data]
demo_settings go over these."""


@dataclass(frozen=True)
class DataSpec:
    suite: str | None = None
    limit: int | None = None
    demo_suite: str | None = None
    demo_cells: Mapping[str, Cell] = field(default_factory=dict)
    """Cell (as written) -> the cell shown instead when the experiment ran with --demo."""
    demo_limit: int | None = None
    """Questions per entry with --demo (None: :data:`DEMO_LIMIT`)."""
    demo_settings: Mapping[str, Any] = field(default_factory=dict)
    """Over :data:`DEMO_BUDGET` with --demo."""

    @property
    def demo_questions(self) -> int:
        """Questions per suite entry a --demo run draws when --limit does not say."""
        return self.demo_limit if self.demo_limit is not None else DEMO_LIMIT

    @property
    def demo_budget(self) -> dict[str, Any]:
        """The settings a --demo run gets over every run's and memory step's own."""
        return {**DEMO_BUDGET, **self.demo_settings}


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper: str
    source: str
    description: str
    deviations: tuple[str, ...]
    settings: Mapping[str, Any]
    data: DataSpec
    runs: tuple[Run, ...]
    memories: tuple[MemoryStep, ...]
    tables: tuple[Table, ...]
    figures: tuple[Figure, ...]
    path: Path | None = None

    def run(self, name: str) -> Run:
        return next(r for r in self.runs if r.name == name)

    def memory(self, name: str) -> MemoryStep:
        return next(m for m in self.memories if m.name == name)

    def order(self) -> list[Run | MemoryStep]:
        """Every run and memory step, each after what it needs (a run after the memory it
        reads, a memory after the run it learns from), otherwise in file order."""
        done: set[tuple[str, str]] = set()
        out: list[Run | MemoryStep] = []

        def visit(step: Run | MemoryStep) -> None:
            key = ("run" if isinstance(step, Run) else "memory", step.name)
            if key in done:
                return
            done.add(key)
            if isinstance(step, Run) and step.memory is not None:
                visit(self.memory(step.memory))
            if isinstance(step, MemoryStep):
                visit(self.run(step.source))
            out.append(step)

        for run in self.runs:
            visit(run)
        for memory in self.memories:
            visit(memory)
        return out


# --- reading ---------------------------------------------------------------------------------


class _Reader:
    """Reads one table of the TOML file, naming the file and the part in every error."""

    def __init__(self, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise ExperimentError(f"{where}: expected a table of keys, got {type(data).__name__}")
        self.where = where
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def fail(self, message: str) -> ExperimentError:
        return ExperimentError(f"{self.where}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise self.fail(f"{key} must be {_kind_name(kinds)}, got {value!r}")
        if not isinstance(value, kinds):
            raise self.fail(f"{key} must be {_kind_name(kinds)}, got {value!r}")
        return value

    def need(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self.get(key, kind)
        if value is None or value == "":
            raise self.fail(f"{key} is missing")
        return value

    def name(self) -> str:
        """The part's ``name``, which names stored runs and files: plain characters only."""
        value: str = self.need("name", str)
        problem = name_problem(value, "name")
        if problem:
            raise self.fail(problem)
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self.get(key, list, [])
        if not all(isinstance(v, str) and v for v in value):
            raise self.fail(f"{key} must be a list of names")
        return tuple(value)

    def settings(self, key: str = "settings") -> dict[str, Any]:
        value = self.get(key, dict, {})
        flat = flatten_settings(value)
        return flat

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.fail(f"unknown key {unknown[0]!r}")


def _kind_name(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", float: "a number", list: "a list",
             dict: "a table", bool: "true or false"}  # fmt: skip
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _unique(where: str, kind: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ExperimentError(f"{where}: two {kind}s are named {name!r}")
        seen.add(name)


def parse_experiment(data: Mapping[str, Any], where: str, path: Path | None = None) -> Experiment:
    """The experiment in ``data`` (a parsed TOML document); ExperimentError naming ``where``
    and the part for anything malformed or any reference that does not resolve within it."""
    top = _Reader(where, dict(data))
    name = top.name()
    paper = top.need("paper", str)
    if paper not in PAPERS:
        raise top.fail(f"paper {paper!r} is not one of {', '.join(PAPERS)}")
    source = top.need("source", str)
    deviations = top.names("deviations")
    settings = top.settings()
    data_spec = _read_data(_Reader(f"{where} [data]", top.get("data", dict, {})))
    runs = tuple(
        _read_run(_Reader(f"{where} [[run]] #{i + 1}", r), settings, data_spec)
        for i, r in enumerate(top.get("run", list, []))
    )
    if not runs:
        raise top.fail("no [[run]]: an experiment needs at least one run")
    memories = tuple(
        _read_memory(_Reader(f"{where} [[memory]] #{i + 1}", m))
        for i, m in enumerate(top.get("memory", list, []))
    )
    tables = tuple(
        _read_table(_Reader(f"{where} [[table]] #{i + 1}", t), source)
        for i, t in enumerate(top.get("table", list, []))
    )
    figures = tuple(
        _read_figure(_Reader(f"{where} [[figure]] #{i + 1}", f), source)
        for i, f in enumerate(top.get("figure", list, []))
    )
    if not tables and not figures:
        raise top.fail("no [[table]] or [[figure]]: an experiment fills at least one")
    experiment = Experiment(
        name=name,
        title=top.need("title", str),
        paper=paper,
        source=source,
        description=top.get("description", str, ""),
        deviations=deviations,
        settings=settings,
        data=data_spec,
        runs=runs,
        memories=memories,
        tables=tables,
        figures=figures,
        path=path,
    )
    top.finish()
    _check_references(experiment, where)
    return experiment


def _read_data(r: _Reader) -> DataSpec:
    limit = r.get("limit", int)
    if limit is not None and limit < 1:
        raise r.fail(f"limit must be at least 1, got {limit}")
    cells: dict[str, Cell] = {}
    for written, shown in r.get("demo_cells", dict, {}).items():
        try:
            Cell.parse(written)
            cells[written] = Cell.parse(str(shown))
        except ValueError as e:
            raise r.fail(f"demo_cells: {e}") from None
    demo_limit = r.get("demo_limit", int)
    if demo_limit is not None and demo_limit < 1:
        raise r.fail(f"demo_limit must be at least 1, got {demo_limit}")
    spec = DataSpec(
        r.get("suite", str),
        limit,
        r.get("demo_suite", str),
        cells,
        demo_limit,
        r.settings("demo_settings"),
    )
    r.finish()
    return spec


def _read_run(r: _Reader, shared: Mapping[str, Any], data: DataSpec) -> Run:
    name = r.name()
    r.where = f"{r.where.rsplit(' #', 1)[0]} {name!r}"
    suite = r.get("suite", str) or data.suite
    if not suite:
        raise r.fail("no suite: give the run a suite, or the file a [data] suite")
    split = r.get("split", str)
    if split is not None and split not in SPLITS:
        raise r.fail(f"split {split!r} is not one of {', '.join(SPLITS)}")
    max_steps = r.get("max_steps", int)
    if max_steps is not None and max_steps < 1:
        raise r.fail(f"max_steps must be at least 1, got {max_steps}")
    run = Run(
        name=name,
        system=r.need("system", str),
        suite=suite,
        entries=r.names("entries"),
        split=split,
        split_seed=r.get("split_seed", int, 0),
        max_steps=max_steps,
        memory=r.get("memory", str),
        settings={**shared, **r.settings()},
    )
    r.finish()
    return run


def _read_memory(r: _Reader) -> MemoryStep:
    name = r.name()
    r.where = f"{r.where.rsplit(' #', 1)[0]} {name!r}"
    command = r.need("command", str)
    if command not in MEMORY_COMMANDS:
        raise r.fail(f"command {command!r} is not one of {', '.join(MEMORY_COMMANDS)}")
    step = MemoryStep(name, command, r.need("from", str), r.settings())
    r.finish()
    return step


def _read_table(r: _Reader, source: str) -> Table:
    name = r.name()
    r.where = f"{r.where.rsplit(' #', 1)[0]} {name!r}"
    columns = []
    for i, c in enumerate(r.need("columns", list)):
        cr = _Reader(f"{r.where} column #{i + 1}", c)
        try:
            column = Column(cr.need("label", str), Cell.parse(cr.need("cell", str)))
        except ValueError as e:
            raise cr.fail(str(e)) from None
        cr.finish()
        columns.append(column)
    _unique(r.where, "column", [c.label for c in columns])
    rows = []
    for i, row_data in enumerate(r.need("row", list)):
        rr = _Reader(f"{r.where} row #{i + 1}", row_data)
        label = rr.need("label", str)
        rr.where = f"{r.where} row {label!r}"
        paper = rr.get("paper", dict, {})
        for column in columns:
            if column.label not in paper:
                raise rr.fail(
                    f"no paper number for column {column.label!r}: give the paper's value, "
                    f'or "{NOT_REPORTED}" where the paper has none'
                )
            value = paper[column.label]
            ok = value == NOT_REPORTED or (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)  # TOML reads nan and inf as floats
            )
            if not ok:
                raise rr.fail(
                    f"paper value for {column.label!r} must be a finite number or "
                    f'"{NOT_REPORTED}", got {value!r}'
                )
        extra = sorted(set(paper) - {c.label for c in columns})
        if extra:
            raise rr.fail(f"paper value for {extra[0]!r}, which is not a column of the table")
        rows.append(Row(label, rr.need("run", str), dict(paper)))
        rr.finish()
    _unique(r.where, "row", [row.label for row in rows])
    table = Table(
        name=name,
        title=r.need("title", str),
        source=r.get("source", str) or source,
        columns=tuple(columns),
        rows=tuple(rows),
        note=r.get("note", str, ""),
    )
    r.finish()
    return table


def _read_figure(r: _Reader, source: str) -> Figure:
    name = r.name()
    r.where = f"{r.where.rsplit(' #', 1)[0]} {name!r}"
    kind = r.need("kind", str)
    if kind not in FIGURE_KINDS:
        raise r.fail(f"kind {kind!r} is not one of {', '.join(FIGURE_KINDS)}")
    figure = Figure(
        name=name,
        kind=kind,
        runs=r.names("runs"),
        title=r.need("title", str),
        source=r.get("source", str) or source,
        note=r.get("note", str, ""),
    )
    if not figure.runs:
        raise r.fail("runs is missing: a figure is drawn from at least one run")
    r.finish()
    return figure


def _check_references(e: Experiment, where: str) -> None:
    _unique(where, "run", [r.name for r in e.runs])
    _unique(where, "memory step", [m.name for m in e.memories])
    _unique(where, "table", [t.name for t in e.tables])
    _unique(where, "figure", [f.name for f in e.figures])
    runs = {r.name for r in e.runs}
    memories = {m.name for m in e.memories}

    def known_run(name: str, by: str) -> None:
        if name not in runs:
            raise ExperimentError(
                f"{where}: {by} names run {name!r}, which is not a [[run]] of the file "
                f"(runs: {', '.join(sorted(runs))})"
            )

    for run in e.runs:
        if run.memory is not None and run.memory not in memories:
            raise ExperimentError(
                f"{where}: run {run.name!r} reads memory {run.memory!r}, which is not a "
                "[[memory]] step of the file"
            )
    for memory in e.memories:
        known_run(memory.source, f"memory step {memory.name!r}")
    for table in e.tables:
        for row in table.rows:
            known_run(row.run, f"table {table.name!r} row {row.label!r}")
    for figure in e.figures:
        for name in figure.runs:
            known_run(name, f"figure {figure.name!r}")
    # a run that reads a memory built from itself (directly or through others) never starts
    for run in e.runs:
        seen: set[str] = set()
        current: Run | None = run
        while current is not None and current.memory is not None:
            source = e.memory(current.memory).source
            if source == run.name or source in seen:
                raise ExperimentError(
                    f"{where}: run {run.name!r} needs a memory learned from itself "
                    f"(through {current.memory!r}): the steps form a cycle"
                )
            seen.add(source)
            current = e.run(source)


def read_experiment(path: Path) -> Experiment:
    """The experiment in the TOML file ``path`` (ExperimentError, one line, naming the file)."""
    where = str(path)
    try:
        data = read_toml(path)
    except FileNotFoundError:
        raise ExperimentError(f"{where}: no such experiment file") from None
    except OSError as e:
        raise ExperimentError(f"{where}: cannot read it: {e.strerror or e}") from None
    except TomlFileError as e:
        raise ExperimentError(str(e)) from None
    experiment = parse_experiment(data, where, path)
    if path.stem != experiment.name:
        raise ExperimentError(
            f"{where}: name {experiment.name!r} must be the file's stem ({path.stem!r})"
        )
    return experiment


_NAME_CHARS = re.compile(r"[A-Za-z0-9._+=@-]*")


def name_problem(text: str, what: str, *, empty_ok: bool = False) -> str | None:
    """Why ``text`` cannot be part of a stored run's name or of a file name beside the store
    (an experiment's, run's or memory's name, a ``--prefix``), or None: only letters, digits
    and ``. _ + = @ -``, so no name reaches outside ``<store>.experiments/`` or a terminal."""
    if not text and not empty_ok:
        return f"{what} is empty"
    if not _NAME_CHARS.fullmatch(text) or text in (".", ".."):
        return (
            f"{what} {text!r} may hold only letters, digits and . _ + = @ - "
            "(it names stored runs and files)"
        )
    return None


def check_prefix(prefix: str) -> str:
    """``prefix`` when it can start stored run names; ExperimentError saying why not."""
    problem = name_problem(prefix, "--prefix", empty_ok=True)
    if problem:
        raise ExperimentError(problem)
    return prefix


def stored_run_name(experiment: str, run: str, *, prefix: str = "", demo: bool = False) -> str:
    """The name a run of an experiment has in the run store: ``[PREFIX][demo.]EXPERIMENT.RUN``
    (``--prefix`` keeps the runs of one model or dataset apart from another's; ``demo.``
    marks runs on the bundled demo data, which never mix with the paper's data)."""
    return f"{prefix}{'demo.' if demo else ''}{experiment}.{run}"
