"""Image-image, image-text and text-image similarity from the 'similarity' backend.

The backend embeds images and texts in one space (CLIP/SigLIP style); scores are cosine
similarities, from -1 to 1, higher = more alike. They are for comparing candidates with one
another, not absolute probabilities: CLIP-like models score matching pairs well below 1.
"""

from __future__ import annotations

import numpy as np

from hammr.tools.base import BadArguments, ToolContext, ToolError, tool
from hammr.values import Image


def _rows(arr: object, n: int, what: str) -> np.ndarray:
    """Check a backend's embeddings (n rows) and L2-normalise them again, to be safe."""
    m = np.asarray(arr, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != n:
        raise ToolError(f"similarity backend returned embeddings of shape {m.shape} for {n} {what}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise ToolError(f"similarity backend returned an empty or invalid embedding for {what}")
    out: np.ndarray = m / norms
    return out


def _texts(texts: list[str], tool_name: str) -> list[str]:
    if not texts:
        raise BadArguments(f"{tool_name} needs at least one text")
    for i, t in enumerate(texts):
        if not t.strip():
            raise BadArguments(f"{tool_name}: text {i} is empty")
    return texts


def cosine(query: np.ndarray, candidates: np.ndarray) -> list[float]:
    """Cosine similarity of one normalised row with each normalised candidate row."""
    return [float(v) for v in np.clip(candidates @ query, -1.0, 1.0)]


async def _image_similarity(image: Image, others: list[Image], ctx: ToolContext) -> list[float]:
    """How visually alike an image is to each of several other images.

    Args:
        image: the reference image.
        others: the images to compare with it.

    Returns:
        a list of cosine similarities (-1 to 1, higher = more alike), one per image
    """
    embedder = ctx.backend("similarity")
    rows = _rows(await embedder.embed_images([image, *others]), 1 + len(others), "images")
    return cosine(rows[0], rows[1:])


async def _image_text_similarity(image: Image, texts: list[str], ctx: ToolContext) -> list[float]:
    """How well each of several descriptions matches an image (e.g. to choose an option).

    Args:
        image: the image (or crop).
        texts: the descriptions to score, e.g. ['a red car', 'a blue car'].

    Returns:
        a list of cosine similarities, one per text; compare them, higher = better match
    """
    _texts(texts, "ImageTextSimilarity")
    embedder = ctx.backend("similarity")
    img = _rows(await embedder.embed_images([image]), 1, "image")
    txt = _rows(await embedder.embed_texts(list(texts)), len(texts), "texts")
    return cosine(img[0], txt)


async def _text_image_similarity(text: str, images: list[Image], ctx: ToolContext) -> list[float]:
    """How well each of several images (e.g. crops) matches one description, to find the
    one that shows it.

    Args:
        text: the description, e.g. 'red car'.
        images: the images or crops to score.

    Returns:
        a list of cosine similarities, one per image; compare them, higher = better match
    """
    _texts([text], "TextImageSimilarity")
    embedder = ctx.backend("similarity")
    txt = _rows(await embedder.embed_texts([text]), 1, "text")
    img = _rows(await embedder.embed_images(list(images)), len(images), "images")
    return cosine(txt[0], img)


ImageSimilarity = tool(_image_similarity, name="ImageSimilarity", capability="similarity")
ImageTextSimilarity = tool(
    _image_text_similarity, name="ImageTextSimilarity", capability="similarity"
)
TextImageSimilarity = tool(
    _text_image_similarity, name="TextImageSimilarity", capability="similarity"
)
