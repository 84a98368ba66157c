"""MuSEAgent's Table 2 layout of stored runs: one row per method (a run, labelled by its system
and the memory settings that set it apart from the other runs), one column per benchmark (a
suite entry) grouped with its sub-tasks (the samples' question types) and the benchmark's
micro average, then the suite's aggregates over several benchmarks (the micro average, the
plain average); each cell 'score ±CI' in percent.

``hammr report RUN... --layout methods`` prints it. The numbers are those of the default
report (:mod:`hammr.eval.report`): every cell is a mean score with a percentile-bootstrap
interval, an aggregate's interval resamples each entry on its own.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hammr.eval.report import Cell, Format, aggregate_cell, markdown_table, suite_aggregates
from hammr.eval.store import RunInfo, RunStore, StoreError

__all__ = [
    "Column",
    "MethodRow",
    "MethodsTable",
    "build_methods_table",
    "knob_value",
    "method_labels",
    "uses_memory",
]

MICRO = "micro avg"
"""The header of a benchmark's micro average over its sub-tasks."""


@dataclass(frozen=True)
class Column:
    group: str
    """The benchmark (suite entry) or the aggregate the column belongs to."""
    sub_task: str
    """The sub-task ('' for a benchmark with one sub-task, MICRO for its micro average, and
    for an aggregate)."""
    kind: Literal["sub_task", "benchmark", "aggregate"]

    @property
    def label(self) -> str:
        return f"{self.group}: {self.sub_task}" if self.sub_task else self.group


@dataclass(frozen=True)
class MethodRow:
    run: str
    label: str
    cells: tuple[Cell | None, ...]
    """One per column (None: the run has no sample there)."""


@dataclass
class MethodsTable:
    columns: list[Column]
    rows: list[MethodRow]
    footnotes: list[str] = field(default_factory=list)

    def render(self, fmt: Format = "markdown") -> str:
        if fmt == "csv":
            return _render_csv(self)
        if fmt == "html":
            return _render_html(self)
        return _render_markdown(self)


def knob_value(info: RunInfo, key: str) -> Any:
    """A setting of the run: ``settings['memory'][k]`` (for ``memory.k``) when the run stored
    its memory settings as a table, else ``settings[key]``, else the config snapshot's
    ``config[key]``; None when none has it."""
    memory = info.settings.get("memory")
    if key.startswith("memory.") and isinstance(memory, Mapping):
        short = key.removeprefix("memory.")
        if short in memory:
            return memory[short]
    if key in info.settings:
        return info.settings[key]
    return info.config.get(key)


def uses_memory(info: RunInfo) -> bool:
    """Whether the run answered with a memory: its settings name one (``hammr eval --memory``)
    or its config's ``memory.path`` is set."""
    return bool(info.settings.get("memory")) or bool(info.config.get("memory.path"))


def _memory_settings(info: RunInfo) -> dict[str, Any]:
    found = {k: v for k, v in info.config.items() if k.startswith("memory.")}
    memory = info.settings.get("memory")
    if isinstance(memory, Mapping):
        found.update({f"memory.{k}": v for k, v in memory.items()})
    elif memory:
        found["memory.path"] = memory
    return found


def _shown(key: str, value: Any) -> str:
    short = key.removeprefix("memory.")
    if short == "path" and isinstance(value, str):
        value = Path(value).name
    return f"{short}={value}"


