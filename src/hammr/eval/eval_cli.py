"""``hammr eval``, ``hammr report`` and ``hammr runs``.

:mod:`hammr.cli` imports this module to register its commands; the pieces every command
module shares live below both, in :mod:`hammr.cli_common`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hammr.cli_common import (
    config_option,
    eval_command,
    fail,
    open_store,
    store_option,
    systems_epilog,
    warn_unfinished,
)
from hammr.eval.executors import EXECUTORS
from hammr.terminal_text import echo, safe_line

EPILOG_EVAL = """\b
Examples:
  hammr eval --suite generic-vqa --data-dir ~/data/vqa --system hammr --limit 100
  hammr eval --suite generic-vqa --data-dir ~/data/vqa --system naive --limit 100 \\
    --concurrency 16 --timeout 300
  hammr eval --suite my_suite.toml --data-dir . --system OCRReasoningAgent --name ocr-try1
  hammr eval --suite generic-vqa --data-dir /shared/vqa --system hammr \\
    --executor ray --ray-address auto --workers 8      # on a Ray cluster (hammr[ray])
  hammr report generic-vqa-hammr-2025-01-31 generic-vqa-naive-2025-01-31
  hammr eval --suite muse-demo --data-dir examples/demo --system react --split exploration
  hammr eval --suite muse-demo --data-dir examples/demo --system muse --memory bank.db \\
    --split evaluation                                 # after `hammr memory build`

\b
Every finished sample is committed at once to the run store (default
$XDG_CACHE_HOME/hammr/runs.sqlite, else ~/.cache/hammr/runs.sqlite; --store to choose).
If the run is interrupted (Ctrl-C, a crash, a killed job), run the same command again:
samples already stored are skipped and the rest are asked, so nothing is counted twice.
The run name defaults to SUITE-SYSTEM-DATE, so the same command on the same day resumes.
A sample that fails (timeout, exception, unreadable image, LLM server failure) is stored
with score 0 and its status; --retry-failed asks those again (each keeps its record until
its new answer is stored). One `hammr eval` drives a run at a time: a second one on a live
run is refused, naming it; a killed one does not hold the run.

""" + systems_epilog()

EPILOG_REPORT = """\b
Examples:
  hammr report generic-vqa-hammr-2025-01-31
  hammr report run-a run-b run-c --format csv --out results.csv
  hammr report run-a run-b --format html --out table.html
  hammr report run-a --html run-a.html      # the viewer with every sample, one file
  hammr report react muse-k1 muse-k3 --layout methods     # MuSEAgent's Table 2 shape
  hammr report muse-d1 muse-d2 muse-d3 --scaling figs     # figs/depth.png, figs/breadth.png
  hammr report muse-t5 muse-t7 muse-t9 --scaling figs --ablation memory.min_score

