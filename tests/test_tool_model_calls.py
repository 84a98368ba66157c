"""Every model call of a run is in its trace once: the calls a step's tool makes
(AnswerWithContext, DecomposeQuestion, a VLM-backed tool, a MulProg module, an AVIS library
action) and its advisors make are metered into the step (``tool_calls``, ``tool_cached_calls``,
``tool_usage``; :mod:`hammr.backends.llm.meter`), a child agent's stay in its own trace, and
the trace's ``llm_calls`` / ``prompt_tokens`` / ``completion_tokens`` equal what the model
answered: with scripted fake LLMs behind a tally, and against the real llama.cpp server
through a counting proxy."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from avis_policy import AvisPolicy, plan, verdict
from hammr.agent import ReActAgent, traced
from hammr.backends.llm.base import GrammarSupport, LLMRequest, LLMResponse, Usage
from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.backends.llm.meter import (
    Meter,
    MeteredLLM,
    current_meter,
    metered,
    metering,
    record,
    step_meter,
    unmetered,
)
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import ToolContext
from hammr.tools.knowledge_tools import DECOMPOSE_SYSTEM, AnswerWithContext, DecomposeQuestion
from hammr.trace import Step, StepUsage, Trace, TraceFormatError, format_trace
from hammr.values import Image
from real_server import real_client

# -- a tally: what the model behind hammr answered -------------------------------------------


@dataclass
class Tally:
    """Wraps a (scripted fake) model and adds up every reply it gave: the 'server's' side of
    the comparison with the trace."""

    inner: Any
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def grammar_support(self) -> GrammarSupport:
        return self.inner.grammar_support  # type: ignore[no-any-return]

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response: LLMResponse = await self.inner.complete(request)
        self.calls += 1
        self.prompt_tokens += response.usage.prompt_tokens
        self.completion_tokens += response.usage.completion_tokens
        return response


def assert_trace_matches(trace: Trace, tally: Tally) -> None:
    assert (trace.llm_calls, trace.prompt_tokens, trace.completion_tokens) == (
        tally.calls,
        tally.prompt_tokens,
        tally.completion_tokens,
    )


def usage_of(llm: ScriptedLLM, i: int, reply: str) -> StepUsage:
    """The usage the scripted fake gave its ``i``-th call (prompt words, reply words)."""
    prompt = sum(len(m.text().split()) for m in llm.requests[i].messages)
    return StepUsage(prompt, len(reply.split()))


def reply(text: str, prompt: int = 10, completion: int = 2, **kw: Any) -> LLMResponse:
    return LLMResponse(text, Usage(prompt, completion), **kw)


# -- the meter's rules ---------------------------------------------------------------------


def test_a_step_meter_adds_each_reply_to_its_step_cached_ones_counted_apart() -> None:
    step = Step(index=0)
    with step_meter(step) as meter:
        record(reply("a", 100, 5, cached_prompt_tokens=60))
        record(reply("b", 40, 3, cached_prompt_tokens=30, cached=True))
    record(reply("after", 7, 7))  # no meter is current: added to none
    assert (step.tool_calls, step.tool_cached_calls) == (2, 1)
    assert step.tool_usage == StepUsage(140, 8, 90)
    assert (meter.calls, meter.cached_calls, meter.usage) == (2, 1, StepUsage(140, 8, 90))
    assert meter.summary() == "2 calls, 140+8 tokens (1 from hammr's cache)"
    # one reply that does not say its cached prompt tokens: the sum cannot say either
    with step_meter(step):
        record(reply("c", 10, 1))
    assert step.tool_usage == StepUsage(150, 9, None) and step.tool_calls == 3
    assert step.usage == StepUsage()  # the step's own call is not the tools'


async def test_unmetered_hides_the_meter_and_a_metered_model_is_never_wrapped_twice() -> None:
    fake = ScriptedLLM(lambda r: "ok")
    model = metered(metered(fake))
    assert isinstance(model, MeteredLLM) and model.inner is fake
    assert metered(None) is None
    assert model.name == "scripted" and model.requests is fake.requests  # all else is fake's
    meter = Meter()
    with metering(meter):
        await model.complete(LLMRequest(()))
        with unmetered():
            assert current_meter() is None
            await model.complete(LLMRequest(()))  # a system's own call: its step records it
        await fake.complete(LLMRequest(()))  # not through the metered model: not seen
    assert meter.calls == 1 and fake.calls == 3
    assert current_meter() is None


async def test_concurrent_steps_meter_only_their_own_calls() -> None:
    """The meter is a context variable: two tools running at once (two questions of an
    evaluation) each see their own step's meter, and tasks a tool starts inherit it."""
    model = metered(ScriptedLLM(lambda r: "x"))

    async def tool(step: Step, n: int) -> None:
        with step_meter(step):
            await asyncio.gather(*(model.complete(LLMRequest(())) for _ in range(n)))
            await asyncio.sleep(0)

    a, b = Step(index=0), Step(index=0)
    await asyncio.gather(tool(a, 2), tool(b, 3))
    assert (a.tool_calls, b.tool_calls) == (2, 3)


