"""The built-in tool set, the tools a configuration adds (its MCP servers'), and the default
backends that serve the built-in tools' capabilities."""

from __future__ import annotations

from typing import Any

from hammr.backends.registry import build_backends
from hammr.config import MCP_TABLE, Config
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


def configured_tools(cfg: Config | None = None) -> list[Tool]:
    """Every tool the agents of ``cfg`` may call: the built-in ones, then the tools of its
    ``[[tools.mcp]]`` servers (:mod:`hammr.mcp_bridge.remote_tools`: each server started once
    per process and kept until exit). Without ``[[tools.mcp]]`` this is :func:`builtin_tools`
    and the MCP SDK is never imported. Raises McpServerError (a ConfigError, one line naming
    the entry) when the SDK is missing or a server cannot be used."""
    tools = builtin_tools()
    if cfg is None or not cfg.get(f"tools.{MCP_TABLE}"):
        return tools
    from hammr.mcp_bridge.remote_tools import remote_tools

    return tools + remote_tools(cfg, reserved=[t.name for t in tools])


def default_backends(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Backends per capability from the ``[tools]`` table of hammr.toml (None: defaults).

    A backend that cannot run here (tesseract not installed, ...) is left out, so the agent
    is told the capability is missing instead of failing on every call. Raises ValueError
    for unknown backends or ill-typed settings.
    """
    return build_backends(config or {}).backends
