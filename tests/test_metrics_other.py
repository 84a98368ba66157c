"""Exact match, Encyclopedic-VQA (with its judges) and multiple choice, rule by rule."""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import string
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammr.backends.llm.scripted import ScriptedLLM
from hammr.eval.datasets import load_dataset
from hammr.eval.metrics import (
    METRICS,
    BEMJudge,
    EmbeddingJudge,
    EncVQAAccuracy,
    ExactMatch,
    LLMJudge,
    MultipleChoice,
    correct_letter,
    extract_choice,
    get_metric,
    list_iou,
    make_judge,
    normalize_encvqa_answer,
    normalize_exact,
    parse_verdict,
    split_candidate_items,
)
from hammr.eval.metrics.normalize import boolean_value, extract_number
from hammr.eval.types import Sample
from official_tables import CONTRACTION_PAIRS

DATA = Path(__file__).resolve().parent / "data" / "eval"
SHARED = Path("/work/shared/data")


def sample(answers: tuple[str, ...], **kw: Any) -> Sample:
    return Sample(
        id=kw.pop("id", "s1"),
        dataset=kw.pop("dataset", "test"),
        question=kw.pop("question", "What is it?"),
        answers=answers,
        images={},
        **kw,
    )


# =============================================================================================
# Exact match
# =============================================================================================


def test_exact_lower_case_and_strip() -> None:
    assert normalize_exact("  Left \n") == "left"


def test_exact_newlines_and_tabs() -> None:
    assert normalize_exact("dark\nblue\tcar") == "dark blue car"


def test_exact_collapses_inner_whitespace() -> None:
    assert normalize_exact("dark    blue") == "dark blue"


def test_exact_strips_trailing_punctuation() -> None:
    assert normalize_exact("Yes.") == "yes"
    assert normalize_exact("left!") == "left"
    assert normalize_exact("left?!") == "left"
    assert normalize_exact("left;") == "left"


def test_exact_strips_quotes_and_markdown() -> None:
    assert normalize_exact('"left"') == "left"
    assert normalize_exact("**left**") == "left"
    assert normalize_exact("'left.'") == "left"
    assert normalize_exact("“left”") == "left"


def test_exact_keeps_inner_punctuation() -> None:
    assert normalize_exact("t-shirt") == "t-shirt"
    assert normalize_exact("red, white") == "red, white"
    assert normalize_exact("3.5") == "3.5"


def test_exact_drops_articles() -> None:
    assert normalize_exact("The table") == "table"
    assert normalize_exact("a man") == "man"
    assert normalize_exact("an apple") == "apple"
    assert normalize_exact("theatre") == "theatre"


def test_exact_number_words_to_digits() -> None:
    assert normalize_exact("Two") == "2"
    assert normalize_exact("zero") == "0"
    assert normalize_exact("twelve") == "12"
    assert normalize_exact("twenty") == "20"
    assert normalize_exact("two dogs") == "2 dogs"
    assert normalize_exact("twentyone") == "twentyone"


def test_exact_numeric_option_extracts_one_number() -> None:
    assert normalize_exact("There are 3 cars.", numeric=True) == "3"
    assert normalize_exact("three", numeric=True) == "3"
    assert normalize_exact("I count three dogs", numeric=True) == "3"
    assert normalize_exact("1,200", numeric=True) == "1200"
    assert normalize_exact("3.0", numeric=True) == "3"
    assert normalize_exact("3 cars, so 3", numeric=True) == "3"


def test_exact_numeric_option_no_and_none_are_zero() -> None:
    assert normalize_exact("There are no cars.", numeric=True) == "0"
    assert normalize_exact("none", numeric=True) == "0"


def test_exact_numeric_option_leaves_several_numbers_alone() -> None:
    assert normalize_exact("2 or 3", numeric=True) == "2 or 3"
    assert extract_number("2 or 3") is None
    assert extract_number("no number here") == "0"  # 'no' counts as zero
    assert extract_number("many") is None


def test_exact_without_numeric_does_not_extract() -> None:
    assert normalize_exact("There are 3 cars.") == "there are 3 cars"


def test_exact_boolean_option() -> None:
    assert normalize_exact("True", boolean=True) == "yes"
    assert normalize_exact("yes", boolean=True) == "yes"
    assert normalize_exact("False", boolean=True) == "no"
    assert normalize_exact("No.", boolean=True) == "no"
    assert normalize_exact("Yes, both images show dogs.", boolean=True) == "yes"
    assert normalize_exact("maybe", boolean=True) == "maybe"
    assert boolean_value("the statement is true") is None  # only a leading word counts


def test_exact_without_boolean_true_is_not_yes() -> None:
    assert normalize_exact("True") == "true"


async def test_exact_match_metric_scores() -> None:
    m = ExactMatch()
    assert (await m.score("The Left.", sample(("left",)))).value == 1.0
    assert (await m.score("right", sample(("left",)))).value == 0.0
    # Any of several answers.
    assert (await m.score("sofa", sample(("couch", "sofa")))).value == 1.0


async def test_exact_match_nlvr2_and_counting() -> None:
    nlvr2 = get_metric("exact_match", boolean=True)
    assert (await nlvr2.score("Yes.", sample(("True",)))).value == 1.0
    assert (await nlvr2.score("false", sample(("True",)))).value == 0.0
    tally = get_metric("exact_match", numeric=True)
    assert (await tally.score("There are three zebras.", sample(("3",)))).value == 1.0
    assert (await tally.score("4", sample(("3",)))).value == 0.0


