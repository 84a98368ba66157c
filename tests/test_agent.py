"""The ReAct loop's machinery, driven by scripted fake LLMs and small real tools."""

from __future__ import annotations

import asyncio

import pytest
from PIL import Image as PILImage

from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLMError, LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import ToolContext, tool
from hammr.tools.image_tools import CropImage
from hammr.tools.ocr import OCR
from hammr.values import Box, Image


def img(w: int = 64, h: int = 48, colour: tuple[int, int, int] = (200, 30, 30)) -> Image:
    return Image(PILImage.new("RGB", (w, h), colour))


@tool
def Width(image: Image) -> int:
    """The width of an image in pixels."""
    return image.width


@tool
async def Slow(seconds: float) -> str:
    """Sleep, then say done."""
    await asyncio.sleep(seconds)
    return "done"


@tool
def Explode(image: Image) -> str:
    """Always fails (a broken tool)."""
    raise RuntimeError("kaboom")


def agent(llm: ScriptedLLM | None = None, **kw: object) -> ReActAgent:
    return ReActAgent(
        name="Tester",
        description="A test agent.",
        instructions="Answer.",
        tools=[Width, CropImage, Explode, OCR],
        llm=llm,
        **kw,  # type: ignore[arg-type]
    )


async def test_finish_first_step_with_scripted_llm() -> None:
    llm = ScriptedLLM(["[Thought]: Easy.\n[Finish]: red"])
    r = await agent(llm).run("What colour?", {"image": img()})
    assert r.answer == "red" and r.ok
    assert r.trace.steps[0].thought == "Easy."
    assert r.trace.steps[0].finish == "red"


async def test_prompt_has_instructions_cards_examples_question_and_variables() -> None:
    llm = ScriptedLLM(["[Finish]: x"])
    a = ReActAgent("T", "d", "Be precise.", [Width], examples=["Question: demo"], llm=llm)
    await a.run("How wide?", {"image": img(), "note": "hello"})
    system, user = llm.requests[0].messages
    assert "Be precise." in system.text()
    assert "Width(image: image) -> integer" in system.text()
    assert "The width of an image in pixels." in system.text()
    assert "Question: demo" in system.text()
    assert "Question: How wide?" in user.text()
    assert "- image: image 64x48" in user.text()
    assert "- note: hello" in user.text()
    assert llm.requests[0].stop  # stops before an invented observation


async def test_variables_flow_between_steps_with_scripted_llm() -> None:
    llm = ScriptedLLM(
        [
            "[Thought]: crop\n[Act]: c = CropImage(image, [0, 0, 10, 20])",
            "[Thought]: measure\n[Act]: Width(c)",
            "[Thought]: done\n[Finish]: 10",
        ]
    )
    r = await agent(llm).run("q", {"image": img()})
    assert r.answer == "10"
    s0, s1, _ = r.trace.steps
    assert s0.output_var == "c" and s0.output["region"] == [0.0, 0.0, 10.0, 20.0]
    assert s1.output_var == "width_1" and s1.output == 10
    assert s1.observation == "10 (stored in 'width_1')"
    # the observation went back to the model as the next user turn
    assert llm.requests[2].messages[-1].text() == "[Observe]: 10 (stored in 'width_1')"


@pytest.mark.parametrize(
    ("act", "kind", "needle"),
    [
        ("FilterObjects(image)", "unknown_tool", "available tools: CropImage, Explode, OCR, Width"),
        ("Width(picture)", "unknown_variable", "variables: image"),
        ("Width(image, 3)", "bad_arguments", "usage: Width(image: image)"),
        ("CropImage(image, [0, 0, -5, 5])", "bad_arguments", "positive"),
        ("Width('image')", "bad_arguments", "must be an image"),
        ("Explode(image)", "tool_failure", "kaboom"),
        ("OCR(image)", "capability_missing", "capability 'ocr' has no backend configured"),
        ("Width(image.size)", "syntax", "attribute"),
        ("Width(image[0])", "bad_arguments", "not a list"),
    ],
)
async def test_errors_become_observations_and_the_run_goes_on_with_scripted_llm(
    act: str, kind: str, needle: str
) -> None:
    llm = ScriptedLLM([f"[Thought]: try\n[Act]: {act}", "[Thought]: give up\n[Finish]: ok"])
    r = await agent(llm).run("q", {"image": img()})
    step = r.trace.steps[0]
    assert step.error_kind == kind
    assert needle in (step.error or ""), step.error
    assert step.observation.startswith("#ERROR#: ")
    assert llm.requests[1].messages[-1].text() == f"[Observe]: {step.observation}"
    assert r.answer == "ok"


