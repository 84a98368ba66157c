"""An OpenAI-compatible chat server on 127.0.0.1 for tests: scripted replies, recorded requests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fake_http_server import LocalServer, QuietHandler
from patience import HANG_S


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def ok_body(text: str = "ok", *, completion: bool = False) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
    if completion:
        choice["text"] = text
    else:
        choice["message"] = {"role": "assistant", "content": text}
    return {
        "id": "x",
        "model": "fake-model",
        "choices": [choice],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


class FakeServer(LocalServer):
    """An OpenAI-style server on 127.0.0.1 that plays scripted replies and records requests.

    ``port``: the port to listen on (0: a free one); a closed server can be started again on
    its port. ``max_concurrent`` > 0 works on at most that many requests at once (a reply's
    delay included), the others wait their turn, as a model server with that many slots.
    ``active`` and ``peak_active`` count the requests being worked on now and at most.
    """

    def __init__(self, port: int = 0, *, max_concurrent: int = 0) -> None:
        self.script: list[Reply] = []
        self.responder: Callable[[Seen], Reply] | None = None
        """When set, it answers every request (from the handler's thread) instead of script."""
        self.seen: list[Seen] = []
        self.get_replies: dict[str, Reply] = {}
        """Replies to GET requests by path (e.g. "/props"); any other GET is a 404."""
        self.gets: list[str] = []
        """The paths of the GET requests, in order (not in :attr:`seen`)."""
        self.active = 0
        self.peak_active = 0
        counts = threading.Lock()
        slots = threading.BoundedSemaphore(max_concurrent) if max_concurrent > 0 else None
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                outer.gets.append(self.path)
                reply = outer.get_replies.get(self.path)
                if reply is None:
                    self.send_json(404, {"error": {"message": "File Not Found", "code": 404}})
                    return
                if reply.delay:
                    outer.stop.wait(reply.delay)
                self.send_json(reply.status, reply.body or {}, reply.headers)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen = Seen(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)
                )
                outer.seen.append(seen)
                if slots is not None:
                    slots.acquire()
                with counts:
                    outer.active += 1
                    outer.peak_active = max(outer.peak_active, outer.active)
                try:
                    reply = self.work(seen)
                finally:
                    with counts:
                        outer.active -= 1
                    if slots is not None:
                        slots.release()
                body = reply.body
                if body is None:
                    body = ok_body(completion=self.path.endswith("/v1/completions"))
                self.send_json(reply.status, body, reply.headers)

            def work(self, seen: Seen) -> Reply:
                if outer.responder is not None:
                    reply = outer.responder(seen)
                else:
                    reply = outer.script.pop(0) if outer.script else Reply()
                if reply.delay:
                    outer.stop.wait(reply.delay)
                return reply

        super().__init__(Handler, request_queue_size=64, port=port)
        self.url = f"http://127.0.0.1:{self.port}/v1"


def served_env(server: FakeServer, *, timeout_s: float = HANG_S, **extra: str) -> dict[str, str]:
    """Environment variables pointing hammr at ``server`` (no response cache, one retry). The
    client's timeout is a safety net against a hang (``patience.HANG_S``), not a deadline: a
    loaded machine may take seconds to answer even a scripted reply."""
    return {
        "HAMMR_LLM__BACKEND": "openai",
        "HAMMR_LLM__BASE_URL": server.url,
        "HAMMR_LLM__MODEL": "fake",
        "HAMMR_LLM__CACHE": "false",
        "HAMMR_LLM__MAX_RETRIES": "1",
        "HAMMR_LLM__TIMEOUT_S": f"{timeout_s:g}",
        **extra,
    }
