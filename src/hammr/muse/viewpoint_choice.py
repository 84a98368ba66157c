"""The agent's model choosing each round's viewpoint of a per-round deep search.

MuSEAgent's deep search (its Eqs. 5-6) lets the agent policy select the viewpoint of every
refinement round, knowing what the rounds before it retrieved, and stop before the most
rounds allowed when the guidance is precise enough. Under the ``every_step`` policy no agent
turn is spent on searching, so the choice is a short call of its own to the agent's model:
:class:`ModelChooser` is the :data:`~hammr.memory.search.Chooser` that
:meth:`~hammr.memory.search.ExperienceSearcher.deep_per_round` asks before each round. It
shows the model the state (question, task, steps so far; images by count only), the hits so
far and the viewpoints it may search, and reads back a viewpoint name, or ``stop`` from the
second round on.

A reply naming no viewpoint it may search, or a model that fails, does not end the search:
the next viewpoint in the offered order is searched and the choice's record says why. Every
choice is kept (:attr:`ModelChooser.choices`) for the trace.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hammr.backends.llm.base import LLM, LLMError, LLMRequest, Message
from hammr.memory.experiences import State
from hammr.memory.search import SearchResult
from hammr.memory.viewpoints import describe, viewpoint_name
from hammr.muse.search_tool import hit_line

STOP_WORD = "stop"
"""The reply that ends a deep search before its last round."""
CHOICE_MAX_TOKENS = 48
"""Room for a viewpoint name (the longest is four components) and a little more."""

CHOOSER_INSTRUCTIONS = """\
You steer a search through experiences that a visual agent gathered in past runs. Each
experience can be looked up under several viewpoints, each matching some parts of the
agent's current state. A search goes in rounds, one viewpoint a round; every round adds
experiences the earlier rounds did not find. Choose the viewpoint for the next round: the
one most likely to give guidance for the agent's next action that the experiences found so
far do not already give. Reply with the viewpoint's name only."""


@dataclass(frozen=True)
class Choice:
    """One round's choice, as the trace records it."""

    round: int
    offered: tuple[str, ...]
    chose: str | None
    """The viewpoint searched; None: the model stopped the search."""
    reply: str | None = None
    """The model's reply; None when the model was not asked (one viewpoint in round 1)."""
    note: str = ""
    """Why the viewpoint searched is not the model's choice, when it is not."""
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "round": self.round,
            "offered": list(self.offered),
            "chose": self.chose,
            "reply": self.reply,
        }
        if self.note:
            out["note"] = self.note
        if self.tokens:
            out["tokens"] = self.tokens
        return out


def state_lines(state: State, images_seen: int) -> list[str]:
    """The state as the chooser reads it."""
    lines = [f"Question: {state.question}"]
    if state.task.text().strip(" /"):
        lines.append(f"Task: {state.task.text()}")
    lines.append(f"Images seen: {images_seen}")
    if state.history:
        lines += ["Steps taken so far:", *(f"- {h}" for h in state.history)]
    else:
        lines.append("Steps taken so far: none (the first step)")
    return lines


def choice_messages(
    state: State,
    round_: int,
    max_rounds: int,
    left: Sequence[str],
    so_far: SearchResult,
    images_seen: int = 0,
) -> tuple[Message, ...]:
    """The chooser's prompt for round ``round_``."""
    lines = ["The agent's state:", *state_lines(state, images_seen), ""]
    if so_far.rounds:
        searched = " -> ".join(r.viewpoint for r in so_far.rounds)
        lines.append(f"Searched so far under {searched}, which found:")
        if so_far.hits:
            lines += [hit_line(i, h) for i, h in enumerate(so_far.hits, start=1)]
        else:
            lines.append("nothing")
    else:
        lines.append("Nothing has been searched yet.")
    lines += ["", f"Round {round_} of at most {max_rounds}. Viewpoints to choose from:"]
    lines += [f"- {v}: matches {describe(v)}" for v in left]
    may_stop = bool(so_far.rounds)
    ask = "Reply with the name of one of them"
    if may_stop:
        ask += f", or {STOP_WORD} when the guidance found so far is enough for the next action"
    lines += ["", ask + "."]
    return (Message("system", CHOOSER_INSTRUCTIONS), Message("user", "\n".join(lines)))


