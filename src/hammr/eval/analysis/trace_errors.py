"""Error counts read off the traces: the automatic part of the error analysis.

Only the error kinds an agent recorded can be counted here (see :mod:`hammr.eval.analysis`
for the paper's three kinds). How the error kinds of :data:`hammr.tools.base.ErrorKind` are
grouped:

* :data:`FORMULATION_KINDS` - ``syntax``, ``unknown_tool``, ``unknown_variable`` and
  ``bad_arguments`` are the paper's examples word for word. ``no_action`` is there too: the
  model replied, but nothing in its reply parses as an [Act] or a [Finish] - it did not write
  its tool call in the required form, which is a syntax error of the [Act] step, not a
  mistake of its reasoning (a reply that reasons wrongly still contains an action). A
  [Finish] that is no answer (empty, the question or hammr's own instruction repeated: see
  :mod:`hammr.non_answers`) is recorded under it too.
* :data:`TOOL_FAILURE_KINDS` - ``tool_failure`` (a tool raised), ``capability_missing``
  (the tool has no backend configured, so it could not run) and ``llm_failure`` (the LLM
  backend itself failed: timeout, connection, server error). All three are components
  failing to give a result for a call the agent made correctly; none is the agent's
  reasoning or formulation. Their columns stay separate because the last two are usually a
  configuration or infrastructure problem worth fixing before any labelling.
* A step whose tool is an *agent* that ended without an answer is recorded as a
  ``tool_failure`` with the child's trace attached. Following the paper ("we dive into the
  agent itself to identify the root cause"), it is not counted as a tool failure of the
  caller but in its own column, ``agent_failed``; the root cause is counted in the child's
  row, where the child's own steps are walked.
* ``repeated_action`` (the harness refused a call identical to an earlier one) is a loop,
  and ``step_limit`` (a trace that ran out of steps) is counted per agent that ran out;
  both are symptoms rather than one of the three causes and are counted apart.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table

from hammr.eval.analysis.common import md_row, question_type_order
from hammr.eval.types import RunRecord
from hammr.terminal_text import safe_markup
from hammr.trace import Step, Trace

FORMULATION_KINDS: tuple[str, ...] = (
    "syntax",
    "no_action",
    "unknown_tool",
    "unknown_variable",
    "bad_arguments",
)
"""Error kinds that are the paper's 'tool call formulation' (see the module docstring)."""

TOOL_FAILURE_KINDS: tuple[str, ...] = ("tool_failure", "capability_missing", "llm_failure")
"""Error kinds that are the paper's 'tool failure' (see the module docstring)."""

AGENT_FAILED = "agent_failed"
STEP_LIMIT = "step_limit"
REPEATED_ACTION = "repeated_action"
FORMULATION_TOTAL = "formulation_total"
TOOL_FAILURE_TOTAL = "tool_failure_total"
TIMEOUT = "timeout"
"""Counted once per timed-out sample, for the agent whose step was in flight when the
evaluation's deadline ended the run (a symptom, like the step limit)."""
_CUT_SHORT = ("timeout", "cancelled")

COLUMNS: tuple[str, ...] = (
    *FORMULATION_KINDS,
    FORMULATION_TOTAL,
    *TOOL_FAILURE_KINDS,
    TOOL_FAILURE_TOTAL,
    AGENT_FAILED,
    REPEATED_ACTION,
    STEP_LIMIT,
    TIMEOUT,
)
"""The count columns of an :class:`ErrorTable`, in order (unknown kinds follow them)."""

_HEADERS: dict[str, str] = {
    "syntax": "syntax",
    "no_action": "no\nact",
    "unknown_tool": "unk.\ntool",
    "unknown_variable": "unk.\nvar",
    "bad_arguments": "bad\nargs",
    FORMULATION_TOTAL: "Σ\nformul.",
    "tool_failure": "tool\nfail",
    "capability_missing": "no\nbackend",
    "llm_failure": "LLM\nfail",
    TOOL_FAILURE_TOTAL: "Σ\ntool",
    AGENT_FAILED: "agent\nfail",
    REPEATED_ACTION: "repeat",
    STEP_LIMIT: "step\nlimit",
    TIMEOUT: "time\nout",
}

