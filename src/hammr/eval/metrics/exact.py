"""Exact-match accuracy, the metric of GQA, TallyQA, NLVR2 and PointQA in HAMMR's suite."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hammr.eval.metrics.normalize import NO_WORDS, YES_WORDS, normalize_exact
from hammr.eval.types import Sample, Score

_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


class ExactMatch:
    """1.0 when the normalised prediction equals any normalised ground-truth answer.

    Source: HAMMR (Castrejón et al.), section 4.1 and Table 2, scores GQA, TallyQA, NLVR2 and
    PointQA by exact match. The datasets' own scorers compare a classifier's output as it is:

    * GQA: the official ``eval.py`` (distributed in the GQA site's eval.zip; read here as the
      verbatim copy in junayednaushad/Relation-Network-VQA, ``gqa/eval.py``, commit
      613d4a286b31f6886c9b51649f4619ce8f709b2a) scores ``toScore(predicted == gold)``: plain
      string equality of the prediction and ``question["answer"]``, with no processing at all.
    * TallyQA: no scorer ships with the data (manoja328/TallyQA_dataset); the authors' code
      (manoja328/tallyqacode, ``utils.py`` ``accuracy`` and ``eval_extra.py``
      ``eval_simp_comp``, commit 1efda74df3c01ac20fb667f671ca7fc94dd1aa78) compares integer
      arrays: the predicted count equals the answer.
    * NLVR2: lil-lab/nlvr ``nlvr2/eval/metrics.py`` (commit
      e6a286aa779fcaf6ecd331a42767915d1ae4fbf5) scores ``prediction.lower() ==
      example["label"].lower()`` with labels 'True'/'False'.

    A language model answers in prose ('Two.', 'The table', 'Yes'), so hammr departs on
    purpose: both sides go through :func:`~hammr.eval.metrics.normalize.normalize_exact`
    (lower-case, strip quotes, asterisks and trailing punctuation, collapse whitespace, drop
    articles, number words zero..twenty to digits), plus the options below. On predictions
    in the official format the result is the official one: the tests try every answer of the
    real GQA excerpts against every question, 'True'/'False' in any case against the real
    NLVR2 labels, and every count 0..20 against counts 0..15. (Two GQA vocabulary answers that
    differed only in case, edge punctuation, an article or a number word would be merged;
    none do in the excerpts.) The departure accepts more ways of writing the same answer.

    Options (each True, False, or None = decide per sample from its ground truth):

    * ``boolean`` for NLVR2, whose labels are 'True'/'False': answers that are or start
      with yes/true count as 'yes', with no/false as 'no'. Automatic: on when every
      ground-truth answer is one of yes/no/true/false.
    * ``numeric`` for counting (TallyQA, PointQA look-twice): an answer stating exactly one
      number is that number ('There are 3 cars.' == '3'); several different numbers are left
      as text, so they do not match. Automatic: on when every ground-truth answer is a number
      (digits or a number word).

    The automatic choice lets one instance serve every exact-match dataset of a suite.
    """

    name = "exact_match"

    def __init__(self, *, boolean: bool | None = None, numeric: bool | None = None) -> None:
        self.boolean = boolean
        self.numeric = numeric

    def modes(self, answers: Sequence[str]) -> tuple[bool, bool]:
        """(boolean, numeric) for a sample with these ground-truth answers."""
        plain = [normalize_exact(a) for a in answers]
        boolean = self.boolean
        if boolean is None:
            boolean = bool(plain) and all(p in YES_WORDS or p in NO_WORDS for p in plain)
        numeric = self.numeric
        if numeric is None:
            numeric = bool(plain) and all(_NUMBER.fullmatch(p) for p in plain)
        return boolean, numeric

    def normalize(self, text: str, answers: Sequence[str] = ()) -> str:
        boolean, numeric = self.modes(answers)
        return normalize_exact(text, boolean=boolean, numeric=numeric)

    def matches(self, prediction: str, answers: Sequence[str]) -> bool:
        boolean, numeric = self.modes(answers)
        pred = normalize_exact(prediction, boolean=boolean, numeric=numeric)
        return any(pred == normalize_exact(a, boolean=boolean, numeric=numeric) for a in answers)

    async def score(self, prediction: str, sample: Sample) -> Score:
        if not sample.answers:
            raise ValueError(f"sample {sample.id!r} has no ground-truth answer")
        boolean, numeric = self.modes(sample.answers)
        pred = normalize_exact(prediction, boolean=boolean, numeric=numeric)
        ok = any(
            pred == normalize_exact(a, boolean=boolean, numeric=numeric) for a in sample.answers
        )
        return Score(value=1.0 if ok else 0.0, detail=f"normalised prediction {pred!r}")
