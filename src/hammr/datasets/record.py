"""The data folder's lock file, ``hammr-data.lock``: what ``hammr data get`` fetched, with the
size and checksums each file had at its first download.

Most publishers give no checksum, so the first download's sha256 is recorded here and every
later download of the same URL must match it (a file changed on the server, or corrupted on
the way, is kept aside, not used). It also records which archives were unpacked, so a second
``get`` of a complete dataset asks the network nothing.

JSON, one object: ``{"version": 1, "files": {URL: {...}}}``, each entry ``{"path", "size",
"sha256", "md5", "fetched", "unpacked"?}`` (``path`` relative to the data folder;
``unpacked``: the paths its members went to). Written whole through
:func:`hammr.output_file.write_output` (a reader sees the old file or the new one).
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hammr.input_file import read_input_text
from hammr.output_file import write_output

LOCK_FILE = "hammr-data.lock"
VERSION = 1


class RecordError(Exception):
    """The lock file is there but unreadable; one line."""


class DataRecord:
    """The lock file of one data folder, kept in memory and saved on :meth:`save`."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self.files: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._dirty = False
        if self.path.exists():
            try:
                data = json.loads(read_input_text(self.path))
            except (OSError, ValueError) as e:
                raise RecordError(
                    f"{self.path} cannot be read ({e}); move it away to start a new record"
                ) from None
            files = data.get("files") if isinstance(data, dict) else None
            if not isinstance(files, dict) or data.get("version") != VERSION:
                raise RecordError(
                    f"{self.path} is not a hammr-data.lock of version {VERSION}; move it away "
                    "to start a new record"
                )
            self.files = {k: v for k, v in files.items() if isinstance(v, dict)}

    def get(self, url: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self.files.get(url)
            return dict(entry) if entry is not None else None

    def recorded_sha256(self, url: str) -> str | None:
        entry = self.get(url)
        value = entry.get("sha256") if entry else None
        return value if isinstance(value, str) else None

    def put(self, url: str, path: str, size: int, sha256: str, md5: str) -> None:
        with self._lock:
            old = self.files.get(url, {})
            self.files[url] = {
                **old,
                "path": path,
                "size": size,
                "sha256": sha256,
                "md5": md5,
                "fetched": old.get("fetched") or datetime.now(UTC).isoformat(timespec="seconds"),
            }
            self._dirty = True

    def forget(self, url: str) -> None:
        """Drop ``url``'s entry: its file proved bad (an archive that would not unpack), so
        its checksum must not bind the next download."""
        with self._lock:
            if self.files.pop(url, None) is not None:
                self._dirty = True

    def mark_unpacked(self, url: str, outputs: list[str]) -> None:
        with self._lock:
            if url in self.files:
                self.files[url]["unpacked"] = outputs
                self._dirty = True

    def save(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            text = json.dumps({"version": VERSION, "files": self.files}, indent=1, sort_keys=True)
            self._dirty = False
        write_output(self.path, text + "\n", what="the data folder's lock file")


__all__ = ["LOCK_FILE", "DataRecord", "RecordError"]