# -- walking traces ------------------------------------------------------------------------


def _walk(trace: Trace) -> Iterator[Trace]:
    """The trace and every child trace under it, parents first."""
    yield trace
    for step in trace.steps:
        if step.child is not None:
            yield from _walk(step.child)


def _inherited_status(trace: Trace) -> bool:
    """Whether the trace's status was copied from a child: a router-made step called the
    specialist, which failed, and the routed dispatcher took over its status."""
    if not trace.steps:
        return False
    last = trace.steps[-1]
    return last.router is not None and last.child is not None and last.child.status == trace.status


def _hit_step_limit(trace: Trace) -> bool:
    own = trace.status == STEP_LIMIT and not _inherited_status(trace)
    return own or any(s.error_kind == STEP_LIMIT for s in trace.steps)


def _timed_out_here(trace: Trace) -> bool:
    """Whether the deadline ended this run while its own step (not a child's) was in flight."""
    if trace.status not in _CUT_SHORT:
        return False
    last = trace.steps[-1] if trace.steps else None
    return last is None or last.child is None or last.child.status not in _CUT_SHORT


def _step_kind(step: Step) -> str | None:
    """The column a step's error is counted in (None: no error, or one counted per trace)."""
    kind = step.error_kind
    if not kind or kind == STEP_LIMIT:
        return None
    if kind == "tool_failure" and step.child is not None:
        return AGENT_FAILED
    return kind


# -- automatic error counts ----------------------------------------------------------------


@dataclass
class ErrorRow:
    """Error counts of one agent, one question type, or everything."""

    name: str
    runs: int = 0
    """Agent rows: how many times the agent ran (its traces, child runs included); question
    type rows and the total: how many samples (records with a trace)."""
    steps: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def value(self, column: str) -> int:
        if column == FORMULATION_TOTAL:
            return sum(self.counts[k] for k in FORMULATION_KINDS)
        if column == TOOL_FAILURE_TOTAL:
            return sum(self.counts[k] for k in TOOL_FAILURE_KINDS)
        return self.counts[column]

    def add(self, other: ErrorRow) -> None:
        self.runs += other.runs
        self.steps += other.steps
        self.counts.update(other.counts)


