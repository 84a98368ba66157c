from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import Any

import pytest

from hammr.agents.catalog import AgentCatalog
from hammr.agents.spec import AgentSpec
from hammr.eval.analysis import (
    COLUMNS,
    EXPORT_COLUMNS,
    FORMULATION_KINDS,
    NONE_CHOSEN,
    TOOL_FAILURE_KINDS,
    LabelFileError,
    dispatched,
    dispatcher_confusion,
    error_counts,
    errors_report,
    export_for_labelling,
    run_accuracy,
    sample_wrong,
    tabulate_labels,
    trace_summary,
)
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace

# -- building traces by hand -------------------------------------------------------------------


def st(
    index: int,
    tool: str | None = None,
    kind: str | None = None,
    *,
    child: Trace | None = None,
    router: str | None = None,
    finish: str | None = None,
    action: str | None = None,
    observation: str = "",
    raw: str = "",
) -> Step:
    if action is None and tool is not None:
        action = f"out = {tool}(image)"
    return Step(
        index=index,
        tool=tool,
        action=action,
        error_kind=kind,
        error=f"{kind} happened" if kind else None,
        observation=f"#ERROR#: {kind} happened" if kind else observation,
        child=child,
        router=router,
        finish=finish,
        raw=raw,
    )


def tr(agent: str, steps: list[Step], status: Any = "finished", answer: str | None = "x") -> Trace:
    return Trace(
        agent=agent,
        question="q?",
        steps=steps,
        status=status,
        answer=answer if status == "finished" else None,
        error=None if status == "finished" else f"ended with {status}",
    )


def rec(
    sid: str,
    qt: str,
    trace: Trace | None,
    score: float = 0.0,
    run: str = "hammr",
    status: str = "finished",
) -> RunRecord:
    return RunRecord(
        run=run,
        sample_id=sid,
        dataset="demo",
        question_type=qt,
        question=f"question {sid}?",
        answers=("yes",),
        prediction=None if trace is None else (trace.answer or None),
        score=score,
        status=status,
        trace=trace,
    )


def catalog() -> AgentCatalog:
    def spec(name: str, qt: str | None, role: Any = "specialist") -> AgentSpec:
        return AgentSpec(name=name, description=name, instructions="-", role=role, question_type=qt)

    specs = [
        spec("Dispatcher", None, "dispatcher"),
        spec("CountAgent", "complex_counting"),
        spec("OcrAgent", "ocr_reasoning"),
        spec("OneHopAgent", "single_hop"),
        spec("TwoHopAgent", "two_hop"),
    ]
    return AgentCatalog({s.name: s for s in specs})


