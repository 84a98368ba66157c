"""What the catalogue says of a source's size and role, shared by ``hammr data get`` and the
tables of docs/data.md."""

from __future__ import annotations

import re

from hammr.datasets.catalogue import Dataset, Source

FILE_KINDS = ("questions", "annotations", "bundle", "image_index")
"""Sources that are a dataset's files (not its images): fetched whatever the draw."""


def human_size(size: int) -> str:
    """Bytes as a person reads them (decimal units, as publishers state sizes)."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def approx_bytes(text: str) -> int | None:
    """A size as a page states it ("about 9 GB", "221 MB") in bytes; None when none is."""
    found = re.search(r"([0-9][0-9.,]*)\s*(TB|GB|MB|kB|KB|B)\b", text)
    if found is None:
        return None
    number = float(found.group(1).replace(",", ""))
    unit = {"TB": 1e12, "GB": 1e9, "MB": 1e6, "kB": 1e3, "KB": 1e3, "B": 1}[found.group(2)]
    return int(number * unit)


def source_bytes(source: Source) -> int | None:
    return source.size if source.size is not None else approx_bytes(source.size_approx)


def split_parts(dataset: Dataset, source: Source) -> tuple[Source, ...]:
    """The earlier parts of a split zip: the dataset's sources before it with its target and
    nothing to unpack."""
    if source.unpack != "split-zip":
        return ()
    before = dataset.sources[: dataset.sources.index(source)]
    return tuple(s for s in before if s.target == source.target and not s.unpack)


def is_part(dataset: Dataset, source: Source) -> bool:
    """Whether ``source`` is an earlier part of one of the dataset's split zips (fetched with
    it, not on its own)."""
    return any(source in split_parts(dataset, s) for s in dataset.sources)


__all__ = ["FILE_KINDS", "approx_bytes", "human_size", "is_part", "source_bytes", "split_parts"]