async def test_exact_match_decides_boolean_and_numeric_per_sample() -> None:
    m = get_metric("exact_match")  # no options: both automatic
    # Every answer a yes/no/true/false word: boolean mode.
    assert (await m.score("Yes, both images show dogs.", sample(("True",)))).value == 1.0
    assert (await m.score("False", sample(("no",)))).value == 1.0
    # Every answer a number: numeric mode.
    assert (await m.score("I count three zebras.", sample(("3",)))).value == 1.0
    assert (await m.score("There are no cars", sample(("0",)))).value == 1.0
    # Neither: plain normalisation ('there are 3 cars' is not '3 cars').
    assert (await m.score("There are 3 cars", sample(("3 cars",)))).value == 0.0
    assert (await m.score("yes it is", sample(("yes", "sofa")))).value == 0.0
    assert isinstance(m, ExactMatch)
    assert m.modes(["True", "false"]) == (True, False)
    assert m.modes(["2", "two", "1,000"]) == (False, True)
    assert m.modes(["left", "2"]) == (False, False)


async def test_exact_match_options_override_the_automatic_choice() -> None:
    off = get_metric("exact_match", boolean=False, numeric=False)
    assert (await off.score("Yes.", sample(("True",)))).value == 0.0
    assert (await off.score("There are 3 cars.", sample(("3",)))).value == 0.0
    on = ExactMatch(boolean=True, numeric=True)
    assert on.modes(["left"]) == (True, True)
    assert on.matches("Yes, left", ["yes"])


async def test_exact_match_without_answers_raises() -> None:
    with pytest.raises(ValueError, match="no ground-truth"):
        await ExactMatch().score("x", sample(()))


# =============================================================================================
# Encyclopedic-VQA: normalisation
# =============================================================================================


def test_encvqa_lower_case() -> None:
    assert normalize_encvqa_answer("Paris") == "paris"


def test_encvqa_newlines_tabs_and_strip() -> None:
    assert normalize_encvqa_answer(" new\nyork\tcity ") == "new york city"


def test_encvqa_drops_span_prefix() -> None:
    assert normalize_encvqa_answer("<extra_id_0> Paris") == "paris"


def test_encvqa_deletes_all_punctuation() -> None:
    assert normalize_encvqa_answer("rock-n-roll") == "rocknroll"
    assert normalize_encvqa_answer("U.S.A.") == "usa"
    assert normalize_encvqa_answer("3.5 m") == "35 m"
    assert normalize_encvqa_answer("snake_case") == "snakecase"
    assert normalize_encvqa_answer("‘quoted’") == "quoted"
    assert normalize_encvqa_answer("café´") == "café"
    assert normalize_encvqa_answer("red,blue") == "redblue"


def test_encvqa_drops_articles_and_answer_prefix() -> None:
    assert normalize_encvqa_answer("The answer is Paris") == "paris"
    assert normalize_encvqa_answer("a dog") == "dog"
    assert normalize_encvqa_answer("an owl") == "owl"
    assert normalize_encvqa_answer("the cat") == "cat"
    assert normalize_encvqa_answer("theatre") == "theatre"
    assert normalize_encvqa_answer("banana") == "banana"


def test_encvqa_digit_and_boolean_map() -> None:
    assert normalize_encvqa_answer("three") == "3"
    assert normalize_encvqa_answer("none") == "0"
    assert normalize_encvqa_answer("ten") == "10"
    assert normalize_encvqa_answer("True") == "yes"
    assert normalize_encvqa_answer("false") == "no"
    assert normalize_encvqa_answer("entailment") == "yes"
    assert normalize_encvqa_answer("contradiction") == "no"


def test_encvqa_contractions() -> None:
    # The apostrophe is deleted first, then the contraction restores it.
    assert normalize_encvqa_answer("don't") == "don't"
    assert normalize_encvqa_answer("isnt") == "isn't"


def test_encvqa_collapses_whitespace() -> None:
    assert normalize_encvqa_answer("  new   york ") == "new york"


# =============================================================================================
# Encyclopedic-VQA: lists
# =============================================================================================


def test_candidate_items_split() -> None:
    assert split_candidate_items("oak, pine and birch") == ["oak", "pine", "birch"]
    assert split_candidate_items("oak & pine,Birch") == ["oak", "pine", "birch"]
    # As in multianswer_exact_match: only ' and ' and ' & ' exactly; '&&' does not split a
    # prediction (its '&'s are punctuation and vanish).
    assert split_candidate_items("oak & pine&&Birch") == ["oak", "pinebirch"]
    assert split_candidate_items("Oak AND pine,") == ["oak and pine"]
    assert split_candidate_items("oak and\tpine") == ["oak and pine"]
    # 'and' inside a word does not split.
    assert split_candidate_items("sandpiper") == ["sandpiper"]


def test_list_iou_values() -> None:
    assert list_iou(["oak", "pine"], ["Pine", "oak."]) == 1.0
    assert list_iou(["oak", "pine"], ["oak"]) == 0.5
    assert list_iou(["oak", "pine", "birch"], ["oak", "maple"]) == 0.25
    assert list_iou(["oak"], []) == 0.0
    with pytest.raises(ValueError, match="empty"):
        list_iou(["", "."], ["oak"])


# =============================================================================================
# Encyclopedic-VQA: the metric
# =============================================================================================


