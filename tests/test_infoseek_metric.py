"""Infoseek accuracy (edchengg/infoseek_eval, infoseek_eval.py at c8ef023): known answers from
the official code's rules and from the validation scores its README publishes, and a differential
test against an independent reading of the official file on thousands of seeded random cases,
which also catches deliberately broken variants of the port."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hammr.eval.metrics import AGGREGATES, METRICS, InfoseekAccuracy, get_aggregate, get_metric
from hammr.eval.metrics import infoseek as port
from hammr.eval.suites import AGGREGATES as SUITE_AGGREGATES
from hammr.eval.suites import METRICS as SUITE_METRICS
from hammr.eval.types import Sample

CHINA = ["People's Republic of China", "China", "PRC", "CN", "\U0001f1e8\U0001f1f3"]


def numeric(low: float, high: float) -> list[str]:
    """A Numerical question's answer_eval as the official script prepares it."""
    return port.prepare_answer_eval(
        "Numerical", [{"wikidata": (low + high) / 2, "range": [low, high]}]
    )


# =============================================================================================
# Known answers, rule by rule
# =============================================================================================


@pytest.mark.parametrize(
    ("prediction", "answer_eval", "expected"),
    [
        # normalisation: case, punctuation, articles, whitespace
        ("The Eiffel Tower!", ["Eiffel Tower"], 1),
        ("  eiffel   TOWER ", ["the Eiffel Tower"], 1),
        ("Eiffel-Tower", ["Eiffel Tower"], 0),  # punctuation is deleted, not made a space
        ("eiffeltower", ["Eiffel-Tower"], 1),
        ("the-end", ["end"], 0),  # punctuation goes before articles: 'theend'
        ("a dog", ["dog"], 1),
        ("Athens", ["athens"], 1),  # 'a' inside a word stays
        # aliases: any answer_eval item
        ("china.", CHINA, 1),
        ("Peoples Republic of China", CHINA, 1),
        ("prc", CHINA, 1),
        ("Taiwan", CHINA, 0),
        ("the People's Republic of China (PRC)", CHINA, 0),  # no partial credit
    ],
)
def test_string_questions(prediction: str, answer_eval: list[str], expected: int) -> None:
    assert port.score_question(prediction, "String", answer_eval) == expected


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("1889", 1),
        ("1889.", 1),
        ("In 1889", 0),  # exact match only
        ("1888", 0),  # the docstring's "+/- one year" is not in the code
        ("1890", 0),
        ("March 1889", 0),  # nor is "the year of a date"
    ],
)
def test_time_questions_are_exact_match(prediction: str, expected: int) -> None:
    assert port.score_question(prediction, "Time", ["1889"]) == expected
    assert port.score_question(prediction, "time", ["1889"]) == expected  # type lower-cased


@pytest.mark.parametrize(
    ("prediction", "low", "high", "expected"),
    [
        ("324", 324.0, 324.0, 1),  # exact number
        ("324 metres", 324.0, 324.0, 1),
        ("324.5", 324.0, 324.0, 0),
        ("1.05 km", 0.9, 1.1, 1),  # inside the range
        ("0.9", 0.9, 1.1, 1),  # bounds included
        ("1.1", 0.9, 1.1, 1),
        ("1.2", 0.9, 1.1, 0),
        ("0.89", 0.9, 1.1, 0),
        ("1,234", 1200.0, 1300.0, 1),  # thousands comma
        ("5-10", 4.0, 11.0, 1),  # a range inside the answer range
        ("5-12", 4.0, 11.0, 1),  # IoU 6/8 = 0.75
        ("5-20", 4.0, 11.0, 0),  # IoU 6/16
        ("12-5", 4.0, 11.0, 0),  # reversed: the first number alone, 12
        ("10 - 5", 4.0, 11.0, 1),  # reversed: 10
        ("I don't know", 4.0, 11.0, 0),  # no number: [0, 0]
        ("I don't know", -1.0, 1.0, 1),  # ... which is inside a range around 0
        (".5", 4.0, 6.0, 1),  # '.5' loses its period: 5
        ("-3", -4.0, -2.0, 1),
    ],
)
def test_numerical_questions(prediction: str, low: float, high: float, expected: int) -> None:
    assert port.score_question(prediction, "Numerical", numeric(low, high)) == expected


