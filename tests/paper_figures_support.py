"""What the paper-figure replays (test_paper_figures.py, test_paper_figures_hammr.py) share:
the scripted orchestrator LLM, the scripted stand-ins for the tools that need a model or the
web, HAMMR's system as the paper ran it, a small local knowledge base, and the call tree of
a trace.

Only the model and the services are scripted: the agents are hammr's own (built from its agent
files), and every tool that needs neither a model nor the web is the real one."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hammr.agents import AgentCatalog, AgentSystems
from hammr.agents.catalog import NAIVE_INSTRUCTIONS, NAIVE_NAME, Habits
from hammr.backends.kb.build import build_kb
from hammr.backends.kb.sqlite_kb import SqliteKB
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import Tool, ToolError, tool
from hammr.tools.knowledge_tools import ANSWER_SYSTEM, DECOMPOSE_SYSTEM
from hammr.tools.library import builtin_tools
from hammr.trace import Trace
from hammr.values import Box, Entity, Image

Reply = str | Callable[[LLMRequest], str]
"""One scripted model reply: the text, or a function of the request (to use what was observed)."""


def last_observation(request: LLMRequest) -> str:
    text = request.messages[-1].text()
    assert text.startswith("[Observe]: ")
    return re.sub(r" \(stored in '\w+'\)$", "", text[len("[Observe]: ") :])


# -- scripted stand-ins for the tools that need a model or the web ----------------------------


def scripted_detector(boxes: list[list[float]]) -> Any:
    @tool
    def DetectObject(image: Image, name: str) -> list[Box]:
        """Find every instance of an object class; returns labelled boxes.

        Args:
            image: the image to search.
            name: the object class, e.g. 'license plate'.
        """
        return [Box.from_xywh(b, label=name) for b in boxes]

    return DetectObject


def scripted_vqa(answers: Mapping[str, str]) -> Any:
    """The VQA model (PaLI-X in the paper): the figure's answer to each question it asks.
    Like the real tool it takes one image or a list (one answer each)."""

    def _vqa(image: list[Image], question: str) -> list[str]:
        """Ask a simple question about what an image shows; the answer is short.

        Args:
            image: the image (or crop) to look at.
            question: one plain visual question.
        """
        if question not in answers:
            raise ToolError(f"the scripted VQA was not asked {question!r} in the figure")
        return [answers[question]] * len(image)

    return tool(_vqa, name="VQA", vectorised="image", batched=True)


def scripted_lens(name: str, score: float = 0.9) -> Any:
    """Google Lens (RecognizeEntity here): the entity the figure says it recognised."""

    def _lens(image: Image) -> Entity:
        """Name the most specific thing an image shows (landmark, species, product, ...).

        Args:
            image: the image; crop to the object first.
        """
        return Entity(name, score)

    return tool(_lens, name="RecognizeEntity")


def scripted_object_in_image(seen: Sequence[bool]) -> Any:
    """ObjectInImage (a VLM in the paper): the figure's yes/no for each image it is shown."""

    def _object_in_image(image: list[Image], name: str) -> list[bool]:
        """Check whether an object is visible in an image.

        Args:
            image: the image (or crop) to look at.
            name: the object, e.g. 'dog'.
        """
        if len(image) != len(seen):
            raise ToolError(f"the scripted ObjectInImage expected {len(seen)} images")
        return list(seen)

    return tool(_object_in_image, name="ObjectInImage", vectorised="image", batched=True)


# -- HAMMR as the paper ran it ---------------------------------------------------------------


def paper_systems(*stand_ins: Tool, llm: ScriptedLLM) -> AgentSystems:
    """HAMMR's agents built from hammr's own agent files, with the built-in tools, each
    stand-in in place of the built-in tool of its name. The paper's system: the LLM
    dispatcher (no neighbour router) offered every specialist (Table B.1), tools only."""
    replace = {t.name: t for t in stand_ins}
    unknown = set(replace) - {t.name for t in builtin_tools()}
    assert not unknown, f"stand-ins for tools hammr does not have: {sorted(unknown)}"
    tools = [replace.get(t.name, t) for t in builtin_tools()]
    return AgentSystems.build(
        tools,
        {},
        setting="tools_only",
        router="llm",
        llm=llm,
        habits=Habits(offer_all=True),
    )


