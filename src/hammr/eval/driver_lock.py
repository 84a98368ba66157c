"""Who is driving a run: one ``hammr eval`` process at a time per (store, run name).

Why one, and why a second is refused rather than given a share of the work: a run is one
experiment, recorded with one configuration and one set of settings (``--timeout``,
``--limit``, ``--judge``, the model...). A second driver may differ in any of them, and
sharing would mix two experiments under one name without a word; it would also have two
processes deciding what ``--retry-failed`` replaces, and two progress bars each showing
half a run. Spreading a run's work is what ``--executor ray --workers N`` is for; it keeps
one driver. So a second ``hammr eval`` on a live run stops at once with one line naming the
live one (its pid, host and start), and asks nothing.

A driver that died without letting go (kill -9, a lost node) never blocks the run for good:

* on the same host it is gone as soon as its process is: its pid no longer exists, or the
  pid now belongs to another process (the process start time recorded with it differs).
  No clock is involved, so a loaded machine cannot make a live driver look dead;
* on another host (a store on a shared file system) only its heartbeat can tell: the live
  driver writes one every :data:`BEAT_EVERY_S` seconds, and one silent for
  :data:`LEASE_S` seconds is taken over (hosts' clocks are assumed to agree within a
  fraction of that).

"The same host" means the same host name *and* the same PID namespace (Linux: the
``/proc/self/ns/pid`` link; none elsewhere): a driver in a container that shares the file
system and the host name but has its own PIDs is invisible to ``kill(pid, 0)`` here, so it is
judged like a driver on another host, by its heartbeat. A row recorded by an older hammr
(no namespace) is judged by its host name alone, as it was then.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LEASE_S = 120.0
"""A driver on another host whose heartbeat is older than this is taken for dead."""
BEAT_EVERY_S = 10.0
"""How often a live driver writes its heartbeat."""


@dataclass(frozen=True)
class Driver:
    """One process driving a run, as the store records it."""

    token: str
    """Unique to one hold of the run (one call of :meth:`RunStore.driving`)."""
    host: str
    pid: int
    pid_started: str
    """The process's start (boot id and start tick) on Linux, else ``''``: tells a live pid
    from a reused one."""
    since: str
    """When it took the run (ISO 8601, UTC)."""
    heartbeat: float
    """Its last heartbeat (seconds since the epoch, its host's clock)."""
    pid_ns: str = ""
    """Its PID namespace (:func:`pid_namespace`; ``''``: not Linux, or recorded by an older
    hammr): part of what :func:`same_host` compares, since its pid means nothing in
    another namespace."""

    def describe(self) -> str:
        where = self.host
        if self.pid_ns and self.pid_ns != pid_namespace():
            where += f" (another PID namespace, {self.pid_ns})"
        return f"pid {self.pid} on {where}, since {self.since.replace('T', ' ')}"


def pid_namespace() -> str:
    """This process's PID namespace, as Linux names it (``'pid:[4026531836]'``); ``''``
    where there is none to read (not Linux, no /proc)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def same_host(holder: Driver) -> bool:
    """Whether ``holder``'s pid names a process this one can see: the same host name and
    the same PID namespace. A row without a namespace (an older hammr's, or not Linux) is
    judged by its host name alone."""
    if holder.host != socket.gethostname():
        return False
    return not holder.pid_ns or holder.pid_ns == pid_namespace()


def process_start(pid: int) -> str:
    """The start of process ``pid`` as boot id and start tick (``''`` where /proc cannot say:
    not Linux, or no such process)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    # After "pid (comm)": field 3 (state) is fields[0]; field 22 (starttime) is fields[19].
    return f"{boot}:{fields[19]}" if len(fields) > 19 else ""


def pid_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return False
    return True


def this_driver() -> Driver:
    pid = os.getpid()
    return Driver(
        token=uuid.uuid4().hex,
        host=socket.gethostname(),
        pid=pid,
        pid_started=process_start(pid),
        since=datetime.now(UTC).isoformat(timespec="seconds"),
        heartbeat=time.time(),
        pid_ns=pid_namespace(),
    )


def is_alive(holder: Driver, *, now: float | None = None, lease_s: float = LEASE_S) -> bool:
    """Whether ``holder`` still drives its run (see the module docstring)."""
    if same_host(holder):
        if not pid_exists(holder.pid):
            return False
        started = process_start(holder.pid)
        return not (holder.pid_started and started and started != holder.pid_started)
    return (time.time() if now is None else now) - holder.heartbeat < lease_s


def busy_message(run: str, holder: Driver, lease_s: float = LEASE_S) -> str:
    """The one line a second driver stops with."""
    if same_host(holder):
        freed = "it is taken over as soon as that process ends"
    else:
        freed = f"it is taken over if that driver's heartbeat stops for {lease_s:g} s"
    return (
        f"run {run!r} is being evaluated by another hammr eval ({holder.describe()}); "
        f"wait for it to finish or stop it, then run this again ({freed}), or give this "
        "one its own --name"
    )


__all__ = [
    "BEAT_EVERY_S",
    "LEASE_S",
    "Driver",
    "busy_message",
    "is_alive",
    "pid_exists",
    "pid_namespace",
    "process_start",
    "same_host",
    "this_driver",
]
