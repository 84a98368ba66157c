"""A fixture copy of every dataset publisher's site the catalogue names, for download tests.

``build_site(root)`` writes, under ``root/<host>/<path>``, a small file in the official format
for every URL of every catalogue source (the form-gated ones excepted), and every image URL
that the fixture's URL lists name; :class:`fixture_http.FixtureServer` serves that folder and
``hammr data get --mirror http://127.0.0.1:PORT`` fetches from it.

The catalogue is read as it is (``load_catalogue()``): where each file goes (``target``),
which archive member lands where (``members`` is inverted to name each member), the split
of a split zip, the parts of a numbered series, the hub repository's URL. Each dataset's
*contents* are written by hand, by a builder of :data:`BUILDERS` keyed by the dataset's name:
a catalogue dataset with no builder stops :func:`build_site`, so a new entry needs a fixture.

Per questions dataset there are 3-5 questions, each on an image of its own where the format
allows, and each images archive or URL list holds 2 images no question uses (``extra``), so
that a test can tell "fetched the drawn images" from "fetched them all". Images are 24x24
single-colour JPEG/PNG files, no two alike; the same image has the same bytes in an archive
and at its URL.

What the site records (:class:`Site`): for every suite entry the samples the adapter loads and
the image files each reads (``samples``), every image by dataset and key (``images``,
``images_of``), every path served, which parts of a series are served (``parts``: Google
Landmarks' images_000.tar and images_001.tar of 500), the hub repositories' files, and the
files only a request form gives (``place_form_images`` puts them where a user would).
``fixture_catalogue()`` is the catalogue with the sizes and checksums of the fixture files in
place of the publisher's, for a downloader that checks them.
"""

from __future__ import annotations

import base64
import csv
import functools
import gzip
import hashlib
import io
import json
import posixpath
import random
import tarfile
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from PIL import Image

from hammr.datasets.catalogue import Catalogue, Dataset, Source
from hammr.datasets.catalogue_file import load_catalogue
from hammr.eval.suites import SuiteEntry, load_suite
from split_zip import write_split_zip

__all__ = [
    "BUILDERS",
    "FixtureError",
    "FixtureImage",
    "SampleImage",
    "Site",
    "build_site",
    "member_name",
    "served_path",
]

SIDE = 24
"""Every fixture image is SIDE x SIDE pixels."""
HUB_REVISION = "5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c"
"""The commit the fixture hub repositories answer with."""
_DATE = (2020, 1, 1, 0, 0, 0)
_MTIME = 1577836800


class FixtureError(Exception):
    """The catalogue and the fixture builders disagree (a dataset with no builder, a source
    no builder wrote, a file no source brings)."""


def served_path(url: str) -> str:
    """Where ``url`` lies under the site's root (and the path the fixture server is asked for
    through ``--mirror``): ``HOST/PATH``, the query dropped."""
    parts = urlsplit(url)
    return parts.netloc + unquote(parts.path)


@dataclass(frozen=True)
class SampleImage:
    """One image file a loaded sample reads."""

    path: str
    """Where the adapter reads it, relative to the data folder (maybe through a layout link)."""
    dataset: str
    """The catalogue dataset whose image it is."""
    key: str
    """Its key in ``Site.images[dataset]``."""


@dataclass(frozen=True)
class FixtureImage:
    dataset: str
    key: str
    """The image's id where the dataset has one, else its file name in the release."""
    local: str
    """Where its source puts it under the data folder: its URL list's ``local`` template,
    where an archive unpacks it, or where a user puts it after the request form."""
    data: bytes = field(repr=False)
    url: str = ""
    """Its own URL ('' when it has none)."""
    archive: str = ""
    """The served path of the archive, bundle or hub repository file holding it ('' none)."""
    member: str = ""
    """Its name inside that archive ('' when the archive is the file itself)."""
    extra: bool = False
    """No question of the fixture uses it."""
    form: bool = False
    """Only the request form gives it (``Site.place_form_images``)."""

    @property
    def served(self) -> str:
        """The path it is fetched at on its own, else its archive's ('' for a form image)."""
        return served_path(self.url) if self.url else self.archive


@dataclass
class Site:
    root: Path
    catalogue: Catalogue
    samples: dict[str, dict[str, tuple[SampleImage, ...]]]
    """'suite/entry' -> sample id -> the images it reads (in the sample's variable order)."""
    images: dict[str, dict[str, FixtureImage]]
    """catalogue dataset -> key -> image."""
    served: set[str]
    """Every path that answers 200."""
    urls: dict[str, str]
    """served path -> the URL it stands for."""
    parts: dict[str, tuple[int, ...]]
    """'dataset/source' of a numbered series -> the parts served (the others answer 404)."""
    hub_files: dict[str, tuple[str, ...]]
    """dataset -> the files of its hub repository (paths inside it)."""
    form_files: dict[str, dict[str, bytes]]
    """dataset with a form source -> data-folder path -> bytes, as the form's release has them."""

    def images_of(self, dataset: str) -> dict[str, str]:
        """key (image id or file name) -> the served path it comes from on its own, else its
        archive's; '' for an image only a request form gives."""
        return {k: image.served for k, image in self.images.get(dataset, {}).items()}

    def extra_images(self, dataset: str) -> set[str]:
        """The keys of the dataset's images no question uses."""
        return {k for k, image in self.images.get(dataset, {}).items() if image.extra}

    def entry_images(self, entry: str) -> dict[str, tuple[str, ...]]:
        """sample id -> the image files it reads (data-folder paths), for 'suite/entry'."""
        return {sid: tuple(i.path for i in imgs) for sid, imgs in self.samples[entry].items()}

    def question_images(self, dataset: str) -> dict[str, tuple[str, ...]]:
        """sample id -> image files, over every suite entry of a questions dataset."""
        out: dict[str, tuple[str, ...]] = {}
        for entry in self.catalogue.get(dataset).entries:
            out.update(self.entry_images(entry))
        return out

    def file(self, served: str) -> Path:
        """The fixture file of a served path."""
        return self.root / served

    def place_form_images(self, dataset: str, data_dir: Path) -> list[Path]:
        """Put the files of ``dataset``'s request-form release where a user would (OVEN's
        images where the infoseek adapter looks, with ovenid2impath.csv; NLVR2's pairs in
        nlvr2/images/test1/). Returns the paths written."""
        if dataset not in self.form_files:
            raise KeyError(
                f"{dataset!r} has no files given after a request form; these do: "
                f"{', '.join(sorted(self.form_files))}"
            )
        written = []
        for rel, data in self.form_files[dataset].items():
            target = Path(data_dir) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written.append(target)
        return written

    def fixture_catalogue(self) -> Catalogue:
        """The catalogue with each served source's exact size and publisher checksum (where
        the catalogue gives one) replaced by the fixture file's."""
        datasets = []
        for d in self.catalogue.datasets:
            sources = []
            for s in d.sources:
                path = served_path(s.url)
                if s.parts is None and path in self.served and self.file(path).is_file():
                    data = self.file(path).read_bytes()
                    s = replace(
                        s,
                        size=len(data) if s.size is not None else None,
                        sha256=hashlib.sha256(data).hexdigest() if s.sha256 else "",
                        md5=hashlib.md5(data).hexdigest() if s.md5 else "",
                    )
                sources.append(s)
            datasets.append(replace(d, sources=tuple(sources)))
        return replace(self.catalogue, datasets=tuple(datasets))


# -- archives ----------------------------------------------------------------------------------


