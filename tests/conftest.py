from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hammr.values import Image

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="tesseract is not installed (Debian: tesseract-ocr tesseract-ocr-eng)",
)


@pytest.fixture
def plate() -> tuple[Image, dict[str, Any]]:
    meta = json.loads((EXAMPLES / "plate.json").read_text())
    return Image.open(EXAMPLES / meta["image"]), meta
