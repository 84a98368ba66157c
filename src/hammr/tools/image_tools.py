"""Tools that cut, magnify and annotate images.

Boxes are always given in root-image pixels; each tool maps them into the pixels of the
image it is handed (which may itself be a crop or a zoom) with :meth:`Image.to_local`, and
every image it returns carries lineage that maps its own pixels back to the root.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

from hammr.tools.base import BadArguments, tool
from hammr.values import Box, Image

MAX_ZOOM_FACTOR = 16.0
MAX_OUTPUT_PIXELS = 40_000_000

_SNAP = 1e-6
"""Local coordinates this close to an integer are treated as that integer (float noise)."""

_FONT_PATHS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSans-Bold.ttf"),
)

PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75),
    (60, 180, 75),
    (0, 130, 200),
    (255, 225, 25),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
    (0, 128, 128),
)


def _fmt(v: float) -> str:
    return str(round(v)) if abs(v - round(v)) < 1e-6 else f"{v:.1f}"


def _where(box: Box) -> str:
    return f"[{_fmt(box.x)}, {_fmt(box.y)}, {_fmt(box.w)}, {_fmt(box.h)}]"


def _floor(v: float) -> int:
    r = round(v)
    return int(r) if abs(v - r) < _SNAP else math.floor(v)


def _ceil(v: float) -> int:
    r = round(v)
    return int(r) if abs(v - r) < _SNAP else math.ceil(v)


def _clip_local(image: Image, box: Box, what: str) -> tuple[float, float, float, float]:
    """The part of a root box inside ``image``, as local (left, top, right, bottom) floats."""
    local = image.to_local(box)
    left, top = max(0.0, local.x), max(0.0, local.y)
    right, bottom = min(float(image.width), local.x2), min(float(image.height), local.y2)
    if right - left <= _SNAP or bottom - top <= _SNAP:
        raise BadArguments(
            f"{what} {_where(box)} lies outside the image, which covers the region "
            f"{_where(image.bounds())} of the original image (boxes are in original-image pixels)"
        )
    return left, top, right, bottom


def crop_one(image: Image, box: Box, what: str = "box") -> Image:
    """Crop ``box`` (root px) out of ``image`` on whole local pixels covering it, clipped."""
    left, top, right, bottom = _clip_local(image, box, what)
    x0, y0 = _floor(left), _floor(top)
    x1, y1 = max(_ceil(right), x0 + 1), max(_ceil(bottom), y0 + 1)
    x1, y1 = min(x1, image.width), min(y1, image.height)
    return Image(
        image.pixels.crop((x0, y0, x1, y1)),
        parent=image,
        crop_box=image.to_root(Box(x0, y0, x1 - x0, y1 - y0)),
        zoom=image.zoom,
    )


@tool
def CropImage(image: Image, boxes: list[Box]) -> Image | list[Image]:
    """Cut one or more regions out of an image (e.g. to read text or look closer).

    Args:
        image: the image to crop (may itself be a crop).
        boxes: boxes [x, y, w, h] in original-image pixels; parts outside the image are cut off.

    Returns:
        an image for one box, a list of images for several
    """
    if not boxes:
        raise BadArguments("CropImage needs at least one box")
    crops = [
        crop_one(image, b, "box" if len(boxes) == 1 else f"box {i}") for i, b in enumerate(boxes)
    ]
    return crops[0] if len(crops) == 1 else crops


@tool
def ZoomIn(image: Image, box: Box, factor: float = 2.0) -> Image:
    """Crop a region and enlarge it to see small details.

    Args:
        image: the image to zoom into.
        box: region [x, y, w, h] in original-image pixels.
        factor: magnification, above 0 and at most 16.

    Returns:
        image
    """
    if not math.isfinite(factor) or factor <= 0 or factor > MAX_ZOOM_FACTOR:
        raise BadArguments(
            f"ZoomIn factor must be a number above 0 and at most {MAX_ZOOM_FACTOR:g}, "
            f"got {factor!r}"
        )
    left, top, right, bottom = _clip_local(image, box, "box")
    out_w = math.floor((right - left) * factor + _SNAP)
    out_h = math.floor((bottom - top) * factor + _SNAP)
    if out_w < 1 or out_h < 1:
        raise BadArguments(
            f"ZoomIn of {_where(box)} by {factor:g} would be smaller than one pixel; "
            "use a larger box or factor"
        )
    if out_w * out_h > MAX_OUTPUT_PIXELS:
        raise BadArguments(
            f"ZoomIn of {_where(box)} by {factor:g} would be {out_w}x{out_h} pixels, above the "
            f"limit of {MAX_OUTPUT_PIXELS}; use a smaller box or factor"
        )
    # Sample exactly out/factor local pixels so the result is an exact `factor` magnification.
    src = (
        left,
        top,
        min(float(image.width), left + out_w / factor),
        min(float(image.height), top + out_h / factor),
    )
    pixels = image.pixels.resize((out_w, out_h), PILImage.Resampling.LANCZOS, box=src)
    region = image.to_root(Box(src[0], src[1], src[2] - src[0], src[3] - src[1]))
    return Image(
        pixels,
        parent=image,
        crop_box=region,
        zoom=image.zoom * factor,
    )


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in _FONT_PATHS:
        if path.exists():
            return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)


def _text_colour(fill: tuple[int, int, int]) -> tuple[int, int, int]:
    r, g, b = fill
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 150 else (255, 255, 255)


@tool
def VisualizeRegions(image: Image, boxes: list[Box], labels: list[str] | None = None) -> Image:
    """Draw labelled boxes on a copy of an image, to check or show regions.

    Args:
        image: the image to draw on (it is not changed).
        boxes: boxes [x, y, w, h] in original-image pixels.
        labels: one label per box; default the boxes' own labels, else their index.

    Returns:
        a new image with the boxes drawn
    """
    if not boxes:
        raise BadArguments("VisualizeRegions needs at least one box")
    if labels is not None and len(labels) != len(boxes):
        raise BadArguments(
            f"VisualizeRegions got {len(labels)} labels for {len(boxes)} boxes; "
            "give one label per box or none"
        )
    names = labels if labels is not None else [b.label or str(i) for i, b in enumerate(boxes)]
    what = ["box" if len(boxes) == 1 else f"box {i}" for i in range(len(boxes))]
    regions = [_clip_local(image, b, w) for b, w in zip(boxes, what, strict=True)]

    canvas = image.pixels.convert("RGB")  # always a copy, so the input is never mutated
    draw = ImageDraw.Draw(canvas)
    short = min(canvas.width, canvas.height)
    width = max(2, round(short / 200))
    font = _font(max(10, round(short / 30)))
    for i, ((left, top, right, bottom), name) in enumerate(zip(regions, names, strict=True)):
        colour = PALETTE[i % len(PALETTE)]
        x0, y0 = _floor(left), _floor(top)
        x1 = max(x0, min(_ceil(right), canvas.width) - 1)
        y1 = max(y0, min(_ceil(bottom), canvas.height) - 1)
        draw.rectangle((x0, y0, x1, y1), outline=colour, width=width)
        if not name:
            continue
        tl, tt, tr, tb = draw.textbbox((0, 0), name, font=font)
        tag_w, tag_h = tr - tl + 2 * width, tb - tt + 2 * width
        tag_y = y0 - tag_h if y0 - tag_h >= 0 else y0  # above the box when there is room
        tag_x = min(x0, max(0, canvas.width - tag_w))
        draw.rectangle((tag_x, tag_y, tag_x + tag_w - 1, tag_y + tag_h - 1), fill=colour)
        draw.text(
            (tag_x + width - tl, tag_y + width - tt), name, fill=_text_colour(colour), font=font
        )
    return Image(canvas, parent=image.parent, crop_box=image.crop_box, zoom=image.zoom)
