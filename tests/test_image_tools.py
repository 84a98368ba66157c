from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

from hammr.tools.base import BadArguments, ToolContext, bind_arguments
from hammr.tools.image_tools import PALETTE, CropImage, VisualizeRegions, ZoomIn
from hammr.values import Box, Image

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


async def call(tool: Any, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return (await tool.invoke(bound, ToolContext())).value


@pytest.fixture
def arr() -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, size=(120, 200, 3), dtype=np.uint8)


@pytest.fixture
def root(arr: np.ndarray) -> Image:
    return Image(PILImage.fromarray(arr))


# -- CropImage ------------------------------------------------------------------------------


async def test_crop_pixels_equal_numpy_slice(root: Image, arr: np.ndarray) -> None:
    crop = await call(CropImage, root, [40, 20, 100, 80])
    assert isinstance(crop, Image)
    assert (crop.width, crop.height) == (100, 80)
    assert np.array_equal(np.asarray(crop.pixels), arr[20:100, 40:140])
    assert crop.parent is root
    assert crop.crop_box == Box(40, 20, 100, 80)
    assert crop.zoom == 1.0


async def test_crop_of_zoom_of_crop_maps_back_to_root(root: Image) -> None:
    crop1 = await call(CropImage, root, [40, 20, 100, 80])
    # Root box [60, 30, 40, 20] is local (20, 10, 40, 20) in crop1; x2.5 -> 100x50 pixels.
    zoom = await call(ZoomIn, crop1, [60, 30, 40, 20], factor=2.5)
    assert (zoom.width, zoom.height) == (100, 50)
    assert zoom.crop_box == Box(60, 30, 40, 20)
    assert zoom.zoom == 2.5
    assert zoom.parent is crop1
    # Root box [70, 34, 10, 8] is local ((70-60)*2.5, (34-30)*2.5, 25, 20) in the zoom.
    crop2 = await call(CropImage, zoom, [70, 34, 10, 8])
    assert (crop2.width, crop2.height) == (25, 20)
    assert crop2.crop_box == Box(70, 34, 10, 8)
    assert crop2.zoom == 2.5
    assert crop2.root is root
    assert crop2.to_root(Box(0, 0, 25, 20)) == Box(70, 34, 10, 8)
    assert crop2.to_root(Box(5, 5, 10, 10)) == Box(72, 36, 4, 4)
    assert np.array_equal(np.asarray(crop2.pixels), np.asarray(zoom.pixels)[10:30, 25:50])


async def test_crop_fractional_box_covers_it_on_whole_pixels(root: Image) -> None:
    zoom = await call(ZoomIn, root, [60, 30, 40, 20], factor=2.5)
    crop = await call(CropImage, zoom, [70.1, 34, 10, 8])
    # local x from 25.25 to 50.25 -> pixels 25..51 -> root x 70 .. 80.4
    assert crop.width == 26
    assert crop.crop_box.x == pytest.approx(70.0)
    assert crop.crop_box.w == pytest.approx(10.4)
    assert crop.crop_box.x <= 70.1 and crop.crop_box.x2 >= 80.1


async def test_crop_clips_to_image(root: Image, arr: np.ndarray) -> None:
    crop = await call(CropImage, root, [180, 100, 50, 50])
    assert crop.crop_box == Box(180, 100, 20, 20)
    assert np.array_equal(np.asarray(crop.pixels), arr[100:120, 180:200])
    crop = await call(CropImage, root, [-10, -5, 20, 15])
    assert crop.crop_box == Box(0, 0, 10, 10)


async def test_crop_several_boxes_gives_list(root: Image, arr: np.ndarray) -> None:
    boxes = [[0, 0, 10, 10], [50, 60, 30, 20], [150, 100, 50, 20]]
    crops = await call(CropImage, root, boxes)
    assert isinstance(crops, list) and len(crops) == 3
    for crop, (x, y, w, h) in zip(crops, boxes, strict=True):
        assert crop.crop_box == Box(x, y, w, h)
        assert np.array_equal(np.asarray(crop.pixels), arr[y : y + h, x : x + w])


