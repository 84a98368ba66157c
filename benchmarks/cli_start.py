"""(q) How soon the command line answers: wall time of `hammr --help`, `hammr systems`,
`hammr experiment list` and `hammr config show`, each a new process (target: median < 0.3 s).

What is measured is Python's start, the imports a command needs and its own work: each
command runs as the `hammr` script does (``from hammr.cli import main; main()``) with the
checkout's ``src`` first on ``PYTHONPATH``, from an empty temporary folder (no ./hammr.toml)
and with $HAMMR_CONFIG unset, its output thrown away. Bytecode is cached as an installed
hammr's would be, but in a temporary folder ($PYTHONPYCACHEPREFIX; $PYTHONDONTWRITEBYTECODE
is dropped): without a cache every module is compiled again at each start. One unmeasured
run of each command comes first (it fills that cache). With ``--before PATH`` another
checkout (for example a ``git worktree add /tmp/before HEAD~1``) is measured beside this
one, its runs alternating with this one's so that both see the same load.

.venv/bin/python benchmarks/cli_start.py
.venv/bin/python benchmarks/cli_start.py --before /tmp/before --runs 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("systems",),
    ("experiment", "list"),
    ("config", "show"),
)
RUNS = 10
ENTRY = "import sys; from hammr.cli import main; sys.exit(main())"
"""What the `hammr` script of [project.scripts] runs."""


def columns(before: bool = False) -> list[str]:
    if not before:
        return ["command", "median", "min"]
    return ["command", "before median", "before min", "median", "min", "speed-up (median)"]


COLUMNS = columns()


def _env(repo: Path, pycache: str) -> dict[str, str]:
    dropped = {"HAMMR_CONFIG", "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = os.pathsep.join(
        [str(repo / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def once(python: str, repo: Path, args: Sequence[str], cwd: str) -> float:
    """Seconds one command took, start to exit (an error if it failed), run in ``cwd``
    with its bytecode cache in ``cwd/pycache``."""
    env = _env(repo, str(Path(cwd) / "pycache"))
    t0 = time.perf_counter()
    done = subprocess.run(
        [python, "-c", ENTRY, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"hammr {' '.join(args)} ({repo}) exited {done.returncode}: {why[0]}")
    return elapsed


def measure(
    checkouts: Sequence[tuple[str, Path]], runs: int = RUNS
) -> dict[tuple[int, tuple[str, ...]], list[float]]:
    """(checkout index, command) -> ``runs`` wall times; the checkouts alternate run by run."""
    times: dict[tuple[int, tuple[str, ...]], list[float]] = {}
    with tempfile.TemporaryDirectory() as cwd:
        for args in COMMANDS:
            for python, repo in checkouts:
                once(python, repo, args, cwd)  # bytecode caches, a first-run KB build
            for _ in range(runs):
                for i, (python, repo) in enumerate(checkouts):
                    times.setdefault((i, args), []).append(once(python, repo, args, cwd))
    return times


def run(
    runs: int = RUNS,
    repo: Path = ROOT,
    python: str = sys.executable,
    before: Path | None = None,
    before_python: str | None = None,
) -> list[tuple[str, ...]]:
    checkouts = [(python, repo)]
    if before is not None:
        checkouts.insert(0, (before_python or python, before))
    times = measure(checkouts, runs)
    rows: list[tuple[str, ...]] = []
    for args in COMMANDS:
        row = [f"hammr {' '.join(args)}"]
        medians = []
        for i in range(len(checkouts)):
            samples = times[(i, args)]
            medians.append(statistics.median(samples))
            row += [f"{medians[-1]:.3f} s", f"{min(samples):.3f} s"]
        if before is not None:
            row.append(f"{medians[0] / medians[1]:.2f}x")
        rows.append(tuple(row))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=RUNS, help=f"runs per command (default {RUNS})")
    p.add_argument("--repo", type=Path, default=ROOT, help="the checkout (default: this one)")
    p.add_argument("--python", default=sys.executable, help="its Python (default: this one)")
    p.add_argument("--before", type=Path, help="another checkout, measured beside it")
    p.add_argument("--before-python", help="the other checkout's Python (default: --python)")
    args = p.parse_args(argv)
    for checkout in filter(None, [args.repo, args.before]):
        if not (checkout / "src" / "hammr" / "cli.py").is_file():
            p.error(f"{checkout} is not a hammr checkout (no src/hammr/cli.py)")
    before = args.before.resolve() if args.before is not None else None
    rows = run(args.runs, args.repo.resolve(), args.python, before, args.before_python)
    print(" | ".join(columns(args.before is not None)))
    for row in rows:
        print(" | ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
