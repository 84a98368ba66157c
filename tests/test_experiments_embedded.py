"""Four bundled experiments end to end on the embedded model and the bundled demo data, as a
user runs them (`hammr experiment run NAME --demo --limit 1`, then `report`): HAMMR's
Table 3, AVIS's Table 3, MuSEAgent's Table 2 (exploration, the three memory steps, the
evaluations) and MulProg's explanation table. Each report prints the paper's numbers beside
ours and the deviations under the table; a second `run` of a finished experiment works on
nothing.

These run the real SmolLM2 model and the real tools (minutes, not seconds); the config keeps
each question short (few steps, short replies), which is a smoke scale, not the papers'.
Nothing here is about speed: subprocess timeouts are only safety nets against a hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_embedded_model
from hammr.eval.store import RunStore
from hammr.experiments import load_experiment
from hammr.experiments.spec import stored_run_name
from hammr.experiments.state import step_states
from patience import HANG_S

ROOT = Path(__file__).resolve().parents[1]
HAMMR = Path(sys.executable).parent / "hammr"
EXPERIMENT_HANG_S = 20 * HANG_S

pytestmark = [
    needs_embedded_model,
    pytest.mark.skipif(not HAMMR.exists(), reason="needs the hammr command (pip install -e .)"),
]

SMOKE_CONFIG = """\
[llm]
max_tokens = 96

[agent]
max_steps = 3

[avis]
max_steps = 3
max_tries_per_state = 1
max_objects = 1
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store and config for the module, so the four experiments share a model cache."""
    where = tmp_path_factory.mktemp("experiments")
    (where / "hammr.toml").write_text(SMOKE_CONFIG)
    return where


def hammr(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAMMR_")}
    env["HAMMR_CONFIG"] = str(where / "hammr.toml")
    env["XDG_CACHE_HOME"] = str(where / "cache")
    env["COLUMNS"] = "200"
    return subprocess.run(
        [str(HAMMR), *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=EXPERIMENT_HANG_S, check=False,
    )  # fmt: skip


def run_and_report(where: Path, name: str) -> str:
    store = str(where / "runs.sqlite")
    ran = hammr(where, "experiment", "run", name, "--demo", "--limit", "1", "--store", store,
                "--no-progress")  # fmt: skip
    assert ran.returncode in (0, 1), ran.stderr  # 1: a step failed, and says why below
    assert "Traceback" not in ran.stderr, ran.stderr
    report = hammr(where, "experiment", "report", name, "--demo", "--store", store)
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr
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
    again = hammr(where, "experiment", "run", name, "--demo", "--limit", "1", "--store",
                  str(where / "runs.sqlite"), "--no-progress")  # fmt: skip
    assert again.returncode in (0, 1), again.stderr
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
    report = run_and_report(workspace, "hammr-table3")
    assert states(workspace, "hammr-table3") == {"run:naive": "done", "run:hammr": "done"}
    paper_numbers_shown(report, "hammr-table3")
    assert "deviation" in report.lower() and "demo" in report.lower()
    assert_finished_runs_ask_nothing_again(workspace, "hammr-table3")


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
    # The 135M model's programs often cannot run (the README's table says why); a run whose
    # every sample ended so is reported failed with that cause, never as a score of zeros.
    if mulprog.status != "done":
        assert mulprog.status == "failed", mulprog
        cause = mulprog.reason.split(" (")[0]
        assert "samples ended in error" in cause, mulprog
        assert cause in " ".join(report.split()), report
    for metric in ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "Detection"):
        assert metric.lower() in report.lower(), report
