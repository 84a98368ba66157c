"""MEVQA to the letter of FS-MEVQA's code: the official answer accuracy (beside hammr's
normalised one), zero-area reference boxes, and the split file's current name SME_test.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import fmean

import pytest

from hammr.eval.datasets import DatasetError, MissingFileError, load_dataset
from hammr.eval.explain_cli import Explained, answer_accuracies
from hammr.eval.metrics import get_metric
from hammr.eval.metrics.explanation import (
    GroundedExplanation,
    box_iou_xyxy,
    detection_score,
    grounding_score,
)
from hammr.eval.metrics.mevqa import (
    MEVQAAccuracy,
    accuracy,
    normalised_answer_correct,
    official_answer_correct,
)
from hammr.eval.suites import load_suite
from hammr.eval.types import RunRecord, Sample

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mevqa" / "MEGQA_test.json"

# (prediction, the dataset's answer): free text as a language model writes it
FREE_TEXT = [
    ("Bus", "bus"),
    ("bus", "bus"),
    ("bus.", "bus"),
    ("Yes, it is.", "yes"),
    ("yes", "yes"),
    ("2", "two"),
    (" two ", "two"),
    ("two", "two"),
    ("Left.", "left"),
    ("left", "left"),
    ("the table", "table"),
    ("", "no"),
    ("no ", "no"),
    ("red", "blue"),
]


def official_script_accuracy(
    res: dict[str, dict[str, str]], gts: dict[str, dict[str, str]]
) -> float:
    """An independent reading of FS-MEVQA's evaluation.py (commit 551e687...), its __main__
    block: keep the ground truths of the results' ids, then count 1 per result whose answer
    is the same Python string as the ground truth's, 0 otherwise, and take the mean."""
    gts = {k: gts[k] for k in res}
    assert res.keys() == gts.keys()
    acc = []
    for k in res:
        acc.append(1 if res[k]["answer"] == gts[k]["answer"] else 0)
    return sum(acc) / len(acc)


def sample(answer: str, sid: str = "q") -> Sample:
    return Sample(id=sid, dataset="mevqa", question="?", answers=(answer,), images={})


async def test_official_accuracy_is_the_scripts_string_equality_on_free_text() -> None:
    metric = get_metric("mevqa_accuracy")
    assert isinstance(metric, MEVQAAccuracy)
    per_sample = []
    for i, (pred, gold) in enumerate(FREE_TEXT):
        k = str(i)
        expected = official_script_accuracy({k: {"answer": pred}}, {k: {"answer": gold}})
        score = await metric.score(pred, sample(gold, k))
        assert score.value == expected, (pred, gold)
        assert official_answer_correct(pred, gold) is (expected == 1)
        per_sample.append(score.value)
    res = {str(i): {"answer": p} for i, (p, _) in enumerate(FREE_TEXT)}
    gts = {str(i): {"answer": g} for i, (_, g) in enumerate(FREE_TEXT)}
    assert fmean(per_sample) == official_script_accuracy(res, gts)
    # only the exact strings pass: bus, yes, two, left
    assert [p for (p, _), v in zip(FREE_TEXT, per_sample, strict=True) if v] == [
        "bus",
        "yes",
        "two",
        "left",
    ]


async def test_the_normalised_reading_accepts_what_the_official_one_refuses() -> None:
    loose = [p for p, g in FREE_TEXT if normalised_answer_correct(p, g)]
    assert loose == [
        "Bus",
        "bus",
        "bus.",
        "Yes, it is.",
        "yes",
        "2",
        " two ",
        "two",
        "Left.",
        "left",
        "the table",
        "no ",
    ]
    score = await MEVQAAccuracy().score("Left.", sample("left"))
    assert score.value == 0.0 and score.detail.endswith("normalised: right")
    assert not official_answer_correct(None, "None")
    assert not normalised_answer_correct(None, "left")
    assert accuracy([]) == 0.0 and accuracy([True, False, True, True]) == 0.75


def explained(pred: str | None, gold: str, dataset: str = "mevqa") -> Explained:
    rec = RunRecord(
        run="r",
        sample_id=f"{pred}-{gold}",
        dataset=dataset,
        question_type="spatial_reasoning",
        question="?",
        answers=(gold,),
        prediction=pred,
        score=0.5,
    )
    return Explained(rec, None, None)


def test_explain_recomputes_both_accuracies_from_the_stored_answers() -> None:
    rows = [explained(p, g) for p, g in FREE_TEXT] + [explained(None, "left")]
    official, normalised = answer_accuracies(rows)
    res = {str(i): {"answer": p} for i, (p, _) in enumerate(FREE_TEXT)}
    gts = {str(i): {"answer": g} for i, (_, g) in enumerate(FREE_TEXT)}
    n = len(FREE_TEXT) + 1  # the unanswered sample counts as wrong
    assert official == official_script_accuracy(res, gts) * len(FREE_TEXT) / n
    assert normalised == 12 / n
    # runs of other datasets keep their stored score
    assert answer_accuracies([explained("left", "left", dataset="gqa")]) == (None, None)


