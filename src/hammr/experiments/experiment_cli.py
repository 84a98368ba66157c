"""``hammr experiment list | show | run | report``: a paper's table as one command.

``report`` is :mod:`hammr.experiments.report_cli`'s; the rest are here, over
:mod:`hammr.experiments.runner` and :mod:`hammr.experiments.validate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hammr.cli_common import config_option, fail, store_option
from hammr.eval.executors import EXECUTORS
from hammr.experiments.report_cli import prefix_option, report_cmd
from hammr.terminal_text import echo, safe_line

if TYPE_CHECKING:
    from hammr.experiments.spec import Experiment

DEMO_DIR = Path("examples") / "demo"

EPILOG_EXPERIMENT = """\b
Examples:
  hammr experiment list
  hammr experiment show hammr-table3
  hammr experiment run hammr-table3 --data-dir ~/data/vqa --limit 100
  hammr experiment run muse-table2 --demo                  # the bundled demo data, offline
  hammr experiment run hammr-table3 --data-dir ~/data/vqa --prefix qwen72b.
  hammr experiment report hammr-table3

\b
An experiment is a TOML file (the bundled ones are listed by `hammr experiment list`; a path
to your own works everywhere a name does): the runs a paper's table needs, the memory steps
between them, the table with the paper's numbers, and the deviations from the paper.
`run` fills the run store with what is not yet finished; a re-run of a finished experiment
asks nothing. Runs are stored as [PREFIX][demo.]EXPERIMENT.RUN; a run stored with other
settings is refused: give --prefix to keep both.
"""


@click.group("experiment", epilog=EPILOG_EXPERIMENT)
def experiment() -> None:
    """Reproduce a paper's table or figure: list, show, run and report experiments."""


def _load(name_or_file: str) -> Experiment:
    from hammr.experiments import ExperimentError, load_experiment

    try:
        return load_experiment(name_or_file)
    except ExperimentError as e:
        fail(str(e))


@experiment.command("list")
def list_cmd() -> None:
    """Every bundled experiment: name, paper, source and title, one line each."""
    from hammr.experiments import ExperimentError, bundled_names, load_experiment

    names = bundled_names()
    if not names:
        echo("no bundled experiments", err=True)
        return
    rows: list[tuple[str, ...]] = []
    for name in names:
        try:
            e = load_experiment(name)
        except ExperimentError as err:
            rows.append((name, "?", "?", f"(unreadable: {err})"))
            continue
        rows.append((e.name, e.paper, e.source, e.title))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(3)]
        echo(safe_line("  ".join([*cells, r[3]]).rstrip()))


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value).lower() if isinstance(
        value, bool
    ) else str(value)  # fmt: skip


@experiment.command("show")
@click.argument("name_or_file")
@click.option("--demo", is_flag=True, help="Show the runs as --demo would make them.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Count the questions the runs would ask in this data folder (as `run` draws them).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Questions per suite entry, as `run --limit`."
)
@click.option("--seed", default=0, show_default=True, type=int, help="As `run --seed`.")
@prefix_option("The prefix of the stored run names.")
@store_option
@config_option
def show_cmd(
    name_or_file: str,
    demo: bool,
    data_dir: Path | None,
    limit: int | None,
    seed: int,
    prefix: str,
    store_path: Path | None,
    config_path: Path | None,
) -> None:
    """An experiment's runs in order (with their settings), memory steps, tables with the
    paper's numbers and deviations; checks that everything it names exists in hammr, and
    says which steps the store already holds. Ends with a cost estimate: each run's
    questions (counted in --data-dir, else bounded by the limit) times the model calls and
    tokens one question took where it was measured (the run's own stored questions, stored
    runs of the same system and model, or the embedded model's --demo run)."""
    from hammr.experiments import ExperimentError
    from hammr.experiments.spec import Run, stored_run_name
    from hammr.experiments.validate import demo_cell, validate

    e = _load(name_or_file)
    try:
        validate(e)
    except ExperimentError as err:
        fail(str(err))
    if demo and e.data.demo_suite is None:
        fail(f"experiment {e.name!r} has no [data] demo_suite, so --demo cannot run it")
    states = _states(e, prefix, demo, store_path)
    out: list[str] = [f"{e.name}: {e.title}", f"  paper: {e.paper}; source: {e.source}"]
    if e.description:
        out.append(f"  {' '.join(e.description.split())}")
    if demo:
        from hammr.experiments.demo_time import read_durations

        budget = ", ".join(f"{k} = {_value(v)}" for k, v in e.data.demo_budget.items())
        out.append(f"  questions per suite entry: {e.data.demo_questions} (--limit overrides)")
        out.append(f"  demo budget (over every run's settings): {budget}")
        measured = read_durations().get(e.name)
        if measured is not None:
            out.append(f"  {measured.line()}")
    else:
        per_entry = e.data.limit or "all"
        out.append(f"  samples per suite entry: {per_entry} (--limit overrides)")
    order = e.order()
    out.append(f"steps ({len(order)}):")
    for i, step in enumerate(order, 1):
        if isinstance(step, Run):
            stored = stored_run_name(e.name, step.name, prefix=prefix, demo=demo)
            suite = e.data.demo_suite if demo and e.data.demo_suite else step.suite
            entries = "" if demo or not step.entries else f" entries {', '.join(step.entries)}"
            split = f", {step.split} split (seed {step.split_seed})" if step.split else ""
            steps = f", max_steps {step.max_steps}" if step.max_steps else ""
            memory = f", memory {step.memory!r}" if step.memory else ""
            state = states.get(f"run:{step.name}")
            status = f"  [{state.status}{': ' + state.reason if state.reason else ''}]" if (
                state
            ) else ""  # fmt: skip
            out.append(
                f"  {i}. run {step.name}: system {step.system}, suite {suite}{entries}"
                f"{split}{steps}{memory} -> {stored}{status}"
            )
            for key, value in sorted(step.settings.items()):
                out.append(f"       {key} = {_value(value)}")
        else:
            state = states.get(f"memory:{step.name}")
            status = f"  [{state.status}]" if state else ""
            out.append(
                f"  {i}. memory {step.name}: hammr memory {step.command} from run "
                f"{step.source}{status}"
            )
            for key, value in sorted(step.settings.items()):
                out.append(f"       {key} = {_value(value)}")
    for table in e.tables:
        out.append(f"table {table.name}: {table.title} ({table.source})")
        for column in table.columns:
            cell = demo_cell(e, column.cell) if demo else column.cell
            out.append(f"  column {column.label}: {cell}")
        for row in table.rows:
            paper = ", ".join(f"{c.label} {_value(row.paper[c.label])}" for c in table.columns)
            out.append(f"  row {row.label} (run {row.run}): paper {paper}")
    for figure in e.figures:
        out.append(
            f"figure {figure.name} ({figure.kind}): {figure.title}, runs {', '.join(figure.runs)}"
        )
    if e.deviations:
        out.append("deviations from the paper:")
        out.extend(f"  - {d}" for d in e.deviations)
    out += _estimate(e, demo, data_dir, limit, seed, prefix, store_path, config_path)
    for line in out:
        echo(safe_line(line))


