"""``hammr errors``: the error analysis of stored runs (HAMMR's section 4.3 and Table 4)."""

from __future__ import annotations

from pathlib import Path

import click

from hammr.cli_common import config_option, fail, open_store, store_option, warn_unfinished
from hammr.output_file import OutputError
from hammr.terminal_text import echo

EPILOG_ERRORS = """\
\b
Examples:
  hammr errors generic-vqa-hammr-2026-11-22
  hammr errors RUN --export wrong.csv --per-type 10     # then fill the 'label' column
  hammr errors RUN OTHER_RUN --labels wrong.csv          # Table 4 from the labels

\b
Without options: per agent and per question type, tool-call formulation errors by kind
(syntax, no action, unknown tool, unknown variable, bad arguments), tool failures and
step-limit hits, and the dispatcher's confusion matrix (question type -> specialist called,
and whether the neighbours or the LLM decided). Labels are reasoning, formulation,
tool_failure, ok or skip (an ambiguous question), as in the HAMMR paper's section 4.3.
"""


@click.command("errors", epilog=EPILOG_ERRORS)
@click.argument("runs", nargs=-1, required=True)
@store_option
@config_option
@click.option(
    "--export",
    "export_path",
    type=click.Path(path_type=Path),
    help="Write a CSV of wrong answers, with a one-cell trace summary, for a person to label.",
)
@click.option(
    "--per-type",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="With --export: wrong answers to draw per run and question type (the paper labels 10 "
    "and skips ambiguous questions, so draw a few more).",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="With --export: seed of the random draw (the same seed draws the same answers).",
)
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A labelled CSV (from --export): print the error-type table (the paper's Table 4).",
)
def errors_cmd(
    runs: tuple[str, ...],
    store_path: Path | None,
    config_path: Path | None,
    export_path: Path | None,
    per_type: int,
    seed: int,
    labels_path: Path | None,
) -> None:
    """Error analysis of stored runs: automatic counts, a sample to label, or Table 4."""
    from hammr.agents import AgentCatalog, SpecError
    from hammr.config import ConfigError, load_config
    from hammr.eval.analysis import (
        LabelFileError,
        errors_report,
        export_for_labelling,
        run_accuracy,
        sample_wrong,
        tabulate_labels,
    )
    from hammr.eval.store import StoreError

    store = open_store(store_path, create=False)
    if store is None:
        fail(f"no run named {runs[0]!r}: the store does not exist yet")
    try:
        records = []
        for run in runs:
            if run not in store.run_names():
                fail(f"no run named {run!r}; `hammr runs` lists them")
            records += store.records(run, limit=None)
        warn_unfinished(store, runs, store_path)
    except StoreError as e:
        fail(str(e))
    finally:
        store.close()
    accuracy = run_accuracy(records)
    if labels_path is not None:
        try:
            table = tabulate_labels(labels_path, accuracy=accuracy).to_markdown()
            echo(table)  # run names from the labelled file
        except LabelFileError as e:
            fail(str(e))
        return
    if export_path is not None:
        chosen = sample_wrong(records, per_type, seed)
        try:
            export_for_labelling(chosen, export_path, accuracy=accuracy)
        except OutputError as e:
            fail(str(e))
        echo(f"wrote {len(chosen)} wrong answers to {export_path}", err=True)
        return
    try:
        cfg = load_config(config_path)
        catalog = AgentCatalog.from_config(cfg)
    except (ConfigError, SpecError) as e:
        fail(str(e))
    echo(errors_report(records, catalog))
