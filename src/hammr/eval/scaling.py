"""MuSEAgent's Fig. 2: accuracy against a memory setting, one line per benchmark and one for the
micro average over them, each point a run with its 95% bootstrap interval as error bar.

``hammr report RUN... --scaling DIR`` writes ``depth.png`` (against ``memory.depth``, the
rounds of deep search) and ``breadth.png`` (against ``memory.k``, the experiences per wide
search); ``--ablation KEY`` plots any other stored setting the same way (``memory.min_score``,
``memory.sources``, an annotator), non-numeric values as categories in the order first seen.
A run's value is read from what ``hammr eval`` stored with it (:func:`knob_value`: its
settings, else its config snapshot). Runs without a memory, or without the setting, are left
out with a note, as is a second run at a value a line already has.

**The no-experience point.** The paper's Fig. 2 starts both axes at the zero-experience
ReAct baseline: depth 0 (no search round) is plain ReAct, and its text compares every other
point to it. A run of the ``react`` system (the same tool agent without memory,
:data:`NO_EXPERIENCE_SYSTEMS`) is therefore placed at 0 on the depth and breadth plots
(:data:`ZERO_AT`), with a note; ``memory.depth`` itself stays at least 1 (a muse run always
searches), so the one way to plot depth 0 is to name a react run beside the muse runs.
Other systems without memory are still left out.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hammr.eval.methods_report import knob_value, uses_memory
from hammr.eval.report import Cell, aggregate_cell
from hammr.eval.store import RunInfo, RunStore, StoreError
from hammr.output_file import write_output

__all__ = [
    "FIGURES",
    "MICRO_AVERAGE",
    "NO_EXPERIENCE_SYSTEMS",
    "ZERO_AT",
    "Point",
    "ScalingPlot",
    "Series",
    "plot_scaling",
    "scaling_series",
    "write_scaling",
]

FIGURES: tuple[tuple[str, str], ...] = (("memory.depth", "depth"), ("memory.k", "breadth"))
"""(setting, file stem) of the two plots of ``--scaling``."""
MICRO_AVERAGE = "micro average"
NO_EXPERIENCE_SYSTEMS: tuple[str, ...] = ("react",)
"""Systems whose runs are the paper's zero-experience point (plain ReAct, no memory)."""
ZERO_AT: tuple[str, ...] = ("memory.depth", "memory.k")
"""The settings at whose 0 such a run is plotted (no search round, no experience)."""


@dataclass(frozen=True)
class Point:
    x: Any
    """The setting's value (a number, or a category for a non-numeric setting)."""
    cell: Cell
    run: str


@dataclass(frozen=True)
class Series:
    name: str
    """A benchmark (suite entry) or MICRO_AVERAGE."""
    points: tuple[Point, ...]
    """Sorted by x when every x is a number, else in the order first seen."""


@dataclass
class ScalingPlot:
    key: str
    series: list[Series]
    notes: list[str] = field(default_factory=list)
    path: Path | None = None
    """The PNG written (None until :func:`plot_scaling`)."""

    @property
    def numeric(self) -> bool:
        return all(_is_number(p.x) for s in self.series for p in s.points)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _run_value(info: RunInfo, key: str, notes: list[str]) -> tuple[Any, str | None]:
    """(value, None) or (None, why the run is left out); a react run is at 0 of
    :data:`ZERO_AT` (see the module docstring), said in ``notes``."""
    if key in ZERO_AT and info.system in NO_EXPERIENCE_SYSTEMS:
        notes.append(f"{info.name}: {info.system} without memory, plotted at {key}=0")
        return 0, None
    if key.startswith("memory.") and not uses_memory(info):
        return None, f"{info.name}: no memory, left out of {key}"
    value = knob_value(info, key)
    if value is None or value == "":
        return None, f"{info.name}: its settings have no {key}, left out"
    if isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
        number = float(value)
        return (int(number) if number.is_integer() else number), None
    return value, None


