"""Tools that compare and pick boxes (all in root-image pixels)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from hammr.tools.base import BadArguments, tool
from hammr.values import Box

Relation = Literal[
    "leftmost", "rightmost", "topmost", "bottommost", "largest", "smallest", "center", "nearest"
]


@tool
def BoundingBoxOverlap(anchor: Box, boxes: list[Box]) -> list[float]:
    """Intersection-over-union (0 to 1) of one box with each of several boxes.

    Args:
        anchor: the box to compare against.
        boxes: the boxes to compare.

    Returns:
        a list of numbers, one per box
    """
    return [anchor.iou(b) for b in boxes]


def _distance(box: Box, point: tuple[float, float]) -> float:
    cx, cy = box.center
    return math.hypot(cx - point[0], cy - point[1])


def _union_center(boxes: list[Box]) -> tuple[float, float]:
    x0, y0 = min(b.x for b in boxes), min(b.y for b in boxes)
    x1, y1 = max(b.x2 for b in boxes), max(b.y2 for b in boxes)
    return ((x0 + x1) / 2, (y0 + y1) / 2)


@tool
def SpatialSelection(
    boxes: list[Box], relation: Relation, point: tuple[float, float] | None = None
) -> Box:
    """Pick one box by position or size. Ties go to the earliest box in the list.

    Args:
        boxes: the boxes to choose from.
        relation: leftmost..bottommost compare box edges, largest/smallest areas; center is
            the box closest to the middle of all the boxes, nearest the one closest to point.
        point: [x, y] in original-image pixels, only for relation 'nearest'.

    Returns:
        box
    """
    if not boxes:
        raise BadArguments("SpatialSelection needs at least one box")
    if relation == "nearest" and point is None:
        raise BadArguments("SpatialSelection relation 'nearest' needs point=[x, y]")
    if relation != "nearest" and point is not None:
        raise BadArguments(
            f"SpatialSelection argument 'point' is only used with relation 'nearest', "
            f"not {relation!r}; leave it out"
        )
    keys: dict[str, Callable[[Box], float]] = {
        "leftmost": lambda b: b.x,
        "rightmost": lambda b: -b.x2,
        "topmost": lambda b: b.y,
        "bottommost": lambda b: -b.y2,
        "largest": lambda b: -b.area,
        "smallest": lambda b: b.area,
    }
    if relation == "center":
        target = _union_center(boxes)
        key: Callable[[Box], float] = lambda b: _distance(b, target)  # noqa: E731
    elif relation == "nearest":
        assert point is not None
        where = point
        key = lambda b: _distance(b, where)  # noqa: E731
    elif relation in keys:
        key = keys[relation]
    else:  # the decorator already checks the choices; this guards direct calls
        raise BadArguments(f"SpatialSelection: unknown relation {relation!r}")
    # min() keeps the first of equal keys, which is the documented tie-break.
    return min(boxes, key=key)
