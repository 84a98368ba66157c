"""Image-text embeddings with CLIP or SigLIP (transformers ``AutoModel``), serving the
'similarity' and 'object_in_image' capabilities.

Embeddings are the model's projected image/text features, L2-normalised (float32 rows).

**Presence rule** (``contains``): for an image and a name we score the texts
``prompt.format(name=name)`` (default "a photo of a {name}") and each background prompt
(default: "a photo", "a photo of an object", "a photo of a scene", "a blurry photo",
"a photo of something"). With ``s`` the cosine similarities and ``t`` the model's own
logit scale (``exp(logit_scale)``, at most 100), ``p = softmax(t * s)[0]`` is the share of
the name's prompt; the object is reported present when ``p >= threshold`` (default 0.5:
the name must fit the image better than all background prompts together). Raise the
threshold for fewer false positives, lower it for fewer misses.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from hammr.backends.local._common import (
    Lazy,
    LocalModel,
    batches,
    check_counts,
    check_device,
    in_thread,
    pairs,
    require_packages,
    rgb,
)
from hammr.text_limits import clip_for_embedding
from hammr.values import Image

DEFAULT_MODEL = "openai/clip-vit-base-patch32"

DEFAULT_BACKGROUND = (
    "a photo",
    "a photo of an object",
    "a photo of a scene",
    "a blurry photo",
    "a photo of something",
)

SIGLIP_TYPES = frozenset({"siglip", "siglip2"})


def _features(out: Any) -> Any:
    """``get_*_features`` return a tensor in transformers 4 and may return a model output."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for key in ("image_embeds", "text_embeds", "pooler_output"):
        value = getattr(out, key, None)
        if isinstance(value, torch.Tensor):
            return value
    raise TypeError(f"unexpected feature output {type(out).__name__}")


def l2_normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    out: np.ndarray = (x / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


def presence(similarities: np.ndarray, scale: float, threshold: float) -> tuple[bool, float]:
    """Apply the presence rule to one row ``[s_name, s_background...]`` of cosines."""
    z = scale * np.asarray(similarities, dtype=np.float64)
    z = np.exp(z - z.max())
    p = float(z[0] / z.sum())
    return p >= threshold, p


class ClipEmbedder(LocalModel):
    """The 'similarity' (``embed_images``/``embed_texts``) and 'object_in_image'
    (``contains``) capabilities with a CLIP or SigLIP model (see module doc for the rule)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        threshold: float = 0.5,
        prompt: str = "a photo of a {name}",
        background: tuple[str, ...] | list[str] = DEFAULT_BACKGROUND,
        batch_size: int = 32,
    ) -> None:
        check_device(device)
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        if "{name}" not in prompt:
            raise ValueError(f"prompt must contain {{name}}, got {prompt!r}")
        if not background:
            raise ValueError("background needs at least one prompt")
        check_counts(batch_size=batch_size)
        self.model_name = model
        self.threshold = threshold
        self.prompt = prompt
        self.background = tuple(background)
        self.batch_size = batch_size
        self._lazy = _shared(model, device)

    def __repr__(self) -> str:
        return f"ClipEmbedder(model={self.model_name!r}, threshold={self.threshold})"

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        rows = [
            await in_thread(self._lazy, partial(_embed_images, images=chunk))
            for chunk in batches(images, self.batch_size)
        ]
        return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        texts = clip_for_embedding(texts)  # the model reads 64-77 tokens; spare the tokenizer
        rows = [
            await in_thread(self._lazy, partial(_embed_texts, texts=chunk))
            for chunk in batches(texts, self.batch_size)
        ]
        return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    async def contains(self, images: list[Image], names: list[str]) -> list[bool]:
        return [present for present, _ in await self.presence_scores(images, names)]

    async def presence_scores(
        self, images: list[Image], names: list[str]
    ) -> list[tuple[bool, float]]:
        """(present, p) per name asked: one per image, or one per name for a single image."""
        queries = pairs(images, names, "object_in_image")
        prompts = list(dict.fromkeys([self.prompt.format(name=n) for q in queries for n in q]))
        texts = prompts + [b for b in self.background if b not in prompts]
        image_rows = await self.embed_images(images)
        text_rows = await self.embed_texts(texts)
        scale = await in_thread(self._lazy, lambda m, p, d: _logit_scale(m))
        where = {t: i for i, t in enumerate(texts)}
        bg = [where[b] for b in self.background]
        out: list[tuple[bool, float]] = []
        for i, names_i in enumerate(queries):
            for name in names_i:
                cols = [where[self.prompt.format(name=name)], *bg]
                sims = text_rows[cols] @ image_rows[i]
                out.append(presence(sims, scale, self.threshold))
        return out


def _is_siglip(model: Any) -> bool:
    return getattr(model.config, "model_type", None) in SIGLIP_TYPES


def _embed_images(model: Any, processor: Any, device: str, images: list[Image]) -> np.ndarray:
    inputs = processor(images=[rgb(img) for img in images], return_tensors="pt")
    feats = _features(model.get_image_features(pixel_values=inputs["pixel_values"].to(device)))
    return l2_normalise(np.asarray(feats.float().cpu().numpy()))


def _embed_texts(model: Any, processor: Any, device: str, texts: list[str]) -> np.ndarray:
    # SigLIP was trained on max_length-padded text and gives other embeddings otherwise.
    padding: Any = "max_length" if _is_siglip(model) else True
    inputs = processor(text=texts, return_tensors="pt", padding=padding, truncation=True)
    kwargs = {"input_ids": inputs["input_ids"].to(device)}
    if "attention_mask" in inputs and not _is_siglip(model):
        kwargs["attention_mask"] = inputs["attention_mask"].to(device)
    feats = _features(model.get_text_features(**kwargs))
    return l2_normalise(feats.float().cpu().numpy())


def _logit_scale(model: Any) -> float:
    scale = getattr(model, "logit_scale", None)
    if scale is None:
        return 100.0
    return float(min(100.0, float(scale.detach().float().exp().cpu())))


_SHARED: dict[tuple[str, str], Lazy] = {}


def _shared(model: str, device: str) -> Lazy:
    """One loaded model per (name, device), so 'similarity' and 'object_in_image' backed by
    the same checkpoint hold its weights once."""
    key = (model, device)
    if key not in _SHARED:
        _SHARED[key] = Lazy(model, lambda: _load(model), device)
    return _SHARED[key]


def _load(model: str) -> tuple[Any, Any]:
    import transformers

    tf: Any = transformers
    processor = tf.AutoProcessor.from_pretrained(model)
    return tf.AutoModel.from_pretrained(model), processor


OPTIONS: dict[str, type] = {
    "model": str,
    "device": str,
    "threshold": float,
    "prompt": str,
    "background": str,
    "batch_size": int,
}


def from_config(options: dict[str, Any]) -> ClipEmbedder:
    """The ``[tools.similarity] backend = "clip"`` factory (weights load on first use)."""
    return _build("tools.similarity", options)


def presence_from_config(options: dict[str, Any]) -> ClipEmbedder:
    """The ``[tools.object_in_image] backend = "clip"`` factory (weights load on first use).
    ``background`` is a ``|``-separated list of prompts."""
    return _build("tools.object_in_image", options)


def _build(where: str, options: dict[str, Any]) -> ClipEmbedder:
    from hammr.backends.registry import parse_options

    opts = parse_options(where, options, OPTIONS)
    if "background" in opts:
        opts["background"] = tuple(p.strip() for p in opts["background"].split("|") if p.strip())
    require_packages("the clip embedder")
    return ClipEmbedder(**opts)
