"""The dataset catalogue: every dataset a bundled suite reads, as typed data.

One ``Dataset`` per dataset. A *questions* dataset holds the files suite entries read and
names those entries; an *images* dataset holds images that questions datasets point at
(``images_from``), so an image collection several datasets share (Visual Genome, COCO,
GQA's images) is described once. The data is ``catalogue.toml`` beside this module, read by
:func:`hammr.datasets.catalogue_file.load_catalogue` (whose docstring describes its fields).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DATASET_KINDS",
    "PAPERS",
    "SOURCE_KINDS",
    "Catalogue",
    "CatalogueError",
    "Dataset",
    "HubCopy",
    "ImageIndex",
    "Layout",
    "Link",
    "Member",
    "PerImageUrl",
    "Source",
]

VERSION = 1
PAPERS = ("hammr", "avis", "mulprog", "muse")
DATASET_KINDS = ("questions", "images")
SOURCE_KINDS = (
    "questions",
    "annotations",
    "bundle",
    "images_archive",
    "url_list",
    "image_index",
    "hub_repo",
    "form",
)
UNPACK = ("zip", "split-zip", "tar", "tar.gz")
ACCESS = ("open", "form")


class CatalogueError(ValueError):
    """The catalogue is malformed (the message names the dataset and the field), or a name
    asked of it is not there."""


@dataclass(frozen=True)
class Member:
    """An archive path (one member, or a prefix ending in '/') and where it goes."""

    member: str
    to: str


@dataclass(frozen=True)
class Link:
    path: str
    target: str
    optional: bool = False


@dataclass(frozen=True)
class Layout:
    files: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    generated: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    url: str
    target: str
    size: int | None = None
    size_approx: str = ""
    sha256: str = ""
    md5: str = ""
    checksum_url: str = ""
    parts: int | None = None
    part_digits: int = 0
    unpack: str = ""
    members: tuple[Member, ...] = ()
    access: str = "open"
    http_reason: str = ""
    note: str = ""

    def urls(self) -> tuple[str, ...]:
        """Every URL the source stands for (one, or each part of a numbered series)."""
        if self.parts is None:
            return (self.url,)
        return tuple(
            self.url.replace("{part}", str(i).zfill(self.part_digits)) for i in range(self.parts)
        )

    @property
    def checksum(self) -> tuple[str, str] | None:
        """(algorithm, hex digest) where the publisher gives one in the catalogue."""
        if self.sha256:
            return ("sha256", self.sha256)
        if self.md5:
            return ("md5", self.md5)
        return None


@dataclass(frozen=True)
class PerImageUrl:
    source: str
    file: str
    key: str
    field: str
    local: str
    records: str = ""
    url_template: str = ""
    name_pattern: str = ""
    http_reason: str = ""
    note: str = ""


@dataclass(frozen=True)
class ImageIndex:
    file: str
    key: str
    path: str
    base: str
    local: str
    records: str = ""


@dataclass(frozen=True)
class HubCopy:
    repo: str
    differs: str
    publisher: bool
    revision: str = ""
    config: str = ""
    split: str = ""
    question: str = ""
    answers: str = ""
    image: str = ""
    image_config: str = ""
    files: tuple[str, ...] = ()
    file_sha256: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str
    title: str
    summary: str
    papers: tuple[str, ...]
    homepage: str
    terms: str
    terms_url: str
    layout: Layout
    sources: tuple[Source, ...]
    entries: tuple[str, ...] = ()
    images_from: tuple[str, ...] = ()
    per_image_url: tuple[PerImageUrl, ...] = ()
    image_index: tuple[ImageIndex, ...] = ()
    hf: HubCopy | None = None
    whole_archive_only: bool = False
    size_approx: str = ""
    notes: tuple[str, ...] = ()
    todo: tuple[str, ...] = ()

    def exact_size(self) -> int | None:
        """The sum of the sources' exact sizes, when every fetchable source has one."""
        sizes = [s.size for s in self.sources if s.access == "open"]
        if not sizes or any(size is None for size in sizes):
            return None
        return sum(size for size in sizes if size is not None)

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise CatalogueError(f"dataset {self.name!r} has no source {name!r}")


@dataclass(frozen=True)
class Catalogue:
    datasets: tuple[Dataset, ...]
    version: int = VERSION

    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.datasets)

    def get(self, name: str) -> Dataset:
        for d in self.datasets:
            if d.name == name:
                return d
        raise CatalogueError(
            f"the catalogue has no dataset {name!r}; it has {', '.join(self.names())}"
        )

    def find_entry(self, suite: str, entry: str) -> Dataset | None:
        """The questions dataset that suite entry ``suite/entry`` reads; None when no dataset
        lists it (a suite of one's own)."""
        wanted = f"{suite}/{entry}"
        return next((d for d in self.datasets if wanted in d.entries), None)

    def for_entry(self, suite: str, entry: str) -> Dataset:
        """As :meth:`find_entry`, CatalogueError when no dataset lists the entry."""
        found = self.find_entry(suite, entry)
        if found is None:
            raise CatalogueError(f"no catalogue dataset lists the suite entry {suite}/{entry!r}")
        return found

    def with_images(self, datasets: Sequence[Dataset]) -> tuple[Dataset, ...]:
        """``datasets`` and the images datasets they read, in catalogue order."""
        names = {d.name for d in datasets}
        todo = [n for d in datasets for n in d.images_from]
        while todo:
            name = todo.pop()
            if name not in names:
                names.add(name)
                todo.extend(self.get(name).images_from)
        return tuple(d for d in self.datasets if d.name in names)

    def for_entries(self, entries: Sequence[tuple[str, str]]) -> tuple[Dataset, ...]:
        """The datasets (with their images datasets) that these (suite, entry) pairs read."""
        return self.with_images([self.for_entry(suite, entry) for suite, entry in entries])

    def for_experiment(self, name: str) -> tuple[Dataset, ...]:
        """The datasets the runs of experiment ``name`` (a bundled name or a path) read, with
        their images datasets, in catalogue order. ExperimentError for an unknown experiment;
        CatalogueError when a run reads an entry no dataset lists."""
        # imported here: the catalogue alone stays a quick read for `data list`
        from hammr.eval.suites import load_suite
        from hammr.experiments import load_experiment

        experiment = load_experiment(name)
        pairs: list[tuple[str, str]] = []
        for run in experiment.runs:
            suite = load_suite(run.suite)
            for entry in run.entries or tuple(e.name for e in suite.entries):
                if (suite.name, entry) not in pairs:
                    pairs.append((suite.name, entry))
        return self.for_entries(pairs)
