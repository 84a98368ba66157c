"""The Infoseek and OK-VQA adapters on fixtures written in their official schemas (no real file
is available here), OK-VQA scored through the real VQA metric, Infoseek scored through the
harness equal to the official script, the `avis` suite with its [[aggregate]], and the report
row that shows Infoseek's final score."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hammr.cli import main
from hammr.eval.datasets import (
    DatasetError,
    MissingFileError,
    MissingImagesError,
    load_dataset,
)
from hammr.eval.datasets.okvqa import default_annotations
from hammr.eval.metrics import get_aggregate, get_metric
from hammr.eval.metrics import infoseek as official
from hammr.eval.report import aggregate_cell, build_report
from hammr.eval.store import RunStore
from hammr.eval.suites import SuiteError, available_suites, load_suite
from hammr.eval.types import RunRecord

CHINA = ["People's Republic of China", "China", "PRC", " CN", "People's Republic of China"]

INFOSEEK = [
    {
        "data_id": "infoseek_val_00000001",
        "image_id": "oven_01963180",
        "question": "Which place is this animal endemic to?",
        "answer": ["People's Republic of China"],
        "answer_eval": CHINA,
        "data_split": "val_unseen_entity",
    },
    {
        "data_id": "infoseek_val_00000002",
        "image_id": "oven_02000001",
        "question": "How tall is this building in metres?",
        "answer": ["324"],
        "answer_eval": [{"wikidata": 324.0, "range": [291.6, 356.40000000000003]}],
        "data_split": "val_unseen_question",
    },
    {
        "data_id": "infoseek_val_00000003",
        "image_id": "oven_01000003",
        "question": "When was this built?",
        "answer": ["1889"],
        "answer_eval": ["1889"],
        "data_split": "val_unseen_question",
    },
    {
        "data_id": "infoseek_val_00000004",
        "image_id": "oven_05500004",
        "question": "Who designed this?",
        "answer": ["Gustave Eiffel"],
        "answer_eval": ["Gustave Eiffel", "Alexandre Gustave Eiffel"],
        "data_split": "val_unseen_entity",
    },
]
QTYPES = {
    "infoseek_val_00000001": "String",
    "infoseek_val_00000002": "Numerical",
    "infoseek_val_00000003": "Time",
    "infoseek_val_00000004": "String",
}


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def infoseek_dir(root: Path, records: list[dict[str, Any]] | None = None) -> Path:
    """infoseek/infoseek_val.jsonl, its qtype file, and OVEN images laid out as
    merge_oven_images.py does (one .png, one .JPEG, one missing)."""
    folder = root / "infoseek"
    write_jsonl(folder / "infoseek_val.jsonl", INFOSEEK if records is None else records)
    write_jsonl(
        folder / "infoseek_val_qtype.jsonl",
        [{"data_id": k, "question_type": v} for k, v in QTYPES.items()],
    )
    touch(folder / "oven_images" / "01" / "oven_01963180.jpg")
    touch(folder / "oven_images" / "02" / "oven_02000001.png")
    touch(folder / "oven_images" / "01" / "oven_01000003.JPEG")
    return folder / "infoseek_val.jsonl"


def okvqa_dir(root: Path) -> Path:
    """okvqa/ with the questions and annotations files, coco/val2014/ with one image."""
    folder = root / "okvqa"
    folder.mkdir(parents=True)
    questions = {
        "info": {},
        "task_type": "Open-Ended",
        "data_type": "mscoco",
        "license": {},
        "data_subtype": "val2014",
        "questions": [
            {"image_id": 42, "question": "What is this food called?", "question_id": 420},
            {"image_id": 7, "question": "Which vehicle uses this?", "question_id": 70},
        ],
    }

    def answers(words: list[str]) -> list[dict[str, Any]]:
        return [
            {"answer_id": i + 1, "raw_answer": w.title(), "answer_confidence": "yes", "answer": w}
            for i, w in enumerate(words)
        ]

    annotations = {
        "info": {},
        "license": {},
        "data_subtype": "val2014",
        "annotations": [
            {
                "image_id": 42,
                "answer_type": "other",
                "question_type": "five",
                "question_id": 420,
                "answers": answers(["pizza"] * 8 + ["pie"] * 2),
                "confidence": 3,
            },
            {
                "image_id": 7,
                "answer_type": "other",
                "question_type": "one",
                "question_id": 70,
                "answers": answers(["fire truck"] * 10),
                "confidence": 3,
            },
        ],
    }
    (folder / "OpenEnded_mscoco_val2014_questions.json").write_text(json.dumps(questions))
    (folder / "mscoco_val2014_annotations.json").write_text(json.dumps(annotations))
    touch(root / "coco" / "val2014" / "COCO_val2014_000000000042.jpg")
    touch(root / "coco" / "val2014" / "COCO_val2014_000000000007.jpg")
    return folder / "OpenEnded_mscoco_val2014_questions.json"


# =============================================================================================
# Infoseek
# =============================================================================================


def test_infoseek_reads_the_official_jsonl_and_its_qtype_file(tmp_path: Path) -> None:
    path = infoseek_dir(tmp_path)
    samples = load_dataset("infoseek", path, images=tmp_path / "infoseek" / "oven_images")
    assert [s.id for s in samples] == [r["data_id"] for r in INFOSEEK]
    china, tall, year, designer = samples
    assert china.dataset == "infoseek" and china.question.startswith("Which place")
    assert [s.question_type for s in samples] == [
        "unseen_entity",
        "unseen_question",
        "unseen_question",
        "unseen_entity",
    ]
    assert china.meta["question_type"] == "String" and china.meta["answer_eval"] == CHINA
    assert china.answers == ("People's Republic of China", "China", "PRC", "CN")
    assert tall.meta["question_type"] == "Numerical"
    assert tall.meta["answer_eval"] == ["291.6", "356.40000000000003"]
    assert tall.meta["range"] == (291.6, 356.40000000000003) and tall.answers == ("324",)
    assert year.meta["question_type"] == "Time" and year.meta["data_split"] == "val_unseen_question"
    assert designer.meta["image_id"] == "oven_05500004" and designer.meta["line"] == 4


def test_infoseek_images_by_image_id(tmp_path: Path) -> None:
    path = infoseek_dir(tmp_path)
    oven = tmp_path / "infoseek" / "oven_images"
    # `images` may name oven_images/ or the folder holding it (the annotation file's, here)
    for images in (oven, None):
        samples = load_dataset("infoseek", path, images=images)
        assert [s.images["image"] for s in samples] == [
            oven / "01" / "oven_01963180.jpg",
            oven / "02" / "oven_02000001.png",  # the .jpg does not exist, the .png does
            oven / "01" / "oven_01000003.JPEG",
            oven / "05" / "oven_05500004.jpg",  # missing: the template's name
        ]
    with pytest.raises(MissingImagesError, match=r"1 image file.*oven_05500004\.jpg"):
        load_dataset("infoseek", path, check_images=True)
    flat = tmp_path / "flat"
    touch(flat / "oven_01963180.jpg")
    samples = load_dataset("infoseek", path, images=flat, image_template="{image_id}.jpg")
    assert samples[0].images["image"] == flat / "oven_01963180.jpg"


def test_infoseek_images_through_the_official_id2image_mapping(tmp_path: Path) -> None:
    path = infoseek_dir(tmp_path)
    folder = path.parent
    # id2image.jsonl beside the annotations is read by default; paths relative to it
    write_jsonl(
        folder / "id2image.jsonl",
        [
            {"image_id": "oven_01963180", "image_path": "shards/a/china.jpg"},
            {"image_id": "oven_02000001", "image_path": "shards/b/tower.png"},
            {"image_id": "oven_01000003", "image_path": str(folder / "abs" / "eiffel.jpg")},
            {"image_id": "oven_05500004", "image_path": "shards/a/designer.jpg"},
        ],
    )
    samples = load_dataset("infoseek", path)
    assert [s.images["image"] for s in samples] == [
        folder / "shards" / "a" / "china.jpg",
        folder / "shards" / "b" / "tower.png",
        folder / "abs" / "eiffel.jpg",
        folder / "shards" / "a" / "designer.jpg",
    ]
    # OVEN's ovenid2impath.csv, named by the option (relative to the annotation file's folder)
    (folder / "maps").mkdir()
    (folder / "maps" / "ovenid2impath.csv").write_text(
        "oven_01963180,coco/x.jpg\noven_02000001,inat/y.png\n\n"
        "oven_01000003,gldv2/z.jpg\noven_05500004,coco/w.jpg\n"
    )
    samples = load_dataset("infoseek", path, id2image="maps/ovenid2impath.csv")
    assert samples[1].images["image"] == folder / "maps" / "inat" / "y.png"
    # an image id the mapping lacks is named with the line
    write_jsonl(folder / "id2image.jsonl", [{"image_id": "oven_01963180", "image_path": "a.jpg"}])
    with pytest.raises(DatasetError, match=r"line 2: image_id 'oven_02000001' is not in"):
        load_dataset("infoseek", path)
    (folder / "bad.csv").write_text("oven_01963180 a.jpg\n")
    with pytest.raises(DatasetError, match=r"bad\.csv, line 1: not 'image_id,path'"):
        load_dataset("infoseek", path, id2image="bad.csv")
    with pytest.raises(MissingFileError):
        load_dataset("infoseek", path, id2image="nope.jsonl")
    # a mapped path outside the data folders is refused, as any adapter's image path
    write_jsonl(
        folder / "id2image.jsonl",
        [{"image_id": r["image_id"], "image_path": "../../elsewhere.jpg"} for r in INFOSEEK],
    )
    with pytest.raises(DatasetError, match="outside the data folder"):
        load_dataset("infoseek", path)


def test_infoseek_one_split_at_a_time(tmp_path: Path) -> None:
    path = infoseek_dir(tmp_path)
    question = load_dataset("infoseek", path, unseen="question")
    entity = load_dataset("infoseek", path, unseen="entity")
    assert [s.id[-1] for s in question] == ["2", "3"]
    assert [s.id[-1] for s in entity] == ["1", "4"]
    with pytest.raises(DatasetError, match="option 'unseen' must be"):
        load_dataset("infoseek", path, unseen="human")


def test_infoseek_record_without_answers_names_file_and_line(tmp_path: Path) -> None:
    records = [dict(r) for r in INFOSEEK]
    del records[2]["answer_eval"]  # as in infoseek_test.jsonl
    path = infoseek_dir(tmp_path, records)
    with pytest.raises(DatasetError, match=rf"{re.escape(str(path))}, line 3: no answers"):
        load_dataset("infoseek", path)
    records[2]["answer_eval"] = []
    write_jsonl(path, records)
    with pytest.raises(DatasetError, match="line 3: no answers"):
        load_dataset("infoseek", path)


@pytest.mark.parametrize(
    ("line", "change", "message"),
    [
        (2, {"answer_eval": ["324"]}, r"line 2: a Numerical question's answer_eval must be"),
        (2, {"answer_eval": [{"range": [300]}]}, "line 2: a Numerical question's range"),
        (1, {"answer_eval": [1889]}, "line 1: 'answer_eval' is not a list of strings"),
        (4, {"data_split": None}, None),
        (3, {"image_id": None}, None),
    ],
)
def test_infoseek_malformed_records_are_named(
    tmp_path: Path, line: int, change: dict[str, Any], message: str | None
) -> None:
    records = [dict(r) for r in INFOSEEK]
    for key, value in change.items():
        if value is None:
            del records[line - 1][key]
        else:
            records[line - 1][key] = value
    path = infoseek_dir(tmp_path, records)
    missing = next(iter(change))
    expected = message or rf"line {line}: no '{missing}'"
    with pytest.raises(DatasetError, match=expected):
        load_dataset("infoseek", path)


def test_infoseek_question_types(tmp_path: Path) -> None:
    path = infoseek_dir(tmp_path)
    qtype = tmp_path / "infoseek" / "infoseek_val_qtype.jsonl"
    # A data_id the qtype file does not list
    write_jsonl(qtype, [{"data_id": "infoseek_val_00000001", "question_type": "String"}])
    with pytest.raises(DatasetError, match=r"line 2: data_id 'infoseek_val_00000002' is not in"):
        load_dataset("infoseek", path)
    # No qtype file: the record's own question_type, else an error naming the line
    qtype.unlink()
    with pytest.raises(DatasetError, match=r"line 1: no question type: .*qtype\.jsonl"):
        load_dataset("infoseek", path)
    write_jsonl(path, [{**r, "question_type": QTYPES[r["data_id"]]} for r in INFOSEEK])
    assert [s.meta["question_type"] for s in load_dataset("infoseek", path)] == list(
        QTYPES.values()
    )
    # An explicit qtype file wins over the records (the official script overwrites them)
    other = write_jsonl(
        tmp_path / "types" / "q.jsonl",
        [{"data_id": k, "question_type": "Time"} for k in QTYPES if k != "infoseek_val_00000002"]
        + [{"data_id": "infoseek_val_00000002", "question_type": "Numerical"}],
    )
    got = load_dataset("infoseek", path, qtype_file=str(other))
    assert [s.meta["question_type"] for s in got] == ["Time", "Numerical", "Time", "Time"]
    with pytest.raises(MissingFileError, match=r"absent\.jsonl does not exist"):
        load_dataset("infoseek", path, qtype_file="absent.jsonl")


async def test_infoseek_scored_through_the_harness_equals_the_official_script(
    tmp_path: Path,
) -> None:
    path = infoseek_dir(tmp_path)
    samples = load_dataset("infoseek", path)
    metric = get_metric("infoseek")
    predictions = {
        "infoseek_val_00000001": "china",
        "infoseek_val_00000002": "about 330 m",
        "infoseek_val_00000003": "1890",
        "infoseek_val_00000004": "Eiffel",
    }
    scores = {s.id: (await metric.score(predictions[s.id], s)).value for s in samples}
    assert scores == {
        "infoseek_val_00000001": 1.0,
        "infoseek_val_00000002": 1.0,
        "infoseek_val_00000003": 0.0,
        "infoseek_val_00000004": 0.0,
    }
    per_split: dict[str, list[float]] = {"unseen_question": [], "unseen_entity": []}
    for s in samples:
        per_split[s.question_type].append(scores[s.id])
    accuracies = [sum(v) / len(v) for v in per_split.values()]
    result = official.evaluate(
        [{"data_id": k, "prediction": v} for k, v in predictions.items()],
        INFOSEEK,
        [{"data_id": k, "question_type": v} for k, v in QTYPES.items()],
    )
    assert result["final_score"] == 50.0
    assert official.infoseek_aggregate(accuracies) == result["final_score"] / 100


# =============================================================================================
# OK-VQA
# =============================================================================================


def test_okvqa_reads_questions_and_annotations(tmp_path: Path) -> None:
    path = okvqa_dir(tmp_path)
    samples = load_dataset("okvqa", path, images=tmp_path / "coco", check_images=True)
    assert [s.id for s in samples] == ["420", "70"]
    food = samples[0]
    assert food.dataset == "okvqa" and food.question == "What is this food called?"
    assert food.answers == ("pizza",) * 8 + ("pie",) * 2
    assert food.images["image"] == tmp_path / "coco" / "val2014" / "COCO_val2014_000000000042.jpg"
    assert food.question_type == "outside_knowledge"
    assert food.meta["question_type"] == "five" and food.meta["raw_answers"][0] == "Pizza"
    # the images folder may be val2014/ itself; split='train' reads train2014 names
    flat = load_dataset("okvqa", path, images=tmp_path / "coco" / "val2014")
    assert flat[0].images["image"] == food.images["image"]
    train = load_dataset("okvqa", path, images=tmp_path / "coco", split="train")
    assert train[0].images["image"].name == "COCO_train2014_000000000042.jpg"


def test_okvqa_annotation_file_names() -> None:
    folder = Path("/d")
    assert default_annotations(folder / "OpenEnded_mscoco_val2014_questions.json") == (
        folder / "mscoco_val2014_annotations.json"
    )
    assert default_annotations(folder / "v2_OpenEnded_mscoco_val2014_questions.json") == (
        folder / "v2_mscoco_val2014_annotations.json"
    )
    with pytest.raises(DatasetError, match="set the option 'annotations'"):
        default_annotations(folder / "okvqa.json")


def test_okvqa_missing_answers_are_named(tmp_path: Path) -> None:
    path = okvqa_dir(tmp_path)
    ann = path.parent / "mscoco_val2014_annotations.json"
    data = json.loads(ann.read_text())
    moved = tmp_path / "elsewhere" / "a.json"
    moved.parent.mkdir()
    moved.write_text(ann.read_text())
    assert len(load_dataset("okvqa", path, annotations=str(moved))) == 2
    data["annotations"][1]["answers"] = []
    ann.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match=r"mscoco_val2014_annotations\.json, question 70"):
        load_dataset("okvqa", path)
    del data["annotations"][1]
    ann.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match=r"question 70 .*no annotation, so no answers"):
        load_dataset("okvqa", path)
    ann.unlink()
    with pytest.raises(MissingFileError, match=r"mscoco_val2014_annotations\.json does not exist"):
        load_dataset("okvqa", path)


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("pizza", 1.0),
        ("Pizza!", 1.0),  # annotators disagree, so both sides are processed
        ("pie", 0.6),  # two of ten annotators
        ("pasta", 0.0),
    ],
)
async def test_okvqa_scored_with_the_official_vqa_accuracy(
    tmp_path: Path, prediction: str, expected: float
) -> None:
    food, truck = load_dataset("okvqa", okvqa_dir(tmp_path))
    metric = get_metric("vqa_accuracy")
    assert (await metric.score(prediction, food)).value == pytest.approx(expected)
    assert (await metric.score("fire truck", truck)).value == 1.0
    assert (await metric.score("Fire truck", truck)).value == 0.0  # unanimous: as written


# =============================================================================================
# The avis suite, its aggregate, the report
# =============================================================================================


HUMAN = [
    {**INFOSEEK[0], "data_id": "infoseek_human_00000001", "data_split": "human_unseen_entity"},
    {**INFOSEEK[2], "data_id": "infoseek_human_00000002", "data_split": "human_unseen_question"},
]


def avis_data(root: Path) -> Path:
    data = root / "data"
    infoseek_dir(data)
    touch(data / "infoseek" / "oven_images" / "05" / "oven_05500004.jpg")
    # the human split, its question types in the records themselves (no qtype file)
    write_jsonl(
        data / "infoseek" / "infoseek_human.jsonl",
        [{**r, "question_type": t} for r, t in zip(HUMAN, ("String", "Time"), strict=True)],
    )
    okvqa_dir(data)
    return data


def test_the_avis_suite(tmp_path: Path) -> None:
    assert "avis" in available_suites()
    suite = load_suite("avis")
    assert suite.name == "avis"
    assert [(e.name, e.dataset, e.metric) for e in suite.entries] == [
        ("infoseek_unseen_question", "infoseek", "infoseek"),
        ("infoseek_unseen_entity", "infoseek", "infoseek"),
        ("okvqa", "okvqa", "vqa_accuracy"),
    ]
    (agg,) = suite.aggregates
    assert (agg.name, agg.function) == ("infoseek_final", "infoseek")
    assert agg.entries == ("infoseek_unseen_question", "infoseek_unseen_entity")
    pairs = suite.samples(avis_data(tmp_path), check_images=True)
    got = [(e.name, s.id, s.question_type) for e, s in pairs]
    assert got == [
        ("infoseek_unseen_question", "infoseek_val_00000002", "unseen_question"),
        ("infoseek_unseen_question", "infoseek_val_00000003", "unseen_question"),
        ("infoseek_unseen_entity", "infoseek_val_00000001", "unseen_entity"),
        ("infoseek_unseen_entity", "infoseek_val_00000004", "unseen_entity"),
        ("okvqa", "420", "outside_knowledge"),
        ("okvqa", "70", "outside_knowledge"),
    ]
    assert suite.select(["okvqa"]).aggregates == ()
    assert suite.select(["infoseek_unseen_entity", "infoseek_unseen_question"]).aggregates == (agg,)


BODY = """
name = "mine"
[[entry]]
name = "a"
dataset = "jsonl"
metric = "exact_match"
file = "a.jsonl"
[[entry]]
name = "b"
dataset = "jsonl"
metric = "exact_match"
file = "b.jsonl"
"""


@pytest.mark.parametrize(
    ("aggregate", "message"),
    [
        ('[[aggregate]]\nfunction = "harmonic_mean"\nentries = ["a"]\n', "needs 'name'"),
        ('[[aggregate]]\nname = "x"\nfunction = "median"\nentries = ["a"]\n', "function 'median'"),
        ('[[aggregate]]\nname = "x"\nfunction = "infoseek"\nentries = []\n', "list of entry names"),
        ('[[aggregate]]\nname = "x"\nfunction = "infoseek"\nentries = ["a", "c"]\n', "named c"),
        ('[[aggregate]]\nname = "x"\nfunction = "infoseek"\nentries = ["a", "a"]\n', "twice"),
        (
            '[[aggregate]]\nname = "x"\nfunction = "infoseek"\nentries = ["a"]\nweight = 2\n',
            "weight",
        ),
        (
            '[[aggregate]]\nname = "x"\nfunction = "infoseek"\nentries = ["a"]\n' * 2,
            "aggregate names must be unique; repeated: x",
        ),
        ("aggregate = 3\n", "must be \\[\\[aggregate\\]\\] tables"),
    ],
)
def test_malformed_aggregates(tmp_path: Path, aggregate: str, message: str) -> None:
    toml = tmp_path / "mine.toml"
    toml.write_text(aggregate + BODY if aggregate.startswith("aggregate =") else BODY + aggregate)
    with pytest.raises(SuiteError, match=message):
        load_suite(toml)


def test_the_infoseek_human_suite_is_apart_from_avis(tmp_path: Path) -> None:
    """AVIS's Table 5 split has a suite of its own, so `--suite avis` never needs its file."""
    suite = load_suite("infoseek-human")
    assert [(e.name, e.dataset, e.metric, e.file) for e in suite.entries] == [
        ("infoseek_human_unseen_question", "infoseek", "infoseek", "infoseek/infoseek_human.jsonl"),
        ("infoseek_human_unseen_entity", "infoseek", "infoseek", "infoseek/infoseek_human.jsonl"),
    ]
    (agg,) = suite.aggregates
    assert (agg.name, agg.function) == ("infoseek_human_final", "infoseek")
    pairs = suite.samples(avis_data(tmp_path), check_images=True)
    assert [(e.name, s.id, s.question_type) for e, s in pairs] == [
        ("infoseek_human_unseen_question", "infoseek_human_00000002", "unseen_question"),
        ("infoseek_human_unseen_entity", "infoseek_human_00000001", "unseen_entity"),
    ]


