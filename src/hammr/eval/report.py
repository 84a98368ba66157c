"""The paper-style results table of one or more stored runs: a row per question type (and
dataset), the suite's aggregates, the macro average, a column per run, each cell 'score ±CI' in
percent.

An aggregate is a ``[[aggregate]]`` table of the suite a run was made with (read again from the
suite named in the run's settings; a suite that can no longer be read gives none): one number
computed from several entries' accuracies, e.g. Infoseek's final score, the harmonic mean of
its two splits, or MuSEAgent's micro average (all the entries' samples pooled). Its interval is
a stratified bootstrap: every entry is resampled on its own, at its own size.

:mod:`hammr.eval.methods_report` lays the same numbers out as MuSEAgent's Table 2 (runs as
rows, benchmarks and their sub-tasks as columns); :mod:`hammr.eval.scaling` plots them against a
memory setting (its Fig. 2).

Everything is computed from the scores sorted by (dataset, sample id), so a run that was
interrupted and resumed gives exactly the table of one that ran in one go.

A run whose samples are failures (every one, or more than half for one cause:
:mod:`hammr.eval.run_health`) shows FAILED in every cell instead of its failures' zeros, and
a footnote names the cause.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from hammr.eval.run_health import RunVerdict, stored_verdict
from hammr.eval.store import (
    ASKED_ELSEWHERE,
    FAILED_STATUSES,
    RunInfo,
    RunStore,
    ScoreRow,
    StoreError,
)
from hammr.eval.types import QUESTION_TYPES

if TYPE_CHECKING:
    from hammr.eval.suites import SuiteAggregate

FAILED_CELL = "FAILED"
RETRY_FAILED = "ask them again with --retry-failed"
UNSCORED_CELL = "unscored"
"""What every cell of a run without any ground truth shows (served questions, saved traces):
its stored scores of 0 are not results."""
"""What every cell of a FAILED run (:mod:`hammr.eval.run_health`) shows instead of a number."""

Format = Literal["markdown", "csv", "html"]
FORMATS: tuple[Format, ...] = ("markdown", "csv", "html")

ENCVQA = "encvqa"


@dataclass(frozen=True)
class Cell:
    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def text(self) -> str:
        return f"{100 * self.mean:.1f} ±{100 * self.half_width:.1f}"


@dataclass(frozen=True)
class ReportRow:
    question_type: str
    dataset: str
    cells: tuple[Cell | None, ...]
    """One per run (None: the run has no sample of this row)."""

    @property
    def label(self) -> str:
        if self.question_type and self.dataset:
            return f"{self.question_type} ({self.dataset})"
        return self.question_type or self.dataset


@dataclass(frozen=True)
class AggregateRow:
    """One ``[[aggregate]]`` of the runs' suites: ``function`` of the ``entries``' accuracies."""

    name: str
    function: str
    entries: tuple[str, ...]
    cells: tuple[Cell | None, ...]
    """One per run (None: the run's suite has no such aggregate, or an entry has no sample)."""

    @property
    def label(self) -> str:
        return self.name


@dataclass
class Report:
    runs: list[RunInfo]
    rows: list[ReportRow]
    macro: tuple[Cell | None, ...]
    footnotes: list[str] = field(default_factory=list)
    ci_samples: int = 1000
    aggregates: list[AggregateRow] = field(default_factory=list)
    verdicts: tuple[RunVerdict | None, ...] = ()
    """One per run: why its numbers are not results (:mod:`hammr.eval.run_health`), or None.
    The renderers write :data:`FAILED_CELL` in every cell of such a run; the cells keep the
    computed numbers for callers that want them."""

    unscored: tuple[bool, ...] = ()
    """One per run: True when no sample has a ground truth (:data:`UNSCORED_CELL`)."""

    def failed(self, index: int) -> RunVerdict | None:
        """The verdict on the ``index``-th run (None: its numbers are results)."""
        return self.verdicts[index] if index < len(self.verdicts) else None

    def is_unscored(self, index: int) -> bool:
        return index < len(self.unscored) and self.unscored[index]

    def render(self, fmt: Format = "markdown") -> str:
        if fmt == "csv":
            return render_csv(self)
        if fmt == "html":
            return render_html(self)
        return render_markdown(self)


def _is_encvqa(row: ScoreRow) -> bool:
    return row.metric == ENCVQA or row.dataset.lower().startswith(ENCVQA)


def _row_order(key: tuple[str, str]) -> tuple[int, str, str]:
    qt, ds = key
    rank = QUESTION_TYPES.index(qt) if qt in QUESTION_TYPES else len(QUESTION_TYPES)
    return (rank, qt, ds)


def _counts(values: Sequence[str]) -> str:
    seen: dict[str, int] = {}
    for v in values:
        seen[v or "unrecorded"] = seen.get(v or "unrecorded", 0) + 1
    return ", ".join(f"{k} ({n})" for k, n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0])))


