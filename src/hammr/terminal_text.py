"""Text a model or a file wrote, made safe to print on a terminal.

A model's answer, a trace read from disk, a memory's guidance or a run's name can hold
escape sequences that a terminal obeys rather than shows (set the window title, clear the
screen, rewrite the line, make a hyperlink) and bidirectional overrides that show text in
another order than it is stored. Every printer of such text passes it through
:func:`safe_text` first; text that goes into a rich renderable (where ``[bold]`` is markup)
goes through :func:`safe_markup`. Newlines and tabs are kept; everything else that is not
shown as itself is dropped, an escape sequence whole (so no ``]0;title`` is left behind).
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(
    r"""
    (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]?                  # CSI: colours, cursor, clear
  | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]) [^\x07\x1b\x9c\n]* (?:\x07|\x1b\\|\x9c)?
                                        # OSC, DCS, SOS, PM, APC: to the terminator or line end
  | \x1b [ -/]* [0-~]?                                    # any other escape
    """,
    re.VERBOSE,
)
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_DROP = {
    **{c: None for c in range(0x20) if chr(c) not in "\n\t"},
    0x7F: None,
    **{c: None for c in range(0x80, 0xA0)},
    **{ord(c): None for c in _BIDI},
}


def safe_text(text: str) -> str:
    """``text`` with terminal escape sequences, control characters (C0 but newline and tab,
    DEL, C1) and bidirectional controls removed."""
    if text.isprintable():  # the common case: nothing to do (newlines are not printable)
        return text
    return _SEQUENCE.sub("", text).translate(_DROP)


def safe_line(text: str) -> str:
    """:func:`safe_text` on one line: newlines and tabs become spaces too (for a table cell
    or a one-line message)."""
    return safe_text(text).replace("\n", " ").replace("\t", " ")


def safe_markup(text: str) -> str:
    """:func:`safe_text` with rich markup escaped, for text put in a rich table or printed
    with rich (``[link=...]`` and ``[/]`` are then shown, not obeyed or raised on)."""
    from rich.markup import escape

    return escape(safe_text(text))


_JSON_ESCAPE = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), *map(ord, _BIDI))}


def safe_json(text: str) -> str:
    """JSON text (from ``json.dumps``, which escapes C0 itself) with DEL, C1 and the
    bidirectional controls written as ``\\uXXXX`` escapes: the same document, none of it
    obeyed by a terminal. Such characters occur only inside JSON strings, where the escape
    means the character itself."""
    return text.translate(_JSON_ESCAPE)


__all__ = ["safe_json", "safe_line", "safe_markup", "safe_text"]
