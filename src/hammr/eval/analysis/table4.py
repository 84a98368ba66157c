"""Reading a labelled file back and tabulating HAMMR's Table 4 from it.

Table 4's denominators. The paper's four rows sum to 100% and its 'No error' row is each
system's accuracy (28.1 / 47.6 / 49.7, its Table 3), so the percentages are of *all* the
samples of a run, and the three error rows share out the wrong part in the proportions the
labelled sample shows. Per run, with A its accuracy (mean score over all its samples) and
n the rows labelled reasoning, formulation, tool_failure or ok ('skip' and blank rows are
not in n):

* error type t: (1 - A) x count(t) / n;
* No error: A + (1 - A) x count(ok) / n (wrong-scored answers a person found right).

The sample is drawn per question type (the paper: 10 per type, see
:func:`hammr.eval.analysis.labelling.sample_wrong`) and pooled, so every type weighs the
same in the shares whatever its number of mistakes - as in the paper. Without a known A the
table shows count / n of the labelled rows instead, and says so.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.table import Table

from hammr.eval.analysis.common import md_row, pct
from hammr.eval.analysis.labelling import ERROR_LABELS, LABELS
from hammr.input_file import read_input_text
from hammr.terminal_text import safe_markup

_ALIASES = {
    "tool_call_formulation": "formulation",
    "tool_failures": "tool_failure",
    "no_error": "ok",
    "ambiguous": "skip",
}
"""Other spellings accepted for the labels, keyed as :func:`_normalise_label` keys them."""


class LabelFileError(ValueError):
    """A labelling file that cannot be tabulated; the message names the file and the row."""


TABLE4_ROWS: tuple[tuple[str, str], ...] = (
    ("reasoning", "Reasoning"),
    ("formulation", "Tool call formulation"),
    ("tool_failure", "Tool failure"),
    ("ok", "No error"),
)


@dataclass
class RunLabels:
    """The labels of one run's sampled wrong answers."""

    run: str
    counts: Counter[str] = field(default_factory=Counter)
    """label -> rows; also 'unlabelled' for blank labels when they are allowed."""
    accuracy: float | None = None

    @property
    def labelled(self) -> int:
        """The denominator of the label shares: rows labelled with an error type or 'ok'
        ('skip' and blank rows are out)."""
        return sum(self.counts[k] for k in (*ERROR_LABELS, "ok"))

    def share(self, label: str) -> float | None:
        """Share of the labelled rows with this label (None: nothing labelled)."""
        return self.counts[label] / self.labelled if self.labelled else None

    def percentages(self) -> dict[str, float] | None:
        """Table 4's column for this run, as shares of *all* the run's samples (they sum to
        1): error type ``t`` = (1 - accuracy) x share(t); 'No error' ('ok') = accuracy +
        (1 - accuracy) x share('ok'). None when the accuracy is unknown or nothing is
        labelled."""
        if self.accuracy is None or not self.labelled:
            return None
        wrong = 1.0 - self.accuracy
        out = {k: wrong * (self.share(k) or 0.0) for k in ERROR_LABELS}
        out["ok"] = self.accuracy + wrong * (self.share("ok") or 0.0)
        return out

    def value(self, label: str) -> float | None:
        """What the table shows: the percentage when the accuracy is known, else the label
        share."""
        pct = self.percentages()
        if pct is not None:
            return pct[label]
        return self.share(label)


