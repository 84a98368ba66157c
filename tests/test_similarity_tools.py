from __future__ import annotations

import math
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
from hammr.tools.similarity_tools import (
    ImageSimilarity,
    ImageTextSimilarity,
    TextImageSimilarity,
)
from hammr.values import Image

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


def _unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = v / np.linalg.norm(v)
    return out


class ScriptedEmbedder:
    """Images embed as their mean RGB colour; a text embeds as the colours it names."""

    def __init__(self, normalise: bool = True, rows_short: bool = False) -> None:
        self.normalise = normalise
        self.rows_short = rows_short
        self.calls: list[tuple[str, int]] = []

    def _finish(self, rows: list[np.ndarray]) -> np.ndarray:
        m = np.stack(rows)
        if self.normalise:
            m = m / np.linalg.norm(m, axis=1, keepdims=True)
        return m[:-1] if self.rows_short else m

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        self.calls.append(("images", len(images)))
        return self._finish(
            [np.asarray(im.pixels, dtype=float).reshape(-1, 3).mean(axis=0) for im in images]
        )

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("texts", len(texts)))
        rows = []
        for t in texts:
            v = sum(
                (np.array(c, dtype=float) for name, c in COLOURS.items() if name in t),
                np.zeros(3),
            )
            rows.append(v + 1e-3)  # never all-zero
        return self._finish(rows)


def solid(colour: tuple[int, int, int]) -> Image:
    return Image(PILImage.new("RGB", (16, 16), colour))


async def call(tool: Any, ctx: ToolContext, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return (await tool.invoke(bound, ctx)).value


def ctx_with(backend: Any) -> ToolContext:
    return ToolContext(backends={"similarity": backend})


async def test_image_similarity_scripted_embedder() -> None:
    fake = ScriptedEmbedder()
    red, green, pink = solid((255, 0, 0)), solid((0, 255, 0)), solid((255, 0, 255))
    got = await call(ImageSimilarity, ctx_with(fake), red, [red, green, pink])
    assert got == pytest.approx([1.0, 0.0, 1 / math.sqrt(2)])
    assert fake.calls == [("images", 4)]  # one batch: the reference and the others


async def test_image_text_similarity_scripted_embedder() -> None:
    fake = ScriptedEmbedder()
    texts = ["a red car", "a green car", "a blue car"]
    got = await call(ImageTextSimilarity, ctx_with(fake), solid((0, 0, 255)), texts)
    assert got.index(max(got)) == 2
    assert got[2] == pytest.approx(1.0, abs=1e-5)
    assert got[0] == pytest.approx(0.0, abs=1e-5)
    assert fake.calls == [("images", 1), ("texts", 3)]


async def test_text_image_similarity_scripted_embedder() -> None:
    fake = ScriptedEmbedder()
    crops = [solid((0, 255, 0)), solid((200, 10, 10)), solid((0, 0, 255))]
    got = await call(TextImageSimilarity, ctx_with(fake), "red car", crops)
    assert got.index(max(got)) == 1
    assert len(got) == 3 and all(-1.0 <= s <= 1.0 for s in got)
    assert fake.calls == [("texts", 1), ("images", 3)]


async def test_unnormalised_embeddings_are_normalised_scripted_embedder() -> None:
    fake = ScriptedEmbedder(normalise=False)
    got = await call(ImageSimilarity, ctx_with(fake), solid((10, 0, 0)), [solid((250, 0, 0))])
    assert got == pytest.approx([1.0])


async def test_a_single_image_or_text_is_accepted_scripted_embedder() -> None:
    fake = ScriptedEmbedder()
    got = await call(ImageTextSimilarity, ctx_with(fake), solid((255, 0, 0)), "red")
    assert got == pytest.approx([1.0], abs=1e-5)
    got = await call(TextImageSimilarity, ctx_with(fake), "red", solid((255, 0, 0)))
    assert got == pytest.approx([1.0], abs=1e-5)


async def test_rejections_scripted_embedder() -> None:
    ctx = ctx_with(ScriptedEmbedder())
    with pytest.raises(BadArguments, match="at least one text"):
        await call(ImageTextSimilarity, ctx, solid((1, 2, 3)), [])
    with pytest.raises(BadArguments, match="text 1 is empty"):
        await call(ImageTextSimilarity, ctx, solid((1, 2, 3)), ["red", "  "])
    with pytest.raises(BadArguments, match="non-empty list of images"):
        await call(TextImageSimilarity, ctx, "red", [])
    with pytest.raises(BadArguments, match="must be an image"):
        await call(ImageSimilarity, ctx, "red", [solid((1, 2, 3))])


async def test_wrong_row_count_is_a_tool_error_scripted_embedder() -> None:
    ctx = ctx_with(ScriptedEmbedder(rows_short=True))
    with pytest.raises(ToolError, match="for 3 images"):
        await call(ImageSimilarity, ctx, solid((1, 2, 3)), [solid((1, 2, 3)), solid((3, 2, 1))])


async def test_missing_capability() -> None:
    with pytest.raises(CapabilityMissing) as e:
        await call(TextImageSimilarity, ToolContext(), "red", [solid((1, 2, 3))])
    assert "capability 'similarity' has no backend configured" in str(e.value)
    for t in (ImageSimilarity, ImageTextSimilarity, TextImageSimilarity):
        assert t.capability == "similarity"
