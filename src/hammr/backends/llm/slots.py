"""How many requests a served model runs at once, and which of its slots a conversation uses.

A llama.cpp server runs ``--parallel`` requests at once, each in a *slot* that keeps the
prompt it last evaluated (its prefix cache). An evaluation that keeps more conversations in
flight than there are slots makes them take turns on the slots, each evicting the other's
prefix, so every call evaluates its whole prompt again: on a 2-slot server, 8 interleaved
HAMMR questions did not finish one in ten minutes where 2 at a time finished all.

So an evaluation asks the server first (:func:`probe_slots`): llama.cpp's ``/props`` gives
``total_slots``, SGLang's ``/get_server_info`` ``max_running_requests``; vLLM and the
hosted APIs do not say (they batch continuously and cache prefixes by content, so
interleaving costs them little), and a server that does not answer, answers 0, or times out
gets the stated default. Each question in flight then holds one *lane*
(:func:`conversation_lane`): a replica and, on llama.cpp, a slot id that every model call of
the question sends as ``id_slot``, so its conversations keep their prefix cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

DEFAULT_PER_REPLICA = 8
"""Requests in flight per replica of a server that does not say how many it runs at once."""

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Lane:
    """Where one question's model calls go: a replica's base URL and, where the server takes
    it (llama.cpp), the slot to run them in."""

    url: str
    slot: int | None = None
    index: int = 0
    """The lane's place among a run's lanes (each lane has its own HTTP client)."""


_LANE: ContextVar[Lane | None] = ContextVar("hammr_lane", default=None)


@contextmanager
def conversation_lane(lane: Lane | None) -> Iterator[None]:
    """Send the model calls made inside the block (in this task and the tasks it starts) to
    ``lane``; None: wherever the pool chooses."""
    token = _LANE.set(lane)
    try:
        yield
    finally:
        _LANE.reset(token)


def current_lane() -> Lane | None:
    return _LANE.get()


@dataclass(frozen=True)
class ReplicaSlots:
    """What one replica said about the requests it runs at once."""

    url: str
    slots: int | None
    """None: it did not say (see :attr:`problem`)."""
    source: str = ""
    """Where the figure came from, e.g. "llama.cpp /props"."""
    problem: str = ""
    """Why there is no figure, e.g. "/props timed out"."""
    pinnable: bool = False
    """Whether a request may name its slot (llama.cpp's ``id_slot``)."""


@dataclass(frozen=True)
class ServedSlots:
    """The slots of every replica of a served model."""

    replicas: tuple[ReplicaSlots, ...]

    @property
    def known(self) -> bool:
        return any(r.slots is not None for r in self.replicas)

    @property
    def total(self) -> int:
        """Requests to keep in flight: every replica's slots, the default where it did not
        say."""
        return sum(r.slots if r.slots is not None else DEFAULT_PER_REPLICA for r in self.replicas)

    def lanes(self) -> list[Lane]:
        """One lane per request in flight (:attr:`total`), slot-pinned where the server takes
        it; replicas interleaved, so a smaller concurrency still spreads over them."""
        per_replica = [
            [(r.url, i if r.pinnable else None) for i in range(r.slots)]
            if r.slots is not None
            else [(r.url, None)] * DEFAULT_PER_REPLICA
            for r in self.replicas
        ]
        out: list[tuple[str, int | None]] = []
        for i in range(max((len(p) for p in per_replica), default=0)):
            out.extend(p[i] for p in per_replica if i < len(p))
        return [Lane(url, slot, n) for n, (url, slot) in enumerate(out)]

    def reason(self) -> str:
        """Why :attr:`total` requests are kept in flight, in a few words for a run's header."""
        known = [r for r in self.replicas if r.slots is not None]
        unknown = [r for r in self.replicas if r.slots is None]
        parts: list[str] = []
        if known:
            sources = sorted({r.source for r in known})
            if len(self.replicas) == 1:
                parts.append(f"the server runs {known[0].slots} requests at once ({sources[0]})")
            else:
                counts = " + ".join(str(r.slots) for r in known)
                parts.append(
                    f"{len(known)} of {len(self.replicas)} servers run {counts} requests at "
                    f"once ({', '.join(sources)})"
                )
        for r in unknown:
            parts.append(f"{DEFAULT_PER_REPLICA} for {r.url}, which did not say ({r.problem})")
        return "; ".join(parts)


def _slot_count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value > 0 else None


def _root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


async def _get(client: httpx.AsyncClient, url: str) -> tuple[dict[str, Any] | None, str]:
    """The JSON object at ``url``, or None and why not in a few words."""
    import httpx

    path = "/" + url.split("/", 3)[-1] if url.count("/") >= 3 else url
    try:
        reply = await client.get(url)
    except httpx.TimeoutException:
        return None, f"{path} timed out"
    except httpx.HTTPError as e:
        return None, f"{path}: {type(e).__name__}"
    if reply.status_code != 200:
        return None, f"{path}: HTTP {reply.status_code}"
    try:
        data = reply.json()
    except ValueError:
        return None, f"{path}: not JSON"
    return (data, "") if isinstance(data, dict) else (None, f"{path}: not a JSON object")


async def probe_replica(client: httpx.AsyncClient, base_url: str, server: str) -> ReplicaSlots:
    """Ask one replica how many requests it runs at once (``server``: hammr.toml [llm]
    server; 'auto' tries llama.cpp's then SGLang's way)."""
    root = _root(base_url)
    problems: list[str] = []
    if server in ("llamacpp", "auto"):
        props, problem = await _get(client, root + "/props")
        if props is not None:
            n = _slot_count(props.get("total_slots"))
            if n is not None:
                return ReplicaSlots(base_url, n, "llama.cpp /props", pinnable=True)
            problem = f"/props says total_slots = {props.get('total_slots')!r}"
        problems.append(problem)
    if server in ("sglang", "auto") and not (server == "auto" and "timed out" in problems[0]):
        info, problem = await _get(client, root + "/get_server_info")
        if info is not None:
            n = _slot_count(info.get("max_running_requests"))
            if n is not None:
                return ReplicaSlots(base_url, n, "SGLang /get_server_info")
            problem = (
                f"/get_server_info says max_running_requests = {info.get('max_running_requests')!r}"
            )
        problems.append(problem)
    if not problems:
        problems.append(f"a {server} server does not say")
    return ReplicaSlots(base_url, None, problem="; ".join(problems))


async def probe_slots(
    base_urls: Sequence[str],
    server: str,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> ServedSlots:
    """Ask every replica at once (``headers``: the API key, as the model calls send it);
    never raises: a replica that cannot say gets the default."""
    import httpx

    from hammr.backends.http_replies import tls_context

    https = any(u.startswith("https:") for u in base_urls)
    verify: Any = tls_context() if https else False
    async with httpx.AsyncClient(timeout=timeout_s, headers=headers, verify=verify) as client:
        found = await asyncio.gather(*(probe_replica(client, u, server) for u in base_urls))
    return ServedSlots(tuple(found))


__all__ = [
    "DEFAULT_PER_REPLICA",
    "Lane",
    "ReplicaSlots",
    "ServedSlots",
    "conversation_lane",
    "current_lane",
    "probe_replica",
    "probe_slots",
]