def suite_aggregates(info: RunInfo) -> tuple[SuiteAggregate, ...]:
    """The ``[[aggregate]]`` tables of the suite ``info`` was run with (the suite as the run's
    settings name it, else the run's suite label); none when it cannot be read now."""
    from hammr.eval.suites import SuiteError, load_suite

    name = info.settings.get("suite") or info.suite
    if not isinstance(name, str) or not name:
        return ()
    try:
        return load_suite(name).aggregates
    except (SuiteError, OSError):
        return ()


def aggregate_cell(
    parts: Sequence[Sequence[float]],
    function: Callable[[Sequence[float]], float],
    *,
    samples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Cell:
    """``function`` of the parts' mean scores, with a stratified percentile-bootstrap interval:
    each replicate resamples every part on its own (at its own size) and applies ``function``
    to their means. Constant parts give the degenerate interval."""
    import numpy as np

    from hammr.eval.stats import _resampled_means

    if not parts or any(len(p) == 0 for p in parts):
        raise ValueError("an aggregate needs at least one score in every part")
    value = function([sum(p) / len(p) for p in parts])
    n = sum(len(p) for p in parts)
    arrays = [np.asarray(p, dtype=np.float64) for p in parts]
    if all(np.ptp(a) == 0 for a in arrays):
        return Cell(value, value, value, n)
    rng = np.random.default_rng(seed)
    replicates = [_resampled_means(a, samples, rng) for a in arrays]
    values = np.array([function([float(r[i]) for r in replicates]) for i in range(samples)])
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return Cell(value, float(low), float(high), n)


def _aggregate_rows(
    infos: Sequence[RunInfo],
    scores: Sequence[dict[str, list[float]]],
    *,
    samples: int,
    seed: int,
) -> tuple[list[AggregateRow], list[str]]:
    """One row per aggregate name of the runs' suites (first seen first) that some run can
    compute, and their footnotes."""
    from hammr.eval.metrics import aggregate_function

    per_run = [{a.name: a for a in suite_aggregates(info)} for info in infos]
    names = list(dict.fromkeys(name for found in per_run for name in found))
    rows: list[AggregateRow] = []
    notes: list[str] = []
    for name in names:
        first = next(found[name] for found in per_run if name in found)
        cells: list[Cell | None] = []
        for found, by_entry in zip(per_run, scores, strict=True):
            agg = found.get(name)
            if agg is None or any(not by_entry.get(e) for e in agg.entries):
                cells.append(None)
                continue
            parts = [by_entry[e] for e in agg.entries]
            fn = aggregate_function(agg.function, [len(p) for p in parts])
            cells.append(aggregate_cell(parts, fn, samples=samples, seed=seed))
        if all(c is None for c in cells):
            continue  # no run holds every entry it needs (e.g. a run of a few entries)
        rows.append(AggregateRow(name, first.function, first.entries, tuple(cells)))
        what = first.description or f"{first.function} of the entries' accuracies"
        notes.append(
            f"{name}: {what}, over {', '.join(first.entries)}; its interval resamples each "
            "entry on its own."
        )
    return rows, notes


def build_report(
    store: RunStore, runs: Sequence[str], *, samples: int = 1000, seed: int = 0
) -> Report:
    """The table of ``runs`` (in the order given); ``samples`` bootstrap resamples per CI."""
    from hammr.eval.stats import bootstrap_ci, macro_average

    if not runs:
        raise StoreError("name at least one run (see `hammr runs`)")
    infos: list[RunInfo] = []
    per_run: list[dict[tuple[str, str], list[ScoreRow]]] = []
    per_entry: list[dict[str, list[float]]] = []
    for name in runs:
        info = store.run_info(name)
        if info is None:
            raise StoreError(store.unknown_run_message(name))
        infos.append(info)
        groups: dict[tuple[str, str], list[ScoreRow]] = {}
        by_entry: dict[str, list[float]] = {}
        for r in store.score_rows(name):
            groups.setdefault((r.question_type, r.dataset), []).append(r)
            by_entry.setdefault(r.dataset, []).append(r.score)
        per_run.append(groups)
        per_entry.append(by_entry)

    keys = sorted({k for g in per_run for k in g}, key=_row_order)
    rows: list[ReportRow] = []
    for key in keys:
        cells: list[Cell | None] = []
        for groups in per_run:
            found = groups.get(key)
            if not found:
                cells.append(None)
                continue
            mean, low, high = bootstrap_ci([r.score for r in found], samples=samples, seed=seed)
            cells.append(Cell(mean, low, high, len(found)))
        rows.append(ReportRow(key[0], key[1], tuple(cells)))

    macro: list[Cell | None] = []
    for groups in per_run:
        if not groups:
            macro.append(None)
            continue
        per_row = {
            ReportRow(k[0], k[1], ()).label: [r.score for r in groups[k]]
            for k in keys
            if k in groups
        }
        mean, low, high = macro_average(per_row, samples=samples, seed=seed)
        macro.append(Cell(mean, low, high, sum(len(v) for v in per_row.values())))

    notes = [
        f"Cells: mean score in % ± half the width of its 95% bootstrap confidence interval "
        f"({samples} resamples); the macro average weighs every row equally."
    ]
    if len(infos) > 1 and any(any(c is None for c in row.cells) for row in rows):
        notes.append("Runs cover different rows (–: no samples), so their macro averages differ.")
    for info, groups in zip(infos, per_run, strict=True):
        everything = [r for g in groups.values() for r in g]
        enc = [r.judge for r in everything if _is_encvqa(r)]
        if enc:
            notes.append(f"EncVQA judged in {info.name} by: {_counts(enc)}.")
        failed = [r.status for r in everything if r.status in FAILED_STATUSES]
        if failed:
            notes.append(f"{info.name}: {_counts(failed)} counted as wrong.")
    verdicts = tuple(stored_verdict(store, info.name) for info in infos)
    for info, verdict in zip(infos, verdicts, strict=True):
        if verdict is not None:
            notes.append(
                f"{info.name}: {FAILED_CELL}, its numbers are not results: {verdict.text}; "
                f"{verdict.next_step(ASKED_ELSEWHERE.get(info.suite, RETRY_FAILED))}."
            )
    unscored = tuple(not store.has_ground_truth(info.name) for info in infos)
    for info, none in zip(infos, unscored, strict=True):
        if none and any(per_run[infos.index(info)].values()):
            notes.append(
                f"{info.name}: {UNSCORED_CELL}, its questions came without a ground truth "
                "(served by `hammr serve`, or a saved trace): read them with `hammr view` or "
                "`hammr errors`."
            )
    aggregates, aggregate_notes = _aggregate_rows(infos, per_entry, samples=samples, seed=seed)
    notes += aggregate_notes
    return Report(infos, rows, tuple(macro), notes, samples, aggregates, verdicts, unscored)


def _header(report: Report) -> list[str]:
    return [f"{i.name}" for i in report.runs]


def _subheader(report: Report) -> list[str]:
    return [f"{i.system} · {i.suite}" for i in report.runs]


def _texts(cells: Sequence[Cell | None], report: Report | None = None) -> list[str]:
    """Each run's cell as text ('–': no sample; FAILED for a run whose numbers are not
    results)."""
    out: list[str] = []
    for i, c in enumerate(cells):
        if c is None:
            out.append("–")
        elif report is not None and report.failed(i) is not None:
            out.append(FAILED_CELL)
        elif report is not None and report.is_unscored(i):
            out.append(UNSCORED_CELL)
        else:
            out.append(c.text())
    return out


def _totals(report: Report) -> list[str]:
    return [str(c.n) if c is not None else "0" for c in report.macro]


def render_markdown(report: Report) -> str:
    head = ["", *_header(report)]
    body = [
        ["*system · suite*", *_subheader(report)],
        *([row.label, *_texts(row.cells, report)] for row in report.rows),
        *([agg.label, *_texts(agg.cells, report)] for agg in report.aggregates),
        [
            "**Macro average**",
            *(f"**{t}**" if t != "–" else t for t in _texts(report.macro, report)),
        ],
        ["*samples*", *_totals(report)],
    ]
    return markdown_table(head, body, report.footnotes)


def markdown_table(
    head: Sequence[str], body: Sequence[Sequence[str]], footnotes: Sequence[str] = ()
) -> str:
    """A markdown table, first column left-aligned and the others right-aligned, padded to
    line up, followed by its footnotes as a list."""
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        ":" + "-" * (w + 1) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)
    )
    out = [line(head), rule + "|", *(line(r) for r in body), ""]
    out += [f"- {n}" for n in footnotes]
    return "\n".join(out) + "\n"


