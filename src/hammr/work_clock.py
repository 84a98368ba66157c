"""A deadline that counts a task's own work, not the time it waits its turn.

An evaluation gives each sample ``timeout_s`` seconds of work. What counts as work depends
on where the model runs:

* **a served model** (another process, another machine): the sample's wall-clock time, less
  the time it spends inside :func:`queued` (a backend waiting for a shared slot). Here the
  deadline is an ``asyncio`` timer that stops while the task is queued.
* **the embedded model** (llama.cpp inside this process): on top of that, time the model
  could not work because other programs held the processors (:class:`StallClock`). On a
  machine that other programs keep busy, the wall clock runs on while the model's threads
  wait for a processor; counted in wall time, a slow machine turns into timed-out samples
  (the README's demo evaluation on a busy 2-core machine: 8 of 8 samples stored as
  'timeout' after 41 minutes, 99 s on a quiet one). Measured on a 2-core machine beside 7
  busy-loop programs, one model call took 8-11 times its quiet wall time; less the time
  its threads waited for a processor, 1.2-2 times (what remains is llama.cpp's threads
  spinning while the scheduler holds their partners back). On a quiet machine the two
  clocks agree.

:class:`WorkDeadline` takes either (``clock=None``: wall time), and
:attr:`WorkDeadline.queued_s` says how long the task waited its turn.

The deadline travels in a context variable, so a backend deep inside a run finds it
without any argument being threaded through agents and tools; code that runs under no
deadline (``hammr ask``, tests) pays nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType

_current: ContextVar[WorkDeadline | None] = ContextVar("hammr_work_deadline", default=None)

WorkClock = Callable[[], float]
"""Seconds of work done so far, on any origin; never goes back, and advances at most about
one second per wall-clock second (the deadline sleeps what is left, then looks again)."""

MIN_CHECK_S = 0.05
MAX_CHECK_S = 1.0
"""A deadline on a work clock reads it at most every MIN_CHECK_S and at least every
MAX_CHECK_S seconds (a :class:`StallClock` is finer for being read often)."""


class StallClock:
    """Wall-clock seconds, less the seconds this process could not run because every
    processor it was ready for was busy with other work: a :data:`WorkClock` for a model
    that computes in this process.

    Linux keeps, per thread, the time it spent runnable but waiting for a processor
    (``/proc/self/task/TID/schedstat``, its second field). Between two readings the clock
    takes the longest such wait of any one thread as the time the process stalled: the
    threads of one model call work in step, so while one waits the call waits; sequential
    waits of different threads within one reading are counted once (the clock errs towards
    counting work). Where the file is missing (not Linux) it is the wall clock.
    """

    counts = "wall-clock time less time waiting for a processor"
    """What the clock counts, for messages."""

    def __init__(
        self,
        tasks: str | Path = "/proc/self/task",
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tasks = Path(tasks)
        self._now = now
        self._lock = threading.Lock()
        self._stalled = 0.0
        self._last = now()
        self._waits = self._read()

    @property
    def available(self) -> bool:
        """Whether the waits are known (else this is the wall clock)."""
        return self._waits is not None

    def _read(self) -> dict[str, float] | None:
        try:
            tids = os.listdir(self._tasks)
        except OSError:
            return None
        waits: dict[str, float] = {}
        for tid in tids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                waits[tid] = int((self._tasks / tid / "schedstat").read_text().split()[1]) / 1e9
        return waits

    def __call__(self) -> float:
        with self._lock:
            now = self._now()
            waits = self._read()
            if waits is not None and self._waits is not None:
                before = self._waits
                longest = max((w - before.get(t, 0.0) for t, w in waits.items()), default=0.0)
                self._stalled += min(max(longest, 0.0), max(now - self._last, 0.0))
            if waits is not None:
                self._waits = waits
            self._last = now
            return now - self._stalled


@functools.cache
def stall_clock() -> StallClock:
    """The process's one :class:`StallClock` (every deadline reads the same one)."""
    return StallClock()


class WorkDeadline:
    """``async with WorkDeadline(seconds):`` raises :class:`TimeoutError` once the block has
    worked ``seconds`` seconds, time spent in :func:`queued` not counted (None: no limit).

    ``clock`` measures the work (None: the wall clock). With a clock, a watchdog task reads
    it whenever the budget could be spent, and ends the block once it is.

    While any part of the task is queued the whole deadline pauses (agents run their steps
    one after another, so a queued call means the sample is waiting, not working).
    """

    def __init__(self, seconds: float | None, clock: WorkClock | None = None) -> None:
        self.seconds = seconds if seconds is not None and seconds > 0 else None
        self.clock = clock
        self.queued_s = 0.0
        """Seconds spent queued (not counted against the deadline)."""
        self._timeout: asyncio.Timeout | None = None
        self._remaining: float | None = None
        self._waiting = 0
        self._paused_at = 0.0
        self._token: object = None
        # with a clock: its reading at the start, work not counted (queued), and at a pause
        self._started_work = 0.0
        self._excluded_work = 0.0
        self._paused_work = 0.0
        self._watchdog: asyncio.Task[None] | None = None

    def expired(self) -> bool:
        """Whether the deadline, not something else, ended the block."""
        return self._timeout is not None and self._timeout.expired()

    def worked(self) -> float:
        """Seconds of work counted so far (the clock's; with none, 0)."""
        if self.clock is None:
            return 0.0
        now = self._paused_work if self._waiting else self.clock()
        return max(0.0, now - self._started_work - self._excluded_work)

    async def __aenter__(self) -> WorkDeadline:
        loop = asyncio.get_running_loop()
        when = None
        if self.seconds is not None and self.clock is None:
            when = loop.time() + self.seconds
        self._timeout = asyncio.timeout_at(when)
        await self._timeout.__aenter__()
        self._token = _current.set(self)
        if self.seconds is not None and self.clock is not None:
            self._started_work = self.clock()
            self._watchdog = loop.create_task(self._watch(self.seconds))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()  # done, or asleep: nothing to wait for
        _current.reset(self._token)  # type: ignore[arg-type]
        assert self._timeout is not None
        await self._timeout.__aexit__(exc_type, exc, tb)

    async def _watch(self, budget: float) -> None:
        """Sleep as long as the budget could last, look at the clock, and end the block
        (as its timer would) once the work done reaches the budget."""
        assert self._timeout is not None
        while True:
            left = budget - self.worked()
            if left <= 0:
                self._timeout.reschedule(asyncio.get_running_loop().time())
                return
            await asyncio.sleep(min(max(left, MIN_CHECK_S), MAX_CHECK_S))

    def pause(self) -> None:
        self._waiting += 1
        if self._waiting > 1 or self._timeout is None:
            return
        self._paused_at = time.monotonic()
        if self.clock is not None:
            self._paused_work = self.clock()
            return
        when = self._timeout.when()
        if when is not None:
            self._remaining = max(0.0, when - asyncio.get_running_loop().time())
            self._timeout.reschedule(None)

    def resume(self) -> None:
        self._waiting -= 1
        if self._waiting > 0 or self._timeout is None:
            return
        self.queued_s += time.monotonic() - self._paused_at
        if self.clock is not None:
            self._excluded_work += max(0.0, self.clock() - self._paused_work)
            return
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
