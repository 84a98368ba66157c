"""`hammr explain`: grounded explanations of stored runs (HAMMR-style traces, MulProg's own),
scored against MEVQA's references exactly as the metric functions score them; the bundled
mevqa suite under `hammr eval --system mulprog` (the LLM played by the scripted server)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.cli import main
from hammr.eval.datasets import load_dataset
from hammr.eval.datasets.mevqa import references
from hammr.eval.metrics.explanation import (
    LANGUAGE_METRICS,
    BoxRef,
    GroundedExplanation,
    detection_score,
    grounding_score,
    score_explanations,
    xyxy,
)
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from hammr.eval.types import RunRecord
from hammr.programs.system import explanation_output
from hammr.trace import Step, Trace, encode_value
from hammr.values import Box

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mevqa" / "MEGQA_test.json"
HAS_LANGUAGE = shutil.which("java") is not None and importlib.util.find_spec("pycocoevalcap")


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, args, env=env or {"HAMMR_CONFIG": ""})
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


def boxes_json(*boxes: Box) -> object:
    return encode_value(list(boxes), {})


def detect(index: int, name: str, *boxes: Box) -> Step:
    return Step(
        index=index,
        tool="Detect",
        action=f"out = Detect(image, object='{name}')",
        arguments={"object": name},
        output=boxes_json(*boxes),
        observation=f"{len(boxes)} boxes",
    )


def hammr_trace(answer: str, *detections: tuple[str, tuple[Box, ...]]) -> Trace:
    """A dispatcher handing the question to a specialist whose Detect calls found boxes."""
    child = Trace(
        agent="SpatialAgent",
        question="q",
        steps=[detect(i, name, *bs) for i, (name, bs) in enumerate(detections)]
        + [Step(index=len(detections), finish=answer)],
        answer=answer,
        status="finished",
    )
    return Trace(
        agent="Dispatcher",
        question="q",
        steps=[Step(index=0, tool="SpatialAgent", action="SpatialAgent(q)", child=child)],
        answer=answer,
        status="finished",
    )


def mulprog_trace(answer: str, explanation: GroundedExplanation) -> Trace:
    """A MulProg trace ending with the EXPLAIN step the system writes."""
    return Trace(
        agent="MulProg",
        question="q",
        inputs={"IMAGE": {"$image": "0" * 16, "size": [640, 480]}},
        steps=[
            Step(index=0, tool="PLAN", raw="BOX0=LOC(image=IMAGE,object='x')"),
            Step(
                index=1,
                tool="EXPLAIN",
                output=explanation_output(explanation),
                observation=explanation.text,
            ),
        ],
        answer=answer,
        status="finished",
    )


def store_run(path: Path, run: str, records: list[RunRecord], suite: str = "s") -> None:
    with RunStore(path) as store:
        store.open_run(run, suite, "hammr")
        for rec in records:
            assert store.add(rec)


def record(
    run: str, sid: str, trace: Trace | None, answer: str | None, dataset: str = "demo"
) -> RunRecord:
    return RunRecord(
        run=run,
        sample_id=sid,
        dataset=dataset,
        question_type="spatial_reasoning",
        question=f"question {sid}?",
        answers=("left",),
        prediction=answer,
        score=1.0 if answer == "left" else 0.0,
        trace=trace,
    )


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def table_value(out: str, label: str) -> str:
    m = re.search(rf"^\s*{re.escape(label)}\s+(\S+)\s*$", out, re.M)
    assert m, f"no row {label!r} in:\n{out}"
    return m.group(1)


# --- explanations built from HAMMR-style traces -------------------------------------------------

APPLE = (Box(10, 20, 30, 40), Box(100, 20, 30, 40))
PEAR = (Box(200, 50, 60, 80),)


@pytest.fixture
def hammr_store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite"
    store_run(
        path,
        "h",
        [
            record("h", "q1", hammr_trace("left", ("apple", APPLE), ("pear", PEAR)), "left"),
            record("h", "q2", hammr_trace("blue"), "blue"),  # no box anywhere
            record("h", "q3", None, None),  # stored with no trace: nothing to explain
        ],
    )
    return path


def test_explain_builds_explanations_from_child_trace_boxes(
    hammr_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "exp.jsonl"
    code, stdout, stderr = invoke(["explain", "h", "--store", str(hammr_store), "--out", str(out)])
    assert code == 0, stderr
    rows = jsonl(out)
    assert [r["sample_id"] for r in rows] == ["q1", "q2"]
    first, second = rows
    assert first["source"] == "template" and first["answer"] == "left"
    text = str(first["explanation"])
    assert text.count("[BOX]") == 2 and "apple" in text and "pear" in text and "left" in text
    assert first["boxes"] == [
        {"name": "apple", "boxes": [list(xyxy(b)) for b in APPLE]},
        {"name": "pear", "boxes": [list(xyxy(b)) for b in PEAR]},
    ]
    assert "scores" not in first
    assert second["boxes"] == [] and "[BOX]" not in str(second["explanation"])
    assert table_value(stdout, "samples explained") == "2"
    assert table_value(stdout, "stored without a trace") == "1"
    assert table_value(stdout, "built from traces") == "2"
    assert table_value(stdout, "from the run (EXPLAIN)") == "0"
    assert "nothing scored: no --suite/--data-dir" in stdout
    assert f"wrote {out}" in stderr


def llm_reply(seen: Seen) -> Reply:
    """Scripted fake LLM (served): grounds the apple question, names a missing box otherwise."""
    prompt = json.dumps(seen.body.get("messages"))
    if "apple" in prompt:
        return Reply(body=ok_body("The apple {BOX0} is left of the pear {BOX1}."))
    return Reply(body=ok_body("It is blue because of {BOX7}."))


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.responder = llm_reply
    yield s
    s.close()


def test_explain_llm_grounds_on_trace_boxes_and_falls_back_scripted_llm(
    hammr_store: Path, tmp_path: Path, server: FakeServer
) -> None:
    out = tmp_path / "exp.jsonl"
    env = served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))
    args = ["explain", "h", "--store", str(hammr_store), "--llm", "--out", str(out)]
    code, stdout, stderr = invoke(args, env)
    assert code == 0, stderr
    first, second = jsonl(out)
    assert first["source"] == "llm"
    assert first["explanation"] == "The apple [BOX] is left of the pear [BOX]."
    assert [b["name"] for b in first["boxes"]] == ["apple", "pear"]  # type: ignore[index, union-attr]
    assert second["source"] == "template (llm fallback)" and "BOX7" in str(
        second["fallback_reason"]
    )
    assert table_value(stdout, "by the LLM") == "1"
    assert table_value(stdout, "LLM fallbacks to the template") == "1"
    assert "hammr: warning: 1 LLM explanation(s) replaced by the template" in stderr
    assert len(server.seen) == 2


# --- a MulProg run scored against MEVQA's references ----------------------------------------------


def shifted(ref: GroundedExplanation, dx: float) -> GroundedExplanation:
    """The reference's own text with its boxes moved right by dx (a near miss)."""
    moved = [
        BoxRef(r.name, tuple(Box(b.x + dx, b.y, b.w, b.h) for b in r.boxes)) for r in ref.boxes
    ]
    return GroundedExplanation(ref.text, moved)


