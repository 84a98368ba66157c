"""AVIS's reasoner: labels one action's output not informative, informative or answerable
(one prompt for visual actions' outputs, one for knowledge actions'), with the answer it
points to."""

from __future__ import annotations

from hammr.avis.graph import Phase
from hammr.avis.prompts import reasoner_prompt
from hammr.avis.replies import REASONER_GRAMMAR, Judgement, ReplyError, parse_judgement
from hammr.backends.llm.base import LLM, LLMRequest, LLMResponse, Message

MAX_OUTPUT_CHARS = 2400
"""Longer tool outputs are cut before the reasoner reads them."""


class Reasoner:
    def __init__(self, *, grammar: bool | None = None) -> None:
        self.grammar = grammar

    async def judge(
        self, phase: Phase, query: str, output: str, model: LLM
    ) -> tuple[Judgement | None, LLMResponse, ReplyError | None]:
        """The judgement and the reply; on a reply with no verdict, (None, reply, the
        error)."""
        text = output if len(output) <= MAX_OUTPUT_CHARS else output[: MAX_OUTPUT_CHARS - 3] + "..."
        use = model.grammar_support == "gbnf" and self.grammar is not False
        request = LLMRequest(
            messages=(Message("user", reasoner_prompt(phase, query, text)),),
            max_tokens=160,
            temperature=0.0,
            grammar=REASONER_GRAMMAR if use else None,
        )
        response = await model.complete(request)
        try:
            return parse_judgement(response.text), response, None
        except ReplyError as e:
            return None, response, e
