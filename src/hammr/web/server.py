"""The viewer's HTTP server: uvicorn (h11, one asyncio event loop) in front of :class:`Api`.

GET and HEAD only (anything else: 405); every answer comes from :meth:`Api.handle`, run in
a small fixed thread pool (the store serialises its reads on one SQLite connection anyway),
which reads nothing but the run store and three whitelisted static files. Bound to 127.0.0.1
unless told otherwise; while bound to a loopback address, requests whose ``Host`` header names
another host are refused (a web page elsewhere cannot reach the store by DNS rebinding).

An open connection costs a socket and a small object on the event loop, not a thread. uvicorn
times out a connection only once it has answered a request on it (``timeout_keep_alive``);
one that never completes a request (idle after connecting, or trickling a header a byte at a
time) would stay open for good, so :class:`RequestDeadlineProtocol` closes any connection
that has not delivered a complete request within ``request_timeout`` seconds of connecting
or of its previous answer. Past ``max_connections`` open connections, requests get 503.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

from hammr.eval.store import RunStore
from hammr.web.api import Api, Response, json_response

DEFAULT_HOST = "127.0.0.1"
WORKERS = 4
REQUEST_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 512
BACKLOG = 128
MAX_HEADER_BYTES = 16 * 1024
SHUTDOWN_GRACE_S = 5
_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


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


class ViewerApp:
    """The ASGI application: method and Host checks, then :meth:`Api.handle` in a thread."""

    def __init__(self, api: Api, *, loopback_only: bool, pool: ThreadPoolExecutor) -> None:
        self.api = api
        self.loopback_only = loopback_only
        self.pool = pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        hosts = [v.decode("latin-1") for k, v in scope["headers"] if k == b"host"]  # lower-case
        if self.loopback_only and not all(host_header_ok(h) for h in hosts):
            resp = json_response({"error": "forbidden host"}, 403)
        elif method not in ("GET", "HEAD"):
            resp = json_response({"error": "method not allowed"}, 405)
            resp.headers["Allow"] = "GET, HEAD"
            resp.headers["Connection"] = "close"  # the request body, if any, is not read
        else:
            # raw_path keeps the percent-encoding: an encoded '/' stays inside its segment.
            target = bytes(scope["raw_path"]).decode("latin-1")
            if scope["query_string"]:
                target += "?" + bytes(scope["query_string"]).decode("latin-1")
            loop = asyncio.get_running_loop()
            resp = await loop.run_in_executor(self.pool, self.api.handle, target)
        await send_response(send, resp)


async def send_response(send: Send, resp: Response) -> None:
    headers = [
        (b"content-type", resp.content_type.encode("latin-1")),
        (b"content-length", str(len(resp.body)).encode("ascii")),
        *_SECURITY_HEADERS,
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()),
    ]
    await send({"type": "http.response.start", "status": resp.status, "headers": headers})
    await send({"type": "http.response.body", "body": resp.body})


class ViewerServer:
    """Serves one run store; ``port=0`` picks a free port (see :attr:`url`).

    The socket is bound on construction (an ``OSError`` says why it cannot be); serve with
    :meth:`serve_forever` (until SIGINT/SIGTERM) or :meth:`start_in_thread` and :meth:`stop`.
    """

    def __init__(
        self,
        store: RunStore,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        verbose: bool = False,
        api: Api | None = None,
        workers: int = WORKERS,
        request_timeout: float = REQUEST_TIMEOUT_S,
        keep_alive: int = KEEP_ALIVE_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.api = api or Api(store)
        self.loopback_only = is_loopback(host)
        bare = host.strip("[]")
        family = socket.AF_INET6 if ":" in bare else socket.AF_INET
        self.socket = socket.create_server((bare, port), family=family, backlog=BACKLOG)
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self._pool = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=f"hammr-view-{self.server_address[1]}"
        )
        app = ViewerApp(self.api, loopback_only=self.loopback_only, pool=self._pool)
        config = uvicorn.Config(
            app,
            http=deadline_protocol(request_timeout),
            loop="asyncio",
            ws="none",
            lifespan="off",
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
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def serve_forever(self) -> None:
        """Serve until SIGINT or SIGTERM (re-raised once shut down: Ctrl-C gives
        ``KeyboardInterrupt``) or :meth:`stop`."""
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def start_in_thread(self, timeout: float = 10.0) -> threading.Thread:
        """Serve on a daemon thread (tests, benchmarks); returns once it is accepting."""
        name = f"hammr-view-{self.server_address[1]}-loop"
        t = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        self._thread = t
        t.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not t.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the viewer server did not start")
            time.sleep(0.005)
        return t

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=SHUTDOWN_GRACE_S + 5)
            self._thread = None
        self.socket.close()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def server_close(self) -> None:
        self.socket.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