async def test_crop_single_box_in_list_gives_one_image(root: Image) -> None:
    assert isinstance(await call(CropImage, root, [[1, 2, 3, 4]]), Image)
    assert isinstance(await call(CropImage, root, Box(1, 2, 3, 4)), Image)


async def test_crop_bundled_plate_boxes() -> None:
    meta = json.loads((EXAMPLES / "plate.json").read_text())
    image = Image.open(EXAMPLES / meta["image"])
    crops = await call(CropImage, image, meta["boxes"])
    assert [(c.width, c.height) for c in crops] == [(w, h) for _, _, w, h in meta["boxes"]]


@pytest.mark.parametrize(
    ("boxes", "needle"),
    [
        ([500, 500, 10, 10], "outside the image"),
        ([200, 0, 10, 10], "outside the image"),  # touches the right edge only
        ([[0, 0, 5, 5], [0, -50, 10, 10]], "box 1"),
        ([1, 2, 0, 4], "width and height must be positive"),
        ([1, 2, 5, -4], "width and height must be positive"),
        ([1, float("nan"), 5, 4], "finite"),
        ([], "empty list"),
        ("everything", "list of boxes"),
        ([1, 2, 3], "4 numbers"),
    ],
)
async def test_crop_bad_boxes(root: Image, boxes: Any, needle: str) -> None:
    with pytest.raises(BadArguments, match=needle):
        await call(CropImage, root, boxes)


async def test_crop_outside_message_names_region(root: Image) -> None:
    crop = await call(CropImage, root, [100, 50, 50, 50])
    with pytest.raises(BadArguments) as info:
        await call(CropImage, crop, [0, 0, 20, 20])
    assert "[100, 50, 50, 50]" in str(info.value)
    assert "original-image pixels" in str(info.value)


async def test_crop_wrong_image_type() -> None:
    with pytest.raises(BadArguments, match="must be an image"):
        await call(CropImage, "photo.png", [0, 0, 5, 5])


# -- ZoomIn ---------------------------------------------------------------------------------


async def test_zoom_size_lineage_and_pixels() -> None:
    base = PILImage.new("RGB", (100, 80), (10, 20, 30))
    base.paste((250, 0, 0), (20, 20, 60, 50))
    root = Image(base)
    z = await call(ZoomIn, root, [30, 25, 20, 20], factor=3)
    assert (z.width, z.height) == (60, 60)
    assert z.crop_box == Box(30, 25, 20, 20)
    assert z.zoom == 3.0
    assert z.parent is root
    px = np.asarray(z.pixels)
    assert np.all(np.abs(px.astype(int) - [250, 0, 0]) <= 2)


async def test_zoom_default_factor_and_fractional_box(root: Image) -> None:
    z = await call(ZoomIn, root, [10.5, 10, 7, 5])
    assert (z.width, z.height) == (14, 10)
    assert z.zoom == 2.0
    assert z.crop_box == Box(10.5, 10, 7, 5)
    assert z.to_root(Box(0, 0, 14, 10)) == Box(10.5, 10, 7, 5)


async def test_zoom_is_exact_when_size_rounds(root: Image) -> None:
    z = await call(ZoomIn, root, [0, 0, 10.3, 10], factor=3)
    assert (z.width, z.height) == (30, 30)  # floor(30.9)
    assert z.crop_box == Box(0, 0, 10, 10)  # exactly what the 30 pixels show


async def test_zoom_clips(root: Image) -> None:
    z = await call(ZoomIn, root, [190, 110, 40, 40], factor=2)
    assert z.crop_box == Box(190, 110, 10, 10)
    assert (z.width, z.height) == (20, 20)


@pytest.mark.parametrize("factor", [0, -1, float("nan"), float("inf"), 16.5, 100])
async def test_zoom_absurd_factor(root: Image, factor: float) -> None:
    with pytest.raises(BadArguments, match="factor must be a number above 0 and at most 16"):
        await call(ZoomIn, root, [0, 0, 10, 10], factor=factor)


async def test_zoom_refuses_huge_result() -> None:
    big = Image(PILImage.new("L", (500, 500)))
    with pytest.raises(BadArguments, match="8000x8000 pixels, above the limit"):
        await call(ZoomIn, big, [0, 0, 500, 500], factor=16)


