"""Experiments sharing runs and memory files (:mod:`hammr.experiments.sharing`), the LLM and
the embedder played by the scripted OpenAI-compatible server, so "a shared run asks
nothing" is counted in requests, not assumed."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests import test_experiments_runner as runner_tests
from tests.test_experiments_runner import (
    EXPERIMENT,
    REFLECTED,
    chats,
    env_for,
    invoke,
    run_args,
    write_experiment,
)

from demo_support import DEMO
from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.eval.store import RunStore
from hammr.experiments.sharing import memory_share_key, run_share_key
from hammr.experiments.state import state_path

server = runner_tests.server
"""The scripted server of tests/test_experiments_runner.py (a fixture)."""


def another(tmp_path: Path, name: str, *, max_steps: int = 3) -> Path:
    """A second experiment file over the data :func:`write_experiment` made."""
    suite = tmp_path / "tiny.toml"
    path = tmp_path / f"{name}.toml"
    path.write_text(
        EXPERIMENT.format(name=name, suite=suite, max_steps=max_steps, other_suite=suite)
    )
    return path


def test_a_second_experiment_takes_the_same_runs_and_memory_and_asks_nothing_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    first, data = write_experiment(tmp_path, name="first")
    code, _, err = invoke(run_args(first, data, store), env)
    assert code == 0, err
    asked = len(server.seen)
    assert asked > 0 and len(REFLECTED) == 2
    # within one experiment too: its ocr run asks what its explore run asked
    assert "run first.ocr: 3 of 3 samples shared from run first.explore" in err

    second = another(tmp_path, "second")
    code, out, err = invoke(run_args(second, data, store), env)
    assert code == 0, err
    assert len(server.seen) == asked  # no chat, no embedding: every step was shared
    assert len(REFLECTED) == 2
    assert "second: 4 of 4 steps done (4 worked on now, 0 already done)" in out
    assert "run second.explore: 6 of 6 samples shared from run first.explore" in err
    assert "memory refl (reflect from explore): shared: copied" in err
    with RunStore(store) as s:
        for run in ("explore", "reflexion", "ocr"):
            mine, theirs = s.records(f"second.{run}"), s.records(f"first.{run}")
            assert [(r.dataset, r.sample_id, r.prediction, r.score) for r in mine] == [
                (r.dataset, r.sample_id, r.prediction, r.score) for r in theirs
            ]
        info = s.run_info("second.reflexion")
        assert info is not None
        assert info.settings["shared_from"] == {"first.reflexion": 6}
        memory = Path(info.config["memory.path"])
        assert memory.name == "second.refl.db" and memory.is_file()
    record = json.loads(state_path(store, "second").read_text())["steps"]["memory:refl"]
    assert record["shared_from"].endswith("first.refl.db")

    code, out, err = invoke(["experiment", "report", str(second), "--store", str(store)], env)
    assert code == 0, err
    assert "6 samples shared from run first.reflexion" in out

    code, out, err = invoke(run_args(second, data, store), env)  # a re-run: all done
    assert code == 0 and "0 worked on now, 4 already done" in out
    assert len(server.seen) == asked


def test_no_share_and_another_setting_ask_again_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    first, data = write_experiment(tmp_path, name="first")
    assert invoke(run_args(first, data, store), env)[0] == 0
    asked = chats(server)

    second = another(tmp_path, "second")
    code, _, err = invoke(run_args(second, data, store, "--no-share"), env)
    assert code == 0, err
    assert "shared" not in err
    # every question and reflection asked again: explore 6, reflections 2, reflexion 6, and
    # ocr's 3 (which the first experiment took from its own explore run)
    assert chats(server) - asked == 6 + 2 + 6 + 3

    third = another(tmp_path, "third", max_steps=4)  # answers may differ
    code, _, err = invoke(run_args(third, data, store), env)
    assert code == 0, err
    assert "shared from run first" not in err and chats(server) - asked == 17 + asked


def test_a_run_still_being_written_gives_only_its_finished_samples_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    """The first experiment's run holds 2 of the 6 samples (its --limit 1 draws one per
    entry) and is still driven by a live process (this one): the second takes those 2, asks
    the other 4, and counts each once."""
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    first, data = write_experiment(tmp_path, name="first")
    assert invoke(run_args(first, data, store, "--limit", "1"), env)[0] == 0
    with RunStore(store) as s:
        assert s.count("first.explore") == 2
        drawn = s.done_keys("first.explore")
    second = another(tmp_path, "second")
    before = len(server.seen)
    with RunStore(store) as holder, holder.driving("first.explore"):
        code, _, err = invoke(run_args(second, data, store), env)
    assert code == 0, err
    line = next(x for x in err.splitlines() if "run second.explore:" in x and "shared" in x)
    assert "2 of 6 samples shared from run first.explore" in line
    assert "still being written" in line
    asked = {int(q) for seen in server.seen[before:] for q in _qids(seen)}
    shared = {int(sample_id.lstrip("s")) for _, sample_id in drawn}
    assert asked == set(range(6)) - shared  # the shared were not asked again
    with RunStore(store) as s:
        assert s.count("second.explore") == 6 and s.count("first.explore") == 2
        info = s.run_info("second.explore")
        assert info is not None and info.settings["shared_from"] == {"first.explore": 2}


def _qids(seen: Seen) -> list[str]:
    """The question ids a chat request asks about (none for a reflection)."""
    text = json.dumps(seen.body.get("messages") or [])
    if not seen.path.endswith("/chat/completions") or "Reflection" in text:
        return []
    return re.findall(r"QID-(\d+)", text)


def test_share_keys_leave_out_the_draw_and_the_names() -> None:
    memory = {"command": "reflect", "from": "a.explore", "source": "f00", "settings": {}}
    one = {"system": "naive", "suite": "s", "entries": ["x"], "limit": 2, "seed": 0,
           "split": None, "split_seed": 0, "settings": {"k": 1}, "memory": memory,
           "data_dir": "/d", "demo": False, "max_steps": None}  # fmt: skip
    other = {**one, "entries": [], "limit": None, "seed": 3,
             "memory": {**memory, "from": "b.explore"}}  # fmt: skip
    assert run_share_key(one) == run_share_key(other)
    assert run_share_key(one) != run_share_key({**one, "settings": {"k": 2}})
    assert run_share_key(one) != run_share_key({**one, "memory": {**memory, "source": "f01"}})
    assert memory_share_key(memory) == memory_share_key({**memory, "from": "z"})


HAMMR_REPLY = "[Thought]: I can answer this directly.\n[Finish]: yes"


def test_hammr_table4_after_tables_2_and_3_asks_nothing_scripted_server(tmp_path: Path) -> None:
    """HAMMR's Table 4 runs the naive agent, HAMMR and the specialists again: after
    Tables 2 and 3 (demo, --limit 1) every one of its samples is shared (counted)."""
    server = FakeServer()
    server.responder = lambda seen: Reply(body=ok_body(HAMMR_REPLY))
    try:
        env = env_for(server, tmp_path)
        store = tmp_path / "runs.sqlite"

        def run(name: str) -> str:
            args = ["experiment", "run", name, "--demo", "--data-dir", str(DEMO),
                    "--limit", "1", "--store", str(store), "--no-progress"]  # fmt: skip
            code, _, err = invoke(args, env)
            assert code == 0, err
            return err

        run("hammr-table2")
        run("hammr-table3")
        asked = chats(server)
        err = run("hammr-table4")
        assert chats(server) == asked
        for table4, earlier in (("naive", "hammr-table3"), ("hammr", "hammr-table3"),
                                ("specialists", "hammr-table2")):  # fmt: skip
            assert f"shared from run demo.{earlier}." in next(
                x for x in err.splitlines() if f"run demo.hammr-table4.{table4}:" in x
            )
    finally:
        server.close()
