from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from hammr.values import Image
from real_server import (
    embedded_model_missing,
    real_embedding_server,
    real_llm_server,
    spare_llm_server,
)

__all__ = ["real_embedding_server", "real_llm_server", "spare_llm_server"]

# Hypothesis's default deadline (200 ms an example) counts wall time, which a loaded machine
# stretches: no property test here is about speed (bounds on work count processor time).
settings.register_profile("hammr", deadline=None)
settings.load_profile("hammr")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="tesseract is not installed (Debian: tesseract-ocr tesseract-ocr-eng)",
)


_EMBEDDED_REASON = embedded_model_missing()
needs_embedded_model = pytest.mark.skipif(
    _EMBEDDED_REASON is not None, reason=_EMBEDDED_REASON or ""
)


@pytest.fixture
def plate() -> tuple[Image, dict[str, Any]]:
    meta = json.loads((EXAMPLES / "plate.json").read_text())
    return Image.open(EXAMPLES / meta["image"]), meta
