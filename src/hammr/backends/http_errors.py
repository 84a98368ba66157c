"""One-line explanations of HTTP failures, shared by the web backends and the LLM client.

Pure helpers: nothing here imports httpx.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def one_line(text: str, limit: int = 160) -> str:
    """``text`` with its whitespace runs collapsed, cut to ``limit`` characters ("...")."""
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps (httpx/anyio hide the OSError behind a generic message)."""
    out: list[BaseException] = []
    todo = [exc]
    while todo and len(out) < 20:
        e = todo.pop()
        if any(e is seen for seen in out):
            continue
        out.append(e)
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return out


def connect_reason(exc: Exception, reasons: Sequence[tuple[str, Sequence[str]]], limit: int) -> str:
    """Why a connection failed, in a few words.

    "connection refused" when anything in the chain was refused; else the first of
    ``reasons`` (reason, substrings) with a substring in the chain's lower-cased text; else
    ``exc``'s message cut to ``limit`` characters (its type's name when it has none).
    """
    chain = causes(exc)
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connection refused"
    low = " ".join(str(e) for e in chain).lower()
    if "refused" in low:
        return "connection refused"
    for reason, needles in reasons:
        if any(n in low for n in needles):
            return reason
    return one_line(str(exc), limit) or type(exc).__name__
