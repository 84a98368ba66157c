"""(c) OCR batching: one ``read(list)`` call versus N ``read([crop])`` calls awaited in turn.

The crops are the text regions of the bundled photos (the plate, its two unreadable
distractor regions, the sign) and text lines rendered with Pillow at several sizes, cycled
to N. Each backend that is installed here is measured (tesseract, rapidocr) after one
warm-up read; wall times are medians over ``repeats`` runs. "agree" counts the crops whose
text is the same both ways, "correct" those whose batched text is the expected one.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

from hammr.values import Image

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
LINES = [
    ("KEEP LEFT", 14),
    ("EXIT 12B", 20),
    ("NO PARKING", 16),
    ("PLATFORM 3", 24),
    ("Main Street", 18),
    ("SPEED LIMIT 50", 22),
]


def rendered(text: str, size: int) -> Image:
    font: Any = ImageFont.truetype(str(FONT), size) if FONT.exists() else None
    font = font or ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    img = PILImage.new("RGB", (right - left + size, bottom - top + size // 2 + 2), "white")
    ImageDraw.Draw(img).text((size // 2 - left, size // 4 + 1 - top), text, fill="black", font=font)
    return Image(img)


def crop_pool() -> list[tuple[Image, str]]:
    """(crop, expected text): photo regions first, then rendered lines."""
    pool: list[tuple[Image, str]] = []
    for name in ("plate", "sign"):
        meta = json.loads((EXAMPLES / f"{name}.json").read_text())
        photo = Image.open(EXAMPLES / meta["image"])
        for i, (x, y, w, h) in enumerate(meta["boxes"]):
            crop = Image(photo.pixels.crop((x, y, x + w, y + h)))
            pool.append((crop, meta["answer"] if i == 0 else ""))
    pool += [(rendered(text, size), text) for text, size in LINES]
    return pool


def backends() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    from hammr.backends.ocr.tesseract import TesseractOCR, tesseract_available

    if tesseract_available():
        found.append(("tesseract", TesseractOCR()))
    from hammr.backends.ocr.rapid import RapidOCRBackend, rapidocr_available

    if rapidocr_available():
        found.append(("rapidocr", RapidOCRBackend()))
    return found


async def _timed(fn: Callable[[], Awaitable[list[str]]], repeats: int) -> tuple[float, list[str]]:
    times: list[float] = []
    out: list[str] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = await fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


async def measure(
    ocr: Any, crops: list[Image], repeats: int
) -> tuple[float, float, list[str], list[str]]:
    async def batched() -> list[str]:
        return list(await ocr.read(crops))

    async def one_by_one() -> list[str]:
        out: list[str] = []
        for crop in crops:
            out += await ocr.read([crop])
        return out

    t_batch, batch = await _timed(batched, repeats)
    t_single, single = await _timed(one_by_one, repeats)
    return t_batch, t_single, batch, single


def run(sizes: tuple[int, ...] = (1, 8, 32), repeats: int = 3) -> list[tuple[str, ...]]:
    pool = crop_pool()
    rows: list[tuple[str, ...]] = []

    async def go() -> None:
        for name, ocr in backends():
            await ocr.read([pool[0][0]])  # warm-up: loads models, checks languages
            for n in sizes:
                chosen = [pool[i % len(pool)] for i in range(n)]
                crops = [c for c, _ in chosen]
                t_batch, t_single, batch, single = await measure(ocr, crops, repeats)
                agree = sum(a == b for a, b in zip(batch, single, strict=True))
                correct = sum(t == want for t, (_, want) in zip(batch, chosen, strict=True))
                rows.append(
                    (
                        name,
                        str(n),
                        f"{t_batch * 1000:.0f} ms",
                        f"{t_single * 1000:.0f} ms",
                        f"x{t_single / t_batch:.2f}",
                        f"{agree}/{n}",
                        f"{correct}/{n}",
                    )
                )

    asyncio.run(go())
    return rows


COLUMNS = ["backend", "crops", "batched", "one by one", "speed-up", "agree", "correct"]

if __name__ == "__main__":
    print(" | ".join(COLUMNS))
    for row in run():
        print(" | ".join(row))
