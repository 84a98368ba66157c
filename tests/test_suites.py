"""Suites: the bundled generic-vqa and muse-mc files, loading a data folder laid out as they say
(built from the adapter fixtures), and the errors for malformed suites and missing files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hammr.eval.datasets import DatasetError
from hammr.eval.metrics import METRICS as METRIC_REGISTRY
from hammr.eval.suites import (
    METRICS,
    SuiteEntry,
    SuiteError,
    available_suites,
    load_suite,
)
from hammr.eval.types import QUESTION_TYPES, Sample

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "eval"

TABLE_2 = {
    "local_pointing": "exact_match",
    "look_twice": "exact_match",
    "single_hop": "encvqa",
    "two_hop": "encvqa",
    "two_image": "exact_match",
    "spatial_reasoning": "exact_match",
    "complex_counting": "exact_match",
    "ocr_reasoning": "textvqa_accuracy",
}


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)


@pytest.fixture
def generic_dir(tmp_path: Path) -> Path:
    """A data folder laid out as generic-vqa.toml says, from the fixtures."""
    d = tmp_path / "data"
    for name in ("localqa_dataset.json", "localqa_testfinal_imgs.json", "looktwiceqa_dataset.json"):
        _copy(DATA / "pointqa" / name, d / "pointqa" / name)
    (d / "pointqa" / "looktwiceqa_test_imgs.json").write_text(json.dumps(["2414753", "2410576"]))
    _copy(DATA / "encvqa" / "test.csv", d / "encvqa" / "test.csv")
    _copy(DATA / "nlvr2" / "test1.json", d / "nlvr2" / "test1.json")
    _copy(
        DATA / "gqa" / "testdev_balanced_questions.json",
        d / "gqa" / "testdev_balanced_questions.json",
    )
    _copy(DATA / "tallyqa" / "test.json", d / "tallyqa" / "test.json")
    _copy(DATA / "textvqa" / "TextVQA_0.5.1_val.json", d / "textvqa" / "TextVQA_0.5.1_val.json")
    return d


@pytest.fixture
def muse_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    _copy(DATA / "vstar" / "vstar_bench", d / "vstar_bench")
    _copy(
        DATA / "mme_realworld_lite" / "MME-RealWorld-Lite.json",
        d / "mme_realworld_lite" / "MME-RealWorld-Lite.json",
    )
    _copy(DATA / "zoombench" / "zoombench.json", d / "zoombench" / "zoombench.json")
    _copy(DATA / "hrbench" / "hr_bench_8k.tsv", d / "hrbench" / "hr_bench_8k.tsv")
    return d


def _touch_images(pairs: list[tuple[SuiteEntry, Sample]]) -> None:
    for _, sample in pairs:
        for path in sample.images.values():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_bytes(b"")


def test_bundled_suites() -> None:
    assert available_suites() == [
        "avis",
        "demo",
        "generic-vqa",
        "infoseek-human",
        "mevqa",
        "mevqa-demo",
        "muse-demo",
        "muse-mc",
    ]
    generic = load_suite("generic-vqa")
    assert generic.name == "generic-vqa"
    assert len(generic.entries) == 8
    assert {e.question_type: e.metric for e in generic.entries} == TABLE_2
    assert set(TABLE_2) == set(QUESTION_TYPES)
    assert {e.dataset for e in generic.entries} == {
        "pointqa_local",
        "pointqa_looktwice",
        "encvqa",
        "nlvr2",
        "gqa",
        "tallyqa",
        "textvqa",
    }
    assert generic.entry("tallyqa").options == {"complex": True}
    muse = load_suite("muse-mc")
    assert [e.dataset for e in muse.entries] == [
        "vstar",
        "mme_realworld_lite",
        "zoombench",
        "hrbench",
    ]
    assert {e.metric for e in muse.entries} == {"multiple_choice"}
    # the samples' sub-tasks are their question types: no entry overrides them
    assert {e.question_type for e in muse.entries} == {""}
    aggregates = {a.name: (a.function, a.entries) for a in muse.aggregates}
    four = ("vstar", "mme_realworld_lite", "zoombench", "hrbench_8k")
    assert aggregates["micro_average"] == ("micro_mean", four)
    assert aggregates["average"] == ("mean", four)
    assert aggregates["vstar_micro"] == ("micro_mean", ("vstar",))
    # the paper's counts (its Table 1), drawn seeded: which ones it took is not published
    assert {e.name: e.draw for e in muse.entries if e.draw} == {"zoombench": 621, "hrbench_8k": 200}
    demo = load_suite("muse-demo")
    assert [(e.name, e.dataset, e.metric) for e in demo.entries] == [
        ("muse_demo", "jsonl", "multiple_choice")
    ]
    for suite in (generic, muse):
        assert all(e.metric in METRICS for e in suite.entries)
        assert len({e.name for e in suite.entries}) == len(suite.entries)


def test_suite_metric_names_are_the_registry_names() -> None:
    assert sorted(METRICS) == sorted(METRIC_REGISTRY)


def test_an_entry_whose_annotations_lead_outside_names_the_entry(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "gqa").mkdir(parents=True)
    (data / "gqa" / "q.json").write_text(
        json.dumps({"9": {"imageId": "../../../x", "question": "q", "answer": "a"}})
    )
    entry = SuiteEntry(name="gqa", dataset="gqa", metric="exact_match", file="gqa/q.json")
    with pytest.raises(SuiteError, match=r"entry 'gqa': gqa: .*q\.json, sample '9'.*outside"):
        entry.load(data)


def test_generic_suite_samples(generic_dir: Path) -> None:
    suite = load_suite("generic-vqa")
    pairs = suite.samples(generic_dir)
    counts: dict[str, int] = {}
    for entry, sample in pairs:
        counts[entry.name] = counts.get(entry.name, 0) + 1
        assert sample.question_type == entry.question_type
    assert counts == {
        "pointqa_local": 5,  # image_list keeps 3 of 4 images
        "pointqa_looktwice": 3,
        "encvqa_single_hop": 4,  # split 'test' drops the val row
        "encvqa_two_hop": 1,
        "nlvr2": 40,
        "gqa": 12,
        "tallyqa": 2,
        "textvqa": 3,
    }
    nlvr2 = next(s for e, s in pairs if e.name == "nlvr2")
    assert nlvr2.images["image"].parent == generic_dir / "nlvr2" / "images"
    gqa = next(s for e, s in pairs if e.name == "gqa")
    assert gqa.images["image"] == generic_dir / "gqa" / "images" / "n54424.jpg"


def test_suite_limit_is_per_entry_and_prefix_stable(generic_dir: Path) -> None:
    suite = load_suite("generic-vqa")
    two = suite.samples(generic_dir, limit=2, seed=5)
    one = suite.samples(generic_dir, limit=1, seed=5)
    by_entry: dict[str, list[str]] = {}
    for e, s in two:
        by_entry.setdefault(e.name, []).append(s.id)
    assert all(len(ids) <= 2 for ids in by_entry.values())
    assert len(by_entry) == 8
    for e, s in one:
        assert by_entry[e.name][0] == s.id
    assert [s.id for _, s in suite.samples(generic_dir, limit=2, seed=5)] == [s.id for _, s in two]


def test_suite_check_images(generic_dir: Path) -> None:
    suite = load_suite("generic-vqa").select(["gqa", "nlvr2"])
    with pytest.raises(SuiteError) as info:
        suite.samples(generic_dir, check_images=True)
    assert "suite 'generic-vqa', entry 'nlvr2'" in str(info.value)
    assert "do not exist" in str(info.value)
    _touch_images(suite.samples(generic_dir))
    assert len(suite.samples(generic_dir, check_images=True)) == 52


def test_suite_missing_file_names_entry_and_file(generic_dir: Path) -> None:
    (generic_dir / "gqa" / "testdev_balanced_questions.json").unlink()
    with pytest.raises(SuiteError) as info:
        load_suite("generic-vqa").samples(generic_dir)
    message = str(info.value)
    assert "entry 'gqa'" in message
    assert str(generic_dir / "gqa" / "testdev_balanced_questions.json") in message
    assert "GQA balanced questions JSON" in message
    assert isinstance(info.value, DatasetError)
    # the other entries still load on their own
    assert len(load_suite("generic-vqa").select(["tallyqa"]).samples(generic_dir)) == 2


def test_muse_suite_samples(muse_dir: Path) -> None:
    suite = load_suite("muse-mc")
    pairs = suite.samples(muse_dir)
    counts: dict[str, int] = {}
    for entry, sample in pairs:
        counts[entry.name] = counts.get(entry.name, 0) + 1
        assert sample.choices, sample
        assert len(sample.answers) == 1
        assert sample.answers[0] in "ABCDEFGH"[: len(sample.choices)]
    assert counts == {"vstar": 3, "mme_realworld_lite": 3, "zoombench": 2, "hrbench_8k": 3}
    sub_tasks = {(e.name, s.id): s.question_type for e, s in pairs}
    assert [v for (e, _), v in sub_tasks.items() if e == "vstar"] == [
        "attribute",
        "attribute",
        "relation",
    ]
    assert [v for (e, _), v in sub_tasks.items() if e == "mme_realworld_lite"] == [
        "perception",
        "reasoning",
        "perception",
    ]
    assert {v for (e, _), v in sub_tasks.items() if e in ("zoombench", "hrbench_8k")} == {
        "multiple_choice"
    }
    hr = [s for e, s in pairs if e.name == "hrbench_8k"]
    assert all(s.images["image"].parent == muse_dir / "hrbench" / "images_8k" for s in hr)
    assert all(s.images["image"].is_file() for s in hr)


def test_entry_question_type_overrides_the_adapters(tmp_path: Path) -> None:
    _copy(DATA / "jsonl" / "questions.jsonl", tmp_path / "mine" / "q.jsonl")
    toml = tmp_path / "mine.toml"
    toml.write_text(
        'name = "mine"\n'
        "[[entry]]\n"
        'dataset = "jsonl"\n'
        'question_type = "two_image"\n'
        'metric = "exact_match"\n'
        'file = "mine/q.jsonl"\n'
        'options = { dataset = "handmade" }\n'
    )
    suite = load_suite(str(toml))
    assert suite.name == "mine" and suite.path == toml
    assert suite.entries[0].name == "jsonl"
    pairs = suite.samples(tmp_path)
    assert len(pairs) == 4
    assert {s.question_type for _, s in pairs} == {"two_image"}
    assert {s.dataset for _, s in pairs} == {"handmade"}


def test_an_entry_s_draw_fixes_its_samples_for_every_run_and_seed(tmp_path: Path) -> None:
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo"
    toml = tmp_path / "drawn.toml"
    toml.write_text(
        'name = "drawn"\n[[entry]]\nname = "mc"\ndataset = "jsonl"\n'
        'metric = "multiple_choice"\nfile = "mc_questions.jsonl"\ndraw = 8\n'
    )
    suite = load_suite(str(toml))
    assert suite.entries[0].draw == 8
    every = [s.id for _, s in load_suite("muse-demo").samples(demo)]
    drawn = [s.id for _, s in suite.samples(demo)]
    assert len(every) == 20 and len(drawn) == 8
    assert drawn == [i for i in every if i in drawn]  # in file order
    for seed in (0, 1, 7):  # --seed draws within it; the population stays
        limited = [s.id for _, s in suite.samples(demo, limit=3, seed=seed)]
        assert len(limited) == 3 and set(limited) <= set(drawn)
    halves = [
        [s.id for _, s in suite.samples(demo, half=half)] for half in ("exploration", "evaluation")
    ]
    assert sorted(halves[0] + halves[1]) == sorted(drawn) and not set(halves[0]) & set(halves[1])


@pytest.mark.parametrize("draw", ["0", "-3", "true", '"200"', "2.5"])
def test_a_bad_draw_is_refused(tmp_path: Path, draw: str) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text(
        f'[[entry]]\ndataset = "gqa"\nmetric = "exact_match"\nfile = "x"\ndraw = {draw}\n'
    )
    with pytest.raises(SuiteError, match="'draw' is a whole number of at least 1"):
        load_suite(toml)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "no \\[\\[entry\\]\\] tables"),
        ('[[entry]]\ndataset = "gqa"\nmetric = "exact_match"\n', "needs 'file'"),
        (
            '[[entry]]\ndataset = "vqav2"\nmetric = "exact_match"\nfile = "x"\n',
            "unknown dataset 'vqav2'",
        ),
        ('[[entry]]\ndataset = "gqa"\nmetric = "bleu"\nfile = "x"\n', "unknown metric 'bleu'"),
        (
            '[[entry]]\ndataset = "gqa"\nmetric = "exact_match"\nfile = "x"\n'
            "options = { complex = true }\n",
            r"the gqa adapter has no option\(s\) complex",
        ),
        (
            '[[entry]]\ndataset = "gqa"\nmetric = "exact_match"\nfile = "x"\nlimit = 3\n',
            r"unknown key\(s\) limit",
        ),
        (
            '[[entry]]\ndataset = "gqa"\nmetric = "exact_match"\nfile = "x"\n'
            '[[entry]]\ndataset = "gqa"\nmetric = "exact_match"\nfile = "y"\n',
            "repeated: gqa",
        ),
        ("[[entry]\n", "not valid TOML"),
    ],
)
def test_malformed_suites(tmp_path: Path, body: str, message: str) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text(body)
    with pytest.raises(SuiteError, match=message):
        load_suite(toml)


def test_unknown_suite_and_entry() -> None:
    with pytest.raises(
        SuiteError,
        match=(
            "unknown suite 'nope'; bundled: avis, demo, generic-vqa, infoseek-human, mevqa, "
            "mevqa-demo, muse-demo, muse-mc"
        ),
    ):
        load_suite("nope")
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite("/nowhere/suite.toml")
    with pytest.raises(SuiteError, match="has no entry 'vqav2'"):
        load_suite("generic-vqa").select(["vqav2"])


def test_the_bundled_demo_suite_reads_the_demo_set_one_entry_per_type() -> None:
    from collections import Counter

    from hammr.eval.types import QUESTION_TYPES

    suite = load_suite("demo")
    pairs = suite.samples(ROOT / "examples" / "demo", check_images=True)
    per_entry = Counter(entry.question_type for entry, _ in pairs)
    assert set(per_entry) == set(QUESTION_TYPES)
    assert min(per_entry.values()) >= 4 and sum(per_entry.values()) == 43
    assert all(sample.question_type == entry.question_type for entry, sample in pairs)


def test_the_mevqa_demo_suite_holds_references_grounded_on_the_demo_annotations() -> None:
    """Every reference [BOX] of examples/demo/mevqa_demo.json is paired with its name's boxes,
    and those boxes are objects of annotations.json (so a perfect detector scores 100)."""
    from hammr.eval.metrics.explanation import detection_score, grounding_score

    demo = ROOT / "examples" / "demo"
    annotations = json.loads((demo / "annotations.json").read_text())
    pairs = load_suite("mevqa-demo").samples(demo, check_images=True)
    assert len(pairs) == 8
    for _, sample in pairs:
        reference = sample.meta["reference"]
        assert reference.token_count == len(reference.boxes) >= 1
        objects = annotations[sample.images["image"].name]["objects"]
        known = {tuple(o["box"]) for o in objects}
        for ref in reference.boxes:
            assert ref.name in sample.meta["explanation"].lower()
            for box in ref.boxes:
                assert (box.x, box.y, box.w, box.h) in known
        assert detection_score(reference, reference, official_padding=False) == 1.0
        assert grounding_score(reference, reference) == 1.0
