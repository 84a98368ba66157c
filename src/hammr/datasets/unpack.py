"""Unpacking a downloaded dataset archive into the data folder, safely and resumably.

``hammr data get`` fetches archives (zip, Info-ZIP split zip, tar, tar.gz) from publishers
hammr does not control, so an archive is hostile input until it is read:

* every member's name is checked before anything is written: an absolute path, a drive
  letter or a ``..`` component (``/`` and ``\\`` both count as separators) refuses the whole
  archive, so a bad name never leaves half an unpacking behind;
* nothing is ever made a link. A tar's hard link, and a symbolic link (tar or zip) to a file
  in the archive, is written as a copy of that file; a link to a folder, or to nothing, is
  left out; a link whose target is absolute or climbs out of the archive refuses the archive.
  Devices, FIFOs and sockets are left out, folders are made. As the names hold no ``..`` and
  no archive makes a link, every path written is ``data_dir/<clean path>``, and the only links
  it can pass through are ones a person (or hammr's layout) made, such as ``data_dir/coco``
  pointing at another disk: those are followed, as whoever made them meant them to be;
* every file is written through :func:`hammr.output_file.open_output` (a temporary file
  renamed into place) in 1 MiB chunks, never whole in memory: a kill leaves whole files only,
  and a file already there with the member's size is kept, so a second run continues where
  the first stopped;
* a truncated, corrupt or not-an-archive download (an HTML error page saved in its place) is
  one :class:`UnpackError` line. The zip's central directory, every tar header, a tar's
  end-of-archive marker and a tar.gz's whole gzip stream (its CRC) are checked before writing;
  a zip member's CRC is checked as it is written, so a bad one stops the run with the files
  before it whole and itself not written.

A split zip (``dataset.z01``, ``dataset.z02``, ..., ``dataset.zip``) is read as one stream over
its parts, without joining them on disk. Each entry's local-header offset counts from the start
of its own part (disk), so once :mod:`zipfile` has read the central directory every offset is
moved by the start of the entry's part; a zip64 split archive's locator is shown to zipfile as
a single disk's, which zipfile otherwise refuses.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hammr.datasets.catalogue import Member
from hammr.input_file import check_input, open_input
from hammr.output_file import OutputError, open_output

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["KINDS", "UnpackError", "Unpacked", "unpack"]

KINDS = ("zip", "split-zip", "tar", "tar.gz")
CHUNK = 1 << 20
_LABEL = dict(zip(KINDS, ("zip", "split zip", "tar", "tar.gz"), strict=True))
_ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
_BAD_DATA = (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, struct.error,
             NotImplementedError, gzip.BadGzipFile)  # fmt: skip
_READ_FAILS = (*_BAD_DATA, OSError)
_DRIVE = re.compile(r"[A-Za-z]:")
_SEPARATORS = re.compile(r"[/\\]")


class UnpackError(Exception):
    """One line naming the archive and what is wrong."""


@dataclass(frozen=True)
class Unpacked:
    """What :func:`unpack` did: files under the data folder, '/'-separated, in archive order
    (the copies that stand for links last)."""

    written: tuple[str, ...]  # written now
    kept: tuple[str, ...]  # already there with the member's size (not rewritten)


class _Corrupt(Exception):
    """The archive's data failed while a file was written from it: kept apart from OSError,
    which open_output would take for a failure to write."""


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str  # the member's clean path in the archive ('' for its root)
    kind: str  # "file", "dir", "link" (written as a copy of the file it leads to), "skip"
    size: int = 0
    link: str = ""  # a link: the clean archive path it points at
    ref: Any = None  # a file: its ZipInfo, or (offset, sparse map) of its data in the tar


_Opener = Callable[[_Entry], IO[bytes]]


def unpack(
    archive: Path,
    kind: str,
    data_dir: Path,
    *,
    target: str,
    members: Sequence[Member] = (),
    parts: Sequence[Path] = (),
    progress: Callable[[int, int], None] | None = None,
) -> Unpacked:
    """Unpack ``archive`` (``kind``: one of KINDS) into ``data_dir``: all of it under ``target``
    ("." is data_dir itself) when ``members`` is empty, else each Member's archive path (one
    member, a prefix ending in '/', or '' for the root) to its ``to``. For a split zip,
    ``parts`` are the earlier parts in order and ``archive`` is the last. ``progress(done,
    total)`` follows the uncompressed bytes. UnpackError for all the module docstring lists."""
    label = _LABEL.get(kind)
    if label is None:
        raise UnpackError(f"{archive}: cannot unpack a {kind!r} archive (only {', '.join(KINDS)})")
    if parts and kind != "split-zip":
        raise UnpackError(f"{archive}: parts are for a split zip, not a {label} archive")
    files = [*parts, archive]
    sizes = [_size(path, label) for path in files]
    with ExitStack() as stack:
        try:
            streams = [stack.enter_context(open_input(path, binary=True)) for path in files]
            try:
                if kind in ("zip", "split-zip"):
                    entries, opener = _read_zip(archive, kind, stack, streams, sizes)
                else:
                    entries, opener = _read_tar(archive, kind, stack, streams[0])
            except _BAD_DATA as e:
                raise _unreadable(archive, label, streams[-1], bool(parts), e) from None
        except OSError as e:
            raise UnpackError(f"cannot read {e.filename or archive}: {e.strerror or e}") from None
        dirs, copies = _plan(archive, entries, members, target)
        try:
            return _write(dirs, copies, opener, Path(data_dir), progress)
        except _Corrupt as e:
            raise UnpackError(_incomplete(archive, label, str(e))) from None
        except OutputError as e:
            raise UnpackError(f"cannot unpack {archive}: {e}") from None


def _size(path: Path, label: str) -> int:
    try:
        size = check_input(path).st_size
    except OSError as e:
        raise UnpackError(f"cannot read {path}: {e.strerror or e}") from None
    if size == 0:
        raise UnpackError(f"{path} is empty (0 bytes), not a {label} archive")
    return size


def _why(e: BaseException) -> str:
    return str(e) or type(e).__name__


def _incomplete(archive: Path, label: str, reason: str) -> str:
    return f"{archive} is not a complete {label} archive (truncated or corrupt: {reason})"


def _unreadable(
    archive: Path, label: str, stream: IO[bytes], last_part: bool, error: BaseException
) -> UnpackError:
    """The line for an archive that failed to read: not one at all when its first bytes say so
    (an HTML page saved in its place), else truncated or corrupt. The last part of a split zip
    starts anywhere in a member's data: only an HTML page is told from a part that way."""
    try:
        stream.seek(0)
        head = stream.read(512)
    except OSError:
        head = b""
    magic = (
        head[257:262] == b"ustar"
        if label == "tar"
        else head.startswith(b"\x1f\x8b" if label == "tar.gz" else b"PK")
    )
    if magic or not head or (last_part and head.lstrip()[:1] != b"<"):
        why = _why(error)
        if why == "File is not a zip file":  # its end record is not there: cut short
            why = "no end of central directory record"
        return UnpackError(_incomplete(archive, label, why))
    if head.lstrip()[:1] == b"<":
        looks = "it starts like an HTML page: an error or sign-in page saved in its place?"
    elif head.startswith(b"\x1f\x8b"):
        looks = "it is gzip-compressed: a tar.gz?"
    else:
        looks = f"it starts with {head[:12]!r}"
    return UnpackError(f"{archive} is not a {label} archive ({looks})")


