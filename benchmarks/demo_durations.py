"""(s) Every bundled experiment's ``--demo`` run, as a first run meets it: how long it takes
on the embedded model, with nothing stored and no cached model reply.

Each experiment runs as ``hammr experiment run NAME --demo`` (no ``--limit``: the demo
budget's questions per entry, :data:`hammr.experiments.spec.DEMO_LIMIT`) in a fresh folder
with a fresh store, the defaults' configuration (no hammr.toml, so the embedded SmolLM2 on
one thread) and the LLM response cache off (``HAMMR_LLM__CACHE=false``), one experiment at
a time. Printed per experiment: wall seconds, exit status, questions asked, model calls and
prompt/completion tokens they took (a question one run shared with another counts once),
and the machine's load average over the run (other programs slow a run on a shared
machine; the figures are this machine's, 2 cores). Recorded with ``--write``, per run too:
its questions, calls and tokens, what ``hammr experiment show`` estimates a run's cost from.

    .venv/bin/python benchmarks/demo_durations.py                  # all 16, ~45 min
    .venv/bin/python benchmarks/demo_durations.py hammr-table3 avis-table3
    .venv/bin/python benchmarks/demo_durations.py --markdown       # rows for docs/experiments.md
    .venv/bin/python benchmarks/demo_durations.py --write          # and into the package

``--write`` records the figures in ``src/hammr/experiments/demo_durations.json`` (what
``hammr experiment run --demo`` says before a first run) and rewrites docs/experiments.md's
table from it (a test compares the two); experiments not measured this time keep theirs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from hammr.cli import main; sys.exit(main())"
TIMEOUT_S = 1200.0
COLUMNS = [
    "experiment",
    "wall (s)",
    "exit",
    "runs",
    "questions",
    "model calls",
    "prompt tokens",
    "completion tokens",
    "load avg",
]


@dataclass
class Outcome:
    experiment: str
    wall_s: float
    exit_code: int
    runs: int = 0
    questions: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    load: float = 0.0
    tail: str = ""
    failed: str = ""
    """The first step that failed, as the command's summary says it ('' when none did)."""
    per_run: dict[str, dict[str, int]] | None = None
    """Each run of the experiment (its name in the file): questions, model calls and
    prompt/completion tokens stored (what ``hammr experiment show`` estimates from)."""

    def row(self) -> tuple[str, ...]:
        return (
            self.experiment,
            f"{self.wall_s:.0f}",
            str(self.exit_code),
            str(self.runs),
            str(self.questions),
            str(self.calls),
            f"{self.prompt_tokens:,}",
            f"{self.completion_tokens:,}",
            f"{self.load:.1f}",
        )


def bundled() -> list[str]:
    folder = ROOT / "src" / "hammr" / "experiments" / "bundled"
    return sorted(p.stem for p in folder.glob("*.toml"))


def _stored(store: Path) -> tuple[int, int, int, int, int]:
    """(runs, questions, model calls, prompt tokens, completion tokens) in ``store``."""
    if not store.exists():
        return 0, 0, 0, 0, 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        runs = db.execute("SELECT COUNT(DISTINCT run) FROM samples").fetchone()[0]
        # a question one run shared with another (`hammr experiment run` copies it, finish
        # time and all) was asked once: counted once
        row = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(llm_calls), 0), COALESCE(SUM(prompt_tokens), 0),"
            " COALESCE(SUM(completion_tokens), 0) FROM samples s WHERE NOT EXISTS (SELECT 1"
            " FROM samples t WHERE t.dataset = s.dataset AND t.sample_id = s.sample_id AND"
            " t.finished = s.finished AND t.rowid < s.rowid)"
        ).fetchone()
    finally:
        db.close()
    return int(runs), int(row[0]), int(row[1]), int(row[2]), int(row[3])


def _per_run(store: Path, experiment: str) -> dict[str, dict[str, int]]:
    """Questions, model calls and tokens stored per run of ``experiment`` in ``store``."""
    if not store.exists():
        return {}
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT run, COUNT(*), COALESCE(SUM(llm_calls), 0), COALESCE(SUM(prompt_tokens), 0),"
            " COALESCE(SUM(completion_tokens), 0) FROM samples GROUP BY run ORDER BY run"
        ).fetchall()
    finally:
        db.close()
    head = f"demo.{experiment}."
    return {
        str(run)[len(head) :]: {
            "questions": int(n),
            "calls": int(calls),
            "prompt_tokens": int(prompt),
            "completion_tokens": int(completion),
        }
        for run, n, calls, prompt, completion in rows
        if str(run).startswith(head)
    }


