"""(g) Viewer list endpoint on a large run: GET /api/runs/{run}/samples pages in SQL.

A 10,000-sample run is written straight into a fresh store with one ``executemany`` (each
row with a realistic two-level trace of about 4 kB, a tenth of them wrong with error kinds,
agents spread over four specialists); the real viewer server (``hammr view``'s) serves it
on 127.0.0.1 and each request below is timed 20 times (median, keep-alive client): pages at
offsets 0, 5000 and 9950, and the filters correct=false, agent=..., error_kind=... (with an
offset into the filtered list), against the first page of a 100-sample store. If the
endpoint loaded the run, the 10k pages would cost ~100x the 100-sample page. The last rows
repeat the first page while 300 idle connections (connected, no request) are open, with
the process's thread count before and after.
"""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from hammr.eval.store import RunStore, trace_facets
from hammr.web.server import ViewerServer

REPEATS = 20
COLUMNS = ["request", "store", "matching", "median ms", "p90 ms"]
AGENTS = ("CountingAgent", "SpatialAgent", "OCRReasoningAgent", "TwoHopAgent")


def _trace(i: int, agent: str, wrong: bool) -> dict[str, Any]:
    step = {
        "index": 0,
        "thought": "look at the picture carefully " * 4,
        "raw": "[Thought]: ...\n[Act]: boxes = DetectObjects(image, 'car')",
        "action": "boxes = DetectObjects(image, 'car')",
        "tool": "DetectObjects",
        "arguments": {"image": {"$image": "0123456789abcdef", "size": [640, 480]}},
        "output_var": "boxes",
        "output": [{"$box": [10 * k, 20, 30, 40], "label": "car", "score": 0.9} for k in range(8)],
        "observation": "8 boxes " * 20,
        "error_kind": "bad_arguments" if i % 20 == 0 else None,
        "error": None,
        "finish": None,
        "llm_latency_s": 0.5,
        "tool_latency_s": 0.1,
        "usage": {"prompt_tokens": 900, "completion_tokens": 40},
        "cached": False,
        "forced": False,
        "router": None,
        "child": None,
    }
    child = {"agent": agent, "question": f"q{i}", "inputs": {}, "steps": [step] * 3,
             "answer": "2", "status": "finished", "error": None, "model": "m",
             "latency_s": 1.0}  # fmt: skip
    top_step = dict(step, tool=agent, child=child, error_kind="syntax" if wrong else None)
    return {"agent": "QuestionDispatcherAgent", "question": f"q{i}", "inputs": {},
            "steps": [top_step], "answer": "2", "status": "finished", "error": None,
            "model": "m", "latency_s": 2.0}  # fmt: skip


def make_store(path: Path, n: int, run: str = "big") -> None:
    store = RunStore(path)
    store.open_run(run, "bench", "hammr")
    rows = []
    for i in range(n):
        wrong = i % 10 == 0
        agent = AGENTS[i % len(AGENTS)]
        trace = _trace(i, agent, wrong)
        facets = trace_facets(trace)
        rows.append(
            (run, f"ds{i % 8}", f"{i:06d}", f"type{i % 8}", f"question {i}?", '["2"]',
             "3" if wrong else "2", 0.0 if wrong else 1.0, "exact", "vqa", "finished", None,
             1.5, 1000, 50, 4, json.dumps(trace), "2025-01-01T00:00:00+00:00", *facets)
        )  # fmt: skip
    with store._transaction() as db:
        db.executemany(
            "INSERT INTO samples (run, dataset, sample_id, question_type, question, answers, "
            "prediction, score, judge, metric, status, error, latency_s, prompt_tokens, "
            "completion_tokens, llm_calls, trace, finished, agent, error_kinds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    store.close()


def _time(client: httpx.Client, url: str) -> tuple[float, float, int]:
    body = client.get(url).json()  # warm (also checks it answers)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        r = client.get(url)
        r.raise_for_status()
        times.append(time.perf_counter() - t0)
    times.sort()
    return (
        statistics.median(times) * 1000,
        times[int(0.9 * (len(times) - 1))] * 1000,
        body.get("total", 0),
    )


def _with_idle_connections(
    server: ViewerServer, client: httpx.Client, n: int, idle_count: int = 300
) -> tuple[str, ...]:
    before = threading.active_count()
    idle = [socket.create_connection(server.server_address[:2]) for _ in range(idle_count)]
    try:
        time.sleep(0.2)  # all accepted
        med, p90, total = _time(client, "/api/runs/big/samples?limit=50")
        threads = threading.active_count()
    finally:
        for sock in idle:
            sock.close()
    label = f"offset=0, {idle_count} idle conns (threads {before}->{threads})"
    return (label, f"{n:,}", f"{total:,}", f"{med:.2f}", f"{p90:.2f}")


def run() -> list[tuple[str, ...]]:
    requests = [
        ("offset=0", "offset=0&limit=50"),
        ("offset=5000", "offset=5000&limit=50"),
        ("offset=9950", "offset=9950&limit=50"),
        ("correct=false", "correct=false&limit=50"),
        ("correct=false offset=900", "correct=false&offset=900&limit=50"),
        ("agent=SpatialAgent", "agent=SpatialAgent&limit=50"),
        ("agent=SpatialAgent offset=2450", "agent=SpatialAgent&offset=2450&limit=50"),
        ("error_kind=bad_arguments", "error_kind=bad_arguments&limit=50"),
        ("error_kind=syntax offset=950", "error_kind=syntax&offset=950&limit=50"),
        ("correct=false agent=CountingAgent", "correct=false&agent=CountingAgent&limit=50"),
    ]
    out: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, which in ((100, requests[:1]), (10_000, requests)):
            path = Path(tmp) / f"runs{n}.sqlite"
            t0 = time.perf_counter()
            make_store(path, n)
            made = time.perf_counter() - t0
            store = RunStore(path)
            server = ViewerServer(store)
            server.start_in_thread()
            try:
                with httpx.Client(base_url=server.url.rstrip("/"), timeout=30) as client:
                    for label, qs in which:
                        med, p90, total = _time(client, f"/api/runs/big/samples?{qs}")
                        out.append((label, f"{n:,}", f"{total:,}", f"{med:.2f}", f"{p90:.2f}"))
                    if n == 10_000:
                        t0 = time.perf_counter()
                        store.records("big", limit=None, traces=True)
                        whole = (time.perf_counter() - t0) * 1000
                        out.append(("(for scale: load the whole run)", f"{n:,}", f"{n:,}",
                                    f"{whole:.0f}", "–"))  # fmt: skip
                        med, p90, _ = _time(client, "/api/runs")
                        out.append(("GET /api/runs (cached CIs)", f"{n:,}", "1 run",
                                    f"{med:.2f}", f"{p90:.2f}"))  # fmt: skip
                        out.append(("(store written in)", f"{n:,}", "", f"{made * 1000:.0f}", "–"))
                        out.append(_with_idle_connections(server, client, n))
            finally:
                server.stop()
                store.close()
    return out


if __name__ == "__main__":
    from rich.console import Console
    from rich.table import Table

    t = Table(title="(g) viewer list endpoint, median of 20 requests")
    for c in COLUMNS:
        t.add_column(c, justify="left" if c == COLUMNS[0] else "right")
    for r in run():
        t.add_row(*r)
    Console(width=120).print(t)
