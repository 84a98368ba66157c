"""Tools that ask a vision model about an image: caption, VQA, detection, presence, entity.

Each is served by the backend of its capability (``ctx.backend(...)``; a served VLM with
``backend = "vlm"``, see :mod:`hammr.backends.vlm`). Boxes a backend finds are in the pixels of
the image it was handed; :func:`DetectObject` maps them to root-image pixels, so they can go
straight into CropImage or ZoomIn whatever crop or zoom they were found in.
"""

from __future__ import annotations

from hammr.tools.base import ToolContext, ToolError, ToolResult, tool
from hammr.values import Box, Entity, Image


def _check(results: list[object], images: list[Image], what: str) -> None:
    if len(results) != len(images):
        raise ToolError(f"{what} backend returned {len(results)} results for {len(images)} images")


async def _caption(image: list[Image], ctx: ToolContext) -> list[str]:
    """Describe what an image shows in a sentence or two.

    Args:
        image: the image (or crop) to describe.

    Returns:
        text
    """
    texts = await ctx.backend("caption").caption(image)
    _check(texts, image, "caption")
    return [str(t) for t in texts]


async def _vqa(image: list[Image], question: str, ctx: ToolContext) -> list[str]:
    """Ask a simple question about what an image shows; the answer is short.

    Args:
        image: the image (or crop) to look at; crop first for small details.
        question: one plain visual question, e.g. 'What color is the car?'.

    Returns:
        text
    """
    answers = await ctx.backend("vqa").answer(image, [question] * len(image))
    _check(answers, image, "VQA")
    return [str(a) for a in answers]


def _order(box: Box) -> tuple[int, float, float, float]:
    return (0 if box.score is not None else 1, -(box.score or 0.0), box.y, box.x)


async def _detect(image: Image, name: str, ctx: ToolContext) -> ToolResult:
    """Find every instance of an object: its boxes in original-image pixels, best first.

    Args:
        image: the image (or crop) to search.
        name: what to find, e.g. 'dog' or 'red car'.

    Returns:
        boxes (an empty list when there is none)
    """
    found = await ctx.backend("detect").detect([image], [name])
    _check(found, [image], "detect")
    boxes = sorted(
        (image.to_root(Box(b.x, b.y, b.w, b.h, name, b.score)) for b in found[0]), key=_order
    )
    if not boxes:
        # The agent reads "no 'dog' found: empty list", not a bare "empty list".
        return ToolResult([], observation=f"no '{name}' found: empty list")
    return ToolResult(boxes)


async def _object_in_image(image: list[Image], name: str, ctx: ToolContext) -> list[bool]:
    """Check whether an object is visible in an image.

    Args:
        image: the image (or crop) to look at.
        name: the object, e.g. 'dog' or 'traffic light'.

    Returns:
        boolean
    """
    answers = await ctx.backend("object_in_image").contains(image, [name] * len(image))
    _check(answers, image, "object_in_image")
    return [bool(a) for a in answers]


async def _recognize(image: Image, ctx: ToolContext) -> Entity:
    """Name the most specific thing an image shows (landmark, species, product, artwork, ...).

    Args:
        image: the image; crop to the object first.

    Returns:
        entity
    """
    found = await ctx.backend("entity").recognize([image])
    _check(found, [image], "entity")
    entities: list[Entity] = list(found[0])
    if not entities:
        raise ToolError("no entity recognised in this image; crop to the object and try again")
    return max(entities, key=lambda e: e.score if e.score is not None else -1.0)


# Built with calls rather than ``@tool(...)`` like the OCR tool, keeping the function names
# private and the tool names as the agent sees them.
Caption = tool(_caption, name="Caption", vectorised="image", batched=True, capability="caption")
VQA = tool(_vqa, name="VQA", vectorised="image", batched=True, capability="vqa")
DetectObject = tool(_detect, name="DetectObject", capability="detect")
ObjectInImage = tool(
    _object_in_image,
    name="ObjectInImage",
    vectorised="image",
    batched=True,
    capability="object_in_image",
)
RecognizeEntity = tool(_recognize, name="RecognizeEntity", capability="entity")

VISION_TOOLS = (Caption, VQA, DetectObject, ObjectInImage, RecognizeEntity)
