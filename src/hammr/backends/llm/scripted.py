"""A scripted model for tests and replays: completions in order, or a function of the prompt."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hammr.backends.llm.base import (
    GrammarSupport,
    LLMError,
    LLMRequest,
    LLMResponse,
    Usage,
    VisionLimits,
    apply_stop,
)

Responder = Callable[[LLMRequest], str]


@dataclass
class ScriptedLLM:
    """Returns scripted completions.

    ``script`` is either a list of strings handed out in order (one per call; running past the
    end raises :class:`LLMError`) or a function ``request -> text``. Every request is kept in
    :attr:`requests` so tests can look at the prompts the agent built.
    """

    script: list[str] | Responder
    model: str = "scripted"
    grammar: GrammarSupport = "none"
    """'gbnf' claims grammar support, to test that path; grammars are recorded, not applied."""
    requests: list[LLMRequest] = field(default_factory=list)
    _next: int = 0
    vision: bool = False
    """True plays a model that sees: agents attach images to its messages (see
    :mod:`hammr.vision`)."""
    vision_limits: VisionLimits = field(default_factory=VisionLimits)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> ScriptedLLM:
        return cls(list(texts))

    @property
    def name(self) -> str:
        return self.model

    @property
    def grammar_support(self) -> GrammarSupport:
        return self.grammar

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if callable(self.script):
            text = self.script(request)
        else:
            if self._next >= len(self.script):
                raise LLMError(
                    f"scripted model ran out of completions after {len(self.script)} calls"
                )
            text = self.script[self._next]
            self._next += 1
        text = apply_stop(text, request.stop)
        prompt_words = sum(len(m.text().split()) for m in request.messages)
        return LLMResponse(
            text=text,
            usage=Usage(prompt_tokens=prompt_words, completion_tokens=len(text.split())),
            model=self.model,
            finish_reason="stop",
        )