def method_labels(infos: Sequence[RunInfo]) -> list[str]:
    """A row label per run: the system, then for runs with a memory the memory settings that
    differ among those runs ('muse (k=1, depth=2)'), ' (no memory)' for a run without one
    when another run of its system has one; the run's name is added where labels repeat."""
    with_memory = [uses_memory(i) for i in infos]
    settings = [_memory_settings(i) if m else {} for i, m in zip(infos, with_memory, strict=True)]
    used = [s for s, m in zip(settings, with_memory, strict=True) if m]
    keys = sorted({k for s in used for k in s})
    differing = [k for k in keys if len({repr(s.get(k)) for s in used}) > 1]
    memory_systems = {i.system for i, m in zip(infos, with_memory, strict=True) if m}
    labels = []
    for info, memory, found in zip(infos, with_memory, settings, strict=True):
        label = info.system
        if memory:
            shown = [_shown(k, found.get(k)) for k in differing]
            if shown:
                label += f" ({', '.join(shown)})"
        elif info.system in memory_systems:
            label += " (no memory)"
        labels.append(label)
    return [
        f"{label} [{info.name}]" if labels.count(label) > 1 else label
        for label, info in zip(labels, infos, strict=True)
    ]


def _entry_order(infos: Sequence[RunInfo], seen: Sequence[str]) -> list[str]:
    """The suite's entry order (of the first run whose suite can be read), then the rest."""
    from hammr.eval.suites import SuiteError, load_suite

    order: list[str] = []
    for info in infos:
        name = info.settings.get("suite") or info.suite
        try:
            order = [e.name for e in load_suite(str(name)).entries]
            break
        except (SuiteError, OSError):
            continue
    known = [e for e in order if e in seen]
    return known + [e for e in seen if e not in known]


def build_methods_table(
    store: RunStore, runs: Sequence[str], *, samples: int = 1000, seed: int = 0
) -> MethodsTable:
    """The Table 2 layout of ``runs`` (rows in the order given)."""
    from hammr.eval.metrics import aggregate_function
    from hammr.eval.stats import bootstrap_ci

    if not runs:
        raise StoreError("name at least one run (see `hammr runs`)")
    infos: list[RunInfo] = []
    scores: list[dict[str, dict[str, list[float]]]] = []
    for name in runs:
        info = store.run_info(name)
        if info is None:
            raise StoreError(store.unknown_run_message(name))
        infos.append(info)
        by_entry: dict[str, dict[str, list[float]]] = {}
        for r in store.score_rows(name):
            by_entry.setdefault(r.dataset, {}).setdefault(r.question_type, []).append(r.score)
        scores.append(by_entry)

    seen = list(dict.fromkeys(e for by_entry in scores for e in by_entry))
    columns: list[Column] = []
    for entry in _entry_order(infos, seen):
        subs = sorted({q for by_entry in scores for q in by_entry.get(entry, {})})
        if len(subs) > 1:
            columns += [Column(entry, q, "sub_task") for q in subs]
            columns.append(Column(entry, MICRO, "benchmark"))
        else:
            columns.append(Column(entry, "", "benchmark"))
    per_run_aggs = [
        {a.name: a for a in suite_aggregates(info) if len(a.entries) > 1} for info in infos
    ]
    agg_names = list(dict.fromkeys(n for found in per_run_aggs for n in found))
    columns += [Column(n, "", "aggregate") for n in agg_names]

    def cell(values: list[float]) -> Cell | None:
        if not values:
            return None
        mean, low, high = bootstrap_ci(values, samples=samples, seed=seed)
        return Cell(mean, low, high, len(values))

    rows: list[MethodRow] = []
    labels = method_labels(infos)
    for info, label, by_entry, aggs in zip(infos, labels, scores, per_run_aggs, strict=True):
        cells: list[Cell | None] = []
        for col in columns:
            if col.kind == "sub_task":
                cells.append(cell(by_entry.get(col.group, {}).get(col.sub_task, [])))
            elif col.kind == "benchmark":
                pooled = [v for vs in by_entry.get(col.group, {}).values() for v in vs]
                cells.append(cell(pooled))
            else:
                agg = aggs.get(col.group)
                parts = [
                    [v for vs in by_entry.get(e, {}).values() for v in vs]
                    for e in (agg.entries if agg else ())
                ]
                if agg is None or any(not p for p in parts):
                    cells.append(None)
                    continue
                fn = aggregate_function(agg.function, [len(p) for p in parts])
                cells.append(aggregate_cell(parts, fn, samples=samples, seed=seed))
        rows.append(MethodRow(info.name, label, tuple(cells)))
    return MethodsTable(columns, rows, _footnotes(infos, per_run_aggs, samples))


