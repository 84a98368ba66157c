"""An experiment's tables: our numbers beside the paper's, the difference, and the deviations.

:func:`build_report` reads the run store (never the model, never the data folder, except for
the reference explanations an ``explain:`` cell scores against) and gives, per ``[[table]]``
of the experiment file, one :class:`CellResult` per (row, column): our value with the half
width of its 95% bootstrap interval, the paper's number, ours minus the paper's, and where
the cell cannot be filled a short reason (the run is not run yet, its suite's data was
missing, it stopped part way). Under every table go the file's deviations and those read
from the runs themselves (:func:`table_deviations`): settings that differ from what the paper
ran (:func:`hammr.paper_settings.differences`), the LLM each run used, how many samples it
has against the paper's, and the demo data.

The numbers are the existing reports' own: ``type:``, ``entry:`` and ``overall`` cells are
the mean score with :func:`hammr.eval.stats.bootstrap_ci` (as ``hammr report`` computes each
row), ``aggregate:`` cells are ``hammr report``'s aggregate rows (:func:`hammr.eval.report.
build_report`), ``explain:`` cells score the run's explanations as ``hammr explain`` does
(:func:`hammr.eval.explain_cli.score_run`), ``label:`` cells are HAMMR's Table 4 shares from
a labelled file (:func:`hammr.eval.analysis.table4.tabulate_labels`).

Renderers: :func:`render_rich` (the terminal), :func:`render_csv` (one row per cell) and
:func:`render_html` (a self-contained page, with the figures; see
:mod:`hammr.experiments.figures`).
"""

from __future__ import annotations

