"""Evaluation suites: named lists of (dataset file, adapter, metric, question type) entries.

A suite is a TOML file::

    name = "generic-vqa"
    description = "..."

    [[entry]]
    name = "gqa"                      # unique in the suite (default: the dataset name)
    question_type = "spatial_reasoning"
    dataset = "gqa"                   # an adapter of hammr.eval.datasets
    split = "testdev"                 # optional; passed to the adapter
    metric = "exact_match"            # a name in hammr.eval.metrics.METRICS
    file = "gqa/testdev_balanced_questions.json"   # relative to the data folder
    images = "gqa/images"             # optional, relative to the data folder
    options = { }                     # optional, the adapter's own options
    draw = 200                        # optional: only a seeded draw of this many samples

    [[aggregate]]                     # optional: one number from several entries' accuracies
    name = "infoseek_final"           # the report's row label
    function = "infoseek"             # a name in hammr.eval.metrics.AGGREGATES
    entries = ["infoseek_unseen_question", "infoseek_unseen_entity"]
    description = "..."               # optional, the report's footnote

Aggregate functions: ``harmonic_mean`` and ``infoseek`` (Infoseek's final score), ``mean`` (the
plain mean of the entries' accuracies, each entry weighing the same) and ``micro_mean`` (the
mean over all the entries' samples pooled, each sample weighing the same).

The bundled suites are ``generic-vqa`` (HAMMR's eight question types, its Table 2),
``muse-mc`` (MuSEAgent's four multiple-choice benchmarks), ``muse-demo`` (a small offline
multiple-choice set on the demo images, for trying MuSEAgent's loop), ``mevqa`` (MEVQA's test
split, whose reference explanations ``hammr explain`` scores; ``mevqa-demo``, a few such
questions on the demo images), ``avis`` (Infoseek and OK-VQA, AVIS's benchmarks),
``infoseek-human`` (Infoseek's human-annotated split, AVIS's Table 5) and ``demo``;
``load_suite`` also takes a path to a TOML file of one's own.
Paths in a suite are relative to the data folder given to ``Suite.samples``; each entry's
comment says what the official download is and where it goes.

``Suite.samples(data_dir, limit=...)`` draws ``limit`` samples per entry with the seeded,
prefix-stable draw of :func:`hammr.eval.datasets.sample_subset`. The default ``limit=None``
keeps every sample; the HAMMR paper evaluated 1000 random samples per dataset, i.e.
``limit=1000`` (its exact draw is not published, so no subset reproduces it).
``Suite.samples(data_dir, half="exploration"|"evaluation", split_seed=0)`` keeps one half of
MuSEAgent's 1:1 split of every entry (:mod:`hammr.eval.splits`) before the limit is drawn.
An entry's ``draw`` makes it a fixed seeded subset of its file (the same for every run and
``--seed``), where a paper evaluated that many without publishing which; the split and the
limit are drawn within it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hammr.eval.datasets import (
    ADAPTERS,
    DatasetError,
    adapter_options,
    get_adapter,
    load_dataset,
    missing_images,
    sample_subset,
)
from hammr.eval.splits import split_then_limit
from hammr.eval.types import Sample
from hammr.input_file import input_problem
from hammr.toml_file import TomlFileError, read_toml

__all__ = [
    "AGGREGATES",
    "METRICS",
    "SUITES_DIR",
    "Suite",
    "SuiteAggregate",
    "SuiteEntry",
    "SuiteError",
    "available_suites",
    "load_suite",
]

SUITES_DIR = Path(__file__).parent
METRICS = (
    "vqa_accuracy",
    "textvqa_accuracy",
    "exact_match",
    "encvqa",
    "multiple_choice",
    "infoseek",
    "mevqa_accuracy",
)
"""Metric names a suite may use (implemented in hammr.eval.metrics)."""
AGGREGATES = ("harmonic_mean", "infoseek", "mean", "micro_mean")
"""Aggregate functions a suite's ``[[aggregate]]`` may name (hammr.eval.metrics.AGGREGATES)."""

