"""Replies that are not answers, refused in one place: every :class:`hammr.agent.AgentResult`.

A model that has run out of ideas often "answers" with what it was just told. Told "This is
your last step: write [Thought] and [Finish] with your best answer.", the embedded 135M model
finished with "write [Thought] and [Finish] with your best answer." That is hammr's text, not
the model's answer, and no system returns it as one. Every system's run ends in an
``AgentResult``, which passes its answer through :func:`refuse_non_answer`; four kinds of
reply are refused there:

* **empty**: nothing but spaces and punctuation;
* **the question repeated**: equal to the question (or to its first line, the question
  proper when options follow), ``Question:`` label or not, once case, spacing and
  punctuation are set aside. An answer that is merely *in* the question ("blue" for "Is the
  car blue?") is an answer;
* **hammr's instruction repeated**: at least :data:`MIN_WORDS` words copied in order out of
  text hammr wrote to instruct a model (case, spacing and punctuation set aside), forming
  one or more of its whole sentences, labelled lines or clauses after a colon ("write [Thought] and
  [Finish] with your best answer.", "the short answer"), or a run of at least
  :data:`LONG_COPY` of its words. That text is the step format and the last-step note, the
  agent's own instructions and tool cards, the other systems' prompts (:data:`PROMPTS`) and
  the error observations of the run; worked examples are left out, their answers being
  real answers. One- and two-word answers ("2", "yes", "red car") are never refused as
  instructions, nor are answers that only share words with them or are a fragment of one
  of their sentences ("in the middle of the image");
* **a label of hammr's reply format**: nothing but one of the words a reply format asks the
  model to choose from (:data:`LABELS`: AVIS's "answerable"), put where the answer goes.

A refused answer is recorded, not lost: the step that gave it keeps the model's text
(``raw``) and gets the error kind ``no_action`` (the reply holds no usable [Act] or
[Finish]; error analysis counts it as a formulation error) with the reason, and the trace
ends with status ``no_answer`` and the reason as its error. Evaluation scores such a sample
as answered wrong (it is not a failed try to be retried); ``hammr ask`` says that the model
gave no answer, and why.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import cache

from hammr.trace import Step, Trace

MIN_WORDS = 3
"""The fewest words of an answer refused as hammr's instruction."""
LONG_COPY = 8
"""Words copied in order out of hammr's instructions that make an answer a copy even when
they are not whole sentences or clauses."""

WHOLE = "whole"
FIRST_PARAGRAPH = "first paragraph"

PROMPTS: tuple[tuple[str, str, str], ...] = (
    ("hammr.agent", "FORMAT_RULES", WHOLE),
    ("hammr.agent", "LAST_STEP_NOTE", WHOLE),
    ("hammr.avis.prompts", "DECOMPOSE", FIRST_PARAGRAPH),
    ("hammr.avis.prompts", "PLANNER", WHOLE),
    ("hammr.avis.prompts", "PLANNER_BARE", WHOLE),
    ("hammr.avis.prompts", "OBJECT_SELECT", FIRST_PARAGRAPH),
    ("hammr.avis.prompts", "REASON_VISUAL", FIRST_PARAGRAPH),
    ("hammr.avis.prompts", "REASON_KNOWLEDGE", FIRST_PARAGRAPH),
    ("hammr.avis.prompts", "LLM_QA", WHOLE),
    ("hammr.avis.prompts", "BEST_EVIDENCE", WHOLE),
    ("hammr.programs.planner", "INSTRUCTIONS", WHOLE),
    ("hammr.programs.planner", "REPAIR", WHOLE),
    ("hammr.programs.planner", "REPAIR_AFTER", WHOLE),
    ("hammr.programs.direct", "INSTRUCTIONS", WHOLE),
    ("hammr.muse.system", "COT_INSTRUCTIONS", WHOLE),
    ("hammr.muse.system", "COT_CHOICE_RULE", WHOLE),
    ("hammr.muse.advisors", "AGENT_NOTE", WHOLE),
    ("hammr.muse.advisors", "ADVISOR_NOTE", WHOLE),
    ("hammr.muse.advisors", "ADVICE_HEADING", WHOLE),
    ("hammr.muse.reflexion", "HEADER", WHOLE),
    ("hammr.muse.expel", "RULES_HEADER", WHOLE),
    ("hammr.muse.expel", "EXAMPLES_HEADER", WHOLE),
)
"""The prompts hammr's systems write for their models, as (module, constant, part): the
instructions of each, without its worked examples (a prompt that carries examples gives its
instructions in its first paragraph). A ReAct agent's own instructions and tool cards come
with its result (see :class:`hammr.agent.AgentResult`)."""

