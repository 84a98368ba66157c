"""The samples a run would draw from a data folder, entry by entry: what ``hammr data check``
looks for and ``hammr data get`` fetches images for.

The draw is the one ``hammr experiment run`` and ``hammr eval`` make (the suite entry's seeded
draw of ``limit``, within MuSEAgent's exploration/evaluation half where a run asks for one),
so the images fetched are exactly those the run will read. An experiment's runs that read the
same entry with different halves together need the union of their draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hammr.eval.suites import Suite, load_suite
from hammr.eval.types import Sample


@dataclass(frozen=True)
class EntryDraw:
    suite: str
    entry: str
    file: Path
    status: str
    """drawn | missing (no file) | unreadable (a file no run could read)"""
    detail: str
    samples: tuple[Sample, ...] = ()

    def missing_images(self) -> list[Path]:
        """The drawn samples' image files that are not there, each once, in order."""
        out: dict[Path, None] = {}
        for s in self.samples:
            for p in s.images.values():
                if not p.exists():
                    out.setdefault(p)
        return list(out)

    def whole(self) -> int:
        """How many drawn samples have every image."""
        return sum(1 for s in self.samples if all(p.exists() for p in s.images.values()))


@dataclass(frozen=True)
class Want:
    """One suite entry to draw from, within a half (None: the whole entry)."""

    suite: Suite
    entry: str
    half: str | None = None
    split_seed: int = 0


def wants_of_experiment(name: str, *, demo: bool = False) -> list[Want]:
    """What the runs of experiment ``name`` read (on its demo suite with ``demo``).
    ExperimentError for an unknown experiment."""
    from hammr.experiments import load_experiment
    from hammr.experiments.runner import demo_entries

    experiment = load_experiment(name)
    out: list[Want] = []
    seen: set[tuple[str, str, str | None, int]] = set()
    for run in experiment.runs:
        suite_name = experiment.data.demo_suite if demo and experiment.data.demo_suite else None
        suite = load_suite(suite_name or run.suite)
        entries = demo_entries(experiment, run.name) if demo else run.entries
        for entry in entries or tuple(e.name for e in suite.entries):
            key = (suite.name, entry, run.split, run.split_seed)
            if key not in seen:
                seen.add(key)
                out.append(Want(suite, entry, run.split, run.split_seed))
    return out


def wants_of_suites(suites: Sequence[Suite]) -> list[Want]:
    return [Want(s, e.name) for s in suites for e in s.entries]


def draw(wants: Sequence[Want], data_dir: Path, *, limit: int | None, seed: int) -> list[EntryDraw]:
    """Per (suite, entry), in order: its drawn samples (the union over its halves)."""
    merged: dict[tuple[str, str], EntryDraw] = {}
    for w in wants:
        key = (w.suite.name, w.entry)
        entry = next(e for e in w.suite.entries if e.name == w.entry)
        path = entry.file_path(data_dir)
        if not path.exists():
            merged[key] = EntryDraw(key[0], key[1], path, "missing", f"no {path}")
            continue
        if key in merged and merged[key].status != "drawn":
            continue
        try:
            drawn = w.suite.select((w.entry,)).samples(
                data_dir, limit=limit, seed=seed, half=w.half, split_seed=w.split_seed
            )
        except (ValueError, OSError) as e:
            merged[key] = EntryDraw(key[0], key[1], path, "unreadable", f"cannot read it: {e}")
            continue
        before = merged[key].samples if key in merged else ()
        ids = {s.id for s in before}
        samples = before + tuple(s for _, s in drawn if s.id not in ids)
        merged[key] = EntryDraw(key[0], key[1], path, "drawn", f"{len(samples)} samples", samples)
    return list(merged.values())


__all__ = ["EntryDraw", "Want", "draw", "wants_of_experiment", "wants_of_suites"]
