"""AVIS's analyses as pictures (PNG) and as a small self-contained HTML page.

One chart per analysis of :class:`~hammr.avis.analyses.AvisAnalysis`: tool frequency
(Fig. 6), the action chosen at positions 1-4 as a 2x2 grid (Figs. 7-10), the reasoner's
verdicts (Fig. 12), the length of the action sequences (Fig. 13) and the induced graph
(Fig. 11, drawn with networkx: a node per state, edge width by count, edge label the
transition probability). Matplotlib's object-oriented API draws them on the Agg canvas (no
window, no pyplot state); the layout is fixed, so the same analysis gives the same picture.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import networkx as nx
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hammr.avis.analyses import VERDICTS, AvisAnalysis
from hammr.avis.graph import BUILTIN_ACTIONS, START
from hammr.output_file import write_output

CHARTS: tuple[tuple[str, str], ...] = (
    ("tools", "Tool frequency"),
    ("positions", "Tool at positions 1-4"),
    ("verdicts", "Reasoner verdicts"),
    ("lengths", "Action sequence lengths"),
    ("graph", "Induced transition graph"),
)
"""Every chart: (file stem, caption), in the order pages show them."""

_PALETTE = (
    "#4C72B0",
    "#55A868",
    "#C44E52",
    "#8172B2",
    "#CCB974",
    "#64B5CD",
    "#DD8452",
    "#937860",
    "#DA8BC3",
    "#8C8C8C",
)
_VERDICT_COLOURS = {"not_informative": "#C44E52", "informative": "#4C72B0", "answerable": "#55A868"}
_PHASE_COLOURS = {"visual": "#A6C8E8", "knowledge": "#B8E0B0"}
DPI = 100


def _colours(names: Sequence[str]) -> dict[str, str]:
    """One colour per action, the same in every chart: built-ins by their fixed order, the
    others after them by name."""
    builtin = list(BUILTIN_ACTIONS)
    others = sorted(n for n in names if n not in BUILTIN_ACTIONS)
    out = {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(builtin)}
    out.update({n: _PALETTE[(len(builtin) + i) % len(_PALETTE)] for i, n in enumerate(others)})
    return out


def _tx(text: str) -> str:
    """Text matplotlib draws as written ('$' would start its math mode)."""
    return text.replace("$", r"\$")


def _title(analysis: AvisAnalysis, what: str) -> str:
    label = f" — {_tx(analysis.label)}" if analysis.label else ""
    only = ", successful only" if analysis.successful_only else ""
    return f"{what}{label}\n({analysis.traces} AVIS traces{only})"


def _no_data(ax: Axes, text: str = "no action steps") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def _hbars(
    ax: Axes, counts: Mapping[str, int], colours: Mapping[str, str], *, xlabel: str = "times"
) -> None:
    """Horizontal bars, the most frequent on top, each labelled with count and share."""
    if not counts or not sum(counts.values()):
        _no_data(ax)
        return
    names = list(counts)
    values = [counts[n] for n in names]
    total = sum(values)
    ys = list(range(len(names)))
    ax.barh(ys, values, color=[colours.get(n, _PALETTE[-1]) for n in names])
    ax.set_yticks(ys, labels=[_tx(n) for n in names])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, max(values) * 1.3)
    for y, v in zip(ys, values, strict=True):
        ax.text(v, y, f" {v} ({100 * v / total:.0f}%)", va="center", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def tools_figure(analysis: AvisAnalysis) -> Figure:
    """Fig. 6: how often each action was chosen, over every action step."""
    fig = _figure(8, 4.5)
    ax = fig.add_subplot()
    _hbars(ax, analysis.tools, _colours(list(analysis.tools)), xlabel="action steps")
    ax.set_ylabel("action")
    ax.set_title(_title(analysis, "Tool frequency"))
    fig.tight_layout()
    return fig


def positions_figure(analysis: AvisAnalysis) -> Figure:
    """Figs. 7-10: the action chosen first, second, third and fourth, as a 2x2 grid."""
    shown = analysis.positions[:4]
    fig = _figure(12, 8)
    colours = _colours(list(analysis.tools))
    ordinals = ("1st", "2nd", "3rd", "4th")
    for i in range(4):
        ax = fig.add_subplot(2, 2, i + 1)
        counts = shown[i] if i < len(shown) else {}
        traces = sum(counts.values())
        _hbars(ax, counts, colours, xlabel="traces")
        ax.set_title(f"{ordinals[i]} action ({traces} traces went this far)")
    fig.suptitle(_title(analysis, "Tool at positions 1-4"))
    fig.tight_layout()
    return fig


def verdicts_figure(analysis: AvisAnalysis) -> Figure:
    """Fig. 12: the reasoner's labels of the action outputs."""
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    counts = dict(analysis.verdicts)
    if analysis.unjudged:
        counts["no verdict"] = analysis.unjudged
    total = sum(counts.values())
    if not total:
        _no_data(ax)
    else:
        names = list(counts)
        xs = list(range(len(names)))
        values = [counts[n] for n in names]
        ax.bar(xs, values, color=[_VERDICT_COLOURS.get(n, "#8C8C8C") for n in names])
        ax.set_xticks(xs, labels=[n.replace("_", " ") for n in names])
        ax.set_ylim(0, max(values) * 1.2)
        for x, v in zip(xs, values, strict=True):
            ax.text(x, v, f"{v}\n({100 * v / total:.1f}%)", ha="center", va="bottom", fontsize=9)
        ax.set_xlabel("reasoner verdict")
        ax.set_ylabel("action steps")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    ax.set_title(_title(analysis, "Reasoner verdicts"))
    fig.tight_layout()
    return fig