def _estimate(
    e: Experiment,
    demo: bool,
    data_dir: Path | None,
    limit: int | None,
    seed: int,
    prefix: str,
    store_path: Path | None,
    config_path: Path | None,
) -> list[str]:
    """The cost estimate ``show`` ends with (:mod:`hammr.experiments.cost`); the store,
    when there is one, is only read."""
    from hammr.config import ConfigError, load_config
    from hammr.eval.evaluate import recorded_config
    from hammr.eval.store import RunStore, StoreError
    from hammr.experiments.cost import estimate_lines, estimate_runs
    from hammr.experiments.runner import (
        PlannedMemory,
        PlannedRun,
        RunnerError,
        RunOptions,
        plan,
        store_path_of,
    )

    if data_dir is None:
        data_dir = DEMO_DIR if demo else Path(".")
    try:
        config = recorded_config(load_config(config_path))
        options = RunOptions(data_dir=data_dir, demo=demo, limit=limit, prefix=prefix,
                             seed=seed, store_path=store_path)  # fmt: skip
        steps = plan(e, options)
    except (ConfigError, RunnerError) as err:
        fail(str(err))
    where = store_path_of(options)
    store: RunStore | None = None
    if where.is_file():
        try:
            store = RunStore(where, create=False)
        except (StoreError, OSError):
            store = None
    try:
        runs = [s for s in steps if isinstance(s, PlannedRun)]
        counted = options.data_dir if options.data_dir.is_dir() else None
        estimates = estimate_runs(e, runs, store, config, data_dir=counted, seed=seed,
                                  demo=demo)  # fmt: skip
    finally:
        if store is not None:
            store.close()
    memories = sum(1 for s in steps if isinstance(s, PlannedMemory))
    return estimate_lines(estimates, memory_steps=memories)


def _states(e: Experiment, prefix: str, demo: bool, store_path: Path | None) -> dict[str, Any]:
    """What the store already holds of the experiment (empty when there is no store)."""
    from hammr.eval.store import RunStore, StoreError, default_store_path
    from hammr.experiments.state import step_states

    where = (store_path or default_store_path()).expanduser()
    if not where.exists():
        return {}
    try:
        with RunStore(where, create=False) as store:
            return step_states(store, e, prefix=prefix, demo=demo)
    except StoreError as err:
        fail(str(err))
    except OSError as err:
        fail(f"cannot read the run store {where}: {err.strerror or err}")