@pytest.mark.parametrize(
    ("pred", "answer", "expected"),
    [
        (100.0, 100.0, 1),
        (90.0, 100.0, 1),  # 100 * 0.9 = 90.0: on the bound
        (110.0, 100.0, 1),  # 100 * 1.1 = 110.00000000000001
        (89.99, 100.0, 0),  # just outside the tolerance
        (110.01, 100.0, 0),
        ([95.0, 105.0], 100.0, 1),
        ([50.0, 95.0], 100.0, 0),
        (-100.0, -100.0, 0),  # a negative answer gives an inverted range: never met
        (0.0, 0.0, 1),
    ],
)
def test_tolerance_for_a_single_answer_number(
    pred: float | list[float], answer: float, expected: int
) -> None:
    assert port.metric_numerical_range(pred, answer) == expected
    assert port.metric_numerical_range(pred, answer, tolerance=0.1) == expected


def test_reading_predictions_as_numbers() -> None:
    read = port.process_numerical_answer
    assert read("about 12 km") == 12.0
    assert read("9-10") == [9.0, 10.0]  # clean_str_range makes it '9 - 10'
    assert read("from 9 to 10, 11 or 12") == [9.0, 10.0]  # the first two
    assert read("1e3") == 1000.0
    assert read("nothing") == [0, 0]
    assert port.clean_str_range("9-10 and -3") == "9 - 10 and -3"


def test_predictions_the_official_script_cannot_read_raise_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"official script cannot score.*float\('-'\)"):
        port.process_numerical_answer("-.5.6")
    with pytest.raises(ValueError, match="at least one reference"):
        port.score_question("x", "String", [])
    with pytest.raises(ValueError, match="range of two numbers"):
        port.score_question("5", "Numerical", ["5"])


def test_prepare_answer_eval() -> None:
    assert port.prepare_answer_eval("Numerical", [{"wikidata": 1.0, "range": [0.9, 1.1]}]) == [
        "0.9",
        "1.1",
    ]
    assert port.prepare_answer_eval("numerical", {"range": [1, 2, 3]}) == ["1", "2"]
    assert port.prepare_answer_eval("String", ["a", "b"]) == ["a", "b"]
    for bad in (["1.0"], [{"wikidata": 1.0}], {"range": [1]}, [{"range": ["x", "y"]}]):
        with pytest.raises(ValueError, match="Numerical"):
            port.prepare_answer_eval("Numerical", bad)


def test_split_rule() -> None:
    assert port.split_of("val_unseen_question") == "unseen_question"
    assert port.split_of("val_unseen_entity") == "unseen_entity"
    assert port.split_of("train") == "unseen_entity"  # anything else


@pytest.mark.parametrize(
    ("question", "entity", "final"),
    # The README of the official repository: BLIP2 instruct / pretrain Flan T5 XXL on val.
    [(8.89, 7.38, 8.06), (12.74, 12.28, 12.51), (50.0, 50.0, 50.0), (0.0, 40.0, 0.0)],
)
def test_final_score_is_the_harmonic_mean_of_the_splits(
    question: float, entity: float, final: float
) -> None:
    assert port.final_score([question, entity]) == final
    assert port.infoseek_aggregate([question / 100, entity / 100]) == pytest.approx(final / 100)
    assert get_aggregate("infoseek") is port.infoseek_aggregate


def test_split_scores_round_before_the_mean() -> None:
    # 1 of 2 and 1 of 7 correct: 50.0 and 14.29 (14.2857... rounded) give 22.23; the plain
    # harmonic mean of the unrounded accuracies would give 22.22.
    assert port.split_score([1, 0]) == 50.0 and port.split_score([1] + [0] * 6) == 14.29
    assert port.split_score([]) == 0
    assert port.final_score([50.0, 14.29]) == 22.23
    assert round(port.harmonic_mean(50.0, 100 / 7), 2) == 22.22
    assert port.infoseek_aggregate([1 / 2, 1 / 7]) == pytest.approx(0.2223)


