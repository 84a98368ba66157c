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
an option letter, the option's text when the question lists it (``B. blue``). Where a sentence
of the guidance states an answer ("... is the correct answer", "the answer was ...", "the
right count is ..."), :func:`answer_mentions` adds every answer however short, in digits or
in words (``4``, ``four``), and a number within an answer (``4`` of ``4 cars``); so guidance
may still quote a tool's output ("DetectObject returned 4 boxes"), but not say it is the
answer. Guidance that speaks of the correct answer or the ground truth at all is refused
too: it is about this question, not an approach another can reuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hammr.eval.metrics.normalize import COUNT_WORDS
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
    if term.isdigit():  # 4 but not 4.5, 1,400 or 42
        pattern = rf"(?<![\w.,]){term}(?![\w]|[.,]\d)"
    elif len(term) == 1 and term.isalpha():
        # an option letter: as written, and not the article or pronoun ("A count is ...")
        return re.search(rf"(?<!\w){term.upper()}(?!\w)(?!\s+[a-z])", flat) is not None
    else:
        pattern = rf"(?<!\w){re.escape(term)}(?!\w)"
    return re.search(pattern, flat, re.IGNORECASE) is not None


_UNITS = sorted(COUNT_WORDS, key=lambda word: int(COUNT_WORDS[word]))[:20]
"""zero ... nineteen (the metrics' number words, in order)."""
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> list[str]:
    """``n`` (0-99) in English words: ``four``, ``twenty-one`` and ``twenty one``; [] beyond."""
    if 0 <= n < 20:
        return [_UNITS[n]]
    if 20 <= n < 100:
        tens, unit = divmod(n, 10)
        if unit == 0:
            return [_TENS[tens - 2]]
        return [f"{_TENS[tens - 2]}-{_UNITS[unit]}", f"{_TENS[tens - 2]} {_UNITS[unit]}"]
    return []


_WORD_VALUES = {w: n for n in range(100) for w in number_words(n)}


def spellings(term: str) -> list[str]:
    """``term`` and, for a whole number under 100, its other spelling (``4`` and ``four``,
    ``twenty-one`` and ``21``)."""
    flat = " ".join(term.lower().split())
    if flat.isdigit():
        return [flat, *number_words(int(flat))]
    if flat in _WORD_VALUES:
        n = _WORD_VALUES[flat]
        return [flat, *(w for w in number_words(n) if w != flat), str(n)]
    return [flat]


def answer_mentions(question: str, answers: Sequence[str]) -> list[str]:
    """What guidance must not name in a sentence that states an answer
    (:func:`states_answer`): every answer however short (for an option letter, the letter
    and the option's text), each in digits and in words, and each number within an answer."""
    terms: list[str] = []
    for a in answers:
        a = " ".join(str(a).split())
        found = [a]
        m = _OPTION_LABEL.match(a)
        if m is not None:
            letter = m.group(1).upper()
            found = [letter, option_text(question, letter) or ""]
        found += re.findall(r"(?<![\w.,])\d+(?![\w]|[.,]\d)", a)
        for term in filter(None, found):
            letter_only = len(term) == 1 and term.isalpha()  # kept as written: see reveals
            for spelling in [term] if letter_only else spellings(term):
                if spelling not in terms:
                    terms.append(spelling)
    return terms


_STATES_ANSWER = re.compile(
    r"\b(?:correct|right|true|actual|expected|real|final)\s+"
    r"(?:answer|count|number|total|value|result)s?\b"
    r"|\bground[- ]truth\b"
    r"|\banswer(?:s|ed)?\s+(?:is|was|are|were|should|would|must|of|equals?)\b"
    r"|\banswer(?:s|ed)?\s*[:=]"
    r"|\b(?:is|was|are|were)\s+(?:actually|correct|the\s+answer)\b"
    r"|\bshould\s+have\s+(?:been|said|answered|counted|found)\b",
    re.IGNORECASE,
)
"""A sentence that states what the answer is (or was, or should have been)."""

_SPEAKS_OF_ANSWER = re.compile(
    r"\b(?:correct|right|true|actual|expected)\s+answers?\b|\bground[- ]truth\b",
    re.IGNORECASE,
)
"""Words about this question's own answer, which no other question shares."""


def states_answer(sentence: str) -> bool:
    """Whether ``sentence`` says what an answer is, was or should have been."""
    return _STATES_ANSWER.search(sentence) is not None


def _sentences_of(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s]


def stated_answer(guidance: str, mentions: Sequence[str]) -> str | None:
    """The first of ``mentions`` that ``guidance`` names in a sentence stating an answer."""
    for sentence in _sentences_of(guidance):
        if states_answer(sentence):
            hit = next((t for t in mentions if reveals(sentence, t)), None)
            if hit is not None:
                return hit
    return None


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


def _entry_problems(
    step: int,
    score: Any,
    guidance: Any,
    forbidden: Sequence[str],
    mentions: Sequence[str] = (),
) -> list[str]:
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
    if leaked is None:
        leaked = stated_answer(guidance, mentions)
    if leaked is not None:
        out.append(
            f"step {step}'s guidance gives away this question's answer ({leaked!r}); advise "
            "on the approach instead"
        )
    elif (m := _SPEAKS_OF_ANSWER.search(guidance)) is not None:
        out.append(
            f"step {step}'s guidance speaks of this question's answer ({m.group(0)!r}); advise "
            "on an approach that other questions can reuse instead"
        )
    return out


def check_reply(
    text: str, n: int, forbidden: Sequence[str] = (), *, mentions: Sequence[str] = ()
) -> list[tuple[int, str]]:
    """(score, guidance) for steps 1..n from a reply, or :class:`ReplyProblem` saying all
    that is wrong with it. ``forbidden``: what the guidance must not contain
    (:func:`answer_terms`); ``mentions``: what it must not name in a sentence that states an
    answer (:func:`answer_mentions`)."""
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
        wrong = _entry_problems(step, score, guidance, forbidden, mentions)
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
    "answer_mentions",
    "answer_terms",
    "check_reply",
    "number_words",
    "option_text",
    "reply_grammar",
    "reply_schema",
    "reveals",
    "sentences",
    "spellings",
    "stated_answer",
    "states_answer",
    "takes_json_schema",
]