# -- a ReAct agent whose tools ask the model (scripted fake LLM) ----------------------------

DECOMPOSE_STEP = (
    "[Thought]: I split the question.\n"
    "[Act]: parts = DecomposeQuestion('Where was the author of Velmora Tales born?')"
)
TWO_QUESTIONS = "1. Who wrote Velmora Tales?\n2. Where was that person born?"
ANSWER_STEP = (
    "[Thought]: I read the text.\n"
    "[Act]: place = AnswerWithContext('Where was Ana Ruiz born?', "
    "'Ana Ruiz wrote Velmora Tales. She was born in Porto.')"
)
PORTO = "Porto"
FINISH_STEP = "[Thought]: The text says so.\n[Finish]: Porto"
SCRIPT = [DECOMPOSE_STEP, TWO_QUESTIONS, ANSWER_STEP, PORTO, FINISH_STEP]


def knowledge_agent(name: str = "Reader") -> ReActAgent:
    return ReActAgent(
        name=name,
        description="Answers questions from texts.",
        instructions="Answer the question from texts.",
        tools=[DecomposeQuestion, AnswerWithContext],
        inputs={},
        max_steps=4,
    )


async def test_scripted_fake_react_agent_records_its_tools_model_calls_in_their_steps() -> None:
    fake = ScriptedLLM(list(SCRIPT))
    tally = Tally(fake)
    result = await knowledge_agent().run(
        "Where was the author of Velmora Tales born?", ctx=ToolContext(llm=tally)
    )
    trace = result.trace
    assert result.answer == "Porto", [(s.raw, s.error) for s in trace.steps]
    split, read, finish = trace.steps
    assert split.output == ["Who wrote Velmora Tales?", "Where was that person born?"]
    # the tool's call is the step's tool call; the step's own call stays its usage
    assert (split.tool_calls, split.tool_cached_calls) == (1, 0)
    assert split.usage == usage_of(fake, 0, DECOMPOSE_STEP)
    assert split.tool_usage == usage_of(fake, 1, TWO_QUESTIONS)
    assert fake.requests[1].messages[0].text() == DECOMPOSE_SYSTEM
    assert read.tool_calls == 1 and read.tool_usage == usage_of(fake, 3, PORTO)
    assert finish.tool_calls == 0 and finish.tool_usage == StepUsage()
    assert trace.llm_calls == 5 == fake.calls
    assert_trace_matches(trace, tally)
    shown = format_trace(trace)
    assert f"tool's model calls: 1, {split.tool_usage.prompt_tokens}+" in shown
    assert "[5 LLM calls," in shown