def choice_grammar(left: Sequence[str], may_stop: bool) -> str:
    """A GBNF grammar of the replies allowed (for a server that takes one)."""
    options = [*left, *([STOP_WORD] if may_stop else [])]
    return "root ::= " + " | ".join(f'"{o}"' for o in options)


_TRIM = " \t\"'`*._:;,!()[]"


def parse_choice(reply: str, left: Sequence[str], may_stop: bool) -> str | None:
    """The viewpoint of ``left`` the reply names (None: it says stop, where it may);
    ValueError when it names none of them."""
    first = next((ln for ln in reply.splitlines() if ln.strip(_TRIM)), "")
    word = re.sub(r"^\s*viewpoint\s*[:=]", "", first.strip(_TRIM), flags=re.IGNORECASE)
    word = word.strip(_TRIM).lower().replace(" ", "")
    if may_stop and word == STOP_WORD:
        return None
    try:
        name = viewpoint_name(word)
    except ValueError:
        name = ""
    if name in left:
        return name
    # a sentence naming one: the name found first, the longest where two start together
    text = reply.lower()
    found: list[tuple[int, int, str]] = []
    for v in left:
        m = re.search(rf"(?<![\w+]){re.escape(v)}(?![\w+])", text)
        if m:
            found.append((m.start(), -len(v), v))
    if found:
        return min(found)[2]
    if may_stop and re.search(rf"\b{STOP_WORD}\b", text):
        return None
    raise ValueError(f"the reply names no viewpoint of {', '.join(left)}")


class ModelChooser:
    """Asks ``llm`` for each round's viewpoint of one deep search over ``state`` (see the
    module docstring); one instance per search."""

    def __init__(
        self, llm: LLM | None, state: State, *, max_rounds: int, images_seen: int = 0
    ) -> None:
        self.llm = llm
        self.state = state
        self.max_rounds = max_rounds
        self.images_seen = images_seen
        self.choices: list[Choice] = []

    async def __call__(
        self, round_: int, left: tuple[str, ...], so_far: SearchResult
    ) -> str | None:
        may_stop = bool(so_far.rounds)
        if not may_stop and len(left) == 1:
            return self._keep(Choice(round_, left, left[0]))
        if self.llm is None:
            note = f"no model to choose with; searched {left[0]}, the next in order"
            return self._keep(Choice(round_, left, left[0], note=note))
        grammar = choice_grammar(left, may_stop) if self.llm.grammar_support == "gbnf" else None
        request = LLMRequest(
            messages=choice_messages(
                self.state, round_, self.max_rounds, left, so_far, self.images_seen
            ),
            max_tokens=CHOICE_MAX_TOKENS,
            temperature=0.0,
            grammar=grammar,
        )
        try:
            response = await self.llm.complete(request)
        except LLMError as e:
            note = f"the model could not be asked ({e}); searched {left[0]}, the next in order"
            return self._keep(Choice(round_, left, left[0], note=note))
        tokens = response.usage.total
        try:
            chosen = parse_choice(response.text, left, may_stop)
        except ValueError:
            note = f"the reply names no viewpoint it may search; searched {left[0]}, the next"
            return self._keep(Choice(round_, left, left[0], response.text, note, tokens))
        return self._keep(Choice(round_, left, chosen, response.text, tokens=tokens))

    def _keep(self, choice: Choice) -> str | None:
        self.choices.append(choice)
        return choice.chose

    def records(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.choices]


__all__ = [
    "CHOICE_MAX_TOKENS",
    "CHOOSER_INSTRUCTIONS",
    "STOP_WORD",
    "Choice",
    "ModelChooser",
    "choice_grammar",
    "choice_messages",
    "parse_choice",
    "state_lines",
]
