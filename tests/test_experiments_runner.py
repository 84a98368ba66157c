"""`hammr experiment run | show | list` over a tiny JSONL suite, the LLM (and the text
embedder) played by the scripted OpenAI-compatible server: every model call is a request the
server records, so "a re-run costs nothing" is counted, not assumed. Also what
:func:`hammr.experiments.validate.validate` refuses, one line each."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.test_eval_cli import make_data
from tests.test_memory_bank import bag_of_words

from demo_support import DEMO
from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.experiments import bundled_names, load_experiment
from hammr.experiments.spec import ExperimentError, parse_experiment
from hammr.experiments.state import step_states
from hammr.experiments.validate import validate

EXPERIMENT = """
name = "{name}"
title = "A scripted experiment"
paper = "muse"
source = "a test"
deviations = ["everything: it is a test"]

[settings]
"agent.max_steps" = {max_steps}

[data]
suite = "{suite}"

[[run]]
name = "explore"
system = "naive"

[[memory]]
name = "refl"
command = "reflect"
from = "explore"

[[run]]
name = "reflexion"
system = "reflexion"
memory = "refl"

[[run]]
name = "ocr"
system = "naive"
suite = "{other_suite}"
entries = ["signs"]

[[table]]
name = "t"
title = "Accuracy"
columns = [
  {{ label = "OCR", cell = "type:ocr_reasoning" }},
  {{ label = "All", cell = "overall" }},
]

[[table.row]]
label = "naive"
run = "explore"
paper = {{ "OCR" = 50.0, "All" = "not reported" }}

[[table.row]]
label = "reflexion"
run = "reflexion"
paper = {{ "OCR" = 60.0, "All" = 55.5 }}

