"""Infoseek accuracy, ported line by line from Infoseek's evaluation script.

Source: ``infoseek_eval.py`` of github.com/edchengg/infoseek_eval at commit
c8ef0234d1a1d61cb5e6e2f38f26c2d701b09985, the evaluation code that Infoseek's release page
(open-vision-language/infoseek, README: "Contributed Code") links to; its ``run_evaluation.py``
prints the validation numbers the README quotes. open-vision-language/infoseek itself holds only
the release page and the annotation links, no code. Every function of the script's scoring is
here under its own name (``normalize_answer``, ``metric_numerical_range``,
``process_numerical_answer``, ``clean_str_range``, ``range_intersection_over_union``,
``harmonic_mean``, ...); the script's rules, as its code (not its docstrings) applies them:

* The reference is a record's ``answer_eval`` (the official files' list of accepted forms: the
  answer and its aliases); ``answer`` is not compared. The question type comes from
  ``infoseek_<split>_qtype.jsonl`` ('String', 'Numerical', 'Time'; compared lower-cased).
* String and Time questions: correct when :func:`normalize_answer` of the prediction equals
  that of any ``answer_eval`` item (lower-case, delete ASCII punctuation, replace the words
  a/an/the by a space, collapse whitespace). Time is exact match too: the script's docstring
  promises "+/- one year" and "the year of a date", its code does neither.
* Numerical questions: the reference is ``answer_eval[0]['range']`` (or
  ``answer_eval['range']``), its first two numbers. The prediction is read by
  :func:`process_numerical_answer`: '9-10' is a range, the first two numbers found are
  [low, high] when low <= high and the first number alone otherwise, one number is that
  number, no number is the range [0, 0]. A number is correct inside the range (bounds
  included); a range is correct inside it or with an intersection over union of at least
  0.5 (less 1e-12). The ±10% tolerance of ``metric_numerical_range`` applies only to a single
  reference number, which the script never passes (its references are always ranges); it is
  ported and tested as a function all the same.
* A split's score is the mean over its questions in percent, rounded to 2 decimals; the final
  score is the harmonic mean of the unseen-question and the unseen-entity scores (a zero taken
  as 1e-12), rounded to 2 decimals. A record is in the unseen-question split when its
  ``data_split`` ends with 'unseen_question', otherwise in the unseen-entity split.

Departures (none changes a score the script computes; each replaces a crash or file I/O):

* Where the script stops with a bare exception this port raises :class:`ValueError` saying
  why: a prediction holding a number such as '-.5.6' (the script keeps '-' and ``float('-')``
  fails: the branch for numbers with two periods fails every time it is reached), an empty
  ``answer_eval``, and a numerical reference that is not two numbers.
* :func:`evaluate` takes the loaded records instead of file paths; a prediction whose
  ``data_id`` is not in the reference is skipped, as the script skips it.
* In ``hammr eval`` every sample of a suite entry gets a prediction (a failed sample scores 0),
  whereas the script scores only the data_ids present in the predictions file.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any

from hammr.eval.types import Sample, Score

Number = float | list[float]
"""A prediction as :func:`process_numerical_answer` reads it: one number or [low, high]."""

NUMBER = re.compile(r"[-+]?[.]?[\d]+(?:,\d\d\d)*[\.]?\d*(?:[eE][-+]?\d+)?")
"""The script's number pattern (``re.findall`` in ``process_numerical_answer``)."""
ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = frozenset(string.punctuation)
TOLERANCE = 0.1
"""``metric_numerical_range``'s default tolerance (for a single reference number)."""
IOU_THRESHOLD = 0.5 - 1e-12
SPLITS = ("unseen_question", "unseen_entity")
"""The validation set's two splits, in the order the script passes them to the mean."""


# ---------------------------------------------------------------------------------------------
# Strings (normalize_answer, exact_match_score, metric_max_over_ground_truths)
# ---------------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """Lower-case, delete punctuation, replace a/an/the by a space, collapse whitespace."""

    def remove_articles(text: str) -> str:
        return ARTICLES.sub(" ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punctuation(text: str) -> str:
        return "".join(ch for ch in text if ch not in PUNCTUATION)

    def lowercase(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punctuation(lowercase(text))))


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(
    metric_fn: Callable[[str, str], bool], prediction: str, ground_truths: Sequence[str]
) -> int:
    """The best of ``metric_fn`` over the references (the script's ``max``, as 0 or 1)."""
    if not ground_truths:
        raise ValueError("Infoseek scoring needs at least one reference answer (answer_eval)")
    return int(max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths))


# ---------------------------------------------------------------------------------------------
# Numbers (in_range, safe_division, metric_numerical_range, process_numerical_answer, ...)
# ---------------------------------------------------------------------------------------------


def in_range(number: float, range_list: Sequence[float]) -> bool:
    min_num, max_num = range_list
    return min_num <= number <= max_num


def safe_division(x: float, y: float) -> float:
    return x / y if y != 0 else 0