@dataclass
class ErrorTable:
    """What :func:`error_counts` found: one row per agent, one per question type, totals."""

    by_agent: dict[str, ErrorRow]
    by_type: dict[str, ErrorRow]
    total: ErrorRow
    no_trace: Counter[str] = field(default_factory=Counter)
    """Records without a trace, by their status ('timeout', 'error', ...)."""

    @property
    def columns(self) -> tuple[str, ...]:
        extra = sorted(set(self.total.counts) - set(COLUMNS))
        return (*COLUMNS, *extra)

    def agent_total(self) -> ErrorRow:
        row = ErrorRow("total")
        for r in self.by_agent.values():
            row.add(r)
        return row

    def sections(self) -> list[tuple[str, str, list[ErrorRow]]]:
        """(key, title, rows with their total last) for the agent and the question type tables."""
        return [
            ("agent", "Errors by agent (the agent that made the step)", self._agent_rows()),
            ("question_type", "Errors by question type", [*self.by_type.values(), self.total]),
        ]

    def _agent_rows(self) -> list[ErrorRow]:
        return [*self.by_agent.values(), self.agent_total()]

    def _note(self) -> str:
        text = (
            "Σ formul. (tool call formulation) = syntax + no act + unk. tool + unk. var + bad "
            "args; Σ tool (tool failure) = tool fail + no backend + LLM fail; agent fail: an "
            "agent called as a tool ended without an answer (the cause is in that agent's "
            "row); step limit: traces that ran out of steps."
        )
        if self.no_trace:
            parts = ", ".join(f"{s}: {n}" for s, n in sorted(self.no_trace.items()))
            text += f" {sum(self.no_trace.values())} record(s) without a trace ({parts})."
        return text

    def to_rich(self) -> Group:
        parts: list[RenderableType] = []
        for key, title, rows in self.sections():
            first = "agent" if key == "agent" else "question type"
            table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
            table.add_column(first, no_wrap=True)
            table.add_column("runs" if key == "agent" else "samples", justify="right")
            table.add_column("steps", justify="right")
            for c in self.columns:
                table.add_column(_HEADERS.get(c, c), justify="right", no_wrap=True)
            for i, r in enumerate(rows):
                last = i == len(rows) - 1
                cells = [str(r.value(c)) for c in self.columns]
                table.add_row(
                    safe_markup(r.name),  # an agent's or a dataset's name: text, not markup
                    str(r.runs),
                    str(r.steps),
                    *cells,
                    end_section=i == len(rows) - 2,
                    style="bold" if last else None,
                )
            parts.append(table)
        parts.append(self._note())
        return Group(*parts)

    def to_markdown(self) -> str:
        out: list[str] = []
        for key, title, rows in self.sections():
            first = "agent" if key == "agent" else "question type"
            head = [first, "runs" if key == "agent" else "samples", "steps", *self.columns]
            out.append(f"**{title}**\n")
            out.append(md_row(head))
            out.append(md_row(["---", *["---:"] * (len(head) - 1)]))
            for r in rows:
                name = f"**{r.name}**" if r is rows[-1] else r.name
                out.append(
                    md_row(
                        [name, str(r.runs), str(r.steps), *(str(r.value(c)) for c in self.columns)]
                    )
                )
            out.append("")
        out.append(self._note() + "\n")
        return "\n".join(out).rstrip() + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["group", "name", "runs", "steps", *self.columns])
        for key, _, rows in self.sections():
            for r in rows:
                w.writerow([key, r.name, r.runs, r.steps, *(r.value(c) for c in self.columns)])
        return buf.getvalue()


def error_counts(records: Iterable[RunRecord]) -> ErrorTable:
    """Count the errors the agents recorded in the records' traces.

    Every step is counted for the agent that made it (child traces are walked, so a
    specialist's errors count for the specialist, not for the dispatcher that called it)
    and for the record's question type. A trace that ran out of steps counts one
    ``step_limit`` for its own agent; a routed dispatcher that only passes its specialist's
    step limit on does not count it again. See the module docstring for the groups.
    """
    by_agent: dict[str, ErrorRow] = {}
    by_type: dict[str, ErrorRow] = {}
    total = ErrorRow("total")
    no_trace: Counter[str] = Counter()
    for rec in records:
        trace = rec.trace
        if not isinstance(trace, Trace):
            no_trace[rec.status or "unknown"] += 1
            continue
        qt = rec.question_type or "(untyped)"
        trow = by_type.setdefault(qt, ErrorRow(qt))
        rec_row = ErrorRow(qt, runs=1)
        for t in _walk(trace):
            arow = by_agent.setdefault(t.agent, ErrorRow(t.agent))
            arow.runs += 1
            arow.steps += len(t.steps)
            rec_row.steps += len(t.steps)
            found: Counter[str] = Counter()
            for step in t.steps:
                kind = _step_kind(step)
                if kind is not None:
                    found[kind] += 1
            if _hit_step_limit(t):
                found[STEP_LIMIT] += 1
            if _timed_out_here(t):
                found[TIMEOUT] += 1
            arow.counts.update(found)
            rec_row.counts.update(found)
        trow.add(rec_row)
        total.add(rec_row)
    return ErrorTable(
        by_agent=dict(sorted(by_agent.items())),
        by_type={t: by_type[t] for t in question_type_order(by_type)},
        total=total,
        no_trace=no_trace,
    )
