"""VQA accuracy, ported line by line from the VQA challenge's evaluation script.

Source: GT-Vision-Lab/VQA, ``PythonEvaluationTools/vqaEvaluation/vqaEval.py`` at commit
a013f0043c1e2cdc995922dfe257f7149aa9af06 (2021-03-11, "Fixed processing answers bug"):
``VQAEval.evaluate``, ``processPunctuation`` and ``processDigitArticle``; the tables are in
:mod:`hammr.eval.metrics.vqa_tables`. The script is Python 2. Where Python 3 would read the
same code differently, this port keeps the Python 2 meaning: ``\\d`` in the two regexes matches
ASCII digits only (the patterns are compiled without ``re.UNICODE``), and lower-casing maps
each character on its own (Python 2 knows neither the final-sigma rule nor 'İ' -> 'i̇').

TextVQA's leaderboard uses MMF's variant of these rules instead: see
:mod:`hammr.eval.metrics.textvqa`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from hammr.eval.metrics.vqa_tables import ARTICLES, CONTRACTIONS, MANUAL_MAP, PUNCTUATION
from hammr.eval.types import Sample, Score

PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)", re.ASCII)
"""``self.periodStrip``. '(?!<=\\d)' is a look-ahead for the two characters '<=' and a digit,
which never matches in front of a period, so in effect: a period not followed by a digit."""
COMMA_STRIP = re.compile(r"(\d)(\,)(\d)", re.ASCII)
"""``self.commaStrip``: a comma between two digits."""
PERIOD_STRIP_COUNT = int(re.UNICODE)
"""The script calls ``periodStrip.sub("", outText, re.UNICODE)``: the flag lands in re.sub's
``count``, so at most 32 periods of one answer are removed."""
AGREEMENT = 3
"""``min(1, matches / 3)``: three other annotators giving the answer make it fully correct."""


def python2_lower(text: str) -> str:
    """``unicode.lower()`` of Python 2: each character's own lower-case form."""
    if text.isascii():
        return text.lower()
    return "".join("i" if c == "\u0130" else c.lower() for c in text)


def clean_answer(text: str) -> str:
    """The first steps the script applies to every answer: newline and tab to a space, strip."""
    return text.replace("\n", " ").replace("\t", " ").strip()


def vqa_process_punctuation(in_text: str) -> str:
    """``processPunctuation``. For each mark of :data:`~hammr.eval.metrics.vqa_tables.PUNCTUATION`
    in turn: deleted when the *original* text has it next to a space or has a digit-comma-digit
    anywhere, replaced by a space otherwise. Then periods not followed by a digit go."""
    out_text = in_text
    for p in PUNCTUATION:
        if (p + " " in in_text or " " + p in in_text) or COMMA_STRIP.search(in_text) is not None:
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    return PERIOD_STRIP.sub("", out_text, count=PERIOD_STRIP_COUNT)


def vqa_process_digit_article(in_text: str, lower: Callable[[str], str] = python2_lower) -> str:
    """``processDigitArticle``: lower-case, split on whitespace, number words to digits, drop
    a/an/the, then replace each word found in the contractions table, and join with spaces.
    (MMF's ``process_digit_article`` is the same code run by Python 3: ``lower=str.lower``.)"""
    out_text: list[str] = []
    for word in lower(in_text).split():
        # The script's manualMap.setdefault(word, word) also stores word -> word; same result.
        word = MANUAL_MAP.get(word, word)
        if word not in ARTICLES:
            out_text.append(word)
    for word_id, word in enumerate(out_text):
        if word in CONTRACTIONS:
            out_text[word_id] = CONTRACTIONS[word]
    return " ".join(out_text)


def normalize_vqa_answer(text: str) -> str:
    """An answer as the script compares it when the annotators disagree: :func:`clean_answer`,
    then :func:`vqa_process_punctuation`, then :func:`vqa_process_digit_article`. (When they
    all gave the same answer, the script compares :func:`clean_answer` strings only.)"""
    return vqa_process_digit_article(vqa_process_punctuation(clean_answer(text)))


def vqa_compared_answers(prediction: str, answers: Sequence[str]) -> tuple[str, list[str]]:
    """The prediction and the ground-truth answers as the script compares them.

    Every answer is cleaned (:func:`clean_answer`). Only when the cleaned ground-truth answers
    are not all the same (``len(set(gtAnswers)) > 1``) are both sides processed further, with
    :func:`vqa_process_punctuation` and :func:`vqa_process_digit_article`; unanimous annotators
    leave the prediction and the answers as cleaned, so case and punctuation must match.
    """
    res_ans = clean_answer(prediction)
    gt_answers = [clean_answer(a) for a in answers]
    if len(set(gt_answers)) > 1:
        gt_answers = [vqa_process_digit_article(vqa_process_punctuation(a)) for a in gt_answers]
        res_ans = vqa_process_digit_article(vqa_process_punctuation(res_ans))
    return res_ans, gt_answers


def vqa_accuracy(prediction: str, answers: Sequence[str]) -> float:
    """The VQA accuracy of one prediction, as ``vqaEval.py`` (a013f00) computes it.

    The strings compared are those of :func:`vqa_compared_answers`. Each ground-truth answer
    is left out in turn; the prediction scores ``min(1, matches among the others / 3)``; the
    scores are averaged. With VQA's ten answers: 0, 1, 2, 3 and 4+ matching annotators give
    0, 0.3, 0.6, 0.9 and 1.0.

    The script leaves out every answer record equal to the left-out one; VQA's records carry
    distinct ``answer_id``s, so that is exactly one, which is what is done here. The script puts
    no rule on the number of answers and neither does this port: with n answers the same
    formula runs, so with three or fewer even unanimous annotators give less than 1.0 (a single
    answer always scores 0). Use ``textvqa_accuracy`` or ``exact_match`` for such data.
    The one departure: no answers at all raises :class:`ValueError` (the script divides by zero).
    """
    if not answers:
        raise ValueError("VQA accuracy needs at least one ground-truth answer")
    res_ans, gt_answers = vqa_compared_answers(prediction, answers)
    gt_acc: list[float] = []
    for left_out in range(len(gt_answers)):
        matching = [a for i, a in enumerate(gt_answers) if i != left_out and a == res_ans]
        gt_acc.append(min(1.0, float(len(matching)) / AGREEMENT))
    return float(sum(gt_acc)) / len(gt_acc)


class VQAAccuracy:
    """VQA accuracy of the VQA challenge script: see :func:`vqa_accuracy`."""

    name = "vqa_accuracy"

    async def score(self, prediction: str, sample: Sample) -> Score:
        value = vqa_accuracy(prediction, sample.answers)
        compared, _ = vqa_compared_answers(prediction, sample.answers)
        unanimous = len({clean_answer(a) for a in sample.answers}) == 1
        how = "as written (unanimous annotators)" if unanimous else "processed"
        return Score(value=value, detail=f"compared {compared!r} {how}")