def test_evaluate_on_records() -> None:
    refs = [
        {"data_id": "q1", "answer_eval": CHINA, "data_split": "val_unseen_question"},
        {"data_id": "q2", "answer_eval": ["1889"], "data_split": "val_unseen_question"},
        {
            "data_id": "e1",
            "answer_eval": [{"wikidata": 324, "range": [300, 350]}],
            "data_split": "val_unseen_entity",
        },
        {"data_id": "e2", "answer_eval": ["Paris"], "data_split": "val_unseen_entity"},
    ]
    qtypes = [
        {"data_id": "q1", "question_type": "String"},
        {"data_id": "q2", "question_type": "Time"},
        {"data_id": "e1", "question_type": "Numerical"},
        {"data_id": "e2", "question_type": "String"},
    ]
    preds = [
        {"data_id": "q1", "prediction": "China"},
        {"data_id": "q2", "prediction": "1890"},
        {"data_id": "e1", "prediction": "about 320 m"},
        {"data_id": "e2", "prediction": "Paris"},
        {"data_id": "zz", "prediction": "skipped"},
    ]
    result = port.evaluate(preds, refs, qtypes)
    assert result["unseen_question_score"] == {
        "score": 50.0,
        "score_time": 0.0,
        "score_num": 0,
        "score_string": 100.0,
    }
    assert result["unseen_entity_score"]["score"] == 100.0
    assert result["final_score"] == round(2 / (1 / 50 + 1 / 100), 2) == 66.67
    with pytest.raises(ValueError, match="no question type"):
        port.evaluate(preds, refs, qtypes[:3])


async def test_metric_object_and_registries() -> None:
    assert "infoseek" in METRICS and "infoseek" in SUITE_METRICS
    assert sorted(AGGREGATES) == sorted(SUITE_AGGREGATES)
    metric = get_metric("infoseek")
    assert isinstance(metric, InfoseekAccuracy) and metric.name == "infoseek"
    with pytest.raises(ValueError, match="takes no options"):
        get_metric("infoseek", tolerance=0.2)
    s = Sample(
        id="1",
        dataset="infoseek",
        question="How tall is it?",
        answers=("324",),
        images={},
        meta={"question_type": "Numerical", "answer_eval": ["300.0", "350.0"]},
    )
    got = await metric.score("It is 320 metres tall", s)
    assert got.value == 1.0 and "320.0" in got.detail and "[300.0, 350.0]" in got.detail
    assert (await metric.score("400", s)).value == 0.0
    t = Sample("2", "infoseek", "Which country?", ("China",), {}, meta={"question_type": "String"})
    assert (await metric.score("the china", t)).value == 1.0  # answer_eval defaults to answers
    with pytest.raises(ValueError, match="no meta\\['question_type'\\]"):
        await metric.score("x", Sample("3", "jsonl", "q", ("x",), {}))


def test_harmonic_mean_aggregate() -> None:
    hm = get_aggregate("harmonic_mean")
    assert hm([0.5, 0.25]) == pytest.approx(1 / 3)
    assert hm([0.0, 1.0]) == 0.0
    with pytest.raises(ValueError, match="unknown aggregate 'median'; choose one of"):
        get_aggregate("median")


# =============================================================================================
# An independent reading of infoseek_eval.py (c8ef023), the script's own structure
# =============================================================================================


