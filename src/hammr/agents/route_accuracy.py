"""Routing accuracy against question-type labels: how the paper tunes its dispatcher.

A labelled question file is JSON lines ``{"question": ..., "type": ..., "inputs": ["image",
"point"]}``; the type names a specialist through its agent file's ``question_type``. Each
question is only routed (the specialist is never run), with stand-in inputs of the kinds
listed, so a file of a few hundred questions needs no images.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image as PILImage

from hammr.agents.routing import RoutedDispatcher, RouteDecision
from hammr.input_file import read_input_text
from hammr.tools.base import ToolContext
from hammr.values import Image, Value


@dataclass(frozen=True)
class LabelledQuestion:
    question: str
    type: str
    inputs: tuple[str, ...] = ("image",)


def load_labelled_questions(path: Path) -> list[LabelledQuestion]:
    out = []
    for n, line in enumerate(read_input_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append(
                LabelledQuestion(row["question"], row["type"], tuple(row.get("inputs", ["image"])))
            )
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: expected {{question, type, inputs}}: {e}") from None
    return out


def stand_in_inputs(kinds: Sequence[str], image: Image | None = None) -> dict[str, Value]:
    """Values of the given kinds for routing only: the dispatcher sees which inputs exist and
    the image's size (a blank 640x480 one unless ``image`` is given; a point at its centre)."""
    image = image or Image(PILImage.new("RGB", (640, 480), (128, 128, 128)))
    values: dict[str, Value] = {}
    for kind in kinds:
        if kind in ("image", "image2"):
            values[kind] = image
        elif kind == "point":
            values[kind] = (image.width / 2, image.height / 2)
        else:
            raise ValueError(f"unknown input kind {kind!r} (image, image2, point)")
    return values


@dataclass
class RoutingReport:
    router: str
    rows: list[tuple[LabelledQuestion, str, str | None, str]] = field(default_factory=list)
    """(question, expected agent, routed agent, decided by)"""
    confidences: list[float] = field(default_factory=list)
    """The neighbours' vote for the agent they chose, per row (before any LLM fallback)."""

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def correct(self) -> int:
        return sum(1 for _, want, got, _ in self.rows if want == got)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def per_type(self) -> dict[str, tuple[int, int]]:
        """type -> (correct, total)."""
        out: dict[str, tuple[int, int]] = {}
        for q, want, got, _ in self.rows:
            c, t = out.get(q.type, (0, 0))
            out[q.type] = (c + (want == got), t + 1)
        return out

    def confusion(self) -> Counter[tuple[str, str]]:
        """(question type, agent routed to or '(none)') -> count."""
        return Counter((q.type, got or "(none)") for q, _, got, _ in self.rows)

    def decided_by(self) -> Counter[str]:
        return Counter(by for *_, by in self.rows)

    def calibration(self, thresholds: Sequence[float]) -> list[tuple[float, float, float]]:
        """(threshold, share of questions at or above it, accuracy on those)."""
        out = []
        for t in thresholds:
            kept = [r for r, c in zip(self.rows, self.confidences, strict=True) if c >= t]
            right = sum(1 for _, want, got, _ in kept if want == got)
            out.append((t, len(kept) / max(1, self.total), right / len(kept) if kept else 0.0))
        return out


async def measure_routing(
    dispatcher: RoutedDispatcher,
    questions: Sequence[LabelledQuestion],
    type_to_agent: Mapping[str, str],
    ctx: ToolContext,
    *,
    on_done: Callable[[int, RouteDecision], None] | None = None,
) -> RoutingReport:
    """Route every question (in order; the LLM is not shared concurrently) and score it."""
    unknown = sorted({q.type for q in questions} - set(type_to_agent))
    if unknown:
        raise ValueError(
            f"question types with no specialist: {', '.join(unknown)}; "
            f"known: {', '.join(type_to_agent)}"
        )
    report = RoutingReport(dispatcher.mode)
    for i, q in enumerate(questions):
        decision = await dispatcher.decide(q.question, stand_in_inputs(q.inputs), ctx)
        report.rows.append((q, type_to_agent[q.type], decision.agent, decision.by))
        report.confidences.append(decision.confidence)
        if on_done is not None:
            on_done(i, decision)
    return report
