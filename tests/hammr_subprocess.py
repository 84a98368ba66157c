"""The ``hammr`` command run as a user runs it, for the embedded-model tests: the venv's
command, no HAMMR_* variables of the calling shell, a cache folder of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HAMMR = Path(sys.executable).parent / "hammr"


def run_hammr(where: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``hammr ARGS`` from the repository root, its cache under ``where``; ``timeout`` is only
    a safety net against a hang."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAMMR_")}
    env["XDG_CACHE_HOME"] = str(where / "cache")
    env["COLUMNS"] = "200"
    return subprocess.run(
        [str(HAMMR), *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