def records() -> list[RunRecord]:
    # A: the LLM dispatches right; the specialist makes a syntax error and calls a tool
    # that does not exist before it answers
    count_a = tr(
        "CountAgent",
        [
            st(0, kind="syntax", raw="[Act]: Detect(("),
            st(1, kind="unknown_tool", action="n = CountObjects(image)"),
            st(2, tool="Detect", observation="2 boxes (stored in 'out')"),
            st(3, finish="2"),
        ],
    )
    a = tr("Dispatcher", [st(0, tool="CountAgent", child=count_a, finish="2", observation="2")])
    # B: the LLM sends a two hop question to the one hop agent, which gets bad arguments,
    # an unknown variable and a tool without a backend
    one_b = tr(
        "OneHopAgent",
        [
            st(0, tool="Lens", kind="bad_arguments"),
            st(1, tool="Wiki", kind="unknown_variable"),
            st(2, tool="Lens", kind="capability_missing"),
            st(3, finish="Paris"),
        ],
    )
    b = tr("Dispatcher", [st(0, tool="OneHopAgent", child=one_b, finish="Paris")])
    # C: the neighbours route right; the two hop agent's child runs out of steps, then
    # the two hop agent writes no action, repeats, a tool fails and finally the LLM fails
    one_c = tr(
        "OneHopAgent",
        [st(0, tool="Lens", kind="repeated_action"), st(1, kind="syntax")],
        status="step_limit",
    )
    two_c = tr(
        "TwoHopAgent",
        [
            st(0, tool="OneHopAgent", kind="tool_failure", child=one_c),
            st(1, kind="no_action", raw="I think so"),
            st(2, tool="Lens", kind="repeated_action"),
            st(3, tool="Wiki", kind="tool_failure"),
            st(4, kind="llm_failure"),
        ],
        status="llm_failure",
    )
    c = tr(
        "Dispatcher",
        [st(0, tool="TwoHopAgent", kind="tool_failure", child=two_c, router="neighbours")],
        status="llm_failure",
    )
    # D: the neighbours route right; the specialist runs out of steps and the routed
    # dispatcher takes over its status (which must not count twice)
    count_d = tr(
        "CountAgent",
        [st(0, tool="Detect"), st(1, tool="Detect", kind="repeated_action")],
        status="step_limit",
    )
    d = tr(
        "Dispatcher",
        [st(0, tool="CountAgent", kind="tool_failure", child=count_d, router="neighbours")],
        status="step_limit",
    )
    # E: the dispatcher answers by itself
    e = tr("Dispatcher", [st(0, finish="12")])
    # F: a refused call to OcrAgent (bad arguments: it never ran), then CountAgent
    count_f = tr("CountAgent", [st(0, finish="3")])
    f = tr(
        "Dispatcher",
        [
            st(0, tool="OcrAgent", kind="bad_arguments"),
            st(1, tool="CountAgent", child=count_f, finish="3"),
        ],
    )
    # H: a question type no specialist answers
    ocr_h = tr("OcrAgent", [st(0, finish="a")])
    h = tr("Dispatcher", [st(0, tool="OcrAgent", child=ocr_h, finish="a")])
    # I: another system, flat: hallucinated tools
    naive = tr(
        "NaiveGenericAgent",
        [st(0, kind="unknown_tool"), st(1, kind="unknown_tool"), st(2, finish="4")],
    )
    return [
        rec("A", "complex_counting", a, score=1.0),
        rec("B", "two_hop", b),
        rec("C", "two_hop", c),
        rec("D", "complex_counting", d),
        rec("E", "ocr_reasoning", e),
        rec("F", "ocr_reasoning", f),
        rec("G", "ocr_reasoning", None, status="timeout"),
        rec("H", "weird", h),
        rec("I", "complex_counting", naive, run="naive"),
    ]


# -- groups ------------------------------------------------------------------------------------


def test_kind_groups_cover_the_error_kinds() -> None:
    from typing import get_args

    from hammr.actions import ParseErrorKind
    from hammr.tools.base import ErrorKind

    assert set(get_args(ParseErrorKind)) == set(FORMULATION_KINDS)
    grouped = {*FORMULATION_KINDS, *TOOL_FAILURE_KINDS, "step_limit", "repeated_action"}
    assert grouped == set(get_args(ErrorKind))
    assert not set(FORMULATION_KINDS) & set(TOOL_FAILURE_KINDS)


# -- error counts ------------------------------------------------------------------------------


def nonzero(row: Any) -> dict[str, int]:
    return {c: row.value(c) for c in COLUMNS if row.value(c)}


def test_error_counts_per_agent() -> None:
    table = error_counts(records())
    assert list(table.by_agent) == [
        "CountAgent",
        "Dispatcher",
        "NaiveGenericAgent",
        "OcrAgent",
        "OneHopAgent",
        "TwoHopAgent",
    ]
    agents = table.by_agent
    assert (agents["Dispatcher"].runs, agents["Dispatcher"].steps) == (7, 8)
    # the failed specialist calls are not the dispatcher's tool failures; the routed
    # dispatcher's inherited step limit is not its own
    assert nonzero(agents["Dispatcher"]) == {
        "bad_arguments": 1,
        "formulation_total": 1,
        "agent_failed": 2,
    }
    assert (agents["CountAgent"].runs, agents["CountAgent"].steps) == (3, 7)
    assert nonzero(agents["CountAgent"]) == {
        "syntax": 1,
        "unknown_tool": 1,
        "formulation_total": 2,
        "repeated_action": 1,
        "step_limit": 1,
    }
    assert (agents["OneHopAgent"].runs, agents["OneHopAgent"].steps) == (2, 6)
    assert nonzero(agents["OneHopAgent"]) == {
        "syntax": 1,
        "unknown_variable": 1,
        "bad_arguments": 1,
        "formulation_total": 3,
        "capability_missing": 1,
        "tool_failure_total": 1,
        "repeated_action": 1,
        "step_limit": 1,
    }
    assert nonzero(agents["TwoHopAgent"]) == {
        "no_action": 1,
        "formulation_total": 1,
        "tool_failure": 1,
        "llm_failure": 1,
        "tool_failure_total": 2,
        "agent_failed": 1,
        "repeated_action": 1,
    }
    assert nonzero(agents["OcrAgent"]) == {}
    assert nonzero(agents["NaiveGenericAgent"]) == {"unknown_tool": 2, "formulation_total": 2}


