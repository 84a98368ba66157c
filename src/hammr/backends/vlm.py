"""A served vision-language model as the backend of several capabilities.

One :class:`VLMBackend` talks to any OpenAI-compatible chat server that takes images (vLLM,
SGLang, llama-server, Ollama, OpenAI, Gemini, ...) and implements the capability protocols of
:mod:`hammr.backends.capabilities`:

=================  =====================  ==================================================
capability         method                 what the model is asked
=================  =====================  ==================================================
caption            ``caption(images)``    a one or two sentence description
vqa                ``answer(images, qs)`` a short answer to the question
ocr                ``read(images)``       the text shown, exactly, on one line ("" if none)
object_in_image    ``contains(images, n)`` yes or no
entity             ``recognize(images)``  the most specific named entity, as JSON
detect             ``detect(images, n)``  a JSON list of ``{"bbox_2d": [x1, y1, x2, y2]}``
=================  =====================  ==================================================

Every call is one chat request holding one image and a short prompt, sent at temperature 0;
a list of images becomes that many requests, at most ``concurrency`` in flight at once, and
the results come back in the order of the list. A failed request (server down, too slow,
refusing) raises :class:`~hammr.tools.base.ToolError` with the server's one-line reason, so
the agent sees it as an observation and the run goes on.

``base_url`` may list several replicas of the server (a TOML array, or URLs separated by
commas): each request goes to the least busy one that is up (:mod:`hammr.backends.pool`).

Images wider or taller than ``max_image_side`` are scaled down before sending (0: never);
with ``size_multiple`` > 1 both sides of the image sent are also rounded to a multiple of it.

Boxes (``detect``) come back in the pixels of the image that was passed in, whatever was
sent. The model's corner coordinates are read according to ``box_format``:

- ``"absolute"``: pixels of the image as sent (Qwen2.5-VL's native grounding format);
- ``"qwen2-1000"``: 0..1000 on both axes (Qwen2-VL, also Qwen3-VL);
- ``"normalized"``: 0..1 on both axes;
- ``"auto"`` (default): per reply, ``normalized`` when every coordinate in it is at most 1.0,
  else ``absolute``. A 0..1000 reply cannot be told from pixels, so set ``qwen2-1000`` for
  such models.

Qwen2.5-VL resizes every image to sides that are multiples of 28 before it looks at it and
answers in the pixels of *that* image; set ``size_multiple = 28`` so the image sent already
has such sides and its absolute coordinates map back exactly.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from PIL import Image as PILImage

from hammr.backends.http_client import PerLoopSemaphore, gather_all
from hammr.backends.llm.base import ImagePart, LLMError, LLMRequest, Message
from hammr.backends.llm.meter import record
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.backends.pool import ReplicaPool, parse_base_urls
from hammr.tools.base import ToolError
from hammr.values import Box, Entity, Image

BoxFormat = Literal["auto", "absolute", "qwen2-1000", "normalized"]
BOX_FORMATS: tuple[str, ...] = get_args(BoxFormat)

# -- prompts ---------------------------------------------------------------------------------

CAPTION_PROMPT = (
    "Describe this image in one or two sentences: the main subjects, what they are doing and "
    "where. Reply with the description only."
)

VQA_PROMPT = (
    "Answer the question about this image with a short phrase, a word or a number; "
    "give no explanation.\nQuestion: {question}"
)

OCR_PROMPT = (
    "Copy out all the text that appears in this image, exactly as written (same letters, "
    "digits, case and punctuation), in reading order, on a single line. Do not translate, "
    "correct or describe anything. If the image has no text, reply NONE."
)

CONTAINS_PROMPT = "Is there any {name} in this image? Reply with one word: yes or no."

ENTITY_PROMPT = (
    "What is the most specific named thing this image shows: the exact landmark or building, "
    "species or breed, product or brand, artwork, vehicle model, or well-known person? "
    'Reply with JSON only: {"entity": "<name>", "confidence": <0 to 1>}. '
    'If nothing specific can be named, reply {"entity": null}.'
)

DETECT_PROMPT = (
    "Find every {name} in this image. Reply with a JSON list only, one item per {name}: "
    '[{{"bbox_2d": [x1, y1, x2, y2], "label": {label}}}], where (x1, y1) is the top-left and '
    "(x2, y2) the bottom-right corner of the box, {coordinates}. "
    "Reply [] if there is no {name}."
)

_COORDINATES: dict[str, str] = {
    "absolute": "in pixels of this {w}x{h} image",
    "qwen2-1000": "on a 0 to 1000 scale on both axes (0,0 is the top-left of the image)",
    "normalized": "as fractions of the image width and height, from 0 to 1",
}

# -- parsing model replies -------------------------------------------------------------------

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)(?:```|$)", re.S)
_NONE_WORDS = {
    "",
    "none",
    "null",
    "nothing",
    "n/a",
    "na",
    "unknown",
    "no text",
    "no entity",
    "not sure",
    "i don't know",
    "i do not know",
    "unclear",
}
_NO_TEXT = {"", "none", "(none)", "null", "no text"}
"""OCR replies meaning "no text" (narrow: a sign may well read UNKNOWN or N/A)."""
_YES_NO = re.compile(r"\b(yes|no|true|false|yeah|yep|nope)\b", re.I)
_QWEN2_BOX = re.compile(
    r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)\s*,?\s*"
    r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)"
)
_BOX_KEYS = ("bbox_2d", "bbox", "box", "bounding_box", "box_2d", "coordinates", "bbox_xyxy")
_CORNER_KEYS = (("x1", "y1", "x2", "y2"), ("xmin", "ymin", "xmax", "ymax"))
_NAME_KEYS = ("entity", "name", "label", "title", "answer")
_SCORE_KEYS = ("confidence", "score", "probability", "certainty")
_DESC_KEYS = ("description", "type", "category", "kind")


def one_line(text: str) -> str:
    return " ".join(text.split())


def _unfence(text: str) -> str:
    """The inside of the first code fence, or the text itself when it has none."""
    m = _FENCE.search(text)
    return m.group(1) if m else text


def json_values(text: str) -> list[Any]:
    """Every JSON array or object in ``text``, left to right (fences, prose and truncated tails
    around them are skipped)."""
    body = _unfence(text).strip()
    try:
        whole = json.loads(body)
    except ValueError:
        pass
    else:
        return [whole]
    decoder = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while i < len(body):
        if body[i] in "[{":
            try:
                value, end = decoder.raw_decode(body, i)
            except ValueError:
                i += 1
                continue
            out.append(value)
            i = end
        else:
            i += 1
    return out


def _unquote(text: str) -> str:
    t = text.strip()
    while len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'`":
        t = t[1:-1].strip()
    return t


def parse_text(reply: str) -> str:
    """A caption or answer: one line, without fences or wrapping quotes."""
    return one_line(_unquote(_unfence(reply)))


def parse_ocr(reply: str) -> str:
    """The transcribed text on one line; "" when the model said there is none."""
    text = parse_text(reply)
    text = re.sub(
        r"^(?:the\s+)?text(?:\s+in\s+the\s+image)?\s*(?:is|reads)?\s*:\s*",
        "",
        text,
        count=1,
        flags=re.I,
    )
    text = _unquote(text)
    if text.lower().rstrip(".!") in _NO_TEXT or re.fullmatch(
        r"(?:there is )?no (?:visible |readable )?text(?: (?:in|on) (?:the|this) image)?\.?",
        text,
        re.I,
    ):
        return ""
    return text


def parse_yes_no(reply: str) -> bool:
    """The first yes/no word of the reply decides; a reply with neither counts as no.

    A model that will not say "yes" plainly has not seen the object clearly, and a False is
    the safer answer for the agent's follow-up steps (it may still crop and ask again).
    """
    m = _YES_NO.search(reply)
    return m is not None and m.group(1).lower() in ("yes", "true", "yeah", "yep")


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        f = float(v)
    elif isinstance(v, str):
        s = v.strip()
        pct = s.endswith("%")
        try:
            f = float(s.rstrip("%").strip())
        except ValueError:
            return None
        if pct:
            f /= 100
    else:
        return None
    return f if math.isfinite(f) else None


def _score(v: Any) -> float | None:
    f = _number(v)
    if f is None:
        return None
    if 1.0 < f <= 100.0:
        f /= 100  # a percentage
    return min(1.0, max(0.0, f))


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lower = {str(k).lower(): v for k, v in d.items()}
    for k in keys:
        if k in lower and lower[k] is not None:
            return lower[k]
    return None


def _entity_name(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    name = one_line(_unquote(v)).rstrip(".")
    return None if name.lower() in _NONE_WORDS else name


def parse_entities(reply: str) -> list[Entity]:
    """Entities from ``{"entity": ..., "confidence": ...}`` (or a list of such), a JSON
    string, or a plain name; best score first. [] when the model named nothing."""
    values = json_values(reply)
    if not values:
        stripped = _unfence(reply).strip()
        if stripped.startswith('"'):
            try:
                values = [json.loads(stripped)]
            except ValueError:
                values = []
    if values:
        items: list[Any] = []
        for v in values:
            items.extend(v if isinstance(v, list) else [v])
        out: list[Entity] = []
        for item in items:
            if isinstance(item, dict):
                name = _entity_name(_first(item, _NAME_KEYS))
                if name is None:
                    continue
                desc = _first(item, _DESC_KEYS)
                out.append(
                    Entity(
                        name,
                        _score(_first(item, _SCORE_KEYS)),
                        one_line(desc) if isinstance(desc, str) and desc.strip() else None,
                    )
                )
            elif (name := _entity_name(item)) is not None:
                out.append(Entity(name))
        return sorted(out, key=lambda e: -(e.score if e.score is not None else -1.0))
    lines = [ln for ln in _unfence(reply).splitlines() if ln.strip()]
    if not lines:
        return []
    text = re.sub(
        r"^(?:the\s+)?(?:entity|answer|name)(?:\s+is)?\s*:?\s*",
        "",
        lines[0].strip(),
        count=1,
        flags=re.I,
    )
    text = re.sub(
        r"^(?:this|it)\s+(?:is|shows|appears to be)\s+(?:an?\s+|the\s+)?",
        "",
        text,
        count=1,
        flags=re.I,
    )
    name = _entity_name(text)
    if name is None or len(name) > 120:
        return []
    return [Entity(name)]


@dataclass(frozen=True)
class RawBox:
    """Corner coordinates as the model wrote them (x1, y1, x2, y2), before any scaling."""

    x1: float
    y1: float
    x2: float
    y2: float
    label: str | None = None
    score: float | None = None


def _corners(v: Any) -> tuple[float, float, float, float] | None:
    if isinstance(v, dict):
        for keys in _CORNER_KEYS:
            nums = [_number(_first(v, (k,))) for k in keys]
            if all(n is not None for n in nums):
                a, b, c, d = (float(n) for n in nums if n is not None)
                return (a, b, c, d)
        return None
    if isinstance(v, list | tuple) and len(v) == 1:
        return _corners(v[0])
    if isinstance(v, list | tuple) and len(v) == 4:
        nums = [_number(x) for x in v]
        if all(n is not None for n in nums):
            a, b, c, d = (float(n) for n in nums if n is not None)
            return (a, b, c, d)
    return None


def _raw_boxes(value: Any, depth: int = 0) -> Iterator[RawBox]:
    if depth > 4:
        return
    if isinstance(value, dict):
        coords = _first(value, _BOX_KEYS)
        corners = _corners(coords) if coords is not None else _corners(value)
        if corners is not None:
            label = _first(value, ("label", "name", "object", "class"))
            yield RawBox(
                *corners,
                label=str(label) if isinstance(label, str) else None,
                score=_score(_first(value, _SCORE_KEYS)),
            )
            return
        for v in value.values():  # {"objects": [...]}, {"dog": [x1, y1, x2, y2]}, ...
            if isinstance(v, list | dict):
                yield from _raw_boxes(v, depth + 1)
        return
    if isinstance(value, list | tuple):
        corners = _corners(value)
        if corners is not None and not any(isinstance(x, list | dict) for x in value):
            yield RawBox(*corners)
            return
        for v in value:
            yield from _raw_boxes(v, depth + 1)


def parse_raw_boxes(reply: str) -> list[RawBox]:
    """Every box in a grounding reply: JSON (fenced or not, a list or a single object, keys
    ``bbox_2d``/``bbox``/``box``, corner dicts) or Qwen2-VL's ``(x1,y1),(x2,y2)`` text."""
    out = [b for v in json_values(reply) for b in _raw_boxes(v)]
    if not out:
        for m in _QWEN2_BOX.finditer(reply):
            a, b, c, d = (float(g) for g in m.groups())
            out.append(RawBox(a, b, c, d))
    return out


