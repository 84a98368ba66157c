"""The OCR tool: read the text shown in images through the configured 'ocr' backend."""

from __future__ import annotations

from hammr.tools.base import ToolContext, ToolError, tool
from hammr.values import Image


async def _ocr(image: list[Image], ctx: ToolContext) -> list[str]:
    """Read the text in an image; crop to the text region first for best results.

    Args:
        image: the image (or crop) showing the text.

    Returns:
        the text on one line, "" when none was found
    """
    # An image with no readable text gives "" (a string, so `if text:` works in the agent's
    # code); the agent's observation renders it as an empty string.
    texts = await ctx.backend("ocr").read(image)
    if len(texts) != len(image):
        raise ToolError(f"OCR backend returned {len(texts)} results for {len(image)} images")
    return [str(t) for t in texts]


# Built with a call rather than ``@tool(...)``: tool's decorator-factory form is typed as
# returning Any, which mypy --strict rejects as an untyped decorator.
OCR = tool(_ocr, name="OCR", vectorised="image", batched=True, capability="ocr")
