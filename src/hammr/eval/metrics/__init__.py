"""Evaluation metrics: VQA and TextVQA accuracy, exact match, Encyclopedic-VQA, multiple choice,
Infoseek, MEVQA's official answer accuracy.

Every metric follows :class:`hammr.eval.types.Metric` (``async score(prediction, sample)``)
so that metrics which ask a judge model and those which only compare strings are used alike.
:func:`get_metric` builds one by name. :data:`AGGREGATES` holds the functions a suite's
``[[aggregate]]`` tables may name to combine several entries' accuracies into one number
(Infoseek's final score is the harmonic mean of its two splits; MuSEAgent's micro average pools
the samples of several entries, :func:`aggregate_function` binding their sizes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hammr.eval.metrics.choice import Extraction, MultipleChoice, correct_letter, extract_choice
from hammr.eval.metrics.encvqa import (
    BEMJudge,
    EmbeddingJudge,
    EncVQAAccuracy,
    Judge,
    LLMJudge,
    TextEmbedder,
    list_iou,
    make_judge,
    parse_verdict,
    split_candidate_items,
)
from hammr.eval.metrics.exact import ExactMatch
from hammr.eval.metrics.infoseek import InfoseekAccuracy, infoseek_aggregate
from hammr.eval.metrics.mevqa import MEVQAAccuracy
from hammr.eval.metrics.normalize import normalize_encvqa_answer, normalize_exact
from hammr.eval.metrics.textvqa import TextVQAAccuracy, evalai_process_answer, textvqa_accuracy
from hammr.eval.metrics.vqa import VQAAccuracy, normalize_vqa_answer, vqa_accuracy
from hammr.eval.types import Metric

__all__ = [
    "AGGREGATES",
    "METRICS",
    "BEMJudge",
    "EmbeddingJudge",
    "EncVQAAccuracy",
    "ExactMatch",
    "Extraction",
    "InfoseekAccuracy",
    "Judge",
    "LLMJudge",
    "MEVQAAccuracy",
    "MultipleChoice",
    "SizedAggregate",
    "TextEmbedder",
    "TextVQAAccuracy",
    "VQAAccuracy",
    "aggregate_function",
    "correct_letter",
    "evalai_process_answer",
    "extract_choice",
    "get_aggregate",
    "get_metric",
    "list_iou",
    "make_judge",
    "mean",
    "micro_mean",
    "normalize_encvqa_answer",
    "normalize_exact",
    "normalize_vqa_answer",
    "parse_verdict",
    "split_candidate_items",
    "textvqa_accuracy",
    "vqa_accuracy",
]


def _vqa(**options: Any) -> Metric:
    _no_options("vqa_accuracy", options, ())
    return VQAAccuracy()


def _textvqa(**options: Any) -> Metric:
    _no_options("textvqa_accuracy", options, ())
    return TextVQAAccuracy()


def _exact(**options: Any) -> Metric:
    _no_options("exact_match", options, ("boolean", "numeric"))
    return ExactMatch(**options)


def _encvqa(**options: Any) -> Metric:
    iou = options.pop("iou_threshold", None)
    judge = make_judge(options.pop("judge", None), **options)
    if iou is None:
        return EncVQAAccuracy(judge)
    return EncVQAAccuracy(judge, iou_threshold=float(iou))


def _choice(**options: Any) -> Metric:
    _no_options("multiple_choice", options, ())
    return MultipleChoice()


def _infoseek(**options: Any) -> Metric:
    _no_options("infoseek", options, ())
    return InfoseekAccuracy()


def _mevqa(**options: Any) -> Metric:
    _no_options("mevqa_accuracy", options, ())
    return MEVQAAccuracy()


def _no_options(name: str, options: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        takes = f"takes {', '.join(allowed)}" if allowed else "takes no options"
        raise ValueError(f"metric {name!r} {takes}; got {', '.join(unknown)}")


METRICS: dict[str, Callable[..., Metric]] = {
    "vqa_accuracy": _vqa,
    "textvqa_accuracy": _textvqa,
    "exact_match": _exact,
    "encvqa": _encvqa,
    "multiple_choice": _choice,
    "infoseek": _infoseek,
    "mevqa_accuracy": _mevqa,
}
"""Metric name -> factory taking the metric's options."""


def harmonic_mean(accuracies: Sequence[float]) -> float:
    """The harmonic mean of accuracies in [0, 1] (0 when one of them is 0)."""
    if any(a == 0 for a in accuracies):
        return 0.0
    return len(accuracies) / sum(1.0 / a for a in accuracies)


