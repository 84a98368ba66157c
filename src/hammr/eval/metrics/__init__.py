"""Evaluation metrics: VQA and TextVQA accuracy, exact match, Encyclopedic-VQA, multiple choice,
Infoseek.

Every metric follows :class:`hammr.eval.types.Metric` (``async score(prediction, sample)``)
so that metrics which ask a judge model and those which only compare strings are used alike.
:func:`get_metric` builds one by name. :data:`AGGREGATES` holds the functions a suite's
``[[aggregate]]`` tables may name to combine several entries' accuracies into one number
(Infoseek's final score is the harmonic mean of its two splits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    "MultipleChoice",
    "TextEmbedder",
    "TextVQAAccuracy",
    "VQAAccuracy",
    "correct_letter",
    "evalai_process_answer",
    "extract_choice",
    "get_aggregate",
    "get_metric",
    "list_iou",
    "make_judge",
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
}
"""Metric name -> factory taking the metric's options."""


def harmonic_mean(accuracies: Sequence[float]) -> float:
    """The harmonic mean of accuracies in [0, 1] (0 when one of them is 0)."""
    if any(a == 0 for a in accuracies):
        return 0.0
    return len(accuracies) / sum(1.0 / a for a in accuracies)


AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "harmonic_mean": harmonic_mean,
    "infoseek": infoseek_aggregate,
}
"""Aggregate name -> function of the named suite entries' accuracies (fractions, in the
order the suite lists the entries) returning one fraction: ``harmonic_mean``, and
``infoseek``, the official Infoseek final score (each split's accuracy rounded to 0.01% first,
the mean rounded to 0.01%; :func:`~hammr.eval.metrics.infoseek.infoseek_aggregate`)."""


def get_aggregate(name: str) -> Callable[[Sequence[float]], float]:
    try:
        return AGGREGATES[name]
    except KeyError:
        raise ValueError(
            f"unknown aggregate {name!r}; choose one of {', '.join(sorted(AGGREGATES))}"
        ) from None


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