def boxes_from_raw(
    raw: list[RawBox],
    box_format: BoxFormat,
    sent_size: tuple[int, int],
    own_size: tuple[int, int],
    label: str | None = None,
) -> list[Box]:
    """Map model coordinates to boxes in the pixels of the image itself (``own_size``).

    ``sent_size`` is the size of the image the model saw. Corners given in either order are
    sorted; boxes are clipped to the image, and ones under a pixel wide or tall (or exact
    repeats) are dropped.
    """
    fmt = box_format
    if fmt == "auto":
        coords = [c for b in raw for c in (b.x1, b.y1, b.x2, b.y2)]
        fmt = "normalized" if coords and all(c <= 1.0 for c in coords) else "absolute"
    ow, oh = own_size
    sw, sh = sent_size
    # multiply before dividing: 210 * 432 / 420 is exactly 216, 210 * (432 / 420) is not
    dx, dy = {"absolute": (sw, sh), "qwen2-1000": (1000, 1000)}.get(fmt, (1, 1))
    out: list[Box] = []
    seen: set[tuple[float, float, float, float]] = set()
    for b in raw:
        x1, x2 = sorted((b.x1 * ow / dx, b.x2 * ow / dx))
        y1, y2 = sorted((b.y1 * oh / dy, b.y2 * oh / dy))
        x1, y1 = max(0.0, x1), max(0.0, y1)
        x2, y2 = min(float(ow), x2), min(float(oh), y2)
        if x2 - x1 < 1.0 or y2 - y1 < 1.0:
            continue
        key = (round(x1, 3), round(y1, 3), round(x2, 3), round(y2, 3))
        if key in seen:
            continue
        seen.add(key)
        out.append(Box(x1, y1, x2 - x1, y2 - y1, label or b.label, b.score))
    return out


