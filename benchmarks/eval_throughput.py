"""(f) Evaluation throughput and the driver's CPU per question: `hammr eval` at concurrency
1, 8 and 32.

A threaded OpenAI-compatible server in a process of its own on 127.0.0.1 answers every
request after 200 ms with '[Thought]: ...\\n[Finish]: yes' (one LLM call per question);
JSONL questions about generated images are asked to the naive agent by `hammr eval` itself,
in a process of its own: suite file, JSONL adapter, image loading, the agent and its HTTP
client, exact-match scoring and one SQLite commit per sample with the trace and its image.
With the server's latency fixed, the speed-up over concurrency 1 shows how much of the wall
time the runner overlaps. The driver's CPU per question is the CPU time (user + system, all
its threads) of a run of 400 questions less that of a run of 20, over the 380 between: the
start, the imports and the setup cancel out. With ``--before PATH`` another checkout (for
example ``git worktree add /tmp/before HEAD~1``) is measured beside this one, in turns.

.venv/bin/python benchmarks/eval_throughput.py
.venv/bin/python benchmarks/eval_throughput.py --before /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from PIL import Image as PILImage

from hammr.config import Config, load_config

QUESTIONS = 400
DELAY_S = 0.2
CONCURRENCY = (1, 8, 32)
REPLY = "[Thought]: the picture answers it\n[Finish]: yes"


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


FEW = 20
"""The short run whose CPU time (start, imports, setup) is taken off the long one's."""

DRIVER = """
import resource, sys
from hammr.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
use = resource.getrusage(resource.RUSAGE_SELF)
print("CPU", use.ru_utime + use.ru_stime, file=sys.stderr)
"""


def drive(src: Path, url: str, root: Path, concurrency: int, limit: int) -> tuple[float, str]:
    """CPU seconds of one `hammr eval` process (the checkout at ``src``) and its result line."""
    store = root / f"runs-{src.parent.name}-{concurrency}-{limit}.sqlite"
    env = {
        **{k: v for k, v in os.environ.items() if k != "HAMMR_CONFIG"},
        "HAMMR_LLM__BACKEND": "openai",
        "HAMMR_LLM__BASE_URL": url,
        "HAMMR_LLM__MODEL": "fake",
        "HAMMR_LLM__CACHE": "false",
        "PYTHONPATH": str(src),
    }
    args = ["eval", "--suite", str(root / "bench.toml"), "--data-dir", str(root)]
    args += ["--system", "naive", "--store", str(store), "--name", "bench"]
    args += ["--concurrency", str(concurrency), "--limit", str(limit), "--timeout", "60"]
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *args],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    cpu = float(done.stderr.rsplit("CPU ", 1)[1].split()[0])
    return cpu, done.stdout.strip()


RESULT = re.compile(r"mean score ([\d.]+)%.*new in ([\d.]+) s, ([\d.]+) questions/s")


def measure(src: Path, url: str, root: Path, concurrency: int) -> dict[str, float]:
    few, _ = drive(src, url, root, concurrency, FEW)
    cpu, line = drive(src, url, root, concurrency, QUESTIONS)
    found = RESULT.search(line)
    assert found, line
    return {
        "questions": QUESTIONS,
        "wall": float(found.group(2)),
        "qps": float(found.group(3)),
        "accuracy": float(found.group(1)) / 100,
        "cpu_ms": 1000 * (cpu - few) / (QUESTIONS - FEW),
    }


def columns(before: bool = False) -> list[str]:
    cols = ["concurrency", "questions", "wall s", "questions/s", "speed-up vs 1"]
    cols += ["driver CPU ms/question", "accuracy"]
    if before:
        cols[5:5] = ["before: driver CPU ms/question", "before: questions/s"]
    return cols


COLUMNS = columns()


@contextmanager
def server_process(delay: float = DELAY_S) -> Iterator[str]:
    """A :class:`SlowServer` in a process of its own (its CPU is not the driver's); its URL."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(delay)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        child.kill()
        child.wait()


def run(before: Path | None = None) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    here = Path(__file__).resolve().parents[1] / "src"
    with server_process() as url, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_suite(root, QUESTIONS)
        base: float | None = None
        for c in CONCURRENCY:
            old = measure(before / "src", url, root, c) if before else None
            m = measure(here, url, root, c)
            base = base or m["qps"]
            row = [
                str(c),
                str(int(m["questions"])),
                f"{m['wall']:.2f}",
                f"{m['qps']:.1f}",
                f"{m['qps'] / base:.1f}x",
                f"{m['cpu_ms']:.2f}",
                f"{100 * m['accuracy']:.0f}%",
            ]
            if old is not None:
                row[5:5] = [f"{old['cpu_ms']:.2f}", f"{old['qps']:.1f}"]
            rows.append(tuple(row))
    return rows


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, help="another checkout, measured beside this one")
    p.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve is not None:  # the server's own process
        server = SlowServer(args.serve)
        print(server.url, flush=True)
        threading.Event().wait()
    for row in [tuple(columns(args.before is not None)), *run(args.before)]:
        print("  ".join(f"{c:>15}" for c in row))


if __name__ == "__main__":
    main(sys.argv[1:])
