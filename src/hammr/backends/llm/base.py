"""One async interface for every language-model backend, plus a synchronous facade."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from hammr.values import Image

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ImagePart:
    """An image inside a message; sent as a base64 data URL to servers that take images."""

    image: Image

    def data_url(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.image.png_bytes()).decode()


ContentPart = str | ImagePart


@dataclass(frozen=True)
class Message:
    role: Role
    content: str | tuple[ContentPart, ...]

    def text(self) -> str:
        """The text of the message, images shown as a placeholder."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p if isinstance(p, str) else "<image>" for p in self.content)

    def images(self) -> list[Image]:
        if isinstance(self.content, str):
            return []
        return [p.image for p in self.content if isinstance(p, ImagePart)]


@dataclass(frozen=True)
class LLMRequest:
    messages: tuple[Message, ...]
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    grammar: str | None = None
    """A GBNF grammar the output must match (llama.cpp syntax); honoured where supported."""
    json_schema: dict[str, Any] | None = None
    seed: int | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    cached: bool = False
    finish_reason: str | None = None


class LLMError(RuntimeError):
    """A model call failed in a way a person can act on (message says how)."""


GrammarSupport = Literal["none", "gbnf"]


@runtime_checkable
class LLM(Protocol):
    """A language model: messages in, text and token usage out."""

    @property
    def name(self) -> str: ...

    @property
    def grammar_support(self) -> GrammarSupport:
        """'gbnf' when :attr:`LLMRequest.grammar` constrains the output, else 'none'."""
        ...

    async def complete(self, request: LLMRequest) -> LLMResponse: ...


def apply_stop(text: str, stop: tuple[str, ...]) -> str:
    """Cut text at the first stop sequence (for backends that ignore ``stop``)."""
    cut = len(text)
    for s in stop:
        i = text.find(s)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]


def flatten_messages(messages: tuple[Message, ...] | list[Message]) -> str:
    """Render a conversation as one plain prompt, for completion (non-chat) endpoints.

    System text comes first, then the turns in order; the prompt ends where the assistant
    should continue.
    """
    parts: list[str] = []
    for m in messages:
        parts.append(m.text().rstrip("\n"))
    return "\n".join(parts) + "\n"


T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from synchronous code (scripts, the CLI)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    raise RuntimeError(
        "run_sync() was called inside a running event loop; await the async API instead"
    )


class SyncLLM:
    """Synchronous facade over any :class:`LLM`."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    def complete(self, request: LLMRequest) -> LLMResponse:
        return run_sync(self.llm.complete(request))

    def chat(self, prompt: str, **kwargs: Any) -> str:
        req = LLMRequest(messages=(Message("user", prompt),), **kwargs)
        return self.complete(req).text
