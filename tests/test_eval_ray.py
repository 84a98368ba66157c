"""`hammr eval --executor ray` on a real local Ray cluster (127.0.0.1) started by each run,
against the scripted fake OpenAI server of test_eval_cli: the report equals the local
executor's; a SIGKILLed worker or driver loses nothing and counts nothing twice; a sample
that kills its worker is failed alone; images are shipped when workers cannot see them.

Skipped when Ray (the hammr[ray] extra) is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from fake_openai_server import FakeServer, Reply, Seen
from hammr.cli import main
from hammr.config import load_config
from hammr.eval.executors import ExecutorError
from hammr.eval.job import EvalJob
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from test_eval_cli import answer, env_for, make_data

ray = pytest.importorskip("ray", reason="the Ray executor needs the hammr[ray] extra")

HAMMR = Path(sys.executable).parent / "hammr"
RAY_PROCESS_MARKS = ("ray::", "/ray/core/src/ray/", "raylet", "gcs_server")


def ray_processes() -> dict[int, str]:
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(mark in cmd for mark in RAY_PROCESS_MARKS):
            found[int(entry)] = cmd
    return found


@pytest.fixture(autouse=True)
def no_ray_left_behind() -> Iterator[None]:
    before = set(ray_processes())
    yield
    # A SIGKILLed driver leaves Ray's two node agents behind (`ray stop` would end them).
    for pid in set(ray_processes()) - before:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def slow_server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.responder = lambda seen: answer(seen, 0.4)
    yield s
    s.close()


def evaluate(suite: Path, data: Path, store: Path, name: str, *extra: str) -> list[str]:
    return [
        str(HAMMR), "eval", "--suite", str(suite), "--data-dir", str(data),
        "--store", str(store), "--system", "naive", "--name", name, "--no-progress", *extra,
    ]  # fmt: skip


def environment(server: FakeServer, tmp_path: Path) -> dict[str, str]:
    """hammr pointed at ``server``, with a model-call limit that a loaded machine does not
    reach (the fake server answers in under a second; these tests are about faults)."""
    return {**os.environ, **env_for(server, tmp_path), "HAMMR_LLM__TIMEOUT_S": "300"}


def stored(store: Path) -> int:
    """Samples in the store so far; read-only, so that looking never creates the file (an
    empty file where the run's store should be is refused)."""
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM samples").fetchone()[0])
    except sqlite3.Error:
        return 0


HANG_GUARD_S = 1800
"""Only against a run that hangs: far beyond any run on a loaded machine. These tests assert
what a run stores, never how fast (a loaded machine starts Ray slowly)."""


def wait_for(store: Path, n: int, proc: subprocess.Popen[str]) -> None:
    """Until the run has stored ``n`` samples; it must not end before."""
    guard = time.monotonic() + HANG_GUARD_S
    while stored(store) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < guard, "the run hung"
        time.sleep(0.05)


def report(store: Path, run: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(HAMMR), "report", run, "--store", str(store), "--format", "csv"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.replace(run, "RUN")


def per_sample(store: Path, run: str) -> dict[tuple[str, str], tuple[str | None, float, str]]:
    with RunStore(store) as s:
        return {
            (r.dataset, r.sample_id): (r.prediction, r.score, r.status)
            for r in s.records(run, traces=False)
        }


def sample_counts(store: Path, run: str) -> set[int]:
    with RunStore(store) as s:
        return set(s.sample_counts(run).values())


def test_the_ray_report_equals_the_local_one_scripted_llm(
    slow_server: FakeServer, tmp_path: Path
) -> None:
    suite, data = make_data(tmp_path, n=12)
    env = environment(slow_server, tmp_path)
    store = tmp_path / "runs.sqlite"
    local = subprocess.run(evaluate(suite, data, store, "local"), env=env, capture_output=True,
                           text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert local.returncode == 0, local.stderr
    on_ray = subprocess.run(
        evaluate(suite, data, store, "ray", "--executor", "ray", "--workers", "2"),
        env=env, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert on_ray.returncode == 0, on_ray.stderr
    assert "12 samples, 2 Ray workers x 8 at a time" in on_ray.stderr
    assert "Traceback" not in on_ray.stderr
    assert report(store, "ray", env) == report(store, "local", env)
    assert per_sample(store, "ray") == per_sample(store, "local")
    with RunStore(store) as s:  # traces and their images came back to the driver's store
        rec = s.get("ray", "signs", "s0")
        assert rec.trace is not None and rec.trace.images


def test_a_worker_killed_mid_run_loses_nothing(slow_server: FakeServer, tmp_path: Path) -> None:
    suite, data = make_data(tmp_path, n=24)
    env = environment(slow_server, tmp_path)
    store = tmp_path / "runs.sqlite"
    args = ["--executor", "ray", "--workers", "2", "--concurrency", "2"]
    run = subprocess.Popen(evaluate(suite, data, store, "ray", *args), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for(store, 4, run)
    workers = [pid for pid, cmd in ray_processes().items() if "SampleWorker" in cmd]
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    out, err = run.communicate(timeout=HANG_GUARD_S)
    assert run.returncode == 0, err
    assert "24 samples, mean score" in out and "errors" not in out
    assert sample_counts(store, "ray") == {1} and stored(store) == 24
    local = subprocess.run(evaluate(suite, data, store, "local"), env=env, capture_output=True,
                           text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert report(store, "ray", env) == report(store, "local", env)
    assert per_sample(store, "ray") == per_sample(store, "local")


def test_a_killed_driver_resumes_with_nothing_counted_twice(
    slow_server: FakeServer, tmp_path: Path
) -> None:
    suite, data = make_data(tmp_path, n=24)
    env = environment(slow_server, tmp_path)
    store = tmp_path / "runs.sqlite"
    command = evaluate(suite, data, store, "ray", "--executor", "ray", "--concurrency", "2")
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    wait_for(store, 4, first)
    first.kill()
    first.communicate()
    kept = stored(store)
    assert 4 <= kept < 24
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert again.returncode == 0, again.stderr
    assert f"resuming run ray: {kept} of 24 samples already done" in again.stderr
    assert f"{24 - kept} new" in again.stdout
    assert sample_counts(store, "ray") == {1} and stored(store) == 24
    local = subprocess.run(evaluate(suite, data, store, "local"), env=env, capture_output=True,
                           text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert report(store, "ray", env) == report(store, "local", env)


def kill_the_asker(seen: Seen) -> Reply:
    """The fake server's answer, except that a question marked QFAIL kills every Ray worker
    (the test runs one) the moment its model call arrives."""
    if "QFAIL" in str(seen.body):
        for pid, cmd in ray_processes().items():
            if "SampleWorker" in cmd:
                os.kill(pid, signal.SIGKILL)
        return Reply(status=500, body={"error": {"message": "unreachable"}}, delay=1)
    return answer(seen, 0.2)


def test_a_sample_that_kills_its_worker_is_failed_alone(tmp_path: Path) -> None:
    server = FakeServer()
    server.responder = kill_the_asker
    try:
        suite, data = make_data(tmp_path, n=6, fail=(2,))
        env = environment(server, tmp_path)
        store = tmp_path / "runs.sqlite"
        done = subprocess.run(
            evaluate(suite, data, store, "ray", "--executor", "ray", "--workers", "1",
                     "--concurrency", "3"),
            env=env, capture_output=True, text=True, timeout=HANG_GUARD_S,
        )  # fmt: skip
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    with RunStore(store) as s:
        records = {r.sample_id: r for r in s.records("ray", traces=False)}
    assert len(records) == 6 and sample_counts(store, "ray") == {1}
    poison = records["s2"]
    assert poison.status == "error"
    assert str(poison.error).startswith("the worker process died each of the 2 times")
    # its neighbours were suspects once, asked again alone, and answered
    assert {r.status for sid, r in records.items() if sid != "s2"} == {"finished"}


def test_images_are_shipped_when_workers_cannot_see_them(
    slow_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative image paths name files only in the driver's folder: the workers (other
    folders) cannot see them, so the driver sends the bytes through Ray's object store."""
    from hammr.eval.executors.ray_executor import run_eval_ray

    suite, data = make_data(tmp_path, n=4)
    monkeypatch.chdir(data)
    for k, v in env_for(slow_server, tmp_path).items():
        monkeypatch.setenv(k, v)
    samples = [
        (entry, replace(s, images={n: p.relative_to(data) for n, p in s.images.items()}))
        for entry, s in load_suite(str(suite)).samples(data)
    ]
    assert not samples[0][1].images["image"].is_absolute()
    job = EvalJob(config=load_config(None), system="naive", concurrency=2)
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.open_run("shipped", "tiny", "naive")
        out = asyncio.run(run_eval_ray(job, samples, store=store, run_name="shipped", workers=1))
        assert out.ran == 4 and out.statuses == {"finished": 4}
        rec = store.get("shipped", "signs", "s0")
        assert rec.trace is not None
        image = next(iter(rec.trace.images.values()))
        assert (image.width, image.height) == (32, 24)


def test_a_worker_that_cannot_build_the_job_is_one_clear_error(tmp_path: Path) -> None:
    from hammr.eval.executors.ray_executor import run_eval_ray

    suite, data = make_data(tmp_path, n=2)
    job = EvalJob(config=load_config(None), system="NoSuchAgent", concurrency=1)
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.open_run("bad", "tiny", "x")
        with pytest.raises(ExecutorError, match=r"a Ray worker could not start: .*NoSuchAgent"):
            asyncio.run(
                run_eval_ray(job, load_suite(str(suite)).samples(data), store=store, run_name="bad")
            )
        assert store.count("bad") == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--ray-address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
        (["--ray-address", "nowhere"], "is not 'auto', HOST:PORT or ray://HOST:PORT"),
        (["--ray-address", "ray://127.0.0.1:1"], "cannot reach the Ray cluster at ray://"),
    ],
)
def test_an_unreachable_cluster_is_one_line(
    slow_server: FakeServer, tmp_path: Path, extra: list[str], says: str
) -> None:
    suite, data = make_data(tmp_path, n=2)
    store = tmp_path / "runs.sqlite"
    r = CliRunner().invoke(
        main,
        evaluate(suite, data, store, "r", "--executor", "ray", *extra)[1:],
        env=env_for(slow_server, tmp_path),
    )
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hammr: error:")]
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert "Traceback" not in r.output and stored(store) == 0


def test_no_ray_installed_says_how_to_get_it(
    slow_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    suite, data = make_data(tmp_path, n=2)
    r = CliRunner().invoke(
        main,
        evaluate(suite, data, tmp_path / "s.sqlite", "r", "--executor", "ray")[1:],
        env=env_for(slow_server, tmp_path),
    )
    assert r.exit_code == 2
    assert r.stderr.strip().endswith("pip install 'hammr[ray]'"), r.stderr
    assert "Traceback" not in r.output


def test_ray_options_without_the_ray_executor_are_refused(tmp_path: Path) -> None:
    suite, data = make_data(tmp_path, n=2)
    r = CliRunner().invoke(
        main, evaluate(suite, data, tmp_path / "s.sqlite", "r", "--ray-address", "auto")[1:]
    )
    assert r.exit_code == 2
    assert "--ray-address and --ship-images go with --executor ray" in r.stderr
