"""MulProg's Fig. 11: the visual metrics before and after shuffling an explanation's tokens.

The MEAgent paper (appendix, Fig. 11) shuffles the words of generated explanations at random
and scores them again: REX's grounding reads only the boxes, wherever their ``[BOX]`` tokens
stand, so it does not move; the paper's detection score pairs each box with the object name
its token follows, so it drops. This module does the same to a run's explanations (its own,
else the template's, as ``hammr explain`` builds them), scored with the same functions
(:func:`hammr.eval.metrics.explanation.detection_score` and ``grounding_score``).

A shuffle permutes the whitespace-separated tokens of the text with a seeded generator; the
boxes stay with the ``[BOX]`` tokens in the order those appear, as the official files pair
them (the i-th ``[BOX]`` of the text holds the i-th box list).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hammr.eval.explain_cli import Explained
    from hammr.eval.metrics.explanation import GroundedExplanation


def shuffled(explanation: GroundedExplanation, rng: random.Random) -> GroundedExplanation:
    """The explanation with its tokens in a random order (``rng``), boxes unchanged."""
    from hammr.eval.metrics.explanation import GroundedExplanation

    tokens = explanation.text.split()
    rng.shuffle(tokens)
    return GroundedExplanation(" ".join(tokens), explanation.boxes, explanation.name_order)


@dataclass(frozen=True)
class ShuffleScores:
    """Corpus means (0..1) over the samples that have a reference."""

    samples: int
    detection: float
    grounding: float
    shuffled_detection: float
    shuffled_grounding: float
    seed: int


def shuffle_scores(
    explained: Sequence[Explained],
    references: Mapping[tuple[str, str], GroundedExplanation],
    *,
    seed: int = 0,
    image_sizes: Mapping[tuple[str, str], tuple[int, int]] | None = None,
) -> ShuffleScores:
    """Detection (official padding) and grounding of each explanation that has a reference,
    as written and with its tokens shuffled (one generator seeded by ``seed``, samples in
    the order given); a sample without an explanation scores as an empty one."""
    from hammr.eval.metrics.explanation import EMPTY, detection_score, grounding_score

    rng = random.Random(seed)
    sizes = image_sizes or {}
    det: list[float] = []
    grd: list[float] = []
    det_s: list[float] = []
    grd_s: list[float] = []
    for e in explained:
        ref = references.get(e.key)
        if ref is None:
            continue
        pred = e.explanation or EMPTY
        mixed = shuffled(pred, rng)
        size = sizes.get(e.key)
        det.append(detection_score(ref, pred))
        grd.append(grounding_score(ref, pred, image_size=size))
        det_s.append(detection_score(ref, mixed))
        grd_s.append(grounding_score(ref, mixed, image_size=size))

    def mean(values: list[float]) -> float:
        return fmean(values) if values else 0.0

    return ShuffleScores(len(det), mean(det), mean(grd), mean(det_s), mean(grd_s), seed)


def shuffle_png(scores: Mapping[str, ShuffleScores], *, title: str = "") -> bytes:
    """A grouped bar chart (PNG): per run, grounding and detection before and after the
    shuffle, in percent (matplotlib's Agg canvas; no window)."""
    from matplotlib.figure import Figure

    from hammr.avis.charts import png_bytes

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    names = list(scores)
    bars: tuple[tuple[str, str, str], ...] = (
        ("grounding (REX)", "grounding", "#4C72B0"),
        ("grounding, shuffled", "shuffled_grounding", "#A6C8E8"),
        ("detection (Eq. 2)", "detection", "#C44E52"),
        ("detection, shuffled", "shuffled_detection", "#F2B8B5"),
    )
    width = 0.8 / len(bars)
    for i, (label, attr, colour) in enumerate(bars):
        xs = [j + (i - (len(bars) - 1) / 2) * width for j in range(len(names))]
        ys = [100 * float(getattr(scores[n], attr)) for n in names]
        ax.bar(xs, ys, width, label=label, color=colour)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("score (x100)")
    ax.set_ylim(0, 100)
    ax.set_title(title or "visual metrics before and after shuffling the tokens")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return png_bytes(fig)


__all__ = ["ShuffleScores", "shuffle_png", "shuffle_scores", "shuffled"]