async def test_scripted_fake_tool_replies_from_hammrs_cache_count_as_cached(
    tmp_path: Path,
) -> None:
    """Asked again through hammr's response cache, the run is replayed: its trace counts
    the same calls and tokens (as a replayed step's own call is counted), and says which
    replies were replayed (``cached``, ``tool_cached_calls``): none reached the model."""
    from hammr.backends.llm.cache import CachedLLM

    fake = ScriptedLLM(list(SCRIPT))
    tally = Tally(fake)
    question = "Where was the author of Velmora Tales born?"
    llm = CachedLLM(tally, tmp_path / "llm.sqlite")
    try:
        first = await knowledge_agent().run(question, ctx=ToolContext(llm=llm))
        again = await knowledge_agent().run(question, ctx=ToolContext(llm=llm))
    finally:
        llm.close()
    assert tally.calls == 5  # the second run asked the model nothing
    a, b = first.trace, again.trace
    assert (b.llm_calls, b.prompt_tokens, b.completion_tokens) == (
        a.llm_calls,
        a.prompt_tokens,
        a.completion_tokens,
    )
    assert [s.tool_cached_calls for s in a.steps] == [0, 0, 0]
    assert [(s.cached, s.tool_calls, s.tool_cached_calls) for s in b.steps] == [
        (True, 1, 1),
        (True, 1, 1),
        (True, 0, 0),
    ]
    assert "(1 from hammr's cache)" in format_trace(b)


async def test_scripted_fake_nested_specialist_is_counted_once() -> None:
    """A HAMMR specialist called as a tool of the dispatcher: its own calls and its tools'
    are in its trace (the child), none in the dispatcher's step, and the totals are what the
    model answered, each call once."""
    specialist = knowledge_agent("Reader")
    dispatcher = ReActAgent(
        name="Dispatcher",
        description="Routes questions.",
        instructions="Hand the question to a specialist.",
        tools=[specialist],
        inputs={},
        max_steps=3,
        question_variable=True,
        final_tools=["Reader"],
    )
    hand_over = "[Thought]: The reader knows.\n[Act]: answer = Reader(question)"
    fake = ScriptedLLM([hand_over, *SCRIPT])
    tally = Tally(fake)
    result = await dispatcher.run(
        "Where was the author of Velmora Tales born?", ctx=ToolContext(llm=tally)
    )
    assert result.answer == "Porto"
    (routed,) = result.trace.steps
    child = routed.child
    assert child is not None and child.agent == "Reader"
    assert routed.tool_calls == 0 and routed.tool_usage == StepUsage()
    assert [s.tool_calls for s in child.steps] == [1, 1, 0]
    assert child.llm_calls == 5 and result.trace.llm_calls == 6 == fake.calls
    assert_trace_matches(result.trace, tally)


async def test_scripted_fake_advisor_calls_are_the_steps_tool_calls() -> None:
    """An advisor asking the model before the step's own call (MuSE's viewpoint choice does):
    the calls are the step's, through the metered model its context hands it."""
    from hammr.advice import Advice, Situation

    class AskingAdvisor:
        name = "asker"

        async def advise(self, situation: Situation) -> Advice | None:
            await situation.ctx.llm.complete(LLMRequest(()))
            return None

    agent = knowledge_agent().with_advisors([AskingAdvisor()])
    fake = ScriptedLLM(["advice", *SCRIPT[:2], "advice", FINISH_STEP])
    tally = Tally(fake)
    result = await agent.run("Where was the author born?", ctx=ToolContext(llm=tally))
    assert [s.tool_calls for s in result.trace.steps] == [2, 1]
    assert_trace_matches(result.trace, tally)


# -- the trace format -------------------------------------------------------------------------


async def test_tool_call_figures_survive_save_and_load(tmp_path: Path) -> None:
    fake = ScriptedLLM(list(SCRIPT))
    result = await knowledge_agent().run(
        "Where was the author of Velmora Tales born?", ctx=ToolContext(llm=fake)
    )
    trace = result.trace
    loaded = Trace.load(trace.save(tmp_path / "trace.json"))
    assert [(s.tool_calls, s.tool_cached_calls, s.tool_usage) for s in loaded.steps] == [
        (s.tool_calls, s.tool_cached_calls, s.tool_usage) for s in trace.steps
    ]
    assert (loaded.llm_calls, loaded.prompt_tokens, loaded.completion_tokens) == (
        trace.llm_calls,
        trace.prompt_tokens,
        trace.completion_tokens,
    )
    doc = json.loads((tmp_path / "trace.json").read_text())
    first, _, last = doc["steps"]
    assert first["tool_calls"] == 1 and set(first["tool_usage"]) == {
        "prompt_tokens",
        "completion_tokens",
        "cached_prompt_tokens",
    }
    # a step whose tool asked no model is written as before: no tool fields
    assert not {"tool_calls", "tool_cached_calls", "tool_usage"} & set(last)


