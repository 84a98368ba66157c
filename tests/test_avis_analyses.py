"""AVIS's analyses from stored runs (hammr.avis.analyses), their charts (hammr.avis.charts),
the learned graph, `hammr avis analyze|induce|graph` and the AVIS section of `hammr report
--html`.

Traces are built by hand from action sequences (state, action, verdict) and stored in a real
RunStore; every expected figure is counted here from those sequences, not from the traces."""

from __future__ import annotations

import base64
import io
import re
import statistics
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from hammr.avis.analyses import (
    VERDICTS,
    InduceError,
    analyze,
    analyze_records,
    induce_graph,
    induced_header,
    is_avis_document,
    is_avis_trace,
    successful_traces,
    transitions_of,
)
from hammr.avis.charts import CHARTS, chart_pngs, section_html, write_charts
from hammr.avis.graph import START, GraphError, load_graph, parse_graph
from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace

Spec = list[tuple[str, str, str | None]]

# (score, action sequence): what the planner chose at which state, and the reasoner's verdict
# (None: the step got none). A not_informative step leaves the state where it was.
AVIS_SAMPLES: list[tuple[float, Spec]] = [
    (
        1.0,
        [
            (START, "object_select", "informative"),
            ("object_select", "vqa", "informative"),
            ("vqa", "web_search", "informative"),
            ("web_search", "llm_qa", "answerable"),
        ],
    ),
    (
        1.0,
        [
            (START, "object_select", "informative"),
            ("object_select", "image_search", "not_informative"),
            ("object_select", "vqa", "informative"),
            ("vqa", "llm_qa", "answerable"),
            ("llm_qa", "web_search", None),
        ],
    ),
    (
        0.0,
        [
            (START, "vqa", "not_informative"),
            (START, "identical_image_search", "informative"),
            ("identical_image_search", "web_search", "answerable"),
        ],
    ),
    (1.0, [(START, "vqa", "informative"), ("vqa", "llm_qa", "answerable")]),
    (
        0.0,
        [
            (START, "image_search", "informative"),
            ("image_search", "web_search", "not_informative"),
            ("image_search", "llm_qa", "informative"),
            ("llm_qa", "web_search", "informative"),
            ("web_search", "llm_qa", "answerable"),
            ("llm_qa", "llm_qa", "not_informative"),
        ],
    ),
    (0.5, [(START, "object_select", "informative"), ("object_select", "vqa", "answerable")]),
    (0.0, []),  # ended before its first action (e.g. DECOMPOSE failed)
]
RUN = "avis-hand"
OTHER = "naive-run"


def avis_trace(spec: Spec, *, forced: bool = False) -> Trace:
    """An AVIS trace as the system lays it out: DECOMPOSE, CONTEXT, the action steps, and
    (``forced``) a last ANSWER step."""
    t = Trace(agent="AVIS", question="Which country is this building in?", model="m")
    t.steps.append(
        Step(index=0, tool="DECOMPOSE", output={"visual": "what building?", "knowledge": "#"})
    )
    t.steps.append(
        Step(index=1, tool="CONTEXT", router="code", output={"objects": [], "missing": []})
    )
    for state, action, verdict in spec:
        t.steps.append(
            Step(
                index=len(t.steps),
                tool=action,
                state=state,
                candidates=[action, "vqa"],
                arguments={"query": "what is it?"},
                verdict=verdict,  # type: ignore[arg-type]
                reasoner=f"verdict: {verdict}",
                backtrack=verdict == "not_informative",
                calls=2,
            )
        )
    if forced or not spec:
        t.steps.append(Step(index=len(t.steps), tool="ANSWER", forced=True, finish="Austria"))
    else:
        t.steps[-1].finish = "Austria"
    t.answer, t.status = "Austria", "finished"
    return t


def other_trace() -> Trace:
    """Another system's trace, with tool steps of its own (never counted)."""
    t = Trace(agent="NaiveAgent", question="q", answer="2", status="finished")
    t.steps.append(Step(index=0, action="b = DetectObjects(image)", tool="DetectObjects"))
    t.steps.append(Step(index=1, finish="2"))
    return t


