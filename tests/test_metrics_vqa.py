"""VQA accuracy (vqaEval.py, GT-Vision-Lab/VQA a013f00) and TextVQA accuracy (MMF's
m4c_evaluators.py, 2dc099a): known values from the unmodified official code, the rules one at a
time, and differential tests against independent readings of both official files."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammr.eval.metrics import (
    METRICS,
    TextVQAAccuracy,
    VQAAccuracy,
    evalai_process_answer,
    get_metric,
    normalize_vqa_answer,
    textvqa_accuracy,
    vqa_accuracy,
    vqa_tables,
)
from hammr.eval.metrics.textvqa import evalai_word_tokenize, textvqa_answer_scores
from hammr.eval.metrics.vqa import (
    python2_lower,
    vqa_compared_answers,
    vqa_process_digit_article,
    vqa_process_punctuation,
)
from hammr.eval.suites import METRICS as SUITE_METRICS
from hammr.eval.types import Sample
from official_tables import CONTRACTION_PAIRS

# =============================================================================================
# Values obtained by running the unmodified official code
# =============================================================================================

COLA = ["no"] * 6 + ["zero", "coke", "Coca-Cola", "Coca-Cola"]
WHATS_UP = ["What's up?"] * 7 + ["what's up"] * 3


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("no!", COLA, 1.0),
        ("whats up?", WHATS_UP, 1.0),
        ("Ten", ["ten"] * 10, 0.0),
        ("2 dogs", ["two dogs"] * 10, 0.0),
        ("red,white", ["red, white"] * 10, 0.0),
    ],
)
def test_vqa_eval_known_values(prediction: str, answers: list[str], expected: float) -> None:
    assert vqa_accuracy(prediction, answers) == expected


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("2 dogs", ["two dogs"] * 10, 1.0),
        ("it's", ["It's"] * 10, 1.0),
        ("whats up?", WHATS_UP, 0.0),
    ],
)
def test_mmf_known_values(prediction: str, answers: list[str], expected: float) -> None:
    assert textvqa_accuracy(prediction, answers) == expected


# =============================================================================================
# The tables
# =============================================================================================


def test_contractions_table_is_the_official_one_whole_and_in_order() -> None:
    assert list(vqa_tables.CONTRACTIONS.items()) == CONTRACTION_PAIRS
    assert len(vqa_tables.CONTRACTIONS) == 120


def test_number_map_articles_and_punctuation() -> None:
    words = ["none", "zero", "one", "two", "three", "four", "five", "six", "seven", "eight"]
    words += ["nine", "ten"]
    digits = ["0", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
    assert list(vqa_tables.MANUAL_MAP.items()) == list(zip(words, digits, strict=True))
    assert vqa_tables.ARTICLES == ("a", "an", "the")
    assert "".join(vqa_tables.PUNCTUATION) == ';/[]"{}()=+\\_-><@`,?!'


# =============================================================================================
# vqaEval.py, one rule at a time
# =============================================================================================


def test_unanimous_annotators_leave_everything_as_written() -> None:
    assert vqa_compared_answers(" Ten\n", ["ten"] * 10) == ("Ten", ["ten"] * 10)
    assert vqa_accuracy("ten", ["ten"] * 10) == 1.0
    # Only newlines, tabs and the ends are cleaned, on both sides.
    assert vqa_accuracy("\tten ", ["ten\n"] * 3 + ["ten"] * 7) == 1.0


def test_disagreeing_annotators_process_both_sides() -> None:
    pred, gts = vqa_compared_answers("The Two dogs!", ["two dogs", "2 Dogs."])
    assert (pred, gts) == ("2 dogs", ["2 dogs", "2 dogs"])


def test_the_agreement_test_runs_on_cleaned_answers() -> None:
    # 'ten' and 'ten ' are one answer after cleaning: unanimous, so 'Ten' does not match.
    assert vqa_accuracy("Ten", ["ten", "ten "] * 5) == 0.0


@pytest.mark.parametrize("mark", list(';/[]"{}()=+\\_-><@`,?!'))
def test_each_listed_mark_between_letters_becomes_a_space(mark: str) -> None:
    assert vqa_process_punctuation(f"red{mark}blue") == "red blue"


@pytest.mark.parametrize("mark", [":", "'", "*", "#", "&", "%", "$", "~", "^", "|"])
def test_unlisted_marks_are_kept(mark: str) -> None:
    assert vqa_process_punctuation(f"red{mark}blue") == f"red{mark}blue"


def test_a_mark_next_to_a_space_is_deleted_everywhere() -> None:
    assert vqa_process_punctuation("red; blue;green") == "red bluegreen"
    assert vqa_process_punctuation("red (blue)") == "red blue "
    # Each mark decides for itself, on the original text.
    assert vqa_process_punctuation("a, b/c") == "a b c"


def test_a_digit_comma_digit_deletes_every_mark() -> None:
    assert vqa_process_punctuation("1,000 red/blue-green!") == "1000 redbluegreen"


def test_periods() -> None:
    assert vqa_process_punctuation("3.5") == "3.5"
    assert vqa_process_punctuation("end.") == "end"
    assert vqa_process_punctuation("e.g.") == "eg"
    assert vqa_process_punctuation("v.2") == "v.2"
    # The look-behind is a look-ahead for '<=' and a digit: it never stops the rule.
    assert vqa_process_punctuation("3.") == "3"


def test_at_most_32_periods_go() -> None:
    assert vqa_process_punctuation("." * 40) == "." * 8


def test_digits_in_the_regexes_are_ascii_as_in_python_2() -> None:
    # '\u0663' (ARABIC-INDIC DIGIT THREE) is not a digit to the Python 2 pattern.
    assert vqa_process_punctuation("x.\u0663") == "x\u0663"
    assert vqa_process_punctuation("\u0661,\u0662 a/b") == "\u0661 \u0662 a b"


def test_lower_case_is_per_character_as_in_python_2() -> None:
    assert python2_lower("ΟΔΟΣ") == "οδοσ"  # no final sigma
    assert python2_lower("İ") == "i"
    assert python2_lower("Coca-COLA") == "coca-cola"


def test_digit_article_rule() -> None:
    assert vqa_process_digit_article("The TWO  dogs") == "2 dogs"
    assert vqa_process_digit_article("none eleven") == "0 eleven"
    assert vqa_process_digit_article("a an the theatre") == "theatre"


def test_contractions_fire_with_their_apostrophes() -> None:
    # The apostrophe is not punctuation in this script, so keys holding one match.
    assert normalize_vqa_answer("dont") == "don't"
    assert normalize_vqa_answer("he'dve") == "he'd've"
    assert normalize_vqa_answer("somebody'd") == "somebodyd"
    assert normalize_vqa_answer("let's") == "let's"
    # Capitalised keys never match a lower-cased word.
    assert normalize_vqa_answer("Im") == "im"
    assert normalize_vqa_answer("Ive") == "ive"


def ten(match: int, pred: str = "yes", other: str = "no") -> list[str]:
    return [pred] * match + [other] * (10 - match)


@pytest.mark.parametrize(
    ("k", "expected"),
    [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0), (7, 1.0), (10, 1.0)],
)
def test_leave_one_out_over_ten_answers(k: int, expected: float) -> None:
    # k annotators match: leaving one of them out leaves k - 1 matches, leaving out another
    # leaves k; each scores min(1, matches / 3).
    got = vqa_accuracy("yes", ten(k)) if k < 10 else vqa_accuracy("yes", ["yes", "Yes"] * 5)
    assert got == pytest.approx(expected)


def test_other_answer_counts_use_the_same_formula() -> None:
    # The script has no rule on the count: one answer can never be matched by another.
    assert vqa_accuracy("dog", ["dog"]) == 0.0
    assert vqa_accuracy("dog", ["dog", "Dog"]) == pytest.approx(1 / 3)
    assert vqa_accuracy("dog", ["dog", "Dog", "cat"]) == pytest.approx((1 / 3 + 1 / 3 + 2 / 3) / 3)
    assert vqa_accuracy("dog", ["dog"] * 3 + ["cat"] * 2) == pytest.approx(0.8)


def test_vqa_no_answers_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        vqa_accuracy("dog", [])


async def test_vqa_metric_object() -> None:
    metric = get_metric("vqa_accuracy")
    assert isinstance(metric, VQAAccuracy)
    assert metric.name == "vqa_accuracy"
    sample = Sample("q1", "vqa", "what brand?", tuple(ten(3, "Pepsi", "coke")), {})
    score = await metric.score("pepsi.", sample)
    assert score.value == pytest.approx(0.9)
    assert "'pepsi'" in score.detail and "processed" in score.detail
    unanimous = Sample("q2", "vqa", "how many?", ("ten",) * 10, {})
    score = await metric.score("Ten", unanimous)
    assert score.value == 0.0 and "unanimous" in score.detail


# =============================================================================================
# MMF's TextVQA evaluator, one rule at a time
# =============================================================================================


def test_word_tokenize() -> None:
    assert evalai_word_tokenize(" It's 1,000? ") == "it 's 1000"


def test_every_answer_is_processed_even_when_unanimous() -> None:
    assert textvqa_accuracy("TEN.", ["ten"] * 10) == 1.0


def test_commas_never_reach_the_comma_rule() -> None:
    # word_tokenize deleted the comma, so '/' touching no space still becomes a space.
    assert evalai_process_answer("1,000 red/blue") == "1000 red blue"


def test_apostrophe_s_is_split_off() -> None:
    assert evalai_process_answer("What's up?") == "what 's up"
    assert evalai_process_answer("whats up") == "what's up"


def test_mmf_uses_unicode_digits_and_python_3_lower_case() -> None:
    assert evalai_process_answer("x.\u0663") == "x.\u0663"
    assert evalai_process_answer("ΟΔΟΣ") == "οδος"


@pytest.mark.parametrize(("k", "expected"), [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0)])
def test_textvqa_ten_answers(k: int, expected: float) -> None:
    assert textvqa_accuracy("yes", ten(k)) == pytest.approx(expected)


def test_textvqa_other_counts() -> None:
    # Full credit at min(3, n - 1) matching other annotators; one answer is exact match.
    assert textvqa_accuracy("Dog.", ["dog"]) == 1.0
    assert textvqa_accuracy("cat", ["dog"]) == 0.0
    assert textvqa_accuracy("dog", ["dog", "Dog"]) == 1.0
    assert textvqa_accuracy("dog", ["dog", "cat"]) == 0.5
    assert textvqa_accuracy("dog", ["dog"] * 3) == 1.0
    assert textvqa_accuracy("dog", ["dog", "cat", "cat"]) == pytest.approx(1 / 3)
    # Four or more answers: MMF's formula unchanged.
    assert textvqa_accuracy("dog", ["dog"] * 3 + ["cat"] * 2) == pytest.approx(0.8)
    assert textvqa_accuracy("dog", ["dog"] * 4) == 1.0


def test_textvqa_no_answers_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        textvqa_accuracy("dog", [])


async def test_textvqa_metric_object_and_registry() -> None:
    metric = get_metric("textvqa_accuracy")
    assert isinstance(metric, TextVQAAccuracy)
    assert metric.name == "textvqa_accuracy"
    assert "textvqa_accuracy" in METRICS and "textvqa_accuracy" in SUITE_METRICS
    score = await metric.score("Pepsi!", Sample("q", "textvqa", "?", tuple(ten(3, "pepsi")), {}))
    assert score.value == pytest.approx(0.9)
    assert "'pepsi'" in score.detail and "not the official" not in score.detail
    short = await metric.score("pepsi", Sample("q", "textvqa", "?", ("pepsi", "pepsi"), {}))
    assert short.value == 1.0 and "2 answers, not the official 10" in short.detail
    with pytest.raises(ValueError, match="no options"):
        get_metric("textvqa_accuracy", strict=True)


# =============================================================================================
# Independent readings of the two official files
# =============================================================================================


class VQAEvalReading:
    """GT-Vision-Lab/VQA vqaEval.py at a013f0043c1e, read again: the script's structure, its
    dict records and its tables, for one question at a time. Python 2 semantics: ASCII \\d
    (no re.UNICODE when compiling), lower() of unicode without the final-sigma rule (the
    generated answers hold no character where that matters)."""

    def __init__(self) -> None:
        self.contractions = dict(CONTRACTION_PAIRS)
        self.manualMap = {
            "none": "0",
            "zero": "0",
            "one": "1",
            "two": "2",
            "three": "3",
            "four": "4",
            "five": "5",
            "six": "6",
            "seven": "7",
            "eight": "8",
            "nine": "9",
            "ten": "10",
        }
        self.articles = ["a", "an", "the"]
        self.periodStrip = re.compile("(?!<=\\d)(\\.)(?!\\d)", re.ASCII)
        self.commaStrip = re.compile("(\\d)(\\,)(\\d)", re.ASCII)
        self.punct = [";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-"]
        self.punct += [">", "<", "@", "`", ",", "?", "!"]

    def evaluate_one(self, answer: str, gt_answers: Sequence[str]) -> float:
        gts: dict[str, Any] = {
            "answers": [{"answer": a, "answer_id": i + 1} for i, a in enumerate(gt_answers)]
        }
        for ansDic in gts["answers"]:
            ansDic["answer"] = ansDic["answer"].replace("\n", " ")
            ansDic["answer"] = ansDic["answer"].replace("\t", " ")
            ansDic["answer"] = ansDic["answer"].strip()
        resAns = answer
        resAns = resAns.replace("\n", " ")
        resAns = resAns.replace("\t", " ")
        resAns = resAns.strip()
        gtAcc = []
        gtAnswers = [ans["answer"] for ans in gts["answers"]]

        if len(set(gtAnswers)) > 1:
            for ansDic in gts["answers"]:
                ansDic["answer"] = self.processPunctuation(ansDic["answer"])
                ansDic["answer"] = self.processDigitArticle(ansDic["answer"])
            resAns = self.processPunctuation(resAns)
            resAns = self.processDigitArticle(resAns)

        for gtAnsDatum in gts["answers"]:
            otherGTAns = [item for item in gts["answers"] if item != gtAnsDatum]
            matchingAns = [item for item in otherGTAns if item["answer"] == resAns]
            acc = min(1, float(len(matchingAns)) / 3)
            gtAcc.append(acc)
        return float(sum(gtAcc)) / len(gtAcc)

    def processPunctuation(self, inText: str) -> str:
        outText = inText
        for p in self.punct:
            if (p + " " in inText or " " + p in inText) or (
                re.search(self.commaStrip, inText) is not None
            ):
                outText = outText.replace(p, "")
            else:
                outText = outText.replace(p, " ")
        outText = self.periodStrip.sub("", outText, 32)
        return outText

    def processDigitArticle(self, inText: str) -> str:
        outText = []
        tempText = inText.lower().split()
        for word in tempText:
            word = self.manualMap.setdefault(word, word)
            if word not in self.articles:
                outText.append(word)
        for wordId, word in enumerate(outText):
            if word in self.contractions:
                outText[wordId] = self.contractions[word]
        return " ".join(outText)


class EvalAIReading:
    """facebookresearch/mmf m4c_evaluators.py at 2dc099a, read again: EvalAIAnswerProcessor
    and TextVQAAccuracyEvaluator (whose assert on ten answers is kept as an option)."""

    def __init__(self, assert_ten: bool = True) -> None:
        self.assert_ten = assert_ten
        self.contractions = dict(CONTRACTION_PAIRS)
        numbers: dict[str, str] = {"none": "0"}
        for word in ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight"):
            numbers[word] = str(len(numbers) - 1)
        self.number_map = {**numbers, "nine": "9", "ten": "10"}
        self.articles = ["a", "an", "the"]
        self.period_strip = re.compile(r"(?!<=\d)(\.)(?!\d)")
        self.comma_strip = re.compile(r"(?<=\d)(\,)+(?=\d)")
        self.punctuations = list(';/[]"{}()=+\\_-><@`,?!')

    def word_tokenize(self, word: str) -> str:
        word = word.lower()
        word = word.replace(",", "").replace("?", "").replace("'s", " 's")
        return word.strip()

    def process_punctuation(self, in_text: str) -> str:
        out_text = in_text
        for p in self.punctuations:
            if (p + " " in in_text or " " + p in in_text) or (
                re.search(self.comma_strip, in_text) is not None
            ):
                out_text = out_text.replace(p, "")
            else:
                out_text = out_text.replace(p, " ")
        out_text = self.period_strip.sub("", out_text, re.UNICODE)
        return out_text

    def process_digit_article(self, in_text: str) -> str:
        out_text = []
        for word in in_text.lower().split():
            word = self.number_map.setdefault(word, word)
            if word not in self.articles:
                out_text.append(word)
        for word_id, word in enumerate(out_text):
            if word in self.contractions:
                out_text[word_id] = self.contractions[word]
        return " ".join(out_text)

    def __call__(self, item: str) -> str:
        item = self.word_tokenize(item)
        item = item.replace("\n", " ").replace("\t", " ").strip()
        item = self.process_punctuation(item)
        item = self.process_digit_article(item)
        return item

    def compute_answer_scores(self, raw_answers: Sequence[str]) -> dict[str, float]:
        answers = [self(a) for a in raw_answers]
        if self.assert_ten:
            assert len(answers) == 10
        gt_answers = list(enumerate(answers))
        unique_answer_scores = {}
        for unique_answer in set(answers):
            accs = []
            for gt_answer in gt_answers:
                other_answers = [item for item in gt_answers if item != gt_answer]
                matching_answers = [item for item in other_answers if item[1] == unique_answer]
                acc = min(1, float(len(matching_answers)) / 3)
                accs.append(acc)
            unique_answer_scores[unique_answer] = sum(accs) / len(accs)
        return unique_answer_scores

    def score(self, pred_answer: str, gt_answers: Sequence[str]) -> float:
        return self.compute_answer_scores(gt_answers).get(self(pred_answer), 0.0)


def generalised_textvqa(prediction: str, answers: Sequence[str]) -> float:
    """hammr's documented rule for other counts, from its statement: the average over every
    subset of n - 1 annotators of min(1, matches / min(3, n - 1)); one answer: exact match."""
    reading = EvalAIReading()
    pred = reading(prediction)
    gts = [reading(a) for a in answers]
    if len(gts) == 1:
        return float(gts[0] == pred)
    needed = min(3, len(gts) - 1)
    subsets = list(combinations(range(len(gts)), len(gts) - 1))
    total = sum(min(1.0, sum(gts[i] == pred for i in s) / needed) for s in subsets)
    return total / len(subsets)


TOKENS = [
    # words, capitals, number words, articles
    "dog", "Dog", "DOG", "red", "Coca-Cola", "coke", "yes", "No", "up", "What", "what",
    "none", "zero", "One", "two", "TWO", "three", "ten", "Ten", "eleven", "a", "A", "an",
    "the", "The", "theatre", "café",
    # contractions, with and without apostrophes, typographic ones, odd table keys
    "dont", "don't", "don’t", "whats", "what's", "What's", "its", "it's", "It's", "hes",
    "he'dve", "somebody'd", "let's", "she's", "Im", "I'm", "yall'll", "'twas", "twas", "cat's",
    # numbers with commas and periods, other digits
    "1", "2", "10", "1,000", "2,5", "3.5", ".5", "3.", "v.2", "e.g.", "\u0663", "1.\u0663",
    "\u0661,\u0662", "." * 35,
    # every kind of punctuation, alone
    *list(";:/'[]\"{}()=+\\_-><@`,?!.*#&%$~^|"), "’", "“", "”",
]  # fmt: skip
SEPARATORS = ["", " ", " ", " ", "  ", "\t", "\n"]


def random_answer(rng: random.Random) -> str:
    parts = [rng.choice(TOKENS) + rng.choice(SEPARATORS) for _ in range(rng.randint(1, 4))]
    text = "".join(parts)
    return text if rng.random() < 0.85 else f" {text}\n"


def variant(rng: random.Random, answer: str) -> str:
    """The same answer as another annotator (or a model) might write it."""
    roll = rng.random()
    if roll < 0.12:
        return answer.upper()
    if roll < 0.24:
        return answer.lower()
    if roll < 0.32:
        return answer + rng.choice([".", "!", "?", ","])
    if roll < 0.4:
        return "the " + answer
    if roll < 0.46:
        return answer.replace(" ", "")
    if roll < 0.54:
        return answer.replace("'", "")
    return answer


def random_case(rng: random.Random, ten_only: bool) -> tuple[str, list[str]]:
    pool = [random_answer(rng) for _ in range(rng.randint(1, 4))]
    n = 10 if ten_only or rng.random() < 0.7 else rng.randint(1, 12)
    if rng.random() < 0.25:
        answers = [rng.choice(pool)] * n  # unanimous
    else:
        answers = [variant(rng, rng.choice(pool)) for _ in range(n)]
    prediction = variant(rng, rng.choice(pool)) if rng.random() < 0.85 else random_answer(rng)
    return prediction, answers


def test_vqa_differential_seeded() -> None:
    rng = random.Random(20250311)
    reading = VQAEvalReading()
    seen = {"partial": 0, "full": 0, "unanimous": 0, "not ten": 0}
    for _ in range(4000):
        prediction, answers = random_case(rng, ten_only=False)
        ours = vqa_accuracy(prediction, answers)
        assert ours == reading.evaluate_one(prediction, answers), (prediction, answers)
        seen["partial"] += 0 < ours < 1
        seen["full"] += ours == 1
        seen["unanimous"] += len({a.strip() for a in answers}) == 1
        seen["not ten"] += len(answers) != 10
    # The generator reaches every kind of case, not only zeros.
    assert min(seen.values()) > 300, seen


def test_textvqa_differential_seeded() -> None:
    rng = random.Random(20210311)
    reading = EvalAIReading()
    seen = {"partial": 0, "full": 0}
    for _ in range(4000):
        prediction, answers = random_case(rng, ten_only=True)
        ours = textvqa_accuracy(prediction, answers)
        assert ours == reading.score(prediction, answers), (prediction, answers)
        seen["partial"] += 0 < ours < 1
        seen["full"] += ours == 1
    assert min(seen.values()) > 300, seen


def test_textvqa_other_counts_differential_seeded() -> None:
    rng = random.Random(7)
    unlimited = EvalAIReading(assert_ten=False)
    for _ in range(1500):
        prediction, answers = random_case(rng, ten_only=False)
        ours = textvqa_accuracy(prediction, answers)
        assert ours == pytest.approx(generalised_textvqa(prediction, answers), abs=1e-12)
        if len(answers) >= 4:
            assert ours == unlimited.score(prediction, answers)


def test_textvqa_answer_scores_match_mmf() -> None:
    rng = random.Random(11)
    reading = EvalAIReading()
    for _ in range(500):
        _, answers = random_case(rng, ten_only=True)
        assert textvqa_answer_scores(answers) == reading.compute_answer_scores(answers)


answer_text = st.lists(
    st.tuples(st.sampled_from(TOKENS), st.sampled_from(SEPARATORS)), min_size=0, max_size=5
).map(lambda parts: "".join(a + b for a, b in parts))
raw_text = st.text(
    alphabet=sorted(set("xyzQ0123456789 .,'\t\n-!:") | set(vqa_tables.PUNCTUATION)), max_size=16
)


@settings(max_examples=600, deadline=None)
@given(
    pool=st.lists(answer_text | raw_text, min_size=1, max_size=4),
    picks=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12),
    pred=answer_text | raw_text,
    pred_from_pool=st.booleans(),
)
def test_differential_hypothesis(
    pool: list[str], picks: list[int], pred: str, pred_from_pool: bool
) -> None:
    answers = [pool[i % len(pool)] for i in picks]
    prediction = pool[0] if pred_from_pool else pred
    assert vqa_accuracy(prediction, answers) == VQAEvalReading().evaluate_one(prediction, answers)
    if len(answers) == 10:
        assert textvqa_accuracy(prediction, answers) == EvalAIReading().score(prediction, answers)
