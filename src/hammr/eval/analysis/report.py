"""The automatic part of the error analysis as one plain-text report."""

from __future__ import annotations

import io
from collections.abc import Iterable

from hammr.agents.catalog import AgentCatalog
from hammr.eval.analysis.confusion import dispatcher_confusion
from hammr.eval.analysis.trace_errors import error_counts
from hammr.eval.types import RunRecord
from hammr.terminal_text import safe_console, safe_markup, safe_text


def errors_report(records: Iterable[RunRecord], catalog: AgentCatalog, *, width: int = 160) -> str:
    """The automatic part of the error analysis as plain text: per run, the error counts,
    then the dispatcher's routing (when the run holds dispatcher runs)."""
    recs = list(records)
    console = safe_console(
        file=io.StringIO(), width=width, color_system=None, force_terminal=False, record=True
    )
    runs = sorted({r.run for r in recs})
    if not runs:
        console.print("Error analysis: no records.")
    for i, run in enumerate(runs):
        mine = [r for r in recs if r.run == run]
        if i:
            console.print()
        console.print(safe_markup(f"Error analysis of run {run} ({len(mine)} record(s))"))
        console.print()
        console.print(error_counts(mine).to_rich())
        console.print()
        confusion = dispatcher_confusion(mine, catalog)
        if confusion.counts:
            console.print(confusion.to_rich())
        else:
            who = confusion.dispatcher or "the catalog has no dispatcher"
            console.print(
                safe_markup(f"Dispatcher routing: no dispatcher runs in these records ({who}).")
            )
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    return safe_text(text)  # names, question types and errors are files' and models' text