def record(run: str, i: int, score: float, trace: Trace | None) -> RunRecord:
    return RunRecord(
        run=run,
        sample_id=f"s{i}",
        dataset="infoseek",
        question_type="",
        question=f"question {i}",
        answers=("Austria",),
        prediction="Austria" if score else "Spain",
        score=score,
        trace=trace,
    )


def fill(path: Path) -> Path:
    """The AVIS run (with one non-AVIS trace and one sample without a trace among it) and a
    run of another system."""
    with RunStore(path) as store:
        store.open_run(RUN, "infoseek", "avis")
        for i, (score, spec) in enumerate(AVIS_SAMPLES):
            store.add(record(RUN, i, score, avis_trace(spec, forced=i == 1)))
        store.add(record(RUN, 100, 1.0, other_trace()))
        store.add(record(RUN, 101, 1.0, None))
        store.open_run(OTHER, "infoseek", "naive")
        for i in range(3):
            store.add(record(OTHER, i, 1.0, other_trace()))
    return path


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return fill(tmp_path / "runs.sqlite")


def stored(path: Path, run: str = RUN) -> list[RunRecord]:
    with RunStore(path) as store:
        return store.records(run, limit=None)


# -- counted independently from the specs ----------------------------------------------------


def expected(specs: list[Spec]) -> dict[str, Any]:
    trans = Counter((s, a) for spec in specs for s, a, _ in spec)
    per_state = Counter(s for spec in specs for s, _, _ in spec)
    return {
        "tools": Counter(a for spec in specs for _, a, _ in spec),
        "positions": [Counter(spec[i][1] for spec in specs if len(spec) > i) for i in range(4)],
        "verdicts": Counter(v for spec in specs for *_, v in spec if v is not None),
        "unjudged": sum(1 for spec in specs for *_, v in spec if v is None),
        "lengths": Counter(len(spec) for spec in specs),
        "transitions": trans,
        "probabilities": {k: n / per_state[k[0]] for k, n in trans.items()},
        "mean": statistics.mean(len(spec) for spec in specs),
        "median": statistics.median(len(spec) for spec in specs),
    }


def check(analysis: Any, specs: list[Spec]) -> None:
    want = expected(specs)
    assert analysis.traces == len(specs)
    assert analysis.tools == want["tools"]
    counts = list(analysis.tools.values())
    assert counts == sorted(counts, reverse=True)  # most frequent first
    assert len(analysis.positions) == 4
    for got, wanted in zip(analysis.positions, want["positions"], strict=True):
        assert got == wanted
    assert list(analysis.verdicts) == list(VERDICTS)  # every verdict, in the paper's order
    assert {k: v for k, v in analysis.verdicts.items() if v} == want["verdicts"]
    assert analysis.unjudged == want["unjudged"]
    assert analysis.lengths == want["lengths"]
    assert list(analysis.lengths) == sorted(analysis.lengths)
    assert analysis.actions == sum(len(s) for s in specs)
    assert analysis.transition_counts() == want["transitions"]
    for (state, action), p in want["probabilities"].items():
        assert analysis.probability(state, action) == pytest.approx(p)
    for state in {s for s, _ in want["transitions"]}:
        total = sum(t.probability for t in analysis.transitions if t.state == state)
        assert total == pytest.approx(1.0)
    assert analysis.mean_length == pytest.approx(want["mean"])
    assert analysis.median_length == pytest.approx(want["median"])