# -- the backend -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _SentImage(ImagePart):
    """An image part whose PNG data URL was made ahead (off the event loop)."""

    url: str = ""
    size: tuple[int, int] = (0, 0)

    def data_url(self) -> str:
        return self.url


class VLMBackend:
    """Caption, VQA, OCR, presence, entity and grounding with one served VLM (see module doc)."""

    def __init__(
        self,
        base_url: str | Sequence[str] | ReplicaPool,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60,
        max_retries: int = 3,
        box_format: BoxFormat = "auto",
        max_image_side: int = 1280,
        concurrency: int = 4,
        size_multiple: int = 1,
        max_tokens: int = 512,
    ) -> None:
        if box_format not in BOX_FORMATS:
            raise ValueError(
                f"box_format must be one of {', '.join(BOX_FORMATS)}, got {box_format!r}"
            )
        if max_image_side < 0:
            raise ValueError(f"max_image_side must be 0 (no limit) or more, got {max_image_side}")
        if concurrency < 1 or size_multiple < 1 or max_tokens < 1 or max_retries < 1:
            raise ValueError(
                "concurrency, size_multiple, max_tokens and max_retries must be at least 1"
            )
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be above 0, got {timeout_s}")
        self.llm = OpenAICompatLLM(
            base_url,
            model,
            api_key_env=api_key_env or None,
            timeout_s=timeout_s,
            max_retries=max_retries,
            vision=True,  # the model sees the images it is sent
            config_table="vlm",  # its errors name the [vlm] table and the VLM server
            server_label="VLM server",
        )
        self.box_format: BoxFormat = box_format
        self.max_image_side = max_image_side
        self.concurrency = concurrency
        self.size_multiple = size_multiple
        self.max_tokens = max_tokens
        self._limit = PerLoopSemaphore()

    def __repr__(self) -> str:
        urls = self.llm.base_urls
        shown = repr(urls[0]) if len(urls) == 1 else repr(list(urls))
        return f"VLMBackend(base_url={shown}, model={self.llm.model!r})"

    async def aclose(self) -> None:
        await self.llm.aclose()

    # -- sending ---------------------------------------------------------------------------

    def send_size(self, width: int, height: int) -> tuple[int, int]:
        """The size an image of ``width`` x ``height`` is sent at."""
        scale = 1.0
        side = self.max_image_side
        if side and max(width, height) > side:
            scale = side / max(width, height)
        w, h = max(1, round(width * scale)), max(1, round(height * scale))
        m = self.size_multiple
        if m > 1:
            w, h = max(m, round(w / m) * m), max(m, round(h / m) * m)
        return w, h

    def prepare(self, image: Image) -> _SentImage:
        """The image part for ``image``: resized as :meth:`send_size` says, as a PNG data URL."""
        size = self.send_size(image.width, image.height)
        pixels = image.pixels
        if size != (image.width, image.height):
            pixels = pixels.resize(size, PILImage.Resampling.LANCZOS)
        buf = io.BytesIO()
        pixels.save(buf, format="PNG")
        url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        return _SentImage(image, url=url, size=size)

    async def ask(
        self,
        image: Image,
        prompt: str | Callable[[tuple[int, int]], str],
        what: str,
        max_tokens: int | None = None,
    ) -> tuple[str, tuple[int, int]]:
        """One chat request: the image, then the prompt (or a function of the size sent).
        Returns the reply text and the size the image was sent at."""
        async with self._limit.current(self.concurrency):
            part = await asyncio.to_thread(self.prepare, image)
            text = prompt(part.size) if callable(prompt) else prompt
            request = LLMRequest(
                messages=(Message("user", (part, text)),),
                max_tokens=max_tokens or self.max_tokens,
                temperature=0.0,
            )
            try:
                response = await self.llm.complete(request)
            except LLMError as e:
                raise ToolError(f"{what} failed: {e}") from None
            record(response)  # a call made for the step whose tool asked (see llm.meter)
        return response.text, part.size

    # -- capabilities ----------------------------------------------------------------------

    async def caption(self, images: list[Image]) -> list[str]:
        async def one(img: Image) -> str:
            text, _ = await self.ask(img, CAPTION_PROMPT, "caption", 160)
            return parse_text(text)

        return await gather_all([one(i) for i in images])

    async def answer(self, images: list[Image], questions: list[str]) -> list[str]:
        _same_length(images, questions, "questions")

        async def one(img: Image, q: str) -> str:
            text, _ = await self.ask(img, VQA_PROMPT.format(question=one_line(q)), "VQA", 64)
            return parse_text(text)

        return await gather_all([one(i, q) for i, q in zip(images, questions, strict=True)])

    async def read(self, images: list[Image]) -> list[str]:
        async def one(img: Image) -> str:
            text, _ = await self.ask(img, OCR_PROMPT, "OCR")
            return parse_ocr(text)

        return await gather_all([one(i) for i in images])

    async def contains(self, images: list[Image], names: list[str]) -> list[bool]:
        _same_length(images, names, "names")

        async def one(img: Image, name: str) -> bool:
            prompt = CONTAINS_PROMPT.format(name=one_line(name))
            text, _ = await self.ask(img, prompt, "object check", 8)
            return parse_yes_no(text)

        return await gather_all([one(i, n) for i, n in zip(images, names, strict=True)])

    async def recognize(self, images: list[Image]) -> list[list[Entity]]:
        async def one(img: Image) -> list[Entity]:
            text, _ = await self.ask(img, ENTITY_PROMPT, "entity recognition", 128)
            return parse_entities(text)

        return await gather_all([one(i) for i in images])

    async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]:
        _same_length(images, names, "names")

        async def one(img: Image, name: str) -> list[Box]:
            name = one_line(name)
            coordinates = _COORDINATES["absolute" if self.box_format == "auto" else self.box_format]

            def prompt(size: tuple[int, int]) -> str:
                return DETECT_PROMPT.format(
                    name=name,
                    label=json.dumps(name),
                    coordinates=coordinates.format(w=size[0], h=size[1]),
                )

            text, sent = await self.ask(img, prompt, "detection")
            raw = parse_raw_boxes(text)
            return boxes_from_raw(raw, self.box_format, sent, (img.width, img.height), name)

        return await gather_all([one(i, n) for i, n in zip(images, names, strict=True)])


