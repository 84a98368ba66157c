"""The ``hammr data get`` command that fills a gap, for the lines of ``data check``,
``experiment run`` and ``eval`` that report an entry without data."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path


def get_command(
    entries: Iterable[tuple[str, str]],
    data_dir: Path,
    *,
    experiment: str | None = None,
    limit: int | None = None,
) -> str | None:
    """``hammr data get NAME... --data-dir DIR [--experiment X] [--limit N]`` for the
    datasets that hold these (suite, entry) pairs; None when no catalogue dataset does (a
    suite of one's own)."""
    from hammr.datasets.catalogue import CatalogueError
    from hammr.datasets.catalogue_file import load_catalogue

    try:
        catalogue = load_catalogue()
    except CatalogueError:
        return None
    names: list[str] = []
    for suite, entry in entries:
        found = catalogue.find_entry(suite, entry)
        if found is not None and found.name not in names:
            names.append(found.name)
    if not names:
        return None
    words = ["hammr", "data", "get", *names, "--data-dir", str(data_dir)]
    if experiment is not None:
        words += ["--experiment", experiment]
    if limit is not None:
        words += ["--limit", str(limit)]
    return shlex.join(words)


__all__ = ["get_command"]
