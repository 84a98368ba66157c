"""MEVQA answer accuracy, to the letter of the official script, and hammr's normalised reading.

The official evaluation: github.com/LivXue/FS-MEVQA at commit
551e68709fb0cd0eb26f130a561e2bbb2bc26949, ``evaluation.py`` (the ``__main__`` block; the
earlier version at 5340630d74c69cbe769476f38a25e2d3824d78f2 compares the same way). For every
question id of the results it appends 1 when ``res[k]['answer'] == gts[k]['answer']``, else 0,
and prints the mean times 100. The comparison is Python string equality of the result's answer
and the dataset's ``answer``: no lower-casing, no stripping, no number words, so 'Bus', 'bus.'
and ' bus ' are all wrong against 'bus'. :func:`official_answer_correct` is that line, and
:class:`MEVQAAccuracy` (metric ``mevqa_accuracy``) scores with it: the default answer accuracy
of the ``mevqa`` suite and of ``hammr explain``.

MEAgent's own answers come from its program (``processes[k]['predicted_answer']`` in
``4recover_boxes.py``), already in GQA's one-word form; a language model writing prose does
not. :func:`normalised_answer_correct` is hammr's :class:`~hammr.eval.metrics.exact.ExactMatch`
on the same pair (case, edge punctuation, articles, number words, yes/no read from 'Yes, it
is.'), reported beside the official number as "answer accuracy (normalised)", never instead
of it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hammr.eval.metrics.exact import ExactMatch
from hammr.eval.types import Sample, Score

__all__ = [
    "MEVQAAccuracy",
    "accuracy",
    "normalised_answer_correct",
    "official_answer_correct",
]

_NORMALISED = ExactMatch()


def official_answer_correct(prediction: str | None, answer: str) -> bool:
    """``evaluation.py``'s test, ``res[k]['answer'] == gts[k]['answer']``: the two strings are
    equal, character for character. A sample with no prediction (None) is wrong."""
    if prediction is None:
        return False
    return prediction == answer


def normalised_answer_correct(prediction: str | None, answer: str) -> bool:
    """hammr's normalised comparison of the same pair (:class:`ExactMatch`), for the second
    row; None is wrong."""
    if prediction is None:
        return False
    return _NORMALISED.matches(prediction, (answer,))


def accuracy(verdicts: Iterable[bool]) -> float:
    """The mean of the verdicts (``sum(acc) / len(acc)``), 0..1; 0.0 for none (the official
    script would divide by zero)."""
    values = [1 if v else 0 for v in verdicts]
    return sum(values) / len(values) if values else 0.0


class MEVQAAccuracy:
    """1.0 when the prediction equals the sample's answer exactly, as FS-MEVQA's
    ``evaluation.py`` counts it (see the module docstring); the detail says whether hammr's
    normalised comparison would have accepted it."""

    name = "mevqa_accuracy"

    async def score(self, prediction: str, sample: Sample) -> Score:
        if not sample.answers:
            raise ValueError(f"sample {sample.id!r} has no ground-truth answer")
        answer = sample.answers[0]
        ok = official_answer_correct(prediction, answer)
        loose = normalised_answer_correct(prediction, answer)
        verdict = "right" if loose else "wrong"
        detail = f"official string equality with {answer!r}; normalised: {verdict}"
        return Score(value=1.0 if ok else 0.0, detail=detail)