def render_csv(report: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = ["row", "question_type", "dataset"]
    for name in _header(report):
        header += [f"{name} mean %", f"{name} low %", f"{name} high %", f"{name} n"]
    w.writerow(header)

    def cells(cs: Sequence[Cell | None]) -> list[str]:
        out: list[str] = []
        for i, c in enumerate(cs):
            if c is None:
                out += ["", "", "", "0"]
            elif report.failed(i) is not None or report.is_unscored(i):
                out += ["", "", "", str(c.n)]  # no number: its scores are zeros, not results
            else:
                out += [f"{100 * c.mean:.2f}", f"{100 * c.low:.2f}", f"{100 * c.high:.2f}"]
                out.append(str(c.n))
        return out

    for row in report.rows:
        w.writerow([row.label, row.question_type, row.dataset, *cells(row.cells)])
    for agg in report.aggregates:
        w.writerow([agg.label, "", " + ".join(agg.entries), *cells(agg.cells)])
    w.writerow(["macro average", "", "", *cells(report.macro)])
    if any(v is not None for v in report.verdicts):
        status: list[str] = []
        for i in range(len(report.runs)):
            verdict = report.failed(i)
            status += [f"{FAILED_CELL}: {verdict.text}" if verdict else "ok", "", "", ""]
        w.writerow(["run status", "", "", *status])
    return buf.getvalue()


def _html_cell(text: str, *, bold: bool = False) -> str:
    shown = f"<b>{html.escape(text)}</b>" if bold else html.escape(text)
    if text == FAILED_CELL:
        return f'<td class="failed">{shown}</td>'
    return f"<td>{shown}</td>"


def render_html(report: Report) -> str:
    e = html.escape
    head = "".join(
        f"<th>{e(i.name)}<br><small>{e(sub)}</small></th>"
        for i, sub in zip(report.runs, _subheader(report), strict=True)
    )
    lines = [
        '<table class="hammr-report">',
        f"<thead><tr><th></th>{head}</tr></thead>",
        "<tbody>",
    ]
    labelled: list[ReportRow | AggregateRow] = [*report.rows, *report.aggregates]
    for row in labelled:
        tds = "".join(_html_cell(t) for t in _texts(row.cells, report))
        lines.append(f"<tr><th>{e(row.label)}</th>{tds}</tr>")
    tds = "".join(_html_cell(t, bold=True) for t in _texts(report.macro, report))
    lines.append(f"<tr><th>Macro average</th>{tds}</tr>")
    tds = "".join(f"<td>{e(t)}</td>" for t in _totals(report))
    lines.append(f"<tr><th><i>samples</i></th>{tds}</tr>")
    lines += ["</tbody>", "</table>"]
    lines += [f'<p class="footnote">{e(n)}</p>' for n in report.footnotes]
    return "\n".join(lines) + "\n"
