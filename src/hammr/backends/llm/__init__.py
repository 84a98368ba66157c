"""Language-model backends."""

from __future__ import annotations

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
