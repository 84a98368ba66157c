"""``mulprog-direct``: the MEAgent paper's GPT-4V baseline. One call of a vision-language
model, shown the image and the same worked examples as the planner, returns the answer, an
explanation with ``{BOXn}`` after each object it names, and the boxes; each ``{BOXn}``
becomes a ``[BOX]`` token linked to its box, so the explanation is scored like MulProg's.

The reply's form::

    Answer: red
    Explanation: The umbrella {BOX0} is red.
    Boxes: BOX0=[212, 40, 180, 120]

Boxes are (x, y, w, h) in the image's pixels. A box outside the image, a placeholder with no
box, or a reply without an answer are recorded as step errors; the answer still counts when
it is there (the explanation then holds only the boxes that could be linked).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hammr.agent import AgentResult, traced
from hammr.backends.llm.base import LLM, ImagePart, LLMError, LLMRequest, Message
from hammr.eval.metrics.explanation import BoxRef, GroundedExplanation
from hammr.grammar_bounds import tokens_for
from hammr.programs.explain import BOX_TOKEN
from hammr.programs.planner import ProgramExample, load_examples
from hammr.programs.system import explanation_output, model_and_image
from hammr.tools.base import ToolContext
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Box, Image, Value

if TYPE_CHECKING:
    from hammr.systems import Workbench

NAME = "mulprog-direct"
AGENT = "MulProgDirect"

INSTRUCTIONS = """\
Answer the question about the image, explain the answer in one sentence, and give the box
of every object the explanation names. Write {BOX0}, {BOX1}, ... right after each object in
the explanation, then list each box as NAME=[x, y, width, height] in the image's pixels.
Reply in exactly this form:
Answer: <short answer>
Explanation: <one sentence with {BOXn} after each object>
Boxes: BOX0=[x, y, w, h]; BOX1=[x, y, w, h]"""

REPLY_GRAMMAR = r"""
root ::= "Answer: " answer "\nExplanation: " explanation "\nBoxes: " boxes
answer ::= [^ \n] [^\n]{0,59}
explanation ::= [^ \n{}] ([^\n{}] | "{BOX" [0-9] "}"){0,299}
boxes ::= "none" | box ("; " box){0,7}
box ::= "BOX" [0-9] "=[" num ", " num ", " num ", " num "]"
num ::= [0-9]{1,5}
"""
"""The reply's form as a GBNF grammar, for backends that take one (a weak model then cannot
leave out the answer line); ``[llm] grammar = "off"`` sends none, as the paper's GPT-4V had."""

_FIELD = re.compile(r"(?im)^\s*(answer|explanation|boxes)\s*:\s*(.*)$")
_BOX = re.compile(r"([A-Za-z_]\w*)\s*[=:]\s*\[\s*([-\d.eE+, ]+?)\s*\]")
_PLACEHOLDER = re.compile(r"\{\s*([A-Za-z_]\w*)\s*\}")
_ARTICLES = {"a", "an", "the"}


class DirectFormatError(ValueError):
    """The reply has no answer in the expected form."""


@dataclass
class DirectReply:
    answer: str
    explanation: GroundedExplanation
    problems: list[str] = field(default_factory=list)
    """What could not be linked (a box outside the image, a placeholder with no box)."""


def example_text(example: ProgramExample) -> str:
    boxes = "; ".join(f"{n}=[{', '.join(f'{v:g}' for v in b)}]" for n, b in example.boxes)
    return (
        f"Question: {example.question}\nAnswer: {example.answer}\n"
        f"Explanation: {example.explanation}\nBoxes: {boxes}"
    )


def _name_before(text: str) -> str:
    words = [w.strip(".,;:!?\"'").lower() for w in text.split()]
    words = [w for w in words if w]
    return words[-1] if words and words[-1] not in _ARTICLES else "object"


