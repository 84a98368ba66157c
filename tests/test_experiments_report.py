"""`hammr experiment report`: an experiment's tables filled from hand-made stored runs, ours
beside the paper's numbers, the reasons of empty cells, the deviations, the CSV and the HTML
page (links to the viewer, inlined figures), and MulProg's Fig. 11 shuffle."""

from __future__ import annotations

import csv
import importlib.util
import io
import random
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import tests.test_experiments_runner as runner_tests
from click.testing import CliRunner

from fake_openai_server import FakeServer
from hammr.cli import main
from hammr.eval.analysis.table4 import tabulate_labels
from hammr.eval.datasets import load_dataset
from hammr.eval.datasets.mevqa import references
from hammr.eval.explain_cli import Explained
from hammr.eval.metrics.explanation import (
    BoxRef,
    GroundedExplanation,
    LanguageMetricError,
    score_explanations,
)
from hammr.eval.metrics.language import java_quiet
from hammr.eval.report import build_report as build_eval_report
from hammr.eval.stats import bootstrap_ci
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.experiments import load_experiment
from hammr.experiments.render import (
    CSV_COLUMNS,
    LABEL_KEEP,
    fit_widths,
    render_csv,
    render_html,
    render_rich,
    superscript,
    table_footnotes,
)
from hammr.experiments.report import CellResult, ExperimentReport, build_report, explain_metric
from hammr.experiments.report_cli import report_cmd
from hammr.experiments.shuffle import shuffle_scores, shuffled
from hammr.experiments.state import state_path, write_record
from hammr.programs.system import explanation_output
from hammr.trace import Step, Trace
from hammr.values import Box

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mevqa" / "MEGQA_test.json"
SAMPLES = 200  # bootstrap resamples: enough to check the numbers, quick

TOY = """
name = "toy"
title = "Toy accuracy table"
paper = "hammr"
source = "HAMMR, Table 3"
deviations = ["LLM: whatever hammr.toml configures; the paper ran PaLI-X"]

[settings]
"agent.router" = "llm"

[data]
suite = "generic-vqa"
limit = 1000
demo_suite = "demo"
demo_cells = { "type:ocr_reasoning" = "entry:textvqa" }

[[run]]
name = "hammr"
system = "hammr"

[[run]]
name = "naive"
system = "naive"

[[run]]
name = "oracle"
system = "hammr-oracle"

[[table]]
name = "t3"
title = "Accuracy (%)"
columns = [
  { label = "GQA", cell = "type:spatial_reasoning" },
  { label = "TextVQA", cell = "type:ocr_reasoning" },
  { label = "All", cell = "overall" },
  { label = "Steps", cell = "steps:mean" },
  { label = "Reasoning", cell = "label:reasoning" },
]

[[table.row]]
label = "HAMMR"
run = "hammr"
paper = { GQA = 56.4, TextVQA = "not reported", All = 50, Steps = "not reported", Reasoning = 30.0 }

[[table.row]]
label = "Naive"
run = "naive"
paper = { GQA = 40.0, TextVQA = 30.0, All = 35, Steps = "not reported", Reasoning = 40.0 }

[[table.row]]
label = "Oracle"
run = "oracle"
paper = { GQA = 60.0, TextVQA = 50.0, All = 55, Steps = "not reported", Reasoning = 20.0 }

[[figure]]
name = "avis-figs"
kind = "avis"
runs = ["hammr"]
title = "AVIS analyses"
"""

