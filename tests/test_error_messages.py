"""Errors that say what is wrong (issue 21, item 5; the leak check of item 4): a UTF-8 BOM in
a TOML file, a configured backend that cannot run, `hammr avis induce` on runs with nothing
to learn from, a server reply with no text, `hammr route` with a failing LLM, and hindsight
guidance that states the answer."""

from __future__ import annotations

import codecs
import dataclasses
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from conftest import needs_tesseract
from fake_openai_server import FakeServer, Reply, served_env
from hammr.agent import ReActAgent
from hammr.agents.spec import load_spec
from hammr.avis.analyses import InduceError, induce_graph
from hammr.avis.graph import START, load_graph
from hammr.backends.llm.base import LLMError, LLMRequest, Message
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import load_config
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from hammr.factory import build_backends
from hammr.memory.annotation_replies import (
    ReplyProblem,
    answer_mentions,
    answer_terms,
    check_reply,
)
from hammr.programs.planner import load_examples
from hammr.tools.base import CapabilityMissing, ToolContext
from hammr.tools.library import builtin_tools
from hammr.trace import Step, Trace
from hammr.values import Image
from test_avis_analyses import avis_trace, fill, record

BOM = codecs.BOM_UTF8


def invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, args, env=env or {"HAMMR_CONFIG": ""}, catch_exceptions=False)


def with_bom(source: Path, target: Path) -> Path:
    target.write_bytes(BOM + source.read_bytes())
    return target


# -- a UTF-8 BOM in TOML files ----------------------------------------------------------------


def test_a_config_file_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    cfg = tmp_path / "hammr.toml"
    cfg.write_bytes(BOM + b'[llm]\nmodel = "from-bom"\n')
    assert load_config(cfg).get("llm.model") == "from-bom"
    r = invoke(["config", "show", "--config", str(cfg)])
    assert r.exit_code == 0, r.output
    assert "from-bom" in r.stdout


def test_graph_agent_suite_and_example_files_saved_with_a_bom_are_read(tmp_path: Path) -> None:
    avis = Path(str(resources.files("hammr.avis").joinpath("default_graph.toml")))
    assert load_graph(with_bom(avis, tmp_path / "graph.toml")).edges[START]
    specs = Path(str(resources.files("hammr.agents").joinpath("specs")))
    spec = load_spec(with_bom(specs / "counting.toml", tmp_path / "counting.toml"))
    assert spec.name
    suites = Path(str(resources.files("hammr.eval.suites")))
    assert load_suite(str(with_bom(suites / "demo.toml", tmp_path / "demo.toml"))).entries
    examples = Path(str(resources.files("hammr.programs").joinpath("examples.toml")))
    assert load_examples(with_bom(examples, tmp_path / "examples.toml"))


# -- a configured backend that cannot run -----------------------------------------------------


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hammr.toml"
    path.write_text(text)
    return path


def observation_of(path: Path, act: str, tool: str) -> str:
    """What a ReAct agent (scripted fake LLM) observes calling ``act`` with the backends
    of the configuration file ``path``."""
    import asyncio

    backends = build_backends(load_config(path)).backends
    tools = {t.name: t for t in builtin_tools()}
    llm = ScriptedLLM([f"[Thought]: try\n[Act]: {act}", "[Finish]: x"])
    agent = ReActAgent("T", "d", "Answer.", [tools[tool]], llm=llm)
    image = Image(PILImage.new("RGB", (40, 40), (255, 255, 255)))
    result = asyncio.run(agent.run("q", {"image": image}, ctx=ToolContext(backends=backends)))
    step = result.trace.steps[0]
    assert step.error_kind == "capability_missing"
    return str(step.observation)