# -- reading ----------------------------------------------------------------------------------


class _Spanning(io.RawIOBase):
    """Files read as one stream, their concatenation (a split zip's parts; or one zip file).
    ``patch`` (position, bytes) is shown in place of what the files hold there."""

    def __init__(self, streams: Sequence[IO[bytes]], sizes: Sequence[int]) -> None:
        super().__init__()
        self.streams = list(streams)
        self.starts = [0, *accumulate(sizes)][:-1]
        self.size = sum(sizes)
        self.pos = 0
        self.patch: tuple[int, bytes] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        pos = (0, self.pos, self.size)[whence] + offset
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self.pos = pos
        return pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.at(self.pos, len(view))
        view[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def at(self, pos: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``pos``, across parts."""
        start, out = pos, bytearray()
        while n > 0 and pos < self.size:
            i = bisect_right(self.starts, pos) - 1
            end = self.starts[i + 1] if i + 1 < len(self.starts) else self.size
            self.streams[i].seek(pos - self.starts[i])
            chunk = self.streams[i].read(min(n, end - pos))
            if not chunk:
                break
            out += chunk
            pos, n = pos + len(chunk), n - len(chunk)
        if self.patch is not None:
            where, data = self.patch
            for k, byte in enumerate(data):
                if 0 <= where + k - start < len(out):
                    out[where + k - start] = byte
        return bytes(out)


def _end_record(raw: _Spanning) -> tuple[int, int, int] | None:
    """(this part's disk number, the central directory's disk, its offset there) from the
    zip's end record (zip64's when there is one), None when there is none. A split zip64's
    locator is patched to read as one disk's, with the zip64 record's place in the stream."""
    tail_size = min(raw.size, 22 + 0xFFFF)
    tail = raw.at(raw.size - tail_size, tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    _, disk, cd_disk, _, _, _, cd_offset, _ = struct.unpack("<4s4H2LH", tail[at : at + 22])
    where = raw.size - tail_size + at - 20
    locator = raw.at(where, 20) if where >= 0 else b""
    if locator.startswith(b"PK\x06\x07"):
        _, z_disk, z_offset, disks = struct.unpack("<4sLQL", locator)
        z_at = raw.starts[min(z_disk, len(raw.starts) - 1)] + z_offset
        record = raw.at(z_at, 56)
        if record.startswith(b"PK\x06\x06") and len(record) == 56:
            disk, cd_disk, _, _, _, cd_offset = struct.unpack("<2L4Q", record[16:])
            if disks > 1:
                raw.patch = (where, struct.pack("<4sLQL", b"PK\x06\x07", 0, z_at, 1))
    return disk, cd_disk, cd_offset


def _read_zip(
    archive: Path, kind: str, stack: ExitStack, streams: Sequence[IO[bytes]], sizes: list[int]
) -> tuple[list[_Entry], _Opener]:
    raw = _Spanning(streams, sizes)
    end = _end_record(raw)
    if end is not None:
        disk, given = end[0], len(streams) - 1
        if kind == "zip" and disk:
            raise UnpackError(
                f"{archive} is the last of {disk + 1} parts of a split zip: unpack it as a "
                "split-zip, with the parts before it"
            )
        if kind == "split-zip" and disk != given:
            raise UnpackError(
                f"{archive} is part {disk + 1} of a split zip: it needs the {disk} part(s) "
                f"before it, and {given} were given"
            )
    zf = stack.enter_context(zipfile.ZipFile(io.BufferedReader(raw, CHUNK)))
    if end is not None and len(streams) > 1:
        _move_offsets(zf, raw, end[1], end[2])
    entries = []
    for info in zf.infolist():
        name = _clean(archive, info.filename)
        mode = info.external_attr >> 16 if info.create_system == 3 else 0
        if info.is_dir() or stat.S_ISDIR(mode):
            entries.append(_Entry(name, "dir"))
        elif stat.S_ISLNK(mode):
            with zf.open(info) as f:
                text = f.read(4097).decode("utf-8", "replace")
            entries.append(_Entry(name, "link", link=_resolve(archive, name, text, False)))
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):
            entries.append(_Entry(name, "skip"))
        elif info.flag_bits & 1:
            raise UnpackError(f"{archive}: {info.filename} is encrypted; hammr cannot unpack it")
        elif info.compress_type not in _ZIP_METHODS:
            raise UnpackError(
                f"{archive}: {info.filename} is compressed with method {info.compress_type} "
                "(9 is deflate64), which Python's zipfile cannot read: unpack it with 7z"
            )
        else:
            entries.append(_Entry(name, "file", info.file_size, ref=info))
    return entries, lambda entry: zf.open(entry.ref)


def _move_offsets(zf: zipfile.ZipFile, raw: _Spanning, cd_disk: int, cd_offset: int) -> None:
    """Make each entry's header offset (zipfile added where it took the central directory's
    disk to start) count from the start of the stream: its own part's start plus its offset.
    The first header of each part is checked to be one, so a part cut short, missing or out
    of order is found before anything is written."""
    starts, concat = raw.starts, zf.start_dir - cd_offset
    misfit = zipfile.BadZipFile(
        "its parts do not fit together: one is cut short, missing or out of order"
    )
    if raw.at(0, 4) != b"PK\x07\x08" or cd_disk >= len(starts) or concat != starts[cd_disk]:
        raise misfit
    infos = zf.infolist()
    firsts: dict[int, zipfile.ZipInfo] = {}
    for info in infos:
        if info.volume >= len(starts):
            raise misfit
        info.header_offset += starts[info.volume] - concat
        first = firsts.setdefault(info.volume, info)
        if info.header_offset < first.header_offset:
            firsts[info.volume] = info
    if any(raw.at(info.header_offset, 4) != b"PK\x03\x04" for info in firsts.values()):
        raise misfit
    # newer zipfiles bound each entry by the next one's offset (a zip bomb check): redo it
    bound = "_end_offset"
    if infos and all(hasattr(info, bound) for info in infos):
        end = zf.start_dir
        for info in sorted(infos, key=lambda i: i.header_offset, reverse=True):
            setattr(info, bound, end)
            end = info.header_offset


def _read_tar(
    archive: Path, kind: str, stack: ExitStack, stream: IO[bytes]
) -> tuple[list[_Entry], _Opener]:
    source: IO[bytes] | gzip.GzipFile = stream
    if kind == "tar.gz":
        source = stack.enter_context(gzip.GzipFile(fileobj=stream, mode="rb"))
    tf = stack.enter_context(tarfile.TarFile(fileobj=source, mode="r"))
    entries = []
    while (info := tf.next()) is not None:  # every header (a bad or cut one reads as the end)
        tf.members.clear()  # type: ignore[attr-defined]  # one TarInfo at a time: millions of members
        name = _clean(archive, info.name)
        if info.isdir():
            entries.append(_Entry(name, "dir"))
        elif info.issym() or info.islnk():
            link = _resolve(archive, name, info.linkname, info.islnk())
            entries.append(_Entry(name, "link", link=link))
        elif info.isreg():
            ref = (info.offset_data, info.sparse)
            entries.append(_Entry(name, "file", info.size, ref=ref))
        else:
            entries.append(_Entry(name, "skip"))
    if kind == "tar.gz":
        complete = source.tell() == tf.offset + tarfile.BLOCKSIZE
        while source.read(CHUNK):  # the rest of the gzip stream: its CRC and length are checked
            pass
    else:
        source.seek(tf.offset)
        complete = source.read(tarfile.BLOCKSIZE) == bytes(tarfile.BLOCKSIZE)
    if not complete:
        raise tarfile.ReadError("it ends before its end-of-archive marker")

    def opener(entry: _Entry) -> IO[bytes]:
        info = tarfile.TarInfo(entry.name)  # the member's data: where it starts, its size
        info.size, (info.offset_data, info.sparse) = entry.size, entry.ref
        f = tf.extractfile(info)
        if f is None:
            raise tarfile.ReadError(f"{entry.name} holds no data")
        return f

    return entries, opener


# -- names ------------------------------------------------------------------------------------


def _clean(archive: Path, name: str) -> str:
    """A member's name as a clean relative path ('a/b'; '' for the root); UnpackError when it
    could reach outside the folder it is unpacked into."""
    parts = [p for p in _SEPARATORS.split(name) if p not in ("", ".")]
    why = (
        "holds a NUL byte" if "\x00" in name
        else "is an absolute path" if name.startswith(("/", "\\"))
        else "starts with a drive letter" if _DRIVE.match(name)
        else "climbs out of the archive ('..')" if ".." in parts
        else None
    )  # fmt: skip
    if why:
        raise UnpackError(f"{archive}: the member {name!r} {why}; nothing was unpacked")
    return "/".join(parts)


def _resolve(archive: Path, name: str, target: str, hard: bool) -> str:
    """The clean archive path a link at ``name`` points at (a hard link's ``target`` counts
    from the archive's root, a symbolic one's from the link's folder); UnpackError when it
    points outside the archive."""
    path = [] if hard else name.split("/")[:-1]
    outside = target.startswith(("/", "\\")) or bool(_DRIVE.match(target)) or "\x00" in target
    for part in _SEPARATORS.split(target):
        if part == ".." and not path:
            outside = True
        elif part == "..":
            path.pop()
        elif part not in ("", "."):
            path.append(part)
    if outside:
        raise UnpackError(
            f"{archive}: {name!r} is a link to {target!r}, outside the archive; nothing was "
            "unpacked"
        )
    return "/".join(path)


def _under(archive: Path, path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or "\\" in path or "\x00" in path or ".." in parts:
        raise UnpackError(f"{archive}: {path!r} is not a path under the data folder")
    return "/".join(parts)


def _plan(
    archive: Path, entries: list[_Entry], members: Sequence[Member], target: str
) -> tuple[list[str], list[tuple[_Entry, list[str]]]]:
    """The folders to make and the files to write (each entry's data to its destinations,
    links last), from the mapping; UnpackError for a member that matches nothing."""
    rules = [(_clean(archive, m.member), _under(archive, m.to)) for m in members]
    rules = rules or [("", _under(archive, target))]
    matched = [False] * len(rules)
    by_name = {e.name: e for e in entries}
    dirs: list[str] = []
    files: list[tuple[_Entry, list[str]]] = []
    links: list[tuple[_Entry, list[str]]] = []
    for entry in entries:
        dests = []
        for k, (prefix, to) in enumerate(rules):
            name = entry.name
            if prefix and name != prefix and not name.startswith(prefix + "/"):
                continue
            matched[k] = True
            rest = name[len(prefix) :].lstrip("/")
            if dest := "/".join(p for p in (to, rest) if p):
                dests.append(dest)
        if not dests or entry.kind == "skip":
            continue
        if entry.kind == "dir":
            dirs += dests
        elif entry.kind == "file":
            files.append((entry, dests))
        elif (source := _follow(by_name, entry)) is not None:
            links.append((source, dests))
    missing = [m.member for m, hit in zip(members, matched, strict=False) if not hit]
    if missing:
        tops = list(dict.fromkeys(
            e.name.split("/")[0] + ("/" if "/" in e.name or e.kind == "dir" else "")
            for e in entries if e.name
        ))  # fmt: skip
        shown = ", ".join(tops[:5]) + (f" and {len(tops) - 5} more" if len(tops) > 5 else "")
        raise UnpackError(
            f"{archive} has no member {' nor '.join(map(repr, missing))}; its top level holds "
            f"{shown or 'nothing'}"
        )
    return dirs, files + links


def _follow(by_name: dict[str, _Entry], link: _Entry) -> _Entry | None:
    """The file a link leads to (through other links), None for a folder or nothing."""
    entry: _Entry | None = link
    for _ in range(40):
        entry = by_name.get(entry.link) if entry is not None else None
        if entry is None or entry.kind != "link":
            break
    return entry if entry is not None and entry.kind == "file" else None


# -- writing ----------------------------------------------------------------------------------


def _write(
    dirs: list[str],
    copies: list[tuple[_Entry, list[str]]],
    opener: _Opener,
    root: Path,
    progress: Callable[[int, int], None] | None,
) -> Unpacked:
    total = sum(entry.size * len(dests) for entry, dests in copies)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    tick(0)
    for folder in dirs:
        try:
            (root / folder).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(root / folder, e.strerror or str(e)) from None
    written: list[str] = []
    kept: list[str] = []
    on_disk: dict[str, Path] = {}  # a member already written: a copy is read from there
    for entry, dests in copies:
        for dest in dests:
            path = root / dest
            if _has_size(path, entry.size):
                kept.append(dest)
                tick(entry.size)
            else:
                copy_of = on_disk.get(entry.name)
                source = (
                    partial(open_input, copy_of, binary=True) if copy_of else partial(opener, entry)
                )
                _copy(entry, source, path, tick)
                written.append(dest)
            on_disk.setdefault(entry.name, path)
    return Unpacked(tuple(written), tuple(kept))


def _has_size(path: Path, size: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == size


def _copy(
    entry: _Entry, source: Callable[[], Any], path: Path, tick: Callable[[int], None]
) -> None:
    got = 0
    with open_output(path, binary=True) as out:
        for chunk in _chunks(entry, source):
            out.write(chunk)
            got += len(chunk)
            tick(len(chunk))
        if got != entry.size:
            raise _Corrupt(f"{entry.name} holds {got:,} bytes, not the {entry.size:,} it says")


def _chunks(entry: _Entry, source: Callable[[], Any]) -> Iterator[bytes]:
    """The data ``source()`` opens, 1 MiB at a time; a failure to read it is a _Corrupt, which
    open_output does not take for a failure to write (as it would an OSError)."""
    try:
        with source() as src:
            while chunk := src.read(CHUNK):
                yield chunk
    except _READ_FAILS as e:
        why = _why(e)
        raise _Corrupt(why if entry.name in why else f"{entry.name}: {why}") from None
