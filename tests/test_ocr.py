from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

from hammr.backends.ocr import TesseractMissing, TesseractOCR
from hammr.backends.ocr.tesseract import normalise
from hammr.tools.base import CapabilityMissing, Tool, ToolContext, bind_arguments
from hammr.tools.image_tools import CropImage
from hammr.tools.library import builtin_tools, default_backends
from hammr.tools.ocr import OCR
from hammr.values import Box, Image
from ocr_support import example, rendered

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="tesseract is not installed"
)


async def call(tool: Any, *args: Any, backends: dict[str, Any] | None = None) -> Any:
    bound = bind_arguments(tool, list(args), {})
    return (await tool.invoke(bound, ToolContext(backends=backends or {}))).value


class CountingOCR:
    """The real backend, counting how often it is called."""

    def __init__(self, inner: TesseractOCR) -> None:
        self.inner = inner
        self.calls: list[int] = []

    async def read(self, images: list[Image]) -> list[str]:
        self.calls.append(len(images))
        return await self.inner.read(images)


# -- no tesseract needed --------------------------------------------------------------------


def test_normalise() -> None:
    assert normalise("  154-JDX \n\n") == "154-JDX"
    assert normalise("OPEN\n24   HOURS\x0c") == "OPEN 24 HOURS"
    assert normalise("| 154-JDX |") == "154-JDX"
    assert normalise("|154-JDX|") == "154-JDX"
    assert normalise("[ — 154-JDX ]") == "154-JDX"
    assert normalise("(see page 4)") == "(see page 4)"
    assert normalise(" | \n ") == ""
    assert normalise("") == ""


async def test_missing_backend_is_capability_missing() -> None:
    img = Image(PILImage.new("RGB", (10, 10)))
    with pytest.raises(CapabilityMissing) as info:
        await call(OCR, img)
    assert str(info.value) == (
        "capability 'ocr' has no backend configured (see hammr.toml [tools.ocr])"
    )
    assert info.value.kind == "capability_missing"


def test_missing_binary_names_debian_packages() -> None:
    with pytest.raises(TesseractMissing, match="apt-get install tesseract-ocr tesseract-ocr-eng"):
        TesseractOCR(cmd="/nonexistent/tesseract")
    assert "ocr" not in default_backends({"ocr": {"cmd": "/nonexistent/tesseract"}})


def test_default_backends_config_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown setting tools\.ocr\.language"):
        default_backends({"ocr": {"language": "eng"}})
    with pytest.raises(ValueError, match=r"tools\.ocr\.backend = 'easyocr' is not one of"):
        default_backends({"ocr": {"backend": "easyocr"}})
    with pytest.raises(ValueError, match=r"tools\.ocr\.psm = 'seven' should be a int"):
        default_backends({"ocr": {"psm": "seven"}})


def test_ocr_backend_none_disables_it() -> None:
    assert "ocr" not in default_backends({"ocr": {"backend": "none", "lang": "eng"}})


def test_builtin_tools() -> None:
    tools = builtin_tools()
    assert [t.name for t in tools] == [
        "CropImage",
        "ZoomIn",
        "VisualizeRegions",
        "BoundingBoxOverlap",
        "SpatialSelection",
        "OCR",
        "Caption",
        "VQA",
        "DetectObject",
        "ObjectInImage",
        "RecognizeEntity",
        "MarkPoint",
        "CropAroundPoint",
        "EstimateRegionDepth",
        "EstimateObjectDepth",
        "ImageSimilarity",
        "ImageTextSimilarity",
        "TextImageSimilarity",
        "Calculator",
        "SolveMathEquation",
        "WebSearch",
        "WikipediaArticle",
        "AnswerWithContext",
        "DecomposeQuestion",
    ]
    assert all(isinstance(t, Tool) for t in tools)
    assert OCR.capability == "ocr" and OCR.vectorised_over == "image" and OCR.batched
    assert "OCR(image: image)" in OCR.card()


async def test_backend_result_count_is_checked() -> None:
    class Broken:
        async def read(self, images: list[Image]) -> list[str]:
            return []

    img = Image(PILImage.new("RGB", (10, 10)))
    with pytest.raises(Exception, match="0 results for 1 images"):
        await call(OCR, img, backends={"ocr": Broken()})


# -- real tesseract -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tesseract() -> TesseractOCR:
    if shutil.which("tesseract") is None:
        pytest.skip("tesseract is not installed")
    return TesseractOCR()


