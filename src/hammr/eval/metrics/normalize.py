"""Answer normalisation for two metrics: the Encyclopedic-VQA rules and our exact match.

* :func:`normalize_encvqa_answer` is ``preprocess_answer`` of the Encyclopedic-VQA evaluation
  code (google-research/google-research, ``encyclopedic_vqa/evaluation_utils.py``, commit
  8d8a4f1b27753c7580d16261a1468b3d6ad2c3d3), step for step.
* :func:`normalize_exact` is ours, for the exact-match datasets (GQA, TallyQA, NLVR2,
  PointQA) whose official scripts compare the strings as they are; :mod:`.exact` says how.

The VQA rules live with their metrics: :mod:`.vqa` (the VQA challenge script) and
:mod:`.textvqa` (MMF's EvalAI processing, TextVQA's leaderboard).
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from types import MappingProxyType

from hammr.eval.metrics.vqa_tables import CONTRACTIONS, MANUAL_MAP

# ---------------------------------------------------------------------------------------------
# Encyclopedic-VQA (evaluation_utils.py, preprocess_answer)
# ---------------------------------------------------------------------------------------------

ENCVQA_PUNCTUATION: frozenset[str] = frozenset(string.punctuation + "‘’´`_")
"""``_PUNCTUATION_CHARACTERS``: ASCII punctuation plus typographic quotes, the acute accent,
'`' and '_'; every one is deleted."""

ENCVQA_WORD_MAP: Mapping[str, str] = MappingProxyType(
    {
        **MANUAL_MAP,
        "entailment": "yes",
        "true": "yes",
        "contradiction": "no",
        "false": "no",
    }
)
"""``_DIGIT_MAP``: the VQA number words plus entailment/true -> yes, contradiction/false -> no."""

ENCVQA_ARTICLES = re.compile(r"\b(the answer is|a|an|the)\b")
LLM_SPAN_PREFIX = "<extra_id_0> "


def normalize_encvqa_answer(text: str) -> str:
    """An answer as the Encyclopedic-VQA evaluation compares it (``preprocess_answer``).

    In order: lower-case, newlines and tabs to spaces, strip; when the text starts with the T5
    span marker ``'<extra_id_0> '``, delete every occurrence of it; delete every character of
    :data:`ENCVQA_PUNCTUATION`; replace the whole words 'the answer is', 'a', 'an', 'the' by a
    space; map each word through :data:`ENCVQA_WORD_MAP`, then through the VQA contractions
    table; collapse whitespace. Every punctuation mark goes (hyphens, periods, apostrophes), so
    "don't" becomes 'dont' and then "don't" again, and '3.5' becomes '35'.
    """
    text = text.lower().replace("\n", " ").replace("\t", " ").strip()
    if text.startswith(LLM_SPAN_PREFIX):
        text = text.replace(LLM_SPAN_PREFIX, "")
    text = "".join("" if c in ENCVQA_PUNCTUATION else c for c in text)
    text = ENCVQA_ARTICLES.sub(" ", text)
    words = []
    for w in text.split():
        w = ENCVQA_WORD_MAP.get(w, w)
        words.append(CONTRACTIONS.get(w, w))
    return " ".join(" ".join(words).split())


_NUMBER_NAMES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)

ARTICLES: frozenset[str] = frozenset({"a", "an", "the"})

# ---------------------------------------------------------------------------------------------
# Exact match (ours)
# ---------------------------------------------------------------------------------------------

COUNT_WORDS: Mapping[str, str] = MappingProxyType({w: str(n) for n, w in enumerate(_NUMBER_NAMES)})
"""Number words our exact match turns into digits (TallyQA counts go up to the teens)."""

YES_WORDS: frozenset[str] = frozenset({"yes", "true"})
NO_WORDS: frozenset[str] = frozenset({"no", "false"})

_EDGE_CHARS = " \"'`“”‘’*"
_TRAILING_PUNCT = ".!?,;:"
_NUMBER_TOKEN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|[a-z]+")


def _canonical_number(token: str) -> str:
    value = float(token.replace(",", ""))
    return str(int(value)) if value.is_integer() else repr(value)


def extract_number(text: str) -> str | None:
    """The one number a (normalised, lower-case) counting answer states, as digits.

    Digit strings ('3', '1,200', '3.0' -> '3') and :data:`COUNT_WORDS` count. When the text
    states exactly one distinct number, that is it ('there are 3 cars' -> '3', 'three' ->
    '3'); when it states none but says 'no' or 'none' ('there are no cars') it is '0'; when it
    states several different numbers it is ambiguous and None is returned.
    """
    found: list[str] = []
    words: set[str] = set()
    for token in _NUMBER_TOKEN.findall(text):
        if token[0].isdigit():
            found.append(_canonical_number(token))
        elif token in COUNT_WORDS:
            found.append(COUNT_WORDS[token])
        else:
            words.add(token)
    distinct = set(found)
    if len(distinct) == 1:
        return found[0]
    if not distinct and words & {"no", "none"}:
        return "0"
    return None


def boolean_value(text: str) -> str | None:
    """'yes' or 'no' when a (normalised) answer is, or starts with, a yes/no/true/false word
    ('True', 'yes, both images show dogs', 'False.'); else None."""
    words = re.findall(r"[a-z]+", text)
    if not words:
        return None
    if words[0] in YES_WORDS:
        return "yes"
    if words[0] in NO_WORDS:
        return "no"
    return None


def normalize_exact(text: str, *, boolean: bool = False, numeric: bool = False) -> str:
    """An answer as our exact-match metric compares it.

    Always: newlines and tabs to spaces; lower-case; strip spaces, quotes and markdown
    asterisks from both ends; strip trailing '.', '!', '?', ',', ';', ':'; collapse inner
    whitespace; drop the articles a/an/the as whole words; number words zero..twenty to digits
    (:data:`COUNT_WORDS`). Inner punctuation is kept ('t-shirt', 'red, white').

    ``boolean=True`` (NLVR2): an answer that is or starts with yes/true becomes 'yes', one with
    no/false becomes 'no' (so the label 'True' and the answer 'Yes.' agree).
    ``numeric=True`` (counting): an answer stating exactly one number becomes that number in
    digits (see :func:`extract_number`).
    """
    text = text.replace("\n", " ").replace("\t", " ").lower()
    previous = None
    while previous != text:
        previous = text
        text = text.strip(_EDGE_CHARS).rstrip(_TRAILING_PUNCT)
    words = [COUNT_WORDS.get(w, w) for w in text.split() if w not in ARTICLES]
    text = " ".join(words)
    if boolean:
        value = boolean_value(text)
        if value is not None:
            return value
    if numeric:
        number = extract_number(text)
        if number is not None:
            return number
    return text
