"""A static file server for download tests: serves a folder on 127.0.0.1 (a free port) the way
a dataset publisher's web server does, counts what it is asked, and misbehaves on request.

    with FixtureServer(site.root) as server:
        server.url                                   # http://127.0.0.1:PORT
        server.fault("host/a.zip", "500", times=2)   # the first two GETs fail
        ...
        server.count("host/")                        # requests for paths under host/

A request for ``/HOST/PATH?QUERY`` is answered with the file ``root/HOST/PATH`` (the query is
ignored; a folder is answered with its ``index.html`` or ``index.json``). Paths are given and
recorded without the leading '/', as :func:`data_site.served_path` writes them.

What a real server does that downloaders rely on: GET and HEAD, ``Content-Length``,
``Content-Type`` by extension, ``ETag`` (size and mtime) and ``Last-Modified``,
``Accept-Ranges: bytes``, ranges ``bytes=N-``, ``bytes=N-M`` and ``bytes=-K`` answered 206 with
``Content-Range`` (an unsatisfiable one 416), and ``If-Range``: a validator that does not match
the file's ETag or Last-Modified makes the answer 200 with the whole file.

Faults (:meth:`FixtureServer.fault`, per path, changeable while serving; ``times=n`` makes any
of them apply to the first n requests of the path only):

* ``404``, ``500``: that status;
* ``redirect_loop``: 302 to the same URL, forever;
* ``html``: 200 with a text/html error page instead of the file;
* ``stall``: the headers (with the full Content-Length) and ``after`` bytes (default 0), then
  nothing until :meth:`release` (the rest is then sent) or the server stops (the connection is
  closed);
* ``throttle``: at most ``bytes_per_s`` bytes a second (a client can be killed mid-file);
* ``truncate``: the full Content-Length, but the connection closes after ``after`` bytes.
"""

from __future__ import annotations

import contextlib
import email.utils
import mimetypes
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, NamedTuple
from urllib.parse import unquote, urlsplit

__all__ = ["CONTENT_TYPES", "FAULTS", "FixtureServer", "Request"]

FAULTS = ("404", "500", "redirect_loop", "html", "stall", "throttle", "truncate")
CONTENT_TYPES = {
    ".zip": "application/zip",
    ".tar": "application/x-tar",
    ".gz": "application/gzip",
    ".tgz": "application/gzip",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".json": "application/json",
    ".jsonl": "application/json",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".html": "text/html",
}
"""Content-Type by the file name's last extension (anything else: application/octet-stream)."""
INDEX_FILES = ("index.html", "index.json")
"""What a request for a folder is answered with, the first that exists."""
CHUNK = 64 * 1024
HTML_ERROR = (
    b"<!DOCTYPE html>\n<html><head><title>Service unavailable</title></head>\n"
    b"<body><h1>Sorry</h1><p>The file you asked for is not available right now.</p></body>"
    b"</html>\n"
)
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class Request(NamedTuple):
    """One answered request: method, path (no leading '/', no query), the Range header as
    sent (None without one) and the status answered."""

    method: str
    path: str
    range: str | None
    status: int


@dataclass
class _Fault:
    kind: str
    times: int | None
    options: dict[str, Any] = field(default_factory=dict)


