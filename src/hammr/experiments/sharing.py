"""What one experiment can take from another's stored work instead of asking again.

HAMMR's Tables 2, 3, 4 and A.1 run the same systems on the same suite; MuSEAgent's tables
explore, build memories and evaluate the same way. A reproduction of a whole paper should
pay once for each. Two pieces of work are the same when everything that decides an answer
is: the system, the suite, the step limit, the settings, the memory it reads, the data
folder, demo or not, and the model's configuration (:func:`hammr.eval.resume.config_changes`:
operational settings such as concurrency may differ).

* **Runs** are shared sample by sample: which samples a run draws (its entries, its limit,
  its split and seed) does not change how one sample is answered, so a run takes every
  finished answer another run holds for one of its own samples (copied into its own run:
  :meth:`hammr.eval.store.RunStore.copy_samples`), and asks only the rest. Its stored
  settings count what came from where (``shared_from``), which the report prints.
* **Memory files** are shared whole: a memory step made from the same source run (by its
  identity's fingerprint), with the same command, settings and model configuration, is a
  copy of the file (:func:`hammr.sqlite_file.copy_database`).

Names differ between experiments (``hammr-table3.hammr`` against ``hammr-table4.hammr``), so
the comparisons leave out the keys that only name things (a memory identity's ``from``, the
configuration's ``memory.path``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hammr.experiments.state import RecordError, experiments_dir, read_record

if TYPE_CHECKING:
    from hammr.eval.store import RunStore

DRAW_KEYS = ("entries", "limit", "split", "split_seed", "seed")
"""Run identity keys that choose which samples a run asks, not how each is answered."""

NAMING_CONFIG_KEYS = ("memory.path",)
"""Configuration keys that name a file of one experiment (its content is compared through
the identities instead)."""


def memory_share_key(identity: Mapping[str, Any]) -> dict[str, Any]:
    """A memory step's identity without the name of the run it came from."""
    return {k: v for k, v in identity.items() if k != "from"}


def run_share_key(identity: Mapping[str, Any]) -> dict[str, Any]:
    """A run's identity without what only draws its samples or names another step."""
    key = {k: v for k, v in identity.items() if k not in DRAW_KEYS}
    memory = key.get("memory")
    if isinstance(memory, Mapping):
        key["memory"] = memory_share_key(memory)
    return key


def _answering(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in NAMING_CONFIG_KEYS}


def same_answers(stored: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """Whether a stored configuration answers as ``config`` does."""
    from hammr.eval.resume import config_changes

    return config_changes(_answering(stored), _answering(config))[0] is None


def run_sources(
    store: RunStore, stored_as: str, identity: Mapping[str, Any], config: Mapping[str, Any]
) -> list[str]:
    """The stored runs, oldest first, an experiment made as ``identity`` and ``config``
    would answer (``stored_as``, the run itself, left out)."""
    wanted = run_share_key(identity)
    out: list[str] = []
    for name in store.run_names():
        if name == stored_as:
            continue
        info = store.run_info(name)
        if info is None:
            continue
        theirs = info.settings.get("identity")
        if not isinstance(theirs, Mapping) or run_share_key(theirs) != wanted:
            continue
        if same_answers(info.config, config):
            out.append(name)
    return out


def memory_entry(
    path: Path, identity: Mapping[str, Any], config: Mapping[str, Any], samples: int
) -> dict[str, Any]:
    """What a finished memory step records, so another experiment can find its file (and a
    later run can tell it was made from fewer of its source run's samples than there are
    now: ``samples``)."""
    return {
        "status": "done",
        "identity": dict(identity),
        "path": str(path),
        "config": config,
        "samples": samples,
    }


def memory_source(
    store_path: Path,
    path: Path,
    identity: Mapping[str, Any],
    config: Mapping[str, Any],
    samples: int,
) -> Path | None:
    """A finished memory file of any experiment beside the store made as ``identity`` and
    ``config`` would make it, from ``samples`` of its source run (other than ``path``), or
    None."""
    folder = experiments_dir(store_path)
    if not folder.is_dir():
        return None
    wanted = memory_share_key(identity)
    for record in sorted(folder.glob("*.state.json")):
        steps: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(RecordError):
            steps = read_record(record)
        for key, entry in steps.items():
            if not key.startswith("memory:") or entry.get("status") != "done":
                continue
            other, theirs, made_with = entry.get("path"), entry.get("identity"), entry.get("config")
            if not (
                isinstance(other, str)
                and isinstance(theirs, Mapping)
                and isinstance(made_with, Mapping)
            ):
                continue
            found = Path(other)
            if found == path or not found.is_file():
                continue
            if entry.get("samples") != samples:
                continue
            if memory_share_key(theirs) == wanted and same_answers(made_with, config):
                return found
    return None


def shared_counts(settings: Mapping[str, Any]) -> dict[str, int]:
    """A stored run's ``shared_from`` (source run -> samples copied from it)."""
    shared = settings.get("shared_from")
    if not isinstance(shared, Mapping):
        return {}
    return {str(k): int(v) for k, v in shared.items() if isinstance(v, int) and v > 0}


__all__ = [
    "DRAW_KEYS",
    "memory_entry",
    "memory_share_key",
    "memory_source",
    "run_share_key",
    "run_sources",
    "same_answers",
    "shared_counts",
]