def scaling_series(
    store: RunStore, runs: Sequence[str], key: str, *, samples: int = 1000, seed: int = 0
) -> ScalingPlot:
    """The lines of the plot of accuracy against setting ``key`` over ``runs``: per benchmark
    (entry) the run's mean score with its bootstrap interval, and the micro average over the
    run's benchmarks (all samples pooled; the interval resamples each benchmark on its own)."""
    from hammr.eval.metrics import aggregate_function
    from hammr.eval.stats import bootstrap_ci

    if not runs:
        raise StoreError("name at least one run (see `hammr runs`)")
    notes: list[str] = []
    lines: dict[str, list[Point]] = {}
    for name in runs:
        info = store.run_info(name)
        if info is None:
            raise StoreError(store.unknown_run_message(name))
        x, why = _run_value(info, key, notes)
        if why is not None:
            notes.append(why)
            continue
        by_entry: dict[str, list[float]] = {}
        for r in store.score_rows(name):
            by_entry.setdefault(r.dataset, []).append(r.score)
        if not by_entry:
            notes.append(f"{name}: no samples, left out")
            continue
        cells: dict[str, Cell] = {}
        for entry, values in by_entry.items():
            mean, low, high = bootstrap_ci(values, samples=samples, seed=seed)
            cells[entry] = Cell(mean, low, high, len(values))
        parts = list(by_entry.values())
        micro = aggregate_function("micro_mean", [len(p) for p in parts])
        cells[MICRO_AVERAGE] = aggregate_cell(parts, micro, samples=samples, seed=seed)
        for line, c in cells.items():
            points = lines.setdefault(line, [])
            if any(p.x == x for p in points):
                notes.append(f"{name}: {line} already has a run at {key}={x}, left out")
                continue
            points.append(Point(x, c, name))
    series = [Series(n, tuple(p)) for n, p in lines.items() if n != MICRO_AVERAGE]
    series.sort(key=lambda s: s.name)
    if MICRO_AVERAGE in lines:
        series.append(Series(MICRO_AVERAGE, tuple(lines[MICRO_AVERAGE])))
    plot = ScalingPlot(key, series, notes)
    if plot.numeric:
        plot.series = [Series(s.name, tuple(sorted(s.points, key=lambda p: p.x))) for s in series]
    return plot


def plot_scaling(plot: ScalingPlot, path: Path, *, title: str = "") -> Path:
    """Draw ``plot`` into the PNG ``path`` (matplotlib's Agg backend; written through
    :func:`hammr.output_file.write_output`: whole, and OutputError when it cannot be)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    ax = fig.add_subplot()
    categories: list[Any] = []
    if not plot.numeric:
        for s in plot.series:
            categories += [p.x for p in s.points if p.x not in categories]
    for s in plot.series:
        xs = [p.x if plot.numeric else categories.index(p.x) for p in s.points]
        ys = [100 * p.cell.mean for p in s.points]
        err = [
            [100 * (p.cell.mean - p.cell.low) for p in s.points],
            [100 * (p.cell.high - p.cell.mean) for p in s.points],
        ]
        micro = s.name == MICRO_AVERAGE
        ax.errorbar(
            xs,
            ys,
            yerr=err,
            marker="o",
            capsize=3,
            label=s.name,
            linewidth=2.5 if micro else 1.5,
            color="black" if micro else None,
        )
    if not plot.numeric:
        ax.set_xticks(range(len(categories)), [str(c) for c in categories])
    ax.set_xlabel(plot.key)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title or f"accuracy against {plot.key}")
    ax.grid(alpha=0.3)
    if plot.series:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no run has this setting", ha="center", transform=ax.transAxes)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    write_output(path, buf.getvalue(), what="the PNG file")
    plot.path = path
    return path


def write_scaling(
    store: RunStore,
    runs: Sequence[str],
    out_dir: Path,
    *,
    figures: Sequence[tuple[str, str]] = FIGURES,
    samples: int = 1000,
    seed: int = 0,
) -> list[ScalingPlot]:
    """One PNG per (setting, file stem) of ``figures`` in ``out_dir`` (default: depth.png
    and breadth.png); returns the plots with their series, notes and paths."""
    plots = []
    for key, stem in figures:
        plot = scaling_series(store, runs, key, samples=samples, seed=seed)
        plot_scaling(plot, Path(out_dir) / f"{stem}.png", title=f"{stem}: accuracy vs {key}")
        plots.append(plot)
    return plots