def metric_numerical_range(
    pred: float | Sequence[float], answer: float | Sequence[float], tolerance: float = TOLERANCE
) -> int:
    """1 when the predicted number lies in the answer range, or the predicted range lies in it
    or overlaps it with IoU >= 0.5 (less 1e-12); a single answer number becomes the range
    [answer * (1 - tolerance), answer * (1 + tolerance)] (inverted, so never met, when the
    answer is negative: as in the script)."""
    if isinstance(answer, int | float):
        answer = [answer * (1 - tolerance), answer * (1 + tolerance)]
    else:
        answer = list(answer)
    if isinstance(pred, int | float):
        return 1 if in_range(pred, answer) else 0
    pred = list(pred)
    if answer[0] <= pred[0] <= answer[1] and answer[0] <= pred[1] <= answer[1]:
        return 1
    iou = range_intersection_over_union(pred, answer)
    return 1 if iou >= IOU_THRESHOLD else 0


def process_numerical_answer(string_number: str) -> Number:
    """The number or range a prediction states: after :func:`clean_str_range`, the numbers
    :data:`NUMBER` finds, thousands commas removed and periods stripped from both ends; two
    (the first two) give [first, second] when first <= second, else first alone; one gives
    that number; none gives [0, 0]."""
    string_number = clean_str_range(string_number)
    numerical_numbers_tmp = [n.replace(",", "").strip(".") for n in NUMBER.findall(string_number)]
    numerical_numbers: list[float] = []
    for n in numerical_numbers_tmp:
        if n.count(".") > 1:
            n = n.split(".")[0]
        try:
            numerical_numbers.append(float(n))
        except ValueError:
            raise ValueError(
                f"Infoseek's official script cannot score the prediction {string_number!r}: "
                f"it reads the number {n!r} from it and float({n!r}) fails"
            ) from None
    if len(numerical_numbers) > 2:
        numerical_numbers = numerical_numbers[:2]
    if len(numerical_numbers) == 2:
        first_val, second_val = numerical_numbers
        return [first_val, second_val] if first_val <= second_val else first_val
    if len(numerical_numbers) == 1:
        return numerical_numbers[0]
    return [0, 0]


def find_all(s: str, c: str) -> Generator[int, None, None]:
    idx = s.find(c)
    while idx != -1:
        yield idx
        idx = s.find(c, idx + 1)


def clean_str_range(text: str) -> str:
    """Every '-' right after a digit (``str.isdigit``) becomes ' - ': '9-10' -> '9 - 10'."""
    idx_replace = {idx for idx in find_all(text, "-") if idx >= 1 and text[idx - 1].isdigit()}
    return "".join(" - " if idx in idx_replace else s for idx, s in enumerate(text))


def range_intersection_over_union(x_list: Sequence[float], y_list: Sequence[float]) -> float:
    min_1, max_1 = min(x_list), max(x_list)
    min_2, max_2 = min(y_list), max(y_list)
    overlap = max(0.0, min(max_1, max_2) - max(min_1, min_2))
    length_x = (max_1 - min_1) + 1e-12
    length_y = (max_2 - min_2) + 1e-12
    return safe_division(overlap, length_x + length_y - overlap)


# ---------------------------------------------------------------------------------------------
# References (prepare_qid2example) and one question (evaluation)
# ---------------------------------------------------------------------------------------------


def prepare_answer_eval(question_type: str, answer_eval: Any) -> list[Any]:
    """A record's ``answer_eval`` as the script compares it: for a Numerical question the
    first two numbers of ``answer_eval[0]['range']`` (``answer_eval['range']`` when it is not a
    list) as strings; otherwise unchanged. Raises :class:`ValueError` where the script would
    crash (no 'range', not two numbers)."""
    if question_type.lower() != "numerical":
        return list(answer_eval)
    try:
        if isinstance(answer_eval, list):
            ans_eval = answer_eval[0]["range"]
        else:
            ans_eval = answer_eval["range"]
        prepared = [str(ans) for ans in ans_eval][:2]
        numbers = [float(a) for a in prepared]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ValueError(
            f"a Numerical question's answer_eval must be [{{'range': [low, high], ...}}], "
            f"not {answer_eval!r} ({type(e).__name__}: {e})"
        ) from None
    if len(numbers) != 2:
        raise ValueError(f"a Numerical question's range must hold two numbers: {answer_eval!r}")
    return prepared


def score_question(prediction: str, question_type: str, answer_eval: Sequence[Any]) -> int:
    """0 or 1 for one prediction (``evaluation`` and the three ``evaluate_*`` of the script);
    ``answer_eval`` as :func:`prepare_answer_eval` returns it."""
    kind = question_type.lower()
    if kind == "numerical":
        answer_range = [float(a) for a in answer_eval]
        if len(answer_range) != 2:
            raise ValueError(
                f"a Numerical question's reference must be a range of two numbers, not "
                f"{list(answer_eval)!r}"
            )
        return metric_numerical_range(process_numerical_answer(prediction), answer_range)
    # 'time' (evaluate_time) and every other type (evaluate_entity): the same exact match.
    return metric_max_over_ground_truths(exact_match_score, prediction, answer_eval)