def mean(accuracies: Sequence[float]) -> float:
    """The plain mean of the parts' accuracies (every part weighs the same, whatever its size):
    MuSEAgent's 'Avg.' column over its four benchmarks."""
    if not accuracies:
        raise ValueError("mean needs at least one accuracy")
    return sum(accuracies) / len(accuracies)


def micro_mean(parts: Sequence[tuple[float, int]]) -> float:
    """The micro average of (accuracy, sample count) parts: the mean over all their samples
    pooled, so every sample weighs the same (MuSEAgent's per-benchmark 'Micro Avg.' over its
    sub-tasks)."""
    total = sum(n for _, n in parts)
    if total <= 0 or any(n < 0 for _, n in parts):
        raise ValueError("micro_mean needs parts with positive sample counts")
    return sum(a * n for a, n in parts) / total


@dataclass(frozen=True)
class SizedAggregate:
    """An aggregate that needs each part's sample count as well as its accuracy: ``function``
    takes (accuracy, count) pairs. :func:`aggregate_function` binds the counts, giving a
    function of the accuracies alone (as the bootstrap calls it: resampling keeps every part's
    size). Calling it without counts is an error."""

    function: Callable[[Sequence[tuple[float, int]]], float]
    name: str

    def bind(self, sizes: Sequence[int]) -> Callable[[Sequence[float]], float]:
        counts = [int(n) for n in sizes]

        def bound(accuracies: Sequence[float]) -> float:
            if len(accuracies) != len(counts):
                raise ValueError(
                    f"{self.name}: {len(accuracies)} accuracies for {len(counts)} part sizes"
                )
            return self.function(list(zip(accuracies, counts, strict=True)))

        return bound

    def __call__(self, accuracies: Sequence[float]) -> float:
        raise ValueError(
            f"aggregate {self.name!r} needs the parts' sample counts; use "
            "aggregate_function(name, sizes)"
        )


AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "harmonic_mean": harmonic_mean,
    "infoseek": infoseek_aggregate,
    "mean": mean,
    "micro_mean": SizedAggregate(micro_mean, "micro_mean"),
}
"""Aggregate name -> function of the named suite entries' accuracies (fractions, in the
order the suite lists the entries) returning one fraction: ``harmonic_mean``;
``infoseek``, the official Infoseek final score (each split's accuracy rounded to 0.01% first,
the mean rounded to 0.01%; :func:`~hammr.eval.metrics.infoseek.infoseek_aggregate`);
``mean``, the plain mean; and ``micro_mean``, a :class:`SizedAggregate` (the pooled mean,
which needs the entries' sizes: get it through :func:`aggregate_function`)."""


def get_aggregate(name: str) -> Callable[[Sequence[float]], float]:
    try:
        return AGGREGATES[name]
    except KeyError:
        raise ValueError(
            f"unknown aggregate {name!r}; choose one of {', '.join(sorted(AGGREGATES))}"
        ) from None


def aggregate_function(name: str, sizes: Sequence[int]) -> Callable[[Sequence[float]], float]:
    """Aggregate ``name`` as a function of the parts' accuracies, given the parts' sample counts
    (used by sized aggregates such as ``micro_mean``, ignored by the others)."""
    found = get_aggregate(name)
    return found.bind(sizes) if isinstance(found, SizedAggregate) else found


def get_metric(name: str, **options: Any) -> Metric:
    """The metric called ``name`` built with ``options``:

    * ``vqa_accuracy`` (VQA v2, the VQA challenge script): no options.
    * ``textvqa_accuracy`` (TextVQA, MMF's evaluator as on its leaderboard): no options.
    * ``exact_match`` (GQA, TallyQA, NLVR2, PointQA): ``boolean``, ``numeric``.
    * ``encvqa`` (Encyclopedic-VQA): ``judge`` ('bem', 'llm', 'embedding', a Judge, or None)
      with that judge's options (``checkpoint``, ``llm``, ``embedder``, ``threshold``, ...),
      and ``iou_threshold``.
    * ``multiple_choice`` (V* Bench, HR-Bench, MME-RealWorld-Lite, ZoomBench): no options.
    * ``infoseek`` (Infoseek, its official script's rules): no options.

    Unknown names and options raise :class:`ValueError`.
    """
    try:
        factory = METRICS[name]
    except KeyError:
        raise ValueError(
            f"unknown metric {name!r}; choose one of {', '.join(sorted(METRICS))}"
        ) from None
    return factory(**options)
