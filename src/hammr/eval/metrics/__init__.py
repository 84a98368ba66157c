"""Evaluation metrics: VQA and TextVQA accuracy, exact match, Encyclopedic-VQA, multiple choice.

Every metric follows :class:`hammr.eval.types.Metric` (``async score(prediction, sample)``)
so that metrics which ask a judge model and those which only compare strings are used alike.
:func:`get_metric` builds one by name.
"""

from __future__ import annotations

from collections.abc import Callable
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
from hammr.eval.metrics.normalize import normalize_encvqa_answer, normalize_exact
from hammr.eval.metrics.textvqa import TextVQAAccuracy, evalai_process_answer, textvqa_accuracy
from hammr.eval.metrics.vqa import VQAAccuracy, normalize_vqa_answer, vqa_accuracy
from hammr.eval.types import Metric

__all__ = [
    "METRICS",
    "BEMJudge",
    "EmbeddingJudge",
    "EncVQAAccuracy",
    "ExactMatch",
    "Extraction",
    "Judge",
    "LLMJudge",
    "MultipleChoice",
    "TextEmbedder",
    "TextVQAAccuracy",
    "VQAAccuracy",
    "correct_letter",
    "evalai_process_answer",
    "extract_choice",
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
}
"""Metric name -> factory taking the metric's options."""


def get_metric(name: str, **options: Any) -> Metric:
    """The metric called ``name`` built with ``options``:

    * ``vqa_accuracy`` (VQA v2, the VQA challenge script): no options.
    * ``textvqa_accuracy`` (TextVQA, MMF's evaluator as on its leaderboard): no options.
    * ``exact_match`` (GQA, TallyQA, NLVR2, PointQA): ``boolean``, ``numeric``.
    * ``encvqa`` (Encyclopedic-VQA): ``judge`` ('bem', 'llm', 'embedding', a Judge, or None)
      with that judge's options (``checkpoint``, ``llm``, ``embedder``, ``threshold``, ...),
      and ``iou_threshold``.
    * ``multiple_choice`` (V* Bench, HR-Bench, MME-RealWorld-Lite, ZoomBench): no options.

    Unknown names and options raise :class:`ValueError`.
    """
    try:
        factory = METRICS[name]
    except KeyError:
        raise ValueError(
            f"unknown metric {name!r}; choose one of {', '.join(sorted(METRICS))}"
        ) from None
    return factory(**options)
