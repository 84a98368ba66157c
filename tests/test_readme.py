"""The README's first commands are what a newcomer types; CI must run the same test command."""

from __future__ import annotations

from conftest import ROOT


def readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    return [ln.strip() for ln in lines[:6] if ln.startswith("    ")]


def test_readme_starts_with_the_two_commands() -> None:
    run, test = readme_commands()[:2]
    assert run.startswith("bash scripts/setup.sh && .venv/bin/hammr ask examples/")
    assert "pytest" in test
    image = run.split("hammr ask ", 1)[1].split()[0]
    assert (ROOT / image).is_file()


def test_ci_runs_the_readme_test_command() -> None:
    test = readme_commands()[1]
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test in ci
