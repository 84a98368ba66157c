"""The bad-input probe (scripts/probe_bad_inputs.py) is the gate for new commands: every leaf
command of `hammr --help` has cases for a missing file, a folder, a FIFO, a zero-byte file, a
full disk, a read-only folder and hostile text, or says in the probe's NOT_APPLICABLE why one
cannot apply. These tests read the probe's catalogue; they run no case."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

from hammr.cli import main

PROBE = Path(__file__).resolve().parent.parent / "scripts" / "probe_bad_inputs.py"


def load_probe() -> ModuleType:
    """scripts/ is not a package: load the probe from its file."""
    spec = importlib.util.spec_from_file_location("probe_bad_inputs", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


probe = load_probe()


def leaves(command: click.Command, path: tuple[str, ...] = ()) -> list[str]:
    """The leaf commands of `hammr --help`, as typed, walked here apart from the probe's own
    walk (a group's subcommands, hidden ones included)."""
    if not isinstance(command, click.Group):
        return [" ".join(path)]
    ctx = click.Context(command)
    found: list[str] = []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        assert sub is not None, f"{' '.join((*path, name))} is listed but cannot be loaded"
        found += leaves(sub, (*path, name))
    return found


COMMANDS = leaves(main)


@pytest.fixture(scope="module")
def cases() -> list[object]:
    return probe.catalogue()


def test_the_walk_finds_groups_and_their_subcommands() -> None:
    assert "ask" in COMMANDS
    assert "experiment run" in COMMANDS
    assert "experiment" not in COMMANDS  # a group is not a leaf
    assert sorted(probe.leaf_commands()) == sorted(COMMANDS)


def test_every_command_has_a_case_or_a_reason_for_every_category(cases: list[object]) -> None:
    problems = probe.coverage_problems(COMMANDS, cases)
    assert problems == [], "\n".join(problems)


def test_not_applicable_names_real_commands_and_categories_with_reasons() -> None:
    for (command, category), reason in probe.NOT_APPLICABLE.items():
        assert command in COMMANDS, f"NOT_APPLICABLE names {command!r}, not a command"
        assert category in probe.CATEGORIES, f"NOT_APPLICABLE names {category!r}"
        assert reason.strip(), f"({command}, {category}) has no reason"


def test_every_case_runs_a_real_command_and_categories_are_known(cases: list[object]) -> None:
    for case in cases:
        assert probe.command_of(case, COMMANDS) is not None, case.name
        assert case.category is None or case.category in probe.CATEGORIES, case.name
    assert len({case.name for case in cases}) == len(cases), "two cases share a name"


def test_a_new_command_without_cases_is_reported(cases: list[object]) -> None:
    problems = probe.coverage_problems([*COMMANDS, "frobnicate"], cases)
    assert sorted(problems) == sorted(
        f"frobnicate x {category}: no case, and not declared in NOT_APPLICABLE"
        for category in probe.CATEGORIES
    )


def test_a_new_subcommand_of_a_group_without_cases_is_reported(cases: list[object]) -> None:
    problems = probe.coverage_problems([*COMMANDS, "memory frobnicate"], cases)
    assert len(problems) == len(probe.CATEGORIES)
    assert all(p.startswith("memory frobnicate x ") for p in problems)


def test_a_reason_for_a_command_that_does_not_exist_is_reported(cases: list[object]) -> None:
    na = {**probe.NOT_APPLICABLE, ("gone", "fifo"): "was removed"}
    problems = probe.coverage_problems(COMMANDS, cases, na)
    assert problems == ["NOT_APPLICABLE names 'gone', not a command of hammr --help"]


def test_a_reason_for_a_covered_cell_is_reported(cases: list[object]) -> None:
    na = {**probe.NOT_APPLICABLE, ("ask", "missing"): "it needs no file"}
    problems = probe.coverage_problems(COMMANDS, cases, na)
    assert len(problems) == 1 and problems[0].startswith("ask x missing: declared not applicable")


def test_a_category_is_derived_only_where_the_case_says_so() -> None:
    case = probe.Case

    def category(name: str, **kw: object) -> object:
        return probe.category_of(case(name, ("runs",), "ok", **kw))

    assert category("report: --out in a missing folder (made)") is None
    assert category("explain: mevqa, empty data folder") is None
    assert category("runs: --store is a folder") == "folder"
    assert category("runs: missing --store") == "missing"
    assert category("runs: --store a FIFO") == "fifo"
    assert category("runs: zero-byte --store") == "zero-byte"
    assert category("runs: stdout", stdout_to="/dev/full") == "full-disk"
    assert category("runs: x", read_only=("{w}/ro",)) == "read-only"
    assert category("runs: x", no_escapes=True) == "hostile"
    assert category("runs: a FIFO", category="missing") == "missing"


def test_hostile_cases_check_for_escapes_and_carry_hostile_text(cases: list[object]) -> None:
    for case in cases:
        if case.category == "hostile":
            assert case.no_escapes, case.name


def test_the_terminal_check_sees_escapes_c1_bidi_half_stripped_and_obeyed_markup() -> None:
    check = probe.terminal_problems
    assert check("plain text\n\ttab\r\n", "stdout") == []
    assert check(f"shown {probe.MARKUP}", "stdout") == []
    assert check("\x1b[2J", "stdout")
    assert check("\x9b31m", "stderr")
    assert check("\u202eevil", "stdout")
    assert check("]0;pwned", "stdout")  # the ESC stripped, the sequence left
    assert check("HOSTILEy", "stdout")  # [link=...]y[/link] obeyed


def test_the_table_shows_clean_over_total_and_not_applicable() -> None:
    text = probe.table(["ask", "experiment list"], {("ask", "fifo"): (1, 2)})
    lines = text.splitlines()
    assert lines[0].split() == ["command", *probe.CATEGORIES]
    assert "1/2" in lines[1]
    assert "n/a" in lines[2]
