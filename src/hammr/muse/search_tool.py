"""``SearchExperiences``: an agent searches the experience bank from the state it is in
(MuSEAgent section 3.3).

``SearchExperiences(viewpoints, k)`` takes one viewpoint (a *wide* search: the top ``k``
experiences under it) or several (a *deep* search: each viewpoint in turn, at most ``[memory]
depth`` rounds, each round adding up to ``k`` experiences from source tasks no earlier round
found). The query is the *calling agent's* state, made the way the bank's states were made
(:func:`hammr.memory.state_at` over the caller's live trace): its question, the task
descriptor (``ToolContext.task``; ``("", "")`` when unknown), the images seen so far (looked
up by hash in the trace) and the history of its earlier steps.

The observation lists each hit as one line: learned from success or failure, the annotator's
score, the viewpoint that found it, its similarity and its guidance; never the source's
ground truth. The step's ``retrieved`` record (:mod:`hammr.advice`) holds the same hits with
their provenance, and the query.

A viewpoint the bank cannot search, or a ``k`` out of range, is a :class:`BadArguments` whose
message lists what the bank has, so the agent can call again.

With ``[memory] deep_search = "per_round"`` (the paper's Eqs. 5-6: each round's viewpoint is
chosen after seeing what the earlier rounds found) a call searches one viewpoint: one round
of a deep search. Calls in a row, with no other action between them, are the rounds of one
deep search: each adds only experiences from source tasks the earlier rounds did not find,
under a viewpoint not yet searched, all querying the state the agent was in at the first of
them, and at most ``[memory] depth`` of them; the observation says which viewpoints are left.
A viewpoint list searches its first viewpoint not yet searched and says the rest were not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hammr.memory.bank import BankError, ExperienceBank
from hammr.memory.experiences import State, Task, state_at
from hammr.memory.search import ExperienceSearcher, Hit, SearchResult
from hammr.memory.viewpoints import ViewpointError, view_content, viewpoint_name
from hammr.tools.base import BadArguments, Param, ToolContext, ToolError, ToolResult
from hammr.trace import Trace
from hammr.values import Image, Value

TOOL_NAME = "SearchExperiences"
SOURCE = "muse"
MAX_K = 10
"""The most hits one search may ask for per round."""
GUIDANCE_CHARS = 400
"""Characters of one hit's guidance shown to the agent (the record keeps it whole)."""


def query_state(ctx: ToolContext, trace: Trace | None, step: int | None = None) -> State:
    """The state of the agent whose trace is ``trace`` before its step ``step`` (default:
    its last step, the one calling); a bare state of nothing when there is no trace."""
    dataset, sub_task = ctx.task or ("", "")
    task = Task(dataset, sub_task)
    if trace is None:
        return State("", task)
    at = len(trace.steps) - 1 if step is None else step
    return state_at(trace, max(0, at), task)


def searchable_viewpoints(bank: ExperienceBank) -> list[str]:
    """The bank's viewpoints that have rows to search, in the bank's order."""
    info = bank.info()
    return [v.name for v in info.viewpoints if v.vectors > 0]


def has_content(state: State, viewpoint: str, images: Mapping[str, Image]) -> bool:
    """Whether ``state`` has anything to search by under ``viewpoint`` (``images`` alone
    with no image held has not)."""
    content = view_content(state, viewpoint)
    return bool(content.text) or any(h in images for h in content.images)


def hit_line(n: int, hit: Hit) -> str:
    """One hit as the agent reads it."""
    learned = "success" if hit.learned_from == "success" else "failure"
    score = f"score {hit.score}/10" if hit.score is not None else "not scored"
    guidance = " ".join(hit.guidance.split()) or "(no guidance)"
    if len(guidance) > GUIDANCE_CHARS:
        guidance = guidance[: GUIDANCE_CHARS - 3].rstrip() + "..."
    where = f"via {hit.viewpoint}, similarity {hit.similarity:.2f}"
    return f"{n}. learned from {learned}, {score} ({where}): {guidance}"


