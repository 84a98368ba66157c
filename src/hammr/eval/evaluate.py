"""The body of ``hammr eval`` as a function: one request in, the stored run out.

``hammr eval`` (:mod:`hammr.eval.eval_cli`) and ``hammr experiment run``
(:mod:`hammr.experiments.runner`) both call :func:`evaluate`, so an experiment's run is
exactly what the same ``hammr eval`` would have made: the same samples, the same store
records, the same resume rules. Trouble is an :class:`EvalError` carrying the one-line
message and the exit status the command line gives it; what ``hammr eval`` says on stderr
along the way goes through the ``note`` callback, and its closing lines are
:func:`result_lines` and :func:`result_warnings`.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hammr.config import Config
    from hammr.eval.run_health import RunVerdict
    from hammr.eval.runner import EvalOutcome
    from hammr.eval.store import RunInfo, RunStore, RunSummary
    from hammr.eval.suites import Suite

Echo = Callable[[str], None]

_SECRET_WORDS = ("key", "token", "secret", "password")


class EvalError(Exception):
    """``hammr eval`` cannot go on: ``str(e)`` is the one-line reason, ``code`` the exit
    status (2: bad input or configuration; 130: interrupted, run it again to resume)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class EvalRequest:
    """What ``hammr eval`` is asked (its options, one field each), plus what an experiment
    adds: a configuration already loaded, the suite entries to keep, the settings to record
    with the run, and the progress bar's label."""

    suite: str
    data_dir: Path
    system: str | None = None
    memory_path: Path | None = None
    limit: int | None = None
    concurrency: int | None = None
    run_name: str | None = None
    timeout_s: float | None = None
    seed: int = 0
    half: str | None = None
    split_seed: int = 0
    store_path: Path | None = None
    config_path: Path | None = None
    retry_failed: bool = False
    judge: str = "auto"
    bem_checkpoint: Path | None = None
    max_steps: int | None = None
    no_cache: bool = False
    executor: str = "local"
    ray_address: str | None = None
    workers: int = 2
    ship_images: bool | None = None
    progress: bool | None = None
    config: Config | None = None
    """Used instead of reading ``config_path`` (copied; never changed)."""
    entries: tuple[str, ...] = ()
    """Only these entries of the suite (empty: all)."""
    extra_settings: Mapping[str, Any] = field(default_factory=dict)
    """Recorded with the run's settings when the run is made (an experiment's identity)."""
    progress_label: str | None = None
    """The progress bar's label (default: the run's name)."""
    share_from: tuple[str, ...] = ()
    """Stored runs made exactly as this one (an experiment vouches: the same system,
    settings, data and model): their finished answers to this run's samples are copied
    instead of asked again, when they were judged by the same judge."""


@dataclass(frozen=True)
class EvalResult:
    name: str
    outcome: EvalOutcome
    summary: RunSummary
    store_path: Path
    timeout_s: float | None
    work: str
    verdict: RunVerdict | None = None
    """Why the run's numbers are not results (:mod:`hammr.eval.run_health`), or None."""


def recorded_config(cfg: Any) -> dict[str, Any]:
    """Every setting, to keep with the run; values of keys that look like secrets are
    replaced (hammr reads secrets from environment variables, named by *_env keys)."""
    out: dict[str, Any] = {}
    for key, value, _ in cfg.items():
        last = key.rsplit(".", 1)[-1].lower()
        secret = any(w in last for w in _SECRET_WORDS) and not last.endswith("_env")
        out[key] = "<redacted>" if secret and value else value
    return out


def suite_label(name_or_path: str) -> str:
    p = Path(name_or_path)
    return p.stem if p.suffix else name_or_path


def _quiet(_: str) -> None:
    return None


def _fetch_hint(suite: Suite | None, data_dir: Path) -> str:
    """ "; to fetch it: hammr data get ..." for the suite's entries without their file."""
    from hammr.datasets.hints import get_command

    if suite is None:
        return ""
    gaps = [(suite.name, e.name) for e in suite.entries if not e.file_path(data_dir).exists()]
    command = get_command(gaps, data_dir) if gaps else None
    return f"; to fetch it: {command}" if command else ""