def test_error_counts_per_question_type_and_total() -> None:
    table = error_counts(records())
    assert list(table.by_type) == ["two_hop", "complex_counting", "ocr_reasoning", "weird"]
    t = table.by_type
    assert (t["complex_counting"].runs, t["complex_counting"].steps) == (3, 11)
    assert nonzero(t["complex_counting"]) == {
        "syntax": 1,
        "unknown_tool": 3,
        "formulation_total": 4,
        "agent_failed": 1,
        "repeated_action": 1,
        "step_limit": 1,
    }
    assert (t["two_hop"].runs, t["two_hop"].steps) == (2, 13)
    assert nonzero(t["two_hop"]) == {
        "syntax": 1,
        "no_action": 1,
        "unknown_variable": 1,
        "bad_arguments": 1,
        "formulation_total": 4,
        "tool_failure": 1,
        "capability_missing": 1,
        "llm_failure": 1,
        "tool_failure_total": 3,
        "agent_failed": 2,
        "repeated_action": 2,
        "step_limit": 1,
    }
    assert (t["ocr_reasoning"].runs, t["ocr_reasoning"].steps) == (2, 4)
    assert nonzero(t["ocr_reasoning"]) == {"bad_arguments": 1, "formulation_total": 1}
    assert (t["weird"].runs, t["weird"].steps) == (1, 2)
    total = table.total
    assert (total.runs, total.steps) == (8, 30)
    assert nonzero(total) == {
        "syntax": 2,
        "no_action": 1,
        "unknown_tool": 3,
        "unknown_variable": 1,
        "bad_arguments": 2,
        "formulation_total": 9,
        "tool_failure": 1,
        "capability_missing": 1,
        "llm_failure": 1,
        "tool_failure_total": 3,
        "agent_failed": 3,
        "repeated_action": 3,
        "step_limit": 2,
    }
    # per agent and per type add up to the same totals
    agents = table.agent_total()
    assert agents.counts == total.counts and agents.steps == total.steps
    assert table.no_trace == {"timeout": 1}


def test_step_limit_of_a_react_agent_whose_last_call_ran_out_counts_for_both() -> None:
    child = tr("CountAgent", [st(0, tool="Detect")], status="step_limit")
    parent = tr(
        "TwoHopAgent",
        [st(0, tool="CountAgent", kind="tool_failure", child=child)],
        status="step_limit",
    )
    table = error_counts([rec("x", "two_hop", parent)])
    assert table.by_agent["CountAgent"].value("step_limit") == 1
    assert table.by_agent["TwoHopAgent"].value("step_limit") == 1
    assert table.by_agent["TwoHopAgent"].value("agent_failed") == 1
    assert table.by_agent["TwoHopAgent"].value("tool_failure") == 0


def test_a_timeout_counts_for_the_agent_whose_step_was_in_flight() -> None:
    # The deadline ended the run while CountAgent (called by the dispatcher) waited for its
    # model; a second sample timed out in the dispatcher's own step.
    child = tr("CountAgent", [st(0, tool="Detect"), st(1)], status="cancelled")
    parent = tr(
        "Dispatcher", [st(0, tool="CountAgent", router="neighbours", child=child)], "timeout"
    )
    alone = tr("Dispatcher", [st(0)], status="timeout")
    table = error_counts(
        [rec("a", "complex_counting", parent, status="timeout"), rec("b", "ocr", alone)]
    )
    assert table.by_agent["CountAgent"].value("timeout") == 1
    assert table.by_agent["Dispatcher"].value("timeout") == 1  # sample b only
    assert table.total.value("timeout") == 2
    assert table.by_type["complex_counting"].value("timeout") == 1
    assert "timeout" in table.columns


