"""An experiment report (:mod:`hammr.experiments.report`) as text: :func:`render_rich` for
the terminal (three lines per row: ours with its CI, the paper's number, the difference;
reasons as numbered footnotes; deviations under each table), :func:`render_csv` (one row per
cell) and :func:`render_html` (a self-contained page whose numbers link to their runs in
``hammr view``, with the figures of :mod:`hammr.experiments.figures`).
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from hammr.experiments.report import (
    DEFAULT_VIEWER,
    CellResult,
    ExperimentReport,
    TableResult,
    shown_cell,
)
from hammr.experiments.spec import NOT_REPORTED, Table

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.table import Table as RichTable

# --- rendering ----------------------------------------------------------------------------------


PAPER_SHORT = "n.r."
"""What the terminal writes where the paper reports no number (the notes say so)."""
_MARKS: dict[str, str] = {"not_run": "—", "no_data": "—", "failed": "—"}
"""What an empty cell says in a table, by status: '—' where the row's run has nothing to show
(not run, no data, failed), 'n/a' where the run is there but this cell cannot be filled. The
reason goes under the table as a numbered footnote (:func:`table_footnotes`); the mark stays
short so the columns stay narrow and the row labels keep their room."""
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(n: int) -> str:
    """``n`` in superscript digits (the footnote mark of a cell)."""
    return str(n).translate(_SUPERSCRIPT)


def footnote_text(c: CellResult) -> str | None:
    """What a cell's footnote says (None: the cell needs none). A run that is not finished
    (not run, no data, failed, stopped part way) is named by its stored name, so every cell
    of its row shares one footnote and the reader knows which run to look at."""
    if c.status == "ok":
        return None
    reason = c.reason or c.status.replace("_", " ")
    if c.status in ("not_run", "no_data", "failed", "partial"):
        return f"run {c.stored_as}: {reason}"
    return reason


@dataclass(frozen=True)
class Footnotes:
    """A table's footnotes: each distinct reason once, numbered from 1 in reading order,
    and per cell (row, column index) the number it carries."""

    texts: list[str]
    marks: dict[tuple[int, int], int]

    def of(self, row: int, column: int) -> int | None:
        return self.marks.get((row, column))


def table_footnotes(table: TableResult) -> Footnotes:
    """Number the reasons of ``table``'s cells that need one: the same reason gets the same
    number wherever it stands."""
    numbers: dict[str, int] = {}
    marks: dict[tuple[int, int], int] = {}
    for i, cells in enumerate(table.cells):
        for j, c in enumerate(cells):
            text = footnote_text(c)
            if text is None:
                continue
            marks[(i, j)] = numbers.setdefault(text, len(numbers) + 1)
    return Footnotes(list(numbers), marks)


def cell_mark(c: CellResult) -> str:
    """An empty cell's short mark ('—': the run has nothing to show, 'n/a': this cell)."""
    return _MARKS.get(c.status, "n/a")


def column_unit(report: ExperimentReport, table: Table, index: int) -> str:
    """' (steps)' for a column of step counts whose label does not say so, else '' (scores
    are in percent)."""
    column = table.columns[index]
    cell = shown_cell(report.experiment, column.cell, report.demo)
    return " (steps)" if cell.kind == "steps" and "step" not in column.label.lower() else ""


LABEL_KEEP = 18
"""How wide the row labels stay, at most, when the table must narrow to fit the terminal:
number columns give up their room (their headers fold) before the labels go below this."""