def evaluate(request: EvalRequest, *, note: Echo = _quiet) -> EvalResult:
    """Evaluate ``request.system`` on the suite into the run store (see ``hammr eval
    --help``); raises :class:`EvalError` for bad input, a bad configuration or an
    interruption (the samples answered so far stay stored)."""
    from hammr.agents import SpecError
    from hammr.backends.llm.base import LLMError, run_sync
    from hammr.config import ConfigError, load_config
    from hammr.eval.duration import expected
    from hammr.eval.executors import ExecutorError
    from hammr.eval.job import EvalJob, JudgeChoice, resolve_judge, sample_timeout, work_counted
    from hammr.eval.run_health import stored_verdict
    from hammr.eval.runner import EvalProgress, run_samples, sample_key
    from hammr.eval.runner import planned as plan_run
    from hammr.eval.store import RunStore, StoreError, default_store_path
    from hammr.eval.suites import load_suite
    from hammr.factory import resolve_concurrency

    r = request
    if r.executor == "local" and (r.ray_address or r.ship_images is not None):
        raise EvalError("--ray-address and --ship-images go with --executor ray")
    suite: Suite | None = None
    try:
        cfg = copy.deepcopy(r.config) if r.config is not None else load_config(r.config_path)
        if r.memory_path is not None:  # recorded with the run's config, like any setting
            cfg.data["memory"]["path"] = str(r.memory_path.resolve())
            cfg.sources["memory.path"] = "--memory"
        system_name = r.system or str(cfg.get("agent.system"))
        suite = load_suite(r.suite)
        if r.entries:
            suite = suite.select(r.entries)
        samples = suite.samples(
            r.data_dir, limit=r.limit, seed=r.seed, half=r.half, split_seed=r.split_seed
        )
    except (ConfigError, FileNotFoundError, ValueError) as e:
        raise EvalError(str(e) + _fetch_hint(suite, r.data_dir)) from None
    if not samples:
        raise EvalError(f"suite {r.suite!r} has no samples in {r.data_dir}")
    label = suite_label(r.suite)
    name = r.run_name or f"{label}-{system_name}-{date.today().isoformat()}"
    choice = JudgeChoice.of(r.judge, r.bem_checkpoint, cfg)
    problem = choice.problem()
    if problem is not None:
        raise EvalError(problem)
    checkpoint = choice.checkpoint
    budget = sample_timeout(cfg, r.timeout_s)
    work = work_counted(cfg)
    concurrency = resolve_concurrency(cfg, r.concurrency)
    try:
        job = EvalJob(
            config=cfg,
            system=system_name,
            max_steps=r.max_steps,
            cache=False if r.no_cache else None,
            judge=resolve_judge(choice.judge, cfg, checkpoint),
            bem_checkpoint=checkpoint,
            timeout_s=budget,
            work=work,
            concurrency=concurrency.n,
            metrics_used=tuple(sorted({e.metric for e, _ in samples if isinstance(e.metric, str)})),
        )
        # Only the local executor answers here; Ray's workers each build their own (a bad
        # configuration is then one line from the first worker that cannot start). Models
        # are loaded later, by the first sample's setup.
        built = job.build() if r.executor == "local" else None
    except (ConfigError, LLMError, SpecError) as e:
        raise EvalError(str(e)) from None

    async def close_built() -> None:
        if built is not None:
            await built.aclose()

    def give_up(message: str, code: int = 2) -> EvalError:
        with contextlib.suppress(Exception):
            run_sync(close_built())
        return EvalError(message, code)

    config = recorded_config(cfg)
    in_flight = job.in_flight
    settings: dict[str, Any] = {
        "suite": r.suite,
        "data_dir": str(r.data_dir.resolve()),
        "limit": r.limit,
        "seed": r.seed,
        "concurrency": in_flight,
        "timeout_s": budget,
        "timeout_counts": work,
        "max_steps": r.max_steps,
        "judge": job.judge,
    }
    if r.half:
        settings.update(split=r.half, split_seed=r.split_seed)
    settings.update(r.extra_settings)
    where_store = r.store_path if r.store_path is not None else default_store_path()
    try:
        store = RunStore(where_store)
    except (StoreError, OSError) as e:
        raise give_up(str(e)) from None
    stored_info = store.run_info(name)
    if r.retry_failed and stored_info is None:
        store.close()
        raise give_up(
            f"--retry-failed: no run {name!r} in {store.path} to ask again; name a stored run "
            "(`hammr runs`), or leave out --retry-failed to start this one"
        )
    # Refused before anything is asked: a resumed run must be asked as it was made.
    refusal = None
    if stored_info is not None and (stored_info.suite, stored_info.system) == (label, system_name):
        # (another suite or system is open_run's to refuse, naming both)
        refusal = _resume_refusal(stored_info, settings, config, "encvqa" in job.metrics_used)
    if refusal is not None:
        store.close()
        raise give_up(refusal)
    try:
        info, created = store.open_run(name, label, system_name, config=config, settings=settings)
        # Held from here to the end: a second `hammr eval` on this run is refused in one
        # line naming this one, before it asks anything (see hammr.eval.driver_lock).
        hold = contextlib.ExitStack()
        hold.callback(store.close)
        hold.enter_context(store.driving(name))
    except StoreError as e:
        store.close()
        raise give_up(str(e)) from None
    if r.share_from:
        _take_shared(store, name, r.share_from, samples, job.judge, note)
    # --retry-failed: failed records stay stored until their new answers replace them.
    plan, again = plan_run(store, name, samples, retry_failed=r.retry_failed)
    if again:
        note(f"{name}: asking {len(again)} failed samples again")
    if plan.duplicates:
        note(
            f"hammr: warning: {plan.duplicates} samples repeat an earlier (dataset, id) "
            "and are skipped"
        )
    where = f"{in_flight} at a time ({concurrency.why})"
    if r.executor == "ray":
        where = f"{r.workers} Ray workers x {in_flight} at a time ({concurrency.why})"
    if not created:
        from hammr.eval.resume import config_changes

        changed = config_changes(info.config, config)[1]  # the others were refused above
        note(f"resuming run {name}: {plan.skipped} of {plan.total} samples already done ({where})")
        if changed:
            note(f"note: settings differ from the run's start: {', '.join(changed)}")
    else:
        note(f"run {name}: {plan.total} samples, {where}, store {store.path}")
    todo = len(plan.todo)
    forecast = expected(store, system_name, config, todo, in_flight)
    if forecast is not None:
        note(forecast.line())

    stored = {(row.dataset, row.sample_id): row.score for row in store.score_rows(name)}
    planned = {sample_key(e, s) for e, s in samples}
    score_before = sum(v for k, v in stored.items() if k in planned)

    async def execute(bar: EvalProgress) -> EvalOutcome:
        if r.executor == "ray":
            from hammr.eval.executors.ray_executor import run_eval_ray

            return await run_eval_ray(
                job,
                samples,
                store=store,
                run_name=name,
                workers=r.workers,
                address=r.ray_address,
                ship_images=r.ship_images,
                on_result=bar.on_result,
                retry_failed=r.retry_failed,
            )
        assert built is not None
        return await run_samples(
            built.answerer(name),
            samples,
            store=store,
            run_name=name,
            concurrency=in_flight,
            on_result=bar.on_result,
            setup=built.prepare,
            retry_failed=r.retry_failed,
            lanes=concurrency.lanes,
        )

    async def go() -> EvalOutcome:
        try:
            with EvalProgress(
                plan.total,
                done=plan.skipped,
                score_sum=score_before,
                label=r.progress_label or name,
                enabled=r.progress,
            ) as bar:
                return await execute(bar)
        finally:
            await close_built()

    try:
        outcome = run_sync(go())
    except ExecutorError as e:
        hold.close()
        raise EvalError(str(e)) from None
    except KeyboardInterrupt:
        n_stored = store.count(name)
        hold.close()
        raise EvalError(
            f"interrupted; {n_stored} samples of run {name} are stored, run the same command "
            "again to resume",
            code=130,
        ) from None
    summary = store.summary(name)
    verdict = stored_verdict(store, name)
    store_path = store.path
    hold.close()  # lets go of the run, then closes the store
    return EvalResult(name, outcome, summary, store_path, budget, work, verdict)


