"""What an agent whose model *sees* is shown: which images, how large, how many.

A model sees when its backend says so (``vision = True``; see
:func:`hammr.backends.llm.base.sees_images`). hammr.toml ``[llm] vision = "auto"`` decides it
from the model's name with :func:`looks_like_vlm`, against :data:`VLM_FAMILIES`, the one list
of known vision-language model families (no server is asked).

An agent that sees gets, in its task message, each input image after the text that names it,
and in every ``[Observe]`` turn, each image of the tool's result (an image, or the images of a
list) after the observation text, every one labelled with the variable that holds it
(``image 'crops[1]' (320x240):``). :class:`ImageBudget` keeps two limits
(:class:`~hammr.backends.llm.base.VisionLimits`):

- **pixels**: an image above ``max_image_pixels`` is downscaled, aspect kept, before it is
  encoded; its label gives both sizes (``(4000x3000, shown at 1155x866)``), because boxes are
  always written in original-image pixels;
- **count**: at most ``max_images`` images in one conversation (a server refuses more, e.g.
  vLLM's ``--limit-mm-per-prompt``).

**Prefix stability wins over recency.** Every request of a run repeats the previous one's
messages byte for byte and adds to the end, so a server's prefix cache (vLLM, SGLang,
llama.cpp) reuses all of it. Dropping the *oldest* images once the count is reached would
rewrite the turns that hold them, and from there on every request would miss that cache. So
an image, once attached, stays, and the count limit is kept by attaching no *new* image past
it: the turn that would have shown it says so (``(image 'z' is not shown: this conversation
already shows 8 images, the most allowed; its variable still works in tool calls)``). Within
one turn, images are attached in order while room is left. An image identical to one already
shown (same pixels) is not attached again; its label points to the earlier one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from hammr.backends.llm.base import ContentPart, ImagePart, VisionLimits
from hammr.values import Image, Value

VLM_FAMILIES: tuple[tuple[str, str], ...] = (
    ("Qwen-VL, Qwen2-VL, Qwen2.5-VL, Qwen3-VL (and Ollama's qwen2.5vl)", r"qwen[\d.]*[-_ ]?vl"),
    ("Qwen Omni", r"qwen[\d.]*[-_ ]?omni"),
    ("QVQ", r"qvq"),
    ("Qwen3.5 (natively multimodal)", r"qwen3\.5"),
    ("LLaVA, LLaVA-NeXT, LLaVA-OneVision", r"llava"),
    ("InternVL", r"internvl"),
    ("Gemma 3 and 3n, not the text-only 1B and 270M", r"gemma[-_ ]?3(?![-_: ]?(?:1b|270m))"),
    ("GPT-4o, GPT-4.1, GPT-5", r"gpt[-_ ]?(?:4o|4\.1|5)"),
    ("Gemini", r"gemini"),
    ("Claude 3 and later", r"claude[-_ ]?(?:3|sonnet|opus|haiku)"),
    ("Pixtral", r"pixtral"),
    ("Idefics", r"idefics"),
    ("Molmo", r"molmo"),
    ("Phi-3/3.5 Vision, Phi-4 Multimodal", r"phi[-_ ]?(?:3(?:\.5)?[-_ ]?vision|4[-_ ]?multimodal)"),
    ("MiniCPM-V, MiniCPM-o", r"minicpm[-_ ]?[vo]"),
    ("SmolVLM, CogVLM, NVLM and other *VLM names", r"vlm"),
    ("Llama 3.2 Vision, Granite Vision and other *vision names", r"vision"),
    ("Llama 4 (Scout, Maverick)", r"llama[-_ ]?4"),
    ("Mistral Small 3.1 and 3.2", r"mistral[-_ ]?small[-_ ]?3\.[12]"),
    ("GLM-4V, GLM-4.1V, GLM-4.5V", r"glm[-_ ]?4(?:\.\d)?[-_ ]?v"),
    ("Kimi-VL, DeepSeek-VL, MiMo-VL, Keye-VL and other *-VL names", r"[-_ ]vl(?:\d|[-_: ]|$)"),
    ("Moondream", r"moondream"),
)
"""(family, pattern): a model whose name (lower-cased, searched anywhere, so
``Qwen/Qwen2.5-VL-7B-Instruct``, ``qwen2.5vl:7b`` and ``gpt-4o-2024-08-06`` all count) matches
a pattern sees images under ``[llm] vision = "auto"``. For anything else, set "on"."""

_VLM = re.compile("|".join(f"(?:{pattern})" for _, pattern in VLM_FAMILIES))


def looks_like_vlm(model: str) -> bool:
    """Whether a model name belongs to one of the :data:`VLM_FAMILIES`."""
    return _VLM.search(model.lower()) is not None


def labelled_images(var: str, value: Value) -> list[tuple[str, Image]]:
    """The images in a variable's value, each with the name a tool call uses for it:
    ``var`` for an image, ``var[i]`` for the images of a list."""
    if isinstance(value, Image):
        return [(var, value)]
    if isinstance(value, list | tuple):
        return [(f"{var}[{i}]", v) for i, v in enumerate(value) if isinstance(v, Image)]
    return []


def fit_pixels(image: Image, max_pixels: int) -> Image:
    """``image``, or a copy downscaled (aspect kept) to at most ``max_pixels`` pixels."""
    from PIL import Image as PILImage

    w, h = image.width, image.height
    if w * h <= max_pixels:
        return image
    scale = math.sqrt(max_pixels / (w * h))
    nw, nh = max(1, math.floor(w * scale)), max(1, math.floor(h * scale))
    while nw * nh > max_pixels:  # only when a side was rounded up to one pixel
        if nw >= nh:
            nw -= 1
        else:
            nh -= 1
    return Image(image.pixels.resize((nw, nh), PILImage.Resampling.LANCZOS))


class ImageBudget:
    """The images one conversation has shown, and what a new turn may still attach (see the
    module docstring). One budget per run; it only ever adds to the newest turn."""

    def __init__(self, limits: VisionLimits) -> None:
        self.limits = limits
        self.shown = 0
        self._labels: dict[str, str] = {}
        """content hash of every image shown -> the label it was shown under."""

    def turn(self, text: str, images: Sequence[tuple[str, Image]]) -> str | tuple[ContentPart, ...]:
        """The content of a new turn: ``text``, then each image after its label, then a note
        on the images left out. Plain ``text`` when no image is attached and none left out."""
        parts: list[ContentPart] = [text]
        hidden: list[str] = []
        for label, image in images:
            earlier = self._labels.get(image.content_hash())
            if earlier is not None:
                parts.append(f"\nimage '{label}' ({_size(image)}): the same as image '{earlier}'")
                continue
            if self.shown >= self.limits.max_images:
                hidden.append(label)
                continue
            fitted = fit_pixels(image, self.limits.max_image_pixels)
            size = _size(image)
            if fitted is not image:
                size += f", shown at {_size(fitted)}"
            part = ImagePart(fitted)
            # encode and hash now, once (off the event loop), not in every request repeating it
            part.data_url()
            fitted.content_hash()
            parts += [f"\nimage '{label}' ({size}):", part]
            self.shown += 1
            self._labels[image.content_hash()] = label
        if hidden:
            names = ", ".join(f"'{n}'" for n in hidden)
            one = len(hidden) == 1
            parts.append(
                f"\n({'image' if one else 'images'} {names} {'is' if one else 'are'} not shown: "
                f"this conversation already shows {self.limits.max_images} images, the most "
                f"allowed; {'its variable still works' if one else 'their variables still work'}"
                " in tool calls)"
            )
        return _joined(parts)


def _joined(parts: list[ContentPart]) -> str | tuple[ContentPart, ...]:
    """Adjacent text parts as one; plain text when no image is left."""
    out: list[ContentPart] = []
    for p in parts:
        prev = out[-1] if out else None
        if isinstance(p, str) and isinstance(prev, str):
            out[-1] = prev + p
        else:
            out.append(p)
    if len(out) == 1 and isinstance(out[0], str):
        return out[0]
    return tuple(out)


def _size(image: Image) -> str:
    return f"{image.width}x{image.height}"


__all__ = ["VLM_FAMILIES", "ImageBudget", "fit_pixels", "labelled_images", "looks_like_vlm"]
