"""Which specialist answers a question: the LLM dispatcher, nearest neighbours, or both.

- Routing-only mode (how the paper develops its dispatcher, section 3.3): the dispatcher runs
  with each specialist replaced by a probe that ends the run naming it, so only the routing
  decision is paid for.
- :class:`NeighbourRouter`: k nearest labelled example questions (the specialists'
  ``routing_examples`` and worked-example questions) under the offline text embedder, voting
  with their similarities. The inputs a question comes with (a point, a second image) first
  narrow the candidates to the specialists that take exactly those inputs. The labelled
  questions' vectors are cached on disk under the embedder's name
  (:func:`hammr.backends.capabilities.embedder_name`: a served model's model and endpoint);
  a cached matrix is checked against one fresh vector before it is used (another size or
  direction: stale, embedded anew), and a question whose vector has another size than the
  labelled questions' is a :class:`RouterError` naming the server and both sizes.
- :class:`HybridDispatcher`: route by neighbours when their vote is confident, else run the
  LLM dispatcher. The paper's dispatcher misroutes 13% of questions (its section 4.3).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hammr.agent import AgentFailed, AgentResult, ReActAgent, mark_cancelled
from hammr.agents.catalog import AgentCatalog
from hammr.backends.capabilities import embedder_name
from hammr.backends.llm.base import LLMError
from hammr.input_file import read_input_bytes
from hammr.output_file import OutputError, write_output
from hammr.tools.base import Param, ToolContext, ToolError, ToolResult
from hammr.trace import Step, Trace, encode_value
from hammr.values import Value, render_value

RouterKind = Literal["llm", "neighbours", "hybrid"]
ROUTERS: tuple[str, ...] = ("llm", "neighbours", "hybrid")


# -- routing-only mode ---------------------------------------------------------------------


class RouteProbe:
    """Stands in for a specialist: same card, but calling it ends the run with its name."""

    def __init__(self, agent: ReActAgent) -> None:
        self.name = agent.name
        self.description = agent.description
        self._agent = agent

    @property
    def params(self) -> tuple[Param, ...]:
        return self._agent.params

    @property
    def returns(self) -> str:
        return self._agent.returns

    def card(self) -> str:
        return self._agent.card()

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        return ToolResult(self.name, observation=self.name, final=True)


def routing_only(dispatcher: ReActAgent) -> ReActAgent:
    """A copy of ``dispatcher`` whose agent tools only record which one it called."""
    return dispatcher.with_tools(
        [RouteProbe(t) if isinstance(t, ReActAgent) else t for t in dispatcher.tools.values()]
    )


def routed_agent(trace: Trace, candidates: Collection[str]) -> str | None:
    """The first specialist a dispatcher's trace called (None: it never called one)."""
    for step in trace.steps:
        if step.tool in candidates and step.error_kind is None:
            return step.tool
    return None


def eligible(agent_inputs: Mapping[str, Collection[str]], given: Collection[str]) -> list[str]:
    """The specialists that take exactly the extra inputs a question comes with (a point,
    a second image); failing that, those whose inputs are all there. A question with no
    point never goes to a pointing specialist, whichever router decides."""
    have = frozenset(given) | {"image"}
    exact = [a for a, need in agent_inputs.items() if frozenset(need) | {"image"} == have]
    if exact:
        return exact
    return [a for a, need in agent_inputs.items() if frozenset(need) <= have]


def restricted(dispatcher: ReActAgent, keep: Collection[str]) -> ReActAgent:
    """A copy of ``dispatcher`` offered only the specialists in ``keep`` (plain tools stay)."""
    return dispatcher.with_tools(
        [t for t in dispatcher.tools.values() if not isinstance(t, ReActAgent) or t.name in keep]
    )


# -- nearest neighbours --------------------------------------------------------------------


@dataclass(frozen=True)
class Neighbour:
    question: str
    agent: str
    score: float


@dataclass
class RouteDecision:
    agent: str | None
    """The specialist chosen; None when the router defers (hybrid) or found none."""
    by: str
    """'inputs' (only one specialist takes these inputs), 'neighbours', 'llm' or 'none'."""
    confidence: float = 0.0
    votes: dict[str, float] = field(default_factory=dict)
    neighbours: list[Neighbour] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    trace: Trace | None = None
    """The LLM dispatcher's routing-only trace, when it was asked."""

    def explain(self) -> str:
        if self.by == "inputs":
            return f"only {self.agent} takes these inputs"
        if self.by == "neighbours":
            return (
                f"nearest labelled questions vote {self.agent} ({self.confidence:.0%} of the vote)"
            )
        if self.by == "llm":
            return f"the LLM dispatcher chose {self.agent or 'no specialist'}"
        return "no specialist fits"


