"""MuSEAgent's exploration / evaluation split: every benchmark is cut 1:1 into a half the agent
explores (its runs become the experience bank) and a half it is scored on.

The split is per dataset (suite entry) and stratified by sub-task (the samples' question type,
e.g. V* Bench's 'attribute' and 'relation'): within each sub-task the samples are sorted by id,
shuffled with a generator seeded by (seed, sub-task), and the first ``n // 2`` go to exploration,
the rest to evaluation, so an odd count gives the extra sample to evaluation. Sorting first
makes the halves independent of the file's order; the seed alone decides them.

From datasets of MuSEAgent's sizes this gives its Table 1 counts: V* Bench 57/58 (attribute)
and 38/38 (relation), MME-RealWorld-Lite 584/585 (perception) and 375/375 (reasoning),
ZoomBench 310/311, HR-Bench 100/100 (exploration/evaluation). The paper's own draw is not
published, so the halves hold other samples than its.

``--limit`` is applied after the split (:func:`split_then_limit`): the limit draws within the
half, so a limited evaluation run never asks an exploration sample.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hammr.eval.datasets import sample_subset
from hammr.eval.types import Sample

__all__ = [
    "EVALUATION",
    "EXPLORATION",
    "HALVES",
    "Half",
    "SplitCounts",
    "split_counts",
    "split_samples",
    "split_then_limit",
]

Half = Literal["exploration", "evaluation"]
EXPLORATION: Half = "exploration"
EVALUATION: Half = "evaluation"
HALVES: tuple[Half, ...] = (EXPLORATION, EVALUATION)


@dataclass(frozen=True)
class SplitCounts:
    """How many samples of one sub-task each half holds."""

    sub_task: str
    exploration: int
    evaluation: int


def _check_half(half: str) -> Half:
    if half == EXPLORATION:
        return EXPLORATION
    if half == EVALUATION:
        return EVALUATION
    raise ValueError(f"unknown split {half!r}; choose one of {', '.join(HALVES)}")


def _strata(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    strata: dict[str, list[Sample]] = {}
    for s in samples:
        strata.setdefault(s.question_type, []).append(s)
    return strata


def split_samples(samples: Sequence[Sample], *, seed: int = 0) -> dict[Half, list[Sample]]:
    """The exploration and evaluation halves of one dataset's samples (each sample in exactly
    one), stratified by question type. Each half keeps the input's order. Sample ids must be
    unique (``load_dataset`` makes them so); a repeated id raises :class:`ValueError`."""
    ids = [s.id for s in samples]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise ValueError(f"sample ids repeat ({', '.join(repeated)}); the split needs unique ids")
    chosen: set[str] = set()
    for sub_task, members in sorted(_strata(samples).items()):
        order = sorted(s.id for s in members)
        random.Random(f"hammr-split\x1f{seed}\x1f{sub_task}").shuffle(order)
        chosen.update(order[: len(order) // 2])
    return {
        EXPLORATION: [s for s in samples if s.id in chosen],
        EVALUATION: [s for s in samples if s.id not in chosen],
    }


def split_counts(samples: Sequence[Sample], *, seed: int = 0) -> list[SplitCounts]:
    """Per sub-task (sorted), how many samples each half holds (Table 1 of MuSEAgent)."""
    halves = split_samples(samples, seed=seed)
    out = []
    for sub_task in sorted(_strata(samples)):
        n_exp = sum(1 for s in halves[EXPLORATION] if s.question_type == sub_task)
        n_eval = sum(1 for s in halves[EVALUATION] if s.question_type == sub_task)
        out.append(SplitCounts(sub_task, n_exp, n_eval))
    return out


def split_then_limit(
    samples: Sequence[Sample],
    half: str,
    *,
    split_seed: int = 0,
    limit: int | None = None,
    seed: int = 0,
) -> list[Sample]:
    """The ``half`` ('exploration' or 'evaluation') of one dataset's samples, then ``limit`` of
    them drawn with ``seed`` as :func:`~hammr.eval.datasets.sample_subset` draws (None: the
    whole half, in the input's order)."""
    chosen = split_samples(samples, seed=split_seed)[_check_half(half)]
    return sample_subset(chosen, limit, seed)