def test_unknown_error_kinds_get_their_own_column() -> None:
    t = tr("CountAgent", [st(0, kind="brand_new_kind"), st(1, finish="1")])
    table = error_counts([rec("x", "complex_counting", t)])
    assert table.columns[-1] == "brand_new_kind"
    assert table.total.value("brand_new_kind") == 1
    assert "brand_new_kind" in table.to_csv().splitlines()[0]


def test_error_table_renderings() -> None:
    table = error_counts(records())
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert [r["name"] for r in rows if r["group"] == "agent"][-1] == "total"
    tot = next(r for r in rows if r["group"] == "question_type" and r["name"] == "total")
    assert (tot["runs"], tot["formulation_total"], tot["step_limit"]) == ("8", "9", "2")
    two = next(r for r in rows if r["name"] == "TwoHopAgent")
    assert (two["agent_failed"], two["tool_failure_total"]) == ("1", "2")

    md = table.to_markdown()
    assert "**Errors by agent (the agent that made the step)**" in md
    assert "| agent | runs | steps | syntax | no_action |" in md
    assert "| CountAgent | 3 | 7 | 1 | 0 | 1 | 0 | 0 | 2 | 0 | 0 | 0 | 0 | 0 | 1 | 1 |" in md
    assert "1 record(s) without a trace (timeout: 1)." in md


# -- dispatcher confusion ----------------------------------------------------------------------


def test_dispatched_takes_the_first_call_that_reached_a_specialist() -> None:
    specialists = ["CountAgent", "OcrAgent"]
    refused_then_called = tr(
        "Dispatcher",
        [
            st(0, tool="OcrAgent", kind="bad_arguments"),
            st(1, tool="OcrAgent", kind="unknown_variable"),
            st(2, tool="CountAgent", child=tr("CountAgent", [])),
        ],
    )
    assert dispatched(refused_then_called, specialists) == ("CountAgent", "llm")
    failed_inside = tr(
        "Dispatcher",
        [
            st(
                0,
                tool="OcrAgent",
                kind="tool_failure",
                child=tr("OcrAgent", [], status="step_limit"),
                router="inputs",
            )
        ],
    )
    assert dispatched(failed_inside, specialists) == ("OcrAgent", "inputs")
    plain_tool = tr("Dispatcher", [st(0, tool="VQA"), st(1, finish="no")])
    assert dispatched(plain_tool, specialists) == (NONE_CHOSEN, "llm")
    assert dispatched(tr("Dispatcher", []), specialists) == (NONE_CHOSEN, "llm")


def test_dispatcher_confusion_counts_and_accuracy() -> None:
    conf = dispatcher_confusion(records(), catalog())
    assert conf.dispatcher == "Dispatcher"
    assert conf.skipped == 2  # G has no trace, I is the naive agent's
    assert conf.counts == {
        ("complex_counting", "CountAgent", "llm"): 1,
        ("complex_counting", "CountAgent", "neighbours"): 1,
        ("two_hop", "OneHopAgent", "llm"): 1,
        ("two_hop", "TwoHopAgent", "neighbours"): 1,
        ("ocr_reasoning", NONE_CHOSEN, "llm"): 1,
        ("ocr_reasoning", "CountAgent", "llm"): 1,
        ("weird", "OcrAgent", "llm"): 1,
    }
    assert conf.question_types == ["two_hop", "complex_counting", "ocr_reasoning", "weird"]
    assert conf.chosen == ["CountAgent", "OcrAgent", "OneHopAgent", "TwoHopAgent", NONE_CHOSEN]
    assert conf.deciders == ["llm", "neighbours"]
    # 'weird' has no specialist: counted, but not in the accuracy
    assert (conf.count(), conf.total(), conf.correct()) == (7, 6, 3)
    assert conf.accuracy() == pytest.approx(0.5)
    assert conf.accuracy("complex_counting") == 1.0
    assert conf.accuracy("two_hop") == 0.5
    assert conf.accuracy("ocr_reasoning") == 0.0
    assert conf.accuracy("weird") is None
    assert conf.accuracy(decided_by="llm") == pytest.approx(0.25)
    assert conf.accuracy(decided_by="neighbours") == 1.0
    assert conf.count(decided_by="llm") == 5
    assert conf.matrix("neighbours")["two_hop"] == {"TwoHopAgent": 1}
    assert conf.matrix()["ocr_reasoning"] == {NONE_CHOSEN: 1, "CountAgent": 1}