async def test_reply_without_action_is_recorded_with_scripted_llm() -> None:
    llm = ScriptedLLM(["I think it is red.", "[Finish]: red"])
    r = await agent(llm).run("q", {"image": img()})
    assert r.trace.steps[0].error_kind == "no_action"
    assert r.trace.steps[0].raw == "I think it is red."
    assert r.answer == "red"


async def test_step_limit_is_a_recorded_failure_with_scripted_llm() -> None:
    def respond(req: LLMRequest) -> str:
        n = len(req.messages)
        return f"[Thought]: again\n[Act]: CropImage(image, [0, 0, {n}, {n}])"

    llm = ScriptedLLM(respond)
    r = await agent(llm, max_steps=3).run("q", {"image": img()})
    assert r.answer is None and not r.ok
    assert r.trace.status == "step_limit"
    assert len(r.trace.steps) == 3 and llm.calls == 3
    assert [s.output_var for s in r.trace.steps] == ["cropimage_1", "cropimage_2", "cropimage_3"]


async def test_llm_failure_ends_the_run_without_raising() -> None:
    llm = ScriptedLLM([])  # raises LLMError on first call
    r = await agent(llm).run("q", {"image": img()})
    assert r.trace.status == "llm_failure"
    assert r.trace.steps[0].error_kind == "llm_failure"
    assert "ran out" in (r.trace.error or "")


def test_empty_question_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        asyncio.run(agent(ScriptedLLM([])).run("  ", {"image": img()}))


async def test_agent_is_a_tool_and_nests_its_trace_with_scripted_llm() -> None:
    child = ReActAgent(
        "Measurer",
        "Measures images.",
        "Measure.",
        [Width],
        llm=ScriptedLLM(["[Act]: w = Width(image)", "[Finish]: 64 pixels"]),
    )
    parent = ReActAgent(
        "Boss",
        "Delegates.",
        "Delegate.",
        [child],
        llm=ScriptedLLM(["[Act]: Measurer('how wide?', image)", "[Finish]: done"]),
    )
    assert child.card().startswith("Measurer(question: text, image: image) -> answer")
    r = await parent.run("q", {"image": img()})
    step = r.trace.steps[0]
    assert step.observation == "64 pixels (stored in 'measurer_1')"
    assert step.child is not None and step.child.question == "how wide?"
    assert step.child.steps[0].output == 64
    assert r.trace.llm_calls == 4


async def test_failed_child_agent_keeps_its_trace_under_the_parent_step() -> None:
    child = ReActAgent(
        "Lost",
        "Never answers.",
        ".",
        [Width],
        max_steps=2,
        llm=ScriptedLLM(lambda req: "[Act]: Width(image)"),
    )
    parent = ReActAgent(
        "Boss", "", ".", [child], llm=ScriptedLLM(["[Act]: Lost('q', image)", "[Finish]: unknown"])
    )
    r = await parent.run("q", {"image": img()})
    step = r.trace.steps[0]
    assert step.error_kind == "tool_failure"
    assert "Lost could not answer" in (step.error or "")
    assert step.child is not None and step.child.status == "step_limit"
    assert r.answer == "unknown"


async def test_child_uses_the_parents_llm_when_it_has_none() -> None:
    child = ReActAgent("Kid", "k", ".", [Width])
    llm = ScriptedLLM(["[Act]: Kid('q', image)", "[Finish]: 1", "[Finish]: 2"])
    r = await ReActAgent("P", "", ".", [child], llm=llm).run("q", {"image": img()})
    assert r.trace.steps[0].child is not None
    assert r.trace.steps[0].child.answer == "1" and r.answer == "2"


async def test_concurrent_runs_of_one_agent_share_no_state_with_scripted_llm() -> None:
    def respond(req: LLMRequest) -> str:
        task = req.messages[1].text()
        n_assistant = sum(1 for m in req.messages if m.role == "assistant")
        if n_assistant == 0:
            # both runs store into the same variable name
            return "[Act]: w = Width(image)"
        if n_assistant == 1:
            return "[Act]: Slow(0.05)"
        first_obs = next(m.text() for m in req.messages if m.text().startswith("[Observe]"))
        return f"[Finish]: {task.splitlines()[0]} -> {first_obs.removeprefix('[Observe]: ')}"

    a = ReActAgent("Shared", "", ".", [Width, Slow], llm=ScriptedLLM(respond))
    r1, r2 = await asyncio.gather(
        a.run("first", {"image": img(10, 10)}), a.run("second", {"image": img(33, 10)})
    )
    assert r1.answer == "Question: first -> 10 (stored in 'w')"
    assert r2.answer == "Question: second -> 33 (stored in 'w')"
    assert r1.trace.steps[0].output == 10 and r2.trace.steps[0].output == 33


