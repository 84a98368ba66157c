"""hammr.datasets.unpack: a downloaded archive unpacked into the data folder, safely (nothing
outside the data folder, whatever the archive holds) and resumably (a kill leaves whole files,
a second run keeps them)."""

from __future__ import annotations

import errno
import gzip
import io
import itertools
import os
import random
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from hammr.datasets import unpack as unpack_module
from hammr.datasets.catalogue import Member
from hammr.datasets.unpack import CHUNK, Unpacked, UnpackError, unpack
from split_zip import SPLIT_SIGNATURE, write_split_zip

KINDS = ("zip", "tar", "tar.gz", "split-zip")


def data(n: int, seed: int) -> bytes:
    """Bytes that do not compress, so an archive's size is its members' sizes."""
    return random.Random(seed).randbytes(n)


TREE: list[tuple[str, bytes | None]] = [
    ("readme.txt", b"the dataset\n"),
    ("images/", None),
    ("images/a.jpg", data(3000, 1)),
    ("images/sub/", None),
    ("images/sub/b.jpg", data(5000, 2)),
    ("images/empty/", None),
    ("questions.json", b'{"questions": []}'),
]
FILES = {name: body for name, body in TREE if body is not None}


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """tmp/data is the data folder, tmp/outside a sibling that must stay empty, tmp/dl the
    downloads."""
    for name in ("data", "outside", "dl"):
        (tmp_path / name).mkdir()
    return tmp_path


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def assert_nothing_outside(place: Path) -> None:
    """The sibling of the data folder, and the downloads' folder, hold nothing new."""
    assert list((place / "outside").iterdir()) == []
    assert not [p for p in (place / "dl").rglob("*") if p.is_dir() or "evil" in p.name]


def assert_nothing_written(place: Path) -> None:
    assert files_under(place / "data") == {}
    assert_nothing_outside(place)