def test_a_trace_written_before_tool_calls_were_counted_loads() -> None:
    old = {
        "format": "hammr-trace/1",
        "agent": "A",
        "question": "q?",
        "steps": [
            {
                "index": 0,
                "tool": "DecomposeQuestion",
                "usage": {"prompt_tokens": 30, "completion_tokens": 4},
                "child": None,
            },
            {"index": 1, "finish": "x", "usage": {"prompt_tokens": 40, "completion_tokens": 2}},
        ],
        "answer": "x",
        "status": "finished",
    }
    trace = Trace.from_dict(old)
    assert [(s.tool_calls, s.tool_cached_calls, s.tool_usage) for s in trace.steps] == [
        (0, 0, StepUsage())
    ] * 2
    assert (trace.llm_calls, trace.prompt_tokens, trace.completion_tokens) == (2, 70, 6)
    bad = json.loads(json.dumps(old))
    bad["steps"][0]["tool_usage"] = {"prompt_tokens": "12", "completion_tokens": 1}
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.tool_usage\.prompt_tokens should"):
        Trace.from_dict(bad)
    bad["steps"][0]["tool_usage"] = {"prompt_tokens": 12, "completion_tokens": 1}
    bad["steps"][0]["tool_calls"] = 1.5
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.tool_calls should be an integer"):
        Trace.from_dict(bad)


def test_the_trace_totals_add_tool_calls_to_own_calls_and_childrens() -> None:
    child = Trace(agent="C", question="c?")
    child.steps.append(Step(index=0, usage=StepUsage(5, 1), tool_calls=2,
                            tool_usage=StepUsage(7, 3)))  # fmt: skip
    t = Trace(agent="P", question="p?")
    t.steps.append(Step(index=0, usage=StepUsage(10, 2), child=child))
    t.steps.append(Step(index=1, router="code", tool_calls=1, tool_usage=StepUsage(20, 4)))
    assert t.llm_calls == 1 + (1 + 2) + 1
    assert (t.prompt_tokens, t.completion_tokens) == (10 + 5 + 7 + 20, 2 + 1 + 3 + 4)


# -- the other systems ------------------------------------------------------------------------


def vlm_with(fake: Any) -> Any:
    """A VLM backend whose model is ``fake`` (its own client, which the run's model is not)."""
    from hammr.backends.vlm import VLMBackend

    backend = VLMBackend("http://127.0.0.1:9/v1", "fake-vlm")
    backend.llm = fake
    return backend


async def test_scripted_fake_vlm_backed_tool_calls_are_counted() -> None:
    from hammr.tools.vision_tools import VQA

    vlm_fake = ScriptedLLM(["green"])
    vlm_tally = Tally(vlm_fake)
    agent = ReActAgent(
        name="Looker",
        description="Looks.",
        instructions="Answer about the image.",
        tools=[VQA],
    )
    fake = ScriptedLLM(
        [
            "[Thought]: I ask.\n[Act]: colour = VQA(image, 'What colour is it?')",
            "[Thought]: Seen.\n[Finish]: green",
        ]
    )
    tally = Tally(fake)
    ctx = ToolContext(backends={"vqa": vlm_with(vlm_tally)}, llm=tally)
    image = Image(PILImage.new("RGB", (24, 16), "green"))
    result = await agent.run("What colour is it?", {"image": image}, ctx=ctx)
    assert result.answer == "green"
    asked = result.trace.steps[0]
    assert asked.tool_calls == 1 and asked.tool_usage == StepUsage(
        vlm_tally.prompt_tokens, vlm_tally.completion_tokens
    )
    assert result.trace.llm_calls == tally.calls + vlm_tally.calls == 3
    assert result.trace.prompt_tokens == tally.prompt_tokens + vlm_tally.prompt_tokens


