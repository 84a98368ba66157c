"""(f) Evaluation throughput: questions per second of ``run_eval`` at concurrency 1, 8 and 32.

A threaded OpenAI-compatible server on 127.0.0.1 answers every request after 200 ms with
'[Thought]: ...\\n[Finish]: yes' (one LLM call per question); 200 JSONL questions about
generated images are asked to the naive agent through the real pipeline: suite file, JSONL
adapter, image loading, the agent and its HTTP client, exact-match scoring and one SQLite
commit per sample with the trace and its image. With the server's latency fixed, the
speed-up over concurrency 1 shows how much of the wall time the runner overlaps; the rest
is hammr's own work per question (prompt, parsing, trace, PNG, commit) on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from PIL import Image as PILImage

from hammr.agents import AgentSystems
from hammr.config import Config, load_config
from hammr.eval.runner import run_eval
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from hammr.factory import build_backends, build_llm
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools

QUESTIONS = 200
DELAY_S = 0.2
CONCURRENCY = (1, 8, 32)
REPLY = "[Thought]: the picture answers it\n[Finish]: yes"
COLUMNS = [
    "concurrency",
    "questions",
    "wall s",
    "questions/s",
    "speed-up vs 1",
    "mean latency s",
    "server requests",
    "accuracy",
]


class SlowServer:
    """Answers every POST after ``delay`` seconds, each request on its own thread."""

    def __init__(self, delay: float = DELAY_S) -> None:
        self.requests = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            disable_nagle_algorithm = True  # headers and body are two writes

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    outer.requests += 1
                time.sleep(delay)
                body = json.dumps(
                    {
                        "id": "x",
                        "model": "fake",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": REPLY},
                            }
                        ],
                        "usage": {"prompt_tokens": 500, "completion_tokens": 12},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def make_suite(root: Path, n: int = QUESTIONS) -> Path:
    (root / "img").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        PILImage.new("RGB", (160, 120), (i % 256, (7 * i) % 256, (13 * i) % 256)).save(
            root / "img" / f"{i}.png"
        )
        lines.append(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": f"Is there anything in picture {i}?",
                    "answer": "yes" if i % 4 else "no",
                    "image": f"img/{i}.png",
                }
            )
        )
    (root / "questions.jsonl").write_text("\n".join(lines) + "\n")
    suite = root / "bench.toml"
    suite.write_text(
        'name = "bench"\n\n[[entry]]\nname = "bench"\nquestion_type = "single_hop"\n'
        'dataset = "jsonl"\nmetric = "exact_match"\nfile = "questions.jsonl"\n'
    )
    return suite


def served_config(base_url: str) -> Config:
    """hammr's configuration for a fake served model at ``base_url`` (no response cache)."""
    return load_config(
        None,
        env={
            "HAMMR_LLM__BACKEND": "openai",
            "HAMMR_LLM__BASE_URL": base_url,
            "HAMMR_LLM__MODEL": "fake",
            "HAMMR_LLM__CACHE": "false",
        },
    )


def measure(server: SlowServer, root: Path, concurrency: int) -> dict[str, float]:
    cfg = served_config(server.url)
    backends = build_backends(cfg).backends
    system = AgentSystems.from_config(cfg, builtin_tools(), backends).system("naive")
    samples = load_suite(root / "bench.toml").samples(root)
    before = server.requests

    async def go() -> Any:
        llm = build_llm(cfg, cache=False)
        try:
            with RunStore(root / f"runs-{concurrency}.sqlite") as store:
                store.open_run("bench", "bench", "naive")
                out = await run_eval(
                    system,
                    samples,
                    store=store,
                    run_name="bench",
                    ctx_factory=lambda: ToolContext(backends=backends, llm=llm),
                    concurrency=concurrency,
                    timeout_s=60,
                )
                latency = sum(r.latency_s for r in store.records("bench", limit=None, traces=False))
                return out, latency / max(1, out.ran)
        finally:
            await llm.aclose()  # type: ignore[attr-defined]

    out, latency = asyncio.run(go())
    assert out.ran == len(samples), out
    return {
        "questions": out.ran,
        "wall": out.elapsed_s,
        "qps": out.per_second,
        "latency": latency,
        "requests": server.requests - before,
        "accuracy": out.score_sum / out.ran,
    }


def run() -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    server = SlowServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_suite(root)
            base: float | None = None
            for c in CONCURRENCY:
                m = measure(server, root, c)
                base = base or m["qps"]
                rows.append(
                    (
                        str(c),
                        str(int(m["questions"])),
                        f"{m['wall']:.2f}",
                        f"{m['qps']:.1f}",
                        f"{m['qps'] / base:.1f}x",
                        f"{m['latency']:.3f}",
                        str(int(m["requests"])),
                        f"{100 * m['accuracy']:.0f}%",
                    )
                )
    finally:
        server.close()
    return rows


if __name__ == "__main__":
    for row in [tuple(COLUMNS), *run()]:
        print("  ".join(f"{c:>15}" for c in row))
