"""hammr: visual question answering with hierarchical multimodal ReAct agents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hammr.lazy_names import lazy_attribute, lazy_dir

if TYPE_CHECKING:
    from hammr.agent import AgentResult, ReActAgent
    from hammr.tools.base import Tool, ToolContext, ToolError, tool
    from hammr.trace import Trace
    from hammr.values import Box, Entity, Image, Page

__version__ = "0.1.0"

__all__ = [
    "AgentResult",
    "Box",
    "Entity",
    "Image",
    "Page",
    "ReActAgent",
    "Tool",
    "ToolContext",
    "ToolError",
    "Trace",
    "tool",
]

_HOMES = {
    "AgentResult": "hammr.agent",
    "ReActAgent": "hammr.agent",
    "Tool": "hammr.tools.base",
    "ToolContext": "hammr.tools.base",
    "ToolError": "hammr.tools.base",
    "tool": "hammr.tools.base",
    "Trace": "hammr.trace",
    "Box": "hammr.values",
    "Entity": "hammr.values",
    "Image": "hammr.values",
    "Page": "hammr.values",
}
"""Where each public name lives. They are imported when first read (PEP 562), not with the
package: `hammr --help` must not pay for the agent runtime, numpy and PIL."""


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, name)


def __dir__() -> list[str]:
    return lazy_dir(__name__, __all__)