def lengths_figure(analysis: AvisAnalysis) -> Figure:
    """Fig. 13: how many action steps the traces took (every length from 0 to the longest)."""
    fig = _figure(8, 4.5)
    ax = fig.add_subplot()
    if not analysis.lengths:
        _no_data(ax, "no AVIS traces")
    else:
        top = max(analysis.lengths)
        xs = list(range(top + 1))
        values = [analysis.lengths.get(x, 0) for x in xs]
        ax.bar(xs, values, color=_PALETTE[0], width=0.8)
        ax.set_xticks(xs)
        ax.set_ylim(0, max(values) * 1.2)
        for x, v in zip(xs, values, strict=True):
            if v:
                ax.text(x, v, str(v), ha="center", va="bottom", fontsize=9)
        ax.axvline(analysis.mean_length, color="#C44E52", linestyle="--", linewidth=1.2)
        ax.text(
            analysis.mean_length,
            max(values) * 1.12,
            f" mean {analysis.mean_length:.2f}, median {analysis.median_length:g}",
            color="#C44E52",
            fontsize=9,
        )
        ax.set_xlabel("action steps in the trace")
        ax.set_ylabel("traces")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    ax.set_title(_title(analysis, "Action sequence length"))
    fig.tight_layout()
    return fig


def graph_figure(analysis: AvisAnalysis) -> Figure:
    """Fig. 11: the induced graph. Nodes on a circle, START first and then the actions in
    graph order (visual ones, then knowledge ones), coloured by phase; an edge per
    transition seen, as wide as it is frequent, labelled P(action | state)."""
    fig = _figure(10, 8.5)
    ax = fig.add_subplot()
    ax.set_title(_title(analysis, "Induced transition graph (edge label: P(action | state))"))
    if not analysis.transitions:
        _no_data(ax)
        return fig
    g = nx.DiGraph()
    states = analysis.states()
    g.add_nodes_from(states)
    top = max(t.count for t in analysis.transitions)
    for t in analysis.transitions:
        g.add_edge(t.state, t.action, count=t.count, probability=t.probability)
    # on a circle: START on the left, the rest clockwise in graph order (a fixed layout,
    # no random seed involved)
    pos = {
        n: (
            math.cos(math.pi - 2 * math.pi * i / len(states)),
            math.sin(math.pi - 2 * math.pi * i / len(states)),
        )
        for i, n in enumerate(states)
    }

    def colour(n: str) -> str:
        if n == START:
            return "#DDDDDD"
        spec = BUILTIN_ACTIONS.get(n)
        return _PHASE_COLOURS[spec.phase] if spec is not None else "#F2D0A4"

    nx.draw_networkx_nodes(
        g,
        pos,
        ax=ax,
        node_color=[colour(n) for n in g.nodes],
        node_size=3200,
        edgecolors="#555555",
    )

    def label(n: str) -> str:
        text = _tx(n).replace("_", "\n")
        if g.has_edge(n, n):  # a self-loop reads better inside its node than as an arc
            text += f"\n↻ {g.edges[n, n]['probability']:.2f}"
        return text

    nx.draw_networkx_labels(g, pos, ax=ax, labels={n: label(n) for n in g.nodes}, font_size=9)
    others = [(u, v) for u, v in g.edges if u != v]
    widths = {e: 1.0 + 6.0 * g.edges[e]["count"] / top for e in g.edges}
    style = "arc3,rad=0.12"
    nx.draw_networkx_edges(
        g,
        pos,
        ax=ax,
        edgelist=others,
        width=[widths[e] for e in others],
        edge_color="#444444",
        alpha=0.75,
        arrowsize=16,
        node_size=3200,
        connectionstyle=style,
    )
    nx.draw_networkx_edge_labels(
        g,
        pos,
        ax=ax,
        edge_labels={(u, v): f"{g.edges[u, v]['probability']:.2f}" for u, v in others},
        font_size=8,
        label_pos=0.35,
        connectionstyle=style,
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
    )
    ax.text(
        0.0,
        -0.02,
        "grey: START   blue: visual actions   green: knowledge actions   orange: custom   "
        f"↻: the action again   widest edge: {top} transitions",
        transform=ax.transAxes,
        fontsize=8,
        color="#444444",
    )
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.3, 1.4)
    ax.set_axis_off()
    fig.tight_layout()
    return fig


