"""Pieces every command module shares (kept apart from hammr.cli, which imports them all)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn, overload

import click

if TYPE_CHECKING:
    from hammr.eval.store import RunStore

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="Config file (default: $HAMMR_CONFIG, else ./hammr.toml if present).",
)


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and the exit status (2: bad input or configuration)."""
    click.echo(f"hammr: error: {message}", err=True)
    sys.exit(code)


store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The run store, an SQLite file (default: $XDG_CACHE_HOME/hammr/runs.sqlite, "
    "else ~/.cache/hammr/runs.sqlite).",
)


@overload
def open_store(path: Path | None, *, create: Literal[True] = ...) -> RunStore: ...
@overload
def open_store(path: Path | None, *, create: bool) -> RunStore | None: ...
def open_store(path: Path | None, *, create: bool = True) -> RunStore | None:
    """The run store; None when it does not exist and ``create`` is False (reading commands
    do not leave an empty file behind a mistyped --store)."""
    from hammr.eval.store import RunStore, StoreError, default_store_path

    where = path if path is not None else default_store_path()
    if not create and not where.exists():
        return None
    try:
        return RunStore(where)
    except (StoreError, OSError) as e:
        fail(str(e))
