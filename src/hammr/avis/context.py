"""The visual context AVIS reads before planning: the image's objects, each with its region
name, caption, recognised entities and text, built from the library's capabilities.

Object #0 is always the whole image. Others come from the 'detect' capability (the library's
DetectObject over a list of names: the detector's own classes when it has a fixed set, else
``object_names``), the largest first, tiny ones dropped. Captions come from 'caption',
entities (with scores and descriptions) from 'entity', text from 'ocr' (whole image only). A
capability with no backend leaves its part out and is listed in :attr:`VisualContext.missing`
so the trace says so; a backend that fails is listed with its error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hammr.tools.base import CapabilityMissing, ToolContext, ToolError, unavailable_reason
from hammr.tools.image_tools import crop_one
from hammr.tools.ocr import OCR
from hammr.tools.vision_tools import Caption, DetectObject
from hammr.trace import encode_value
from hammr.values import Box, Entity, Image

DEFAULT_OBJECT_NAMES = ("person", "animal", "building", "vehicle", "plant", "food", "sign")
MIN_AREA = 0.01
"""Objects smaller than this share of the image are left out."""
MAX_ENTITIES = 3


def region_name(box: Box, width: float, height: float) -> str:
    """Where a box's centre lies on a 3x3 grid: 'upper left', 'center', 'lower right', ..."""
    cx, cy = box.center
    col = ("left", "center", "right")[min(2, max(0, int(3 * cx / max(width, 1))))]
    row = ("upper", "", "lower")[min(2, max(0, int(3 * cy / max(height, 1))))]
    if not row:
        return "center" if col == "center" else col
    return f"{row} {col}" if col != "center" else f"{row} center"


@dataclass
class VisualObject:
    id: int
    region: str
    image: Image
    box: Box
    caption: str | None = None
    entities: list[Entity] = field(default_factory=list)
    text: str | None = None

    def render(self) -> str:
        parts = [f"Object #{self.id} ({self.region})"]
        body: list[str] = [self.box.label] if self.id and self.box.label else []
        if self.caption:
            body.append(self.caption)
        if self.text:
            body.append(f"text: {self.text}")
        for e in self.entities:
            line = e.name
            if e.description:
                line += f": {e.description}"
            if e.score is not None:
                line += f" (score={e.score:.1f})"
            body.append(line)
        return parts[0] + (": " + "; ".join(body) if body else ": (no details)")

    def to_json(self, images: dict[str, Image]) -> dict[str, Any]:
        return {
            "id": self.id,
            "region": self.region,
            "label": self.box.label if self.id else None,
            "box": encode_value(self.box, images),
            "image": encode_value(self.image, images) if self.id else None,
            "caption": self.caption,
            "entities": [
                {"name": e.name, "score": e.score, "description": e.description}
                for e in self.entities
            ],
            "text": self.text,
        }


@dataclass
class VisualContext:
    objects: list[VisualObject]
    missing: list[str] = field(default_factory=list)
    """Capabilities with no backend: their part of the context is left out."""
    failures: list[str] = field(default_factory=list)
    """Backends that failed, with their error."""

    def render(self) -> str:
        return "\n".join(o.render() for o in self.objects)

    def note(self) -> str:
        notes = []
        if self.missing:
            notes.append("not available: " + ", ".join(self.missing))
        notes += self.failures
        return "; ".join(notes)

    def to_json(self, images: dict[str, Image]) -> dict[str, Any]:
        return {
            "objects": [o.to_json(images) for o in self.objects],
            "missing": list(self.missing),
            "failures": list(self.failures),
        }