import csv
import html
import io
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from hammr.experiments.spec import (
    NOT_REPORTED,
    Cell,
    Experiment,
    Row,
    Table,
    stored_run_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.table import Table as RichTable

    from hammr.eval.explain_cli import Explained, RunScores
    from hammr.eval.metrics.explanation import GroundedExplanation
    from hammr.eval.store import RunInfo, RunStore, ScoreRow
    from hammr.eval.types import RunRecord
    from hammr.experiments.state import StepState

CellStatus = Literal[
    "ok", "partial", "not_run", "no_data", "failed", "no_samples", "unavailable", "needs_labels"
]
"""ok: filled from a finished run; partial: filled from a run that stopped part way (the
reason says how far); the others leave the cell empty and say why."""

EXPLAIN_METRICS: dict[str, str] = {
    "accuracy": "answer accuracy (the run's own metric: MEVQA's official comparison)",
    "accuracy_normalised": "answer accuracy after hammr's normalisation (case, punctuation, "
    "articles, number words)",
    "detection": "detection (MEAgent Eq. 2, official padding)",
    "grounding": "grounding (REX)",
    "Bleu_1": "BLEU-1",
    "Bleu_2": "BLEU-2",
    "Bleu_3": "BLEU-3",
    "Bleu_4": "BLEU-4",
    "METEOR": "METEOR",
    "ROUGE_L": "ROUGE-L",
    "CIDEr": "CIDEr",
    "SPICE": "SPICE",
}
"""The metrics an ``explain:M`` cell may name (other spellings: see :func:`explain_metric`)."""
LANGUAGE_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr", "SPICE")
STEP_STATISTICS = ("mean", "median")
"""What a ``steps:S`` cell may show: the mean (with its bootstrap interval) or the median
number of steps per sample (every step of the trace, sub-agents' steps included)."""
DEFAULT_VIEWER = "http://127.0.0.1:8765/"
"""Where the HTML page's links look for the viewer (``hammr view --port 8765``)."""


class ReportError(ValueError):
    """Bad input to a report (a --labels file that cannot be read, a run it does not
    name); one line."""


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def explain_metric(name: str) -> str | None:
    """The canonical name (a key of :data:`EXPLAIN_METRICS`) of ``name``, written any of the
    usual ways ('BLEU-4', 'bleu4', 'rouge-l', 'accuracy-normalized'); None when unknown."""
    wanted = _key(name).replace("normalized", "normalised")
    for canonical, label in EXPLAIN_METRICS.items():
        if wanted in (_key(canonical), _key(label.split(" (")[0])):
            return canonical
    return None


def label_name(name: str) -> str | None:
    """The Table 4 label (reasoning, formulation, tool_failure, ok) a ``label:L`` cell
    names, with the labelling file's other spellings accepted; None when unknown."""
    from hammr.eval.analysis.table4 import TABLE4_ROWS, _normalise_label

    label = _normalise_label(name)
    return label if label in {k for k, _ in TABLE4_ROWS} else None


def cell_problem(cell: Cell) -> str | None:
    """Why this report cannot show ``cell`` (an unknown explain metric, label or step
    statistic); None when it can. :mod:`hammr.experiments.validate` may call it."""
    if cell.kind == "explain" and explain_metric(cell.arg) is None:
        return f"cell {cell}: unknown explanation metric; one of {', '.join(EXPLAIN_METRICS)}"
    if cell.kind == "label" and label_name(cell.arg) is None:
        return f"cell {cell}: unknown error label; one of reasoning, formulation, tool_failure, ok"
    if cell.kind == "steps" and cell.arg not in STEP_STATISTICS:
        return f"cell {cell}: steps takes one of {', '.join(STEP_STATISTICS)}"
    return None


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellResult:
    """One cell of a table: ours beside the paper's."""

    table: str
    row: str
    column: str
    cell: str
    """What is shown (after --demo's substitution), as the file writes a cell."""
    run: str
    """The row's run, as the experiment names it."""
    stored_as: str
    """The run's name in the store (what the viewer's links address)."""
    value: float | None
    """Ours, in :attr:`unit` (percent for scores); None when the cell cannot be filled."""
    ci: float | None
    """Half the width of the 95% bootstrap interval, in :attr:`unit`; None when there is
    none (a corpus metric, a label share, a median)."""
    n: int
    """Samples (or labelled rows) behind the value."""
    paper: float | None
    """The paper's number (None: not reported)."""
    status: CellStatus
    reason: str = ""
    unit: str = "%"

    @property
    def diff(self) -> float | None:
        if self.value is None or self.paper is None:
            return None
        return self.value - self.paper

    @property
    def filled(self) -> bool:
        return self.value is not None

    def ours_text(self) -> str:
        """Ours with one decimal and ± half the CI ('–' when empty; a cell from a run that
        stopped part way carries a footnote in the tables, not a mark here)."""
        if self.value is None:
            return "–"
        text = f"{self.value:.1f}"
        if self.ci is not None:
            text += f" ±{self.ci:.1f}"
        return text

    def paper_text(self) -> str:
        """The paper's number with one decimal, or 'not reported'."""
        return NOT_REPORTED if self.paper is None else f"{self.paper:.1f}"

    def diff_text(self) -> str:
        d = self.diff
        return "" if d is None else f"{d:+.1f}"


@dataclass
class TableResult:
    table: Table
    cells: list[list[CellResult]]
    """One list per row of the table, one cell per column."""
    deviations: list[str] = field(default_factory=list)


@dataclass
class ExperimentReport:
    experiment: Experiment
    prefix: str
    demo: bool
    states: Mapping[str, StepState]
    tables: list[TableResult]
    store_path: Path | None = None
    notes: list[str] = field(default_factory=list)

    def stored_name(self, run: str) -> str:
        return stored_run_name(self.experiment.name, run, prefix=self.prefix, demo=self.demo)

    def cells(self) -> list[CellResult]:
        return [c for t in self.tables for row in t.cells for c in row]


# --- what one run holds (read once, however many cells ask) -------------------------------------


class _RunData:
    def __init__(
        self,
        store: RunStore,
        stored: str,
        *,
        samples: int,
        seed: int,
        data_dir: Path | None,
        language: bool,
    ) -> None:
        self.store = store
        self.stored = stored
        self.samples = samples
        self.seed = seed
        self.data_dir = data_dir
        self.language = language
        info = store.run_info(stored)
        assert info is not None
        self.info: RunInfo = info
        self._scores: list[ScoreRow] | None = None
        self._records: list[RunRecord] | None = None
        self._aggregates: dict[str, Any] | None = None
        self._explained: tuple[list[Explained], RunScores | None, str] | None = None

    @property
    def scores(self) -> list[ScoreRow]:
        if self._scores is None:
            self._scores = self.store.score_rows(self.stored)
        return self._scores

    @property
    def records(self) -> list[RunRecord]:
        if self._records is None:
            self._records = self.store.records(self.stored, limit=None)
        return self._records

    def aggregates(self) -> dict[str, Any]:
        """Aggregate name -> hammr report's Cell (or None) for this run."""
        if self._aggregates is None:
            from hammr.eval.report import build_report

            report = build_report(self.store, [self.stored], samples=self.samples, seed=self.seed)
            self._aggregates = {a.name: a.cells[0] for a in report.aggregates}
        return self._aggregates

    def explained(self) -> tuple[list[Explained], RunScores | None, str]:
        """(explanations, their scores against the suite's references or None, why none)."""
        if self._explained is None:
            self._explained = self._explain()
        return self._explained

    def _explain(self) -> tuple[list[Explained], RunScores | None, str]:
        from hammr.backends.llm.base import run_sync
        from hammr.eval.explain_cli import explain_records, score_run

        explained = run_sync(explain_records(self.records, None))
        refs, why = run_references(self.info, self.data_dir)
        if not refs:
            return explained, None, why
        scores = score_run(explained, refs, official_padding=True, language=self.language)
        if not scores.scored:
            return explained, None, "none of the run's samples has a reference explanation"
        return explained, scores, ""


def run_references(
    info: RunInfo, data_dir: Path | None = None
) -> tuple[dict[tuple[str, str], GroundedExplanation], str]:
    """The reference explanations of the suite ``info`` ran on, read from ``data_dir`` (else
    the data folder the run stored), and '' or why there are none."""
    from hammr.eval.explain_cli import suite_references
    from hammr.eval.suites import SuiteError

    suite = info.settings.get("suite") or info.suite
    folder = data_dir
    if folder is None and isinstance(info.settings.get("data_dir"), str):
        folder = Path(info.settings["data_dir"])
    if folder is None:
        return {}, "the run stored no data folder; give --data-dir to score explanations"
    if not folder.is_dir():
        return {}, f"no data folder {folder} (the references are read from it; --data-dir)"
    try:
        _, refs = suite_references(str(suite), folder)
    except (SuiteError, OSError) as e:
        return {}, f"cannot read suite {suite!r}'s references: {e}"
    if not refs:
        return {}, f"suite {suite!r} carries no reference explanations"
    return refs, ""


# --- computing cells ----------------------------------------------------------------------------


def _mean_ci(
    values: Sequence[float], *, samples: int, seed: int, scale: float = 100.0
) -> tuple[float, float]:
    from hammr.eval.stats import bootstrap_ci

    mean, low, high = bootstrap_ci(values, samples=samples, seed=seed)
    return scale * mean, scale * (high - low) / 2


def _step_count(trace: Any) -> int:
    from hammr.trace import Trace

    if not isinstance(trace, Trace):
        return 0
    return sum(1 + (_step_count(s.child) if s.child is not None else 0) for s in trace.steps)


@dataclass(frozen=True)
class _Value:
    value: float | None
    ci: float | None = None
    n: int = 0
    status: CellStatus = "ok"
    reason: str = ""
    unit: str = "%"


def _missing(what: str, have: Sequence[str]) -> _Value:
    known = ", ".join(sorted(set(have))) or "none"
    return _Value(None, status="no_samples", reason=f"the run has no sample of {what} ({known})")


def _compute(
    cell: Cell,
    data: _RunData,
    *,
    labels: Mapping[str, Path],
    run: str,
    label_cache: dict[Path, Any],
) -> _Value:
    samples, seed = data.samples, data.seed
    if cell.kind in ("type", "entry", "overall"):
        rows = data.scores
        if cell.kind == "type":
            picked = [r.score for r in rows if r.question_type == cell.arg]
            if not picked:
                return _missing(f"type {cell.arg!r}", [r.question_type for r in rows])
        elif cell.kind == "entry":
            picked = [r.score for r in rows if r.dataset == cell.arg]
            if not picked:
                return _missing(f"entry {cell.arg!r}", [r.dataset for r in rows])
        else:
            picked = [r.score for r in rows]
            if not picked:
                return _Value(None, status="no_samples", reason="the run has no sample stored")
        mean, ci = _mean_ci(picked, samples=samples, seed=seed)
        return _Value(mean, ci, len(picked))
    if cell.kind == "aggregate":
        found = data.aggregates()
        if cell.arg not in found:
            known = ", ".join(found) or "none"
            return _Value(
                None,
                status="unavailable",
                reason=f"the run's suite has no aggregate {cell.arg!r} (aggregates: {known})",
            )
        agg = found[cell.arg]
        if agg is None:
            return _Value(
                None, status="no_samples", reason=f"an entry of {cell.arg!r} has no sample"
            )
        return _Value(100 * agg.mean, 100 * agg.half_width, agg.n)
    if cell.kind == "steps":
        counts = [float(_step_count(r.trace)) for r in data.records if r.trace is not None]
        if not counts:
            return _Value(None, status="no_samples", reason="the run has no stored trace")
        if cell.arg == "median":
            return _Value(float(statistics.median(counts)), None, len(counts), unit="")
        mean, ci = _mean_ci(counts, samples=samples, seed=seed, scale=1.0)
        return _Value(mean, ci, len(counts), unit="")
    if cell.kind == "label":
        return _label_value(cell, data, run, labels.get(run), label_cache)
    if cell.kind == "explain":
        return _explain_value(cell, data)
    return _Value(None, status="unavailable", reason=f"cell kind {cell.kind!r} is not reported")


def _label_value(
    cell: Cell, data: _RunData, run: str, path: Path | None, cache: dict[Path, Any]
) -> _Value:
    from hammr.eval.analysis.table4 import LabelFileError, tabulate_labels

    label = label_name(cell.arg)
    if label is None:
        return _Value(None, status="unavailable", reason=cell_problem(cell) or "")
    if path is None:
        return _Value(
            None,
            status="needs_labels",
            reason=(
                f"no labels: `hammr errors {data.stored} --export wrong.csv`, label it, "
                f"then --labels {run}=wrong.csv"
            ),
        )
    if path not in cache:
        try:
            cache[path] = tabulate_labels(path)
        except LabelFileError as e:
            raise ReportError(str(e)) from None
    table = cache[path]
    labelled = table.runs.get(data.stored)
    if labelled is None:
        return _Value(
            None,
            status="needs_labels",
            reason=f"{path} has no row of run {data.stored!r} (its runs: {', '.join(table.runs)})",
        )
    rows = data.scores
    if rows:
        labelled.accuracy = sum(r.score for r in rows) / len(rows)
    value = labelled.value(label)
    if value is None:
        return _Value(None, status="no_samples", reason=f"{path}: no labelled row of the run")
    return _Value(100 * value, None, labelled.labelled)


def _explain_value(cell: Cell, data: _RunData) -> _Value:
    metric = explain_metric(cell.arg)
    if metric is None:
        return _Value(None, status="unavailable", reason=cell_problem(cell) or "")
    samples, seed = data.samples, data.seed
    if metric == "accuracy":
        stored = [r.score for r in data.scores]
        if not stored:
            return _Value(None, status="no_samples", reason="the run has no sample stored")
        mean, ci = _mean_ci(stored, samples=samples, seed=seed)
        return _Value(mean, ci, len(stored))
    if metric == "accuracy_normalised":
        from hammr.eval.metrics.exact import ExactMatch

        exact = ExactMatch()
        right = [
            1.0 if r.prediction is not None and exact.matches(r.prediction, r.answers) else 0.0
            for r in data.records
        ]
        if not right:
            return _Value(None, status="no_samples", reason="the run has no sample stored")
        mean, ci = _mean_ci(right, samples=samples, seed=seed)
        return _Value(mean, ci, len(right))
    explained, scores, why = data.explained()
    if scores is None:
        return _Value(None, status="unavailable", reason=why)
    if metric in ("detection", "grounding"):
        per_sample = [e.scores[metric] for e in explained if metric in e.scores]
        mean, ci = _mean_ci(per_sample, samples=samples, seed=seed)
        return _Value(mean, ci, scores.scored)
    if metric in scores.language:
        return _Value(100 * scores.language[metric], None, scores.scored)
    if metric in scores.unavailable:
        return _Value(
            None, status="unavailable", reason=f"unavailable: {scores.unavailable[metric]}"
        )
    return _Value(
        None,
        status="unavailable",
        reason="unavailable: language metrics not computed",
    )


# --- deviations ---------------------------------------------------------------------------------


def _run_lines(experiment: Experiment, info: RunInfo, counts: Mapping[str, int]) -> list[str]:
    """What of one stored run stands between it and the paper."""
    from hammr.paper_settings import differences

    lines = list(differences(info.config, (experiment.paper,)))
    backend = info.config.get("llm.backend")
    model = info.config.get("llm.model")
    if backend or model:
        lines.append(f"LLM: {backend or '?'} {model or ''}".rstrip())
    total = sum(counts.values())
    per_entry = ", ".join(f"{e} {n}" for e, n in sorted(counts.items()))
    limit = experiment.data.limit
    if limit is not None:
        short = any(n < limit for n in counts.values()) or not counts
        if short:
            lines.append(
                f"{total} samples ({per_entry or 'none'}) where the paper drew {limit} per entry"
            )
    return lines


def table_deviations(
    experiment: Experiment,
    table: Table,
    infos: Mapping[str, RunInfo],
    counts: Mapping[str, Mapping[str, int]],
    *,
    demo: bool,
) -> list[str]:
    """The lines under a table: the file's deviations, then per line read from the table's
    runs (``infos``: run name -> stored info, for the runs stored) the runs it holds for,
    then the demo data."""
    out = list(experiment.deviations)
    grouped: dict[str, list[str]] = {}
    for run in dict.fromkeys(row.run for row in table.rows):
        info = infos.get(run)
        if info is None:
            continue
        for line in _run_lines(experiment, info, counts.get(run, {})):
            grouped.setdefault(line, []).append(run)
    for line, runs in grouped.items():
        out.append(f"{'run' if len(runs) == 1 else 'runs'} {', '.join(runs)}: {line}")
    if demo:
        suite = experiment.data.demo_suite or "the demo suite"
        text = f"demo data: every run is on {suite} (examples/demo), not the paper's data"
        subs = [
            f"{written} -> {shown}"
            for written, shown in experiment.data.demo_cells.items()
            if any(c.cell == Cell.parse(written) for c in table.columns)
        ]
        if subs:
            text += f"; cells shown instead: {', '.join(subs)}"
        out.append(text)
    return out


# --- the report -----------------------------------------------------------------------------------


def _not_filled(state: StepState | None) -> _Value | None:
    if state is None:
        return _Value(None, status="not_run", reason="not run yet")
    if state.status == "done" or state.status == "partial":
        return None
    status: CellStatus = state.status
    reason = state.reason or {"not_run": "not run yet"}.get(state.status, state.status)
    prefix = {"no_data": "no data: ", "failed": "failed: "}.get(state.status, "")
    if reason.startswith(prefix.rstrip(": ")):
        prefix = ""
    return _Value(None, status=status, reason=prefix + reason)


def _needs_language(experiment: Experiment, demo: bool) -> set[str]:
    runs: set[str] = set()
    for table in experiment.tables:
        for column in table.columns:
            cell = shown_cell(experiment, column.cell, demo)
            if cell.kind == "explain" and explain_metric(cell.arg) in LANGUAGE_KEYS:
                runs.update(row.run for row in table.rows)
    return runs


def shown_cell(experiment: Experiment, cell: Cell, demo: bool) -> Cell:
    """The cell a column shows: with --demo, the file's [data] demo_cells substitute."""
    if demo:
        for written, shown in experiment.data.demo_cells.items():
            if Cell.parse(written) == cell:
                return shown
    return cell


def build_report(
    store: RunStore | None,
    experiment: Experiment,
    *,
    prefix: str = "",
    demo: bool = False,
    states: Mapping[str, StepState] | None = None,
    labels: Mapping[str, Path] | None = None,
    data_dir: Path | None = None,
    samples: int = 1000,
    seed: int = 0,
) -> ExperimentReport:
    """Every table of ``experiment`` filled from ``store`` (None: nothing is stored yet).

    ``states`` defaults to :func:`hammr.experiments.state.step_states`; ``labels`` maps a
    run (its name in the file, or in the store) to its labelled CSV for ``label:`` cells;
    ``data_dir`` overrides the data folder ``explain:`` cells read references from.
    ReportError for a --labels file that cannot be read or names no run of the file."""
    if states is None:
        if store is None:
            states = {}
        else:
            from hammr.experiments.state import step_states

            states = step_states(store, experiment, prefix=prefix, demo=demo)
    by_run = _labels_by_run(experiment, labels or {}, prefix=prefix, demo=demo)
    language = _needs_language(experiment, demo)
    data: dict[str, _RunData] = {}
    infos: dict[str, RunInfo] = {}
    counts: dict[str, dict[str, int]] = {}
    label_cache: dict[Path, Any] = {}

    def run_data(run: str) -> _RunData | None:
        if run in data:
            return data[run]
        stored = stored_run_name(experiment.name, run, prefix=prefix, demo=demo)
        if store is None or store.run_info(stored) is None:
            return None
        data[run] = _RunData(
            store,
            stored,
            samples=samples,
            seed=seed,
            data_dir=data_dir,
            language=run in language,
        )
        infos[run] = data[run].info
        per_entry: dict[str, int] = {}
        for r in data[run].scores:
            per_entry[r.dataset] = per_entry.get(r.dataset, 0) + 1
        counts[run] = per_entry
        return data[run]

    tables: list[TableResult] = []
    for table in experiment.tables:
        rows: list[list[CellResult]] = []
        for row in table.rows:
            state = states.get(f"run:{row.run}")
            blocked = _not_filled(state)
            rd = run_data(row.run) if blocked is None else None
            if blocked is None and rd is None:
                blocked = _Value(None, status="not_run", reason="not run yet")
            cells: list[CellResult] = []
            for column in table.columns:
                cell = shown_cell(experiment, column.cell, demo)
                if blocked is not None or rd is None:
                    value = blocked or _Value(None, status="not_run", reason="not run yet")
                else:
                    value = _compute(cell, rd, labels=by_run, run=row.run, label_cache=label_cache)
                    if value.status == "ok" and state is not None and state.status == "partial":
                        value = _Value(
                            value.value,
                            value.ci,
                            value.n,
                            "partial",
                            f"partial: {state.reason}",
                            value.unit,
                        )
                cells.append(_cell_result(table, row, column.label, cell, value, experiment,
                                          prefix=prefix, demo=demo))  # fmt: skip
            rows.append(cells)
        for row in table.rows:
            if row.run not in data and states.get(f"run:{row.run}") is not None:
                run_data(row.run)  # deviations of partial/failed runs that stored something
        deviations = table_deviations(experiment, table, infos, counts, demo=demo)
        tables.append(TableResult(table, rows, deviations))
    notes = [
        "Ours: mean score in % ± half the width of its 95% bootstrap interval "
        f"({samples} resamples); Δ = ours − paper; n.r. = the paper reports no number; "
        "¹, ² (raised numbers) = the notes under the table (why a cell is empty, or that its run "
        "stopped part way)."
    ]
    return ExperimentReport(
        experiment,
        prefix,
        demo,
        states,
        tables,
        store.path if store is not None else None,
        notes,
    )


def _cell_result(
    table: Table,
    row: Row,
    column: str,
    cell: Cell,
    value: _Value,
    experiment: Experiment,
    *,
    prefix: str,
    demo: bool,
) -> CellResult:
    paper = row.paper.get(column, NOT_REPORTED)
    return CellResult(
        table=table.name,
        row=row.label,
        column=column,
        cell=str(cell),
        run=row.run,
        stored_as=stored_run_name(experiment.name, row.run, prefix=prefix, demo=demo),
        value=value.value,
        ci=value.ci,
        n=value.n,
        paper=None if paper == NOT_REPORTED else float(paper),
        status=value.status,
        reason=value.reason,
        unit=value.unit,
    )


def _labels_by_run(
    experiment: Experiment, labels: Mapping[str, Path], *, prefix: str, demo: bool
) -> dict[str, Path]:
    """--labels keys (a run's name in the file or in the store) -> the file's run names."""
    stored = {
        stored_run_name(experiment.name, r.name, prefix=prefix, demo=demo): r.name
        for r in experiment.runs
    }
    names = {r.name for r in experiment.runs}
    out: dict[str, Path] = {}
    for key, path in labels.items():
        run = key if key in names else stored.get(key)
        if run is None:
            raise ReportError(
                f"--labels {key}=...: {experiment.name} has no run {key!r} "
                f"(runs: {', '.join(sorted(names))})"
            )
        if not Path(path).is_file():
            raise ReportError(f"--labels {key}={path}: no such file")
        out[run] = Path(path)
    return out


# --- rendering ----------------------------------------------------------------------------------


PAPER_SHORT = "n.r."
"""What the terminal writes where the paper reports no number (the notes say so)."""
_MARKS: dict[str, str] = {"not_run": "—", "no_data": "—", "failed": "—"}
"""What an empty cell says in a table, by status: '—' where the row's run has nothing to show
(not run, no data, failed), 'n/a' where the run is there but this cell cannot be filled. The
reason goes under the table as a numbered footnote (:func:`table_footnotes`); the mark stays
short so the columns stay narrow and the row labels keep their room."""
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(n: int) -> str:
    """``n`` in superscript digits (the footnote mark of a cell)."""
    return str(n).translate(_SUPERSCRIPT)


def footnote_text(c: CellResult) -> str | None:
    """What a cell's footnote says (None: the cell needs none). A run that is not finished
    (not run, no data, failed, stopped part way) is named by its stored name, so every cell
    of its row shares one footnote and the reader knows which run to look at."""
    if c.status == "ok":
        return None
    reason = c.reason or c.status.replace("_", " ")
    if c.status in ("not_run", "no_data", "failed", "partial"):
        return f"run {c.stored_as}: {reason}"
    return reason


@dataclass(frozen=True)
class Footnotes:
    """A table's footnotes: each distinct reason once, numbered from 1 in reading order,
    and per cell (row, column index) the number it carries."""

    texts: list[str]
    marks: dict[tuple[int, int], int]

    def of(self, row: int, column: int) -> int | None:
        return self.marks.get((row, column))


def table_footnotes(table: TableResult) -> Footnotes:
    """Number the reasons of ``table``'s cells that need one: the same reason gets the same
    number wherever it stands."""
    numbers: dict[str, int] = {}
    marks: dict[tuple[int, int], int] = {}
    for i, cells in enumerate(table.cells):
        for j, c in enumerate(cells):
            text = footnote_text(c)
            if text is None:
                continue
            marks[(i, j)] = numbers.setdefault(text, len(numbers) + 1)
    return Footnotes(list(numbers), marks)


def cell_mark(c: CellResult) -> str:
    """An empty cell's short mark ('—': the run has nothing to show, 'n/a': this cell)."""
    return _MARKS.get(c.status, "n/a")


def column_unit(report: ExperimentReport, table: Table, index: int) -> str:
    """' (steps)' for a column of step counts whose label does not say so, else '' (scores
    are in percent)."""
    column = table.columns[index]
    cell = shown_cell(report.experiment, column.cell, report.demo)
    return " (steps)" if cell.kind == "steps" and "step" not in column.label.lower() else ""


LABEL_KEEP = 18
"""How wide the row labels stay, at most, when the table must narrow to fit the terminal:
number columns give up their room (their headers fold) before the labels go below this."""


def fit_widths(
    naturals: Sequence[int], words: Sequence[int], floors: Sequence[int], budget: int
) -> list[int] | None:
    """Content widths of a table's columns (the row labels first) that fit ``budget``
    characters, or None when the natural widths already fit.

    Rich would shrink the widest column first, which is the labels, folding them into pieces
    while number columns keep room they do not need. Here the labels keep up to
    :data:`LABEL_KEEP`; then the widest number column gives up one character at a time, first
    down to its longest word (``words``: a header wraps between words), then the labels down
    to their longest word, then number columns down to ``floors`` (the longest word of their
    cells: a header folds inside a word), and last the labels down to 6."""
    if sum(naturals) <= budget:
        return None
    widths = list(naturals)
    widths[0] = min(widths[0], max(LABEL_KEEP, words[0]))

    def shrink(columns: range, limit: Sequence[int]) -> bool:
        while sum(widths) > budget:
            spare = [j for j in columns if widths[j] > limit[j]]
            if not spare:
                return False
            widths[max(spare, key=lambda k: widths[k])] -= 1
        return True

    numbers = range(1, len(widths))
    label = range(0, 1)
    if shrink(numbers, words) or shrink(label, words) or shrink(numbers, floors):
        return widths
    shrink(label, [6] * len(widths))
    return widths


class _FittedTable:
    """A table built for the width it is printed at (:func:`fit_widths`)."""

    def __init__(
        self,
        build: Callable[[Sequence[int] | None], RichTable],
        naturals: Sequence[int],
        words: Sequence[int],
        floors: Sequence[int],
    ) -> None:
        self.build, self.naturals, self.words, self.floors = build, naturals, words, floors

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RichTable]:
        gaps = 2 * (len(self.naturals) - 1)  # a separator and a pad before each number column
        budget = options.max_width - gaps
        yield self.build(fit_widths(self.naturals, self.words, self.floors, budget))


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def render_rich(report: ExperimentReport) -> list[RenderableType]:
    """The tables for the terminal. Each row of the file is three lines: the row's label with
    ours (± half the CI), 'paper' with the paper's numbers ('n.r.': not reported), and 'Δ'
    with ours minus the paper's (left out where no cell has both). An empty cell holds a
    short mark and a footnote number; the reasons follow the table, each once, then the
    deviations. Headers and labels wrap rather than being cut, and the columns are fitted to
    the terminal's width (:func:`fit_widths`). Stored text is never read as markup."""
    from rich.text import Text

    from hammr.terminal_text import safe_markup

    e = report.experiment
    out: list[RenderableType] = []
    head = f"[bold]{safe_markup(e.title)}[/bold]  ({safe_markup(e.source)})"
    if report.demo:
        head += "  [yellow]demo data[/yellow]"
    out.append(Text.from_markup(head))
    for t in report.tables:
        out.append(_table(report, t))
        notes = table_footnotes(t)
        if notes.texts:
            out.append(_hanging([(superscript(n), text) for n, text in enumerate(notes.texts, 1)]))
        if t.deviations:
            out.append(Text.from_markup("[bold]Deviations from the paper[/bold]"))
            out.append(_hanging([("•", d) for d in t.deviations], indent=2))
    out += [Text(n, style="dim") for n in report.notes]
    return out


