"""The embedded model's speed by llama.cpp thread count, on a quiet CPU and beside busy ones.

llama.cpp's CPU threads meet at a barrier after every operation of the model's graph (a few
hundred per token), and wait there spinning. When other programs hold the processors, a
thread that reaches the barrier spins through its time slice while the thread it waits for
is not running, so every operation costs a round of the scheduler: with more threads than
free cores, generation slows by orders of magnitude. One thread never waits at a barrier.

Each setting runs in a fresh process (the model loads once per thread setting): a prompt of
about 700 tokens, then 48 generated tokens, three times with distinct prompts (no cached
prefix); the median wall time per call is reported, or "> LIMIT s" when a setting had not
finished within the limit. Beside it: nothing; six busy programs (``python -c 'while True:
pass'``), whose fair share of the processors the threads can still get; or a second process
running the same model with the same threads without pause (two hammr commands at once, a
test suite beside an evaluation), whose spinning threads take the slices the first one's
threads wait for.

    .venv/bin/python benchmarks/run.py threads     # ~5 min on 2 cores
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 120.0
SETTINGS = [(1, 1), (1, 2), (2, 2)]
"""(threads generating, threads evaluating the prompt)."""
BESIDE = ["nothing", "6 busy programs", "the same model, same threads"]
COLUMNS = ["beside it", *(f"gen {g} / prompt {b} threads" for g, b in SETTINGS)]

CHILD = """
import json, statistics, sys, time
from hammr.backends.llm.base import LLMRequest, Message
from hammr.backends.llm.embedded import EmbeddedLLM

gen, batch, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
llm = EmbeddedLLM(n_threads=gen, n_threads_batch=batch)
llm.load()
text = "A garden holds a cat, a dog, three birds and a pond with fish. " * 40
times = []
for rep in range(reps):
    request = LLMRequest(
        messages=(Message("user", f"Story {rep}. {text} Tell me about it."),),
        max_tokens=48,
        temperature=0.0,
    )
    started = time.monotonic()
    llm.complete_blocking(request)
    times.append(time.monotonic() - started)
    print(json.dumps({"done": rep + 1, "s": times[-1]}), flush=True)
print(json.dumps({"median": statistics.median(times)}), flush=True)
"""


def child(gen: int, batch: int, reps: int) -> list[str]:
    return [sys.executable, "-c", CHILD, str(gen), str(batch), str(reps)]


def measure(gen: int, batch: int, beside: str) -> str:
    others: list[subprocess.Popen[bytes]] = []
    if beside == "6 busy programs":
        others = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(6)]
    elif beside != "nothing":
        others = [subprocess.Popen(child(gen, batch, 10**6), stdout=subprocess.DEVNULL, cwd=ROOT)]
    try:
        done = subprocess.run(
            child(gen, batch, 3), capture_output=True, text=True, timeout=LIMIT_S, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return f"> {LIMIT_S:.0f} s"
    finally:
        for other in others:
            other.kill()
            other.wait()
    if done.returncode != 0:
        return f"failed: {done.stderr.strip().splitlines()[-1][:60]}"
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return f"{last['median']:.1f} s"


def run() -> list[tuple[str, ...]]:
    return [(beside, *(measure(g, b, beside) for g, b in SETTINGS)) for beside in BESIDE]


if __name__ == "__main__":
    print(" | ".join(COLUMNS))
    for row in run():
        print(" | ".join(row))
