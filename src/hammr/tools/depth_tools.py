"""Depth of regions and objects from the configured 'depth' backend (monocular depth maps).

The backend returns one map per image (larger = farther, in the backend's own units, often
relative). Boxes are in root-image pixels and are mapped into the image handed to the tool.
As MuSE's depth tools do (MuSEAgent, appendix C: region depth "outputs statistical results"),
both tools report statistics of the depth over a box's pixels: mean, median (robust to edges
that spill onto the background), min and max.

``EstimateObjectDepth`` takes an object's name, as MuSE's tool does ("combines object
recognition with monocular depth estimation"): it finds the object with the 'detect'
capability (the code of DetectObject, boxes best first) and reports each instance's depth; a
name that finds nothing is an observation the agent can act on, not a failure.
"""

from __future__ import annotations

import numpy as np

from hammr.tools.base import BadArguments, ToolContext, ToolError, ToolResult, tool
from hammr.tools.image_tools import _ceil, _clip_local, _floor
from hammr.tools.vision_tools import _detect
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


def region_values(depth: np.ndarray, image: Image, box: Box, what: str = "box") -> np.ndarray:
    """The finite depth values over the pixels of ``image`` that ``box`` (root px) covers.

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
    finite: np.ndarray = values[np.isfinite(values)]
    if finite.size == 0:
        raise ToolError(f"the depth map has no valid values inside {what}")
    return finite


def region_median(depth: np.ndarray, image: Image, box: Box, what: str = "box") -> float:
    """Median depth over the pixels of ``image`` that ``box`` (root px) covers."""
    return float(np.median(region_values(depth, image, box, what)))


def region_stats(depth: np.ndarray, image: Image, box: Box, what: str = "box") -> dict[str, float]:
    """{mean, median, min, max} of the depth over the pixels ``box`` covers: the statistics
    MuSE's depth tools report, so an agent can tell a flat region (min close to max) from one
    that spans foreground and background."""
    values = region_values(depth, image, box, what)
    return {
        "mean": float(np.mean(values)),
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
    }


async def _region_depth(image: Image, box: Box, ctx: ToolContext) -> dict[str, float]:
    """Depth statistics of one region of an image (larger = farther; compare, don't read
    the numbers as metres).

    Args:
        image: the image (or a crop of it) to estimate depth in.
        box: the region [x, y, w, h] in original-image pixels.

    Returns:
        {mean, median, min, max} of the region's depth, larger = farther
    """
    return region_stats(await depth_map(image, ctx), image, box)


async def _object_depth(image: Image, name: str, ctx: ToolContext) -> ToolResult:
    """Find an object by name (object detection), then report how far away it is: the depth
    statistics of each instance found, best detection first (larger = farther).

    Args:
        image: the image (or a crop of it) showing the object.
        name: what to find, e.g. 'dog' or 'red car'.

    Returns:
        a list with one {box, mean, median, min, max} per instance found, larger = farther;
        an empty list when the object is not found
    """
    if not isinstance(name, str) or not name.strip():
        raise BadArguments("EstimateObjectDepth argument 'name' is empty: name the object")
    found = await _detect(image, name.strip(), ctx)
    boxes: list[Box] = list(found.value)
    if not boxes:
        return ToolResult(
            [],
            observation=(
                f"no '{name.strip()}' found, so no depth: try another name for it, or "
                "EstimateRegionDepth with a box"
            ),
        )
    depth = await depth_map(image, ctx)
    what = ["box" if len(boxes) == 1 else f"box {i}" for i in range(len(boxes))]
    return ToolResult(
        [{"box": b, **region_stats(depth, image, b, w)} for b, w in zip(boxes, what, strict=True)]
    )


EstimateRegionDepth = tool(_region_depth, name="EstimateRegionDepth", capability="depth")
EstimateObjectDepth = tool(_object_depth, name="EstimateObjectDepth", capability="depth")
"""Uses the 'detect' capability too (to find the object), through DetectObject's code."""