def knowledge_base(folder: Path, articles: Mapping[str, str]) -> SqliteKB:
    """A real SQLite knowledge base (the 'kb' backend of WikipediaArticle) holding just
    ``articles`` (title -> text): the encyclopedia without the web."""
    dump = folder / "articles.jsonl"
    dump.write_text(
        "".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in articles.items())
    )
    build_kb(dump, folder / "kb.sqlite", progress=False)
    return SqliteKB(folder / "kb.sqlite")


# -- one scripted LLM for every agent ------------------------------------------------------

_CATALOG = AgentCatalog.load()
TEXT_TOOLS = {ANSWER_SYSTEM: "AnswerWithContext", DECOMPOSE_SYSTEM: "DecomposeQuestion"}


def speaker(request: LLMRequest) -> str:
    """Who asks the model: the agent whose instructions head the system prompt, or the text
    tool (AnswerWithContext, DecomposeQuestion) whose system prompt it is."""
    system = request.messages[0].text()
    if system in TEXT_TOOLS:
        return TEXT_TOOLS[system]
    for spec in _CATALOG.specs.values():
        if system.startswith(spec.instructions):
            return spec.name
    if system.startswith(NAIVE_INSTRUCTIONS):
        return NAIVE_NAME
    raise AssertionError(f"no agent of hammr's catalogue has this prompt: {system[:80]!r}")


def _text_tool_reply(tool_name: str, request: LLMRequest, texts: Mapping[str, str]) -> str:
    prompt = request.messages[-1].text()
    question = re.search(r"^Question: (.*)$", prompt, re.M)
    assert question, prompt
    reply = texts.get(question.group(1))
    assert reply is not None, f"{tool_name} was asked {question.group(1)!r}, not in the figure"
    if tool_name == "AnswerWithContext":
        # the answer is read from the article the tool put in the prompt
        assert reply in prompt.split("\n\nQuestion: ")[0], f"{reply!r} is not in the text shown"
    return reply


def orchestrator(
    turns: Mapping[str, Sequence[Reply]], texts: Mapping[str, str] | None = None
) -> ScriptedLLM:
    """One scripted LLM that plays every agent of the system, as the paper's one orchestrator
    LLM (PaLM 2) does: ``turns`` holds each agent's replies in order (agent told apart by
    :func:`speaker`); ``texts`` answers the text tools' prompts by their question
    (AnswerWithContext: the answer, which must be in the text it is shown; DecomposeQuestion:
    the two questions)."""
    queues: dict[str, Iterator[Reply]] = {name: iter(replies) for name, replies in turns.items()}

    def respond(request: LLMRequest) -> str:
        who = speaker(request)
        if who in TEXT_TOOLS.values():
            return _text_tool_reply(who, request, texts or {})
        reply = next(queues.get(who, iter(())), None)
        assert reply is not None, f"{who} asked the model more often than in the figure"
        return reply(request) if callable(reply) else reply

    return ScriptedLLM(respond)


def speakers(llm: ScriptedLLM) -> list[str]:
    """Who asked the model, call by call."""
    return [speaker(r) for r in llm.requests]


# -- the call tree of a trace --------------------------------------------------------------


def call_tree(trace: Trace, depth: int = 0) -> list[str]:
    """Each tool or agent call of the run, depth first, indented by the level of the agent
    that made it: ``'  TwoHopEncyclopedicAgent -> SingleHopEncyclopedicAgent'``. A step
    that failed ends in ``!`` and its error kind; a [Finish] step reads ``-> [Finish] answer``."""
    lines: list[str] = []
    for s in trace.steps:
        pad = "  " * depth
        if s.tool is not None:
            failed = f" !{s.error_kind}" if s.error_kind else ""
            lines.append(f"{pad}{trace.agent} -> {s.tool}{failed}")
            if s.child is not None:
                lines.extend(call_tree(s.child, depth + 1))
        elif s.finish is not None:
            lines.append(f"{pad}{trace.agent} -> [Finish] {s.finish}")
    return lines
