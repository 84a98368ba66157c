"""``hammr avis``: AVIS's analyses of stored runs, the graph they teach, graph files.

Errors are one line on stderr (``hammr: error: ...``) and exit status 2, as for every
command.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hammr.cli_common import config_option, fail, open_store, store_option
from hammr.output_file import OutputError, write_output
from hammr.terminal_text import echo, safe_console, safe_line, safe_markup, safe_text

if TYPE_CHECKING:
    from hammr.avis.analyses import AvisAnalysis
    from hammr.avis.graph import TransitionGraph
    from hammr.eval.types import RunRecord

EPILOG_AVIS = """\
\b
Examples:
  hammr eval --suite avis --data-dir DATA --system avis --name avis-hand
  hammr avis analyze avis-hand -o figures/            # the paper's figures 6-13
  hammr avis induce avis-hand -o learned.toml         # the graph successful runs followed
  hammr avis graph learned.toml                       # check it, print its edges
  # in hammr.toml:  [avis]  graph = "learned.toml"    then evaluate again:
  hammr eval --suite avis --data-dir DATA --system avis --name avis-learned
  hammr report avis-hand avis-learned --html compare.html

\b
An AVIS run is read from its traces: every step with a state is an action the planner
chose at that state (a transition state -> action), judged by the reasoner as
not_informative, informative or answerable.
"""

SCORE_HELP = (
    "A sample succeeded when its score is at least this (default 1: a correct answer, as "
    "`hammr errors` counts it; VQA accuracy gives partial scores, 0.5 would count those)."
)


@click.group("avis", epilog=EPILOG_AVIS)
def avis() -> None:
    """AVIS: analyse its stored runs, learn a transition graph from them, check graph files.

    `analyze` draws the paper's appendix figures (tool frequency, tools at positions 1-4,
    reasoner verdicts, sequence lengths, the induced transition graph); `induce` writes the
    graph the successful traces followed, for the planner to use; `graph` validates a graph
    file and prints its edges.
    """


def _load(
    store_path: Path | None, runs: Sequence[str]
) -> tuple[dict[str, list[RunRecord]], list[str]]:
    """Every stored sample of each run, traces included, and the graph files the runs were
    recorded with (``avis.graph`` of their configuration, where set); one clear line for a
    bad run."""
    from hammr.eval.store import StoreError

    store = open_store(store_path, create=False)
    if store is None:
        where = f"the store {store_path}" if store_path is not None else "the default store"
        fail(f"no run named {runs[0]!r}: {where} does not exist yet")
    try:
        known = store.run_names()
        out: dict[str, list[RunRecord]] = {}
        graphs: list[str] = []
        for run in runs:
            if run not in known:
                fail(store.unknown_run_message(run))
            info = store.run_info(run)
            recorded = info.config.get("avis.graph") if info is not None else None
            if isinstance(recorded, str) and recorded and recorded not in graphs:
                graphs.append(recorded)
            out[run] = store.records(run, limit=None)
        return out, graphs
    except StoreError as e:
        fail(str(e))
    finally:
        store.close()


def _slug(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _print_summary(analyses: Sequence[AvisAnalysis]) -> None:
    """Side-by-side tables, one column per run: what was analysed, tools, verdicts, length."""
    from rich.table import Table

    from hammr.avis.analyses import VERDICTS

    console = safe_console(highlight=False)
    # run names and the tools the traces name are the store's text: shown as text, not markup
    runs = [safe_markup(a.label) for a in analyses]

    overview = Table(title="AVIS runs", title_justify="left")
    overview.add_column("")
    for run in runs:
        overview.add_column(run, justify="right")
    overview.add_row("AVIS traces analysed", *[str(a.traces) for a in analyses])
    overview.add_row(
        "successful",
        *[
            "-" if a.successful is None else f"{a.successful} (score >= {a.min_score:g})"
            for a in analyses
        ],
    )
    if any(a.unsuccessful for a in analyses):
        overview.add_row("unsuccessful, left out", *[str(a.unsuccessful) for a in analyses])
    if any(a.skipped for a in analyses):
        overview.add_row("not AVIS, skipped", *[str(a.skipped) for a in analyses])
    overview.add_row("action steps", *[str(a.actions) for a in analyses])
    overview.add_row("mean length", *[f"{a.mean_length:.2f}" for a in analyses])
    overview.add_row("median length", *[f"{a.median_length:g}" for a in analyses])
    console.print(overview)

    def share(n: int, total: int) -> str:
        return f"{n} ({100 * n / total:.1f}%)" if total else "0"

    tools = Table(title="Tool frequency (action steps)", title_justify="left")
    tools.add_column("action")
    for run in runs:
        tools.add_column(run, justify="right")
    names: list[str] = []
    for a in analyses:
        names += [n for n in a.tools if n not in names]
    for name in names:
        tools.add_row(
            safe_markup(name), *[share(a.tools.get(name, 0), a.actions) for a in analyses]
        )
    console.print(tools)

    verdicts = Table(title="Reasoner verdicts", title_justify="left")
    verdicts.add_column("verdict")
    for run in runs:
        verdicts.add_column(run, justify="right")
    judged = [sum(a.verdicts.values()) + a.unjudged for a in analyses]
    for v in VERDICTS:
        verdicts.add_row(
            v,
            *[share(a.verdicts.get(v, 0), t) for a, t in zip(analyses, judged, strict=True)],
        )
    if any(a.unjudged for a in analyses):
        verdicts.add_row(
            "no verdict", *[share(a.unjudged, t) for a, t in zip(analyses, judged, strict=True)]
        )
    console.print(verdicts)


@avis.command("analyze", epilog=EPILOG_AVIS)
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o",
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write into: one subfolder per run with tools.png, positions.png, "
    "verdicts.png, lengths.png, graph.png and analysis.html (the charts inlined, with the "
    "counts as tables; opens from disk).",
)
@store_option
@click.option(
    "--successful-only",
    is_flag=True,
    help="Analyse only the traces of samples answered correctly (see --min-score).",
)
@click.option("--min-score", default=1.0, show_default=True, type=float, help=SCORE_HELP)
def analyze_cmd(
    runs: tuple[str, ...],
    out_dir: Path,
    store_path: Path | None,
    successful_only: bool,
    min_score: float,
) -> None:
    """The paper's analyses (appendix C, figures 6-13) of one or more stored AVIS runs.

    Per run: how often each tool was chosen, overall and as the 1st-4th action; the
    reasoner's verdicts; the length of the action sequences; the induced transition graph
    (how often the planner went from each state to each action, and with what
    probability). Prints the counts side by side and writes the charts under OUT.
    """
    from hammr.avis.analyses import analyze_records
    from hammr.avis.charts import CHARTS, chart_pngs, page_html, section_html

    loaded, _ = _load(store_path, runs)
    analyses: list[AvisAnalysis] = []
    for run, records in loaded.items():
        analysis = analyze_records(
            records, successful_only=successful_only, min_score=min_score, label=run
        )
        if analysis.traces + analysis.unsuccessful:
            analyses.append(analysis)
    if not analyses:
        fail(_why_no_avis_trace(runs, [r for recs in loaded.values() for r in recs], "analyse"))
    for run, records in loaded.items():
        if run not in {a.label for a in analyses}:
            echo(
                f"hammr: warning: run {run!r} holds no AVIS trace ({len(records)} samples of "
                "another system); skipped",
                err=True,
            )
    taken: set[str] = set()
    written: list[Path] = []
    for analysis in analyses:
        run = analysis.label
        if analysis.traces == 0:
            echo(
                f"hammr: warning: run {run!r} has no successful AVIS trace "
                f"(score >= {min_score:g}); its charts are empty",
                err=True,
            )
        folder = out_dir / _slug(run, taken)
        pngs = chart_pngs(analysis)
        page = page_html([section_html(analysis, pngs)], f"AVIS analyses — {run}")
        try:
            for name, data in pngs.items():
                write_output(folder / f"{name}.png", data, what="the PNG file")
            write_output(folder / "analysis.html", page, what="the HTML file")
        except OutputError as e:
            fail(str(e))
        written.append(folder)
    _print_summary(analyses)
    for folder in written:
        echo(
            f"wrote {folder}/analysis.html and {len(CHARTS)} charts "
            f"({', '.join(f'{name}.png' for name, _ in CHARTS)})",
            err=True,
        )


@avis.command("induce", epilog=EPILOG_AVIS)
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o",
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help='The graph file (TOML) to write; then set [avis] graph = "FILE" in hammr.toml.',
)
@store_option
@click.option(
    "--min-count",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Keep a transition state -> action seen at least this many times.",
)
@click.option(
    "--min-prob",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="Keep a transition whose probability P(action | state) is at least this.",
)
@click.option("--min-score", default=1.0, show_default=True, type=float, help=SCORE_HELP)
@click.option(
    "--graph",
    "base_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The graph the runs used, when it declared custom actions ([actions.NAME]): their "
    "declarations are copied into the learned graph (default: the avis.graph the runs "
    "were evaluated with, if that file is still there).",
)
def induce_cmd(
    runs: tuple[str, ...],
    out_path: Path,
    store_path: Path | None,
    min_count: int,
    min_prob: float,
    min_score: float,
    base_path: Path | None,
) -> None:
    """Learn a transition graph from the successful traces of stored AVIS runs.

    Every transition state -> action that the planner took in a successful sample (score
    at least --min-score) counts; those seen at least --min-count times and with
    P(action | state) at least --min-prob become the graph's edges, most frequent first.
    The file is checked like any graph file. To make the planner use it, put

    \b
        [avis]
        graph = "OUT"

    in hammr.toml (or pass it where the AVIS system takes a graph) and evaluate again.
    """
    from hammr.avis.analyses import (
        InduceError,
        induce_graph,
        induced_header,
        is_avis_trace,
        no_action_reason,
        successful_traces,
        transitions_of,
    )
    from hammr.avis.graph import GraphError, load_graph
    from hammr.trace import Trace

    runs = tuple(dict.fromkeys(runs))  # a run named twice is learned from once
    base: TransitionGraph | None = None
    if base_path is not None:
        try:
            base = load_graph(base_path)
        except GraphError as e:
            fail(_one_line(str(e)))
    loaded, recorded = _load(store_path, runs)
    if base is None:
        # the graph the runs were evaluated with, when it is still where they recorded it
        for path in recorded:
            try:
                base = load_graph(path)
                break
            except GraphError:
                continue
    records = [r for recs in loaded.values() for r in recs]
    avis_count = sum(1 for r in records if isinstance(r.trace, Trace) and is_avis_trace(r.trace))
    if not avis_count:
        fail(_why_no_avis_trace(runs, records, "learn from"))
    good = successful_traces(records, min_score)
    if not good:
        fail(_why_none_successful(runs, records, min_score))
    if not transitions_of(good):
        fail(
            f"{_runs_text(runs)}: {no_action_reason(good)}, so there is nothing to induce a "
            f"graph from; see why in `hammr errors {runs[0]}` (or `hammr view`), then evaluate "
            "again with a model that answers the planner with one of the actions it offers "
            "(llm.grammar 'off' lets it write anything) and induce from that run"
        )
    try:
        graph = induce_graph(
            good,
            min_count,
            min_prob,
            base=base,
            description=(
                f"learned from {len(good)} successful traces of {', '.join(runs)} "
                f"(min count {min_count}, min probability {min_prob:g})"
            ),
            source=str(out_path),
        )
    except InduceError as e:
        fail(_one_line(str(e)))
    header = induced_header(
        runs,
        len(good),
        len(records),
        min_count,
        min_prob,
        min_score,
        transitions_of(good),
        when=datetime.now(UTC),
        file=out_path.name,
    )
    try:
        write_output(out_path, graph.to_toml(header), what="the graph file")
    except OutputError as e:
        fail(str(e))
    echo(_edges_text(graph))
    kept = sum(len(t) for t in graph.edges.values())
    echo(
        f"wrote {out_path}: {kept} edges learned from {len(good)} successful traces "
        f"(of {avis_count} AVIS traces)",
        err=True,
    )
    echo(f'use it: put [avis] graph = "{out_path}" in hammr.toml, then evaluate again', err=True)


@avis.command("graph", epilog=EPILOG_AVIS)
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@config_option
def graph_cmd(file: Path | None, config_path: Path | None) -> None:
    """Check a transition graph file and print its edges (default: the bundled graph).

    A graph file is TOML: [edges] maps each state (START or an action) to the actions the
    planner may choose next; [actions.NAME] tables declare custom actions over library
    tools (the built-in ones, and those of the configuration's [[tools.mcp]] servers, which
    are started to list them). The check finds unknown actions, states START cannot reach and
    graphs with no path to an action that can answer; a bad file is one line on stderr and
    exit status 2.
    """
    from hammr.avis.graph import GraphError, default_graph, default_graph_path, load_graph
    from hammr.config import ConfigError, load_config
    from hammr.tools.library import configured_tools

    try:
        if file is None:
            graph = default_graph()
        else:
            tools = [t.name for t in configured_tools(load_config(config_path))]
            graph = load_graph(file, tools)
    except (GraphError, ConfigError) as e:
        fail(_one_line(str(e)))
    where = str(file) if file is not None else f"{default_graph_path()} (bundled)"
    echo(f"graph {where}: valid")
    if graph.description:
        echo(safe_line(f"  {graph.description}"))
    echo(_edges_text(graph))


def _edges_text(graph: TransitionGraph) -> str:
    lines = []
    width = max(len(s) for s in graph.edges)
    for state in graph.states():
        if state in graph.edges:
            lines.append(f"{state:<{width}} -> {', '.join(graph.edges[state]) or '(nothing)'}")
    custom = [s for s in graph.actions.values() if s.tool is not None]
    if custom:
        lines.append("custom actions:")
        for spec in custom:
            answers = "may answer" if spec.answers else "never answers"
            lines.append(f"  {spec.name}: tool {spec.tool}, {spec.phase} phase, {answers}")
    return safe_text("\n".join(lines))  # a graph file's names, for a terminal


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _runs_text(runs: Sequence[str]) -> str:
    return f"run {runs[0]!r}" if len(runs) == 1 else f"runs {', '.join(map(repr, runs))}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _tally(counts: Counter[str]) -> str:
    """'llm_failure 3, timeout 1': most frequent first."""
    return ", ".join(f"{key} {n}" for key, n in counts.most_common())


def _why_no_avis_trace(runs: Sequence[str], records: Sequence[RunRecord], doing: str) -> str:
    """One line: why these runs hold no AVIS trace to ``doing`` (no samples, samples stored
    without a trace, another system's traces), and what to do about it."""
    from hammr.trace import Trace

    where = _runs_text(runs)
    if not records:
        return f"{where} holds no samples yet: nothing to {doing} (evaluate it first)"
    bare = Counter(r.status for r in records if not isinstance(r.trace, Trace))
    others = Counter(r.trace.agent or "?" for r in records if isinstance(r.trace, Trace))
    its = "its" if len(runs) == 1 else "their"
    other_text = f"another system's ({_tally(others)})"
    bare_text = f"kept no trace (status {_tally(bare)})"
    n = sum(others.values()) + sum(bare.values())
    if not bare:
        what = f"{f'{its} sample is' if n == 1 else f'{its} {n} samples are'} {other_text}"
    elif not others:
        what = (
            f"{its} sample {bare_text}"
            if n == 1
            else f"none of {its} {n} samples kept a trace (status {_tally(bare)})"
        )
    else:
        what = (
            f"of {its} {n} samples, {sum(others.values())} are {other_text} and "
            f"{sum(bare.values())} {bare_text}"
        )
    hint = "evaluate with --system avis first" if others else f"see `hammr errors {runs[0]}`"
    return f"no AVIS trace in {where}: {what}; nothing to {doing} ({hint})"


def _why_none_successful(
    runs: Sequence[str], records: Sequence[RunRecord], min_score: float
) -> str:
    """One line: why no AVIS trace of these runs counts as successful; failed samples (an
    LLM that was down) are said as such, not as answers scored too low."""
    from hammr.avis.analyses import is_avis_trace
    from hammr.trace import Trace

    avis = [r for r in records if isinstance(r.trace, Trace) and is_avis_trace(r.trace)]
    failed = Counter(r.status for r in avis if r.status != "finished")
    text = f"no successful trace in {_runs_text(runs)}: "
    if len(failed) and sum(failed.values()) == len(avis):
        return text + (
            f"all {'its' if len(runs) == 1 else 'their'} {_plural(len(avis), 'AVIS trace')} "
            f"ended in failure ({_tally(failed)}); "
            f"see `hammr errors {runs[0]}`, then re-run them with `hammr eval ... --retry-failed`"
        )
    its = "its" if len(runs) == 1 else "their"
    text += f"none of {its} {_plural(len(avis), 'AVIS trace')} scored >= {min_score:g}"
    if failed:
        text += f" ({sum(failed.values())} of them failed: {_tally(failed)})"
    return text + " (lower --min-score to count partly right answers)"