def _table(report: ExperimentReport, t: TableResult) -> _FittedTable:
    """One table for the terminal: three lines per row of the file (see :func:`render_rich`)."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    notes = table_footnotes(t)
    headers = [
        column.label + column_unit(report, t.table, j) for j, column in enumerate(t.table.columns)
    ]
    lines: list[tuple[Text, list[Text], str]] = []  # (label, cells, what the line is)
    for i, (row, cells) in enumerate(zip(t.table.rows, t.cells, strict=True)):
        ours, paper, diff = [], [], []
        for j, c in enumerate(cells):
            number = notes.of(i, j)
            mark = Text(superscript(number) if number is not None else "", style="dim")
            if c.filled:
                ours.append(Text(c.ours_text(), style="bold") + mark)
            else:
                ours.append(Text(cell_mark(c), style="italic") + mark)
            paper.append(Text(PAPER_SHORT if c.paper is None else c.paper_text()))
            diff.append(Text(c.diff_text()))
        lines.append((Text(row.label, style="bold"), ours, "ours"))
        lines.append((Text("  paper"), paper, "paper"))
        if any(d.plain for d in diff):
            lines.append((Text("  Δ"), diff, "diff"))
    naturals = [max([len(label.plain) for label, _, _ in lines] + [1])]
    floors = [max([_longest_word(label.plain) for label, _, _ in lines] + [1])]
    words = [min(floors[0], 28)]
    for j, header in enumerate(headers):
        texts = [cells[j].plain for _, cells, _ in lines]
        naturals.append(max([len(header)] + [len(x) for x in texts]))
        floors.append(max([1] + [_longest_word(x) for x in texts]))
        words.append(max(floors[-1], _longest_word(header)))
    naturals[0] = min(naturals[0], 28)

    def build(widths: Sequence[int] | None) -> RichTable:
        rt = RichTable(
            title=Text(f"{t.table.title} — {t.table.source}"),
            title_justify="left",
            caption=Text(t.table.note) if t.table.note else None,
            caption_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 0, 0, 1),
        )
        rt.add_column("", overflow="fold", width=widths[0] if widths else None, max_width=28)
        for j, header in enumerate(headers, start=1):
            rt.add_column(
                Text(header),
                justify="right",
                overflow="fold",
                width=widths[j] if widths else None,
            )
        for k, (label, cells, kind) in enumerate(lines):
            last_of_row = k + 1 == len(lines) or lines[k + 1][2] == "ours"
            rt.add_row(
                label,
                *cells,
                style="dim" if kind == "paper" else None,
                end_section=last_of_row and k + 1 < len(lines),
            )
        return rt

    return _FittedTable(build, naturals, words, floors)


def _hanging(lines: Sequence[tuple[str, str]], *, indent: int = 0) -> RenderableType:
    """``(mark, text)`` lines with the text wrapped under itself, not under the mark; the
    text is plain (never read as markup)."""
    from rich.padding import Padding
    from rich.table import Table as RichTable
    from rich.text import Text

    grid = RichTable.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for mark, text in lines:
        grid.add_row(Text(mark), Text(text))
    return Padding(grid, (0, 0, 0, indent)) if indent else grid


CSV_COLUMNS = (
    "table", "row", "column", "ours", "ci", "paper", "diff", "n", "status", "reason",
    "cell", "run", "unit",
)  # fmt: skip


def render_csv(report: ExperimentReport) -> str:
    """One row per cell (:data:`CSV_COLUMNS`); numbers in the cell's unit (percent for
    scores), empty where there is none; paper 'not reported' where the paper has none."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def num(v: float | None) -> str:
        return "" if v is None else f"{v:.2f}"

    for c in report.cells():
        w.writerow(
            [
                c.table,
                c.row,
                c.column,
                num(c.value),
                num(c.ci),
                NOT_REPORTED if c.paper is None else f"{c.paper:g}",
                num(c.diff),
                c.n,
                c.status,
                c.reason,
                c.cell,
                c.stored_as,
                c.unit,
            ]
        )
    return buf.getvalue()


