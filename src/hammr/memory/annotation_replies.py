"""The reply a hindsight annotator must give, and how it is checked.

The reply is JSON, ``{"steps": [{"step": 1, "score": 7, "guidance": "..."}, ...]}``:
:func:`reply_grammar` (GBNF: exactly the trajectory's steps, in order; whole scores 0-10;
guidance of one or two sentences) constrains it where the backend takes a grammar,
:func:`reply_schema` where it takes a JSON schema. :func:`check_reply` checks a reply either
way (a model asked in words only may write anything) and says everything wrong with it, in
words that can be sent back to the model.

**No answers in guidance.** Guidance is shown to agents answering other questions, some of
them about the same images; it must teach an approach, not carry this question's answer.
:func:`answer_terms` lists what it must not contain: each ground-truth answer of 3 or more
characters (shorter ones, ``no`` or ``3``, are too common in ordinary advice to test) and, for
an option letter, the option's text when the question lists it (``B. blue``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hammr.memory.bank import MAX_SCORE

MAX_GUIDANCE_CHARS = 300
MAX_GUIDANCE_SENTENCES = 2
MIN_ANSWER_CHARS = 3


class ReplyProblem(ValueError):
    """What is wrong with an annotator's reply, in words that can be sent back to it."""


# -- constraints --------------------------------------------------------------------------


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def reply_grammar(n: int) -> str:
    """A GBNF grammar for the reply to a trajectory of ``n`` steps: exactly those steps in
    order, scores 0-10, guidance of one or two sentences without quotes or newlines."""
    steps = ' ", " '.join(f"s{i}" for i in range(1, n + 1))
    open_, close = _gbnf_literal('{"steps": ['), _gbnf_literal("]}")
    rules = [f"root ::= {open_} {steps} {close}"]
    mid, end = _gbnf_literal(', "guidance": "'), _gbnf_literal('"}')
    for i in range(1, n + 1):
        head = _gbnf_literal(f'{{"step": {i}, "score": ')
        rules.append(f"s{i} ::= {head} score {mid} guidance {end}")
    rules += [
        'score ::= [0-9] | "10"',
        'guidance ::= sentence (" " sentence)?',
        # printable ASCII but quotes, backslashes and sentence ends: a reply of n steps then
        # has a known longest length, which the request's max_tokens is sized to
        "sentence ::= [A-Z] [ #--/->@-\\[\\]-~]{4,140} [.!?]",
    ]
    return "\n".join(rules) + "\n"


def reply_schema(n: int) -> dict[str, Any]:
    """The JSON schema of the reply to a trajectory of ``n`` steps."""
    item = {
        "type": "object",
        "properties": {
            "step": {"type": "integer", "minimum": 1, "maximum": n},
            "score": {"type": "integer", "minimum": 0, "maximum": MAX_SCORE},
            "guidance": {"type": "string", "maxLength": MAX_GUIDANCE_CHARS},
        },
        "required": ["step", "score", "guidance"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": item, "minItems": n, "maxItems": n}},
        "required": ["steps"],
        "additionalProperties": False,
    }


def takes_json_schema(llm: object) -> bool:
    """Whether ``llm`` is constrained by a JSON schema (a response cache passes this on)."""
    return bool(getattr(llm, "json_schema_support", False))


# -- checking replies -----------------------------------------------------------------------

_OPTION_LABEL = re.compile(r"^\(?([A-Za-z])\)?$")
_ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|etc|vs|approx|cf|fig)\.", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?]+(?=\s+\S|$)")


def option_text(question: str, letter: str) -> str | None:
    """The text of option ``letter`` when the question lists its options (``A. red``,
    ``(B) blue``, ``C: green``, one per line or on one line); None when it does not."""
    pattern = re.compile(
        rf"(?:^|[\s(]){re.escape(letter)}[).:]\s*(.+?)"
        r"(?=\s+\(?[A-Z][).:]\s|\n|$)",
        re.MULTILINE,
    )
    m = pattern.search(question)
    if m is None:
        return None
    text = m.group(1).strip().rstrip(",;").strip()
    return text or None


