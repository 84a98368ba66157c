"""Experience search for any agent: the every-step policy, the ``[memory]`` settings, opening
the bank with the configured embedder, and giving agents ``SearchExperiences``.

Two policies (``[memory] policy``):

* ``agent`` (MuSEAgent's): the agent gets the :class:`~hammr.muse.search_tool.
  SearchExperiences` tool and decides when to search;
* ``every_step`` (what the paper's section 3.3 does: the bank is consulted at every inference
  step, before the action is committed): an :class:`EveryStepAdvisor` makes a deep search
  before every model call, that is before each action, every step whatever it was (a repeat
  of an earlier call and a step after a malformed reply included; each is a new state, its
  history one line longer), and its guidance joins that state's newest user turn.

``[memory] deep_search`` says how such a deep search picks its viewpoints: ``upfront``
(every offered viewpoint the state can be searched by, in order, at most ``depth``) or
``per_round`` (the paper's: before each round the agent's model chooses the viewpoint, seeing
the hits of the rounds before, and may stop early; :mod:`hammr.muse.viewpoint_choice`). For
the ``agent`` policy, ``per_round`` makes each ``SearchExperiences`` call one round.

:func:`with_experience_search` applies either to any :class:`~hammr.agent.ReActAgent`; with
``[memory] agents`` (names, or ``all``) HAMMR's own agents get it too
(:func:`equip_agents`, called where they are built), which the paper does not do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hammr.advice import Advice, Situation
from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.config import Config
from hammr.memory.bank import BankError, ExperienceBank
from hammr.memory.embedders import EmbedderError, view_embedder
from hammr.memory.search import ExperienceSearcher, SearchSettings
from hammr.memory.viewpoints import ViewpointError, viewpoint_names
from hammr.muse.search_tool import (
    DEEP_SEARCH_MODES,
    SOURCE,
    TOOL_NAME,
    SearchExperiences,
    SearchOptions,
    has_content,
    hit_line,
    query_state,
    record_of,
)
from hammr.muse.viewpoint_choice import ModelChooser
from hammr.tools.base import Tool

Policy = Literal["agent", "every_step"]

BUILD_HINT = "make one with `hammr memory build RUN -o bank.db`"

AGENT_NOTE = f"""\
Past runs left experiences: {TOOL_NAME} finds those made in states like yours and gives their
guidance. Search once at the start, and again before committing to a tool when you are unsure;
follow guidance learned from success, avoid what failed."""

ADVISOR_NOTE = """\
Guidance from past runs in states like yours may follow the question and each observation;
follow what was learned from success and avoid what failed, when it fits your question."""

ADVICE_HEADING = "Guidance from past experiences in states like this one:"


@dataclass(frozen=True)
class MemorySettings:
    """The ``[memory]`` section, read and checked."""

    path: str
    policy: Policy
    search: SearchSettings
    options: SearchOptions
    agents: tuple[str, ...]
    """HAMMR agents given experience search; ``("all",)`` for every one but the dispatcher."""


def memory_settings(cfg: Config) -> MemorySettings:
    """``[memory]`` as typed settings (SpecError for a bad viewpoint list)."""
    raw = str(cfg.get("memory.viewpoints") or "")
    try:
        viewpoints = viewpoint_names(v for v in raw.split(",") if v.strip()) if raw.strip() else ()
    except ViewpointError as e:
        raise SpecError(f"[memory] viewpoints: {e}") from None
    k, depth = int(cfg.get("memory.k")), int(cfg.get("memory.depth"))
    search = SearchSettings(
        k=k,
        max_rounds=depth,
        min_score=int(cfg.get("memory.min_score")),
        sources=cfg.get("memory.sources"),
        dedupe=bool(cfg.get("memory.dedupe")),
        out_of_domain=bool(cfg.get("memory.out_of_domain")),
    )
    agents = tuple(a.strip() for a in str(cfg.get("memory.agents") or "").split(",") if a.strip())
    deep = str(cfg.get("memory.deep_search", "upfront"))
    if deep not in DEEP_SEARCH_MODES:
        raise SpecError(f"[memory] deep_search is {' or '.join(DEEP_SEARCH_MODES)}, got {deep!r}")
    return MemorySettings(
        path=str(cfg.get("memory.path") or ""),
        policy=cfg.get("memory.policy"),
        search=search,
        options=SearchOptions(
            k=k,
            depth=depth,
            viewpoints=viewpoints,
            deep_search="per_round" if deep == "per_round" else "upfront",
        ),
        agents=("all",) if "all" in agents else agents,
    )


def open_bank(path: str | Path, backends: Mapping[str, Any], who: str = "muse") -> ExperienceBank:
    """The experience bank at ``path``, opened with the configured embedder that built it
    ('similarity' or 'embed'); SpecError when there is none to open, or it cannot be
    searched with these backends (the bank's message names both embedders)."""
    if not str(path):
        raise SpecError(f"{who} needs an experience bank: --memory bank.db ({BUILD_HINT})")
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"{who}: no experience bank at {file} ({BUILD_HINT})")
    candidates = [backends[c] for c in ("similarity", "embed") if backends.get(c) is not None]
    if not candidates:
        raise SpecError(
            f"{who}: searching {file} needs an embedding backend ([tools.embed] or "
            "[tools.similarity] in hammr.toml), the one the bank was built with"
        )
    try:
        with ExperienceBank(file, create=False) as probe:
            built_with = probe.embedder_name
    except BankError as e:
        raise SpecError(f"{who}: {e}") from None
    if built_with is None:
        raise SpecError(f"{who}: {file} is not built yet (`hammr memory build`)")
    chosen = candidates[0]
    for backend in candidates:
        try:
            if view_embedder(backend).name == built_with:
                chosen = backend
                break
        except EmbedderError:
            continue
    try:
        return ExperienceBank(file, chosen, create=False)
    except (BankError, EmbedderError) as e:
        raise SpecError(f"{who}: {e}") from None