async def test_scripted_fake_direct_vlm_baseline_counts_its_one_vqa_call() -> None:
    from hammr.agents.baselines import DirectVLM

    vlm_fake = ScriptedLLM(["two"])
    ctx = ToolContext(backends={"vqa": vlm_with(vlm_fake)})
    image = Image(PILImage.new("RGB", (24, 16)))
    result = await DirectVLM().run("How many?", {"image": image}, ctx=ctx)
    assert result.answer == "two"
    assert result.trace.llm_calls == 1 == vlm_fake.calls  # the router's step makes none itself
    assert result.trace.steps[0].tool_calls == 1


async def test_scripted_fake_mulprog_module_and_explanation_calls_are_counted() -> None:
    from hammr.programs.modules import modules_with
    from hammr.programs.planner import ProgramPlanner, load_examples
    from hammr.programs.system import MulProgSystem
    from test_programs import context, scene_image

    program = (
        "BOX0=LOC(image=IMAGE,object='green square')\n"
        "IMAGE0=CROP(image=IMAGE,box=BOX0)\n"
        "ANSWER0=VQA(image=IMAGE0,question='What color is the square?')\n"
        "FINAL_RESULT=RESULT(var=ANSWER0)"
    )
    fake = ScriptedLLM([program, "The green square {BOX0} is green."])
    tally = Tally(fake)
    vlm_tally = Tally(ScriptedLLM(["green"]))
    modules = modules_with()
    planner = ProgramPlanner(list(modules.values()), load_examples()[:3])
    system = MulProgSystem(planner, modules, llm=tally, explainer="llm")  # type: ignore[arg-type]
    result = await system.run(
        "What color is the green square?",
        {"image": scene_image()},
        ctx=context(vqa=vlm_with(vlm_tally)),
    )
    assert result.answer == "green"
    steps = {s.tool: s for s in result.trace.steps}
    assert steps["VQA"].tool_calls == 1 and steps["VQA"].calls is None
    explain = steps["EXPLAIN"]
    assert explain.usage == usage_of(fake, 1, "The green square {BOX0} is green.")
    assert explain.raw == "The green square {BOX0} is green."
    assert result.trace.llm_calls == 3
    assert result.trace.prompt_tokens == tally.prompt_tokens + vlm_tally.prompt_tokens
    assert result.trace.completion_tokens == tally.completion_tokens + vlm_tally.completion_tokens


async def test_scripted_fake_mulprog_lines_written_before_a_failed_call_are_counted() -> None:
    """Under a grammar the planner writes a program one call per line; when a call fails,
    the PLAN step still counts the lines' calls and tokens, and the failed call."""
    from hammr.programs.modules import modules_with
    from hammr.programs.planner import ProgramPlanner, load_examples
    from hammr.programs.system import MulProgSystem
    from test_programs import context, scene_image

    lines = ["BOX0=LOC(image=IMAGE,object='green square')", "IMAGE0=CROP(image=IMAGE,box=BOX0)"]
    fake = ScriptedLLM(list(lines), grammar="gbnf")  # runs out at the third line: LLMError
    tally = Tally(fake)
    modules = modules_with()
    planner = ProgramPlanner(list(modules.values()), load_examples()[:3])
    system = MulProgSystem(planner, modules, llm=tally)  # type: ignore[arg-type]
    result = await system.run("What color?", {"image": scene_image()}, ctx=context())
    (step,) = result.trace.steps
    assert step.error_kind == "llm_failure" and fake.calls == 3
    assert step.calls == 3 and step.usage == StepUsage(tally.prompt_tokens, tally.completion_tokens)
    assert (result.trace.prompt_tokens, result.trace.completion_tokens) == (
        tally.prompt_tokens,
        tally.completion_tokens,
    )


