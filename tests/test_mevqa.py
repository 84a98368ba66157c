"""The MEVQA adapter on a fixture written in the official schema (tests/fixtures/mevqa)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hammr.eval.datasets import (
    DatasetError,
    MissingImagesError,
    UnsafePathError,
    get_adapter,
    load_dataset,
)
from hammr.eval.datasets.mevqa import references
from hammr.eval.metrics.explanation import (
    GroundedExplanation,
    detection_score,
    grounding_score,
    score_explanations,
)
from hammr.values import Box

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mevqa" / "MEGQA_test.json"


def copy_fixture(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(FIXTURE, folder / "MEGQA_test.json"))


def write(folder: Path, records: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "MEGQA_test.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_fixture_samples() -> None:
    samples = load_dataset("mevqa", FIXTURE, images=Path("/gqa"))
    assert [s.id for s in samples] == ["20968402", "05451384", "13155723", "07729390", "19393715"]
    first = samples[0]
    assert first.dataset == "mevqa"
    assert first.question == "Is the apple to the left or to the right of the pear?"
    assert first.answers == ("left",)
    assert first.images == {"image": Path("/gqa/n161313.jpg")}
    assert first.question_type == get_adapter("mevqa").question_type
    assert first.meta["full_answer"] == "The apple is to the left of the pear."
    assert first.meta["explanation"] == "The apple [BOX] is to the left of the pear [BOX]."
    assert first.meta["boxes"] == {
        "apple": [[[50, 120, 110, 180]]],
        "pear": [[[200, 110, 260, 190]]],
    }
    ref = first.meta["reference"]
    assert isinstance(ref, GroundedExplanation)
    assert [(r.name, r.boxes) for r in ref.boxes] == [
        ("apple", (Box(50, 120, 60, 60),)),
        ("pear", (Box(200, 110, 60, 80),)),
    ]
    assert "full_answer" not in samples[1].meta
    cars = samples[1].meta["reference"].boxes[0]
    assert cars.name == "cars" and len(cars.boxes) == 2


def test_fixture_references_score_themselves() -> None:
    samples = load_dataset("mevqa", FIXTURE)
    refs = references(samples)
    assert list(refs) == [s.id for s in samples]
    for s in samples:
        ref = refs[s.id]
        assert ref.token_count == len(ref.boxes)
        assert grounding_score(ref, ref) == 1.0
        # every reference token is found again under its name (Eq. 2 as written: 1.0)
        assert detection_score(ref, ref, official_padding=False) == 1.0
    # the official padding: one name scores 1, two names with one group each 2/3
    assert detection_score(refs["07729390"], refs["07729390"]) == 1.0
    assert detection_score(refs["20968402"], refs["20968402"]) == pytest.approx(2 / 3)
    # LOC pairs with 'located here [BOX]'
    assert detection_score(refs["13155723"], refs["13155723"]) == pytest.approx(2 / 3)
    scores = score_explanations(refs, refs, official_padding=False)
    assert scores.samples == 5 and scores.detection == 1.0 and scores.grounding == 1.0


def test_images_folder_layouts(tmp_path: Path) -> None:
    # the authors' layout: images/ beside the split file
    path = copy_fixture(tmp_path / "dataset")
    (tmp_path / "dataset" / "images").mkdir()
    for image_id in ("n161313", "2354786", "2368510", "n336443"):
        (tmp_path / "dataset" / "images" / f"{image_id}.jpg").write_bytes(b"")
    (tmp_path / "dataset" / "images" / "2400861.png").write_bytes(b"")  # only a png
    samples = load_dataset("mevqa", path, check_images=True)
    assert samples[0].images["image"] == tmp_path / "dataset" / "images" / "n161313.jpg"
    assert samples[-1].images["image"] == tmp_path / "dataset" / "images" / "2400861.png"
    # images directly in the folder given as images=
    flat = tmp_path / "gqa"
    flat.mkdir()
    (flat / "n161313.jpg").write_bytes(b"")
    one = load_dataset("mevqa", path, images=flat)[0]
    assert one.images["image"] == flat / "n161313.jpg"
    with pytest.raises(MissingImagesError):
        load_dataset("mevqa", path, images=flat, check_images=True)


def test_unsafe_image_id(tmp_path: Path) -> None:
    record = json.loads(FIXTURE.read_text())["20968402"]
    path = write(tmp_path / "d", {"1": {**record, "imageId": "../../etc/passwd"}})
    with pytest.raises(UnsafePathError, match="question 1"):
        load_dataset("mevqa", path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"boxes": [[1, 2, 3, 4]]}, "not a JSON object"),
        ({"boxes": {"apple": [[[1, 2, 3]]]}}, r"not \[x1, y1, x2, y2\]"),
        ({"boxes": {"apple": [[1, 2, 3, 4]]}}, "where a list of boxes belongs"),
        ({"boxes": {"apple": [[[5, 5, 3, 9]]]}}, "not usable"),  # inverted: x2 < x1
        ({"explanation": None}, "'explanation' is not text"),
    ],
)
def test_bad_records_name_the_question(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    record = json.loads(FIXTURE.read_text())["20968402"]
    path = write(tmp_path / "d", {"77": {**record, **change}})
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset("mevqa", path)
    assert "question 77" in str(info.value)


def test_missing_key(tmp_path: Path) -> None:
    record = json.loads(FIXTURE.read_text())["20968402"]
    del record["boxes"]
    path = write(tmp_path / "d", {"5": record})
    with pytest.raises(DatasetError, match="no 'boxes'"):
        load_dataset("mevqa", path)
