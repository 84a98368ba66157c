"""``hammr experiment report``: a paper's table with our numbers beside it.

The experiment group (:mod:`hammr.experiments.experiment_cli`) adds :data:`report_cmd`.
Everything is read from the run store (:mod:`hammr.experiments.report`); nothing is run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hammr.cli_common import fail, open_store, store_option
from hammr.terminal_text import echo, safe_console

EPILOG_REPORT = """\
\b
Examples:
  hammr experiment report hammr-table3
  hammr experiment report hammr-table3 --demo --html table3.html --csv table3.csv
  hammr experiment report hammr-table4 --labels hammr=wrong.csv --labels naive=naive.csv
  hammr experiment report my-experiment.toml --prefix qwen7b.

\b
Each row of the file is three lines: ours (mean in % ± half its 95% bootstrap interval),
the paper's number (n.r.: not reported) and the difference. An empty cell holds a short mark
(—: the run is not run, has no data or failed; n/a: this cell cannot be filled) and a note
number; the notes under the table say why, each reason once. Then the file's deviations
from the paper and those read from the runs (settings that differ from the paper's, the
LLM, sample counts, demo data).
"""


def _labels(values: tuple[str, ...]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for value in values:
        run, eq, path = value.partition("=")
        if not eq or not run.strip() or not path.strip():
            fail(f"--labels {value!r}: write RUN=FILE (a run of the experiment and its CSV)")
        out[run.strip()] = Path(path.strip())
    return out


def _no_store(experiment: str, store_path: Path | None, *, prefix: str, demo: bool) -> str:
    """The line a report of a store that does not exist stops with: where it looked, and the
    command that fills it (a table of nothing but "not run yet" would hide a mistyped
    --store)."""
    import shlex

    from hammr.eval.store import default_store_path

    where = store_path if store_path is not None else default_store_path()
    command = ["hammr", "experiment", "run", experiment]
    command += ["--demo"] if demo else ["--data-dir", "DIR"]
    if prefix:
        command += ["--prefix", prefix]
    if store_path is not None:
        command += ["--store", str(store_path)]
    return (
        f"no run store at {where}: nothing of this experiment is run there yet; "
        f"`{shlex.join(command)}` fills it (or give --store the store the runs went to)"
    )


FC = TypeVar("FC", bound=Callable[..., Any])


def prefix_option(help_text: str) -> Callable[[FC], FC]:
    """``--prefix``, refused in one line where it could not start a stored run's name."""

    def checked(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
        from hammr.experiments.spec import name_problem

        problem = name_problem(value, "the prefix", empty_ok=True)
        if problem:
            raise click.BadParameter(problem)
        return value

    return click.option("--prefix", default="", callback=checked, help=help_text)


@click.command("report", epilog=EPILOG_REPORT)
@click.argument("experiment")
@prefix_option("The prefix the experiment's runs were stored with (`experiment run --prefix`).")
@click.option("--demo", is_flag=True, help="Report the runs made on the bundled demo data.")
@store_option
@click.option(
    "--csv",
    "csv_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write one CSV row per cell: table, row, column, ours, ci, paper, diff, n, "
    "status, reason (then cell, run, unit).",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained page: the tables (cells linked to their runs in "
    "`hammr view`), the deviations and the experiment's figures.",
)
@click.option(
    "--labels",
    "labels",
    multiple=True,
    metavar="RUN=FILE",
    help="A labelled CSV of RUN's wrong answers (`hammr errors RUN --export`), for label: "
    "cells (HAMMR's Table 4). Repeatable.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where explain: cells and the shuffle figure read the suite's reference "
    "explanations (default: the data folder each run stored).",
)
@click.option(
    "--viewer",
    default="http://127.0.0.1:8765/",
    show_default=True,
    help="With --html: the address of `hammr view` the cells link to.",
)
@click.option(
    "--samples",
    "ci_samples",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Bootstrap resamples per confidence interval.",
)
def report_cmd(
    experiment: str,
    prefix: str,
    demo: bool,
    store_path: Path | None,
    csv_out: Path | None,
    html_out: Path | None,
    labels: tuple[str, ...],
    data_dir: Path | None,
    viewer: str,
    ci_samples: int,
) -> None:
    """Print an experiment's tables: ours beside the paper's numbers, with the deviations."""

    from hammr.eval.store import StoreError
    from hammr.experiments import ExperimentError, load_experiment
    from hammr.experiments.render import render_csv, render_html, render_rich
    from hammr.experiments.report import ReportError, build_report
    from hammr.output_file import OutputError, output_target, write_output

    try:
        spec = load_experiment(experiment)
    except ExperimentError as e:
        fail(str(e))
    by_run = _labels(labels)
    for path, what in ((csv_out, "the CSV file"), (html_out, "the HTML file")):
        if path is not None:
            try:  # refused before the work
                output_target(path, what)
            except OutputError as e:
                fail(str(e))
    store = open_store(store_path, create=False)
    if store is None:
        fail(_no_store(experiment, store_path, prefix=prefix, demo=demo))
    try:
        report = build_report(
            store,
            spec,
            prefix=prefix,
            demo=demo,
            labels=by_run,
            data_dir=data_dir,
            samples=ci_samples,
        )
        figures: list[str] = []
        if html_out is not None:
            from hammr.experiments.figures import figures_html

            figures = figures_html(store, report, data_dir=data_dir, samples=ci_samples)
    except (ReportError, StoreError, OutputError, ExperimentError) as e:
        fail(str(e))  # ExperimentError: the record beside the store is no file to read
    finally:
        if store is not None:
            store.close()
    console = safe_console(highlight=False)
    for part in render_rich(report):
        console.print(part)
    try:
        if csv_out is not None:
            write_output(csv_out, render_csv(report), what="the CSV file")
            echo(f"wrote {csv_out}", err=True)
        if html_out is not None:
            page = render_html(report, figures=figures, viewer=viewer)
            write_output(html_out, page, what="the HTML file")
            echo(f"wrote {html_out}", err=True)
    except OutputError as e:
        fail(str(e))


__all__ = ["report_cmd"]
