"""(i) The Ray executor: questions per second with 1, 2 and 4 Ray workers.

The same pipeline as (f) (suite file, JSONL adapter, images, the naive agent and its HTTP
client, scoring, one SQLite commit per sample on the driver) against the same threaded
OpenAI-compatible server on 127.0.0.1 that answers every request after 200 ms. Each worker
answers 2 questions at a time, so the ideal is 10 questions/s per worker. Throughput is
measured from the first stored answer to the last (the cluster and the workers are started
once, before; starting them takes a few seconds and is reported apart).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from pathlib import Path

import ray

from eval_throughput import DELAY_S, SlowServer, make_suite, served_config
from hammr.eval.executors.ray_executor import run_eval_ray
from hammr.eval.job import EvalJob
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from hammr.eval.types import RunRecord

QUESTIONS = 120
PER_WORKER = 2
WORKERS = (1, 2, 4)
COLUMNS = [
    "Ray workers",
    "questions",
    "start s",
    "questions/s",
    "ideal",
    "efficiency",
]


def measure(server: SlowServer, root: Path, workers: int) -> dict[str, float]:
    job = EvalJob(
        config=served_config(server.url), system="naive", concurrency=PER_WORKER, timeout_s=60
    )
    samples = load_suite(root / "bench.toml").samples(root)
    stamps: list[float] = []

    def on_result(record: RunRecord) -> None:
        stamps.append(time.perf_counter())

    started = time.perf_counter()
    with RunStore(root / f"ray-{workers}.sqlite") as store:
        store.open_run("bench", "bench", "naive")
        out = asyncio.run(
            run_eval_ray(
                job, samples, store=store, run_name="bench", workers=workers, on_result=on_result
            )
        )
    assert out.ran == len(samples) and out.statuses == {"finished": len(samples)}, out
    return {
        "questions": out.ran,
        "start": stamps[0] - started,
        "qps": (len(stamps) - 1) / (stamps[-1] - stamps[0]),
    }


def run() -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    server = SlowServer()
    ray.init(
        address="local",
        num_cpus=max(WORKERS),
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_suite(root, QUESTIONS)
            for w in WORKERS:
                m = measure(server, root, w)
                ideal = w * PER_WORKER / DELAY_S
                rows.append(
                    (
                        str(w),
                        str(int(m["questions"])),
                        f"{m['start']:.1f}",
                        f"{m['qps']:.1f}",
                        f"{ideal:.0f}",
                        f"{m['qps'] / ideal:.2f}",
                    )
                )
    finally:
        ray.shutdown()
        server.close()
    return rows


if __name__ == "__main__":
    print(f"cores: {os.cpu_count()}")
    for row in run():
        print("  ".join(row))
