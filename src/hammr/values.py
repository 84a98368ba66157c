"""Typed values that live in an agent's variables.

Every value knows how to render itself as a short line of text for the prompt, and boxes
always live in the pixel coordinates of the *root* image (the one the question came with),
whatever crop or zoom they were found in.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hammr.input_file import InputError, read_input_bytes

if TYPE_CHECKING:  # Pillow is imported to load or make pixels, not to name the kinds
    from PIL import Image as PILImage

DEFAULT_MAX_PIXELS = 64_000_000
"""Images above this many pixels are refused (decompression-bomb guard)."""


class ValueError_(ValueError):
    """A value could not be built from what was given (bad box, unreadable image, ...)."""


class ImageLoadError(ValueError_):
    """An image file is missing, corrupt, not an image, or too large."""


def _finite(name: str, v: float) -> float:
    f = float(v)
    if not math.isfinite(f):
        raise ValueError_(f"{name} must be a finite number, got {v!r}")
    return f


def _fmt(v: float) -> str:
    return str(round(v)) if abs(v - round(v)) < 1e-6 else f"{v:.1f}"


@dataclass(frozen=True)
class Box:
    """An axis-aligned box (x, y, w, h) in root-image pixels."""

    x: float
    y: float
    w: float
    h: float
    label: str | None = None
    score: float | None = None

    def __post_init__(self) -> None:
        for name in ("x", "y", "w", "h"):
            object.__setattr__(self, name, _finite(name, getattr(self, name)))
        if self.w <= 0 or self.h <= 0:
            raise ValueError_(
                f"box width and height must be positive, got width={_fmt(self.w)} "
                f"height={_fmt(self.h)}"
            )
        if self.score is not None:
            object.__setattr__(self, "score", _finite("score", self.score))

    @classmethod
    def from_xywh(cls, values: Sequence[Any], label: str | None = None) -> Box:
        if len(values) != 4:
            raise ValueError_(f"a box needs 4 numbers [x, y, w, h], got {len(values)}")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError_(f"a box needs 4 numbers [x, y, w, h], got {list(values)!r}")
        return cls(float(values[0]), float(values[1]), float(values[2]), float(values[3]), label)

    @property
    def x2(self) -> float:
        return self.x + self.w

    @property
    def y2(self) -> float:
        return self.y + self.h

    @property
    def area(self) -> float:
        return self.w * self.h

    @property
    def center(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y + self.h / 2)

    def xywh(self) -> list[float]:
        return [self.x, self.y, self.w, self.h]

    def intersection(self, other: Box) -> float:
        iw = min(self.x2, other.x2) - max(self.x, other.x)
        ih = min(self.y2, other.y2) - max(self.y, other.y)
        return max(0.0, iw) * max(0.0, ih)

    def iou(self, other: Box) -> float:
        inter = self.intersection(other)
        union = self.area + other.area - inter
        return inter / union if union > 0 else 0.0

    def render(self) -> str:
        where = f"left:{_fmt(self.x)}/top:{_fmt(self.y)}/width:{_fmt(self.w)}/height:{_fmt(self.h)}"
        head = f"{self.label} at {where}" if self.label else where
        return f"{head} (score {self.score:.2f})" if self.score is not None else head


EXIF_ORIENTATION = 0x0112
"""The EXIF tag saying how a camera's stored pixels must be turned to stand upright."""


def upright(image: PILImage.Image) -> PILImage.Image:
    """``image`` turned as its EXIF orientation says (a phone photo stored on its side, tag 6,
    comes back upright), or ``image`` itself when it has no such tag. Applied once, when a file
    is loaded, so every tool, box and point sees the picture as a viewer shows it. A tag that
    cannot be read or applied leaves the stored pixels as they are: the picture is still
    usable, and refusing it for its metadata would lose a readable image."""
    from PIL import ImageOps

    try:
        orientation = image.getexif().get(EXIF_ORIENTATION, 1)
        if orientation in (None, 1):
            return image
        turned = ImageOps.exif_transpose(image)
    except Exception:  # Pillow raises many kinds on malformed EXIF blocks
        return image
    return turned if turned is not None else image