async def test_agent_tool_called_concurrently_shares_no_state_with_scripted_llm() -> None:
    def child_respond(req: LLMRequest) -> str:
        if not any(m.role == "assistant" for m in req.messages):
            return "[Act]: w = Width(image)"
        return "[Finish]: " + req.messages[-1].text().split()[1]

    child = ReActAgent("Measurer", "m", ".", [Width], llm=ScriptedLLM(child_respond))
    ctx = ToolContext()
    from hammr.tools.base import bind_arguments

    calls = [child.invoke(bind_arguments(child, ["q", img(w, 5)], {}), ctx) for w in (7, 8, 9, 10)]
    results = await asyncio.gather(*calls)
    assert [r.value for r in results] == ["7", "8", "9", "10"]


async def test_grammar_sent_only_where_supported_with_scripted_llm() -> None:
    inner = ScriptedLLM(
        ["[Thought]: a\n[Act]: c = CropImage(image, [0, 0, 4, 4])", "[Finish]: y"], grammar="gbnf"
    )
    await agent(inner).run("q", {"image": img()})
    g0, g1 = (r.grammar for r in inner.requests)
    assert g0 is not None and g1 is not None
    assert '"Width("' in g0 and '"FilterObjects("' not in g0
    assert '"c"' not in g0 and '"c"' in g1  # the new variable is usable in the next step

    plain = ScriptedLLM(["[Finish]: y"])
    await agent(plain).run("q", {"image": img()})
    assert plain.requests[0].grammar is None

    off = ScriptedLLM(["[Finish]: y"], grammar="gbnf")
    await agent(off, grammar=False).run("q", {"image": img()})
    assert off.requests[0].grammar is None


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        ReActAgent("x", "", "", [Width, Width])


def test_agent_without_llm_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no LLM"):
        asyncio.run(ReActAgent("x", "", "", [Width]).run("q", {"image": img()}))


async def test_llm_error_type_is_public() -> None:
    assert issubclass(LLMError, RuntimeError)
    assert Box(0, 0, 1, 1).area == 1


async def test_repeating_an_action_is_refused_with_a_hint_with_scripted_llm() -> None:
    llm = ScriptedLLM(lambda req: "[Thought]: again\n[Act]: w = Width(image)")
    r = await agent(llm, max_steps=3).run("q", {"image": img()})
    kinds = [s.error_kind for s in r.trace.steps]
    assert kinds == [None, "repeated_action", "repeated_action"]
    assert "step 1 already ran w = Width(image)" in (r.trace.steps[1].error or "")
    assert "[Finish]" in r.trace.steps[1].observation


async def test_last_step_asks_for_finish_and_grammar_allows_only_finish_with_scripted_llm() -> None:
    def respond(req: LLMRequest) -> str:
        n = len(req.messages)
        return f"[Act]: CropImage(image, [0, 0, {n}, {n}])"

    llm = ScriptedLLM(respond, grammar="gbnf")
    r = await agent(llm, max_steps=3).run("q", {"image": img()})
    first, last = llm.requests[0], llm.requests[-1]
    assert "(act | finish)" in (first.grammar or "")
    assert 'root ::= "[Thought]: " thought "\\n" finish' in (last.grammar or "")
    assert "This is your last step" in last.messages[-1].text()
    assert [s.forced for s in r.trace.steps] == [False, False, True]
    assert r.trace.status == "step_limit"  # the scripted model ignored the request


async def test_after_a_repeat_the_next_call_samples_with_scripted_llm() -> None:
    llm = ScriptedLLM(lambda req: "[Act]: w = Width(image)")
    await agent(llm, max_steps=3, finish_on_last_step=False).run("q", {"image": img()})
    temps = [(r.temperature, r.seed) for r in llm.requests]
    assert temps == [(0.0, None), (0.0, None), (0.7, 2)]


