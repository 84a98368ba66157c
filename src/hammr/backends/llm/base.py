"""One async interface for every language-model backend, plus a synchronous facade."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from hammr.data_url import png_data_url
from hammr.input_file import open_input
from hammr.values import Image

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ImagePart:
    """An image inside a message; sent as a base64 data URL to servers that take images.

    The URL is encoded once and kept: a conversation re-sends its earlier images with every
    request, and the same bytes each time.
    """

    image: Image
    _url: str | None = field(default=None, init=False, repr=False, compare=False)

    def data_url(self) -> str:
        if self._url is None:
            url = png_data_url(self.image)
            object.__setattr__(self, "_url", url)
            return url
        return self._url


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
    """Replayed from hammr's own response cache (no model call was made)."""
    finish_reason: str | None = None
    """Why the model stopped, as the backend said: "stop", "length" (cut at max_tokens), ..."""
    cached_prompt_tokens: int | None = None
    """Of ``usage.prompt_tokens``, those the server took from its prefix (KV) cache instead of
    evaluating them (llama.cpp's ``timings.cache_n``, OpenAI's and vLLM's
    ``usage.prompt_tokens_details.cached_tokens``); None where the backend does not say."""


DEFAULT_MAX_IMAGES = 8
DEFAULT_MAX_IMAGE_PIXELS = 1_003_520
"""1280 * 28 * 28: Qwen2-VL's and Qwen2.5-VL's default ``max_pixels``."""


@dataclass(frozen=True)
class VisionLimits:
    """What a model that sees may be shown in one conversation: at most ``max_images`` images,
    each downscaled (aspect kept) to at most ``max_image_pixels`` pixels."""

    max_images: int = DEFAULT_MAX_IMAGES
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS

    def __post_init__(self) -> None:
        if self.max_images < 1:
            raise ValueError(f"max_images must be at least 1, got {self.max_images}")
        if self.max_image_pixels < 1:
            raise ValueError(f"max_image_pixels must be at least 1, got {self.max_image_pixels}")


class LLMError(RuntimeError):
    """A model call failed in a way a person can act on (message says how)."""


GrammarSupport = Literal["none", "gbnf"]


@runtime_checkable
class LLM(Protocol):
    """A language model: messages in, text and token usage out.

    A backend whose model sees images says so with a ``vision: bool`` attribute and may give
    its limits as ``vision_limits: VisionLimits``; both are optional (read them with
    :func:`sees_images` and :func:`vision_limits_of`): a backend without them is text-only.
    """

    @property
    def name(self) -> str: ...

    @property
    def grammar_support(self) -> GrammarSupport:
        """'gbnf' when :attr:`LLMRequest.grammar` constrains the output, else 'none'."""
        ...

    async def complete(self, request: LLMRequest) -> LLMResponse: ...


def sees_images(llm: object) -> bool:
    """Whether ``llm`` is shown the images of a conversation (its ``vision`` is True); False
    for backends without the attribute."""
    return getattr(llm, "vision", False) is True


def vision_limits_of(llm: object) -> VisionLimits:
    """``llm``'s :class:`VisionLimits`, or the defaults where it gives none."""
    limits = getattr(llm, "vision_limits", None)
    return limits if isinstance(limits, VisionLimits) else VisionLimits()


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


def gguf_problem(path: Path) -> str | None:
    """Why ``path`` is no GGUF model file llama.cpp could load (one line), None when it
    starts like one. Read through :mod:`hammr.input_file` (a FIFO is refused, not waited on)."""
    try:
        with open_input(path, binary=True) as f:
            head = f.read(4)
    except FileNotFoundError:
        return f"model file not found: {path}"
    except OSError as e:
        return f"cannot read the model file {path}: {e.strerror or e}"
    return None if head == b"GGUF" else f"{path} is not a GGUF model file"
