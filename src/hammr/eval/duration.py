"""How long a run will take, said before it starts: from the questions the same system
answered on the same model before (in the same store), not from a guess.

``hammr eval`` (and so each run of ``hammr experiment run``) prints it under its first
line: "expected: about 9 min (16 to ask, a median 34 s each, 1 at a time; naive on this
model in 24 stored answers)". Nothing is said when the store holds no such answer yet.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hammr.eval.store import RunStore

MODEL_KEYS = ("llm.backend", "llm.model", "llm.model_path", "llm.base_url")
"""The settings that name the model a question was answered on."""


def model_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """The model a run's recorded configuration names (:data:`MODEL_KEYS`)."""
    return {key: config.get(key) for key in MODEL_KEYS}


def spoken(seconds: float) -> str:
    """A duration as a person says it: '40 s', '9 min', '2.5 h'."""
    minutes = seconds / 60
    if minutes >= 90:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.0f} min" if minutes >= 1.5 else f"{seconds:.0f} s"


@dataclass(frozen=True)
class Expected:
    seconds: float
    todo: int
    median_s: float
    in_flight: int
    system: str
    answers: int

    def line(self) -> str:
        return (
            f"expected: about {spoken(self.seconds)} ({self.todo} to ask, a median "
            f"{self.median_s:.1f} s each, {self.in_flight} at a time; {self.system} on this "
            f"model in {self.answers} stored answers)"
        )


def expected(
    store: RunStore, system: str, config: Mapping[str, Any], todo: int, in_flight: int
) -> Expected | None:
    """How long ``todo`` questions to ``system`` will take, ``in_flight`` at a time: the
    median of its last answers on this model, times the rounds; None without any."""
    if todo <= 0:
        return None
    try:
        seen = store.latencies(system, model_keys(config))
    except sqlite3.Error:  # a forecast is no reason to stop a run
        return None
    if not seen:
        return None
    median = statistics.median(seen)
    rounds = todo / max(1, min(in_flight, todo))
    return Expected(median * rounds, todo, median, in_flight, system, len(seen))