def test_a_kb_path_that_does_not_exist_is_said_to_the_agent_with_scripted_llm(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nope" / "kb.sqlite"
    path = config(tmp_path, f'[tools.kb]\nbackend = "sqlite"\npath = "{missing}"\n')
    seen = observation_of(path, 'WikipediaArticle("Eiffel Tower")', "WikipediaArticle")
    assert f"no knowledge base at {missing}" in seen
    assert "no backend configured" not in seen
    r = invoke(["tools", "--config", str(path)])
    assert r.exit_code == 0 and f"no knowledge base at {missing}" in r.stdout
    # a capability left unconfigured still says so
    backends = build_backends(load_config(path)).backends
    with pytest.raises(CapabilityMissing, match="capability 'depth' has no backend configured"):
        ToolContext(backends=backends).backend("depth")


def test_a_tesseract_cmd_that_is_missing_is_said_with_scripted_llm(tmp_path: Path) -> None:
    path = config(tmp_path, '[tools.ocr]\nbackend = "tesseract"\ncmd = "/nonexistent/tess"\n')
    seen = observation_of(path, "OCR(image)", "OCR")
    assert "tools.ocr.cmd = '/nonexistent/tess' is not an executable program" in seen
    assert "no backend configured" not in seen
    r = invoke(["tools", "--config", str(path)])
    assert "'/nonexistent/tess' is not an executable program" in r.stdout


@needs_tesseract
def test_an_ocr_language_that_is_no_tesseract_code_is_said_with_scripted_llm(
    tmp_path: Path,
) -> None:
    path = config(tmp_path, '[tools.ocr]\nbackend = "tesseract"\nlang = "klingon"\n')
    seen = observation_of(path, "OCR(image)", "OCR")
    assert "tesseract has no language data for klingon" in seen
    assert "takes tesseract's language codes" in seen
    assert "tesseract-ocr-klingon" not in seen  # no such package to install
    r = invoke(["tools", "--config", str(path)])
    assert "has no language data for klingon" in r.stdout
    agents = invoke(["agents", "--config", str(path)])
    assert "OCR (cannot run here)" in agents.stdout


# -- hammr avis induce --------------------------------------------------------------------------


@pytest.fixture
def avis_store(tmp_path: Path) -> Path:
    path = fill(tmp_path / "runs.sqlite")
    with RunStore(path) as store:
        store.open_run("empty", "infoseek", "avis")
        store.open_run("traceless", "infoseek", "avis")
        for i in range(3):
            store.add(record("traceless", i, 0.0, None))
        store.open_run("down", "infoseek", "avis")
        for i in range(2):
            t = Trace(agent="AVIS", question="q", model="m", status="llm_failure")
            t.steps.append(Step(index=0, tool="DECOMPOSE", error_kind="llm_failure"))
            t.error = "cannot reach the LLM server"
            store.add(dataclasses.replace(record("down", i, 0.0, t), status="llm_failure"))
    return path


@pytest.mark.parametrize(
    ("run", "says", "not_says"),
    [
        ("empty", "run 'empty' holds no samples yet", "--system avis"),
        ("traceless", "none of its 3 samples kept a trace", "--system avis"),
        ("down", "all its 2 AVIS traces ended in failure (llm_failure 2)", "--min-score"),
    ],
)
def test_avis_induce_says_why_a_run_teaches_nothing(
    avis_store: Path, tmp_path: Path, run: str, says: str, not_says: str
) -> None:
    out = tmp_path / "g.toml"
    r = invoke(["avis", "induce", run, "-o", str(out), "--store", str(avis_store)])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("hammr: error: "), r.stderr
    assert says in r.stderr and not_says not in r.stderr
    assert not out.exists()


def test_avis_induce_names_a_store_that_does_not_exist(tmp_path: Path) -> None:
    store = tmp_path / "nope.sqlite"
    r = invoke(["avis", "induce", "x", "-o", str(tmp_path / "g.toml"), "--store", str(store)])
    assert r.exit_code == 2 and f"the store {store} does not exist yet" in r.stderr
    assert not store.exists()


def test_induce_errors_read_as_sentences() -> None:
    one = [avis_trace([(START, "object_select", "informative")])]
    with pytest.raises(InduceError) as e:
        induce_graph(one, source="learned.toml")
    # the file is not written yet: not named; one state reached: "it", not "none of them"
    assert "learned.toml" not in str(e.value)
    assert "only object_select can be reached, and it cannot answer" in str(e.value)
    with pytest.raises(InduceError, match="in the 1 successful AVIS trace:"):
        induce_graph([avis_trace([])])
    good = [avis_trace([(START, "vqa", "informative"), ("vqa", "llm_qa", "answerable")])]
    with pytest.raises(
        InduceError, match=r"was seen 1 time, P = 1\.00; asked for at least 2 times"
    ):
        induce_graph(good, min_count=2)
    custom = [avis_trace([(START, "read_text", "informative"), ("read_text", "llm_qa", "x")])]
    with pytest.raises(InduceError, match=r"not a built-in action: give the graph the runs used"):
        induce_graph(custom)


# -- a reply with no text -------------------------------------------------------------------------


def null_content(**message: Any) -> dict[str, Any]:
    return {
        "id": "x",
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": None, **message},
            }
        ],
    }