# --- zero-area reference boxes ---------------------------------------------------------------


def test_a_zero_area_box_loads_and_scores_as_the_official_code(tmp_path: Path) -> None:
    record = json.loads(FIXTURE.read_text())["20968402"]  # the apple and the pear
    apple, pear = [50, 120, 110, 180], [200, 110, 260, 190]
    point = [70, 70, 70, 90]  # zero width
    record["boxes"] = {"apple": [[apple, point]], "pear": [[pear]]}
    path = tmp_path / "SME_test.json"
    path.write_text(json.dumps({"1": record}))
    (loaded,) = load_dataset("mevqa", path)
    ref = loaded.meta["reference"]
    assert isinstance(ref, GroundedExplanation)
    assert ref.named_xyxy() == {"apple": [[apple, point]], "pear": [[pear]]}
    # the official group score: each reference box's best IoU, averaged; a zero-area box
    # meets nothing (torchvision: intersection 0 over the other box's area)
    assert box_iou_xyxy(point, apple) == 0.0
    perfect = GroundedExplanation.from_token_boxes(loaded.meta["explanation"], [[apple], [pear]])
    apple_group = fmean([1.0, 0.0])
    assert detection_score(ref, perfect, official_padding=False) == pytest.approx(
        fmean([apple_group, 1.0])
    )
    # vis_eval pads after the first name (to the two predicted tokens), then adds the pear
    assert detection_score(ref, perfect) == pytest.approx(fmean([apple_group, 0.0, 1.0]))
    # REX paints no pixel for it: grounding is the same as without it
    without = GroundedExplanation.from_named_boxes(
        loaded.meta["explanation"], {"apple": [[apple]], "pear": [[pear]]}
    )
    assert grounding_score(ref, perfect) == grounding_score(without, perfect) == 1.0
    # a zero-height box, and a group of zero-area boxes only, load too
    record["boxes"] = {"apple": [[[60, 130, 90, 130]]], "pear": [[pear]]}
    path.write_text(json.dumps({"1": record}))
    (only_zero,) = load_dataset("mevqa", path)
    zero_ref = only_zero.meta["reference"]
    assert detection_score(zero_ref, perfect, official_padding=False) == pytest.approx(0.5)
    assert detection_score(zero_ref, perfect) == pytest.approx(1 / 3)


def test_an_inverted_box_is_still_refused(tmp_path: Path) -> None:
    record = json.loads(FIXTURE.read_text())["20968402"]
    record["boxes"] = {"apple": [[[50, 120, 40, 180]]], "pear": [[[200, 110, 260, 190]]]}
    path = tmp_path / "SME_test.json"
    path.write_text(json.dumps({"9": record}))
    with pytest.raises(DatasetError, match="question 9: a box in 'boxes' is not usable"):
        load_dataset("mevqa", path)


# --- the split file's names --------------------------------------------------------------------


def test_a_folder_finds_sme_test_json_first_then_the_older_name(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    shutil.copy(FIXTURE, data / "MEGQA_test.json")
    older = load_dataset("mevqa", data)
    assert len(older) == 5
    assert older[0].images["image"] == data / "n161313.jpg"
    records = json.loads(FIXTURE.read_text())
    first = next(iter(records))
    (data / "SME_test.json").write_text(json.dumps({first: records[first]}))
    assert [s.id for s in load_dataset("mevqa", data)] == [first]  # the current name wins
    # the authors' generation script reads dataset/data/SME_test.json; images stay beside
    nested = tmp_path / "nested"
    (nested / "data").mkdir(parents=True)
    (nested / "images").mkdir()
    shutil.copy(FIXTURE, nested / "data" / "SME_test.json")
    got = load_dataset("mevqa", nested)
    assert got[0].images["image"] == nested / "images" / "n161313.jpg"
    with pytest.raises(MissingFileError, match=r"SME_test\.json.*MEGQA_test\.json"):
        load_dataset("mevqa", tmp_path / "nested" / "images")


def test_the_suite_reads_either_name_from_the_data_folder(tmp_path: Path) -> None:
    (entry,) = load_suite("mevqa").entries
    assert (entry.dataset, entry.metric, entry.file) == ("mevqa", "mevqa_accuracy", "mevqa")
    for name in ("SME_test.json", "MEGQA_test.json"):
        data = tmp_path / name.split("_")[0]
        (data / "mevqa").mkdir(parents=True)
        shutil.copy(FIXTURE, data / "mevqa" / name)
        pairs = load_suite("mevqa").samples(data)
        assert len(pairs) == 5 and pairs[0][1].id == "20968402"