def test_every_count_matches_the_stored_traces(store_path: Path) -> None:
    records = stored(store_path)
    assert len(records) == len(AVIS_SAMPLES) + 2
    analysis = analyze_records(records, label=RUN)
    check(analysis, [spec for _, spec in AVIS_SAMPLES])
    assert analysis.skipped == 2  # the other agent's trace and the sample without one
    assert analysis.samples == len(records)
    assert analysis.successful == sum(1 for s, _ in AVIS_SAMPLES if s >= 1)
    assert analysis.min_score == 1.0 and analysis.label == RUN
    # DECOMPOSE, CONTEXT and the forced ANSWER are no actions
    assert not {"DECOMPOSE", "CONTEXT", "ANSWER"} & set(analysis.tools)
    # transitions: states START first, then in graph order
    states = [t.state for t in analysis.transitions]
    assert states[0] == START and states.count(START) == 4
    # a run of another system only: nothing analysed, all skipped
    none = analyze_records(stored(store_path, OTHER))
    assert (none.traces, none.skipped, none.actions, none.transitions) == (0, 3, 0, ())


def test_bare_traces_and_which_traces_are_avis() -> None:
    traces = [avis_trace(spec) for _, spec in AVIS_SAMPLES]
    analysis = analyze([*traces, other_trace(), None])
    check(analysis, [spec for _, spec in AVIS_SAMPLES])
    assert analysis.skipped == 2 and analysis.successful is None and analysis.min_score is None
    # the AVIS agent with no action step is AVIS; another agent with state steps is too
    empty = avis_trace([])
    renamed = replace(avis_trace(AVIS_SAMPLES[0][1]), agent="AVIS-autonomous")
    for t, avis in ((empty, True), (renamed, True), (other_trace(), False)):
        assert is_avis_trace(t) is avis
        assert is_avis_document(t.to_dict()) is avis
    assert not is_avis_document(None) and not is_avis_document([1])
    with pytest.raises(ValueError, match="positions"):
        analyze(traces, positions=0)
    more = analyze(traces, positions=6)
    assert len(more.positions) == 6
    assert more.positions[5] == Counter(s[5][1] for _, s in AVIS_SAMPLES if len(s) > 5)


def test_successful_only_keeps_the_samples_at_or_above_the_threshold(store_path: Path) -> None:
    records = stored(store_path)
    for threshold in (1.0, 0.5):
        kept = [spec for score, spec in AVIS_SAMPLES if score >= threshold]
        analysis = analyze_records(records, successful_only=True, min_score=threshold)
        check(analysis, kept)
        assert analysis.unsuccessful == len(AVIS_SAMPLES) - len(kept)
        assert analysis.successful == len(kept) and analysis.successful_only
        assert analysis.skipped == 2
        assert [t.to_dict() for t in successful_traces(records, threshold)] == [
            avis_trace(spec, forced=i == 1).to_dict()
            for i, (score, spec) in enumerate(AVIS_SAMPLES)
            if score >= threshold
        ]


# -- the learned graph -------------------------------------------------------------------------


def ranked_edges(specs: list[Spec], keep: Any) -> dict[str, list[str]]:
    """Each state's kept actions, most frequent first (ties by name)."""
    want = expected(specs)
    out: dict[str, list[str]] = {}
    for (state, action), n in sorted(
        want["transitions"].items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])
    ):
        if keep(n, want["probabilities"][state, action]):
            out.setdefault(state, []).append(action)
    return out


def test_induce_learns_the_successful_transitions(store_path: Path, tmp_path: Path) -> None:
    records = stored(store_path)
    good = successful_traces(records)
    specs = [spec for score, spec in AVIS_SAMPLES if score >= 1]
    graph = induce_graph(good)
    assert {s: list(a) for s, a in graph.edges.items()} == ranked_edges(specs, lambda n, p: True)
    # thresholds: a count, a probability (checked against the counts made here)
    two = induce_graph(good, min_count=2)
    assert {s: list(a) for s, a in two.edges.items()} == ranked_edges(specs, lambda n, p: n >= 2)
    assert two.edges == {START: ("object_select",), "object_select": ("vqa",), "vqa": ("llm_qa",)}
    half = induce_graph(good, min_prob=0.5)
    want = ranked_edges(specs, lambda n, p: p >= 0.5)
    assert {s: list(a) for s, a in half.edges.items()} == want
    # written with a header, read back by load_graph: the same graph
    header = induced_header(
        [RUN], len(good), len(records), 2, 0.0, transitions=transitions_of(good),
        when=datetime(2026, 11, 22, tzinfo=UTC), file="learned.toml",
    )  # fmt: skip
    path = tmp_path / "learned.toml"
    path.write_text(two.to_toml(header))
    loaded = load_graph(path)
    assert loaded == replace(two, source=str(path))
    text = path.read_text()
    assert f"# runs: {RUN}" in text and "2026-11-22" in text
    assert f"# traces: {len(good)} successful (score >= 1) of {len(records)} samples" in text
    assert "# thresholds: min count 2, min probability 0" in text
    assert "#   START -> object_select: 2, 0.667" in text  # every transition seen, counted
    assert '[avis] graph = "learned.toml"' in text