_FIGURES = {
    "tools": tools_figure,
    "positions": positions_figure,
    "verdicts": verdicts_figure,
    "lengths": lengths_figure,
    "graph": graph_figure,
}


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def chart_pngs(analysis: AvisAnalysis) -> dict[str, bytes]:
    """Every chart of :data:`CHARTS` as PNG bytes, by file stem."""
    return {name: png_bytes(_FIGURES[name](analysis)) for name, _ in CHARTS}


def write_charts(analysis: AvisAnalysis, out_dir: str | Path) -> dict[str, Path]:
    """Write every chart as ``OUT_DIR/<stem>.png``; returns the paths by stem. OutputError
    when one cannot be written (see :mod:`hammr.output_file`)."""
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    for name, data in chart_pngs(analysis).items():
        path = out / f"{name}.png"
        write_output(path, data, what="the PNG file")
        paths[name] = path
    return paths


# -- HTML ------------------------------------------------------------------------------------

CSS = """
.avis-analysis { font: 14px/1.45 system-ui, sans-serif; color: #1f2937; }
.avis-analysis h2 { font-size: 18px; margin: 18px 0 6px; }
.avis-analysis h3 { font-size: 15px; margin: 14px 0 4px; }
.avis-analysis table { border-collapse: collapse; margin: 4px 16px 10px 0; display: inline-table;
  vertical-align: top; }
.avis-analysis th, .avis-analysis td { border: 1px solid #d1d5db; padding: 2px 8px;
  text-align: left; }
.avis-analysis td.n { text-align: right; font-variant-numeric: tabular-nums; }
.avis-analysis img { max-width: 100%; height: auto; display: block; margin: 6px 0 14px; }
.avis-analysis .muted { color: #6b7280; }
"""
"""The style :func:`section_html`'s fragments expect."""


def _e(text: object) -> str:
    return html.escape(str(text))