def split_of(data_split: str) -> str:
    """'unseen_question' when ``data_split`` ends with it, else 'unseen_entity'."""
    return SPLITS[0] if data_split.endswith("unseen_question") else SPLITS[1]


# ---------------------------------------------------------------------------------------------
# Scores of a split and the final score (get_results, evaluate_infoseek(_full), harmonic_mean)
# ---------------------------------------------------------------------------------------------


def harmonic_mean(*args: float) -> float:
    args_safe = [a if a != 0 else 1e-12 for a in args]
    return len(args_safe) / sum((1.0 / val) for val in args_safe)


def split_score(scores: Sequence[float]) -> float:
    """A split's score in percent: the mean of its 0/1 scores (0 when empty), x100, rounded to
    2 decimals (``evaluate_infoseek``'s 'score')."""
    return round(safe_division(sum(scores), len(scores)) * 100, 2)


def final_score(split_scores: Sequence[float]) -> float:
    """``evaluate_infoseek_full``'s 'final_score': the harmonic mean of the splits' scores (in
    percent, as :func:`split_score` gives them), rounded to 2 decimals."""
    return round(harmonic_mean(*split_scores), 2)


def infoseek_aggregate(accuracies: Sequence[float]) -> float:
    """The final score as a fraction, from the splits' accuracies as fractions (the report's
    ``infoseek`` aggregate): ``final_score([round(a * 100, 2) for a in accuracies]) / 100``."""
    return final_score([round(a * 100, 2) for a in accuracies]) / 100


def evaluate(
    predictions: Iterable[Mapping[str, Any]],
    references: Iterable[Mapping[str, Any]],
    reference_qtype: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """The script's ``evaluate`` on loaded JSONL records: ``predictions`` as
    ``{data_id, prediction}``, ``references`` as the official ``infoseek_<split>.jsonl``
    records, ``reference_qtype`` as ``infoseek_<split>_qtype.jsonl`` records. Returns
    ``{'final_score', 'unseen_question_score', 'unseen_entity_score'}``, each split's a dict of
    'score', 'score_time', 'score_num', 'score_string' (percent, 2 decimals)."""
    qid2qtype = {str(q["data_id"]): str(q["question_type"]) for q in reference_qtype}
    qid2example: dict[str, tuple[str, str, list[Any]]] = {}
    for r in references:
        qid = str(r["data_id"])
        if qid not in qid2qtype:
            raise ValueError(f"data_id {qid!r} has no question type in the qtype records")
        q_type = qid2qtype[qid]
        answer_eval = prepare_answer_eval(q_type, r["answer_eval"])
        qid2example[qid] = (q_type, str(r["data_split"]), answer_eval)
    per_split: dict[str, dict[str, list[int]]] = {
        s: {"time": [], "numerical": [], "string": []} for s in SPLITS
    }
    for p in predictions:
        qid = str(p["data_id"])
        if qid not in qid2example:
            continue
        q_type, data_split, answer_eval = qid2example[qid]
        kind = q_type.lower() if q_type.lower() in ("time", "numerical") else "string"
        per_split[split_of(data_split)][kind].append(
            score_question(str(p["prediction"]), q_type, answer_eval)
        )
    results = {}
    for s in SPLITS:
        kinds = per_split[s]
        results[s] = {
            "score": split_score(kinds["time"] + kinds["numerical"] + kinds["string"]),
            "score_time": split_score(kinds["time"]),
            "score_num": split_score(kinds["numerical"]),
            "score_string": split_score(kinds["string"]),
        }
    return {
        "final_score": final_score([results[s]["score"] for s in SPLITS]),
        "unseen_question_score": results[SPLITS[0]],
        "unseen_entity_score": results[SPLITS[1]],
    }


# ---------------------------------------------------------------------------------------------
# The metric
# ---------------------------------------------------------------------------------------------


class InfoseekAccuracy:
    """Infoseek's per-question score (0 or 1) by the official rules: see the module docstring.

    Reads ``sample.meta['question_type']`` ('String', 'Numerical', 'Time') and
    ``sample.meta['answer_eval']`` (as :func:`prepare_answer_eval` returns it; default
    ``sample.answers``), which the ``infoseek`` adapter fills. A split's accuracy is the mean of
    its samples' scores; the suite's ``infoseek`` aggregate turns the two splits' accuracies into
    the official final score (:func:`infoseek_aggregate`).
    """

    name = "infoseek"

    async def score(self, prediction: str, sample: Sample) -> Score:
        question_type = sample.meta.get("question_type")
        if not isinstance(question_type, str):
            raise ValueError(
                f"sample {sample.id!r} has no meta['question_type'] (String, Numerical or "
                "Time); the infoseek metric scores samples of the infoseek adapter"
            )
        answer_eval = list(sample.meta.get("answer_eval", sample.answers))
        value = score_question(prediction, question_type, answer_eval)
        if question_type.lower() == "numerical":
            read = process_numerical_answer(prediction)
            detail = f"numerical: read {read!r}, range [{answer_eval[0]}, {answer_eval[1]}]"
        else:
            detail = f"{question_type.lower()}: normalised {normalize_answer(prediction)!r}"
        return Score(value=float(value), detail=detail)
