"""(a) Framework overhead per ReAct step: a scripted LLM that answers instantly and a trivial tool.

What is measured is everything hammr does around the model and the tool: building the
request, parsing the action, resolving and validating arguments, running the tool, storing
the variable, rendering the observation and recording the trace step.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from PIL import Image as PILImage

from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import tool
from hammr.values import Box, Image


@tool
def Area(box: Box) -> float:
    """The area of a box."""
    return box.area


@tool
def Width(image: Image) -> int:
    """The width of an image."""
    return image.width


def _reply(request: LLMRequest) -> str:
    n = len(request.messages)
    if n > 2 * STEPS:
        return "[Thought]: done\n[Finish]: 42"
    if n % 4 == 0:
        return f"[Thought]: measure\n[Act]: w{n} = Width(image)"
    return f"[Thought]: area\n[Act]: a{n} = Area([0, 0, {n}, 3])"


STEPS = 10


def measure(grammar: bool, runs: int) -> list[float]:
    image = Image(PILImage.new("RGB", (32, 32)))
    per_step: list[float] = []

    async def go() -> None:
        for _ in range(runs):
            model = ScriptedLLM(_reply, grammar="gbnf" if grammar else "none")
            agent = ReActAgent("Bench", "", "Answer.", [Area, Width], max_steps=STEPS + 2)
            t0 = time.perf_counter()
            result = await agent.run("q", {"image": image}, llm=model)
            elapsed = time.perf_counter() - t0
            assert result.answer == "42", result.trace.error
            per_step.append(elapsed / len(result.trace.steps))

    asyncio.run(go())
    return per_step


def run(runs: int = 300) -> list[tuple[str, str, str]]:
    rows = []
    for grammar in (False, True):
        samples = measure(grammar, runs)
        med = statistics.median(samples) * 1000
        p90 = statistics.quantiles(samples, n=10)[-1] * 1000
        label = "scripted LLM, grammar built each step" if grammar else "scripted LLM, no grammar"
        rows.append((label, f"{med:.3f} ms", f"{p90:.3f} ms"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(" | ".join(row))