def _table(caption: str, head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = []
    for row in rows:
        tds = [f"<td>{_e(row[0])}</td>"] + [f'<td class="n">{_e(c)}</td>' for c in row[1:]]
        body.append(f"<tr>{''.join(tds)}</tr>")
    return (
        f"<table><caption>{_e(caption)}</caption><thead><tr>{cells}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _share(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "-"


def summary_line(analysis: AvisAnalysis) -> str:
    """One sentence: what was analysed and what was left out."""
    parts = [f"{analysis.traces} AVIS traces analysed"]
    if analysis.successful is not None:
        parts.append(
            f"{analysis.successful} of {analysis.traces + analysis.unsuccessful} successful "
            f"(score >= {analysis.min_score:g})"
        )
    if analysis.unsuccessful:
        parts.append(f"{analysis.unsuccessful} unsuccessful left out")
    if analysis.skipped:
        parts.append(f"{analysis.skipped} samples without an AVIS trace skipped")
    parts.append(f"{analysis.actions} action steps")
    if analysis.lengths:
        parts.append(f"length mean {analysis.mean_length:.2f}, median {analysis.median_length:g}")
    return "; ".join(parts)


def tables_html(analysis: AvisAnalysis) -> str:
    """The counts behind the charts as HTML tables."""
    total = analysis.actions
    parts = [
        _table(
            "Tool frequency",
            ["action", "steps", "share"],
            [(n, v, _share(v, total)) for n, v in analysis.tools.items()],
        )
    ]
    names = list(analysis.tools)
    parts.append(
        _table(
            "Tool at position",
            ["action", *[f"#{i + 1}" for i in range(len(analysis.positions))]],
            [(n, *[p.get(n, 0) for p in analysis.positions]) for n in names],
        )
    )
    judged = sum(analysis.verdicts.values()) + analysis.unjudged
    verdict_rows: list[tuple[object, ...]] = [
        (v, analysis.verdicts.get(v, 0), _share(analysis.verdicts.get(v, 0), judged))
        for v in VERDICTS
    ]
    if analysis.unjudged:
        verdict_rows.append(("no verdict", analysis.unjudged, _share(analysis.unjudged, judged)))
    parts.append(_table("Reasoner verdicts", ["verdict", "steps", "share"], verdict_rows))
    parts.append(
        _table(
            "Sequence length",
            ["action steps", "traces"],
            [(k, v) for k, v in analysis.lengths.items()],
        )
    )
    parts.append(
        _table(
            "Induced transitions",
            ["state → action", "count", "P(action | state)"],
            [
                (f"{t.state} → {t.action}", t.count, f"{t.probability:.3f}")
                for t in analysis.transitions
            ],
        )
    )
    return "\n".join(parts)


def comparison_html(analyses: Sequence[AvisAnalysis]) -> str:
    """Several runs side by side (a column each): traces, successes, length, verdict and
    tool shares; for comparing e.g. a hand-written graph's run with a learned graph's."""
    head = ["", *[a.label for a in analyses]]
    rows: list[list[object]] = [
        ["AVIS traces", *[a.traces for a in analyses]],
        [
            "successful",
            *["-" if a.successful is None else _share(a.successful, a.traces) for a in analyses],
        ],
        ["action steps", *[a.actions for a in analyses]],
        ["mean length", *[f"{a.mean_length:.2f}" for a in analyses]],
        ["median length", *[f"{a.median_length:g}" for a in analyses]],
    ]
    for v in VERDICTS:
        rows.append(
            [
                v,
                *[
                    _share(a.verdicts.get(v, 0), sum(a.verdicts.values()) + a.unjudged)
                    for a in analyses
                ],
            ]
        )
    names: list[str] = []
    for a in analyses:
        names += [n for n in a.tools if n not in names]
    rows += [[n, *[_share(a.tools.get(n, 0), a.actions) for a in analyses]] for n in names]
    return '<div class="avis-analysis">' + _table("Runs compared", head, rows) + "</div>"


def section_html(
    analysis: AvisAnalysis, pngs: Mapping[str, bytes], *, heading: str | None = None
) -> str:
    """One run's analyses as an HTML fragment (charts inlined as data: URIs, then tables),
    inside ``<div class="avis-analysis">``; style it with :data:`CSS` (or :func:`page_html`)."""
    title = heading if heading is not None else f"AVIS analyses — {analysis.label}"
    out = [
        '<div class="avis-analysis">',
        f"<h2>{_e(title)}</h2>",
        f'<p class="muted">{_e(summary_line(analysis))}</p>',
    ]
    for name, caption in CHARTS:
        data = pngs.get(name)
        if data is None:
            continue
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        out.append(f"<h3>{_e(caption)}</h3>")
        out.append(f'<img alt="{_e(caption)}" src="{uri}">')
    out += ["<h3>Counts</h3>", tables_html(analysis)]
    out.append("</div>")
    return "\n".join(out)


def page_html(sections: Sequence[str], title: str) -> str:
    """A complete self-contained page of :func:`section_html` fragments."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n"
        '<body class="avis-analysis">\n' + "\n".join(sections) + "\n</body></html>\n"
    )