@pytest.fixture
def server() -> Any:
    s = FakeServer()
    yield s
    s.close()


async def test_a_reply_with_null_content_is_said_to_hold_no_text_with_scripted_server(
    server: FakeServer,
) -> None:
    server.script = [Reply(body=null_content()), Reply(body=null_content(refusal="I can't."))]
    llm = OpenAICompatLLM(server.url, "fake", max_retries=1)
    request = LLMRequest((Message("user", "hi"),))
    with pytest.raises(LLMError, match=r"returned no text \(message.content is null"):
        await llm.complete(request)
    with pytest.raises(LLMError, match=re.escape('the model refused: "I can\'t."')):
        await llm.complete(request)


def test_a_system_told_no_text_does_not_blame_the_format_with_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    server.responder = lambda seen: Reply(body=null_content())
    image = tmp_path / "x.png"
    PILImage.new("RGB", (32, 32)).save(image)
    env = {"HAMMR_CONFIG": "", **served_env(server)}
    r = invoke(["ask", str(image), "What is it?", "--system", "mulprog-direct"], env)
    assert "returned no text" in r.stderr, r.output
    assert "no 'Answer:' line" not in r.output


# -- hammr route with a failing LLM ---------------------------------------------------------------


def test_route_with_a_failing_llm_fails_in_one_line_with_scripted_server(
    server: FakeServer,
) -> None:
    server.responder = lambda seen: Reply(status=500, body={"error": {"message": "boom"}})
    env = {"HAMMR_CONFIG": "", **served_env(server)}
    r = invoke(["route", "Who designed this bridge?", "--router", "llm"], env)
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("hammr: error: "), r.stderr
    assert "specialist:" not in r.stdout


# -- guidance that states the answer --------------------------------------------------------------


def guidance_problem(guidance: str, question: str, answers: list[str]) -> str | None:
    reply = json.dumps({"steps": [{"step": 1, "score": 5, "guidance": guidance}]})
    try:
        check_reply(
            reply,
            1,
            answer_terms(question, answers),
            mentions=answer_mentions(question, answers),
        )
    except ReplyProblem as e:
        return str(e)
    return None


@pytest.mark.parametrize(
    ("guidance", "answers", "leaked"),
    [
        ("The answer is not 2, but 4, which is the correct answer.", ["4"], "'4'"),
        ("The answer is not 2, but four.", ["4"], "'four'"),
        ("There are 4 umbrellas, which is the right count.", ["four"], "'4'"),
        ("The answer should have been no.", ["no"], "'no'"),
        ("Count again: the answer is 21.", ["twenty-one"], "'21'"),
    ],
)
def test_guidance_stating_the_answer_is_refused(
    guidance: str, answers: list[str], leaked: str
) -> None:
    problem = guidance_problem(guidance, "How many umbrellas are there?", answers)
    assert problem is not None and f"gives away this question's answer ({leaked})" in problem


def test_guidance_speaking_of_the_correct_answer_is_refused() -> None:
    problem = guidance_problem("Compare with the correct answer first.", "How many?", ["7"])
    assert problem is not None and "speaks of this question's answer" in problem
    problem = guidance_problem("The ground truth disagrees; look again.", "How many?", ["7"])
    assert problem is not None and "'ground truth'" in problem


@pytest.mark.parametrize(
    "guidance",
    [
        "DetectObject returned 4 boxes; merge the overlapping ones before counting.",
        "Count all four corners of the sign before you finish.",
        "Zoom in 4.5 times on the crop; small umbrellas hide in the shade.",
        "The answer is a single number, so count the boxes DetectObject returns.",
    ],
)
def test_guidance_quoting_a_tool_output_is_kept_but_not_calling_it_the_answer(
    guidance: str,
) -> None:
    question = "How many umbrellas are there?"
    assert guidance_problem(guidance, question, ["4"]) is None
    stated = "DetectObject returned 4 boxes, which is the correct count."
    assert guidance_problem(stated, question, ["4"]) is not None


def test_an_option_letter_is_caught_only_as_the_answer() -> None:
    mc = "Where is the cup?\nA. left of the plate\nB. right of the plate"
    assert guidance_problem("The answer was A.", mc, ["A"]) is not None
    assert guidance_problem("A crop is the answer to small objects.", mc, ["A"]) is None
