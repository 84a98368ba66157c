"""Every bundled experiment file reads, resolves against hammr, and carries the paper's numbers.

A bundled file is what ``hammr experiment run NAME`` trusts without further checks, so a typo
in a system, suite, setting or cell, or a cell left without the paper's value, must fail
here rather than in a researcher's long run. The HAMMR and AVIS files must also set what
their papers ran (the LLM dispatcher, no grammar, VQA withheld except in Table 5, the AVIS
baseline without worked examples), since the defaults differ.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hammr.experiments import BUNDLED_DIR, bundled_names, load_experiment
from hammr.experiments.spec import NOT_REPORTED, Experiment, read_experiment

FILES = sorted(BUNDLED_DIR.glob("*.toml"))

HAMMR_AND_AVIS = (
    "hammr-table2",
    "hammr-table3",
    "hammr-table4",
    "hammr-table5",
    "hammr-tableA1",
    "avis-table3",
    "avis-table5",
    "avis-figs6-13",
)


def _id(path: Path) -> str:
    return path.stem


def test_the_hammr_and_avis_tables_are_bundled() -> None:
    assert set(HAMMR_AND_AVIS) <= set(bundled_names())


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_bundled_file_reads_and_every_cell_has_the_papers_number(path: Path) -> None:
    e = read_experiment(path)
    assert e.name == path.stem
    assert e.source and e.deviations, "a bundled file names its source and its deviations"
    assert e.data.demo_suite, "a bundled file can run offline on a demo suite"
    for table in e.tables:
        labels = {c.label for c in table.columns}
        for row in table.rows:
            assert set(row.paper) == labels, f"{table.name} {row.label}"
            for label, value in row.paper.items():
                ok = value == NOT_REPORTED or (
                    isinstance(value, int | float) and not isinstance(value, bool)
                )
                assert ok, f"{table.name} {row.label} {label}: {value!r}"


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_bundled_file_resolves_against_hammr(path: Path) -> None:
    if importlib.util.find_spec("hammr.experiments.validate") is None:
        pytest.skip("hammr.experiments.validate is not built yet: only the file's shape is checked")
    from hammr.experiments.validate import validate

    validate(read_experiment(path))


def _settings(e: Experiment, key: str) -> dict[str, object]:
    return {run.name: run.settings.get(key) for run in e.runs}


@pytest.mark.parametrize(
    ("name", "setting"),
    [
        ("hammr-table2", "tools_only"),
        ("hammr-table3", "tools_only"),
        ("hammr-table4", "tools_only"),
        ("hammr-table5", "with_vqa"),
        ("hammr-tableA1", "tools_only"),
    ],
)
def test_hammr_files_run_as_the_paper_did(name: str, setting: str) -> None:
    e = load_experiment(name)
    assert e.data.suite == "generic-vqa" and e.data.limit == 1000
    for run in e.runs:
        assert run.settings.get("agent.router") == "llm", run.name
        assert run.settings.get("llm.grammar") == "off", run.name
        assert run.settings.get("agent.setting") == setting, run.name


def test_hammr_table2_routes_by_the_true_question_type_and_table5_has_the_bare_vlm() -> None:
    assert {r.system for r in load_experiment("hammr-table2").runs} == {"hammr-oracle"}
    assert {r.system for r in load_experiment("hammr-table4").runs} == {
        "hammr-oracle",
        "naive",
        "hammr",
    }
    assert {r.system for r in load_experiment("hammr-table5").runs} == {"vlm", "hammr"}


@pytest.mark.parametrize("name", ["avis-table3", "avis-table5"])
def test_avis_baseline_sees_task_descriptions_only(name: str) -> None:
    e = load_experiment(name)
    autonomous = [r for r in e.runs if r.system == "avis-autonomous"]
    assert autonomous
    assert all(r.settings.get("avis.autonomous_examples") is False for r in autonomous)


def test_avis_table5_has_the_text_only_baseline_on_the_human_split() -> None:
    e = load_experiment("avis-table5")
    human = e.tables[0]
    assert {e.run(row.run).system for row in human.rows} == {"llm-only", "avis", "avis-autonomous"}
    # the human split's cells are its own entries, never the Wikidata split's
    assert all(c.cell.kind == "entry" and "human" in c.cell.arg for c in human.columns)