def result_text(result: SearchResult, viewpoints: Sequence[str], k: int) -> str:
    """The observation of a search: a heading, one line per hit, the search's notes."""
    searched = " -> ".join(r.viewpoint for r in result.rounds) or ", ".join(viewpoints)
    kind = "deep search" if len(result.rounds) > 1 else "search"
    if not result.hits:
        lines = [f"No past experience found ({kind} under {searched}, k={k})."]
    else:
        n = len(result.hits)
        lines = [f"{n} past experience{'s' if n != 1 else ''} ({kind} under {searched}, k={k}):"]
        lines += [hit_line(i, h) for i, h in enumerate(result.hits, start=1)]
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def record_of(
    result: SearchResult, text: str, viewpoints: Sequence[str], k: int, policy: str
) -> dict[str, Any]:
    """What the trace step records of a search (see :mod:`hammr.advice`)."""
    return {
        "source": SOURCE,
        "policy": policy,
        "text": text,
        "query": {"viewpoints": list(viewpoints), "k": k},
        **result.to_dict(),
    }


DeepSearchMode = Literal["upfront", "per_round"]
DEEP_SEARCH_MODES: tuple[str, ...] = ("upfront", "per_round")
"""``[memory] deep_search``: every viewpoint named before the first round, or each round's
chosen after the earlier rounds' hits (the paper's)."""


@dataclass(frozen=True)
class SearchOptions:
    """How the searches of one system go (from ``[memory]``)."""

    k: int = 3
    depth: int = 3
    viewpoints: tuple[str, ...] = ()
    """The viewpoints offered and searched by default, in order; empty: the bank's."""
    deep_search: DeepSearchMode = "upfront"
    """How a deep search picks its viewpoints (see :data:`DEEP_SEARCH_MODES`)."""


@dataclass(frozen=True)
class EarlierRounds:
    """The rounds a per-round deep search made in the caller's calls just before this one."""

    start: int
    """The position of the first of those calls in the caller's trace (this call's when
    there is none): the state every round queries."""
    viewpoints: tuple[str, ...] = ()
    hit_ids: tuple[str, ...] = ()


def earlier_rounds(trace: Trace | None) -> EarlierRounds:
    """The rounds of the caller's ``SearchExperiences`` calls in a row just before its
    current (last) step; a failed call is passed over, any other step ends the walk."""
    if trace is None or not trace.steps:
        return EarlierRounds(0)
    start = len(trace.steps) - 1
    viewpoints: list[str] = []
    ids: list[str] = []
    for pos in range(len(trace.steps) - 2, -1, -1):
        step = trace.steps[pos]
        if step.tool != TOOL_NAME:
            break
        start = pos
        for record in reversed(step.retrieved):
            if record.get("source") != SOURCE or record.get("policy") != "tool":
                continue
            viewpoints[:0] = [str(r["viewpoint"]) for r in record.get("rounds", [])]
            ids[:0] = [str(h["id"]) for h in record.get("hits", [])]
    return EarlierRounds(start, tuple(viewpoints), tuple(ids))


def round_text(result: SearchResult, k: int, depth: int, left: Sequence[str]) -> str:
    """The observation of one round of a per-round deep search: its hits and what may
    follow (another round under one of ``left``, or none)."""
    r = result.rounds[-1] if result.rounds else None
    where = f"round {r.round} of at most {depth}, under {r.viewpoint}" if r else "no round"
    if not result.hits:
        lines = [f"No new past experience found (deep search {where}, k={k})."]
    else:
        n = len(result.hits)
        lines = [f"{n} past experience{'s' if n != 1 else ''} (deep search {where}, k={k}):"]
        lines += [hit_line(i, h) for i, h in enumerate(result.hits, start=1)]
    lines += [f"note: {note}" for note in result.notes]
    more = depth - (r.round if r else 0)
    if more > 0 and left:
        lines.append(
            f"next: if this is not precise enough, call {TOOL_NAME} again with one of "
            f"{', '.join(left)} ({more} more round{'s' if more != 1 else ''} at most); "
            "otherwise act on this guidance"
        )
    else:
        lines.append("next: that was this deep search's last round; act on its guidance")
    return "\n".join(lines)


