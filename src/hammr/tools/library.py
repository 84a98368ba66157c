"""The built-in tool set and the default backends that serve its capabilities."""

from __future__ import annotations

from typing import Any

from hammr.backends.ocr.tesseract import TesseractOCR, tesseract_available
from hammr.tools.base import Tool
from hammr.tools.box_tools import BoundingBoxOverlap, SpatialSelection
from hammr.tools.image_tools import CropImage, VisualizeRegions, ZoomIn
from hammr.tools.ocr import OCR

OCR_BACKENDS = ("tesseract", "none")
_OCR_OPTIONS: dict[str, type] = {
    "lang": str,
    "psm": int,
    "timeout_s": float,
    "min_height": int,
    "target_height": int,
    "max_workers": int,
    "cmd": str,
}


def builtin_tools() -> list[Tool]:
    """Every tool hammr ships, in the order their cards are shown."""
    return [CropImage, ZoomIn, VisualizeRegions, BoundingBoxOverlap, SpatialSelection, OCR]


def _ocr_options(section: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in section.items():
        if key == "backend":
            continue
        kind = _OCR_OPTIONS.get(key)
        if kind is None:
            known = ", ".join(["backend", *_OCR_OPTIONS])
            raise ValueError(f"unknown setting tools.ocr.{key}; known: {known}")
        if value is None or value == "":
            continue  # unset: keep the TesseractOCR default (psm = "" means automatic)
        try:
            out[key] = kind(value)  # values from environment variables arrive as strings
        except (TypeError, ValueError):
            raise ValueError(f"tools.ocr.{key} = {value!r} should be a {kind.__name__}") from None
    return out


def default_backends(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Backends per capability, from the ``[tools]`` table of hammr.toml (may be None).

    ``[tools.ocr]`` takes ``backend`` ("tesseract" or "none") and TesseractOCR's options
    (lang, psm, timeout_s, ...). OCR is also left out when the tesseract program is not
    installed, so the agent is told the capability is missing instead of failing each call.
    Raises ValueError for unknown or ill-typed settings.
    """
    section = dict((config or {}).get("ocr") or {})
    backend = str(section.get("backend", "tesseract")).lower()
    if backend not in OCR_BACKENDS:
        raise ValueError(
            f"tools.ocr.backend = {backend!r} is not one of: {', '.join(OCR_BACKENDS)}"
        )
    options = _ocr_options(section)
    backends: dict[str, Any] = {}
    if backend == "tesseract" and tesseract_available(options.get("cmd")):
        backends["ocr"] = TesseractOCR(**options)
    return backends
