"""MuSEAgent's reporting: the micro-average aggregate, the Table 2 layout (`hammr report
--layout methods`) and the Fig. 2 scaling plots (`--scaling DIR`), on hand-made stored runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from hammr.cli import main
from hammr.eval.methods_report import MICRO, build_methods_table, method_labels
from hammr.eval.metrics import (
    AGGREGATES,
    SizedAggregate,
    aggregate_function,
    harmonic_mean,
    micro_mean,
)
from hammr.eval.report import Cell, aggregate_cell, build_report
from hammr.eval.scaling import MICRO_AVERAGE, scaling_series, write_scaling
from hammr.eval.store import RunStore, StoreError
from hammr.eval.types import RunRecord

# (entry, sub-task) -> scores, the same for every run unless a run shifts them
SCORES: dict[tuple[str, str], list[float]] = {
    ("vstar", "attribute"): [1, 1, 0, 1],
    ("vstar", "relation"): [1, 0],
    ("mme_realworld_lite", "perception"): [0, 1, 0],
    ("mme_realworld_lite", "reasoning"): [0, 0],
    ("zoombench", "multiple_choice"): [1, 0, 1],
    ("hrbench_8k", "multiple_choice"): [1, 1],
}
MUSE = "muse-mc"


def config(**memory: Any) -> dict[str, Any]:
    base = {"memory.path": "", "memory.k": 3, "memory.depth": 3, "memory.min_score": 5}
    base.update({f"memory.{k}": v for k, v in memory.items()})
    return base


def add_run(
    store: RunStore,
    name: str,
    system: str,
    cfg: dict[str, Any],
    *,
    flip: int = 0,
    settings: dict[str, Any] | None = None,
) -> None:
    """A run of muse-mc with SCORES, the first ``flip`` wrong answers of each group made
    right."""
    store.open_run(name, MUSE, system, config=cfg, settings={"suite": MUSE, **(settings or {})})
    for (entry, sub), scores in SCORES.items():
        fixed = list(scores)
        for i in [i for i, v in enumerate(fixed) if v == 0][:flip]:
            fixed[i] = 1
        for i, v in enumerate(fixed):
            store.add(RunRecord(name, f"{sub}{i}", entry, sub, "q", ("A",), "A", float(v)))


def pooled(entry: str, flip: int = 0) -> list[float]:
    out: list[float] = []
    for (e, _), scores in SCORES.items():
        if e == entry:
            fixed = list(scores)
            for i in [i for i, v in enumerate(fixed) if v == 0][:flip]:
                fixed[i] = 1
            out += fixed
    return out


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "runs.sqlite")
    add_run(s, "react", "react", config())
    add_run(s, "muse-k1", "muse", config(path="/banks/bank.sqlite", k=1), flip=1)
    add_run(s, "muse-k3", "muse", config(path="/banks/bank.sqlite", k=3), flip=2)
    return s


# -- the aggregates ----------------------------------------------------------------------------


def test_micro_mean_weighs_samples_and_needs_the_sizes() -> None:
    assert micro_mean([(0.5, 2), (1.0, 6)]) == pytest.approx(7 / 8)
    sized = AGGREGATES["micro_mean"]
    assert isinstance(sized, SizedAggregate)
    with pytest.raises(ValueError, match="needs the parts' sample counts"):
        sized([0.5, 1.0])
    assert aggregate_function("micro_mean", [2, 6])([0.5, 1.0]) == pytest.approx(7 / 8)
    assert aggregate_function("mean", [2, 6])([0.5, 1.0]) == pytest.approx(0.75)
    assert aggregate_function("harmonic_mean", [2, 6]) is harmonic_mean
    with pytest.raises(ValueError, match="2 accuracies for 3 part sizes"):
        aggregate_function("micro_mean", [1, 2, 3])([0.5, 1.0])
    with pytest.raises(ValueError, match="positive sample counts"):
        micro_mean([(0.5, 0)])


def test_micro_average_interval_against_a_hand_computation() -> None:
    parts = [[1.0, 1.0, 0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0]]
    fn = aggregate_function("micro_mean", [len(p) for p in parts])
    cell = aggregate_cell(parts, fn, samples=500, seed=3)
    # by hand: the pooled mean, and each part resampled on its own from one seeded generator
    assert cell.mean == pytest.approx(7 / 14) and cell.n == 14
    rng = np.random.default_rng(3)
    replicates = []
    for p in parts:
        arr = np.asarray(p)
        replicates.append(arr[rng.integers(0, len(p), size=(500, len(p)))].mean(axis=1))
    pooled_means = sum(r * len(p) for r, p in zip(replicates, parts, strict=True)) / 14
    low, high = np.quantile(pooled_means, [0.025, 0.975])
    assert cell.low == pytest.approx(low) and cell.high == pytest.approx(high)
    assert cell.low < cell.mean < cell.high


def test_the_default_report_shows_the_suites_micro_and_mean_rows(store: RunStore) -> None:
    report = build_report(store, ["react"], samples=200)
    rows = {a.name: a.cells[0] for a in report.aggregates}
    every = [v for scores in SCORES.values() for v in scores]
    micro = rows["micro_average"]
    assert micro is not None and micro.mean == pytest.approx(sum(every) / len(every))
    vstar = rows["vstar_micro"]
    assert vstar is not None and vstar.mean == pytest.approx(4 / 6) and vstar.n == 6
    benchmark_means = [
        sum(pooled(e)) / len(pooled(e))
        for e in ("vstar", "mme_realworld_lite", "zoombench", "hrbench_8k")
    ]
    average = rows["average"]
    assert average is not None and average.mean == pytest.approx(np.mean(benchmark_means))
    assert "micro_average" in report.render("markdown")


# -- Table 2 -----------------------------------------------------------------------------------


def test_methods_layout_columns_rows_and_cells(store: RunStore) -> None:
    table = build_methods_table(store, ["react", "muse-k1", "muse-k3"], samples=200)
    assert [c.label for c in table.columns] == [
        "vstar: attribute",
        "vstar: relation",
        f"vstar: {MICRO}",
        "mme_realworld_lite: perception",
        "mme_realworld_lite: reasoning",
        f"mme_realworld_lite: {MICRO}",
        "zoombench",
        "hrbench_8k",
        "micro_average",
        "average",
    ]
    assert [r.label for r in table.rows] == ["react", "muse (k=1)", "muse (k=3)"]
    react, k1, _ = table.rows
    at = {c.label: i for i, c in enumerate(table.columns)}
    attribute = react.cells[at["vstar: attribute"]]
    assert attribute is not None and attribute.mean == 0.75 and attribute.n == 4
    vstar = k1.cells[at[f"vstar: {MICRO}"]]
    assert vstar is not None and vstar.mean == pytest.approx(sum(pooled("vstar", 1)) / 6)
    micro = k1.cells[at["micro_average"]]
    every = [
        v for e in ("vstar", "mme_realworld_lite", "zoombench", "hrbench_8k") for v in pooled(e, 1)
    ]
    assert micro is not None and micro.mean == pytest.approx(sum(every) / len(every))
    assert micro.n == len(every) and micro.low <= micro.mean <= micro.high

    text = table.render("markdown")
    lines = text.splitlines()
    assert lines[0].split("|")[1].strip() == "method"
    assert "vstar" in lines[0] and "micro_average" in lines[0]
    assert "*attribute*" in lines[2] and f"*{MICRO}*" in lines[2]
    row = next(ln for ln in lines if ln.startswith("| react"))
    assert row.split("|")[2].strip() == attribute.text()
    assert attribute.text().startswith("75.0 ±")
    assert any("micro_average: micro average" in ln for ln in lines)
    csv_text = table.render("csv").splitlines()
    assert csv_text[0].startswith("method,run,vstar/attribute mean %,vstar/attribute low %")
    assert csv_text[1].startswith("react,react,75.00,")
    html_text = table.render("html")
    assert '<th colspan="3">vstar</th>' in html_text and '<th title="muse-k1">muse (k=1)</th>' in (
        html_text
    )
    with pytest.raises(StoreError, match="no run named 'nope'"):
        build_methods_table(store, ["nope"])


def test_labels_name_the_memory_settings_that_differ(store: RunStore) -> None:
    infos = [store.run_info(n) for n in ("react", "muse-k1", "muse-k3")]
    assert all(i is not None for i in infos)
    add_run(store, "muse-again", "muse", config(path="/banks/bank.sqlite", k=3))
    add_run(store, "muse-bare", "muse", config())
    more = [store.run_info(n) for n in ("muse-k3", "muse-again", "muse-bare")]
    assert method_labels([i for i in more if i is not None]) == [
        "muse [muse-k3]",
        "muse [muse-again]",
        "muse (no memory)",
    ]


def test_methods_layout_from_the_command_line(store: RunStore, tmp_path: Path) -> None:
    path = str(store.path)
    store.close()
    r = CliRunner().invoke(
        main,
        ["report", "react", "muse-k3", "--layout", "methods", "--store", path, "--samples", "50"],
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[0].split("|")[1].strip() == "method"
    assert "| muse" in r.stdout and "micro_average" in r.stdout
    r = CliRunner().invoke(main, ["report", "react", "--ablation", "memory.k", "--store", path])
    assert r.exit_code == 2 and "--ablation goes with --scaling" in r.stderr


# -- Fig. 2 ------------------------------------------------------------------------------------


def depth_store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "depth.sqlite")
    add_run(s, "react", "react", config())
    for depth in (1, 2, 3):
        add_run(s, f"d{depth}", "muse", config(path="b.sqlite", depth=depth), flip=depth - 1)
    add_run(s, "k1", "muse", config(path="b.sqlite", k=1, depth=3), flip=0)
    return s


def test_scaling_series_are_the_runs_means(tmp_path: Path) -> None:
    store = depth_store(tmp_path)
    plot = scaling_series(store, ["react", "d1", "d2", "d3", "k1"], "memory.depth", samples=100)
    names = [s.name for s in plot.series]
    assert names == ["hrbench_8k", "mme_realworld_lite", "vstar", "zoombench", MICRO_AVERAGE]
    vstar = plot.series[2]
    # the react run is the paper's depth-0 point (no experience)
    assert [p.x for p in vstar.points] == [0, 1, 2, 3]
    assert [p.run for p in vstar.points] == ["react", "d1", "d2", "d3"]
    for p, flip in zip(vstar.points, (0, 0, 1, 2), strict=True):
        expected = pooled("vstar", flip)
        assert p.cell.mean == pytest.approx(sum(expected) / len(expected))
    micro = plot.series[-1]
    for p, flip in zip(micro.points, (0, 0, 1, 2), strict=True):
        every = [
            v
            for e in ("vstar", "mme_realworld_lite", "zoombench", "hrbench_8k")
            for v in pooled(e, flip)
        ]
        assert p.cell.mean == pytest.approx(sum(every) / len(every))
    assert "react: react without memory, plotted at memory.depth=0" in plot.notes
    assert any(n.startswith("k1: vstar already has a run at memory.depth=3") for n in plot.notes)
    store.close()


def test_scaling_writes_depth_and_breadth_pngs(tmp_path: Path) -> None:
    store = depth_store(tmp_path)
    out = tmp_path / "figs"
    plots = write_scaling(store, ["d1", "d2", "d3", "k1"], out, samples=50)
    store.close()
    assert [p.path for p in plots] == [out / "depth.png", out / "breadth.png"]
    for p in plots:
        assert p.path is not None and p.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    breadth = plots[1]
    assert [pt.x for pt in breadth.series[-1].points] == [1, 3]
    assert breadth.series[-1].points[0].run == "k1"


def test_scaling_from_the_command_line_with_an_ablation(tmp_path: Path) -> None:
    store = depth_store(tmp_path)
    add_run(store, "s-correct", "muse", config(path="b.sqlite", sources="correct"), flip=1)
    path = str(store.path)
    store.close()
    out = tmp_path / "plots"
    args = ["report", "d1", "d2", "s-correct", "react", "--scaling", str(out)]
    r = CliRunner().invoke(main, [*args, "--ablation", "memory.sources", "--store", path])
    assert r.exit_code == 0, r.stderr
    assert {p.name for p in out.iterdir()} == {"depth.png", "breadth.png", "memory.sources.png"}
    assert "note: react: react without memory, plotted at memory.depth=0" in r.stderr
    assert "note: d1: its settings have no memory.sources, left out" in r.stderr
    # the table is printed as well
    assert "Macro average" in r.stdout


def test_a_stored_memory_table_in_settings_wins_over_the_config(tmp_path: Path) -> None:
    s = RunStore(tmp_path / "m.sqlite")
    add_run(s, "m", "muse", config(), settings={"memory": {"path": "x.sqlite", "depth": 2}})
    plot = scaling_series(s, ["m"], "memory.depth", samples=20)
    s.close()
    assert [p.x for p in plot.series[0].points] == [2]
    hr = plot.series[0]
    assert hr.name == "hrbench_8k" and hr.points[0].cell == Cell(1.0, 1.0, 1.0, 2)
