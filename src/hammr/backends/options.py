"""Which ``[tools.<capability>]`` keys exist, so that every setting can be listed.

A backend's options are the ``OPTIONS`` schema (``{name: type}``) of the module its factory
lives in (see :data:`hammr.backends.registry.FACTORIES`); the text tools' settings are the
fields of :class:`~hammr.tools.knowledge_tools.TextToolSettings`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from hammr.backends.registry import DEFAULT_BACKENDS, FACTORIES
from hammr.config import MCP_TABLE


def backend_options(capability: str, backend: str) -> dict[str, type]:
    """The keys ``[tools.<capability>]`` takes besides ``backend`` when it names ``backend``
    ({} for 'none' or an unknown backend)."""
    target = FACTORIES.get((capability, backend))
    if target is None:
        return {}
    if (capability, backend) == ("text", "llm"):
        from hammr.tools.knowledge_tools import TextToolSettings

        return {f.name: int for f in fields(TextToolSettings)}
    module = importlib.import_module(target.partition(":")[0])
    schema: Mapping[str, type] = getattr(module, "OPTIONS", {})
    return dict(schema)


def tool_settings(tools: Mapping[str, Any]) -> dict[str, Any]:
    """Every ``tools.<capability>.<key>`` of the ``[tools]`` table ``tools`` -> its value when
    unset: the default backend's name for ``backend`` ('none' where there is none), None
    (the backend's own default) for the options of the backend each capability uses."""
    out: dict[str, Any] = {}
    for cap in sorted({c for c, _ in FACTORIES} | (set(tools) - {MCP_TABLE})):
        table = tools.get(cap)
        chosen = table.get("backend") if isinstance(table, Mapping) else None
        default = DEFAULT_BACKENDS.get(cap, "none")
        out[f"tools.{cap}.backend"] = default
        for key in backend_options(cap, str(chosen or default)):
            out[f"tools.{cap}.{key}"] = None
    return out
