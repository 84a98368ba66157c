"""Reading an OpenAI-style server's replies over httpx: its error text, how long it asks us
to wait, why a connection failed, the TLS context. Shared by the LLM client and the
embeddings client."""

from __future__ import annotations

import email.utils
import ssl
import time
from functools import cache

import httpx

from hammr.backends.http_errors import causes, connect_reason, one_line

EXCERPT_CHARS = 200


def excerpt(text: str) -> str:
    """A server's text, on one line and short enough for an error message."""
    return one_line(text, EXCERPT_CHARS)


def server_message(resp: httpx.Response) -> str:
    """The error text a server put in its reply, whatever shape it used."""
    try:
        data = resp.json()
    except ValueError:
        return one_line(resp.text, EXCERPT_CHARS) or "(empty reply)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for key in ("message", "detail", "error"):
                if isinstance(err.get(key), str):
                    return one_line(err[key], EXCERPT_CHARS)
        elif isinstance(err, str):
            return one_line(err, EXCERPT_CHARS)
        if isinstance(data.get("detail"), str):
            return one_line(data["detail"], EXCERPT_CHARS)
    return one_line(resp.text, EXCERPT_CHARS)


def retry_after_s(resp: httpx.Response) -> float | None:
    """The seconds a 429/503 reply's Retry-After header asks for (a number or an HTTP date)."""
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_REASONS = (
    (
        "host name not found",
        (
            "name or service not known",
            "nodename nor servname",
            "getaddrinfo",
            "temporary failure in name resolution",
        ),
    ),
    ("network unreachable", ("unreachable",)),
)


CLOSED_EARLY = "connection closed before the reply was complete"
"""Why a server that took a request could not be heard to the end (it crashed, was killed,
or restarted)."""

_CLOSED_NEEDLES = (
    "server disconnected",
    "connection reset",
    "peer closed connection",
    "incomplete chunked read",
    "broken pipe",
    "connection aborted",
)


def closed_early(exc: Exception) -> bool:
    """Whether ``exc`` (an httpx error after the connection was made) means that the server
    closed the connection before its reply was complete."""
    chain = causes(exc)
    dropped = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
    if any(isinstance(e, dropped) for e in chain):
        return True
    low = " ".join(str(e) for e in chain).lower()
    return any(n in low for n in _CLOSED_NEEDLES)


def network_reason(exc: Exception) -> str:
    """Why a connection to a server failed, in a few words."""
    return connect_reason(exc, _REASONS, limit=120)


@cache
def tls_context() -> ssl.SSLContext:
    """Loading the CA bundle takes ~0.1 s: done once, not per client (one client per loop)."""
    return httpx.create_ssl_context()
