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
error with the reason, and the run goes on. Nothing here depends on how long anything takes
(a loaded machine restarts workers slowly): a crash is counted only when the incarnation
that was seen alive holding the sample alone (:meth:`SampleWorker.ready` names each one) is
gone afterwards, however long its restart takes; a call that fails because its actor was
still restarting, or was unreachable for a moment, counts nothing.

Network. A local cluster (no ``--ray-address``) runs in Ray's local-only mode: every server
it starts listens on 127.0.0.1 only (:func:`loopback_only`).

Data. Workers read the images from the dataset's paths when they can see them (a folder all
nodes share); otherwise the driver ships each sample's image bytes with it through Ray's
object store (``ship_images``: None decides by asking every worker whether it sees the first
sample's images), into one folder per sample (``hammr-shipped-RUN-PID-*`` in the temporary
folder) removed once the sample is answered; what a killed worker left is removed by the
worker's next incarnation, and on this machine by the driver when the run ends, however it
ends. Traces and their images come back with the records.
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
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hammr.eval.driver_lock import pid_exists
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
from hammr.input_file import read_input_bytes

INSTALL_HINT = "pip install 'hammr[ray]'"
CRASH_LIMIT = 2
"""Times a sample may kill its worker while running alone before it is stored as failed."""

ShippedImages = dict[str, tuple[str, bytes]]
"""Input variable -> (file suffix, the image file's bytes)."""

