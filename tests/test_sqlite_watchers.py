"""Nothing committed is lost while other processes read the file: for every SQLite file hammr
writes (the run store, the experience bank, Reflexion/ExpeL memory, the LLM response cache).

The way it failed (issue 26): a writer process holding one object on the file opened and
closed a second object on the same file (as ``hammr experiment run`` does with the run store),
and that second object read the file's header with a plain ``open()``. Closing that
descriptor dropped every POSIX lock the writer process held, so the next reader process
(``hammr runs``) took itself for the last connection, checkpointed and deleted the WAL under
the live writer: what the writer committed afterwards went into an unlinked file and was gone
after ``kill -9``.

Here a writer process does the same (two objects, the second opened and closed), then commits
one row at a time; after each commit a reader command runs to completion in another process
(the commands a user watches a run with), and only then may the writer commit the next row.
The writer is killed with SIGKILL at the end and every row it said it committed must be in
the file. Lock-step, so the test asserts order and outcome, never timing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

ROWS = 6

WRITERS = {
    "store": """
        from hammr.eval.store import RunStore
        first = RunStore(PATH)
        RunStore(PATH).close()  # a second object on the same file, opened and closed
        def commit(i):
            first.open_run(f"r{i}", "suite", "naive")
    """,
    "bank": """
        from hammr.memory import ExperienceBank
        first = ExperienceBank(PATH)
        ExperienceBank(PATH, create=False).close()
        def commit(i):
            with first._transaction() as db:  # one committed row, as any bank write makes
                db.execute("INSERT INTO meta VALUES (?, ?)", (f"row{i}", str(i)))
    """,
    "reflexion": """
        from hammr.muse.trajectories import MemoryFile
        first = MemoryFile(PATH, "reflexion")
        MemoryFile(PATH, "reflexion", create=False).close()
        def commit(i):
            first.record_call(f"row{i}", True, {"i": i})
    """,
    "cache": """
        from pathlib import Path
        from hammr.backends.llm.cache import ResponseFile
        first = ResponseFile(Path(PATH))
        ResponseFile(Path(PATH)).close()
        def commit(i):
            first.put((f"row{i}", "answer", 1, 1, "m", "stop", 0.0))
    """,
}

WRITER_LOOP = """
import sys
{setup}
print("open", flush=True)
for i in range({rows}):
    commit(i)
    print(f"committed {{i}}", flush=True)
    if sys.stdin.readline() == "":
        break
sys.stdin.read()  # hold the file open until killed
"""

COMMITTED = {
    "store": "SELECT name FROM runs",
    "bank": "SELECT key FROM meta WHERE key LIKE 'row%'",
    "reflexion": "SELECT key FROM calls",
    "cache": "SELECT key FROM responses",
}


def _hammr(*args: str) -> list[str]:
    return [sys.executable, "-c", "from hammr.cli import main; main()", *args]


def _run(cmd: list[str], env: dict[str, str]) -> None:
    subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False)


def _view(path: Path, env: dict[str, str]) -> None:
    """`hammr view` on the store: started, asked for its runs, stopped with Ctrl-C."""
    proc = subprocess.Popen(
        _hammr("view", "--store", str(path), "--port", "0"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        with urllib.request.urlopen(url.rstrip("/") + "/api/runs", timeout=600) as resp:
            resp.read()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=600)


def _python(code: str) -> Callable[[Path, dict[str, str]], None]:
    """A reader that is a few lines of Python (for files no command only reads)."""
    return lambda p, env: _run([sys.executable, "-c", code.replace("PATH", repr(str(p)))], env)


# what `--system reflexion --memory FILE` opens before it answers
_REFLEXION_READER = _python(
    "from hammr.muse.trajectories import MemoryFile; "
    "m = MemoryFile(PATH, 'reflexion', create=False); m.entries(); m.close()"
)
# what a second `hammr ask` with the same cache opens
_CACHE_READER = _python(
    "from pathlib import Path; from hammr.backends.llm.cache import ResponseFile; "
    "f = ResponseFile(Path(PATH)); f.get('row0'); f.close()"
)


def _readers(kind: str) -> list[Callable[[Path, dict[str, str]], None]]:
    def cli(*args: str) -> Callable[[Path, dict[str, str]], None]:
        return lambda p, env: _run(_hammr(*[a.replace("PATH", str(p)) for a in args]), env)

    if kind == "store":
        return [
            cli("runs", "--store", "PATH"),
            cli("report", "r0", "--store", "PATH"),
            _view,
            cli("experiment", "report", "hammr-table3", "--demo", "--store", "PATH"),
            cli("errors", "r0", "--store", "PATH"),
        ]
    if kind == "bank":
        return [cli("memory", "show", "PATH")]
    if kind == "reflexion":
        return [_REFLEXION_READER, cli("memory", "show", "PATH")]
    return [_CACHE_READER]


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_nothing_committed_is_lost_while_other_processes_read(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.sqlite"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    setup = textwrap.dedent(WRITERS[kind]).replace("PATH", repr(str(path)))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER_LOOP.format(setup=setup, rows=ROWS)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None
    committed = 0
    readers = _readers(kind)
    try:
        assert writer.stdout.readline().strip() == "open"
        for i in range(ROWS):
            assert writer.stdout.readline().strip() == f"committed {i}"
            committed += 1
            readers[i % len(readers)](path, env)
            writer.stdin.write("go\n")
            writer.stdin.flush()
        # the writer is still holding the file: its WAL must still be there
        assert Path(f"{path}-wal").exists(), "a reader deleted the live writer's WAL"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=600)
    db = sqlite3.connect(path)
    try:
        rows = {r[0] for r in db.execute(COMMITTED[kind])}
    finally:
        db.close()
    expected = {f"r{i}" if kind == "store" else f"row{i}" for i in range(committed)}
    assert committed == ROWS
    assert rows >= expected, f"lost after kill -9: {sorted(expected - rows)}"


def test_one_connection_per_file_per_process(tmp_path: Path) -> None:
    """Two objects on one file in one process share one connection (and its lock): closing
    one leaves the other working, and the connection closes with the last of them."""
    import threading

    from hammr.eval.store import RunStore
    from hammr.sqlite_file import connections_open

    path = tmp_path / "s.sqlite"
    first = RunStore(path)
    second = RunStore(path, create=False)
    assert connections_open(path) == 2

    def commits(store: RunStore, prefix: str) -> None:
        for i in range(20):
            store.open_run(f"{prefix}{i}", "suite", "naive")

    threads = [
        threading.Thread(target=commits, args=(first, "a")),
        threading.Thread(target=commits, args=(second, "b")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first.close()
    first.close()  # twice is harmless
    assert connections_open(path) == 1
    names = set(second.run_names())
    assert names == {f"a{i}" for i in range(20)} | {f"b{i}" for i in range(20)}
    second.close()
    assert connections_open(path) == 0