GQA = [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
TEXTVQA = [1.0, 0.0, 0.0, 1.0]
CONFIG = {
    "agent.router": "nn",
    "llm.grammar": "on",
    "agent.setting": "tools_only",
    "llm.backend": "openai",
    "llm.model": "qwen2.5-7b",
}


def steps_trace(n: int) -> Trace:
    """A trace of ``n`` steps, the last one answering."""
    steps = [Step(index=i, tool="Detect", action="x = Detect(image)") for i in range(n - 1)]
    steps.append(Step(index=n - 1, finish="yes"))
    return Trace(agent="Naive", question="q", steps=steps, answer="yes", status="finished")


def record(run: str, i: int, dataset: str, qtype: str, score: float, trace: Trace) -> RunRecord:
    return RunRecord(
        run=run,
        sample_id=f"{dataset}-{i}",
        dataset=dataset,
        question_type=qtype,
        question=f"question {i}?",
        answers=("yes",),
        prediction="yes" if score else "no",
        score=score,
        trace=trace,
    )


def store_toy(
    path: Path, run: str, *, planned: int, identity: dict[str, Any] | None = None
) -> list[RunRecord]:
    recs = [
        record(run, i, "gqa", "spatial_reasoning", s, steps_trace(2 + i % 3))
        for i, s in enumerate(GQA)
    ]
    recs += [
        record(run, i, "textvqa", "ocr_reasoning", s, steps_trace(3)) for i, s in enumerate(TEXTVQA)
    ]
    with RunStore(path) as store:
        store.open_run(
            run,
            "generic-vqa",
            "hammr",
            config=CONFIG,
            settings={"suite": "generic-vqa", "planned": planned}
            | ({"identity": identity} if identity is not None else {}),
        )
        for r in recs:
            assert store.add(r)
    return recs


@pytest.fixture
def toy(tmp_path: Path) -> tuple[Path, Path]:
    """(the experiment file, the store): run 'hammr' done, 'naive' without its data, 'oracle'
    never run."""
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    store = tmp_path / "runs.sqlite"
    store_toy(store, "toy.hammr", planned=14)
    write_record(
        state_path(store, "toy"),
        {"run:naive": {"status": "no_data", "reason": "suite generic-vqa: no GQA files in /d"}},
    )
    return exp, store


def report_of(store: Path, exp: Path, **kw: object) -> ExperimentReport:
    with RunStore(store, create=False) as s:
        return build_report(s, load_experiment(exp), samples=SAMPLES, **kw)  # type: ignore[arg-type]


def cell(report: ExperimentReport, row: str, column: str) -> CellResult:
    return next(c for c in report.cells() if c.row == row and c.column == column)


def test_cells_show_ours_with_ci_beside_the_paper_and_the_difference(
    toy: tuple[Path, Path],
) -> None:
    exp, store = toy
    report = report_of(store, exp)
    gqa = cell(report, "HAMMR", "GQA")
    mean, low, high = bootstrap_ci(GQA, samples=SAMPLES, seed=0)
    assert gqa.status == "ok" and gqa.n == 10
    assert gqa.value == pytest.approx(100 * mean) and gqa.value == pytest.approx(70.0)
    assert gqa.ci == pytest.approx(100 * (high - low) / 2) and gqa.ci > 0
    assert gqa.paper == 56.4 and gqa.diff == pytest.approx(70.0 - 56.4)
    assert gqa.stored_as == "toy.hammr"
    text = cell(report, "HAMMR", "TextVQA")
    assert text.value == pytest.approx(50.0) and text.paper is None and text.diff is None
    overall = cell(report, "HAMMR", "All")
    assert overall.value == pytest.approx(100 * 9 / 14) and overall.n == 14
    steps = cell(report, "HAMMR", "Steps")
    expected_steps = (sum(2 + i % 3 for i in range(10)) + 3 * 4) / 14
    assert steps.unit == "" and steps.value == pytest.approx(expected_steps)


def test_empty_cells_say_why_not_run_no_data_and_labels(toy: tuple[Path, Path]) -> None:
    exp, store = toy
    report = report_of(store, exp)
    oracle = cell(report, "Oracle", "GQA")
    assert oracle.value is None and oracle.status == "not_run"
    assert oracle.reason == "not run yet" and oracle.paper == 60.0
    naive = cell(report, "Naive", "TextVQA")
    assert naive.status == "no_data" and naive.value is None
    assert naive.reason == "no data: suite generic-vqa: no GQA files in /d"
    labels = cell(report, "HAMMR", "Reasoning")
    assert labels.status == "needs_labels" and "hammr errors toy.hammr --export" in labels.reason


def test_a_partial_run_is_shown_and_marked_and_demo_cells_substitute(tmp_path: Path) -> None:
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    store = tmp_path / "runs.sqlite"
    store_toy(store, "demo.toy.hammr", planned=20)
    report = report_of(store, exp, demo=True)
    gqa = cell(report, "HAMMR", "GQA")
    assert gqa.status == "partial" and gqa.value == pytest.approx(70.0)
    assert "14 of 20 samples stored" in gqa.reason and gqa.ours_text() == "70.0 ±25.0"
    notes = table_footnotes(report.tables[0])
    number = notes.of(0, 0)
    assert number is not None and "14 of 20 samples stored" in notes.texts[number - 1]
    textvqa = cell(report, "HAMMR", "TextVQA")
    assert textvqa.cell == "entry:textvqa" and textvqa.value == pytest.approx(50.0)
    deviations = report.tables[0].deviations
    assert any(d.startswith("demo data: every run is on demo") for d in deviations)
    assert any("type:ocr_reasoning -> entry:textvqa" in d for d in deviations)
    assert not any("demo budget" in d for d in deviations)  # made before the budget


def test_the_demo_line_says_the_budget_the_runs_were_made_under(tmp_path: Path) -> None:
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    store = tmp_path / "runs.sqlite"
    budget = {"agent.max_steps": 4, "llm.max_tokens": 96, "llm.n_ctx": 4096}
    settings = {"agent.router": "llm", **budget}
    store_toy(store, "demo.toy.hammr", planned=14, identity={"settings": settings})
    (line,) = [d for d in report_of(store, exp, demo=True).tables[0].deviations if "demo d" in d]
    assert line.endswith(
        "; a smoke run under the demo budget "
        "(agent.max_steps = 4, llm.max_tokens = 96, llm.n_ctx = 4096)"
    )
    assert "agent.router" not in line  # a setting of the file's, not the budget's


def test_deviations_hold_the_file_s_and_the_runs_settings_llm_and_sample_counts(
    toy: tuple[Path, Path],
) -> None:
    exp, store = toy
    deviations = report_of(store, exp).tables[0].deviations
    assert deviations[0] == "LLM: whatever hammr.toml configures; the paper ran PaLI-X"
    assert (
        "run hammr: agent.router = 'nn' where the hammr paper ran 'llm' "
        "(the dispatcher agent (an LLM) picks the specialist)"
    ) in deviations
    assert any(d.startswith("run hammr: llm.grammar = 'on' where") for d in deviations)
    assert not any("agent.setting" in d for d in deviations)  # the run used the paper's value
    assert "run hammr: LLM: openai qwen2.5-7b" in deviations
    assert (
        "run hammr: 14 samples (gqa 10, textvqa 4) where the paper drew 1000 per entry"
        in deviations
    )
    assert not any("demo data" in d for d in deviations)


def test_label_cells_read_table4_shares_from_the_labelled_file(toy: tuple[Path, Path]) -> None:
    exp, store = toy
    labelled = exp.parent / "wrong.csv"
    labelled.write_text(
        "run,dataset,sample_id,label\n"
        "toy.hammr,gqa,gqa-3,reasoning\n"
        "toy.hammr,gqa,gqa-4,reasoning\n"
        "toy.hammr,gqa,gqa-7,formulation\n"
        "toy.hammr,textvqa,textvqa-1,ok\n"
        "toy.hammr,textvqa,textvqa-2,skip\n"
    )
    report = report_of(store, exp, labels={"hammr": labelled})
    got = cell(report, "HAMMR", "Reasoning")
    expected = tabulate_labels(labelled, accuracy={"toy.hammr": 9 / 14}).runs["toy.hammr"]
    assert got.status == "ok" and got.n == 4
    assert got.value == pytest.approx(100 * (1 - 9 / 14) * 2 / 4)
    assert got.value == pytest.approx(100 * (expected.value("reasoning") or 0))
    assert got.diff == pytest.approx(got.value - 30.0)


def test_csv_has_one_row_per_cell(toy: tuple[Path, Path]) -> None:
    exp, store = toy
    rows = list(csv.reader(io.StringIO(render_csv(report_of(store, exp)))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert rows[0][:10] == [
        "table", "row", "column", "ours", "ci", "paper", "diff", "n", "status", "reason",
    ]  # fmt: skip
    body = {(r[1], r[2]): r for r in rows[1:]}
    assert len(body) == 3 * 5
    gqa = body[("HAMMR", "GQA")]
    assert gqa[0] == "t3" and gqa[3] == "70.00" and gqa[5] == "56.4" and gqa[6] == "13.60"
    assert gqa[7] == "10" and gqa[8] == "ok" and gqa[11] == "toy.hammr"
    assert body[("HAMMR", "TextVQA")][5] == "not reported"
    oracle = body[("Oracle", "All")]
    assert oracle[3] == "" and oracle[8] == "not_run" and oracle[9] == "not run yet"


def avis_trace() -> Trace:
    t = Trace(agent="AVIS", question="Which country?", model="m")
    t.steps.append(Step(index=0, tool="DECOMPOSE", output={"visual": "v", "knowledge": "k"}))
    t.steps.append(Step(index=1, tool="vqa", state="START", verdict="informative"))
    t.steps.append(Step(index=2, tool="llm_qa", state="vqa", verdict="answerable", finish="x"))
    t.answer, t.status = "x", "finished"
    return t


def test_the_command_prints_the_table_and_writes_csv_and_html_with_links_and_figures(
    tmp_path: Path,
) -> None:
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    store = tmp_path / "runs.sqlite"
    with RunStore(store) as s:
        s.open_run("toy.hammr", "generic-vqa", "avis", config=CONFIG, settings={"planned": 3})
        for i in range(3):
            s.add(record("toy.hammr", i, "gqa", "spatial_reasoning", float(i % 2), avis_trace()))
    out_csv, out_html = tmp_path / "t.csv", tmp_path / "t.html"
    args = [str(exp), "--store", str(store), "--csv", str(out_csv), "--html", str(out_html)]
    result = CliRunner().invoke(report_cmd, [*args, "--samples", "50"])
    assert result.exit_code == 0, result.output
    assert "Toy accuracy table" in result.stdout and "56.4" in result.stdout
    assert "run toy.oracle: not run yet" in result.stdout
    assert "Deviations from the paper" in result.stdout
    assert len(out_csv.read_text().splitlines()) == 1 + 15
    page = out_html.read_text()
    assert page.count('<table class="exp">') == 1 and "<h2" in page
    assert 'href="http://127.0.0.1:8765/#/run/toy.hammr"' in page
    assert "<li>LLM: whatever hammr.toml configures; the paper ran PaLI-X</li>" in page
    assert 'id="figure-avis-figs"' in page and '<img alt="Tool frequency"' in page
    assert "data:image/png;base64," in page


def test_bad_labels_and_unknown_experiments_are_one_line_errors(toy: tuple[Path, Path]) -> None:
    exp, store = toy
    run = CliRunner()
    r = run.invoke(report_cmd, [str(exp), "--store", str(store), "--labels", "nope=x.csv"])
    assert r.exit_code == 2 and "toy has no run 'nope'" in r.stderr
    r = run.invoke(report_cmd, [str(exp), "--store", str(store), "--labels", "hammr"])
    assert r.exit_code == 2 and "write RUN=FILE" in r.stderr
    r = run.invoke(report_cmd, ["no-such-experiment", "--store", str(store)])
    assert r.exit_code == 2 and "no experiment 'no-such-experiment'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_store_that_is_not_there_is_one_line_not_a_table_of_not_run_cells(
    tmp_path: Path,
) -> None:
    """A mistyped --store (or no store yet) is refused in one line naming where it looked
    and what fills it (issue 26), never a table whose every cell says "not run yet"; and
    a folder is no store for show, run or report."""
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    missing = tmp_path / "typo.sqlite"
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = CliRunner()
    r = run.invoke(report_cmd, [str(exp), "--store", str(missing), "--prefix", "q7."], env=env)
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr == (
        f"hammr: error: no run store at {missing}: nothing of this experiment is run there "
        f"yet; `hammr experiment run {exp} --data-dir DIR --prefix q7. --store {missing}` "
        "fills it (or give --store the store the runs went to)\n"
    )
    assert not missing.exists()
    r = run.invoke(report_cmd, [str(exp), "--demo"], env=env)  # the default store, not made
    default = tmp_path / "cache" / "hammr" / "runs.sqlite"
    assert r.exit_code == 2 and f"no run store at {default}:" in r.stderr
    assert f"`hammr experiment run {exp} --demo`" in r.stderr and not default.exists()
    for command in (["show", str(exp)], ["run", str(exp), "--demo"], ["report", str(exp)]):
        r = run.invoke(main, ["experiment", *command, "--store", str(tmp_path)], env=env)
        assert r.exit_code == 2 and r.stdout == "", command
        assert f"Error: Invalid value for '--store': File '{tmp_path}' is a directory." in (
            r.stderr
        )


def test_no_store_yet_gives_the_paper_s_table_with_every_cell_not_run(tmp_path: Path) -> None:
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    report = build_report(None, load_experiment(exp))
    assert {c.status for c in report.cells()} == {"not_run"}
    assert report.tables[0].deviations == [
        "LLM: whatever hammr.toml configures; the paper ran PaLI-X"
    ]


def rendered(report: ExperimentReport, width: int = 100) -> str:
    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), record=True, highlight=False)
    for part in render_rich(report):
        console.print(part)
    return console.export_text()


