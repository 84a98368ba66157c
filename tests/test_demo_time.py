"""The measured durations of the bundled experiments' --demo runs: what `experiment run
--demo` says before a first run, and docs/experiments.md's table (both from one file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hammr.experiments import bundled_names
from hammr.experiments.demo_time import (
    DOCS_BEGIN,
    DOCS_END,
    Measured,
    durations_table,
    first_demo_forecast,
    read_durations,
    with_durations_table,
)

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = {"llm.backend": "embedded", "llm.model_path": ""}


def test_every_bundled_experiment_was_measured() -> None:
    measured = read_durations()
    assert sorted(measured) == sorted(bundled_names())
    for m in measured.values():
        assert m.seconds > 0 and m.questions > 0 and m.calls > 0


def test_the_docs_table_is_the_measured_file() -> None:
    page = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    assert with_durations_table(page, read_durations()) == page, (
        "docs/experiments.md's durations differ from demo_durations.json: run "
        "benchmarks/demo_durations.py --write, or put the table from durations_table() there"
    )
    shown = page[page.index(DOCS_BEGIN) : page.index(DOCS_END)]
    assert "| `hammr-table3` |" in shown and "min |" in shown


def test_the_forecast_is_for_the_embedded_default_only() -> None:
    line = first_demo_forecast("hammr-table3", EMBEDDED)
    assert line is not None and line.startswith("expected: about ")
    assert "on the embedded model" in line and "hammr-table3" in line
    assert first_demo_forecast("hammr-table3", {**EMBEDDED, "llm.model_path": "/m.gguf"}) is None
    assert first_demo_forecast("hammr-table3", {"llm.backend": "openai"}) is None
    assert first_demo_forecast("no-such-experiment", EMBEDDED) is None


@pytest.mark.parametrize("text", ["", "{", '{"machine": "m"}', '{"experiments": 3}', "[]"])
def test_an_unreadable_durations_file_forecasts_nothing(text: str) -> None:
    assert read_durations(text) == {}


def test_the_table_says_minutes_and_where_it_was_measured() -> None:
    rows = {"b": Measured("b", 90, 4, 20, "a 2-core machine", "2026-11-28")}
    table = durations_table(rows)
    assert "| `b` | 1.5 min | 4 | 20 |" in table
    assert table.endswith("Measured on a 2-core machine, 2026-11-28.")
    page = f"intro\n{DOCS_BEGIN}\nold\n{DOCS_END}\nrest"
    assert with_durations_table(page, rows) == f"intro\n{DOCS_BEGIN}\n{table}\n{DOCS_END}\nrest"
    with pytest.raises(ValueError):
        with_durations_table("no markers", rows)
    failed = Measured("c", 60, 8, 30, "m", "d", "run vlm: failed: no VQA backend")
    assert "| `c` | 1.0 min (exit 1: run vlm: failed: no VQA backend) | 8 | 30 |" in (
        durations_table({"c": failed})
    )
    assert "; there, run vlm: failed: no VQA backend)" in failed.line()
