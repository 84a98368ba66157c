"""Reading a file at a path the user gave (an image, a question file, a config, a trace...).

Every reader of a user path goes through :func:`open_input` (or :func:`read_input_bytes` /
:func:`read_input_text`), so that they all behave alike:

* only a regular file is read. A folder, a FIFO (named pipe), a character or block device
  and a socket are refused by kind *before* anything is opened: reading a FIFO blocks for
  ever when no one writes to it, ``/dev/zero`` never ends, and opening some devices has
  effects of its own. The check is made again on the opened descriptor (opened without
  blocking, then ``fstat``), so a file swapped for a pipe in between is refused too;
* a refusal is an :class:`InputError`, an ``OSError`` whose ``strerror`` says what the path
  is ("it is a named pipe (FIFO), not a regular file"): code that already words its own line
  from an ``OSError`` (``f"cannot read {path}: {e.strerror}"``) says the right thing, and
  ``FileNotFoundError`` stays what it is;
* ``limit`` bounds what is read: a file larger than it is refused before its bytes are read.

SQLite files are not read here: :mod:`hammr.sqlite_file` opens them through SQLite alone.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, cast, overload


class InputError(OSError):
    """A path that is not a regular file to read (or one over the size limit); ``strerror``
    says what it is, ``str()`` is one line naming the path."""

    def __init__(self, code: int, reason: str, path: Path) -> None:
        super().__init__(code, reason, str(path))
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.strerror}"


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal(path: Path, mode: int) -> InputError | None:
    kind = _kind(mode)
    if kind is None:
        return None
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    return InputError(code, f"it is {kind}, not a regular file", path)


def check_input(path: str | Path) -> os.stat_result:
    """``path``'s status when it is a regular file to read; otherwise the OSError opening it
    would give (``FileNotFoundError``, ``PermissionError``...) or an :class:`InputError`
    saying what it is. Nothing is opened."""
    p = Path(path)
    st = os.stat(p)
    refusal = _refusal(p, st.st_mode)
    if refusal is not None:
        raise refusal
    return st


def input_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as a file, as a phrase to follow its name ("does not
    exist", "is a folder", "is a named pipe (FIFO), not a regular file", "cannot be read
    (Permission denied)"); None when it is a regular file. Nothing is opened."""
    try:
        check_input(path)
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a file is in the way of its folder)"
    except InputError as e:
        return f"is {e.strerror.removeprefix('it is ')}" if e.strerror else "cannot be read"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def is_input_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file (``Path.is_file`` by another name, for the code
    that chooses between readers before reading)."""
    try:
        check_input(path)
    except OSError:
        return False
    return True


@overload
def open_input(
    path: str | Path,
    *,
    binary: Literal[False] = ...,
    encoding: str = ...,
    newline: str | None = ...,
) -> AbstractContextManager[TextIO]: ...
@overload
def open_input(
    path: str | Path, *, binary: Literal[True], encoding: str = ..., newline: str | None = ...
) -> AbstractContextManager[BinaryIO]: ...
def open_input(
    path: str | Path, *, binary: bool = False, encoding: str = "utf-8", newline: str | None = None
) -> AbstractContextManager[TextIO] | AbstractContextManager[BinaryIO]:
    """The regular file ``path`` opened for reading, as the module docstring says (text in
    ``encoding`` unless ``binary``)."""
    return cast("AbstractContextManager[Any]", _open_input(Path(path), binary, encoding, newline))


@contextmanager
def _open_input(path: Path, binary: bool, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    fd, _ = _open_regular(path)
    f = os.fdopen(fd, "rb" if binary else "r", encoding=None if binary else encoding,
                  newline=None if binary else newline)  # fmt: skip
    with f:
        yield f


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    check_input(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        refusal = _refusal(path, st.st_mode)
        if refusal is not None:
            raise refusal
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_input_bytes(path: str | Path, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``; with ``limit``, an :class:`InputError` for a
    file larger than ``limit`` bytes (refused before it is read)."""
    p = Path(path)
    fd, st = _open_regular(p)
    with os.fdopen(fd, "rb") as f:
        if limit is not None and st.st_size > limit:
            raise InputError(
                errno.EFBIG, f"it is {st.st_size:,} bytes, over the limit of {limit:,}", p
            )
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:  # it grew while being read
        raise InputError(errno.EFBIG, f"it is over the limit of {limit:,} bytes", p)
    return data


def read_input_text(path: str | Path, *, encoding: str = "utf-8", errors: str = "strict") -> str:
    """The text of the regular file ``path`` with universal newlines, as ``Path.read_text``
    gives it (``UnicodeDecodeError`` for bytes that are not ``encoding``)."""
    text = read_input_bytes(path).decode(encoding, errors)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


__all__ = [
    "InputError",
    "check_input",
    "input_problem",
    "is_input_file",
    "open_input",
    "read_input_bytes",
    "read_input_text",
]
