"""Depth of regions and objects from the configured 'depth' backend (monocular depth maps).

The backend returns one map per image (larger = farther, in the backend's own units, often
relative). Boxes are in root-image pixels and are mapped into the image handed to the tool;
each box's depth is the median over the map pixels it covers (robust to edges that spill
onto the background).
"""

from __future__ import annotations

import numpy as np

from hammr.tools.base import ToolContext, ToolError, tool
from hammr.tools.image_tools import _ceil, _clip_local, _floor
from hammr.values import Box, Image


async def depth_map(image: Image, ctx: ToolContext) -> np.ndarray:
    """The backend's depth map for ``image`` as a 2-D float array."""
    maps = await ctx.backend("depth").depth([image])
    if len(maps) != 1:
        raise ToolError(f"depth backend returned {len(maps)} maps for 1 image")
    arr = np.asarray(maps[0], dtype=np.float64)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim != 2 or arr.size == 0:
        raise ToolError(f"depth backend returned a map of shape {arr.shape}, expected 2-D")
    return arr


def region_median(depth: np.ndarray, image: Image, box: Box, what: str = "box") -> float:
    """Median depth over the pixels of ``image`` that ``box`` (root px) covers.

    A map whose size differs from the image's is read in proportion (models often predict at
    a lower resolution); for an image-sized map this is exactly the box's pixels.
    """
    left, top, right, bottom = _clip_local(image, box, what)
    mh, mw = depth.shape
    sx, sy = mw / image.width, mh / image.height
    x0, y0 = _floor(left * sx), _floor(top * sy)
    x1 = min(max(_ceil(right * sx), x0 + 1), mw)
    y1 = min(max(_ceil(bottom * sy), y0 + 1), mh)
    values = depth[y0:y1, x0:x1]
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        raise ToolError(f"the depth map has no valid values inside {what}")
    return float(np.median(finite))


async def _region_depth(image: Image, box: Box, ctx: ToolContext) -> float:
    """Median depth inside one region of an image (larger = farther; compare, don't read
    the number as metres).

    Args:
        image: the image (or a crop of it) to estimate depth in.
        box: the region [x, y, w, h] in original-image pixels.

    Returns:
        a number, larger = farther
    """
    return region_median(await depth_map(image, ctx), image, box)


async def _object_depth(image: Image, boxes: list[Box], ctx: ToolContext) -> list[float]:
    """Median depth of each of several objects, e.g. boxes from object detection, to tell
    which is closer (larger = farther).

    Args:
        image: the image (or a crop of it) showing the objects.
        boxes: the objects' boxes [x, y, w, h] in original-image pixels.

    Returns:
        a list of numbers, one per box, larger = farther
    """
    depth = await depth_map(image, ctx)
    what = ["box" if len(boxes) == 1 else f"box {i}" for i in range(len(boxes))]
    return [region_median(depth, image, b, w) for b, w in zip(boxes, what, strict=True)]


EstimateRegionDepth = tool(_region_depth, name="EstimateRegionDepth", capability="depth")
EstimateObjectDepth = tool(_object_depth, name="EstimateObjectDepth", capability="depth")