class RouterError(LLMError):
    """The neighbour router cannot embed: its embedding server failed, or sent a vector of
    another size than it did for the labelled questions. A model call failed, with a one-line
    message that names the server and says what to do (an :class:`LLMError`, so the commands
    and the runs that handle a failed model call handle this one too)."""


def _fingerprint(texts: Sequence[str], model: str) -> str:
    h = hashlib.sha256(model.encode())
    for t in texts:
        h.update(b"\0" + t.encode())
    return h.hexdigest()[:20]


SAME_VECTOR_COSINE = 0.99
"""A fresh vector of a labelled question must be at least this close to its cached one for
the cache to be used (a served model embeds a text alone and in a batch almost alike)."""


class NeighbourRouter:
    """k-nearest-neighbour routing over labelled questions, with input-signature gating."""

    def __init__(
        self,
        examples: Sequence[tuple[str, str]],
        agent_inputs: Mapping[str, Collection[str]],
        embedder: Any,
        *,
        k: int = 8,
        cache_dir: Path | None = None,
    ) -> None:
        if not examples:
            raise ValueError("the neighbour router needs labelled example questions")
        self.examples = list(examples)
        self.agent_inputs = {a: frozenset(i) for a, i in agent_inputs.items()}
        self.embedder = embedder
        self.k = k
        self.cache_dir = cache_dir
        self._matrix: np.ndarray | None = None

    @classmethod
    def from_catalog(
        cls, catalog: AgentCatalog, embedder: Any, *, k: int = 8, cache_dir: Path | None = None
    ) -> NeighbourRouter:
        examples: list[tuple[str, str]] = []
        seen: set[str] = set()
        for q, spec in catalog.labelled_questions():
            key = " ".join(q.lower().split())
            if q and key not in seen:
                seen.add(key)
                examples.append((q, spec.name))
        inputs = {s.name: set(s.inputs) for s in catalog.specialists}
        return cls(examples, inputs, embedder, k=k, cache_dir=cache_dir)

    def candidates(self, inputs: Collection[str]) -> list[str]:
        return eligible(self.agent_inputs, inputs)

    async def prepare(self) -> None:
        """Embed the labelled questions now (once), rather than inside the first question."""
        await self._example_matrix()

    def server(self) -> str:
        """The embedding server (or embedder) the router's vectors come from, for messages."""
        endpoint = getattr(self.embedder, "endpoint", None)
        if isinstance(endpoint, str) and endpoint:
            return f"the embedding server at {endpoint}"
        return f"the embedder {embedder_name(self.embedder) or type(self.embedder).__name__}"

    async def _embed(self, texts: list[str], what: str) -> np.ndarray:
        """``texts`` embedded as (len(texts), d) float32; a failure is a RouterError."""
        try:
            rows = await self.embedder.embed_queries(texts)
        except ToolError as e:  # an embedding server's errors name the server and the cause
            raise RouterError(f"the router could not embed {what}: {e}") from None
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.shape[1] == 0:
            raise RouterError(
                f"{self.server()} sent rows of shape {matrix.shape} for {len(texts)} "
                f"text{'s' if len(texts) != 1 else ''} ({what})"
            )
        return matrix

    def cache_file(self) -> Path | None:
        """Where the labelled questions' vectors are cached: one file per embedder name and
        set of questions; None without a cache folder or for an embedder with no name."""
        name = embedder_name(self.embedder)
        if self.cache_dir is None or name is None:
            return None
        texts = [q for q, _ in self.examples]
        return self.cache_dir / f"router-{_fingerprint(texts, name)}.npy"

    async def _cached_matrix(self, path: Path) -> np.ndarray | None:
        """The cached matrix when it is this embedder's now: readable, one finite row per
        labelled question, and the first row the same (size and direction) as a fresh vector
        of the first question. Anything else (a server that now serves another model at the
        same endpoint, a truncated file) reads as no cache."""
        try:
            cached = np.load(io.BytesIO(read_input_bytes(path)), allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if (
            not isinstance(cached, np.ndarray)
            or cached.ndim != 2
            or cached.shape[0] != len(self.examples)
            or cached.shape[1] == 0
            or not np.isfinite(cached).all()
        ):
            return None
        fresh = (await self._embed([self.examples[0][0]], "a labelled question"))[0]
        if fresh.shape[0] != cached.shape[1]:
            return None
        first = cached[0].astype(np.float64)
        norms = float(np.linalg.norm(first) * np.linalg.norm(fresh))
        if norms == 0 or float(first @ fresh) / norms < SAME_VECTOR_COSINE:
            return None
        matrix: np.ndarray = cached.astype(np.float32, copy=False)
        return matrix

    async def _example_matrix(self) -> np.ndarray:
        if self._matrix is not None:
            return self._matrix
        path = self.cache_file()
        if path is not None and path.is_file():
            cached = await self._cached_matrix(path)
            if cached is not None:
                self._matrix = cached
                return cached
        matrix = await self._embed([q for q, _ in self.examples], "the labelled questions")
        if path is not None:
            _save(path, matrix)
        self._matrix = matrix
        return matrix

    async def route(self, question: str, inputs: Collection[str]) -> RouteDecision:
        candidates = self.candidates(inputs)
        if len(candidates) == 1:
            return RouteDecision(candidates[0], "inputs", 1.0, {candidates[0]: 1.0}, [], candidates)
        if not candidates:
            return RouteDecision(None, "none", 0.0, {}, [], [])
        matrix = await self._example_matrix()
        query = (await self._embed([question], "the question"))[0]
        if query.shape[0] != matrix.shape[1]:
            raise RouterError(
                f"{self.server()} changed the size of its vectors between calls: "
                f"{matrix.shape[1]} numbers for the labelled questions, {query.shape[0]} for "
                "the question (is another model served there now?); run again to embed the "
                "labelled questions anew"
            )
        allowed = np.array([a in candidates for _, a in self.examples])
        scores = np.where(allowed, matrix @ query, -np.inf)
        top = np.argsort(-scores)[: self.k]
        neighbours = [
            Neighbour(self.examples[i][0], self.examples[i][1], float(scores[i]))
            for i in top
            if np.isfinite(scores[i])
        ]
        votes: dict[str, float] = {}
        for n in neighbours:
            # Similarities of e5 embeddings sit in a narrow band near 0.8; sharpen them so
            # that the nearest neighbours count for more than the k-th.
            votes[n.agent] = votes.get(n.agent, 0.0) + float(np.exp((n.score - 1.0) * 20))
        total = sum(votes.values()) or 1.0
        votes = {a: v / total for a, v in sorted(votes.items(), key=lambda kv: -kv[1])}
        best = next(iter(votes), None)
        return RouteDecision(
            best, "neighbours", votes.get(best, 0.0) if best else 0.0, votes, neighbours, candidates
        )


def _save(path: Path, matrix: np.ndarray) -> None:
    """Write the cache file whole or not at all (a run reading it meanwhile sees the old
    one); a folder that cannot be written only costs the cache."""
    np.save(buffer := io.BytesIO(), matrix)
    with contextlib.suppress(OutputError):
        write_output(path, buffer.getvalue(), what="the router's cache file")


# -- the dispatcher with a router in front ---------------------------------------------------


class RoutedDispatcher:
    """Runs a question through a router and the specialists, leaving the dispatcher's trace.

    ``router='llm'`` is the paper's system (the dispatcher agent decides); ``'neighbours'``
    always follows the nearest labelled questions; ``'hybrid'`` follows them when the vote
    is at least ``threshold`` and asks the LLM dispatcher otherwise. A routed question's
    trace has the dispatcher's shape: one step calling the specialist (marked with the
    router; no LLM call), which ends the run with the specialist's answer.
    """

    def __init__(
        self,
        dispatcher: ReActAgent,
        router: NeighbourRouter | None,
        *,
        mode: RouterKind = "hybrid",
        threshold: float = 0.7,
        offer_all: bool = False,
    ) -> None:
        if mode != "llm" and router is None:
            raise ValueError(f"router mode {mode!r} needs a neighbour router")
        self.dispatcher = dispatcher
        self.router = router
        self.mode = mode
        self.threshold = threshold
        self.offer_all = offer_all
        """The LLM dispatcher is offered every specialist (``agent.dispatcher_offers =
        'all'``, as the HAMMR paper's), not only those that take the question's inputs."""
        self.name = dispatcher.name
        self._gated: dict[tuple[str, ...], ReActAgent] = {}

    def llm_dispatcher(self, inputs: Collection[str]) -> ReActAgent:
        """The dispatcher agent offered only the specialists that take these inputs (every
        one with ``offer_all``)."""
        if self.offer_all:
            return self.dispatcher
        agents = {n: set(a.inputs) for n, a in self.specialists.items()}
        keep = tuple(sorted(eligible(agents, inputs)))
        if keep not in self._gated:
            self._gated[keep] = restricted(self.dispatcher, keep)
        return self._gated[keep]

    @property
    def specialists(self) -> dict[str, ReActAgent]:
        return {n: t for n, t in self.dispatcher.tools.items() if isinstance(t, ReActAgent)}

    def _settled(self, decision: RouteDecision) -> bool:
        """The router's decision stands without asking the LLM dispatcher."""
        return decision.agent is not None and (
            self.mode == "neighbours"
            or decision.by == "inputs"
            or decision.confidence >= self.threshold
        )

    async def decide(
        self,
        question: str,
        inputs: Mapping[str, Value],
        ctx: ToolContext,
        *,
        llm_fallback: bool = True,
    ) -> RouteDecision:
        """The routing decision alone; the LLM (routing-only) is asked where the mode says so.
        LLMError when its model call failed: that is no decision (not "no specialist")."""
        decision = RouteDecision(None, "none")
        if self.mode != "llm":
            assert self.router is not None
            decision = await self.router.route(question, list(inputs))
            if self.mode == "neighbours" or self._settled(decision):
                return decision
        if not llm_fallback:
            return decision
        probe = routing_only(self.llm_dispatcher(inputs))
        result = await probe.run(question, inputs, ctx=ctx)
        if result.trace.status == "llm_failure":
            raise LLMError(result.trace.error or "the LLM dispatcher's model call failed")
        chosen = routed_agent(result.trace, self.specialists)
        decision.agent, decision.by, decision.trace = chosen, "llm", result.trace
        return decision

    async def prepare(self) -> None:
        """One-time work before the first question (the router's embeddings)."""
        if self.router is not None and self.mode != "llm":
            await self.router.prepare()

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        inputs = dict(inputs or {})
        if self.mode == "llm":
            return await self.llm_dispatcher(inputs).run(question, inputs, ctx=ctx)
        assert self.router is not None
        started = time.perf_counter()
        # Started before routing, so a run cut short while the router embeds the labelled
        # questions still leaves a trace that says so.
        trace, step = self._start_trace(
            question, inputs, ctx, "routing by the nearest labelled questions", "neighbours"
        )
        try:
            decision = await self.router.route(question, list(inputs))
        except asyncio.CancelledError:
            mark_cancelled(trace)
            raise
        except RouterError as e:
            step.error_kind, step.error = "llm_failure", str(e)
            step.observation = f"#ERROR#: {e}"
            trace.status, trace.error = "llm_failure", str(e)
            trace.latency_s = time.perf_counter() - started
            return AgentResult(None, trace)
        if not self._settled(decision):
            return await self.llm_dispatcher(inputs).run(question, inputs, ctx=ctx)
        return await self._run_routed(question, inputs, decision, ctx, trace, started)

    def _start_trace(
        self,
        question: str,
        inputs: Mapping[str, Value],
        ctx: ToolContext,
        thought: str,
        router: str,
    ) -> tuple[Trace, Step]:
        """The dispatcher's trace with its routing step, announced to ``ctx``."""
        model = self.dispatcher.llm or ctx.llm
        trace = Trace(agent=self.name, question=question, model=getattr(model, "name", ""))
        trace.inputs = {n: encode_value(v, trace.images) for n, v in inputs.items()}
        step = Step(index=0, thought=thought)
        step.router = router
        trace.steps.append(step)
        ctx.trace_started(trace)
        return trace, step

    async def _run_routed(
        self,
        question: str,
        inputs: dict[str, Value],
        decision: RouteDecision,
        ctx: ToolContext,
        trace: Trace,
        started: float,
    ) -> AgentResult:
        assert decision.agent is not None
        agent = self.specialists[decision.agent]
        passed = [n for n in agent.inputs if n in inputs]
        question_arg = "question" if self.dispatcher.question_variable else repr(question)
        call = f"answer = {agent.name}({', '.join([question_arg, *passed])})"
        step = trace.steps[0]
        step.thought, step.action, step.tool = decision.explain(), call, agent.name
        step.router = decision.by
        step.arguments = {"question": question, **{n: trace.inputs[n] for n in passed}}
        if ctx.on_step is not None:
            ctx.on_step(self.name, ctx.depth, step)
        t0 = time.perf_counter()
        try:
            result = await agent.invoke(
                {"question": question, **{n: inputs[n] for n in passed}}, ctx.for_step(step)
            )
        except asyncio.CancelledError:
            mark_cancelled(trace)
            raise
        except AgentFailed as e:
            step.child, step.error_kind, step.error = e.trace, e.kind, str(e)
            step.observation = f"#ERROR#: {e}"
            trace.status, trace.error = e.trace.status, str(e)
        else:
            answer = result.observation or render_value(result.value)
            step.child = result.child_trace
            step.output_var, step.output = "answer", answer
            step.observation = f"{answer} (stored in 'answer')"
            step.finish = answer
            trace.answer, trace.status = answer, "finished"
        finally:
            step.tool_latency_s = time.perf_counter() - t0
            trace.latency_s = time.perf_counter() - started
        if ctx.on_step is not None:
            ctx.on_step(self.name, ctx.depth, step)
        return AgentResult(trace.answer, trace)


__all__ = [
    "ROUTERS",
    "NeighbourRouter",
    "RouteDecision",
    "RouteProbe",
    "RoutedDispatcher",
    "RouterError",
    "routed_agent",
    "routing_only",
]