@dataclass(eq=False)
class Image:
    """An image with lineage.

    A loaded image holds its upright pixels (:func:`upright`): what every viewer shows, and
    the frame every box and point is in.

    ``crop_box`` is the region of the root image this image shows (root pixels) and ``zoom``
    is how many of this image's pixels span one root pixel. Together they map any box found
    in this image back to root coordinates (:meth:`to_root`).
    """

    pixels: PILImage.Image
    parent: Image | None = None
    crop_box: Box | None = None
    zoom: float = 1.0
    source: str | None = None
    _hash: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.pixels.mode not in ("RGB", "L"):
            self.pixels = self.pixels.convert("RGB")
        if self.zoom <= 0 or not math.isfinite(self.zoom):
            raise ValueError_(f"zoom must be a positive finite number, got {self.zoom!r}")

    @classmethod
    def open(cls, path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image:
        """Load an image file, refusing missing, corrupt and oversized files with one clear line."""
        p = Path(path)
        try:
            data = read_input_bytes(p)
        except FileNotFoundError:
            raise ImageLoadError(f"image file not found: {p}") from None
        except InputError as e:
            raise ImageLoadError(f"not an image file: {p} ({e.strerror})") from None
        except OSError as e:
            raise ImageLoadError(f"cannot read the image {p}: {e.strerror or e}") from None
        return cls.from_bytes(data, max_pixels=max_pixels, source=str(p))

    @classmethod
    def from_bytes(
        cls, data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, source: str | None = None
    ) -> Image:
        from PIL import Image as PILImage
        from PIL import UnidentifiedImageError

        where = source or "image data"
        if not data:
            raise ImageLoadError(f"{where}: not a readable image (it is empty)")
        try:
            with PILImage.open(io.BytesIO(data)) as probe:
                w, h = probe.size
                if w * h > max_pixels:
                    raise ImageLoadError(
                        f"{where}: {w}x{h} = {w * h} pixels is above the limit of {max_pixels} "
                        "(raise it with max_pixels if you trust this file)"
                    )
                probe.load()
                pixels = upright(probe).convert("RGB")
        except ImageLoadError:
            raise
        except PILImage.DecompressionBombError:
            raise ImageLoadError(
                f"{where}: refused, the image is above the limit of {max_pixels} pixels "
                "(a decompression bomb?)"
            ) from None
        except UnidentifiedImageError:
            # Pillow's own message names its in-memory buffer, not the file
            raise ImageLoadError(
                f"{where}: not a readable image (not in an image format Pillow knows: "
                "PNG, JPEG, GIF, WebP, TIFF, BMP, ...)"
            ) from None
        except (OSError, SyntaxError, ValueError) as e:
            raise ImageLoadError(f"{where}: not a readable image ({e})") from None
        return cls(pixels, source=source)

    @property
    def width(self) -> int:
        return self.pixels.width

    @property
    def height(self) -> int:
        return self.pixels.height

    @property
    def root(self) -> Image:
        img = self
        while img.parent is not None:
            img = img.parent
        return img

    @property
    def origin(self) -> tuple[float, float]:
        """Root-pixel position of this image's top-left corner."""
        return (self.crop_box.x, self.crop_box.y) if self.crop_box else (0.0, 0.0)

    def to_root(self, box: Box) -> Box:
        """Map a box in this image's pixels to root-image pixels."""
        ox, oy = self.origin
        z = self.zoom
        return Box(ox + box.x / z, oy + box.y / z, box.w / z, box.h / z, box.label, box.score)

    def to_local(self, box: Box) -> Box:
        """Map a root-image box into this image's pixels (may fall outside it)."""
        ox, oy = self.origin
        z = self.zoom
        return Box((box.x - ox) * z, (box.y - oy) * z, box.w * z, box.h * z, box.label, box.score)

    def bounds(self) -> Box:
        """The root-pixel region this image covers."""
        return self.crop_box or Box(0, 0, self.width, self.height)

    def content_hash(self) -> str:
        if self._hash is None:
            h = hashlib.sha256()
            h.update(f"{self.pixels.mode}:{self.width}x{self.height}:".encode())
            h.update(self.pixels.tobytes())
            self._hash = h.hexdigest()[:20]
        return self._hash

    def png_bytes(self) -> bytes:
        buf = io.BytesIO()
        self.pixels.save(buf, format="PNG")
        return buf.getvalue()

    def render(self) -> str:
        text = f"image {self.width}x{self.height}"
        if self.crop_box is not None:
            text += f" (region {self.crop_box.render()} of the original"
            text += f", zoom x{self.zoom:g})" if abs(self.zoom - 1.0) > 1e-9 else ")"
        return text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and self.content_hash() == other.content_hash()

    def __hash__(self) -> int:
        return hash(self.content_hash())


@dataclass(frozen=True)
class Page:
    """A text document such as a Wikipedia article."""

    title: str
    text: str
    url: str | None = None

    def render(self) -> str:
        return f"page '{self.title}' ({len(self.text.split())} words)"


@dataclass(frozen=True)
class Entity:
    """A recognised named entity (landmark, species, product, ...)."""

    name: str
    score: float | None = None
    description: str | None = None

    def render(self) -> str:
        text = f"entity '{self.name}'"
        if self.description:
            text += f" ({self.description})"
        return text


Value = Any
"""Anything a variable may hold: the classes above, str, int, float, bool, None, lists, dicts."""

_MAX_TEXT = 300


def _short(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def value_kind(v: Value) -> str:
    """'image', 'box', 'page', 'entity', 'boolean', 'integer', 'number', 'text', 'point' (an
    (x, y) tuple), 'list-<kind>' for a non-empty list of one kind, else 'value'."""
    if isinstance(v, Box):
        return "box"
    if isinstance(v, Image):
        return "image"
    if isinstance(v, Page):
        return "page"
    if isinstance(v, Entity):
        return "entity"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "text"
    if (
        isinstance(v, tuple)
        and len(v) == 2
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
    ):
        return "point"
    if isinstance(v, list) and v:
        inner = {value_kind(x) for x in v}
        if len(inner) == 1:
            return "list-" + inner.pop()
    return "value"


def _kind(v: Value) -> str:
    k = value_kind(v)
    if k == "integer":
        return "number"
    return "value" if k.startswith("list-") or k == "point" else k


def render_value(value: Value, limit: int = _MAX_TEXT) -> str:
    """A short, prompt-friendly rendering of any variable value."""
    if hasattr(value, "render") and callable(value.render):
        return str(value.render())
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int | str):
        return _short(str(value), limit)
    if value is None:
        return "nothing"
    if isinstance(value, list | tuple):
        if not value:
            return "empty list"
        kinds = {_kind(v) for v in value}
        noun = kinds.pop() if len(kinds) == 1 else "value"
        if noun == "text":
            return _short("[" + ", ".join(repr(_short(v, 80)) for v in value) + "]", limit)
        if noun in ("number", "boolean"):
            return _short("[" + ", ".join(render_value(v) for v in value) + "]", limit)
        plural = noun if len(value) == 1 else "boxes" if noun == "box" else f"{noun}s"
        head = f"{len(value)} {plural}: "
        parts: list[str] = []
        used = len(head)
        for i, v in enumerate(value):
            part = render_value(v)
            rest = len(value) - i - 1
            # cut between items, never inside one, and say how many were left out
            if parts and used + len(part) + (12 if rest else 0) > limit:
                parts.append(f"and {len(value) - i} more")
                break
            parts.append(part)
            used += len(part) + 2
        return _short(head + ", ".join(parts), max(limit, used + 12))
    if isinstance(value, dict):
        return _short(
            "{" + ", ".join(f"{k}: {render_value(v)}" for k, v in value.items()) + "}", limit
        )
    return _short(repr(value), limit)


def value_json(
    value: Value,
    *,
    image: Callable[[Image], Any],
    entity: Callable[[Entity], Any] | None = None,
) -> Any:
    """A value as JSON: a box as [x, y, w, h], a page as an object, a non-finite number as
    null, lists and mappings item by item; an image as ``image(img)`` says, an entity as
    ``entity(e)`` says (default: an object). What no JSON type holds is its rendering."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Box):
        return value.xywh()
    if isinstance(value, Image):
        return image(value)
    if isinstance(value, Page):
        return {"title": value.title, "text": value.text, "url": value.url}
    if isinstance(value, Entity):
        if entity is not None:
            return entity(value)
        return {"name": value.name, "score": value.score, "description": value.description}
    if isinstance(value, list | tuple):
        return [value_json(v, image=image, entity=entity) for v in value]
    if isinstance(value, Mapping):
        return {str(k): value_json(v, image=image, entity=entity) for k, v in value.items()}
    return render_value(value)


def describe_kind(value: Value) -> str:
    """The kind name used in observations ('image', 'list of 3 boxes', ...)."""
    if isinstance(value, list | tuple):
        kinds = {_kind(v) for v in value}
        noun = kinds.pop() if len(kinds) == 1 else "value"
        return f"list of {len(value)} {'boxes' if noun == 'box' else noun + 's'}"
    return _kind(value)