async def test_on_step_reports_every_agent_in_the_run_with_scripted_llm() -> None:
    child = ReActAgent(
        "Kid", "k", ".", [Width], llm=ScriptedLLM(["[Act]: Width(image)", "[Finish]: 1"])
    )
    parent = ReActAgent(
        "P", "", ".", [child], llm=ScriptedLLM(["[Act]: Kid('q', image)", "[Finish]: 2"])
    )
    seen: list[tuple[str, int, int, str | None]] = []
    ctx = ToolContext(on_step=lambda a, d, s: seen.append((a, d, s.index, s.action)))
    await parent.run("q", {"image": img()}, ctx=ctx)
    assert seen == [
        ("P", 0, 0, None),
        ("Kid", 1, 0, None),
        ("Kid", 1, 0, "Width(image)"),
        ("Kid", 1, 1, None),
        ("Kid", 1, 1, None),
        ("P", 0, 0, "Kid('q', image)"),
        ("P", 0, 1, None),
        ("P", 0, 1, None),
    ]


async def test_grandchild_without_llm_uses_its_callers_model_with_scripted_llm() -> None:
    grandchild = ReActAgent("G", "g", ".", [Width])
    child_llm = ScriptedLLM(["[Act]: G('q', image)", "[Finish]: from G", "[Finish]: child"])
    child = ReActAgent("C", "c", ".", [grandchild], llm=child_llm)
    parent_llm = ScriptedLLM(["[Act]: C('q', image)", "[Finish]: parent"])
    r = await ReActAgent("P", "", ".", [child], llm=parent_llm).run("q", {"image": img()})
    assert r.answer == "parent"
    assert child_llm.calls == 3 and parent_llm.calls == 2


async def test_same_call_on_a_rebound_variable_is_not_a_repeat_with_scripted_llm() -> None:
    llm = ScriptedLLM(
        [
            "[Act]: w = Width(image)",
            "[Act]: image = CropImage(image, [0, 0, 10, 10])",
            "[Act]: w = Width(image)",
            "[Finish]: done",
        ]
    )
    r = await agent(llm).run("q", {"image": img()})
    assert [s.error_kind for s in r.trace.steps] == [None, None, None, None]
    assert [s.output for s in r.trace.steps[::2][:2]] == [64, 10]


async def test_two_refused_repeats_in_a_row_leave_only_a_finish_with_scripted_llm() -> None:
    def respond(req: LLMRequest) -> str:
        if "This is your last step" in req.messages[-1].text():
            return "[Thought]: stuck\n[Finish]: 7"
        return "[Thought]: again\n[Act]: w = Width(image)"

    llm = ScriptedLLM(respond, grammar="gbnf")
    r = await agent(llm, max_steps=8).run("q", {"image": img()})
    kinds = [s.error_kind for s in r.trace.steps]
    assert kinds == [None, "repeated_action", "repeated_action", None]
    assert [s.forced for s in r.trace.steps] == [False, False, False, True]
    assert 'root ::= "[Thought]: " thought "\\n" finish' in (llm.requests[-1].grammar or "")
    assert r.answer == "7" and llm.calls == 4  # not 8 calls going round the loop


async def test_without_the_loop_guard_a_repeat_runs_again_and_no_step_is_forced_scripted_llm(
) -> None:  # fmt: skip
    llm = ScriptedLLM(lambda req: "[Thought]: again\n[Act]: w = Width(image)", grammar="gbnf")
    off = {"refuse_repeats": False, "finish_on_last_step": False}  # agent.loop_guard = false
    r = await agent(llm, max_steps=4, **off).run("q", {"image": img()})
    assert [s.error_kind for s in r.trace.steps] == [None] * 4  # every call ran the tool
    assert [s.output for s in r.trace.steps] == [r.trace.steps[0].output] * 4
    assert not any(s.forced for s in r.trace.steps) and r.trace.status == "step_limit"
    assert all("This is your last step" not in q.messages[-1].text() for q in llm.requests)
    finish_only = 'root ::= "[Thought]: " thought "\\n" finish'
    assert all(finish_only not in (q.grammar or "") for q in llm.requests)


async def test_a_call_whose_capability_is_missing_is_not_made_twice_with_scripted_llm() -> None:
    from hammr.tools.vision_tools import Caption

    llm = ScriptedLLM(lambda req: "[Thought]: describe\n[Act]: c = Caption(image)")
    r = await ReActAgent("x", "", "", [Caption], llm=llm, max_steps=4).run(
        "q", {"image": img()}, ctx=ToolContext(backends={})
    )
    kinds = [s.error_kind for s in r.trace.steps]
    assert kinds[:3] == ["capability_missing", "repeated_action", "repeated_action"]
    assert "it would fail again" in (r.trace.steps[1].error or "")
    assert r.trace.steps[3].forced
