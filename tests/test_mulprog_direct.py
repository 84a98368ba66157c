"""The direct baseline (`mulprog-direct`): one call answers, explains and lists boxes; parsed
into the same grounded form as MulProg's explanations. Replies come from a scripted fake LLM."""

from __future__ import annotations

import pytest
from PIL import Image as PILImage

from hammr.backends.llm.base import ImagePart
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.config import load_config
from hammr.programs.direct import DirectFormatError, DirectSystem, example_text, parse_direct
from hammr.programs.planner import load_examples
from hammr.systems import build_system
from hammr.values import Box, Image

IMAGE = Image(PILImage.new("RGB", (320, 240), "white"))

REPLY = """Answer: yes
Explanation: The cup {BOX0} stands left of the plate {BOX1}.
Boxes: BOX0=[10, 20, 30, 40]; BOX1=[200, 100, 50, 60]"""


def test_a_reply_becomes_an_answer_and_a_grounded_explanation() -> None:
    r = parse_direct(REPLY, IMAGE)
    assert r.answer == "yes" and r.problems == []
    assert r.explanation.text == "The cup [BOX] stands left of the plate [BOX]."
    assert [(b.name, b.boxes) for b in r.explanation.boxes] == [
        ("cup", (Box(10, 20, 30, 40),)),
        ("plate", (Box(200, 100, 50, 60),)),
    ]


def test_unlinkable_boxes_are_problems_not_crashes() -> None:
    text = (
        "answer: no\nexplanation: the dog {BOX0} and the cat {BOX3}\n"
        "boxes: BOX0=[300, 200, 50, 50]; BOX1=[1, 2, 0, 4]"
    )
    r = parse_direct(text, IMAGE)
    assert r.answer == "no" and r.explanation.text == "the dog and the cat"
    assert list(r.explanation.boxes) == []
    assert any("outside the 320x240 image" in p for p in r.problems)
    assert any("{BOX3} has no box" in p for p in r.problems)
    assert any(p.startswith("BOX1:") for p in r.problems)
    with pytest.raises(DirectFormatError):
        parse_direct("I cannot see a trashcan in this image.", IMAGE)


def test_the_examples_are_the_planners_in_the_direct_form() -> None:
    examples = load_examples()
    assert len(examples) == 16 and all(e.answer and e.explanation and e.boxes for e in examples)
    text = example_text(examples[0])
    assert text.startswith("Question: What color is the umbrella?\nAnswer: red\n")
    assert text.endswith("Boxes: BOX0=[212, 40, 180, 120]")
    for e in examples:  # every placeholder of an example names one of its boxes
        r = parse_direct(example_text(e), Image(PILImage.new("RGB", (640, 480))))
        assert r.problems == [] and r.explanation.text.count("[BOX]") == len(r.explanation.boxes)


async def test_one_call_sees_the_image_and_explains_scripted_llm() -> None:
    llm = ScriptedLLM([REPLY])
    result = await DirectSystem(llm=llm).run("Is the cup left of the plate?", {"image": IMAGE})
    assert result.answer == "yes" and result.trace.status == "finished"
    content = llm.requests[0].messages[1].content
    assert isinstance(content, tuple) and isinstance(content[0], ImagePart)
    assert content[0].image is IMAGE and "320x240" in str(content[1])
    direct, explain = result.trace.steps
    assert direct.tool == "DIRECT" and direct.raw == REPLY
    assert explain.output["text"] == "The cup [BOX] stands left of the plate [BOX]."
    assert result.trace.llm_calls == 1


async def test_a_reply_without_an_answer_ends_the_run_scripted_llm() -> None:
    llm = ScriptedLLM(["Sorry, I cannot see that."])
    result = await DirectSystem(llm=llm).run("q?", {"image": IMAGE})
    assert result.answer is None and result.trace.status == "no_answer"
    assert result.trace.steps[0].error_kind == "syntax"


def test_the_registry_builds_the_direct_baseline() -> None:
    system, _ = build_system(load_config(None, env={}), "mulprog-direct")
    assert isinstance(system, DirectSystem) and system.name == "mulprog-direct"
