"""HAMMR's reference systems and paper settings, replayed with scripted models: the oracle
routing of Table 2 (`hammr-oracle`), the bare VQA model of Table 5 (`vlm`), a chosen step
limit reaching the dispatcher, and the paper's router, grammar and VQA settings doing what
they say (and `hammr config show` saying whether each is the paper's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from hammr.agent import ReActAgent
from hammr.agents.baselines import DirectVLM, OracleDispatcher, vlm_system
from hammr.agents.routing import RoutedDispatcher
from hammr.agents.system import AgentSystems
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import Config, load_config
from hammr.eval.runner import local_answerer
from hammr.eval.suites import SuiteEntry
from hammr.eval.types import Sample
from hammr.systems import FACTORIES, Workbench, build_system
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools
from hammr.trace import Trace
from hammr.values import Image

# question type -> specialist, as the agent files say (HAMMR's Table 2)
SPECIALISTS = {
    "local_pointing": "PointQALocalAgent",
    "look_twice": "PointQALookTwiceAgent",
    "single_hop": "SingleHopEncyclopedicAgent",
    "two_hop": "TwoHopEncyclopedicAgent",
    "two_image": "TwoImageVQAAgent",
    "spatial_reasoning": "SpatialReasoningAgent",
    "complex_counting": "ComplexCountingAgent",
    "ocr_reasoning": "OCRReasoningAgent",
}
DISPATCHER = "QuestionDispatcherAgent"
LIGHT = {"HAMMR_TOOLS__EMBED__BACKEND": "none"}  # no text embedder: nothing to load


def config(**settings: str) -> Config:
    """The defaults plus ``settings`` (dotted key -> value), as environment variables."""
    env = {**LIGHT}
    for key, value in settings.items():
        env["HAMMR_" + key.upper().replace(".", "__")] = value
    return load_config(env=env)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./hammr.toml of the checkout's
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def picture(width: int = 64, height: int = 48) -> Image:
    return Image(PILImage.new("RGB", (width, height), (90, 140, 200)))


def inputs_for(question_type: str) -> dict[str, Any]:
    inputs: dict[str, Any] = {"image": picture()}
    if question_type in ("local_pointing", "look_twice"):
        inputs["point"] = (10.0, 12.0)
    if question_type == "two_image":
        inputs["image2"] = picture(32, 24)
    return inputs


def finishing() -> ScriptedLLM:
    return ScriptedLLM(lambda request: "[Thought]: I can tell.\n[Finish]: blue")


# -- hammr-oracle ----------------------------------------------------------------------------


async def test_scripted_oracle_sends_each_question_type_to_its_specialist() -> None:
    system, backends = build_system(config(), "hammr-oracle")
    assert isinstance(system, OracleDispatcher)
    assert system.by_type == SPECIALISTS
    for question_type, specialist in SPECIALISTS.items():
        llm = finishing()
        ctx = ToolContext(backends=backends, llm=llm, task=("generic-vqa", question_type))
        result = await system.run("what colour is it?", inputs_for(question_type), ctx=ctx)
        assert result.answer == "blue", question_type
        step = result.trace.steps[0]
        assert result.trace.agent == "hammr-oracle"
        assert step.router == "oracle" and step.tool == specialist
        assert step.child is not None and step.child.agent == specialist
        # the specialist's one model call; no dispatcher ran
        assert llm.calls == 1 and result.trace.llm_calls == 1
        assert DISPATCHER not in llm.requests[0].messages[0].text()


def _entry(question_type: str) -> SuiteEntry:
    return SuiteEntry(
        name="gqa", dataset="gqa", file="gqa.jsonl", metric="exact_match",
        question_type=question_type,
    )  # fmt: skip


async def test_scripted_oracle_in_an_evaluation_routes_by_the_samples_type(
    tmp_path: Path,
) -> None:
    PILImage.new("RGB", (64, 48), (90, 140, 200)).save(tmp_path / "img.png")
    sample = Sample("q1", "gqa", "what colour?", ("blue",), {"image": tmp_path / "img.png"})
    system, backends = build_system(config(), "hammr-oracle")
    llm = finishing()
    answer = local_answerer(
        system, run_name="r", ctx_factory=lambda: ToolContext(backends=backends, llm=llm)
    )
    record = await answer(_entry("spatial_reasoning"), sample)
    assert record.status == "finished" and record.score == 1.0
    assert record.trace is not None
    assert record.trace.steps[0].child.agent == "SpatialReasoningAgent"
    # a type no specialist answers: an error stored with the sample, no model call
    calls = llm.calls
    record = await answer(_entry("made_up_type"), sample)
    assert record.status == "error" and record.prediction is None
    assert "no specialist answers question type 'made_up_type'" in (record.error or "")
    assert "ocr_reasoning" in (record.error or "")  # the known types are named
    assert record.trace is not None and record.trace.agent == "hammr-oracle"
    assert llm.calls == calls


async def test_oracle_without_a_type_or_the_inputs_the_specialist_takes_says_so() -> None:
    system, backends = build_system(config(), "hammr-oracle")
    llm = finishing()
    result = await system.run("what is it?", {"image": picture()}, ctx=ToolContext(llm=llm))
    assert result.answer is None and result.trace.status == "error"
    assert "--question-type" in (result.trace.error or "")
    ctx = ToolContext(backends=backends, llm=llm, task=("", "local_pointing"))
    result = await system.run("what is it?", {"image": picture()}, ctx=ctx)
    assert result.trace.status == "error"
    assert "PointQALocalAgent, which needs point" in (result.trace.error or "")
    assert llm.calls == 0


def test_ask_with_the_oracle_needs_a_known_question_type(tmp_path: Path) -> None:
    image = tmp_path / "img.png"
    PILImage.new("RGB", (64, 48)).save(image)
    env = {"HAMMR_CONFIG": "", **LIGHT}
    base = ["ask", str(image), "what is it?", "--system", "hammr-oracle"]
    for extra, said in (([], "--question-type"), (["--question-type", "nope"], "'nope'")):
        r = CliRunner().invoke(main, [*base, *extra], env=env)
        assert r.exit_code == 2, r.output
        (line,) = r.stderr.strip().splitlines()
        assert said in line and "ocr_reasoning" in line


# -- vlm -------------------------------------------------------------------------------------


class CountingVQA:
    """A VQA backend that answers 'two' and counts what it was asked."""

    model = "counting-vqa"

    def __init__(self) -> None:
        self.asked: list[tuple[list[Image], list[str]]] = []

    async def answer(self, images: list[Image], questions: list[str]) -> list[str]:
        self.asked.append((list(images), list(questions)))
        return ["two"] * len(images)


@pytest.mark.parametrize("question_type", ["spatial_reasoning", "local_pointing", "two_image"])
async def test_scripted_vlm_makes_one_vqa_call_and_no_llm_call(
    question_type: str, tmp_path: Path
) -> None:
    vqa = CountingVQA()
    cfg = config()
    bench = Workbench(cfg, {"vqa": vqa}, AgentSystems.from_config(cfg, builtin_tools(), {}))
    assert FACTORIES["vlm"] == "hammr.agents.baselines:vlm_system"
    system = vlm_system(bench)
    llm = ScriptedLLM([])  # any call would fail: there is none to make
    inputs = inputs_for(question_type)
    ctx = ToolContext(backends={"vqa": vqa}, llm=llm)
    result = await system.run("how many birds?", inputs, ctx=ctx)
    assert result.answer == "two" and result.trace.status == "finished"
    assert len(vqa.asked) == 1 and llm.calls == 0
    (images, questions) = vqa.asked[0]
    assert len(images) == 1 and questions[0].startswith("how many birds?")
    if question_type == "two_image":  # both images, side by side, at the taller's height
        assert images[0].pixels.size == (64 + 64, 48)
    if question_type == "local_pointing":  # the point drawn on the image
        assert images[0].pixels.getpixel((10, 12)) != inputs["image"].pixels.getpixel((10, 12))
    # the trace holds the one call, for hammr replay and the viewer
    trace = result.trace
    assert trace.agent == "vlm" and trace.model == "counting-vqa" and trace.llm_calls == 0
    (step,) = trace.steps
    assert step.tool == "VQA" and step.finish == "two"
    path = tmp_path / "trace.json"
    trace.save(path)
    assert Trace.load(path).steps[0].tool == "VQA"
    shown = CliRunner().invoke(main, ["replay", str(path)])
    assert shown.exit_code == 0 and "act: answer = VQA(image, question)" in shown.stdout


async def test_vlm_with_a_failing_backend_ends_with_its_reason() -> None:
    result = await DirectVLM().run("q?", {"image": picture()}, ctx=ToolContext(backends={}))
    assert result.answer is None and result.trace.status == "error"
    assert result.trace.steps[0].error_kind == "capability_missing"


def test_vlm_without_a_vqa_backend_is_refused_in_one_line(tmp_path: Path) -> None:
    from hammr.agents.spec import SpecError

    with pytest.raises(SpecError, match=r"\[tools\.vqa\] backend"):
        build_system(config(), "vlm")
    image = tmp_path / "img.png"
    PILImage.new("RGB", (64, 48)).save(image)
    r = CliRunner().invoke(
        main, ["ask", str(image), "q?", "--system", "vlm"], env={"HAMMR_CONFIG": "", **LIGHT}
    )
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert "vlm" in line and "none is configured" in line


# -- the step limit ----------------------------------------------------------------------------


def looping() -> ScriptedLLM:
    """A dispatcher that never calls a specialist."""
    return ScriptedLLM(lambda request: "[Thought]: hmm.\n[Act]: x = NoSuchAgent(image)")


def dispatcher_steps(system: Any) -> int:
    return int(system.dispatcher.max_steps)


async def test_scripted_max_steps_limits_the_dispatcher() -> None:
    cfg = config(**{"agent.router": "llm"})
    default, _ = build_system(cfg, "hammr")
    assert dispatcher_steps(default) == 4  # its agent file's own limit
    system, backends = build_system(cfg, "hammr", max_steps=2)
    assert dispatcher_steps(system) == 2
    llm = looping()
    ctx = ToolContext(backends=backends, llm=llm)
    result = await system.run("what is it?", {"image": picture()}, ctx=ctx)
    assert result.trace.agent == DISPATCHER
    assert result.trace.status == "step_limit" and len(result.trace.steps) == 2
    assert llm.calls == 2
    # every agent has the chosen limit, the specialists and the naive baseline too
    agents = AgentSystems.from_config(cfg, builtin_tools(), {}, max_steps=3)
    assert {a.max_steps for a in agents.agents.values()} == {3}
    assert agents.naive().max_steps == 3


def test_max_steps_set_in_the_config_binds_the_dispatcher_too() -> None:
    cfg = config(**{"agent.router": "llm", "agent.max_steps": "6"})
    system, _ = build_system(cfg, "hammr")
    assert dispatcher_steps(system) == 6
    unset = AgentSystems.from_config(config(), builtin_tools(), {})
    assert unset.agents[DISPATCHER].max_steps == 4
    assert unset.agents["OCRReasoningAgent"].max_steps == 8


async def test_scripted_llm_max_tokens_bounds_every_agents_reply() -> None:
    cfg = config(**{"agent.router": "llm", "llm.max_tokens": "77"})
    agents = AgentSystems.from_config(cfg, builtin_tools(), {})
    assert {a.max_tokens for a in agents.agents.values()} == {77}
    assert agents.naive().max_tokens == 77
    system, backends = build_system(cfg, "hammr")
    llm = looping()
    ctx = ToolContext(backends=backends, llm=llm)
    await system.run("what is it?", {"image": picture()}, ctx=ctx)
    assert llm.requests and {r.max_tokens for r in llm.requests} == {77}
    default = AgentSystems.from_config(config(), builtin_tools(), {})
    assert {a.max_tokens for a in default.agents.values()} == {256}


def test_the_papers_harness_settings_reach_every_agent() -> None:
    harness = {
        "agent.unknown_tool": "end",
        "agent.loop_guard": "false",
        "agent.dispatcher_offers": "all",
        "agent.router": "llm",
    }
    paper = AgentSystems.from_config(config(**harness), builtin_tools(), {})
    for a in [*paper.agents.values(), paper.naive()]:
        assert a.unknown_tool_ends_run and not a.refuse_repeats and not a.finish_on_last_step
    assert paper.dispatcher().offer_all
    ours = AgentSystems.from_config(config(), builtin_tools(), {})
    for a in [*ours.agents.values(), ours.naive()]:
        assert not a.unknown_tool_ends_run and a.refuse_repeats and a.finish_on_last_step
    assert not ours.dispatcher().offer_all
    env = {"HAMMR_" + k.upper().replace(".", "__"): v for k, v in harness.items()}
    shown = config_show(env)
    for key in ("agent.unknown_tool", "agent.loop_guard", "agent.dispatcher_offers"):
        assert "as the hammr paper ran" in shown[key]
    assert "not as the hammr paper ran ('end'" in config_show({})["agent.unknown_tool"]


# -- the paper's settings ----------------------------------------------------------------------


class Embedder:
    async def embed_queries(self, texts: list[str]) -> Any:
        raise AssertionError("router = 'llm' must not embed")

    embed_passages = embed_queries


async def test_scripted_router_llm_asks_the_dispatcher_even_with_an_embedder() -> None:
    cfg = config(**{"agent.router": "llm"})
    agents = AgentSystems.from_config(cfg, builtin_tools(), {"embed": Embedder()})
    system = agents.system("hammr")
    assert isinstance(system, RoutedDispatcher)
    assert system.router is None and system.mode == "llm"
    llm = looping()
    result = await system.run("what?", {"image": picture()}, ctx=ToolContext(llm=llm))
    assert result.trace.agent == DISPATCHER and llm.calls == 4
    assert all(s.router is None for s in result.trace.steps)  # each step the LLM's


@pytest.mark.parametrize(("grammar", "sent"), [("off", False), ("auto", True), ("on", True)])
async def test_scripted_grammar_off_sends_none_to_a_model_that_takes_one(
    grammar: str, sent: bool
) -> None:
    cfg = config(**{"agent.router": "llm", "llm.grammar": grammar})
    for name in ("hammr", "naive", "hammr-oracle"):
        system, backends = build_system(cfg, name)
        llm = looping()
        llm.grammar = "gbnf"  # as the embedded model and a llama.cpp server take one
        ctx = ToolContext(backends=backends, llm=llm, task=("", "spatial_reasoning"))
        await system.run("what?", {"image": picture()}, ctx=ctx)
        assert llm.requests, name
        assert all((r.grammar is not None) == sent for r in llm.requests), (name, grammar)


def test_tools_only_withholds_vqa_even_with_a_vqa_backend() -> None:
    backends = {"vqa": CountingVQA()}
    for setting, given in (("tools_only", False), ("with_vqa", True), ("auto", True)):
        cfg = config(**{"agent.setting": setting})
        agents = AgentSystems.from_config(cfg, builtin_tools(), backends)
        for name in ("SpatialReasoningAgent", "ComplexCountingAgent", "OCRReasoningAgent"):
            agent = agents.agents[name]
            assert isinstance(agent, ReActAgent)
            assert ("VQA" in agent.tools) == given, (setting, name)
        leaf = agents.naive().tools
        assert "VQA" in leaf  # the pointing specialists' own VQA, in both settings


def config_show(env: dict[str, str]) -> dict[str, str]:
    r = CliRunner().invoke(main, ["config", "show"], env={"HAMMR_CONFIG": "", **env})
    assert r.exit_code == 0, r.output
    return {ln.split(" = ")[0]: ln for ln in r.stdout.splitlines() if " = " in ln}


def test_config_show_says_which_settings_are_the_papers() -> None:
    paper = config_show(
        {
            "HAMMR_AGENT__ROUTER": "llm",
            "HAMMR_LLM__GRAMMAR": "off",
            "HAMMR_AGENT__SETTING": "tools_only",
        }
    )
    for key in ("agent.router", "llm.grammar", "agent.setting"):
        assert "as the hammr paper ran" in paper[key] and "not as" not in paper[key], key
    ours = config_show({"HAMMR_AGENT__SETTING": "with_vqa"})
    assert "not as the hammr paper ran ('llm'" in ours["agent.router"]
    assert "auto here means 'neighbours'" in ours["agent.router"]
    assert "not as the hammr paper ran ('off'" in ours["llm.grammar"]
    assert "not as the hammr paper ran ('tools_only'" in ours["agent.setting"]
    assert "Table 5" in ours["agent.setting"]  # the tables that ran with VQA
    # auto, with no VQA backend configured, is the paper's tools-only setting
    auto = config_show({})
    assert "auto here means 'tools_only': as the hammr paper ran" in auto["agent.setting"]
    assert "paper" not in auto["agent.max_steps"]