HTML_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1f2937; margin: 24px; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; }
table.exp { border-collapse: collapse; margin: 8px 0; }
table.exp th, table.exp td { border: 1px solid #d1d5db; padding: 4px 10px; vertical-align: top; }
table.exp td { text-align: right; font-variant-numeric: tabular-nums; }
table.exp .paper { color: #6b7280; font-size: 12px; }
table.exp .reason { color: #92400e; font-style: italic; font-size: 12px; }
.deviations li, .notes li { margin: 2px 0; } .muted { color: #6b7280; }
.notes { font-size: 12px; color: #92400e; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0 14px; }
"""


def run_link(viewer: str, stored: str) -> str:
    """The viewer's address of a stored run (``hammr view``'s ``#/run/NAME``)."""
    return f"{viewer}#/run/{quote(stored, safe='')}"


def render_html(
    report: ExperimentReport,
    *,
    figures: Sequence[str] = (),
    viewer: str = DEFAULT_VIEWER,
) -> str:
    """A self-contained page: every table (our cells link to their runs in the viewer at
    ``viewer``), its deviations, then ``figures`` (HTML fragments, pictures inlined)."""
    e = html.escape
    x = report.experiment
    store = f" --store {report.store_path}" if report.store_path is not None else ""
    out = [
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(x.name)}</title><style>{HTML_CSS}</style></head><body>",
        f"<h1>{e(x.title)}</h1>",
        f'<p class="muted">{e(x.source)} · experiment {e(x.name)}'
        + (" · <b>demo data</b>" if report.demo else "")
        + "</p>",
    ]
    if x.description:
        out.append(f"<p>{e(x.description)}</p>")
    out.append(
        f'<p class="muted">Each of our numbers links to its run in the viewer at {e(viewer)} '
        f"(start it with <code>hammr view{e(store)} --port 8765</code>).</p>"
    )
    for t in report.tables:
        out.append(f'<h2 id="table-{e(t.table.name)}">{e(t.table.title)}</h2>')
        out.append(f'<p class="muted">{e(t.table.source)}</p>')
        head = "".join(
            f"<th>{e(c.label + column_unit(report, t.table, j))}</th>"
            for j, c in enumerate(t.table.columns)
        )
        out += ['<table class="exp">', f"<thead><tr><th></th>{head}</tr></thead><tbody>"]
        notes = table_footnotes(t)
        for i, (row, cells) in enumerate(zip(t.table.rows, t.cells, strict=True)):
            tds = []
            for j, c in enumerate(cells):
                number = notes.of(i, j)
                sup = (
                    f'<sup><a href="#note-{e(t.table.name)}-{number}">{number}</a></sup>'
                    if number is not None
                    else ""
                )
                if c.filled:
                    ours = f'<a href="{e(run_link(viewer, c.stored_as))}">{e(c.ours_text())}</a>'
                    extra = f"paper {e(c.paper_text())}"
                    if c.diff is not None:
                        extra += f" · Δ {e(c.diff_text())}"
                    body = f'{ours}{sup}<div class="paper">{extra}</div>'
                else:
                    body = (
                        f'<div class="reason">{e(cell_mark(c))}{sup}</div>'
                        f'<div class="paper">paper {e(c.paper_text())}</div>'
                    )
                title = f"{c.cell} of {c.stored_as}, n={c.n}"
                if c.reason:
                    title += f": {c.reason}"
                tds.append(f'<td title="{e(title)}">{body}</td>')
            out.append(f"<tr><th>{e(row.label)}</th>{''.join(tds)}</tr>")
        out.append("</tbody></table>")
        if t.table.note:
            out.append(f'<p class="muted">{e(t.table.note)}</p>')
        if notes.texts:
            out.append('<ol class="notes">')
            out += [
                f'<li id="note-{e(t.table.name)}-{n}">{e(text)}</li>'
                for n, text in enumerate(notes.texts, 1)
            ]
            out.append("</ol>")
        if t.deviations:
            out.append('<p><b>Deviations from the paper</b></p><ul class="deviations">')
            out += [f"<li>{e(d)}</li>" for d in t.deviations]
            out.append("</ul>")
    out += [f'<p class="muted">{e(n)}</p>' for n in report.notes]
    out += list(figures)
    out.append("</body></html>\n")
    return "\n".join(out)


__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_VIEWER",
    "EXPLAIN_METRICS",
    "PAPER_SHORT",
    "STEP_STATISTICS",
    "CellResult",
    "ExperimentReport",
    "Footnotes",
    "ReportError",
    "TableResult",
    "build_report",
    "cell_mark",
    "cell_problem",
    "column_unit",
    "explain_metric",
    "footnote_text",
    "label_name",
    "render_csv",
    "render_html",
    "render_rich",
    "run_link",
    "shown_cell",
    "superscript",
    "table_deviations",
    "table_footnotes",
]
