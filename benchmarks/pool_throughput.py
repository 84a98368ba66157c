"""(h) A pool of model servers: evaluation throughput over 1, 2 and 3 replicas.

Each replica is a scripted OpenAI-compatible server on 127.0.0.1 (tests/fake_openai_server.py)
with 2 slots that takes 200 ms per request, so one replica answers at most 10 requests a
second, whatever the client sends; it answers '[Thought]: ...\\n[Finish]: yes' (one LLM call
per question). The naive agent is asked the JSONL questions of (f) through the real pipeline
(``run_eval``, the configured client with ``base_url`` listing the replicas), 12 questions
in flight. Ideal linear scaling is N times the single replica's rate; efficiency is the
measured rate over that.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from eval_throughput import REPLY, make_suite, served_config  # noqa: E402
from fake_openai_server import FakeServer, Reply, Seen, ok_body  # noqa: E402
from hammr.agents import AgentSystems  # noqa: E402
from hammr.backends.llm.openai_compat import OpenAICompatLLM  # noqa: E402
from hammr.eval.runner import run_eval  # noqa: E402
from hammr.eval.store import RunStore  # noqa: E402
from hammr.eval.suites import load_suite  # noqa: E402
from hammr.factory import build_backends, build_llm  # noqa: E402
from hammr.tools.base import ToolContext  # noqa: E402
from hammr.tools.library import builtin_tools  # noqa: E402

QUESTIONS = 90
SLOTS = 2
DELAY_S = 0.2
IN_FLIGHT = 12
REPLICAS = (1, 2, 3)
COLUMNS = [
    "replicas",
    "questions",
    "wall s",
    "questions/s",
    "ideal q/s",
    "efficiency",
    "requests per replica",
    "peak per replica",
]


def answer(seen: Seen) -> Reply:
    return Reply(body=ok_body(REPLY), delay=DELAY_S)


def measure(servers: list[FakeServer], root: Path) -> dict[str, Any]:
    cfg = served_config(",".join(s.url for s in servers))
    backends = build_backends(cfg).backends
    system = AgentSystems.from_config(cfg, builtin_tools(), backends).system("naive")
    samples = load_suite(root / "bench.toml").samples(root)[:QUESTIONS]
    name = f"pool-{len(servers)}"

    async def go() -> Any:
        llm = build_llm(cfg, cache=False)
        assert isinstance(llm, OpenAICompatLLM)
        try:
            with RunStore(root / f"{name}.sqlite") as store:
                store.open_run(name, "bench", "naive")
                return await run_eval(
                    system,
                    samples,
                    store=store,
                    run_name=name,
                    ctx_factory=lambda: ToolContext(backends=backends, llm=llm),
                    concurrency=IN_FLIGHT,
                    timeout_s=60,
                )
        finally:
            await llm.aclose()

    out = asyncio.run(go())
    assert out.ran == len(samples) and out.score_sum > 0, out
    return {
        "questions": out.ran,
        "wall": out.elapsed_s,
        "qps": out.per_second,
        "requests": [len(s.seen) for s in servers],
        "peaks": [s.peak_active for s in servers],
    }


def run() -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_suite(root, QUESTIONS)
        single: float | None = None
        for n in REPLICAS:
            servers = [FakeServer(max_concurrent=SLOTS) for _ in range(n)]
            for s in servers:
                s.responder = answer
            try:
                m = measure(servers, root)
            finally:
                for s in servers:
                    s.close()
            single = single or m["qps"]
            ideal = n * single
            rows.append(
                (
                    str(n),
                    str(m["questions"]),
                    f"{m['wall']:.2f}",
                    f"{m['qps']:.1f}",
                    f"{ideal:.1f}",
                    f"{m['qps'] / ideal:.2f}",
                    " / ".join(str(r) for r in m["requests"]),
                    " / ".join(str(p) for p in m["peaks"]),
                )
            )
    return rows


if __name__ == "__main__":
    for row in [tuple(COLUMNS), *run()]:
        print("  ".join(f"{c:>20}" for c in row))