def open_searcher(
    cfg: Config, backends: Mapping[str, Any], who: str = "muse"
) -> tuple[ExperienceSearcher, MemorySettings]:
    """The searcher over the configured bank, with the configured settings."""
    settings = memory_settings(cfg)
    bank = open_bank(settings.path, backends, who)
    return ExperienceSearcher(bank, settings.search), settings


class EveryStepAdvisor:
    """Searches the bank before every action (the ``every_step`` policy): a deep search of at
    most ``depth`` rounds over the offered viewpoints (configured, else the bank's) that the
    state has something to search by; ``upfront``, the first ``depth`` of them in order;
    ``per_round``, each round's chosen by the agent's model after the rounds before."""

    name = SOURCE

    def __init__(self, tool: SearchExperiences) -> None:
        self.tool = tool

    async def advise(self, situation: Situation) -> Advice | None:
        options = self.tool.options
        state = query_state(situation.ctx, situation.trace, situation.step)
        images = situation.trace.images
        usable = [v for v in self.tool.offered() if has_content(state, v, images)]
        if not usable:
            return None
        if options.deep_search == "per_round":
            held = sum(1 for h in state.images if h in images)
            chooser = ModelChooser(
                situation.ctx.llm, state, max_rounds=options.depth, images_seen=held
            )
            result = await self.tool.searcher.deep_per_round(
                state, usable, chooser, k=options.k, max_rounds=options.depth, images=images
            )
            searched = [r.viewpoint for r in result.rounds]
            text = advice_text(result.hits)
            record = record_of(result, text, searched, options.k, "advisor")
            record["deep_search"] = "per_round"
            record["choices"] = chooser.records()
            return Advice(text, record)
        usable = usable[: options.depth]
        result = await self.tool.searcher.deep(
            state, usable, k=options.k, max_rounds=len(usable), images=images
        )
        text = advice_text(result.hits)
        return Advice(text, record_of(result, text, usable, options.k, "advisor"))


