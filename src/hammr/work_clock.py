"""A deadline that counts a task's own work, not the time it waits its turn.

An evaluation gives each sample ``timeout_s`` seconds. With one shared model slot (the
embedded llama.cpp model answers one request at a time), a sample may spend most of its
wall-clock time queued behind other samples' calls; a plain ``asyncio.timeout`` would then
time out samples that did little work of their own. :class:`WorkDeadline` is a timeout
whose clock stops while the task is inside :func:`queued` (a backend waiting for its slot),
and :attr:`WorkDeadline.queued_s` says how long that was.

The deadline travels in a context variable, so a backend deep inside a run finds it
without any argument being threaded through agents and tools; code that runs under no
deadline (``hammr ask``, tests) pays nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from types import TracebackType

_current: ContextVar[WorkDeadline | None] = ContextVar("hammr_work_deadline", default=None)


class WorkDeadline:
    """``async with WorkDeadline(seconds):`` raises :class:`TimeoutError` once the block has
    worked ``seconds`` seconds, time spent in :func:`queued` not counted (None: no limit).

    While any part of the task is queued the whole deadline pauses (agents run their steps
    one after another, so a queued call means the sample is waiting, not working).
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds if seconds is not None and seconds > 0 else None
        self.queued_s = 0.0
        """Seconds spent queued (not counted against the deadline)."""
        self._timeout: asyncio.Timeout | None = None
        self._remaining: float | None = None
        self._waiting = 0
        self._paused_at = 0.0
        self._token: object = None

    def expired(self) -> bool:
        """Whether the deadline, not something else, ended the block."""
        return self._timeout is not None and self._timeout.expired()

    async def __aenter__(self) -> WorkDeadline:
        loop = asyncio.get_running_loop()
        when = loop.time() + self.seconds if self.seconds is not None else None
        self._timeout = asyncio.timeout_at(when)
        await self._timeout.__aenter__()
        self._token = _current.set(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _current.reset(self._token)  # type: ignore[arg-type]
        assert self._timeout is not None
        await self._timeout.__aexit__(exc_type, exc, tb)

    def pause(self) -> None:
        self._waiting += 1
        if self._waiting > 1 or self._timeout is None:
            return
        self._paused_at = time.monotonic()
        when = self._timeout.when()
        if when is not None:
            self._remaining = max(0.0, when - asyncio.get_running_loop().time())
            self._timeout.reschedule(None)

    def resume(self) -> None:
        self._waiting -= 1
        if self._waiting > 0 or self._timeout is None:
            return
        self.queued_s += time.monotonic() - self._paused_at
        if self._remaining is not None and not self._timeout.expired():
            self._timeout.reschedule(asyncio.get_running_loop().time() + self._remaining)
            self._remaining = None


def current_deadline() -> WorkDeadline | None:
    """The deadline the running code is under, if any."""
    return _current.get()


@contextlib.asynccontextmanager
async def queued() -> AsyncIterator[None]:
    """Time spent in this block (waiting for a shared slot) does not count against the
    current :class:`WorkDeadline`. Cancellation still reaches the block at once."""
    deadline = _current.get()
    if deadline is None:
        yield
        return
    deadline.pause()
    try:
        yield
    finally:
        deadline.resume()