class RecordingJudge:
    name = "fake"

    def __init__(self, verdict: bool) -> None:
        self.verdict = verdict
        self.calls: list[tuple[str, str, str]] = []

    async def judge(self, question: str, reference: str, candidate: str) -> bool:
        self.calls.append((question, reference, candidate))
        return self.verdict


async def test_encvqa_exact_match_decides_first() -> None:
    judge = RecordingJudge(False)
    score = await EncVQAAccuracy(judge).score("The Eiffel Tower.", sample(("eiffel tower",)))
    assert (score.value, score.judge) == (1.0, "exact")
    assert judge.calls == []


async def test_encvqa_any_reference_alternative() -> None:
    score = await EncVQAAccuracy().score("1889", sample(("1887", "1889")))
    assert (score.value, score.judge) == (1.0, "exact")


async def test_encvqa_without_judge_is_wrong_with_none() -> None:
    score = await EncVQAAccuracy().score("tall tower", sample(("eiffel tower",)))
    assert (score.value, score.judge) == (0.0, "none")
    assert "no judge" in score.detail


async def test_encvqa_judge_decides_the_rest() -> None:
    judge = RecordingJudge(True)
    s = sample(("1887", "1889"), question="When was it built?")
    score = await EncVQAAccuracy(judge).score("in 1889 AD", s)
    assert (score.value, score.judge) == (1.0, "fake")
    assert judge.calls[0] == ("When was it built?", "1887", "in 1889 AD")
    judge = RecordingJudge(False)
    score = await EncVQAAccuracy(judge).score("in 1889 AD", s)
    assert (score.value, score.judge) == (0.0, "fake")
    assert len(judge.calls) == 2  # every reference was tried


async def test_encvqa_empty_prediction_skips_the_judge() -> None:
    judge = RecordingJudge(True)
    score = await EncVQAAccuracy(judge).score("  ", sample(("paris",)))
    assert (score.value, score.judge, score.detail) == (0.0, "none", "empty prediction")
    assert judge.calls == []


MULTI = {"question_type": "multi_answer"}


async def test_encvqa_multi_answer_list_iou() -> None:
    metric = EncVQAAccuracy()
    s = sample(("oak&&pine&&birch",), meta=MULTI)
    full = await metric.score("Oak, pine and birch.", s)
    assert (full.value, full.judge) == (1.0, "list-iou")
    two_of_three = await metric.score("oak and pine", s)  # IoU 2/3
    assert (two_of_three.value, two_of_three.judge) == (1.0, "list-iou")
    one = await metric.score("oak", s)  # IoU 1/3
    assert (one.value, one.judge) == (0.0, "none")
    wrong_extra = await metric.score("oak, maple", s)  # IoU 1/4
    assert wrong_extra.value == 0.0


async def test_encvqa_multi_answer_iou_threshold_is_inclusive() -> None:
    s = sample(("oak&&pine",), meta=MULTI)
    assert (await EncVQAAccuracy().score("pine", s)).value == 1.0  # IoU exactly 0.5


async def test_encvqa_multi_answer_as_tuple() -> None:
    s = sample(("oak", "pine", "birch"), meta=MULTI)
    score = await EncVQAAccuracy().score("birch, pine, oak", s)
    assert (score.value, score.judge) == (1.0, "list-iou")


async def test_encvqa_multi_answer_alternative_lists() -> None:
    s = sample(("oak&&pine", "elm&&ash"), meta=MULTI)
    assert (await EncVQAAccuracy().score("elm and ash", s)).value == 1.0


async def test_encvqa_multi_answer_lists_from_meta() -> None:
    # As the EncVQA adapter gives them: alternatives, each already split on '&&'.
    meta = {"question_type": "multi_answer", "answer_lists": (("oak",), ("pine",))}
    s = sample(("oak", "pine"), meta=meta)
    assert (await EncVQAAccuracy().score("pine", s)).value == 1.0
    # Without the meta, the tuple is one list: 'pine' alone has IoU 1/2, still correct.
    assert (await EncVQAAccuracy().score("pine", sample(("oak", "pine"), meta=MULTI))).value == 1.0
    # Against the alternatives ('oak') and ('pine'), 'oak, pine, elm' has IoU 1/3 with each.
    assert (await EncVQAAccuracy().score("oak, pine, elm", s)).value == 0.0
    assert (
        await EncVQAAccuracy().score("oak, pine, elm", sample(("oak", "pine"), meta=MULTI))
    ).value == 1.0  # one list: IoU 2/3
    # Malformed meta falls back to the answers.
    bad = {"question_type": "multi_answer", "answer_lists": "oak"}
    assert (await EncVQAAccuracy().score("oak and pine", sample(("oak&&pine",), meta=bad))).value


async def test_encvqa_multi_answer_judge_sees_comma_joined_reference() -> None:
    judge = RecordingJudge(True)
    s = sample(("oak&&pine&&birch",), meta=MULTI, question="Which trees?")
    score = await EncVQAAccuracy(judge).score("conifers", s)
    assert (score.value, score.judge) == (1.0, "fake")
    assert judge.calls == [("Which trees?", "oak,pine,birch", "conifers")]


async def test_encvqa_errors() -> None:
    with pytest.raises(ValueError, match="no ground-truth"):
        await EncVQAAccuracy().score("x", sample(()))
    with pytest.raises(ValueError, match="empty after normalisation"):
        await EncVQAAccuracy().score("x", sample(("the",)))