class InfoseekEvalReading:
    """The official file read again, function by function, as plain Python: its
    normalisation, its number reader and range metric, its evaluation loop over a predictions
    list and a qid2example dict, its rounding and harmonic mean."""

    tolerance = 0.1

    def normalize_answer(self, s: str) -> str:
        s = s.lower()
        s = "".join(ch for ch in s if ch not in set(string.punctuation))
        s = re.sub(r"\b(a|an|the)\b", " ", s)
        return " ".join(s.split())

    def exact_match_score(self, prediction: str, ground_truth: str) -> bool:
        return self.normalize_answer(prediction) == self.normalize_answer(ground_truth)

    def in_range(self, number: float, range_list: Any) -> bool:
        min_num, max_num = range_list
        return bool(min_num <= number <= max_num)

    def safe_division(self, x: float, y: float) -> float:
        return x / y if y != 0 else 0

    def metric_numerical_range(self, pred: Any, answer: Any, tolerance: float = 0.1) -> int:
        answer = list(answer) if isinstance(answer, tuple) else answer
        pred = list(pred) if isinstance(pred, tuple) else pred
        if not isinstance(answer, list):
            answer = [answer * (1 - tolerance), answer * (1 + tolerance)]
        if not isinstance(pred, list):
            return 1 if self.in_range(pred, answer) else 0
        if answer[0] <= pred[0] <= answer[1] and answer[0] <= pred[1] <= answer[1]:
            return 1
        iou = self.range_intersection_over_union(pred, answer)
        return 1 if iou >= 0.5 - 1e-12 else 0

    def process_numerical_answer(self, string_number: str) -> Any:
        string_number = self.clean_str_range(string_number)
        numerical_numbers_tmp = re.findall(
            r"[-+]?[.]?[\d]+(?:,\d\d\d)*[\.]?\d*(?:[eE][-+]?\d+)?", string_number
        )
        numerical_numbers_tmp = [n.replace(",", "").strip(".") for n in numerical_numbers_tmp]
        numerical_numbers = []
        for n in numerical_numbers_tmp:
            if n.count(".") > 1:
                n = n.split(".")[0]
                numerical_numbers.append(float(n))
            else:
                numerical_numbers.append(float(n))
        if len(numerical_numbers) > 2:
            numerical_numbers = numerical_numbers[:2]
        if len(numerical_numbers) == 2:
            first_val = numerical_numbers[0]
            second_val = numerical_numbers[1]
            return [first_val, second_val] if first_val <= second_val else first_val
        elif len(numerical_numbers) == 1:
            return numerical_numbers[0]
        else:
            return [0, 0]

    def find_all(self, s: str, c: str) -> Iterator[int]:
        idx = s.find(c)
        while idx != -1:
            yield idx
            idx = s.find(c, idx + 1)

    def clean_str_range(self, text: str) -> str:
        idx_list = list(self.find_all(text, "-"))
        idx_replace = [idx for idx in idx_list if idx >= 1 and text[idx - 1].isdigit()]
        return "".join(" - " if idx in idx_replace else s for idx, s in enumerate(text))

    def range_intersection_over_union(self, x_list: list[float], y_list: list[float]) -> float:
        min_1, max_1 = min(x_list), max(x_list)
        min_2, max_2 = min(y_list), max(y_list)
        overlap = max(0.0, min(max_1, max_2) - max(min_1, min_2))
        length_x = (max_1 - min_1) + 1e-12
        length_y = (max_2 - min_2) + 1e-12
        return self.safe_division(overlap, length_x + length_y - overlap)

    def evaluation(
        self, predictions: list[dict[str, Any]], qid2example: dict[str, dict[str, Any]]
    ) -> tuple[list[Any], list[Any], list[Any]]:
        time_pred, quantity_pred, entity_pred = [], [], []
        time_answer, quantity_answer, entity_answer = [], [], []
        for p in predictions:
            quid = p["data_id"]
            if quid not in qid2example:
                continue
            example = qid2example[quid]
            pred = p["prediction"]
            answer = example["answer_eval"]
            question_type = example["question_type"].lower()
            if question_type == "time":
                time_pred.append(pred)
                time_answer.append(answer)
            elif question_type == "numerical":
                quantity_pred.append(self.process_numerical_answer(pred))
                quantity_answer.append([float(a) for a in answer])
            else:
                entity_pred.append(pred)
                entity_answer.append(answer)

        def best(pred: str, answers: list[str]) -> Any:
            return max(self.exact_match_score(pred, gt) for gt in answers)

        score_time = [best(p, a) for p, a in zip(time_pred, time_answer, strict=True)]
        score_quantity = [
            self.metric_numerical_range(p, a)
            for p, a in zip(quantity_pred, quantity_answer, strict=True)
        ]
        score_entity = [best(p, a) for p, a in zip(entity_pred, entity_answer, strict=True)]
        return score_time, score_quantity, score_entity

    def evaluate_infoseek(
        self, predictions: list[dict[str, Any]], qid2example: dict[str, dict[str, Any]]
    ) -> dict[str, float]:
        t, q, e = self.evaluation(predictions, qid2example)
        final = self.safe_division(sum(t + q + e), len(t + q + e))
        return {
            "score": round(final * 100, 2),
            "score_time": round(self.safe_division(sum(t), len(t)) * 100, 2),
            "score_num": round(self.safe_division(sum(q), len(q)) * 100, 2),
            "score_string": round(self.safe_division(sum(e), len(e)) * 100, 2),
        }

    def harmonic_mean(self, *args: float) -> float:
        args_safe = [a if a != 0 else 1e-12 for a in args]
        return len(args_safe) / sum((1.0 / val) for val in args_safe)

    def evaluate(
        self,
        predictions: list[dict[str, Any]],
        reference: list[dict[str, Any]],
        reference_qtype: list[dict[str, Any]],
    ) -> dict[str, Any]:
        qid2qtype = {q["data_id"]: q["question_type"] for q in reference_qtype}
        qid2example: dict[str, dict[str, Any]] = {}
        for r0 in reference:
            r = dict(r0)
            qid = r["data_id"]
            if qid2qtype[qid].lower() == "numerical":
                if isinstance(r["answer_eval"], list):
                    ans_eval = r["answer_eval"][0]["range"]
                else:
                    ans_eval = r["answer_eval"]["range"]
                r["answer_eval"] = [str(ans) for ans in ans_eval][:2]
            qid2example[qid] = r
            qid2example[qid]["question_type"] = qid2qtype[qid]
        unseen_question, unseen_entity = [], []
        for pred in predictions:
            if pred["data_id"] in qid2example:
                if qid2example[pred["data_id"]]["data_split"].endswith("unseen_question"):
                    unseen_question.append(pred)
                else:
                    unseen_entity.append(pred)
        scores = [self.evaluate_infoseek(p, qid2example) for p in (unseen_question, unseen_entity)]
        return {
            "final_score": round(self.harmonic_mean(*[s["score"] for s in scores]), 2),
            "unseen_question_score": scores[0],
            "unseen_entity_score": scores[1],
        }

    def score_one(self, prediction: str, question_type: str, answer_eval: list[Any]) -> int:
        example = {"answer_eval": answer_eval, "question_type": question_type}
        t, q, e = self.evaluation([{"data_id": "x", "prediction": prediction}], {"x": example})
        return int((t + q + e)[0])


