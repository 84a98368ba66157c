"""Four bundled experiments end to end on the embedded model and the bundled demo data, as a
user runs them (`hammr experiment run NAME --demo`, then `report`, with no hammr.toml and no
--limit): HAMMR's Table 3, AVIS's Table 3, MuSEAgent's Table 2 (exploration, the three
memory steps, the evaluations) and MulProg's explanation table. Each report prints the
paper's numbers beside ours, the deviations and the demo budget under the table; a second
`run` of a finished experiment works on nothing.

These run the real SmolLM2 model and the real tools (minutes, not seconds) under the demo
budget (hammr.experiments.spec.DEMO_BUDGET: few steps, short replies), a smoke scale, not
the papers'. Nothing here is about speed: subprocess timeouts are only safety nets against a
hang; how long each takes is benchmark (s)'s business (benchmarks/demo_durations.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_embedded_model
from hammr.eval.store import RunStore
from hammr.experiments import load_experiment
from hammr.experiments.spec import DEMO_BUDGET, stored_run_name
from hammr.experiments.state import step_states
from hammr_subprocess import HAMMR, run_hammr
from patience import HANG_S

EXPERIMENT_HANG_S = 20 * HANG_S

pytestmark = [
    needs_embedded_model,
    pytest.mark.skipif(not HAMMR.exists(), reason="needs the hammr command (pip install -e .)"),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store and cache folder for the module; no configuration file (the defaults)."""
    return tmp_path_factory.mktemp("experiments")


def hammr(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_hammr(where, *args, timeout=EXPERIMENT_HANG_S)


def run_and_report(where: Path, name: str) -> str:
    store = str(where / "runs.sqlite")
    ran = hammr(where, "experiment", "run", name, "--demo", "--store", store, "--no-progress")
    assert ran.returncode == 0, ran.stderr  # every step of a demo runs to its end
    assert "Traceback" not in ran.stderr, ran.stderr
    # a first run (nothing of it stored) on the embedded model says how long it took measured
    assert "expected: about" in ran.stderr and "on the embedded model" in ran.stderr, ran.stderr
    report = hammr(where, "experiment", "report", name, "--demo", "--store", store)
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr
    said = " ".join(report.stdout.split())
    for key, value in DEMO_BUDGET.items():  # the budget its runs were made under is said
        assert f"{key} = {value!r}" in said, said
    return report.stdout


def states(where: Path, name: str) -> dict[str, str]:
    experiment = load_experiment(name)
    store = RunStore(where / "runs.sqlite", create=False)
    try:
        return {k: s.status for k, s in step_states(store, experiment, demo=True).items()}
    finally:
        store.close()


def stored_counts(where: Path, name: str) -> dict[str, int]:
    """Samples stored per run of the experiment."""
    store = RunStore(where / "runs.sqlite", create=False)
    try:
        return {
            r.name: store.count(stored_run_name(name, r.name, demo=True))
            for r in load_experiment(name).runs
        }
    finally:
        store.close()


def assert_finished_runs_ask_nothing_again(where: Path, name: str) -> None:
    before = stored_counts(where, name)
    again = hammr(where, "experiment", "run", name, "--demo", "--store",
                  str(where / "runs.sqlite"), "--no-progress")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "0 worked on now" in again.stdout + again.stderr
    assert stored_counts(where, name) == before


def paper_numbers_shown(report: str, name: str) -> None:
    """Every number the paper gives in the experiment's first table is printed."""
    table = load_experiment(name).tables[0]
    numbers = [v for row in table.rows for v in row.paper.values() if not isinstance(v, str)]
    assert numbers
    for value in numbers:
        assert f"{value:.1f}" in report, (value, report)
    assert table.title.split("(")[0].strip()[:20] in report


def test_hammr_table3_on_the_demo_data(workspace: Path) -> None:
    show = hammr(workspace, "experiment", "show", "hammr-table3", "--demo", "--store",
                 str(workspace / "runs.sqlite"))  # fmt: skip
    assert show.returncode == 0, show.stderr
    assert "run hammr (hammr): 8 questions x " in show.stdout, show.stdout
    report = run_and_report(workspace, "hammr-table3")
    assert states(workspace, "hammr-table3") == {"run:naive": "done", "run:hammr": "done"}
    paper_numbers_shown(report, "hammr-table3")
    assert "deviation" in report.lower() and "demo" in report.lower()
    assert_estimates_agree_with_the_actual_calls(workspace, "hammr-table3")
    assert_finished_runs_ask_nothing_again(workspace, "hammr-table3")


def assert_estimates_agree_with_the_actual_calls(where: Path, name: str) -> None:
    """The estimate each run recorded before it asked anything (what `experiment show`
    prints) is within 30% of the model calls its questions took."""
    store = RunStore(where / "runs.sqlite", create=False)
    try:
        estimated = actual = 0.0
        for run in load_experiment(name).runs:
            stored = stored_run_name(name, run.name, demo=True)
            info = store.run_info(stored)
            assert info is not None
            estimated += float(info.settings["estimate"]["calls"])
            actual += store.usage([stored])[1]
    finally:
        store.close()
    assert actual > 0 and abs(estimated - actual) <= 0.3 * actual, (estimated, actual)


def test_avis_table3_on_the_demo_data(workspace: Path) -> None:
    report = run_and_report(workspace, "avis-table3")
    assert states(workspace, "avis-table3") == {"run:autonomous": "done", "run:avis": "done"}
    paper_numbers_shown(report, "avis-table3")
    assert "deviation" in report.lower()


def test_muse_table2_explores_builds_its_memories_and_evaluates(workspace: Path) -> None:
    report = run_and_report(workspace, "muse-table2")
    got = states(workspace, "muse-table2")
    assert got["run:explore"] == "done"
    assert got["memory:bank"] == "done"  # the experience bank, from the exploration
    assert got["run:muse"] == "done"  # evaluated with it
    for run in ("cot", "react"):
        assert got[f"run:{run}"] == "done"
    paper_numbers_shown(report, "muse-table2")


def test_mulprog_explanation_table_on_generated_explanations(workspace: Path) -> None:
    report = run_and_report(workspace, "mulprog-explanations")
    experiment = load_experiment("mulprog-explanations")
    store = RunStore(workspace / "runs.sqlite", create=False)
    try:
        got = step_states(store, experiment, demo=True)
    finally:
        store.close()
    assert got["run:mulprog-direct"].status == "done", got
    mulprog = got["run:mulprog"]
    # The 135M model's programs often cannot run: such a sample has no answer (the model's
    # mistake, a result), so the run is done, never failed for it
    assert mulprog.status == "done", mulprog
    for metric in ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "Detection"):
        assert metric.lower() in report.lower(), report
