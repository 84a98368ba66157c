"""Advice from memory for a running agent: what an :class:`Advisor` adds to a step's prompt.

A memory-backed system (MuSEAgent's every-step search, Reflexion's reflections, ExpeL's
insights and examples) gives a :class:`~hammr.agent.ReActAgent` advisors. Before each model
call the agent asks every advisor in turn; the text of each :class:`Advice` is appended to the
newest user turn (the task message, or the latest ``[Observe]`` turn) *before* that turn is
first sent, and stays there: earlier turns never change, so a server's prefix cache keeps
working. The advice's ``record`` goes into the step's ``retrieved`` list in the trace (what was
retrieved, with scores), as does the record of a tool that searches memory itself
(``ToolResult.retrieved``, e.g. ``SearchExperiences``).

A record is a JSON object with at least ``source`` (who retrieved: ``"muse"``,
``"reflexion"``, ``"expel"``, ...), ``policy`` (``"tool"``: the agent asked; ``"advisor"``:
retrieved for it) and ``text`` (what the model was shown); memory search adds ``hits``,
``rounds`` and ``notes`` (:meth:`hammr.memory.search.SearchResult.to_dict`) and ``query``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hammr.tools.base import ToolContext
from hammr.trace import Trace
from hammr.values import Value

RECORD_KEYS = ("source", "policy", "text")
"""Keys every retrieval record holds."""


@dataclass(frozen=True)
class Situation:
    """Where the agent stands when it is about to call its model."""

    agent: str
    question: str
    step: int
    """The index of the step about to be made (0: the first, before any action)."""
    trace: Trace
    """The run's trace so far (its last step is the one about to be made, still empty)."""
    variables: Mapping[str, Value]
    ctx: ToolContext


@dataclass(frozen=True)
class Advice:
    text: str
    """Appended, on its own lines, to the newest user turn."""
    record: dict[str, Any] = field(default_factory=dict)
    """What the trace step records (``source``, ``policy`` and ``text`` are filled in when
    missing)."""


@runtime_checkable
class Advisor(Protocol):
    """Gives advice before a step, or None. Shared by concurrent runs: keep no per-run state
    on the advisor (read it from the situation's trace)."""

    name: str

    async def advise(self, situation: Situation) -> Advice | None: ...


def advice_record(advisor: str, advice: Advice) -> dict[str, Any]:
    """``advice.record`` with the keys every record holds."""
    record = dict(advice.record)
    record.setdefault("source", advisor)
    record.setdefault("policy", "advisor")
    record.setdefault("text", advice.text)
    return record


__all__ = ["RECORD_KEYS", "Advice", "Advisor", "Situation", "advice_record"]
