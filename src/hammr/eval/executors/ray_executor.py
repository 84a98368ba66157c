"""``hammr eval --executor ray``: samples answered by Ray actors, stored by the driver.

Each actor (:class:`SampleWorker`) builds the job once (system, LLM, tool backends, metrics:
models load once per actor, not per sample) and answers several samples at a time on its own
event loop. The driver keeps ``workers x concurrency`` samples in flight, sends each to the
actor with the fewest, and stores every record the moment it comes back
(:func:`hammr.eval.runner.run_samples`): the progress bar, the live accuracy, resuming and
"stored exactly once" are the local executor's.

Faults. Ray restarts an actor whose process died (on another node when its node is gone).
Every sample that was in flight on it becomes a *suspect* and is asked again *alone* on an
actor (nothing else in flight there), so a sample that kills its worker is told apart from
its neighbours: one that kills the worker ``crash_limit`` times while alone is stored as an
error with the reason, and the run goes on.

Data. Workers read the images from the dataset's paths when they can see them (a folder all
nodes share); otherwise the driver ships each sample's image bytes with it through Ray's
object store (``ship_images``: None decides by asking every worker whether it sees the first
sample's images). Traces and their images come back with the records.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hammr.eval.executors import ExecutorError
from hammr.eval.job import EvalJob
from hammr.eval.runner import (
    EntryLike,
    EvalOutcome,
    OnResult,
    run_samples,
    unanswered,
)
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord, Sample

INSTALL_HINT = "pip install 'hammr[ray]'"
CRASH_LIMIT = 2
"""Times a sample may kill its worker while running alone before it is stored as failed."""

ShippedImages = dict[str, tuple[str, bytes]]
"""Input variable -> (file suffix, the image file's bytes)."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}"
        ) from None
    return ray


def secret_env(job: EvalJob) -> dict[str, str]:
    """The API keys the configuration names (``*.api_key_env``), for workers elsewhere."""
    names = [job.config.get("llm.api_key_env"), job.config.get("vlm.api_key_env")]
    return {n: os.environ[n] for n in names if n and n in os.environ}


