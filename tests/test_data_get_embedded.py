"""From an empty folder to a paper's table on real-format data: ``hammr data get`` against a
publisher-like server on 127.0.0.1 (every dataset's files in its official format,
tests/data_site.py), then ``hammr experiment run NAME --data-dir DIR --limit 2`` (not --demo)
on the embedded model, then ``report``: HAMMR's Table 3, AVIS's Table 3 (Infoseek, whose
images come after a request form, and OK-VQA) and MulProg's explanation table (FS-MEVQA's
split archive and GQA's images).

The runs are made under a small budget (``--config``: the demo's step and reply limits) so
that they take minutes; the budget is a setting, the data is the real path. The embedded
135M model answers little right: what is asserted is that every cell is computed from the
fetched data (a number, not "no data") and that the runs asked exactly the samples whose
images ``get`` fetched.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import needs_embedded_model
from data_site import Site, build_site, fixture_catalogue_text
from fixture_http import FixtureServer
from hammr.cli import main as cli
from hammr.datasets.draw import draw, wants_of_experiment
from hammr.eval.store import RunStore
from hammr.experiments import load_experiment
from hammr.experiments.spec import DEMO_BUDGET, stored_run_name
from hammr_subprocess import HAMMR, run_hammr
from patience import HANG_S

pytestmark = [
    needs_embedded_model,
    pytest.mark.skipif(not HAMMR.exists(), reason="needs the hammr command (pip install -e .)"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return build_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def served(site: Site) -> Iterator[FixtureServer]:
    with FixtureServer(site.root) as s:
        yield s


@pytest.fixture(scope="module")
def workspace(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("from_empty")
    (where / "catalogue.toml").write_text(fixture_catalogue_text(site))
    sections: dict[str, list[str]] = {}
    for key, value in DEMO_BUDGET.items():
        section, name = key.split(".", 1)
        sections.setdefault(section, []).append(f"{name} = {value!r}")
    (where / "budget.toml").write_text(
        "".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in sections.items())
    )
    return where


def data_get(where: Path, server: FixtureServer, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(
        cli,
        ["data", "--catalogue", str(where / "catalogue.toml"), "get", "--data-dir",
         str(where / "data"), "--mirror", server.url, "--retry-wait", "0", *args],
    )  # fmt: skip
    return r.exit_code, r.stdout + r.stderr


def hammr(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_hammr(where, *args, timeout=40 * HANG_S)


def run_and_report(where: Path, name: str, *, samples_may_fail: bool = False) -> str:
    """``samples_may_fail``: a sample may end in error on the default offline backends (the
    run then exits 1 and says so), as long as every entry had its data."""
    common = ["--data-dir", str(where / "data"), "--store", str(where / "runs.sqlite")]
    ran = hammr(where, "experiment", "run", name, *common, "--limit", "2",
                "--config", str(where / "budget.toml"), "--no-progress")  # fmt: skip
    if samples_may_fail and ran.returncode == 1:
        assert "samples ended in error" in ran.stderr, ran.stderr
    else:
        assert ran.returncode == 0, ran.stderr
    assert "no data" not in ran.stderr + ran.stdout
    assert "Traceback" not in ran.stderr
    report = hammr(where, "experiment", "report", name, *common[2:])
    assert report.returncode == 0, report.stderr
    return report.stdout


def asked_exactly_the_drawn_samples(where: Path, name: str) -> None:
    """Each run stored exactly the samples the draw over the fetched data gives."""
    drawn = {
        (d.suite, d.entry): {(d.entry, s.id) for s in d.samples}  # a run's sample keys
        for d in draw(wants_of_experiment(name), where / "data", limit=2, seed=0)
    }
    store = RunStore(where / "runs.sqlite", create=False)
    try:
        for run in load_experiment(name).runs:
            entries = run.entries or tuple(e for s, e in drawn if s == run.suite)
            expected = set().union(*(drawn[(run.suite, e)] for e in entries))
            if run.split is not None:  # a half of each entry: within the union
                assert store.done_keys(stored_run_name(name, run.name)) <= expected
                continue
            assert store.done_keys(stored_run_name(name, run.name)) == expected, run.name
    finally:
        store.close()


def cells_are_numbers(report: str, labels: list[str]) -> None:
    for label in labels:
        start = " ".join(label.split()[:3])  # a long label wraps in its column
        line = next((x for x in report.splitlines() if x.strip().startswith(start)), None)
        assert line is not None, (label, report)
        assert re.search(r"\d+\.\d", line), line  # our number, beside the paper's


def test_hammr_table3_from_an_empty_folder(
    workspace: Path, served: FixtureServer, site: Site
) -> None:
    code, out = data_get(workspace, served, "--experiment", "hammr-table3", "--limit", "2",
                         "--yes")  # fmt: skip
    assert code == 0, out
    report = run_and_report(workspace, "hammr-table3")
    cells_are_numbers(report, ["Naive generic ReAct agent", "HAMMR"])
    assert "no data" not in report
    asked_exactly_the_drawn_samples(workspace, "hammr-table3")


def test_avis_table3_after_the_request_form_images(
    workspace: Path, served: FixtureServer, site: Site
) -> None:
    code, out = data_get(workspace, served, "--experiment", "avis-table3", "--limit", "2")
    assert code == 1  # Infoseek's images come only after a request form
    assert "by request form: oven_images" in out and "infoseek/oven_images" in out
    site.place_form_images("oven_images", workspace / "data")  # as a user does with them
    code, out = data_get(workspace, served, "--experiment", "avis-table3", "--limit", "2")
    assert code == 0, out
    report = run_and_report(workspace, "avis-table3")
    table = load_experiment("avis-table3").tables[0]
    cells_are_numbers(report, [row.label for row in table.rows])
    assert "no data" not in report
    asked_exactly_the_drawn_samples(workspace, "avis-table3")


def test_mulprog_explanations_on_fs_mevqa(workspace: Path, served: FixtureServer) -> None:
    code, out = data_get(workspace, served, "--experiment", "mulprog-explanations",
                         "--limit", "2", "--yes")  # fmt: skip
    assert code == 0, out
    assert (workspace / "data" / "mevqa").is_dir()
    # MulProg's programs ask the detector for objects the default Haar cascades may not know
    # ('dog'): such a sample ends in error, stored and scored 0, the data read all the same
    report = run_and_report(workspace, "mulprog-explanations", samples_may_fail=True)
    table = load_experiment("mulprog-explanations").tables[0]
    # the baseline's cells are numbers; MulProg's are numbers unless its samples failed, when
    # its cells are empty with the note that says so (never "no data")
    cells_are_numbers(report, [table.rows[-1].label])
    assert "no data" not in report
    asked_exactly_the_drawn_samples(workspace, "mulprog-explanations")