SPOOL_PREFIX = "hammr-shipped-"
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for its local-only mode (0: the node's address is the loopback one)."""


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


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """While a local cluster starts: Ray's local-only mode, in which the node's address is
    127.0.0.1, and so is every address Ray's servers bind (GCS, raylet, object manager, the
    workers' and the driver's gRPC servers, the runtime-env agent).

    ``ray.init(_node_ip_address="127.0.0.1")`` alone does not do it: Ray swaps a loopback
    address for the machine's routable one (so that other nodes could join). The mode is
    Ray's default on macOS and Windows; Ray reads its switch when it is imported, so the
    constant is set for this process as well as the variable for the processes it starts.
    Both are put back afterwards: a later ``--ray-address`` in this process is unaffected."""
    constants = sys.modules.get("ray._private.ray_constants")
    had_constant = constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER")
    saved_constant = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    saved_env = os.environ.get(LOCAL_ONLY_ENV)
    os.environ[LOCAL_ONLY_ENV] = "0"
    if had_constant:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[union-attr]
    try:
        yield
    finally:
        if had_constant:
            constants.ENABLE_RAY_CLUSTER = saved_constant  # type: ignore[union-attr]
        if saved_env is None:
            os.environ.pop(LOCAL_ONLY_ENV, None)
        else:
            os.environ[LOCAL_ONLY_ENV] = saved_env


PATIENT_LOCAL_CLUSTER = {
    "worker_register_timeout_seconds": 3600,
    "health_check_failure_threshold": 1200,
}
"""Ray's windows for a local cluster, wide enough that no load reaches them: a worker process
that starts slowly is not killed and started again (60 s by default), and the one node is not
declared dead when its agent misses health checks (5 x 3 s) on a loaded machine, which would
end every worker. Nothing is lost by waiting: on one machine a node that is really gone takes
the driver with it."""


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def connect(ray: Any, address: str | None, workers: int) -> bool:
    """Join the cluster at ``address`` ('auto', 'ray://host:port', 'host:port'), or start a
    local one sized for ``workers`` when None, listening on 127.0.0.1 only. True when this
    call started Ray."""
    if ray.is_initialized():
        return False
    quiet = {
        "include_dashboard": False,
        "dashboard_host": "127.0.0.1",
        "logging_level": logging.ERROR,
        "log_to_driver": False,
    }
    if address is not None:
        check_reachable(address)
    try:
        if address is None:
            with loopback_only():
                ray.init(
                    address="local",
                    num_cpus=max(os.cpu_count() or 1, workers),
                    _node_ip_address="127.0.0.1",  # a cluster of our own stays on this machine
                    _system_config=PATIENT_LOCAL_CLUSTER,
                    **quiet,
                )
        else:
            ray.init(address=address, **quiet)
    except Exception as e:  # Ray raises bare Exceptions too (a node that starts too slowly)
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ExecutorError(f"cannot start or reach {where}: {reason[:300]}") from None
    if address is None and not is_loopback(node := str(ray.util.get_node_ip_address())):
        ray.shutdown()
        raise ExecutorError(
            f"this Ray ({ray.__version__}) put the local cluster on {node}, not 127.0.0.1; "
            "start one yourself (`ray start --head`) and pass --ray-address"
        )
    return True


def ship(sample: Sample) -> ShippedImages:
    return {name: (Path(p).suffix, read_input_bytes(p)) for name, p in sample.images.items()}


def remove_spools(run_token: str, *, only_dead: bool) -> None:
    """Remove the run's folders of shipped images in this machine's temporary folder: all of
    them, or (``only_dead``) those of worker processes that are gone."""
    prefix = f"{SPOOL_PREFIX}{run_token}-"
    for folder in Path(tempfile.gettempdir()).glob(prefix + "*"):
        pid = folder.name.removeprefix(prefix).split("-")[0]
        if only_dead and not (pid.isdigit() and not pid_exists(int(pid))):
            continue
        shutil.rmtree(folder, ignore_errors=True)


class SampleWorker:
    """A Ray actor answering samples of one run (see the module docstring). ``run_token``
    names the run's folders of shipped images."""

    def __init__(self, job: EvalJob, run_name: str, run_token: str) -> None:
        self.built = job.build()
        self.answer_sample = self.built.answerer(run_name)
        self.run_token = run_token
        self.incarnation = uuid.uuid4().hex
        self.prepared: asyncio.Lock | None = None
        self.is_prepared = False
        remove_spools(run_token, only_dead=True)  # what a killed predecessor left here

    async def ready(self) -> str:
        """Prepare once (model load, router embeddings), then name this incarnation: a
        restarted worker answers with a new name."""
        if self.prepared is None:
            self.prepared = asyncio.Lock()
        async with self.prepared:
            if not self.is_prepared:
                await self.built.prepare()
                self.is_prepared = True
        return self.incarnation

    def sees(self, paths: list[str]) -> bool:
        return all(Path(p).is_file() for p in paths)

    async def answer(
        self, entry: EntryLike, sample: Sample, images: ShippedImages | None
    ) -> RunRecord:
        await self.ready()  # a restarted worker prepares before any sample's clock starts
        if images is None:
            return await self.answer_sample(entry, sample)
        with self._unpacked(images) as paths:
            return await self.answer_sample(entry, replace(sample, images=paths))

    @contextlib.contextmanager
    def _unpacked(self, images: ShippedImages) -> Iterator[dict[str, Path]]:
        folder = Path(tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{self.run_token}-{os.getpid()}-"))
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
    retry_failed: bool = False,
) -> EvalOutcome:
    """:func:`hammr.eval.runner.run_eval` on Ray: ``workers`` actors, each answering
    ``job.in_flight`` samples at a time. Raises :class:`ExecutorError` (one line) when Ray is
    missing or unreachable, or a worker cannot build the job."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    ray = import_ray()
    actors: list[Any] = []
    worker_class: list[Any] = []
    shipping: list[bool] = []
    slots = ActorSlots.for_actors(workers, job.in_flight)
    unsure: set[int] = set()
    """Actors a call failed on since they last answered :meth:`SampleWorker.ready`."""
    run_token = uuid.uuid4().hex[:12]
    started_ray = False

    def new_actor() -> Any:
        return worker_class[0].remote(job, run_name, run_token)

    async def setup() -> None:
        nonlocal started_ray
        started_ray = connect(ray, address, workers)
        worker_class.append(
            ray.remote(SampleWorker).options(
                max_restarts=-1,
                max_task_retries=0,
                max_concurrency=job.in_flight + 4,
                num_cpus=1,
                runtime_env={"env_vars": secret_env(job)},
            )
        )
        actors.extend(new_actor() for _ in range(workers))
        await asyncio.gather(*(live(i, "start") for i in range(workers)))
        probe = [str(p) for p in samples[0][1].images.values()] if samples else []
        seen = await asyncio.gather(*(a.sees.remote(probe) for a in actors))
        shipping.append(ship_images if ship_images is not None else not all(seen))

    async def live(i: int, doing: str = "restart") -> str:
        """The name of actor ``i``'s incarnation once it answers. A (re)start is waited out
        however long it takes (the pause between asks paces them, it decides nothing); an
        actor Ray has given up on is replaced; one whose set-up raised ends the run."""
        pause = 0.05
        while True:
            try:
                name: str = await actors[i].ready.remote()
            except ray.exceptions.ActorDiedError as e:
                if e.actor_init_failed:
                    raise ExecutorError(
                        f"a Ray worker could not {doing}: {died_reason(e)}"
                    ) from None
                with contextlib.suppress(Exception):
                    ray.kill(actors[i], no_restart=True)
                actors[i] = new_actor()
            except ray.exceptions.RayActorError:  # restarting, or out of reach for now
                await asyncio.sleep(pause)
                pause = min(2 * pause, 1.0)
            else:
                unsure.discard(i)
                return name

    async def answer(entry: EntryLike, sample: Sample) -> RunRecord:
        images = await asyncio.to_thread(ship, sample) if shipping[0] else None
        suspect, crashes = False, 0
        while True:
            i = await slots.acquire(alone=suspect)
            try:
                held_by = await live(i) if suspect or i in unsure else None
                try:
                    record: RunRecord = await actors[i].answer.remote(entry, sample, images)
                    return record
                except ray.exceptions.RayActorError as e:
                    unsure.add(i)
                    last = died_reason(e)
                # Proof, not timing: the incarnation seen alive holding this sample alone
                # is gone (a call that failed because its actor was restarting, or out of
                # reach for a moment, leaves the same incarnation answering).
                if suspect and await live(i) != held_by:
                    crashes += 1
                suspect = True
                if crashes >= crash_limit:
                    why = (
                        f"the worker process died each of the {crashes} times it answered "
                        f"this sample alone (last: {last})"
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
            retry_failed=retry_failed,
        )
    except* ExecutorError as failed:  # a worker that cannot restart, from inside a sample
        raise failed.exceptions[0] from None
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        if started_ray:
            ray.shutdown()
        remove_spools(run_token, only_dead=False)


__all__ = [
    "CRASH_LIMIT",
    "ActorSlots",
    "SampleWorker",
    "import_ray",
    "run_eval_ray",
]
