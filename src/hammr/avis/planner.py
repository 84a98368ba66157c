"""AVIS's planner: the question's decomposition, then at each state one action of the
candidates the graph allows (and the query to send it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hammr.avis.graph import ActionSpec
from hammr.avis.prompts import (
    PLANNER_EXAMPLES,
    PlannerExample,
    decompose_prompt,
    planner_prompt,
)
from hammr.avis.replies import (
    DECOMPOSE_GRAMMAR,
    Decomposition,
    PlannerChoice,
    ReplyError,
    parse_decomposition,
    parse_plan,
    planner_grammar,
)
from hammr.backends.llm.base import LLM, LLMRequest, LLMResponse, Message


class Planner:
    """Writes the prompts, asks the model (under a grammar where the backend takes one,
    unless ``grammar`` is False) and parses the replies."""

    def __init__(
        self,
        actions: Mapping[str, ActionSpec],
        *,
        examples: Mapping[str, Sequence[PlannerExample]] = PLANNER_EXAMPLES,
        grammar: bool | None = None,
    ) -> None:
        self.actions = dict(actions)
        self.examples = examples
        self.grammar = grammar

    def constrained(self, model: LLM) -> bool:
        return model.grammar_support == "gbnf" and self.grammar is not False

    def _request(self, prompt: str, grammar: str, model: LLM, max_tokens: int) -> LLMRequest:
        return LLMRequest(
            messages=(Message("user", prompt),),
            max_tokens=max_tokens,
            temperature=0.0,
            grammar=grammar if self.constrained(model) else None,
        )

    async def decompose(self, question: str, model: LLM) -> tuple[Decomposition, LLMResponse]:
        """The sub-questions (ReplyError when the reply has neither), and the reply."""
        request = self._request(decompose_prompt(question), DECOMPOSE_GRAMMAR, model, 96)
        response = await model.complete(request)
        return parse_decomposition(response.text), response

    def prompt(self, query: str, context: str, candidates: Sequence[str]) -> str:
        specs = [self.actions[c] for c in candidates]
        return planner_prompt(query, context, specs, self.examples)

    async def choose(
        self, query: str, context: str, candidates: Sequence[str], model: LLM
    ) -> tuple[PlannerChoice | None, LLMResponse, ReplyError | None]:
        """The action chosen among ``candidates`` and the reply; on a reply naming no
        candidate, (None, reply, the error)."""
        request = self._request(
            self.prompt(query, context, candidates), planner_grammar(candidates), model, 80
        )
        response = await model.complete(request)
        try:
            return parse_plan(response.text, candidates), response, None
        except ReplyError as e:
            return None, response, e
