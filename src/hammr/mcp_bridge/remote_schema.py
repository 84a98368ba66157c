"""What crosses the wire to an MCP server's tool: its input schema as hammr parameters,
hammr values as the JSON arguments, and its ``CallToolResult`` as a hammr value.

**Parameters** (:func:`params_from_schema`), from each property of the tool's input schema:
string → text (with ``enum``: one of the choices); number → number; integer → integer; boolean
→ boolean; an array of strings → texts; a string the schema says is an image
(``contentMediaType: image/*``, ``format: image``, or a name such as ``image`` or ``photo``
with ``contentEncoding: base64``) → image, sent as base64 PNG when the schema says
``contentEncoding: base64`` and as a ``data:image/png;base64,`` URL otherwise (an array of
such strings → images); anything else → any, sent as JSON (a box as [x, y, w, h], an entity
as its name, an image as a data URL). Required properties come first, in the schema's order.

**Results** (:func:`result_of`): a text content is text, an image content a
:class:`~hammr.values.Image` (decoded under ``images.max_pixels``), several contents a list;
where the server gives ``structuredContent`` the value is that JSON (a primitive's
``{"result": ...}`` wrapper unwrapped) and the observation the server's text. The agent reads
the whole text, not a 300-character rendering, up to ``max_result_chars``: a longer text is
**truncated** to that many characters with a note saying so (not refused: the start of a long
page is usually what the agent wanted).
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hammr.data_url import (
    DataUrlError,
    decode_image,
    image_from_data_url,
    is_data_url,
    png_base64,
    png_data_url,
    read_base64,
)
from hammr.tools.base import NO_DEFAULT, Param, ParamKind, ToolError, ToolResult
from hammr.values import DEFAULT_MAX_PIXELS, Image, Value, value_json

MAX_DESCRIPTION_CHARS = 1000
"""The longest tool or parameter description put on a card (a server's text, into prompts)."""

_IMAGE_NAME = re.compile(r"(image|img|photo|picture|frame)s?(_?(b64|base64|data))?", re.I)


# -- schema -> parameters --------------------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """How a parameter travels: its property's name, and how an image is encoded."""

    name: str
    image: str | None = None
    """'base64' or 'data-url' for an image (or images) parameter; None otherwise."""


def _resolve(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """``schema`` with a local ``$ref`` followed, and ``X | null`` (anyOf/oneOf) made X."""
    if not isinstance(schema, dict) or depth > 8:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        target = defs.get(ref.rsplit("/", 1)[1])
        merged = {**_resolve(target, defs, depth + 1), **{k: v for k, v in schema.items()}}
        merged.pop("$ref", None)
        return merged
    for union in ("anyOf", "oneOf"):
        options = schema.get(union)
        if isinstance(options, list):
            real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(real) == 1:
                rest = {k: v for k, v in schema.items() if k != union}
                return {**_resolve(real[0], defs, depth + 1), **rest}
    kind = schema.get("type")
    if isinstance(kind, list):
        real_types = [t for t in kind if t != "null"]
        if len(real_types) == 1:
            return {**schema, "type": real_types[0]}
    return schema


def _image_encoding(name: str, schema: Mapping[str, Any]) -> str | None:
    """'base64' or 'data-url' when the string property ``name`` is an image, else None."""
    if schema.get("type") not in ("string", None):
        return None
    media = str(schema.get("contentMediaType") or "")
    base64_encoded = str(schema.get("contentEncoding") or "").lower() == "base64"
    if media.startswith("image/") or schema.get("format") == "image":
        return "base64" if base64_encoded else "data-url"
    if base64_encoded and _IMAGE_NAME.fullmatch(name):
        return "base64"
    return None


def _kind_of(name: str, schema: Mapping[str, Any]) -> tuple[ParamKind, str | None]:
    """The parameter kind of one property, and its image encoding (see the module docstring)."""
    kind = schema.get("type")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum):
        return "text", None
    if kind == "string" or (kind is None and _image_encoding(name, schema)):
        encoding = _image_encoding(name, schema)
        return ("image", encoding) if encoding else ("text", None)
    if kind == "number":
        return "number", None
    if kind == "integer":
        return "integer", None
    if kind == "boolean":
        return "boolean", None
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, dict) and items.get("type") == "string":
            encoding = _image_encoding(name, items)
            return ("images", encoding) if encoding else ("texts", None)
    return "any", None


def _param_name(name: str, taken: set[str]) -> str:
    """A name a step can write as a keyword (``image-url`` → ``image_url``), unique."""
    clean = re.sub(r"\W", "_", name, flags=re.ASCII) or "arg"
    if clean[0].isdigit():
        clean = "_" + clean
    if keyword.iskeyword(clean):
        clean += "_"
    out, n = clean, 2
    while out in taken:
        out, n = f"{clean}_{n}", n + 1
    return out