def mevqa_predictions() -> dict[str, GroundedExplanation]:
    refs = references(load_dataset("mevqa", FIXTURE))
    preds = {sid: shifted(ref, 7.0 * i) for i, (sid, ref) in enumerate(refs.items())}
    last = list(refs)[-1]
    preds[last] = GroundedExplanation("The answer is red.", [])  # no box: scores 0
    return preds


@pytest.fixture
def mulprog_store(tmp_path: Path) -> tuple[Path, Path]:
    """A stored MulProg run over the fixture's questions and a data folder with the suite."""
    data = tmp_path / "data"
    (data / "mevqa").mkdir(parents=True)
    shutil.copy(FIXTURE, data / "mevqa" / "MEGQA_test.json")
    samples = load_dataset("mevqa", FIXTURE)
    preds = mevqa_predictions()
    recs = [
        RunRecord(
            run="mp",
            sample_id=s.id,
            dataset="mevqa",
            question_type=s.question_type,
            question=s.question,
            answers=s.answers,
            prediction=s.answers[0] if i % 2 == 0 else "nope",
            score=1.0 if i % 2 == 0 else 0.0,
            trace=mulprog_trace(s.answers[0], preds[s.id]),
        )
        for i, s in enumerate(samples)
    ]
    path = tmp_path / "runs.sqlite"
    store_run(path, "mp", recs, suite="mevqa")
    return path, data


