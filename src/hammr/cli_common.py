"""Pieces every command module shares (kept apart from hammr.cli, which imports them all)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar, overload

import click

from hammr.terminal_text import TerminalWriteError, echo, safe_text, silence

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hammr.eval.store import RunInfo, RunStore

FC = TypeVar("FC", bound=Callable[..., Any])

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="Config file (default: $HAMMR_CONFIG, else ./hammr.toml if present).",
)


API_KEY_ENV = "HAMMR_API_KEY"
"""The API key of `hammr serve` and `hammr mcp --http` (an environment variable: `ps` does
not show it, as it shows --api-key)."""


def api_key_option(help_text: str) -> Callable[[FC], FC]:
    return click.option(
        "--api-key",
        envvar=API_KEY_ENV,
        show_envvar=True,
        metavar="KEY",
        help=help_text,
    )


def listening_key(host: str, api_key: str | None) -> str | None:
    """The API key a server on ``host`` requires (None: none), refusing in one line to listen
    beyond loopback without one: anyone who could reach it could run models on the user's
    account and read what it serves."""
    from hammr.web.asgi_server import is_loopback

    key = (api_key or "").strip() or None
    if key is None and not is_loopback(host):
        fail(
            f"--host {host} is not a loopback address: anyone who can reach it could use it; "
            f"give an API key (set ${API_KEY_ENV}, or --api-key KEY); clients then send "
            "'Authorization: Bearer KEY'"
        )
    return key


def serve_until_stopped(server: Any) -> None:
    """Serve until Ctrl-C or SIGTERM, both a normal stop (a bound server of
    :mod:`hammr.web.asgi_server`)."""
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


def systems_epilog() -> str:
    """Every registered system, grouped by its paper, for a command's --help (made from the
    registry, so a new system is listed without touching the help)."""
    from hammr.system_info import SYSTEMS
    from hammr.systems import registered_systems

    groups: dict[str, list[str]] = {}
    for name in registered_systems():
        info = SYSTEMS.get(name)
        label = f"{name} (the method)" if info is not None and info.role == "the method" else name
        groups.setdefault(info.paper if info is not None else "other", []).append(label)
    width = max(len(p) for p in groups)
    lines = [
        "\b",
        "Systems (--system NAME; `hammr systems` says what each needs and whether it runs here):",
        *(f"  {paper.ljust(width)}  {', '.join(names)}" for paper, names in groups.items()),
        "  or an agent's name from `hammr agents` (e.g. OCRReasoningAgent)",
    ]
    return "\n".join(lines) + "\n"


class SystemsEpilogCommand(click.Command):
    """A command whose epilog ends with :func:`systems_epilog`, made when it is read (for
    the command's --help), not when the command is defined: reading the registry imports
    every system's module."""

    @property
    def epilog(self) -> str:
        return (self._epilog or "") + systems_epilog()

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        self._epilog = value


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and the exit status (2: bad input or configuration). The message
    often quotes a file or a model, so it is made safe for a terminal first."""
    echo(f"hammr: error: {safe_text(message)}", err=True)
    sys.exit(code)


class HammrGroup(click.Group):
    """The top-level group: a standard output that cannot be written (redirected to a full
    disk, a file over its size limit) ends the command with one line and exit 2, not a
    traceback, whichever command was printing. What the command stored before is kept.

    ``lazy_commands`` maps a command's name to ``("module:attribute", summary)``: the module
    is imported only when the command is run or its help shown (click's LazyGroup pattern),
    so that `hammr --help` or `hammr systems` does not import every command's dependencies.
    The summary is the command's short help (the first sentence of its help), which the
    group's listing shows without importing the module."""

    def __init__(
        self,
        *args: Any,
        lazy_commands: Mapping[str, tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, tuple[str, str]] = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(load_command(self.lazy_commands[cmd_name][0]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with the commands not imported yet among those a mistyped name is matched
        against ("Did you mean 'eval'?": click 8.4 and later)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            unknown = getattr(click.exceptions, "NoSuchCommand", None)
            if unknown is None or not isinstance(e, unknown):
                raise
            raise unknown(e.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with a command not imported yet shown by a stand-in that holds
        its summary (click shortens it to the width as it would the command's own help)."""
        commands: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is None:
                cmd = click.Command(name, help=self.lazy_commands[name][1])
            if not cmd.hidden:
                commands.append((name, cmd))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            rows = [(name, cmd.get_short_help_str(limit)) for name, cmd in commands]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except TerminalWriteError as e:
            silence(e.stream)
            which = "error" if e.stream == "stderr" else "output"
            fail(f"cannot write to standard {which}: {e.strerror or e}")


def load_command(spec: str) -> click.Command:
    """The click command ``spec`` names, as ``"module:attribute"`` (imported now)."""
    import importlib

    module, _, attribute = spec.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{spec} is not a click command")
    return command


def require_question(question: str) -> None:
    """Refuse an empty or overlong QUESTION in one line (``ask``, ``route``, ``memory
    search``; see :mod:`hammr.text_limits`)."""
    from hammr.text_limits import question_problem

    problem = question_problem(question)
    if problem is not None:
        fail(problem)


store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The run store, an SQLite file (default: $XDG_CACHE_HOME/hammr/runs.sqlite, "
    "else ~/.cache/hammr/runs.sqlite).",
)


@overload
def open_store(path: Path | None, *, create: Literal[True] = ...) -> RunStore: ...
@overload
def open_store(path: Path | None, *, create: bool) -> RunStore | None: ...
def open_store(path: Path | None, *, create: bool = True) -> RunStore | None:
    """The run store; None when it does not exist and ``create`` is False (reading commands
    do not leave an empty file behind a mistyped --store)."""
    from hammr.eval.store import RunStore, StoreError, default_store_path

    where = path if path is not None else default_store_path()
    if not create and not where.exists():
        return None
    try:
        return RunStore(where, create=create)
    except (StoreError, OSError) as e:
        fail(str(e))


def eval_command(info: RunInfo, store_path: Path | None = None) -> str:
    """The `hammr eval` command that goes on with a stored run, from what the run recorded
    (its suite, data folder, system, subset, split and memory file); for a run an experiment
    made, the `hammr experiment run` that goes on with it (`hammr eval` refuses to add to
    an experiment's run)."""
    import shlex

    st = info.settings
    experiment = st.get("experiment")
    if isinstance(experiment, str) and experiment:
        return experiment_command(info, experiment, store_path)
    parts = ["hammr", "eval", "--suite", str(st.get("suite") or info.suite)]
    parts += ["--data-dir", str(st.get("data_dir") or "DIR"), "--system", info.system]
    parts += ["--name", info.name]
    if st.get("limit"):
        parts += ["--limit", str(st["limit"])]
        if st.get("seed"):
            parts += ["--seed", str(st["seed"])]
    if st.get("split"):
        parts += ["--split", str(st["split"]), "--split-seed", str(st.get("split_seed") or 0)]
    if st.get("max_steps"):
        parts += ["--max-steps", str(st["max_steps"])]
    if info.config.get("memory.path"):
        parts += ["--memory", str(info.config["memory.path"])]
    if store_path is not None:
        parts += ["--store", str(store_path)]
    return shlex.join(parts)


def experiment_command(info: RunInfo, experiment: str, store_path: Path | None = None) -> str:
    """The `hammr experiment run` that goes on with ``info``, a run of ``experiment``, as its
    stored settings and identity say it was run (demo data or its data folder, the
    prefix of its name, an explicit --limit and --seed)."""
    import shlex

    st = info.settings
    stored = st.get("identity")
    identity: dict[str, Any] = stored if isinstance(stored, dict) else {}
    demo = bool(st.get("demo"))
    parts = ["hammr", "experiment", "run", experiment]
    if demo:
        parts.append("--demo")
    else:
        parts += ["--data-dir", str(st.get("data_dir") or "DIR")]
    own = f"{'demo.' if demo else ''}{experiment}.{st.get('experiment_run') or ''}"
    if info.name.endswith(own) and info.name != own:
        parts += ["--prefix", info.name[: -len(own)]]
    if identity.get("limit"):
        parts += ["--limit", str(identity["limit"])]
    if identity.get("seed"):
        parts += ["--seed", str(identity["seed"])]
    if store_path is not None:
        parts += ["--store", str(store_path)]
    return shlex.join(parts)


@dataclass(frozen=True)
class Unfinished:
    """A run with no finished sample, and what to do about it."""

    run: str
    stored: int
    """Samples it holds (all failed; 0: none yet)."""
    message: str
    """One line: how many samples, why none finished, the command that asks them again."""


def unfinished_run(
    store: RunStore,
    runs: Iterable[str],
    *,
    store_path: Path | None = None,
    failed_count: bool = False,
    purpose: str = "",
) -> Unfinished | None:
    """None when every run of ``runs`` holds a finished sample (one not stored as error,
    timeout or llm_failure; with ``failed_count``, any sample); else the first that does
    not. ``purpose`` follows "has no finished samples" (" to learn from"). Unknown runs are
    left to the caller."""
    from hammr.eval.store import ASKED_ELSEWHERE, FAILED_STATUSES

    for run in runs:
        info = store.run_info(run)
        if info is None:
            continue
        summary = store.summary(run)
        failed = {k: n for k, n in summary.statuses.items() if k in FAILED_STATUSES}
        usable = summary.done if failed_count else summary.done - sum(failed.values())
        if usable > 0:
            continue
        command = eval_command(info, store_path)
        head = f"run {run!r} has no finished samples{purpose}"
        elsewhere = ASKED_ELSEWHERE.get(info.suite)
        if elsewhere is not None and summary.done:
            why = ", ".join(f"{n} {status}" for status, n in failed.items())
            return Unfinished(
                run, summary.done, f"{head} ({summary.done} stored, all failed: {why}); {elsewhere}"
            )
        if summary.done == 0:
            return Unfinished(run, 0, f"{head} (none stored yet); answer them first: `{command}`")
        why = ", ".join(f"{n} {status}" for status, n in failed.items())
        hints = []
        if "timeout" in failed:
            budget = info.settings.get("timeout_s")
            at = f" at {budget:g} s of work each" if isinstance(budget, int | float) else ""
            hints.append(f"they timed out{at}: add --timeout 0 for no limit, or a longer one")
        if "llm_failure" in failed:
            hints.append("the LLM server failed: start it first")
        hint = f" ({'; '.join(hints)})" if hints else ""
        return Unfinished(
            run,
            summary.done,
            f"{head} ({summary.done} stored, all failed: {why}); ask them again: "
            f"`{command} --retry-failed`{hint}",
        )
    return None


def failed_run_message(store: RunStore, run: str, store_path: Path | None = None) -> str | None:
    """One line when ``run``'s numbers are not results (:mod:`hammr.eval.run_health`): the
    cause and the command that asks its failed samples again; None when they are results
    (or the store does not hold it)."""
    from hammr.eval.run_health import stored_verdict
    from hammr.eval.store import ASKED_ELSEWHERE

    info = store.run_info(run)
    verdict = stored_verdict(store, run) if info is not None else None
    if info is None or verdict is None:
        return None
    retry = ASKED_ELSEWHERE.get(info.suite) or (
        f"ask them again: `{eval_command(info, store_path)} --retry-failed`"
    )
    return f"run {run!r} FAILED: {verdict.text}; {verdict.next_step(retry)}"


def warn_unfinished(store: RunStore, runs: Iterable[str], store_path: Path | None = None) -> None:
    """A warning on stderr for every run of ``runs`` with no finished sample, or whose
    numbers are not results for another reason (most of its samples failed for one cause:
    :func:`failed_run_message`): what a reading command shows of it is failures, not
    answers. Each names the command that asks them again."""
    for run in dict.fromkeys(runs):
        empty = unfinished_run(store, [run], store_path=store_path)
        message = empty.message if empty is not None else failed_run_message(store, run, store_path)
        if message is not None:
            echo(f"hammr: warning: {safe_text(message)}", err=True)