# =============================================================================================
# Judges
# =============================================================================================


def test_parse_verdict() -> None:
    assert parse_verdict("Yes") is True
    assert parse_verdict("yes.") is True
    assert parse_verdict(" YES, they match") is True
    assert parse_verdict("No") is False
    assert parse_verdict("no, yes is wrong") is False
    assert parse_verdict("They match") is False
    assert parse_verdict("") is False
    assert parse_verdict("yesterday") is False


async def test_llm_judge_with_scripted_llm() -> None:
    llm = ScriptedLLM(["Yes", "no.", "I am not sure"])
    judge = LLMJudge(llm)
    assert judge.name == "llm"
    assert await judge.judge("Who built it?", "Gustave Eiffel", "G. Eiffel") is True
    assert await judge.judge("Who built it?", "Gustave Eiffel", "Napoleon") is False
    assert await judge.judge("Who built it?", "Gustave Eiffel", "someone") is False
    request = llm.requests[0]
    assert request.temperature == 0.0
    assert request.grammar is None
    assert [m.role for m in request.messages] == ["system", "user"]
    user = request.messages[1].text()
    assert "Question: Who built it?" in user
    assert "Reference answer: Gustave Eiffel" in user
    assert "Candidate answer: G. Eiffel" in user


async def test_llm_judge_uses_a_grammar_where_supported() -> None:
    llm = ScriptedLLM(["yes"], grammar="gbnf")
    assert await LLMJudge(llm).judge("q", "a", "b") is True
    assert llm.requests[0].grammar is not None
    assert '"yes"' in llm.requests[0].grammar


async def test_encvqa_with_llm_judge() -> None:
    metric = get_metric("encvqa", judge="llm", llm=ScriptedLLM(["yes"]))
    score = await metric.score("G. Eiffel", sample(("Gustave Eiffel",)))
    assert (score.value, score.judge) == (1.0, "llm")


class FakeEmbedder:
    """Fixed vectors per text; not normalised on purpose (the judge renormalises)."""

    def __init__(self, vectors: dict[str, list[float]], asynchronous: bool) -> None:
        self.vectors = vectors
        self.asynchronous = asynchronous
        self.calls: list[list[str]] = []

    def _rows(self, texts: list[str]) -> np.ndarray:
        self.calls.append(texts)
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> Any:
        if not self.asynchronous:
            return self._rows(texts)

        async def later() -> np.ndarray:
            return self._rows(texts)

        return later()


VECTORS = {
    "paris": [3.0, 0.0],
    "Paris, France": [2.0, 0.2],  # cos = 2/sqrt(4.04) = 0.995
    "Lyon": [1.0, 1.0],  # cos = 0.707
}


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_embedding_judge(asynchronous: bool) -> None:
    embedder = FakeEmbedder(VECTORS, asynchronous)
    judge = EmbeddingJudge(embedder, threshold=0.9)
    assert judge.name == "embedding"
    assert await judge.similarity("paris", "Paris, France") == pytest.approx(2 / math.sqrt(4.04))
    assert await judge.judge("q", "paris", "Paris, France") is True
    assert await judge.judge("q", "paris", "Lyon") is False
    assert await EmbeddingJudge(embedder, threshold=0.7).judge("q", "paris", "Lyon") is True
    assert embedder.calls[1] == ["paris", "Paris, France"]


async def test_encvqa_with_embedding_judge() -> None:
    metric = get_metric("encvqa", judge="embedding", embedder=FakeEmbedder(VECTORS, True))
    score = await metric.score("Paris, France", sample(("paris",)))
    # Exact match fails ('paris france' != 'paris'); the embedding judge accepts.
    assert (score.value, score.judge) == (1.0, "embedding")


# ---- BEM with a tiny random-weight BERT written to disk (nothing downloaded) ----------------

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "what",
    "color",
    "is",
    "the",
    "sky",
    "?",
    "blue",
    "azure",
    "##ish",
    "red",
]


@pytest.fixture(scope="module")
def bem_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("bem")
    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tokenizer = transformers.BertTokenizer(str(vocab), do_lower_case=True)
    tokenizer.save_pretrained(str(path))
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        type_vocab_size=2,
        num_labels=2,
    )
    model = transformers.BertForSequenceClassification(config)
    model.save_pretrained(str(path))
    return path


def ids(*tokens: str) -> list[int]:
    return [VOCAB.index(t) for t in tokens]


def test_bem_encoding(bem_dir: Path) -> None:
    judge = BEMJudge(bem_dir)
    input_ids, segments = judge.encode("What color is the sky?", "Blue", "azureish")
    assert input_ids == ids(
        "[CLS]", "azure", "##ish", "[SEP]", "blue", "[SEP]",
        "what", "color", "is", "the", "sky", "?", "[SEP]",
    )  # fmt: skip
    # tensorflow_text.combine_segments numbers the three segments 0, 1, 2 (each with its SEP).
    assert segments == [0, 0, 0, 0] + [1, 1] + [2] * 7


def test_bem_checkpoint_with_two_token_types_gets_a_zero_third(bem_dir: Path) -> None:
    import torch
    import transformers

    original: Any = transformers.BertForSequenceClassification.from_pretrained(str(bem_dir))
    model: Any = BEMJudge(bem_dir)._model
    table = model.bert.embeddings.token_type_embeddings.weight
    assert tuple(table.shape) == (3, 16)
    assert torch.equal(table[:2], original.bert.embeddings.token_type_embeddings.weight)
    assert torch.count_nonzero(table[2]) == 0


