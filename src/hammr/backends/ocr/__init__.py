"""OCR backends: turn images into the text they show."""

from __future__ import annotations

from hammr.backends.ocr.tesseract import TesseractMissing, TesseractOCR

__all__ = ["TesseractMissing", "TesseractOCR"]
