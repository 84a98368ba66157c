"""(k) MulProg on the embedded default, offline: how often the planner's program is valid,
and the accuracy, against HAMMR's ReAct agents on the same demo questions.

The bundled demo suite (one question per type, as the README's demo evaluation) is asked
to ``mulprog`` (programs written line by line under the grammar over defined variables, one
repair round) and to ``hammr`` (dispatcher + specialists), both on SmolLM2-135M through
llama.cpp with the offline tools (Haar detection, tesseract, the bundled KB; no VQA
backend, so VQA lines and tools report a missing capability). A measurement of the
machinery on a tiny model, not a target to tune to.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hammr.config import load_config
from hammr.eval.analysis import FORMULATION_KINDS
from hammr.eval.job import EvalJob
from hammr.eval.runner import run_samples
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from hammr.eval.types import RunRecord
from hammr.trace import Trace

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"
SYSTEMS = ("mulprog", "hammr")
COLUMNS = [
    "system",
    "questions",
    "valid programs (1st try)",
    "valid after repair",
    "formulation errors / step",
    "answered",
    "accuracy",
    "LLM calls / question",
]


def _walk(trace: Trace) -> list[Trace]:
    found = [trace]
    for s in trace.steps:
        if s.child is not None:
            found += _walk(s.child)
    return found


def measure(system: str, root: Path) -> tuple[str, ...]:
    job = EvalJob(config=load_config(None, env={}), system=system, cache=False, timeout_s=300)
    built = job.build()
    samples = load_suite("demo").samples(DEMO, limit=1)
    records: list[RunRecord] = []

    async def go() -> None:
        with RunStore(root / f"{system}.sqlite") as store:
            store.open_run("bench", "demo", system)
            await run_samples(
                built.answerer("bench"), samples, store=store, run_name="bench",
                concurrency=1, on_result=records.append, setup=built.prepare,
            )  # fmt: skip
        await built.aclose()

    asyncio.run(go())
    n = len(records)
    traces = [r.trace for r in records if r.trace is not None]
    first = repaired = "-"
    if system == "mulprog":
        plans = [[s for s in t.steps if s.tool == "PLAN"] for t in traces]
        repaired_runs = [any(s.thought == "repairing the program" for s in p) for p in plans]
        valid = [any(s.action for s in p) for p in plans]
        ok_first = sum(1 for v, r in zip(valid, repaired_runs, strict=True) if v and not r)
        ok_any = sum(valid)
        first, repaired = f"{ok_first}/{n}", f"{ok_any}/{n}"
    steps = [s for t in traces for sub in _walk(t) for s in sub.steps if s.line is None]
    formulation = sum(1 for s in steps if s.error_kind in FORMULATION_KINDS)
    answered = sum(1 for r in records if r.prediction is not None)
    return (
        system,
        str(n),
        first,
        repaired,
        f"{formulation / max(1, len(steps)):.2f}",
        f"{answered}/{n}",
        f"{100 * sum(r.score for r in records) / max(1, n):.0f}%",
        f"{sum(r.llm_calls for r in records) / max(1, n):.1f}",
    )


def run() -> list[tuple[str, ...]]:
    with tempfile.TemporaryDirectory() as tmp:
        return [measure(s, Path(tmp)) for s in SYSTEMS]


if __name__ == "__main__":
    for row in run():
        print("  ".join(row))
