"""(b) The embedded SmolLM2 on 20 questions with a fixed tool set, grammar on vs off.

A step counts as well formed when the model's text parses into a Thought and an Act or a
Finish, and the Act names only registered tools and live variables (no ``syntax``,
``no_action``, ``unknown_tool`` or ``unknown_variable`` error). Argument-type errors
(``bad_arguments``) and repeated actions are counted separately: the grammar constrains the
kind of each argument, not, say, that a box lies inside the image.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from hammr.backends.llm.embedded import EmbeddedLLM
from hammr.general_agent import general_agent
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools, default_backends
from hammr.trace import Trace
from hammr.values import Image

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

QUESTIONS: list[tuple[str, str]] = [
    ("plate.png", "What is the licence plate number?"),
    ("plate.png", "What colour is the motorcycle?"),
    ("plate.png", "Read the text on the yellow plate."),
    ("plate.png", "How many wheels does the motorcycle have?"),
    ("plate.png", "What brand is written on the fuel tank?"),
    ("plate.png", "Is there a box on the shelf?"),
    ("plate.png", "What is in the top-left corner of the image?"),
    ("plate.png", "Which is larger, the plate or the headlight?"),
    ("plate.png", "Zoom in on the plate and read it."),
    ("plate.png", "Crop the left half of the image and describe it."),
    ("sign.png", "What does the sign say?"),
    ("sign.png", "What are the opening hours on the sign?"),
    ("sign.png", "Is the shop open at night?"),
    ("sign.png", "Read the text at the top of the image."),
    ("sign.png", "What colour is the sign?"),
    ("sign.png", "How many words are on the sign?"),
    ("sign.png", "What drink is shown in the picture?"),
    ("sign.png", "Is there a cup in the image?"),
    ("sign.png", "Zoom in on the sign and read it."),
    ("sign.png", "What is the first word on the sign?"),
]

FORMULATION = {"syntax", "no_action", "unknown_tool", "unknown_variable"}


async def run_mode(grammar: bool, max_steps: int, limit: int) -> list[Trace]:
    llm = EmbeddedLLM()
    backends = default_backends()
    tools = [t for t in builtin_tools() if getattr(t, "capability", None) in (None, *backends)]
    agent = general_agent(tools, max_steps=max_steps, grammar=grammar)
    traces = []
    images = {name: Image.open(EXAMPLES / name) for name in {q[0] for q in QUESTIONS}}
    label = f"grammar {'on' if grammar else 'off'}"
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=min(limit, len(QUESTIONS)))
        for name, question in QUESTIONS[:limit]:
            ctx = ToolContext(backends=backends, llm=llm)
            result = await agent.run(question, {"image": images[name]}, ctx=ctx)
            traces.append(result.trace)
            progress.advance(task)
    return traces


def summarise(traces: list[Trace]) -> dict[str, float]:
    steps = [s for t in traces for s in t.steps if s.error_kind != "llm_failure"]
    kinds = Counter(s.error_kind for s in steps)
    wellformed = sum(1 for s in steps if s.error_kind not in FORMULATION)
    return {
        "steps": len(steps),
        "wellformed": wellformed / max(1, len(steps)),
        "bad_arguments": kinds["bad_arguments"],
        "repeated": kinds["repeated_action"],
        "answered": sum(1 for t in traces if t.answer is not None) / max(1, len(traces)),
        "seconds_per_step": sum(s.llm_latency_s for s in steps) / max(1, len(steps)),
    }


def run(max_steps: int = 3, limit: int = 20) -> list[tuple[str, ...]]:
    rows = []
    for grammar in (True, False):
        traces = asyncio.run(run_mode(grammar, max_steps, limit))
        s = summarise(traces)
        rows.append(
            (
                f"SmolLM2-135M, grammar {'on' if grammar else 'off'}",
                f"{int(s['steps'])}",
                f"{s['wellformed']:.0%}",
                f"{int(s['bad_arguments'])}",
                f"{int(s['repeated'])}",
                f"{s['answered']:.0%}",
                f"{s['seconds_per_step']:.2f} s",
            )
        )
    return rows


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
