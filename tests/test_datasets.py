"""Dataset adapters: each reads a fixture in its official schema (real excerpts where the project
has them), plus the seeded sampling, the image check and the error messages of load_dataset."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammr.eval.datasets import (
    ADAPTERS,
    DatasetError,
    MissingFileError,
    MissingImagesError,
    UnsafePathError,
    adapter_options,
    load_dataset,
    missing_images,
    sample_subset,
)
from hammr.eval.types import QUESTION_TYPES, Sample

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "eval"
SHARED = Path("/work/shared/data")


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


# --- registry -----------------------------------------------------------------------------------


def test_registry_names_and_schema_notes() -> None:
    assert set(ADAPTERS) == {
        "infoseek",
        "okvqa",
        "gqa",
        "textvqa",
        "tallyqa",
        "nlvr2",
        "pointqa_local",
        "pointqa_looktwice",
        "encvqa",
        "vstar",
        "hrbench",
        "mme_realworld_lite",
        "zoombench",
        "mevqa",
        "jsonl",
        "hub_parquet",
    }
    for name, adapter in ADAPTERS.items():
        assert adapter.name == name
        assert adapter.expects
        assert adapter.schema.split(":")[0] in {
            "verified",
            "partly verified",
            "assumed",
            "the project's own format",
        }
        module = sys.modules[adapter.load.__module__]
        doc = module.__doc__ or ""
        assert "official" in doc.lower() or name == "jsonl", name
        if name != "jsonl":
            assert "verified" in doc.lower() or "assumed" in doc.lower(), name


def test_generic_types_come_from_the_paper() -> None:
    types = {a.question_type for a in ADAPTERS.values() if a.question_type in QUESTION_TYPES}
    assert types >= {
        "local_pointing",
        "look_twice",
        "two_image",
        "spatial_reasoning",
        "complex_counting",
        "ocr_reasoning",
        "single_hop",
    }


# --- GQA ----------------------------------------------------------------------------------------


def test_gqa_real_testdev_slice() -> None:
    samples = load_dataset(
        "gqa", DATA / "gqa" / "testdev_balanced_questions.json", images=Path("/img")
    )
    assert len(samples) == 12
    first = samples[0]
    assert first.id == "201030459"
    assert first.dataset == "gqa"
    assert first.question.startswith("What is the name of the piece of furniture")
    assert first.answers == ("couch",)
    assert first.images == {"image": Path("/img/n54424.jpg")}
    assert first.question_type == "spatial_reasoning"
    assert first.meta["full_answer"] == "The piece of furniture is a couch."
    assert first.meta["structural"] == "query"
    assert len({s.id for s in samples}) == 12


@pytest.mark.skipif(not SHARED.is_dir(), reason="/work/shared/data is not here")
def test_gqa_full_shared_excerpt() -> None:
    samples = load_dataset("gqa", SHARED / "gqa" / "ood_testdev_head.excerpt150.json")
    assert len(samples) == 150
    assert all(s.answers[0] and s.question for s in samples)
    assert all(s.images["image"].name.startswith("n") for s in samples)


# --- NLVR2 --------------------------------------------------------------------------------------


def test_nlvr2_real_test1_slice(tmp_path: Path) -> None:
    (tmp_path / "test1").mkdir()
    samples = load_dataset("nlvr2", DATA / "nlvr2" / "test1.json", images=tmp_path)
    assert len(samples) == 40
    first = samples[0]
    assert first.id == "test1-0-1-0"
    assert first.question == "There is an empty glass."
    assert first.answers == ("false",)
    assert first.images == {
        "image": tmp_path / "test1" / "test1-0-1-img0.png",
        "image2": tmp_path / "test1" / "test1-0-1-img1.png",
    }
    assert first.question_type == "two_image"
    assert first.meta["synset"] == "beer bottle"
    assert {s.answers for s in samples} == {("true",), ("false",)}


def test_nlvr2_images_directly_in_the_folder(tmp_path: Path) -> None:
    samples = load_dataset("nlvr2", DATA / "nlvr2" / "test1.json", images=tmp_path, limit=1)
    assert samples[0].images["image"].parent == tmp_path


@pytest.mark.skipif(not SHARED.is_dir(), reason="/work/shared/data is not here")
def test_nlvr2_full_shared_excerpt() -> None:
    samples = load_dataset("nlvr2", SHARED / "nlvr2" / "test1.first300.jsonl")
    assert len(samples) == 300
    assert len({s.id for s in samples}) == 300
    for s in samples:
        pair = s.id.rsplit("-", 1)[0]
        assert s.images["image"].name == f"{pair}-img0.png"
        assert s.images["image2"].name == f"{pair}-img1.png"


def test_nlvr2_bad_label(tmp_path: Path) -> None:
    f = tmp_path / "dev.json"
    f.write_text(json.dumps({"identifier": "dev-1-2-0", "sentence": "x", "label": "maybe"}) + "\n")
    with pytest.raises(DatasetError, match=r"line 1.*maybe"):
        load_dataset("nlvr2", f)


# --- PointQA ------------------------------------------------------------------------------------


def test_pointqa_local_real_spatial_set() -> None:
    samples = load_dataset("pointqa_local", DATA / "pointqa" / "spatial_dataset.json")
    assert len(samples) == 26
    first = samples[0]
    assert first.id == "2393743-0"
    assert first.question == "How is the small this elephant?"
    assert first.answers == ("sitting",)
    assert first.point == (398.0, 163.0)
    assert first.question_type == "local_pointing"
    assert first.images["image"].name == "2393743.jpg"
    # two questions on one image: ids keep them apart
    assert samples[1].id == "2403091-0" and samples[2].id == "2403091-1"


@pytest.mark.skipif(not SHARED.is_dir(), reason="/work/shared/data is not here")
def test_pointqa_full_shared_excerpt() -> None:
    path = SHARED / "pointqa_verbalspatial" / "spatial_dataset.first150.json"
    samples = load_dataset("pointqa_local", path)
    assert len(samples) == 150
    assert len({s.id for s in samples}) == 150
    assert all(s.point is not None for s in samples)


def test_pointqa_local_image_list_and_multi_point_records() -> None:
    samples = load_dataset(
        "pointqa_local",
        DATA / "pointqa" / "localqa_dataset.json",
        image_list="localqa_testfinal_imgs.json",
    )
    ids = [s.id for s in samples]
    assert ids == ["2377408-0", "2377408-1", "2319325-0", "2403977-0-p0", "2403977-0-p1"]
    umbrella = [s for s in samples if s.id.startswith("2403977")]
    assert [s.answers for s in umbrella] == [("blue",), ("yellow",)]
    assert [s.point for s in umbrella] == [(120.0, 90.0), (330.0, 95.0)]
    everything = load_dataset("pointqa_local", DATA / "pointqa" / "localqa_dataset.json")
    assert len(everything) == 6


def test_pointqa_visual_genome_folders(tmp_path: Path) -> None:
    touch(tmp_path / "VG_100K_2" / "2319325.jpg")
    samples = load_dataset(
        "pointqa_local", DATA / "pointqa" / "localqa_dataset.json", images=tmp_path
    )
    by_id = {s.id: s for s in samples}
    assert by_id["2319325-0"].images["image"] == tmp_path / "VG_100K_2" / "2319325.jpg"
    assert by_id["2377408-0"].images["image"] == tmp_path / "2377408.jpg"


def test_pointqa_looktwice_generation_script_form() -> None:
    samples = load_dataset("pointqa_looktwice", DATA / "pointqa" / "looktwiceqa_dataset.json")
    assert [s.id for s in samples] == ["2414753-0", "2410576-0", "2410576-1"]
    clock = samples[0]
    assert clock.question == "How many of these are there?"
    assert clock.answers == ("2",)
    assert clock.point == (305.0, 121.0)
    assert clock.question_type == "look_twice"
    assert clock.meta["img_question"] == "How many clocks are there?"
    assert clock.meta["obj_type"] == "clocks"


def test_pointqa_list_variant_with_bbox() -> None:
    samples = load_dataset("pointqa_looktwice", DATA / "pointqa" / "pointqa_list.json")
    assert [s.id for s in samples] == ["2399662-0", "2399662-1", "q-17"]
    assert samples[0].point == (25.0, 40.0)  # centre of [10, 20, 30, 40]
    assert samples[0].answers == ("5",)
    assert samples[1].point == (77.0, 88.0)
    assert samples[2].point == (5.0, 6.0)


def test_pointqa_record_without_point(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"1": [{"question": "What is this?", "answer": "x"}]}))
    with pytest.raises(DatasetError, match=r"image 1, question 0: no 'point'"):
        load_dataset("pointqa_local", f)


# --- TextVQA ------------------------------------------------------------------------------------


def test_textvqa_val(tmp_path: Path) -> None:
    (tmp_path / "train_images").mkdir()
    samples = load_dataset("textvqa", DATA / "textvqa" / "TextVQA_0.5.1_val.json", images=tmp_path)
    assert [s.id for s in samples] == ["34602", "34603", "34610"]
    first = samples[0]
    assert len(first.answers) == 10
    assert first.answers.count("dakota") == 5
    assert first.images["image"] == tmp_path / "train_images" / "003a8ae2ef43b901.jpg"
    assert first.question_type == "ocr_reasoning"
    assert first.meta["image_classes"] == ["Cassette deck", "Printer", "Camera"]


def test_textvqa_test_split_has_no_answers(tmp_path: Path) -> None:
    f = tmp_path / "TextVQA_0.5.1_test.json"
    f.write_text(
        json.dumps(
            {"dataset_type": "test", "data": [{"question": "q", "image_id": "a", "question_id": 1}]}
        )
    )
    with pytest.raises(DatasetError, match="no public answers"):
        load_dataset("textvqa", f)


# --- TallyQA ------------------------------------------------------------------------------------


def test_tallyqa_complex_only_by_default(tmp_path: Path) -> None:
    samples = load_dataset("tallyqa", DATA / "tallyqa" / "test.json", images=tmp_path)
    assert [s.id for s in samples] == ["27", "41"]
    assert samples[0].answers == ("2",)
    assert samples[1].answers == ("0",)
    assert samples[0].images["image"] == tmp_path / "VG_100K_2" / "2410408.jpg"
    assert samples[1].images["image"] == tmp_path / "val2014" / "COCO_val2014_000000393225.jpg"
    assert all(s.question_type == "complex_counting" and not s.meta["issimple"] for s in samples)


def test_tallyqa_all_questions() -> None:
    samples = load_dataset("tallyqa", DATA / "tallyqa" / "test.json", complex=False)
    assert len(samples) == 4
    assert [s.question_type for s in samples] == [
        "complex_counting",
        "simple_counting",
        "complex_counting",
        "simple_counting",
    ]
    with pytest.raises(DatasetError, match="complex"):
        load_dataset("tallyqa", DATA / "tallyqa" / "test.json", complex="yes")


# --- Encyclopedic-VQA ---------------------------------------------------------------------------


def test_encvqa_single_hop(tmp_path: Path) -> None:
    samples = load_dataset(
        "encvqa", DATA / "encvqa" / "test.csv", images=tmp_path, split="test", hops="single"
    )
    assert [s.id for s in samples] == [
        "0-a1b2c3d4e5f60718",
        "0-b2c3d4e5f6071829",
        "1-0f1e2d3c4b5a6978",
        "2-c3d4e5f607182930",
    ]
    plant = samples[0]
    assert plant.answers == ("2 metres", "6 feet")
    assert plant.question_type == "single_hop"
    assert plant.images["image"] == tmp_path / "inaturalist" / "a1b2c3d4e5f60718.jpg"
    assert plant.meta["question_type"] == "templated"
    assert plant.meta["wikipedia_title"] == "Example plant"
    assert plant.meta["evidence"] == "It grows up to 2 metres tall, rarely more."
    flowers = samples[3]
    assert flowers.answers == ("white&&pink&&purple",)
    assert flowers.meta["answer_lists"] == (("white", "pink", "purple"),)
    assert flowers.meta["question_type"] == "multi_answer"


def test_encvqa_two_hop_and_first_image_only() -> None:
    two = load_dataset("encvqa", DATA / "encvqa" / "test.csv", split="test", hops="two")
    assert len(two) == 1
    assert two[0].question_type == "two_hop"
    assert two[0].meta["question_type"] == "2_hop"
    assert two[0].meta["wikipedia_url"].count("|") == 1
    everything = load_dataset("encvqa", DATA / "encvqa" / "test.csv")
    assert len(everything) == 6  # 5 rows, the first with two images; val row included
    firsts = load_dataset("encvqa", DATA / "encvqa" / "test.csv", images_per_question="first")
    assert len(firsts) == 5


def test_encvqa_image_templates(tmp_path: Path) -> None:
    samples = load_dataset(
        "encvqa",
        DATA / "encvqa" / "test.csv",
        images=tmp_path,
        image_template={
            "landmarks": "gldv2/train/{id0}/{id1}/{id2}/{image_id}.jpg",
            "*": "inat/{category_id}/{image_id}.jpg",
        },
    )
    by_id = {s.id: s for s in samples}
    tower = by_id["1-0f1e2d3c4b5a6978"].images["image"]
    assert tower == tmp_path / "gldv2" / "train" / "0" / "f" / "1" / "0f1e2d3c4b5a6978.jpg"
    plant = by_id["0-a1b2c3d4e5f60718"].images["image"]
    assert plant == tmp_path / "inat" / "4021" / "a1b2c3d4e5f60718.jpg"


def test_encvqa_bad_options_and_columns(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="hops"):
        load_dataset("encvqa", DATA / "encvqa" / "test.csv", hops="three")
    f = tmp_path / "test.csv"
    f.write_text("question,answer\nq,a\n")
    with pytest.raises(DatasetError, match=r"lacks the column\(s\) dataset_image_ids"):
        load_dataset("encvqa", f)


# --- V* Bench -----------------------------------------------------------------------------------


def test_vstar_folders(tmp_path: Path) -> None:
    bench = tmp_path / "vstar_bench"
    shutil.copytree(DATA / "vstar" / "vstar_bench", bench)
    touch(bench / "direct_attributes" / "sa_4690.jpg")
    touch(bench / "relative_position" / "sa_8001.png")
    samples = load_dataset("vstar", bench)
    assert [s.id for s in samples] == [
        "direct_attributes/sa_4690",
        "direct_attributes/sa_4700",
        "relative_position/sa_8001",
    ]
    for s in samples:
        record = json.loads((bench / f"{s.id}.json").read_text())
        assert sorted(s.choices) == sorted(record["options"])
        letter = s.answers[0]
        assert s.choices["ABCD".index(letter)] == record["options"][0]
        assert s.question == record["question"]
    assert [s.question_type for s in samples] == ["attribute", "attribute", "relation"]
    assert samples[0].images["image"] == bench / "direct_attributes" / "sa_4690.jpg"
    assert samples[2].images["image"] == bench / "relative_position" / "sa_8001.png"
    assert samples[2].meta["category"] == "relative_position"
    assert samples[0].meta["target_object"] == ["glove"]
    # the option order is the same on every load
    assert load_dataset("vstar", bench) == samples


def test_vstar_question_file() -> None:
    bench = DATA / "vstar" / "vstar_bench"
    samples = load_dataset("vstar", DATA / "vstar" / "test_questions.jsonl", images=bench)
    assert [s.id for s in samples] == ["0", "1", "2"]
    glove = samples[0]
    assert glove.question == "What is the material of the glove?"
    assert glove.choices == ("rubber", "cotton", "kevlar", "leather")
    assert glove.answers == ("A",)
    assert glove.images["image"] == bench / "direct_attributes" / "sa_4690.jpg"
    assert samples[2].choices == ("right", "left")
    assert samples[2].answers == ("B",)
    # the category is the sub-task MuSEAgent reports
    assert [s.question_type for s in samples] == ["attribute", "attribute", "relation"]
    assert samples[2].meta["category"] == "relative_position"


def test_vstar_folder_without_annotations(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"neither test_questions\.jsonl"):
        load_dataset("vstar", tmp_path)


# --- HR-Bench -----------------------------------------------------------------------------------


def test_hrbench_decodes_images_once(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    samples = load_dataset("hrbench", DATA / "hrbench" / "hr_bench_8k.tsv", images=cache)
    assert [s.id for s in samples] == ["0", "1", "2"]
    first = samples[0]
    assert first.choices == ("red", "blue", "green", "yellow")
    assert first.answers == ("A",)
    assert first.meta == {"category": "single", "cycle_category": "0_8k"}
    assert first.images["image"] == cache / "0.jpg"
    assert samples[1].images["image"] == cache / "1.png"
    assert samples[2].images["image"] == cache / "0.jpg"  # the image cell refers to index 0
    assert samples[2].answers == ("D",)
    from PIL import Image

    with Image.open(first.images["image"]) as im:
        assert im.size == (4, 3)
    stamp = first.images["image"].stat().st_mtime_ns
    again = load_dataset("hrbench", DATA / "hrbench" / "hr_bench_8k.tsv", images=cache)
    assert again == samples
    assert first.images["image"].stat().st_mtime_ns == stamp
    assert not missing_images(samples)


def test_hrbench_default_cache_next_to_the_file(tmp_path: Path) -> None:
    tsv = tmp_path / "hr_bench_8k.tsv"
    shutil.copy(DATA / "hrbench" / "hr_bench_8k.tsv", tsv)
    samples = load_dataset("hrbench", tsv, check_images=True)
    assert samples[0].images["image"].parent == tmp_path / "hr_bench_8k_images"


def test_hrbench_missing_file_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError):
        load_dataset("hrbench", tmp_path / "hr_bench_8k.tsv")
    assert list(tmp_path.iterdir()) == []


# --- MME-RealWorld-Lite -------------------------------------------------------------------------


def test_mme_realworld_lite(tmp_path: Path) -> None:
    path = DATA / "mme_realworld_lite" / "MME-RealWorld-Lite.json"
    samples = load_dataset("mme_realworld_lite", path, images=tmp_path)
    assert [s.id for s in samples] == [
        "perception/remote_sensing/color/0001",
        "reasoning/diagram_and_table/diagram/0002",
        "perception/monitoring/vehicle/counting/0003",
    ]
    roof = samples[0]
    assert roof.choices == ("red", "grey", "green", "blue", "The image does not feature the roof.")
    assert roof.answers == ("B",)
    assert roof.images["image"] == tmp_path / "remote_sensing" / "tile_0001.png"
    assert roof.meta["subtask"] == "Remote Sensing"
    assert samples[1].answers == ("C",)  # spelled "Question type" in that record
    assert samples[2].answers == ("E",)
    # the record's Task is the sub-task: perception or reasoning
    assert [s.question_type for s in samples] == ["perception", "reasoning", "perception"]
    with pytest.raises(DatasetError, match="Answer choices"):
        load_dataset("mme_realworld_lite", path, multiple_choice_only=False)


# --- ZoomBench ----------------------------------------------------------------------------------


def test_zoombench_converted_json(tmp_path: Path) -> None:
    folder = tmp_path / "zoombench"  # not the converter's folder name
    folder.mkdir()
    shutil.copy(DATA / "zoombench" / "zoombench.json", folder / "zoombench.json")
    touch(folder / "images" / "image_0.png")
    samples = load_dataset("zoombench", folder / "zoombench.json")
    assert [s.id for s in samples] == ["0", "2"]
    lamps = samples[0]
    assert lamps.question == "How many table lamps are in the image?"
    assert lamps.choices == ("0", "2", "1", "3")
    assert lamps.answers == ("C",)
    # '../ZoomBench/images/image_0.png' as the converter wrote it, found under images/
    assert lamps.images["image"] == folder / "images" / "image_0.png"
    assert lamps.meta["crop_image"].endswith("crop_image_0.png")
    with_open = load_dataset("zoombench", folder / "zoombench.json", include_open=True)
    assert len(with_open) == 3
    label = with_open[1]
    assert label.choices == () and label.answers == ("olive oil",)
    assert label.question_type == "open"


# --- jsonl --------------------------------------------------------------------------------------


def test_jsonl_project_demo_set() -> None:
    samples = load_dataset(
        "jsonl", ROOT / "examples" / "demo" / "questions.jsonl", check_images=True
    )
    assert len(samples) >= 20
    assert {s.question_type for s in samples} <= set(QUESTION_TYPES)
    two = next(s for s in samples if "image2" in s.images)
    assert two.question_type == "two_image"
    assert next(s for s in samples if s.point is not None).question_type == "local_pointing"


def test_jsonl_fields(tmp_path: Path) -> None:
    samples = load_dataset(
        "jsonl", DATA / "jsonl" / "questions.jsonl", images=tmp_path, dataset="mine"
    )
    a1, a2, a3, a4 = samples
    assert a1.answers == ("red",) and a1.point == (10.0, 20.0)
    assert a1.images == {"image": tmp_path / "img" / "one.png"}
    assert a2.images["image2"] == tmp_path / "img" / "two.png"
    assert a2.meta == {"source": "hand-made"}
    assert a3.choices == ("pear", "apple", "plum") and a3.answers == ("B",)
    assert a4.id == "4" and a4.answers == ("stop", "stop sign")
    assert {s.dataset for s in samples} == {"mine"}


# --- load_dataset: sampling ---------------------------------------------------------------------


def _nlvr2(limit: int | None, seed: int = 0, path: Path | None = None) -> list[Sample]:
    return load_dataset("nlvr2", path or DATA / "nlvr2" / "test1.json", limit=limit, seed=seed)


def test_sampling_is_reproducible_and_prefix_stable() -> None:
    ten = _nlvr2(10)
    assert [s.id for s in ten] == [s.id for s in _nlvr2(10)]
    twenty = _nlvr2(20)
    assert twenty[:10] == ten
    assert [s.id for s in _nlvr2(3)] == [s.id for s in ten[:3]]
    assert [s.id for s in _nlvr2(10, seed=1)] != [s.id for s in ten]
    everything = _nlvr2(None)
    assert [s.id for s in everything] == [s.id for s in _nlvr2(None)]
    assert len(_nlvr2(1000)) == 40
    assert sorted(s.id for s in _nlvr2(1000)) == sorted(s.id for s in everything)
    assert _nlvr2(0) == []
    with pytest.raises(ValueError):
        _nlvr2(-1)


def test_sampling_does_not_depend_on_file_order(tmp_path: Path) -> None:
    lines = (DATA / "nlvr2" / "test1.json").read_text().splitlines()
    random.Random(7).shuffle(lines)
    shuffled = tmp_path / "test1.json"
    shuffled.write_text("\n".join(lines) + "\n")
    assert [s.id for s in _nlvr2(12, path=shuffled)] == [s.id for s in _nlvr2(12)]


def test_limit_none_keeps_file_order() -> None:
    samples = load_dataset("gqa", DATA / "gqa" / "testdev_balanced_questions.json")
    data = json.loads((DATA / "gqa" / "testdev_balanced_questions.json").read_text())
    assert [s.id for s in samples] == list(data)


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.text(min_size=1, max_size=6), min_size=0, max_size=30, unique=True),
    k=st.integers(0, 35),
    extra=st.integers(0, 10),
    seed=st.integers(0, 5),
)
def test_sample_subset_prefix_property(ids: list[str], k: int, extra: int, seed: int) -> None:
    samples = [Sample(id=i, dataset="d", question="q", answers=("a",), images={}) for i in ids]
    small = sample_subset(samples, k, seed)
    large = sample_subset(samples, k + extra, seed)
    assert large[:k] == small
    assert len(small) == min(k, len(samples))
    assert sample_subset(list(reversed(samples)), k, seed) == small


def test_repeated_ids_are_told_apart(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    row = {"id": "x", "question": "q", "answer": "a", "image": "i.png"}
    f.write_text("\n".join(json.dumps(row) for _ in range(3)) + "\n")
    assert [s.id for s in load_dataset("jsonl", f)] == ["x", "x#2", "x#3"]


# --- load_dataset: images and errors ------------------------------------------------------------


def test_check_images_reports_missing_files(tmp_path: Path) -> None:
    path = DATA / "gqa" / "testdev_balanced_questions.json"
    samples = load_dataset("gqa", path, images=tmp_path)
    missing = missing_images(samples)
    assert len(missing) == 12
    assert missing[0].sample_id == "201030459" and missing[0].variable == "image"
    with pytest.raises(MissingImagesError) as info:
        load_dataset("gqa", path, images=tmp_path, check_images=True)
    message = str(info.value)
    assert "12 image file(s) of 12 samples do not exist" in message
    assert str(tmp_path / "n54424.jpg") in message
    assert "(and 7 more)" in message
    assert len(info.value.missing) == 12
    for s in samples:
        touch(s.images["image"])
    assert len(load_dataset("gqa", path, images=tmp_path, check_images=True)) == 12


def test_check_images_only_checks_the_drawn_samples(tmp_path: Path) -> None:
    path = DATA / "gqa" / "testdev_balanced_questions.json"
    drawn = load_dataset("gqa", path, images=tmp_path, limit=2, seed=3)
    for s in drawn:
        touch(s.images["image"])
    assert load_dataset("gqa", path, images=tmp_path, limit=2, seed=3, check_images=True) == drawn


def test_missing_file_names_the_file_and_the_schema(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "testdev_balanced_questions.json"
    with pytest.raises(MissingFileError) as info:
        load_dataset("gqa", missing)
    assert str(missing) in str(info.value)
    assert "GQA balanced questions JSON" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for name in ADAPTERS:
        with pytest.raises(MissingFileError, match="does not exist; it expects"):
            load_dataset(name, tmp_path / "absent.file")


def test_unknown_adapter_and_option() -> None:
    with pytest.raises(DatasetError, match="unknown dataset adapter 'vqav2'"):
        load_dataset("vqav2", DATA / "gqa" / "testdev_balanced_questions.json")
    with pytest.raises(DatasetError, match=r"unknown option\(s\) hops; it takes complex=True"):
        load_dataset("tallyqa", DATA / "tallyqa" / "test.json", hops="single")
    assert adapter_options(ADAPTERS["encvqa"])["hops"] == "all"


def test_malformed_records_are_named(tmp_path: Path) -> None:
    f = tmp_path / "q.json"
    f.write_text(json.dumps({"7": {"question": "Where?", "answer": "left"}}))
    with pytest.raises(DatasetError, match=r"question 7: no 'imageId'"):
        load_dataset("gqa", f)
    f.write_text("{not json")
    with pytest.raises(DatasetError, match="is not valid JSON"):
        load_dataset("gqa", f)
    g = tmp_path / "q.jsonl"
    g.write_text('{"id": 1, "question": "q", "answer": "a"}\n')
    with pytest.raises(DatasetError, match="line 1: no 'image'"):
        load_dataset("jsonl", g)


# --- image paths must stay inside the data folders ---------------------------------------------


def _jsonl(folder: Path, image: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "q.jsonl"
    f.write_text(json.dumps({"id": "x1", "question": "q", "answer": "a", "image": image}) + "\n")
    return f


@pytest.mark.parametrize("image", ["../../etc/passwd", "img/../../secret.png", "/etc/passwd"])
def test_an_image_path_leading_outside_is_refused(tmp_path: Path, image: str) -> None:
    f = _jsonl(tmp_path / "data", image)
    with pytest.raises(UnsafePathError) as info:
        load_dataset("jsonl", f)
    message = str(info.value)
    assert str(f) in message and "sample 'x1' (image)" in message
    assert "leads outside the data folder" in message
    assert isinstance(info.value, DatasetError)


def test_paths_inside_the_data_folders_are_accepted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    inside = touch(data / "img" / "a.png")
    assert load_dataset("jsonl", _jsonl(data, str(inside)))[0].images["image"] == inside
    assert load_dataset("jsonl", _jsonl(data, "img/./a.png"))[0].images["image"] == inside
    # '..' that comes back inside (resolved) is fine: written from inside the img folder.
    f = _jsonl(data, "../img/a.png")
    assert load_dataset("jsonl", f, images=data / "img")[0].images["image"].resolve() == inside
    # The images folder given by the user is a data folder too, wherever it is.
    elsewhere = touch(tmp_path / "pictures" / "b.png")
    got = load_dataset("jsonl", _jsonl(data, str(elsewhere)), images=tmp_path / "pictures")
    assert got[0].images["image"] == elsewhere


def test_links_inside_the_data_folder_are_followed(tmp_path: Path) -> None:
    # Decision (documented in _common.within): the suites tell users to link the big image
    # folders in, so a link the user placed inside the data folder is followed; only what the
    # annotation file writes is checked.
    vg = touch(tmp_path / "visual_genome" / "VG_100K" / "1.jpg").parent
    data = tmp_path / "data"
    data.mkdir()
    (data / "VG_100K").symlink_to(vg, target_is_directory=True)
    samples = load_dataset("jsonl", _jsonl(data, "VG_100K/1.jpg"), check_images=True)
    assert samples[0].images["image"].resolve() == vg / "1.jpg"
    with pytest.raises(UnsafePathError):
        load_dataset("jsonl", _jsonl(data, "VG_100K/../../visual_genome/VG_100K/1.jpg"))


def test_adapters_refuse_escaping_ids_and_paths(tmp_path: Path) -> None:
    gqa = tmp_path / "gqa.json"
    gqa.write_text(json.dumps({"7": {"imageId": "../../etc/x", "question": "q", "answer": "a"}}))
    with pytest.raises(UnsafePathError, match=r"sample '7' \(image\)"):
        load_dataset("gqa", gqa)
    tally = tmp_path / "data" / "tally.json"
    tally.parent.mkdir()
    record = {"image": "../../VG_100K/1.jpg", "question": "How many?", "answer": 2}
    tally.write_text(json.dumps([{**record, "issimple": False, "question_id": 5}]))
    with pytest.raises(UnsafePathError, match=r"sample '5'"):
        load_dataset("tallyqa", tally, images=tmp_path / "data" / "images")
    zoom = tmp_path / "zoombench.json"
    query = "How many?\n(A) 1\n(B) 2"
    zoom.write_text(json.dumps([{"images": ["/etc/passwd"], "query": query, "response": "A"}]))
    with pytest.raises(UnsafePathError, match=r"sample '0' \(image\)"):
        load_dataset("zoombench", zoom)
    zoom.write_text(
        json.dumps(
            [{"images": ["i.png"], "crop_images": ["/etc/x.png"], "query": query, "response": "A"}]
        )
    )
    with pytest.raises(UnsafePathError, match=r"\(crop_image\)"):
        load_dataset("zoombench", zoom)


def test_hrbench_never_writes_outside_its_cache(tmp_path: Path) -> None:
    rows = (DATA / "hrbench" / "hr_bench_8k.tsv").read_text().splitlines()
    header, first = rows[0], rows[1].split("\t")
    first[0] = "../../escaped"
    tsv = tmp_path / "data" / "hr.tsv"
    tsv.parent.mkdir()
    tsv.write_text(header + "\n" + "\t".join(first) + "\n")
    with pytest.raises(UnsafePathError, match=r"index '\.\./\.\./escaped'"):
        load_dataset("hrbench", tsv, images=tmp_path / "data" / "cache")
    assert not list(tmp_path.glob("escaped*"))
