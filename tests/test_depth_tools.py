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
from hammr.values import Box, Image


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


class ScriptedDetector:
    """Scripted 'detect' backend: the given root boxes of a name, in the handed image's pixels
    (as a real detector reports them), with their scores."""

    def __init__(self, scene: dict[str, list[Box]]) -> None:
        self.scene = scene
        self.calls: list[str] = []

    async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]:
        self.calls += names
        out = []
        for image, name in zip(images, names, strict=True):
            found = []
            for b in self.scene.get(name, []):
                local = image.to_local(b)
                found.append(Box(local.x, local.y, local.w, local.h, name, b.score))
            out.append(found)
        return out


async def call(tool: Any, ctx: ToolContext, *args: Any, **kwargs: Any) -> Any:
    return (await result(tool, ctx, *args, **kwargs)).value


async def result(tool: Any, ctx: ToolContext, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return await tool.invoke(bound, ctx)


def stats(mean: float, median: float, low: float, high: float) -> dict[str, float]:
    return {"mean": mean, "median": median, "min": low, "max": high}


@pytest.fixture
def root() -> Image:
    return Image(PILImage.new("RGB", (200, 100), (90, 120, 150)))


def ctx_with(backend: Any, detector: Any = None) -> ToolContext:
    backends = {"depth": backend}
    if detector is not None:
        backends["detect"] = detector
    return ToolContext(backends=backends)


async def test_region_statistics_with_scripted_depth(root: Image) -> None:
    fake = ScriptedDepth()
    # columns 10..29 -> values 10..29 in every row: mean = median 19.5, min 10, max 29
    got = await call(EstimateRegionDepth, ctx_with(fake), root, [10, 20, 20, 30])
    assert got == stats(19.5, 19.5, 10.0, 29.0)
    # columns 100..104 -> 102, 100..104
    got = await call(EstimateRegionDepth, ctx_with(fake), root, [100, 0, 5, 100])
    assert got == stats(102.0, 102.0, 100.0, 104.0)
    assert len(fake.calls) == 2 and fake.calls[0] == [root]


async def test_mean_and_median_differ_on_a_skewed_region_with_scripted_depth(
    root: Image,
) -> None:
    depth = np.ones((100, 200), dtype=np.float32)
    depth[0:2, 0:2] = 97.0  # one far corner of a 10x10 region: 4 of 100 pixels
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth(depth)), root, [0, 0, 10, 10])
    assert got == stats((96 * 1.0 + 4 * 97.0) / 100, 1.0, 1.0, 97.0)


async def test_region_clipped_to_the_image_with_scripted_depth(root: Image) -> None:
    # [190, 50, 30, 30] covers columns 190..199 inside the image
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth()), root, [190, 50, 30, 30])
    assert got == stats(194.5, 194.5, 190.0, 199.0)


async def test_object_depth_finds_the_object_first_with_scripted_backends(root: Image) -> None:
    fake = ScriptedDepth()
    cups = [Box(150, 0, 50, 100, score=0.6), Box(0, 0, 10, 10, score=0.9)]
    detector = ScriptedDetector({"cup": cups})
    got = await call(EstimateObjectDepth, ctx_with(fake, detector), root, "cup")
    assert detector.calls == ["cup"]
    # best detection first (DetectObject's order), each with its region's statistics
    assert got == [
        {"box": Box(0, 0, 10, 10, "cup", 0.9), **stats(4.5, 4.5, 0.0, 9.0)},
        {"box": Box(150, 0, 50, 100, "cup", 0.6), **stats(174.5, 174.5, 150.0, 199.0)},
    ]
    assert len(fake.calls) == 1  # one depth map for all the instances


