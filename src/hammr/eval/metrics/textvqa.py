"""TextVQA accuracy, ported line by line from MMF's TextVQA evaluator.

Source: facebookresearch/mmf, ``mmf/utils/m4c_evaluators.py`` at commit
2dc099af7ce267561e4c2ae033c27eb36be5b3ea: ``EvalAIAnswerProcessor`` (the EvalAI answer
processing, itself a copy of pythia's) and ``TextVQAAccuracyEvaluator``. This is what the
TextVQA leaderboard computes. It differs from the VQA challenge script
(:mod:`hammr.eval.metrics.vqa`) in three ways: every answer is processed, whatever the
annotators did; ``word_tokenize`` first lower-cases, deletes every ',' and '?' and writes "'s"
as " 's"; and the digit-comma-digit test (``COMMA_STRIP``, a look-behind/look-ahead pattern) runs
after the commas are gone, so it never fires. The tables (contractions, number words,
articles, punctuation, period rule) are the VQA script's (:mod:`~hammr.eval.metrics.vqa_tables`).
MMF is Python 3, and so is this port: ``\\d`` matches any Unicode digit and ``str.lower`` is
used as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hammr.eval.metrics.vqa import vqa_process_digit_article
from hammr.eval.metrics.vqa_tables import PUNCTUATION
from hammr.eval.types import Sample, Score

PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")
COMMA_STRIP = re.compile(r"(?<=\d)(\,)+(?=\d)")
PERIOD_STRIP_COUNT = int(re.UNICODE)
"""As in the VQA script, ``re.UNICODE`` (32) is passed as re.sub's ``count``."""
OFFICIAL_ANSWER_COUNT = 10
"""MMF asserts that every question has exactly ten answers."""
AGREEMENT = 3


def evalai_word_tokenize(word: str) -> str:
    """``word_tokenize``: lower-case, delete ',' and '?', "'s" -> " 's", strip."""
    word = word.lower()
    word = word.replace(",", "").replace("?", "").replace("'s", " 's")
    return word.strip()


def evalai_process_punctuation(in_text: str) -> str:
    """``process_punctuation``: the VQA rule with MMF's ``COMMA_STRIP``."""
    out_text = in_text
    for p in PUNCTUATION:
        if (p + " " in in_text or " " + p in in_text) or (COMMA_STRIP.search(in_text) is not None):
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    return PERIOD_STRIP.sub("", out_text, count=PERIOD_STRIP_COUNT)


def evalai_process_digit_article(in_text: str) -> str:
    """``process_digit_article``: the VQA script's rule with Python 3's lower-casing (same
    tables, same steps; see :func:`hammr.eval.metrics.vqa.vqa_process_digit_article`)."""
    return vqa_process_digit_article(in_text, lower=str.lower)


def evalai_process_answer(item: str) -> str:
    """``EvalAIAnswerProcessor.__call__``: the string an answer is compared as."""
    item = evalai_word_tokenize(item)
    item = item.replace("\n", " ").replace("\t", " ").strip()
    item = evalai_process_punctuation(item)
    return evalai_process_digit_article(item)


def textvqa_answer_scores(raw_answers: Sequence[str]) -> dict[str, float]:
    """``_compute_answer_scores``: each distinct processed answer -> its accuracy.

    With ten answers this is MMF's computation: leave each annotator out in turn, score
    ``min(1, matches among the other nine / 3)``, average the ten. MMF refuses other counts;
    hammr runs the same leave-one-out average with full credit at ``min(3, n - 1)`` matching
    other annotators, which is MMF's formula unchanged for four or more answers and lets
    unanimous annotators give 1.0 with two or three; a single answer scores 1.0 for itself
    (plain exact match of the processed strings). No answers raises :class:`ValueError`.
    """
    answers = [evalai_process_answer(a) for a in raw_answers]
    if not answers:
        raise ValueError("TextVQA accuracy needs at least one ground-truth answer")
    if len(answers) == 1:
        return {answers[0]: 1.0}
    needed = min(AGREEMENT, len(answers) - 1)
    gt_answers = list(enumerate(answers))
    unique_answer_scores: dict[str, float] = {}
    for unique_answer in set(answers):
        accs: list[float] = []
        for gt_answer in gt_answers:
            other_answers = [item for item in gt_answers if item != gt_answer]
            matching_answers = [item for item in other_answers if item[1] == unique_answer]
            accs.append(min(1.0, float(len(matching_answers)) / needed))
        unique_answer_scores[unique_answer] = sum(accs) / len(accs)
    return unique_answer_scores


def textvqa_accuracy(prediction: str, answers: Sequence[str]) -> float:
    """The TextVQA accuracy of one prediction, as MMF's ``TextVQAAccuracyEvaluator`` computes
    it for ten answers (other counts: see :func:`textvqa_answer_scores`): the score of the
    processed prediction among the processed answers' scores, 0.0 when it is none of them."""
    scores = textvqa_answer_scores(answers)
    return scores.get(evalai_process_answer(prediction), 0.0)


class TextVQAAccuracy:
    """TextVQA accuracy (the leaderboard's, from MMF): see :func:`textvqa_accuracy`."""

    name = "textvqa_accuracy"

    async def score(self, prediction: str, sample: Sample) -> Score:
        value = textvqa_accuracy(prediction, sample.answers)
        detail = f"processed prediction {evalai_process_answer(prediction)!r}"
        if len(sample.answers) != OFFICIAL_ANSWER_COUNT:
            detail += f" ({len(sample.answers)} answers, not the official 10)"
        return Score(value=value, detail=detail)