@dataclass
class LabelTable:
    """Table 4 from a labelled file: one column per run."""

    runs: dict[str, RunLabels]
    path: Path | None = None

    def _head(self) -> list[str]:
        return ["Error type", *self.runs]

    def _rows(self) -> list[list[str]]:
        rows = [[title, *(pct(r.value(k)) for r in self.runs.values())] for k, title in TABLE4_ROWS]
        rows.append(
            [
                "labelled (skipped)",
                *(f"{r.labelled} ({r.counts['skip']})" for r in self.runs.values()),
            ]
        )
        rows.append(["accuracy", *(pct(r.accuracy) for r in self.runs.values())])
        return rows

    def legend(self) -> str:
        text = (
            "Percentages of all the run's samples: 'No error' = the run's accuracy (mean score "
            "over all its samples) plus the share of the wrong answers a person marked 'ok'; "
            "each error type = (1 - accuracy) x its share among the labelled wrong answers "
            "(labelled: reasoning + formulation + tool_failure + ok; 'skip' and blank rows "
            "are left out). The four rows sum to 100%."
        )
        unknown = [r.run for r in self.runs.values() if r.accuracy is None]
        if unknown:
            text += (
                f" Run(s) without a known accuracy ({', '.join(unknown)}) show shares of the "
                "labelled wrong answers instead, and 'No error' is the share marked 'ok'."
            )
        return text

    def to_markdown(self) -> str:
        head = self._head()
        lines = [md_row(head), md_row(["---", *["---:"] * (len(head) - 1)])]
        lines += [md_row(r) for r in self._rows()]
        return "\n".join(lines) + "\n\n" + self.legend() + "\n"

    def to_rich(self) -> Table:
        table = Table(
            title="Error analysis (HAMMR Table 4)",
            title_justify="left",
            caption=safe_markup(self.legend()),  # run names: text, not markup
            caption_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for i, h in enumerate(self._head()):
            table.add_column(safe_markup(h), justify="left" if i == 0 else "right", no_wrap=i == 0)
        rows = self._rows()
        for i, r in enumerate(rows):
            table.add_row(*r, end_section=i == len(TABLE4_ROWS) - 1)
        return table

    def to_csv(self) -> str:
        """Long form: run, error type, labelled count, share of labelled, percent of all
        samples (empty where the run's accuracy is unknown)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["run", "error_type", "count", "labelled", "share_of_labelled", "percent"])
        for r in self.runs.values():
            pct = r.percentages()
            for key, title in TABLE4_ROWS:
                share = r.share(key)
                w.writerow(
                    [
                        r.run,
                        title,
                        r.counts[key],
                        r.labelled,
                        "" if share is None else f"{share:.4f}",
                        "" if pct is None else f"{100 * pct[key]:.2f}",
                    ]
                )
        return buf.getvalue()


def _normalise_label(text: str) -> str:
    key = "_".join(text.strip().lower().replace("-", " ").split())
    return _ALIASES.get(key, key)


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        text = read_input_text(path, encoding="utf-8-sig")
    except FileNotFoundError:
        raise LabelFileError(f"label file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise LabelFileError(f"{path}: not UTF-8 text ({e.reason}); save it as UTF-8 CSV") from None
    except OSError as e:
        raise LabelFileError(f"cannot read the label file {path}: {e.strerror or e}") from None
    if not text.strip():
        raise LabelFileError(f"{path}: the file is empty")
    first = text.splitlines()[0]
    # spreadsheets in some locales save with ';' (or tabs) between cells
    delimiter = max(",;\t", key=first.count)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    rows: list[dict[str, str]] = []
    try:
        for row in reader:
            if None in row:
                raise LabelFileError(
                    f"{path}: row {len(rows) + 2}: more cells than the header has columns"
                )
            rows.append({k: (v or "") for k, v in row.items()})
    except csv.Error as e:
        raise LabelFileError(f"{path}: row {len(rows) + 2}: not readable as CSV ({e})") from None
    return header, rows


def tabulate_labels(
    path: Path,
    *,
    accuracy: Mapping[str, float] | None = None,
    allow_unlabelled: bool = False,
) -> LabelTable:
    """Read a labelled file (from :func:`export_for_labelling`) and compute Table 4.

    Labels are case-insensitive and may use spaces or hyphens ('Tool failure'); 'tool call
    formulation', 'no error' and 'ambiguous' are accepted for formulation, ok and skip.
    Anything else, a blank label (unless ``allow_unlabelled``: then such rows are left out
    and counted as 'unlabelled'), a sample listed twice, or a run whose ``run_accuracy``
    cells disagree raises :class:`LabelFileError` naming the row, counted as a spreadsheet
    counts them (the header is row 1).

    Denominators: see :meth:`RunLabels.percentages`. ``accuracy`` (run -> mean score over
    all its samples) overrides the file's ``run_accuracy`` column.
    """
    path = Path(path)
    header, rows = _read_rows(path)
    missing = [c for c in ("run", "sample_id", "label") if c not in header]
    if missing:
        raise LabelFileError(
            f"{path}: missing column(s) {', '.join(missing)}; the header is: {', '.join(header)}"
        )
    runs: dict[str, RunLabels] = {}
    seen: dict[tuple[str, str, str], int] = {}
    file_acc: dict[str, tuple[float, int]] = {}
    for i, row in enumerate(rows, start=2):
        run, sid = row["run"].strip(), row["sample_id"].strip()
        where = f"{path}: row {i} (run {run!r}, sample {sid!r})"
        if not run and not sid and not any(v.strip() for v in row.values()):
            continue  # a blank line a spreadsheet left behind
        if not run or not sid:
            raise LabelFileError(f"{where}: 'run' and 'sample_id' must not be empty")
        key = (run, row.get("dataset", "").strip(), sid)
        if key in seen:
            raise LabelFileError(f"{where}: the same sample is already on row {seen[key]}")
        seen[key] = i
        raw = row["label"]
        labels = runs.setdefault(run, RunLabels(run))
        if not raw.strip():
            if not allow_unlabelled:
                raise LabelFileError(f"{where}: no label; write one of: {', '.join(LABELS)}")
            labels.counts["unlabelled"] += 1
        else:
            label = _normalise_label(raw)
            if label not in LABELS:
                raise LabelFileError(
                    f"{where}: unknown label {raw.strip()!r}; write one of: {', '.join(LABELS)}"
                )
            labels.counts[label] += 1
        acc_text = row.get("run_accuracy", "").strip()
        if acc_text:
            try:
                acc = float(acc_text)
            except ValueError:
                raise LabelFileError(
                    f"{where}: run_accuracy {acc_text!r} is not a number"
                ) from None
            if not 0.0 <= acc <= 1.0:
                raise LabelFileError(f"{where}: run_accuracy {acc} is not between 0 and 1")
            if run in file_acc and abs(file_acc[run][0] - acc) > 1e-9:
                raise LabelFileError(
                    f"{where}: run_accuracy {acc} differs from {file_acc[run][0]} on row "
                    f"{file_acc[run][1]}"
                )
            file_acc.setdefault(run, (acc, i))
    for run, labels in runs.items():
        if accuracy is not None and run in accuracy:
            labels.accuracy = float(accuracy[run])
        elif run in file_acc:
            labels.accuracy = file_acc[run][0]
    return LabelTable(runs=dict(sorted(runs.items())), path=path)
