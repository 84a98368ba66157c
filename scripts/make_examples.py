"""Build the bundled example images in examples/ (deterministic; rerun after changes).

    .venv/bin/python scripts/make_examples.py

plate.png: scikit-image's motorcycle photo with a readable licence plate "154-JDX" and two
unreadable plate-like distractors. sign.png: the coffee photo with an "OPEN 24 HOURS" sign.
Each image comes with a JSON file holding the question, the answer and the text boxes
(x, y, w, h in the image's pixels; the first box is the one holding the answer).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from skimage import data

OUT = Path(__file__).resolve().parent.parent / "examples"
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")

Rect = tuple[int, int, int, int]


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    if FONT.exists():
        return ImageFont.truetype(str(FONT), size)
    return ImageFont.load_default(size=size)


def panel(
    size: tuple[int, int],
    text: str,
    text_px: int,
    fill: tuple[int, int, int],
    ink: tuple[int, int, int],
    border: int,
) -> Image.Image:
    """A flat rectangle with a dark border and centred text."""
    w, h = size
    img = Image.new("RGB", size, fill)
    draw = ImageDraw.Draw(img)
    if border:
        draw.rectangle((0, 0, w - 1, h - 1), outline=ink, width=border)
    f = font(text_px)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=f)
    x = (w - (right - left)) / 2 - left
    y = (h - (bottom - top)) / 2 - top
    draw.text((x, y), text, fill=ink, font=f)
    return img


def paste(photo: Image.Image, piece: Image.Image, at: tuple[int, int]) -> list[int]:
    photo.paste(piece, at)
    return [at[0], at[1], piece.width, piece.height]


def unreadable(size: tuple[int, int], text: str) -> Image.Image:
    """A plate-like rectangle whose text is too small and blurred to read."""
    big = panel((size[0] * 4, size[1] * 4), text, size[1] * 2, (236, 236, 228), (25, 25, 35), 4)
    small = big.resize((size[0] // 2, size[1] // 2), Image.Resampling.BOX)
    return small.resize(size, Image.Resampling.BILINEAR).filter(ImageFilter.GaussianBlur(1.2))


def make_plate() -> tuple[Image.Image, dict[str, object]]:
    left, _right, _disp = data.stereo_motorcycle()
    photo = Image.fromarray(np.asarray(left)).convert("RGB")
    # Downscale the photo so the PNG stays small; the plates are pasted at full sharpness.
    photo = photo.resize((640, 432), Image.Resampling.LANCZOS)
    plate = panel((150, 44), "154-JDX", 22, (250, 214, 40), (20, 20, 25), 2)
    boxes = [
        paste(photo, plate, (36, 214)),
        paste(photo, unreadable((40, 14), "XR-88-TQ"), (534, 176)),
        paste(photo, unreadable((36, 12), "MK 4417"), (470, 402)),
    ]
    meta: dict[str, object] = {
        "image": "plate.png",
        "question": "What is the licence plate number?",
        "answer": "154-JDX",
        "boxes": boxes,
    }
    return photo, meta


def make_sign() -> tuple[Image.Image, dict[str, object]]:
    photo = Image.fromarray(np.asarray(data.coffee())).convert("RGB")
    sign = panel((250, 50), "OPEN 24 HOURS", 24, (245, 245, 240), (160, 15, 15), 2)
    boxes = [paste(photo, sign, (336, 18))]
    meta: dict[str, object] = {
        "image": "sign.png",
        "question": "What does the sign say?",
        "answer": "OPEN 24 HOURS",
        "boxes": boxes,
    }
    return photo, meta


def to_json(meta: dict[str, object]) -> str:
    """Indented JSON with each box on one line."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in meta.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for build in (make_plate, make_sign):
        photo, meta = build()
        name = str(meta["image"])
        photo.save(OUT / name, format="PNG", optimize=True)
        (OUT / name).with_suffix(".json").write_text(to_json(meta))
        print(f"wrote {OUT / name} ({(OUT / name).stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