def no_temporaries(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def write_zip(path: Path, members: Sequence[tuple[str, bytes | None]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, body in members:
            zf.writestr(zipfile.ZipInfo(name), b"" if body is None else body)
    return path


def tar_info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def write_tar(
    path: Path, members: Sequence[tuple[str, bytes | None] | tarfile.TarInfo], gz: bool = False
) -> Path:
    with tarfile.open(path, "w:gz" if gz else "w", format=tarfile.GNU_FORMAT) as tf:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tf.addfile(member)
                continue
            name, body = member
            info = tar_info(name.rstrip("/"), tarfile.DIRTYPE if body is None else tarfile.REGTYPE)
            info.size = len(body or b"")
            tf.addfile(info, io.BytesIO(body or b""))
    return path


def make(
    place: Path, kind: str, members: Sequence[tuple[str, bytes | None]] = TREE, parts: int = 2
) -> tuple[Path, list[Path]]:
    """The archive of ``kind`` holding ``members``, and its earlier parts (a split zip)."""
    dl = place / "dl"
    if kind == "zip":
        return write_zip(dl / "set.zip", members), []
    if kind in ("tar", "tar.gz"):
        return write_tar(dl / f"set.{kind}", members, gz=kind == "tar.gz"), []
    size = sum(len(b or b"") + 80 for _, b in members) + 60 * len(members)
    paths = write_split_zip(dl / "set.zip", members, size // parts + 1)
    assert len(paths) == parts
    return paths[-1], paths[:-1]


def run(place: Path, archive: Path, kind: str, **kwargs: Any) -> Unpacked:
    kwargs.setdefault("target", ".")
    return unpack(archive, kind, place / "data", **kwargs)


# -- mapping ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_the_whole_archive_goes_under_target(place: Path, kind: str) -> None:
    archive, parts = make(place, kind)
    done = run(place, archive, kind, target="gqa/v1", parts=parts)
    assert files_under(place / "data") == {f"gqa/v1/{n}": b for n, b in FILES.items()}
    assert (place / "data/gqa/v1/images/empty").is_dir()
    assert done == Unpacked(tuple(f"gqa/v1/{n}" for n in FILES), ())


def test_target_dot_is_the_data_folder_itself(place: Path) -> None:
    archive, _ = make(place, "zip")
    run(place, archive, "zip", target=".")
    assert files_under(place / "data") == FILES


@pytest.mark.parametrize("kind", KINDS)
def test_members_map_a_prefix_and_a_single_file(place: Path, kind: str) -> None:
    archive, parts = make(place, kind)
    members = [Member("images/", "gqa/images"), Member("questions.json", "gqa/q.json")]
    done = run(place, archive, kind, target="ignored", members=members, parts=parts)
    assert files_under(place / "data") == {
        "gqa/images/a.jpg": FILES["images/a.jpg"],
        "gqa/images/sub/b.jpg": FILES["images/sub/b.jpg"],
        "gqa/q.json": FILES["questions.json"],
    }
    assert (place / "data/gqa/images/empty").is_dir()
    assert set(done.written) == set(files_under(place / "data"))


def test_the_root_member_maps_every_path(place: Path) -> None:
    archive, _ = make(place, "tar")
    run(place, archive, "tar", members=[Member("", "encvqa/landmarks")])
    assert files_under(place / "data") == {f"encvqa/landmarks/{n}": b for n, b in FILES.items()}


def test_tar_names_starting_with_dot_slash_match_members(place: Path) -> None:
    archive = write_tar(place / "dl/v.tar.gz", [("./", None), ("./val/x.jpg", b"x")], gz=True)
    run(place, archive, "tar.gz", members=[Member("val/", "inat/val")])
    assert files_under(place / "data") == {"inat/val/x.jpg": b"x"}


def test_a_member_matching_nothing_names_it_and_the_top_level(place: Path) -> None:
    archive, _ = make(place, "zip")
    members = [Member("images/", "gqa/images"), Member("imgs/", "gqa/imgs")]
    with pytest.raises(UnpackError) as e:
        run(place, archive, "zip", members=members)
    assert str(e.value) == (
        f"{archive} has no member 'imgs/'; its top level holds readme.txt, images/, questions.json"
    )
    assert_nothing_written(place)


def test_the_top_level_list_stops_at_five(place: Path) -> None:
    archive = write_zip(place / "dl/many.zip", [(f"f{i}.txt", b"x") for i in range(8)])
    with pytest.raises(
        UnpackError, match=r"holds f0.txt, f1.txt, f2.txt, f3.txt, f4.txt and 3 more"
    ):
        run(place, archive, "zip", members=[Member("nope.json", "x.json")])
    assert_nothing_written(place)


@pytest.mark.parametrize(
    ("target", "members"),
    [("../up", ()), ("/abs", ()), (".", (Member("images/", "../up"),))],
)
def test_a_destination_outside_the_data_folder_is_refused(
    place: Path, target: str, members: tuple[Member, ...]
) -> None:
    archive, _ = make(place, "zip")
    with pytest.raises(UnpackError, match="is not a path under the data folder"):
        run(place, archive, "zip", target=target, members=members)
    assert_nothing_written(place)


# -- split zips -------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("deflate", [False, True])
def test_a_split_zip_with_members_across_part_boundaries(
    place: Path, count: int, deflate: bool
) -> None:
    big = data(9000, 3)
    members = [("set/", None), ("set/small.txt", b"s"), ("set/big.bin", big), ("set/z.txt", b"z")]
    paths = write_split_zip(place / "dl/set.zip", members, 10_000 // count, deflate=deflate)
    assert len(paths) == count
    assert paths[0].read_bytes().startswith(SPLIT_SIGNATURE)
    assert [p.name for p in paths[:-1]] == [f"set.z{i:02d}" for i in range(1, count)]
    done = run(place, paths[-1], "split-zip", parts=paths[:-1])
    assert files_under(place / "data") == {
        "set/small.txt": b"s",
        "set/big.bin": big,
        "set/z.txt": b"z",
    }
    assert done.written == ("set/small.txt", "set/big.bin", "set/z.txt")


def test_a_split_zip_needs_all_its_parts(place: Path) -> None:
    archive, parts = make(place, "split-zip", parts=3)
    with pytest.raises(
        UnpackError, match=r"is part 3 of a split zip: it needs the 2 part\(s\) before it, and 1"
    ):
        run(place, archive, "split-zip", parts=parts[1:])
    with pytest.raises(UnpackError, match="is the last of 3 parts of a split zip"):
        run(place, archive, "zip")
    with pytest.raises(UnpackError, match="parts are for a split zip, not a tar archive"):
        run(place, archive, "tar", parts=parts)
    assert_nothing_written(place)


@pytest.mark.parametrize("change", ["out-of-order", "missing", "cut-last"])
def test_a_split_zip_whose_parts_do_not_fit_is_refused_before_writing(
    place: Path, change: str
) -> None:
    archive, parts = make(place, "split-zip", [(f"{i}.bin", data(900, i)) for i in range(12)], 4)
    if change == "out-of-order":
        parts.reverse()
    elif change == "missing":
        parts[1] = parts[0]
    else:  # bytes lost inside the last part, its end record kept
        archive.write_bytes(archive.read_bytes()[:100] + archive.read_bytes()[110:])
    with pytest.raises(UnpackError) as e:
        run(place, archive, "split-zip", parts=parts)
    assert str(e.value) == (
        f"{archive} is not a complete split zip archive (truncated or corrupt: its parts do "
        "not fit together: one is cut short, missing or out of order)"
    )
    assert_nothing_written(place)


@pytest.mark.parametrize("cut", [0, 1])
def test_an_earlier_part_cut_short_fails_the_member_across_it(place: Path, cut: int) -> None:
    """Each part's offsets count from its own start, so a part cut short spoils only the member
    that runs across its end: found by its CRC, the members before it written whole."""
    members = [(f"{i}.bin", data(900, i)) for i in range(12)]
    archive, parts = make(place, "split-zip", members, 4)
    parts[cut].write_bytes(parts[cut].read_bytes()[:-10])
    bad_crc = r"\(truncated or corrupt: Bad CRC-32 for file '\d+.bin'\)$"
    with pytest.raises(UnpackError, match=r"is not a complete split zip archive " + bad_crc):
        run(place, archive, "split-zip", parts=parts)
    written = files_under(place / "data")
    assert 0 < len(written) < 12
    assert written == {name: body for name, body in members if name in written}
    assert no_temporaries(place / "data")
    assert_nothing_outside(place)


def test_a_zip_with_one_part_reads_as_a_split_zip(place: Path) -> None:
    archive, _ = make(place, "zip")
    run(place, archive, "split-zip")
    assert files_under(place / "data") == FILES


ZIP = shutil.which("zip")


@pytest.mark.skipif(ZIP is None, reason="no `zip` binary (Info-ZIP) to make a real split zip")
@pytest.mark.parametrize(("size", "count"), [(100_000, 2), (150_000, 3)])
@pytest.mark.parametrize("zip64", [False, True], ids=["zip32", "zip64"])
def test_a_split_zip_made_by_info_zip(place: Path, size: int, count: int, zip64: bool) -> None:
    """The same reading, on what Info-ZIP's `zip -s` writes (its smallest part is 64 KiB; -fz
    forces the zip64 records big split archives carry, whose locator names several disks)."""
    tree = place / "tree"
    want = {
        "ds/big.bin": data(size - 5000, 4),
        "ds/small.txt": b"small\n",
        "ds/sub/c.bin": data(4000, 5),
    }
    for name, body in want.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(body)
    options = ["-fz"] if zip64 else []
    subprocess.run([str(ZIP), "-q", "-r", *options, "-s", "64k", str(place / "dl/ds.zip"), "ds"],
                   cwd=tree, check=True)  # fmt: skip
    parts = sorted((place / "dl").glob("ds.z[0-9][0-9]"))
    assert len(parts) == count - 1
    run(place, place / "dl/ds.zip", "split-zip", parts=parts, members=[Member("ds/", "x")])
    assert files_under(place / "data") == {f"x/{n.removeprefix('ds/')}": b for n, b in want.items()}


# -- safety -----------------------------------------------------------------------------------

TRAVERSALS = ["../evil", "/abs", "a/../../evil", "..\\evil", "a\\..\\..\\evil", "C:/evil", "c:evil"]


@pytest.mark.parametrize("name", TRAVERSALS)
@pytest.mark.parametrize("kind", ["zip", "tar", "tar.gz", "split-zip"])
def test_a_member_that_could_leave_the_folder_refuses_the_archive(
    place: Path, kind: str, name: str
) -> None:
    archive, parts = make(place, kind, [("good.txt", b"fine"), (name, b"evil")])
    with pytest.raises(UnpackError) as e:
        run(place, archive, kind, target="deep/er", parts=parts)
    assert str(e.value).startswith(f"{archive}: the member {name!r} ")
    assert str(e.value).endswith("; nothing was unpacked")
    assert_nothing_written(place)
    assert not (place / "evil").exists()


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    "members",
    [
        [tar_info("link", tarfile.SYMTYPE, "/etc"), ("link/passwd", b"root::0:0")],
        [tar_info("a/link", tarfile.SYMTYPE, "../../outside"), ("a/link/x", b"x")],
        [tar_info("link", tarfile.SYMTYPE, "sub/../../outside/x")],
        [tar_info("hard", tarfile.LNKTYPE, "/etc/passwd")],
        [tar_info("hard", tarfile.LNKTYPE, "../outside/secret")],
    ],
    ids=["symlink-abs", "symlink-up", "symlink-up-via-sub", "hardlink-abs", "hardlink-up"],
)
def test_a_link_out_of_the_archive_refuses_it(place: Path, members: list[Any], gz: bool) -> None:
    archive = write_tar(place / "dl/links.tar", [("ok.txt", b"ok"), *members], gz=gz)
    with pytest.raises(
        UnpackError, match=r"is a link to .*, outside the archive; nothing was unpacked"
    ):
        run(place, archive, "tar.gz" if gz else "tar", target="t")
    assert_nothing_written(place)
    assert not [p for p in (place / "data").rglob("*") if p.is_symlink()]


def test_links_inside_the_archive_are_written_as_copies_never_as_links(place: Path) -> None:
    archive = write_tar(
        place / "dl/in.tar",
        [
            ("d/", None),
            ("d/real.bin", b"real"),
            tar_info("d/soft.bin", tarfile.SYMTYPE, "real.bin"),
            tar_info("d/hard.bin", tarfile.LNKTYPE, "d/real.bin"),
            tar_info("top.bin", tarfile.SYMTYPE, "d/soft.bin"),  # a link to a link
            tar_info("folder", tarfile.SYMTYPE, "d"),  # to a folder: left out
            tar_info("dangling", tarfile.SYMTYPE, "nothing"),  # to nothing: left out
        ],
    )
    done = run(place, archive, "tar", target="t")
    assert files_under(place / "data") == {
        f"t/{n}": b"real" for n in ("d/real.bin", "d/soft.bin", "d/hard.bin", "top.bin")
    }
    assert done.written == ("t/d/real.bin", "t/d/soft.bin", "t/d/hard.bin", "t/top.bin")
    assert not [p for p in (place / "data").rglob("*") if p.is_symlink()]


def test_a_zip_symlink_is_a_copy_or_a_refusal_too(place: Path) -> None:
    def with_link(target: str) -> Path:
        path = place / f"dl/{len(list((place / 'dl').iterdir()))}.zip"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("real.txt", b"real")
            link = zipfile.ZipInfo("link.txt")
            link.create_system, link.external_attr = 3, 0o120777 << 16
            zf.writestr(link, target)
        return path

    with pytest.raises(UnpackError, match=r"'link.txt' is a link to '\.\./\.\./outside/x'"):
        run(place, with_link("../../outside/x"), "zip")
    assert_nothing_written(place)
    run(place, with_link("real.txt"), "zip")
    assert files_under(place / "data") == {"real.txt": b"real", "link.txt": b"real"}


def test_backslashes_are_folder_separators(place: Path) -> None:
    """As a zip made on Windows by an old tool writes them."""
    archive = write_zip(place / "dl/win.zip", [("set\\sub\\a.txt", b"a")])
    assert run(place, archive, "zip", target="t").written == ("t/set/sub/a.txt",)
    assert files_under(place / "data") == {"t/set/sub/a.txt": b"a"}


def test_devices_and_fifos_in_a_tar_are_left_out(place: Path) -> None:
    archive = write_tar(
        place / "dl/dev.tar",
        [tar_info("fifo", tarfile.FIFOTYPE), tar_info("null", tarfile.CHRTYPE), ("f.txt", b"f")],
    )
    assert run(place, archive, "tar").written == ("f.txt",)
    assert sorted(p.name for p in (place / "data").iterdir()) == ["f.txt"]


def test_a_link_the_user_made_in_the_data_folder_is_followed(place: Path) -> None:
    """The decision: a link already in the data folder was made by a person (no archive ever
    makes one), so writing through it goes where they pointed it, here another disk."""
    elsewhere = place / "elsewhere"
    elsewhere.mkdir()
    (place / "data/gqa").symlink_to(elsewhere)
    archive, _ = make(place, "zip")
    run(place, archive, "zip", members=[Member("images/", "gqa/images")])
    assert files_under(elsewhere) == {
        "images/a.jpg": FILES["images/a.jpg"],
        "images/sub/b.jpg": FILES["images/sub/b.jpg"],
    }
    assert (place / "data/gqa").is_symlink()


# -- broken downloads -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "keep"),
    [
        ("zip", -100),
        ("split-zip", -100),
        ("tar", 8000),  # inside images/sub/b.jpg's data (its header is at 5632)
        ("tar", 5632 + 100),  # inside that header
        ("tar.gz", -200),
        ("tar.gz", -4),  # only the gzip trailer (CRC and length)
    ],
)
def test_a_truncated_archive_is_refused_before_writing(place: Path, kind: str, keep: int) -> None:
    archive, parts = make(place, kind)
    archive.write_bytes(archive.read_bytes()[:keep])
    with pytest.raises(UnpackError, match=r"is not a complete .* archive \(truncated or corrupt: "):
        run(place, archive, kind, parts=parts)
    assert_nothing_written(place)


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz of a cut tar"])
@pytest.mark.parametrize("keep", [512 + 1024, 512 + 1024 + 100], ids=["after-a", "in-b-header"])
def test_a_tar_cut_between_members_is_refused(place: Path, gz: bool, keep: int) -> None:
    """tarfile takes a tar that ends right after a member, or in a header, for a whole one:
    the end-of-archive marker is what tells them apart (inside a whole gzip stream too)."""
    archive = write_tar(place / "dl/cut.tar", [("a.bin", data(1024, 6)), ("b.bin", data(1024, 7))])
    cut = archive.read_bytes()[:keep]
    archive.write_bytes(gzip.compress(cut) if gz else cut)
    with pytest.raises(UnpackError, match="it ends before its end-of-archive marker"):
        run(place, archive, "tar.gz" if gz else "tar")
    assert_nothing_written(place)


def test_a_bad_crc_stops_at_that_member_and_leaves_whole_files(place: Path) -> None:
    archive, _ = make(place, "zip")
    raw = bytearray(archive.read_bytes())
    at = raw.index(FILES["images/sub/b.jpg"][:64]) + 2000
    raw[at] ^= 0xFF
    archive.write_bytes(bytes(raw))
    with pytest.raises(UnpackError) as e:
        run(place, archive, "zip")
    assert str(e.value).startswith(
        f"{archive} is not a complete zip archive (truncated or corrupt:"
    )
    assert "images/sub/b.jpg" in str(e.value) and "CRC" in str(e.value)
    assert files_under(place / "data") == {
        "readme.txt": FILES["readme.txt"],
        "images/a.jpg": FILES["images/a.jpg"],
    }
    assert no_temporaries(place / "data")
    assert_nothing_outside(place)


def test_a_corrupt_tar_gz_is_refused_before_writing(place: Path) -> None:
    archive, _ = make(place, "tar.gz")
    raw = bytearray(archive.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    archive.write_bytes(bytes(raw))
    with pytest.raises(
        UnpackError, match=r"is not a complete tar.gz archive \(truncated or corrupt"
    ):
        run(place, archive, "tar.gz")
    assert_nothing_written(place)


HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>...</body></html>\n"


@pytest.mark.parametrize(("kind", "label"), [("zip", "zip"), ("split-zip", "split zip"),
                                             ("tar", "tar"), ("tar.gz", "tar.gz")])  # fmt: skip
def test_an_html_page_saved_as_the_archive(place: Path, kind: str, label: str) -> None:
    archive = place / "dl/questions1.2.zip"
    archive.write_bytes(HTML * 20)
    with pytest.raises(UnpackError) as e:
        run(place, archive, kind)
    assert str(e.value) == (
        f"{archive} is not a {label} archive (it starts like an HTML page: an error or "
        "sign-in page saved in its place?)"
    )
    assert_nothing_written(place)


def test_a_tar_gz_unpacked_as_a_tar_says_so(place: Path) -> None:
    archive, _ = make(place, "tar.gz")
    with pytest.raises(
        UnpackError, match=r"is not a tar archive \(it is gzip-compressed: a tar.gz\?\)"
    ):
        run(place, archive, "tar")


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_file(place: Path, kind: str) -> None:
    archive = place / "dl/empty"
    archive.write_bytes(b"")
    with pytest.raises(UnpackError, match=r"^.*/dl/empty is empty \(0 bytes\), not a .* archive$"):
        run(place, archive, kind)
    assert_nothing_written(place)


def test_a_missing_archive_a_folder_and_an_unknown_kind(place: Path) -> None:
    with pytest.raises(UnpackError, match=r"cannot read .*/dl/nope.zip: No such file"):
        run(place, place / "dl/nope.zip", "zip")
    with pytest.raises(UnpackError, match=r"cannot read .*/dl: it is a folder, not a regular file"):
        run(place, place / "dl", "zip")
    archive, _ = make(place, "zip")
    with pytest.raises(UnpackError, match=r"cannot unpack a 'rar' archive \(only zip, split-zip"):
        run(place, archive, "rar")


# -- resuming ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_run_keeps_the_files_there(place: Path, kind: str) -> None:
    archive, parts = make(place, kind)
    first = run(place, archive, kind, parts=parts)
    again = run(place, archive, kind, parts=parts)
    assert again == Unpacked((), first.written)
    (place / "data/images/a.jpg").write_bytes(b"short")  # a size that is not the member's
    assert run(place, archive, kind, parts=parts) == Unpacked(
        ("images/a.jpg",), tuple(n for n in first.written if n != "images/a.jpg")
    )
    assert files_under(place / "data") == FILES


class Killed(BaseException):
    """What a kill (or Ctrl-C) stands for: not an Exception anyone catches."""


@pytest.mark.parametrize("kind", KINDS)
def test_an_interruption_leaves_whole_files_and_a_rerun_completes(place: Path, kind: str) -> None:
    members = [("one.bin", data(3000, 8)), ("two.bin", data(CHUNK + 10, 9)), ("three.bin", b"3")]
    archive, parts = make(place, kind, members)

    def kill_after_the_first_file(done: int, total: int) -> None:
        if done > 3000:
            raise Killed

    with pytest.raises(Killed):
        run(place, archive, kind, parts=parts, progress=kill_after_the_first_file)
    assert files_under(place / "data") == {"one.bin": data(3000, 8)}  # two.bin: not half of it
    assert no_temporaries(place / "data")
    done = run(place, archive, kind, parts=parts)
    assert done == Unpacked(("two.bin", "three.bin"), ("one.bin",))
    assert files_under(place / "data") == {
        "one.bin": data(3000, 8), "two.bin": data(CHUNK + 10, 9), "three.bin": b"3"
    }  # fmt: skip


def test_progress_counts_uncompressed_bytes_in_chunks(place: Path) -> None:
    big = data(2 * CHUNK + 5, 10)
    archive = write_tar(place / "dl/big.tar.gz", [("big.bin", big), ("s.txt", b"s")], gz=True)
    seen: list[tuple[int, int]] = []
    run(place, archive, "tar.gz", progress=lambda done, total: seen.append((done, total)))
    total = len(big) + 1
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert len(seen) >= 5  # 3 chunks of big.bin, s.txt, the start
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))
    kept: list[tuple[int, int]] = []
    run(place, archive, "tar.gz", progress=lambda done, total: kept.append((done, total)))
    assert kept[-1] == (total, total)


# -- writing fails ----------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder all the same")
def test_a_read_only_data_folder(place: Path) -> None:
    archive, _ = make(place, "zip", [("a.txt", b"a")])
    (place / "data").chmod(0o555)
    try:
        with pytest.raises(UnpackError) as e:
            run(place, archive, "zip")
    finally:
        (place / "data").chmod(0o755)
    assert (
        str(e.value)
        == f"cannot unpack {archive}: cannot write {place}/data/a.txt: Permission denied"
    )


def test_a_full_disk(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real open_output, whose file's writes fail as a full disk's do after 4 KiB: its
    OutputError's line is the UnpackError's, and no temporary file is left."""
    real = unpack_module.open_output

    class FullDisk:
        def __init__(self, inner: BinaryIO) -> None:
            self.inner, self.room = inner, 4096

        def write(self, chunk: bytes) -> int:
            if len(chunk) > self.room:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.room -= len(chunk)
            return self.inner.write(chunk)

    @contextmanager
    def full(path: Path, *, binary: bool) -> Iterator[Any]:
        with real(path, binary=True) as out:
            yield FullDisk(out)

    def patched(path: Path, *, binary: bool) -> AbstractContextManager[Any]:
        return full(path, binary=binary)

    monkeypatch.setattr(unpack_module, "open_output", patched)
    archive, _ = make(place, "zip", [("small.txt", b"s"), ("big.bin", data(9000, 11))])
    with pytest.raises(UnpackError) as e:
        run(place, archive, "zip")
    assert str(e.value) == (
        f"cannot unpack {archive}: cannot write {place}/data/big.bin: No space left on device"
    )
    assert files_under(place / "data") == {"small.txt": b"s"}
    assert no_temporaries(place / "data")
    assert_nothing_outside(place)


def test_a_file_in_the_way_of_a_folder(place: Path) -> None:
    (place / "data/images").write_bytes(b"not a folder")
    archive, _ = make(place, "zip")
    with pytest.raises(UnpackError, match=r"^cannot unpack .*set.zip: cannot write .*/data/images"):
        run(place, archive, "zip")
    assert_nothing_outside(place)


def test_a_gz_stream_is_read_once_forward_while_writing(place: Path) -> None:
    """Many members of a tar.gz, and hard links to them: written in archive order from one
    pass over the stream, a link's copy from the file already written (a backward seek would
    restart the decompression for each)."""
    members: list[Any] = [(f"m/{i:03d}.txt", str(i).encode()) for i in range(200)]
    members += [tar_info(f"h/{i:03d}.txt", tarfile.LNKTYPE, f"m/{i:03d}.txt") for i in range(50)]
    archive = write_tar(place / "dl/many.tar.gz", members, gz=True)
    rewinds = 0
    reader = getattr(gzip, "_GzipReader", None)
    real_rewind = getattr(reader, "_rewind", None)
    if reader is None or real_rewind is None:
        pytest.skip("this Python's gzip has no _GzipReader._rewind to count")

    def counting(self: Any) -> None:
        nonlocal rewinds
        rewinds += 1
        real_rewind(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "_rewind", counting)
        run(place, archive, "tar.gz")
    written = files_under(place / "data")
    assert len(written) == 250 and written["h/049.txt"] == b"49"
    assert rewinds <= 1
