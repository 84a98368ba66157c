"""``hammr data get`` end to end against a publisher-like server on 127.0.0.1: every dataset's
files in its official format (tests/data_site.py), served with ranges, counted, and made to
fail (tests/fixture_http.py). ``--mirror`` points every catalogue URL at that server and
``--catalogue`` gives the fixture files' own sizes and checksums."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from data_site import Site, build_site, fixture_catalogue_text, served_path
from fixture_http import FixtureServer
from hammr.cli import main as cli
from hammr.datasets.draw import draw, wants_of_experiment
from hammr.output_file import exclusive_lock

HAMMR = str(Path(sys.executable).with_name("hammr"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return build_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def catalogue_file(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalogue") / "catalogue.toml"
    path.write_text(fixture_catalogue_text(site))
    return path


@pytest.fixture
def server(site: Site) -> Iterator[FixtureServer]:
    with FixtureServer(site.root) as s:
        yield s


def get(catalogue: Path, server: FixtureServer, data: Path, *args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    r = runner.invoke(
        cli,
        ["data", "--catalogue", str(catalogue), "get", "--data-dir", str(data),
         "--mirror", server.url, "--retry-wait", "0", "--timeout", "5", *args],
    )  # fmt: skip
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def drawn_images(data: Path, experiment: str, limit: int) -> dict[str, set[Path]]:
    out: dict[str, set[Path]] = {}
    for d in draw(wants_of_experiment(experiment), data, limit=limit, seed=0):
        assert d.status == "drawn", d
        out[f"{d.suite}/{d.entry}"] = {p for s in d.samples for p in s.images.values()}
    return out


def test_get_fetches_only_the_drawn_samples_images_and_a_second_get_asks_nothing(
    site: Site, catalogue_file: Path, server: FixtureServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    code, out, err = get(catalogue_file, server, data, "--experiment", "hammr-table3",
                         "--limit", "2", "--yes")  # fmt: skip
    assert code == 0, out + err
    assert "complete" in out.splitlines()[-1]
    for entry, images in drawn_images(data, "hammr-table3", 2).items():
        assert len(images) >= 2, entry
        assert all(p.is_file() for p in images), entry
    asked = server.paths()
    # every image with a URL of its own that a drawn sample reads was asked once; no other
    drawn_names = {p.name for imgs in drawn_images(data, "hammr-table3", 2).values() for p in imgs}
    for dataset in ("visual_genome", "google_landmarks_v2", "textvqa", "nlvr2"):
        for key, img in site.images[dataset].items():
            if not img.url:
                continue
            path = served_path(img.url)
            wanted = Path(img.local).name in drawn_names
            assert (path in asked) == wanted, (dataset, key, path)
    for dataset in ("visual_genome", "google_landmarks_v2"):
        extra = {served_path(site.images[dataset][k].url) for k in site.extra_images(dataset)}
        assert extra and not extra & asked
    # Google Landmarks' 500 archives and Visual Genome's two were never needed
    assert not any(p.endswith((".tar",)) and "google-landmark/train" in p for p in asked)
    assert not any(p.endswith(("images.zip", "images2.zip")) and "rak248" in p for p in asked)
    lock = json.loads((data / "hammr-data.lock").read_text())
    assert all(len(v["sha256"]) == 64 for v in lock["files"].values())
    server.reset_counts()
    code, out, err = get(catalogue_file, server, data, "--experiment", "hammr-table3",
                         "--limit", "2", "--yes")  # fmt: skip
    assert code == 0, out + err
    assert server.requests == []  # a complete folder: nothing asked of the network


def test_large_downloads_are_listed_with_their_size_and_need_yes(
    catalogue_file: Path, server: FixtureServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    code, out, _ = get(catalogue_file, server, data, "gqa_images", "--dry-run")
    assert code == 0 and "would fetch gqa_images/images, " in out and "bytes: https://" in out
    assert server.requests == []  # a dry run asks nothing
    bundled = Path(__file__).resolve().parents[1] / "src/hammr/datasets/catalogue.toml"
    code, out, _ = get(bundled, server, data, "gqa_images")
    assert code == 1
    assert "left out (large): gqa_images/images: 21,817,965,542 bytes" in out
    assert "add --yes" in out
    assert server.requests == []


def test_a_download_killed_with_kill_9_resumes_where_it_stopped(
    site: Site, catalogue_file: Path, server: FixtureServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    url = next(s.url for d in site.catalogue.datasets if d.name == "gqa_images" for s in d.sources)
    path = served_path(url)
    size = (site.root / path).stat().st_size
    server.fault(path, "throttle", bytes_per_s=max(200, size // 20))
    args = [HAMMR, "data", "--catalogue", str(catalogue_file), "get", "gqa_images",
            "--data-dir", str(data), "--mirror", server.url, "--yes"]  # fmt: skip
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part = next(iter([]), None)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            parts = list((data / ".hammr-downloads").rglob("*.part"))
            if parts and parts[0].stat().st_size > size // 5:
                part = parts[0]
                break
            time.sleep(0.05)
        assert part is not None, "the download never started"
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    had = part.stat().st_size
    assert 0 < had < size
    server.clear_faults()
    # a server of its own for the rerun, so that its count holds this run's bytes alone (the
    # killed connection's last bytes may still be counted by the first one)
    with FixtureServer(site.root) as second:
        code, out, err = get(catalogue_file, second, data, "gqa_images", "--yes")
        asked = [r for r in second.requests if r.path == path]
        sent = second.bytes_sent(path)
    assert code == 0, out + err
    assert [(r.range, r.status) for r in asked] == [(f"bytes={had}-", 206)]
    assert sent == size - had  # only the rest came
    assert len(list((data / "gqa" / "images").iterdir())) == len(site.images["gqa_images"])


@pytest.mark.parametrize(("fault", "words"), [("404", "answered 404"), ("html", "HTML page"),
                                              ("500", "answered 500"),
                                              ("redirect_loop", "redirect loop")])  # fmt: skip
def test_a_failing_source_is_one_line_and_a_rerun_finishes_the_job(
    site: Site, catalogue_file: Path, server: FixtureServer, tmp_path: Path, fault: str,
    words: str,
) -> None:  # fmt: skip
    data = tmp_path / "data"
    path = "storage.googleapis.com/encyclopedic-vqa/test.csv"
    server.fault(path, fault)
    code, out, err = get(catalogue_file, server, data, "encvqa", "--limit", "1", "--yes")
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("hammr: error:")]
    assert len(errors) == 1 and words in errors[0] and "encvqa/test_questions" in errors[0]
    assert not (data / "encvqa" / "test.csv").exists()  # nothing half-written counted
    server.clear_faults()
    code, out, err = get(catalogue_file, server, data, "encvqa", "--limit", "1", "--yes")
    assert code == 0, out + err


def test_a_checksum_mismatch_is_kept_aside_and_not_used(
    server: FixtureServer, tmp_path: Path
) -> None:
    # the bundled catalogue carries iNaturalist's real md5s, which the fixture files lack
    bundled = Path(__file__).resolve().parents[1] / "src/hammr/datasets/catalogue.toml"
    data = tmp_path / "data"
    code, _, err = get(bundled, server, data, "inaturalist_2021", "--limit", "1")
    assert code == 1
    assert "is not the expected 4d761e0f6a86cc63e8f7afc91f6a8f0b" in err
    assert "kept aside" in err
    assert not (data / "encvqa/images/inaturalist/val.json").exists()
    assert list((data / ".hammr-downloads" / "rejected").iterdir())


def test_an_archive_with_a_member_leading_out_is_refused_and_nothing_lands_outside(
    site: Site, catalogue_file: Path, tmp_path: Path
) -> None:
    root = tmp_path / "evil_site"
    bad = root / "github.com/manoja328/tallyqa/blob/master/tallyqa.zip"
    bad.parent.mkdir(parents=True)
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("test.json", "[]")
        z.writestr("../../outside.txt", "gotcha")
    data = tmp_path / "deep" / "data"
    with FixtureServer(root) as evil:
        code, _, err = get(catalogue_file, evil, data, "tallyqa", "--limit", "1")
    assert code == 1 and "tallyqa/questions" in err
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "deep/outside.txt").exists()
    assert not (data / "tallyqa" / "test.json").exists()


def test_a_truncated_archive_is_an_error_and_a_rerun_after_the_fix_completes(
    site: Site, catalogue_file: Path, tmp_path: Path
) -> None:
    root = tmp_path / "site2"
    real = site.root / "github.com/manoja328/tallyqa/blob/master/tallyqa.zip"
    cut = root / "github.com/manoja328/tallyqa/blob/master/tallyqa.zip"
    cut.parent.mkdir(parents=True)
    cut.write_bytes(real.read_bytes()[:-40])
    data = tmp_path / "data"
    # the catalogue checks no size for this file: the archive itself must be found short
    with FixtureServer(root) as short:
        code, _, err = get(catalogue_file, short, data, "tallyqa", "--limit", "1")
    assert code == 1 and "tallyqa/questions" in err and "\n" not in err.strip()
    assert not (data / "tallyqa" / "test.json").exists()
    cut.write_bytes(real.read_bytes())
    with FixtureServer(root) as fixed:
        get(catalogue_file, fixed, data, "tallyqa", "--limit", "1")
    # fetched again in full (the short file's checksum was not kept) and unpacked
    assert (data / "tallyqa" / "test.json").is_file()


def test_two_gets_on_one_folder_the_second_says_so(
    catalogue_file: Path, server: FixtureServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with exclusive_lock(data / ".hammr-data-get.lock", f"hammr data get, pid {os.getpid()}"):
        code, _, err = get(catalogue_file, server, data, "encvqa")
    assert code == 2
    assert "another `hammr data get` is filling" in err and str(os.getpid()) in err
    assert server.requests == []


def test_check_and_run_print_the_get_command_for_a_missing_entry(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["data", "check", "--data-dir", str(tmp_path),
                                 "--experiment", "avis-table3", "--limit", "5"])  # fmt: skip
    assert r.exit_code == 1
    assert (
        f"to fetch what is missing: hammr data get infoseek okvqa --data-dir {tmp_path} "
        "--experiment avis-table3 --limit 5"
    ) in r.stdout


def test_an_images_dataset_with_a_limit_is_drawn_through_the_questions_that_read_it(
    site: Site, catalogue_file: Path, server: FixtureServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    code, out, err = get(catalogue_file, server, data, "visual_genome", "--limit", "1")
    assert code == 0, out + err
    assert "pointqa: read for its drawn samples' images" in out
    assert "present  generic-vqa/tallyqa: 1 of 1 drawn samples have their images" in out
    vg = [r.path for r in server.requests if r.path.startswith("cs.stanford.edu/people/rak248")]
    # one image per drawn sample of the three entries that read Visual Genome; no archive
    assert len(vg) == 3 and not any(p.endswith(".zip") for p in vg)
