"""``hammr data list | show | check`` over the bundled catalogue, on the demo data and on
folders made from it."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from demo_support import DEMO
from hammr.cli import main
from hammr.datasets.catalogue_file import load_catalogue
from hammr.eval.suites import load_suite


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_list_names_every_dataset_and_what_a_folder_holds(tmp_path: Path) -> None:
    out = run("data", "list").stdout
    names = load_catalogue().names()
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert listed == list(names)
    assert "hammr-table3" in next(x for x in out.splitlines() if x.startswith("gqa "))
    (tmp_path / "gqa").mkdir()
    (tmp_path / "gqa" / "testdev_balanced_questions.json").write_text("{}")
    held = run("data", "list", "--data-dir", str(tmp_path)).stdout
    assert next(x for x in held.splitlines() if x.startswith("gqa ")).endswith("partial")
    assert next(x for x in held.splitlines() if x.startswith("nlvr2 ")).endswith("missing")


def test_show_prints_sources_and_what_is_not_confirmed() -> None:
    r = run("data", "show", "hrbench")
    assert r.exit_code == 0
    assert "hrbench/hr_bench_8k.tsv" in r.stdout
    assert "https://huggingface.co/datasets/DreamMr/HR-Bench" in r.stdout
    assert "not confirmed:" in r.stdout
    r = run("data", "show", "nope")
    assert r.exit_code == 2 and "no dataset 'nope'; datasets: pointqa" in r.stderr


def test_check_says_present_partial_and_missing_per_entry(tmp_path: Path) -> None:
    r = run("data", "check", "--data-dir", str(DEMO), "--experiment", "hammr-table3", "--demo")
    assert r.exit_code == 0, r.stdout
    assert "8 of 8 entries present" in r.stdout
    assert "present  demo/demo_ocr_reasoning: 1 samples" in r.stdout

    data = tmp_path / "demo"
    shutil.copytree(DEMO, data)
    # the look-twice entry's drawn image goes: that entry is partial
    suite = load_suite("demo")
    look = next(e for e in suite.entries if e.name == "demo_look_twice")
    ((_, sample),) = suite.select((look.name,)).samples(data, limit=1)
    gone = set(sample.images.values())
    # the demo's entries share images: every entry whose drawn sample shows it is partial
    hit = {e.name for e, s in suite.samples(data, limit=1) if gone & set(s.images.values())}
    for image in gone:
        image.unlink()
    r = run("data", "check", "--data-dir", str(data), "--experiment", "hammr-table3", "--demo")
    assert r.exit_code == 1
    assert "partial  demo/demo_look_twice: 0 of 1 drawn samples have their images" in r.stdout
    partial = {
        x.split("/")[1].split(":")[0] for x in r.stdout.splitlines() if x.startswith("partial")
    }
    assert partial == hit
    assert f"{8 - len(hit)} of 8 entries present" in r.stdout
    # then the question file (every demo entry reads the one file): all missing
    look.file_path(data).rename(tmp_path / "away.jsonl")
    r = run("data", "check", "--data-dir", str(data), "--experiment", "hammr-table3", "--demo")
    assert r.exit_code == 1
    assert f"missing  demo/demo_two_hop: no {look.file_path(data)}" in r.stdout
    assert "0 of 8 entries present" in r.stdout


def test_check_names_the_official_sources_of_what_is_missing(tmp_path: Path) -> None:
    r = run("data", "check", "--data-dir", str(tmp_path), "--experiment", "avis-table3")
    assert r.exit_code == 1
    assert "missing  avis/okvqa: no " in r.stdout
    catalogue = load_catalogue()
    for name in ("okvqa", "coco_val2014", "infoseek"):
        assert f"{name}: the official sources (`hammr data show {name}`):" in r.stdout
        first = catalogue.get(name).sources[0]
        assert f"  {first.url} -> {tmp_path / first.target}" in r.stdout
    assert "0 of 2 entries present" in r.stdout


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    r = run("data", "check", "--data-dir", str(tmp_path / "none"))
    assert r.exit_code == 2 and "no such folder" in r.stderr
    r = run("data", "check", "--data-dir", str(tmp_path), "--experiment", "nope")
    assert r.exit_code == 2 and "nope" in r.stderr
