"""Who drives a run, and what --retry-failed replaces (issue 21, items 4, 5 and 8).

* A second `hammr eval` on a live run is refused in one line naming the live one (its pid),
  and asks nothing; a driver killed with SIGKILL does not block the run: the next one takes
  over. The local executor (concurrent) and the Ray executor both go through the same hold.
* `--retry-failed` keeps a failed record until its new answer is stored: while the retry is
  in flight, and after it is killed, the run still holds every sample.
* `--judge bem` without a usable checkpoint stops at the start in one line.

The LLM is the scripted OpenAI-compatible server of the tests (fake_openai_server), which
only plays the machinery's part: replies are fixed, and a request can be held until the test
lets it go, so that "a driver is live" is a fact the test waits for, never a timing.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from demo_support import DEMO
from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.cli import main
from hammr.eval.driver_lock import (
    Driver,
    busy_message,
    is_alive,
    pid_namespace,
    same_host,
    this_driver,
)
from hammr.eval.runner import run_eval
from hammr.eval.store import RunBusy, RunStore
from hammr.eval.types import RunRecord
from hammr.memory.experiences import sample_experiences
from hammr.trace import Step, StepUsage, Trace

SAMPLES = 8
"""`--suite demo --limit 1`: one question per entry, eight entries."""
WAIT_S = 240.0
"""A bound on waiting for a subprocess to reach a point (a hang fails, never a slow run)."""


class HeldServer(FakeServer):
    """Answers every request '[Finish]: x' (or HTTP 500 while ``failing``), each only once
    ``release`` is set; ``arrived`` is set by the first request."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.arrived = threading.Event()
        self.failing = False
        self.responder = self._reply

    def _reply(self, seen: Seen) -> Reply:
        self.arrived.set()
        self.release.wait(WAIT_S)
        if self.failing:
            return Reply(status=500, body={"error": {"message": "the server is down"}})
        return Reply(body=ok_body("[Thought]: I look\n[Finish]: x"))


@pytest.fixture
def server() -> Iterator[HeldServer]:
    s = HeldServer()
    yield s
    s.release.set()
    s.close()


def eval_cmd(store: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hammr.cli",
        "eval",
        "--suite",
        "demo",
        "--data-dir",
        str(DEMO),
        "--system",
        "naive",
        "--limit",
        "1",
        "--judge",
        "none",
        "--name",
        "shared",
        "--store",
        str(store),
        *extra,
    ]


def env_of(server: FakeServer, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **served_env(
            server, timeout_s=WAIT_S, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache")
        ),
    }