LABELS: tuple[tuple[str, str], ...] = (("hammr.avis.analyses", "VERDICTS"),)
"""Labels hammr's reply formats ask a model to choose from, as (module, constant): AVIS's
reasoner answers "informative", "not informative" or "answerable" before its answer. An
answer that is nothing but one of them is the format's word copied into the answer's place,
whatever its length (the 135M model answered AVIS's rocket question "answerable")."""

EMPTY = "the model's answer was empty"
QUESTION = "the model repeated the question"
INSTRUCTION = "the model repeated hammr's instruction"
LABEL = "the model gave a label of hammr's reply format as its answer"

_WORD = re.compile(r"\w+")
_QUOTE_CHARS = 120


def words(text: str) -> list[str]:
    """``text`` as lower-case words: case, spacing and punctuation set aside."""
    return _WORD.findall(text.casefold())


def _is_empty(text: str) -> bool:
    """Nothing but spaces, punctuation and control characters (a symbol such as '$' counts)."""
    return all(unicodedata.category(ch)[0] in "PZC" for ch in text)


def _part(text: str, part: str) -> str:
    if part == FIRST_PARAGRAPH:
        return re.split(r"\n[ \t]*\n", text.strip(), maxsplit=1)[0]
    return text


_SEGMENT_END = re.compile(r"[.!?;:](?=\s|$)|\n(?=[ \t]|[\[\-*#>]|\n)|\s->\s")
"""Where a segment of an instruction ends: a sentence, a clause before a colon, a paragraph,
a line before an indented line (a tool card's), a step label or a list item, a tool's
signature before its ``->``. (Other line breaks only wrap the text.)"""


class Instructions:
    """Instruction texts, searchable for an answer copied out of them.

    Each text is cut into segments where its sentences, paragraphs, labelled lines and
    clauses before a colon end (``[Finish]: the short answer`` is two: "finish" and "the
    short answer")."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.words: list[str] = []
        self.starts: set[int] = set()
        """Indexes in :attr:`words` where a segment begins."""
        self.ends: set[int] = set()
        """Indexes in :attr:`words` one past a segment's last word."""
        self.at: dict[str, list[int]] = {}
        """Where each word occurs in :attr:`words`."""
        for text in texts:
            self.add(text)

    def add(self, text: str) -> None:
        for segment in _SEGMENT_END.split(text):
            said = words(segment)
            if said:
                self.starts.add(len(self.words))
                for w in said:
                    self.at.setdefault(w, []).append(len(self.words))
                    self.words.append(w)
                self.ends.add(len(self.words))
        self.words.append("")  # no copy runs on from one text into the next

    def copied(self, said: Sequence[str]) -> bool:
        """Whether the words ``said`` are these texts' words in order, either whole segments
        (one or more in a row) or at least :data:`LONG_COPY` words."""
        n = len(said)
        if n == 0:
            return False
        for i in self.at.get(said[0], ()):
            if tuple(self.words[i : i + n]) != tuple(said):
                continue
            if n >= LONG_COPY or (i in self.starts and i + n in self.ends):
                return True
        return False


@cache
def prompt_instructions() -> Instructions:
    """The instructions of :data:`PROMPTS`."""
    texts = []
    for module, name, part in PROMPTS:
        text = getattr(importlib.import_module(module), name)
        if not isinstance(text, str):
            raise TypeError(f"{module}.{name} is not a prompt text")
        texts.append(_part(text, part))
    return Instructions(texts)