def member_name(source: Source, local: str) -> str | None:
    """The archive path that ``source`` unpacks to ``local`` (a data-folder path), inverting
    its ``members`` (none: the whole archive goes into its target); None when it puts
    nothing there."""
    if not source.members:
        if source.target == ".":
            return local
        prefix = source.target + "/"
        return local[len(prefix) :] if local.startswith(prefix) else None
    for m in source.members:
        if m.member == "" or m.member.endswith("/"):
            prefix = m.to + "/"
            if local.startswith(prefix):
                return m.member + local[len(prefix) :]
        elif local == m.to:
            return m.member
    return None


def _folders(names: Iterable[str]) -> list[str]:
    out: set[str] = set()
    for name in names:
        parts = name.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) + "/" for i in range(len(parts)))
    return sorted(out)


def zip_bytes(files: Mapping[str, bytes]) -> bytes:
    """A zip of ``files`` (archive path -> bytes) with its folders' entries, fixed dates."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for folder in _folders(files):
            z.writestr(zipfile.ZipInfo(folder, _DATE), b"")
        for name in sorted(files):
            z.writestr(zipfile.ZipInfo(name, _DATE), files[name], zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def tar_bytes(files: Mapping[str, bytes], *, gz: bool = False) -> bytes:
    """A tar (gzip-compressed with ``gz``) of ``files`` with its folders' entries, fixed
    times."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for folder in _folders(files):
            info = tarfile.TarInfo(folder.rstrip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _MTIME
            t.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, _MTIME
            t.addfile(info, io.BytesIO(files[name]))
    data = buf.getvalue()
    return gzip.compress(data, mtime=0) if gz else data


def split_zip_bytes(files: Mapping[str, bytes], parts: int) -> list[bytes]:
    """A split zip of ``files`` (archive path -> bytes, with its folders' entries) in exactly
    ``parts`` parts, in order (.z01, .z02, ..., .zip), as Info-ZIP's ``zip -s`` cuts one
    (tests/split_zip.py)."""
    members: list[tuple[str, bytes | None]] = [(f, None) for f in _folders(files)]
    members += [(name, files[name]) for name in sorted(files)]
    total = sum(len(v) for v in files.values()) + 100 * len(members)
    size = max(1024, -(-total // parts))
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(64):
            for old in Path(tmp).iterdir():
                old.unlink()
            made = write_split_zip(Path(tmp) / "archive.zip", members, size, deflate=True)
            if len(made) == parts:
                return [p.read_bytes() for p in made]
            whole = sum(p.stat().st_size for p in made)
            size = size + max(64, size // 50) if len(made) > parts else -(-whole // parts)
    raise FixtureError(f"no part size cuts {sorted(files)} into {parts} parts")


# -- the builder's workshop --------------------------------------------------------------------


@dataclass
class _Want:
    """An image a questions builder needs from an images dataset."""

    key: str
    local: str
    hint: dict[str, Any] = field(default_factory=dict)
    extra: bool = False
    data: bytes = b""


@functools.cache
def _suite_entry(name: str) -> SuiteEntry:
    suite, entry = name.split("/", 1)
    return load_suite(suite).entry(entry)


def _entries(d: Dataset) -> list[tuple[str, SuiteEntry]]:
    return [(name, _suite_entry(name)) for name in d.entries]


def _one_entry(d: Dataset) -> tuple[str, SuiteEntry]:
    entries = _entries(d)
    if len(entries) != 1:
        raise FixtureError(f"{d.name}: the builder expects one suite entry, not {d.entries}")
    return entries[0]


def _join(*parts: str) -> str:
    return posixpath.normpath(posixpath.join(*[p for p in parts if p not in {"", "."}]))


def _through_links(d: Dataset, path: str) -> str:
    """``path`` with a layout link at its start replaced by what the link points at."""
    for link in d.layout.links:
        if path.startswith(link.path + "/"):
            return link.target + path[len(link.path) :]
    return path


def _json(value: Any, indent: int | None = None) -> bytes:
    return json.dumps(value, indent=indent).encode()


def _jsonl(records: Iterable[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _csv(header: list[str], rows: Iterable[Mapping[str, Any]], delimiter: str = ",") -> bytes:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, header, delimiter=delimiter, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue().encode()


class _Build:
    def __init__(self, root: Path, catalogue: Catalogue) -> None:
        self.root = root
        self.catalogue = catalogue
        self.samples: dict[str, dict[str, tuple[SampleImage, ...]]] = {}
        self.images: dict[str, dict[str, FixtureImage]] = {}
        self.served: set[str] = set()
        self.urls: dict[str, str] = {}
        self.parts: dict[str, tuple[int, ...]] = {}
        self.hub_files: dict[str, tuple[str, ...]] = {}
        self.form_files: dict[str, dict[str, bytes]] = {}
        self.wanted: dict[str, dict[str, _Want]] = {}
        self._colour = 0
        self._digests: set[str] = set()

    def site(self) -> Site:
        return Site(
            root=self.root,
            catalogue=self.catalogue,
            samples=self.samples,
            images=self.images,
            served=self.served,
            urls=self.urls,
            parts=self.parts,
            hub_files=self.hub_files,
            form_files=self.form_files,
        )

    # -- pieces ------------------------------------------------------------------------------

    def picture(self, fmt: str = "JPEG") -> bytes:
        """A new 24x24 image of a colour no other fixture image has."""
        while True:
            i = self._colour
            self._colour += 1
            colour = ((37 * i + 11) % 256, (91 * i + 53) % 256, (173 * i + 101) % 256)
            buf = io.BytesIO()
            Image.new("RGB", (SIDE, SIDE), colour).save(buf, fmt)
            data = buf.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            if digest not in self._digests:
                self._digests.add(digest)
                return data

    def serve(self, url: str, data: bytes, *, index: str = "") -> str:
        """Write ``data`` where ``url`` is served (as the folder's ``index`` file when given:
        a URL that is also a folder of others). Returns the served path."""
        path = served_path(url)
        if "{" in path or "}" in path:
            raise FixtureError(f"unexpanded placeholder in {url}")
        target = self.root / path / index if index else self.root / path
        if target.exists() and target.read_bytes() != data:
            raise FixtureError(f"two different files for {url}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.served.add(path)
        self.urls.setdefault(path, url)
        return path

    def want(self, dataset: str, key: str, local: str, **hint: Any) -> None:
        have = self.wanted.setdefault(dataset, {}).get(key)
        if have is not None and have.local != local:
            raise FixtureError(f"{dataset} image {key} wanted at {have.local} and at {local}")
        self.wanted[dataset][key] = _Want(key, local, dict(hint))

    def collect(self, d: Dataset, extras: Iterable[_Want], fmt: str = "JPEG") -> list[_Want]:
        """The images asked of images dataset ``d`` by key, then ``extras``, each with bytes."""
        out = sorted(self.wanted.get(d.name, {}).values(), key=lambda w: w.key)
        for w in extras:
            w.extra = True
            out.append(w)
        for w in out:
            w.data = self.picture(fmt)
        return out

    def sample(self, entry: str, sample_id: str, *images: SampleImage) -> None:
        self.samples.setdefault(entry, {})[sample_id] = images

    def image(self, image: FixtureImage) -> None:
        images = self.images.setdefault(image.dataset, {})
        if image.key in images:
            raise FixtureError(f"{image.dataset}: two images keyed {image.key}")
        images[image.key] = image

    # -- sources -----------------------------------------------------------------------------

    def publish(
        self,
        d: Dataset,
        files: Mapping[str, bytes],
        *,
        others: Mapping[str, Mapping[str, bytes]] | None = None,
        parts: Mapping[str, int] | None = None,
    ) -> dict[str, tuple[str, str]]:
        """Serve every open source of ``d`` from ``files`` (data-folder path -> bytes, what the
        data folder holds once the sources are fetched and unpacked): a plain source serves
        the file at its target; an archive packs the files its members (or target) cover,
        named as the archive names them, plus ``others[path]`` (archive path -> bytes: files
        the archive holding ``path`` has that the catalogue does not keep); a numbered series
        puts each file in part ``parts[path]`` (default 0); a hub repository serves the files
        under its target as the hub does. Raises when a source gets no file or a file no
        source. Returns data-folder path -> (served archive path, member name; '' for a
        plain file)."""
        left = dict(files)
        placed: dict[str, tuple[str, str]] = {}
        others = others or {}
        parts = parts or {}
        split_part = {p.name for s in d.sources for p in _split_parts(d, s)}
        open_sources = [s for s in d.sources if s.access == "open" and s.name not in split_part]
        for s in sorted(open_sources, key=lambda s: bool(s.unpack) or s.kind == "hub_repo"):
            if s.kind == "hub_repo":
                placed.update(self._hub(d, s, left))
                continue
            if not s.unpack:
                if s.target not in left:
                    raise FixtureError(
                        f"{d.name}: no fixture file for source {s.name} ({s.target})"
                    )
                placed[s.target] = (self.serve(s.url, left.pop(s.target)), "")
                continue
            covered = {k: n for k in sorted(left) if (n := member_name(s, k)) is not None}
            if not covered:
                raise FixtureError(f"{d.name}: no fixture file goes in source {s.name}'s archive")
            extra = {n: v for k in covered for n, v in others.get(k, {}).items()}
            if s.parts is not None:
                placed.update(self._series(d, s, {k: left[k] for k in covered}, covered, parts))
            else:
                members = {n: left[k] for k, n in covered.items()} | extra
                served = self._archive(d, s, members)
                placed.update((k, (served, n)) for k, n in covered.items())
            for k in covered:
                del left[k]
        if left:
            raise FixtureError(f"{d.name}: no source brings {sorted(left)}")
        return placed

    def _archive(self, d: Dataset, s: Source, members: Mapping[str, bytes]) -> str:
        if s.unpack == "zip":
            return self.serve(s.url, zip_bytes(members))
        if s.unpack in {"tar", "tar.gz"}:
            return self.serve(s.url, tar_bytes(members, gz=s.unpack == "tar.gz"))
        if s.unpack == "split-zip":
            earlier = _split_parts(d, s)
            blobs = split_zip_bytes(members, len(earlier) + 1)
            for part, blob in zip(earlier, blobs, strict=False):
                self.serve(part.url, blob)
            return self.serve(s.url, blobs[-1])
        raise FixtureError(f"{d.name}/{s.name}: no fixture packer for unpack {s.unpack!r}")

    def _series(
        self,
        d: Dataset,
        s: Source,
        files: Mapping[str, bytes],
        names: Mapping[str, str],
        parts: Mapping[str, int],
    ) -> dict[str, tuple[str, str]]:
        urls = s.urls()
        placed = {}
        used = sorted({parts.get(k, 0) for k in files})
        for part in used:
            members = {names[k]: v for k, v in files.items() if parts.get(k, 0) == part}
            served = self._archive(d, replace(s, url=urls[part], parts=None), members)
            placed.update((k, (served, names[k])) for k in files if parts.get(k, 0) == part)
            if s.checksum_url:
                digits = str(part).zfill(s.part_digits)
                name = posixpath.basename(served)
                digest = hashlib.md5(self.file_bytes(served)).hexdigest()
                self.serve(s.checksum_url.replace("{part}", digits), f"{digest}  {name}\n".encode())
        self.parts[f"{d.name}/{s.name}"] = tuple(used)
        return placed

    def file_bytes(self, served: str) -> bytes:
        return (self.root / served).read_bytes()

    def _hub(self, d: Dataset, s: Source, left: dict[str, bytes]) -> dict[str, tuple[str, str]]:
        """A hub repository: each file at <repo URL>/resolve/main/<path>, the repository page,
        and the hub API's answers (/api/datasets/<repo>, its revision/main and tree/main)."""
        base = s.url.rstrip("/")
        repo = base.split("/datasets/", 1)[1]
        host = urlsplit(base)
        api = f"{host.scheme}://{host.netloc}/api/datasets/{repo}"
        prefix = s.target + "/"
        mine = {k[len(prefix) :]: left.pop(k) for k in sorted(left) if k.startswith(prefix)}
        if not mine:
            raise FixtureError(f"{d.name}: no fixture file in hub repository {s.name}")
        placed = {
            prefix + rel: (self.serve(f"{base}/resolve/main/{rel}", data), "")
            for rel, data in mine.items()
        }
        page = f"<html><body><h1>{repo}</h1>" + "".join(f"<p>{r}</p>" for r in mine)
        self.serve(base, (page + "</body></html>\n").encode(), index="index.html")
        info = {
            "id": repo,
            "sha": HUB_REVISION,
            "private": False,
            "gated": False,
            "siblings": [{"rfilename": rel} for rel in mine],
        }
        self.serve(api, _json(info), index="index.json")
        self.serve(f"{api}/revision/main", _json(info), index="index.json")
        tree = [
            {"type": "directory", "oid": "0" * 40, "size": 0, "path": f.rstrip("/")}
            for f in _folders(mine)
        ]
        tree += [
            {"type": "file", "oid": hashlib.sha1(v).hexdigest(), "size": len(v), "path": k}
            for k, v in mine.items()
        ]
        self.serve(f"{api}/tree/main", _json(tree), index="index.json")
        self.hub_files[d.name] = tuple(mine)
        return placed


def _split_parts(d: Dataset, s: Source) -> list[Source]:
    """The earlier parts of a split zip: the sources before it with its target and no unpack
    (as ``hammr data get`` reads them)."""
    if s.unpack != "split-zip":
        return []
    before = d.sources[: d.sources.index(s)]
    return [p for p in before if p.target == s.target and not p.unpack]


Builder = Callable[[_Build, Dataset], None]


# -- questions datasets --------------------------------------------------------------------------


def _vg(b: _Build, d: Dataset, images: str, image_id: str, folder: str) -> SampleImage:
    """A Visual Genome image read as ``<images>/<folder>/<id>.jpg`` (maybe through a link)."""
    path = f"{images}/{folder}/{image_id}.jpg"
    b.want("visual_genome", image_id, _through_links(d, path))
    return SampleImage(path, "visual_genome", image_id)


def _pointqa(b: _Build, d: Dataset) -> None:
    local_qa = [
        ("2377408", "VG_100K", "What color is this bus?", "red", (212, 148)),
        ("2319325", "VG_100K_2", "What shape is this sign?", "round", (88, 57)),
        ("2403977", "VG_100K", "What is this man holding?", "umbrella", (120, 90)),
    ]
    look_twice = [
        ("2414753", "VG_100K_2", "clocks", "How many clocks are there?", "2", (305, 121)),
        ("2410576", "VG_100K", "zebras", "How many zebras are in the picture?", "3", (150, 240)),
        ("2388561", "VG_100K_2", "boats", "How many boats are on the water?", "4", (60, 44)),
    ]
    files: dict[str, bytes] = {}
    for name, e in _entries(d):
        list_file = _join(posixpath.dirname(e.file), str(e.options["image_list"]))
        images = e.images or posixpath.dirname(e.file)
        data: dict[str, list[dict[str, Any]]] = {}
        if e.dataset == "pointqa_local":
            for image_id, folder, question, answer, (x, y) in local_qa:
                point = {"x": x, "y": y, "ans": answer}
                data[image_id] = [
                    {"question": question, "answer": answer, "point": point, "id": int(image_id)}
                ]
                b.sample(name, f"{image_id}-0", _vg(b, d, images, image_id, folder))
        else:
            for image_id, folder, things, question, answer, (x, y) in look_twice:
                data[image_id] = [
                    {
                        "id": int(image_id),
                        "img_question": question,
                        "ans": answer,
                        "qtype": "howmany",
                        "point": {"x": x, "y": y, "ans": answer},
                        "bbox": {"x": x - 10, "y": y - 10, "w": 20, "h": 20, "names": [things]},
                        "pt_question": "How many of these are there?",
                        "obj_type": things,
                    }
                ]
                b.sample(name, f"{image_id}-0", _vg(b, d, images, image_id, folder))
        files[e.file] = _json(data)
        files[list_file] = _json(list(data))
    b.publish(d, files)


def _tallyqa(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        ("2410408", "VG_100K_2", "How many people are wearing hats?", 2, False, 27),
        ("2377381", "VG_100K", "How many dogs are lying on the grass?", 1, False, 28),
        ("2399120", "VG_100K_2", "How many windows have open curtains?", 3, False, 29),
        ("2351234", "VG_100K", "How many cars?", 4, True, 30),
    ]
    records = []
    for image_id, folder, question, answer, simple, qid in questions:
        image = _vg(b, d, e.images or "tallyqa/images", image_id, folder)
        records.append(
            {
                "image": f"{folder}/{image_id}.jpg",
                "answer": answer,
                "data_source": "imported_genome" if simple else "amt",
                "question": question,
                "image_id": int(image_id),
                "issimple": simple,
                "question_id": qid,
            }
        )
        if not (simple and e.options.get("complex", True)):
            b.sample(name, str(qid), image)
    train = [dict(records[0], question_id=1, image="val2014/COCO_val2014_000000393225.jpg")]
    b.publish(d, {e.file: _json(records)}, others={e.file: {"train.json": _json(train)}})


def _encvqa(b: _Build, d: Dataset) -> None:
    inat, landmarks = "inaturalist_2021", "google_landmarks_v2"
    if set(d.images_from) != {inat, landmarks}:
        raise FixtureError(f"encvqa: images_from is {d.images_from}, the builder knows {inat}")
    rows: list[tuple[str, str, list[str], str, str, str, dict[str, Any]]] = [
        ("How tall can this plant grow?", "2 metres|6 feet", ["2686843", "2686901"],
         "templated", "inaturalist", "Rosa canina", {"split": "val"}),
        ("In which year was this building completed?", "1889", ["6e158a47eb2ca3f6"],
         "automatic", "landmarks", "Example tower", {"part": 0}),
        ("Which colours can the flowers of this plant have?", "white&&pink&&purple",
         ["2687112"], "multi_answer", "inaturalist", "Example flower", {"split": "val"}),
        ("Who designed the bridge that crosses the river in the city where this building is?",
         "Jane Example", ["1a2b3c4d5e6f7081"], "2_hop", "landmarks", "Example hall", {"part": 1}),
        ("In which country was the naturalist who first described this bird born?", "Sweden",
         ["412345"], "2_hop", "inaturalist", "Example bird", {"split": "train"}),
    ]  # fmt: skip
    header = [
        "question", "answer", "dataset_image_ids", "encyclopedic_vqa_split", "question_type",
        "wikipedia_url", "wikipedia_title", "evidence", "evidence_section_id",
        "evidence_section_title", "dataset_name", "dataset_category_id", "question_original",
        "wikipedia_url_used_in_train",
    ]  # fmt: skip
    entries = _entries(d)
    table = []
    for row, (question, answer, ids, kind, source, title, hint) in enumerate(rows):
        wiki = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        table.append(
            {
                "question": question,
                "answer": answer,
                "dataset_image_ids": "|".join(ids),
                "encyclopedic_vqa_split": "test",
                "question_type": kind,
                "wikipedia_url": wiki,
                "wikipedia_title": title,
                "evidence": f"{title} is described in its article." if row % 2 == 0 else "",
                "evidence_section_id": str(row),
                "evidence_section_title": "Description",
                "dataset_name": source,
                "dataset_category_id": str(4000 + row),
                "question_original": question.replace("this", "the"),
                "wikipedia_url_used_in_train": "False",
            }
        )
        images_dataset = inat if source == "inaturalist" else landmarks
        two = kind == "2_hop"
        for name, e in entries:
            hops = e.options.get("hops", "all")
            if "image_template" in e.options:
                raise FixtureError(f"{name}: the builder reads the default image_template")
            if hops == "all" or (hops == "two") == two:
                for image_id in ids:
                    path = f"{e.images}/{source}/{image_id}.jpg"
                    b.sample(name, f"{row}-{image_id}", SampleImage(path, images_dataset, image_id))
        for image_id in ids:
            b.want(images_dataset, image_id, f"{entries[0][1].images}/{source}/{image_id}.jpg",
                   **hint)  # fmt: skip
    b.publish(d, {entries[0][1].file: _csv(header, table)})


def _nlvr2(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    left, right = (s for s in d.per_image_url if s.field in {"left_url", "right_url"})
    pairs = [
        ("test1-0-1-0", "There is an empty glass.", "False", "beer bottle",
         "http://www.belgiansmaak.com/wp-content/gallery/beers/31-tilquin.jpg",
         "https://www.craftbrewingbusiness.com/wp-content/uploads/2017/09/unnamed-1.jpg"),
        ("test1-1-2-1", "Two dogs are pulling a sled.", "True", "dog sled",
         "https://i.ebayimg.com/images/g/PKUAAOSw42JWDm9/s-l300.jpg",
         "https://s-media-cache-ak0.pinimg.com/originals/27/df/d2/27dfd2999bafcc7a.jpg"),
        ("test1-2-0-0", "The left image shows exactly three pandas.", "True", "panda",
         "https://farm5.staticflickr.com/4106/5013939163_a5b1c2d3e4.jpg",
         "http://www.pandas-example.org/photos/panda-group.jpg"),
    ]  # fmt: skip
    lines = []
    form: dict[str, bytes] = {}
    for identifier, sentence, label, synset, left_url, right_url in pairs:
        record = {
            "validation": {"28": label},
            "sentence": sentence,
            "left_url": left_url,
            "writer": "103",
            "label": label,
            "right_url": right_url,
            "synset": synset,
            "query": f"{synset} 41",
            "identifier": identifier,
            "extra_validations": {"56": label, "83": label},
        }
        lines.append(record)
        pair = identifier.rsplit("-", 1)[0]
        split = identifier.split("-", 1)[0]
        shown = []
        for spec, url in ((left, left_url), (right, right_url)):
            local = spec.local.format(**record, pair=pair)
            data = b.picture()
            b.serve(url, data)
            form[local] = data
            key = posixpath.basename(local)
            b.image(FixtureImage(d.name, key, local, data, url=url, form=True))
            path = f"{e.images}/{split}/{key}"
            shown.append(SampleImage(path, d.name, key))
        b.sample(name, identifier, *shown)
    b.form_files[d.name] = form
    b.publish(d, {e.file: _jsonl(lines)})


def _gqa(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        ("20968379", "n161313", "Is the tray on the left or right?", "right", "choose", "rel"),
        ("201640614", "n435808", "What is the color of the large bag?", "black", "query", "attr"),
        ("20567203", "n386688", "Are there both cars and trucks?", "no", "logical", "obj"),
        ("201307251", "n15740", "Is the lamp below the shelf?", "yes", "verify", "rel"),
    ]
    data = {}
    for qid, image_id, question, answer, structural, semantic in questions:
        data[qid] = {
            "semantic": [{"operation": "select", "dependencies": [], "argument": "tray (0)"}],
            "entailed": [],
            "equivalent": [qid],
            "question": question,
            "imageId": image_id,
            "isBalanced": True,
            "groups": {"global": None, "local": f"10c-{structural}"},
            "answer": answer,
            "semanticStr": "select: tray (0)",
            "annotations": {"answer": {}, "question": {}, "fullAnswer": {}},
            "types": {"detailed": f"{semantic}S", "semantic": semantic, "structural": structural},
            "fullAnswer": f"The answer is {answer}.",
        }
        path = f"{e.images}/{image_id}.jpg"
        b.want("gqa_images", image_id, _through_links(d, path))
        b.sample(name, qid, SampleImage(path, "gqa_images", image_id))
    others = {"val_balanced_questions.json": _json({}), "readme.txt": b"GQA questions 1.2\n"}
    b.publish(d, {e.file: _json(data, indent=4)}, others={e.file: others})


def _mevqa(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        ("05451384", "2354786", "Is the spoon to the left or to the right of the cup?", "right",
         "The spoon [BOX] is to the right of the cup [BOX].", {"spoon": [[[3, 2, 9, 12]]],
                                                               "cup": [[[12, 4, 20, 14]]]}),
        ("00859302", "2375429", "What color is the car on the street?", "red",
         "The car [BOX] on the street [BOX] is red.", {"car": [[[1, 1, 10, 8]]],
                                                      "street": [[[0, 8, 24, 24]]]}),
        ("12001123", "2368312", "Is there a dog near the bench?", "yes",
         "There is a dog [BOX] located here [BOX] near the bench.",
         {"dog": [[[2, 2, 8, 8]]], "LOC": [[[10, 10, 20, 20]]]}),
    ]  # fmt: skip
    folder = "" if e.file == "." else e.file
    test = {}
    for qid, image_id, question, answer, explanation, boxes in questions:
        test[qid] = {
            "question": question,
            "imageId": image_id,
            "answer": answer,
            "explanation": explanation,
            "boxes": boxes,
            "fullAnswer": f"The answer is {answer}.",
        }
        path = _join(folder, "images", f"{image_id}.jpg")
        b.want("gqa_images", image_id, _through_links(d, path))
        b.sample(name, qid, SampleImage(path, "gqa_images", image_id))
    # the training split gives the archive a size worth splitting (a part is 64 KiB at least)
    rng = random.Random(7)
    train = {
        f"{i:08d}": {"question": "q", "imageId": str(rng.randrange(10**7)), "answer": "a",
                     "explanation": f"{rng.getrandbits(256):064x} [BOX].", "boxes": {}}
        for i in range(520)
    }  # fmt: skip
    files = {
        _join(folder, "SME_test.json"): _json(test),
        _join(folder, "SME_train.json"): _json(train),
        _join(folder, "SME_val.json"): _json({}),
    }
    b.publish(d, files)


def _textvqa(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    spec = d.per_image_url[0]
    questions = [
        (34602, "003a8ae2ef43b901", "what is the brand of this camera?", "dakota"),
        (34610, "00c359f294f7dcd9", "what number is on the jersey?", "22"),
        (34620, "0a1b2c3d4e5f6071", "what does the sign above the door say?", "exit"),
    ]
    records = []
    files: dict[str, bytes] = {}
    urls: dict[str, str] = {}
    for n, (qid, image_id, question, answer) in enumerate(questions):
        url = f"https://farm{n + 1}.staticflickr.com/{4000 + n}/{9000 + n}_{image_id[:10]}_o.jpg"
        record = {
            "question": question,
            "image_id": image_id,
            "image_classes": ["Camera"],
            "flickr_original_url": url,
            "flickr_300k_url": url.replace("_o.jpg", "_z.jpg"),
            "image_width": SIDE,
            "image_height": SIDE,
            "answers": [answer] * 9 + ["unanswerable"],
            "question_tokens": question.rstrip("?").split(),
            "question_id": qid,
            "set_name": "val",
        }
        records.append(record)
        local = spec.local.format(**record)
        files[local], urls[local] = b.picture(), url
        b.serve(url, files[local])
        path = _join(e.images or "", "train_images", f"{image_id}.jpg")
        b.sample(name, str(qid), SampleImage(path, d.name, image_id))
    extras = [spec.local.format(image_id=k) for k in ("f0e1d2c3b4a59687", "e0d1c2b3a4958677")]
    for local in extras:
        files[local] = b.picture()
    val = {"dataset_type": "val", "dataset_name": "textvqa", "dataset_version": "0.5.1"}
    files[e.file] = _json({**val, "data": records})
    placed = b.publish(d, files)
    for local in [*urls, *extras]:
        key = posixpath.splitext(posixpath.basename(local))[0]
        archive, member = placed[local]
        b.image(
            FixtureImage(d.name, key, local, files[local], url=urls.get(local, ""),
                         archive=archive, member=member, extra=local in extras)
        )  # fmt: skip


def _infoseek(b: _Build, d: Dataset) -> None:
    oven = "oven_images"
    records = {
        "val": [
            ("oven_01963180", "Which place is this animal endemic to?", ["China"],
             ["People's Republic of China", "China", "PRC"], "val_unseen_entity", "String"),
            ("oven_02000001", "How tall is this building in metres?", ["324"],
             [{"wikidata": 324.0, "range": [291.6, 356.4]}], "val_unseen_question", "Numerical"),
            ("oven_01000003", "When was this built?", ["1889"], ["1889"],
             "val_unseen_question", "Time"),
            ("oven_05500004", "Who designed this?", ["Gustave Eiffel"],
             ["Gustave Eiffel", "Alexandre Gustave Eiffel"], "val_unseen_entity", "String"),
        ],
        "human": [
            ("oven_03100001", "What is the country of origin of this dish?", ["Italy"],
             ["Italy", "Italia"], "human_unseen_question", "String"),
            ("oven_03200002", "Which river flows through this city?", ["Seine"], ["Seine"],
             "human_unseen_entity", "String"),
            ("oven_04300003", "How many floors does this building have?", ["102"],
             [{"wikidata": 102.0, "range": [91.8, 112.2]}], "human_unseen_question", "Numerical"),
            ("oven_04400004", "In which year did this ship sink?", ["1912"], ["1912"],
             "human_unseen_entity", "Time"),
        ],
    }  # fmt: skip
    files: dict[str, bytes] = {}
    for name, e in _entries(d):
        split = "human" if "human" in posixpath.basename(e.file) else "val"
        unseen = str(e.options.get("unseen", "all"))
        lines = []
        for n, (image_id, question, answer, answer_eval, data_split, kind) in enumerate(
            records[split], start=1
        ):
            data_id = f"infoseek_{split}_{n:08d}"
            lines.append(
                {
                    "data_id": data_id,
                    "image_id": image_id,
                    "question": question,
                    "answer": answer,
                    "answer_eval": answer_eval,
                    "data_split": data_split,
                    "question_type": kind,
                }
            )
            path = f"{e.images}/{image_id.rsplit('_', 1)[1][:2]}/{image_id}.jpg"
            b.want(oven, image_id, path)
            if unseen == "all" or data_split.endswith(f"unseen_{unseen}"):
                b.sample(name, data_id, SampleImage(path, oven, image_id))
        files[e.file] = _jsonl(lines)
    b.publish(d, files)


def _okvqa(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        (297147, "What sport can you use this for?", ["racing"] * 6 + ["motocross"] * 4, "one"),
        (262148, "What is the name of this dish?", ["pizza"] * 8 + ["pie"] * 2, "five"),
        (391895, "Which country is this vehicle from?", ["japan"] * 10, "one"),
        (522418, "What is this tool used for?", ["cutting"] * 10, "eight"),
    ]
    question_records, annotations = [], []
    for n, (image_id, question, answers, kind) in enumerate(questions):
        qid = image_id * 10 + n
        question_records.append({"image_id": image_id, "question": question, "question_id": qid})
        annotations.append(
            {
                "image_id": image_id,
                "answer_type": "other",
                "question_type": kind,
                "question_id": qid,
                "answers": [
                    {
                        "answer_id": i + 1,
                        "raw_answer": a.title(),
                        "answer_confidence": "yes",
                        "answer": a,
                    }
                    for i, a in enumerate(answers)
                ],
                "confidence": 3,
            }
        )
        path = f"{e.images}/val2014/COCO_val2014_{image_id:012d}.jpg"
        b.want("coco_val2014", str(image_id), path)
        b.sample(name, str(qid), SampleImage(path, "coco_val2014", str(image_id)))
    top = {"info": {}, "license": {}, "data_subtype": "val2014"}
    files = {
        e.file: _json(
            {**top, "task_type": "Open-Ended", "data_type": "mscoco", "questions": question_records}
        ),
        _join(posixpath.dirname(e.file), "mscoco_val2014_annotations.json"): _json(
            {**top, "annotations": annotations}
        ),
    }
    b.publish(d, files)


VSTAR_INSTRUCTION = "Answer with the option's letter from the given choices directly."


def _vstar(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    spec = d.per_image_url[0]
    questions = [
        ("direct_attributes/sa_4690", "What is the material of the glove?",
         ["rubber", "cotton", "kevlar", "leather"], "A"),
        ("direct_attributes/sa_4700", "What is the color of the flag?",
         ["red", "green", "blue", "white"], "B"),
        ("relative_position/sa_8001", "Is the cup on the left or right side of the laptop?",
         ["right", "left"], "B"),
        ("relative_position/sa_8002", "Is the dog on the left or right side of the bench?",
         ["left", "right"], "A"),
    ]  # fmt: skip
    files: dict[str, bytes] = {}
    lines = []
    for qid, (stem, question, options, label) in enumerate(questions):
        letters = "\n".join(f"({chr(65 + i)}) {o}" for i, o in enumerate(options))
        text = f"{question}\n{letters}\n{VSTAR_INSTRUCTION}"
        category = stem.split("/", 1)[0]
        record = {"image": f"{stem}.jpg", "text": text, "category": category,
                  "question_id": qid, "label": label}  # fmt: skip
        lines.append(record)
        correct = options[ord(label) - 65]
        ordered = [correct, *(o for o in options if o != correct)]
        target = {"question": question, "options": ordered,
                  "target_object": [stem.rsplit("_", 1)[-1]], "bbox": [[2, 2, 10, 10]]}  # fmt: skip
        files[_join(e.file, f"{stem}.json")] = _json(target)
        image = _vstar_image(b, d, spec.local.format(**record), spec.url_template.format(**record))
        files[image.local] = image.data
        b.sample(name, str(qid), SampleImage(_join(e.file, record["image"]), d.name, image.key))
    for stem in ("direct_attributes/sa_9001", "relative_position/sa_9002"):
        record = {"image": f"{stem}.jpg"}
        image = _vstar_image(b, d, spec.local.format(**record), spec.url_template.format(**record),
                             extra=True)  # fmt: skip
        files[image.local] = image.data
    files[_join(e.file, "test_questions.jsonl")] = _jsonl(lines)
    files[_join(e.file, "README.md")] = b"# V* Bench (fixture)\n"
    b.publish(d, files)


def _vstar_image(b: _Build, d: Dataset, local: str, url: str, extra: bool = False) -> FixtureImage:
    key = local.split("/", 1)[1]
    image = FixtureImage(d.name, key, local, b.picture(), url=url, extra=extra)
    b.image(image)
    return image


def _mme_realworld_lite(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        ("perception/remote_sensing/color/0001", "remote_sensing/tile_0001.png", "Perception",
         "Remote Sensing", "color", "What color is the roof of the largest building?",
         ["red", "grey", "green", "blue"], "B"),
        ("reasoning/diagram_and_table/diagram/0002", "diagram_and_table/chart_0002.jpg",
         "Reasoning", "Diagram and Table", "diagram",
         "In which year does the revenue first exceed 10 million?",
         ["2019", "2020", "2021", "2022"], "C"),
        ("perception/monitoring/vehicle/counting/0003", "monitoring_images/frame_0003.jpg",
         "Perception", "Monitoring", "Vehicle/counting", "What is the number of buses?",
         ["2", "7", "4", "0"], "E"),
        ("reasoning/autonomous_driving/intention/0004", "autonomous_driving/scene_0004.jpg",
         "Reasoning", "Autonomous Driving", "intention", "What will the white car do next?",
         ["turn left", "stop", "go straight", "reverse"], "A"),
    ]  # fmt: skip
    images = e.images or posixpath.dirname(e.file)
    records = []
    files: dict[str, bytes] = {}
    for qid, image, task, subtask, category, text, options, truth in questions:
        choices = [f"({chr(65 + i)}) {o}" for i, o in enumerate(options)]
        choices.append("(E) The image does not feature the object.")
        records.append(
            {"Question_id": qid, "Image": image, "Text": text, "Question Type": "Multiple Choice",
             "Answer choices": choices, "Ground truth": truth, "Task": task, "Subtask": subtask,
             "Category": category}
        )  # fmt: skip
        files[_join(images, image)] = b.picture("PNG" if image.endswith(".png") else "JPEG")
        b.sample(name, qid, SampleImage(_join(images, image), d.name, image))
    files[e.file] = _json(records, indent=4)
    extras = ("remote_sensing/tile_0999.png", "ocr/street_0998.jpg")
    for image in extras:
        files[_join(images, image)] = b.picture("PNG" if image.endswith(".png") else "JPEG")
    placed = b.publish(d, files)
    for image in [*(q[1] for q in questions), *extras]:
        local = _join(images, image)
        archive, member = placed[local]
        b.image(FixtureImage(d.name, image, local, files[local], archive=archive, member=member,
                             extra=image in extras))  # fmt: skip


def _zoombench(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        ("How many table lamps are in the image?", ["0", "2", "1", "3"], "C", True),
        ("What is written on the small label of the bottle?", [], "olive oil", False),
        ("What material is the bench in the background made of?",
         ["wood", "metal", "stone", "plastic"], "B", True),
        ("What color is the cap of the runner?", ["blue", "red", "white", "black"], "D", False),
    ]  # fmt: skip
    images = e.images or posixpath.dirname(e.file)
    records = []
    files: dict[str, bytes] = {}
    for i, (question, options, answer, crop) in enumerate(questions):
        query = question
        if options:
            query += " Select from the following choices.\n"
            query += "\n".join(f"({chr(65 + k)}) {o}" for k, o in enumerate(options))
        names = [f"images/image_{i}.png"] + ([f"images/crop_image_{i}.png"] if crop else [])
        for n in names:
            files[_join(images, n)] = b.picture("PNG")
        records.append(
            {
                "images": [f"../ZoomBench/{names[0]}"],
                "crop_images": [f"../ZoomBench/{n}" for n in names[1:]],
                "query": query,
                "response": answer,
            }
        )
        if options:
            b.sample(name, str(i), SampleImage(_join(images, names[0]), d.name, names[0]))
    extras = ("images/image_100.png", "images/image_101.png")
    for n in extras:
        files[_join(images, n)] = b.picture("PNG")
    files[e.file] = _json(records, indent=2)
    files[_join(images, "README.md")] = (
        b"# ZoomBench (fixture, as convert_benchmark.py writes it)\n"
    )
    placed = b.publish(d, files)
    for local, (archive, _) in placed.items():
        if local.endswith(".png"):
            key = local[len(images) + 1 :]
            b.image(FixtureImage(d.name, key, local, files[local], archive=archive,
                                 extra=key in extras))  # fmt: skip


def _hrbench(b: _Build, d: Dataset) -> None:
    name, e = _one_entry(d)
    questions = [
        ("What is the colour of the small sign on the left lamp post?",
         ["red", "blue", "green", "yellow"], "A", "single"),
        ("How many people stand at the far bus stop?", ["1", "2", "3", "4"], "C", "single"),
        ("Which shop is closer to the fountain, the bakery or the florist?",
         ["the bakery", "the florist", "equally close", "neither is visible"], "B", "cross"),
        ("What is written on the blue truck?", ["milk", "bread", "fish", "mail"], "D", "cross"),
    ]  # fmt: skip
    header = ["index", "question", "A", "B", "C", "D", "answer", "category", "cycle_category",
              "image"]  # fmt: skip
    rows = []
    pictures = {}
    for index, (question, options, answer, category) in enumerate(questions):
        data = pictures[str(index)] = b.picture()
        rows.append(
            {"index": index, "question": question, **dict(zip("ABCD", options, strict=True)),
             "answer": answer, "category": category, "cycle_category": f"{index}_8k",
             "image": base64.b64encode(data).decode()}
        )  # fmt: skip
        path = f"{e.images}/{index}.jpg"
        b.sample(name, str(index), SampleImage(path, d.name, str(index)))
    placed = b.publish(d, {e.file: _csv(header, rows, delimiter="\t")})
    for key, data in pictures.items():
        b.image(FixtureImage(d.name, key, f"{e.images}/{key}.jpg", data,
                             archive=placed[e.file][0]))  # fmt: skip


# -- images datasets ---------------------------------------------------------------------------


def _visual_genome(b: _Build, d: Dataset) -> None:
    spec = d.per_image_url[0]
    base = d.layout.images[0]
    wants = b.collect(
        d, [_Want(k, f"{base}/{folder}/{k}.jpg") for k, folder in
            (("2300001", "VG_100K"), ("2300002", "VG_100K"),
             ("2417001", "VG_100K_2"), ("2417002", "VG_100K_2"))]
    )  # fmt: skip
    records = []
    for w in wants:
        folder = w.local.split("/")[-2]
        url = f"https://cs.stanford.edu/people/rak248/{folder}/{w.key}.jpg"
        record = {"image_id": int(w.key), "url": url, "width": SIDE, "height": SIDE,
                  "coco_id": None, "flickr_id": 1000 + int(w.key) % 1000}  # fmt: skip
        if spec.local.format(**record, url_folder=folder) != w.local:
            raise FixtureError(f"visual_genome: {w.local} is not where {spec.local} puts it")
        records.append(record)
        b.serve(url, w.data)
        w.hint["url"] = url
    files = {w.local: w.data for w in wants}
    files[spec.file] = _json(records)
    placed = b.publish(d, files)
    for w in wants:
        archive, member = placed[w.local]
        b.image(FixtureImage(d.name, w.key, w.local, w.data, url=w.hint["url"], archive=archive,
                             member=member, extra=w.extra))  # fmt: skip


def _inaturalist(b: _Build, d: Dataset) -> None:
    base = d.layout.images[0]
    unused = ((2688001, "val"), (2688002, "val"), (413001, "train"), (413002, "train"))
    extras = [_Want(str(k), "", {"split": split}) for k, split in unused]
    wants = b.collect(d, extras)
    categories = [
        (3938, "Plantae", "Tracheophyta", "Magnoliopsida", "Rosales", "Rosaceae", "Rosa", "canina"),
        (1204, "Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus", "major"),
        (5110, "Plantae", "Tracheophyta", "Magnoliopsida", "Asterales", "Asteraceae",
         "Bellis", "perennis"),
    ]  # fmt: skip
    keys = ["kingdom", "phylum", "class", "order", "family", "genus", "specific_epithet"]
    files: dict[str, bytes] = {}
    by_split: dict[str, dict[str, list[Any]]] = {}
    locals_: dict[str, str] = {}
    for n, w in enumerate(wants):
        split = str(w.hint.get("split", "val"))
        cat = categories[n % len(categories)]
        folder = f"{cat[0]:05d}_" + "_".join(cat[1:])
        file_name = f"{split}/{folder}/{uuid.uuid5(uuid.NAMESPACE_URL, w.key)}.jpg"
        local = locals_[w.key] = f"{base}/{file_name}"
        files[local] = w.data
        part = by_split.setdefault(split, {"images": [], "annotations": [], "categories": []})
        part["images"].append(
            {"id": int(w.key), "width": SIDE, "height": SIDE, "file_name": file_name,
             "license": 1, "rights_holder": "fixture", "date": "2020-01-01 00:00:00+00:00",
             "latitude": 47.0, "longitude": 8.0, "location_uncertainty": 10}
        )  # fmt: skip
        part["annotations"].append(
            {"id": int(w.key), "image_id": int(w.key), "category_id": cat[0]}
        )
        category = {
            "id": cat[0],
            "name": f"{cat[6]} {cat[7]}",
            "common_name": cat[6],
            "supercategory": cat[1],
            "image_dir_name": folder,
            **dict(zip(keys, cat[1:], strict=True)),
        }
        if category not in part["categories"]:
            part["categories"].append(category)
    for split, part in by_split.items():
        info = {"year": 2021, "version": "2021", "description": f"iNat2021 {split} (fixture)"}
        licenses = [
            {"id": 1, "name": "CC BY 4.0", "url": "https://creativecommons.org/licenses/by/4.0/"}
        ]
        files[f"{base}/{split}.json"] = _json({"info": info, "licenses": licenses, **part})
    placed = b.publish(d, files)
    for w in wants:
        archive, member = placed[locals_[w.key]]
        b.image(FixtureImage(d.name, w.key, locals_[w.key], w.data, archive=archive,
                             member=member, extra=w.extra))  # fmt: skip


def _google_landmarks(b: _Build, d: Dataset) -> None:
    spec = d.per_image_url[0]
    base = d.layout.images[0]
    unused = (("a0b1c2d3e4f50617", 0), ("a0b1c2d3e4f50618", 0), ("ff00ee11dd22cc33", 1),
              ("ff00ee11dd22cc34", 1))  # fmt: skip
    extras = [_Want(k, "", {"part": part}) for k, part in unused]
    wants = b.collect(d, extras)
    rows = []
    files: dict[str, bytes] = {}
    parts: dict[str, int] = {}
    in_archive: dict[str, str] = {}
    for n, w in enumerate(wants):
        digest = hashlib.md5(w.key.encode()).hexdigest()
        url = f"https://upload.wikimedia.org/wikipedia/commons/{digest[0]}/{digest[:2]}/Landmark_{w.key}.jpg"
        row = {"id": w.key, "url": url, "landmark_id": 100 + n}
        w.local = spec.local.format(**row)
        rows.append(row)
        b.serve(url, w.data)
        w.hint["url"] = url
        local = in_archive[w.key] = f"{base}/{w.key[0]}/{w.key[1]}/{w.key[2]}/{w.key}.jpg"
        files[local] = w.data
        parts[local] = int(w.hint.get("part", 0))
    files[spec.file] = _csv(["id", "url", "landmark_id"], rows)
    placed = b.publish(d, files, parts=parts)
    for w in wants:
        archive, member = placed[in_archive[w.key]]
        b.image(FixtureImage(d.name, w.key, w.local, w.data, url=w.hint["url"], archive=archive,
                             member=member, extra=w.extra))  # fmt: skip


def _gqa_images(b: _Build, d: Dataset) -> None:
    base = d.layout.images[0]
    wants = b.collect(d, [_Want(k, f"{base}/{k}.jpg") for k in ("n999001", "n999002")])
    placed = b.publish(d, {w.local: w.data for w in wants})
    for w in wants:
        archive, member = placed[w.local]
        b.image(FixtureImage(d.name, w.key, w.local, w.data, archive=archive, member=member,
                             extra=w.extra))  # fmt: skip


def _coco(b: _Build, d: Dataset) -> None:
    spec = d.per_image_url[0]
    base = d.layout.images[0]
    extras = [_Want(str(k), f"{base}/val2014/COCO_val2014_{k:012d}.jpg") for k in (100001, 100002)]
    wants = b.collect(d, extras)
    images, captions = [], []
    for w in wants:
        image_id = int(w.key)
        record = {"license": 3, "file_name": posixpath.basename(w.local), "coco_url": "",
                  "height": SIDE, "width": SIDE, "date_captured": "2013-11-14 16:28:13",
                  "flickr_url": f"http://farm3.staticflickr.com/2/{image_id}_ab12cd34ef_z.jpg",
                  "id": image_id}  # fmt: skip
        record["coco_url"] = (
            spec.url_template.format(**record)
            if spec.url_template
            else f"http://images.cocodataset.org/val2014/{record['file_name']}"
        )
        if spec.local.format(**record) != w.local:
            raise FixtureError(f"coco_val2014: {w.local} is not where {spec.local} puts it")
        images.append(record)
        captions.append({"image_id": image_id, "id": 900000 + image_id, "caption": "A fixture."})
        b.serve(record["coco_url"], w.data)
        w.hint["url"] = record["coco_url"]
    info = {"description": "COCO 2014 Dataset (fixture)", "year": 2014, "version": "1.0"}
    licenses = [{"url": "http://creativecommons.org/licenses/by-nc-sa/2.0/", "id": 3,
                 "name": "Attribution-NonCommercial-ShareAlike License"}]  # fmt: skip
    body = {"info": info, "images": images, "licenses": licenses, "annotations": captions}
    files = {w.local: w.data for w in wants}
    files[spec.file] = _json(body)
    train = _json({"info": info, "images": [], "licenses": licenses, "annotations": []})
    placed = b.publish(d, files, others={spec.file: {"annotations/captions_train2014.json": train}})
    for w in wants:
        archive, member = placed[w.local]
        b.image(FixtureImage(d.name, w.key, w.local, w.data, url=w.hint["url"], archive=archive,
                             member=member, extra=w.extra))  # fmt: skip


def _oven_images(b: _Build, d: Dataset) -> None:
    base = d.layout.images[0]
    extras = [_Want(k, f"{base}/{k[5:7]}/{k}.jpg") for k in ("oven_09900001", "oven_09900002")]
    wants = b.collect(d, extras)
    index = next((s for s in d.sources if s.kind == "image_index"), None)
    form = {w.local: w.data for w in wants}
    if index is not None:
        folder = posixpath.dirname(index.target)
        lines = "".join(f"{w.key},{posixpath.relpath(w.local, folder)}\n" for w in wants)
        form[index.target] = lines.encode()
    b.form_files[d.name] = form
    for w in wants:
        b.image(FixtureImage(d.name, w.key, w.local, w.data, extra=w.extra, form=True))
    b.publish(d, {})


BUILDERS: dict[str, Builder] = {
    "pointqa": _pointqa,
    "visual_genome": _visual_genome,
    "encvqa": _encvqa,
    "inaturalist_2021": _inaturalist,
    "google_landmarks_v2": _google_landmarks,
    "nlvr2": _nlvr2,
    "gqa": _gqa,
    "gqa_images": _gqa_images,
    "tallyqa": _tallyqa,
    "textvqa": _textvqa,
    "infoseek": _infoseek,
    "oven_images": _oven_images,
    "okvqa": _okvqa,
    "coco_val2014": _coco,
    "mevqa": _mevqa,
    "vstar": _vstar,
    "mme_realworld_lite": _mme_realworld_lite,
    "zoombench": _zoombench,
    "hrbench": _hrbench,
}
"""Catalogue dataset name -> the function that writes its fixture files."""


def build_site(root: Path, catalogue: Catalogue | None = None) -> Site:
    """Write the fixture site under ``root`` (see the module docstring). Raises
    :class:`FixtureError` when the catalogue has a dataset no builder knows, a builder leaves
    an open source without a file, or a question needs an image of a dataset not there."""
    catalogue = catalogue or load_catalogue()
    missing = [d.name for d in catalogue.datasets if d.name not in BUILDERS]
    if missing:
        raise FixtureError(
            f"no fixture builder for the catalogue dataset(s) {', '.join(missing)}: add one to "
            "tests/data_site.py (BUILDERS)"
        )
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    b = _Build(root, catalogue)
    # questions first: they say which images the images datasets must hold
    for d in sorted(catalogue.datasets, key=lambda d: d.kind != "questions"):
        BUILDERS[d.name](b, d)
    unknown = sorted(set(b.wanted) - set(catalogue.names()))
    if unknown:
        raise FixtureError(f"questions need images of {unknown}, not in the catalogue")
    for d in catalogue.datasets:
        for s in d.sources:
            if s.access != "open":
                continue
            urls = s.urls()
            if s.parts is not None:
                urls = tuple(urls[p] for p in b.parts.get(f"{d.name}/{s.name}", ()))
            if not urls:
                raise FixtureError(f"{d.name}: no builder served a part of source {s.name}")
            for url in urls:
                if served_path(url) not in b.served:
                    raise FixtureError(f"{d.name}: no builder served source {s.name} ({url})")
    return b.site()


def fixture_catalogue_text(site: Site) -> str:
    """The bundled catalogue.toml's text with each source's ``size``/``md5``/``sha256`` lines
    set to the fixture files' values (:meth:`Site.fixture_catalogue`): the file a test gives
    ``hammr data --catalogue``."""
    from importlib import resources

    fixed = {(d.name, s.name): s for d in site.fixture_catalogue().datasets for s in d.sources}
    text = resources.files("hammr.datasets").joinpath("catalogue.toml").read_text("utf-8")
    out: list[str] = []
    dataset = source = ""
    in_source = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_source = stripped == "[[dataset.source]]"
            if stripped == "[[dataset]]":
                dataset = ""
        key, _, value = stripped.partition(" = ")
        if key == "name" and not stripped.startswith("["):
            if in_source:
                source = value.strip('"')
            elif not dataset:
                dataset = value.strip('"')
        if in_source and key in ("size", "md5", "sha256") and (dataset, source) in fixed:
            s = fixed[(dataset, source)]
            new = {"size": str(s.size), "md5": f'"{s.md5}"', "sha256": f'"{s.sha256}"'}[key]
            line = f"{key} = {new}"
        out.append(line)
    return "\n".join(out) + "\n"
