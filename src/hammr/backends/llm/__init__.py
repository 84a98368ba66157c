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

__all__ = [
    "LLM",
    "ImagePart",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "SyncLLM",
    "Usage",
    "run_sync",
]