async def test_zoom_refuses_sub_pixel_result(root: Image) -> None:
    with pytest.raises(BadArguments, match="smaller than one pixel"):
        await call(ZoomIn, root, [0, 0, 0.5, 5], factor=1)


async def test_zoom_bad_box(root: Image) -> None:
    with pytest.raises(BadArguments, match="outside the image"):
        await call(ZoomIn, root, [300, 300, 5, 5])
    with pytest.raises(BadArguments, match="must be a box"):
        await call(ZoomIn, root, "the car")


# -- VisualizeRegions -----------------------------------------------------------------------


@pytest.fixture
def grey() -> Image:
    return Image(PILImage.new("RGB", (200, 120), (128, 128, 128)))


async def test_visualize_draws_edges_only(grey: Image) -> None:
    before = np.asarray(grey.pixels).copy()
    out = await call(VisualizeRegions, grey, [[50, 60, 60, 40]])
    px = np.asarray(out.pixels)
    assert out is not grey
    assert np.array_equal(np.asarray(grey.pixels), before)  # input untouched
    assert tuple(px[80, 50]) == PALETTE[0]  # left edge
    assert tuple(px[80, 109]) == PALETTE[0]  # right edge
    assert tuple(px[99, 80]) == PALETTE[0]  # bottom edge
    assert tuple(px[80, 80]) == (128, 128, 128)  # inside
    assert tuple(px[110, 190]) == (128, 128, 128)  # far away
    assert tuple(px[5, 5]) == (128, 128, 128)
    changed = np.any(px != before, axis=2)
    assert changed[60:100, 50:110].any()
    # the tag sits just above the box
    assert changed[40:60, 50:80].any()
    assert not changed[:, 130:].any()


async def test_visualize_keeps_lineage_and_maps_root_boxes(root: Image) -> None:
    crop = await call(CropImage, root, [40, 20, 100, 80])
    zoom = await call(ZoomIn, crop, [60, 30, 40, 20], factor=2)
    out = await call(VisualizeRegions, zoom, [[70, 35, 10, 5]], labels=["x"])
    assert out.parent is zoom.parent and out.crop_box == zoom.crop_box and out.zoom == 2.0
    assert (out.width, out.height) == (zoom.width, zoom.height)
    # root (70, 35) -> local ((70-60)*2, (35-30)*2) = (20, 10); a point on the left edge:
    left_edge = np.asarray(out.pixels)[15, 20]
    assert tuple(left_edge) == PALETTE[0]
    assert not np.array_equal(np.asarray(out.pixels), np.asarray(zoom.pixels))


async def test_visualize_distinct_colours_and_box_labels(grey: Image) -> None:
    boxes = [Box(10, 40, 30, 30, label="cat"), Box(100, 40, 30, 30, label="dog")]
    out = await call(VisualizeRegions, grey, boxes)
    px = np.asarray(out.pixels)
    assert tuple(px[55, 10]) == PALETTE[0]
    assert tuple(px[55, 100]) == PALETTE[1]
    assert PALETTE[0] != PALETTE[1]


async def test_visualize_grayscale_input_gives_colour(root: Image) -> None:
    gray = Image(PILImage.new("L", (50, 50), 200))
    out = await call(VisualizeRegions, gray, [[5, 20, 20, 20]])
    assert out.pixels.mode == "RGB"
    assert gray.pixels.mode == "L"


async def test_visualize_bad_input(grey: Image) -> None:
    with pytest.raises(BadArguments, match="2 labels for 1 boxes"):
        await call(VisualizeRegions, grey, [[0, 0, 5, 5]], labels=["a", "b"])
    with pytest.raises(BadArguments, match="outside the image"):
        await call(VisualizeRegions, grey, [[0, 0, 5, 5], [900, 0, 5, 5]])
    with pytest.raises(BadArguments, match="empty list"):
        await call(VisualizeRegions, grey, [])


def test_cards_are_short_and_mention_root_pixels() -> None:
    for t in (CropImage, ZoomIn, VisualizeRegions):
        card = t.card()
        assert "original-image pixels" in card
        assert len(card) < 600
    assert math.isclose(ZoomIn.params[2].default, 2.0)
