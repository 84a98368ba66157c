"""An experiment's tables: our numbers beside the paper's, the difference, and the deviations.

:func:`build_report` reads the run store (never the model, never the data folder, except for
the reference explanations an ``explain:`` cell scores against) and gives, per ``[[table]]``
of the experiment file, one :class:`CellResult` per (row, column): our value with the half
width of its 95% bootstrap interval, the paper's number, ours minus the paper's, and where
the cell cannot be filled a short reason (the run is not run yet, its suite's data was
missing, it stopped part way, its samples failed: :mod:`hammr.eval.run_health`). Under
every table go the file's deviations and those read from the runs themselves
(:func:`table_deviations`): settings that differ from what the paper ran
(:func:`hammr.paper_settings.differences`), the LLM each run used, how many samples it has
against the paper's, and the demo data.

The numbers are the existing reports' own: ``type:``, ``entry:`` and ``overall`` cells are
the mean score with :func:`hammr.eval.stats.bootstrap_ci` (as ``hammr report`` computes each
row), ``aggregate:`` cells are ``hammr report``'s aggregate rows (:func:`hammr.eval.report.
build_report`), ``explain:`` cells score the run's explanations as ``hammr explain`` does
(:func:`hammr.eval.explain_cli.score_run`), ``label:`` cells are HAMMR's Table 4 shares from
a labelled file (:func:`hammr.eval.analysis.table4.tabulate_labels`).

The renderers (terminal, CSV, HTML) are in :mod:`hammr.experiments.render`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hammr.experiments.spec import (
    NOT_REPORTED,
    Cell,
    Experiment,
    Row,
    Table,
    stored_run_name,
)

if TYPE_CHECKING:
    from hammr.eval.explain_cli import Explained, RunScores
    from hammr.eval.metrics.explanation import GroundedExplanation
    from hammr.eval.store import RunInfo, RunStore, ScoreRow
    from hammr.eval.suites import Suite
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


STRING_MATCHES = ("exact", "list-iou")
"""What a sample's judge column holds when strings decided it (no judge model was asked)."""

JUDGE_PAPERS = {"hammr": "bem"}
"""The judge a paper decided its open answers with, where it says (HAMMR: BEM for
Encyclopedic-VQA)."""


def _run_lines(
    experiment: Experiment,
    info: RunInfo,
    counts: Mapping[str, int],
    judges: Mapping[str, int] | None = None,
) -> list[str]:
    """What of one stored run stands between it and the paper."""
    from hammr.paper_settings import differences

    lines = list(differences(info.config, (experiment.paper,)))
    paper_judge = JUDGE_PAPERS.get(experiment.paper)
    for judge, n in sorted((judges or {}).items()):
        if judge in STRING_MATCHES:
            continue
        answers = f"{n} answer{'' if n == 1 else 's'} no string matched"
        said = (
            f"{answers}: counted wrong, no judge (--judge)"
            if judge == "none"
            else f"{answers}: decided by the {judge} judge"
        )
        if paper_judge and judge != paper_judge:
            said += f", where the {experiment.paper} paper used {paper_judge.upper()}"
        lines.append(said)
    from hammr.experiments.sharing import shared_counts

    for source, n in sorted(shared_counts(info.settings).items()):
        lines.append(
            f"{n} sample{'' if n == 1 else 's'} shared from run {source} "
            "(made the same way; asked once)"
        )
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
    judges: Mapping[str, Mapping[str, int]] | None = None,
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
        for line in _run_lines(experiment, info, counts.get(run, {}), (judges or {}).get(run)):
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
        rows = dict.fromkeys(row.run for row in table.rows)
        budget = _demo_budget_used(experiment, [infos[r] for r in rows if r in infos])
        if budget:
            text += f"; a smoke run under the demo budget ({budget})"
        out.append(text)
    return out


def _demo_budget_used(experiment: Experiment, infos: Sequence[RunInfo]) -> str:
    """The demo budget's settings as the stored runs ran them (from their identities), as
    ``key = value`` pairs; '' when none of the runs holds any."""
    keys = experiment.data.demo_budget
    used: dict[str, list[str]] = {}
    for info in infos:
        identity = info.settings.get("identity")
        settings = identity.get("settings") if isinstance(identity, dict) else None
        if not isinstance(settings, dict):
            continue
        for key in keys:
            if key in settings:
                value = repr(settings[key])
                if value not in used.setdefault(key, []):
                    used[key].append(value)
    return ", ".join(f"{k} = {' / '.join(v)}" for k, v in used.items())