def test_confusion_renderings() -> None:
    conf = dispatcher_confusion(records(), catalog())
    md = conf.to_markdown()
    head = (
        "| question type | Count | Ocr | One Hop | Two Hop | (none) | n | accuracy "
        "| by llm | by neighbours |"
    )
    assert head in md
    assert "| two_hop | . | . | 1 | **1** | . | 2 | 50.0% | 1 (0.0%) | 1 (100.0%) |" in md
    assert "| ocr_reasoning | 1 | **.** | . | . | 1 | 2 | 0.0% | 2 (0.0%) | . |" in md
    assert "| weird | . | 1 | . | . | . | 1 | n/a | 1 (n/a) | . |" in md
    assert "| total | 3 | 1 | 1 | 1 | 1 | 7 | 50.0% | 5 (25.0%) | 2 (100.0%) |" in md
    rows = list(csv.DictReader(io.StringIO(conf.to_csv())))
    assert len(rows) == 7
    assert rows[0] == {
        "question_type": "two_hop",
        "expected": "TwoHopAgent",
        "chosen": "OneHopAgent",
        "decided_by": "llm",
        "count": "1",
        "correct": "0",
    }
    assert rows[-1]["correct"] == ""  # 'weird' has no expected specialist


def test_errors_report_text() -> None:
    text = errors_report(records(), catalog())
    assert text.startswith("Error analysis of run hammr (8 record(s))")
    hammr, naive = text.split("Error analysis of run naive (1 record(s))")
    assert "Errors by agent" in hammr and "Errors by question type" in hammr
    assert "Dispatcher routing (Dispatcher)" in hammr
    assert "TwoHopAgent" in hammr and "50.0%" in hammr
    assert "1 record(s) without a trace (timeout: 1)." in " ".join(hammr.split())
    # the matrix, in a terminal: short codes with a legend, '*' on the expected cell
    assert "question type      Count   Ocr   OneHop   TwoHop   (none)   n   accuracy" in hammr
    assert "two_hop                .     .        1       1*        .   2      50.0%" in hammr
    assert "Count = CountAgent, Ocr = OcrAgent, OneHop = OneHopAgent" in hammr
    assert "NaiveGenericAgent" in naive and "NaiveGenericAgent" not in hammr
    assert "no dispatcher runs in these records (Dispatcher)" in naive
    assert "\x1b[" not in text  # plain text, no colour codes
    assert errors_report([], catalog()) == "Error analysis: no records.\n"


# -- sampling, exporting, trace summaries -------------------------------------------------------


def many(run: str, n_right: int, n_wrong: dict[str, int]) -> list[RunRecord]:
    out = [rec(f"{run}-ok{i}", "complex_counting", None, 1.0, run) for i in range(n_right)]
    for qt, n in n_wrong.items():
        out += [rec(f"{run}-{qt}{i}", qt, None, 0.0, run) for i in range(n)]
    return out