def fit_widths(
    naturals: Sequence[int], words: Sequence[int], floors: Sequence[int], budget: int
) -> list[int] | None:
    """Content widths of a table's columns (the row labels first) that fit ``budget``
    characters, or None when the natural widths already fit.

    Rich would shrink the widest column first, which is the labels, folding them into pieces
    while number columns keep room they do not need. Here the labels keep up to
    :data:`LABEL_KEEP`; then the widest number column gives up one character at a time, first
    down to its longest word (``words``: a header wraps between words), then the labels down
    to their longest word, then number columns down to ``floors`` (the longest word of their
    cells: a header folds inside a word), and last the labels down to 6."""
    if sum(naturals) <= budget:
        return None
    widths = list(naturals)
    widths[0] = min(widths[0], max(LABEL_KEEP, words[0]))

    def shrink(columns: range, limit: Sequence[int]) -> bool:
        while sum(widths) > budget:
            spare = [j for j in columns if widths[j] > limit[j]]
            if not spare:
                return False
            widths[max(spare, key=lambda k: widths[k])] -= 1
        return True

    numbers = range(1, len(widths))
    label = range(0, 1)
    if shrink(numbers, words) or shrink(label, words) or shrink(numbers, floors):
        return widths
    shrink(label, [6] * len(widths))
    return widths


class _FittedTable:
    """A table built for the width it is printed at (:func:`fit_widths`)."""

    def __init__(
        self,
        build: Callable[[Sequence[int] | None], RichTable],
        naturals: Sequence[int],
        words: Sequence[int],
        floors: Sequence[int],
    ) -> None:
        self.build, self.naturals, self.words, self.floors = build, naturals, words, floors

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RichTable]:
        gaps = 2 * (len(self.naturals) - 1)  # a separator and a pad before each number column
        budget = options.max_width - gaps
        yield self.build(fit_widths(self.naturals, self.words, self.floors, budget))


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def render_rich(report: ExperimentReport) -> list[RenderableType]:
    """The tables for the terminal. Each row of the file is three lines: the row's label with
    ours (± half the CI), 'paper' with the paper's numbers ('n.r.': not reported), and 'Δ'
    with ours minus the paper's (left out where no cell has both). An empty cell holds a
    short mark and a footnote number; the reasons follow the table, each once, then the
    deviations. Headers and labels wrap rather than being cut, and the columns are fitted to
    the terminal's width (:func:`fit_widths`). Stored text is never read as markup, and
    every text from the experiment file or the store (titles, labels, notes, reasons,
    deviations, a stored model's name) goes through :mod:`hammr.terminal_text` first."""
    from rich.text import Text

    from hammr.terminal_text import safe_markup, safe_text

    e = report.experiment
    out: list[RenderableType] = []
    head = f"[bold]{safe_markup(e.title)}[/bold]  ({safe_markup(e.source)})"
    if report.demo:
        head += "  [yellow]demo data[/yellow]"
    out.append(Text.from_markup(head))
    for t in report.tables:
        out.append(_table(report, t))
        notes = table_footnotes(t)
        if notes.texts:
            out.append(_hanging([(superscript(n), text) for n, text in enumerate(notes.texts, 1)]))
        if t.deviations:
            out.append(Text.from_markup("[bold]Deviations from the paper[/bold]"))
            out.append(_hanging([("•", d) for d in t.deviations], indent=2))
    out += [Text(safe_text(n), style="dim") for n in report.notes]
    return out


