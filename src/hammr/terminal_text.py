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
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

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


class TerminalWriteError(OSError):
    """Standard output or error could not be written (redirected to a full disk, a file over
    its size limit...): ``stream`` says which. Same ``errno`` as the failure, so a closed
    pipe (EPIPE) is still what click ends quietly."""

    def __init__(self, error: OSError, stream: str) -> None:
        super().__init__(error.errno, error.strerror)
        self.stream = stream


def echo(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` (on stderr with ``err``) through :func:`safe_text`: the one way a command
    prints plain text, so that nothing a model, a data file or a store holds reaches the
    terminal unfiltered, whoever forgot to filter it (safe text passes unchanged). A failed
    write is a :class:`TerminalWriteError`."""
    import click

    try:
        click.echo(safe_text(str(text)), err=err, nl=nl)
    except OSError as e:
        raise TerminalWriteError(e, "stderr" if err else "stdout") from e


def silence(stream: str) -> None:
    """Point ``stream`` ('stdout' or 'stderr') at /dev/null, after a write to it failed:
    what is still buffered for it would fail again when Python exits."""
    import os
    import sys

    broken = sys.stderr if stream == "stderr" else sys.stdout
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, broken.fileno())
    finally:
        os.close(devnull)


def safe_console(**kwargs: Any) -> Console:
    """A rich Console (the keyword arguments are Console's) that filters every piece of text
    it renders through :func:`safe_text` and drops hyperlinks: a table cell, a title or a
    progress description holding escape sequences, or markup (``[link=...]``) that slipped
    past :func:`safe_markup`, is shown, not obeyed. The one way a command makes a Console."""
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def render(
            self, renderable: RenderableType, options: ConsoleOptions | None = None
        ) -> Iterable[Segment]:
            for seg in super().render(renderable, options):
                if seg.control is not None:
                    yield seg
                    continue
                style = seg.style
                if style is not None and style.link:
                    style = style.update_link(None)
                text = seg.text if seg.text.isprintable() else safe_text(seg.text)
                yield Segment(text, style) if (text, style) != (seg.text, seg.style) else seg

        def print(self, *objects: Any, **kwargs: Any) -> None:
            try:
                super().print(*objects, **kwargs)
            except OSError as e:
                raise TerminalWriteError(e, "stderr" if self.stderr else "stdout") from e

    return _SafeConsole(**kwargs)


__all__ = [
    "TerminalWriteError",
    "echo",
    "safe_console",
    "safe_json",
    "safe_line",
    "safe_markup",
    "safe_text",
    "silence",
]
