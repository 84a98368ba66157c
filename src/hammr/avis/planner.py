"""AVIS's planner: the question's decomposition, then at each state one action of the
candidates the graph allows (and the query to send it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hammr.avis.graph import ActionSpec
from hammr.avis.prompts import (
    PLANNER_EXAMPLES,
    ShownExample,
    decompose_prompt,
    planner_prompt,
)
from hammr.avis.replies import (
    DECOMPOSE_GRAMMAR,
    DECOMPOSE_SCHEMA,
    Decomposition,
    PlannerChoice,
    ReplyError,
    constrained_request,
    parse_decomposition,
    parse_plan,
    planner_grammar,
    planner_schema,
)
from hammr.backends.llm.base import LLM, LLMResponse


class Planner:
    """Writes the prompts, asks the model (under a grammar or a JSON schema where the
    backend takes one, unless ``grammar`` is False) and parses the replies."""

    def __init__(
        self,
        actions: Mapping[str, ActionSpec],
        *,
        examples: Mapping[str, Sequence[ShownExample]] | None = PLANNER_EXAMPLES,
        grammar: bool | None = None,
    ) -> None:
        """``examples=None``: the prompt shows the candidates' descriptions and no worked
        example (the paper's no-graph baseline)."""
        self.actions = dict(actions)
        self.examples = examples
        self.grammar = grammar

    async def decompose(self, question: str, model: LLM) -> tuple[Decomposition, LLMResponse]:
        """The sub-questions (ReplyError when the reply has neither), and the reply."""
        request = constrained_request(
            decompose_prompt(question),
            model,
            grammar=DECOMPOSE_GRAMMAR,
            schema=DECOMPOSE_SCHEMA,
            setting=self.grammar,
            max_tokens=96,
        )
        response = await model.complete(request)
        try:
            return parse_decomposition(response.text), response
        except ReplyError as e:
            e.response = response  # the call was made: the trace keeps its text and usage
            raise

    def prompt(self, query: str, context: str, candidates: Sequence[str]) -> str:
        specs = [self.actions[c] for c in candidates]
        return planner_prompt(query, context, specs, self.examples)

    async def choose(
        self, query: str, context: str, candidates: Sequence[str], model: LLM
    ) -> tuple[PlannerChoice | None, LLMResponse, ReplyError | None]:
        """The action chosen among ``candidates`` and the reply; on a reply naming no
        candidate, (None, reply, the error)."""
        request = constrained_request(
            self.prompt(query, context, candidates),
            model,
            grammar=planner_grammar(candidates),
            schema=planner_schema(candidates),
            setting=self.grammar,
            max_tokens=80,
        )
        response = await model.complete(request)
        try:
            return parse_plan(response.text, candidates), response, None
        except ReplyError as e:
            return None, response, e