def test_sample_wrong_is_stratified_and_reproducible() -> None:
    recs = many("hammr", 5, {"two_hop": 7, "ocr_reasoning": 2}) + many("naive", 1, {"two_hop": 9})
    recs.append(rec("soft", "ocr_reasoning", None, 0.67))  # two annotators agree: right
    recs.append(rec("soft2", "ocr_reasoning", None, 0.33))  # one annotator: wrong
    picked = sample_wrong(recs, per_type=3, seed=1)
    keys = [(r.run, r.question_type) for r in picked]
    assert (
        keys
        == [("hammr", "two_hop")] * 3
        + [("hammr", "ocr_reasoning")] * 3
        + [("naive", "two_hop")] * 3
    )
    assert {r.sample_id for r in picked if r.question_type == "ocr_reasoning"} == {
        "hammr-ocr_reasoning0",
        "hammr-ocr_reasoning1",
        "soft2",
    }
    assert all(r.score < 0.5 for r in picked)
    shuffled = list(recs)
    random.Random(5).shuffle(shuffled)
    assert sample_wrong(shuffled, per_type=3, seed=1) == picked
    # another run does not change this run's draw
    alone = sample_wrong([r for r in recs if r.run == "hammr"], per_type=3, seed=1)
    assert alone == [r for r in picked if r.run == "hammr"]
    assert sample_wrong(recs, per_type=0, seed=1) == []
    draws = {tuple(r.sample_id for r in sample_wrong(recs, 3, seed)) for seed in range(8)}
    assert len(draws) > 1
    with pytest.raises(ValueError):
        sample_wrong(recs, per_type=-1, seed=0)


def test_trace_summary_one_line_per_step() -> None:
    c = next(r for r in records() if r.sample_id == "C").trace
    lines = trace_summary(c).splitlines()
    assert lines[0] == (
        "Dispatcher > [router: neighbours] out = TwoHopAgent(image) "
        "-> ERROR[tool_failure]: tool_failure happened"
    )
    assert lines[1] == (
        "  TwoHopAgent > out = OneHopAgent(image) -> ERROR[tool_failure]: tool_failure happened"
    )
    assert lines[2].startswith("    OneHopAgent > out = Lens(image) -> ERROR[repeated_action]")
    assert lines[3] == "    OneHopAgent > (no action) -> ERROR[syntax]: syntax happened"
    assert lines[4] == "    OneHopAgent ended: step_limit (ended with step_limit)"
    assert lines[5] == "  TwoHopAgent > (wrote: I think so) -> ERROR[no_action]: no_action happened"
    assert lines[-1] == "Dispatcher ended: llm_failure (ended with llm_failure)"
    a = next(r for r in records() if r.sample_id == "A").trace
    lines = trace_summary(a).splitlines()
    assert lines[0] == "Dispatcher > out = CountAgent(image) -> 2"
    assert "  CountAgent > out = Detect(image) -> 2 boxes (stored in 'out')" in lines
    assert lines[-1] == "  CountAgent > [Finish] 2"
    assert trace_summary(None) == "(no trace)"
    long = tr("X", [st(0, tool="T", observation="word " * 200)])
    assert len(trace_summary(long, limit=50)) < 120


def test_export_writes_the_columns(tmp_path: Path) -> None:
    recs = records()
    recs[1].answers = ("paris", "paris", "Paris, France")
    path = export_for_labelling(recs, tmp_path / "sub" / "label.csv", accuracy={"hammr": 0.25})
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(EXPORT_COLUMNS)
    assert len(rows) == len(recs)
    b = rows[1]
    assert (b["run"], b["dataset"], b["sample_id"], b["question_type"]) == (
        "hammr",
        "demo",
        "B",
        "two_hop",
    )
    assert b["answers"] == "paris (x2) | Paris, France"
    assert b["prediction"] == "x" and b["score"] == "0" and b["run_accuracy"] == "0.25"
    assert b["label"] == "" and b["note"] == ""
    assert b["trace"].splitlines()[1].startswith("  OneHopAgent > out = Lens(image) -> ERROR[")
    g = next(r for r in rows if r["sample_id"] == "G")
    assert (g["trace"], g["prediction"], g["status"]) == ("(no trace)", "", "timeout")
    naive = next(r for r in rows if r["run"] == "naive")
    assert naive["run_accuracy"] == ""


# -- labelling round trip ------------------------------------------------------------------------


