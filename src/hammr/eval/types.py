"""The shapes everything in evaluation agrees on: a sample, a scored prediction, a metric."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

QUESTION_TYPES: tuple[str, ...] = (
    "local_pointing",
    "look_twice",
    "single_hop",
    "two_hop",
    "two_image",
    "spatial_reasoning",
    "complex_counting",
    "ocr_reasoning",
)
"""The eight question types of HAMMR's generic VQA suite (its Table 2)."""


@dataclass(frozen=True)
class Sample:
    """One question of a dataset, with everything needed to ask and to score it."""

    id: str
    """Unique within its dataset (the official question id where there is one)."""
    dataset: str
    """The adapter's name: 'gqa', 'textvqa', 'tallyqa', 'nlvr2', 'pointqa_local', ..."""
    question: str
    answers: tuple[str, ...]
    """Ground truth: one answer, or several (TextVQA's 10 annotators, EncVQA's list)."""
    images: Mapping[str, Path]
    """Input variables holding images: 'image', and 'image2' for two-image questions."""
    question_type: str = ""
    """One of QUESTION_TYPES for the generic suite; free text for other suites."""
    point: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()
    """Multiple-choice options, in order (their letters are A, B, C, ...)."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the metric or the analysis needs (EncVQA question_type, TallyQA
    'issimple', NLVR2 identifier, ...)."""


@dataclass(frozen=True)
class Score:
    value: float
    """0..1 for this sample."""
    judge: str = ""
    """Who decided, where it is not exact code: 'exact', 'list-iou', 'bem', 'llm', 'embedding'."""
    detail: str = ""


class Metric(Protocol):
    """Scores a prediction against a sample's ground truth. Each implementation names its
    source (the official script or paper section) in its docstring."""

    name: str

    async def score(self, prediction: str, sample: Sample) -> Score: ...


@dataclass
class RunRecord:
    """One finished sample of a run, as the store keeps it and the analysis reads it."""

    run: str
    sample_id: str
    dataset: str
    question_type: str
    question: str
    answers: tuple[str, ...]
    prediction: str | None
    """None when the system gave no answer (step limit, failure, timeout)."""
    score: float
    judge: str = ""
    status: str = "finished"
    """The trace's status, or 'timeout' / 'error'."""
    error: str | None = None
    trace: Any = None
    """The hammr.trace.Trace of the run (None when it could not be produced)."""
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    attempt: int = 0
    """0 for the sample's first stored answer; each ``--retry-failed`` that replaced a failed
    record adds 1 (so an experience taken from an earlier attempt is told apart)."""