# =============================================================================================
# Random cases
# =============================================================================================

ENTITIES = [
    "Eiffel Tower",
    "People's Republic of China",
    "U.S.A.",
    "an apple",
    "Mont-Saint-Michel",
    "A&W Restaurants",
    "The The",
    "Theatre Royal",
    "Athens",
    "Apple Inc.",
    "École Polytechnique",
    "Ånanda",
    "the Hague",
    "Saint-Étienne",
    "St. Paul's Cathedral",
    "1889",
    "Queen (band)",
    "α-Centauri",
    "an",
]


def text_variant(rng: random.Random, s: str) -> str:
    roll = rng.random()
    if roll < 0.1:
        return s.upper()
    if roll < 0.2:
        return s.lower()
    if roll < 0.3:
        return rng.choice(["the ", "a ", "an ", "The "]) + s
    if roll < 0.4:
        return s + rng.choice([".", "!", "?", ",", " .", "'s", ")"])
    if roll < 0.5:
        return s.replace(" ", rng.choice(["  ", "-", "\t", "_", ""]))
    if roll < 0.58:
        return s.replace("'", "").replace(".", "")
    if roll < 0.65:
        return "  " + s + " \n"
    if roll < 0.7:
        return s.replace("-", " ")
    return s


def string_case(rng: random.Random) -> tuple[str, str, list[str]]:
    answers = rng.sample(ENTITIES, rng.randint(1, 4))
    answers = [text_variant(rng, a) if rng.random() < 0.3 else a for a in answers]
    if rng.random() < 0.8:
        prediction = text_variant(rng, text_variant(rng, rng.choice(answers)))
    else:
        prediction = text_variant(rng, rng.choice(ENTITIES))
    return prediction, rng.choice(["String", "string", "Time", "other"]), answers


