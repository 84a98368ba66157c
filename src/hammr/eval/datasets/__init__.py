"""Dataset adapters: each reads one official annotation file, as its authors distribute it, into
:class:`~hammr.eval.types.Sample` records. An adapter downloads nothing; it reads the files
``hammr data get`` (:mod:`hammr.datasets`) or the user put there. Each adapter's module
docstring names the official file, its schema, and how far that schema was checked against
real data here.

``load_dataset(name, path, ...)`` is the way in: it runs the adapter, makes sample ids unique,
optionally draws a seeded random subset, and optionally checks that the image files exist.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hammr.eval.datasets import (
    encvqa,
    gqa,
    hrbench,
    hub_parquet,
    infoseek,
    jsonl,
    mevqa,
    mme_realworld,
    nlvr2,
    okvqa,
    pointqa,
    tallyqa,
    textvqa,
    vstar,
    zoombench,
)
from hammr.eval.datasets._common import (
    Adapter,
    DatasetError,
    MissingFileError,
    MissingImage,
    MissingImagesError,
    UnsafePathError,
    require_inside,
)
from hammr.eval.types import Sample

__all__ = [
    "ADAPTERS",
    "Adapter",
    "DatasetError",
    "MissingFileError",
    "MissingImage",
    "MissingImagesError",
    "UnsafePathError",
    "adapter_options",
    "get_adapter",
    "load_dataset",
    "missing_images",
    "sample_subset",
]

ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        gqa.ADAPTER,
        textvqa.ADAPTER,
        tallyqa.ADAPTER,
        nlvr2.ADAPTER,
        *pointqa.ADAPTERS,
        encvqa.ADAPTER,
        vstar.ADAPTER,
        hrbench.ADAPTER,
        mme_realworld.ADAPTER,
        zoombench.ADAPTER,
        mevqa.ADAPTER,
        infoseek.ADAPTER,
        okvqa.ADAPTER,
        jsonl.ADAPTER,
        hub_parquet.ADAPTER,
    )
}
"""Adapter name -> adapter."""

IMAGE_META_KEYS = ("crop_image",)
"""Keys of ``Sample.meta`` that name an image file (ZoomBench's zoomed-in view)."""

MISSING_SHOWN = 5
"""How many missing image paths a MissingImagesError quotes."""


def get_adapter(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise DatasetError(
            f"unknown dataset adapter {name!r}; known: {', '.join(sorted(ADAPTERS))}"
        ) from None


def adapter_options(adapter: Adapter) -> dict[str, Any]:
    """The adapter's own options and their defaults (keyword-only parameters of its loader
    other than ``images`` and ``split``)."""
    return {
        p.name: p.default
        for p in inspect.signature(adapter.load).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in {"images", "split"}
    }


def _unique_ids(samples: list[Sample]) -> list[Sample]:
    """Repeated ids get '#2', '#3', ... in file order, so every sample can be told apart (and
    sampled) while the first occurrence keeps the official id."""
    seen: dict[str, int] = {}
    out = []
    for s in samples:
        n = seen.get(s.id, 0) + 1
        seen[s.id] = n
        out.append(s if n == 1 else replace(s, id=f"{s.id}#{n}"))
    return out


def _rank(seed: int, sample: Sample) -> bytes:
    return hashlib.sha256(f"{seed}\x1f{sample.dataset}\x1f{sample.id}".encode()).digest()


def sample_subset(samples: Sequence[Sample], limit: int | None, seed: int = 0) -> list[Sample]:
    """``limit`` samples drawn at random, reproducibly: each sample's rank is a hash of (seed,
    dataset, id), and the ``limit`` lowest ranks are returned in rank order. The draw depends
    only on the ids (not on file order or on re-reading the file), and the first k of a larger
    limit are exactly the draw for limit k. ``limit=None`` returns every sample in file order."""
    if limit is None:
        return list(samples)
    if limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    order = sorted(range(len(samples)), key=lambda i: (_rank(seed, samples[i]), i))
    return [samples[i] for i in order[:limit]]


def data_folders(path: Path, images: Path | None) -> list[Path]:
    """The folders a dataset's images may lie in: ``images`` when given, and the annotation
    file's folder (the annotation folder itself when ``path`` is one, as V* Bench's is)."""
    own = path if path.is_dir() else path.parent
    return [images, own] if images is not None else [own]


def check_image_paths(
    name: str, path: Path, images: Path | None, samples: Iterable[Sample]
) -> None:
    """Raise :class:`UnsafePathError` when a sample's image (or ``meta['crop_image']``) lies
    outside :func:`data_folders`, naming the file, the sample and the path."""
    folders = data_folders(path, images)
    for s in samples:
        named = list(s.images.items())
        named += [(k, Path(str(s.meta[k]))) for k in IMAGE_META_KEYS if k in s.meta]
        for variable, image in named:
            require_inside(folders, image, name, f"{path}, sample {s.id!r} ({variable})")


def missing_images(samples: Iterable[Sample]) -> list[MissingImage]:
    """Every (sample, input variable, path) whose image file does not exist."""
    return [
        MissingImage(s.id, variable, path)
        for s in samples
        for variable, path in s.images.items()
        if not path.is_file()
    ]


def load_dataset(
    name: str,
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    check_images: bool = False,
    **options: Any,
) -> list[Sample]:
    """Samples of the official file ``path`` read by adapter ``name``.

    ``images``: where the images are (default: the file's folder; see each adapter for the layout
    under it). ``split``: for adapters whose file holds several splits or whose image folder
    depends on it (nlvr2, textvqa, encvqa); the others ignore it. ``limit``/``seed``: a seeded
    random subset (see :func:`sample_subset`); None keeps every sample in file order.
    ``check_images``: raise :class:`MissingImagesError` naming the first missing paths when a
    returned sample's image file does not exist (use :func:`missing_images` for the full list).
    ``options``: the adapter's own options (:func:`adapter_options`); unknown ones are an error.

    An annotation whose image path leads outside the images folder and the annotation file's
    folder (``../../etc/passwd``, an absolute path elsewhere) raises :class:`UnsafePathError`
    naming the file and the sample; links placed inside those folders are followed (see
    :func:`~hammr.eval.datasets._common.within`).
    """
    adapter = get_adapter(name)
    known = adapter_options(adapter)
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = ", ".join(f"{k}={v!r}" for k, v in known.items()) or "no options"
        raise DatasetError(f"{name}: unknown option(s) {', '.join(unknown)}; it takes {takes}")
    samples = adapter.load(Path(path), images=images, split=split, **options)
    check_image_paths(name, Path(path), images, samples)
    chosen = sample_subset(_unique_ids(samples), limit, seed)
    if check_images:
        missing = missing_images(chosen)
        if missing:
            shown = "; ".join(
                f"{m.sample_id} {m.variable}: {m.path}" for m in missing[:MISSING_SHOWN]
            )
            more = (
                f" (and {len(missing) - MISSING_SHOWN} more)"
                if len(missing) > MISSING_SHOWN
                else ""
            )
            raise MissingImagesError(
                f"{name}: {len(missing)} image file(s) of {len(chosen)} samples do not exist: "
                f"{shown}{more}",
                missing,
            )
    return chosen