@cache
def _labels() -> frozenset[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for module, name in LABELS:
        for label in getattr(importlib.import_module(module), name):
            found.add(tuple(words(str(label).replace("_", " "))))
    return frozenset(found)


def is_label(answer: str) -> bool:
    """Whether ``answer`` is only one of :data:`LABELS` (case, spacing, punctuation and
    underscores set aside)."""
    return tuple(words(answer.replace("_", " "))) in _labels()


def repeats_question(answer: str, question: str) -> bool:
    """Whether ``answer`` is ``question`` (or its first line) again, once case, spacing,
    punctuation and a leading 'Question:' are set aside."""
    said = words(answer)
    if said[:1] == ["question"]:
        said = said[1:] if len(said) > 1 else said
    lines = [line for line in question.strip().splitlines() if line.strip()]
    asked = [words(question), *([words(lines[0])] if len(lines) > 1 else [])]
    return bool(said) and any(said == a for a in asked)


def repeats_instructions(answer: str, instructions: Iterable[str] = ()) -> bool:
    """Whether ``answer`` is copied out of hammr's instructions (:data:`PROMPTS` and
    ``instructions``): at least :data:`MIN_WORDS` words that are, in order, one or more of
    their whole segments (sentences, labelled lines, clauses after a colon), or at least
    :data:`LONG_COPY` words of them."""
    said = words(answer)
    if len(said) < MIN_WORDS:
        return False
    return prompt_instructions().copied(said) or Instructions(instructions).copied(said)


def non_answer(answer: str, question: str, instructions: Iterable[str] = ()) -> str | None:
    """Why ``answer`` is not an answer to ``question`` (:data:`EMPTY`, :data:`QUESTION`,
    :data:`INSTRUCTION` or :data:`LABEL`), or None when it is one. ``instructions``: the
    text the system gave its model besides :data:`PROMPTS` (its instructions, tool cards,
    error observations)."""
    if _is_empty(answer):
        return EMPTY
    if repeats_question(answer, question):
        return QUESTION
    if repeats_instructions(answer, instructions):
        return INSTRUCTION
    if is_label(answer):
        return LABEL
    return None


HAMMR_ERRORS = frozenset(
    {
        "syntax",
        "no_action",
        "unknown_tool",
        "unknown_variable",
        "bad_arguments",
        "repeated_action",
        "capability_missing",
    }
)
"""Error kinds whose observation hammr writes (what to fix, what is missing), as opposed to
a tool's or a server's failure, whose message quotes what that component said."""

_QUOTED = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|\"[^\"\n]*\"")


def error_instructions(trace: Trace) -> list[str]:
    """The error observations hammr wrote into this run's prompt, each without what it
    quotes (an action, a variable's name: the model's own words)."""
    return [
        _QUOTED.sub(". ", s.error) for s in trace.steps if s.error and s.error_kind in HAMMR_ERRORS
    ]


def _answering_step(trace: Trace) -> Step | None:
    """The step that gave the trace's answer: the last with a [Finish], else the last."""
    finished = [s for s in trace.steps if s.finish is not None]
    if finished:
        return finished[-1]
    return trace.steps[-1] if trace.steps else None


def _quoted(answer: str) -> str:
    text = " ".join(answer.split())
    if len(text) > _QUOTE_CHARS:
        text = text[: _QUOTE_CHARS - 1] + "…"
    return f'"{text}"'


def refuse_non_answer(
    answer: str | None, trace: Trace, instructions: Iterable[str] = ()
) -> str | None:
    """``answer``, or None when it is not an answer (:func:`non_answer`); then the trace
    says so: its answering step gets the error kind ``no_action`` and the reason, its status
    becomes ``no_answer`` and its error the reason. The run's own error observations count
    as hammr's instructions too (:func:`error_instructions`)."""
    if answer is None:
        return None
    reason = non_answer(answer, trace.question, [*instructions, *error_instructions(trace)])
    if reason is None:
        return answer
    why = reason if reason == EMPTY else f"{reason}: {_quoted(answer)}"
    step = _answering_step(trace)
    if step is not None:
        step.finish = None
        step.error_kind, step.error = "no_action", f"not an answer: {why}"
    trace.answer = None
    trace.status = "no_answer"
    trace.error = why
    return None


__all__ = [
    "EMPTY",
    "INSTRUCTION",
    "LABEL",
    "LABELS",
    "MIN_WORDS",
    "PROMPTS",
    "QUESTION",
    "Instructions",
    "error_instructions",
    "non_answer",
    "prompt_instructions",
    "refuse_non_answer",
    "repeats_instructions",
    "repeats_question",
]
