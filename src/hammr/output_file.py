"""Writing a file at a path the user gave (``--out``, ``--export``, ``--html``, ``--trace``...).

Every command that writes to a user-given path goes through :func:`open_output` (or
:func:`write_output`), so that they all behave alike:

* a new or regular file is written to a temporary file in the same folder and renamed over
  the path once complete (``os.replace``): a reader sees the old file or the new one, never
  half of one, and a failure (a full disk, an exception while writing) leaves the old file,
  or none, and no temporary file behind. A symbolic link to a regular file keeps being a
  link: its target is replaced;
* a character device or a FIFO (``/dev/stdout``, ``/dev/null``, a named pipe, and anything
  under ``/dev`` or ``/proc``) is written in place: renaming over it would replace the
  device node (as root) or the pipe with a regular file;
* a folder, a block device or a socket is refused;
* every failure is one :class:`OutputError` whose message is one line naming the path and
  the reason, for the command to print with ``fail``.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, cast, overload


class OutputError(Exception):
    """An output path that cannot be written; the message is one line naming it and why
    (``reason`` alone, for a command that words the line its own way)."""

    def __init__(self, path: Path, reason: str, message: str | None = None) -> None:
        super().__init__(message or f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


def _in_place_by_name(path: Path) -> bool:
    """Paths under /dev and /proc name a stream (``/dev/stdout`` may resolve to a regular
    file the shell redirected to: replacing it would lose the rest of the output)."""
    parts = Path(os.path.abspath(path)).parts
    return len(parts) > 1 and parts[1] in ("dev", "proc")


def output_target(path: Path, what: str = "the file") -> tuple[Path, bool]:
    """Where writing ``path`` goes and whether in place (True) or by rename (False);
    OutputError when it cannot be written at all (a folder, a block device, a socket, a
    file where a folder should be). ``what`` names the file in the message for a folder
    (``"the CSV file"``). Checking first lets a command refuse before its work."""
    if path.is_dir():
        raise OutputError(
            path, f"it is a folder; name {what}", f"{path} is a folder; name {what} to write"
        )
    try:
        st = os.stat(path)
    except FileNotFoundError:
        # new (or a dangling link: create what it points to, as open() would)
        return Path(os.path.realpath(path)), False
    except NotADirectoryError:
        raise OutputError(path, "a file is in the way of its folder") from None
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return (path, True) if _in_place_by_name(path) else (Path(os.path.realpath(path)), False)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return path, True
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else None
    raise OutputError(path, f"it is {kind or 'not a regular file'}; name a regular file")


def _make_folder(folder: Path, path: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutputError(path, "a file is in the way of its folder") from None
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from None


@overload
def open_output(
    path: str | Path,
    *,
    binary: Literal[False] = ...,
    encoding: str = ...,
    newline: str | None = ...,
    what: str = ...,
) -> AbstractContextManager[TextIO]: ...
@overload
def open_output(
    path: str | Path,
    *,
    binary: Literal[True],
    encoding: str = ...,
    newline: str | None = ...,
    what: str = ...,
) -> AbstractContextManager[BinaryIO]: ...
def open_output(
    path: str | Path,
    *,
    binary: bool = False,
    encoding: str = "utf-8",
    newline: str | None = None,
    what: str = "the file",
) -> AbstractContextManager[TextIO] | AbstractContextManager[BinaryIO]:
    """A file to write ``path`` through, as the module docstring says: committed when the
    ``with`` block ends normally, discarded (no temporary file left) when it raises. Any
    OSError while opening, writing or closing becomes an OutputError, so the block should
    only write (compute what to write before it). Missing folders are made."""
    return cast(
        "AbstractContextManager[Any]", _open_output(Path(path), binary, encoding, newline, what)
    )


@contextmanager
def _open_output(
    path: Path, binary: bool, encoding: str, newline: str | None, what: str
) -> Iterator[IO[Any]]:
    target, in_place = output_target(path, what)
    if in_place:
        yield from _write_in_place(path, binary, encoding, newline)
        return
    _make_folder(target.parent, path)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from None
    try:
        try:
            if target.exists():  # keep the replaced file's permissions
                os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
            f = os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding,
                          newline=None if binary else newline)  # fmt: skip
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(path, e.strerror or str(e)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_in_place(
    path: Path, binary: bool, encoding: str, newline: str | None
) -> Iterator[IO[Any]]:
    try:
        # appending: a device or a pipe has nothing to truncate, and /dev/stdout redirected
        # to a file must not erase what the command already printed there
        f = open(path, "ab" if binary else "a", encoding=None if binary else encoding,  # noqa: SIM115
                 newline=None if binary else newline)  # fmt: skip
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from None
    try:
        try:
            yield f
        except BaseException:
            with suppress(OSError):  # the block's own error is the one to report
                f.close()
            raise
        f.close()  # a device's write error (ENOSPC on /dev/full) often shows only here
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from None


def write_output(path: str | Path, data: str | bytes, *, what: str = "the file") -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`open_output`."""
    if isinstance(data, bytes):
        with open_output(path, binary=True, what=what) as fb:
            fb.write(data)
    else:
        with open_output(path, what=what) as ft:
            ft.write(data)


@contextmanager
def open_part(path: str | Path, *, restart: bool = False) -> Iterator[BinaryIO]:
    """``path`` (a download's ``.part`` file) opened to append to (``restart``: emptied
    first), folders made. Unlike :func:`open_output` nothing is renamed: a part file grows
    across runs (a resumed download appends to it) and is put in place by the caller once
    complete and checked. Any OSError becomes an OutputError."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() and not p.is_file():
            raise OutputError(p, "not a regular file")
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if restart else os.O_APPEND)
        fd = os.open(p, flags, 0o666)
    except OSError as e:
        raise OutputError(p, e.strerror or str(e)) from None
    f = os.fdopen(fd, "ab" if not restart else "wb")
    try:
        with f:
            yield f
            f.flush()
    except OSError as e:
        raise OutputError(p, e.strerror or str(e)) from None


class LockHeld(OutputError):
    """Another live process holds the lock file; ``holder`` is what it wrote there."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(path, f"held by another process ({holder or 'unknown'})")
        self.holder = holder


@contextmanager
def exclusive_lock(path: str | Path, holder: str) -> Iterator[None]:
    """Hold ``path`` as a lock for the block (``flock``, so a process killed with -9 lets go
    at once): LockHeld when another process holds it, an OutputError when it cannot be made
    (a read-only or full folder). ``holder`` (who holds it) is written into the file."""
    import fcntl

    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise OutputError(p, e.strerror or str(e)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = ""
            with suppress(OSError):
                held = os.read(fd, 500).decode("utf-8", "replace").strip()
            raise LockHeld(p, held) from None
        with suppress(OSError):  # who holds it is a courtesy to the next one
            os.ftruncate(fd, 0)
            os.write(fd, holder.encode("utf-8"))
        yield
    finally:
        os.close(fd)


__all__ = [
    "LockHeld",
    "OutputError",
    "exclusive_lock",
    "open_output",
    "open_part",
    "output_target",
    "write_output",
]
