"""The experiment file's own checks (hammr.experiments.spec): every malformed file is one
line naming the file and the part, and the steps come in the order they need."""

from __future__ import annotations

from pathlib import Path

import pytest

from hammr.experiments import ExperimentError, load_experiment
from hammr.experiments.spec import MemoryStep, Run, read_experiment, stored_run_name

GOOD = """\
name = "tiny"
title = "A tiny experiment"
paper = "muse"
source = "MuSEAgent, Table 2"
deviations = ["the demo data"]

[settings]
"memory.policy" = "every_step"

[data]
suite = "muse-demo"
limit = 2

[[run]]
name = "muse"
system = "muse"
split = "evaluation"
memory = "bank"
settings = { memory = { k = 3 } }

[[run]]
name = "explore"
system = "react"
split = "exploration"

[[memory]]
name = "bank"
command = "build"
from = "explore"

[[table]]
name = "t2"
title = "Accuracy (%)"
columns = [{ label = "all", cell = "overall" }, { label = "attr", cell = "type:attribute" }]

[[table.row]]
label = "MuSEAgent"
run = "muse"
paper = { "all" = 80.5, "attr" = "not reported" }
"""


def write(tmp_path: Path, text: str, name: str = "tiny") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_a_good_file_reads_with_steps_in_the_order_they_need(tmp_path: Path) -> None:
    e = read_experiment(write(tmp_path, GOOD))
    order = [(type(s).__name__, s.name) for s in e.order()]
    # the memory is built from the exploration before the run that reads it
    assert order == [("Run", "explore"), ("MemoryStep", "bank"), ("Run", "muse")]
    muse = e.run("muse")
    assert isinstance(muse, Run) and muse.suite == "muse-demo"
    assert muse.settings == {"memory.policy": "every_step", "memory.k": 3}
    assert isinstance(e.memory("bank"), MemoryStep)
    assert e.tables[0].source == "MuSEAgent, Table 2"  # the file's, by default
    assert str(e.tables[0].columns[1].cell) == "type:attribute"


def test_load_experiment_takes_a_path_and_refuses_an_unknown_name(tmp_path: Path) -> None:
    assert load_experiment(write(tmp_path, GOOD)).name == "tiny"
    with pytest.raises(ExperimentError, match="no experiment 'nope'"):
        load_experiment("nope")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('paper = { "all" = 80.5, "attr" = "not reported" }', 'paper = { "all" = 80.5 }',
         "no paper number for column 'attr'"),
        ('"attr" = "not reported"', '"attr" = "n/a"', "must be a number or"),
        ('"attr" = "not reported" }', '"attr" = 1, "extra" = 2 }', "not a column"),
        ('system = "react"', 'sytem = "react"', "system is missing"),
        ('split = "exploration"', 'split = "explore"', "split 'explore' is not one of"),
        ('from = "explore"', 'from = "nowhere"', "names run 'nowhere'"),
        ('memory = "bank"', 'memory = "other"', "reads memory 'other'"),
        ('command = "build"', 'command = "bake"', "command 'bake' is not one of"),
        ('cell = "overall"', 'cell = "colour:red"', "the kind must be one of"),
        ('cell = "type:attribute"', 'cell = "type"', "needs an argument"),
        ('paper = "muse"', 'paper = "other"', "paper 'other' is not one of"),
        ('run = "muse"\n', 'run = "ghost"\n', "names run 'ghost'"),
        ("limit = 2", "limit = 0", "limit must be at least 1"),
        ('title = "A tiny', 'colour = "red"\ntitle = "A tiny', "unknown key 'colour'"),
        ('from = "explore"', 'from = "muse"', "cycle"),
        ("name = \"explore\"", "name = \"muse\"", "two runs are named 'muse'"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_one_line_naming_file_and_part(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ExperimentError) as caught:
        read_experiment(path)
    text = str(caught.value)
    assert message in text
    assert str(path) in text and "\n" not in text


def test_the_name_must_be_the_stem_and_toml_must_parse(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="must be the file's stem"):
        read_experiment(write(tmp_path, GOOD, name="other"))
    with pytest.raises(ExperimentError, match="not valid TOML"):
        read_experiment(write(tmp_path, GOOD + "\n[[run]\n"))
    with pytest.raises(ExperimentError, match="no such experiment file"):
        read_experiment(tmp_path / "missing.toml")


def test_stored_names_keep_prefixes_and_demo_runs_apart() -> None:
    assert stored_run_name("hammr-table3", "naive") == "hammr-table3.naive"
    assert stored_run_name("hammr-table3", "naive", prefix="qwen-") == "qwen-hammr-table3.naive"
    assert stored_run_name("t", "r", demo=True) == "demo.t.r"
