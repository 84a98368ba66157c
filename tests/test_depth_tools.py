from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

from hammr.tools.base import (
    BadArguments,
    CapabilityMissing,
    ToolContext,
    ToolError,
    bind_arguments,
)
from hammr.tools.depth_tools import EstimateObjectDepth, EstimateRegionDepth
from hammr.tools.image_tools import CropImage, ZoomIn
from hammr.values import Image


class ScriptedDepth:
    """Depth = the pixel's column index (a left-to-right gradient), or a given map."""

    def __init__(self, fixed: np.ndarray | None = None, maps_per_call: int = 1) -> None:
        self.fixed = fixed
        self.maps_per_call = maps_per_call
        self.calls: list[list[Image]] = []

    async def depth(self, images: list[Image]) -> list[np.ndarray]:
        self.calls.append(images)
        out = []
        for im in images:
            if self.fixed is not None:
                out.append(self.fixed)
            else:
                row = np.arange(im.width, dtype=np.float32)
                out.append(np.tile(row, (im.height, 1)))
        return out * self.maps_per_call


async def call(tool: Any, ctx: ToolContext, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return (await tool.invoke(bound, ctx)).value


@pytest.fixture
def root() -> Image:
    return Image(PILImage.new("RGB", (200, 100), (90, 120, 150)))


def ctx_with(backend: Any) -> ToolContext:
    return ToolContext(backends={"depth": backend})


async def test_region_median_with_scripted_depth(root: Image) -> None:
    fake = ScriptedDepth()
    # columns 10..29 -> values 10..29, median 19.5
    assert await call(EstimateRegionDepth, ctx_with(fake), root, [10, 20, 20, 30]) == 19.5
    # columns 100..104 -> median 102
    assert await call(EstimateRegionDepth, ctx_with(fake), root, [100, 0, 5, 100]) == 102.0
    assert len(fake.calls) == 2 and fake.calls[0] == [root]


async def test_region_clipped_to_the_image_with_scripted_depth(root: Image) -> None:
    # [190, 50, 30, 30] covers columns 190..199 inside the image -> median 194.5
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth()), root, [190, 50, 30, 30])
    assert got == 194.5


async def test_object_depths_one_backend_call_with_scripted_depth(root: Image) -> None:
    fake = ScriptedDepth()
    boxes = [[0, 0, 10, 10], [50, 40, 11, 10], [150, 0, 50, 100]]
    got = await call(EstimateObjectDepth, ctx_with(fake), root, boxes)
    assert got == [4.5, 55.0, 174.5]
    assert len(fake.calls) == 1  # one depth map for all the boxes


async def test_root_boxes_map_to_local_for_a_crop_with_scripted_depth(root: Image) -> None:
    crop = await call(CropImage, ToolContext(), root, [50, 20, 100, 60])
    fake = ScriptedDepth()  # the crop's own map: its local column index
    # root columns 60..69 are local columns 10..19 of the crop -> median 14.5
    got = await call(EstimateRegionDepth, ctx_with(fake), crop, [60, 30, 10, 10])
    assert got == 14.5
    assert fake.calls[0] == [crop]
    got = await call(EstimateObjectDepth, ctx_with(fake), crop, [[50, 20, 4, 4], [140, 70, 10, 10]])
    assert got == [1.5, 94.5]


async def test_root_boxes_map_to_local_for_a_zoom_with_scripted_depth(root: Image) -> None:
    zoom = await call(ZoomIn, ToolContext(), root, [100, 0, 50, 50], factor=2.0)  # 100x100
    # root columns 110..114 are local columns 20..29 -> median 24.5
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth()), zoom, [110, 10, 5, 5])
    assert got == 24.5


async def test_low_resolution_map_is_read_in_proportion_with_scripted_depth(
    root: Image,
) -> None:
    small = np.tile(np.arange(20, dtype=np.float32), (10, 1))  # a 20x10 map for 200x100
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth(small)), root, [100, 0, 20, 50])
    assert got == 10.5  # map columns 10 and 11


async def test_nan_pixels_are_ignored_with_scripted_depth(root: Image) -> None:
    depth = np.full((100, 200), np.nan, dtype=np.float32)
    depth[:, :5] = 3.0
    fake = ScriptedDepth(depth)
    assert await call(EstimateRegionDepth, ctx_with(fake), root, [0, 0, 10, 10]) == 3.0
    with pytest.raises(ToolError, match="no valid values"):
        await call(EstimateRegionDepth, ctx_with(fake), root, [50, 0, 10, 10])


async def test_box_outside_is_refused_with_scripted_depth(root: Image) -> None:
    with pytest.raises(BadArguments, match="lies outside the image"):
        await call(EstimateRegionDepth, ctx_with(ScriptedDepth()), root, [300, 0, 10, 10])
    crop = await call(CropImage, ToolContext(), root, [50, 20, 100, 60])
    with pytest.raises(BadArguments, match=r"box 1 \[0, 0, 10, 10\] lies outside"):
        await call(
            EstimateObjectDepth, ctx_with(ScriptedDepth()), crop, [[60, 30, 5, 5], [0, 0, 10, 10]]
        )


async def test_bad_backend_output_is_a_tool_error_with_scripted_depth(root: Image) -> None:
    with pytest.raises(ToolError, match="2 maps for 1 image"):
        await call(
            EstimateRegionDepth, ctx_with(ScriptedDepth(maps_per_call=2)), root, [0, 0, 5, 5]
        )
    with pytest.raises(ToolError, match="expected 2-D"):
        await call(EstimateRegionDepth, ctx_with(ScriptedDepth(np.zeros(5))), root, [0, 0, 5, 5])


async def test_missing_capability(root: Image) -> None:
    with pytest.raises(CapabilityMissing) as e:
        await call(EstimateRegionDepth, ToolContext(), root, [0, 0, 5, 5])
    assert str(e.value) == (
        "capability 'depth' has no backend configured (see hammr.toml [tools.depth])"
    )
    with pytest.raises(CapabilityMissing):
        await call(EstimateObjectDepth, ToolContext(), root, [[0, 0, 5, 5]])


def test_cards_say_larger_is_farther() -> None:
    assert EstimateRegionDepth.capability == "depth"
    assert EstimateObjectDepth.capability == "depth"
    for t in (EstimateRegionDepth, EstimateObjectDepth):
        assert "larger = farther" in t.card()
