"""Tools for questions about a point (PointQA): mark it, or crop around it.

Points are (x, y) in root-image pixels, like boxes; each tool maps the point into the image
it is handed (which may be a crop or a zoom) and refuses points outside that image.
"""

from __future__ import annotations

import math

from PIL import ImageDraw

from hammr.tools.base import BadArguments, tool
from hammr.tools.image_tools import _fmt, _where, crop_one
from hammr.values import Box, Image

MARK_COLOUR = (255, 0, 255)
"""Magenta: rare in photos, so the marker stands out."""

OUTLINE_COLOUR = (0, 0, 0)


def _show_point(point: tuple[float, float]) -> str:
    return f"[{_fmt(point[0])}, {_fmt(point[1])}]"


def to_local_point(image: Image, point: tuple[float, float], tool_name: str) -> tuple[float, float]:
    """Map a root-pixel point into ``image``'s pixels; BadArguments when it lies outside."""
    x, y = point
    if not (math.isfinite(x) and math.isfinite(y)):
        raise BadArguments(f"{tool_name}: the point must be two finite numbers [x, y]")
    ox, oy = image.origin
    lx, ly = (x - ox) * image.zoom, (y - oy) * image.zoom
    if not (0 <= lx <= image.width and 0 <= ly <= image.height):
        raise BadArguments(
            f"{tool_name}: the point {_show_point(point)} lies outside the image, which covers "
            f"the region {_where(image.bounds())} of the original image (points are in "
            "original-image pixels)"
        )
    return lx, ly


@tool
def MarkPoint(image: Image, point: tuple[float, float]) -> Image:
    """Draw a crosshair and circle at a point on a copy of an image, to show where it is.

    Args:
        image: the image to draw on (it is not changed).
        point: [x, y] in original-image pixels.

    Returns:
        a new image with the point marked
    """
    lx, ly = to_local_point(image, point, "MarkPoint")
    canvas = image.pixels.convert("RGB")  # always a copy
    draw = ImageDraw.Draw(canvas)
    short = min(canvas.width, canvas.height)
    width = max(1, round(short / 250))
    radius = max(6.0, short / 25)
    arm = radius * 1.6
    cx, cy = min(lx, canvas.width - 1), min(ly, canvas.height - 1)
    # A dark outline under the bright marker keeps it visible on light and dark backgrounds.
    for colour, w in ((OUTLINE_COLOUR, width + 2), (MARK_COLOUR, width)):
        draw.line((cx - arm, cy, cx + arm, cy), fill=colour, width=w)
        draw.line((cx, cy - arm, cx, cy + arm), fill=colour, width=w)
        draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), outline=colour, width=w)
    return Image(canvas, parent=image.parent, crop_box=image.crop_box, zoom=image.zoom)


def _window(centre: float, size: float, lo: float, hi: float) -> tuple[float, float]:
    """A span of ``size`` centred on ``centre``, shifted to lie within [lo, hi]."""
    size = min(size, hi - lo)
    start = min(max(centre - size / 2, lo), hi - size)
    return start, size


@tool
def CropAroundPoint(image: Image, point: tuple[float, float], size: float = 224) -> Image:
    """Crop a square centred on a point (moved inward near the edges) to look at it closely.

    Args:
        image: the image to crop (may itself be a crop).
        point: [x, y] in original-image pixels.
        size: side of the square in original-image pixels; capped at the image's size.

    Returns:
        image
    """
    if not math.isfinite(size) or size <= 0:
        raise BadArguments(f"CropAroundPoint size must be a positive number, got {size!r}")
    to_local_point(image, point, "CropAroundPoint")
    bounds = image.bounds()
    size = max(size, 1 / image.zoom)  # at least one pixel of this image
    x, w = _window(point[0], size, bounds.x, bounds.x2)
    y, h = _window(point[1], size, bounds.y, bounds.y2)
    return crop_one(image, Box(x, y, w, h), "the square around the point")