def _table(report: ExperimentReport, t: TableResult) -> _FittedTable:
    """One table for the terminal: three lines per row of the file (see :func:`render_rich`)."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    from hammr.terminal_text import safe_line, safe_text

    notes = table_footnotes(t)
    headers = [
        safe_line(column.label) + column_unit(report, t.table, j)
        for j, column in enumerate(t.table.columns)
    ]
    lines: list[tuple[Text, list[Text], str]] = []  # (label, cells, what the line is)
    for i, (row, cells) in enumerate(zip(t.table.rows, t.cells, strict=True)):
        ours, paper, diff = [], [], []
        for j, c in enumerate(cells):
            number = notes.of(i, j)
            mark = Text(superscript(number) if number is not None else "", style="dim")
            if c.filled:
                ours.append(Text(c.ours_text(), style="bold") + mark)
            else:
                ours.append(Text(cell_mark(c), style="italic") + mark)
            paper.append(Text(PAPER_SHORT if c.paper is None else c.paper_text()))
            diff.append(Text(c.diff_text()))
        lines.append((Text(safe_line(row.label), style="bold"), ours, "ours"))
        lines.append((Text("  paper"), paper, "paper"))
        if any(d.plain for d in diff):
            lines.append((Text("  Δ"), diff, "diff"))
    naturals = [max([len(label.plain) for label, _, _ in lines] + [1])]
    floors = [max([_longest_word(label.plain) for label, _, _ in lines] + [1])]
    words = [min(floors[0], 28)]
    for j, header in enumerate(headers):
        texts = [cells[j].plain for _, cells, _ in lines]
        naturals.append(max([len(header)] + [len(x) for x in texts]))
        floors.append(max([1] + [_longest_word(x) for x in texts]))
        words.append(max(floors[-1], _longest_word(header)))
    naturals[0] = min(naturals[0], 28)

    def build(widths: Sequence[int] | None) -> RichTable:
        rt = RichTable(
            title=Text(safe_line(f"{t.table.title} — {t.table.source}")),
            title_justify="left",
            caption=Text(safe_text(t.table.note)) if t.table.note else None,
            caption_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 0, 0, 1),
        )
        rt.add_column("", overflow="fold", width=widths[0] if widths else None, max_width=28)
        for j, header in enumerate(headers, start=1):
            rt.add_column(
                Text(header),
                justify="right",
                overflow="fold",
                width=widths[j] if widths else None,
            )
        for k, (label, cells, kind) in enumerate(lines):
            last_of_row = k + 1 == len(lines) or lines[k + 1][2] == "ours"
            rt.add_row(
                label,
                *cells,
                style="dim" if kind == "paper" else None,
                end_section=last_of_row and k + 1 < len(lines),
            )
        return rt

    return _FittedTable(build, naturals, words, floors)


def _hanging(lines: Sequence[tuple[str, str]], *, indent: int = 0) -> RenderableType:
    """``(mark, text)`` lines with the text wrapped under itself, not under the mark; the
    text is plain (never read as markup) and made safe for a terminal (a footnote quotes a
    stored reason, a deviation the file or a stored model's name)."""
    from rich.padding import Padding
    from rich.table import Table as RichTable
    from rich.text import Text

    from hammr.terminal_text import safe_text

    grid = RichTable.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for mark, text in lines:
        grid.add_row(Text(safe_text(mark)), Text(safe_text(text)))
    return Padding(grid, (0, 0, 0, indent)) if indent else grid


CSV_COLUMNS = (
    "table", "row", "column", "ours", "ci", "paper", "diff", "n", "status", "reason",
    "cell", "run", "unit",
)  # fmt: skip


def render_csv(report: ExperimentReport) -> str:
    """One row per cell (:data:`CSV_COLUMNS`); numbers in the cell's unit (percent for
    scores), empty where there is none; paper 'not reported' where the paper has none."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def num(v: float | None) -> str:
        return "" if v is None else f"{v:.2f}"

    for c in report.cells():
        w.writerow(
            [
                c.table,
                c.row,
                c.column,
                num(c.value),
                num(c.ci),
                NOT_REPORTED if c.paper is None else f"{c.paper:g}",
                num(c.diff),
                c.n,
                c.status,
                c.reason,
                c.cell,
                c.stored_as,
                c.unit,
            ]
        )
    return buf.getvalue()


HTML_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1f2937; margin: 24px; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; }
table.exp { border-collapse: collapse; margin: 8px 0; }
table.exp th, table.exp td { border: 1px solid #d1d5db; padding: 4px 10px; vertical-align: top; }
table.exp td { text-align: right; font-variant-numeric: tabular-nums; }
table.exp .paper { color: #6b7280; font-size: 12px; }
table.exp .reason { color: #92400e; font-style: italic; font-size: 12px; }
.deviations li, .notes li { margin: 2px 0; } .muted { color: #6b7280; }
.notes { font-size: 12px; color: #92400e; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0 14px; }
"""


def run_link(viewer: str, stored: str) -> str:
    """The viewer's address of a stored run (``hammr view``'s ``#/run/NAME``)."""
    return f"{viewer}#/run/{quote(stored, safe='')}"


def render_html(
    report: ExperimentReport,
    *,
    figures: Sequence[str] = (),
    viewer: str = DEFAULT_VIEWER,
) -> str:
    """A self-contained page: every table (our cells link to their runs in the viewer at
    ``viewer``), its deviations, then ``figures`` (HTML fragments, pictures inlined)."""
    e = html.escape
    x = report.experiment
    store = f" --store {report.store_path}" if report.store_path is not None else ""
    out = [
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(x.name)}</title><style>{HTML_CSS}</style></head><body>",
        f"<h1>{e(x.title)}</h1>",
        f'<p class="muted">{e(x.source)} · experiment {e(x.name)}'
        + (" · <b>demo data</b>" if report.demo else "")
        + "</p>",
    ]
    if x.description:
        out.append(f"<p>{e(x.description)}</p>")
    out.append(
        f'<p class="muted">Each of our numbers links to its run in the viewer at {e(viewer)} '
        f"(start it with <code>hammr view{e(store)} --port 8765</code>).</p>"
    )
    for t in report.tables:
        out.append(f'<h2 id="table-{e(t.table.name)}">{e(t.table.title)}</h2>')
        out.append(f'<p class="muted">{e(t.table.source)}</p>')
        head = "".join(
            f"<th>{e(c.label + column_unit(report, t.table, j))}</th>"
            for j, c in enumerate(t.table.columns)
        )
        out += ['<table class="exp">', f"<thead><tr><th></th>{head}</tr></thead><tbody>"]
        notes = table_footnotes(t)
        for i, (row, cells) in enumerate(zip(t.table.rows, t.cells, strict=True)):
            tds = []
            for j, c in enumerate(cells):
                number = notes.of(i, j)
                sup = (
                    f'<sup><a href="#note-{e(t.table.name)}-{number}">{number}</a></sup>'
                    if number is not None
                    else ""
                )
                if c.filled:
                    ours = f'<a href="{e(run_link(viewer, c.stored_as))}">{e(c.ours_text())}</a>'
                    extra = f"paper {e(c.paper_text())}"
                    if c.diff is not None:
                        extra += f" · Δ {e(c.diff_text())}"
                    body = f'{ours}{sup}<div class="paper">{extra}</div>'
                else:
                    body = (
                        f'<div class="reason">{e(cell_mark(c))}{sup}</div>'
                        f'<div class="paper">paper {e(c.paper_text())}</div>'
                    )
                title = f"{c.cell} of {c.stored_as}, n={c.n}"
                if c.reason:
                    title += f": {c.reason}"
                tds.append(f'<td title="{e(title)}">{body}</td>')
            out.append(f"<tr><th>{e(row.label)}</th>{''.join(tds)}</tr>")
        out.append("</tbody></table>")
        if t.table.note:
            out.append(f'<p class="muted">{e(t.table.note)}</p>')
        if notes.texts:
            out.append('<ol class="notes">')
            out += [
                f'<li id="note-{e(t.table.name)}-{n}">{e(text)}</li>'
                for n, text in enumerate(notes.texts, 1)
            ]
            out.append("</ol>")
        if t.deviations:
            out.append('<p><b>Deviations from the paper</b></p><ul class="deviations">')
            out += [f"<li>{e(d)}</li>" for d in t.deviations]
            out.append("</ul>")
    out += [f'<p class="muted">{e(n)}</p>' for n in report.notes]
    out += list(figures)
    out.append("</body></html>\n")
    return "\n".join(out)


__all__ = [
    "CSV_COLUMNS",
    "PAPER_SHORT",
    "Footnotes",
    "cell_mark",
    "column_unit",
    "footnote_text",
    "render_csv",
    "render_html",
    "render_rich",
    "run_link",
    "superscript",
    "table_footnotes",
]
