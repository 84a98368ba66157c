"""How long a test waits, in one place: tests assert order and outcome, never speed.

The suite must pass on a loaded machine (6-8 busy programs per core beside it), where the
wall clock stretches ten-fold. So a wait in a test is one of two things:

* a safety net against a hang: :data:`HANG_S` (minutes; ``HAMMR_TEST_HANG_S`` changes it),
  used for subprocess timeouts, client timeouts towards our own fake servers, joins and
  polling loops that wait for a state to appear (:func:`wait_until`, :func:`async_wait_until`);
* a bound on *work* (a parser that must stay linear on hostile input): counted in this
  thread's processor time (:func:`cpu_s`), which a busy machine does not stretch, never in
  wall time.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable

HANG_S = float(os.environ.get("HAMMR_TEST_HANG_S", "600"))
"""Seconds after which a test that is still waiting is taken to hang."""

POLL_S = 0.02


def cpu_s() -> float:
    """Processor seconds this thread has used (time waiting for a processor not counted)."""
    return time.thread_time()


def wait_until(ready: Callable[[], bool], what: str, *, timeout_s: float = HANG_S) -> None:
    """Poll ``ready`` until it holds; fail naming ``what`` if it has not after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"still waiting after {timeout_s:g} s: {what}"
        time.sleep(POLL_S)


async def async_wait_until(
    ready: Callable[[], bool | Awaitable[bool]], what: str, *, timeout_s: float = HANG_S
) -> None:
    """:func:`wait_until` for a running event loop (``ready`` may be a coroutine function)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = ready()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        assert time.monotonic() < deadline, f"still waiting after {timeout_s:g} s: {what}"
        await asyncio.sleep(POLL_S)
