"""Multiple-choice accuracy with option extraction from free text.

Used for the multiple-choice benchmarks MuSEAgent evaluates on (V* Bench, HR-Bench,
MME-RealWorld-Lite, ZoomBench; its section 4 and appendix A). Each question is right or wrong;
how questions are averaged (overall, or per task as MuSEAgent reports MME-RealWorld-Lite) is
the analysis's business, not this metric's. The benchmarks' own scripts differ in how they
read a model's reply, so the extraction is ours and documented in :func:`extract_choice`.
``sample.choices`` holds the option texts in order (letters A, B, C, ...);
``sample.answers[0]`` is the correct letter (an option's text is accepted too).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

from hammr.eval.types import Sample, Score

LETTERS = string.ascii_uppercase

# Letters a reply asserts as its answer, strongest forms first. The letter itself must be a
# capital (so 'the answer is a cat' asserts nothing) and must not run on into a word.
_L = r"([A-Z])(?![A-Za-z0-9])"
_ANSWER_FORMS = (
    # "Answer: B", "The answer is (B)", "Final answer: **B**", "the correct option is B",
    # "Answer: option C"
    re.compile(
        r"(?i:\banswer\b|\bcorrect\s+(?:option|choice)\b|\bbest\s+(?:option|choice)\b)"
        r"(?i:\s+is|\s+would\s+be|\s+should\s+be)?\s*[:=]?\s*"
        r"(?i:(?:option|choice)\s*)?[\(\[\*\s]*" + _L
    ),
)
_MARKED_FORMS = (
    re.compile(r"[\(\[]" + r"([A-Z])" + r"[\)\]]"),  # "(B)", "[B]"
    re.compile(r"\*\*\s*\(?([A-Z])(?:[\.\):]\s*|\)?)\*\*"),  # "**B**", "**B.**", "**(B)**"
    re.compile(r"(?m)^[\s\*>#-]*([A-Z])[\.\):](?=\s|$)"),  # "B." / "B)" / "B:" opening a line
    re.compile(r"(?i:\b(?:option|choice)\s+)" + _L),  # "option B", "choice C"
)
_WHOLE_LETTER = re.compile(r"^[\W_]*([A-Za-z])[\W_]*$")
_BARE_LETTER = re.compile(r"(?<![A-Za-z0-9'’])([A-Z])(?![A-Za-z0-9'’])")
_WORD_AFTER = re.compile(r"\s+[a-z]")


def _bare_letters(text: str, valid: str) -> list[str]:
    """Stand-alone capitals ('I think it is B'), except 'A' and 'I' followed by a lower-case
    word, which are the article and the pronoun ('A red car', 'I think')."""
    seen: list[str] = []
    for m in _BARE_LETTER.finditer(text):
        letter = m.group(1)
        if letter in "AI" and _WORD_AFTER.match(text, m.end()):
            continue
        if letter in valid and letter not in seen:
            seen.append(letter)
    return seen


@dataclass(frozen=True)
class Extraction:
    letter: str | None
    """The chosen option's letter, or None (nothing found, or ambiguous)."""
    how: str
    """'letter', 'answer-phrase', 'marked-letter', 'option-text', 'bare-letter', 'ambiguous'
    or 'none'."""
    candidates: tuple[str, ...] = ()
    """The distinct letters the deciding rule found (more than one when ambiguous)."""


def _letters(patterns: Sequence[re.Pattern[str]], text: str, valid: str) -> list[str]:
    seen: list[str] = []
    for pattern in patterns:
        for m in pattern.finditer(text):
            letter = m.group(1)
            if letter in valid and letter not in seen:
                seen.append(letter)
    return seen


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!?,;:'\"*`")


def _option_text_match(text: str, choices: Sequence[str]) -> Extraction:
    body = _norm(text)
    options = [_norm(c) for c in choices]
    exact = [i for i, o in enumerate(options) if o and o == body]
    if len(exact) == 1:
        return Extraction(LETTERS[exact[0]], "option-text", (LETTERS[exact[0]],))
    contained = [
        i
        for i, o in enumerate(options)
        if o and re.search(r"(?<!\w)" + re.escape(o) + r"(?!\w)", body)
    ]
    if not contained:
        return Extraction(None, "none")
    longest = max(len(options[i]) for i in contained)
    best = [i for i in contained if len(options[i]) == longest]
    letters = tuple(LETTERS[i] for i in best)
    if len(best) > 1:
        return Extraction(None, "ambiguous", letters)
    return Extraction(letters[0], "option-text", letters)


