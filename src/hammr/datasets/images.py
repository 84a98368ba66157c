"""Where a drawn sample's missing image comes from: a URL the dataset publishes for it
(``[[dataset.per_image_url]]``), or a file of an archive already unpacked that an index names
(``[[dataset.image_index]]``).

An image is matched by its file name under the image folder the spec lays out: the adapters
look in more than one place (Visual Genome's ``<id>.jpg`` or ``VG_100K*/<id>.jpg``, COCO's
``val2014/`` or not), so the path a sample names for a missing image is one of several the
adapter would accept, while the file name is the same in all of them. Links of the layout
(``tallyqa/images/VG_100K`` -> ``visual_genome/VG_100K``) are followed first, so a
question set that reads another dataset's images finds that dataset's spec.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from hammr.datasets.catalogue import Dataset, ImageIndex, PerImageUrl
from hammr.input_file import open_input, read_input_text


class ImageSourceError(Exception):
    """A URL list or an index that cannot be read; one line."""


@dataclass(frozen=True)
class ImageJob:
    url: str
    local: str
    """Where it goes, relative to the data folder."""
    covers: tuple[str, ...] = ()
    """The wanted paths it stands for (the adapter may name the image another way)."""


def relative_in(path: Path, data_dir: Path) -> str | None:
    """``path`` (links followed) relative to ``data_dir`` (links followed), '/'-separated;
    None when it is outside."""
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(data_dir))
    try:
        return real.relative_to(root).as_posix()
    except ValueError:
        return None


def spec_root(local: str, dataset: Dataset) -> str:
    """The folder a spec's images live under: the longest image folder of the dataset's
    layout that holds ``local``, else the part of ``local`` before its first field."""
    static = local.split("{", 1)[0].rsplit("/", 1)[0]
    roots = [r for r in dataset.layout.images if static == r or static.startswith(r + "/")]
    return max(roots, key=len) if roots else static


def _under(rel: str, root: str) -> bool:
    return root in ("", ".") or rel.startswith(root + "/")


def read_records(path: Path, key: str = "") -> Iterator[Mapping[str, Any]]:
    """The records of a URL list or index: a CSV with a header row, JSON Lines, a JSON list,
    or the list under ``key`` of a JSON object."""
    try:
        if path.suffix.lower() == ".csv":
            with open_input(path, newline="") as f:
                yield from csv.DictReader(f)
            return
        text = read_input_text(path)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ImageSourceError(f"{path}: cannot be read ({e})") from None
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        data = None
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            rows = [json.loads(line) for line in lines]
        except json.JSONDecodeError as e:
            raise ImageSourceError(f"{path}: neither JSON nor JSON Lines ({e})") from None
        yield from (r for r in rows if isinstance(r, dict))
        return
    if key:
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            raise ImageSourceError(f"{path}: no list under the key {key!r}")
        data = data[key]
    if not isinstance(data, list):
        raise ImageSourceError(f"{path}: not a list of records")
    yield from (r for r in data if isinstance(r, dict))


def _fields(record: Mapping[str, Any], spec_key: str, url: str = "") -> dict[str, Any]:
    fields = dict(record)
    if url:
        folder = PurePosixPath(urlsplit(url).path).parent.name
        fields.setdefault("url_folder", folder)
    key = str(record.get(spec_key, ""))
    fields.setdefault("pair", re.sub(r"-\d+$", "", key))
    return fields


def _format(template: str, fields: Mapping[str, Any]) -> str | None:
    try:
        return template.format_map(fields)
    except (KeyError, ValueError, IndexError, AttributeError, TypeError):
        return None


def _safe_local(local: str | None) -> str | None:
    if not local or local.startswith("/") or "\\" in local:
        return None
    parts = local.split("/")
    return None if any(p in ("", ".", "..") for p in parts) else local


def url_jobs(
    specs: Sequence[tuple[Dataset, PerImageUrl]], wanted: Mapping[str, str], data_dir: Path
) -> list[ImageJob]:
    """The downloads for ``wanted`` (missing image path relative to the data folder -> its
    file name), each with the wanted paths it covers."""
    jobs: dict[str, ImageJob] = {}
    covered: set[str] = set()
    for dataset, spec in specs:
        root = spec_root(spec.local, dataset)
        names: dict[str, list[str]] = {}
        for rel, name in wanted.items():
            if rel not in covered and _under(rel, root):
                names.setdefault(name, []).append(rel)
        if not names:
            continue
        if spec.name_pattern:
            pattern = re.compile(spec.name_pattern)
            for name, rels in names.items():
                found = pattern.fullmatch(name)
                if found is None:
                    continue
                fields: dict[str, Any] = {
                    k: int(v) if v.isdigit() else v for k, v in found.groupdict().items()
                }
                fields["file_name"] = name
                url, local = _format(spec.url_template, fields), _format(spec.local, fields)
                local = _safe_local(local)
                if url and local:
                    jobs.setdefault(local, ImageJob(url, local, tuple(rels)))
                    covered.update(rels)
            continue
        path = data_dir / spec.file
        if not path.exists():
            continue
        for record in read_records(path, spec.records):
            url = spec.url_template and _format(spec.url_template, _fields(record, spec.key))
            if not spec.url_template:
                value = record.get(spec.field)
                url = value if isinstance(value, str) else None
            if not url:
                continue
            local = _safe_local(_format(spec.local, _fields(record, spec.key, url)))
            if local is None:
                continue
            name = PurePosixPath(local).name
            if name in names:
                rels = names.pop(name)
                jobs.setdefault(local, ImageJob(url, local, tuple(rels)))
                covered.update(rels)
                if not names:
                    break
    return list(jobs.values())


def link_from_index(
    indexes: Sequence[tuple[Dataset, ImageIndex]], wanted: Mapping[str, str], data_dir: Path
) -> set[str]:
    """Link each wanted image an index names to its file in an unpacked archive; the wanted
    paths linked."""
    linked: set[str] = set()
    for dataset, index in indexes:
        root = spec_root(index.local, dataset)
        names = {n: rel for rel, n in wanted.items() if rel not in linked and _under(rel, root)}
        path = data_dir / index.file
        if not names or not path.exists():
            continue
        for record in read_records(path, index.records):
            local = _safe_local(_format(index.local, _fields(record, index.key)))
            inner = record.get(index.path)
            if local is None or not isinstance(inner, str):
                continue
            name = PurePosixPath(local).name
            target_rel = _safe_local(f"{index.base}/{inner}")
            if name not in names or target_rel is None:
                continue
            target = data_dir / target_rel
            link = data_dir / local
            if target.is_file() and not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                if link.is_symlink():  # a dangling one
                    link.unlink()
                link.symlink_to(os.path.relpath(target, link.parent))
            if link.exists():
                linked.add(names.pop(name))
            if not names:
                break
    return linked


__all__ = [
    "ImageJob",
    "ImageSourceError",
    "link_from_index",
    "read_records",
    "relative_in",
    "spec_root",
    "url_jobs",
]