def relabel(path: Path, labels: dict[str, str], *, delimiter: str = ",", bom: bool = False) -> None:
    """What a person does: fill the label column (here in a spreadsheet that may save
    with ';' and a BOM)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["label"] = labels.get(row["sample_id"], row["label"])
    with path.open("w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(EXPORT_COLUMNS), delimiter=delimiter)
        w.writeheader()
        w.writerows(rows)


def round_trip_records() -> list[RunRecord]:
    # hammr: 10 samples, 5 right (accuracy 0.5); naive: 5 samples, 1 right (accuracy 0.2)
    hammr = many("hammr", 5, {"two_hop": 3, "ocr_reasoning": 2})
    naive = many("naive", 1, {"two_hop": 2, "complex_counting": 2})
    return hammr + naive


LABELS_BY_HAND = {
    "hammr-two_hop0": "reasoning",
    "hammr-two_hop1": " Reasoning ",
    "hammr-two_hop2": "skip",
    "hammr-ocr_reasoning0": "Tool call formulation",
    "hammr-ocr_reasoning1": "tool-failure",
    "naive-two_hop0": "reasoning",
    "naive-two_hop1": "ok",
    "naive-complex_counting0": "No error",
    "naive-complex_counting1": "tool_failure",
}


@pytest.mark.parametrize(("delimiter", "bom"), [(",", False), (";", True), ("\t", False)])
def test_export_label_tabulate_round_trip(tmp_path: Path, delimiter: str, bom: bool) -> None:
    recs = round_trip_records()
    acc = run_accuracy(recs)
    assert acc == {"hammr": 0.5, "naive": pytest.approx(0.2)}
    picked = sample_wrong(recs, per_type=10, seed=0)
    assert len(picked) == 9
    path = export_for_labelling(picked, tmp_path / "labels.csv", accuracy=acc)
    relabel(path, LABELS_BY_HAND, delimiter=delimiter, bom=bom)

    table = tabulate_labels(path)
    hammr, naive = table.runs["hammr"], table.runs["naive"]
    assert list(table.runs) == ["hammr", "naive"]
    assert hammr.counts == {"reasoning": 2, "skip": 1, "formulation": 1, "tool_failure": 1}
    assert hammr.labelled == 4
    # hammr: 4 labelled mistakes, half of all samples wrong
    assert hammr.percentages() == {
        "reasoning": 0.25,
        "formulation": 0.125,
        "tool_failure": 0.125,
        "ok": 0.5,
    }
    # naive: 4 labelled, 2 of them fine after all; 80% scored wrong
    pct = naive.percentages()
    assert pct is not None
    assert pct == {
        "reasoning": pytest.approx(0.2),
        "formulation": 0.0,
        "tool_failure": pytest.approx(0.2),
        "ok": pytest.approx(0.6),
    }
    assert sum(pct.values()) == pytest.approx(1.0)

    md = table.to_markdown()
    assert "| Error type | hammr | naive |" in md
    assert "| Reasoning | 25.0% | 20.0% |" in md
    assert "| Tool call formulation | 12.5% | 0.0% |" in md
    assert "| Tool failure | 12.5% | 20.0% |" in md
    assert "| No error | 50.0% | 60.0% |" in md
    assert "| labelled (skipped) | 4 (1) | 4 (0) |" in md
    assert "| accuracy | 50.0% | 20.0% |" in md
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert rows[0] == {
        "run": "hammr",
        "error_type": "Reasoning",
        "count": "2",
        "labelled": "4",
        "share_of_labelled": "0.5000",
        "percent": "25.00",
    }
    assert [r["percent"] for r in rows if r["run"] == "naive"] == [
        "20.00",
        "0.00",
        "20.00",
        "60.00",
    ]


def test_tabulate_without_accuracy_gives_label_shares(tmp_path: Path) -> None:
    recs = round_trip_records()
    path = export_for_labelling(sample_wrong(recs, 10, 0), tmp_path / "l.csv")
    relabel(path, LABELS_BY_HAND)
    table = tabulate_labels(path)
    assert table.runs["hammr"].accuracy is None
    assert table.runs["hammr"].percentages() is None
    assert table.runs["naive"].value("ok") == 0.5
    md = table.to_markdown()
    assert "| Reasoning | 50.0% | 25.0% |" in md
    assert "| No error | 0.0% | 50.0% |" in md
    assert "without a known accuracy (hammr, naive)" in md
    assert next(csv.DictReader(io.StringIO(table.to_csv())))["percent"] == ""
    # the accuracy given by the caller is used
    given = tabulate_labels(path, accuracy={"hammr": 0.5})
    assert given.runs["hammr"].value("reasoning") == 0.25
    assert given.runs["naive"].accuracy is None


# -- bad label files -----------------------------------------------------------------------------


def labelled_file(tmp_path: Path, labels: dict[str, str] | None = None) -> Path:
    recs = round_trip_records()
    path = export_for_labelling(
        sample_wrong(recs, 10, 0), tmp_path / "l.csv", accuracy=run_accuracy(recs)
    )
    relabel(path, LABELS_BY_HAND if labels is None else labels)
    return path


def test_unknown_label_names_the_row(tmp_path: Path) -> None:
    path = labelled_file(tmp_path, {**LABELS_BY_HAND, "hammr-two_hop1": "dunno"})
    with pytest.raises(LabelFileError) as err:
        tabulate_labels(path)
    msg = str(err.value)
    assert "row 3" in msg and "'hammr-two_hop1'" in msg and "'dunno'" in msg
    assert "reasoning, formulation, tool_failure, ok, skip" in msg


def test_blank_labels(tmp_path: Path) -> None:
    labels = dict(LABELS_BY_HAND)
    del labels["naive-two_hop1"]
    path = labelled_file(tmp_path, labels)
    with pytest.raises(LabelFileError, match=r"row \d+ \(run 'naive', sample 'naive-two_hop1'\)"):
        tabulate_labels(path)
    table = tabulate_labels(path, allow_unlabelled=True)
    naive = table.runs["naive"]
    assert naive.counts["unlabelled"] == 1 and naive.labelled == 3


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(LabelFileError, match="not found"):
        tabulate_labels(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(LabelFileError, match="empty"):
        tabulate_labels(empty)
    no_label = tmp_path / "nolabel.csv"
    no_label.write_text("run,sample_id,verdict\nhammr,1,reasoning\n")
    with pytest.raises(LabelFileError, match=r"missing column.*label"):
        tabulate_labels(no_label)
    dup = tmp_path / "dup.csv"
    dup.write_text("run,sample_id,label\nhammr,1,reasoning\nhammr,2,ok\nhammr,1,skip\n")
    with pytest.raises(LabelFileError, match=r"row 4 .* already on row 2"):
        tabulate_labels(dup)
    acc = tmp_path / "acc.csv"
    acc.write_text("run,sample_id,label,run_accuracy\nh,1,ok,0.5\nh,2,ok,0.4\n")
    with pytest.raises(LabelFileError, match=r"row 3 .* differs from 0\.5 on row 2"):
        tabulate_labels(acc)
    acc.write_text("run,sample_id,label,run_accuracy\nh,1,ok,half\n")
    with pytest.raises(LabelFileError, match="not a number"):
        tabulate_labels(acc)
    acc.write_text("run,sample_id,label,run_accuracy\nh,1,ok,47.6\n")
    with pytest.raises(LabelFileError, match="between 0 and 1"):
        tabulate_labels(acc)
    extra = tmp_path / "extra.csv"
    extra.write_text("run,sample_id,label\nh,1,ok\nh,2,ok,surplus\n")
    with pytest.raises(LabelFileError, match="row 3: more cells"):
        tabulate_labels(extra)
    no_id = tmp_path / "noid.csv"
    no_id.write_text("run,sample_id,label\nh,,ok\n")
    with pytest.raises(LabelFileError, match="must not be empty"):
        tabulate_labels(no_id)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("run,sample_id,label\nh,caf\xe9,ok\n".encode("latin-1"))
    with pytest.raises(LabelFileError, match="not UTF-8"):
        tabulate_labels(latin)


def test_minimal_hand_written_file(tmp_path: Path) -> None:
    """Only run, sample_id and label are needed; blank lines are ignored."""
    path = tmp_path / "mini.csv"
    path.write_text("run,sample_id,label\nh,1,reasoning\n,,\nh,2,ok\n")
    table = tabulate_labels(path, accuracy={"h": 0.6})
    pct = table.runs["h"].percentages()
    assert pct == {
        "reasoning": pytest.approx(0.2),
        "formulation": 0.0,
        "tool_failure": 0.0,
        "ok": pytest.approx(0.8),
    }
