"""Small helpers the error-analysis tables share: question-type order and cell formatting."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hammr.eval.types import QUESTION_TYPES


def question_type_order(types: Iterable[str]) -> list[str]:
    """The distinct types, known ones in :data:`QUESTION_TYPES` order, then others by name."""
    known = {t: i for i, t in enumerate(QUESTION_TYPES)}
    return sorted(set(types), key=lambda t: (known.get(t, len(known)), t))


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def md_row(cells: Iterable[Any]) -> str:
    """One Markdown table row, ``|`` in a cell escaped."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
