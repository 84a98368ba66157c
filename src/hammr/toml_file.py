"""Reading a TOML file a person wrote (a config, a suite, an agent, a graph, an experiment).

One reader for all of them, so that each says the same thing: a UTF-8 byte-order mark (which
Windows editors save and TOML does not allow, though it carries no meaning) is dropped, and
a file that is not UTF-8 text or not TOML is one line naming the file and the line.
"""

from __future__ import annotations

import codecs
import tomllib
from pathlib import Path
from typing import Any

from hammr.input_file import read_input_bytes


class TomlFileError(ValueError):
    """The file is not UTF-8 text or not valid TOML; the message is one line naming it."""


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document in ``path``. OSError (a missing file, a folder, a FIFO: see
    :mod:`hammr.input_file`) is left to the caller, which names the file as what it is;
    undecodable or malformed text is TomlFileError."""
    raw = read_input_bytes(path).removeprefix(codecs.BOM_UTF8)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        utf16 = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        raise TomlFileError(
            f"{path}: not UTF-8 text ({'UTF-16, ' if utf16 else ''}byte 0x{raw[e.start]:02x} "
            f"on line {line}); TOML files must be UTF-8, so save it as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TomlFileError(f"{path}: not valid TOML ({e})") from None


__all__ = ["TomlFileError", "read_toml"]
