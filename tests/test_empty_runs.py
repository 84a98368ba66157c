"""A run with no finished sample says what to do, wherever it is read: `hammr memory
build` (and `reflect`, `insights`) refuse in one line naming how many samples were skipped
and why, `--retry-failed` with the run's own eval command, and `--include-failed` where the
command has it; `hammr report`, `errors` and `explain` still show the run and warn."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace

SETTINGS = {
    "suite": "demo",
    "data_dir": "/data/demo",
    "limit": 1,
    "seed": 0,
    "timeout_s": 300.0,
    "max_steps": None,
}
EVAL = "hammr eval --suite demo --data-dir /data/demo --system hammr"


def record(run: str, sid: str, status: str, score: float = 0.0) -> RunRecord:
    trace = Trace(agent="QuestionDispatcherAgent", question=f"question {sid}?")
    trace.steps.append(Step(index=0, thought="I look first", action="found = OCR(image)"))
    trace.status = status
    failed = status != "finished"
    return RunRecord(
        run=run,
        sample_id=sid,
        dataset="demo",
        question_type="ocr_reasoning",
        question=f"question {sid}?",
        answers=("a",),
        prediction=None if failed else "a",
        score=score,
        status=status,
        error="no answer within 300 s of work" if status == "timeout" else None,
        trace=trace,
    )


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Runs: 'timed-out' (3 timeouts), 'down' (2 llm_failure), 'fresh' (nothing stored),
    'fine' (one finished sample beside a timeout)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HAMMR_CONFIG", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        for run in ("timed-out", "down", "fresh", "fine"):
            store.open_run(run, "demo", "hammr", settings=SETTINGS)
        for i in range(3):
            store.add(record("timed-out", f"t{i}", "timeout"))
        for i in range(2):
            store.add(record("down", f"d{i}", "llm_failure"))
        store.add(record("fine", "f0", "finished", 1.0))
        store.add(record("fine", "f1", "timeout"))
    return path


def run(args: list[str], store: Path) -> Result:
    return CliRunner().invoke(main, [*args, "--store", str(store)])


def error_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("hammr: error: ")
    return lines[0]


def test_memory_build_of_a_run_that_only_timed_out_says_what_to_do(
    store_path: Path, tmp_path: Path
) -> None:
    bank = tmp_path / "bank.db"
    line = error_line(run(["memory", "build", "timed-out", "-o", str(bank)], store_path))
    assert "run 'timed-out' has no finished samples to take experiences from" in line
    assert "(3 stored, all failed: 3 timeout)" in line
    assert f"`{EVAL} --name timed-out --limit 1 --store {store_path} --retry-failed`" in line
    assert "--timeout 0 for no limit" in line and "at 300 s of work each" in line
    assert line.endswith("or take them as they are with --include-failed")
    assert not bank.exists()
    # what it advises works: the partial traces make a bank
    r = run(
        ["memory", "build", "timed-out", "-o", str(bank), "--include-failed", "--no-annotate",
         "--no-embed"],
        store_path,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "experiences: 3 from 3 samples" in r.stdout and bank.exists()


def test_memory_build_of_a_run_with_nothing_stored_says_to_run_it(
    store_path: Path, tmp_path: Path
) -> None:
    line = error_line(run(["memory", "build", "fresh", "-o", str(tmp_path / "b.db")], store_path))
    assert "run 'fresh' has no finished samples to take experiences from (none stored yet)" in line
    assert f"answer them first: `{EVAL} --name fresh --limit 1 --store {store_path}`" in line
    assert "--include-failed" not in line  # it would not help
    line = error_line(
        run(["memory", "build", "fresh", "-o", str(tmp_path / "b.db"), "--include-failed"],
            store_path)
    )  # fmt: skip
    assert "(none stored yet)" in line


def test_memory_build_of_a_run_with_a_finished_sample_goes_ahead(
    store_path: Path, tmp_path: Path
) -> None:
    r = run(
        ["memory", "build", "fine", "-o", str(tmp_path / "b.db"), "--no-annotate", "--no-embed"],
        store_path,
    )
    assert r.exit_code == 0, r.output
    assert "samples left out: 1 status timeout" in r.stdout


@pytest.mark.parametrize(
    ("command", "what"), [("reflect", "reflections"), ("insights", "insights")]
)
def test_reflect_and_insights_of_a_failed_run_say_what_to_do(
    store_path: Path, tmp_path: Path, command: str, what: str
) -> None:
    out = tmp_path / f"{command}.db"
    line = error_line(run(["memory", command, "timed-out", "-o", str(out)], store_path))
    assert f"run 'timed-out' has no finished samples to make {what} from" in line
    assert "(3 stored, all failed: 3 timeout)" in line and "--retry-failed`" in line
    assert not out.exists()  # refused before any memory file (or model) was made
    line = error_line(run(["memory", command, "down", "-o", str(out)], store_path))
    assert "(2 stored, all failed: 2 llm_failure)" in line
    assert "the LLM server failed: start it first" in line
    line = error_line(run(["memory", command, "nope", "-o", str(out)], store_path))
    assert "no run named 'nope'" in line and "timed-out" in line


@pytest.mark.parametrize("command", ["report", "errors", "explain"])
def test_reading_commands_show_a_failed_run_and_warn(store_path: Path, command: str) -> None:
    r = run([command, "timed-out"], store_path)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip()  # the run is still shown
    (warning,) = r.stderr.strip().splitlines()
    assert warning.startswith("hammr: warning: run 'timed-out' has no finished samples (3 stored")
    assert "--retry-failed`" in warning
    r = run([command, "fresh"], store_path)
    assert r.exit_code == 0, r.output
    assert "has no finished samples (none stored yet); answer them first" in r.stderr
    r = run([command, "fine"], store_path)
    assert r.exit_code == 0 and "warning" not in r.stderr
