"""hammr: visual question answering with hierarchical multimodal ReAct agents."""

from __future__ import annotations

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