def test_induce_explains_why_no_graph_comes_out(store_path: Path) -> None:
    good = successful_traces(stored(store_path))
    with pytest.raises(InduceError, match="no successful AVIS trace"):
        induce_graph([])
    with pytest.raises(InduceError, match="no successful AVIS trace"):
        induce_graph([other_trace(), None])
    with pytest.raises(InduceError, match="threshold too high: START keeps no edge") as e:
        induce_graph(good, min_count=3)
    assert "START -> object_select, was seen 2 times" in str(e.value)
    assert isinstance(e.value, GraphError)
    with pytest.raises(InduceError, match="threshold too high"):
        induce_graph(good, min_prob=0.9)
    with pytest.raises(InduceError, match=r"no action was ever chosen .* first step"):
        induce_graph([avis_trace([])])
    # nothing left that can answer: object_select alone never answers
    with pytest.raises(InduceError, match=r"not usable: .*no path to an answer"):
        induce_graph([avis_trace([(START, "object_select", "informative")])])
    with pytest.raises(ValueError, match="min_count"):
        induce_graph(good, min_count=0)
    with pytest.raises(ValueError, match="min_prob"):
        induce_graph(good, min_prob=1.5)


def planner_failed(trace: Trace, state: str = START, kind: str = "no_action") -> Trace:
    """``trace`` with a step where the planner's reply named no action it was offered (as
    the AVIS system records it: the state, no tool, the error)."""
    index = next(i for i, s in enumerate(trace.steps) if s.tool not in ("DECOMPOSE", "CONTEXT"))
    failed = Step(
        index=index,
        state=state,
        candidates=["object_select", "vqa"],
        calls=1,
        raw="I think the answer is Austria.",
        error_kind=kind,
        error="the planner wrote no 'Action:' line; candidates: object_select, vqa",
    )
    trace.steps.insert(index, failed)
    for i, s in enumerate(trace.steps):
        s.index = i
    return trace


def test_a_step_where_the_planner_chose_nothing_is_no_transition() -> None:
    # a planner that never named an action: nothing was chosen, and induce says so
    never = planner_failed(planner_failed(avis_trace([])), kind="unknown_tool")
    assert transitions_of([never]) == ()
    with pytest.raises(InduceError) as caught:
        induce_graph([never])
    text = str(caught.value)
    assert text == (  # error kinds most frequent first, ties in the order they came
        "no action was ever chosen in the 1 successful AVIS trace: the planner was asked 2 "
        "times and its reply never named an action (unknown_tool 1, no_action 1), so there "
        "is nothing to learn a graph from"
    )
    assert "?" not in text
    # a failed try before a chosen action: only the chosen one is a transition
    spec: Spec = [(START, "vqa", "informative"), ("vqa", "llm_qa", "answerable")]
    mixed = planner_failed(avis_trace(spec))
    assert [(t.state, t.action, t.count) for t in transitions_of([mixed])] == [
        (START, "vqa", 1),
        ("vqa", "llm_qa", 1),
    ]
    assert induce_graph([mixed]).edges == {START: ("vqa",), "vqa": ("llm_qa",)}


