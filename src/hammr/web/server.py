"""The viewer's HTTP server: :class:`~hammr.web.asgi_server.BoundServer` (uvicorn, hardened
as every hammr server is) in front of :class:`Api`.

GET and HEAD only (anything else: 405); every answer comes from :meth:`Api.handle`, run in
a small fixed thread pool (the store serialises its reads on one SQLite connection anyway),
which reads nothing but the run store and three whitelisted static files. Bound to 127.0.0.1
unless told otherwise; while bound to a loopback address, requests whose ``Host`` header names
another host are refused (:class:`~hammr.web.asgi_server.HostCheck`).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from hammr.eval.store import RunStore
from hammr.web.api import Api, Response, json_response
from hammr.web.asgi_server import (
    DEFAULT_HOST,
    KEEP_ALIVE_S,
    MAX_CONNECTIONS,
    REQUEST_TIMEOUT_S,
    SECURITY_HEADERS,
    BoundServer,
    HostCheck,
    Receive,
    Scope,
    Send,
    is_loopback,
)

__all__ = ["DEFAULT_HOST", "ViewerServer", "is_loopback"]

WORKERS = 4


class ViewerApp:
    """The ASGI application: the method check, then :meth:`Api.handle` in a thread."""

    def __init__(self, api: Api, *, pool: ThreadPoolExecutor) -> None:
        self.api = api
        self.pool = pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
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
        *SECURITY_HEADERS,
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()),
    ]
    await send({"type": "http.response.start", "status": resp.status, "headers": headers})
    await send({"type": "http.response.body", "body": resp.body})


class ViewerServer(BoundServer):
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
        viewer = ViewerApp(self.api, pool=ThreadPoolExecutor(max_workers=1))
        app = HostCheck(viewer, loopback_only=is_loopback(host))
        super().__init__(
            app,
            host,
            port,
            name="hammr-view",
            verbose=verbose,
            request_timeout=request_timeout,
            keep_alive=keep_alive,
            max_connections=max_connections,
        )
        viewer.pool.shutdown()  # named for the port, known once the socket is bound
        self._pool = viewer.pool = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=f"hammr-view-{self.port}"
        )

    def serve_forever(self) -> None:
        try:
            super().serve_forever()
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        super().stop()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def server_close(self) -> None:
        self.socket.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
