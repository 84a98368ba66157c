"""The built-in tool set and the default backends that serve its capabilities."""

from __future__ import annotations

from typing import Any

from hammr.backends.registry import build_backends
from hammr.tools.base import Tool
from hammr.tools.box_tools import BoundingBoxOverlap, SpatialSelection
from hammr.tools.depth_tools import EstimateObjectDepth, EstimateRegionDepth
from hammr.tools.image_tools import CropImage, VisualizeRegions, ZoomIn
from hammr.tools.knowledge_tools import AnswerWithContext, DecomposeQuestion, WikipediaArticle
from hammr.tools.math_tools import Calculator, SolveMathEquation
from hammr.tools.ocr import OCR
from hammr.tools.point_tools import CropAroundPoint, MarkPoint
from hammr.tools.similarity_tools import ImageSimilarity, ImageTextSimilarity, TextImageSimilarity
from hammr.tools.vision_tools import VQA, Caption, DetectObject, ObjectInImage, RecognizeEntity
from hammr.tools.web_tools import WebSearch


def builtin_tools() -> list[Tool]:
    """Every tool hammr ships, in the order their cards are shown."""
    return [
        CropImage,
        ZoomIn,
        VisualizeRegions,
        BoundingBoxOverlap,
        SpatialSelection,
        OCR,
        Caption,
        VQA,
        DetectObject,
        ObjectInImage,
        RecognizeEntity,
        MarkPoint,
        CropAroundPoint,
        EstimateRegionDepth,
        EstimateObjectDepth,
        ImageSimilarity,
        ImageTextSimilarity,
        TextImageSimilarity,
        Calculator,
        SolveMathEquation,
        WebSearch,
        WikipediaArticle,
        AnswerWithContext,
        DecomposeQuestion,
    ]


def default_backends(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Backends per capability from the ``[tools]`` table of hammr.toml (None: defaults).

    A backend that cannot run here (tesseract not installed, ...) is left out, so the agent
    is told the capability is missing instead of failing on every call. Raises ValueError
    for unknown backends or ill-typed settings.
    """
    return build_backends(config or {}).backends