async def test_an_object_not_found_is_an_observation_with_scripted_backends(
    root: Image,
) -> None:
    fake = ScriptedDepth()
    out = await result(EstimateObjectDepth, ctx_with(fake, ScriptedDetector({})), root, "unicorn")
    assert out.value == []
    assert out.observation is not None and "no 'unicorn' found" in out.observation
    assert "EstimateRegionDepth" in out.observation
    assert fake.calls == []  # no depth map asked for
    with pytest.raises(BadArguments, match="'name' is empty"):
        await call(EstimateObjectDepth, ctx_with(fake, ScriptedDetector({})), root, "  ")


async def test_root_boxes_map_to_local_for_a_crop_with_scripted_depth(root: Image) -> None:
    crop = await call(CropImage, ToolContext(), root, [50, 20, 100, 60])
    fake = ScriptedDepth()  # the crop's own map: its local column index
    # root columns 60..69 are local columns 10..19 of the crop
    got = await call(EstimateRegionDepth, ctx_with(fake), crop, [60, 30, 10, 10])
    assert got == stats(14.5, 14.5, 10.0, 19.0)
    assert fake.calls[0] == [crop]
    # a detection in the crop comes back in root pixels; its depth is read from the crop's map
    detector = ScriptedDetector({"mug": [Box(140, 70, 10, 10, score=0.5)]})
    (mug,) = await call(EstimateObjectDepth, ctx_with(fake, detector), crop, "mug")
    assert mug == {"box": Box(140, 70, 10, 10, "mug", 0.5), **stats(94.5, 94.5, 90.0, 99.0)}


async def test_root_boxes_map_to_local_for_a_zoom_with_scripted_depth(root: Image) -> None:
    zoom = await call(ZoomIn, ToolContext(), root, [100, 0, 50, 50], factor=2.0)  # 100x100
    # root columns 110..114 are local columns 20..29
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth()), zoom, [110, 10, 5, 5])
    assert got == stats(24.5, 24.5, 20.0, 29.0)


async def test_low_resolution_map_is_read_in_proportion_with_scripted_depth(
    root: Image,
) -> None:
    small = np.tile(np.arange(20, dtype=np.float32), (10, 1))  # a 20x10 map for 200x100
    got = await call(EstimateRegionDepth, ctx_with(ScriptedDepth(small)), root, [100, 0, 20, 50])
    assert got == stats(10.5, 10.5, 10.0, 11.0)  # map columns 10 and 11


async def test_nan_pixels_are_ignored_with_scripted_depth(root: Image) -> None:
    depth = np.full((100, 200), np.nan, dtype=np.float32)
    depth[:, :5] = 3.0
    fake = ScriptedDepth(depth)
    got = await call(EstimateRegionDepth, ctx_with(fake), root, [0, 0, 10, 10])
    assert got == stats(3.0, 3.0, 3.0, 3.0)
    with pytest.raises(ToolError, match="no valid values"):
        await call(EstimateRegionDepth, ctx_with(fake), root, [50, 0, 10, 10])


async def test_box_outside_is_refused_with_scripted_depth(root: Image) -> None:
    with pytest.raises(BadArguments, match="lies outside the image"):
        await call(EstimateRegionDepth, ctx_with(ScriptedDepth()), root, [300, 0, 10, 10])


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
    with pytest.raises(CapabilityMissing, match="'detect'"):
        await call(EstimateObjectDepth, ctx_with(ScriptedDepth()), root, "cup")
    detector = ScriptedDetector({"cup": [Box(0, 0, 5, 5)]})
    with pytest.raises(CapabilityMissing, match="'depth'"):
        await call(EstimateObjectDepth, ToolContext(backends={"detect": detector}), root, "cup")


def test_cards_say_larger_is_farther_and_what_they_take() -> None:
    assert EstimateRegionDepth.capability == "depth"
    assert EstimateObjectDepth.capability == "depth"
    for t in (EstimateRegionDepth, EstimateObjectDepth):
        card = t.card()
        assert "larger = farther" in card and "mean, median, min, max" in card
    assert [p.name for p in EstimateObjectDepth.params] == ["image", "name"]
    assert EstimateObjectDepth.params[1].kind == "text"
    assert "object detection" in EstimateObjectDepth.card()
