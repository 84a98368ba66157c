"""What the OCR tests (test_ocr.py, test_ocr_rapid.py) share: the example photos and
rendered text lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

from hammr.values import Image

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")


def example(name: str) -> tuple[Image, dict[str, Any]]:
    """The example photo ``examples/{name}.json`` describes, and that description."""
    meta = json.loads((EXAMPLES / f"{name}.json").read_text())
    return Image.open(EXAMPLES / meta["image"]), meta


def rendered(text: str, size: int) -> Image:
    """``text`` in black on white, ``size`` px DejaVu Sans Bold (PIL's default font without it)."""
    font: Any = ImageFont.truetype(str(FONT), size) if FONT.exists() else None
    font = font or ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    img = PILImage.new("RGB", (right - left + size, bottom - top + size // 2 + 2), "white")
    ImageDraw.Draw(img).text((size // 2 - left, size // 4 + 1 - top), text, fill="black", font=font)
    return Image(img)
