from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hammr.tools.base import BadArguments, ToolContext, bind_arguments
from hammr.tools.image_tools import CropImage, ZoomIn
from hammr.tools.point_tools import MARK_COLOUR, CropAroundPoint, MarkPoint
from hammr.values import Box, Image

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


async def call(tool: Any, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return (await tool.invoke(bound, ToolContext())).value


@pytest.fixture
def photo() -> Image:
    return Image.open(EXAMPLES / "plate.png")  # a real photo, 640x432


def _changed(a: Image, b: Image) -> np.ndarray:
    diff = np.abs(np.asarray(a.pixels, dtype=int) - np.asarray(b.pixels, dtype=int))
    changed: np.ndarray = diff.sum(axis=2) > 0
    return changed


# -- MarkPoint -------------------------------------------------------------------------------


async def test_mark_changes_pixels_at_the_point_only(photo: Image) -> None:
    before = np.asarray(photo.pixels).copy()
    marked = await call(MarkPoint, photo, [300, 200])
    assert (marked.width, marked.height) == (photo.width, photo.height)
    assert np.array_equal(np.asarray(photo.pixels), before)  # the input is untouched
    assert tuple(np.asarray(marked.pixels)[200, 300]) == MARK_COLOUR
    changed = _changed(photo, marked)
    ys, xs = np.nonzero(changed)
    # Short side 432: radius ~17 px, arms 1.6x that; nothing changes much farther away.
    assert xs.min() >= 300 - 40 and xs.max() <= 300 + 40
    assert ys.min() >= 200 - 40 and ys.max() <= 200 + 40
    assert changed[200, 290] and changed[190, 300]  # the crosshair arms
    assert not changed[100, 100] and not changed[400, 600]


async def test_mark_keeps_lineage_like_visualize(photo: Image) -> None:
    crop = await call(CropImage, photo, [200, 100, 200, 150])
    marked = await call(MarkPoint, crop, [250, 150])
    assert marked.parent is crop.parent
    assert marked.crop_box == crop.crop_box
    assert marked.zoom == crop.zoom
    # root (250, 150) is local (50, 50) in the crop
    assert tuple(np.asarray(marked.pixels)[50, 50]) == MARK_COLOUR


async def test_mark_in_a_zoom_uses_local_pixels(photo: Image) -> None:
    zoom = await call(ZoomIn, photo, [100, 100, 100, 50], factor=2.0)
    marked = await call(MarkPoint, zoom, [150, 120])
    assert marked.zoom == 2.0
    assert tuple(np.asarray(marked.pixels)[40, 100]) == MARK_COLOUR


async def test_mark_at_the_edge_is_allowed(photo: Image) -> None:
    marked = await call(MarkPoint, photo, [640, 0])
    assert _changed(photo, marked)[0, 639]


@pytest.mark.parametrize("point", [[-1, 10], [10, 433], [700, 700]])
async def test_mark_outside_is_refused(photo: Image, point: list[float]) -> None:
    with pytest.raises(BadArguments, match="lies outside the image"):
        await call(MarkPoint, photo, point)


async def test_point_outside_a_crop_names_the_region(photo: Image) -> None:
    crop = await call(CropImage, photo, [200, 100, 200, 150])
    with pytest.raises(BadArguments) as e:
        await call(MarkPoint, crop, [100, 120])
    assert "[100, 120]" in str(e.value) and "[200, 100, 200, 150]" in str(e.value)


async def test_point_must_be_two_numbers(photo: Image) -> None:
    with pytest.raises(BadArguments, match="must be a point"):
        await call(MarkPoint, photo, [1, 2, 3])


# -- CropAroundPoint -------------------------------------------------------------------------


async def test_crop_centred_on_the_point(photo: Image) -> None:
    crop = await call(CropAroundPoint, photo, [320, 200], size=100)
    assert crop.crop_box == Box(270, 150, 100, 100)
    assert crop.parent is photo
    assert np.array_equal(np.asarray(crop.pixels), np.asarray(photo.pixels)[150:250, 270:370])


async def test_crop_near_a_corner_shifts_inside(photo: Image) -> None:
    crop = await call(CropAroundPoint, photo, [10, 420])  # default size 224
    assert crop.crop_box == Box(0, 432 - 224, 224, 224)
    assert (crop.width, crop.height) == (224, 224)
    crop = await call(CropAroundPoint, photo, [639, 5], size=50)
    assert crop.crop_box == Box(590, 0, 50, 50)


async def test_crop_larger_than_the_image_is_capped(photo: Image) -> None:
    crop = await call(CropAroundPoint, photo, [100, 100], size=1000)
    assert crop.crop_box == Box(0, 0, 640, 432)


async def test_crop_of_a_zoom_maps_exactly_to_root(photo: Image) -> None:
    zoom = await call(ZoomIn, photo, [100, 100, 200, 100], factor=2.0)  # 400x200 px
    crop = await call(CropAroundPoint, zoom, [290, 195], size=40)
    # square [270, 175, 40, 40] in root, shifted inside the zoom's region [100, 100, 200, 100]
    assert crop.crop_box == Box(260, 160, 40, 40)
    assert (crop.width, crop.height) == (80, 80)
    assert crop.zoom == 2.0 and crop.root is photo
    # a box found in the crop's pixels maps back to root pixels
    assert crop.to_root(Box(0, 0, 20, 10)) == Box(260, 160, 10, 5)
    # and the pixels are those of the zoom at the matching place
    assert np.array_equal(np.asarray(crop.pixels), np.asarray(zoom.pixels)[120:200, 320:400])


async def test_crop_rejects_bad_size_and_outside_point(photo: Image) -> None:
    with pytest.raises(BadArguments, match="size must be a positive number"):
        await call(CropAroundPoint, photo, [10, 10], size=0)
    with pytest.raises(BadArguments, match="lies outside the image"):
        await call(CropAroundPoint, photo, [641, 10])
