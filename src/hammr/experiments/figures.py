"""The figures an experiment's HTML report carries, drawn from its stored runs.

Each ``[[figure]]`` becomes an HTML fragment with its pictures inlined as ``data:`` PNGs, by
kind (:data:`hammr.experiments.spec.FIGURE_KINDS`):

* ``avis``: AVIS's analyses of each run's traces (its Figs. 6-13), the charts of
  :mod:`hammr.avis.charts`;
* ``scaling``: MuSEAgent's Fig. 2, accuracy against ``memory.depth`` and ``memory.k`` over
  the figure's runs (:mod:`hammr.eval.scaling`);
* ``shuffle``: MulProg's Fig. 11, grounding and detection before and after shuffling the
  tokens of each run's explanations (:mod:`hammr.experiments.shuffle`).

A figure whose runs are not stored yet says so instead of a picture.
"""

from __future__ import annotations

import base64
import html
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hammr.experiments.spec import Figure
from hammr.input_file import read_input_bytes

if TYPE_CHECKING:
    from hammr.eval.store import RunStore
    from hammr.experiments.report import ExperimentReport


def _e(text: object) -> str:
    return html.escape(str(text))


def png_img(data: bytes, alt: str) -> str:
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return f'<img alt="{_e(alt)}" src="{uri}">'


def _stored_runs(
    store: RunStore | None, report: ExperimentReport, figure: Figure
) -> tuple[list[tuple[str, str]], list[str]]:
    """((run, stored name) for the figure's runs with samples that are results, notes for
    the others: not run, or failed (:func:`hammr.experiments.state.step_states`))."""
    found: list[tuple[str, str]] = []
    notes: list[str] = []
    for run in figure.runs:
        stored = report.stored_name(run)
        state = report.states.get(f"run:{run}")
        if store is None or store.run_info(stored) is None or store.count(stored) == 0:
            why = state.reason if state is not None and state.reason else "not run yet"
            notes.append(f"{run}: {why}")
            continue
        if state is not None and state.status == "failed":  # its samples are failures
            notes.append(f"{run}: failed: {state.reason}")
            continue
        if state is not None and state.status == "partial":
            notes.append(f"{run}: partial ({state.reason})")
        found.append((run, stored))
    return found, notes


def figure_html(
    store: RunStore | None,
    report: ExperimentReport,
    figure: Figure,
    *,
    data_dir: Path | None = None,
    samples: int = 1000,
    seed: int = 0,
) -> str:
    """One figure as an HTML fragment (``<section>``), pictures inlined."""
    runs, notes = _stored_runs(store, report, figure)
    body: list[str] = []
    if store is not None and runs:
        if figure.kind == "avis":
            body += _avis(store, runs, notes)
        elif figure.kind == "scaling":
            body += _scaling(store, runs, notes, samples=samples, seed=seed)
        elif figure.kind == "shuffle":
            body += _shuffle(store, runs, notes, data_dir=data_dir, seed=seed, title=figure.title)
    elif not runs:
        body.append('<p class="muted">No run of this figure is stored yet.</p>')
    out = [
        f'<section class="figure" id="figure-{_e(figure.name)}">',
        f"<h2>{_e(figure.title)}</h2>",
        f'<p class="muted">{_e(figure.source)} · {_e(figure.kind)}</p>',
        *body,
    ]
    if figure.note:
        out.append(f'<p class="muted">{_e(figure.note)}</p>')
    if notes:
        out.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def _avis(store: RunStore, runs: list[tuple[str, str]], notes: list[str]) -> list[str]:
    from hammr.avis.analyses import analyze_records
    from hammr.avis.charts import CSS, chart_pngs, section_html

    out = [f"<style>{CSS}</style>"]
    for run, stored in runs:
        analysis = analyze_records(store.records(stored, limit=None), label=stored)
        if analysis.traces == 0:
            notes.append(f"{run}: no AVIS trace among its {analysis.samples} samples")
            continue
        out.append(section_html(analysis, chart_pngs(analysis), heading=f"AVIS analyses: {run}"))
    return out


def _scaling(
    store: RunStore,
    runs: list[tuple[str, str]],
    notes: list[str],
    *,
    samples: int,
    seed: int,
) -> list[str]:
    from hammr.eval.scaling import FIGURES, plot_scaling, scaling_series

    out: list[str] = []
    names = [stored for _, stored in runs]
    with tempfile.TemporaryDirectory(prefix="hammr-scaling-") as tmp:
        for key, stem in FIGURES:
            plot = scaling_series(store, names, key, samples=samples, seed=seed)
            notes += plot.notes
            path = plot_scaling(plot, Path(tmp) / f"{stem}.png", title=f"{stem}: accuracy vs {key}")
            out.append(f"<h3>{_e(stem)}</h3>")
            out.append(png_img(read_input_bytes(path), f"accuracy against {key}"))
    return out


def _shuffle(
    store: RunStore,
    runs: list[tuple[str, str]],
    notes: list[str],
    *,
    data_dir: Path | None,
    seed: int,
    title: str,
) -> list[str]:
    from hammr.backends.llm.base import run_sync
    from hammr.eval.explain_cli import explain_records, root_image_size
    from hammr.experiments.report import run_references
    from hammr.experiments.shuffle import ShuffleScores, shuffle_png, shuffle_scores

    found: dict[str, ShuffleScores] = {}
    for run, stored in runs:
        info = store.run_info(stored)
        assert info is not None
        refs, why = run_references(info, data_dir)
        if not refs:
            notes.append(f"{run}: {why}")
            continue
        explained = run_sync(explain_records(store.records(stored, limit=None), None))
        sizes = {}
        for e in explained:
            size = root_image_size(e.record.trace) if e.record.trace is not None else None
            if size is not None:
                sizes[e.key] = size
        scores = shuffle_scores(explained, refs, seed=seed, image_sizes=sizes)
        if not scores.samples:
            notes.append(f"{run}: none of its samples has a reference explanation")
            continue
        found[run] = scores
    if not found:
        return []
    rows = "".join(
        f"<tr><th>{_e(run)}</th><td>{s.samples}</td>"
        f"<td>{100 * s.grounding:.1f}</td><td>{100 * s.shuffled_grounding:.1f}</td>"
        f"<td>{100 * s.detection:.1f}</td><td>{100 * s.shuffled_detection:.1f}</td></tr>"
        for run, s in found.items()
    )
    return [
        png_img(shuffle_png(found, title=title), "grounding and detection, shuffled or not"),
        '<table class="exp"><thead><tr><th></th><th>samples</th><th>grounding</th>'
        "<th>grounding, shuffled</th><th>detection</th><th>detection, shuffled</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>",
        f'<p class="muted">Tokens shuffled with seed {seed}; boxes stay with their [BOX] '
        "tokens in order.</p>",
    ]


def figures_html(
    store: RunStore | None,
    report: ExperimentReport,
    *,
    data_dir: Path | None = None,
    samples: int = 1000,
    seed: int = 0,
) -> list[str]:
    """Every figure of the report's experiment, as :func:`figure_html` fragments."""
    return [
        figure_html(store, report, f, data_dir=data_dir, samples=samples, seed=seed)
        for f in report.experiment.figures
    ]


__all__ = ["figure_html", "figures_html", "png_img"]
