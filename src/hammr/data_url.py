"""Images in ``data:`` URLs, both ways: the one reader `hammr serve` and `hammr mcp` decode
what a client sends with, and the one writer of a PNG data URL.

A data URL must hold an image, of the type it declares: a PNG called ``image/jpeg`` is
refused, since whatever wrote the type is not to be trusted with the rest. Decoding goes
through :meth:`hammr.values.Image.from_bytes`, so the pixel limit (and with it the refusal of
a decompression bomb before it is decoded) is hammr's everywhere.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import urllib.parse

from hammr.values import Image, ImageLoadError

# Pillow's format names for the media types an image data URL may declare.
FORMATS = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/jpg": "JPEG",
    "image/pjpeg": "JPEG",
    "image/webp": "WEBP",
    "image/gif": "GIF",
    "image/bmp": "BMP",
    "image/x-ms-bmp": "BMP",
    "image/tiff": "TIFF",
}
UNDECLARED = ("", "application/octet-stream", "image/*")
"""Media types that say nothing about the image: whatever Pillow reads is taken."""


class DataUrlError(ValueError):
    """A data URL (or base64 text) that is not an image hammr can use; ``code`` says which
    way: 'malformed', 'not_an_image', 'type_mismatch', 'too_large' or 'bad_image'."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def is_data_url(text: str) -> bool:
    return text[:5].lower() == "data:"


def read_data_url(text: str, where: str, *, max_bytes: int | None = None) -> tuple[bytes, str]:
    """(the bytes, the declared media type, lower-case) of the data URL ``text``."""
    head, comma, payload = text[5:].partition(",")
    if not comma:
        raise DataUrlError(f"{where}: a data URL needs a ',' before its data", "malformed")
    params = [p.strip().lower() for p in head.split(";")]
    media = params[0]
    if media and not media.startswith("image/") and media != "application/octet-stream":
        raise DataUrlError(
            f"{where}: the data URL holds {media[:60]}, not an image", "not_an_image"
        )
    if max_bytes is not None and len(payload) > max_bytes * 4 // 3 + 4:
        raise too_large(where, max_bytes)
    data = (
        read_base64(payload, where)
        if "base64" in params[1:]
        else urllib.parse.unquote_to_bytes(payload)
    )
    if max_bytes is not None and len(data) > max_bytes:
        raise too_large(where, max_bytes)
    return data, media


def read_base64(text: str, where: str) -> bytes:
    """Base64 text (whitespace and missing padding forgiven) as bytes."""
    compact = re.sub(r"\s+", "", text)
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise DataUrlError(f"{where}: not valid base64", "malformed") from None


def too_large(where: str, max_bytes: int) -> DataUrlError:
    return DataUrlError(f"{where}: the image is larger than {max_bytes / 2**20:g} MiB", "too_large")


def decode_image(data: bytes, declared: str, where: str, *, max_pixels: int) -> Image:
    """The image in ``data``, which claims to be ``declared`` (a media type, '' for none)."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as probe:
            actual = probe.format or ""
    except PILImage.DecompressionBombError:
        actual = ""  # Image.from_bytes says it in its own words
    except Exception:
        raise DataUrlError(
            f"{where}: not an image (no image format Pillow reads)", "not_an_image"
        ) from None
    if declared not in UNDECLARED and actual and FORMATS.get(declared) != actual:
        raise DataUrlError(
            f"{where}: declared {declared[:60]} but holds {actual} data; send the type the "
            "image is",
            "type_mismatch",
        )
    try:
        return Image.from_bytes(data, max_pixels=max_pixels, source=where)
    except ImageLoadError as e:
        raise DataUrlError(str(e), "bad_image") from None


def image_from_data_url(
    text: str, where: str, *, max_pixels: int, max_bytes: int | None = None
) -> Image:
    data, declared = read_data_url(text, where, max_bytes=max_bytes)
    return decode_image(data, declared, where, max_pixels=max_pixels)


def png_base64(image: Image) -> str:
    return base64.b64encode(image.png_bytes()).decode("ascii")


def png_data_url(image: Image) -> str:
    """``image`` as a ``data:image/png;base64,`` URL."""
    return f"data:image/png;base64,{png_base64(image)}"
