"""Open-vocabulary detection with OWLv2 (``Owlv2ForObjectDetection`` through transformers).

OWLv2's image processor pads every image at the bottom and right to a square (side =
max(width, height)) before resizing it to the model's input size, so the model's boxes are
fractions of that *padded square*, not of the image. :func:`boxes_to_pixels` maps them back:
multiply every coordinate by max(width, height) (the same for x and y), then clip to the
image. (transformers < 4.47 scaled x by the width and y by the height in
``post_process_object_detection``, which is wrong for non-square images; we do the mapping
ourselves so every version gives the same pixels.)
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
    pairs,
    rgb,
    run_batches,
)
from hammr.values import Box, Image

DEFAULT_MODEL = "google/owlv2-base-patch16-ensemble"


def boxes_to_pixels(cxcywh: np.ndarray, width: int, height: int) -> np.ndarray:
    """Map OWLv2 boxes (centre x, centre y, w, h as fractions of the padded square) to
    ``(x0, y0, x1, y1)`` pixels of a ``width`` x ``height`` image, clipped to the image."""
    b = np.asarray(cxcywh, dtype=np.float64).reshape(-1, 4)
    side = float(max(width, height))
    x0 = (b[:, 0] - b[:, 2] / 2) * side
    y0 = (b[:, 1] - b[:, 3] / 2) * side
    x1 = (b[:, 0] + b[:, 2] / 2) * side
    y1 = (b[:, 1] + b[:, 3] / 2) * side
    out = np.stack([x0, y0, x1, y1], axis=1)
    out[:, [0, 2]] = out[:, [0, 2]].clip(0, width)
    out[:, [1, 3]] = out[:, [1, 3]].clip(0, height)
    return out


def nms(xyxy: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression, best score first."""
    order = [int(i) for i in np.argsort(-scores, kind="stable")]
    if iou >= 1.0:
        return order
    areas = (xyxy[:, 2] - xyxy[:, 0]) * (xyxy[:, 3] - xyxy[:, 1])
    keep: list[int] = []
    for i in order:
        ok = True
        for j in keep:
            iw = min(xyxy[i, 2], xyxy[j, 2]) - max(xyxy[i, 0], xyxy[j, 0])
            ih = min(xyxy[i, 3], xyxy[j, 3]) - max(xyxy[i, 1], xyxy[j, 1])
            inter = max(0.0, iw) * max(0.0, ih)
            union = areas[i] + areas[j] - inter
            if union > 0 and inter / union > iou:
                ok = False
                break
        if ok:
            keep.append(i)
    return keep


def select_boxes(
    logits: np.ndarray,
    cxcywh: np.ndarray,
    names: list[str],
    width: int,
    height: int,
    threshold: float,
    nms_iou: float = 0.3,
    max_boxes: int = 100,
) -> list[Box]:
    """One image's detections from the model's raw outputs.

    ``logits`` is (patches, queries) -- only the first ``len(names)`` queries are read
    (the processor pads the query list of a batch with blanks) -- and ``cxcywh`` is
    (patches, 4). Each patch gets its best query; patches whose sigmoid score is above
    ``threshold`` become boxes labelled with that query's name, in image pixels, after
    per-name non-maximum suppression, best first.
    """
    q = np.asarray(logits, dtype=np.float64)[:, : len(names)]
    if q.size == 0:
        return []
    best = q.argmax(axis=1)
    scores = 1.0 / (1.0 + np.exp(-q.max(axis=1)))
    xyxy = boxes_to_pixels(cxcywh, width, height)
    valid = (scores > threshold) & (xyxy[:, 2] > xyxy[:, 0]) & (xyxy[:, 3] > xyxy[:, 1])
    found: list[Box] = []
    for label in sorted(set(best[valid].tolist())):
        idx = np.flatnonzero(valid & (best == label))
        for k in nms(xyxy[idx], scores[idx], nms_iou):
            i = idx[k]
            x0, y0, x1, y1 = (float(v) for v in xyxy[i])
            found.append(Box(x0, y0, x1 - x0, y1 - y0, label=names[label], score=float(scores[i])))
    found.sort(key=lambda b: -(b.score or 0.0))
    return found[:max_boxes]


class OWLv2Detector(LocalModel):
    """The 'detect' capability with OWLv2.

    ``detect(images, names)``: one name per image (``names[i]`` is looked for in
    ``images[i]``), or one image and several names (all looked for in it). Each name is
    turned into the text query ``prompt.format(name=...)``. Boxes come back in each image's
    own pixels, labelled with the name (not the prompt), best score first.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        threshold: float = 0.1,
        device: str = "auto",
        nms_iou: float = 0.3,
        max_boxes: int = 100,
        batch_size: int = 4,
        prompt: str = "a photo of a {name}",
    ) -> None:
        check_device(device)
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"threshold must be in [0, 1), got {threshold}")
        if not 0.0 < nms_iou <= 1.0:
            raise ValueError(f"nms_iou must be in (0, 1], got {nms_iou}")
        check_counts(max_boxes=max_boxes, batch_size=batch_size)
        if "{name}" not in prompt:
            raise ValueError(f"prompt must contain {{name}}, got {prompt!r}")
        self.model_name = model
        self.threshold = threshold
        self.nms_iou = nms_iou
        self.max_boxes = max_boxes
        self.batch_size = batch_size
        self.prompt = prompt
        self._lazy = Lazy(model, lambda: _load(model), device)

    def __repr__(self) -> str:
        return f"OWLv2Detector(model={self.model_name!r}, threshold={self.threshold})"

    async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]:
        queries = pairs(images, names, "detect")
        chunks = list(zip(images, queries, strict=True))
        return await run_batches(self._lazy, chunks, self.batch_size, self._run)

    def _run(
        self, model: Any, processor: Any, device: str, chunk: list[tuple[Image, list[str]]]
    ) -> list[list[Box]]:
        pixels = [rgb(img) for img, _ in chunk]
        texts = [[self.prompt.format(name=n) for n in names] for _, names in chunk]
        inputs = processor(text=texts, images=pixels, return_tensors="pt", truncation=True)
        outputs = model(**inputs.to(device))
        logits = outputs.logits.float().cpu().numpy()
        boxes = outputs.pred_boxes.float().cpu().numpy()
        return [
            select_boxes(
                logits[i],
                boxes[i],
                names,
                px.width,
                px.height,
                self.threshold,
                self.nms_iou,
                self.max_boxes,
            )
            for i, ((_, names), px) in enumerate(zip(chunk, pixels, strict=True))
        ]


def _load(model: str) -> tuple[Any, Any]:
    from transformers import Owlv2ForObjectDetection, Owlv2Processor

    processor = Owlv2Processor.from_pretrained(model)
    return Owlv2ForObjectDetection.from_pretrained(model), processor


OPTIONS: dict[str, type] = {
    "model": str,
    "threshold": float,
    "device": str,
    "nms_iou": float,
    "max_boxes": int,
    "batch_size": int,
    "prompt": str,
}


def from_config(options: dict[str, Any]) -> OWLv2Detector:
    """The ``[tools.detect] backend = "owlv2"`` factory (weights load on first use)."""
    return build(OWLv2Detector, "tools.detect", options, OPTIONS, "the owlv2 detector")