def _take_shared(
    store: RunStore,
    name: str,
    sources: Sequence[str],
    samples: Sequence[tuple[Any, Any]],
    judge: str,
    note: Echo,
) -> None:
    """Copy into run ``name`` the finished answers of ``sources`` to its samples that it
    does not hold yet (:meth:`RunStore.copy_samples`), one line per source that gave any. A
    source judged otherwise gives nothing; one still being written gives what it has
    finished (the rest is asked here, and never counted twice: a sample is stored once)."""
    from hammr.eval.driver_lock import is_alive
    from hammr.eval.runner import sample_key

    wanted = {sample_key(e, s) for e, s in samples}
    for source in sources:
        info = store.run_info(source)
        if info is None or source == name:
            continue
        if info.settings.get("judge") != judge:
            note(
                f"run {name}: not sharing run {source}'s answers: it was judged by "
                f"{info.settings.get('judge')!r}, this run by {judge!r}"
            )
            continue
        todo = wanted - store.done_keys(name)
        if not todo:
            return
        n = store.copy_samples(source, name, todo)
        if n == 0:
            continue
        store.add_shared(name, source, n)
        said = f"run {name}: {n} of {len(wanted)} samples shared from run {source}, not asked again"
        holder = store.driver(source)
        if holder is not None and is_alive(holder):
            said += (
                f" ({source} is still being written by {holder.describe()}: only its finished "
                "samples were taken; the rest are asked here)"
            )
        note(said)