def extract_choice(text: str, choices: Sequence[str] = ()) -> Extraction:
    """The option a free-text reply chooses.

    Rules, in order; the first rule that finds anything decides:

    1. The whole reply is one letter, give or take punctuation and markup ('B', '(b)', 'C.',
       '**D**'); lower case is accepted here only.
    2. Answer phrases: 'Answer: B', 'The answer is (B)', 'Final answer: **C**', 'The correct
       option is D', 'Answer: option A'.
    3. Marked letters anywhere: '(B)', '[B]', '**B**', a line opening with 'B.' / 'B)' /
       'B:', 'option B' / 'choice B'.
    4. Option text (case-insensitive, whitespace-collapsed, as whole words): a reply equal to
       one option's text, else the options contained in it, the longest winning ('dark red'
       beats 'red').
    5. A bare capital letter standing alone ('I think it is B', 'B is correct'); 'A' and 'I'
       before a lower-case word are read as the article and the pronoun, not as options.

    Only letters of the given options count (A..Z when ``choices`` is empty); letters must
    be capitals in rules 2-3, so the article in 'the answer is a cat' is not an option. When a
    rule finds two different letters (or two different option texts of the same longest
    length) the reply is ambiguous and chooses nothing.
    """
    valid = LETTERS[: len(choices)] if choices else LETTERS
    stripped = text.strip()
    m = _WHOLE_LETTER.match(stripped)
    if m and m.group(1).upper() in valid:
        letter = m.group(1).upper()
        return Extraction(letter, "letter", (letter,))
    for how, patterns in (("answer-phrase", _ANSWER_FORMS), ("marked-letter", _MARKED_FORMS)):
        found = _letters(patterns, stripped, valid)
        if len(found) == 1:
            return Extraction(found[0], how, tuple(found))
        if len(found) > 1:
            return Extraction(None, "ambiguous", tuple(found))
    if choices:
        by_text = _option_text_match(stripped, choices)
        if by_text.how != "none":
            return by_text
    found = _bare_letters(stripped, valid)
    if len(found) == 1:
        return Extraction(found[0], "bare-letter", tuple(found))
    if len(found) > 1:
        return Extraction(None, "ambiguous", tuple(found))
    return Extraction(None, "none")


def correct_letter(sample: Sample) -> str:
    """The sample's correct letter: ``answers[0]`` as a letter ('B', '(B)', 'b'), or the letter
    of the option whose text it is."""
    if not sample.answers:
        raise ValueError(f"sample {sample.id!r} has no ground-truth answer")
    answer = sample.answers[0].strip()
    valid = LETTERS[: len(sample.choices)] if sample.choices else LETTERS
    m = _WHOLE_LETTER.match(answer)
    if m and m.group(1).upper() in valid:
        return m.group(1).upper()
    options = [_norm(c) for c in sample.choices]
    if _norm(answer) in options:
        return LETTERS[options.index(_norm(answer))]
    raise ValueError(
        f"sample {sample.id!r}: answer {answer!r} is neither an option letter nor an option text"
    )


class MultipleChoice:
    """Multiple-choice accuracy: 1.0 when the option extracted from the prediction (see
    :func:`extract_choice`) is the correct one. An ambiguous reply is wrong with detail
    'ambiguous'; a reply naming no option is wrong with detail 'no option found'."""

    name = "multiple_choice"

    async def score(self, prediction: str, sample: Sample) -> Score:
        gold = correct_letter(sample)
        got = extract_choice(prediction, sample.choices)
        if got.how == "ambiguous":
            return Score(0.0, detail="ambiguous")
        if got.letter is None:
            return Score(0.0, detail="no option found")
        value = 1.0 if got.letter == gold else 0.0
        return Score(value, detail=f"chose {got.letter} ({got.how}); correct {gold}")


_OPTION_LINE = re.compile(r"^\s*\(?([A-Z])[).:]\s+(.*\S)\s*$")


def lettered_options(text: str) -> list[str]:
    """The options a question lists on their own lines, lettered from A ('A. red',
    '(B) blue', 'C) green'; as the runner writes them after 'Options:'), else []."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _OPTION_LINE.match(line)), None)
    if start is None:
        return []
    found: list[str] = []
    for line in lines[start:]:
        m = _OPTION_LINE.match(line)
        if m is None or m.group(1) != chr(ord("A") + len(found)):
            break
        found.append(m.group(2))
    return found if len(found) >= 2 else []