def _add(store: RunStore, run: str, entry: str, qt: str, scores: list[float]) -> None:
    for i, score in enumerate(scores):
        store.add(RunRecord(run, f"{entry}-{i}", entry, qt, "q", ("a",), "a", score))


def test_the_report_shows_infoseek_final_score(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("avis-run", "avis", "hammr", settings={"suite": "avis"})
        store.open_run("other", "generic-vqa", "hammr")
        store.open_run("gone", "gone", "hammr", settings={"suite": str(tmp_path / "gone.toml")})
        store.open_run("half", "avis", "hammr", settings={"suite": "avis"})
        for run in ("avis-run", "other", "gone", "half"):
            _add(store, run, "infoseek_unseen_question", "unseen_question", [1.0, 0.0])
            if run != "half":
                _add(store, run, "infoseek_unseen_entity", "unseen_entity", [1.0] + [0.0] * 6)
            _add(store, run, "okvqa", "outside_knowledge", [0.6, 1.0])
        report = build_report(store, ["avis-run", "other", "gone", "half"], samples=200)
    (agg,) = report.aggregates
    assert agg.label == "infoseek_final"
    cell, other, gone, half = agg.cells
    assert other is None and gone is None and half is None
    assert cell is not None and cell.n == 9
    # the official final score: hmean(50.0, 14.29) = 22.23 (not 22.22 from unrounded splits)
    assert cell.mean == pytest.approx(0.2223)
    assert cell.low <= cell.mean <= cell.high
    # the rows themselves are as before: one per (question type, entry)
    assert [r.label for r in report.rows] == [
        "outside_knowledge (okvqa)",
        "unseen_entity (infoseek_unseen_entity)",
        "unseen_question (infoseek_unseen_question)",
    ]
    markdown = report.render("markdown")
    row = next(ln for ln in markdown.splitlines() if ln.startswith("| infoseek_final"))
    assert row.split("|")[2].strip().startswith("22.2 ±")
    assert "infoseek_final: Infoseek's official final score" in markdown
    csv = report.render("csv")
    assert "infoseek_final,,infoseek_unseen_question + infoseek_unseen_entity,22.23," in csv
    assert "<th>infoseek_final</th><td>22.2 ±" in report.render("html")


def test_report_command_prints_the_aggregate(tmp_path: Path) -> None:
    store_path = tmp_path / "s.sqlite"
    with RunStore(store_path) as store:
        store.open_run("r", "avis", "hammr", settings={"suite": "avis"})
        _add(store, "r", "infoseek_unseen_question", "unseen_question", [1.0, 1.0])
        _add(store, "r", "infoseek_unseen_entity", "unseen_entity", [1.0, 0.0])
    r = CliRunner().invoke(main, ["report", "r", "--store", str(store_path)])
    assert r.exit_code == 0, r.output
    row = next(ln for ln in r.output.splitlines() if ln.startswith("| infoseek_final"))
    assert "66.7 ±" in row  # hmean(100, 50)


def test_aggregate_cell() -> None:
    hm = get_aggregate("harmonic_mean")
    constant = aggregate_cell([[1.0, 1.0], [0.0]], hm)
    assert (constant.mean, constant.low, constant.high, constant.n) == (0.0, 0.0, 0.0, 3)
    parts = [[1.0, 0.0] * 20, [1.0, 1.0, 1.0, 0.0] * 10]
    cell = aggregate_cell(parts, hm, samples=300, seed=1)
    assert cell.mean == pytest.approx(2 / (1 / 0.5 + 1 / 0.75)) and cell.n == 80
    assert cell.low < cell.mean < cell.high
    assert aggregate_cell(parts, hm, samples=300, seed=1) == cell  # seeded
    with pytest.raises(ValueError, match="at least one score in every part"):
        aggregate_cell([[1.0], []], hm)


# =============================================================================================
# The command line
# =============================================================================================


def test_eval_help_and_the_suite_list() -> None:
    r = CliRunner().invoke(main, ["eval", "--help"])
    assert r.exit_code == 0 and "--suite" in r.output
    r = CliRunner().invoke(main, ["eval", "--suite", "nope", "--data-dir", "."])
    assert r.exit_code == 2
    assert re.search(r"unknown suite 'nope'; bundled: avis, demo, generic-vqa", r.output)
