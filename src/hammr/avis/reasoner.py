"""AVIS's reasoner: labels one action's output not informative, informative or answerable
(one prompt for visual actions' outputs, one for knowledge actions'), with the answer it
points to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hammr.avis.graph import Phase
from hammr.avis.prompts import reasoner_prompt
from hammr.avis.replies import (
    REASONER_GRAMMAR,
    REASONER_SCHEMA,
    Judgement,
    ReplyError,
    constrained_request,
    parse_judgement,
)
from hammr.backends.llm.base import LLM, LLMResponse

if TYPE_CHECKING:
    from hammr.avis.paper_prompts import PaperPrompts

MAX_OUTPUT_CHARS = 2400
"""Longer tool outputs are cut before the reasoner reads them."""


class Reasoner:
    def __init__(self, *, grammar: bool | None = None, paper: PaperPrompts | None = None) -> None:
        """``paper``: the paper's reply format (:mod:`hammr.avis.paper_prompts`), asked in
        free text; None: ours, under the grammar where the backend takes one."""
        self.grammar = grammar
        self.paper = paper

    async def judge(
        self, phase: Phase, query: str, output: str, model: LLM
    ) -> tuple[Judgement | None, LLMResponse, ReplyError | None]:
        """The judgement and the reply; on a reply with no verdict, (None, reply, the
        error)."""
        text = output if len(output) <= MAX_OUTPUT_CHARS else output[: MAX_OUTPUT_CHARS - 3] + "..."
        if self.paper is not None:
            from hammr.avis.paper_prompts import parse_paper_judgement

            paper_request = constrained_request(
                self.paper.reasoner_prompt(phase, query, text),
                model,
                grammar=None,
                schema=None,
                setting=False,
                max_tokens=256,
            )
            reply = await model.complete(paper_request)
            return parse_paper_judgement(reply.text), reply, None
        request = constrained_request(
            reasoner_prompt(phase, query, text),
            model,
            grammar=REASONER_GRAMMAR,
            schema=REASONER_SCHEMA,
            setting=self.grammar,
            max_tokens=160,
        )
        response = await model.complete(request)
        try:
            return parse_judgement(response.text), response, None
        except ReplyError as e:
            return None, response, e