\b
Rows are the question types (with their dataset) and the macro average over them; columns
are the runs, in the order given. Each cell is the mean score in percent ± half the width
of its 95% bootstrap confidence interval. Footnotes say which judge scored EncVQA answers
and how many samples failed (error, timeout, llm_failure: counted as wrong). A run whose
every sample, or more than half for one cause, failed shows FAILED instead of numbers, its
cause in a footnote.
--layout methods turns it round: runs as rows (labelled by system and the memory settings
that differ), benchmarks with their sub-tasks and micro average as columns, then the suite's
aggregates. --scaling DIR plots accuracy against memory.depth and memory.k (and each
--ablation KEY) as read from the runs' stored settings, one line per benchmark.
"""


@click.command("eval", epilog=EPILOG_EVAL)
@click.option(
    "--suite",
    "suite_name",
    required=True,
    help="A bundled suite's name (e.g. generic-vqa) or the path of a suite file.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The folder holding the suite's dataset files and images.",
)
@click.option(
    "--system",
    "system_name",
    help="Who answers: a system (listed below; `hammr systems` says what each needs and "
    "whether it runs on this configuration) or an agent's name from `hammr agents`. "
    "Default: agent.system (hammr).",
)
@click.option(
    "--memory",
    "memory_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The memory file (sets memory.path): an experience bank for --system muse (make one "
    "with `hammr memory build RUN -o bank.db`) or for the agents of [memory] agents; the "
    "memory of --system reflexion or expel.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="At most this many questions per suite entry (a seeded random subset).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Questions in flight at once, per Ray worker with --executor ray. Default: 1 on the "
    "embedded model (one slot); on a served model as many as its servers run at once, as "
    "they say (llama.cpp /props total_slots, SGLang max_running_requests; summed over "
    "replicas), each question pinned to one llama.cpp slot so its prompts stay cached; 8 "
    "per server that does not say (vLLM, hosted APIs). The run's first line says which.",
)
@click.option("--name", "run_name", help="The run's name (default: SUITE-SYSTEM-YYYY-MM-DD).")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0),
    help="Seconds of work a question may take before it is stored as 'timeout' with its "
    "partial trace (0: no limit). Work is wall-clock time less time queued for a model "
    "slot; on the embedded model, which computes in this process, also less the time its "
    "threads wait for a processor that other programs hold, so a busy machine does not "
    "spend it. Default: no limit on the embedded model (every call ends at llm.max_tokens, "
    "every agent at its step limit); on a served model 300, or llm.timeout_s when that is "
    "longer. `hammr config show` says which applies.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the --limit subset.")
@click.option(
    "--split",
    "half",
    type=click.Choice(["exploration", "evaluation"]),
    help="Only this half of MuSEAgent's 1:1 split of every suite entry (stratified by sub-task; "
    "--limit then draws within the half). Explore on one, evaluate on the other.",
)
@click.option(
    "--split-seed",
    default=0,
    show_default=True,
    type=int,
    help="Seed of the --split halves (the same seed gives the same halves).",
)
@store_option
@config_option
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Ask again the samples of this run stored with status 'error', 'timeout' or "
    "'llm_failure'.",
)
@click.option(
    "--judge",
    type=click.Choice(["auto", "bem", "llm", "embedding", "none"]),
    default="auto",
    show_default=True,
    help="Who decides EncVQA answers that are not exact matches: 'bem' (the paper's, needs "
    "--bem-checkpoint), 'llm' (the configured LLM), 'embedding' (the [tools.embed] backend), "
    "'none' (such answers are wrong). auto: bem with a checkpoint, else llm with a served "
    "LLM, else none. `hammr report` names the judge in a footnote.",
)
@click.option(
    "--bem-checkpoint",
    type=click.Path(path_type=Path),
    help="A local BEM checkpoint for --judge bem.",
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    help="Step limit of every agent, the dispatcher included (default: agent.max_steps if "
    "set, else each agent file's own limit, else 8).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="Where questions are answered: this process, or Ray actors on a cluster (the "
    "hammr[ray] extra). The run store is always written here, one sample at a time.",
)
@click.option(
    "--ray-address",
    metavar="auto|ray://HOST:PORT",
    help="With --executor ray: the cluster to join ('auto': the one `ray start` made on this "
    "machine; ray://HOST:PORT: a remote head). Default: start a local cluster.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="With --executor ray: Ray actors, each building the system and its models once and "
    "answering --concurrency questions at a time.",
)
@click.option(
    "--ship-images/--no-ship-images",
    default=None,
    help="With --executor ray: send each question's images to the workers through Ray's "
    "object store (default: only when a worker cannot see --data-dir).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar with live accuracy on stderr (default: when stderr is a terminal).",
)
def eval_cmd(
    suite_name: str,
    data_dir: Path,
    system_name: str | None,
    memory_path: Path | None,
    limit: int | None,
    concurrency: int | None,
    run_name: str | None,
    timeout_s: float | None,
    seed: int,
    half: str | None,
    split_seed: int,
    store_path: Path | None,
    config_path: Path | None,
    retry_failed: bool,
    judge: str,
    bem_checkpoint: Path | None,
    max_steps: int | None,
    no_cache: bool,
    executor: str,
    ray_address: str | None,
    workers: int,
    ship_images: bool | None,
    progress: bool | None,
) -> None:
    """Evaluate a system on a suite; the results go to the run store as they come.

    Loads the suite's samples from --data-dir, asks --system each question (at most
    --concurrency at once, each within --timeout seconds of work), scores every answer with the
    suite entry's metric and commits it. Prints the run's mean score at the end; see
    `hammr report RUN` for the full table and `hammr runs` for every stored run. Exit
    status: 0 done (failed samples are stored as such), 1 the run FAILED (every sample, or
    more than half for one cause, failed: its numbers are not results; the cause is named),
    2 bad input or configuration (a stored run resumed with other settings is one), 130
    interrupted (run the same command again to resume).
    """
    from hammr.eval.evaluate import (
        EvalError,
        EvalRequest,
        evaluate,
        result_lines,
        result_warnings,
    )

    request = EvalRequest(
        suite=suite_name,
        data_dir=data_dir,
        system=system_name,
        memory_path=memory_path,
        limit=limit,
        concurrency=concurrency,
        run_name=run_name,
        timeout_s=timeout_s,
        seed=seed,
        half=half,
        split_seed=split_seed,
        store_path=store_path,
        config_path=config_path,
        retry_failed=retry_failed,
        judge=judge,
        bem_checkpoint=bem_checkpoint,
        max_steps=max_steps,
        no_cache=no_cache,
        executor=executor,
        ray_address=ray_address,
        workers=workers,
        ship_images=ship_images,
        progress=progress,
    )
    try:
        result = evaluate(request, note=lambda line: echo(line, err=True))
    except EvalError as e:
        fail(str(e), code=e.code)
    for line in result_lines(result):
        echo(line)
    echo(f"table: hammr report {result.name}" + (f" --store {store_path}" if store_path else ""))
    for line in result_warnings(result):
        echo(line, err=True)
    if result.verdict is not None:
        retry = f"ask them again: `{eval_command(result.summary.info, store_path)} --retry-failed`"
        fail(
            f"run {result.name} FAILED: {result.verdict.text}; {result.verdict.next_step(retry)}",
            code=1,
        )


@click.command("report", epilog=EPILOG_REPORT)
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "csv", "html"]),
    default="markdown",
    show_default=True,
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the table to this file instead of stdout.",
)
@store_option
@click.option(
    "--samples",
    "ci_samples",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Bootstrap resamples per confidence interval.",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the viewer (`hammr view`) of these runs, every sample and trace included, "
    "as one self-contained HTML file that opens from disk.",
)
@click.option(
    "--layout",
    type=click.Choice(["rows", "methods"]),
    default="rows",
    show_default=True,
    help="rows: question types as rows, runs as columns. methods: MuSEAgent's Table 2, runs "
    "as rows and benchmarks (with sub-tasks and micro averages) as columns.",
)
@click.option(
    "--scaling",
    "scaling_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write depth.png and breadth.png here: accuracy (95% CI bars) against memory.depth "
    "and memory.k of the runs, one line per benchmark plus the micro average.",
)
@click.option(
    "--ablation",
    "ablations",
    multiple=True,
    metavar="KEY",
    help="With --scaling: also plot against this stored setting (e.g. memory.min_score, "
    "memory.sources), into KEY.png. Repeatable.",
)
def report_cmd(
    runs: tuple[str, ...],
    fmt: str,
    out: Path | None,
    store_path: Path | None,
    ci_samples: int,
    html_out: Path | None,
    layout: str,
    scaling_dir: Path | None,
    ablations: tuple[str, ...],
) -> None:
    """Print the results table of one or more runs (`hammr runs` lists them)."""
    from hammr.eval.report import build_report
    from hammr.eval.store import StoreError
    from hammr.output_file import OutputError, write_output

    if ablations and scaling_dir is None:
        fail("--ablation goes with --scaling DIR (where the plots are written)")
    if html_out is not None and layout == "methods":
        fail(
            "--html writes the whole report page, in its own layout; for Table 2 as HTML use "
            "--layout methods --format html"
        )

    store = open_store(store_path, create=False)
    if store is None:
        from hammr.eval.store import default_store_path

        fail(f"no run named {runs[0]!r} ({store_path or default_store_path()} does not exist)")
    warn_unfinished(store, runs, store_path)
    if scaling_dir is not None:
        from hammr.eval.scaling import FIGURES, write_scaling

        figures = [*FIGURES, *((k, k.replace("/", "_")) for k in ablations)]
        try:
            plots = write_scaling(store, runs, scaling_dir, figures=figures, samples=ci_samples)
        except StoreError as e:
            store.close()
            fail(str(e))
        except OutputError as e:
            store.close()
            fail(str(e))
        for plot in plots:
            echo(f"wrote {plot.path} ({len(plot.series)} lines)", err=True)
            for note in plot.notes:
                echo(f"  note: {note}", err=True)
    if html_out is not None:
        from hammr.web.static_report import write_report

        try:
            size = write_report(store, runs, html_out, ci_samples=ci_samples)
        except (StoreError, OutputError) as e:
            fail(str(e))
        finally:
            store.close()
        echo(f"wrote {html_out} ({size / 1e6:.1f} MB)", err=True)
        return
    try:
        if layout == "methods":
            from hammr.eval.methods_report import build_methods_table

            table = build_methods_table(store, list(runs), samples=ci_samples)
            text = table.render(fmt)  # type: ignore[arg-type]
        else:
            report = build_report(store, list(runs), samples=ci_samples)
            text = report.render(fmt)  # type: ignore[arg-type]
    except StoreError as e:
        fail(str(e))
    finally:
        store.close()
    if out is None:
        echo(text, nl=False)  # run names and question types: a file's text
        return
    try:
        write_output(out, text)
    except OutputError as e:
        fail(str(e))
    echo(f"wrote {out}", err=True)


@click.command("runs")
@store_option
def runs_cmd(store_path: Path | None) -> None:
    """List the stored evaluation runs: name, suite, system, samples done, mean score (FAILED
    where every sample, or more than half for one cause, failed), and failed samples (error,
    timeout or llm_failure; `hammr eval ... --retry-failed`)."""
    from hammr.eval.report import UNSCORED_CELL
    from hammr.eval.run_health import stored_verdict
    from hammr.eval.store import FAILED_STATUSES, default_store_path

    store = open_store(store_path, create=False)
    if store is None:
        where = store_path or default_store_path()
        echo(f"no runs in {where} (start one with `hammr eval`)", err=True)
        return
    try:
        rows = [("name", "suite", "system", "done", "mean", "failed", "created")]
        for name in store.run_names():
            s = store.summary(name)
            failed = sum(s.statuses.get(k, 0) for k in FAILED_STATUSES)
            mean = f"{100 * s.mean:.1f}%" if s.done else "–"
            if 2 * failed > s.done and stored_verdict(store, name) is not None:
                mean = "FAILED"
            elif s.done and not store.has_ground_truth(name):
                mean = UNSCORED_CELL
            rows.append(
                (  # names are the store's text: made safe for a terminal
                    safe_line(name),
                    safe_line(s.info.suite),
                    safe_line(s.info.system),
                    str(s.done),
                    mean,
                    str(failed),
                    s.info.created.replace("T", " ").removesuffix("+00:00"),
                )
            )
    finally:
        store.close()
    if len(rows) == 1:
        echo(f"no runs in {store.path} (start one with `hammr eval`)", err=True)
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [
            c.ljust(widths[i]) if i < 3 or i == 6 else c.rjust(widths[i]) for i, c in enumerate(r)
        ]
        echo("  ".join(cells).rstrip())


__all__ = ["eval_cmd", "report_cmd", "runs_cmd"]