def test_explain_scores_a_mulprog_run_as_the_metric_functions_do(
    mulprog_store: tuple[Path, Path], tmp_path: Path
) -> None:
    store, data = mulprog_store
    out = tmp_path / "mp.jsonl"
    args = ["explain", "mp", "--store", str(store), "--suite", "mevqa"]
    code, stdout, stderr = invoke(
        [*args, "--data-dir", str(data), "--no-language", "--out", str(out)]
    )
    assert code == 0, stderr
    refs = references(load_dataset("mevqa", FIXTURE))
    preds = mevqa_predictions()
    rows = {str(r["sample_id"]): r for r in jsonl(out)}
    assert set(rows) == set(refs)
    for sid, row in rows.items():
        assert row["source"] == "run" and row["explanation"] == preds[sid].text
        assert row["scores"] == {
            "detection": detection_score(refs[sid], preds[sid]),
            "grounding": grounding_score(refs[sid], preds[sid], image_size=(640, 480)),
        }
    direct = score_explanations(refs, preds)
    assert 0 < direct.detection < 1 and 0 < direct.grounding < 1  # near misses and a miss
    assert (
        table_value(stdout, "detection (Eq. 2, official padding)")
        == f"{100 * direct.detection:.1f}"
    )
    assert table_value(stdout, "grounding (REX)") == f"{100 * direct.grounding:.1f}"
    assert table_value(stdout, "samples scored (with a reference)") == "5"
    assert table_value(stdout, "from the run (EXPLAIN)") == "5"
    # MEVQA samples: the official comparison and the normalised one (equal on these answers)
    assert table_value(stdout, "answer accuracy") == f"{100 * 3 / 5:.1f}"
    assert table_value(stdout, "answer accuracy (normalised)") == f"{100 * 3 / 5:.1f}"
    assert "language metrics not computed (--no-language)" in stdout
    assert "BLEU-1" not in stdout


def test_padding_flag_changes_detection_on_a_two_object_reference(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "mevqa").mkdir(parents=True)
    shutil.copy(FIXTURE, data / "mevqa" / "MEGQA_test.json")
    refs = references(load_dataset("mevqa", FIXTURE))
    two = refs["20968402"]  # apple and pear, one box each
    assert len(two.named_groups()) == 2
    pred = shifted(two, 3.0)
    store = tmp_path / "runs.sqlite"
    rec = RunRecord(
        run="two",
        sample_id="20968402",
        dataset="mevqa",
        question_type="spatial_reasoning",
        question="?",
        answers=("left",),
        prediction="left",
        score=1.0,
        trace=mulprog_trace("left", pred),
    )
    store_run(store, "two", [rec], suite="mevqa")
    base = ["explain", "two", "--store", str(store), "--suite", "mevqa", "--data-dir", str(data)]
    shown = {}
    for flag, official in (("--official-padding", True), ("--eq2-padding", False)):
        code, stdout, stderr = invoke([*base, "--no-language", flag])
        assert code == 0, stderr
        label = "official padding" if official else "the paper's Eq. 2 padding"
        shown[official] = table_value(stdout, f"detection (Eq. 2, {label})")
        expected = detection_score(two, pred, official_padding=official)
        assert shown[official] == f"{100 * expected:.1f}"
    assert shown[True] != shown[False]


@pytest.mark.skipif(not HAS_LANGUAGE, reason="the language metrics need Java and pycocoevalcap")
def test_language_metrics_match_pycocoevalcap_and_spice_is_explained(
    mulprog_store: tuple[Path, Path],
) -> None:
    store, data = mulprog_store
    args = ["explain", "mp", "--store", str(store), "--suite", "mevqa", "--data-dir", str(data)]
    code, stdout, stderr = invoke(args)
    assert code == 0, stderr
    refs = references(load_dataset("mevqa", FIXTURE))
    direct = score_explanations(
        {f"mevqa/{k}": v for k, v in refs.items()},
        {f"mevqa/{k}": v for k, v in mevqa_predictions().items()},
        language=LANGUAGE_METRICS,
    )
    assert direct.language is not None
    for key, label in (("Bleu_1", "BLEU-1"), ("Bleu_4", "BLEU-4"), ("METEOR", "METEOR"),
                       ("ROUGE_L", "ROUGE-L"), ("CIDEr", "CIDEr")):  # fmt: skip
        assert table_value(stdout, label) == f"{100 * direct.language.values[key]:.1f}"
    if "SPICE" in direct.language.unavailable:
        assert table_value(stdout, "SPICE") == "unavailable"
        assert f"unavailable: SPICE: {direct.language.unavailable['SPICE']}" in stdout


def test_without_java_language_metrics_are_a_warning_and_boxes_are_still_scored(
    mulprog_store: tuple[Path, Path], tmp_path: Path
) -> None:
    store, data = mulprog_store
    empty = tmp_path / "no-java"
    empty.mkdir()
    args = ["explain", "mp", "--store", str(store), "--suite", "mevqa", "--data-dir", str(data)]
    code, stdout, stderr = invoke(args, {"HAMMR_CONFIG": "", "PATH": str(empty)})
    assert code == 0, stderr
    assert re.search(r"detection \(Eq\. 2, official padding\)\s+\d", stdout)
    assert table_value(stdout, "BLEU-1") == "unavailable"
    warnings = [line for line in stderr.splitlines() if "language metrics unavailable" in line]
    assert len(warnings) == 1 and warnings[0].startswith("hammr: warning:")
    assert "java" in warnings[0].lower()


# --- bad inputs ----------------------------------------------------------------------------------


def one_error_line(code: int, stderr: str) -> str:
    assert code == 2
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hammr: error: "), stderr
    return lines[0]