def _same_length(images: list[Image], other: list[str], what: str) -> None:
    if len(images) != len(other):
        raise ValueError(f"{len(images)} images but {len(other)} {what}")


OPTIONS: dict[str, type] = {
    "base_url": str,
    "model": str,
    "api_key_env": str,
    "timeout_s": float,
    "max_retries": int,
    "box_format": str,
    "max_image_side": int,
    "size_multiple": int,
    "concurrency": int,
    "max_tokens": int,
}


def from_config(options: dict[str, Any]) -> VLMBackend:
    """The ``backend = "vlm"`` factory for every capability it serves (options: the ``[vlm]``
    table, overridden by the capability's own ``[tools.<capability>]`` keys)."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    # base_url may list replicas (a TOML array, or commas), which parse_options cannot coerce
    urls = options.get("base_url")
    opts = parse_options("vlm", {k: v for k, v in options.items() if k != "base_url"}, OPTIONS)
    if urls in (None, "", []) or not opts.get("model"):
        raise BackendUnavailable(
            "no served VLM is configured: set [vlm] base_url and model in hammr.toml "
            "(or HAMMR_VLM__BASE_URL and HAMMR_VLM__MODEL)"
        )
    try:
        opts["base_url"] = parse_base_urls(urls)
    except ValueError as e:
        raise ValueError(f"vlm.base_url: {e}") from None
    try:
        return VLMBackend(**opts)
    except ValueError as e:
        raise ValueError(f"vlm: {e}") from None