def measure(name: str, timeout_s: float = TIMEOUT_S) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"demo-{name}-") as tmp:
        folder = Path(tmp)
        store = folder / "runs.sqlite"
        env = {
            **os.environ,
            "HAMMR_LLM__CACHE": "false",
            "HAMMR_CONFIG": "",
            "XDG_CACHE_HOME": str(folder / "cache"),
        }
        env = {k: v for k, v in env.items() if not (k.startswith("HAMMR_") and v == "")}
        command = [
            sys.executable, "-c", ENTRY, "experiment", "run", name, "--demo",
            "--store", str(store), "--data-dir", str(ROOT / "examples" / "demo"),
        ]  # fmt: skip
        load0 = os.getloadavg()[0]
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s
            )
            code, tail = done.returncode, (done.stdout + done.stderr)[-600:]
            failed = next((ln.strip() for ln in done.stdout.splitlines() if ": failed: " in ln), "")
        except subprocess.TimeoutExpired as e:
            code, failed = 124, f"stopped after {timeout_s:.0f} s"
            tail = str(e.stderr or "")[-600:]
        wall = time.perf_counter() - started
        load = (load0 + os.getloadavg()[0]) / 2
        runs, questions, calls, prompt, completion = _stored(store)
        per_run = _per_run(store, name)
    return Outcome(
        name, wall, code, runs, questions, calls, prompt, completion, load, tail, failed, per_run
    )


def markdown(rows: list[Outcome]) -> str:
    lines = [
        "| experiment | wall | runs | questions | model calls | tokens (prompt / completion) |",
        "|---|---|---|---|---|---|",
    ]
    for o in rows:
        failed = "" if o.exit_code == 0 else f" (exit {o.exit_code})"
        minutes = f"{o.wall_s / 60:.1f} min{failed}"
        lines.append(
            f"| `{o.experiment}` | {minutes} | {o.runs} | {o.questions} | {o.calls} | "
            f"{o.prompt_tokens:,} / {o.completion_tokens:,} |"
        )
    return "\n".join(lines)


def write(rows: list[Outcome], path: Path, *, keep_seconds: bool = False) -> None:
    """Record ``rows`` (those that finished) in the package's durations file;
    ``keep_seconds``: the wall times already recorded stay (a re-count of calls and tokens
    on a machine too busy to time)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {"experiments": {}}
    cores = os.cpu_count() or 0
    load = max((o.load for o in rows), default=0.0)
    if not keep_seconds:
        data["machine"] = f"a {cores}-core machine (load average up to {load:.1f})"
        data["date"] = datetime.date.today().isoformat()
    for o in rows:
        if o.exit_code in (0, 1):  # 1: a step failed (the reason is kept); else no figure
            before = data["experiments"].get(o.experiment, {})
            seconds = before.get("seconds") if keep_seconds else None
            data["experiments"][o.experiment] = {
                "seconds": seconds if isinstance(seconds, int) else round(o.wall_s),
                "questions": o.questions,
                "calls": o.calls,
                "prompt_tokens": o.prompt_tokens,
                "completion_tokens": o.completion_tokens,
                "runs": o.per_run or {},
            } | ({"failed": o.failed} if o.exit_code else {})
    data["experiments"] = dict(sorted(data["experiments"].items()))
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def run(names: list[str] | None = None) -> list[Outcome]:
    out = []
    for name in names or bundled():
        outcome = measure(name)
        print(" ".join(outcome.row()), flush=True, file=sys.stderr)
        if outcome.exit_code != 0:
            print(outcome.tail, file=sys.stderr)
        out.append(outcome)
    return out


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments (default: every bundled one)")
    parser.add_argument("--markdown", action="store_true", help="print docs rows too")
    parser.add_argument("--write", action="store_true", help="record them in the package")
    parser.add_argument(
        "--keep-seconds",
        action="store_true",
        help="with --write: keep the recorded wall times (count calls and tokens only)",
    )
    args = parser.parse_args()
    rows = run(args.names or None)
    table = Table(title="(s) every bundled experiment's --demo, first run, embedded model")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c == COLUMNS[0] else "right")
    for o in rows:
        table.add_row(*o.row())
    Console().print(table)
    if args.markdown:
        print(markdown(rows))
    if args.write:
        from hammr.experiments.demo_time import (
            DURATIONS_FILE,
            read_durations,
            with_durations_table,
        )

        write(rows, DURATIONS_FILE, keep_seconds=args.keep_seconds)
        docs = ROOT / "docs" / "experiments.md"
        if docs.exists():
            page = docs.read_text(encoding="utf-8")
            docs.write_text(with_durations_table(page, read_durations()), encoding="utf-8")


if __name__ == "__main__":
    main()