class SearchExperiences:
    """The experience-search tool (see the module docstring). Shared by concurrent runs: it
    keeps no per-run state."""

    name = TOOL_NAME
    description = (
        "Searches the experiences of past runs that were in a state like yours and returns "
        "their guidance (learned from success or failure, scored 0-10). Call it at the start "
        "and whenever you are unsure which tool to call next, before committing to it. One "
        "viewpoint: the top k under it (wide); several: one viewpoint after another, each "
        "adding experiences the earlier ones did not find (deep)."
    )

    per_round_description = (
        "Searches the experiences of past runs that were in a state like yours and returns "
        "their guidance (learned from success or failure, scored 0-10). Call it at the start "
        "and whenever you are unsure which tool to call next, before committing to it. Each "
        "call searches one viewpoint (the top k under it); calling it again straight away "
        "with another viewpoint refines the search (deep) with experiences not found yet."
    )

    def __init__(self, searcher: ExperienceSearcher, options: SearchOptions | None = None) -> None:
        self.searcher = searcher
        self.options = options or SearchOptions()
        if self.options.deep_search not in DEEP_SEARCH_MODES:
            raise ValueError(
                f"deep_search is {' or '.join(DEEP_SEARCH_MODES)}, got {self.options.deep_search!r}"
            )
        self.per_round = self.options.deep_search == "per_round"
        if self.per_round:
            self.description = self.per_round_description
        self._offered: list[str] | None = None

    @property
    def bank(self) -> ExperienceBank:
        return self.searcher.bank

    def offered(self) -> list[str]:
        """The viewpoints the agent may name: the configured ones the bank can search, or all
        it can search."""
        if self._offered is None:
            have = searchable_viewpoints(self.bank)
            wanted = [viewpoint_name(v) for v in self.options.viewpoints]
            self._offered = [v for v in wanted if v in have] if wanted else have
        return self._offered

    @property
    def params(self) -> tuple[Param, ...]:
        return (
            Param(
                "viewpoints",
                "texts",
                doc=(
                    "what of your state to match: one viewpoint, from: "
                    if self.per_round
                    else "what of your state to match: one viewpoint or a list of them, from: "
                )
                + ", ".join(self.offered()),
            ),
            Param(
                "k", "integer", default=self.options.k, doc=f"experiences per viewpoint, 1-{MAX_K}"
            ),
        )

    @property
    def returns(self) -> str:
        return "text"

    def card(self) -> str:
        sig = ", ".join(p.signature() for p in self.params)
        docs = "\n".join(f"  {p.name}: {p.doc}" for p in self.params)
        return f"{self.name}({sig}) -> {self.returns}\n  {self.description}\n{docs}"

    def check(
        self, viewpoints: Sequence[str], k: int, *, cut: bool = True
    ) -> tuple[list[str], list[str]]:
        """(the canonical viewpoints searched, notes); BadArguments for a bad call. ``cut``
        keeps at most ``depth`` of them."""
        offered = self.offered()
        listing = ", ".join(offered) if offered else "none (the bank has no built viewpoint)"
        if not 1 <= k <= MAX_K:
            raise BadArguments(f"{TOOL_NAME}: k is 1 to {MAX_K}, got {k}")
        if not viewpoints:
            raise BadArguments(f"{TOOL_NAME}: name at least one viewpoint, from: {listing}")
        names: list[str] = []
        absent: list[str] = []
        for v in viewpoints:
            try:
                name = viewpoint_name(v)
            except ViewpointError:
                raise BadArguments(
                    f"{TOOL_NAME}: {v!r} is not a viewpoint; choose from: {listing}"
                ) from None
            if name not in offered:
                absent.append(name)
            elif name not in names:
                names.append(name)
        if not names:
            which = ", ".join(repr(a) for a in absent)
            raise BadArguments(
                f"{TOOL_NAME}: the experience bank has no viewpoint {which}; choose from: {listing}"
            )
        # a deep search goes on under the viewpoints the bank has, and says what it left out
        notes: list[str] = [
            f"{a}: not in this experience bank (it has {listing}); not searched" for a in absent
        ]
        if cut and len(names) > self.options.depth:
            dropped = ", ".join(names[self.options.depth :])
            notes.append(f"a search goes through {self.options.depth} viewpoints at most; "
                         f"{dropped} not searched")  # fmt: skip
            names = names[: self.options.depth]
        return names, notes

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        raw = args["viewpoints"]
        viewpoints = [str(v) for v in raw] if isinstance(raw, list) else [str(raw)]
        k = int(args.get("k", self.options.k))
        if self.per_round:
            return await self._one_round(viewpoints, k, ctx)
        names, notes = self.check(viewpoints, k)
        trace = ctx.caller
        state = query_state(ctx, trace)
        images = trace.images if trace is not None else {}
        usable = [v for v in names if has_content(state, v, images)]
        if not usable:
            raise BadArguments(
                f"{TOOL_NAME}: your state has nothing to search by under {', '.join(names)} "
                "(no image seen); choose a viewpoint with question, task or history"
            )
        notes += [f"{v}: nothing to search by (no image seen)" for v in names if v not in usable]
        try:
            result = await self.searcher.deep(
                state, usable, k=k, max_rounds=len(usable), images=images
            )
        except BankError as e:
            raise ToolError(f"{TOOL_NAME}: {e}") from None
        if notes:
            result = SearchResult(
                result.hits, result.rounds, (*notes, *result.notes), result.settings
            )
        text = result_text(result, names, k)
        return ToolResult(
            text, observation=text, retrieved=record_of(result, text, names, k, "tool")
        )

    async def _one_round(self, viewpoints: Sequence[str], k: int, ctx: ToolContext) -> ToolResult:
        """A call under ``per_round``: the next round of the deep search that the calls just
        before it began (see the module docstring)."""
        depth = self.options.depth
        names, notes = self.check(viewpoints, k, cut=False)
        trace = ctx.caller
        before = earlier_rounds(trace)
        done = before.viewpoints
        if len(done) >= depth:
            raise BadArguments(
                f"{TOOL_NAME}: this deep search has made its {depth} round"
                f"{'s' if depth != 1 else ''} ({' -> '.join(done)}); act on its guidance "
                "(a search after your next action starts a new one)"
            )
        state = query_state(ctx, trace, before.start)
        images = trace.images if trace is not None else {}
        left = [v for v in self.offered() if v not in done and has_content(state, v, images)]
        fresh = [v for v in names if v not in done]
        if not fresh:
            raise BadArguments(
                f"{TOOL_NAME}: this deep search already searched {', '.join(names)}; "
                f"choose another viewpoint: {', '.join(left) or 'none is left'}"
            )
        chosen = fresh[0]
        if chosen not in left:
            raise BadArguments(
                f"{TOOL_NAME}: your state has nothing to search by under {chosen} "
                f"(no image seen); choose from: {', '.join(left) or 'none is left'}"
            )
        if len(names) > 1:
            rest = ", ".join(v for v in names if v != chosen)
            notes.append(
                f"one viewpoint a call: {rest} not searched; call again with the next "
                "viewpoint after reading these"
            )
        try:
            result = await self.searcher.deep(
                state,
                [chosen],
                k=k,
                max_rounds=1,
                images=images,
                exclude_ids=before.hit_ids,
                first_round=len(done) + 1,
            )
        except BankError as e:
            raise ToolError(f"{TOOL_NAME}: {e}") from None
        if notes:
            result = SearchResult(
                result.hits, result.rounds, (*notes, *result.notes), result.settings
            )
        text = round_text(result, k, depth, [v for v in left if v != chosen])
        record = record_of(result, text, [chosen], k, "tool")
        record["deep_search"] = "per_round"
        return ToolResult(text, observation=text, retrieved=record)


__all__ = [
    "DEEP_SEARCH_MODES",
    "MAX_K",
    "SOURCE",
    "TOOL_NAME",
    "DeepSearchMode",
    "EarlierRounds",
    "SearchExperiences",
    "SearchOptions",
    "earlier_rounds",
    "has_content",
    "hit_line",
    "query_state",
    "record_of",
    "result_text",
    "round_text",
    "searchable_viewpoints",
]
