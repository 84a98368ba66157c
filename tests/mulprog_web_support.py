"""Stored MulProg runs for the viewer's tests: the real system with a scripted LLM and the
scripted vision stand-ins of test_programs.py on its drawn scene (four squares)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Trace
from hammr.values import Box
from test_mulprog_system import BAD, GOOD, script, system
from test_programs import GREEN, SCENE, SceneDetector, context, scene_image

RUN = "mulprog"
DATASET = "scene"
EVIL = "<img src=x onerror=alert(1)>"
RIGHT_OF_GREEN = """BOX0=LOC(image=IMAGE,object='green square')
IMAGE0=CROP_RIGHTOF(image=IMAGE,box=BOX0)
BOX1=LOC(image=IMAGE0,object='square')
ANSWER0=COUNT(box=BOX1)
FINAL_RESULT=RESULT(var=ANSWER0)"""
EXPLAINED = "Right of the green square {BOX0} I count the squares {BOX1}, so the answer is 3."
EVIL_PROGRAM = f"""BOX0=LOC(image=IMAGE,object='{EVIL}')
ANSWER0=COUNT(box=BOX0)
FINAL_RESULT=RESULT(var=ANSWER0)"""


def _run(replies: tuple[str, ...], question: str, **backends: Any) -> Trace:
    """The MulProg trace of one scripted run (on its own thread: a browser driver's event
    loop may be running on this one)."""

    async def go() -> Trace:
        result = await system(script(*replies)).run(
            question, {"image": scene_image()}, ctx=context(**backends)
        )
        return result.trace

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def mulprog_traces() -> dict[str, Trace]:
    """'right': a rejected program, its repair, five lines and an explanation with two
    grounded objects; 'evil': an object named like HTML; 'broken': a line that fails."""
    evil_scene: Mapping[str, list[Box]] = {**SCENE, EVIL: [GREEN]}
    return {
        "right": _run(
            (BAD, RIGHT_OF_GREEN, EXPLAINED), "How many squares are right of the green one?"
        ),
        "evil": _run(
            (EVIL_PROGRAM, "I count {BOX0}."), "How many?", detect=SceneDetector(evil_scene)
        ),
        "broken": _run((GOOD,), "What color is the green square?", vqa=None),
    }


def store_mulprog_run(store: RunStore, run: str = RUN) -> dict[str, Trace]:
    traces = mulprog_traces()
    store.open_run(run, "scene", "mulprog")
    answers = {"right": "3", "evil": "1", "broken": "green"}
    for sid, trace in traces.items():
        store.add(
            RunRecord(
                run=run,
                sample_id=sid,
                dataset=DATASET,
                question_type="counting",
                question=trace.question,
                answers=(answers[sid],),
                prediction=trace.answer,
                score=1.0 if trace.answer == answers[sid] else 0.0,
                status=trace.status,
                trace=trace,
                prompt_tokens=trace.prompt_tokens,
                completion_tokens=trace.completion_tokens,
                llm_calls=trace.llm_calls,
            )
        )
    return traces
