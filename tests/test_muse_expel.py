"""The ExpeL baseline replayed with a scripted LLM: insight extraction over the exploration
run of tests/test_muse_reflexion.py (pairs of a failure and a success of one task, then
batches of successes) folding ADD/EDIT/AGREE/REMOVE operations into a voted rule list (a rule
down-voted to 0 disappears, a malformed reply is retried, malformed operations are skipped
and recorded); what reaches the prompt at evaluation (rules in vote order and the most
similar successful trajectory), recorded in Step.retrieved; the CLI command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.test_memory_bank import RED, WordsEmbedder, solid
from tests.test_muse_reflexion import (
    CAR,
    CUP,
    KITE,
    LAMP,
    UMBRELLA,
    bench,
    cli_env,
    make_explore_store,
    prompt_of,
    serve,
)

from fake_openai_server import FakeServer
from hammr.agents.spec import SpecError
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.eval.store import RunStore
from hammr.muse.baselines_cli import insights_cmd
from hammr.muse.expel import (
    EXAMPLES_HEADER,
    RULES_HEADER,
    InsightReport,
    Operation,
    apply_operations,
    expel_system,
    extract_insights,
    parse_operations,
)
from hammr.muse.trajectories import MemoryFile, QuestionEmbedder, Rule
from hammr.tools.base import ToolContext

ZOOM = "Detect the object and zoom in on it before naming its colour."
OCR = "Read the text with OCR to find the objects."
CENTRES = "Compare the centres of both boxes to decide left or right."
ZOOM2 = "Find the object with DetectObject, then ZoomIn on its box before naming its colour."


def ops(*items: dict[str, Any]) -> str:
    return json.dumps({"operations": list(items)})


SCRIPT = [
    # 1. pair s2 (car, failed) | s1 (umbrella)
    ops({"op": "ADD", "text": ZOOM}, {"op": "ADD", "text": OCR}),
    # 2. pair s3 (cup, failed) | s4 (lamp): first not JSON, retried
    "Sure! I think a rule about boxes would help.",
    json.dumps(
        [
            {"op": "ADD", "text": CENTRES},
            {"op": "REMOVE", "rule": 2},
            {"op": "AGREE", "rule": 1},
            {"op": "EDIT", "rule": 9, "text": "no such rule"},
        ]
    ),
    # 3. pair s5 (kite, failed) | s1: OCR down-voted to 0 and dropped; an unknown op
    ops(
        {"op": "REMOVE", "rule": 2},
        {"op": "EDIT", "rule": 1, "text": ZOOM2},
        {"op": "FLY", "rule": 1},
    ),
    # 4. batch [s1]: rule 2 is now the centres rule
    "```json\n" + ops({"op": "AGREE", "rule": 2}) + "\n```",
    # 5. batch [s4]
    ops({"op": "AGREE", "rule": 2}, {"op": "AGREE", "rule": 2}),
]


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = make_explore_store(tmp_path / "runs.sqlite")
    yield s  # type: ignore[misc]
    s.close()


def extract(
    store: RunStore, path: Path, llm: ScriptedLLM, runs: tuple[str, ...] = ("explore",)
) -> InsightReport:
    with MemoryFile(path, "expel") as memory:
        return asyncio.run(
            extract_insights(store, list(runs), memory, llm, QuestionEmbedder(WordsEmbedder()))
        )


def test_scripted_insight_calls_fold_into_a_voted_rule_list(
    store: RunStore, tmp_path: Path
) -> None:
    llm = ScriptedLLM(list(SCRIPT), grammar="gbnf")
    report = extract(store, tmp_path / "x.db", llm)
    assert [(r.text, r.votes) for r in report.rules] == [(CENTRES, 5), (ZOOM2, 4)]
    assert (report.calls, report.made, report.malformed_ops, report.unusable) == (5, 5, 2, {})
    assert (report.successes, report.failures, report.examples_added) == (2, 3, 2)
    with MemoryFile(tmp_path / "x.db", "expel") as memory:
        # stored in list order (the order rules were added), not vote order
        assert [(r.text, r.votes) for r in memory.rules()] == [(ZOOM2, 4), (CENTRES, 5)]
        calls = memory.calls()
        entries, _ = memory.entries()
    assert [key for key, _, _ in calls] == [
        "pair explore/vstar/s2 | explore/vstar/s1",
        "pair explore/vstar/s3 | explore/vstar/s4",
        "pair explore/vstar/s5 | explore/vstar/s1",
        "batch explore/vstar/s1",
        "batch explore/vstar/s4",
    ]
    second = calls[1][2]
    assert len(second["rejected_replies"]) == 1 and "not JSON" in second["rejected_replies"][0]
    assert len(second["malformed"]) == 1 and "there is no rule 9" in second["malformed"][0]
    assert "op is not one of" in calls[2][2]["malformed"][0]
    # the successes are stored as worked examples with their questions
    assert {e.sample_id: e.question for e in entries} == {"s1": UMBRELLA, "s4": LAMP}
    assert "Step 1: found = DetectObject(image, 'umbrella') -> found: 1 box" in entries[0].text
    # what the model saw: the pair, the rules of the moment, never a ground truth
    prompts = [prompt_of(r) for r in llm.requests]
    assert len(prompts) == 6
    first = prompts[0]
    assert "FAILED" in first and "SUCCEEDED" in first and "(no rules yet)" in first
    assert first.index(CAR) < first.index(UMBRELLA)
    assert f"1. [2 votes] {ZOOM}\n2. [2 votes] {OCR}" in prompts[1]
    assert CUP in prompts[1] and LAMP in prompts[1]
    assert "not usable" in llm.requests[2].messages[-1].text()  # the retry shows the error
    assert KITE in prompts[3] and f"2. [1 votes] {OCR}" in prompts[3]
    assert f"1. [4 votes] {ZOOM2}\n2. [2 votes] {CENTRES}" in prompts[4]
    assert all("GROUNDTRUTH" not in p for p in prompts)
    # the grammar limits rule numbers to the list shown
    assert llm.requests[0].grammar is not None and "num ::=" not in llm.requests[0].grammar
    assert "num ::= [1-2]" in (llm.requests[1].grammar or "")


def test_a_second_extraction_makes_only_the_calls_not_finished(
    store: RunStore, tmp_path: Path
) -> None:
    # the first build stops after two calls: the model then fails every time
    first = ScriptedLLM(SCRIPT[:3])
    report = extract(store, tmp_path / "x.db", first)
    assert report.made == 2 and len(report.unusable) == 3
    assert "ran out" in next(iter(report.unusable.values()))[0]
    rest = ScriptedLLM(SCRIPT[3:])
    report = extract(store, tmp_path / "x.db", rest)
    assert (report.already, report.made, rest.calls) == (2, 3, 3)
    assert [(r.text, r.votes) for r in report.rules] == [(CENTRES, 5), (ZOOM2, 4)]
    assert report.examples_added == 0


def test_a_reply_that_stays_malformed_changes_nothing(store: RunStore, tmp_path: Path) -> None:
    llm = ScriptedLLM(lambda request: "[1, 2")
    report = extract(store, tmp_path / "x.db", llm)
    assert report.made == 0 and len(report.unusable) == 5 and report.rules == []
    assert llm.calls == 15  # three tries per call
    with MemoryFile(tmp_path / "x.db", "expel") as memory:
        assert all(not ok for _, ok, _ in memory.calls())


def test_operations_parse_strictly_and_apply_by_the_list_shown() -> None:
    good, bad = parse_operations(
        '[{"op": "add", "text": "Zoom first."}, {"op": "AGREE", "rule": "1"}, 7]', 1
    )
    assert good == [Operation("ADD", None, "Zoom first.")]
    assert len(bad) == 2
    with pytest.raises(ValueError, match="not a list"):
        parse_operations('{"rules": []}', 1)
    rules = [Rule("a", 1), Rule("b", 2)]
    refused = apply_operations(
        rules,
        [
            Operation("REMOVE", 1),
            Operation("AGREE", 1),  # rule 1 as shown, dropped just before
            Operation("ADD", None, "B"),  # the text of rule 2: an agreement
            Operation("ADD", None, "c"),
            Operation("ADD", None, "d"),  # over the cap
        ],
        cap=2,
    )
    assert [(r.text, r.votes) for r in rules] == [("b", 3), ("c", 2)]
    assert len(refused) == 2 and "already dropped" in refused[0] and "full" in refused[1]


def test_a_run_without_successes_makes_an_empty_memory_that_says_why(
    store: RunStore, tmp_path: Path
) -> None:
    store.open_run("allbad", "vstar", "react")
    from tests.test_memory_bank import record
    from tests.test_muse_reflexion import trace

    store.add(record("allbad", "b1", trace(CUP, [], "yes"), 0.0))
    llm = ScriptedLLM([])  # no call is made: nothing to compare or to learn from
    report = extract(store, tmp_path / "x.db", llm, ("allbad",))
    assert "ExpeL learns from successes" in report.no_successes
    assert (report.successes, report.calls, report.examples_added, report.rules) == (0, 0, 0, [])
    with MemoryFile(tmp_path / "x.db", "expel") as memory:
        assert memory.rules() == [] and len(memory.entries()[0]) == 0
    # the system answers from it as ReAct would: no rules, no worked examples in its prompt
    agent_llm = ScriptedLLM(["[Thought]: I answer.\n[Finish]: A"])
    system = expel_system(bench(tmp_path / "x.db", agent_llm))
    ctx = ToolContext(task=("vstar", "attribute"))
    result = asyncio.run(system.run(CUP, {"image": solid(RED)}, ctx=ctx))
    assert result.answer == "A"
    message = agent_llm.requests[0].messages[-1].text()
    assert RULES_HEADER not in message and EXAMPLES_HEADER not in message


# -- evaluation ---------------------------------------------------------------------------


def test_scripted_agent_sees_rules_by_votes_and_the_nearest_success(
    store: RunStore, tmp_path: Path
) -> None:
    extract(store, tmp_path / "x.db", ScriptedLLM(list(SCRIPT)))
    agent_llm = ScriptedLLM(["[Thought]: I answer.\n[Finish]: A"])
    system = expel_system(bench(tmp_path / "x.db", agent_llm))
    question = "What colour is the boat next to the umbrella?"
    ctx = ToolContext(task=("vstar", "attribute"))
    result = asyncio.run(system.run(question, {"image": solid(RED)}, ctx=ctx))
    message = agent_llm.requests[0].messages[-1].text()
    assert message.startswith(f"Question: {question}")
    rules = message.index(RULES_HEADER)
    assert message[rules:].startswith(f"{RULES_HEADER}\n1. {CENTRES}\n2. {ZOOM2}\n\n")
    examples = message[message.index(EXAMPLES_HEADER) :]
    assert examples.startswith(f"{EXAMPLES_HEADER}\nExample 1:\nQuestion: {UMBRELLA}\n")
    assert "Final answer: A" in examples
    assert "Example 2:\nQuestion: " + LAMP in examples  # 2 examples by default
    (rec,) = result.trace.steps[0].retrieved
    assert rec["source"] == "expel" and rec["policy"] == "advisor"
    assert rec["rules"] == [{"text": CENTRES, "votes": 5}, {"text": ZOOM2, "votes": 4}]
    assert [e["id"] for e in rec["examples"]] == ["explore/vstar/s1", "explore/vstar/s4"]
    assert [e["same_task"] for e in rec["examples"]] == [True, False]
    assert rec["examples"][0]["similarity"] > 0.3
    assert rec["text"] == message[rules:]


def test_memory_k_sets_the_examples_and_files_are_checked(store: RunStore, tmp_path: Path) -> None:
    extract(store, tmp_path / "x.db", ScriptedLLM(list(SCRIPT)))
    agent_llm = ScriptedLLM(["[Finish]: no"])
    system = expel_system(bench(tmp_path / "x.db", agent_llm, HAMMR_MEMORY__K="1"))
    ctx = ToolContext(task=("vstar", "relation"))
    result = asyncio.run(system.run(CUP, {"image": solid(RED)}, ctx=ctx))
    (rec,) = result.trace.steps[0].retrieved
    assert [e["id"] for e in rec["examples"]] == ["explore/vstar/s4"]
    MemoryFile(tmp_path / "r.db", "reflexion").close()
    with pytest.raises(SpecError, match="is a reflexion memory, not an expel memory"):
        expel_system(bench(tmp_path / "r.db", agent_llm))
    with pytest.raises(SpecError, match="hammr memory insights"):
        expel_system(bench(None, agent_llm))
    with pytest.raises(SpecError, match=r"'stub-words'.*'other'"):
        expel_system(bench(tmp_path / "x.db", agent_llm, embedder=WordsEmbedder("other")))


# -- the command --------------------------------------------------------------------------


@pytest.fixture
def server() -> Any:
    s = FakeServer()
    yield s
    s.close()


def test_insights_command_builds_an_expel_memory(
    store: RunStore, server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    replies = iter(SCRIPT)
    serve(server, lambda prompt: next(replies))
    env, llm_toml = cli_env(server, tmp_path)
    args = ["explore", "-o", "x.db", "--store", str(store.path), "--llm-config", str(llm_toml)]
    result = CliRunner().invoke(insights_cmd, args, env=env)
    assert result.exit_code == 0, result.output
    assert "2 rules after 5 calls" in result.output and "2 malformed operations" in result.output
    assert f"[5] {CENTRES}" in result.output and f"[4] {ZOOM2}" in result.output
    again = CliRunner().invoke(insights_cmd, args, env=env)
    assert again.exit_code == 0 and "after 0 calls (5 done before" in again.output
    nowhere = ["explore", "-o", "y.db", "--store", str(tmp_path / "none.sqlite")]
    missing = CliRunner().invoke(insights_cmd, [*nowhere, "--llm-config", str(llm_toml)], env=env)
    assert missing.exit_code == 2 and "no run store" in missing.output
    assert not (tmp_path / "none.sqlite").exists()