def number_text(rng: random.Random, x: float) -> str:
    roll = rng.random()
    if roll < 0.25:
        return repr(x)
    if roll < 0.4:
        return f"{x:.{rng.randint(0, 4)}f}"
    if roll < 0.5:
        return f"{x:,.{rng.randint(0, 2)}f}"
    if roll < 0.55:
        return f"{x:.3e}"
    if roll < 0.65:
        return f"about {x:g} {rng.choice(['m', 'km', 'people', 'years'])}"
    return f"{x:g}"


def near(rng: random.Random, low: float, high: float) -> float:
    """A number on, just inside or just outside a bound, or anywhere near the range."""
    bound = rng.choice([low, high])
    width = abs(high - low) or abs(bound) or 1.0
    roll = rng.random()
    if roll < 0.3:
        return bound
    if roll < 0.6:
        return bound + rng.choice([-1, 1]) * width * rng.choice([1e-9, 1e-3, 0.01, 0.05])
    return rng.uniform(low - width, high + width)


def numeric_case(rng: random.Random) -> tuple[str, str, list[str]]:
    value = rng.choice(
        [rng.uniform(-50, 50), rng.uniform(0, 1e4), float(rng.randint(1, 2100)), 0.0]
    )
    if rng.random() < 0.7:
        low, high = value * 0.9, value * 1.1  # the data's ranges: value ±10%
    else:
        low, high = sorted([value, value + rng.choice([0.0, 1.0, rng.uniform(0, 100)])])
    roll = rng.random()
    if roll < 0.55:
        prediction = number_text(rng, near(rng, low, high))
    elif roll < 0.85:
        a, b = near(rng, low, high), near(rng, low, high)
        sep = rng.choice(["-", " - ", " to ", " and ", "–"])
        prediction = f"{a:g}{sep}{b:g}"
    elif roll < 0.95:
        prediction = rng.choice(["I don't know", "", "many", "n/a", "zero"])
    elif roll < 0.975:
        prediction = f"{rng.randint(1, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 9)} or .5"
    else:  # a number the script cannot read ('-' after its two-period rule)
        prediction = f"{rng.choice('-+')}.{rng.randint(0, 9)}.{rng.randint(0, 9)} units"
    answer = [{"wikidata": value, "range": [low, high]}]
    return prediction, "Numerical", port.prepare_answer_eval("Numerical", answer)


