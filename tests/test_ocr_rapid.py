from __future__ import annotations

from typing import Any

import pytest
from PIL import Image as PILImage

import ocr_support
from hammr.backends.ocr import rapid
from hammr.backends.ocr.rapid import RapidOCRBackend, from_config, order_lines
from hammr.backends.registry import BackendUnavailable
from hammr.tools.base import ToolContext, bind_arguments
from hammr.tools.ocr import OCR
from hammr.values import Box, Image
from ocr_support import rendered

_why = rapid.rapidocr_import_error()
needs_rapidocr = pytest.mark.skipif(
    _why is not None, reason=f"rapidocr-onnxruntime is not installed ({_why}); {rapid.INSTALL}"
)


def example(name: str) -> tuple[Image, dict[str, Any], list[Image]]:
    image, meta = ocr_support.example(name)
    crops = [Image(image.pixels.crop((x, y, x + w, y + h))) for x, y, w, h in meta["boxes"]]
    return image, meta, crops


# -- no rapidocr needed ---------------------------------------------------------------------


def test_order_lines_rows_then_left_to_right() -> None:
    def item(x: float, y: float, text: str) -> tuple[Box, str, float]:
        return (Box(x, y, 30, 20), text, 0.9)

    items = [item(100, 52, "d"), item(0, 3, "b"), item(60, 0, "c"), item(0, 50, "a")]
    # "b" starts lower than "c" but lies on the same row, left of it
    assert [t for _, t, _ in order_lines(items)] == ["b", "c", "a", "d"]
    assert order_lines([]) == []


def test_from_config_unknown_and_bad_options() -> None:
    with pytest.raises(ValueError, match=r"unknown setting tools\.ocr\.lang"):
        from_config({"lang": "eng"})
    with pytest.raises(ValueError, match=r"tools\.ocr\.text_score = 'high' should be a float"):
        from_config({"text_score": "high"})
    with pytest.raises(ValueError, match=r"tools\.ocr\.use_cls = 'maybe' should be true or false"):
        from_config({"use_cls": "maybe"})


def test_from_config_missing_package_names_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rapid, "rapidocr_import_error", lambda: "ModuleNotFoundError: nope")
    with pytest.raises(BackendUnavailable, match="pip install --no-deps rapidocr-onnxruntime"):
        from_config({})
    with pytest.raises(rapid.RapidOCRMissing, match="opencv-python-headless"):
        RapidOCRBackend()


# -- real rapidocr --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ocr() -> RapidOCRBackend:
    if _why is not None:
        pytest.skip(f"rapidocr-onnxruntime is not installed ({_why}); {rapid.INSTALL}")
    return RapidOCRBackend()


@needs_rapidocr
def test_from_config_builds_lazily() -> None:
    backend = from_config({"text_score": "0.6", "use_cls": "false", "line_height": 0})
    assert isinstance(backend, RapidOCRBackend)
    assert (backend.text_score, backend.use_cls, backend.line_height) == (0.6, False, 0)
    assert not backend.loaded  # models load on first read
    with pytest.raises(ValueError, match="text_score"):
        from_config({"text_score": 2})


@needs_rapidocr
async def test_reads_bundled_plate_crop(ocr: RapidOCRBackend) -> None:
    _, meta, crops = example("plate")
    assert await ocr.read([crops[0]]) == ["154-JDX"] == [meta["answer"]]


@needs_rapidocr
async def test_reads_bundled_sign_crop(ocr: RapidOCRBackend) -> None:
    _, meta, crops = example("sign")
    assert await ocr.read([crops[0]]) == ["OPEN 24 HOURS"] == [meta["answer"]]


@needs_rapidocr
async def test_detection_path_reads_the_same(ocr: RapidOCRBackend) -> None:
    detect_all = RapidOCRBackend(line_height=0)
    detect_all._engine = ocr.engine()  # share the loaded models
    _, _, plate = example("plate")
    _, _, sign = example("sign")
    assert await detect_all.read([plate[0], sign[0]]) == ["154-JDX", "OPEN 24 HOURS"]


@needs_rapidocr
async def test_blank_image_is_empty_string(ocr: RapidOCRBackend) -> None:
    blank = Image(PILImage.new("RGB", (120, 40), "white"))
    big_blank = Image(PILImage.new("RGB", (300, 200), (30, 30, 30)))
    assert await ocr.read([blank, big_blank]) == ["", ""]
    assert await ocr.read_boxes(big_blank) == []
    assert await ocr.read([]) == []


@needs_rapidocr
async def test_list_of_crops_keeps_length_and_order(ocr: RapidOCRBackend) -> None:
    _, _, plate = example("plate")
    _, _, sign = example("sign")
    blank = Image(PILImage.new("RGB", (60, 30), "white"))
    line = rendered("KEEP LEFT 50", 16)
    crops = [sign[0], blank, plate[0], line, *plate[1:]]
    texts = await ocr.read(crops)
    assert len(texts) == len(crops)
    assert texts[:4] == ["OPEN 24 HOURS", "", "154-JDX", "KEEP LEFT 50"]
    assert "154-JDX" not in texts[4:]  # the distractor regions are unreadable
    assert texts == [(await ocr.read([c]))[0] for c in crops]  # batched == one by one


@needs_rapidocr
async def test_through_the_ocr_tool(ocr: RapidOCRBackend) -> None:
    _, _, crops = example("plate")
    bound = bind_arguments(OCR, [crops], {})
    result = await OCR.invoke(bound, ToolContext(backends={"ocr": ocr}))
    assert isinstance(result.value, list) and len(result.value) == 3
    assert result.value[0] == "154-JDX"


@needs_rapidocr
async def test_read_boxes_inside_image_and_cover_text(ocr: RapidOCRBackend) -> None:
    for name in ("plate", "sign"):
        image, meta, _ = example(name)
        found = await ocr.read_boxes(image)
        assert found, name
        for box, text, score in found:
            assert box.x >= 0 and box.y >= 0, (name, box)
            assert box.x2 <= image.width and box.y2 <= image.height, (name, box)
            assert box.label == text and box.score == score and score >= ocr.text_score
        truth = Box.from_xywh(meta["boxes"][0])
        hits = [b for b, t, _ in found if b.intersection(truth) > 0]
        assert hits, (name, found)
        # the detected lines lie on the labelled region (plate or sign, frame included) and
        # cover a good part of it
        covered = sum(b.intersection(truth) for b in hits)
        assert covered >= 0.25 * truth.area, (name, hits, truth)
        assert all(b.intersection(truth) >= 0.5 * b.area for b in hits), (name, hits)
    _, _, plate = example("plate")
    (box, text, _), *_ = await ocr.read_boxes(plate[0])
    assert text == "154-JDX"
    assert box.x2 <= plate[0].width and box.y2 <= plate[0].height
