"""The tool agent every MuSEAgent-family system shares: one ReAct agent over the library's
counterparts of MuSEAgent's 13 tools (its appendix C), on the configured model.

``react`` runs it as it is; ``muse`` adds ``SearchExperiences`` (or an every-step advisor);
``reflexion`` and ``expel`` add advisors that put their memories into the prompt. Built from
the same :class:`~hammr.systems.Workbench`, they differ in nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from hammr.advice import Advisor
from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.systems import Workbench
from hammr.tools.base import Tool

AGENT_NAME = "VisualToolAgent"

TOOL_NAMES: tuple[str, ...] = (
    # image manipulation (its C.1)
    "ZoomIn",
    "CropImage",
    "VisualizeRegions",
    # visual perception (C.2)
    "OCR",
    "DetectObject",
    "EstimateRegionDepth",
    "EstimateObjectDepth",
    # semantic similarity (C.3)
    "ImageSimilarity",
    "ImageTextSimilarity",
    "TextImageSimilarity",
    # reasoning and external knowledge (C.4)
    "Calculator",
    "SolveMathEquation",
    "WebSearch",
)
"""MuSEAgent's tool bank, by our tools' names, in its appendix's order."""

INSTRUCTIONS = """\
You answer questions about high-resolution images, often multiple-choice questions about
small details. Look before you answer: find the object the question is about with
DetectObject, then ZoomIn or CropImage on its box to see it closely, and read text with OCR.
Boxes are left/top/width/height in pixels of the image they came from. Compare positions
through box centres in your Thought. For a multiple-choice question, finish with the letter
of the option you chose."""

EXAMPLES: tuple[str, ...] = (
    """
Question: What is the colour of the umbrella?
Options:
A. red
B. blue
C. green
D. yellow
Answer with the letter of the correct option.
Variables:
- image: image 3840x2160
[Thought]: The umbrella is probably small in this large image; I find it first.
[Act]: found = DetectObject(image, 'umbrella')
[Observe]: 1 box: umbrella at left:2710/top:1320/width:90/height:70 (score 0.6) (stored in 'found')
[Thought]: I zoom in on that box to see its colour.
[Act]: close = ZoomIn(image, [2710, 1320, 90, 70], 4)
[Observe]: image 360x280 (stored in 'close')
[Thought]: The zoomed view shows a blue canopy, which is option B.
[Finish]: B""",
)


def tool_bank(bench: Workbench, extra: Sequence[Tool] = ()) -> list[Tool]:
    """The library's tools of :data:`TOOL_NAMES` (in that order), then the tools of the
    configuration's ``[[tools.mcp]]`` servers (beyond the paper; none unless configured),
    then ``extra``."""
    available = {t.name: t for t in bench.agents.tools}
    missing = [n for n in TOOL_NAMES if n not in available]
    if missing:
        raise SpecError(f"{AGENT_NAME}: the tool library lacks {', '.join(missing)}")
    remote = [t for t in bench.agents.tools if getattr(t, "mcp_server", None)]
    return [available[n] for n in TOOL_NAMES] + remote + list(extra)


def react_agent(
    bench: Workbench,
    *,
    extra_tools: Sequence[Tool] = (),
    advisors: Sequence[Advisor] = (),
    instructions: str = INSTRUCTIONS,
    examples: Sequence[str] = EXAMPLES,
    name: str = AGENT_NAME,
) -> ReActAgent:
    """The shared tool agent, on the workbench's model, grammar and step budget."""
    return ReActAgent(
        name=name,
        description="Answers questions about images by looking closely with visual tools.",
        instructions=instructions,
        tools=tool_bank(bench, extra_tools),
        examples=examples,
        llm=bench.agents.llm,
        max_steps=bench.agents.max_steps,
        max_tokens=bench.agents.max_tokens,
        **bench.agents.habits.agent_kwargs(),
        grammar=bench.agents.grammar,
        advisors=advisors,
    )


__all__ = ["AGENT_NAME", "EXAMPLES", "INSTRUCTIONS", "TOOL_NAMES", "react_agent", "tool_bank"]
