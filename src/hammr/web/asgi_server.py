"""One way hammr serves HTTP: uvicorn (h11, one asyncio event loop) on a socket it binds
itself, hardened the same for every server (`hammr view`, `hammr serve`, `hammr mcp --http`).

- :class:`BoundServer` binds the socket on construction (an ``OSError`` says why it cannot
  be), then serves until SIGINT/SIGTERM (:meth:`BoundServer.serve_forever`) or on a thread
  (:meth:`BoundServer.start_in_thread`, for tests and benchmarks).
- :class:`RequestDeadlineProtocol`: uvicorn times out a connection only once it has answered
  a request on it (``timeout_keep_alive``); one that never completes a request (idle after
  connecting, or trickling a header a byte at a time) would stay open for good, so this
  closes any connection that has not delivered a complete request within ``request_timeout``
  seconds of connecting or of its previous answer. Past ``max_connections`` open
  connections, requests get 503.
- :class:`HostCheck`: while bound to a loopback address, requests whose ``Host`` header names
  another host are refused (a web page elsewhere cannot reach the server by DNS rebinding).
- :class:`BearerKeyCheck`: an API key, compared in constant time.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HOST = "127.0.0.1"
REQUEST_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 512
BACKLOG = 128
MAX_HEADER_BYTES = 16 * 1024
SHUTDOWN_GRACE_S = 5
_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_header_ok(host: str) -> bool:
    """Whether a ``Host`` header names this machine (an absent one is allowed)."""
    host = host.strip()
    if not host:
        return True
    if host.startswith("["):
        name = host[: host.find("]") + 1] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name.lower() in _LOCAL_NAMES or is_loopback(name)


def header_values(scope: Scope, name: bytes) -> list[str]:
    """Every value of the (lower-case) header ``name`` in an ASGI scope."""
    return [v.decode("latin-1") for k, v in scope.get("headers", []) if k == name]


async def send_json(
    send: Send, status: int, body: object, headers: dict[str, str] | None = None
) -> None:
    """A whole JSON answer, with the security headers, written straight to ASGI."""
    data = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode("ascii")),
                *SECURITY_HEADERS,
                *(
                    (k.lower().encode("latin-1"), v.encode("latin-1"))
                    for k, v in (headers or {}).items()
                ),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class HostCheck:
    """ASGI middleware: 403 for a request whose ``Host`` names another machine, while the
    server is bound to a loopback address (``loopback_only``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        loopback_only: bool,
        refusal: Callable[[], object] = lambda: {"error": "forbidden host"},
    ) -> None:
        self.app = app
        self.loopback_only = loopback_only
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and self.loopback_only
            and not all(host_header_ok(h) for h in header_values(scope, b"host"))
        ):
            await send_json(send, 403, self.refusal(), {"connection": "close"})
            return
        await self.app(scope, receive, send)


def key_matches(given: str, key: str) -> bool:
    """Whether ``given`` is ``key``, in time that does not depend on where they differ."""
    return hmac.compare_digest(given.encode("utf-8"), key.encode("utf-8"))


class BearerKeyCheck:
    """ASGI middleware: 401 unless the request carries ``Authorization: Bearer KEY`` (or
    ``x-api-key: KEY``); paths in ``open_paths`` need no key."""

    def __init__(
        self,
        app: ASGIApp,
        key: str,
        *,
        refusal: Callable[[str], object],
        open_paths: frozenset[str] = frozenset(),
    ) -> None:
        if not key:
            raise ValueError("an API key cannot be empty")
        self.app = app
        self.key = key
        self.refusal = refusal
        self.open_paths = open_paths

    def given(self, scope: Scope) -> str | None:
        for value in header_values(scope, b"authorization"):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
        keys = header_values(scope, b"x-api-key")
        return keys[0].strip() if keys else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") not in self.open_paths:
            given = self.given(scope)
            if given is None or not key_matches(given, self.key):
                why = "no API key given" if given is None else "wrong API key"
                await send_json(
                    send, 401, self.refusal(why), {"www-authenticate": 'Bearer realm="hammr"'}
                )
                return
        await self.app(scope, receive, send)


class RequestDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for receiving each complete request.

    Armed when the connection opens and again after each answer; disarmed while a request
    is being answered. Not reset by incoming bytes, so trickling data does not extend it.
    """

    request_timeout: float = REQUEST_TIMEOUT_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        # Headers and body go out as two writes; asyncio sets TCP_NODELAY only on sockets
        # whose proto is IPPROTO_TCP, which sockets accepted from socket.create_server()'s
        # are not. Without it each answer waits for the client's delayed ACK (~40 ms).
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._answering():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self._answering():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _answering(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self._answering() and not self.transport.is_closing():
            self.transport.close()


def deadline_protocol(seconds: float) -> type[RequestDeadlineProtocol]:
    """:class:`RequestDeadlineProtocol` with its deadline set to ``seconds``."""
    return type("RequestDeadlineProtocol", (RequestDeadlineProtocol,), {"request_timeout": seconds})


class _Stopped(Exception):
    """SIGTERM arrived again after uvicorn's graceful shutdown (see serve_forever)."""


def _stop_serving(_signum: int, _frame: object) -> None:
    raise _Stopped


class BoundServer:
    """uvicorn serving ``app`` on a socket bound now; ``port=0`` picks a free port (see
    :attr:`url`). ``lifespan``: 'on' for an app with startup/shutdown work (Starlette's
    lifespan), 'off' otherwise. ``shutdown_grace_s``: how long SIGTERM waits for requests
    in flight before cancelling them."""

    def __init__(
        self,
        app: ASGIApp,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        name: str = "hammr-server",
        verbose: bool = False,
        request_timeout: float = REQUEST_TIMEOUT_S,
        keep_alive: int = KEEP_ALIVE_S,
        max_connections: int = MAX_CONNECTIONS,
        lifespan: Literal["on", "off"] = "off",
        shutdown_grace_s: float = SHUTDOWN_GRACE_S,
    ) -> None:
        self.name = name
        self.host = host
        self.loopback_only = is_loopback(host)
        self.shutdown_grace_s = shutdown_grace_s
        bare = host.strip("[]")
        family = socket.AF_INET6 if ":" in bare else socket.AF_INET
        self.socket = socket.create_server((bare, port), family=family, backlog=BACKLOG)
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        config = uvicorn.Config(
            app,
            http=deadline_protocol(request_timeout),
            loop="asyncio",
            ws="none",
            lifespan=lifespan,
            interface="asgi3",
            proxy_headers=False,
            server_header=False,
            log_config=LOGGING_CONFIG if verbose else None,
            log_level="info" if verbose else "error",
            access_log=verbose,
            timeout_keep_alive=keep_alive,
            limit_concurrency=max_connections,
            backlog=BACKLOG,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
            timeout_graceful_shutdown=max(1, round(shutdown_grace_s)),
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    @property
    def started(self) -> bool:
        return bool(self._server.started)

    def serve_forever(self) -> None:
        """Serve until SIGINT (re-raised once shut down: Ctrl-C gives ``KeyboardInterrupt``),
        SIGTERM (a graceful stop: returns once shut down) or :meth:`stop`."""
        if threading.current_thread() is not threading.main_thread():
            self._server.run(sockets=[self.socket])
            return
        # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler it
        # found installed: make that handler end serving normally instead of the process.
        previous = signal.signal(signal.SIGTERM, _stop_serving)
        try:
            self._server.run(sockets=[self.socket])
        except _Stopped:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)

    def start_in_thread(self, timeout: float = 10.0) -> threading.Thread:
        """Serve on a daemon thread (tests, benchmarks); returns once it is accepting."""
        t = threading.Thread(
            target=self.serve_forever, name=f"{self.name}-{self.port}", daemon=True
        )
        self._thread = t
        t.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not t.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} server did not start")
            time.sleep(0.005)
        return t

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=self.shutdown_grace_s + 5)
            self._thread = None
        self.socket.close()