def test_bem_encoding_truncates_question_then_reference(bem_dir: Path) -> None:
    judge = BEMJudge(bem_dir, max_length=9)  # room for 5 content tokens
    input_ids, segments = judge.encode("what color is the sky", "blue red", "azure")
    assert input_ids == ids(
        "[CLS]", "azure", "[SEP]", "blue", "red", "[SEP]", "what", "color", "[SEP]"
    )
    assert len(segments) == 9
    judge = BEMJudge(bem_dir, max_length=6)  # 2 content tokens: the question goes first
    input_ids, _ = judge.encode("what color", "blue red", "azure")
    assert input_ids == ids("[CLS]", "azure", "[SEP]", "blue", "[SEP]", "[SEP]")


def _set_classifier(judge: BEMJudge, bias: tuple[float, float]) -> None:
    import torch

    model: Any = judge._model
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(bias))


async def test_bem_probability_and_verdict(bem_dir: Path) -> None:
    judge = BEMJudge(bem_dir)
    # Random weights: a probability, and the verdict follows the threshold.
    p = judge.probability("what color is the sky?", "blue", "azure")
    assert 0.0 < p < 1.0
    assert await judge.judge("what color is the sky?", "blue", "azure") is (p >= 0.5)
    # With a zero classifier the logits are its bias: softmax([0, 3])[1] = 1 / (1 + e^-3).
    _set_classifier(judge, (0.0, 3.0))
    assert judge.probability("q", "blue", "azure") == pytest.approx(1 / (1 + math.exp(-3)), 1e-5)
    assert await judge.judge("what color is the sky?", "blue", "azure") is True
    # Label 1 is 'equivalent': a bias favouring label 0 rejects.
    _set_classifier(judge, (2.0, 0.0))
    assert judge.probability("q", "blue", "red") == pytest.approx(1 / (1 + math.exp(2)), 1e-5)
    assert await judge.judge("what color is the sky?", "blue", "red") is False


async def test_encvqa_with_bem_judge(bem_dir: Path) -> None:
    metric = get_metric("encvqa", judge="bem", checkpoint=str(bem_dir))
    assert isinstance(metric, EncVQAAccuracy) and isinstance(metric.judge, BEMJudge)
    _set_classifier(metric.judge, (0.0, 5.0))
    score = await metric.score("azure", sample(("blue",), question="what color is the sky?"))
    assert (score.value, score.judge) == (1.0, "bem")
    exact = await metric.score("Blue.", sample(("blue",)))
    assert exact.judge == "exact"


def test_bem_missing_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        BEMJudge(tmp_path / "nowhere")


def test_bem_without_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes the import fail
    with pytest.raises(ImportError, match="torch and transformers"):
        BEMJudge(tmp_path)


def test_bem_wrong_label_count(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    transformers.BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(str(tmp_path))
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        num_labels=3,
    )
    transformers.BertForSequenceClassification(config).save_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="expected 2"):
        BEMJudge(tmp_path)


# =============================================================================================
# Multiple choice
# =============================================================================================

COLORS = ("red", "dark red", "blue", "green")


@pytest.mark.parametrize(
    ("reply", "letter", "how"),
    [
        # The whole reply is a letter.
        ("B", "B", "letter"),
        ("b", "B", "letter"),
        ("(C)", "C", "letter"),
        ("D.", "D", "letter"),
        ("**A**", "A", "letter"),
        (" [b] ", "B", "letter"),
        # Answer phrases.
        ("Answer: B", "B", "answer-phrase"),
        ("The answer is B.", "B", "answer-phrase"),
        ("The answer is (C) blue", "C", "answer-phrase"),
        ("the answer is: (D)", "D", "answer-phrase"),
        ("Final answer: **A**", "A", "answer-phrase"),
        ("The correct option is D", "D", "answer-phrase"),
        ("Answer: option C", "C", "answer-phrase"),
        ("The best choice would be B", "B", "answer-phrase"),
        ("(A) is tempting, but the answer is B.", "B", "answer-phrase"),
        # Marked letters.
        ("I pick (B) because it is darker.", "B", "marked-letter"),
        ("It must be **C** here.", "C", "marked-letter"),
        ("B. dark red", "B", "marked-letter"),
        ("Looking closely...\nC) blue", "C", "marked-letter"),
        ("D: green", "D", "marked-letter"),
        ("I would go with option A", "A", "marked-letter"),
        ("[C] blue", "C", "marked-letter"),
        # Option text.
        ("blue", "C", "option-text"),
        ("Dark Red.", "B", "option-text"),
        ("The car is dark red.", "B", "option-text"),  # longest match beats 'red'
        ("It looks green to me", "D", "option-text"),
        # A bare letter, when nothing else names an option.
        ("I think it is B", "B", "bare-letter"),
        ("B is correct", "B", "bare-letter"),
        ("I'm fairly sure: D", "D", "bare-letter"),
    ],
)
def test_extract_choice(reply: str, letter: str, how: str) -> None:
    got = extract_choice(reply, COLORS)
    assert (got.letter, got.how) == (letter, how)