def test_terminal_table_gives_each_reason_once_as_a_numbered_footnote(
    toy: tuple[Path, Path],
) -> None:
    exp, store = toy
    report = report_of(store, exp)
    notes = table_footnotes(report.tables[0])
    naive = {notes.of(1, j) for j in range(5)}
    oracle = {notes.of(2, j) for j in range(5)}
    assert len(naive) == len(oracle) == 1 and naive != oracle and None not in naive | oracle
    assert len(notes.texts) == len(set(notes.texts)) == 3  # labels, no data, not run
    (n_oracle,) = oracle
    assert notes.texts[n_oracle - 1] == "run toy.oracle: not run yet"
    # the same reason in two rows is one footnote
    t = report.tables[0]
    same = "unavailable: SPICE needs Java"
    t.cells[0][4] = replace(t.cells[0][4], status="unavailable", reason=same)
    t.cells[1][4] = replace(t.cells[1][4], status="unavailable", reason=same)
    notes = table_footnotes(t)
    assert notes.of(0, 4) == notes.of(1, 4) and notes.texts.count(same) == 1
    text = rendered(report)
    assert text.count("not run yet") == 1 and f"—{superscript(n_oracle)}" in text
    assert text.count(same) == 1 and f"n/a{superscript(notes.of(0, 4) or 0)}" in text
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100 and "…" not in text
    header = next(line for line in lines if "GQA" in line)
    assert all(label in header for label in ("GQA", "TextVQA", "All", "Steps", "Reasoning"))
    hammr = lines.index(next(line for line in lines if line.startswith("HAMMR")))
    assert lines[hammr].split()[1:3] == ["70.0", "±25.0"]
    assert lines[hammr + 1].split() == ["paper", "56.4", "n.r.", "50.0", "n.r.", "30.0"]
    assert lines[hammr + 2].split() == ["Δ", "+13.6", "+14.3"]


