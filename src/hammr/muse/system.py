"""The MuSEAgent family as systems (its Table 2): ``cot``, ``react`` and ``muse``.

* ``cot`` (vanilla chain of thought): one model call, no tools; the model reasons step by step
  and ends with ``Answer: ...`` (for a multiple-choice question, the option's letter). A model
  that sees gets the input images in its message; any other reads them as text lines.
* ``react``: the shared tool agent (:func:`hammr.muse.agent.react_agent`) as it is.
* ``muse``: the same agent searching an experience bank (``[memory] path``, ``--memory``):
  with ``SearchExperiences`` (``[memory] policy = "agent"``) or a search before each action
  (``"every_step"``, the paper's); see :mod:`hammr.muse.advisors`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hammr.agent import AgentResult, ReActAgent, traced
from hammr.backends.llm.base import (
    LLM,
    LLMError,
    LLMRequest,
    Message,
    sees_images,
    vision_limits_of,
)
from hammr.config import Config
from hammr.memory.search import ExperienceSearcher
from hammr.muse.advisors import MemorySettings, open_searcher, with_experience_search
from hammr.muse.agent import react_agent
from hammr.muse.search_tool import TOOL_NAME, SearchExperiences
from hammr.systems import Workbench
from hammr.tools.base import ToolContext
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Value, render_value
from hammr.vision import ImageBudget, labelled_images

COT_NAME = "CoT"
MUSE_NAME = "MuSEAgent"
COT_MIN_TOKENS = 768
"""Reasoning needs room: at least this many tokens, whatever ``[llm] max_tokens`` says."""

COT_INSTRUCTIONS = """\
You answer questions about images. Think step by step: say what the question asks, what you
can tell about the image, and how that leads to the answer. End with one last line of the
form
Answer: the short answer"""

COT_CHOICE_RULE = "The question lists options: the answer is the letter of the one you chose."
"""Added to the instructions for a multiple-choice question only (a weak model asked a
free-form question otherwise answers with a letter)."""

_SEARCH_EXAMPLE = """
Question: How many boats are moored in the harbour?
Variables:
- image: image 4000x3000
[Thought]: Before choosing a tool I look for guidance from past runs in states like mine.
[Act]: tips = SearchExperiences(['{first}', '{second}'], 3)
[Observe]: 2 past experiences (deep search under {first} -> {second}, k=3):
1. learned from success, score 9/10 (via {first}, similarity 0.81): Detect the objects first and count the boxes; zoom in where they are small.
2. learned from failure, score 3/10 (via {second}, similarity 0.74): Counting by eye over the whole image missed the small ones. (stored in 'tips')
[Thought]: Following that guidance, I detect the boats and count the boxes.
[Act]: boats = DetectObject(image, 'boat')
[Observe]: 4 boxes: boat at left:310/top:2210/width:140/height:60 (score 0.8), boat at left:820/top:2250/width:150/height:70 (score 0.7), boat at left:1500/top:2190/width:120/height:55 (score 0.6), boat at left:2900/top:2300/width:160/height:65 (score 0.6) (stored in 'boats')
[Thought]: Four boats were found along the quay.
[Finish]: 4"""  # noqa: E501


_SEARCH_EXAMPLE_PER_ROUND = """
Question: How many boats are moored in the harbour?
Variables:
- image: image 4000x3000
[Thought]: Before choosing a tool I look for guidance from past runs in states like mine.
[Act]: tips = SearchExperiences('{first}', 3)
[Observe]: 1 past experience (deep search round 1 of at most 3, under {first}, k=3):
1. learned from failure, score 3/10 (via {first}, similarity 0.74): Counting by eye over the whole image missed the small ones.
next: if this is not precise enough, call SearchExperiences again with one of {second} (2 more rounds at most); otherwise act on this guidance (stored in 'tips')
[Thought]: That says what failed, not what to do; I refine the search under another viewpoint.
[Act]: more = SearchExperiences('{second}', 3)
[Observe]: 1 past experience (deep search round 2 of at most 3, under {second}, k=3):
1. learned from success, score 9/10 (via {second}, similarity 0.81): Detect the objects first and count the boxes; zoom in where they are small.
next: that was this deep search's last round; act on its guidance (stored in 'more')
[Thought]: Following that guidance, I detect the boats and count the boxes.
[Act]: boats = DetectObject(image, 'boat')
[Observe]: 4 boxes: boat at left:310/top:2210/width:140/height:60 (score 0.8), boat at left:820/top:2250/width:150/height:70 (score 0.7), boat at left:1500/top:2190/width:120/height:55 (score 0.6), boat at left:2900/top:2300/width:160/height:65 (score 0.6) (stored in 'boats')
[Thought]: Four boats were found along the quay.
[Finish]: 4"""  # noqa: E501


def search_example(viewpoints: Sequence[str], per_round: bool = False) -> str:
    """The worked example of a deep search, under two viewpoints the bank has (a weak model
    copies the example's viewpoints, so they must be ones it can search); ``per_round``: one
    viewpoint a call, the second chosen after reading the first's hits."""
    first = viewpoints[0] if viewpoints else "question"
    second = next((v for v in viewpoints[1:] if v != first), first)
    example = _SEARCH_EXAMPLE_PER_ROUND if per_round else _SEARCH_EXAMPLE
    return example.replace("{first}", first).replace("{second}", second)


# -- cot ---------------------------------------------------------------------------------------

_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?answer\W*?\s*[:：]\s*(.*?)\W*$", re.IGNORECASE)
_ANSWER_IS = re.compile(r"answer\s+(?:is|would be|:)\s*[:\"'(*]*\s*([^\n]+)", re.IGNORECASE)
_OPTION = re.compile(r"^\s*\(?([A-Z])[.):]\s+(.+?)\s*$")
_LETTER = re.compile(r"^\(?\*{0,2}([A-Z])\*{0,2}\)?(?:$|[.):,]|\s)")


def options_of(question: str) -> dict[str, str]:
    """The lettered options of a multiple-choice question (``A. red`` lines), by letter."""
    found: dict[str, str] = {}
    for line in question.splitlines():
        m = _OPTION.match(line)
        if m:
            found[m.group(1)] = m.group(2)
    return found if len(found) >= 2 else {}


def clean_answer(text: str) -> str:
    return text.strip().strip("*_`").strip().rstrip(".").strip()


def option_letter(answer: str, options: Mapping[str, str]) -> str:
    """The option letter ``answer`` names (``B``, ``(B)``, ``B. blue``, the option's text, or
    words holding exactly one option's text), else ``answer`` unchanged."""
    m = _LETTER.match(answer.strip())
    if m and m.group(1) in options:
        return m.group(1)
    wanted = clean_answer(answer).lower()
    for letter, text in options.items():
        if clean_answer(text).lower() == wanted:
            return letter
    # "maybe blue": the one option whose text the answer holds as words
    named = [
        letter
        for letter, text in options.items()
        if clean_answer(text)
        and re.search(rf"\b{re.escape(clean_answer(text).lower())}\b", wanted) is not None
    ]
    return named[0] if len(named) == 1 else answer


@dataclass(frozen=True)
class CoTReply:
    reasoning: str
    answer: str | None
    """None: the reply holds nothing to answer with."""
    well_formed: bool
    """The reply ended with an ``Answer:`` line."""


def parse_cot(text: str, question: str = "") -> CoTReply:
    """The reasoning and answer of a chain-of-thought reply. The last ``Answer: X`` line
    gives the answer and what comes before it the reasoning. Without one (a malformed reply),
    the last "the answer is X" phrase, else the reply's last non-empty line, is taken and the
    reply counts as malformed. A multiple-choice answer becomes its option's letter."""
    lines = text.strip().splitlines()
    options = options_of(question)
    for i in range(len(lines) - 1, -1, -1):
        m = _ANSWER_LINE.match(lines[i].strip())
        if m and clean_answer(m.group(1)):
            answer = clean_answer(m.group(1))
            reasoning = "\n".join(lines[:i]).strip()
            return CoTReply(reasoning, option_letter(answer, options) if options else answer, True)
    body = text.strip()
    if not body:
        return CoTReply("", None, False)
    phrases = _ANSWER_IS.findall(body)
    last = phrases[-1] if phrases else next(ln for ln in reversed(lines) if ln.strip())
    answer = clean_answer(last) or last.strip()
    return CoTReply(body, option_letter(answer, options) if options else answer, False)


class CoTSystem:
    """Vanilla chain of thought: one model call, no tools (see the module docstring)."""

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        max_tokens: int = COT_MIN_TOKENS,
        temperature: float = 0.0,
        name: str = COT_NAME,
        instructions: str = COT_INSTRUCTIONS,
        stop: tuple[str, ...] = (),
    ) -> None:
        self.llm = llm
        self.stop = stop
        """Where the reply is cut (a one-call system over few-shot examples stops before
        the model writes the next example's question)."""
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = name
        self.instructions = instructions

    async def messages(
        self, model: LLM, question: str, variables: Mapping[str, Value]
    ) -> tuple[Message, ...]:
        lines = [f"Question: {question}"]
        if variables:
            lines.append("Inputs:")
            lines += [f"- {n}: {render_value(v)}" for n, v in variables.items()]
        text = "\n".join(lines)
        shown = [im for n, v in variables.items() for im in labelled_images(n, v)]
        if sees_images(model) and shown:
            budget = ImageBudget(vision_limits_of(model))
            user = Message("user", await asyncio.to_thread(budget.turn, text, shown))
        else:
            user = Message("user", text)
        instructions = self.instructions
        if options_of(question):
            instructions = f"{instructions}\n{COT_CHOICE_RULE}"
        return (Message("system", instructions), user)

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        model: LLM | None = self.llm or ctx.llm
        if model is None:
            raise ValueError(f"{self.name} has no LLM: pass llm= or set ToolContext.llm")
        if not question.strip():
            raise ValueError("the question is empty")
        variables = dict(inputs or {})
        trace = Trace(agent=self.name, question=question, model=model.name)
        trace.inputs = {n: encode_value(v, trace.images) for n, v in variables.items()}
        with traced(trace, ctx):
            step = Step(index=0)
            trace.steps.append(step)
            if ctx.on_step is not None:
                ctx.on_step(self.name, ctx.depth, step)
            request = LLMRequest(
                messages=await self.messages(model, question, variables),
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                stop=self.stop,
            )
            t0 = time.perf_counter()
            try:
                response = await model.complete(request)
            except LLMError as e:
                step.error_kind, step.error = "llm_failure", str(e)
                trace.status, trace.error = "llm_failure", str(e)
                return AgentResult(None, trace)
            finally:
                step.llm_latency_s = time.perf_counter() - t0
            step.raw = response.text
            step.cached = response.cached
            step.usage = StepUsage.of(response)
            reply = parse_cot(response.text, question)
            step.thought = reply.reasoning
            if reply.answer is None:
                step.error_kind, step.error = "no_action", "the model's reply was empty"
                trace.status, trace.error = "error", "no answer: the model's reply was empty"
            else:
                if not reply.well_formed:
                    step.error_kind = "syntax"
                    step.error = "no 'Answer:' line; the answer was taken from the reply's end"
                step.finish = reply.answer
                trace.answer, trace.status = reply.answer, "finished"
            if ctx.on_step is not None:
                ctx.on_step(self.name, ctx.depth, step)
        return AgentResult(trace.answer, trace)


