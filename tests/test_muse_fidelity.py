"""MuSEAgent as its paper runs it: per-round deep search (each round's viewpoint chosen after
the earlier rounds' hits, its Eqs. 5-6), the bank consulted before each action
(``policy = "every_step"``), and the zero-experience ReAct run as the depth-0 point of the
Fig. 2 plots. Scripted models stand in for the agent and for the viewpoint chooser; the
banks are the stub bag-of-words banks of tests/test_muse_search_tool.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hammr.advice import Situation
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.config import ConfigError, load_config
from hammr.eval.scaling import MICRO_AVERAGE, scaling_series
from hammr.eval.store import RunStore
from hammr.memory import ExperienceBank, ExperienceSearcher
from hammr.muse.advisors import EveryStepAdvisor, memory_settings
from hammr.muse.search_tool import TOOL_NAME, SearchExperiences, SearchOptions
from hammr.muse.system import muse_system
from hammr.muse.viewpoint_choice import CHOOSER_INSTRUCTIONS, parse_choice
from hammr.tools.base import BadArguments, ToolContext
from hammr.trace import Step
from test_memory_bank import WordsEmbedder
from test_muse_report import add_run
from test_muse_report import config as run_config
from test_muse_search_tool import ITEMS, UMBRELLA, caller_trace, make_bank, run_ctx
from test_muse_system import IMAGE, QUESTION, bench, config, ctx_for

ZOOM = "[Thought]: look closer\n[Act]: z = ZoomIn(image, [0, 0, 10, 10], 2)"
FINISH = "[Thought]: it is red\n[Finish]: red"


def is_choice(request: LLMRequest) -> bool:
    return request.messages[0].text() == CHOOSER_INSTRUCTIONS


def hits_aware_chooser(request: LLMRequest) -> str:
    """A scripted chooser whose next viewpoint depends on what the earlier rounds found:
    'question' first; then 'task+history' once the umbrella guidance (GA) was found, else
    'history'; then stop."""
    prompt = request.messages[-1].text()
    if "Nothing has been searched yet." in prompt:
        return "question"
    if "Searched so far under question ->" in prompt:
        return "stop"
    return "task+history" if "GA: locate the umbrella first" in prompt else "history"


def situation_for(trace: Any, llm: ScriptedLLM) -> Situation:
    ctx = ToolContext(task=("vstar", "attribute"), caller=trace, llm=llm)
    return Situation("VisualToolAgent", UMBRELLA, len(trace.steps) - 1, trace, {}, ctx)


async def advise_per_round(bank: ExperienceBank, llm: ScriptedLLM, depth: int = 3) -> Any:
    options = SearchOptions(k=1, depth=depth, deep_search="per_round")
    advisor = EveryStepAdvisor(SearchExperiences(ExperienceSearcher(bank), options))
    advice = await advisor.advise(situation_for(caller_trace(UMBRELLA), llm))
    assert advice is not None
    return advice


# -- per-round deep search ---------------------------------------------------------------------


async def test_per_round_second_viewpoint_follows_the_first_rounds_hits_scripted_llm(
    tmp_path: Path,
) -> None:
    without_a = tuple(item for item in ITEMS if item[0].provenance.sample_id != "A")
    records = []
    for name, items in (("with", ITEMS), ("without", without_a)):
        llm = ScriptedLLM(hits_aware_chooser)
        with await make_bank(tmp_path / f"{name}.db", items) as bank:
            advice = await advise_per_round(bank, llm)
        records.append(advice.record)
        # round 2's prompt held round 1's hits: the choice was made after seeing them
        assert "Searched so far under question, which found:" in llm.requests[1].messages[-1].text()
    with_a, other = records
    assert [r["viewpoint"] for r in with_a["rounds"]] == ["question", "task+history"]
    assert [r["viewpoint"] for r in other["rounds"]] == ["question", "history"]
    assert with_a["hits"][0]["source"]["sample_id"] == "A"
    assert other["hits"][0]["source"]["sample_id"] != "A"
    assert with_a["deep_search"] == "per_round" and with_a["policy"] == "advisor"
    assert with_a["query"]["viewpoints"] == ["question", "task+history"]
    # the third round was offered and the chooser stopped the search
    assert [c["chose"] for c in with_a["choices"]] == ["question", "task+history", None]
    assert [h["round"] for h in with_a["hits"]] == [1, 2]
    assert len({h["source"]["sample_id"] for h in with_a["hits"]}) == 2


async def test_per_round_depth_bounds_the_rounds_and_bad_replies_fall_back_scripted_llm(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM(["task", "I would look at the history of steps next", "no idea"])
    with await make_bank(tmp_path / "b.db") as bank:
        advice = await advise_per_round(bank, llm, depth=2)
    # depth 2: two rounds, two choices asked for, never a third
    assert llm.calls == 2
    assert [r["viewpoint"] for r in advice.record["rounds"]] == ["task", "history"]
    assert "note" not in advice.record["choices"][1]  # a viewpoint named in a sentence counts

    llm = ScriptedLLM(["nonsense", "stop"])
    with await make_bank(tmp_path / "c.db") as bank:
        advice = await advise_per_round(bank, llm)
    first, second = advice.record["choices"]
    # an unreadable reply searches the next viewpoint in order and says so
    assert first["chose"] == "question" and "names no viewpoint" in first["note"]
    assert second["chose"] is None and len(advice.record["rounds"]) == 1


def test_parse_choice_reads_names_and_stop() -> None:
    left = ("question", "question+task", "history")
    assert parse_choice("`question+task`", left, True) == "question+task"
    assert parse_choice("task+question", left, True) == "question+task"
    assert parse_choice("Viewpoint: history.", left, False) == "history"
    assert parse_choice("STOP", left, True) is None
    with pytest.raises(ValueError, match="names no viewpoint"):
        parse_choice("stop", left, False)  # round 1 may not stop


async def test_per_round_tool_calls_in_a_row_are_one_deep_search(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        options = SearchOptions(k=2, depth=2, deep_search="per_round")
        tool = SearchExperiences(ExperienceSearcher(bank), options)
        assert "one viewpoint, from:" in tool.card()
        trace = caller_trace(UMBRELLA)
        first = await tool.invoke({"viewpoints": ["question", "task"], "k": 2}, run_ctx(trace))
        assert first.retrieved is not None
        assert [r["viewpoint"] for r in first.retrieved["rounds"]] == ["question"]
        assert "task not searched" in first.observation
        assert "round 1 of at most 2" in first.observation
        # the agent's step records what the tool found; its next call is round 2
        trace.steps[-1].tool = TOOL_NAME
        trace.steps[-1].retrieved = [first.retrieved]
        trace.steps.append(Step(index=1))
        with pytest.raises(BadArguments, match="already searched question"):
            await tool.invoke({"viewpoints": "question", "k": 2}, run_ctx(trace))
        second = await tool.invoke({"viewpoints": "task", "k": 2}, run_ctx(trace))
        assert second.retrieved is not None
        round_two = second.retrieved["hits"]
        assert {h["round"] for h in round_two} == {2}
        firsts = {h["source"]["sample_id"] for h in first.retrieved["hits"]}
        assert firsts.isdisjoint(h["source"]["sample_id"] for h in round_two)
        assert "last round" in second.observation
        trace.steps[-1].tool = TOOL_NAME
        trace.steps[-1].retrieved = [second.retrieved]
        trace.steps.append(Step(index=2))
        with pytest.raises(BadArguments, match="made its 2 rounds"):
            await tool.invoke({"viewpoints": "history", "k": 2}, run_ctx(trace))
        # another action ends the deep search: the next call is a new round 1
        trace.steps[-1].tool = "ZoomIn"
        trace.steps.append(Step(index=3))
        again = await tool.invoke({"viewpoints": "question", "k": 2}, run_ctx(trace))
        assert again.retrieved is not None
        assert again.retrieved["rounds"][0]["round"] == 1


async def test_muse_agent_policy_per_round_end_to_end_scripted_llm(tmp_path: Path) -> None:
    (await make_bank(tmp_path / "bank.db")).close()
    cfg = config(tmp_path, path=str(tmp_path / "bank.db"), deep_search="per_round")
    embedder = WordsEmbedder()
    b = bench(cfg, embedder)
    system = muse_system(b)
    assert "deep search round 1 of at most 3" in system.system_prompt()  # its worked example
    llm = ScriptedLLM(
        [
            "[Thought]: guidance\n[Act]: a = SearchExperiences('question', 2)",
            "[Thought]: refine\n[Act]: b = SearchExperiences('task+history', 2)",
            FINISH,
        ]
    )
    result = await system.run(QUESTION, IMAGE, ctx=ctx_for(llm, b.backends))
    first, second, _ = result.trace.steps
    assert [h["round"] for h in first.retrieved[0]["hits"]] == [1, 1]
    assert [h["round"] for h in second.retrieved[0]["hits"]] == [2, 2]
    # round 2 queried the state of round 1's call: the search step is not in its history
    assert embedder.texts[-1].endswith("History: none (first step)")
    assert "round 2 of at most 3, under task+history" in second.observation


# -- the bank consulted before each action -----------------------------------------------------


async def test_every_step_searches_before_each_action_repeats_included_scripted_llm(
    tmp_path: Path,
) -> None:
    (await make_bank(tmp_path / "bank.db")).close()
    b = bench(config(tmp_path, path=str(tmp_path / "bank.db"), policy="every_step", k=1))
    llm = ScriptedLLM([ZOOM, ZOOM, "no action here", FINISH])
    result = await muse_system(b).run(QUESTION, IMAGE, ctx=ctx_for(llm, b.backends))
    steps = result.trace.steps
    assert result.answer == "red"
    assert steps[1].error_kind == "repeated_action" and steps[2].error_kind is not None
    searches = [r for s in steps for r in s.retrieved if r["source"] == "muse"]
    assert all(r["policy"] == "advisor" and r["hits"] for r in searches)
    # one search before every action: the repeated call and the malformed reply included
    assert len(searches) == len(steps) == llm.calls == 4


async def test_the_papers_setting_every_step_per_round_scripted_llm(tmp_path: Path) -> None:
    (await make_bank(tmp_path / "bank.db")).close()
    cfg = config(
        tmp_path,
        path=str(tmp_path / "bank.db"),
        policy="every_step",
        deep_search="per_round",
        depth=2,
        k=1,
    )
    b = bench(cfg)
    actions = iter([ZOOM, FINISH])

    def respond(request: LLMRequest) -> str:
        return hits_aware_chooser(request) if is_choice(request) else next(actions)

    llm = ScriptedLLM(respond)
    result = await muse_system(b).run(QUESTION, IMAGE, ctx=ctx_for(llm, b.backends))
    assert result.answer == "red"
    acting = [r for r in llm.requests if not is_choice(r)]
    searches = [r for s in result.trace.steps for r in s.retrieved]
    assert len(searches) == len(acting) == len(result.trace.steps) == 2
    for record in searches:
        assert record["deep_search"] == "per_round" and 1 <= len(record["rounds"]) <= 2
        assert record["rounds"][0]["viewpoint"] == "question"
    # the guidance reached the agent before it acted
    assert "Guidance from past experiences" in acting[0].messages[-1].text()


# -- settings ----------------------------------------------------------------------------------


def test_deep_search_setting_defaults_to_upfront_and_is_checked(tmp_path: Path) -> None:
    assert memory_settings(config(tmp_path)).options.deep_search == "upfront"
    chosen = memory_settings(config(tmp_path, deep_search="per_round"))
    assert chosen.options.deep_search == "per_round"
    bad = tmp_path / "bad.toml"
    bad.write_text('[memory]\ndeep_search = "sideways"\n')
    with pytest.raises(ConfigError, match="deep_search"):
        load_config(bad, env={})


# -- Fig. 2's depth-0 point --------------------------------------------------------------------


def test_a_react_run_is_the_depth_and_breadth_zero_point(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    add_run(store, "react", "react", run_config())
    add_run(store, "cot", "cot", run_config())
    for depth in (1, 3):
        add_run(store, f"d{depth}", "muse", run_config(path="b.sqlite", depth=depth), flip=depth)
    runs = ["react", "cot", "d1", "d3"]
    depth_plot = scaling_series(store, runs, "memory.depth", samples=20)
    breadth_plot = scaling_series(store, ["react", "d3"], "memory.k", samples=20)
    sources_plot = scaling_series(store, ["react", "d3"], "memory.sources", samples=20)
    store.close()
    micro = depth_plot.series[-1]
    assert micro.name == MICRO_AVERAGE
    assert [(p.x, p.run) for p in micro.points] == [(0, "react"), (1, "d1"), (3, "d3")]
    assert micro.points[0].cell.mean < micro.points[1].cell.mean  # react has no flipped answers
    assert "cot: no memory, left out of memory.depth" in depth_plot.notes
    assert [(p.x, p.run) for p in breadth_plot.series[-1].points] == [(0, "react"), (3, "d3")]
    # only depth and breadth have a no-experience 0
    assert "react: no memory, left out of memory.sources" in sources_plot.notes