def random_case(rng: random.Random) -> tuple[str, str, list[str]]:
    return numeric_case(rng) if rng.random() < 0.5 else string_case(rng)


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or 'ValueError' when it raises one (the script's crashes)."""
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


def mismatches(n: int, seed: int) -> list[tuple[str, str, list[str]]]:
    """Cases where the port (looked up on its module, so a patched function counts) and the
    reading disagree, on ``n`` seeded random questions and ``n`` single-number tolerance
    cases."""
    rng = random.Random(seed)
    reading = InfoseekEvalReading()
    bad = []
    for _ in range(n):
        prediction, qtype, answer_eval = random_case(rng)
        ours = outcome(port.score_question, prediction, qtype, answer_eval)
        theirs = outcome(reading.score_one, prediction, qtype, answer_eval)
        if ours != theirs:
            bad.append((prediction, qtype, answer_eval))
    for _ in range(n):
        answer = rng.choice([rng.uniform(-100, 100), float(rng.randint(0, 3000))])
        pred: float | list[float] = near(rng, answer * 0.9, answer * 1.1)
        if rng.random() < 0.3:
            pred = sorted([pred, near(rng, answer * 0.9, answer * 1.1)])
        ours = port.metric_numerical_range(pred, answer)
        if ours != reading.metric_numerical_range(pred, answer):
            bad.append((repr(pred), "tolerance", [repr(answer)]))
    return bad


def test_differential_seeded() -> None:
    assert mismatches(3000, seed=20230607) == []


def test_the_random_cases_reach_every_kind_of_case() -> None:
    rng = random.Random(20230607)
    seen = {"string right": 0, "string wrong": 0, "number right": 0, "number wrong": 0}
    errors = 0
    for _ in range(3000):
        prediction, qtype, answer_eval = random_case(rng)
        got = outcome(port.score_question, prediction, qtype, answer_eval)
        if got == "ValueError":
            errors += 1
            continue
        kind = "number" if qtype == "Numerical" else "string"
        seen[f"{kind} {'right' if got else 'wrong'}"] += 1
    assert min(seen.values()) > 200, seen
    assert errors > 10  # '1.2.3 or .5' style predictions the script cannot read


def test_differential_whole_files() -> None:
    rng = random.Random(7)
    reading = InfoseekEvalReading()
    scored = crashed = 0
    for _ in range(60):
        refs, qtypes, preds = [], [], []
        for i in range(rng.randint(0, 60)):
            prediction, qtype, answer_eval = random_case(rng)
            if qtype == "Numerical":
                low, high = (float(a) for a in answer_eval)
                raw: Any = [{"wikidata": (low + high) / 2, "range": [low, high]}]
            else:
                raw = answer_eval
            split = rng.choice(["val_unseen_question", "val_unseen_entity"])
            refs.append({"data_id": f"d{i}", "answer_eval": raw, "data_split": split})
            qtypes.append({"data_id": f"d{i}", "question_type": qtype})
            if rng.random() < 0.9:
                preds.append({"data_id": f"d{i}", "prediction": prediction})
        preds.append({"data_id": "unknown", "prediction": "x"})
        ours = outcome(port.evaluate, preds, refs, qtypes)
        theirs = outcome(reading.evaluate, preds, refs, qtypes)
        assert ours == theirs
        crashed += ours == "ValueError"
        scored += ours != "ValueError"
    assert scored >= 30 and crashed >= 1, (scored, crashed)


# =============================================================================================
# The differential test catches broken ports
# =============================================================================================


def _no_tolerance(
    pred: float | list[float], answer: float | list[float], tolerance: float = 0.1
) -> int:
    return ORIGINAL_RANGE(pred, answer, 0.0)


def _exclusive_bounds(number: float, range_list: Any) -> bool:
    low, high = range_list
    return bool(low < number < high)


def _articles_first(text: str) -> str:
    text = re.sub(r"\b(a|an|the)\b", " ", text.lower())
    return " ".join("".join(c for c in text if c not in string.punctuation).split())


def _no_range_cleaning(text: str) -> str:
    return text


def _strict_iou(x_list: Any, y_list: Any) -> float:
    return ORIGINAL_IOU(x_list, y_list) - 0.01


ORIGINAL_RANGE = port.metric_numerical_range
ORIGINAL_IOU = port.range_intersection_over_union


@pytest.mark.parametrize(
    ("name", "broken"),
    [
        ("metric_numerical_range", _no_tolerance),
        ("in_range", _exclusive_bounds),
        ("normalize_answer", _articles_first),
        ("clean_str_range", _no_range_cleaning),
        ("range_intersection_over_union", _strict_iou),
    ],
)
def test_the_differential_test_catches_a_broken_port(
    monkeypatch: pytest.MonkeyPatch, name: str, broken: Callable[..., Any]
) -> None:
    monkeypatch.setattr(port, name, broken)
    assert len(mismatches(3000, seed=20230607)) > 0