def test_avis_induce_on_a_run_whose_planner_never_chose_says_what_happened(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        store.open_run("avis-small", "infoseek", "avis")
        for i in range(2):  # answered from the best evidence, after the planner failed
            store.add(record("avis-small", i, 1.0, planner_failed(avis_trace([], forced=True))))
    out = tmp_path / "learned.toml"
    r = invoke(["avis", "induce", "avis-small", "-o", str(out), "--store", str(path)])
    assert r.exit_code == 2 and r.stdout == "" and not out.exists()
    assert r.stderr.count("\n") == 1
    line = r.stderr
    assert "[actions." not in line and "'?'" not in line
    assert line.startswith(
        "hammr: error: run 'avis-small': no action was ever chosen in the 2 successful AVIS "
        "traces: the planner was asked 2 times and its reply never named an action "
        "(no_action 2), so there is nothing to induce a graph from; see why in "
        "`hammr errors avis-small`"
    )
    assert "evaluate again" in line


def test_induce_drops_states_the_kept_edges_no_longer_reach() -> None:
    traces = [
        avis_trace(
            [
                (START, "vqa", "informative"),
                ("vqa", "image_search", "informative"),
                ("image_search", "llm_qa", "answerable"),
            ]
        ),
        avis_trace([(START, "vqa", "informative"), ("vqa", "llm_qa", "answerable")]),
        avis_trace([(START, "vqa", "informative"), ("vqa", "llm_qa", "answerable")]),
    ]
    # vqa -> image_search has P = 1/3: dropped, so image_search's own edge goes with it
    graph = induce_graph(traces, min_prob=0.5)
    assert graph.edges == {START: ("vqa",), "vqa": ("llm_qa",)}
    assert "image_search" not in graph.actions
    assert induce_graph(traces).edges["image_search"] == ("llm_qa",)


def test_custom_actions_need_the_graph_that_declares_them() -> None:
    spec: Spec = [(START, "vqa", "informative"), ("vqa", "read_text", "answerable")]
    traces = [avis_trace(spec)]
    with pytest.raises(InduceError, match="'read_text' in the traces is not a built-in action"):
        induce_graph(traces)
    declared = {"tool": "OCR", "description": "read the text", "phase": "visual"}
    base = parse_graph(
        {"edges": {START: ["vqa"], "vqa": ["read_text"]}, "actions": {"read_text": declared}},
        "base.toml",
    )
    graph = induce_graph(traces, base=base)
    assert graph.edges == {START: ("vqa",), "vqa": ("read_text",)}
    assert graph.actions["read_text"] == base.actions["read_text"]
    assert "[actions.read_text]" in graph.to_toml()
    other = parse_graph({"edges": {START: ["vqa"]}}, "other.toml")
    with pytest.raises(InduceError, match=r"other\.toml does not declare it"):
        induce_graph(traces, base=other)


# -- charts ------------------------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    with PILImage.open(io.BytesIO(data)) as img:
        img.verify()
    with PILImage.open(io.BytesIO(data)) as img:
        assert img.format == "PNG"
        return img.size


def test_charts_are_valid_pngs_and_the_same_every_time(store_path: Path, tmp_path: Path) -> None:
    analysis = analyze_records(stored(store_path), label=RUN)
    paths = write_charts(analysis, tmp_path / "charts")
    assert sorted(paths) == sorted(name for name, _ in CHARTS)
    for name, path in paths.items():
        assert path == tmp_path / "charts" / f"{name}.png" and path.stat().st_size > 0
        width, height = png_size(path.read_bytes())
        assert width >= 600 and height >= 400
    assert chart_pngs(analysis) == {n: p.read_bytes() for n, p in paths.items()}
    # no data, odd names: still pictures
    for odd in (analyze([]), analyze([avis_trace([])], label="run $x_1"), analyze([None])):
        for data in chart_pngs(odd).values():
            png_size(data)


def test_section_html_holds_the_charts_and_the_counts(store_path: Path) -> None:
    analysis = analyze_records(stored(store_path), label="a <run>")
    pngs = chart_pngs(analysis)
    html = section_html(analysis, pngs)
    assert "a &lt;run&gt;" in html and "<run>" not in html
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert [base64.b64decode(u) for u in uris] == [pngs[n] for n, _ in CHARTS]
    for tool, n in analysis.tools.items():
        assert f'<td>{tool}</td><td class="n">{n}</td>' in html


# -- the commands ------------------------------------------------------------------------------


def invoke(args: list[str]) -> Any:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_avis_analyze_writes_charts_and_page(store_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "figures"
    r = invoke(["avis", "analyze", RUN, OTHER, "-o", str(out), "--store", str(store_path)])
    assert r.exit_code == 0, r.output
    folder = out / RUN
    for name, _ in CHARTS:
        png_size((folder / f"{name}.png").read_bytes())
    assert not (out / OTHER).exists()
    assert f"run {OTHER!r} holds no AVIS trace" in r.stderr
    assert f"wrote {folder}/analysis.html" in r.stderr
    page = (folder / "analysis.html").read_text()
    assert page.startswith("<!doctype html>") and page.count('src="data:image/png;base64,') == 5
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|[\w./-]+\.png)""", page)
    want = expected([spec for _, spec in AVIS_SAMPLES])
    total = sum(want["tools"].values())
    for tool, n in want["tools"].items():
        assert re.search(rf"{tool}\s+│\s+{n} \({100 * n / total:.1f}%\)", r.stdout), tool
    for verdict, n in want["verdicts"].items():
        assert re.search(rf"{verdict}\s+│\s+{n} ", r.stdout), verdict
    assert re.search(rf"mean length\s+│\s+{want['mean']:.2f}", r.stdout)
    # successful only: fewer traces
    r = invoke(
        ["avis", "analyze", RUN, "-o", str(out), "--store", str(store_path), "--successful-only"]
    )
    assert r.exit_code == 0, r.output
    good = sum(1 for s, _ in AVIS_SAMPLES if s >= 1)
    assert re.search(rf"AVIS traces analysed\s+│\s+{good} ", r.stdout)


def test_avis_commands_fail_in_one_line(store_path: Path, tmp_path: Path) -> None:
    base = ["--store", str(store_path)]
    for args in (
        ["avis", "analyze", "nope", "-o", str(tmp_path / "o"), *base],
        ["avis", "analyze", OTHER, "-o", str(tmp_path / "o"), *base],
        ["avis", "induce", "nope", "-o", str(tmp_path / "g.toml"), *base],
        ["avis", "induce", OTHER, "-o", str(tmp_path / "g.toml"), *base],
        ["avis", "induce", RUN, "-o", str(tmp_path / "g.toml"), "--min-count", "9", *base],
        ["avis", "induce", RUN, "-o", str(tmp_path / "g.toml"), "--min-score", "2", *base],
    ):
        r = invoke(args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("hammr: error: "), r.stderr
    assert not (tmp_path / "g.toml").exists()
    r = invoke(["avis", "induce", RUN, "-o", str(tmp_path / "g.toml"), "--min-count", "9", *base])
    assert "threshold too high: START keeps no edge" in r.stderr
    r = invoke(["avis", "induce", OTHER, "-o", str(tmp_path / "g.toml"), *base])
    assert "no AVIS trace" in r.stderr
    r = invoke(["avis", "induce", RUN, "-o", str(tmp_path / "g.toml"), "--min-score", "2", *base])
    assert "no successful trace" in r.stderr
    r = invoke(["avis", "analyze", RUN, "-o", str(tmp_path / "o"), "--store", str(tmp_path / "x")])
    assert r.exit_code == 2 and "does not exist" in r.stderr
    assert not (tmp_path / "x").exists()


def test_avis_induce_writes_a_graph_the_planner_can_load(store_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "conf" / "learned.toml"
    args = ["avis", "induce", RUN, "-o", str(out), "--min-count", "2", "--store", str(store_path)]
    r = invoke(args)
    assert r.exit_code == 0, r.output
    graph = load_graph(out)
    good = successful_traces(stored(store_path))
    assert graph.edges == induce_graph(good, min_count=2).edges
    assert f'[avis] graph = "{out}"' in r.stderr
    assert f"learned from {len(good)} successful traces" in r.stderr
    assert f"{START:<13} -> object_select" in r.stdout
    text = out.read_text()
    assert f"# runs: {RUN}" in text and "# thresholds: min count 2" in text
    assert re.search(r"# date: \d{4}-\d\d-\d\dT", text)
    helptext = invoke(["avis", "induce", "--help"]).output
    assert "[avis]" in helptext and "graph =" in helptext
    for cmd in ([], ["analyze"], ["graph"]):
        r = invoke(["avis", *cmd, "--help"])
        assert r.exit_code == 0 and "Examples:" in r.output


def test_avis_graph_prints_or_rejects(tmp_path: Path) -> None:
    r = invoke(["avis", "graph"])
    assert r.exit_code == 0 and "(bundled): valid" in r.stdout
    assert re.search(r"START\s+-> object_select, identical_image_search", r.stdout)
    good = tmp_path / "g.toml"
    good.write_text('[edges]\nSTART = ["vqa"]\nvqa = ["llm_qa"]\n')
    r = invoke(["avis", "graph", str(good)])
    assert r.exit_code == 0 and "START -> vqa\nvqa   -> llm_qa" in r.stdout
    for text, message in (
        ('[edges]\nSTART = ["fly"]\n', "unknown action 'fly'"),
        ("[edges\n", "not valid TOML"),
        ('[edges]\nvqa = ["llm_qa"]\n', "edges.START is missing"),
    ):
        good.write_text(text)
        r = invoke(["avis", "graph", str(good)])
        assert r.exit_code == 2 and message in r.stderr
        assert r.stderr.count("\n") == 1 and r.stdout == ""
    r = invoke(["avis", "graph", str(tmp_path / "missing.toml")])
    assert r.exit_code == 2 and "no such graph file" in r.stderr


# -- the HTML report ---------------------------------------------------------------------------


def test_html_report_has_the_avis_section_only_for_avis_runs(
    store_path: Path, tmp_path: Path
) -> None:
    with RunStore(store_path) as store:  # a second AVIS run: e.g. under a learned graph
        store.open_run("avis-learned", "infoseek", "avis")
        for i, (score, spec) in enumerate(AVIS_SAMPLES[:3]):
            store.add(record("avis-learned", i, score, avis_trace(spec)))
    pages = {}
    for name, runs in (("avis", [RUN, "avis-learned", OTHER]), ("other", [OTHER])):
        out = tmp_path / f"{name}.html"
        r = invoke(["report", *runs, "--html", str(out), "--store", str(store_path)])
        assert r.exit_code == 0, r.output
        pages[name] = out.read_text()
    assert "avis-analyses" not in pages["other"] and "AVIS analyses" not in pages["other"]
    page = pages["avis"]
    section = page.split('<section id="avis-analyses"')[1].split("</section>")[0]
    assert page.index("</main>") < page.index('<section id="avis-analyses"')
    assert page.index('<section id="avis-analyses"') < page.index('id="hammr-data"')
    assert section.count('src="data:image/png;base64,') == 2 * len(CHARTS)
    assert f"AVIS analyses — {RUN}" in section and "AVIS analyses — avis-learned" in section
    assert f"AVIS analyses — {OTHER}" not in section
    assert "Runs compared" in section
    for tool, n in expected([spec for _, spec in AVIS_SAMPLES])["tools"].items():
        assert f'<td>{tool}</td><td class="n">{n}</td>' in section
    # still one self-contained file
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|static/|/static)""", page, re.I)
    assert not re.search(r"<(link|script)\b[^>]*\b(href|src)=", page, re.I)
