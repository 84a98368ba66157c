"""Sampling wrong answers and writing them, with a summary of each trace, for a person to label.

A wrong answer after a clean trace is a reasoning error or a silent tool failure, and only a
person can tell which; :mod:`hammr.eval.analysis.table4` reads the labels back.
"""

from __future__ import annotations

import csv
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from hammr.eval.analysis.common import question_type_order
from hammr.eval.types import RunRecord
from hammr.output_file import open_output
from hammr.trace import Step, Trace

WRONG_BELOW = 0.5
"""A record is a wrong answer when its score is below this. Exact-match datasets score 0 or
1; for VQA accuracy (TextVQA: min(#annotators agreeing / 3, 1)) an answer only one annotator
gave (0.33) counts as wrong, one that two gave (0.67) as right."""

LABELS: tuple[str, ...] = ("reasoning", "formulation", "tool_failure", "ok", "skip")
"""What a person writes in the ``label`` column: the error type of the wrong answer; ``ok``
when the answer is in fact right (the metric was too strict) or no error can be found;
``skip`` when the question is ambiguous (the paper skips those)."""

ERROR_LABELS: tuple[str, ...] = ("reasoning", "formulation", "tool_failure")

EXPORT_COLUMNS: tuple[str, ...] = (
    "run",
    "dataset",
    "sample_id",
    "question_type",
    "question",
    "answers",
    "prediction",
    "score",
    "status",
    "run_accuracy",
    "trace",
    "label",
    "note",
)
"""The labelling file's columns; a person fills ``label`` (and may write in ``note``)."""


def is_wrong(record: RunRecord, threshold: float = WRONG_BELOW) -> bool:
    return record.score < threshold


def run_accuracy(records: Iterable[RunRecord]) -> dict[str, float]:
    """run -> mean score of its records (Table 4's 'No error' row)."""
    sums: dict[str, list[float]] = defaultdict(list)
    for r in records:
        sums[r.run].append(r.score)
    return {run: sum(v) / len(v) for run, v in sorted(sums.items())}


def sample_wrong(
    records: Iterable[RunRecord], per_type: int, seed: int, *, threshold: float = WRONG_BELOW
) -> list[RunRecord]:
    """Up to ``per_type`` wrong answers of each run and question type, drawn at random.

    The paper inspects 10 wrong answers per approach and question type and skips ambiguous
    questions, so ask for a few more than you mean to label. The draw depends only on
    ``seed``, the run, the question type and that group's records (not on the order of the
    records, nor on other runs), so adding a run leaves the others' samples as they were.
    Ordered by run, question type, then dataset and sample id.
    """
    if per_type < 0:
        raise ValueError(f"per_type must be at least 0, not {per_type}")
    groups: dict[tuple[str, str], list[RunRecord]] = defaultdict(list)
    for r in records:
        if is_wrong(r, threshold):
            groups[(r.run, r.question_type)].append(r)
    out: list[RunRecord] = []
    for run in sorted({run for run, _ in groups}):
        for qt in question_type_order(q for r_, q in groups if r_ == run):
            group = sorted(groups[(run, qt)], key=lambda r: (r.dataset, r.sample_id))
            rng = random.Random(f"{seed}/{run}/{qt}")
            picked = rng.sample(group, min(per_type, len(group)))
            out.extend(sorted(picked, key=lambda r: (r.dataset, r.sample_id)))
    return out


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _step_line(agent: str, step: Step, limit: int) -> str:
    head = f"{agent} >"
    if step.router:
        head += f" [router: {step.router}]"
    if step.action:
        call = step.action
    elif step.finish is not None:
        call = "[Finish]"
    elif step.raw:
        call = f"(wrote: {_clip(step.raw, limit)})"
    else:
        call = "(no action)"
    line = f"{head} {_clip(call, limit)}"
    if step.error_kind:
        line += f" -> ERROR[{step.error_kind}]: {_clip(step.error or '', limit)}"
    elif step.finish is not None and not step.action:
        line += f" {_clip(step.finish, limit)}"
    elif step.observation:
        line += f" -> {_clip(step.observation, limit)}"
    return line


def trace_summary(trace: Trace | None, *, limit: int = 160) -> str:
    """One line per step, ``agent > call -> observation``, child agents' steps indented
    under the step that called them; errors as ``ERROR[kind]: message``."""
    if trace is None:
        return "(no trace)"
    lines: list[str] = []

    def walk(t: Trace, depth: int) -> None:
        pad = "  " * depth
        for step in t.steps:
            lines.append(pad + _step_line(t.agent, step, limit))
            if step.child is not None:
                walk(step.child, depth + 1)
        if t.status != "finished":
            reason = f" ({_clip(t.error, limit)})" if t.error else ""
            lines.append(f"{pad}{t.agent} ended: {t.status}{reason}")

    walk(trace, 0)
    return "\n".join(lines)


def _answers_text(answers: Sequence[str]) -> str:
    counts = Counter(answers)
    parts = [a if n == 1 else f"{a} (x{n})" for a, n in counts.most_common()]
    return " | ".join(parts)


def export_for_labelling(
    records: Iterable[RunRecord],
    path: Path,
    *,
    accuracy: Mapping[str, float] | None = None,
) -> Path:
    """Write records (usually :func:`sample_wrong`'s) to a CSV file for a person to label.

    CSV rather than JSONL because labelling happens in a spreadsheet or a text editor: one
    row per sample, the ``label`` column empty for the person to fill in with one of
    :data:`LABELS`, a ``note`` column for comments. The trace summary is one cell with one
    line per step (quoted newlines, which spreadsheets show in the cell). ``accuracy``
    (run -> mean score over *all* the run's samples, see :func:`run_accuracy`) is stored in
    every row so that :func:`tabulate_labels` can give Table 4's 'No error' row from the
    file alone; without it the column is empty. UTF-8; read back with or without a BOM.
    OutputError (one line) when ``path`` cannot be written; a regular file is replaced
    whole, a device or a pipe written in place (see :mod:`hammr.output_file`).
    """
    path = Path(path)
    accuracy = accuracy or {}
    with open_output(path, newline="", what="the CSV file") as f:
        w = csv.writer(f)
        w.writerow(EXPORT_COLUMNS)
        for r in records:
            acc = accuracy.get(r.run)
            w.writerow(
                [
                    r.run,
                    r.dataset,
                    r.sample_id,
                    r.question_type,
                    r.question,
                    _answers_text(r.answers),
                    "" if r.prediction is None else r.prediction,
                    f"{r.score:g}",
                    r.status,
                    "" if acc is None else repr(float(acc)),
                    trace_summary(r.trace if isinstance(r.trace, Trace) else None),
                    "",
                    "",
                ]
            )
    return path