class _Gatherer:
    """Calls one capability at a time, remembering which were missing or failed."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.missing: list[str] = []
        self.failures: list[str] = []

    def _missing(self, capability: str, reason: str | None = None) -> None:
        """No backend for ``capability``; ``reason``: why its configured one cannot run
        (then it is a failure to report, not a capability left unconfigured)."""
        if reason:
            failure = f"{capability} cannot run here: {reason}"
            if failure not in self.failures:
                self.failures.append(failure)
        elif capability not in self.missing:
            self.missing.append(capability)

    def _failed(self, capability: str, error: Exception) -> None:
        self.failures.append(f"{capability} failed: {error}")

    async def boxes(self, image: Image, names: Sequence[str]) -> list[Box]:
        found: list[Box] = []
        for name in names:
            try:
                result = await DetectObject.invoke({"image": image, "name": name}, self.ctx)
            except CapabilityMissing as e:
                self._missing("detect", e.reason)
                return []
            except ToolError as e:
                self._failed("detect", e)
                return found
            found += [b for b in result.value if isinstance(b, Box)]
        return found

    async def captions(self, images: list[Image]) -> list[str | None]:
        try:
            result = await Caption.invoke({"image": images}, self.ctx)
        except CapabilityMissing as e:
            self._missing("caption", e.reason)
            return [None] * len(images)
        except ToolError as e:
            self._failed("caption", e)
            return [None] * len(images)
        return [str(c) for c in result.value]

    async def entities(self, images: list[Image]) -> list[list[Entity]]:
        backend = self.ctx.backends.get("entity")
        if backend is None:
            self._missing("entity", unavailable_reason(self.ctx.backends, "entity"))
            return [[] for _ in images]
        try:
            found = await backend.recognize(images)
        except Exception as e:  # a backend's own failure: recorded, the context goes on
            self._failed("entity", e)
            return [[] for _ in images]
        out: list[list[Entity]] = []
        for per_image in found:
            ranked = sorted(
                (e for e in per_image if isinstance(e, Entity)),
                key=lambda e: -(e.score if e.score is not None else -1.0),
            )
            out.append([_percent(e) for e in ranked[:MAX_ENTITIES]])
        return out

    async def text(self, image: Image) -> str | None:
        try:
            result = await OCR.invoke({"image": image}, self.ctx)
        except CapabilityMissing as e:
            self._missing("ocr", e.reason)
            return None
        except ToolError as e:
            self._failed("ocr", e)
            return None
        text = " ".join(str(result.value).split())
        return text or None


def _percent(e: Entity) -> Entity:
    """Scores shown 0-100 as the paper's context has them (backends give 0-1)."""
    if e.score is not None and e.score <= 1.0:
        return Entity(e.name, round(100 * e.score, 1), e.description)
    return e


def detector_names(ctx: ToolContext, configured: Sequence[str] = ()) -> list[str]:
    """What to ask the detector for: configured names, else its fixed classes, else a
    general list."""
    if configured:
        return list(configured)
    classes = getattr(ctx.backends.get("detect"), "classes", None)
    if isinstance(classes, list | tuple) and classes:
        return [str(c) for c in classes]
    return list(DEFAULT_OBJECT_NAMES)


async def build_context(
    image: Image,
    ctx: ToolContext,
    *,
    max_objects: int = 4,
    object_names: Sequence[str] = (),
) -> VisualContext:
    """The whole image and up to ``max_objects`` detected objects, described."""
    g = _Gatherer(ctx)
    whole = Box(0, 0, image.width, image.height, "whole image")
    objects = [VisualObject(0, "whole image", image, image.to_root(whole))]
    area = image.width * image.height
    boxes = await g.boxes(image, detector_names(ctx, object_names))
    boxes = [b for b in boxes if b.area >= MIN_AREA * area]
    boxes.sort(key=lambda b: -b.area)
    for box in _distinct(boxes)[:max_objects]:
        local = image.to_local(box)
        region = region_name(local, image.width, image.height)
        objects.append(VisualObject(len(objects), region, crop_one(image, box), box))
    crops = [o.image for o in objects]
    for o, caption in zip(objects, await g.captions(crops), strict=True):
        o.caption = caption
    for o, found in zip(objects, await g.entities(crops), strict=True):
        o.entities = found
    objects[0].text = await g.text(image)
    return VisualContext(objects, g.missing, g.failures)


def _distinct(boxes: list[Box], iou: float = 0.7) -> list[Box]:
    kept: list[Box] = []
    for b in boxes:
        if all(b.iou(k) < iou for k in kept):
            kept.append(b)
    return kept