async def test_scripted_fake_avis_library_action_calls_are_counted_once(tmp_path: Path) -> None:
    """AVIS's own calls (planner, object selector, reasoner) are the step's ``calls``; a
    library tool's (DecomposeQuestion as an action) are its ``tool_calls``; none twice."""
    from hammr.avis.actions import ActionRunner
    from hammr.avis.graph import load_graph
    from hammr.avis.system import AvisSettings, AvisSystem
    from hammr.tools.library import builtin_tools, default_backends

    graph_file = tmp_path / "graph.toml"
    graph_file.write_text(
        '[edges]\nSTART = ["object_select"]\nobject_select = ["split"]\n'
        '[actions.split]\ntool = "DecomposeQuestion"\ndescription = "Split the question."\n'
    )
    tools = {t.name: t for t in builtin_tools()}
    graph = load_graph(graph_file, list(tools))
    policy = AvisPolicy(
        {
            "decompose": ["Visual: what is it?\nKnowledge: #"],
            "plan": [plan("object_select", "what is it?"), plan("split", "what is it?")],
            "object": ["Why: the whole picture.\nObject: #0"],
            "reason": [verdict("informative"), verdict("answerable", "a cat")],
        }
    )

    def respond(request: LLMRequest) -> str:
        if request.messages[0].text() == DECOMPOSE_SYSTEM:
            return TWO_QUESTIONS
        return policy(request)

    fake = ScriptedLLM(respond)
    tally = Tally(fake)
    system = AvisSystem(
        graph, ActionRunner(graph.actions, tools, None), settings=AvisSettings(max_steps=4)
    )
    image = Image(PILImage.new("RGB", (64, 48), "white"))
    ctx = ToolContext(backends=default_backends(), llm=tally)
    result = await system.run("What is it?", {"image": image}, ctx=ctx)
    assert result.answer == "a cat", [(s.tool, s.error) for s in result.trace.steps]
    selected, split = [s for s in result.trace.steps if s.state is not None]
    assert (selected.calls, selected.tool_calls) == (3, 0)  # planner, selector, reasoner
    assert (split.calls, split.tool_calls) == (2, 1)  # planner, reasoner; the tool's one
    assert result.trace.llm_calls == 1 + 3 + 2 + 1 == fake.calls
    assert_trace_matches(result.trace, tally)


async def test_scripted_fake_avis_decomposition_reply_it_cannot_read_keeps_its_usage() -> None:
    from hammr.avis.graph import default_graph
    from hammr.avis.system import AvisSystem
    from test_avis_system import FakeRunner

    policy = AvisPolicy(
        {
            "decompose": ["sure! here you go"],
            "plan": [plan("vqa", "How many?")],
            "reason": [verdict("answerable", "two")],
        }
    )
    tally = Tally(policy.llm())
    system = AvisSystem(default_graph(), FakeRunner(default_graph()))
    img = Image(PILImage.new("RGB", (32, 32)))
    result = await system.run("How many?", {"image": img}, ctx=ToolContext(llm=tally))
    first = result.trace.steps[0]
    assert first.error_kind == "syntax" and first.raw == "sure! here you go"
    assert first.usage.completion_tokens == 4
    assert_trace_matches(result.trace, tally)


async def test_a_system_run_inside_a_step_meter_keeps_its_calls_to_itself() -> None:
    """traced(): a system's run is its own accounting scope, wherever it is run from."""
    outer = Step(index=0)
    model = metered(ScriptedLLM(lambda r: "x"))
    inner = Trace(agent="S", question="q")
    with step_meter(outer):
        with traced(inner, ToolContext()):
            await model.complete(LLMRequest(()))
        await model.complete(LLMRequest(()))
    assert outer.tool_calls == 1


