"""Prompts that fit the model they run on: as many worked examples as the context holds.

A prompt with every worked example (the naive baseline's 25) is over 10,000 tokens; the
embedded SmolLM2 holds 8,192 whatever ``n_ctx`` says (llama.cpp caps it at the length the
model was trained on). A backend tells its context with an async ``context_window()`` and
may count tokens exactly with an async ``count_tokens(text)``; without the latter a token
is taken as 3 bytes of UTF-8, and without the former nothing is trimmed (a served model
whose context is unknown gets the whole prompt, and its server says so if it is too long).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BYTES_PER_TOKEN = 3.0
"""For estimates: English prose and code average 3-4 bytes a token with common tokenizers
(SmolLM2: 3.1 on the naive prompt); 3 errs on the side of fitting."""


async def context_window(llm: object) -> int | None:
    """The tokens ``llm``'s context holds (prompt and reply), or None when unknown."""
    probe = getattr(llm, "context_window", None)
    if probe is None or not callable(probe):
        return None
    size = await probe()
    return size if isinstance(size, int) and size > 0 else None


def estimate_tokens(text: str) -> int:
    """A token count for ``text`` without a tokenizer (:data:`BYTES_PER_TOKEN`)."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


async def count_tokens(llm: object, text: str) -> int:
    """``text``'s tokens by ``llm``'s own tokenizer where it offers one, else estimated."""
    counter = getattr(llm, "count_tokens", None)
    if counter is not None and callable(counter):
        counted = await counter(text)
        if isinstance(counted, int):
            return counted
    return estimate_tokens(text)


class PromptTooLong(ValueError):
    """Even with no worked example the prompt does not fit the model's context."""


@dataclass(frozen=True)
class FittedPrompt:
    text: str
    kept: int
    """How many of the examples the prompt holds (the first ``kept``, in order)."""
    total: int
    tokens: int
    context: int | None

    @property
    def note(self) -> str | None:
        """What a trace should say when examples were left out; None when all fit."""
        if self.kept == self.total:
            return None
        return (
            f"{self.kept} of {self.total} worked examples kept so that the prompt "
            f"({self.tokens} tokens) fits the model's {self.context}-token context"
        )


async def fit_examples(
    llm: object,
    build: Callable[[Sequence[str]], str],
    examples: Sequence[str],
    *,
    reserve: int,
    what: str = "the prompt",
    advice: str = "",
) -> FittedPrompt:
    """The prompt ``build(examples[:n])`` for the largest ``n`` whose tokens plus ``reserve``
    (room for the question, the steps and the replies) fit ``llm``'s context.

    PromptTooLong (with ``advice``) when not even ``build([])`` fits.
    """
    context = await context_window(llm)
    whole = build(examples)
    if context is None:
        return FittedPrompt(whole, len(examples), len(examples), 0, None)
    budget = context - reserve
    tokens = await count_tokens(llm, whole)
    if tokens <= budget:
        return FittedPrompt(whole, len(examples), len(examples), tokens, context)
    low, high = 0, len(examples) - 1  # the largest n in [low, high] that fits
    best: tuple[int, str, int] | None = None
    while low <= high:
        n = (low + high) // 2
        text = build(examples[:n])
        used = await count_tokens(llm, text)
        if used <= budget:
            best, low = (n, text, used), n + 1
        else:
            high = n - 1
    if best is None:
        bare = await count_tokens(llm, build([]))
        raise PromptTooLong(
            f"{what} is {bare} tokens without any worked example, but the model's context "
            f"holds {context} and {reserve} are needed for the question, steps and replies"
            + (f"; {advice}" if advice else "")
        )
    n, text, used = best
    return FittedPrompt(text, n, len(examples), used, context)


__all__ = [
    "BYTES_PER_TOKEN",
    "FittedPrompt",
    "PromptTooLong",
    "context_window",
    "count_tokens",
    "estimate_tokens",
    "fit_examples",
]
