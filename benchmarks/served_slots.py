"""(r) A 2-slot llama.cpp server at hammr's default concurrency: ``hammr experiment run
hammr-table3 --demo --limit 2`` as a user runs it against a served model, for a fixed time.

llama.cpp's own HTTP server (:class:`~hammr.backends.llm.local_server.LocalLlamaServer`,
the shipped SmolLM2-135M GGUF, the project's default threads) runs on 127.0.0.1 with 2
slots of 8,192 tokens; hammr is pointed at it with a written hammr.toml (``server =
"llamacpp"``, no response cache) and runs the experiment with no ``--concurrency``, so the
default decides. After ``--limit-s`` seconds (or when it finishes) the run is stopped and
its store read: questions finished, questions per minute, and per model call the share of
its prompt the server took from its prefix cache (``timings.cache_n``), over every call
stored (calls of unfinished questions are not stored). With ``--before PATH`` another
checkout (``git worktree add /tmp/before HEAD~1``) runs the same, first.

    .venv/bin/python benchmarks/served_slots.py                      # ~10 min
    .venv/bin/python benchmarks/served_slots.py --before /tmp/before --limit-s 600
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.eval.store import RunStore
from hammr.trace import Trace

ROOT = Path(__file__).resolve().parents[1]
SLOTS = 2
PER_SLOT_CTX = 8192
LIMIT_S = 600.0
ENTRY = "import sys; from hammr.cli import main; sys.exit(main())"
COLUMNS = [
    "checkout",
    "in flight",
    "questions done",
    "of",
    "questions/min",
    "calls stored",
    "cache share per call (median)",
    "prompt tokens from cache",
]


def _calls(trace: Trace) -> list[tuple[int, int]]:
    """(prompt tokens, of them cached) of every model call of ``trace`` that says both."""
    out: list[tuple[int, int]] = []
    for step in trace.steps:
        u = step.usage
        if u.prompt_tokens and u.cached_prompt_tokens is not None:
            out.append((u.prompt_tokens, u.cached_prompt_tokens))
        if step.child is not None:
            out.extend(_calls(step.child))
    return out


def measure(src: Path, url: str, folder: Path, limit_s: float) -> dict[str, Any]:
    config = folder / "hammr.toml"
    config.write_text(
        f'[llm]\nbackend = "openai"\nbase_url = "{url}"\nmodel = "smollm2"\n'
        'server = "llamacpp"\ncache = false\ntimeout_s = 1800\n'
    )
    store = folder / "runs.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "HAMMR_CONFIG"}
    env["PYTHONPATH"] = str(src)
    args = ["experiment", "run", "hammr-table3", "--demo", "--limit", "2"]
    args += ["--data-dir", str(ROOT / "examples" / "demo"), "--store", str(store)]
    args += ["--config", str(config), "--no-progress"]
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = child.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGINT)  # as Ctrl-C: what is finished stays stored
        try:
            _, err = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            _, err = child.communicate()
    elapsed = time.perf_counter() - started
    header = re.search(r"samples, (\d+) at a time(?: \((.*)\))?, store", err)
    in_flight = "?"
    if header:
        why = "as the server says" if "/props" in (header.group(2) or "") else "default"
        in_flight = f"{header.group(1)} ({why})"
    done = 0
    calls: list[tuple[int, int]] = []
    with RunStore(store) as s:
        runs = [n for n in s.run_names() if n.startswith("demo.hammr-table3.")]
        planned = 16 * len(("naive", "hammr"))  # 8 demo entries x --limit 2, per run
        for run in runs:
            for record in s.records(run, limit=None, images=False):
                done += 1
                if isinstance(record.trace, Trace):
                    calls.extend(_calls(record.trace))
    shares = [c / p for p, c in calls]
    return {
        "in_flight": in_flight,
        "done": done,
        "planned": planned,
        "per_min": 60 * done / elapsed,
        "calls": len(calls),
        "median_share": statistics.median(shares) if shares else 0.0,
        "cached": sum(c for _, c in calls) / max(1, sum(p for p, _ in calls)),
    }


def run(before: Path | None = None, limit_s: float = LIMIT_S) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    checkouts = [("before", before / "src")] if before else []
    checkouts.append(("this", ROOT / "src"))
    for label, src in checkouts:
        server = LocalLlamaServer(alias="smollm2", n_parallel=SLOTS, per_slot_ctx=PER_SLOT_CTX)
        with server, tempfile.TemporaryDirectory() as tmp:
            m = measure(src, server.base_url, Path(tmp), limit_s)
        rows.append(
            (
                label,
                m["in_flight"],
                str(m["done"]),
                str(m["planned"]),
                f"{m['per_min']:.2f}",
                str(m["calls"]),
                f"{100 * m['median_share']:.0f}%",
                f"{100 * m['cached']:.0f}%",
            )
        )
    return rows


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, help="another checkout, run first the same way")
    p.add_argument("--limit-s", type=float, default=LIMIT_S, help="seconds per checkout")
    args = p.parse_args(argv)
    for row in [tuple(COLUMNS), *run(args.before, args.limit_s)]:
        print("  ".join(f"{c:>14}" for c in row))


if __name__ == "__main__":
    main(sys.argv[1:])
