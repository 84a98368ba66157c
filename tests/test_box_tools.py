from __future__ import annotations

from typing import Any

import pytest

from hammr.tools.base import BadArguments, ToolContext, bind_arguments
from hammr.tools.box_tools import BoundingBoxOverlap, SpatialSelection
from hammr.values import Box


async def call(tool: Any, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return (await tool.invoke(bound, ToolContext())).value


async def test_iou_hand_computed() -> None:
    boxes = [[5, 5, 10, 10], [0, 0, 10, 10], [20, 20, 5, 5], [0, 0, 5, 10], [10, 0, 5, 5]]
    got = await call(BoundingBoxOverlap, [0, 0, 10, 10], boxes)
    # 25 / (100 + 100 - 25); identical; disjoint; half; touching edge only
    assert got == pytest.approx([25 / 175, 1.0, 0.0, 0.5, 0.0])


async def test_iou_single_box_still_a_list() -> None:
    assert await call(BoundingBoxOverlap, Box(0, 0, 4, 4), Box(2, 0, 4, 4)) == pytest.approx(
        [8 / 24]
    )


async def test_iou_bad_args() -> None:
    with pytest.raises(BadArguments, match="empty list"):
        await call(BoundingBoxOverlap, [0, 0, 1, 1], [])
    with pytest.raises(BadArguments, match="must be a box"):
        await call(BoundingBoxOverlap, "car", [[0, 0, 1, 1]])


BOXES = [
    Box(10, 50, 20, 20, label="A"),  # centre (20, 60), area 400
    Box(100, 10, 10, 10, label="B"),  # centre (105, 15), area 100
    Box(40, 80, 60, 30, label="C"),  # centre (70, 95), area 1800
    Box(0, 60, 5, 5, label="D"),  # centre (2.5, 62.5), area 25
]


@pytest.mark.parametrize(
    ("relation", "label"),
    [
        ("leftmost", "D"),  # x = 0
        ("rightmost", "B"),  # x2 = 110
        ("topmost", "B"),  # y = 10
        ("bottommost", "C"),  # y2 = 110
        ("largest", "C"),
        ("smallest", "D"),
        # union spans x 0..110, y 10..110 -> centre (55, 60): A is 35 away, C 38.1, D 52.6
        ("center", "A"),
    ],
)
async def test_spatial_selection(relation: str, label: str) -> None:
    got = await call(SpatialSelection, BOXES, relation)
    assert got.label == label
    assert got is BOXES["ABCD".index(label)]


async def test_nearest_to_point() -> None:
    assert (await call(SpatialSelection, BOXES, "nearest", point=[100, 20])).label == "B"
    assert (await call(SpatialSelection, BOXES, "nearest", point=(0, 70))).label == "D"


async def test_ties_go_to_first() -> None:
    twins = [[0, 0, 10, 10], [50, 0, 10, 10], [0, 50, 10, 10]]
    assert (await call(SpatialSelection, twins, "largest")) == Box(0, 0, 10, 10)
    assert (await call(SpatialSelection, twins, "topmost")) == Box(0, 0, 10, 10)
    assert (await call(SpatialSelection, twins, "leftmost")) == Box(0, 0, 10, 10)
    assert (await call(SpatialSelection, twins, "bottommost")) == Box(0, 50, 10, 10)
    assert (await call(SpatialSelection, twins, "nearest", point=[30, 5])) == Box(0, 0, 10, 10)


async def test_single_box() -> None:
    assert await call(SpatialSelection, [1, 2, 3, 4], "center") == Box(1, 2, 3, 4)


@pytest.mark.parametrize(
    ("args", "kwargs", "needle"),
    [
        ((BOXES, "nearest"), {}, r"'nearest' needs point=\[x, y\]"),
        ((BOXES, "leftmost"), {"point": [1, 2]}, "only used with relation 'nearest'"),
        ((BOXES, "middle"), {}, "must be one of 'leftmost'"),
        (([], "largest"), {}, "empty list"),
        ((BOXES, "nearest"), {"point": [1, 2, 3]}, r"must be a point \[x, y\]"),
        ((BOXES, "nearest"), {"point": "here"}, r"must be a point \[x, y\]"),
        (([[0, 0, float("nan"), 1]], "largest"), {}, "finite"),
    ],
)
async def test_spatial_selection_bad_args(
    args: tuple[Any, ...], kwargs: dict[str, Any], needle: str
) -> None:
    with pytest.raises(BadArguments, match=needle):
        await call(SpatialSelection, *args, **kwargs)


def test_card_lists_relations() -> None:
    card = SpatialSelection.card()
    assert "'leftmost'|'rightmost'" in card and "'nearest'" in card
    assert "point: point = None" in card