@experiment.command("run", epilog=EPILOG_EXPERIMENT)
@click.argument("name_or_file")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder holding the suites' dataset files and images (with --demo: default "
    "examples/demo when it exists here).",
)
@click.option(
    "--demo",
    is_flag=True,
    help="Run every run on the file's [data] demo_suite (the bundled demo data), without "
    "its entries filters, under the demo budget (a question or two per entry, few short "
    "steps: `hammr experiment show NAME --demo` prints it); stored apart, as "
    "demo.EXPERIMENT.RUN. Every bundled experiment's takes minutes on the embedded model.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="At most this many questions per suite entry (default: the file's [data] limit).",
)
@prefix_option(
    "Put before every stored run's name (e.g. 'qwen72b.'): keeps the runs of one model or "
    "dataset apart from another's."
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the --limit subset.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True)
@click.option("--ray-address", metavar="auto|ray://HOST:PORT", help="With --executor ray.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="With --executor ray: Ray actors.",
)
@click.option(
    "--concurrency", type=click.IntRange(min=1), help="Questions in flight at once (as eval's)."
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0),
    help="Seconds of work a question may take (as eval's; 0: no limit).",
)
@click.option(
    "--judge",
    type=click.Choice(["auto", "bem", "llm", "embedding", "none"]),
    default="auto",
    show_default=True,
    help="Who decides EncVQA answers that are not exact matches (as `hammr eval --judge`).",
)
@click.option(
    "--bem-checkpoint",
    type=click.Path(path_type=Path),
    help="A local BEM checkpoint for --judge bem (the paper's judge for Encyclopedic-VQA).",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Ask again the stored samples that failed (error, timeout, llm_failure).",
)
@click.option(
    "--share/--no-share",
    default=True,
    show_default=True,
    help="Take the stored answers and memory files another experiment made the same way "
    "(same system, settings, data and model) instead of asking again; the report says "
    "which run a sample came from.",
)
@store_option
@config_option
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bars on stderr (default: when stderr is a terminal).",
)
def run_cmd(
    name_or_file: str,
    data_dir: Path | None,
    demo: bool,
    limit: int | None,
    prefix: str,
    seed: int,
    executor: str,
    ray_address: str | None,
    workers: int,
    concurrency: int | None,
    timeout_s: float | None,
    judge: str,
    bem_checkpoint: Path | None,
    retry_failed: bool,
    share: bool,
    store_path: Path | None,
    config_path: Path | None,
    progress: bool | None,
) -> None:
    """Run every step of an experiment not yet finished into the run store.

    Steps go in order (exploration, memory, evaluation); each run is a `hammr eval` stored
    as [PREFIX][demo.]EXPERIMENT.RUN, each memory step a `hammr memory build|reflect|
    insights` into a file beside the store. Resumable: a finished run is not asked again, a
    killed one asks only its missing samples. A suite entry whose file is missing under
    --data-dir is left out with a warning (its cells say why) and the run goes on with the
    others; a run with no entry's data at all is `no data`. A run whose samples failed
    (every one, or more than half for one cause, e.g. images missing from --data-dir) is a
    failed step, named with its cause; --retry-failed asks them again. A stored run made
    with another model or another setting that changes answers is refused in one line:
    give --prefix to keep both. What another experiment already asked the same way (HAMMR's
    Tables 2-4 share their runs) is copied, not asked again (--no-share: ask anew). Exit
    status: 0 every step finished, 1 a step failed, stopped partway or had no data at all,
    2 bad input (nothing ran), 130 interrupted (run the same command again to resume).
    """
    from hammr.experiments.runner import RunnerError, RunOptions, run_experiment
    from hammr.experiments.state import RecordError

    e = _load(name_or_file)
    if data_dir is None:
        if not demo:
            fail("--data-dir is required (or --demo, to run on the bundled demo data)")
        if not DEMO_DIR.is_dir():
            fail(f"--demo: no {DEMO_DIR} here; give --data-dir with the demo data's folder")
        data_dir = DEMO_DIR
    if executor == "local" and ray_address:
        fail("--ray-address goes with --executor ray")
    options = RunOptions(
        data_dir=data_dir,
        demo=demo,
        limit=limit,
        prefix=prefix,
        seed=seed,
        store_path=store_path,
        config_path=config_path,
        executor=executor,
        ray_address=ray_address,
        workers=workers,
        concurrency=concurrency,
        timeout_s=timeout_s,
        judge=judge,
        bem_checkpoint=bem_checkpoint,
        retry_failed=retry_failed,
        progress=progress,
        share=share,
    )
    try:
        outcome = run_experiment(  # a note quotes reasons: a data file's or a model's text
            e, options, note=lambda line: echo(line, err=True)
        )
    except RunnerError as err:
        fail(str(err), code=err.code)
    except RecordError as err:  # the record could not be written after a step (a full disk)
        fail(f"{err}; what the steps stored is in the run store, and a new run goes on from it")
    done = sum(1 for s in outcome.states.values() if s.status == "done")
    echo(
        f"{e.name}: {done} of {len(outcome.states)} steps done "
        f"({len(outcome.ran)} worked on now, {len(outcome.skipped)} already done)"
    )
    for state in outcome.states.values():
        if state.status != "done":
            echo(safe_line(f"  {state.kind} {state.name}: {state.status}: {state.reason}"))
    report = f"hammr experiment report {name_or_file}"
    if prefix:
        report += f" --prefix {prefix}"
    if demo:
        report += " --demo"
    if store_path is not None:
        report += f" --store {store_path}"
    echo(f"table: {report}")
    raise SystemExit(outcome.exit_code)


experiment.add_command(report_cmd)

__all__ = ["experiment", "list_cmd", "run_cmd", "show_cmd"]