def test_narrow_terminals_fold_number_headers_before_the_row_labels(
    toy: tuple[Path, Path],
) -> None:
    # labels (natural 30, longest word 12), then two number columns
    assert fit_widths([30, 11, 9], [12, 9, 9], [12, 6, 4], 60) is None
    assert fit_widths([30, 11, 9], [12, 9, 9], [12, 6, 4], 40) == [LABEL_KEEP, 11, 9]
    assert fit_widths([30, 11, 9], [12, 9, 9], [12, 6, 4], 30) == [12, 9, 9]
    assert fit_widths([30, 11, 9], [12, 9, 9], [12, 6, 4], 24) == [12, 6, 6]
    exp, store = toy
    text = rendered(report_of(store, exp), width=60)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 60
    assert "Reasoning" in text and "run toy.oracle: not run yet" in text


def test_java_quiet_keeps_a_child_s_output_off_the_terminal_and_shows_it_on_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with java_quiet() as captured:
        subprocess.run(["sh", "-c", "echo out-noise; echo err-noise >&2"], check=True)
    assert captured == ["out-noise\nerr-noise\n"]
    seen = capfd.readouterr()
    assert "noise" not in seen.out + seen.err
    with pytest.raises(subprocess.CalledProcessError), java_quiet():
        subprocess.run(["sh", "-c", "echo broken >&2; exit 3"], check=True)
    assert "broken" in capfd.readouterr().err


