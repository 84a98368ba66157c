"""The download fixtures test themselves: the fixture site (tests/data_site.py) has a file for
every catalogue source, in the format the adapters read once placed the way the catalogue says,
and the fixture server (tests/fixture_http.py) answers as a publisher's server does, and
misbehaves as asked."""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import json
import os
import posixpath
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from PIL import Image

from data_site import BUILDERS, FixtureError, Site, build_site, served_path
from fixture_http import FixtureServer
from hammr.datasets.catalogue import Dataset, Source
from hammr.datasets.catalogue_file import load_catalogue
from hammr.eval.suites import load_suite

CATALOGUE = load_catalogue()
QUESTIONS = [d.name for d in CATALOGUE.datasets if d.kind == "questions"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return build_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def server(site: Site) -> Iterator[FixtureServer]:
    with FixtureServer(site.root) as s:
        yield s


@pytest.fixture
def fresh(site: Site) -> Iterator[FixtureServer]:
    """A server of its own, for the tests that set faults or count."""
    with FixtureServer(site.root) as s:
        yield s


def get(
    server: FixtureServer, path: str, method: str = "GET", **headers: str
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, "/" + path, headers=headers)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def raw_request(server: FixtureServer, path: str, timeout: float = 2.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.sendall(f"GET /{path} HTTP/1.1\r\nHost: fixture\r\n\r\n".encode())
    return sock


def read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """(the header block, the body bytes that came with it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def read_until(sock: socket.socket, body: bytes, n: int) -> bytes:
    while len(body) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return body


# -- the site covers the catalogue --------------------------------------------------------------


def test_every_catalogue_dataset_has_a_builder_and_every_builder_a_dataset() -> None:
    assert set(CATALOGUE.names()) == set(BUILDERS)


def test_a_catalogue_dataset_without_a_builder_stops_the_build(tmp_path: Path) -> None:
    newcomer = replace(CATALOGUE.get("hrbench"), name="newbench")
    catalogue = replace(CATALOGUE, datasets=(*CATALOGUE.datasets, newcomer))
    with pytest.raises(FixtureError, match=r"no fixture builder .*newbench"):
        build_site(tmp_path, catalogue)


def test_a_source_no_builder_serves_stops_the_build(tmp_path: Path) -> None:
    d = CATALOGUE.get("encvqa")
    more = replace(d.sources[0], name="val_questions", url=d.sources[0].url + ".v2",
                   target="encvqa/val.csv")  # fmt: skip
    changed = replace(d, sources=(*d.sources, more))
    catalogue = replace(
        CATALOGUE, datasets=tuple(changed if x.name == "encvqa" else x for x in CATALOGUE.datasets)
    )
    with pytest.raises(FixtureError, match=r"encvqa: no fixture file for source val_questions"):
        build_site(tmp_path, catalogue)


def source_urls(site: Site, d: Dataset, s: Source, *, checksums: bool = False) -> list[str]:
    """The URLs of a source the site serves (of a series, the parts it chose; with
    ``checksums``, their checksum files too)."""
    if s.parts is None:
        return list(s.urls())
    served = site.parts[f"{d.name}/{s.name}"]
    urls = [s.urls()[p] for p in served]
    if checksums and s.checksum_url:
        urls += [s.checksum_url.replace("{part}", str(p).zfill(s.part_digits)) for p in served]
    return urls


def test_every_open_source_url_answers_200_through_the_server(
    site: Site, server: FixtureServer
) -> None:
    checked = 0
    for d in CATALOGUE.datasets:
        for s in d.sources:
            if s.access == "form":
                assert get(server, served_path(s.url))[0] == 404, f"{d.name}/{s.name} is served"
                continue
            for url in source_urls(site, d, s, checksums=True):
                query = urlsplit(url).query
                status, _, body = get(server, served_path(url) + (f"?{query}" if query else ""))
                assert status == 200, f"{d.name}/{s.name}: {url} answered {status}"
                if s.kind != "hub_repo":
                    assert body == site.file(served_path(url)).read_bytes()
                checked += 1
    assert checked >= 30


def test_a_series_serves_only_the_parts_the_fixture_images_fall_in(
    site: Site, server: FixtureServer
) -> None:
    s = CATALOGUE.get("google_landmarks_v2").source("train_archives")
    assert site.parts["google_landmarks_v2/train_archives"] == (0, 1)
    holding = {
        image.archive for image in site.images["google_landmarks_v2"].values() if image.archive
    }
    assert holding == {served_path(s.urls()[0]), served_path(s.urls()[1])}
    assert get(server, served_path(s.urls()[2]))[0] == 404
    listed = get(server, served_path(s.checksum_url.replace("{part}", "001")))[2].decode()
    md5 = hashlib.md5(site.file(served_path(s.urls()[1])).read_bytes()).hexdigest()
    assert listed == f"{md5}  images_001.tar\n"


def test_every_image_url_serves_the_same_bytes_its_archive_holds(site: Site) -> None:
    for dataset, images in site.images.items():
        for key, image in images.items():
            if image.url:
                assert site.file(served_path(image.url)).read_bytes() == image.data, key
            if image.archive and image.member:
                blob = site.file(image.archive).read_bytes()
                assert archive_members(blob, image.archive)[image.member] == image.data, key
            assert image.served or image.form, f"{dataset}/{key} is nowhere"


def test_every_images_archive_and_url_list_holds_two_images_no_question_uses(
    site: Site,
) -> None:
    used = {
        (i.dataset, i.key)
        for entry in site.samples.values()
        for images in entry.values()
        for i in images
    }
    for dataset, images in site.images.items():
        for image in images.values():
            assert not (image.extra and (dataset, image.key) in used), image.key
        archives = {i.archive for i in images.values() if i.member}
        for archive in archives:
            extras = [i for i in images.values() if i.archive == archive and i.extra]
            assert len(extras) >= 2, f"{archive} holds {len(extras)} unused images"
        if CATALOGUE.get(dataset).kind == "images" and any(i.url for i in images.values()):
            assert len([i for i in images.values() if i.url and i.extra]) >= 2, dataset
    assert len(site.extra_images("oven_images")) == 2
    # every sample's image is an image of the site
    for entry in site.samples.values():
        for images in entry.values():
            for i in images:
                assert i.key in site.images[i.dataset], (i.dataset, i.key)


def test_every_image_is_a_tiny_picture_of_a_colour_of_its_own(site: Site) -> None:
    colours = set()
    for images in site.images.values():
        for image in images.values():
            with Image.open(io.BytesIO(image.data)) as picture:
                assert picture.format in {"JPEG", "PNG"} and picture.size == (24, 24)
                colours.add(picture.convert("RGB").getpixel((12, 12)))
    assert len(colours) == sum(len(images) for images in site.images.values())


def test_a_second_build_writes_the_same_bytes(site: Site) -> None:
    again = build_site(site.root)  # the same folder: a differing file would raise
    assert again.served == site.served


def test_images_of_names_where_each_image_is_fetched(site: Site) -> None:
    vg = site.images_of("visual_genome")
    assert vg["2410408"] == "cs.stanford.edu/people/rak248/VG_100K_2/2410408.jpg"
    gqa = site.images_of("gqa_images")
    assert set(gqa.values()) == {"downloads.cs.stanford.edu/nlp/data/gqa/images.zip"}
    assert set(site.images_of("oven_images").values()) == {""}
    assert site.question_images("gqa") == site.entry_images("generic-vqa/gqa")


def test_the_fixture_catalogue_carries_the_fixture_files_checksums(site: Site) -> None:
    fixture = site.fixture_catalogue()
    inat = fixture.get("inaturalist_2021").source("val_images")
    assert inat.md5 == hashlib.md5(site.file(served_path(inat.url)).read_bytes()).hexdigest()
    gqa = fixture.get("gqa_images").source("images")
    assert gqa.size == site.file(served_path(gqa.url)).stat().st_size
    assert CATALOGUE.get("gqa_images").source("images").size != gqa.size


def test_the_mevqa_archive_is_a_real_two_part_split_zip(site: Site) -> None:
    d = CATALOGUE.get("mevqa")
    last = next(s for s in d.sources if s.unpack == "split-zip")
    first = next(s for s in d.sources if s.target == last.target and not s.unpack)
    part1 = site.file(served_path(first.url)).read_bytes()
    assert part1.startswith(b"PK\x07\x08")  # the spanning signature
    part2 = site.file(served_path(last.url)).read_bytes()
    joined = zipfile.ZipFile(io.BytesIO(join_split_zip([part1, part2])))
    assert joined.testzip() is None
    assert "SME_test.json" in joined.namelist()


# -- the fixture is in the adapters' format ------------------------------------------------------


def join_split_zip(parts: list[bytes]) -> bytes:
    """A split zip's parts as one ordinary zip: the parts concatenated, the central directory's
    disk numbers and per-disk offsets turned into offsets in the whole."""
    starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    data = b"".join(parts)
    end = parts[-1].rfind(b"PK\x05\x06")
    _, _, cd_disk, _, total, cd_size, cd_offset, _ = struct.unpack(
        "<IHHHHIIH", parts[-1][end : end + 22]
    )
    cd_start = starts[cd_disk] + cd_offset
    cd = bytearray(data[cd_start : cd_start + cd_size])
    i = 0
    while i < len(cd):
        assert cd[i : i + 4] == b"PK\x01\x02", "not a central directory entry"
        name_len, extra_len, comment_len, disk = struct.unpack("<HHHH", cd[i + 28 : i + 36])
        (offset,) = struct.unpack("<I", cd[i + 42 : i + 46])
        cd[i + 34 : i + 36] = struct.pack("<H", 0)
        cd[i + 42 : i + 46] = struct.pack("<I", starts[disk] + offset)
        i += 46 + name_len + extra_len + comment_len
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, total, total, cd_size, cd_start, 0)
    return data[:cd_start] + bytes(cd) + eocd


def archive_members(blob: bytes, name: str) -> dict[str, bytes]:
    """Every file of an archive (zip or tar, maybe gzip-compressed) by its member name."""
    if zipfile.is_zipfile(io.BytesIO(blob)):
        with zipfile.ZipFile(io.BytesIO(blob)) as z:
            return {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as t:
        out = {}
        for m in t.getmembers():
            f = t.extractfile(m) if m.isfile() else None
            if f is not None:
                out[m.name] = f.read()
        return out


def unpacked_at(source: Source, member: str) -> str | None:
    """Where the catalogue says ``member`` of ``source``'s archive goes (None: not kept)."""
    if not source.members:
        return posixpath.normpath(posixpath.join(source.target, member))
    for m in source.members:
        if m.member == "" or m.member.endswith("/"):
            if member.startswith(m.member):
                return f"{m.to}/{member[len(m.member) :]}"
        elif member == m.member:
            return m.to
    return None


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def records(path: Path, key: str = "") -> list[dict[str, Any]]:
    """The records of a URL list or index: a CSV with a header, JSON Lines, a JSON list, or
    the list under ``key`` (else the one list of objects) of a JSON object."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        return list(csv.DictReader(io.StringIO(text)))
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # JSON Lines (NLVR2's test1.json despite its name)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if key:
        data = data[key]
    if isinstance(data, dict):
        data = next(
            v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict)
        )
    return list(data)


def place(site: Site, data_dir: Path, datasets: tuple[Dataset, ...], *, per_image: bool = True,
          archives: bool = True) -> None:  # fmt: skip
    """Fill ``data_dir`` from the site as the catalogue says: plain files at their targets,
    archives unpacked by their members (images archives only with ``archives``), hub
    repositories as a snapshot, the form's files where a user puts them, each image of a URL
    list at its ``local`` path (with ``per_image``), index links, and the layout's links."""
    for d in datasets:
        split_parts = {
            p.name: p for s in d.sources if s.unpack == "split-zip" for p in d.sources
            if p.target == s.target and not p.unpack and d.sources.index(p) < d.sources.index(s)
        }  # fmt: skip
        for s in d.sources:
            if s.access == "form" or s.name in split_parts:
                continue
            if s.kind == "images_archive" and not archives:
                continue
            if s.kind == "hub_repo":
                for rel in site.hub_files[d.name]:
                    blob = site.file(served_path(f"{s.url}/resolve/main/{rel}")).read_bytes()
                    write(data_dir / s.target / rel, blob)
                continue
            for url in source_urls(site, d, s):
                blob = site.file(served_path(url)).read_bytes()
                if not s.unpack:
                    write(data_dir / s.target, blob)
                    continue
                if s.unpack == "split-zip":
                    earlier = [p for p in split_parts.values() if p.target == s.target]
                    blob = join_split_zip(
                        [*(site.file(served_path(p.url)).read_bytes() for p in earlier), blob]
                    )
                for member, content in archive_members(blob, url).items():
                    to = unpacked_at(s, member)
                    if to is not None:
                        write(data_dir / to, content)
        if d.name in site.form_files:
            site.place_form_images(d.name, data_dir)
        for spec in d.per_image_url if per_image else ():
            for record in records(data_dir / spec.file, getattr(spec, "records", "")):
                url = str(record.get(spec.field, ""))
                if not url.startswith(("http://", "https://")):
                    url = spec.url_template.format(**record)
                computed = {
                    "url_folder": posixpath.basename(posixpath.dirname(urlsplit(url).path)),
                    "pair": str(record.get(spec.key, "")).rsplit("-", 1)[0],
                }
                local = spec.local.format(**{**computed, **record})
                assert served_path(url) in site.served, f"{d.name}: {url} is not served"
                write(data_dir / local, site.file(served_path(url)).read_bytes())
        for index in getattr(d, "image_index", ()):
            if not (data_dir / index.file).is_file():
                continue
            for record in records(data_dir / index.file, index.records):
                link = data_dir / index.local.format(**record)
                target = data_dir / index.base / str(record[index.path])
                if target.is_file() and not link.exists():
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(os.path.relpath(target, link.parent))
        for layout_link in d.layout.links:
            path, target = data_dir / layout_link.path, data_dir / layout_link.target
            if (layout_link.optional and not target.exists()) or path.is_symlink():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(os.path.relpath(target, path.parent), target_is_directory=True)


def loaded(entry: str, data_dir: Path) -> dict[str, tuple[str, ...]]:
    """sample id -> the image files it reads (relative to the data folder), every image
    checked to exist (and a ZoomBench crop too)."""
    suite, name = entry.split("/", 1)
    pairs = load_suite(suite).select([name]).samples(data_dir, check_images=True)
    out = {}
    for _, sample in pairs:
        crop = sample.meta.get("crop_image")
        assert crop is None or Path(str(crop)).is_file(), f"{entry} {sample.id}: no {crop}"
        out[sample.id] = tuple(p.relative_to(data_dir).as_posix() for p in sample.images.values())
    return out


@pytest.mark.parametrize("name", QUESTIONS)
def test_a_data_folder_placed_from_the_site_loads_every_entry_with_its_images(
    site: Site, tmp_path: Path, name: str
) -> None:
    d = CATALOGUE.get(name)
    data_dir = tmp_path / "data"
    place(site, data_dir, CATALOGUE.with_images([d]))
    for entry in d.entries:
        got = loaded(entry, data_dir)
        assert got == site.entry_images(entry), entry
        assert 2 <= len(got) <= 5, f"{entry}: {len(got)} samples"
        images = [p for paths in got.values() for p in paths]
        assert len(set(images)) == len(images), f"{entry}: two samples share an image"


@pytest.mark.parametrize(
    "name", [d.name for d in CATALOGUE.datasets if d.kind == "questions" and any(
        x.per_image_url for x in CATALOGUE.with_images([d]))]
)  # fmt: skip
def test_the_url_lists_alone_bring_each_image_they_list(
    site: Site, tmp_path: Path, name: str
) -> None:
    """Without the image archives, the images a URL list names arrive at the paths the
    adapter reads (what `hammr data get` does for a draw)."""
    d = CATALOGUE.get(name)
    data_dir = tmp_path / "data"
    with_images = CATALOGUE.with_images([d])
    place(site, data_dir, with_images, archives=False)
    by_url = {x.name for x in with_images if x.per_image_url}
    checked = 0
    for entry in d.entries:
        for sample_id, images in site.samples[entry].items():
            for image in images:
                if image.dataset in by_url and site.images[image.dataset][image.key].url:
                    assert (data_dir / image.path).is_file(), f"{entry} {sample_id}"
                    checked += 1
    assert checked > 0
    for x in with_images:  # what only an images archive holds is not there
        for image in site.images.get(x.name, {}).values():
            if not image.url and image.member:
                assert not (data_dir / image.local).exists(), image.local


def test_the_form_images_go_where_the_adapters_look(site: Site, tmp_path: Path) -> None:
    written = site.place_form_images("oven_images", tmp_path)
    assert tmp_path / "infoseek/oven_images/01/oven_01963180.jpg" in written
    mapping = (tmp_path / "infoseek/ovenid2impath.csv").read_text().splitlines()
    assert "oven_01963180,oven_images/01/oven_01963180.jpg" in mapping
    site.place_form_images("nlvr2", tmp_path)
    assert (tmp_path / "nlvr2/images/test1/test1-0-1-img0.png").is_file()
    with pytest.raises(KeyError, match="gqa"):
        site.place_form_images("gqa", tmp_path)


# -- the server: what downloaders rely on -----------------------------------------------------


def a_file(site: Site, suffix: str) -> str:
    return next(p for p in sorted(site.served) if p.endswith(suffix) and site.file(p).is_file())


def test_get_and_head_answer_with_length_type_etag_and_ranges(
    site: Site, server: FixtureServer
) -> None:
    path = a_file(site, "images.zip")
    body = site.file(path).read_bytes()
    status, headers, got = get(server, path)
    assert (status, got) == (200, body)
    assert headers["Content-Length"] == str(len(body))
    assert headers["Content-Type"] == "application/zip"
    assert headers["Accept-Ranges"] == "bytes"
    assert headers["ETag"] and headers["Last-Modified"]
    status, head_headers, got = get(server, path, "HEAD")
    assert (status, got) == (200, b"")
    assert head_headers["Content-Length"] == str(len(body))
    assert head_headers["ETag"] == headers["ETag"]
    status, _, _ = get(server, path + "?raw=true&x=1")
    assert status == 200


@pytest.mark.parametrize(
    ("suffix", "kind"),
    [(".zip", "application/zip"), (".tar", "application/x-tar"),
     (".tar.gz", "application/gzip"), (".jpg", "image/jpeg"), (".png", "image/png"),
     (".json", "application/json"), (".csv", "text/csv"), (".z01", "application/octet-stream")],
)  # fmt: skip
def test_content_type_by_extension(
    site: Site, server: FixtureServer, suffix: str, kind: str
) -> None:
    assert get(server, a_file(site, suffix), "HEAD")[1]["Content-Type"] == kind


def test_ranges(site: Site, server: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    body = site.file(path).read_bytes()
    size = len(body)
    status, headers, got = get(server, path, Range="bytes=100-")
    assert (status, got) == (206, body[100:])
    assert headers["Content-Range"] == f"bytes 100-{size - 1}/{size}"
    assert headers["Content-Length"] == str(size - 100)
    status, headers, got = get(server, path, Range="bytes=10-19")
    assert (status, got, headers["Content-Range"]) == (206, body[10:20], f"bytes 10-19/{size}")
    assert get(server, path, Range="bytes=-5")[2] == body[-5:]
    assert get(server, path, Range=f"bytes=10-{size + 50}")[2] == body[10:]
    status, headers, got = get(server, path, Range=f"bytes={size}-")
    assert (status, got, headers["Content-Range"]) == (416, b"", f"bytes */{size}")
    etag = get(server, path, "HEAD")[1]["ETag"]
    assert get(server, path, Range="bytes=10-", **{"If-Range": etag})[0] == 206
    status, _, got = get(server, path, Range="bytes=10-", **{"If-Range": '"stale"'})
    assert (status, got) == (200, body)
    assert get(server, path, Range="bytes=5-2")[0] == 200  # malformed: ignored
    status, headers, got = get(server, path, "HEAD", Range="bytes=4-")
    assert (status, got, headers["Content-Length"]) == (206, b"", str(size - 4))


def test_missing_files_folders_and_escapes_answer_404(site: Site, server: FixtureServer) -> None:
    assert get(server, "nowhere.example/file.zip")[0] == 404
    assert get(server, "cs.stanford.edu/people")[0] == 404  # a folder without an index
    assert get(server, "cs.stanford.edu/../../etc/passwd")[0] == 404
    status, headers, body = get(server, "huggingface.co/api/datasets/craigwu/vstar_bench")
    assert (status, headers["Content-Type"]) == (200, "application/json")
    info = json.loads(body)
    assert {s["rfilename"] for s in info["siblings"]} == set(site.hub_files["vstar"])
    assert "test_questions.jsonl" in site.hub_files["vstar"]


def test_counting(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    size = site.file(path).stat().st_size
    get(fresh, path)
    get(fresh, path, Range="bytes=10-")
    get(fresh, path, "HEAD")
    get(fresh, "missing/x.jpg")
    assert fresh.requests == [
        ("GET", path, None, 200),
        ("GET", path, "bytes=10-", 206),
        ("HEAD", path, None, 200),
        ("GET", "missing/x.jpg", None, 404),
    ]
    assert fresh.bytes_sent(path) == 2 * size - 10
    assert fresh.count(path) == 3
    assert fresh.count(path, method="GET") == 2
    assert fresh.count() == 4
    assert fresh.count("missing/") == 1
    fresh.reset_counts()
    assert (fresh.requests, fresh.count(), fresh.bytes_sent(path)) == ([], 0, 0)


def test_counting_is_thread_safe(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    size = site.file(path).stat().st_size

    def many() -> None:
        for _ in range(5):
            assert get(fresh, path)[0] == 200

    threads = [threading.Thread(target=many) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fresh.count(path) == 80
    assert fresh.bytes_sent(path) == 80 * size


# -- faults ----------------------------------------------------------------------------------


def test_status_faults_and_their_times(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    fresh.fault(path, "404")
    assert get(fresh, path)[0] == 404
    assert get(fresh, path)[0] == 404
    fresh.fault(path, "500", times=2)
    assert [get(fresh, path)[0] for _ in range(3)] == [500, 500, 200]
    fresh.fault(path, "html")
    status, headers, body = get(fresh, path)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body.startswith(b"<!DOCTYPE html>")
    fresh.clear_faults()
    assert get(fresh, path)[2] == site.file(path).read_bytes()
    with pytest.raises(ValueError, match="unknown fault"):
        fresh.fault(path, "teapot")


def test_redirect_loop(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    fresh.fault(path, "redirect_loop")
    status, headers, _ = get(fresh, path + "?raw=true")
    assert (status, headers["Location"]) == (302, f"/{path}?raw=true")
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError, match=r"infinite loop|302"):
        urllib.request.urlopen(fresh.url_for(path), timeout=5)
    assert fresh.count(path) >= 3


def test_truncate_sends_the_whole_length_and_closes_early(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    body = site.file(path).read_bytes()
    fresh.fault(path, "truncate", after=100)
    conn = http.client.HTTPConnection("127.0.0.1", fresh.port, timeout=5)
    conn.request("GET", "/" + path)
    r = conn.getresponse()
    assert r.headers["Content-Length"] == str(len(body))
    with pytest.raises(http.client.IncompleteRead) as e:
        r.read()
    assert e.value.partial == body[:100]
    conn.close()


def test_stall_hangs_until_released(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    body = site.file(path).read_bytes()
    fresh.fault(path, "stall", after=50)
    sock = raw_request(fresh, path, timeout=0.5)
    head, got = read_head(sock)
    assert f"Content-Length: {len(body)}".encode() in head
    got = read_until(sock, got, 50)
    assert got == body[:50]
    with pytest.raises(TimeoutError):
        sock.recv(1)
    assert fresh.stalled() == 1
    fresh.release()
    sock.settimeout(5)
    assert read_until(sock, got, len(body)) == body
    sock.close()


def test_the_server_stops_at_once_with_a_reply_stalled(site: Site) -> None:
    path = a_file(site, "images.zip")
    server = FixtureServer(site.root).start()
    server.fault(path, "stall")
    sock = raw_request(server, path, timeout=5)
    read_head(sock)
    deadline = time.monotonic() + 5
    while server.stalled() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    began = time.monotonic()
    server.close()
    assert time.monotonic() - began < 3
    assert sock.recv(10) == b""  # the connection was closed
    sock.close()


def test_throttle_slows_a_file_down(site: Site, fresh: FixtureServer) -> None:
    path = a_file(site, "images.zip")
    body = site.file(path).read_bytes()
    fresh.fault(path, "throttle", bytes_per_s=len(body) * 2)
    began = time.monotonic()
    assert get(fresh, path)[2] == body
    assert time.monotonic() - began >= 0.4


def test_a_client_killed_mid_file_leaves_the_server_serving(
    site: Site, fresh: FixtureServer, tmp_path: Path
) -> None:
    path = a_file(site, ".z01")
    size = site.file(path).stat().st_size
    fresh.fault(path, "throttle", bytes_per_s=4000)
    script = (
        "import sys, urllib.request\n"
        "with urllib.request.urlopen(sys.argv[1]) as r, open(sys.argv[2], 'wb') as f:\n"
        "    while chunk := r.read(512):\n"
        "        f.write(chunk); f.flush()\n"
    )
    command = [sys.executable, "-c", script, fresh.url_for(path), str(tmp_path / "out")]
    client = subprocess.Popen(command)
    try:
        deadline = time.monotonic() + 10
        while fresh.bytes_sent(path) < 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fresh.bytes_sent(path) >= 2000
    finally:
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
    deadline = time.monotonic() + 10
    while fresh.count(path) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fresh.count(path) == 1  # the reply ended when its client went away
    assert fresh.bytes_sent(path) < size
    fresh.clear_faults()
    assert get(fresh, path)[2] == site.file(path).read_bytes()
