"""The experiment file's own checks (hammr.experiments.spec): every malformed file is one
line naming the file and the part, and the steps come in the order they need."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hammr.cli import main
from hammr.experiments import ExperimentError, load_experiment
from hammr.experiments.spec import (
    MemoryStep,
    Run,
    check_prefix,
    read_experiment,
    stored_run_name,
)

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
        ('"attr" = "not reported"', '"attr" = "n/a"', "must be a finite number or"),
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


@pytest.mark.parametrize("value", ["nan", "+nan", "-nan", "inf", "+inf", "-inf"])
def test_a_paper_number_that_is_not_finite_is_refused_naming_file_cell_and_value(
    tmp_path: Path, value: str
) -> None:
    """TOML reads nan and inf as floats; a paper reports neither (issue 26)."""
    path = write(tmp_path, GOOD.replace('"all" = 80.5', f'"all" = {value}', 1))
    with pytest.raises(ExperimentError) as caught:
        read_experiment(path)
    text = str(caught.value)
    shown = value.lstrip("+").replace("-nan", "nan")  # how Python writes the float back
    assert text == (
        f"{path} [[table]] 't2' row 'MuSEAgent': paper value for 'all' must be a finite number "
        f'or "not reported", got {shown}'
    )
    r = CliRunner().invoke(main, ["experiment", "show", str(path)], env={"HAMMR_CONFIG": ""})
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == f"hammr: error: {text}\n"


def test_the_name_must_be_the_stem_and_toml_must_parse(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="must be the file's stem"):
        read_experiment(write(tmp_path, GOOD, name="other"))
    with pytest.raises(ExperimentError, match="not valid TOML"):
        read_experiment(write(tmp_path, GOOD + "\n[[run]\n"))
    with pytest.raises(ExperimentError, match="no such experiment file"):
        read_experiment(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("old", "new", "part"),
    [
        ('name = "tiny"', 'name = "../../tiny"', "tiny.toml: name '../../tiny'"),
        ('name = "bank"', 'name = "a/b"', "[[memory]] #1: name 'a/b'"),
        ('name = "explore"', 'name = ".."', "[[run]] #2: name '..'"),
        ('name = "explore"', 'name = "x\\u001b]0;t\\u0007"', "[[run]] #2: name 'x\\x1b]0;t\\x07'"),
    ],
)  # fmt: skip
def test_a_name_that_would_reach_outside_the_store_folder_is_refused(
    tmp_path: Path, old: str, new: str, part: str
) -> None:
    """Names become stored run names and files beside the store (``<store>.experiments/``):
    a slash, ``..`` or a control character is refused where it is read."""
    with pytest.raises(ExperimentError) as caught:
        read_experiment(write(tmp_path, GOOD.replace(old, new, 1)))
    assert part in str(caught.value) and "may hold only letters, digits" in str(caught.value)


def test_prefixes_that_name_a_path_are_refused_and_plain_ones_kept() -> None:
    for bad in ("../../x/", "a/b", "..", "a b", "x\x1b[2J"):
        with pytest.raises(ExperimentError, match=r"--prefix .* may hold only"):
            check_prefix(bad)
    for good in ("", "qwen72b.", "run-2_a+b=c@d"):
        assert check_prefix(good) == good


def test_a_file_in_another_encoding_names_the_encoding_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_bytes(GOOD.encode("utf-16"))
    with pytest.raises(ExperimentError) as caught:
        read_experiment(path)
    assert str(caught.value) == (
        f"{path}: not UTF-8 text (UTF-16, byte 0xff on line 1); TOML files must be UTF-8, "
        "so save it as UTF-8"
    )
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert read_experiment(path).name == "tiny"


def test_stored_names_keep_prefixes_and_demo_runs_apart() -> None:
    assert stored_run_name("hammr-table3", "naive") == "hammr-table3.naive"
    assert stored_run_name("hammr-table3", "naive", prefix="qwen-") == "qwen-hammr-table3.naive"
    assert stored_run_name("t", "r", demo=True) == "demo.t.r"
