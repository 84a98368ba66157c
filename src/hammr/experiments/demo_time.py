"""How long a bundled experiment's first ``--demo`` run takes on the embedded model: measured
by ``benchmarks/demo_durations.py --write`` (benchmark (s)) into ``demo_durations.json``
beside this module, said by ``hammr experiment run --demo`` before a first run starts (once
answers are stored, each run's own forecast, :mod:`hammr.eval.duration`, says more) and
listed in docs/experiments.md."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

DURATIONS_FILE = Path(__file__).with_name("demo_durations.json")
"""Where benchmark (s) writes; read as package data."""


@dataclass(frozen=True)
class Measured:
    experiment: str
    seconds: float
    questions: int
    calls: int
    machine: str
    date: str
    failed: str = ""
    """The step that failed on the embedded default, as the command said it ('' if none)."""
    runs: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Per run (its name in the file): questions, calls, prompt_tokens and
    completion_tokens stored (what :mod:`hammr.experiments.cost` estimates from)."""

    def line(self) -> str:
        from hammr.eval.duration import spoken

        failed = f"; there, {self.failed}" if self.failed else ""
        return (
            f"expected: about {spoken(self.seconds)} on the embedded model (a first --demo run "
            f"of {self.experiment} took that on {self.machine}, {self.date}: {self.questions} "
            f"questions, {self.calls} model calls{failed}); a busy machine takes longer"
        )


def read_durations(text: str | None = None) -> dict[str, Measured]:
    """Every measured experiment by name, from ``text`` (default: the package's file);
    empty when it is missing or unreadable (a forecast is no reason to stop a run)."""
    try:
        if text is None:
            text = (
                resources.files("hammr.experiments")
                .joinpath(DURATIONS_FILE.name)
                .read_text(encoding="utf-8")
            )
        data = json.loads(text)
        machine, date = str(data["machine"]), str(data["date"])
        rows: Mapping[str, Any] = data["experiments"]
        return {
            name: Measured(
                name,
                float(r["seconds"]),
                int(r["questions"]),
                int(r["calls"]),
                machine,
                date,
                str(r.get("failed", "")),
                _runs(r.get("runs")),
            )
            for name, r in rows.items()
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _runs(value: Any) -> dict[str, dict[str, int]]:
    if not isinstance(value, Mapping):
        return {}
    return {
        str(run): {str(k): int(v) for k, v in figures.items() if isinstance(v, int)}
        for run, figures in value.items()
        if isinstance(figures, Mapping)
    }


DOCS_BEGIN = "<!-- demo-durations: generated from src/hammr/experiments/demo_durations.json -->"
DOCS_END = "<!-- /demo-durations -->"


def durations_table(durations: Mapping[str, Measured]) -> str:
    """The Markdown table docs/experiments.md shows between :data:`DOCS_BEGIN` and
    :data:`DOCS_END` (``benchmarks/demo_durations.py --write`` puts it there)."""
    lines = ["| experiment | a first `--demo` run | questions | model calls |", "|---|---|---|---|"]
    for name, m in sorted(durations.items()):
        failed = f" (exit 1: {m.failed})" if m.failed else ""
        lines.append(f"| `{name}` | {m.seconds / 60:.1f} min{failed} | {m.questions} | {m.calls} |")
    if durations:
        first = next(iter(durations.values()))
        lines += ["", f"Measured on {first.machine}, {first.date}."]
    return "\n".join(lines)


def with_durations_table(page: str, durations: Mapping[str, Measured]) -> str:
    """``page`` with the table between its markers replaced; ValueError without markers."""
    start, end = page.index(DOCS_BEGIN) + len(DOCS_BEGIN), page.index(DOCS_END)
    return page[:start] + "\n" + durations_table(durations) + "\n" + page[end:]


def on_embedded_default(config: Mapping[str, Any]) -> bool:
    """The configuration runs the shipped model in process (what the figures were made on)."""
    return config.get("llm.backend") == "embedded" and not config.get("llm.model_path")


def first_demo_forecast(experiment: str, config: Mapping[str, Any]) -> str | None:
    """The line ``hammr experiment run --demo`` prints before a first run, or None when the
    model is not the embedded default or the experiment was not measured."""
    if not on_embedded_default(config):
        return None
    measured = read_durations().get(experiment)
    return measured.line() if measured is not None else None


__all__ = [
    "DOCS_BEGIN",
    "DOCS_END",
    "DURATIONS_FILE",
    "Measured",
    "durations_table",
    "first_demo_forecast",
    "on_embedded_default",
    "read_durations",
    "with_durations_table",
]