def content_type(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return CONTENT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _norm(path: str) -> str:
    return path.lstrip("/")


class FixtureServer:
    """Serves ``root`` on 127.0.0.1 while used as a context manager (or between :meth:`start`
    and :meth:`close`). Thread-safe counters: :attr:`requests`, :meth:`bytes_sent`,
    :meth:`count`, :meth:`reset_counts`."""

    def __init__(self, root: Path, *, connection_timeout: float = 30.0) -> None:
        self.root = Path(root).resolve()
        self.connection_timeout = connection_timeout
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._sent: dict[str, int] = {}
        self._faults: dict[str, _Fault] = {}
        self._stalled: set[threading.Event] = set()
        self._sockets: set[socket.socket] = set()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life --------------------------------------------------------------------------------

    def start(self) -> FixtureServer:
        server = self

        class Handler(_Handler):
            owner = server
            timeout = self.connection_timeout

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64

        self._stop.clear()
        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fixture-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving: stalled and throttled replies end (their connections close), open
        connections are shut, the listening socket is closed."""
        self._stop.set()
        with self._lock:
            for event in self._stalled:
                event.set()
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FixtureServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fixture server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing '/'): the value for ``--mirror``."""
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, path: str) -> str:
        """The full URL of a served path."""
        return f"{self.url}/{_norm(path)}"

    # -- counting ----------------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every answered request so far, in order (a copy); a request is recorded as its
        headers go out, so a client that has its answer finds it here."""
        with self._lock:
            return list(self._requests)

    def bytes_sent(self, path: str) -> int:
        """Body bytes sent for ``path`` so far (all requests together), each chunk counted as
        it is handed to the connection."""
        with self._lock:
            return self._sent.get(_norm(path), 0)

    def count(self, path_prefix: str = "", *, method: str | None = None) -> int:
        """How many requests asked for a path starting with ``path_prefix`` (and ``method``)."""
        prefix = _norm(path_prefix)
        with self._lock:
            return sum(
                1
                for r in self._requests
                if r.path.startswith(prefix) and (method is None or r.method == method)
            )

    def paths(self, method: str | None = "GET") -> set[str]:
        """The distinct paths asked for (with ``method``; None: any)."""
        with self._lock:
            return {r.path for r in self._requests if method is None or r.method == method}

    def reset_counts(self) -> None:
        with self._lock:
            self._requests.clear()
            self._sent.clear()

    # -- faults ------------------------------------------------------------------------------

    def fault(self, path: str, kind: str, *, times: int | None = None, **options: Any) -> None:
        """Make ``path`` misbehave as ``kind`` (see the module docstring); ``times``: only for
        its next n requests. Options: ``after`` (stall, truncate), ``bytes_per_s`` (throttle)."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")
        known = {"stall": {"after"}, "truncate": {"after"}, "throttle": {"bytes_per_s"}}
        unknown = set(options) - known.get(kind, set())
        if unknown:
            raise ValueError(f"fault {kind!r} takes no option {', '.join(sorted(unknown))}")
        if kind == "throttle" and int(options.get("bytes_per_s", 0)) <= 0:
            raise ValueError("a throttle needs bytes_per_s > 0")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._faults[_norm(path)] = _Fault(kind, times, dict(options))

    def clear_faults(self, path: str | None = None) -> None:
        """Remove every fault (or ``path``'s) and release stalled replies."""
        with self._lock:
            if path is None:
                self._faults.clear()
            else:
                self._faults.pop(_norm(path), None)
        self.release()

    def release(self) -> None:
        """Let every reply stalled now send the rest of its body (later stalls stall again)."""
        with self._lock:
            stalled = list(self._stalled)
            self._stalled.clear()
        for event in stalled:
            event.set()

    def stalled(self) -> int:
        """How many replies are stalled now."""
        with self._lock:
            return len(self._stalled)

    # -- used by the handler -----------------------------------------------------------------

    def _take_fault(self, path: str) -> _Fault | None:
        with self._lock:
            fault = self._faults.get(path)
            if fault is None:
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self._faults[path]
            return fault

    def _record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def _add_sent(self, path: str, n: int) -> None:
        with self._lock:
            self._sent[path] = self._sent.get(path, 0) + n

    def _stall(self) -> threading.Event:
        event = threading.Event()
        with self._lock:
            if self._stop.is_set():
                event.set()
            else:
                self._stalled.add(event)
        return event

    def _unstall(self, event: threading.Event) -> None:
        with self._lock:
            self._stalled.discard(event)

    def _open(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)


