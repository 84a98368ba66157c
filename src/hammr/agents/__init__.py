"""HAMMR's agents declared as data: the specialists, the dispatcher, the naive baseline.

The names below are imported when first read (PEP 562), not with the package: reading the
agents' files (:mod:`hammr.agents.spec`, :mod:`hammr.agents.catalog`) does not pay for the
router's numpy or the agent runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hammr.lazy_names import lazy_attribute, lazy_dir

if TYPE_CHECKING:
    from hammr.agents.catalog import AgentCatalog, resolve_setting
    from hammr.agents.routing import (
        NeighbourRouter,
        RoutedDispatcher,
        RouteDecision,
        routing_only,
    )
    from hammr.agents.spec import AgentSpec, SpecError, load_spec
    from hammr.agents.system import AgentSystems, System

__all__ = [
    "AgentCatalog",
    "AgentSpec",
    "AgentSystems",
    "NeighbourRouter",
    "RouteDecision",
    "RoutedDispatcher",
    "SpecError",
    "System",
    "load_spec",
    "resolve_setting",
    "routing_only",
]

_HOMES = {
    "AgentCatalog": "hammr.agents.catalog",
    "resolve_setting": "hammr.agents.catalog",
    "NeighbourRouter": "hammr.agents.routing",
    "RoutedDispatcher": "hammr.agents.routing",
    "RouteDecision": "hammr.agents.routing",
    "routing_only": "hammr.agents.routing",
    "AgentSpec": "hammr.agents.spec",
    "SpecError": "hammr.agents.spec",
    "load_spec": "hammr.agents.spec",
    "AgentSystems": "hammr.agents.system",
    "System": "hammr.agents.system",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, name)


def __dir__() -> list[str]:
    return lazy_dir(__name__, __all__)
