"""Monocular depth with transformers (``AutoModelForDepthEstimation``: Depth Anything, DPT,
ZoeDepth, ...).

The 'depth' capability wants one float32 map per image, image-sized, larger = farther.

* **Relative models** (Depth Anything ``-hf`` relative checkpoints, DPT/MiDaS) predict
  relative *inverse* depth (disparity, larger = nearer), known only up to scale and shift.
  We resize the prediction to the image size (bicubic), then return
  ``(max(d) - d) / (max(d) - min(d))`` per image: values in [0, 1], 0 = the nearest point
  in the image, 1 = the farthest. The ordering is meaningful; ratios and differences
  between images are not. A constant prediction gives all zeros.
* **Metric models** (Depth Anything ``depth_estimation_type = "metric"`` checkpoints,
  ZoeDepth) predict depth in metres (larger = farther already); it is resized and
  returned as is.

``kind = "auto"`` tells them apart from the model's config; ``"relative"`` or ``"metric"``
forces one reading.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hammr.backends.local._common import (
    Lazy,
    LocalModel,
    build,
    check_counts,
    check_device,
    run_batches,
)
from hammr.backends.local._common import rgb as _rgb
from hammr.values import Image

DEFAULT_MODEL = "depth-anything/Depth-Anything-V2-Small-hf"

KINDS = ("auto", "relative", "metric")

METRIC_MODEL_TYPES = frozenset({"zoedepth"})


def model_kind(config: Any) -> str:
    """``"metric"`` when the config says the model predicts metric depth, else ``"relative"``."""
    if getattr(config, "depth_estimation_type", None) == "metric":
        return "metric"
    if getattr(config, "model_type", None) in METRIC_MODEL_TYPES:
        return "metric"
    return "relative"


def disparity_to_depth(disparity: np.ndarray) -> np.ndarray:
    """Relative inverse depth -> relative depth in [0, 1], larger = farther (max - d, scaled)."""
    d = np.asarray(disparity, dtype=np.float32)
    lo, hi = float(d.min()), float(d.max())
    if not hi > lo:
        return np.zeros_like(d, dtype=np.float32)
    return ((hi - d) / (hi - lo)).astype(np.float32)


class DepthModel(LocalModel):
    """The 'depth' capability with a transformers depth-estimation model (see module doc)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        kind: str = "auto",
        batch_size: int = 4,
    ) -> None:
        check_device(device)
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        check_counts(batch_size=batch_size)
        self.model_name = model
        self.kind = kind
        self.batch_size = batch_size
        self._lazy = Lazy(model, lambda: _load(model), device)

    def __repr__(self) -> str:
        return f"DepthModel(model={self.model_name!r}, kind={self.kind!r})"

    async def depth(self, images: list[Image]) -> list[np.ndarray]:
        return await run_batches(self._lazy, images, self.batch_size, self._run)

    def _run(self, model: Any, processor: Any, device: str, chunk: list[Image]) -> list[np.ndarray]:
        import torch

        kind = model_kind(model.config) if self.kind == "auto" else self.kind
        pixels = [_rgb(img) for img in chunk]
        # Aspect-preserving processors (Depth Anything) give each image shape its own input
        # size; images whose inputs have the same shape share one forward pass.
        prepared = [processor(images=px, return_tensors="pt")["pixel_values"] for px in pixels]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, pv in enumerate(prepared):
            groups.setdefault(tuple(pv.shape), []).append(i)
        maps: list[np.ndarray | None] = [None] * len(chunk)
        for members in groups.values():
            batch = torch.cat([prepared[i] for i in members]).to(device)
            predicted = model(pixel_values=batch).predicted_depth
            if predicted.dim() == 4:  # (B, 1, H, W) from some heads
                predicted = predicted[:, 0]
            for row, i in enumerate(members):
                w, h = pixels[i].size
                resized = torch.nn.functional.interpolate(
                    predicted[row][None, None].float(),
                    size=(h, w),
                    mode="bicubic",
                    align_corners=False,
                )[0, 0]
                values = resized.cpu().numpy().astype(np.float32)
                if kind == "relative":
                    values = disparity_to_depth(values)
                else:  # bicubic resizing can undershoot below zero near edges
                    values = np.maximum(values, 0.0).astype(np.float32)
                maps[i] = values
        return [m for m in maps if m is not None]


def _load(model: str) -> tuple[Any, Any]:
    import transformers

    tf: Any = transformers
    processor = tf.AutoImageProcessor.from_pretrained(model)
    return tf.AutoModelForDepthEstimation.from_pretrained(model), processor


OPTIONS: dict[str, type] = {"model": str, "device": str, "kind": str, "batch_size": int}


def from_config(options: dict[str, Any]) -> DepthModel:
    """The ``[tools.depth] backend = "depth-anything"`` factory (weights load on first use)."""
    return build(DepthModel, "tools.depth", options, OPTIONS, "the depth model")
