"""A split ("multi-part") zip archive as Info-ZIP's ``zip -s`` writes it, made in pure Python
for tests on machines without a ``zip`` binary.

The layout (PKWARE APPNOTE 8.5, as Info-ZIP 3.0 writes it): the archive's bytes are cut into
parts of ``part_size`` bytes, ``name.z01``, ``name.z02``, ..., the last one ``name.zip``; the
first part starts with the split signature ``PK\\x07\\x08``; a header or record is never cut
(a part is ended early instead) but a member's data is, wherever the size falls. Each
member's local-header offset in the central directory counts from the start of its own part,
whose number is the entry's "disk number start"; the end record gives the last part's number,
the part where the central directory starts and its offset within that part.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

SPLIT_SIGNATURE = b"PK\x07\x08"
_DOS_TIME, _DOS_DATE = 0, (2024 - 1980) << 9 | 1 << 5 | 1  # 2024-01-01 00:00
_UNIX = 3 << 8 | 30  # made by: Unix, version 3.0
_FILE_MODE, _DIR_MODE = 0o100644 << 16, 0o40755 << 16 | 0x10


class _Parts:
    def __init__(self, part_size: int) -> None:
        self.size = part_size
        self.parts = [bytearray()]

    def where(self) -> tuple[int, int]:
        """(part number, offset in that part) of the next byte."""
        return len(self.parts) - 1, len(self.parts[-1])

    def whole(self, n: int) -> None:
        """Start a new part when ``n`` bytes (a header) would not fit in this one."""
        if self.parts[-1] and len(self.parts[-1]) + n > self.size:
            self.parts.append(bytearray())

    def write(self, data: bytes) -> None:
        while data:
            room = self.size - len(self.parts[-1])
            if room <= 0:
                self.parts.append(bytearray())
                continue
            self.parts[-1] += data[:room]
            data = data[room:]


def write_split_zip(
    last: Path,
    members: Sequence[tuple[str, bytes | None]],
    part_size: int,
    *,
    deflate: bool = False,
) -> list[Path]:
    """Write ``members`` ((name, data); data None for a folder, whose name ends in '/') as a
    split zip whose last part is ``last`` (``name.zip``); the parts' paths, in order."""
    out = _Parts(part_size)
    out.write(SPLIT_SIGNATURE)
    central: list[bytes] = []
    for name, data in members:
        raw_name = name.encode("utf-8")
        body = b"" if data is None else data
        if deflate and data:
            packer = zlib.compressobj(9, zlib.DEFLATED, -15)
            body = packer.compress(data) + packer.flush()
        method = 8 if deflate and data else 0
        crc, size = zlib.crc32(data or b""), len(data or b"")
        fields = (0x800, method, _DOS_TIME, _DOS_DATE, crc, len(body), size, len(raw_name))
        local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, *fields, 0) + raw_name
        out.whole(len(local))
        disk, offset = out.where()
        out.write(local)
        out.write(body)
        mode = _DIR_MODE if data is None else _FILE_MODE
        record = struct.pack(
            "<4s6H3L5H2L", b"PK\x01\x02", _UNIX, 20, *fields, 0, 0, disk, 0, mode, offset
        )
        central.append(record + raw_name)
    cd_start: tuple[int, int] | None = None
    record_disks = []
    for record in central:
        out.whole(len(record))
        cd_start = cd_start or out.where()
        record_disks.append(out.where()[0])
        out.write(record)
    assert cd_start is not None, "a split zip holds at least one member"
    cd_size = sum(len(record) for record in central)
    out.whole(22)
    last_disk = out.where()[0]
    on_last = record_disks.count(last_disk)
    out.write(
        struct.pack(
            "<4s4H2LH",
            b"PK\x05\x06",
            last_disk,
            cd_start[0],
            on_last,
            len(central),
            cd_size,
            cd_start[1],
            0,
        )
    )
    paths = [last.with_suffix(f".z{i + 1:02d}") for i in range(len(out.parts) - 1)] + [last]
    for path, part in zip(paths, out.parts, strict=True):
        path.write_bytes(bytes(part))
    return paths