@pytest.mark.skipif(
    shutil.which("java") is None or importlib.util.find_spec("pycocoevalcap") is None,
    reason="the language metrics need Java and pycocoevalcap",
)
def test_report_with_language_cells_prints_no_java_tool_noise(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store, _, _ = store_mulprog(tmp_path)
    exp = tmp_path / "ex.toml"
    exp.write_text(EXPLAIN_WITH_BLEU)
    out_csv = tmp_path / "t.csv"
    args = [str(exp), "--store", str(store), "--samples", "20", "--csv", str(out_csv)]
    result = CliRunner().invoke(report_cmd, args)
    assert result.exit_code == 0, result.output
    rows = {r["column"]: r for r in csv.DictReader(out_csv.open())}
    assert rows["BLEU-4"]["status"] == "ok"  # the tokenizer ran
    seen = capfd.readouterr()
    for text in (result.stdout, result.stderr, seen.out, seen.err):
        assert "PTBTokenizer" not in text and "tokens per second" not in text


# --- explanation cells and the shuffle figure ------------------------------------------------

EXPLAIN = """
name = "ex"
title = "Explanations"
paper = "mulprog"
source = "MEAgent, Table 2"

[data]
suite = "mevqa"

[[run]]
name = "mp"
system = "mulprog"

[[table]]
name = "t2"
title = "Explanation metrics"
columns = [
  { label = "Acc", cell = "explain:accuracy" },
  { label = "Acc (normalised)", cell = "explain:accuracy_normalised" },
  { label = "Detection", cell = "explain:detection" },
  { label = "Grounding", cell = "explain:grounding" },
]

[[table.row]]
label = "MulProg"
run = "mp"
paper = { Acc = 60.0, "Acc (normalised)" = "not reported", Detection = 40.0, Grounding = 50.0 }

[[figure]]
name = "fig11"
kind = "shuffle"
runs = ["mp"]
title = "Shuffled tokens"
"""

EXPLAIN_WITH_BLEU = (
    EXPLAIN.replace('{ label = "Grounding", cell = "explain:grounding" },',
                    '{ label = "Grounding", cell = "explain:grounding" },\n'
                    '  { label = "BLEU-4", cell = "explain:BLEU-4" },')
    .replace("Grounding = 50.0 }", "Grounding = 50.0, BLEU-4 = 20.1 }")
)  # fmt: skip
"""EXPLAIN with a BLEU-4 column (a language metric, which needs Java)."""


def mulprog_trace(answer: str, explanation: GroundedExplanation) -> Trace:
    return Trace(
        agent="MulProg",
        question="q",
        inputs={"IMAGE": {"$image": "0" * 16, "size": [640, 480]}},
        steps=[Step(index=0, tool="EXPLAIN", output=explanation_output(explanation))],
        answer=answer,
        status="finished",
    )


def moved(ref: GroundedExplanation, dx: float) -> GroundedExplanation:
    boxes = [
        BoxRef(r.name, tuple(Box(b.x + dx, b.y, b.w, b.h) for b in r.boxes)) for r in ref.boxes
    ]
    return GroundedExplanation(ref.text, boxes)


def store_mulprog(
    tmp_path: Path,
) -> tuple[Path, dict[str, GroundedExplanation], dict[str, GroundedExplanation]]:
    """A stored MulProg run over the MEVQA fixture (explanations near the references) and its
    data folder; returns (store, references, predictions)."""
    data = tmp_path / "data"
    (data / "mevqa").mkdir(parents=True)
    shutil.copy(FIXTURE, data / "mevqa" / "MEGQA_test.json")
    samples = load_dataset("mevqa", FIXTURE)
    refs = references(samples)
    preds = {s.id: moved(refs[s.id], 5.0 * i) for i, s in enumerate(samples)}
    answers = ["Left.", "cars", "no", "left", "red"]  # prose 'Left.' is right only normalised
    store = tmp_path / "runs.sqlite"
    with RunStore(store) as s:
        settings = {"suite": "mevqa", "data_dir": str(data), "planned": 5}
        s.open_run("ex.mp", "mevqa", "mulprog", settings=settings)
        for sample, answer in zip(samples, answers, strict=True):
            exact = answer == sample.answers[0]
            s.add(
                RunRecord(
                    run="ex.mp",
                    sample_id=sample.id,
                    dataset="mevqa",
                    question_type=sample.question_type,
                    question=sample.question,
                    answers=sample.answers,
                    prediction=answer,
                    score=1.0 if exact else 0.0,
                    trace=mulprog_trace(answer, preds[sample.id]),
                )
            )
    return store, refs, preds


def test_explain_cells_score_like_hammr_explain_and_html_has_the_shuffle_figure(
    tmp_path: Path,
) -> None:
    store, refs, preds = store_mulprog(tmp_path)
    exp = tmp_path / "ex.toml"
    exp.write_text(EXPLAIN)
    report = report_of(store, exp)
    direct = score_explanations(
        {k: refs[k] for k in refs},
        preds,
        image_sizes={k: (640, 480) for k in refs},
    )
    acc = cell(report, "MulProg", "Acc")
    assert acc.value == pytest.approx(100 * 3 / 5) and acc.diff == pytest.approx(0.0)
    assert cell(report, "MulProg", "Acc (normalised)").value == pytest.approx(100 * 4 / 5)
    det = cell(report, "MulProg", "Detection")
    assert det.value == pytest.approx(100 * direct.detection) and det.n == 5
    grd = cell(report, "MulProg", "Grounding")
    assert grd.value == pytest.approx(100 * direct.grounding) and grd.ci is not None
    page = render_html(report, figures=_figures(store, report))
    assert 'id="figure-fig11"' in page and page.count("<img") == 1
    assert "grounding, shuffled" in page


def _figures(store: Path, report: ExperimentReport) -> list[str]:
    from hammr.experiments.figures import figures_html

    with RunStore(store, create=False) as s:
        return figures_html(s, report, samples=SAMPLES)


def test_explain_metric_names_are_read_the_usual_ways() -> None:
    assert explain_metric("BLEU-4") == "Bleu_4" and explain_metric("rouge-l") == "ROUGE_L"
    assert explain_metric("accuracy-normalized") == "accuracy_normalised"
    assert explain_metric("Grounding") == "grounding" and explain_metric("bleu") is None


def test_shuffling_tokens_drops_detection_but_not_grounding() -> None:
    ref = GroundedExplanation(
        "the red apple [BOX] sits on a wooden table near the open window",
        [BoxRef("apple", (Box(50, 120, 60, 60),))],
    )
    mixed = shuffled(ref, random.Random(0))
    assert sorted(mixed.text.split()) == sorted(ref.text.split()) and mixed.text != ref.text
    recs = [RunRecord("r", f"s{i}", "mevqa", "", "q?", ("red",), "red", 1.0) for i in range(6)]
    refs = {("mevqa", r.sample_id): ref for r in recs}
    scores = shuffle_scores([Explained(r, ref, "run") for r in recs], refs, seed=0)
    assert scores.samples == 6 and scores.seed == 0
    # by chance a shuffle may keep 'apple [BOX]' together; most do not
    assert scores.detection == pytest.approx(1.0) and scores.shuffled_detection <= 0.5
    assert scores.grounding == pytest.approx(1.0) == scores.shuffled_grounding


def test_aggregate_cells_are_hammr_report_s_aggregate_rows(tmp_path: Path) -> None:
    exp = tmp_path / "agg.toml"
    exp.write_text(
        'name = "agg"\ntitle = "t"\npaper = "muse"\nsource = "MuSE, Table 2"\n'
        '[data]\nsuite = "muse-demo"\n[[run]]\nname = "m"\nsystem = "muse"\n'
        '[[table]]\nname = "t"\ntitle = "t"\n'
        'columns = [{ label = "Micro", cell = "aggregate:muse_demo_micro" },'
        ' { label = "Nope", cell = "aggregate:nope" }]\n'
        '[[table.row]]\nlabel = "MuSE"\nrun = "m"\n'
        'paper = { Micro = 41.2, Nope = "not reported" }\n'
    )
    store = tmp_path / "runs.sqlite"
    with RunStore(store) as s:
        s.open_run("agg.m", "muse-demo", "muse", settings={"suite": "muse-demo", "planned": 6})
        for i, score in enumerate([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]):
            s.add(record("agg.m", i, "muse_demo", "attribute", score, steps_trace(2)))
        expected = build_eval_report(s, ["agg.m"], samples=SAMPLES).aggregates[0].cells[0]
    report = report_of(store, exp)
    micro = cell(report, "MuSE", "Micro")
    assert expected is not None
    assert micro.value == pytest.approx(100 * expected.mean)
    assert micro.ci == pytest.approx(100 * expected.half_width)
    nope = cell(report, "MuSE", "Nope")
    assert nope.status == "unavailable" and "no aggregate 'nope'" in nope.reason


def test_the_scaling_figure_plots_depth_and_breadth_of_the_figure_s_runs(tmp_path: Path) -> None:
    exp = tmp_path / "sc.toml"
    exp.write_text(
        'name = "sc"\ntitle = "t"\npaper = "muse"\nsource = "MuSE, Figure 2"\n'
        '[data]\nsuite = "muse-demo"\n'
        '[[run]]\nname = "d1"\nsystem = "muse"\n[[run]]\nname = "d2"\nsystem = "muse"\n'
        '[[figure]]\nname = "fig2"\nkind = "scaling"\nruns = ["d1", "d2"]\ntitle = "Depth"\n'
    )
    store = tmp_path / "runs.sqlite"
    with RunStore(store) as s:
        for depth in (1, 2):
            run = f"sc.d{depth}"
            config = {"memory.path": "bank.db", "memory.depth": depth, "memory.k": 3}
            s.open_run(run, "muse-demo", "muse", config=config, settings={"planned": 4})
            for i in range(4):
                s.add(
                    record(run, i, "muse_demo", "attribute", float(i < depth + 1), steps_trace(2))
                )
    report = report_of(store, exp)
    assert report.tables == []
    (fragment,) = _figures(store, report)
    assert 'id="figure-fig2"' in fragment and fragment.count("<img") == 2
    assert 'alt="accuracy against memory.depth"' in fragment


def test_language_cells_say_why_they_are_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hammr.eval.metrics.explanation as explanation

    def no_java(*args: object, **kwargs: object) -> None:
        raise LanguageMetricError("java not found on PATH")

    monkeypatch.setattr(explanation, "language_scores", no_java)
    store, _, _ = store_mulprog(tmp_path)
    exp = tmp_path / "ex.toml"
    exp.write_text(EXPLAIN_WITH_BLEU)
    report = report_of(store, exp)
    bleu = cell(report, "MulProg", "BLEU-4")
    assert bleu.status == "unavailable" and bleu.value is None and bleu.paper == 20.1
    assert bleu.reason == "unavailable: java not found on PATH"
    assert cell(report, "MulProg", "Grounding").status == "ok"


@pytest.fixture
def scripted_server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.responder = runner_tests.respond
    runner_tests.REFLECTED.clear()
    yield s
    s.close()


def test_report_after_a_scripted_experiment_run_fills_every_cell(
    scripted_server: FakeServer, tmp_path: Path
) -> None:
    path, data = runner_tests.write_experiment(tmp_path)
    store = tmp_path / "runs.sqlite"
    env = runner_tests.env_for(scripted_server, tmp_path)
    code, _, err = runner_tests.invoke(runner_tests.run_args(path, data, store), env)
    assert code == 0, err
    asked = len(scripted_server.seen)
    out_csv = tmp_path / "t.csv"
    args = ["experiment", "report", str(path), "--store", str(store), "--csv", str(out_csv)]
    code, out, err = runner_tests.invoke(args, env)
    assert code == 0, err
    assert len(scripted_server.seen) == asked  # a report asks no model
    assert "Deviations from the paper" in out and "everything: it is a test" in out
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(out_csv.open())}
    assert {r["status"] for r in rows.values()} == {"ok"}
    # explore answers QID-i right unless i % 3 == 0: 4 of 6
    assert rows[("naive", "All")]["ours"] == "66.67"
    assert rows[("reflexion", "All")]["paper"] == "55.5"
    assert rows[("ocr only", "All")]["run"] == "scripted.ocr"


def test_the_report_says_which_judge_decided_the_open_answers(tmp_path: Path) -> None:
    exp = tmp_path / "toy.toml"
    exp.write_text(TOY)
    store = tmp_path / "runs.sqlite"
    judged = [("llm", 1.0), ("llm", 0.0), ("none", 0.0), ("exact", 1.0), ("", 1.0)]
    with RunStore(store) as s:
        s.open_run("toy.hammr", "generic-vqa", "hammr", config=CONFIG,
                   settings={"suite": "generic-vqa", "planned": 5})  # fmt: skip
        for i, (judge, score) in enumerate(judged):
            rec = record("toy.hammr", i, "textvqa", "ocr_reasoning", score, steps_trace(2))
            assert s.add(replace(rec, judge=judge))
    deviations = report_of(store, exp).tables[0].deviations
    assert (
        "run hammr: 2 answers no string matched: decided by the llm judge, where the hammr "
        "paper used BEM" in deviations
    )
    assert (
        "run hammr: 1 answer no string matched: counted wrong, no judge (--judge), where "
        "the hammr paper used BEM" in deviations
    )
    assert not any("exact" in d for d in deviations)
