"""Advisors (memory that speaks before each step) and memory tools' records, on scripted fake
LLMs: where the advice lands in the prompt, that earlier turns never change, and what the
trace's ``retrieved`` lists hold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PIL import Image as PILImage

from hammr.advice import Advice, Situation
from hammr.agent import ReActAgent
from hammr.backends.llm.base import Message
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import Param, ToolContext, ToolResult
from hammr.trace import Trace
from hammr.values import Image, Value


def img() -> Image:
    return Image(PILImage.new("RGB", (40, 30), (10, 200, 30)))


@dataclass
class CountingAdvisor:
    """Advises at every step with the step number and what it saw of the trace."""

    name: str = "counting"
    seen: list[tuple[int, int, str]] = field(default_factory=list)

    async def advise(self, situation: Situation) -> Advice | None:
        self.seen.append((situation.step, len(situation.trace.steps), situation.question))
        return Advice(f"Hint {situation.step}.", {"hits": [{"score": 7 + situation.step}]})


@dataclass
class FirstStepOnly:
    name: str = "first"

    async def advise(self, situation: Situation) -> Advice | None:
        return Advice("Reflection: look closer.") if situation.step == 0 else None


@dataclass
class Broken:
    name: str = "broken"

    async def advise(self, situation: Situation) -> Advice | None:
        raise RuntimeError("bank unreadable")


class Recall:
    """A memory tool: its result carries a retrieval record."""

    name = "Recall"
    params = (Param("query", "text"),)
    returns = "text"

    def card(self) -> str:
        return "Recall(query: text) -> text\n  Look up past advice."

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        text = f"advice for {args['query']}"
        record: dict[str, Any] = {"source": "muse", "policy": "tool", "text": text, "hits": []}
        return ToolResult(text, observation=text, retrieved=record)


def make(llm: ScriptedLLM, advisors: list[Any], tools: list[Any] | None = None) -> ReActAgent:
    return ReActAgent(
        name="Tester",
        description="A test agent.",
        instructions="Answer.",
        tools=tools or [Recall()],
        llm=llm,
        advisors=advisors,
    )


def texts(messages: tuple[Message, ...]) -> list[str]:
    return [m.content if isinstance(m.content, str) else repr(m.content) for m in messages]


def test_advice_joins_the_newest_user_turn_and_earlier_turns_never_change() -> None:
    llm = ScriptedLLM(
        [
            "[Thought]: look it up\n[Act]: r = Recall('colour')",
            "[Thought]: again\n[Act]: s = Recall('size')",
            "[Thought]: done\n[Finish]: red",
        ]
    )
    advisor = CountingAdvisor()
    result = make(llm, [advisor]).run_sync("What colour?", {"image": img()})
    assert result.answer == "red"
    first, second, third = (texts(r.messages) for r in llm.requests)
    assert first[-1].endswith("Hint 0.") and first[-1].startswith("Question: What colour?")
    assert second[-1].startswith("[Observe]: advice for colour") and second[-1].endswith("Hint 1.")
    # byte-identical prefixes: each request starts with the whole previous one
    assert second[: len(first)] == first
    assert third[: len(second)] == second
    assert advisor.seen == [(0, 1, "What colour?"), (1, 2, "What colour?"), (2, 3, "What colour?")]


def test_the_trace_records_advisor_and_tool_retrievals_in_order() -> None:
    llm = ScriptedLLM(
        ["[Thought]: ask\n[Act]: r = Recall('colour')", "[Thought]: ok\n[Finish]: red"]
    )
    trace = make(llm, [CountingAdvisor()]).run_sync("What colour?", {"image": img()}).trace
    step0 = trace.steps[0].retrieved
    assert [(r["source"], r["policy"]) for r in step0] == [
        ("counting", "advisor"),
        ("muse", "tool"),
    ]
    assert step0[0]["text"] == "Hint 0." and step0[0]["hits"] == [{"score": 7}]
    assert step0[1]["text"] == "advice for colour"
    assert [r["source"] for r in trace.steps[1].retrieved] == ["counting"]
    again = Trace.from_dict(trace.to_dict())
    assert again.steps[0].retrieved == step0


def test_an_advisor_may_stay_silent_and_a_failing_one_is_recorded_not_fatal() -> None:
    llm = ScriptedLLM(["[Thought]: ask\n[Act]: r = Recall('x')", "[Thought]: ok\n[Finish]: blue"])
    result = make(llm, [FirstStepOnly(), Broken()]).run_sync("Q?", {"image": img()})
    assert result.answer == "blue" and result.trace.status == "finished"
    first, second = (texts(r.messages) for r in llm.requests)
    assert first[-1].endswith("Reflection: look closer.")
    assert "Reflection" not in second[-1]
    step0 = result.trace.steps[0].retrieved
    assert step0[0]["source"] == "first"
    assert step0[1]["source"] == "broken" and "bank unreadable" in step0[1]["error"]
    assert [r["source"] for r in result.trace.steps[1].retrieved] == ["broken"]


def test_with_advisors_and_with_tools_keep_each_other() -> None:
    base = make(ScriptedLLM(["[Finish]: x"]), [])
    advised = base.with_advisors([FirstStepOnly()])
    assert [a.name for a in advised.advisors] == ["first"] and base.advisors == ()
    retooled = advised.with_tools([Recall()])
    assert [a.name for a in retooled.advisors] == ["first"]


def test_an_agent_without_advisors_sends_exactly_what_it_did_before() -> None:
    llm = ScriptedLLM(["[Thought]: ok\n[Finish]: red"])
    trace = make(llm, []).run_sync("What colour?", {"image": img()}).trace
    assert texts(llm.requests[0].messages)[-1] == (
        "Question: What colour?\nVariables:\n- image: image 40x30"
    )
    assert trace.steps[0].retrieved == []