async def test_scripted_fake_hindsight_annotation_reports_its_tokens(tmp_path: Path) -> None:
    from hammr.memory.annotate import AnnotationReport

    meter = Meter()
    with metering(meter):
        record(reply("{}", 300, 40))
        record(reply("{}", 310, 42, cached=True))
    report = AnnotationReport("m", 4, 1, (), 0, 2, 1.0, 1, usage=meter)
    assert "(2 calls, 610+82 tokens, 1 from hammr's cache, 1.0 s)" in report.lines()[0]
    plain = AnnotationReport("scripted", 4, 1, (), 0, 1, 1.0, 1)
    assert "(1 calls, 1.0 s)" in plain.lines()[0]


# -- against the real llama.cpp server ----------------------------------------------------------


@dataclass
class CountingProxy:
    """An HTTP proxy in front of a llama.cpp server that forwards every request unchanged
    and adds up the completions the server answered (its ``usage`` of each)."""

    upstream: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def serve(self) -> Iterator[str]:
        parsed = urllib.parse.urlsplit(self.upstream)
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                conn = http.client.HTTPConnection(host, port, timeout=600)
                try:
                    kind = self.headers.get("Content-Type", "application/json")
                    conn.request(method, self.path, body=body, headers={"Content-Type": kind})
                    resp = conn.getresponse()
                    data, status = resp.read(), resp.status
                    out_kind = resp.getheader("Content-Type", "application/json")
                finally:
                    conn.close()
                if method == "POST" and self.path.endswith("completions") and status == 200:
                    usage = json.loads(data).get("usage") or {}
                    with proxy.lock:
                        proxy.calls += 1
                        proxy.paths.append(self.path)
                        proxy.prompt_tokens += int(usage.get("prompt_tokens", 0))
                        proxy.completion_tokens += int(usage.get("completion_tokens", 0))
                self.send_response(status)
                self.send_header("Content-Type", out_kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


KNOWLEDGE_EXAMPLE = """\
Question: Where was the author of Velmora Tales born?
Variables:
[Thought]: I split the question.
[Act]: parts = DecomposeQuestion('Where was the author of Velmora Tales born?')
[Observe]: ['Who wrote Velmora Tales?', 'Where was that author born?'] (stored in 'parts')
[Thought]: I read the text.
[Act]: place = AnswerWithContext('Where was Ana Ruiz born?', 'Ana Ruiz was born in Porto.')
[Observe]: Porto (stored in 'place')
[Thought]: The text says Porto.
[Finish]: Porto"""


async def test_trace_figures_equal_what_the_real_server_answered(
    real_llm_server: LocalLlamaServer,
) -> None:
    """A ReAct agent whose tools ask the model (DecomposeQuestion, AnswerWithContext), on
    llama.cpp's own server (SmolLM2, under the step grammar) behind a counting proxy: the
    trace's LLM calls and prompt / completion tokens are the completions the server
    answered, tool calls included."""
    proxy = CountingProxy(real_llm_server.url)
    with proxy.serve() as url:
        llm = real_client(url + "/v1", server="llamacpp")
        agent = ReActAgent(
            name="Reader",
            description="Answers questions from texts.",
            instructions="Answer questions from texts: split the question, read, finish.",
            tools=[DecomposeQuestion, AnswerWithContext],
            examples=[KNOWLEDGE_EXAMPLE],
            inputs={},
            max_steps=3,
        )
        result = await agent.run(
            "Where was the author of Velmora Tales born?", ctx=ToolContext(llm=llm)
        )
        await llm.aclose()
    trace = result.trace
    steps = [(s.action, s.tool_calls, s.error) for s in trace.steps]
    tool_calls = sum(s.tool_calls for s in trace.steps)
    assert tool_calls >= 1, f"no tool asked the model: {steps}"
    print(
        f"\nserver answered {proxy.calls} completions ({proxy.prompt_tokens}+"
        f"{proxy.completion_tokens} tokens); the trace: {trace.llm_calls} calls, "
        f"{tool_calls} of them by tools ({trace.prompt_tokens}+{trace.completion_tokens})"
    )
    assert (trace.llm_calls, trace.prompt_tokens, trace.completion_tokens) == (
        proxy.calls,
        proxy.prompt_tokens,
        proxy.completion_tokens,
    ), steps