[[table.row]]
label = "ocr only"
run = "ocr"
paper = {{ "OCR" = "not reported", "All" = "not reported" }}
"""


REFLECTED: list[str] = []
"""The prompts the server answered with a reflection."""


def respond(seen: Seen) -> Reply:
    """Embeddings by bag of words; a reflection for a reflection request; otherwise the
    answer 'ans{i}' to question QID-i (wrong when i % 3 == 0)."""
    if seen.path.endswith("/embeddings"):
        rows = bag_of_words(seen.body["input"])
        data = [{"index": i, "embedding": r.tolist()} for i, r in enumerate(rows)]
        return Reply(body={"data": data, "model": "fake-embed"})
    text = json.dumps(seen.body.get("messages"))
    if "reflect" in text.lower() and "Reflection" in text and "[Thought]" not in text:
        REFLECTED.append(text)
        return Reply(body=ok_body("Reflection: read the sign letter by letter before answering."))
    found = [int(m) for m in re.findall(r"QID-(\d+)", text)]
    i = found[-1] if found else -1
    said = f"ans{i}" if i % 3 else "nope"
    return Reply(body=ok_body(f"[Thought]: I read it\n[Finish]: {said}"))


@pytest.fixture
def server() -> Any:
    s = FakeServer()
    s.responder = respond
    REFLECTED.clear()
    yield s
    s.close()


def env_for(server: FakeServer, tmp_path: Path) -> dict[str, str]:
    return served_env(
        server,
        timeout_s=20,
        HAMMR_CONFIG="",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HAMMR_TOOLS__EMBED__BACKEND="openai",
        HAMMR_TOOLS__EMBED__BASE_URL=server.url,
        HAMMR_TOOLS__EMBED__MODEL="fake-embed",
        HAMMR_TOOLS__EMBED__API_KEY_ENV="",
    )


def chats(server: FakeServer) -> int:
    return sum(1 for s in server.seen if s.path.endswith("/chat/completions"))


def write_experiment(tmp_path: Path, *, name: str = "scripted", max_steps: int = 3,
                     other_suite: str | None = None) -> tuple[Path, Path]:  # fmt: skip
    """The experiment file and the data folder (6 questions over two entries)."""
    suite, data = make_data(tmp_path, n=6)
    path = tmp_path / f"{name}.toml"
    path.write_text(
        EXPERIMENT.format(
            name=name, suite=suite, max_steps=max_steps, other_suite=other_suite or suite
        )
    )
    return path, data


def invoke(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def run_args(path: Path, data: Path, store: Path, *extra: str) -> list[str]:
    return ["experiment", "run", str(path), "--data-dir", str(data), "--store", str(store),
            "--no-progress", *extra]  # fmt: skip


def test_scripted_experiment_runs_every_step_and_a_rerun_asks_nothing(
    server: FakeServer, tmp_path: Path
) -> None:
    path, data = write_experiment(tmp_path)
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    code, out, err = invoke(run_args(path, data, store), env)
    assert code == 0, err
    assert "scripted: 4 of 4 steps done (4 worked on now, 0 already done)" in out
    assert "step 2/4 memory refl (reflect from explore)" in err
    assert len(REFLECTED) == 2  # the two wrong answers of explore (QID-0, QID-3)
    with RunStore(store) as s:
        assert s.count("scripted.explore") == 6 and s.count("scripted.reflexion") == 6
        assert s.count("scripted.ocr") == 3  # entries = ["signs"]: the even questions
        info = s.run_info("scripted.reflexion")
        assert info is not None and info.system == "reflexion"
        st = info.settings
        assert (st["experiment"], st["experiment_run"], st["demo"]) == (
            "scripted",
            "reflexion",
            False,
        )
        assert st["identity"]["settings"] == {"agent.max_steps": 3}
        assert st["identity"]["memory"]["command"] == "reflect"
        memory_file = Path(info.config["memory.path"])
        assert memory_file.is_file() and memory_file.parent == tmp_path / "runs.experiments"
        states = step_states(s, load_experiment(path))
    assert list(states) == ["run:explore", "memory:refl", "run:reflexion", "run:ocr"]
    assert {st.status for st in states.values()} == {"done"}
    assert states["memory:refl"].stored_as == str(memory_file)
    assert states["run:ocr"].stored_as == "scripted.ocr"

    asked = len(server.seen)
    code, out, err = invoke(run_args(path, data, store), env)
    assert code == 0, err
    assert len(server.seen) == asked  # no chat, no embedding: nothing built, nothing asked
    assert "4 of 4 steps done (0 worked on now, 4 already done)" in out
    assert "table: hammr experiment report" in out


def test_a_changed_setting_is_refused_in_one_line_until_renamed(
    server: FakeServer, tmp_path: Path
) -> None:
    path, data = write_experiment(tmp_path, max_steps=3)
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    assert invoke(run_args(path, data, store), env)[0] == 0
    asked = len(server.seen)
    path.write_text(path.read_text().replace('"agent.max_steps" = 3', '"agent.max_steps" = 4'))
    code, _, err = invoke(run_args(path, data, store), env)
    assert code == 2 and len(server.seen) == asked
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "run 'explore' is stored as 'scripted.explore' with setting agent.max_steps = 3" in err
    assert "rename with --prefix" in err
    code, _, err = invoke(run_args(path, data, store, "--prefix", "steps4."), env)
    assert code == 0, err
    with RunStore(store) as s:
        info = s.run_info("steps4.scripted.explore")
        assert info is not None and info.config["agent.max_steps"] == 4


def test_a_suite_without_data_is_no_data_and_the_other_runs_still_go(
    server: FakeServer, tmp_path: Path
) -> None:
    missing_suite = tmp_path / "elsewhere.toml"
    missing_suite.write_text(
        'name = "elsewhere"\n[[entry]]\nname = "signs"\nquestion_type = "ocr_reasoning"\n'
        'dataset = "jsonl"\nmetric = "exact_match"\nfile = "not_here/signs.jsonl"\n'
    )
    path, data = write_experiment(tmp_path, other_suite=str(missing_suite))
    store = tmp_path / "runs.sqlite"
    code, out, err = invoke(run_args(path, data, store), env_for(server, tmp_path))
    assert code == 1, err  # a run it needed had no data at all
    assert "hammr: warning: step 4/4 run ocr (scripted.ocr): no data: suite 'elsewhere'" in err
    assert "run ocr: no_data: no data: suite 'elsewhere': entry 'signs' needs" in out
    with RunStore(store) as s:
        assert s.run_info("scripted.ocr") is None and s.count("scripted.reflexion") == 6
        states = step_states(s, load_experiment(path))
    assert states["run:ocr"].status == "no_data"
    assert "not_here/signs.jsonl" in states["run:ocr"].reason
    assert states["run:reflexion"].status == "done"


def test_an_entry_without_data_leaves_its_run_to_the_others_until_it_comes_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    """The suite entry is the unit of data: 'counts' has no file, so explore runs 'signs'
    alone, the report's counting cell says why, and the other cells are marked; once the
    file is there, a re-run asks only its questions."""
    path, data = write_experiment(tmp_path)
    counts = data / "counts.jsonl"
    counts.rename(data / "counts.away")
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    code, _, err = invoke(run_args(path, data, store), env)
    assert code == 0, err
    assert "run explore (scripted.explore): no data for 1 of 2 entries (entry 'counts' needs" in err
    assert "running the other 1" in err
    with RunStore(store) as s:
        assert s.count("scripted.explore") == 3
        states = step_states(s, load_experiment(path))
    assert states["run:explore"].status == "done"
    assert list(states["run:explore"].missing) == ["counts"]
    code, _, err = invoke(["experiment", "report", str(path), "--store", str(store),
                             "--csv", str(tmp_path / "t.csv")], env)  # fmt: skip
    assert code == 0, err
    rows = {(r["row"], r["column"]): r for r in csv.DictReader((tmp_path / "t.csv").open())}
    all_cell = rows[("naive", "All")]
    assert all_cell["status"] == "partial" and "without counts: no data" in all_cell["reason"]
    assert rows[("naive", "OCR")]["status"] == "ok"  # the signs entry is whole

    counts.parent.joinpath("counts.away").rename(counts)
    before = chats(server)
    code, _, err = invoke(run_args(path, data, store), env)
    assert code == 0, err
    with RunStore(store) as s:
        assert s.count("scripted.explore") == 6
        info = s.run_info("scripted.explore")
        assert info is not None and info.settings["planned"] == 6
        states = step_states(s, load_experiment(path))
    assert states["run:explore"].missing == {}
    # explore's 3 counting questions, a reflection on the one it got wrong (QID-3: the
    # memory is remade now that its run is whole), and reflexion's 3 counting questions
    assert chats(server) - before == 3 + 1 + 3
    assert "memory refl (reflect from explore): writing" in err
    code, _, _ = invoke(["experiment", "report", str(path), "--store", str(store),
                           "--csv", str(tmp_path / "t.csv")], env)  # fmt: skip
    rows = {(r["row"], r["column"]): r for r in csv.DictReader((tmp_path / "t.csv").open())}
    assert rows[("naive", "All")]["status"] == "ok"


def test_a_run_killed_midway_resumes_asking_only_its_missing_samples(
    server: FakeServer, tmp_path: Path
) -> None:
    path, data = write_experiment(tmp_path)
    store = tmp_path / "runs.sqlite"
    env = env_for(server, tmp_path)
    assert invoke(run_args(path, data, store), env)[0] == 0
    # as if killed after storing 4 of its 6 samples
    db = sqlite3.connect(store)
    with db:
        db.execute("DELETE FROM samples WHERE run = 'scripted.reflexion' AND sample_id IN "
                   "('s1', 's4')")  # fmt: skip
    db.close()
    with RunStore(store) as s:
        states = step_states(s, load_experiment(path))
    assert states["run:reflexion"].status == "partial"
    assert "4 of 6 samples stored" in states["run:reflexion"].reason
    asked = chats(server)
    code, _, err = invoke(run_args(path, data, store), env)
    assert code == 0, err
    assert "resuming run scripted.reflexion: 4 of 6 samples already done" in err
    naive_calls = chats(server) - asked
    assert 2 <= naive_calls <= 2 * 3  # two questions asked again, at most max_steps calls each
    asked_ids = {m for s in server.seen[-naive_calls:] for m in ("QID-1", "QID-4")
                 if m in json.dumps(s.body.get("messages"))}  # fmt: skip
    assert asked_ids == {"QID-1", "QID-4"}
    with RunStore(store) as s:
        assert s.count("scripted.reflexion") == 6
        assert set(s.sample_counts("scripted.reflexion").values()) == {1}  # nothing twice


def test_show_list_and_bad_options(server: FakeServer, tmp_path: Path) -> None:
    path, data = write_experiment(tmp_path)
    env = env_for(server, tmp_path)
    code, out, err = invoke(["experiment", "show", str(path)], env)
    assert code == 0, err
    assert "  1. run explore: system naive" in out and "agent.max_steps = 3" in out
    assert "  2. memory refl: hammr memory reflect from run explore" in out
    assert "row reflexion (run reflexion): paper OCR 60.0, All 55.5" in out
    assert "  - everything: it is a test" in out
    code, out, err = invoke(["experiment", "list"], env)
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == bundled_names()
    code, _, err = invoke(["experiment", "run", str(path), "--demo", "--data-dir", str(data)], env)
    assert code == 2 and "has no [data] demo_suite" in err and len(err.strip().splitlines()) == 1
    code, _, err = invoke(["experiment", "run", str(path)], env)
    assert code == 2 and "--data-dir is required" in err
    code, _, err = invoke(["experiment", "run", "no-such-experiment", "--demo"], env)
    assert code == 2 and "no experiment 'no-such-experiment'" in err
    store = tmp_path / "deep" / "runs.sqlite"
    code, _, err = invoke([*run_args(path, data, store), "--prefix", "../../x/"], env)
    assert code == 2 and "the prefix '../../x/' may hold only letters" in err
    assert not store.exists() and not (tmp_path / "x").exists()
    assert chats(server) == 0


def test_show_refuses_a_store_that_is_not_one_and_leaves_it_unchanged(
    server: FakeServer, tmp_path: Path
) -> None:
    path, _ = write_experiment(tmp_path)
    env = env_for(server, tmp_path)
    for body in (b"", b"not a database at all" * 100):
        store = tmp_path / "s.db"
        store.write_bytes(body)
        code, out, err = invoke(["experiment", "show", str(path), "--store", str(store)], env)
        assert code == 2 and err.startswith("hammr: error: ") and len(err.splitlines()) == 1
        assert str(store) in err and out == ""
        assert store.read_bytes() == body


def test_a_config_naming_a_broken_agent_file_is_one_line_everywhere_with_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    """`experiment run` refuses a config whose agent.dir holds a broken agent file with the
    line `ask` and `systems` print (issue 26), before it makes a store or asks anything."""
    path, data = write_experiment(tmp_path)
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "broken.toml").write_text('name = "Broken"\nrole = [unclosed\n')
    config = tmp_path / "hammr.toml"
    config.write_text(f'[agent]\ndir = "{agents}"\n')
    env = env_for(server, tmp_path)
    store = tmp_path / "runs.sqlite"
    lines = {}
    for command in (
        [*run_args(path, data, store), "--config", str(config)],
        ["systems", "--config", str(config)],
        ["ask", str(DEMO / "coffee.jpg"), "what?", "--config", str(config)],
        ["eval", "--suite", "demo", "--data-dir", str(DEMO), "--config", str(config)],
    ):
        r = CliRunner().invoke(main, command, env=env)
        assert r.exit_code == 2, (command, r.output)
        lines[command[0]] = r.stderr
    want = f"hammr: error: {agents / 'broken.toml'}: not valid TOML"
    assert all(line.startswith(want) and line.count("\n") == 1 for line in lines.values()), lines
    assert len(set(lines.values())) == 1, lines
    assert not store.exists() and chats(server) == 0


def test_bundled_experiments_resolve() -> None:
    """Every bundled file's systems, suites, settings and cells resolve (the files are
    written elsewhere; this checks what exists)."""
    problems = []
    for name in bundled_names():
        try:
            validate(load_experiment(name))
        except ExperimentError as e:
            problems.append(str(e))
    assert not problems, problems


# -- validate ---------------------------------------------------------------------------------


def doc(**changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {"name": "r", "system": "naive", "suite": "demo"}
    run.update(changes.pop("run", {}))
    data: dict[str, Any] = {
        "name": "x",
        "title": "t",
        "paper": "hammr",
        "source": "s",
        "run": [run],
        "table": [
            {
                "name": "t",
                "title": "t",
                "columns": [{"label": "c", "cell": changes.pop("cell", "type:ocr_reasoning")}],
                "row": [{"label": "r", "run": "r", "paper": {"c": 1.0}}],
            }
        ],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"run": {"system": "hamr"}}, "run 'r': unknown system 'hamr' (systems: hammr, naive"),
        ({"run": {"suite": "no-such-suite"}}, "run 'r': "),
        ({"run": {"entries": ["demo_nope"]}}, "suite 'demo' has no entry 'demo_nope'"),
        ({"run": {"settings": {"agent.routr": "llm"}}}, "unknown setting agent.routr"),
        ({"run": {"settings": {"agent.router": "telepathy"}}}, "is not one of: auto, llm"),
        ({"settings": {"agent": {"max_steps": "many"}}}, "agent.max_steps = 'many'"),
        ({"cell": "type:astrology"}, "question type 'astrology' is not in it"),
        ({"cell": "entry:gqa"}, "entry 'gqa' is not in it (entries: demo_local_pointing"),
        ({"cell": "aggregate:infoseek_final"}, "aggregate 'infoseek_final' is not in it"),
        ({"cell": "explain:BLEU-9"}, "explanation metric 'BLEU-9' is not one of"),
        ({"cell": "label:confused"}, "label 'confused' is not one of the labelling flow's"),
        (
            {"run": {"system": "muse"}},
            "system 'muse' reads a memory; give the run memory = NAME",
        ),
        (
            {"cell": "entry:demo_ocr_reasoning", "data": {"demo_suite": "muse-demo"}},
            "with --demo, cell 'entry:demo_ocr_reasoning' does not resolve against the demo",
        ),
        ({"data": {"demo_suite": "nope"}}, "[data] demo_suite"),
        ({"data": {"demo_limit": 2}}, "[data]: demo_limit without a demo_suite"),
        ({"data": {"demo_settings": {"llm.max_tokens": 9}}}, "demo_settings without a demo_suite"),
        (
            {"data": {"demo_suite": "demo", "demo_settings": {"agent.max_stepz": 2}}},
            "unknown setting agent.max_stepz",
        ),
    ],
)
def test_validate_refuses_in_one_line(changes: dict[str, Any], message: str) -> None:
    experiment = parse_experiment(doc(**changes), "x.toml", Path("x.toml"))
    with pytest.raises(ExperimentError) as e:
        validate(experiment)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("x.toml")


def test_validate_refuses_a_memory_the_system_does_not_read() -> None:
    data = doc()
    data["run"].append({"name": "m", "system": "expel", "suite": "demo", "memory": "refl"})
    data["memory"] = [{"name": "refl", "command": "reflect", "from": "r"}]
    with pytest.raises(ExperimentError, match="made by `memory reflect`, which only reflexion"):
        validate(parse_experiment(data, "x.toml"))
    data["run"][1]["system"] = "reflexion"
    validate(parse_experiment(data, "x.toml"))
    data["data"] = {"demo_suite": "demo", "demo_cells": {"type:ocr_reasoning": "entry:gqa"}}
    with pytest.raises(ExperimentError, match="shown as 'entry:gqa'"):
        validate(parse_experiment(data, "x.toml"))


def test_step_states_before_anything_ran(tmp_path: Path) -> None:
    experiment = parse_experiment(doc(), "x.toml")
    with RunStore(tmp_path / "runs.sqlite") as s:
        states = step_states(s, experiment, prefix="p.", demo=True)
    assert states["run:r"].stored_as == "p.demo.x.r"
    assert (states["run:r"].status, states["run:r"].reason) == ("not_run", "not run yet")


@pytest.mark.parametrize(
    ("judge", "settings", "expected"),
    [
        (
            ["--judge", "bem"],
            {},
            "--judge bem needs --bem-checkpoint PATH (or [eval] bem_checkpoint)",
        ),
        (
            ["--judge", "bem", "--bem-checkpoint", "{tmp}/nowhere"],
            {},
            "--bem-checkpoint {tmp}/nowhere: no such folder (a local BEM checkpoint)",
        ),
        (
            ["--judge", "llm", "--bem-checkpoint", "{tmp}"],
            {},
            "--bem-checkpoint goes with --judge bem (or auto), not --judge llm",
        ),
        # the same choices made in the configuration, named as the setting
        (
            [],
            {"HAMMR_EVAL__JUDGE": "bem"},
            "--judge bem needs --bem-checkpoint PATH (or [eval] bem_checkpoint)",
        ),
        (
            [],
            {"HAMMR_EVAL__BEM_CHECKPOINT": "{tmp}/nowhere"},
            "[eval] bem_checkpoint {tmp}/nowhere: no such folder (a local BEM checkpoint)",
        ),
        (
            ["--judge", "none"],
            {"HAMMR_EVAL__BEM_CHECKPOINT": "{tmp}"},
            "[eval] bem_checkpoint goes with --judge bem (or auto), not --judge none",
        ),
    ],
)
def test_a_judge_that_cannot_judge_is_refused_before_any_step(
    tmp_path: Path, judge: list[str], settings: dict[str, str], expected: str
) -> None:
    """As `hammr eval` refuses it: one line, exit 2, and no store made."""
    store = tmp_path / "st.db"
    args = [a.format(tmp=tmp_path) for a in judge]
    env = {"HAMMR_CONFIG": "", **{k: v.format(tmp=tmp_path) for k, v in settings.items()}}
    result = CliRunner().invoke(
        main,
        ["experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1",
         "--store", str(store), *args],
        env=env,
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == "hammr: error: " + expected.format(
        tmp=tmp_path
    )
    assert not store.exists()


def test_the_demo_budget_goes_over_every_runs_and_memory_steps_settings() -> None:
    from hammr.experiments.runner import PlannedRun, RunOptions, plan
    from hammr.experiments.spec import DEMO_BUDGET, DEMO_LIMIT

    experiment = load_experiment("muse-table2")
    assert experiment.data.demo_questions == 2 != DEMO_LIMIT  # its file's demo_limit
    demo = plan(experiment, RunOptions(data_dir=DEMO, demo=True))
    paper = plan(experiment, RunOptions(data_dir=DEMO))
    for made, real in zip(demo, paper, strict=True):
        assert made.settings == {**real.settings, **DEMO_BUDGET}
        assert made.identity != real.identity  # a demo run is never taken for another
    runs = [s for s in demo if isinstance(s, PlannedRun)]
    assert {r.limit for r in runs} == {2}
    muse = next(r for r in runs if r.run.name == "muse")
    assert muse.settings["memory.depth"] == 3 and muse.settings["agent.max_steps"] == 4
    assert muse.identity["settings"]["llm.n_ctx"] == 4096
    # --limit overrides the questions, a file's demo_settings the budget
    assert {s.limit for s in plan(experiment, RunOptions(data_dir=DEMO, demo=True, limit=5))
            if isinstance(s, PlannedRun)} == {5}  # fmt: skip
    raw = doc(data={"demo_suite": "demo", "demo_settings": {"agent.max_steps": 6}})
    own = parse_experiment(raw, "x.toml", Path("x.toml"))
    (step,) = plan(own, RunOptions(data_dir=DEMO, demo=True))
    assert step.settings["agent.max_steps"] == 6 and step.limit == DEMO_LIMIT == 1
    assert step.settings["llm.max_tokens"] == DEMO_BUDGET["llm.max_tokens"]
