"""Multimodal explanations: text whose ``[BOX]`` tokens follow the object names they ground,
each linked to boxes in root-image pixels.

The explainer reads a *trace*, not a program: every step whose output holds boxes (a
program's LOC line, a ReAct agent's Detect call, at any depth of child traces) is an object
it may name, with the name the step looked for. So the same explainer serves MulProg runs
and any stored hammr run (``hammr explain``).

Two writers. :func:`template_explanation` needs no model: it names every grounded object in
order and states the answer. :func:`llm_explanation` asks an LLM for one or two sentences
that write ``{BOXn}`` after each object they mention; each placeholder becomes ``[BOX]``
linked to that object's boxes. A placeholder that names no grounded object is an error the
caller records, and the template is used instead (never a made-up box).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hammr.backends.llm.base import LLM, LLMRequest, LLMResponse, Message
from hammr.eval.metrics.explanation import BoxRef, GroundedExplanation
from hammr.trace import Trace
from hammr.values import Box

BOX_TOKEN = "[BOX]"
NAME_ARGUMENTS = ("object", "objects", "query", "queries", "name", "label", "labels", "what")
_PLACEHOLDER = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")


@dataclass(frozen=True)
class Grounded:
    """An object a run found: the variable holding its boxes, its name, the boxes."""

    var: str
    name: str
    boxes: tuple[Box, ...]


class ExplanationError(ValueError):
    """The LLM's explanation cannot be grounded (a placeholder names no grounded object)."""


def decoded_boxes(value: Any) -> list[Box]:
    """The boxes in an encoded step output (``{"$box": [x, y, w, h]}``, or lists of them)."""
    if isinstance(value, dict) and "$box" in value:
        try:
            return [Box.from_xywh(value["$box"], label=value.get("label"))]
        except ValueError:
            return []
    if isinstance(value, list):
        return [b for item in value for b in decoded_boxes(item)]
    return []


def _name_of(arguments: dict[str, Any], boxes: Sequence[Box]) -> str:
    for key in NAME_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return ", ".join(value)
    labels = [b.label for b in boxes if b.label]
    return labels[0] if labels else "object"


def _walk(trace: Trace) -> Iterator[Trace]:
    yield trace
    for step in trace.steps:
        if step.child is not None:
            yield from _walk(step.child)


def grounded_objects(trace: Trace) -> list[Grounded]:
    """Every step output of the run (children included) that holds boxes, in order."""
    found: list[Grounded] = []
    for t in _walk(trace):
        for step in t.steps:
            boxes = decoded_boxes(step.output)
            if not boxes or step.error_kind:
                continue
            var = step.output_var or f"BOX{len(found)}"
            found.append(Grounded(var, _name_of(step.arguments, boxes), tuple(boxes)))
    return found


def template_explanation(trace: Trace, answer: str) -> GroundedExplanation:
    """'I found the umbrella [BOX] and the man [BOX], so the answer is red.'"""
    objects = grounded_objects(trace)
    refs = [BoxRef(o.name, o.boxes) for o in objects]
    if not objects:
        return GroundedExplanation(f"The answer is {answer}.", [])
    named = [f"the {o.name} {BOX_TOKEN}" for o in objects]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return GroundedExplanation(f"I found {listed}, so the answer is {answer}.", refs)


EXPLAIN_PROMPT = """\
Question: {question}
Answer: {answer}
Objects found in the image, each with the name of its boxes:
{objects}
Steps taken:
{steps}

In one or two sentences, explain why the answer is {answer}. Right after each object you
mention, write its boxes' name in braces, e.g. "the cup {{BOX0}} is left of the plate
{{BOX1}}". Use only the names listed above."""


def _steps_text(trace: Trace, limit: int = 12) -> str:
    lines = []
    for t in _walk(trace):
        for step in t.steps:
            if step.action:
                lines.append(f"- {step.action} -> {step.observation[:120]}")
    return "\n".join(lines[:limit]) or "- (none)"


def ground_text(text: str, objects: Sequence[Grounded]) -> GroundedExplanation:
    """Replace each ``{VAR}`` by ``[BOX]`` linked to that object's boxes (ExplanationError
    for a placeholder that names no grounded object)."""
    by_var = {o.var: o for o in objects}
    refs: list[BoxRef] = []

    def swap(m: re.Match[str]) -> str:
        obj = by_var.get(m.group(1))
        if obj is None:
            known = ", ".join(by_var) or "none"
            raise ExplanationError(
                f"the explanation names {{{m.group(1)}}}, which holds no boxes (known: {known})"
            )
        refs.append(BoxRef(obj.name, obj.boxes))
        return BOX_TOKEN

    grounded = _PLACEHOLDER.sub(swap, text)
    return GroundedExplanation(" ".join(grounded.split()), refs)


async def llm_explanation(
    trace: Trace,
    question: str,
    answer: str,
    llm: LLM,
    *,
    max_tokens: int = 120,
    on_reply: Callable[[LLMResponse], None] | None = None,
) -> GroundedExplanation:
    """An LLM's explanation of the run, grounded (ExplanationError when it cannot be).
    ``on_reply`` is given the model's reply as soon as it came (its usage counts, whether or
    not the explanation can be used)."""
    objects = grounded_objects(trace)
    listing = "\n".join(f"- {o.var}: {o.name} ({len(o.boxes)} boxes)" for o in objects)
    prompt = EXPLAIN_PROMPT.format(
        question=question,
        answer=answer,
        objects=listing or "- (none)",
        steps=_steps_text(trace),
    )
    reply = await llm.complete(
        LLMRequest(messages=(Message("user", prompt),), max_tokens=max_tokens)
    )
    if on_reply is not None:
        on_reply(reply)
    text = reply.text.strip().splitlines()[0] if reply.text.strip() else ""
    if not text:
        raise ExplanationError("the model wrote no explanation")
    return ground_text(text, objects)
