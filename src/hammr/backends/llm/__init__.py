"""Language-model backends.

The names below are imported when first read (PEP 562), not with the package: a module that
needs only :mod:`hammr.backends.llm.base` (the interface) does not pay for httpx (the
OpenAI-compatible client) or llama.cpp (the embedded model)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hammr.lazy_names import lazy_attribute, lazy_dir

if TYPE_CHECKING:
    from hammr.backends.llm.base import (
        LLM,
        ImagePart,
        LLMError,
        LLMRequest,
        LLMResponse,
        Message,
        SyncLLM,
        Usage,
        run_sync,
    )
    from hammr.backends.llm.cache import CachedLLM
    from hammr.backends.llm.embedded import EmbeddedLLM
    from hammr.backends.llm.openai_compat import OpenAICompatLLM
    from hammr.backends.llm.scripted import ScriptedLLM

__all__ = [
    "LLM",
    "CachedLLM",
    "EmbeddedLLM",
    "ImagePart",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "OpenAICompatLLM",
    "ScriptedLLM",
    "SyncLLM",
    "Usage",
    "run_sync",
]

_BASE = ("LLM", "ImagePart", "LLMError", "LLMRequest", "LLMResponse", "Message", "SyncLLM")
_HOMES = {
    **dict.fromkeys((*_BASE, "Usage", "run_sync"), "hammr.backends.llm.base"),
    "CachedLLM": "hammr.backends.llm.cache",
    "EmbeddedLLM": "hammr.backends.llm.embedded",
    "OpenAICompatLLM": "hammr.backends.llm.openai_compat",
    "ScriptedLLM": "hammr.backends.llm.scripted",
}
"""Where each public name lives (imported on first use)."""


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, name)


def __dir__() -> list[str]:
    return lazy_dir(__name__, __all__)