@pytest.mark.parametrize(
    "reply",
    [
        "Answer: A. Answer: B.",  # two answer phrases
        "(A) or (B)",  # two marked letters
        "A. red\nB. dark red",  # two lines opening with letters
        "Option C or option D",
        "C is right, not D",  # two bare letters
    ],
)
def test_extract_choice_ambiguous(reply: str) -> None:
    got = extract_choice(reply, COLORS)
    assert got.letter is None
    assert got.how == "ambiguous"
    assert len(got.candidates) == 2


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I cannot tell",
        "the answer is a colour I cannot name",  # lower-case 'a' is an article, not an option
        "The answer is purple",
        "(E)",  # not one of the four options
        "A purple thing",  # a capital A opening a sentence is not marked
    ],
)
def test_extract_choice_nothing(reply: str) -> None:
    got = extract_choice(reply, COLORS)
    assert got.letter is None
    assert got.how == "none"


def test_extract_choice_option_texts_of_equal_length_are_ambiguous() -> None:
    got = extract_choice("Either a cat or a dog", ("cat", "dog", "cow and calf"))
    assert (got.letter, got.how, got.candidates) == (None, "ambiguous", ("A", "B"))


def test_extract_choice_without_option_texts_accepts_any_letter() -> None:
    assert extract_choice("(F)").letter == "F"
    assert extract_choice("blue").letter is None


def test_extract_choice_only_valid_letters_count() -> None:
    # 'E' is not an option, so only B is asserted.
    assert extract_choice("(E) is not listed; the answer is (B)", COLORS).letter == "B"
    assert extract_choice("(E) is not listed; (B) is", COLORS).letter == "B"


def test_correct_letter() -> None:
    assert correct_letter(sample(("B",), choices=COLORS)) == "B"
    assert correct_letter(sample(("(c)",), choices=COLORS)) == "C"
    assert correct_letter(sample(("Dark red",), choices=COLORS)) == "B"
    with pytest.raises(ValueError, match="neither"):
        correct_letter(sample(("purple",), choices=COLORS))
    with pytest.raises(ValueError, match="no ground-truth"):
        correct_letter(sample((), choices=COLORS))


async def test_multiple_choice_metric() -> None:
    metric = get_metric("multiple_choice")
    assert isinstance(metric, MultipleChoice)
    s = sample(("B",), choices=COLORS)
    right = await metric.score("The answer is (B) dark red.", s)
    assert right.value == 1.0 and "chose B" in right.detail
    assert (await metric.score("dark red", s)).value == 1.0
    assert (await metric.score("Answer: C", s)).value == 0.0
    ambiguous = await metric.score("(A) or (B)", s)
    assert (ambiguous.value, ambiguous.detail) == (0.0, "ambiguous")
    nothing = await metric.score("no idea", s)
    assert (nothing.value, nothing.detail) == (0.0, "no option found")


# =============================================================================================
# get_metric
# =============================================================================================


def test_get_metric_names() -> None:
    assert sorted(METRICS) == [
        "encvqa",
        "exact_match",
        "infoseek",
        "mevqa_accuracy",
        "multiple_choice",
        "textvqa_accuracy",
        "vqa_accuracy",
    ]
    for name in METRICS:
        assert get_metric(name).name == name


def test_get_metric_unknown_name_lists_the_names() -> None:
    names = (
        "encvqa, exact_match, infoseek, mevqa_accuracy, multiple_choice, textvqa_accuracy, "
        "vqa_accuracy"
    )
    with pytest.raises(ValueError, match=names):
        get_metric("bleu")


def test_get_metric_unknown_options() -> None:
    with pytest.raises(ValueError, match="takes no options"):
        get_metric("vqa_accuracy", strict=True)
    with pytest.raises(ValueError, match="takes boolean, numeric"):
        get_metric("exact_match", lower=True)
    with pytest.raises(ValueError, match="unknown judge"):
        get_metric("encvqa", judge="gpt")
    with pytest.raises(ValueError, match="needs the option 'checkpoint'"):
        get_metric("encvqa", judge="bem")
    with pytest.raises(ValueError, match="takes llm, max_tokens"):
        get_metric("encvqa", judge="llm", llm=ScriptedLLM([]), temperature=0.5)
    with pytest.raises(ValueError, match="without a judge"):
        get_metric("encvqa", threshold=0.5)


def test_get_metric_options_reach_the_metric() -> None:
    exact = get_metric("exact_match", boolean=True, numeric=True)
    assert isinstance(exact, ExactMatch) and exact.boolean and exact.numeric
    enc = get_metric("encvqa", iou_threshold=0.75)
    assert isinstance(enc, EncVQAAccuracy) and enc.iou_threshold == 0.75 and enc.judge is None
    ready = RecordingJudge(True)
    assert make_judge(ready) is ready
    assert make_judge(None) is None
    assert make_judge("none") is None


# =============================================================================================
# Encyclopedic-VQA against an independent reading of its evaluation code
# =============================================================================================