def answer_terms(question: str, answers: Sequence[str]) -> list[str]:
    """What the guidance must not contain: each answer of 3+ characters, and for an option
    letter, the option's text when the question lists it (3+ characters too)."""
    terms: list[str] = []
    for a in answers:
        a = " ".join(str(a).split())
        m = _OPTION_LABEL.match(a)
        if m is not None:
            found = option_text(question, m.group(1).upper())
            a = found or ""
        if len(a) >= MIN_ANSWER_CHARS and a.lower() not in (t.lower() for t in terms):
            terms.append(a)
    return terms


def reveals(guidance: str, term: str) -> bool:
    flat = " ".join(guidance.split())
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", flat, re.IGNORECASE) is not None


def sentences(text: str) -> int:
    """How many sentences ``text`` has (common abbreviations do not end one)."""
    return max(1, len(_SENTENCE_END.findall(_ABBREVIATIONS.sub("", text.strip()))))


def _json_object(text: str) -> Any:
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fence is not None:
        body = fence.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start == -1 or end < start:
        raise ReplyProblem("it is not JSON (no {...} object in it)")
    try:
        return json.loads(body[start : end + 1])
    except json.JSONDecodeError as e:
        raise ReplyProblem(f"it is not valid JSON ({e.msg} at character {e.pos})") from None


def _entry_problems(step: int, score: Any, guidance: Any, forbidden: Sequence[str]) -> list[str]:
    """What is wrong with one step's score and guidance (nothing: an empty list)."""
    out: list[str] = []
    if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= MAX_SCORE:
        out.append(f"step {step}'s score must be a whole number 0-10, not {score!r}")
    if not isinstance(guidance, str) or not guidance.strip():
        return [*out, f"step {step}'s guidance is empty"]
    n_sentences = sentences(guidance)
    if len(guidance) > MAX_GUIDANCE_CHARS:
        out.append(
            f"step {step}'s guidance is {len(guidance)} characters long (at most "
            f"{MAX_GUIDANCE_CHARS})"
        )
    elif n_sentences > MAX_GUIDANCE_SENTENCES:
        out.append(
            f"step {step}'s guidance has {n_sentences} sentences (at most {MAX_GUIDANCE_SENTENCES})"
        )
    leaked = next((t for t in forbidden if reveals(guidance, t)), None)
    if leaked is not None:
        out.append(
            f"step {step}'s guidance gives away this question's answer ({leaked!r}); advise "
            "on the approach instead"
        )
    return out


def check_reply(text: str, n: int, forbidden: Sequence[str] = ()) -> list[tuple[int, str]]:
    """(score, guidance) for steps 1..n from a reply, or :class:`ReplyProblem` saying all
    that is wrong with it. ``forbidden``: what the guidance must not contain
    (:func:`answer_terms`)."""
    doc = _json_object(text)
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, list):
        raise ReplyProblem('it has no "steps" list')
    problems: list[str] = []
    found: dict[int, tuple[int, str]] = {}
    seen: set[int] = set()
    for i, item in enumerate(steps, 1):
        if not isinstance(item, dict):
            problems.append(f"entry {i} is not an object")
            continue
        step, score, guidance = item.get("step"), item.get("score"), item.get("guidance")
        if isinstance(step, bool) or not isinstance(step, int):
            problems.append(f'entry {i} has no whole-number "step"')
            continue
        if not 1 <= step <= n:
            problems.append(f"there is no step {step} (the attempt has steps 1 to {n})")
            continue
        if step in seen:
            problems.append(f"step {step} appears more than once")
            continue
        seen.add(step)
        if isinstance(score, float) and score.is_integer():
            score = int(score)
        if isinstance(guidance, str):
            guidance = " ".join(guidance.split())
        wrong = _entry_problems(step, score, guidance, forbidden)
        if wrong:
            problems += wrong
        elif isinstance(score, int) and isinstance(guidance, str):
            found[step] = (score, guidance)
    missing = [str(i) for i in range(1, n + 1) if i not in seen]
    if missing:
        problems.append(f"step{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing")
    if problems:
        raise ReplyProblem("; ".join(problems))
    return [found[i] for i in range(1, n + 1)]


__all__ = [
    "MAX_GUIDANCE_CHARS",
    "MAX_GUIDANCE_SENTENCES",
    "MIN_ANSWER_CHARS",
    "ReplyProblem",
    "answer_terms",
    "check_reply",
    "option_text",
    "reply_grammar",
    "reply_schema",
    "reveals",
    "sentences",
    "takes_json_schema",
]