_ENTRY_KEYS = {
    "name",
    "question_type",
    "dataset",
    "split",
    "metric",
    "file",
    "images",
    "options",
    "description",
    "draw",
}
_AGGREGATE_KEYS = {"name", "function", "entries", "description"}


class SuiteError(DatasetError):
    """A suite file is malformed, or an entry's data cannot be loaded (the message names the
    suite, the entry and the file)."""


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    dataset: str
    """Adapter name (a key of hammr.eval.datasets.ADAPTERS)."""
    file: str
    """The annotation file (or folder), relative to the data folder unless absolute."""
    metric: str
    question_type: str = ""
    """Given to every sample of the entry ('' keeps the adapter's)."""
    split: str | None = None
    images: str | None = None
    """The image folder relative to the data folder (None: the adapter's default)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    draw: int | None = None
    """Only this many of the file's samples make up the entry: a seeded draw (seed 0, in file
    order, the same for every run and ``--seed``) where a paper evaluated a subset of a
    larger file without publishing which (MuSEAgent's HR-Bench: 200 of the 8K file). The
    split and ``limit`` are then drawn within it."""

    def file_path(self, data_dir: Path) -> Path:
        return _under(data_dir, self.file)

    def images_path(self, data_dir: Path) -> Path | None:
        return _under(data_dir, self.images) if self.images is not None else None

    def load(
        self,
        data_dir: Path,
        *,
        limit: int | None = None,
        seed: int = 0,
        check_images: bool = False,
        suite: str = "",
        half: str | None = None,
        split_seed: int = 0,
    ) -> list[Sample]:
        """This entry's samples (``limit`` of them, drawn with ``seed``; all when None).

        ``half`` ('exploration' or 'evaluation'): only that half of MuSEAgent's 1:1 split of
        the entry (stratified by question type, seeded by ``split_seed``; see
        :mod:`hammr.eval.splits`), the ``limit`` then drawn within the half."""
        where = f"suite {suite!r}, entry {self.name!r}" if suite else f"entry {self.name!r}"
        path = self.file_path(data_dir)
        problem = input_problem(path) if not path.is_dir() else None  # some datasets are folders
        if problem is not None:
            raise SuiteError(
                f"{where}: {path} {problem} (data folder {data_dir}, file {self.file!r}); "
                f"the {self.dataset} adapter expects {get_adapter(self.dataset).expects}"
            )
        whole = half is not None or self.draw is not None  # drawn from after loading
        try:
            samples = load_dataset(
                self.dataset,
                path,
                images=self.images_path(data_dir),
                split=self.split,
                limit=None if whole else limit,
                seed=seed,
                check_images=check_images and not whole,
                **dict(self.options),
            )
        except DatasetError as e:
            raise SuiteError(f"{where}: {e}") from e
        if self.question_type:
            samples = [
                s
                if s.question_type == self.question_type
                else replace(s, question_type=self.question_type)
                for s in samples
            ]
        if self.draw is not None:
            at = {s.id: i for i, s in enumerate(samples)}
            drawn = sample_subset(samples, self.draw, 0)
            samples = sorted(drawn, key=lambda s: at[s.id])
        if whole:
            try:
                samples = (
                    split_then_limit(samples, half, split_seed=split_seed, limit=limit, seed=seed)
                    if half
                    else sample_subset(samples, limit, seed)
                )
            except ValueError as e:
                raise SuiteError(f"{where}: {e}") from e
            if check_images:
                missing = missing_images(samples)
                if missing:
                    shown = "; ".join(f"{m.sample_id} {m.variable}: {m.path}" for m in missing[:5])
                    raise SuiteError(f"{where}: {len(missing)} image file(s) do not exist: {shown}")
        return samples


@dataclass(frozen=True)
class SuiteAggregate:
    """One number the report computes from several entries' accuracies (each entry's mean
    score), with a function of :data:`hammr.eval.metrics.AGGREGATES`: Infoseek's final score is
    the harmonic mean of its unseen-question and unseen-entity entries."""

    name: str
    function: str
    entries: tuple[str, ...]
    """Entry names, in the order the function receives their accuracies."""
    description: str = ""


@dataclass(frozen=True)
class Suite:
    name: str
    entries: list[SuiteEntry]
    description: str = ""
    path: Path | None = None
    aggregates: tuple[SuiteAggregate, ...] = ()

    def entry(self, name: str) -> SuiteEntry:
        for e in self.entries:
            if e.name == name:
                return e
        raise SuiteError(
            f"suite {self.name!r} has no entry {name!r}; it has "
            f"{', '.join(e.name for e in self.entries)}"
        )

    def select(self, names: Iterable[str]) -> Suite:
        """The suite restricted to the named entries, in the suite's order (and to the
        aggregates whose entries are all among them)."""
        wanted = set(names)
        for n in wanted:
            self.entry(n)
        return replace(
            self,
            entries=[e for e in self.entries if e.name in wanted],
            aggregates=tuple(a for a in self.aggregates if wanted.issuperset(a.entries)),
        )

    def samples(
        self,
        data_dir: Path,
        *,
        limit: int | None = None,
        seed: int = 0,
        check_images: bool = False,
        half: str | None = None,
        split_seed: int = 0,
    ) -> list[tuple[SuiteEntry, Sample]]:
        """(entry, sample) for every entry in order, ``limit`` samples per entry (None: all).
        ``half``: only the 'exploration' or 'evaluation' half of each entry (MuSEAgent's split,
        :mod:`hammr.eval.splits`), ``limit`` drawn within it. Raises :class:`SuiteError`
        naming the entry and the file when an entry cannot load."""
        out: list[tuple[SuiteEntry, Sample]] = []
        for e in self.entries:
            out.extend(
                (e, s)
                for s in e.load(
                    Path(data_dir),
                    limit=limit,
                    seed=seed,
                    check_images=check_images,
                    suite=self.name,
                    half=half,
                    split_seed=split_seed,
                )
            )
        return out


def _under(base: Path, rel: str) -> Path:
    p = Path(rel).expanduser()
    return p if p.is_absolute() else Path(base) / p


def available_suites() -> list[str]:
    """Names of the bundled suites."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def _entry(raw: Any, i: int, where: str) -> SuiteEntry:
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: entry {i} is not a table")
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise SuiteError(
            f"{where}: entry {i} has unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_ENTRY_KEYS))}"
        )
    for key in ("dataset", "file", "metric"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise SuiteError(f"{where}: entry {i} needs '{key}' (a string)")
    name: str = raw["name"] if isinstance(raw.get("name"), str) else raw["dataset"]
    label = f"{where}: entry {i} ({name})"
    if raw["dataset"] not in ADAPTERS:
        raise SuiteError(
            f"{label}: unknown dataset {raw['dataset']!r}; known: {', '.join(sorted(ADAPTERS))}"
        )
    if raw["metric"] not in METRICS:
        raise SuiteError(f"{label}: unknown metric {raw['metric']!r}; known: {', '.join(METRICS)}")
    options = raw.get("options", {})
    if not isinstance(options, dict):
        raise SuiteError(f"{label}: 'options' is not a table")
    known = adapter_options(ADAPTERS[raw["dataset"]])
    bad = sorted(set(options) - set(known))
    if bad:
        raise SuiteError(
            f"{label}: the {raw['dataset']} adapter has no option(s) {', '.join(bad)}; "
            f"it takes {', '.join(known) or 'none'}"
        )
    for key in ("name", "question_type", "split", "images", "description"):
        if key in raw and not isinstance(raw[key], str):
            raise SuiteError(f"{label}: '{key}' is not a string")
    return SuiteEntry(
        name=name,
        dataset=raw["dataset"],
        file=raw["file"],
        metric=raw["metric"],
        question_type=raw.get("question_type", ""),
        split=raw.get("split"),
        images=raw.get("images"),
        options=options,
        description=raw.get("description", ""),
        draw=_draw(raw.get("draw"), label),
    )


def _draw(value: Any, label: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SuiteError(f"{label}: 'draw' is a whole number of at least 1, not {value!r}")
    return value


def _aggregate(raw: Any, i: int, where: str, entry_names: list[str]) -> SuiteAggregate:
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: aggregate {i} is not a table")
    unknown = sorted(set(raw) - _AGGREGATE_KEYS)
    if unknown:
        raise SuiteError(
            f"{where}: aggregate {i} has unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_AGGREGATE_KEYS))}"
        )
    for key in ("name", "function"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise SuiteError(f"{where}: aggregate {i} needs '{key}' (a string)")
    label = f"{where}: aggregate {i} ({raw['name']})"
    if raw["function"] not in AGGREGATES:
        raise SuiteError(
            f"{label}: unknown function {raw['function']!r}; known: {', '.join(AGGREGATES)}"
        )
    entries = raw.get("entries")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, str) for e in entries):
        raise SuiteError(f"{label}: 'entries' must be a list of entry names")
    missing = [e for e in entries if e not in entry_names]
    if missing:
        raise SuiteError(
            f"{label}: no entry named {', '.join(missing)}; entries: {', '.join(entry_names)}"
        )
    if len(set(entries)) != len(entries):
        raise SuiteError(f"{label}: an entry is named twice in 'entries'")
    if not isinstance(raw.get("description", ""), str):
        raise SuiteError(f"{label}: 'description' is not a string")
    return SuiteAggregate(
        name=raw["name"],
        function=raw["function"],
        entries=tuple(entries),
        description=raw.get("description", ""),
    )


def load_suite(name_or_path: str | Path) -> Suite:
    """A bundled suite by name ('generic-vqa', 'muse-mc', 'muse-demo', 'mevqa', 'avis', 'demo')
    or a suite TOML file by path."""
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix == ".toml" or os.path.lexists(candidate):
        path = candidate
        problem = input_problem(path)
        if problem is not None:
            raise SuiteError(f"suite file {path} {problem}")
    else:
        path = SUITES_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise SuiteError(
                f"unknown suite {str(name_or_path)!r}; bundled: {', '.join(available_suites())} "
                "(or give the path of a .toml file)"
            )
    try:
        raw = read_toml(path)
    except OSError as e:
        raise SuiteError(f"cannot read the suite file {path}: {e.strerror or e}") from None
    except TomlFileError as e:
        raise SuiteError(f"suite file {e}") from None
    where = f"suite file {path}"
    entries_raw = raw.get("entry")
    if not isinstance(entries_raw, list) or not entries_raw:
        raise SuiteError(f"{where}: no [[entry]] tables")
    entries = [_entry(r, i, where) for i, r in enumerate(entries_raw)]
    names = [e.name for e in entries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SuiteError(f"{where}: entry names must be unique; repeated: {', '.join(repeated)}")
    aggregates_raw = raw.get("aggregate", [])
    if not isinstance(aggregates_raw, list):
        raise SuiteError(f"{where}: 'aggregate' must be [[aggregate]] tables")
    aggregates = tuple(_aggregate(r, i, where, names) for i, r in enumerate(aggregates_raw))
    agg_names = [a.name for a in aggregates]
    repeated = sorted({n for n in agg_names if agg_names.count(n) > 1})
    if repeated:
        raise SuiteError(
            f"{where}: aggregate names must be unique; repeated: {', '.join(repeated)}"
        )
    return Suite(
        name=str(raw.get("name", path.stem)),
        entries=entries,
        description=str(raw.get("description", "")),
        path=path,
        aggregates=aggregates,
    )