REACH_TIMEOUT_S = 5.0


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Refuse a ``host:port`` or ``ray://host:port`` address nobody answers on (Ray itself
    retries such an address for minutes before giving up)."""
    if address == "auto":
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ExecutorError(
            f"--ray-address {address!r} is not 'auto', HOST:PORT or ray://HOST:PORT"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ExecutorError(
            f"cannot reach the Ray cluster at {address}: {e.strerror or e} (is `ray start "
            "--head` running there, and is the port open?)"
        ) from None


def connect(ray: Any, address: str | None, workers: int) -> bool:
    """Join the cluster at ``address`` ('auto', 'ray://host:port', 'host:port'), or start a
    local one sized for ``workers`` when None. True when this call started Ray."""
    if ray.is_initialized():
        return False
    quiet = {
        "include_dashboard": False,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
    }
    if address is not None:
        check_reachable(address)
    try:
        if address is None:
            ray.init(
                address="local",
                num_cpus=max(os.cpu_count() or 1, workers),
                _node_ip_address="127.0.0.1",  # a cluster of our own stays on this machine
                **quiet,
            )
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ExecutorError(f"cannot start or reach {where}: {reason[:300]}") from None
    return True


def ship(sample: Sample) -> ShippedImages:
    return {name: (Path(p).suffix, Path(p).read_bytes()) for name, p in sample.images.items()}


class SampleWorker:
    """A Ray actor answering samples of one run (see the module docstring)."""

    def __init__(self, job: EvalJob, run_name: str) -> None:
        self.built = job.build()
        self.answer_sample = self.built.answerer(run_name)
        self.spool = Path(tempfile.mkdtemp(prefix="hammr-shipped-"))

    async def prepare(self) -> int:
        await self.built.prepare()
        return os.getpid()

    def sees(self, paths: list[str]) -> bool:
        return all(Path(p).is_file() for p in paths)

    async def answer(
        self, entry: EntryLike, sample: Sample, images: ShippedImages | None
    ) -> RunRecord:
        if images is None:
            return await self.answer_sample(entry, sample)
        with self._unpacked(images) as paths:
            return await self.answer_sample(entry, replace(sample, images=paths))

    @contextlib.contextmanager
    def _unpacked(self, images: ShippedImages) -> Iterator[dict[str, Path]]:
        folder = Path(tempfile.mkdtemp(dir=self.spool))
        try:
            paths: dict[str, Path] = {}
            for name, (suffix, data) in images.items():
                path = folder / (hashlib.sha1(data).hexdigest() + suffix)
                path.write_bytes(data)
                paths[name] = path
            yield paths
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass
class ActorSlots:
    """How many samples each actor holds; a suspect sample runs alone on its actor."""

    per_actor: int
    in_flight: list[int]
    alone: list[bool]

    @classmethod
    def for_actors(cls, n: int, per_actor: int) -> ActorSlots:
        return cls(per_actor, [0] * n, [False] * n)

    def __post_init__(self) -> None:
        self.changed = asyncio.Condition()

    def _pick(self, alone: bool) -> int | None:
        free = [
            i
            for i, n in enumerate(self.in_flight)
            if not self.alone[i] and (n == 0 if alone else n < self.per_actor)
        ]
        return min(free, key=lambda i: self.in_flight[i]) if free else None

    async def acquire(self, *, alone: bool) -> int:
        async with self.changed:
            await self.changed.wait_for(lambda: self._pick(alone) is not None)
            i = self._pick(alone)
            assert i is not None
            self.in_flight[i] += 1
            self.alone[i] = alone
            return i

    async def release(self, i: int) -> None:
        async with self.changed:
            self.in_flight[i] -= 1
            self.alone[i] = False
            self.changed.notify_all()


def crash_record(entry: EntryLike, sample: Sample, run_name: str, why: str) -> RunRecord:
    record = unanswered(entry, sample, run_name)
    record.status, record.error = "error", why
    return record


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def died_reason(error: BaseException) -> str:
    """One line: for a worker whose set-up raised, the exception it raised (the last line of
    Ray's traceback); else the first line of Ray's message."""
    lines = [ln.strip() for ln in _ANSI.sub("", str(error)).splitlines() if ln.strip()]
    if not lines:
        return type(error).__name__
    line = lines[-1] if getattr(error, "_actor_init_failed", False) else lines[0]
    return line[:300]


async def run_eval_ray(
    job: EvalJob,
    samples: Sequence[tuple[EntryLike, Sample]],
    *,
    store: RunStore,
    run_name: str,
    workers: int = 2,
    address: str | None = None,
    ship_images: bool | None = None,
    on_result: OnResult | None = None,
    crash_limit: int = CRASH_LIMIT,
) -> EvalOutcome:
    """:func:`hammr.eval.runner.run_eval` on Ray: ``workers`` actors, each answering
    ``job.in_flight`` samples at a time. Raises :class:`ExecutorError` (one line) when Ray is
    missing or unreachable, or a worker cannot build the job."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    ray = import_ray()
    actors: list[Any] = []
    shipping: list[bool] = []
    slots = ActorSlots.for_actors(workers, job.in_flight)
    started_ray = False

    async def setup() -> None:
        nonlocal started_ray
        started_ray = connect(ray, address, workers)
        worker_class = ray.remote(SampleWorker).options(
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=job.in_flight + 4,
            num_cpus=1,
            runtime_env={"env_vars": secret_env(job)},
        )
        actors.extend(worker_class.remote(job, run_name) for _ in range(workers))
        try:
            await asyncio.gather(*(a.prepare.remote() for a in actors))
        except ray.exceptions.RayActorError as e:
            raise ExecutorError(f"a Ray worker could not start: {died_reason(e)}") from None
        probe = [str(p) for p in samples[0][1].images.values()] if samples else []
        seen = await asyncio.gather(*(a.sees.remote(probe) for a in actors))
        shipping.append(ship_images if ship_images is not None else not all(seen))

    async def answer(entry: EntryLike, sample: Sample) -> RunRecord:
        images = await asyncio.to_thread(ship, sample) if shipping[0] else None
        suspect, crashes = False, 0
        while True:
            i = await slots.acquire(alone=suspect)
            try:
                record: RunRecord = await actors[i].answer.remote(entry, sample, images)
                return record
            except ray.exceptions.RayActorError as e:
                crashes += suspect
                suspect = True
                if crashes >= crash_limit:
                    why = (
                        f"the worker process died each of the {crashes} times it answered "
                        f"this sample alone (last: {died_reason(e)})"
                    )
                    return crash_record(entry, sample, run_name, why)
            finally:
                await slots.release(i)

    try:
        return await run_samples(
            answer,
            samples,
            store=store,
            run_name=run_name,
            concurrency=workers * job.in_flight,
            on_result=on_result,
            setup=setup,
        )
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        if started_ray:
            ray.shutdown()


__all__ = [
    "CRASH_LIMIT",
    "ActorSlots",
    "SampleWorker",
    "import_ray",
    "run_eval_ray",
]
