"""AVIS's analyses of its own runs (the paper's appendix C, figures 6-13) and the graph a run
teaches: pure functions over traces, no files, no command line.

Which traces: an AVIS trace is one whose agent is ``"AVIS"`` or that holds an action step;
other traces (another system's, or a sample stored without one) are skipped and counted.
Its *action steps* are exactly the steps with ``state`` set (see :mod:`hammr.avis`): the
planner chose ``step.tool`` at ``step.state``, so each one is a transition ``state -> tool``,
except a step where the planner chose nothing (its reply named no action it was offered:
``step.tool`` is unset, the step's error says why), which is no transition.
DECOMPOSE, CONTEXT and the forced ANSWER step are no actions.

* tool frequency over every action step (Fig. 6) and at positions 1-4 (Figs. 7-10: the
  position is the step's place among its trace's action steps);
* the reasoner's verdicts (Fig. 12), the length of the action sequences (Fig. 13);
* the induced transition graph (Fig. 11): how often the planner went from a state to an
  action, and P(action | state) = count(state -> action) / count(state -> anything).

Successful samples: a sample succeeded when its score is at least ``min_score``, by default
1.0, the store's own notion of a correct answer (``hammr errors``' ``correct`` filter: exact
match metrics give 0 or 1, and VQA accuracy gives 1 only when at least three annotators
gave the answer). Lower it (e.g. 0.5) to count partly right answers as successes.

:func:`induce_graph` turns the transitions of successful traces into a
:class:`~hammr.avis.graph.TransitionGraph` (the "learned" graph), validated by
:func:`~hammr.avis.graph.parse_graph` like any graph file.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hammr.avis.graph import BUILTIN_ACTIONS, START, GraphError, TransitionGraph, parse_graph
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace

AVIS_AGENT = "AVIS"
VERDICTS: tuple[str, ...] = ("not_informative", "informative", "answerable")
"""The reasoner's labels, in the paper's order (Fig. 12)."""
DEFAULT_MIN_SCORE = 1.0
"""A sample with at least this score is successful (see the module docstring)."""
POSITIONS = 4
"""Positions the per-position frequency covers (the paper's Figs. 7-10: first to fourth)."""


class InduceError(GraphError):
    """No valid graph can be learned from these traces; the message says why."""


# -- which steps -----------------------------------------------------------------------------


def is_avis_trace(trace: Trace) -> bool:
    """Whether ``trace`` is an AVIS run: its agent is AVIS, or it holds an action step."""
    return trace.agent == AVIS_AGENT or any(s.state is not None for s in trace.steps)


def is_avis_document(doc: Any) -> bool:
    """:func:`is_avis_trace` for a trace in :meth:`Trace.to_dict` form, without parsing it."""
    if not isinstance(doc, Mapping):
        return False
    if doc.get("agent") == AVIS_AGENT:
        return True
    steps = doc.get("steps")
    return isinstance(steps, list) and any(
        isinstance(s, Mapping) and s.get("state") is not None for s in steps
    )


def action_steps(trace: Trace) -> list[Step]:
    """The trace's action steps (those with ``state`` set), in order."""
    return [s for s in trace.steps if s.state is not None]


def action_name(step: Step) -> str:
    """The action an action step took (``"?"`` where a broken step names none)."""
    return step.tool or "?"


def chose_action(step: Step) -> bool:
    """Whether the planner chose an action at this action step (a transition); False where
    its reply named none (the step's error says why)."""
    return step.tool is not None


def is_successful(score: float, min_score: float = DEFAULT_MIN_SCORE) -> bool:
    return score >= min_score


# -- the analyses ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Transition:
    """One edge of the induced graph: the planner chose ``action`` at ``state``."""

    state: str
    action: str
    count: int
    probability: float
    """count / every action chosen at ``state``."""


def _ranked(counter: Counter[str]) -> dict[str, int]:
    """Most frequent first, ties by name: one order for tables and charts alike."""
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class AvisAnalysis:
    """Everything the paper's figures 6-13 show, for one set of traces."""

    traces: int
    """AVIS traces analysed."""
    skipped: int
    """Samples left out as not AVIS (another agent's trace, or no trace)."""
    unsuccessful: int = 0
    """AVIS traces left out as not successful (only with ``successful_only``)."""
    successful_only: bool = False
    min_score: float | None = None
    """The success threshold, where scores were known."""
    successful: int | None = None
    """AVIS traces whose sample succeeded (before any filtering), where scores were known."""
    tools: dict[str, int] = field(default_factory=dict)
    """Fig. 6: action -> times chosen, most frequent first."""
    positions: tuple[dict[str, int], ...] = ()
    """Figs. 7-10: ``positions[i]`` is action -> times chosen as the (i+1)-th action."""
    verdicts: dict[str, int] = field(default_factory=dict)
    """Fig. 12: verdict -> action steps so judged, every verdict of :data:`VERDICTS`."""
    unjudged: int = 0
    """Action steps without a verdict (the run ended in them, or the action failed)."""
    lengths: dict[int, int] = field(default_factory=dict)
    """Fig. 13: number of action steps -> traces that long, by length."""
    transitions: tuple[Transition, ...] = ()
    """Fig. 11: every (state -> action) seen, states in graph order, then most frequent."""
    label: str = ""
    """What was analysed (a run's name), for titles."""

    @property
    def samples(self) -> int:
        """Every sample given, analysed or not."""
        return self.traces + self.skipped + self.unsuccessful

    @property
    def actions(self) -> int:
        """Action steps over all analysed traces."""
        return sum(self.tools.values())

    @property
    def mean_length(self) -> float:
        n = sum(self.lengths.values())
        return sum(k * v for k, v in self.lengths.items()) / n if n else 0.0

    @property
    def median_length(self) -> float:
        values = [k for k, v in self.lengths.items() for _ in range(v)]
        return float(statistics.median(values)) if values else 0.0

    def transition_counts(self) -> dict[tuple[str, str], int]:
        return {(t.state, t.action): t.count for t in self.transitions}

    def probability(self, state: str, action: str) -> float:
        """P(action | state) as induced (0 when never chosen there)."""
        for t in self.transitions:
            if (t.state, t.action) == (state, action):
                return t.probability
        return 0.0

    def states(self) -> list[str]:
        """Every state and action of the induced graph, START first, in graph order."""
        seen = [START] if self.transitions else []
        for t in self.transitions:
            for name in (t.state, t.action):
                if name not in seen:
                    seen.append(name)
        return sorted(seen, key=_state_rank)


def _state_rank(name: str) -> tuple[int, int, str]:
    """START, then the built-in actions in their order (visual, then knowledge), then the
    rest by name."""
    if name == START:
        return (0, 0, "")
    order = list(BUILTIN_ACTIONS)
    if name in BUILTIN_ACTIONS:
        return (1, order.index(name), "")
    return (2, 0, name)


def transitions_of(traces: Iterable[Trace]) -> tuple[Transition, ...]:
    """The induced graph of these traces' action steps (Fig. 11), see :class:`Transition`."""
    counts: Counter[tuple[str, str]] = Counter()
    for trace in traces:
        for step in action_steps(trace):
            assert step.state is not None
            if chose_action(step):
                counts[(step.state, action_name(step))] += 1
    per_state: Counter[str] = Counter()
    for (state, _), n in counts.items():
        per_state[state] += n
    ordered = sorted(counts.items(), key=lambda kv: (_state_rank(kv[0][0]), -kv[1], kv[0][1]))
    return tuple(Transition(s, a, n, n / per_state[s]) for (s, a), n in ordered)


def analyze(
    traces: Iterable[Trace | None], *, positions: int = POSITIONS, label: str = ""
) -> AvisAnalysis:
    """The analyses of these traces, all of them (non-AVIS ones and None are skipped and
    counted). With scores to filter by, use :func:`analyze_records` or :func:`analyze_scored`."""
    return analyze_scored(((t, None) for t in traces), positions=positions, label=label)


def analyze_records(
    records: Iterable[RunRecord],
    *,
    successful_only: bool = False,
    min_score: float = DEFAULT_MIN_SCORE,
    positions: int = POSITIONS,
    label: str = "",
) -> AvisAnalysis:
    """The analyses of stored samples (``RunStore.records``); ``successful_only`` keeps the
    AVIS traces of samples scored at least ``min_score``."""
    return analyze_scored(
        ((r.trace if isinstance(r.trace, Trace) else None, r.score) for r in records),
        successful_only=successful_only,
        min_score=min_score,
        positions=positions,
        label=label,
    )


def analyze_scored(
    samples: Iterable[tuple[Trace | None, float | None]],
    *,
    successful_only: bool = False,
    min_score: float = DEFAULT_MIN_SCORE,
    positions: int = POSITIONS,
    label: str = "",
) -> AvisAnalysis:
    """The analyses of (trace, score) pairs; a score of None is unknown (such a sample is
    never successful, so ``successful_only`` leaves it out)."""
    if positions < 1:
        raise ValueError("positions should be at least 1")
    kept: list[Trace] = []
    skipped = unsuccessful = successful = 0
    scored = False
    for trace, score in samples:
        if trace is None or not is_avis_trace(trace):
            skipped += 1
            continue
        scored = scored or score is not None
        ok = score is not None and is_successful(score, min_score)
        successful += ok
        if successful_only and not ok:
            unsuccessful += 1
            continue
        kept.append(trace)
    tools: Counter[str] = Counter()
    at: list[Counter[str]] = [Counter() for _ in range(positions)]
    verdicts: Counter[str] = Counter({v: 0 for v in VERDICTS})
    unjudged = 0
    lengths: Counter[int] = Counter()
    for trace in kept:
        steps = action_steps(trace)
        lengths[len(steps)] += 1
        for i, step in enumerate(steps):
            name = action_name(step)
            tools[name] += 1
            if i < positions:
                at[i][name] += 1
            if step.verdict is None:
                unjudged += 1
            else:
                verdicts[step.verdict] += 1
    return AvisAnalysis(
        traces=len(kept),
        skipped=skipped,
        unsuccessful=unsuccessful,
        successful_only=successful_only,
        min_score=min_score if scored or successful_only else None,
        successful=successful if scored else None,
        tools=_ranked(tools),
        positions=tuple(_ranked(c) for c in at),
        verdicts={v: verdicts[v] for v in [*VERDICTS, *sorted(set(verdicts) - set(VERDICTS))]},
        unjudged=unjudged,
        lengths=dict(sorted(lengths.items())),
        transitions=transitions_of(kept),
        label=label,
    )


def successful_traces(
    records: Iterable[RunRecord], min_score: float = DEFAULT_MIN_SCORE
) -> list[Trace]:
    """The AVIS traces of the samples scored at least ``min_score`` (what
    :func:`induce_graph` learns from)."""
    return [
        r.trace
        for r in records
        if isinstance(r.trace, Trace) and is_avis_trace(r.trace) and r.score >= min_score
    ]


# -- the learned graph -----------------------------------------------------------------------


def induce_graph(
    traces: Iterable[Trace | None],
    min_count: int = 1,
    min_prob: float = 0.0,
    *,
    base: TransitionGraph | None = None,
    description: str | None = None,
    source: str = "induced",
) -> TransitionGraph:
    """The transition graph these (successful) traces followed: an edge ``state -> action``
    for every transition seen at least ``min_count`` times and with P(action | state) at
    least ``min_prob``, most frequent first in each state's list. States that the kept
    edges no longer reach from START are dropped with their edges.

    Custom actions (not built in) are kept only when ``base``, the graph the runs used,
    declares them (their ``[actions.NAME]`` table is copied); otherwise InduceError. The
    result is validated by :func:`~hammr.avis.graph.parse_graph`; InduceError (a
    GraphError) says why no valid graph comes out: no AVIS trace, a threshold that leaves
    START without an edge, or no answering action left within reach.
    """
    if min_count < 1:
        raise ValueError("min_count should be at least 1")
    if not 0.0 <= min_prob <= 1.0:
        raise ValueError("min_prob should be between 0 and 1")
    avis = [t for t in traces if t is not None and is_avis_trace(t)]
    if not avis:
        raise InduceError("no successful AVIS trace to learn a graph from")
    seen = transitions_of(avis)
    if not any(t.state == START for t in seen):
        raise InduceError(f"{no_action_reason(avis)}, so there is nothing to learn a graph from")
    kept = [t for t in seen if t.count >= min_count and t.probability >= min_prob]
    if not any(t.state == START for t in kept):
        best = max((t for t in seen if t.state == START), key=lambda t: (t.count, t.probability))
        raise InduceError(
            f"threshold too high: {START} keeps no edge (its most frequent, {START} -> "
            f"{best.action}, was seen {_count_of(best.count, 'time')}, "
            f"P = {best.probability:.2f}; asked for at least {_count_of(min_count, 'time')} "
            f"and P >= {min_prob:g})"
        )
    edges: dict[str, list[str]] = {}
    for t in kept:  # already most frequent first within each state
        edges.setdefault(t.state, []).append(t.action)
    reach = {START}
    frontier = [START]
    while frontier:
        for target in edges.get(frontier.pop(), ()):
            if target not in reach:
                reach.add(target)
                frontier.append(target)
    edges = {s: targets for s, targets in edges.items() if s in reach}
    custom: dict[str, dict[str, Any]] = {}
    for name in sorted({a for targets in edges.values() for a in targets} | set(edges)):
        if name == START or name in BUILTIN_ACTIONS:
            continue
        spec = base.actions.get(name) if base is not None else None
        if spec is None or spec.tool is None:
            where = (
                f", and the graph {base.source} does not declare it"
                if base is not None
                else f": give the graph the runs used, which declares it as [actions.{name}]"
            )
            raise InduceError(f"action {name!r} in the traces is not a built-in action{where}")
        custom[name] = {
            "tool": spec.tool,
            "description": spec.description,
            "phase": spec.phase,
            "answers": spec.answers,
        }
    doc: dict[str, Any] = {
        "description": description
        if description is not None
        else (
            f"induced from {len(avis)} successful AVIS traces "
            f"(min count {min_count}, min probability {min_prob:g})"
        ),
        "edges": {s: edges[s] for s in sorted(edges, key=_state_rank)},
    }
    if custom:
        doc["actions"] = custom
    try:
        return parse_graph(doc, source)
    except GraphError as e:
        # the message names ``source``, a file not written yet: said as "the learned graph"
        why = str(e).removeprefix(f"{source}: ")
        raise InduceError(f"the learned graph is not usable: {why}") from None


def no_action_reason(traces: Sequence[Trace]) -> str:
    """What happened in AVIS traces that hold no transition (:func:`transitions_of` gives
    none): no action was ever chosen, because each trace ended before the planner's first
    step, or because every planning step failed (their error kinds are counted)."""
    failed = [s for t in traces for s in action_steps(t) if not chose_action(s)]
    where = f"the {_count_of(len(traces), 'successful AVIS trace')}"
    if not failed:
        return f"no action was ever chosen in {where}: each ended before the planner's first step"
    kinds = Counter(s.error_kind or "no action named" for s in failed)
    tally = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
    return (
        f"no action was ever chosen in {where}: the planner was asked "
        f"{_count_of(len(failed), 'time')} and its reply never named an action ({tally})"
    )


def _count_of(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless ``n`` is 1 ("1 time", "2 times")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def induced_header(
    runs: Sequence[str],
    traces: int,
    samples: int,
    min_count: int,
    min_prob: float,
    min_score: float = DEFAULT_MIN_SCORE,
    transitions: Sequence[Transition] = (),
    *,
    when: datetime | None = None,
    file: str = "graph.toml",
) -> str:
    """The comment block of a learned graph file (``file``): what it was learned from, and
    how; ``transitions`` (every one seen, as :func:`transitions_of` gives them) are listed
    with their counts and probabilities."""
    date = (when or datetime.now(UTC)).isoformat(timespec="seconds")
    lines = [
        "AVIS transition graph learned by `hammr avis induce` from the successful traces",
        f"runs: {', '.join(runs)}",
        f"traces: {traces} successful (score >= {min_score:g}) of {samples} samples",
        f"thresholds: min count {min_count}, min probability {min_prob:g}",
        f"date: {date}",
    ]
    if transitions:
        lines += ["", "transitions seen (count, P(action | state)); kept ones are [edges]:"]
        lines += [f"  {t.state} -> {t.action}: {t.count}, {t.probability:.3f}" for t in transitions]
    lines += ["", f'use it: [avis] graph = "{file}" in hammr.toml']
    return "\n".join(lines)