def _resume_refusal(
    info: RunInfo, settings: Mapping[str, Any], config: Mapping[str, Any], judged: bool
) -> str | None:
    """Why the stored run ``info`` must not be resumed with these settings and this
    configuration (:mod:`hammr.eval.resume`), or None."""
    from hammr.eval.resume import resume_refusal

    before = (info.settings.get("split"), info.settings.get("split_seed"))
    if before != (settings.get("split"), settings.get("split_seed")):
        was = f"the {before[0]} split (seed {before[1]})" if before[0] else "no split"
        return (
            f"run {info.name!r} was made with {was}; give this half its own --name, so the "
            "two halves never mix in one run"
        )
    experiment = settings.get("experiment")
    new_name = (
        "rename with --prefix to keep both" if experiment else "give this evaluation its own --name"
    )
    return resume_refusal(info, settings, config, judged=judged, new_name=new_name)


def result_lines(result: EvalResult) -> list[str]:
    """The run's one-line summary, as ``hammr eval`` prints it at the end (FAILED instead
    of the mean score when the run's numbers are not results: :mod:`hammr.eval.run_health`)."""
    outcome, summary = result.outcome, result.summary
    rate = f", {outcome.per_second:.2f} questions/s" if outcome.ran else ""
    failed = ""
    if outcome.errors or outcome.timeouts:
        failed = f"; {outcome.errors} errors, {outcome.timeouts} timeouts (scored 0)"
    score = "FAILED" if result.verdict else f"mean score {100 * summary.mean:.1f}%"
    return [
        f"{result.name}: {summary.done} samples, {score} "
        f"({outcome.ran} new in {outcome.elapsed_s:.1f} s{rate}; "
        f"{outcome.skipped} already done{failed})"
    ]


def result_warnings(result: EvalResult, retry: str = "--retry-failed") -> list[str]:
    """Warnings for the samples that timed out or met an LLM failure (how to ask them
    again: ``retry`` names the option that does)."""
    out: list[str] = []
    outcome = result.outcome
    if outcome.timeouts:
        counted = "wall-clock time less time queued" + (
            " and waiting for a processor" if result.work != "wall" else ""
        )
        out.append(
            f"hammr: warning: {outcome.timeouts} samples timed out ({result.timeout_s or 0:g} s "
            f"of work each, counted in {counted}); ask them again with {retry} and a longer "
            "--timeout (--timeout 0: no limit)"
        )
    llm_failed = outcome.statuses.get("llm_failure", 0)
    if llm_failed:
        out.append(
            f"hammr: warning: {llm_failed} samples ended in llm_failure (is the LLM server up?); "
            f"once it is, add {retry} to ask them again"
        )
    return out


__all__ = [
    "EvalError",
    "EvalRequest",
    "EvalResult",
    "evaluate",
    "recorded_config",
    "result_lines",
    "result_warnings",
    "suite_label",
]