class _Handler(BaseHTTPRequestHandler):
    owner: FixtureServer
    _request: tuple[str, str | None]
    protocol_version = "HTTP/1.1"
    server_version = "FixtureHTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.owner._open(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.owner._closed(self.connection)

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    # -- one request -------------------------------------------------------------------------

    def _answer(self, *, head: bool) -> None:
        path = _norm(unquote(urlsplit(self.path).path))
        self._request = (path, self.headers.get("Range"))
        self._reply(path, self._request[1], head)

    def _headers_done(self, status: int) -> None:
        """Record the request, then send the headers: a client that has the answer finds it
        counted."""
        path, wanted = self._request
        self.owner._record(Request(self.command, path, wanted, status))
        self.end_headers()

    def _file(self, path: str) -> Path | None:
        if not path or any(part in {"", ".", ".."} for part in path.split("/")):
            return None
        target = self.owner.root / path
        if target.is_dir():
            target = next((target / i for i in INDEX_FILES if (target / i).is_file()), target)
        if not target.is_file() or not target.resolve().is_relative_to(self.owner.root):
            return None
        return target

    def _simple(self, status: int, body: bytes, kind: str = "text/plain", **headers: str) -> int:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self._headers_done(status)
        if self.command != "HEAD":
            self.wfile.write(body)
        return status

    def _reply(self, path: str, wanted: str | None, head: bool) -> int:
        fault = self.owner._take_fault(path)
        kind = fault.kind if fault is not None else ""
        if kind == "404":
            return self._simple(404, b"not found (fault)\n")
        if kind == "500":
            return self._simple(500, b"internal server error (fault)\n")
        if kind == "redirect_loop":
            return self._simple(302, b"", Location=self.path)
        if kind == "html":
            return self._simple(200, HTML_ERROR, "text/html; charset=utf-8")
        target = self._file(path)
        if target is None:
            return self._simple(404, b"not found\n")
        stat = target.stat()
        size = stat.st_size
        etag = f'"{size:x}-{stat.st_mtime_ns:x}"'
        modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
        start, end = 0, size - 1
        status = 200
        if wanted is not None:
            validator = self.headers.get("If-Range")
            if validator is None or validator.strip() in {etag, modified}:
                parsed = _parse_range(wanted, size)
                if parsed == "unsatisfiable":
                    return self._simple(416, b"", Content_Range=f"bytes */{size}")
                if parsed is not None:
                    start, end = parsed
                    status = 206
        length = end - start + 1
        self.send_response(status)
        self.send_header("Content-Type", content_type(target.name))
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        if kind in {"stall", "truncate"}:
            self.close_connection = True
        self._headers_done(status)
        if head:
            return status
        with target.open("rb") as f:
            f.seek(start)
            self._body(f, path, length, fault)
        return status

    def _body(self, f: BinaryIO, path: str, length: int, fault: _Fault | None) -> None:
        owner = self.owner
        kind = fault.kind if fault is not None else ""
        options = fault.options if fault is not None else {}
        after = min(int(options.get("after", 0)), length)
        rate = int(options.get("bytes_per_s", 0))
        left = length
        try:
            if kind in {"stall", "truncate"}:
                left -= self._copy(f, path, after)
                if kind == "truncate":
                    self.connection.shutdown(socket.SHUT_WR)
                    return
                event = owner._stall()
                event.wait()
                owner._unstall(event)
                if owner._stop.is_set():
                    return
            while left > 0 and not owner._stop.is_set():
                if rate:
                    step = max(1, min(left, rate // 10))
                    began = time.monotonic()
                    left -= self._copy(f, path, step)
                    owner._stop.wait(max(0.0, step / rate - (time.monotonic() - began)))
                else:
                    left -= self._copy(f, path, min(left, CHUNK))
            if left > 0:  # stopped mid-body
                self.close_connection = True
        except OSError:  # the client went away (or the server was stopped under it)
            self.close_connection = True

    def _copy(self, f: BinaryIO, path: str, n: int) -> int:
        done = 0
        while done < n:
            data = f.read(min(CHUNK, n - done))
            if not data:
                break
            self.owner._add_sent(path, len(data))  # counted first: see _headers_done
            self.wfile.write(data)
            self.wfile.flush()
            done += len(data)
        return done


def _parse_range(value: str, size: int) -> tuple[int, int] | str | None:
    """(first, last) byte of a single ``bytes=`` range; 'unsatisfiable'; None to ignore it
    (malformed, or several ranges), as RFC 9110 lets a server do."""
    m = _RANGE.fullmatch(value.strip())
    if m is None:
        return None
    first, last = m.groups()
    if not first and not last:
        return None
    if not first:  # the last K bytes
        k = int(last)
        if k == 0:
            return "unsatisfiable"
        return max(0, size - k), size - 1
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(int(last) if last else size - 1, size - 1)
