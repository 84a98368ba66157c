"""Reading the dataset catalogue (``catalogue.toml`` beside this module) into the typed data of
:mod:`hammr.datasets.catalogue`, refusing a malformed one in one line.

One ``[[dataset]]`` per dataset. A *questions* dataset holds the files suite entries read and
names those entries; an *images* dataset holds images that questions datasets point at
(``images_from``), so an image collection several datasets share (Visual Genome, COCO,
GQA's images) is described once. Fields (``?`` marks an optional one)::

    version = 1                        # the schema's version

    [[dataset]]
    name = "gqa"                       # unique: lower case, digits, '_'
    kind = "questions"                 # or "images"
    title = "..."                      # the dataset's name as people write it
    summary = "..."                    # what it is, one line (the docs table's column)
    papers = ["hammr"]                 # the papers that use it: hammr, avis, mulprog, muse
    homepage = "https://..."
    terms = "..."                      # the licence or terms, one line in our words
    terms_url = "https://..."          # where the terms are
    entries = ["generic-vqa/gqa"]      # questions only: the suite entries (suite/entry)
    images_from = ["gqa_images"]       # ? images datasets whose files the entries read
    whole_archive_only = false         # ? true: the images come only as whole archives
    size_approx = "1.4 GB"             # ? the download's size as a person would say it
    notes = ["..."]                    # ? what a downloader or a reader must know
    todo = ["..."]                     # ? what could not be confirmed (left out above)

    [dataset.layout]                   # paths under --data-dir
    files = ["gqa/testdev_balanced_questions.json"]   # the entries' `file` values, exactly
    images = ["gqa/images"]            # the entries' `images` values, exactly
    extra = ["..."]                    # ? other files the adapters or a downloader read
    generated = ["..."]                # ? folders an adapter writes itself on first load
    [[dataset.layout.links]]           # ? symbolic links the layout needs
    path = "tallyqa/images/VG_100K"    #   the link
    target = "visual_genome/VG_100K"   #   what it points at (under --data-dir)
    optional = false                   #   ? true: only some files need it

    [[dataset.source]]                 # each official file, one or more
    name = "questions"                 # unique within the dataset
    kind = "questions"                 # questions | annotations | bundle (questions and
                                       # images together) | images_archive | url_list (holds
                                       # a URL per image) | image_index (ids to files) |
                                       # hub_repo (a whole hub repository) | form (given
                                       # after a request form: nothing to fetch)
    url = "https://..."                # https; http only with http_reason
    http_reason = "..."                # ? why http (the publisher links only http)
    parts = 500                        # ? a numbered series: url holds {part}, 0..parts-1,
    part_digits = 3                    # ?   zero-padded to part_digits
    size = 21817965542                 # ? exact bytes (of one file; not with parts)
    size_approx = "about 9 GB"         # ? the size as a page states it
    sha256 = "..." / md5 = "..."       # ? only where the publisher gives one
    checksum_url = "https://..."       # ? where the publisher lists it (may hold {part})
    target = "gqa"                     # where it goes under --data-dir (file or folder)
    unpack = "zip"                     # ? zip | split-zip | tar | tar.gz: unpack into target
    members = [{ from = "images/", to = "gqa/images/" }]  # ? archive paths (a prefix ending
                                       # in '/', or one member) -> paths under --data-dir;
                                       # none: the whole archive goes into target
    access = "open"                    # ? open (default) | form
    note = "..."                       # ?

    [[dataset.per_image_url]]          # ? a file that publishes a URL per image
    source = "annotations"             # the source that brings that file
    file = "coco/annotations/..."      # where that file lies under --data-dir
    key = "id"                         # the record field naming the image
    field = "coco_url"                 # the record field holding its URL
    local = "coco/val2014/{file_name}" # the image's path under --data-dir ({record field})
    records = "images"                 # ? the JSON key holding the records (none: the file is
                                       #   a JSON list, JSON Lines, or a CSV with a header)
    url_template = "http://..."        # ? the URL built from the record's fields
    name_pattern = "COCO_..."          # ? with url_template: a regex whose named groups, read
                                       #   from an image's file name, are the fields (the file
                                       #   is then not needed); all-digit groups are numbers
    http_reason = "..."                # ? why url_template is http
    note = "..."                       # ?
    # Computed fields besides the record's: {url_folder} (the last folder of the URL) and
    # {pair} (the key without its last '-N': NLVR2's test1-0-1-0 -> test1-0-1).

    [[dataset.image_index]]            # ? a file naming where an unpacked archive holds each
    file = "encvqa/images/inaturalist/val.json"  # image, for images named by id elsewhere:
    records = "images"                 #   each needed image `local` is linked to `base/{path}`
    key = "id"
    path = "file_name"
    base = "encvqa/images/inaturalist"
    local = "encvqa/images/inaturalist/{id}.jpg"

    [dataset.hf]                       # ? a Hugging Face hub dataset alternative
    repo = "lmms-lab/GQA"
    revision = "..."                   # ? a branch, tag or commit to read
    config = "..."                     # ? the hub config (subset)
    split = "testdev"                  # ?
    question = "question"              # ? columns: the question,
    answers = "answer"                 # ?   the answer(s),
    image = "image"                    # ?   the image bytes
    image_config = "..."               # ? the config holding the images, when separate
    files = ["..."]                    # ? the files of the repository meant
    file_sha256 = { "f" = "..." }      # ? their sha256 where the hub shows it
    differs = "..."                    # how it differs from the official file (or that it
                                       # is the publisher's own copy)
    publisher = false                  # whether the publisher itself put it there

Checksums are recorded only where the publisher gives them; ``hammr data`` records the others
at a file's first download and checks them from then on.

:func:`load_catalogue` reads the bundled file (or a text given to it) and refuses a malformed
one with :class:`CatalogueError`, naming the dataset and the field.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from hammr.datasets.catalogue import (
    ACCESS,
    DATASET_KINDS,
    PAPERS,
    SOURCE_KINDS,
    UNPACK,
    VERSION,
    Catalogue,
    CatalogueError,
    Dataset,
    HubCopy,
    ImageIndex,
    Layout,
    Link,
    Member,
    PerImageUrl,
    Source,
)

__all__ = ["CATALOGUE_FILE", "load_catalogue"]

CATALOGUE_FILE = "catalogue.toml"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ENTRY = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_HEX = {"sha256": 64, "md5": 32}


def load_catalogue(text: str | None = None) -> Catalogue:
    """The catalogue in ``text`` (default: the bundled ``catalogue.toml``)."""
    if text is None:
        text = (
            resources.files("hammr.datasets").joinpath(CATALOGUE_FILE).read_text(encoding="utf-8")
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CatalogueError(f"catalogue: not valid TOML ({e})") from None
    top = _Fields(data, "the top level", "", ("version", "dataset"))
    version = top.integer("version", required=True)
    if version != VERSION:
        raise CatalogueError(f"catalogue: version {version} is not {VERSION}, the one read here")
    raw = top.tables("dataset")
    top.done()
    if not raw:
        raise CatalogueError("catalogue: no [[dataset]]")
    datasets = [_dataset(d, i) for i, d in enumerate(raw)]
    _check_references(datasets)
    return Catalogue(tuple(datasets), version)


# -- reading -----------------------------------------------------------------------------------


class _Fields:
    """The fields of one TOML table, read once each; ``done`` refuses any left over."""

    def __init__(
        self, data: Mapping[str, Any], where: str, prefix: str, known: Sequence[str] = ()
    ) -> None:
        self.data = data
        self.where = where
        self.prefix = prefix
        self.seen: set[str] = set()
        # a misspelt field is named as such, before the field it stands for is missed
        unknown = sorted(set(data) - set(known)) if known else []
        if unknown:
            raise self.error(unknown[0], "not a field of the catalogue (a misspelling?)")

    def error(self, key: str, problem: str) -> CatalogueError:
        return CatalogueError(f"catalogue: {self.where}, field {self.prefix + key!r}: {problem}")

    def _get(self, key: str, required: bool) -> Any:
        self.seen.add(key)
        if key not in self.data:
            if required:
                raise self.error(key, "missing")
            return None
        return self.data[key]

    def text(self, key: str, *, required: bool = False) -> str:
        value = self._get(key, required)
        if value is None:
            return ""
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        if "\n" in value:
            raise self.error(key, "expected one line")
        return value

    def choice(self, key: str, choices: Sequence[str], *, default: str = "") -> str:
        value = self.text(key, required=not default) or default
        if value not in choices:
            raise self.error(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def integer(self, key: str, *, required: bool = False) -> int | None:
        value = self._get(key, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.error(key, f"expected a positive integer, got {value!r}")
        return value

    def flag(self, key: str, *, required: bool = False) -> bool:
        value = self._get(key, required)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def texts(self, key: str, *, required: bool = False) -> tuple[str, ...]:
        value = self._get(key, required)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v.strip() and "\n" not in v for v in value
        ):
            raise self.error(key, f"expected a list of one-line strings, got {value!r}")
        if len(set(value)) != len(value):
            raise self.error(key, "lists a value twice")
        return tuple(value)

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self._get(key, False)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {value!r}")
        return value

    def tables(self, key: str) -> list[Mapping[str, Any]]:
        value = self._get(key, False)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(key, "expected an array of tables")
        return value

    def url(self, key: str, *, required: bool = False, http_reason: str = "") -> str:
        value = self.text(key, required=required)
        if value:
            _check_url(self, key, value, http_reason)
        return value

    def path(self, key: str, value: str) -> str:
        """``value`` (read from ``key``) as a path under --data-dir."""
        if (
            value.startswith("/")
            or "\\" in value
            or ".." in value.split("/")
            or (value != "." and "." in value.split("/"))
            or value.endswith("/")
        ):
            raise self.error(key, f"{value!r} is not a relative path under the data folder")
        return value

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            raise self.error(extra[0], "not a field of the catalogue (a misspelling?)")


def _check_url(fields: _Fields, key: str, value: str, http_reason: str) -> None:
    if value.startswith("https://") and len(value) > len("https://"):
        return
    if value.startswith("http://") and len(value) > len("http://"):
        if http_reason:
            return
        raise fields.error(key, f"{value!r} is http: use https, or say why in http_reason")
    raise fields.error(key, f"{value!r} is not an https URL")


def _hex(fields: _Fields, key: str, value: str) -> str:
    if value and not re.fullmatch(rf"[0-9a-f]{{{_HEX[key]}}}", value):
        raise fields.error(key, f"expected {_HEX[key]} lower-case hex digits, got {value!r}")
    return value


_DATASET_KEYS = (
    "name",
    "kind",
    "title",
    "summary",
    "papers",
    "homepage",
    "terms",
    "terms_url",
    "entries",
    "images_from",
    "whole_archive_only",
    "size_approx",
    "notes",
    "todo",
    "layout",
    "source",
    "per_image_url",
    "image_index",
    "hf",
)
_LAYOUT_KEYS = ("files", "images", "extra", "generated", "links")
_LINK_KEYS = ("path", "target", "optional")
_SOURCE_KEYS = (
    "name",
    "kind",
    "url",
    "http_reason",
    "parts",
    "part_digits",
    "size",
    "size_approx",
    "sha256",
    "md5",
    "checksum_url",
    "target",
    "unpack",
    "members",
    "access",
    "note",
)
_MEMBER_KEYS = ("from", "to")
_PER_IMAGE_KEYS = (
    "source",
    "file",
    "key",
    "field",
    "local",
    "records",
    "url_template",
    "name_pattern",
    "http_reason",
    "note",
)
_INDEX_KEYS = ("file", "records", "key", "path", "base", "local")
_HUB_KEYS = (
    "repo",
    "revision",
    "config",
    "split",
    "question",
    "answers",
    "image",
    "image_config",
    "files",
    "file_sha256",
    "differs",
    "publisher",
)


def _dataset(raw: Mapping[str, Any], i: int) -> Dataset:
    name = raw.get("name")
    where = f"dataset {name!r}" if isinstance(name, str) else f"dataset #{i + 1}"
    f = _Fields(raw, where, "", _DATASET_KEYS)
    name = f.text("name", required=True)
    if not _NAME.fullmatch(name):
        raise f.error("name", f"{name!r} is not lower case letters, digits and '_'")
    kind = f.choice("kind", DATASET_KINDS)
    papers = f.texts("papers", required=True)
    for paper in papers:
        if paper not in PAPERS:
            raise f.error("papers", f"{paper!r} is not one of {', '.join(PAPERS)}")
    if not papers:
        raise f.error("papers", "empty")
    entries = f.texts("entries")
    for entry in entries:
        if not _ENTRY.fullmatch(entry):
            raise f.error("entries", f"{entry!r} is not suite/entry")
    if kind == "questions" and not entries:
        raise f.error("entries", "a questions dataset names the suite entries that read it")
    if kind == "images" and entries:
        raise f.error("entries", "an images dataset is read through questions datasets")
    images_from = f.texts("images_from")
    layout = _layout(f, f.mapping("layout"))
    sources = tuple(_source(f.where, s, j) for j, s in enumerate(f.tables("source")))
    if not sources:
        raise f.error("source", "a dataset needs at least one [[dataset.source]]")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise f.error("source", "two sources share a name")
    per_image = tuple(
        _per_image(f.where, p, j, names) for j, p in enumerate(f.tables("per_image_url"))
    )
    index = tuple(_image_index(f.where, x, j) for j, x in enumerate(f.tables("image_index")))
    hf_raw = f.mapping("hf")
    dataset = Dataset(
        name=name,
        kind=kind,
        title=f.text("title", required=True),
        summary=f.text("summary", required=True),
        papers=papers,
        homepage=f.url("homepage", required=True),
        terms=f.text("terms", required=True),
        terms_url=f.url("terms_url", required=True),
        layout=layout,
        sources=sources,
        entries=entries,
        images_from=images_from,
        per_image_url=per_image,
        image_index=index,
        hf=_hub(f.where, hf_raw) if hf_raw else None,
        whole_archive_only=f.flag("whole_archive_only"),
        size_approx=f.text("size_approx"),
        notes=f.texts("notes"),
        todo=f.texts("todo"),
    )
    f.done()
    return dataset


def _layout(parent: _Fields, raw: Mapping[str, Any]) -> Layout:
    if not raw:
        raise parent.error("layout", "missing: the paths under --data-dir")
    f = _Fields(raw, parent.where, "layout.", _LAYOUT_KEYS)

    def paths(key: str) -> tuple[str, ...]:
        return tuple(f.path(key, p) for p in f.texts(key))

    links = []
    for j, link in enumerate(f.tables("links")):
        g = _Fields(link, parent.where, f"layout.links[{j}].", _LINK_KEYS)
        links.append(
            Link(
                path=g.path("path", g.text("path", required=True)),
                target=g.path("target", g.text("target", required=True)),
                optional=g.flag("optional"),
            )
        )
        g.done()
    layout = Layout(
        files=paths("files"),
        images=paths("images"),
        extra=paths("extra"),
        generated=paths("generated"),
        links=tuple(links),
    )
    if not layout.files and not layout.images:
        raise f.error("files", "a layout names the files or image folders it lays out")
    f.done()
    return layout


def _source(where: str, raw: Mapping[str, Any], j: int) -> Source:
    name = raw.get("name")
    f = _Fields(raw, where, f"source[{name if isinstance(name, str) else j}].", _SOURCE_KEYS)
    http_reason = f.text("http_reason")
    parts = f.integer("parts")
    url = f.url("url", required=True, http_reason=http_reason)
    if (parts is not None) != ("{part}" in url):
        raise f.error("url", "a numbered series (parts) has {part} in its url, and only then")
    checksum_url = f.url("checksum_url")
    if "{part}" in checksum_url and parts is None:
        raise f.error("checksum_url", "{part} without parts")
    size = f.integer("size")
    if size is not None and parts is not None:
        raise f.error("size", "give the size of a numbered series in size_approx")
    unpack = f.text("unpack")
    if unpack and unpack not in UNPACK:
        raise f.error("unpack", f"{unpack!r} is not one of {', '.join(UNPACK)}")
    members = []
    for k, m in enumerate(f.tables("members")):
        g = _Fields(m, where, f"{f.prefix}members[{k}].", _MEMBER_KEYS)
        # '' is the archive's root
        member = "" if g.data.get("from") == "" else g.text("from", required=True)
        g.seen.add("from")
        members.append(Member(member, g.path("to", g.text("to", required=True).rstrip("/"))))
        g.done()
    if members and not unpack:
        raise f.error("members", "members are paths inside an archive: give unpack too")
    source = Source(
        name=f.text("name", required=True),
        kind=f.choice("kind", SOURCE_KINDS),
        url=url,
        target=f.path("target", f.text("target", required=True)),
        size=size,
        size_approx=f.text("size_approx"),
        sha256=_hex(f, "sha256", f.text("sha256")),
        md5=_hex(f, "md5", f.text("md5")),
        checksum_url=checksum_url,
        parts=parts,
        part_digits=f.integer("part_digits") or 0,
        unpack=unpack,
        members=tuple(members),
        access=f.choice("access", ACCESS, default="open"),
        http_reason=http_reason,
        note=f.text("note"),
    )
    if source.kind == "form" and source.access != "form":
        raise f.error("access", "a form source has access = 'form'")
    f.done()
    return source


def _per_image(where: str, raw: Mapping[str, Any], j: int, sources: list[str]) -> PerImageUrl:
    f = _Fields(raw, where, f"per_image_url[{j}].", _PER_IMAGE_KEYS)
    source = f.text("source", required=True)
    if source not in sources:
        raise f.error("source", f"{source!r} is not one of this dataset's sources")
    local = f.text("local", required=True)
    f.path("local", re.sub(r"\{[^}]*\}", "x", local))
    pattern = f.text("name_pattern")
    template = f.url("url_template", http_reason=f.text("http_reason"))
    if pattern:
        if not template:
            raise f.error("name_pattern", "a name pattern builds the URL: give url_template too")
        try:
            re.compile(pattern)
        except re.error as e:
            raise f.error("name_pattern", f"not a regular expression ({e})") from None
    per_image = PerImageUrl(
        source=source,
        file=f.path("file", f.text("file", required=True)),
        key=f.text("key", required=True),
        field=f.text("field", required=True),
        local=local,
        records=f.text("records"),
        url_template=template,
        name_pattern=pattern,
        http_reason=f.text("http_reason"),
        note=f.text("note"),
    )
    f.done()
    return per_image


def _image_index(where: str, raw: Mapping[str, Any], j: int) -> ImageIndex:
    f = _Fields(raw, where, f"image_index[{j}].", _INDEX_KEYS)
    local = f.text("local", required=True)
    f.path("local", re.sub(r"\{[^}]*\}", "x", local))
    index = ImageIndex(
        file=f.path("file", f.text("file", required=True)),
        key=f.text("key", required=True),
        path=f.text("path", required=True),
        base=f.path("base", f.text("base", required=True)),
        local=local,
        records=f.text("records"),
    )
    f.done()
    return index


def _hub(where: str, raw: Mapping[str, Any]) -> HubCopy:
    f = _Fields(raw, where, "hf.", _HUB_KEYS)
    publisher = f.flag("publisher", required=True)
    checksums = {}
    for name, digest in f.mapping("file_sha256").items():
        if not isinstance(digest, str):
            raise f.error("file_sha256", f"{name!r}: expected a string")
        checksums[name] = _hex(f, "sha256", digest)
    repo = f.text("repo", required=True)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise f.error("repo", f"{repo!r} is not owner/name")
    hub = HubCopy(
        repo=repo,
        differs=f.text("differs", required=True),
        publisher=publisher,
        revision=f.text("revision"),
        config=f.text("config"),
        split=f.text("split"),
        question=f.text("question"),
        answers=f.text("answers"),
        image=f.text("image"),
        image_config=f.text("image_config"),
        files=f.texts("files"),
        file_sha256=checksums,
    )
    f.done()
    return hub


def _check_references(datasets: Sequence[Dataset]) -> None:
    by_name: dict[str, Dataset] = {}
    owner: dict[str, str] = {}
    for d in datasets:
        if d.name in by_name:
            raise CatalogueError(f"catalogue: dataset {d.name!r}, field 'name': used twice")
        by_name[d.name] = d
        for entry in d.entries:
            if entry in owner:
                raise CatalogueError(
                    f"catalogue: dataset {d.name!r}, field 'entries': {entry!r} is "
                    f"already listed by dataset {owner[entry]!r}"
                )
            owner[entry] = d.name
    for d in datasets:
        for name in d.images_from:
            other = by_name.get(name)
            if other is None or other.kind != "images":
                raise CatalogueError(
                    f"catalogue: dataset {d.name!r}, field 'images_from': {name!r} is not "
                    "an images dataset of the catalogue"
                )
