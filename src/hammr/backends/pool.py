"""Replicas of one model server (several vLLM processes, say): which one gets the next request.

A :class:`ReplicaPool` only chooses base URLs; the HTTP clients (the LLM client and, through
it, the served VLM backend) send the requests and tell the pool how they went.

- Routing: each request goes to the replica with the fewest outstanding requests among those
  up. Ties go round robin: to the first tied replica after the one chosen last, so requests
  sent one at a time alternate between idle replicas.
- A replica whose request failed at the transport level (connection refused, no answer in
  time, connection dropped) is set aside (:meth:`ReplicaPool.mark_down`) for a cool-down:
  ``cooldown_s`` (1 s), doubled after every failed probe, at most ``max_cooldown_s`` (30 s).
  Failures of requests already in flight when it was set aside do not lengthen it.
- Probing: once its cool-down has passed, the next request goes to it (one such probe at a
  time; no extra traffic). Any HTTP answer, an error status included, brings the replica
  back (:meth:`ReplicaPool.mark_up`); another transport failure sets it aside again.
- When every replica is set aside, requests still go out, to the least loaded one, so a
  client's own retries keep trying; with a single URL the pool changes nothing.

The state is guarded by a threading lock that is never held across an ``await``; counts stay
right when a request is cancelled, since :meth:`ReplicaPool.acquire` releases in ``finally``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

EXAMPLE_URL = "http://127.0.0.1:8000/v1"


def parse_base_urls(value: object) -> tuple[str, ...]:
    """The URLs of a ``base_url`` setting: one URL, a list of URLs, or URLs separated by commas
    (how an environment variable lists them). Raises ValueError, in one line naming the bad
    entry, for anything but distinct http(s) URLs with a host."""
    if isinstance(value, str):
        entries = [part.strip() for part in value.split(",")]
        entries = [e for e in entries if e]
    elif isinstance(value, list | tuple):
        entries = []
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"entry {item!r} is not a string (a URL such as {EXAMPLE_URL})")
            entries.append(item.strip())
    else:
        raise ValueError(f"{value!r} should be a URL or a list of URLs (e.g. {EXAMPLE_URL!r})")
    if not entries:
        raise ValueError(f"lists no URL (e.g. {EXAMPLE_URL!r})")
    seen: set[str] = set()
    for url in entries:
        check_url(url)
        key = url.rstrip("/")
        if key in seen:
            raise ValueError(f"lists {url!r} twice")
        seen.add(key)
    return tuple(entries)


def check_url(url: str) -> None:
    """ValueError unless ``url`` is an http or https URL with a host (and a valid port)."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises ValueError on a port that is not a number in range
    except ValueError:
        ok = False
    if not ok or any(c.isspace() for c in url):
        raise ValueError(f"{url!r} is not an http(s) URL with a host, such as {EXAMPLE_URL!r}")


@dataclass(frozen=True)
class ReplicaStatus:
    url: str
    up: bool
    outstanding: int
    peak: int
    """The most requests it ever had outstanding at once."""
    requests: int
    """Requests it was given (finished, failed or cancelled) since the pool was made."""
    reason: str
    """Why it was set aside; "" while it is up."""
    retry_in_s: float
    """Seconds until the next request probes it (0 when up or due)."""


@dataclass
class _Replica:
    url: str
    outstanding: int = 0
    peak: int = 0
    requests: int = 0
    down: bool = False
    failures: int = 0
    retry_at: float = 0.0
    reason: str = ""
    probing: bool = False


