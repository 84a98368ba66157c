"""The line formats AVIS's prompts ask for: their GBNF grammars, JSON schemas and parsers.

Under a grammar (llama.cpp embedded or served, vLLM, SGLang) or, on servers that take no
grammar but a JSON schema (OpenAI, Gemini, Ollama), under the schema, the planner can only
name one of the candidate actions and the reasoner can only write one of the three
verdicts; a JSON reply is read field by field like the lines. Without either, a reply that
breaks the format raises :class:`ReplyError` with a message for the trace, and the run
recovers (the planner is asked again; a verdict-less output counts as not informative).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hammr.backends.llm.base import LLM, LLMRequest, LLMResponse, Message
from hammr.grammar_bounds import tokens_for
from hammr.trace import Verdict


class ReplyError(ValueError):
    """A model reply does not have the asked-for form; ``kind`` is the trace's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.response: LLMResponse | None = None
        """The reply, where the raiser had it to give (its usage still counts)."""


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_LINE = "[^\\n]"

DECOMPOSE_GRAMMAR = f'root ::= "Visual: " {_LINE}{{3,160}} "\\nKnowledge: " {_LINE}{{1,160}}\n'


def planner_grammar(candidates: Sequence[str]) -> str:
    names = " | ".join(_q(c) for c in candidates)
    return f'root ::= "Action: " ({names}) "\\nQuery: " {_LINE}{{3,200}}\n'


def object_grammar(ids: Sequence[int]) -> str:
    choices = " | ".join(_q(str(i)) for i in ids)
    return f'root ::= "Why: " {_LINE}{{3,240}} "\\nObject: #" ({choices})\n'


REASONER_GRAMMAR = (
    f'root ::= "Why: " {_LINE}{{3,300}} "\\nVerdict: " verdict\n'
    'verdict ::= "not informative" | ("informative" | "answerable") "\\nAnswer: " answer\n'
    f"answer ::= {_LINE}{{1,100}}\n"
)


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_TEXT: dict[str, Any] = {"type": "string"}
DECOMPOSE_SCHEMA = _schema({"visual": _TEXT, "knowledge": _TEXT})
REASONER_SCHEMA = _schema(
    {
        "why": _TEXT,
        "verdict": {"enum": ["not informative", "informative", "answerable"]},
        "answer": _TEXT,
    }
)


def planner_schema(candidates: Sequence[str]) -> dict[str, Any]:
    return _schema({"action": {"enum": list(candidates)}, "query": _TEXT})


def object_schema(ids: Sequence[int]) -> dict[str, Any]:
    return _schema({"why": _TEXT, "object": {"enum": list(ids)}})


def constrained_request(
    prompt: str,
    model: LLM,
    *,
    grammar: str | None,
    schema: dict[str, Any] | None,
    setting: bool | None,
    max_tokens: int,
) -> LLMRequest:
    """One user turn, constrained by the grammar where the backend takes GBNF, else by the
    JSON schema where it takes one; ``setting`` False ([llm] grammar = "off") turns both off."""
    use_grammar = grammar if model.grammar_support == "gbnf" else None
    use_schema = (
        schema if use_grammar is None and getattr(model, "json_schema_support", False) else None
    )
    if setting is False:
        use_grammar = use_schema = None
    return LLMRequest(
        messages=(Message("user", prompt),),
        # room for the grammar's longest reply: a constrained reply cut short is unusable
        max_tokens=tokens_for(use_grammar, max_tokens),
        temperature=0.0,
        grammar=use_grammar,
        json_schema=use_schema,
    )


@dataclass(frozen=True)
class Decomposition:
    visual: str
    knowledge: str

    def fill(self, visual_answer: str) -> str:
        """The knowledge sub-question with ``#`` replaced by the visual answer."""
        return self.knowledge.replace("#", visual_answer)

    @property
    def visual_only(self) -> bool:
        """The visual answer is the answer (the knowledge part is just ``#``)."""
        return self.knowledge.strip(" ?.") in ("", "#")


def parse_decomposition(text: str) -> Decomposition:
    visual = _field(text, "visual")
    knowledge = _field(text, "knowledge")
    if not visual or knowledge is None:
        raise ReplyError("syntax", "the decomposition has no 'Visual:' and 'Knowledge:' lines")
    return Decomposition(visual, knowledge or "#")


@dataclass(frozen=True)
class PlannerChoice:
    action: str
    query: str | None


def parse_plan(text: str, candidates: Sequence[str]) -> PlannerChoice:
    """The action the planner named (it must be a candidate) and the query it wrote."""
    named = _field(text, "action")
    if named is None:
        raise ReplyError(
            "no_action", f"the planner wrote no 'Action:' line; candidates: {', '.join(candidates)}"
        )
    words = re.findall(r"[a-z_]+", named.lower())
    action = next((w for w in words if w in candidates), None)
    if action is None:
        raise ReplyError(
            "unknown_tool",
            f"the planner chose {named!r}, which is not allowed here; candidates: "
            f"{', '.join(candidates)}",
        )
    return PlannerChoice(action, _field(text, "query") or None)


@dataclass(frozen=True)
class ObjectChoice:
    object_id: int
    reason: str


def parse_object(text: str, ids: Sequence[int]) -> ObjectChoice:
    fields = _json_fields(text)
    if fields is not None:
        text = f"Why: {fields.get('why', '')}\nObject: #{fields.get('object', '')}"
    found = re.findall(r"object\s*:?\s*#?\s*(\d+)", text, flags=re.IGNORECASE)
    chosen = [int(f) for f in found if int(f) in ids]
    if not chosen:
        raise ReplyError(
            "bad_arguments",
            f"the object selector named no object of {', '.join(f'#{i}' for i in ids)}",
        )
    return ObjectChoice(chosen[-1], _field(text, "why") or text.strip().splitlines()[0])


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    answer: str | None
    reason: str


_VERDICTS: tuple[tuple[str, Verdict], ...] = (
    ("not informative", "not_informative"),
    ("not_informative", "not_informative"),
    ("uninformative", "not_informative"),
    ("answerable", "answerable"),
    ("informative", "informative"),
)


def parse_judgement(text: str) -> Judgement:
    """The reasoner's verdict and answer; ReplyError('no_verdict') when it wrote none."""
    line = _field(text, "verdict")
    if line is None:
        raise ReplyError("no_verdict", "the reasoner's reply has no 'Verdict:' line")
    low = line.lower()
    verdict = next((v for key, v in _VERDICTS if key in low), None)
    if verdict is None:
        raise ReplyError(
            "no_verdict",
            f"the reasoner's verdict {line!r} is not one of: not informative, informative, "
            "answerable",
        )
    answer = _field(text, "answer") or None
    if verdict == "not_informative":
        answer = None
    if answer is not None and answer.lower().startswith("cannot be answered"):
        answer = None
    return Judgement(verdict, answer, _field(text, "why") or "")


def _json_fields(text: str) -> dict[str, Any] | None:
    """The fields of a reply written as one JSON object (under a schema), else None."""
    body = text.strip()
    if not body.startswith("{"):
        return None
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        return None
    return {str(k).lower(): v for k, v in doc.items()} if isinstance(doc, dict) else None


def _field(text: str, name: str) -> str | None:
    """The text after the last ``Name:`` at the start of a line, or the field ``name`` of a
    JSON reply (None when there is none)."""
    fields = _json_fields(text)
    if fields is not None:
        value = fields.get(name)
        return None if value is None else " ".join(str(value).split())
    found = re.findall(rf"(?im)^\s*{name}\s*:[ \t]*(.*)$", text)
    return found[-1].strip() if found else None