def advice_text(hits: Sequence[Any]) -> str:
    """The advice shown with a state: a heading and one line per hit ("" for none)."""
    if not hits:
        return ""
    return "\n".join([ADVICE_HEADING, *(hit_line(i, h) for i, h in enumerate(hits, start=1))])


def with_experience_search(
    agent: ReActAgent,
    searcher: ExperienceSearcher,
    options: SearchOptions | None = None,
    policy: Policy = "agent",
) -> ReActAgent:
    """``agent`` searching ``searcher``'s bank: with the ``SearchExperiences`` tool (policy
    ``agent``; one already there is replaced) or an :class:`EveryStepAdvisor` (``every_step``),
    and a note in its instructions saying how to use what it finds."""
    tool = SearchExperiences(searcher, options)
    if policy == "agent":
        tools: list[Tool] = [t for t in agent.tools.values() if t.name != TOOL_NAME]
        equipped = agent.with_tools([*tools, tool])
        note = AGENT_NOTE
    elif policy == "every_step":
        kept = [a for a in agent.advisors if not isinstance(a, EveryStepAdvisor)]
        equipped = agent.with_advisors([*kept, EveryStepAdvisor(tool)])
        note = ADVISOR_NOTE
    else:
        raise ValueError(f"policy is agent or every_step, got {policy!r}")
    if note not in equipped.instructions:
        # a fresh copy: its system prompt is made from these instructions at its first run
        equipped.instructions = f"{equipped.instructions.rstrip()}\n\n{note}"
    return equipped


def equip_agents(
    agents: Mapping[str, ReActAgent],
    names: Sequence[str],
    searcher: ExperienceSearcher,
    options: SearchOptions | None = None,
    policy: Policy = "agent",
    *,
    dispatcher: str | None = None,
) -> dict[str, ReActAgent]:
    """``agents`` (built callees first, as the catalog builds them) with experience search
    given to ``names`` (``["all"]``: every agent but ``dispatcher``); every agent that calls
    an equipped one calls the equipped copy."""
    wanted = set(agents) - {dispatcher} if "all" in names else set(names)
    unknown = sorted(wanted - set(agents))
    if unknown:
        raise SpecError(
            f"[memory] agents: no agent {', '.join(unknown)}; agents: {', '.join(agents)}"
        )
    out: dict[str, ReActAgent] = {}
    for name, agent in agents.items():
        tools = list(agent.tools.values())
        swapped = [out[t.name] if t.name in out and t is agents[t.name] else t for t in tools]
        if any(a is not b for a, b in zip(swapped, tools, strict=True)):
            agent = agent.with_tools(swapped)
        if name in wanted:
            agent = with_experience_search(agent, searcher, options, policy)
        out[name] = agent
    return out


def equip_from_config(
    cfg: Config,
    backends: Mapping[str, Any],
    agents: Mapping[str, ReActAgent],
    dispatcher: str | None = None,
) -> dict[str, ReActAgent]:
    """HAMMR's agents with experience search where ``[memory] agents`` names them and
    ``[memory] path`` holds a bank; ``agents`` unchanged otherwise."""
    settings = memory_settings(cfg)
    if not settings.agents or not settings.path:
        return dict(agents)
    searcher, _ = open_searcher(cfg, backends, who="[memory] agents")
    return equip_agents(
        agents,
        settings.agents,
        searcher,
        settings.options,
        settings.policy,
        dispatcher=dispatcher,
    )


__all__ = [
    "ADVICE_HEADING",
    "ADVISOR_NOTE",
    "AGENT_NOTE",
    "EveryStepAdvisor",
    "MemorySettings",
    "Policy",
    "advice_text",
    "equip_agents",
    "equip_from_config",
    "memory_settings",
    "open_bank",
    "open_searcher",
    "with_experience_search",
]
