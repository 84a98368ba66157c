"""One general agent over every available tool: what `hammr ask` runs by default for now."""

from __future__ import annotations

from collections.abc import Sequence

from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLM
from hammr.tools.base import Tool

INSTRUCTIONS = """\
You answer questions about images by calling tools. The question's image is in the variable
'image'. Boxes are [x, y, w, h] in pixels of that image. Keep answers short: a word, a
number or a short phrase."""

EXAMPLES = [
    """\
Question: What does the small label in the top-left corner say?
Variables:
- image: image 640x480
[Thought]: The label is small, so I crop the top-left corner and zoom in before reading it.
[Act]: corner = ZoomIn(image, [0, 0, 160, 120], 3)
[Observe]: image 480x360 (region left:0/top:0/width:160/height:120 of the original, zoom x3) \
(stored in 'corner')
[Thought]: Now I read the zoomed corner.
[Act]: label = OCR(corner)
[Observe]: EXIT (stored in 'label')
[Thought]: The label says EXIT.
[Finish]: EXIT""",
    """\
Question: What is written on the sign?
Variables:
- image: image 800x600
[Thought]: The sign has text; I will read all the text in the image.
[Act]: text = OCR(image)
[Observe]: NO PARKING (stored in 'text')
[Thought]: The sign says NO PARKING.
[Finish]: NO PARKING""",
]


def general_agent(
    tools: Sequence[Tool], llm: LLM | None = None, max_steps: int = 8, grammar: bool | None = None
) -> ReActAgent:
    return ReActAgent(
        name="GeneralVQA",
        description="Answers any question about an image with the available tools.",
        instructions=INSTRUCTIONS,
        tools=tools,
        examples=EXAMPLES,
        llm=llm,
        max_steps=max_steps,
        grammar=grammar,
    )
