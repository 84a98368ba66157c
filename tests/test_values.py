from __future__ import annotations

import math

import pytest
from PIL import Image as PILImage

from hammr.values import Box, Entity, Image, ImageLoadError, Page, ValueError_, render_value


def test_box_renders_like_the_paper() -> None:
    boxes = [Box(174, 466, 141, 80, "license plate"), Box(12, 317, 21, 26, "license plate")]
    assert render_value(boxes) == (
        "2 boxes: license plate at left:174/top:466/width:141/height:80, "
        "license plate at left:12/top:317/width:21/height:26"
    )
    assert Box(1.5, 2, 3, 4, score=0.876).render() == (
        "left:1.5/top:2/width:3/height:4 (score 0.88)"
    )


@pytest.mark.parametrize(
    "bad", [(0, 0, 0, 5), (0, 0, 5, -1), (math.nan, 0, 1, 1), (0, math.inf, 1, 1)]
)
def test_bad_boxes_are_refused(bad: tuple[float, float, float, float]) -> None:
    with pytest.raises(ValueError_):
        Box(*bad)


def test_iou() -> None:
    a, b = Box(0, 0, 10, 10), Box(5, 0, 10, 10)
    assert a.iou(b) == pytest.approx(50 / 150)
    assert a.iou(Box(20, 20, 1, 1)) == 0.0


def test_values_render_short() -> None:
    img = Image(PILImage.new("RGB", (640, 480)))
    assert render_value(img) == "image 640x480"
    assert render_value([img, img]) == "2 images: image 640x480, image 640x480"
    assert render_value(["a", ""]) == "['a', '']"
    assert render_value(True) == "yes" and render_value(0.123456) == "0.1235"
    assert render_value([]) == "empty list"
    assert render_value(Page("Paris", "one two three")) == "page 'Paris' (3 words)"
    assert render_value(Entity("Eiffel Tower")) == "entity 'Eiffel Tower'"
    assert len(render_value("x" * 10_000)) <= 300


def test_lineage_maps_boxes_to_root_and_back() -> None:
    root = Image(PILImage.new("RGB", (100, 100)))
    zoomed = Image(PILImage.new("RGB", (60, 40)), parent=root, crop_box=Box(10, 20, 30, 20), zoom=2)
    local = Box(6, 4, 10, 8)
    in_root = zoomed.to_root(local)
    assert in_root.xywh() == [13.0, 22.0, 5.0, 4.0]
    assert zoomed.to_local(in_root).xywh() == local.xywh()
    assert zoomed.root is root
    assert "zoom x2" in zoomed.render()


def test_from_bytes_refuses_junk_and_bombs(tmp_path: object) -> None:
    with pytest.raises(ImageLoadError, match="not a readable image"):
        Image.from_bytes(b"GIF89a garbage")
    import io

    buf = io.BytesIO()
    PILImage.new("L", (3000, 3000)).save(buf, format="PNG")
    with pytest.raises(ImageLoadError, match="above the limit"):
        Image.from_bytes(buf.getvalue(), max_pixels=1_000_000)
    assert Image.from_bytes(buf.getvalue()).width == 3000