def description_of(text: Any) -> str:
    """A server's description, on one line, at most :data:`MAX_DESCRIPTION_CHARS`."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= MAX_DESCRIPTION_CHARS else flat[: MAX_DESCRIPTION_CHARS - 3] + "..."


def params_from_schema(schema: Any) -> tuple[tuple[Param, ...], dict[str, Wire]]:
    """The parameters of a tool whose input schema is ``schema`` (required ones first, each in
    the schema's order), and how each travels (hammr name -> :class:`Wire`)."""
    if not isinstance(schema, dict):
        return (), {}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return (), {}
    required = {r for r in schema.get("required") or () if isinstance(r, str)}
    order = [n for n in properties if n in required] + [n for n in properties if n not in required]
    params: list[Param] = []
    wires: dict[str, Wire] = {}
    taken: set[str] = set()
    for prop in order:
        if not isinstance(prop, str):
            continue
        sub = _resolve(properties[prop], defs)
        kind, encoding = _kind_of(prop, sub)
        enum = sub.get("enum")
        choices = (
            tuple(enum)
            if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum)
            else None
        )
        if prop in required:
            default: Any = NO_DEFAULT
        else:
            default = sub.get("default")
            if kind in ("image", "images") or not _json_scalar(default):
                default = None  # None: the argument is left out of the call
        name = _param_name(prop, taken)
        taken.add(name)
        doc = description_of(sub.get("description") or "")
        params.append(Param(name, kind, default, doc, choices))
        wires[name] = Wire(prop, encoding)
    return tuple(params), wires


def _json_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def returns_of(schema: Any) -> str:
    """What a tool returns, in words, from its output schema ('value' without one)."""
    if not isinstance(schema, dict):
        return "value"
    properties = schema.get("properties")
    if isinstance(properties, dict) and set(properties) == {"result"}:
        schema = properties["result"] if isinstance(properties["result"], dict) else {}
    kind = schema.get("type")
    words = {"string": "text", "number": "number", "integer": "integer", "boolean": "boolean"}
    if kind in words:
        return words[str(kind)]
    if kind == "array":
        return "list"
    if kind == "object":
        return "JSON object"
    return "value"


# -- arguments and results -------------------------------------------------------------------


def image_data(image: Image, encoding: str | None) -> str:
    return png_base64(image) if encoding == "base64" else png_data_url(image)


def to_json(value: Value) -> Any:
    """A hammr value as JSON for an ``any`` parameter: an image as a data URL, an entity as
    its name (what another program can use)."""
    return value_json(value, image=png_data_url, entity=lambda e: e.name)


def _cut(text: str, limit: int, where: str) -> str:
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[... cut: the result had {len(text):,} characters; the first "
        f"{limit:,} are shown (max_result_chars of {where})]"
    )


def result_of(
    result: Any,
    tool: str,
    *,
    server: str,
    where: str,
    max_chars: int,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> ToolResult:
    """A ``CallToolResult`` as hammr's value and observation (see the module docstring);
    ToolError for an error result or content that cannot be read."""
    content = getattr(result, "content", None)
    if not isinstance(content, list):
        raise ToolError(f"{tool}: the MCP server {server!r} sent a reply with no content")
    texts: list[str] = []
    parts: list[Value] = []
    for i, item in enumerate(content):
        kind = getattr(item, "type", None)
        if kind == "text":
            text = str(getattr(item, "text", ""))
            texts.append(text)
            parts.append(text)
        elif kind == "image":
            image = _decoded_image(item, f"{tool}'s image #{i + 1}", max_pixels)
            texts.append(image.render())
            parts.append(image)
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            body = getattr(resource, "text", None)
            if isinstance(body, str):
                texts.append(body)
                parts.append(body)
            else:
                note = f"(a resource hammr does not read: {getattr(resource, 'uri', '?')})"
                texts.append(note)
                parts.append(note)
        elif kind == "resource_link":
            note = f"(a link to {getattr(item, 'uri', '?')})"
            texts.append(note)
            parts.append(note)
        else:
            note = f"({kind or 'unknown'} content, which hammr does not read)"
            texts.append(note)
            parts.append(note)
    full = "\n".join(texts)
    text = _cut(full, max_chars, where)
    if getattr(result, "is_error", False):
        raise ToolError(f"{tool} failed: {text or 'the MCP server reported an error'}")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        if isinstance(structured, dict) and set(structured) == {"result"}:
            structured = structured["result"]  # a primitive's wrapper (the SDK's servers)
        dumped = json.dumps(structured, ensure_ascii=False, default=str)
        if len(dumped) <= max_chars:
            shown = text if texts else _cut(dumped, max_chars, where)
            return ToolResult(structured, observation=shown)
    if not parts:
        return ToolResult("", observation="(the tool returned nothing)")
    if len(parts) == 1:
        only = parts[0]
        if isinstance(only, Image):
            return ToolResult(only)
        return ToolResult(text, observation=text)
    if text != full:  # over max_result_chars: the text, cut, and the images
        return ToolResult([text, *[p for p in parts if isinstance(p, Image)]], observation=text)
    return ToolResult(parts, observation=text)


def _decoded_image(item: Any, where: str, max_pixels: int) -> Image:
    data = str(getattr(item, "data", ""))
    declared = str(getattr(item, "mimeType", None) or getattr(item, "mime_type", "") or "")
    try:
        if is_data_url(data):
            return image_from_data_url(data, where, max_pixels=max_pixels)
        return decode_image(
            read_base64(data, where), declared.lower(), where, max_pixels=max_pixels
        )
    except DataUrlError as e:
        raise ToolError(str(e)) from None