@needs_tesseract
def test_default_backends_has_tesseract() -> None:
    backends = default_backends(None)
    assert isinstance(backends["ocr"], TesseractOCR)
    assert default_backends({"ocr": {"psm": 7}})["ocr"].psm == 7
    # hammr.toml defaults; environment variables arrive as strings
    assert isinstance(
        default_backends({"ocr": {"backend": "tesseract", "lang": "eng"}})["ocr"], TesseractOCR
    )
    ocr = default_backends({"ocr": {"psm": "6", "timeout_s": "5", "lang": "eng"}})["ocr"]
    assert (ocr.psm, ocr.timeout_s) == (6, 5.0)
    with pytest.raises(ValueError, match="psm must be between 0 and 13"):
        default_backends({"ocr": {"psm": 42}})


@needs_tesseract
async def test_ocr_reads_bundled_plate(tesseract: TesseractOCR) -> None:
    image, meta = example("plate")
    crop = await call(CropImage, image, meta["boxes"][0])
    assert await call(OCR, crop, backends={"ocr": tesseract}) == "154-JDX" == meta["answer"]


@needs_tesseract
async def test_ocr_reads_bundled_sign(tesseract: TesseractOCR) -> None:
    image, meta = example("sign")
    crop = await call(CropImage, image, meta["boxes"][0])
    assert await call(OCR, crop, backends={"ocr": tesseract}) == "OPEN 24 HOURS" == meta["answer"]


@needs_tesseract
async def test_ocr_on_list_is_one_backend_call(tesseract: TesseractOCR) -> None:
    image, meta = example("plate")
    crops = await call(CropImage, image, meta["boxes"])
    counting = CountingOCR(tesseract)
    texts = await call(OCR, crops, backends={"ocr": counting})
    assert counting.calls == [3]
    assert isinstance(texts, list) and len(texts) == 3
    assert all(isinstance(t, str) for t in texts)
    assert texts[0] == "154-JDX"
    assert "154-JDX" not in texts[1:]  # the distractors are unreadable


@needs_tesseract
async def test_ocr_on_skimage_page(tesseract: TesseractOCR) -> None:
    skdata = pytest.importorskip("skimage.data")
    page = Image(PILImage.fromarray(np.asarray(skdata.page())))
    text = await call(OCR, page, backends={"ocr": tesseract})
    assert "\n" not in text and "  " not in text
    assert "markers" in text
    assert "segmentation" in text


@needs_tesseract
async def test_ocr_blank_image_is_empty_string(tesseract: TesseractOCR) -> None:
    blank = Image(PILImage.new("RGB", (120, 40), "white"))
    assert await call(OCR, blank, backends={"ocr": tesseract}) == ""


@needs_tesseract
async def test_small_text_is_upscaled(tesseract: TesseractOCR) -> None:
    small = rendered("KEEP LEFT 50", 10)
    assert small.height < 32
    assert tesseract.prepare(small.pixels).height == 48
    assert await tesseract.read([small]) == ["KEEP LEFT 50"]


@needs_tesseract
async def test_ocr_on_zoomed_crop(tesseract: TesseractOCR) -> None:
    image, meta = example("plate")
    x, y, w, h = meta["boxes"][0]
    crop = await call(CropImage, image, [x - 30, y - 30, w + 60, h + 60])
    from hammr.tools.image_tools import ZoomIn

    zoom = await call(ZoomIn, crop, Box(x, y, w, h), 2.0)
    assert await call(OCR, zoom, backends={"ocr": tesseract}) == "154-JDX"


@needs_tesseract
async def test_missing_language_names_package() -> None:
    ocr = TesseractOCR(lang="xyz")
    with pytest.raises(TesseractMissing, match="tesseract-ocr-xyz"):
        await ocr.read([Image(PILImage.new("RGB", (20, 20), "white"))])


@needs_tesseract
def test_a_language_without_data_leaves_ocr_unavailable_with_the_reason() -> None:
    from hammr.backends.registry import build_backends

    built = build_backends({"ocr": {"lang": "eng+xyz"}})
    assert "ocr" not in built.backends
    why = built.unavailable["ocr"]
    assert why.startswith("tesseract has no language data for xyz (installed: "), why
    assert why.endswith("; install it with: apt-get install tesseract-ocr-xyz"), why
    assert TesseractOCR(lang="eng+xyz").missing_languages() == ["xyz"]
    built = build_backends({"ocr": {"lang": "eng"}})
    assert isinstance(built.backends["ocr"], TesseractOCR) and "ocr" not in built.unavailable
    assert TesseractOCR(lang="eng").missing_languages() == []