def test_bad_inputs_are_one_line_errors(hammr_store: Path, tmp_path: Path) -> None:
    s = ["--store", str(hammr_store)]
    line = one_error_line(*invoke(["explain", "nope", *s])[::2])
    assert "no run named 'nope'" in line
    line = one_error_line(*invoke(["explain", "h", "--store", str(tmp_path / "none.sqlite")])[::2])
    assert "no run store" in line
    assert not (tmp_path / "none.sqlite").exists()
    blocked = tmp_path / "afile"
    blocked.write_text("x")
    line = one_error_line(*invoke(["explain", "h", *s, "--out", str(blocked / "o.jsonl")])[::2])
    assert f"cannot write {blocked / 'o.jsonl'}" in line
    line = one_error_line(*invoke(["explain", "h", *s, "--out", str(tmp_path)])[::2])
    assert "is a folder" in line
    line = one_error_line(*invoke(["explain", "h", *s, "--suite", "mevqa"])[::2])
    assert "--suite and --data-dir go together" in line


def test_a_suite_without_references_is_an_error_when_scores_are_asked(
    hammr_store: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "q.jsonl").write_text(json.dumps({"id": "q1", "question": "?", "answer": "a",
                                              "image": "x.png"}) + "\n")  # fmt: skip
    suite = tmp_path / "plain.toml"
    suite.write_text(
        'name = "plain"\n[[entry]]\nname = "demo"\ndataset = "jsonl"\n'
        'metric = "exact_match"\nfile = "q.jsonl"\n'
    )
    out = tmp_path / "o.jsonl"
    args = ["explain", "h", "--store", str(hammr_store), "--suite", str(suite)]
    code, _, stderr = invoke([*args, "--data-dir", str(data), "--out", str(out)])
    line = one_error_line(code, stderr)
    assert "suite 'plain' has no reference explanations" in line
    assert not out.exists()  # nothing written before the inputs were checked
    code, _, stderr = invoke([*args, "--data-dir", str(tmp_path / "missing")])
    assert "suite 'plain'" in one_error_line(code, stderr)


# --- the bundled mevqa suite under `hammr eval` ---------------------------------------------------

PROGRAM = """BOX0=LOC(image=IMAGE,object='person')
ANSWER0=COUNT(box=BOX0)
ANSWER1=EVAL(expr="'yes' if {ANSWER0} > 0 else 'no'")
FINAL_RESULT=RESULT(var=ANSWER1)"""


def program_reply(seen: Seen) -> Reply:
    """Scripted fake LLM (served): the same program for every question; the explainer is
    answered with a sentence that names no grounded object (the template is used)."""
    prompt = json.dumps(seen.body.get("messages"))
    if "explain why the answer" in prompt:
        return Reply(body=ok_body("There is nobody {BOX0}."))
    return Reply(body=ok_body(PROGRAM))


def test_the_mevqa_suite_runs_under_eval_mulprog_and_explain_reads_its_explanations(
    tmp_path: Path,
) -> None:
    suite = load_suite("mevqa")
    assert [(e.dataset, e.metric, e.file) for e in suite.entries] == [
        ("mevqa", "mevqa_accuracy", "mevqa")
    ]
    data = tmp_path / "data"
    (data / "mevqa" / "images").mkdir(parents=True)
    shutil.copy(FIXTURE, data / "mevqa" / "MEGQA_test.json")
    for s in load_dataset("mevqa", FIXTURE):
        name = f"{s.meta['image_id']}.jpg"
        PILImage.new("RGB", (400, 400), (90, 120, 160)).save(data / "mevqa" / "images" / name)
    server = FakeServer()
    server.responder = program_reply
    try:
        env = served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))
        store = tmp_path / "runs.sqlite"
        code, stdout, stderr = invoke(
            ["eval", "--suite", "mevqa", "--data-dir", str(data), "--system", "mulprog",
             "--store", str(store), "--name", "ev"], env,
        )  # fmt: skip
        assert code == 0, stderr
        assert stdout.startswith("ev: 5 samples")
        with RunStore(store) as s:
            recs = s.records("ev", limit=None)
        assert {r.status for r in recs} == {"finished"}
        # the program says 'no' to everything (nobody in a plain image): no answer is right
        assert {r.prediction for r in recs} == {"no"} and {r.score for r in recs} == {0.0}
        code, stdout, stderr = invoke(
            ["explain", "ev", "--store", str(store), "--suite", "mevqa", "--data-dir", str(data),
             "--no-language"], env,
        )  # fmt: skip
        assert code == 0, stderr
        assert table_value(stdout, "from the run (EXPLAIN)") == "5"
        assert table_value(stdout, "samples scored (with a reference)") == "5"
    finally:
        server.close()
