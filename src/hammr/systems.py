"""Every system hammr runs, by name: one registry for `hammr ask`, `hammr eval` and Python.

HAMMR's systems come from the agent files (``hammr``, ``naive`` and any agent by its name,
see :class:`hammr.agents.system.AgentSystems`); the other papers' systems are factories
registered here by name, imported only when asked for. A new system is a new package, one
line in :data:`FACTORIES` and its entry in :data:`hammr.system_info.SYSTEMS` (its paper and
what it needs, for ``hammr systems``; a test checks that every system has one).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hammr.agents.names import HAMMR, NAIVE
from hammr.agents.spec import SpecError
from hammr.config import Config

if TYPE_CHECKING:  # the agent runtime is imported to build a system, not to name them
    from hammr.agents.system import AgentSystems, System


@dataclass(frozen=True)
class Workbench:
    """What a system factory builds from: the configuration, the tool backends, and HAMMR's
    agents (a system may use them as tools)."""

    config: Config
    backends: dict[str, Any]
    agents: AgentSystems


SystemFactory = Callable[[Workbench], "System"]

FACTORIES: dict[str, str] = {
    "hammr-oracle": "hammr.agents.baselines:oracle_system",
    "vlm": "hammr.agents.baselines:vlm_system",
    "mulprog": "hammr.programs.system:mulprog_system",
    "mulprog-direct": "hammr.programs.direct:direct_system",
    "avis": "hammr.avis.system:avis_system",
    "avis-autonomous": "hammr.avis.system:autonomous_system",
    "llm-only": "hammr.avis.llm_only:llm_only_system",
    "cot": "hammr.muse.system:cot_system",
    "react": "hammr.muse.system:react_system",
    "muse": "hammr.muse.system:muse_system",
    "reflexion": "hammr.muse.reflexion:reflexion_system",
    "expel": "hammr.muse.expel:expel_system",
}
"""System name -> 'module:function' taking a :class:`Workbench`."""


def registered_systems() -> list[str]:
    """Every system by name, HAMMR's two first (an agent's name is a system too: see
    :func:`system_names`)."""
    return [HAMMR, NAIVE, *FACTORIES]


def system_names(agents: AgentSystems) -> list[str]:
    return [*agents.names(), *FACTORIES]


def build_system(
    cfg: Config, name: str, max_steps: int | None = None
) -> tuple[System, dict[str, Any]]:
    """The system called ``name`` and the tool backends it runs on (SpecError for an
    unknown name, listing the known ones)."""
    from hammr.agents.system import build_systems

    agents, backends = build_systems(cfg, max_steps)
    path = FACTORIES.get(name)
    if path is None:
        if name not in agents.names():
            known = ", ".join(system_names(agents))
            raise SpecError(f"unknown system or agent {name!r}; choose from: {known}")
        return agents.system(name), backends
    module, _, function = path.partition(":")
    factory: SystemFactory = getattr(importlib.import_module(module), function)
    return factory(Workbench(cfg, backends, agents)), backends
