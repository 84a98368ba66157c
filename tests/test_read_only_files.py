"""Read commands must not write (issue 21, item 3): a file given to a command that only
reads it (`ask`/`eval` --memory, `memory show`, `runs --store`) is opened only when it is
already ours, and left byte for byte as it was when it is not; a command that makes a file
(`memory build | reflect | insights`, eval's --store) makes one only where none exists or
one of ours is, and a make that fails leaves no file behind.

Models are fake OpenAI-compatible servers on 127.0.0.1 (scripted replies, or HTTP 500 for a
model that fails)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.test_eval_cli import answer, env_for, make_data
from tests.test_muse_reflexion import cli_env, make_explore_store, reflector, serve

from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.backends.llm.base import LLMRequest, Message
from hammr.cli import main
from hammr.eval.store import RunStore, StoreError
from hammr.memory import ExperienceBank
from hammr.memory.bank import BankError
from hammr.muse.trajectories import BaselineError, MemoryFile

PLATE = Path(__file__).resolve().parent.parent / "examples" / "plate.png"


def run(args: list[str], env: dict[str, str]) -> Result:
    base = {"HAMMR_CONFIG": "", "HAMMR_LLM__CACHE": "false"}
    return CliRunner().invoke(main, args, env={**base, **env}, catch_exceptions=False)


def error_line(r: Result) -> str:
    assert "Traceback" not in r.output + r.stderr
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("hammr: error: "), lines[0]
    return lines[0].removeprefix("hammr: error: ")


def not_ours(folder: Path) -> dict[str, Path]:
    """Files that are not hammr's: empty, text, and another program's SQLite database."""
    folder.mkdir(exist_ok=True)
    empty = folder / "empty.db"
    empty.write_bytes(b"")
    text = folder / "text.db"
    text.write_bytes(b"some notes, not a database\n" * 40)
    other = folder / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE contacts (name TEXT)")
    db.commit()
    db.close()
    return {"empty": empty, "text": text, "other": other}


SAYS = {
    "empty": "is an empty file, not",
    "text": "(not an SQLite file)",
    "other": "it holds other tables (contacts)",
}


def snapshot(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` and a hash of its bytes (a -wal or -shm appearing shows)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def embed_env(server: FakeServer) -> dict[str, str]:
    return {
        "HAMMR_TOOLS__EMBED__BACKEND": "openai",
        "HAMMR_TOOLS__EMBED__BASE_URL": server.url,
        "HAMMR_TOOLS__EMBED__MODEL": "fake-embed",
        "HAMMR_TOOLS__EMBED__API_KEY_ENV": "",
    }


# -- reading ------------------------------------------------------------------------------


@pytest.mark.parametrize("system", ["reflexion", "expel", "muse"])
def test_ask_refuses_a_memory_that_is_not_ours_and_leaves_it_as_it_was(
    server: FakeServer, tmp_path: Path, system: str
) -> None:
    server.responder = lambda seen: Reply(body={"error": "no model call was expected"}, status=500)
    files = not_ours(tmp_path / "files")
    before = snapshot(tmp_path / "files")
    env = {**served_env(server), **embed_env(server)}
    what = {"muse": "an experience bank", "expel": "an expel memory"}.get(
        system, f"a {system} memory"
    )
    for kind, path in files.items():
        args = ["ask", str(PLATE), "What is written?", "--system", system, "--memory", str(path)]
        msg = error_line(run(args, env))
        assert str(path) in msg and SAYS[kind] in msg, msg
        if kind != "text":
            assert what in msg, msg
    assert snapshot(tmp_path / "files") == before
    assert not server.seen  # refused before any model was asked


@pytest.mark.parametrize("system", ["reflexion", "expel"])
def test_eval_refuses_an_empty_memory_file(tmp_path: Path, system: str) -> None:
    fake = FakeServer()
    fake.responder = answer
    try:
        suite, data = make_data(tmp_path, n=2)
        memory = tmp_path / "memory.db"
        memory.write_bytes(b"")
        store = tmp_path / "runs.sqlite"
        args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
        args += ["--system", system, "--memory", str(memory), "--name", "m"]
        msg = error_line(run(args, {**env_for(fake, tmp_path), **embed_env(fake)}))
    finally:
        fake.close()
    a = "an" if system == "expel" else "a"
    assert msg.startswith(f"{memory} is an empty file, not {a} {system} memory; make one with")
    assert memory.read_bytes() == b""


def test_memory_show_and_runs_leave_a_file_that_is_not_ours_unchanged(tmp_path: Path) -> None:
    files = not_ours(tmp_path / "files")
    before = snapshot(tmp_path / "files")
    for kind, path in files.items():
        msg = error_line(run(["memory", "show", str(path)], {}))
        assert SAYS[kind] in msg and "experience bank" in msg, msg
        msg = error_line(run(["runs", "--store", str(path)], {}))
        assert SAYS[kind] in msg and "run store" in msg, msg
    assert snapshot(tmp_path / "files") == before


def test_reading_our_own_files_changes_no_byte(tmp_path: Path) -> None:
    folder = tmp_path / "ours"
    with RunStore(folder / "runs.sqlite") as store:
        store.open_run("r", "vstar", "react")
    ExperienceBank(folder / "bank.db").close()
    MemoryFile(folder / "reflexion.db", "reflexion").close()
    before = snapshot(folder)
    assert run(["runs", "--store", str(folder / "runs.sqlite")], {}).exit_code == 0
    assert run(["memory", "show", str(folder / "bank.db")], {}).exit_code == 0
    RunStore(folder / "runs.sqlite", create=False).close()
    ExperienceBank(folder / "bank.db", create=False).close()
    MemoryFile(folder / "reflexion.db", "reflexion", create=False).close()
    assert snapshot(folder) == before


def test_the_classes_refuse_what_is_not_theirs_without_writing(tmp_path: Path) -> None:
    files = not_ours(tmp_path / "files")
    before = snapshot(tmp_path / "files")
    for create in (False, True):
        for kind, path in files.items():
            with pytest.raises(
                StoreError, match=SAYS[kind].replace("(", r"\(").replace(")", r"\)")
            ):
                RunStore(path, create=create)
            with pytest.raises(BankError, match="experience bank"):
                ExperienceBank(path, create=create)
            with pytest.raises(BaselineError, match="expel memory"):
                MemoryFile(path, "expel", create=create)
    assert snapshot(tmp_path / "files") == before
    with pytest.raises(StoreError, match="no run store there"):
        RunStore(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()


# -- making -------------------------------------------------------------------------------


def test_commands_that_make_a_file_refuse_one_that_is_not_ours(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = make_explore_store(tmp_path / "runs.sqlite")
    store.close()
    serve(server, lambda p: "Reflection: never asked")
    env, llm_toml = cli_env(server, tmp_path)
    files = not_ours(tmp_path / "files")
    before = snapshot(tmp_path / "files")
    made = ["--store", str(tmp_path / "runs.sqlite"), "--llm-config", str(llm_toml)]
    for kind, path in files.items():
        for command in ("reflect", "insights"):
            msg = error_line(run(["memory", command, "explore", "-o", str(path), *made], env))
            assert SAYS[kind] in msg, msg
        build = ["memory", "build", "explore", "-o", str(path), "--no-annotate", "--no-embed"]
        msg = error_line(run([*build, "--store", str(tmp_path / "runs.sqlite")], {}))
        assert SAYS[kind] in msg and "experience bank" in msg, msg
    assert snapshot(tmp_path / "files") == before
    assert not [s for s in server.seen if s.path.endswith("/chat/completions")]


def test_eval_refuses_a_store_that_is_not_ours(tmp_path: Path) -> None:
    fake = FakeServer()
    fake.responder = answer
    files = not_ours(tmp_path / "files")
    before = snapshot(tmp_path / "files")
    suite, data = make_data(tmp_path, n=2)
    try:
        for kind, path in files.items():
            args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(path)]
            msg = error_line(
                run([*args, "--system", "naive", "--name", "n"], env_for(fake, tmp_path))
            )
            assert SAYS[kind] in msg and "run store" in msg, msg
    finally:
        fake.close()
    assert snapshot(tmp_path / "files") == before


def failing_chat(seen: Seen) -> Reply:
    """Embeddings work; every chat completion is an HTTP 500."""
    if seen.path.endswith("/embeddings"):
        from tests.test_memory_bank import bag_of_words

        rows = bag_of_words(seen.body["input"])
        data = [{"index": i, "embedding": r.tolist()} for i, r in enumerate(rows)]
        return Reply(body={"data": data, "model": "fake-embed"})
    return Reply(status=500, body={"error": {"message": "the model is down"}})


@pytest.mark.parametrize("command", ["reflect", "insights"])
def test_a_failed_make_with_a_failing_fake_model_leaves_no_memory_file(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.chdir(tmp_path)
    make_explore_store(tmp_path / "runs.sqlite").close()
    server.responder = failing_chat
    env, llm_toml = cli_env(server, tmp_path)
    args = ["memory", command, "explore", "-o", "made.db", "--store", "runs.sqlite"]
    r = run([*args, "--llm-config", str(llm_toml), "--attempts", "1"], env)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("made", ".made"))) == []
    system = {"reflect": "reflexion", "insights": "expel"}[command]
    ask = ["ask", str(PLATE), "What is written?", "--system", system, "--memory", "made.db"]
    msg = error_line(run(ask, {**served_env(server), **embed_env(server)}))
    assert "no such memory file" in msg
    if command == "reflect":  # one finished reflection, then the model fails: it is kept
        calls = {"n": 0}

        def first_reflection_then_down(seen: Seen) -> Reply:
            if seen.path.endswith("/chat/completions"):
                calls["n"] += 1
                if calls["n"] == 1:
                    prompt = str(seen.body["messages"][0]["content"])
                    return Reply(body=ok_body(reflector(LLMRequest((Message("user", prompt),)))))
            return failing_chat(seen)

        server.responder = first_reflection_then_down
        again = run([*args, "--llm-config", str(llm_toml), "--attempts", "1"], env)
        assert again.exit_code == 0, again.output
        with MemoryFile(tmp_path / "made.db", "reflexion", create=False) as memory:
            assert len(memory.entries()[0]) == 1  # to go on from at the next run


def test_a_failed_memory_build_leaves_no_bank_but_keeps_one_it_did_not_make(
    tmp_path: Path,
) -> None:
    from tests.test_memory_bank import make_store

    make_store(tmp_path / "runs.sqlite").close()
    bank = tmp_path / "bank.db"
    args = ["memory", "build", "explore", "-o", str(bank), "--store", str(tmp_path / "runs.sqlite")]
    args += ["--no-embed", "--annotations", str(tmp_path / "missing.jsonl")]
    msg = error_line(run(args, {}))
    assert "missing.jsonl" in msg
    assert sorted(p.name for p in tmp_path.iterdir() if "bank" in p.name) == []
    ExperienceBank(bank).close()
    error_line(run(args, {}))
    assert bank.exists()  # a bank that was there before is never removed


def _without_root_powers() -> list[str] | None:
    """A prefix that runs a command as root without the capabilities that let root ignore
    permissions (so a 0o555 folder is really read-only to it); None where setpriv is missing."""
    import shutil

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def test_a_store_in_a_read_only_folder_is_read_not_refused(tmp_path: Path) -> None:
    """`hammr runs` and `hammr report` read a store the process may not write (read-only
    file in a read-only folder, as on a shared or archived disk), writing nothing."""
    import os
    import subprocess
    import sys

    prefix = _without_root_powers()
    if prefix is None:
        pytest.skip("setpriv (util-linux) is not installed")
    folder = tmp_path / "archive"
    store = RunStore(folder / "s.sqlite")
    store.open_run("kept", "suite", "naive")
    store.close()
    (folder / "s.sqlite").chmod(0o444)
    folder.chmod(0o555)
    before = sorted(p.name for p in folder.iterdir())
    hammr = str(Path(sys.executable).parent / "hammr")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    try:
        for argv in (["runs"], ["report", "kept"]):
            done = subprocess.run(
                [*prefix, hammr, *argv, "--store", str(folder / "s.sqlite")],
                capture_output=True, text=True, timeout=600, env=env, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert "kept" in done.stdout, done.stdout
        assert sorted(p.name for p in folder.iterdir()) == before
    finally:
        folder.chmod(0o755)
