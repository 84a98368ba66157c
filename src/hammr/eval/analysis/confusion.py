"""The dispatcher's routing: which specialist it sent each question type to, and who decided
(its LLM, or a router such as the nearest-neighbour one)."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from rich import box
from rich.table import Table

from hammr.agents.catalog import AgentCatalog
from hammr.eval.analysis.common import md_row, pct, question_type_order
from hammr.eval.types import RunRecord
from hammr.terminal_text import safe_markup
from hammr.trace import Trace

NONE_CHOSEN = "(none)"
"""The column of questions the dispatcher answered without calling a specialist."""

LLM_DECIDED = "llm"
"""``decided_by`` of a dispatch the dispatcher's LLM made (the step has no ``router``)."""


# -- dispatcher confusion ------------------------------------------------------------------


@dataclass
class Confusion:
    """Question type -> the specialist the dispatcher called, with who made the decision.

    ``counts[(question_type, chosen, decided_by)]``: ``chosen`` is a specialist name or
    :data:`NONE_CHOSEN`; ``decided_by`` is :data:`LLM_DECIDED` when the dispatcher's LLM
    wrote the call, else the step's ``router`` ('neighbours', 'inputs', ...).
    """

    counts: Counter[tuple[str, str, str]]
    expected: dict[str, str]
    """question type -> its specialist (``AgentCatalog.by_question_type()``)."""
    specialists: list[str]
    dispatcher: str | None
    skipped: int = 0
    """Records left out: no trace, or a top trace that is not the dispatcher's."""

    # -- figures --------------------------------------------------------------------------

    @property
    def question_types(self) -> list[str]:
        return question_type_order(qt for qt, _, _ in self.counts)

    @property
    def chosen(self) -> list[str]:
        """The matrix's columns: the catalog's specialists, any other agent, then (none)."""
        seen = {c for _, c, _ in self.counts}
        others = sorted(seen - set(self.specialists) - {NONE_CHOSEN})
        return [*self.specialists, *others, NONE_CHOSEN]

    @property
    def deciders(self) -> list[str]:
        found = {d for _, _, d in self.counts}
        return sorted(found, key=lambda d: (d != LLM_DECIDED, d))

    def matrix(self, decided_by: str | None = None) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {qt: Counter() for qt in self.question_types}
        for (qt, chosen, by), n in self.counts.items():
            if decided_by is None or by == decided_by:
                out[qt][chosen] += n
        return out

    def _select(
        self, question_type: str | None, decided_by: str | None
    ) -> Iterator[tuple[str, str, int]]:
        for (qt, chosen, by), n in self.counts.items():
            if question_type is not None and qt != question_type:
                continue
            if decided_by is not None and by != decided_by:
                continue
            yield qt, chosen, n

    def total(self, question_type: str | None = None, decided_by: str | None = None) -> int:
        """Dispatched samples whose question type has a specialist (accuracy's denominator)."""
        return sum(n for qt, _, n in self._select(question_type, decided_by) if qt in self.expected)

    def correct(self, question_type: str | None = None, decided_by: str | None = None) -> int:
        return sum(
            n
            for qt, chosen, n in self._select(question_type, decided_by)
            if self.expected.get(qt) == chosen
        )

    def accuracy(
        self, question_type: str | None = None, decided_by: str | None = None
    ) -> float | None:
        """Share of samples sent to their type's specialist (None: no such samples).
        Questions answered without a specialist count as wrong; question types no
        specialist answers are left out."""
        n = self.total(question_type, decided_by)
        return self.correct(question_type, decided_by) / n if n else None

    def count(self, question_type: str | None = None, decided_by: str | None = None) -> int:
        """All samples counted (types without a specialist included)."""
        return sum(n for _, _, n in self._select(question_type, decided_by))

    # -- rendering ------------------------------------------------------------------------

    def _rows(
        self, mark: tuple[str, str], headers: Mapping[str, str]
    ) -> tuple[list[str], list[list[str]]]:
        cols = self.chosen
        head = ["question type", *(headers.get(c, c) for c in cols), "n", "accuracy"]
        head += [f"by {d}" for d in self.deciders]
        rows: list[list[str]] = []
        matrix = self.matrix()
        for qt in self.question_types:
            cells = []
            for c in cols:
                text = str(matrix[qt][c]) if matrix[qt][c] else "."
                if self.expected.get(qt) == c:
                    text = f"{mark[0]}{text}{mark[1]}"
                cells.append(text)
            row = [qt, *cells, str(self.count(qt)), pct(self.accuracy(qt))]
            row += [self._by(qt, d) for d in self.deciders]
            rows.append(row)
        totals = [str(sum(matrix[qt][c] for qt in matrix)) for c in cols]
        last = ["total", *totals, str(self.count()), pct(self.accuracy())]
        last += [self._by(None, d) for d in self.deciders]
        rows.append(last)
        return head, rows

    def _by(self, qt: str | None, decider: str) -> str:
        n = self.count(qt, decider)
        if not n:
            return "."
        return f"{n} ({pct(self.accuracy(qt, decider))})"

    def _legend(self, marked: str) -> str:
        who = ", ".join(f"by {d}: {_DECIDER_TEXT.get(d, d)}" for d in self.deciders)
        text = (
            "Rows: the question's type; columns: the specialist the dispatcher called first "
            f"({NONE_CHOSEN}: it answered without one); {marked} the expected specialist. "
            "accuracy: share sent to the expected specialist."
        )
        if who:
            text += f" Decided {who} - count (accuracy)."
        if self.skipped:
            text += f" {self.skipped} record(s) not dispatcher runs were left out."
        return text

    def to_rich(self) -> Table:
        """The matrix for a terminal: specialists as short codes (legend in the caption),
        the expected specialist's cell marked with '*'."""
        codes = _codes(self.chosen)
        # names and question types come from traces and datasets: shown as text, not markup
        codes = {c: safe_markup(code) for c, code in codes.items()}
        head, rows = self._rows(("[bold green]", "*[/]"), codes)
        head[0] = safe_markup(head[0])
        for r in rows:
            r[0] = safe_markup(r[0])
        legend = ", ".join(f"{codes[c]} = {safe_markup(c)}" for c in self.chosen if codes[c] != c)
        title = safe_markup(f"Dispatcher routing ({self.dispatcher or 'no dispatcher'})")
        table = Table(
            title=title,
            title_justify="left",
            caption=f"{legend}.\n{safe_markup(self._legend('* marks'))}",
            caption_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for i, h in enumerate(head):
            table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
        for i, r in enumerate(rows):
            table.add_row(*r, end_section=i == len(rows) - 2)
        return table

    def to_markdown(self) -> str:
        head, rows = self._rows(("**", "**"), {c: _short(c) for c in self.chosen})
        lines = [md_row(head), md_row(["---", *["---:"] * (len(head) - 1)])]
        lines += [md_row(r) for r in rows]
        return "\n".join(lines) + "\n\n" + self._legend("bold marks") + "\n"

    def to_csv(self) -> str:
        """One row per (question type, chosen, decided_by) with its count and whether it is
        the expected specialist - long form, for a spreadsheet's pivot table."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["question_type", "expected", "chosen", "decided_by", "count", "correct"])
        order = {c: i for i, c in enumerate(self.chosen)}
        types = {t: i for i, t in enumerate(self.question_types)}
        for (qt, chosen, by), n in sorted(
            self.counts.items(), key=lambda kv: (types[kv[0][0]], order[kv[0][1]], kv[0][2])
        ):
            exp = self.expected.get(qt, "")
            w.writerow([qt, exp, chosen, by, n, int(exp == chosen) if exp else ""])
        return buf.getvalue()


_DECIDER_TEXT = {
    LLM_DECIDED: "the dispatcher's LLM",
    "neighbours": "the nearest-neighbour router",
    "inputs": "the inputs (only one specialist takes them)",
}


def _short(agent: str) -> str:
    """An agent's name without 'Agent', its words split ('TwoHopEncyclopedicAgent' ->
    'Two Hop Encyclopedic')."""
    name = agent[: -len("Agent")] if agent.endswith("Agent") and agent != "Agent" else agent
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)


def _codes(agents: Sequence[str]) -> dict[str, str]:
    """Short column codes for a terminal: a short name as it is ('CountAgent' -> 'Count'),
    else the initials of its words ('TwoHopEncyclopedicAgent' -> 'THE'), numbered where
    two agents would share one."""
    initials = {a: "".join(w[0] for w in _short(a).split()).upper() for a in agents}
    taken = Counter(initials.values())
    seen: Counter[str] = Counter()
    out: dict[str, str] = {}
    for a in agents:
        code, plain = initials[a], _short(a).replace(" ", "")
        if a == NONE_CHOSEN:
            out[a] = a
        elif len(plain) <= 6:
            out[a] = plain
        elif taken[code] > 1:
            seen[code] += 1
            out[a] = f"{code}{seen[code]}"
        else:
            out[a] = code
    return out


def dispatched(trace: Trace, specialists: Iterable[str]) -> tuple[str, str]:
    """(specialist the dispatcher called, who decided) for one dispatcher trace.

    The first step whose tool is a specialist and whose call reached it (the specialist
    ran - it may have failed inside); calls the harness refused before the specialist ran
    (bad arguments, an unknown variable, a repeat) are attempts, not dispatches. Without
    one: (:data:`NONE_CHOSEN`, who decided the first step).
    """
    names = set(specialists)
    for step in trace.steps:
        if step.tool in names and (step.error_kind is None or step.child is not None):
            return step.tool, step.router or LLM_DECIDED
    first = trace.steps[0].router if trace.steps else None
    return NONE_CHOSEN, first or LLM_DECIDED


def dispatcher_confusion(
    records: Iterable[RunRecord], catalog: AgentCatalog, *, dispatcher: str | None = None
) -> Confusion:
    """Which specialist the dispatcher sent each question type to (see :func:`dispatched`).

    Only records whose top trace is the dispatcher's count (``dispatcher``: its name,
    default the catalog's); accuracy uses ``catalog.by_question_type()``.
    """
    specialists = [s.name for s in catalog.specialists]
    if dispatcher is None and catalog.dispatcher is not None:
        dispatcher = catalog.dispatcher.name
    counts: Counter[tuple[str, str, str]] = Counter()
    skipped = 0
    for rec in records:
        trace = rec.trace
        if not isinstance(trace, Trace) or dispatcher is None or trace.agent != dispatcher:
            skipped += 1
            continue
        chosen, by = dispatched(trace, specialists)
        counts[(rec.question_type or "(untyped)", chosen, by)] += 1
    return Confusion(
        counts=counts,
        expected=catalog.by_question_type(),
        specialists=specialists,
        dispatcher=dispatcher,
        skipped=skipped,
    )
