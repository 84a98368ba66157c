"""The cost estimate of ``hammr experiment show`` and the estimate-beside-actual lines of
``hammr experiment report`` (:mod:`hammr.experiments.cost`), over the scripted
OpenAI-compatible server: every model call is a request it counts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests import test_experiments_runner as runner_tests
from tests.test_experiments_runner import (
    EXPERIMENT,
    chats,
    env_for,
    invoke,
    run_args,
    write_experiment,
)

from fake_openai_server import FakeServer
from hammr.eval.store import RunStore
from hammr.experiments import load_experiment
from hammr.experiments.cost import questions
from hammr.experiments.demo_time import read_durations
from hammr.experiments.runner import RunOptions, plan

server = runner_tests.server
"""The scripted server of tests/test_experiments_runner.py (a fixture)."""


def estimate_of(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("cost estimate (questions x what one question took where it was measured):")
    return lines[start + 1 :]


def test_show_estimates_from_stored_runs_and_the_report_puts_it_beside_the_actual_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    first, data = write_experiment(tmp_path, name="first")
    show = ["experiment", "show", str(first), "--data-dir", str(data), "--store", str(store)]
    code, out, err = invoke(show, env)
    assert code == 0, err
    said = estimate_of(out)
    assert (
        said[0]
        == "  run explore (naive): 6 questions; nothing measured yet (run it with --demo first)"
    )
    assert said[2].startswith("  run ocr (naive): 3 questions;")  # entries = ["signs"]
    assert "not counted: the 1 memory step" in out

    assert invoke(run_args(first, data, store), env)[0] == 0
    second = tmp_path / "second.toml"
    second.write_text(
        EXPERIMENT.format(
            name="second",
            suite=tmp_path / "tiny.toml",
            max_steps=3,
            other_suite=tmp_path / "tiny.toml",
        )
    )
    code, out, err = invoke(
        ["experiment", "show", str(second), "--data-dir", str(data), "--store", str(store)], env
    )
    assert code == 0, err
    said = estimate_of(out)
    # the naive agent answers in one call (the server's usage: 11 prompt, 3 completion tokens)
    assert said[0].startswith(
        "  run explore (naive): 6 questions x 1.0 calls (11 prompt / 3 completion tokens) = "
        "6 calls, 66 prompt / 18 completion tokens; per question from "
    )
    assert "stored runs of naive with openai fake" in said[0]
    assert said[2].startswith("  run ocr (naive): 3 questions x 1.0 calls")
    total = next(x for x in said if x.startswith("  total:"))
    assert total.startswith("  total: 15 questions, about ")

    before = chats(server)
    assert invoke(run_args(second, data, store, "--no-share"), env)[0] == 0
    asked = chats(server) - before
    assert asked == 6 + 2 + 6 + 3  # explore, the two reflections, reflexion, ocr
    with RunStore(store) as s:
        info = s.run_info("second.explore")
        assert info is not None
        assert (
            info.settings["estimate"]["calls"] == 6.0
            and info.settings["estimate"]["questions"] == 6
        )
    code, out, err = invoke(["experiment", "report", str(second), "--store", str(store)], env)
    assert code == 0, err
    flat = " ".join(out.split())
    assert (
        "run explore: 6 questions took 6 model calls, 66 prompt / 18 completion tokens; "
        "estimated 6 calls, 66 prompt / 18 completion tokens" in flat
    )
    # the estimate the report shows agrees with the requests the server counted
    estimated = sum(
        float(n)
        for n in re.findall(
            r"run \w+: \d+ questions took \d+ model calls[^;]*; estimated ([\d.]+) calls", flat
        )
    )
    assert estimated == asked - 2  # all but the memory step's reflections, which it says


def test_questions_are_counted_in_the_data_or_bounded_by_the_limit_and_draw(tmp_path: Path) -> None:
    e = load_experiment("muse-table2")
    steps = [s for s in plan(e, RunOptions(data_dir=tmp_path, limit=5)) if hasattr(s, "suite")]
    n, why = questions(steps[0], tmp_path, 0)
    # four entries, 5 each at most (HR-Bench's and ZoomBench's draws are larger)
    assert n == 20 and "lacks vstar" in why
    n, why = questions(steps[0], None, 0)
    assert n == 20 and why == "no --data-dir to count in"
    unlimited = [s for s in plan(e, RunOptions(data_dir=tmp_path)) if hasattr(s, "suite")]
    assert questions(unlimited[0], tmp_path, 0)[0] is None  # V* has no draw and no limit


def test_the_measured_figures_keep_each_runs_calls_and_tokens() -> None:
    text = json.dumps({
        "machine": "m", "date": "d",
        "experiments": {"x": {"seconds": 1, "questions": 4, "calls": 8,
                              "runs": {"a": {"questions": 4, "calls": 8, "prompt_tokens": 40,
                                             "completion_tokens": 4}, "bad": "no"}}},
    })  # fmt: skip
    measured = read_durations(text)["x"]
    assert measured.runs == {
        "a": {"questions": 4, "calls": 8, "prompt_tokens": 40, "completion_tokens": 4}
    }
    assert read_durations(text.replace('"runs"', '"other"'))["x"].runs == {}