class EncVQAReading:
    """google-research/google-research encyclopedic_vqa/evaluation_utils.py at 8d8a4f1b2775,
    read again: preprocess_answer, the exact-match functions, and evaluate_example with a
    stand-in for the BEM scoring function."""

    def __init__(self, bem: Any = None) -> None:
        self.bem = bem or (lambda example: 0.0)
        self.punctuation_characters = string.punctuation + "‘’´`_"
        self.question_types = ["templated", "automatic", "multi_answer", "2_hop"]
        numbers = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight"]
        self.digit_map = {
            "none": "0",
            **{w: str(i) for i, w in enumerate(numbers)},
            "nine": "9",
            "ten": "10",
            "entailment": "yes",
            "true": "yes",
            "contradiction": "no",
            "false": "no",
        }
        self.contractions = dict(CONTRACTION_PAIRS)

    def preprocess_answer(self, answer: str) -> str:
        def remove_articles(s: str) -> str:
            return re.sub(r"\b(the answer is|a|an|the)\b", " ", s)

        def replace_punctuation(s: str) -> str:
            to_replace = set(self.punctuation_characters)
            return "".join("" if c in to_replace else c for c in s)

        def white_space_fix(s: str) -> str:
            return " ".join(s.split())

        def remove_llm_span_prefix(answer: str, prefix: str = "<extra_id_0> ") -> str:
            if answer.startswith(prefix):
                return answer.replace(prefix, "")
            return answer

        def standarize_digits_and_contractions(s: str) -> str:
            output = []
            for w in s.split():
                w = self.digit_map.get(w, w)
                w = self.contractions.get(w, w)
                output.append(w)
            return " ".join(output)

        answer = answer.lower().replace("\n", " ").replace("\t", " ").strip()
        answer = remove_llm_span_prefix(answer)
        answer = replace_punctuation(answer)
        answer = remove_articles(answer)
        answer = standarize_digits_and_contractions(answer)
        return white_space_fix(answer)

    def singleanswer_exact_match(self, reference: str, candidate: str) -> bool:
        preprocessed_reference = self.preprocess_answer(reference)
        if not preprocessed_reference:
            raise ValueError("Reference answer is empty after preprocessing.")
        return preprocessed_reference == self.preprocess_answer(candidate)

    def multianswer_exact_match(self, reference: str, candidate: str) -> bool:
        reference_list = [self.preprocess_answer(a) for a in reference.split("&&")]
        reference_list = [a for a in reference_list if a]
        if not reference_list:
            raise ValueError("Reference list is empty after preprocessing.")
        candidate_list = candidate.replace(" and ", ",").replace(" & ", ",").split(",")
        candidate_list = [self.preprocess_answer(a) for a in candidate_list]
        candidate_list = [a for a in candidate_list if a]
        target_set, prediction_set = set(reference_list), set(candidate_list)
        iou = len(target_set & prediction_set) / len(target_set | prediction_set)
        return iou >= 0.5

    def evaluate_example(
        self, question: str, reference_list: list[str], candidate: str, question_type: str
    ) -> float:
        scores = []
        for reference in reference_list:
            example = {
                "question": question,
                "reference": reference,
                "candidate": candidate,
                "question_type": question_type,
            }
            assert example["question_type"] in self.question_types
            if example["question_type"] == "multi_answer":
                exact = self.multianswer_exact_match(reference, candidate)
            else:
                exact = self.singleanswer_exact_match(reference, candidate)
            if exact:
                scores.append(1.0)
                continue
            if example["question_type"] in ["list", "multianswer", "multi_answer"]:
                example["reference"] = example["reference"].replace("&&", ",")
            scores.append(float(self.bem(example) >= 0.5))
        return max(scores)


def stand_in_bem(example: dict[str, str]) -> float:
    """Any fixed function of the three texts will do: both sides must call it alike."""
    text = example["question"] + "|" + example["reference"] + "|" + example["candidate"]
    return 0.9 if sum(map(ord, text)) % 3 == 0 else 0.1


class StandInJudge:
    name = "stand-in"

    async def judge(self, question: str, reference: str, candidate: str) -> bool:
        example = {"question": question, "reference": reference, "candidate": candidate}
        return stand_in_bem(example) >= 0.5


ENC_TOKENS = [
    "Paris", "paris", "PARIS", "Eiffel", "tower", "oak", "Oak", "pine", "birch", "café",
    "the", "The", "a", "A", "an", "the answer is", "The answer is", "theatre", "answer",
    "one", "two", "Three", "ten", "none", "true", "False", "entailment", "contradiction",
    "dont", "don't", "isn’t", "whats", "let's", "y'all", "1", "2", "10", "3.5", "1,000",
    "<extra_id_0> ", "<extra_id_0>", "&&", "&", " and ", " AND ", " & ", ",", ", ",
    *list(string.punctuation), "‘", "’", "´", "“", "-",
]  # fmt: skip
ENC_SEPARATORS = ["", " ", " ", "  ", "\t", "\n"]


def enc_text(rng: random.Random, tokens: int = 3) -> str:
    return "".join(
        rng.choice(ENC_TOKENS) + rng.choice(ENC_SEPARATORS) for _ in range(rng.randint(1, tokens))
    )


def enc_case(rng: random.Random) -> tuple[str, list[str], str]:
    qtype = rng.choice(["templated", "automatic", "multi_answer", "2_hop"])
    alternatives = []
    for _ in range(rng.randint(1, 3)):
        if qtype == "multi_answer":
            alternatives.append("&&".join(enc_text(rng, 2) for _ in range(rng.randint(1, 4))))
        else:
            alternatives.append(enc_text(rng))
    pool = [
        *alternatives,
        *(a.replace("&&", rng.choice([", ", " and ", " & "])) for a in alternatives),
    ]
    roll = rng.random()
    candidate = rng.choice(pool) if roll < 0.5 else enc_text(rng, 5)
    if rng.random() < 0.3:
        candidate = candidate.upper() if rng.random() < 0.5 else "The answer is " + candidate
    return qtype, alternatives, candidate


