"""A local HTTP server for tests (127.0.0.1, a free port, a daemon thread), shared by the fake
OpenAI server (fake_openai_server.py) and the fake web-search server (test_web_search.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and can send a JSON reply."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_json(
        self, status: int, body: bytes | dict[str, Any], headers: Mapping[str, str] = {}
    ) -> None:
        """Reply ``status`` with ``body`` (bytes as they are, else as JSON); a client that
        went away (timed out) is ignored."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class LocalServer:
    """Serves ``handler`` on 127.0.0.1 (port ``self.port``: ``port``, or a free one when 0)
    until :meth:`close`, which also sets ``self.stop`` (handlers wait on it to delay a reply)."""

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        request_queue_size: int = 5,
        port: int = 0,
    ) -> None:
        self.stop = threading.Event()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        Server.request_queue_size = request_queue_size
        self.httpd = Server(("127.0.0.1", port), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
