"""Grounded explanations from traces: the template, an LLM's text with placeholders (a
scripted fake LLM), and traces of any system (a program's LOC lines, a ReAct agent's Detect
calls inside a child trace)."""

from __future__ import annotations

import pytest

from hammr.backends.llm.scripted import ScriptedLLM
from hammr.programs.explain import (
    ExplanationError,
    decoded_boxes,
    ground_text,
    grounded_objects,
    llm_explanation,
    template_explanation,
)
from hammr.trace import Step, Trace
from hammr.values import Box


def program_trace() -> Trace:
    t = Trace(agent="MulProg", question="Is the cup left of the plate?")
    t.steps = [
        Step(0, tool="LOC", action="BOX0=LOC(image=IMAGE,object='plate')", line=0,
             arguments={"image": {"$image": "h"}, "object": "plate"}, output_var="BOX0",
             output=[{"$box": [100, 50, 40, 30]}]),
        Step(1, tool="CROP_LEFTOF", action="IMAGE0=CROP_LEFTOF(image=IMAGE,box=BOX0)", line=1,
             output_var="IMAGE0", output={"$image": "h2", "size": [100, 200]}),
        Step(2, tool="LOC", action="BOX1=LOC(image=IMAGE0,object='cup')", line=2,
             arguments={"object": "cup"}, output_var="BOX1",
             output=[{"$box": [10, 60, 20, 20]}, {"$box": [40, 60, 20, 20]}]),
        Step(3, tool="LOC", action="BOX2=LOC(image=IMAGE,object='fork')", line=3,
             arguments={"object": "fork"}, output_var="BOX2", output=[]),
    ]  # fmt: skip
    return t


def test_boxes_are_decoded_from_step_outputs() -> None:
    assert decoded_boxes({"$box": [1, 2, 3, 4], "label": "cat"}) == [Box(1, 2, 3, 4, "cat")]
    assert decoded_boxes([{"$box": [1, 2, 3, 4]}, "x", [{"$box": [5, 6, 7, 8]}]]) == [
        Box(1, 2, 3, 4), Box(5, 6, 7, 8),
    ]  # fmt: skip
    assert decoded_boxes({"$box": [1, 2, 0, 4]}) == []  # not a box: skipped, not a crash
    assert decoded_boxes({"$image": "h"}) == []


def test_only_steps_that_found_boxes_are_grounded_objects() -> None:
    found = grounded_objects(program_trace())
    assert [(o.var, o.name, len(o.boxes)) for o in found] == [
        ("BOX0", "plate", 1),
        ("BOX1", "cup", 2),
    ]


def test_the_template_names_each_object_before_its_box_token() -> None:
    e = template_explanation(program_trace(), "yes")
    assert e.text == "I found the plate [BOX] and the cup [BOX], so the answer is yes."
    assert [(r.name, r.boxes) for r in e.boxes] == [
        ("plate", (Box(100, 50, 40, 30),)),
        ("cup", (Box(10, 60, 20, 20), Box(40, 60, 20, 20))),
    ]
    empty = template_explanation(Trace(agent="a", question="q"), "no")
    assert (empty.text, list(empty.boxes)) == ("The answer is no.", [])


def test_placeholders_become_box_tokens_linked_to_their_objects() -> None:
    e = ground_text(
        "The cup {BOX1} is left of the plate { BOX0 }.", grounded_objects(program_trace())
    )
    assert e.text == "The cup [BOX] is left of the plate [BOX]."
    assert [r.name for r in e.boxes] == ["cup", "plate"]
    with pytest.raises(ExplanationError, match=r"\{BOX7\}, which holds no boxes"):
        ground_text("The cup {BOX7}.", grounded_objects(program_trace()))
    with pytest.raises(ExplanationError, match="BOX2"):  # it found nothing, so no boxes to link
        ground_text("No fork {BOX2}.", grounded_objects(program_trace()))


async def test_an_llm_explanation_is_grounded_scripted_llm() -> None:
    llm = ScriptedLLM(["The cup {BOX1} stands left of the plate {BOX0}.\nextra line"])
    e = await llm_explanation(program_trace(), "Is the cup left of the plate?", "yes", llm)
    assert e.text == "The cup [BOX] stands left of the plate [BOX]."
    prompt = llm.requests[0].messages[0].text()
    assert "- BOX0: plate (1 boxes)" in prompt and "- BOX1: cup (2 boxes)" in prompt
    bad = ScriptedLLM(["The cup {ANSWER0} is there."])
    with pytest.raises(ExplanationError):
        await llm_explanation(program_trace(), "q", "yes", bad)


def test_any_trace_is_explained_a_react_agents_detect_inside_a_child() -> None:
    child = Trace(agent="ComplexCountingAgent", question="How many cats?")
    child.steps = [
        Step(0, tool="Detect", action="cats = Detect(image, 'cat')",
             arguments={"image": {"$image": "h"}, "query": "cat"}, output_var="cats",
             output=[{"$box": [0, 0, 10, 10], "label": "cat"}]),
    ]  # fmt: skip
    top = Trace(agent="QuestionDispatcherAgent", question="How many cats?")
    top.steps = [Step(0, tool="ComplexCountingAgent", child=child)]
    e = template_explanation(top, "1")
    assert e.text == "I found the cat [BOX], so the answer is 1."
    assert e.boxes[0].boxes == (Box(0, 0, 10, 10, "cat"),)