def adapter_sample(qtype: str, alternatives: list[str]) -> Sample:
    """A sample as the encvqa adapter builds it from one CSV row."""
    lists = tuple(tuple(p.strip() for p in a.split("&&") if p.strip()) for a in alternatives)
    return sample(
        tuple(alternatives),
        question="Which one?",
        meta={"question_type": qtype, "answer_lists": lists},
    )


async def test_encvqa_differential_seeded() -> None:
    rng = random.Random(8)
    plain, with_judge = EncVQAReading(), EncVQAReading(stand_in_bem)
    seen = {"exact": 0, "list-iou": 0, "judged right": 0, "wrong": 0, "skipped": 0}
    for _ in range(3000):
        qtype, alternatives, candidate = enc_case(rng)
        refs = [a.strip() for a in alternatives]
        s = adapter_sample(qtype, refs)
        try:
            official = plain.evaluate_example("Which one?", refs, candidate, qtype)
        except ValueError:
            seen["skipped"] += 1  # a reference empty after preprocessing: the original raises
            continue
        ours = await EncVQAAccuracy().score(candidate, s)
        assert ours.value == official, (qtype, refs, candidate)
        if not candidate.strip():
            continue  # hammr does not ask a judge about an empty prediction
        official_judged = with_judge.evaluate_example("Which one?", refs, candidate, qtype)
        judged = await EncVQAAccuracy(StandInJudge()).score(candidate, s)
        assert judged.value == official_judged, (qtype, refs, candidate)
        seen[ours.judge if ours.value else ("judged right" if judged.value else "wrong")] += 1
    assert min(seen.values()) > 50, seen


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=sorted(set("".join(ENC_TOKENS)) | set(" \t\nxyzİ")), max_size=30))
def test_encvqa_normalisation_differential_hypothesis(text: str) -> None:
    assert normalize_encvqa_answer(text) == EncVQAReading().preprocess_answer(text)


def test_encvqa_empty_references() -> None:
    # The original raises on a reference that preprocesses to nothing; hammr skips it while
    # another reference is left (documented) and raises only when none is.
    with pytest.raises(ValueError):
        EncVQAReading().evaluate_example("q", ["the", "Paris"], "Paris", "templated")
    assert asyncio.run(EncVQAAccuracy().score("Paris", sample(("the", "Paris")))).value == 1.0


# =============================================================================================
# GQA, NLVR2, TallyQA: on predictions in the official format, hammr equals the official scorer
# =============================================================================================


def gqa_questions() -> dict[str, dict[str, Any]]:
    files = [DATA / "gqa" / "testdev_balanced_questions.json"]
    if SHARED.is_dir():
        files += sorted((SHARED / "gqa").glob("*.json"))
    questions: dict[str, dict[str, Any]] = {}
    for f in files:
        questions.update(json.loads(f.read_text(encoding="utf-8")))
    return questions


def test_gqa_official_format_predictions_score_as_eval_py() -> None:
    # eval.py: correct = (predicted == gold); toScore(correct). Official-format predictions are
    # answers of the dataset's own vocabulary, so every real answer is tried on every question.
    questions = gqa_questions()
    vocabulary = sorted({q["answer"] for q in questions.values()})
    assert len(vocabulary) >= 5
    samples = {
        s.id: s for s in load_dataset("gqa", DATA / "gqa" / "testdev_balanced_questions.json")
    }
    metric = ExactMatch()
    right = 0
    for qid, question in questions.items():
        gold = question["answer"]
        answers = samples[qid].answers if qid in samples else (gold,)
        assert gold in answers
        for predicted in vocabulary:
            official = float(1 if predicted == gold else 0)
            assert asyncio.run(metric.score(predicted, sample(answers))).value == official
            right += official == 1.0
    assert right == len(questions)


def test_nlvr2_official_format_predictions_score_as_metrics_py() -> None:
    # metrics.py: prediction.lower() == example["label"].lower(), labels 'True'/'False'.
    files = [DATA / "nlvr2" / "test1.json"]
    if SHARED.is_dir():
        files += sorted((SHARED / "nlvr2").glob("*.jsonl"))
    metric = ExactMatch()
    checked = 0
    for f in files:
        labels = {
            json.loads(line)["identifier"]: json.loads(line)["label"]
            for line in f.read_text(encoding="utf-8").splitlines()
            if line.strip()
        }
        for s in load_dataset("nlvr2", f):
            label = labels[s.meta.get("identifier", s.id)]
            for predicted in ("True", "False", "true", "false", "TRUE", "fAlSe"):
                official = float(predicted.lower() == label.lower())
                assert asyncio.run(metric.score(predicted, s)).value == official
                checked += 1
    assert checked >= 40 * 6


def test_tallyqa_official_format_predictions_score_as_integer_equality() -> None:
    # tallyqacode utils.accuracy: np.sum(true == pred) over integer arrays.
    metric = ExactMatch()
    samples = load_dataset("tallyqa", DATA / "tallyqa" / "test.json", complex=False)
    gold_counts = [int(s.answers[0]) for s in samples] + list(range(16))
    for gold in gold_counts:
        for predicted in range(21):
            official = float(predicted == gold)
            got = asyncio.run(metric.score(str(predicted), sample((str(gold),)))).value
            assert got == official
    for s in samples:
        assert asyncio.run(metric.score(s.answers[0], s)).value == 1.0