def parse_direct(text: str, image: Image) -> DirectReply:
    """The reply's answer and its grounded explanation (DirectFormatError when there is no
    answer line)."""
    fields = {m.group(1).lower(): m.group(2).strip() for m in _FIELD.finditer(text)}
    answer = fields.get("answer", "")
    if not answer:
        raise DirectFormatError("the reply has no 'Answer:' line")
    problems: list[str] = []
    boxes: dict[str, Box] = {}
    for name, numbers in _BOX.findall(fields.get("boxes", "")):
        try:
            values = [float(v) for v in numbers.split(",") if v.strip()]
            box = Box.from_xywh(values)
        except ValueError as e:
            problems.append(f"{name}: {e}")
            continue
        if box.x < 0 or box.y < 0 or box.x + box.w > image.width or box.y + box.h > image.height:
            problems.append(
                f"{name} {box.xywh()} is outside the {image.width}x{image.height} image"
            )
            continue
        boxes[name] = box
    refs: list[BoxRef] = []
    out: list[str] = []
    last = 0
    explanation = fields.get("explanation", "")
    for m in _PLACEHOLDER.finditer(explanation):
        out.append(explanation[last : m.start()])
        last = m.end()
        linked = boxes.get(m.group(1))
        if linked is None:
            problems.append(f"{{{m.group(1)}}} has no box")
            continue
        refs.append(BoxRef(_name_before("".join(out)), (linked,)))
        out.append(BOX_TOKEN)
    out.append(explanation[last:])
    text_out = " ".join("".join(out).split())
    return DirectReply(answer, GroundedExplanation(text_out, refs), problems)


class DirectSystem:
    """One model call answers and explains (see the module docstring)."""

    name = NAME

    def __init__(
        self,
        examples: Sequence[ProgramExample] | None = None,
        *,
        llm: LLM | None = None,
        max_tokens: int = 200,
        grammar: bool | None = None,
    ) -> None:
        self.examples = [
            e for e in (examples if examples is not None else load_examples()) if e.answer
        ]
        self.llm = llm
        self.max_tokens = max_tokens
        self.grammar = grammar
        """True: always constrain the reply's form; False: never; None: where supported."""

    def request(self, question: str, image: Image, llm: LLM | None = None) -> LLMRequest:
        shots = "\n\n".join(example_text(e) for e in self.examples)
        task = (
            f"{shots}\n\nThe image is {image.width}x{image.height} pixels.\nQuestion: {question}\n"
        )
        content = (ImagePart(image), task)
        constrained = (
            llm is not None and llm.grammar_support == "gbnf" and self.grammar is not False
        )
        grammar = REPLY_GRAMMAR.strip() if constrained else None
        return LLMRequest(
            messages=(Message("system", INSTRUCTIONS), Message("user", content)),
            max_tokens=tokens_for(grammar, self.max_tokens),
            stop=("\nQuestion:",),
            grammar=grammar,
        )

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        model, image = model_and_image(NAME, self.llm, ctx, inputs)
        trace = Trace(agent=AGENT, question=question, model=model.name)
        trace.inputs = {"image": encode_value(image, trace.images)}
        with traced(trace, ctx):
            return await self._answer(question, image, model, trace)

    async def _answer(self, question: str, image: Image, model: LLM, trace: Trace) -> AgentResult:
        step = Step(index=0, tool="DIRECT", thought="answering and explaining in one call")
        trace.steps.append(step)
        started = time.perf_counter()
        try:
            reply = await model.complete(self.request(question, image, model))
        except LLMError as e:
            step.error_kind, step.error = "llm_failure", str(e)
            trace.status, trace.error = "llm_failure", str(e)
            return AgentResult(None, trace)
        finally:
            step.llm_latency_s = time.perf_counter() - started
        step.raw = reply.text
        step.usage = StepUsage.of(reply)
        try:
            parsed = parse_direct(reply.text, image)
        except DirectFormatError as e:
            step.error_kind, step.error = "syntax", str(e)
            trace.status, trace.error = "no_answer", str(e)  # the model's reply: a result
            return AgentResult(None, trace)
        if parsed.problems:
            step.error_kind, step.error = "bad_arguments", "; ".join(parsed.problems)
        explain = Step(index=1, tool="EXPLAIN", router="parsed")
        explain.output = explanation_output(parsed.explanation)
        explain.observation = parsed.explanation.text
        trace.steps.append(explain)
        trace.answer, trace.status = parsed.answer, "finished"
        return AgentResult(parsed.answer, trace)


def direct_system(bench: Workbench) -> DirectSystem:
    """The `mulprog-direct` system: the configured LLM (a served VLM sees the image; a
    text-only model gets the image as a placeholder) with the bundled examples."""
    from hammr.factory import grammar_setting

    return DirectSystem(grammar=grammar_setting(bench.config))