def _footnotes(
    infos: Sequence[RunInfo], per_run_aggs: Sequence[Mapping[str, Any]], samples: int
) -> list[str]:
    notes = [
        f"Cells: mean score in % ± half the width of its 95% bootstrap confidence interval "
        f"({samples} resamples); '{MICRO}' pools a benchmark's sub-tasks (every sample weighs "
        "the same)."
    ]
    described: set[str] = set()
    for aggs in per_run_aggs:
        for name, agg in aggs.items():
            if name in described:
                continue
            described.add(name)
            what = agg.description or f"{agg.function} of the entries' accuracies"
            notes.append(
                f"{name}: {what}, over {', '.join(agg.entries)}; its interval resamples each "
                "entry on its own."
            )
    halves = {
        (i.settings.get("split"), i.settings.get("split_seed"))
        for i in infos
        if i.settings.get("split")
    }
    for half, seed in sorted(halves, key=repr):
        on = [i.name for i in infos if i.settings.get("split") == half]
        notes.append(f"{', '.join(on)}: the {half} split (seed {seed}).")
    if halves and any(not i.settings.get("split") for i in infos):
        whole = [i.name for i in infos if not i.settings.get("split")]
        notes.append(f"{', '.join(whole)}: no split (every sample).")
    return notes


def _texts(cells: Sequence[Cell | None]) -> list[str]:
    return [c.text() if c is not None else "–" for c in cells]


def _group_header(table: MethodsTable) -> list[str]:
    out: list[str] = []
    previous = None
    for col in table.columns:
        out.append(col.group if col.group != previous else "")
        previous = col.group
    return out


def _render_markdown(table: MethodsTable) -> str:
    head = ["method", *_group_header(table)]
    body = [
        ["", *(f"*{c.sub_task}*" if c.sub_task else "" for c in table.columns)],
        *([row.label, *_texts(row.cells)] for row in table.rows),
    ]
    return markdown_table(head, body, table.footnotes)


def _render_csv(table: MethodsTable) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = ["method", "run"]
    for col in table.columns:
        name = f"{col.group}/{col.sub_task}" if col.sub_task else col.group
        header += [f"{name} mean %", f"{name} low %", f"{name} high %", f"{name} n"]
    w.writerow(header)
    for row in table.rows:
        out = [row.label, row.run]
        for c in row.cells:
            if c is None:
                out += ["", "", "", "0"]
            else:
                out += [f"{100 * c.mean:.2f}", f"{100 * c.low:.2f}", f"{100 * c.high:.2f}"]
                out.append(str(c.n))
        w.writerow(out)
    return buf.getvalue()


def _render_html(table: MethodsTable) -> str:
    e = html.escape
    groups: list[tuple[str, int]] = []
    for col in table.columns:
        if groups and groups[-1][0] == col.group:
            groups[-1] = (col.group, groups[-1][1] + 1)
        else:
            groups.append((col.group, 1))
    top = "".join(
        f'<th colspan="{n}">{e(g)}</th>' if n > 1 else f"<th>{e(g)}</th>" for g, n in groups
    )
    sub = "".join(f"<th><small>{e(c.sub_task)}</small></th>" for c in table.columns)
    lines = [
        '<table class="hammr-report hammr-methods">',
        f"<thead><tr><th>method</th>{top}</tr><tr><th></th>{sub}</tr></thead>",
        "<tbody>",
    ]
    for row in table.rows:
        tds = "".join(f"<td>{e(t)}</td>" for t in _texts(row.cells))
        lines.append(f'<tr><th title="{e(row.run)}">{e(row.label)}</th>{tds}</tr>')
    lines += ["</tbody>", "</table>"]
    lines += [f'<p class="footnote">{e(n)}</p>' for n in table.footnotes]
    return "\n".join(lines) + "\n"