def wait_for(
    event: threading.Event,
    proc: subprocess.Popen[str],
    until: Callable[[], bool] = lambda: True,
) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (event.wait(0.05) and until()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the driver never asked the server"


def rows(store: Path) -> list[tuple[str, str, str, int]]:
    db = sqlite3.connect(store, timeout=30)
    try:
        return db.execute(
            "SELECT dataset, sample_id, status, attempt FROM samples ORDER BY rowid"
        ).fetchall()
    finally:
        db.close()


# -- two drivers ------------------------------------------------------------------------------


def test_a_second_driver_on_a_live_run_is_refused_and_a_killed_one_is_taken_over(
    server: HeldServer, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite"
    env = env_of(server, tmp_path)
    first = subprocess.Popen(
        eval_cmd(store), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # the first driver is live, every question of the run in flight and held
        wait_for(server.arrived, first, until=lambda: len(server.seen) == SAMPLES)
        for extra in ((), ("--concurrency", "3"), ("--executor", "ray")):
            second = subprocess.run(
                eval_cmd(store, *extra), env=env, capture_output=True, text=True, timeout=WAIT_S
            )
            assert second.returncode == 2, second.stderr
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1, second.stderr
            assert "run 'shared' is being evaluated by another hammr eval" in lines[0]
            assert f"pid {first.pid} on {socket.gethostname()}" in lines[0]
        assert len(server.seen) == SAMPLES  # the refused ones asked nothing

        # killed mid-run: the next driver takes the run over at once and finishes it
        first.kill()
        first.communicate()
        server.release.set()
        kept = len(rows(store))
        third = subprocess.run(
            eval_cmd(store), env=env, capture_output=True, text=True, timeout=WAIT_S
        )
        assert third.returncode == 0, third.stderr
        assert f"resuming run shared: {kept} of {SAMPLES} samples already done" in third.stderr
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    stored = rows(store)
    assert len(stored) == SAMPLES and len({(d, s) for d, s, _, _ in stored}) == SAMPLES
    with RunStore(store) as s:
        assert s.driver("shared") is None  # the last driver let go


def test_one_driver_at_a_time_in_process_for_both_executors(tmp_path: Path) -> None:
    """run_samples holds the run whatever the executor: a held run refuses a second store
    object (a second process would be the same), before Ray is started or anything asked."""
    from hammr.config import load_config
    from hammr.eval.executors.ray_executor import run_eval_ray
    from hammr.eval.job import EvalJob

    path = tmp_path / "runs.sqlite"
    with RunStore(path) as holder, RunStore(path) as other:
        holder.open_run("r", "s", "naive")
        with holder.driving("r") as me:
            assert other.driver("r") == me

            class Never:
                name = "never"

                async def run(self, *a: object, **k: object) -> object:
                    raise AssertionError("asked while another driver holds the run")

            import asyncio

            with pytest.raises(RunBusy, match=f"pid {os.getpid()}"):
                asyncio.run(run_eval(Never(), [], store=other, run_name="r"))  # type: ignore[arg-type]
            job = EvalJob(config=load_config(None), system="naive")
            ray = pytest.importorskip("ray")
            with pytest.raises(RunBusy):
                asyncio.run(run_eval_ray(job, [], store=other, run_name="r"))
            assert not ray.is_initialized()
        assert holder.driver("r") is None


def test_which_recorded_drivers_are_alive() -> None:
    me = this_driver()
    assert is_alive(me)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    gone = Driver("t", me.host, int(dead.stdout), "", me.since, me.heartbeat)
    assert not is_alive(gone)  # same host, no such process: no clock consulted
    reused = Driver("t", me.host, me.pid, "another-boot:1", me.since, 0.0)
    assert not is_alive(reused)  # the pid now names another process
    elsewhere = Driver("t", "another-host", 1, "", me.since, 1000.0)
    assert is_alive(elsewhere, now=1000.0 + 30, lease_s=120)
    assert not is_alive(elsewhere, now=1000.0 + 121, lease_s=120)


COLUMNS = "run, token, host, pid, pid_started, since, heartbeat"
"""A drivers row as every hammr writes it (a newer one adds pid_ns)."""


def a_dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(done.stdout)


def record_driver(path: Path, host: str, pid: int, heartbeat: float, pid_ns: str | None) -> None:
    """A drivers row for run 'r' as another process would have written it (``pid_ns`` None:
    an older hammr's row, without the column)."""
    db = sqlite3.connect(path)
    names, values = COLUMNS, ["r", "other", host, pid, "", "2020-01-01T00:00", heartbeat]
    if pid_ns is not None:
        names, values = f"{COLUMNS}, pid_ns", [*values, pid_ns]
    marks = ", ".join("?" for _ in values)
    db.execute(f"INSERT OR REPLACE INTO drivers ({names}) VALUES ({marks})", values)
    db.commit()
    db.close()


def test_a_driver_in_another_pid_namespace_is_judged_by_its_heartbeat(tmp_path: Path) -> None:
    """A container sharing the file system and the host name but not the PIDs: its driver's
    pid means nothing here, so only its heartbeat says whether it lives."""
    me = this_driver()
    assert me.pid_ns == pid_namespace()
    if sys.platform.startswith("linux"):
        assert me.pid_ns.startswith("pid:[")
    elsewhere = "pid:[1]" if me.pid_ns != "pid:[1]" else "pid:[2]"
    dead = a_dead_pid()
    # the recorded pid is dead here, but it is another namespace's pid: the lease decides
    inside = Driver("t", me.host, dead, "", me.since, 1000.0, elsewhere)
    assert not same_host(inside)
    assert is_alive(inside, now=1000.0 + 30, lease_s=120)
    assert not is_alive(inside, now=1000.0 + 121, lease_s=120)
    # this namespace, dead pid: gone, without a clock
    assert not is_alive(Driver("t", me.host, dead, "", me.since, time.time(), me.pid_ns))
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as s:
        s.open_run("r", "s", "naive")
        record_driver(path, me.host, dead, time.time(), elsewhere)  # fresh heartbeat
        busy = pytest.raises(RunBusy, match=f"another PID namespace, {re.escape(elsewhere)}")
        with busy, s.driving("r"):
            pass
        assert "heartbeat stops" in busy_message("r", inside)
        record_driver(path, me.host, dead, time.time(), me.pid_ns)  # this namespace, dead pid
        with s.driving("r") as mine:
            assert s.driver("r") == mine and mine.pid_ns == me.pid_ns
        record_driver(path, me.host, dead, time.time() - 121, elsewhere)  # a stale heartbeat
        with s.driving("r", lease_s=120) as mine:
            assert s.driver("r") == mine


def test_an_older_store_s_driver_row_without_a_namespace_still_works(tmp_path: Path) -> None:
    """A store made before the PID namespace was recorded: its row (no namespace) is judged
    by the host name as then, and the first driver to hold a run adds the column; a reading
    command never does."""
    me = this_driver()
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as s:
        s.open_run("r", "s", "naive")
    db = sqlite3.connect(path)
    db.executescript(
        "DROP TABLE drivers; CREATE TABLE drivers (run TEXT PRIMARY KEY, token TEXT NOT NULL, "
        "host TEXT NOT NULL, pid INTEGER NOT NULL, pid_started TEXT NOT NULL, "
        "since TEXT NOT NULL, heartbeat REAL NOT NULL);"
    )
    db.close()
    record_driver(path, me.host, os.getpid(), 0.0, None)  # this process: alive, on this host
    with RunStore(path, create=False) as reader:
        holder = reader.driver("r")
        assert holder is not None and holder.pid_ns == "" and same_host(holder)
        assert is_alive(holder)  # no clock consulted: its pid lives
    db = sqlite3.connect(path)
    assert "pid_ns" not in {r[1] for r in db.execute("PRAGMA table_info(drivers)")}
    db.close()
    with RunStore(path) as s:
        busy = pytest.raises(RunBusy, match=f"pid {os.getpid()} on {re.escape(me.host)},")
        with busy, s.driving("r"):
            pass
        record_driver(path, me.host, a_dead_pid(), time.time(), None)  # an older driver, dead
        with s.driving("r") as mine:
            assert s.driver("r") == mine and mine.pid_ns == pid_namespace()


def test_a_dead_holder_in_the_store_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as s:
        s.open_run("r", "s", "naive")
        db = sqlite3.connect(path)
        db.execute(
            f"INSERT INTO drivers ({COLUMNS}) "
            "VALUES ('r', 'old', 'another-host', 7, '', '2020-01-01T00:00', 0)"
        )
        db.commit()
        db.close()
        with s.driving("r") as me:
            assert s.driver("r") == me
        fresh = time.time()
        db = sqlite3.connect(path)
        db.execute(
            f"INSERT INTO drivers ({COLUMNS}) VALUES ('r', 'live', 'another-host', 7, '', "
            "'2020-01-01T00:00', ?)",
            (fresh,),
        )
        db.commit()
        db.close()
        busy = pytest.raises(RunBusy, match="pid 7 on another-host, since 2020-01-01 00:00")
        with busy, s.driving("r"):
            pass


# -- --retry-failed -----------------------------------------------------------------------------


def test_retry_failed_keeps_the_old_records_until_new_answers_are_stored(
    server: HeldServer, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite"
    env = env_of(server, tmp_path)
    server.failing = True
    server.release.set()
    failed = subprocess.run(eval_cmd(store), env=env, capture_output=True, text=True)
    # every sample failed: the run is FAILED (exit 1, the cause named), its records stored
    assert failed.returncode == 1, failed.stderr
    assert f"FAILED: {SAMPLES} of {SAMPLES} samples got no answer from the LLM" in failed.stderr
    before = rows(store)
    assert len(before) == SAMPLES and {st for _, _, st, _ in before} == {"llm_failure"}

    # a retry in flight, then killed: every failed record is still there, as it was
    server.failing, server.arrived = False, threading.Event()
    server.release.clear()
    retry = subprocess.Popen(
        eval_cmd(store, "--retry-failed"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(server.arrived, retry)
        assert rows(store) == before  # not 0 done while it retries
    finally:
        retry.kill()
        retry.communicate()
    assert rows(store) == before

    server.release.set()
    done = subprocess.run(
        eval_cmd(store, "--retry-failed"), env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f"asking {SAMPLES} failed samples again" in done.stderr
    after = rows(store)
    # replaced in place, each once, as their second attempt
    assert [(d, s) for d, s, _, _ in after] == [(d, s) for d, s, _, _ in before]
    assert {(st, a) for _, _, st, a in after} == {("finished", 1)}


def record(status: str, answer: str | None) -> RunRecord:
    trace = Trace(agent="a", question="q?", answer=answer, model="m")
    trace.steps.append(Step(index=0, finish=answer, usage=StepUsage(1, 1)))
    trace.status = status
    return RunRecord("r", "s1", "ds", "qt", "q?", ("x",), answer, 0.0, status=status, trace=trace)


def test_a_replaced_record_is_a_new_attempt_with_its_own_experience_ids(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as s:
        s.open_run("r", "s", "naive")
        first = record("error", None)
        assert s.add(first) and first.attempt == 0
        s.add(RunRecord("r", "s2", "ds", "qt", "q2", ("x",), "x", 1.0))
        assert not s.add(record("finished", "x"))  # not without replace_failed
        again = record("finished", "x")
        assert s.add(again, replace_failed=True) and again.attempt == 1
        assert not s.add(record("error", None), replace_failed=True)  # finished stays
        stored = s.records("r")
        assert [(r.sample_id, r.status, r.attempt) for r in stored] == [
            ("s1", "finished", 1),
            ("s2", "finished", 0),
        ]
        old_ids = {e.id for e in sample_experiences(first)}
        new_ids = {e.id for e in sample_experiences(stored[0])}
        assert old_ids and new_ids and not old_ids & new_ids


# -- judges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--judge", "bem", "--bem-checkpoint", "MISSING"],
            "no such folder (a local BEM checkpoint)",
        ),
        (["--bem-checkpoint", "MISSING"], "no such folder (a local BEM checkpoint)"),  # auto
        (["--judge", "none", "--bem-checkpoint", "MISSING"], "--bem-checkpoint goes with"),
        (["--judge", "bem"], "--judge bem needs --bem-checkpoint"),
    ],
)
def test_a_judge_that_cannot_be_made_stops_the_run_at_its_start(
    tmp_path: Path, args: list[str], says: str
) -> None:
    fake = FakeServer()
    fake.responder = lambda seen: Reply(body=ok_body("[Finish]: x"))
    store = tmp_path / "runs.sqlite"
    try:
        args = [a.replace("MISSING", str(tmp_path / "no-bem")) for a in args]
        cmd = ["eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "naive"]
        cmd += ["--limit", "1", "--store", str(store), *args]
        env = served_env(fake, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))
        r = CliRunner().invoke(main, cmd, env=env)
        assert r.exit_code == 2, r.output
        assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
        assert fake.seen == []
    finally:
        fake.close()
    assert not store.exists() or rows(store) == []


def test_retry_failed_on_a_run_that_is_not_stored_is_refused_and_stores_nothing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.sqlite"
    RunStore(store).close()
    r = CliRunner().invoke(
        main,
        ["eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--limit", "1",
         "--name", "nope", "--retry-failed", "--store", str(store), "--no-progress"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "--retry-failed: no run 'nope'" in r.stderr
    with RunStore(store, create=False) as s:
        assert s.run_info("nope") is None