# --- the report -----------------------------------------------------------------------------------


def _run_suite(experiment: Experiment, run: str, demo: bool) -> Suite | None:
    """The suite ``run`` read (None when it cannot be read)."""
    from hammr.experiments.validate import load_run_suite

    spec = next(r for r in experiment.runs if r.name == run)
    name = experiment.data.demo_suite if demo and experiment.data.demo_suite else spec.suite
    try:
        return load_run_suite(name, () if demo else spec.entries)
    except (ValueError, FileNotFoundError):
        return None


def _cell_entries(cell: Cell, suite: Suite | None) -> set[str] | None:
    """The suite entries a cell reads (None: not a cell over entries, or no suite)."""
    if suite is None:
        return None
    if cell.kind == "entry":
        return {cell.arg}
    if cell.kind == "type":
        return {e.name for e in suite.entries if e.question_type == cell.arg}
    if cell.kind == "aggregate":
        found = next((a for a in suite.aggregates if a.name == cell.arg), None)
        return set(found.entries) if found is not None else None
    if cell.kind == "overall":
        return {e.name for e in suite.entries}
    return None


def _without_data(
    value: _Value,
    cell: Cell,
    missing: Mapping[str, str],
    suite: Suite | None,
) -> _Value:
    """A cell of a run some of whose entries had no data: none of its entries, 'no data'
    with why; some, its value marked partial, naming those left out."""
    entries = _cell_entries(cell, suite)
    gone = sorted(e for e in entries or () if e in missing)
    if not gone:
        return value
    why = "; ".join(missing[e] for e in gone)
    if entries is not None and (set(gone) == entries or value.value is None):
        return _Value(None, status="no_data", reason=f"no data: {why}")
    if value.status != "ok":
        return value
    return _Value(value.value, value.ci, value.n, "partial",
                  f"without {', '.join(gone)}: no data ({why})", value.unit)  # fmt: skip


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

    ``states`` defaults to :func:`hammr.experiments.state.step_states`, where a run whose
    stored samples are failures (:mod:`hammr.eval.run_health`) is ``failed`` with the
    cause, so its cells are empty and say why, never a score of failures' zeros.
    ``labels`` maps a run (its name in the file, or in the store) to its labelled CSV for
    ``label:`` cells; ``data_dir`` overrides the data folder ``explain:`` cells read
    references from. ReportError for a --labels file that cannot be read or names no run of
    the file."""
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
    judges: dict[str, dict[str, int]] = {}
    label_cache: dict[Path, Any] = {}
    row_suites: dict[str, Suite | None] = {}

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
        judged: dict[str, int] = {}  # judge -> answers it decided (those no string matched)
        for r in data[run].scores:
            per_entry[r.dataset] = per_entry.get(r.dataset, 0) + 1
            if r.judge:
                judged[r.judge] = judged.get(r.judge, 0) + 1
        counts[run], judges[run] = per_entry, judged
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
                    if state is not None and state.missing:
                        if row.run not in row_suites:  # read once per row, not per cell
                            row_suites[row.run] = _run_suite(experiment, row.run, demo)
                        value = _without_data(value, cell, state.missing, row_suites[row.run])
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
        deviations = table_deviations(experiment, table, infos, counts, demo=demo, judges=judges)
        tables.append(TableResult(table, rows, deviations))
    notes = [
        "Ours: mean score in % ± half the width of its 95% bootstrap interval "
        f"({samples} resamples); Δ = ours − paper; n.r. = the paper reports no number; "
        "¹, ² (raised numbers) = the notes under the table (why a cell is empty, or that its run "
        "stopped part way)."
    ]
    if store is not None:
        from hammr.experiments.cost import actual_lines

        stored = {
            run.name: stored_run_name(experiment.name, run.name, prefix=prefix, demo=demo)
            for run in experiment.runs
        }
        cost = actual_lines(store, stored)
        if cost:
            notes.append(
                "Cost: the model calls and tokens each run's stored questions took, beside "
                "the estimate made when it started (`hammr experiment show` prints one "
                "before a run):"
            )
            notes.extend(f"  {line}" for line in cost)
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


__all__ = [
    "DEFAULT_VIEWER",
    "EXPLAIN_METRICS",
    "STEP_STATISTICS",
    "CellResult",
    "ExperimentReport",
    "ReportError",
    "TableResult",
    "build_report",
    "cell_problem",
    "explain_metric",
    "label_name",
    "shown_cell",
    "table_deviations",
]
