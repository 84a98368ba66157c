"""The local Ray cluster `hammr eval --executor ray` starts without --ray-address: every
listening socket of its processes is on 127.0.0.1; the folders of shipped images are gone
when a run ends, whether a worker died meanwhile or the run was interrupted; and a worker
whose restart is held up (its node agent stopped) costs its samples nothing: none is stored
as an error for a restart being slow. All against the scripted fake OpenAI server.

Skipped when Ray (the hammr[ray] extra) is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_openai_server import FakeServer, Reply, Seen
from hammr.config import load_config
from hammr.eval.job import EvalJob
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from test_eval_cli import answer, env_for, make_data
from test_eval_ray import environment, evaluate, no_ray_left_behind, sample_counts

pytest.importorskip("ray", reason="the Ray executor needs the hammr[ray] extra")

__all__ = ["no_ray_left_behind"]  # the autouse fixture: no Ray process outlives a test


def process_tree(root: int) -> dict[int, str]:
    """``root`` and every process below it: pid -> command line."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
        commands[int(entry)] = cmd
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid: commands.get(pid, "") for pid in found}


def address(hex_host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it (32-bit words in host byte order)."""
    raw = bytes.fromhex(hex_host)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return ipaddress.ip_address(socket.inet_ntop(family, words))


def listening(processes: dict[int, str]) -> list[tuple[str, str, int]]:
    """(command, address, port) of every listening TCP socket the processes hold."""
    sockets: dict[str, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                host, port = fields[1].split(":")
                sockets[fields[9]] = (str(address(host)), int(port, 16))
    found = []
    for pid, cmd in processes.items():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            inode = target.removeprefix("socket:[").removesuffix("]")
            if target.startswith("socket:[") and inode in sockets:
                found.append((short_command(cmd), *sockets[inode]))
    return found


def short_command(cmd: str) -> str:
    """The program's own name and the start of its arguments: a checkout deep in the file
    system must not push the name (gcs_server, raylet) out of what the test matches."""
    program, _, arguments = cmd.partition(" ")
    return f"{os.path.basename(program)} {arguments}"[:100]


def on_loopback(host: str) -> bool:
    ip = ipaddress.ip_address(host)
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def assert_all_on_loopback(found: list[tuple[str, str, int]]) -> None:
    assert any("gcs_server" in cmd for cmd, _, _ in found), found  # we looked at the cluster
    assert any("raylet" in cmd for cmd, _, _ in found), found
    open_doors = [f for f in found if not on_loopback(f[1])]
    assert not open_doors, open_doors


def test_the_local_cluster_of_hammr_eval_listens_on_127_0_0_1_only_scripted_llm(
    tmp_path: Path,
) -> None:
    """While `hammr eval --executor ray` answers (each model call), every listening socket
    of the driver and of the processes below it (GCS, raylet, agents, workers)."""
    started = threading.Event()
    driver: list[int] = []
    found: list[tuple[str, str, int]] = []

    def look_then_answer(seen: Seen) -> Reply:
        started.wait()
        found.extend(listening(process_tree(driver[0])))
        return answer(seen)

    server = FakeServer()
    server.responder = look_then_answer
    try:
        suite, data = make_data(tmp_path, n=4)
        run = subprocess.Popen(
            evaluate(suite, data, tmp_path / "runs.sqlite", "ray", "--executor", "ray",
                     "--workers", "2"),
            env=environment(server, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        driver.append(run.pid)
        started.set()
        _, err = run.communicate()
    finally:
        server.close()
    assert run.returncode == 0, err
    assert_all_on_loopback(found)


def test_a_local_cluster_started_after_ray_was_imported_listens_on_127_0_0_1_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same from a program that imported Ray before (as this test process did): Ray read
    its settings then, and the cluster still stays on 127.0.0.1."""
    from hammr.eval.executors.ray_executor import run_eval_ray

    found: list[tuple[str, str, int]] = []

    def look_then_answer(seen: Seen) -> Reply:
        found.extend(listening(process_tree(os.getpid())))
        return answer(seen)

    server = FakeServer()
    server.responder = look_then_answer
    try:
        for k, v in env_for(server, tmp_path).items():
            monkeypatch.setenv(k, v)
        suite, data = make_data(tmp_path, n=2)
        job = EvalJob(config=load_config(None), system="naive", concurrency=2)
        with RunStore(tmp_path / "runs.sqlite") as store:
            store.open_run("r", "tiny", "naive")
            out = asyncio.run(
                run_eval_ray(job, load_suite(str(suite)).samples(data), store=store,
                             run_name="r", workers=1)
            )  # fmt: skip
    finally:
        server.close()
    assert out.statuses == {"finished": 2}
    assert_all_on_loopback(found)


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of our own for this process and the Ray processes it starts
    (short: Ray's socket paths live below it)."""
    folder = Path(tempfile.mkdtemp(prefix="hr-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def shipped_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("hammr-shipped-*"))


def kill_workers() -> None:
    for pid, cmd in process_tree(os.getpid()).items():
        if "SampleWorker" in cmd:
            os.kill(pid, signal.SIGKILL)


def test_shipped_images_leave_no_folder_when_a_worker_dies_mid_sample_scripted_llm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    from hammr.eval.executors.ray_executor import run_eval_ray

    killed = threading.Event()
    during: list[Path] = []

    def kill_once(seen: Seen) -> Reply:
        if not killed.is_set():
            killed.set()
            during.extend(shipped_folders(short_tmp))  # the sample's images, unpacked
            kill_workers()
            return Reply(status=500, body={"error": {"message": "unreachable"}}, delay=1)
        return answer(seen)

    server = FakeServer()
    server.responder = kill_once
    try:
        for k, v in env_for(server, tmp_path).items():
            monkeypatch.setenv(k, v)
        suite, data = make_data(tmp_path, n=4)
        job = EvalJob(config=load_config(None), system="naive", concurrency=2)
        with RunStore(tmp_path / "runs.sqlite") as store:
            store.open_run("r", "tiny", "naive")
            out = asyncio.run(
                run_eval_ray(job, load_suite(str(suite)).samples(data), store=store,
                             run_name="r", workers=1, ship_images=True)
            )  # fmt: skip
    finally:
        server.close()
    assert killed.is_set() and during, "the test looked at the wrong folder"
    assert out.statuses == {"finished": 4}
    assert shipped_folders(short_tmp) == []


def test_an_interrupted_run_leaves_no_shipped_folder_scripted_llm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    """The run is cancelled (Ctrl-C) while a worker holds a sample's unpacked images."""
    from hammr.eval.executors.ray_executor import run_eval_ray

    arrived = threading.Event()
    server = FakeServer()

    def hold(seen: Seen) -> Reply:
        arrived.set()
        server.stop.wait()  # answered only when the server closes
        return answer(seen)

    server.responder = hold
    try:
        for k, v in env_for(server, tmp_path).items():
            monkeypatch.setenv(k, v)
        suite, data = make_data(tmp_path, n=2)
        job = EvalJob(config=load_config(None), system="naive", concurrency=2)

        async def interrupt() -> list[Path]:
            with RunStore(tmp_path / "runs.sqlite") as store:
                store.open_run("r", "tiny", "naive")
                run = asyncio.create_task(
                    run_eval_ray(job, load_suite(str(suite)).samples(data), store=store,
                                 run_name="r", workers=1, ship_images=True)
                )  # fmt: skip
                waiting = asyncio.create_task(asyncio.to_thread(arrived.wait))
                await asyncio.wait({run, waiting}, return_when=asyncio.FIRST_COMPLETED)
                assert not run.done(), run.result()
                during = shipped_folders(short_tmp)
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run
                return during

        during = asyncio.run(interrupt())
    finally:
        arrived.set()
        server.close()
    assert during, "the test looked at the wrong folder"
    assert shipped_folders(short_tmp) == []


def test_a_slow_restart_fails_no_sample_scripted_llm(tmp_path: Path) -> None:
    """The worker is killed with three samples in flight while its node agent (the raylet,
    which starts the replacement) is stopped for a while: the three are asked again alone
    once the worker is back, and all finish. Before, each ask sent while the worker was
    still restarting counted as the sample killing it, and two failed the sample."""
    driver: list[int] = []
    started = threading.Event()
    done = threading.Event()
    stopped: list[int] = []

    def resume() -> None:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def stall_restart(seen: Seen) -> Reply:
        started.wait()
        if "QID-2" in str(seen.body) and not done.is_set():
            done.set()
            tree = process_tree(driver[0])
            stopped.extend(pid for pid, cmd in tree.items() if "raylet/raylet" in cmd)
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            for pid, cmd in tree.items():
                if "SampleWorker" in cmd:
                    os.kill(pid, signal.SIGKILL)
            threading.Timer(8, resume).start()  # how long the fault lasts, not a deadline
            return Reply(status=500, body={"error": {"message": "unreachable"}})
        return answer(seen, 0.5)

    server = FakeServer()
    server.responder = stall_restart
    try:
        suite, data = make_data(tmp_path, n=6)
        store = tmp_path / "runs.sqlite"
        run = subprocess.Popen(
            evaluate(suite, data, store, "ray", "--executor", "ray", "--workers", "1",
                     "--concurrency", "3"),
            env=environment(server, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        driver.append(run.pid)
        started.set()
        out, err = run.communicate()
    finally:
        resume()
        server.close()
    assert done.is_set() and stopped, "the fault was not injected"
    assert run.returncode == 0, err
    assert "6 samples, mean score" in out and "errors" not in out, out
    with RunStore(store) as s:
        statuses = {r.sample_id: (r.status, r.error) for r in s.records("ray", traces=False)}
    assert {status for status, _ in statuses.values()} == {"finished"}, statuses
    assert sample_counts(store, "ray") == {1}