class ReplicaPool:
    """Base URLs of servers that serve the same model; see the module doc for the policy."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        cooldown_s: float = 1.0,
        max_cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(urls, str):
            urls = (urls,)
        clean = [u.rstrip("/") for u in urls]
        if not clean:
            raise ValueError("a replica pool needs at least one URL")
        if len(set(clean)) != len(clean):
            raise ValueError(f"a URL is listed twice in {list(urls)!r}")
        if cooldown_s <= 0 or max_cooldown_s < cooldown_s:
            raise ValueError("cooldown_s must be above 0 and at most max_cooldown_s")
        self._replicas = [_Replica(u) for u in clean]
        self._index = {r.url: r for r in self._replicas}
        self.cooldown_s = float(cooldown_s)
        self.max_cooldown_s = float(max_cooldown_s)
        self._clock = clock
        self._cursor = 0
        self._lock = threading.Lock()

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(r.url for r in self._replicas)

    def __len__(self) -> int:
        return len(self._replicas)

    def __repr__(self) -> str:
        return f"ReplicaPool({list(self.urls)!r})"

    def _usable(self, r: _Replica, now: float) -> bool:
        """Up, or set aside with its cool-down over and no probe in flight."""
        return not r.down or (not r.probing and now >= r.retry_at)

    def _pick(self, avoid: Collection[str], prefer: str | None = None) -> tuple[_Replica, bool]:
        now = self._clock()
        n = len(self._replicas)
        wanted = self._index.get(prefer.rstrip("/")) if prefer else None
        if wanted is not None and wanted.url not in avoid and not wanted.down:
            return wanted, False
        order = [self._replicas[(self._cursor + i) % n] for i in range(n)]
        allowed = [r for r in order if r.url not in avoid] or order
        probe = next((r for r in allowed if r.down and self._usable(r, now)), None)
        if probe is not None:
            chosen, is_probe = probe, True
        else:
            live = [r for r in allowed if not r.down] or allowed
            chosen, is_probe = min(live, key=lambda r: r.outstanding), False
        self._cursor = (self._replicas.index(chosen) + 1) % n
        return chosen, is_probe

    @asynccontextmanager
    async def acquire(
        self, avoid: Collection[str] = (), prefer: str | None = None
    ) -> AsyncIterator[str]:
        """Choose a replica for one request and count it outstanding until the block ends
        (however it ends). ``avoid``: URLs not to choose unless there is nothing else;
        ``prefer``: the URL to choose while it is up and not avoided (a question's lane:
        :mod:`hammr.backends.llm.slots`)."""
        with self._lock:
            replica, is_probe = self._pick(avoid, prefer)
            replica.outstanding += 1
            replica.requests += 1
            replica.peak = max(replica.peak, replica.outstanding)
            if is_probe:
                replica.probing = True
        try:
            yield replica.url
        finally:
            with self._lock:
                replica.outstanding -= 1
                if is_probe:
                    replica.probing = False

    def available(self, avoid: Collection[str] = ()) -> bool:
        """Whether a replica outside ``avoid`` would be chosen as up or as a due probe."""
        with self._lock:
            now = self._clock()
            return any(r.url not in avoid and self._usable(r, now) for r in self._replicas)

    def all_down(self) -> bool:
        with self._lock:
            return all(r.down for r in self._replicas)

    def mark_down(self, url: str, reason: str) -> None:
        """Set ``url`` aside after a transport failure (``reason``: a few words, e.g.
        "connection refused")."""
        with self._lock:
            r = self._index[url.rstrip("/")]
            r.reason = reason
            now = self._clock()
            if r.down and now < r.retry_at:
                return  # a request sent before it was set aside; the cool-down stands
            r.failures = r.failures + 1 if r.down else 1
            r.down = True
            backoff = self.cooldown_s * 2 ** min(r.failures - 1, 20)
            r.retry_at = now + min(self.max_cooldown_s, backoff)

    def mark_up(self, url: str) -> None:
        """``url`` answered: route to it again."""
        with self._lock:
            r = self._index[url.rstrip("/")]
            r.down, r.failures, r.reason, r.retry_at = False, 0, "", 0.0

    def status(self) -> list[ReplicaStatus]:
        with self._lock:
            now = self._clock()
            return [
                ReplicaStatus(
                    url=r.url,
                    up=not r.down,
                    outstanding=r.outstanding,
                    peak=r.peak,
                    requests=r.requests,
                    reason=r.reason,
                    retry_in_s=max(0.0, r.retry_at - now) if r.down else 0.0,
                )
                for r in self._replicas
            ]

    def describe_down(self) -> str:
        """'URL (reason), URL (reason), ...' for the replicas set aside."""
        return ", ".join(f"{s.url} ({s.reason})" for s in self.status() if not s.up)
