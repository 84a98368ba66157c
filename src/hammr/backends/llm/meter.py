"""Counting the model calls a run makes beside its steps' own: the calls made inside tools.

A system's trace records each step's own model call(s) (:attr:`hammr.trace.Step.usage`), and
a child agent's calls in the child's trace. The calls a tool makes itself (AnswerWithContext,
DecomposeQuestion, a word problem's equation, a VLM-backed tool, a MulProg module, AVIS's
image description) and those an advisor makes before a step's call (MuSE's viewpoint choice)
are counted here, into the step they were made for (:attr:`~hammr.trace.Step.tool_calls`,
``tool_cached_calls`` and ``tool_usage``), so that a trace's ``llm_calls``, ``prompt_tokens``
and ``completion_tokens`` are every call the run made.

**How.** The *current meter* is a context variable, so it follows the run through ``await``
and into the tasks and threads a tool starts (they copy the context), and concurrent runs
never share one. Replies are added to it at two kinds of places:

* :class:`MeteredLLM`, the run's model as tools see it: :meth:`ToolContext.for_step
  <hammr.tools.base.ToolContext.for_step>` hands every tool a ``ctx.llm`` wrapped in it (and
  AVIS its action runner and image describer, a ReAct agent its advisors; the memory
  annotator and MulProg's planner wrap their model too);
* :func:`record`, called by a client hammr holds apart from the run's model (the VLM
  backend's).

Only replies are counted: a call that failed (no reply) is not, nor are the requests that
are no completion (``/tokenize``, ``/props``, embeddings).

**The rule that counts each call once.**

1. A system's run (:meth:`hammr.agent.ReActAgent.run`, and :func:`hammr.agent.traced`, the
   frame of every other system's run) is in :func:`unmetered`: no meter is current, so the
   calls it makes itself, which its steps record, are added to none. A child agent (a
   HAMMR specialist called as a tool) is such a run: its calls are in its own trace, never in
   the calling step's meter, and the calls of *its* tools go to *its* steps.
2. While a step runs its tool (and asks its advisors), the step's meter is current
   (:func:`step_meter`): every reply that passes a :class:`MeteredLLM` or :func:`record` in
   that time is the step's.
3. A system that makes and records calls of its own inside a step's meter (AVIS's object
   selector and LLM QA, whose replies it adds to the step itself) makes them in
   :func:`unmetered`.
4. :func:`metered` never wraps a :class:`MeteredLLM` again, so a reply is added once however
   many contexts hand the same model on.

A reply replayed from hammr's response cache (``LLMResponse.cached``) is counted as the
step's own call is (the trace describes the run the same whether it was replayed or not)
and, in ``tool_cached_calls``, as no server call. Calls made outside any question (building
an experience bank) are added to a :class:`Meter` of the build's (see
:func:`hammr.memory.annotate.annotate_bank`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from hammr.backends.llm.base import LLM, GrammarSupport, LLMRequest, LLMResponse
from hammr.trace import StepUsage

if TYPE_CHECKING:
    from hammr.trace import Step


class Meter:
    """Adds up the replies made while it is current: their number, those replayed from
    hammr's response cache, and their usage. With a ``step``, every reply is also added to
    the step's ``tool_calls``, ``tool_cached_calls`` and ``tool_usage`` at once (a run cut
    short keeps what its tool had spent)."""

    def __init__(self, step: Step | None = None) -> None:
        self.step = step
        self.calls = 0
        self.cached_calls = 0
        self.usage = StepUsage()

    def add(self, response: LLMResponse) -> None:
        used = StepUsage.of(response)
        self.usage = self.usage.plus(used, first=self.calls == 0)
        self.calls += 1
        self.cached_calls += int(response.cached)
        step = self.step
        if step is not None:
            step.tool_usage = step.tool_usage.plus(used, first=step.tool_calls == 0)
            step.tool_calls += 1
            step.tool_cached_calls += int(response.cached)

    def summary(self) -> str:
        """``3 calls, 1200+80 tokens (1 from hammr's cache)``."""
        u = self.usage
        cached = f" ({self.cached_calls} from hammr's cache)" if self.cached_calls else ""
        s = "" if self.calls == 1 else "s"
        return f"{self.calls} call{s}, {u.prompt_tokens}+{u.completion_tokens} tokens{cached}"


_CURRENT: ContextVar[Meter | None] = ContextVar("hammr_llm_meter", default=None)


def current_meter() -> Meter | None:
    """The meter a reply made now is added to (None: it is added to none)."""
    return _CURRENT.get()


def record(response: LLMResponse) -> None:
    """Add ``response`` to the current meter, if there is one. For a client the run's model
    does not wrap (the VLM backend's); a :class:`MeteredLLM` calls it itself."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(response)


@contextmanager
def metering(meter: Meter) -> Iterator[Meter]:
    """``meter`` is current in the block (the one before it again after)."""
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


@contextmanager
def step_meter(step: Step) -> Iterator[Meter]:
    """A meter adding the block's replies to ``step``'s ``tool_*`` fields, current in it:
    around the tool a step runs (and the advisors it asks)."""
    with metering(Meter(step)) as meter:
        yield meter


@contextmanager
def unmetered() -> Iterator[None]:
    """No meter is current in the block: the calls made in it are counted by whoever makes
    them (a system's run, whose steps record its calls; see the module docstring)."""
    token = _CURRENT.set(None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class MeteredLLM:
    """``inner`` whose every reply is also added to the current meter (:func:`record`); all
    else (name, grammar support, vision, context window, ...) is ``inner``'s."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def grammar_support(self) -> GrammarSupport:
        return self.inner.grammar_support

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.inner.complete(request)
        record(response)
        return response

    def __getattr__(self, attr: str) -> Any:
        # only reached for what this class does not define; never for 'inner' itself (a
        # half-built or unpickled instance must not recurse)
        if attr == "inner" or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def __repr__(self) -> str:
        return f"MeteredLLM({self.inner!r})"


def metered(llm: Any) -> Any:
    """``llm`` wrapped in a :class:`MeteredLLM` (itself when it is one already, or None)."""
    if llm is None or isinstance(llm, MeteredLLM):
        return llm
    return MeteredLLM(llm)


__all__ = [
    "Meter",
    "MeteredLLM",
    "current_meter",
    "metered",
    "metering",
    "record",
    "step_meter",
    "unmetered",
]