# -- the registry's factories ------------------------------------------------------------------


def cot_system(bench: Workbench) -> CoTSystem:
    """``cot``: the configured model answering in one call, reasoning step by step."""
    cfg = bench.config
    return CoTSystem(
        bench.agents.llm,
        max_tokens=max(COT_MIN_TOKENS, int(cfg.get("llm.max_tokens", COT_MIN_TOKENS))),
        temperature=float(cfg.get("llm.temperature", 0.0)),
    )


def react_system(bench: Workbench) -> ReActAgent:
    """``react``: the shared tool agent, without memory."""
    return react_agent(bench)


def muse_memory(
    cfg: Config, backends: Mapping[str, Any]
) -> tuple[ExperienceSearcher, MemorySettings]:
    """What ``muse`` reads: the searcher over the experience bank of ``[memory] path`` and
    the ``[memory]`` settings; SpecError (one line) without a bank, for a file that is none
    (an empty file, a run store, a Reflexion or ExpeL memory), or when the configured
    embedder is not the one that built it. ``hammr systems`` checks a memory with it too
    (:func:`hammr.system_info.memory_problem`), so both say the same."""
    return open_searcher(cfg, backends, "muse")


def muse_system(bench: Workbench) -> ReActAgent:
    """``muse``: the tool agent searching the experience bank of ``[memory] path`` (SpecError
    without one, or when the configured embedder is not the one that built it)."""
    searcher, settings = muse_memory(bench.config, bench.backends)
    agent = react_agent(bench, name=MUSE_NAME)
    agent.description = (
        "Answers questions about images with visual tools, guided by past runs' experiences."
    )
    equipped = with_experience_search(agent, searcher, settings.options, settings.policy)
    search = equipped.tools.get(TOOL_NAME)
    if isinstance(search, SearchExperiences):
        example = search_example(search.offered(), per_round=search.per_round)
        equipped.examples = [*equipped.examples, example]
    return equipped


__all__ = [
    "COT_INSTRUCTIONS",
    "COT_NAME",
    "MUSE_NAME",
    "CoTReply",
    "CoTSystem",
    "cot_system",
    "muse_memory",
    "muse_system",
    "option_letter",
    "options_of",
    "parse_cot",
    "react_system",
    "search_example",
]
