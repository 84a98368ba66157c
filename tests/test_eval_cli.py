"""`hammr eval`, `hammr report`, `hammr runs` end to end over a tiny JSONL suite, the LLM
played by the scripted OpenAI-compatible server; and a run killed with SIGKILL then resumed."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.cli import main
from hammr.eval.report import Cell, build_report
from hammr.eval.store import RunStore, StoreError
from hammr.eval.types import RunRecord
from patience import HANG_S, wait_until

QID = re.compile(r"QID-(\d+)")
FAILING_FIXED = threading.Event()
SLOW_FIXED = threading.Event()

SUITE = """
name = "tiny"

[[entry]]
name = "signs"
question_type = "ocr_reasoning"
dataset = "jsonl"
metric = "exact_match"
file = "signs.jsonl"

[[entry]]
name = "counts"
question_type = "complex_counting"
dataset = "jsonl"
metric = "vqa_accuracy"
file = "counts.jsonl"
"""


def make_data(
    root: Path, n: int = 6, slow: tuple[int, ...] = (), fail: tuple[int, ...] = ()
) -> tuple[Path, Path]:
    """A suite file and its data folder: n questions over two entries; question i is answered
    'ans{i}' by the server below (wrongly when i % 3 == 0), 'slow' ones not until SLOW_FIXED
    is set, 'fail' ones with HTTP 500 until FAILING_FIXED is set."""
    data = root / "data"
    (data / "img").mkdir(parents=True)
    lines: dict[str, list[str]] = {"signs": [], "counts": []}
    for i in range(n):
        PILImage.new("RGB", (32, 24), (40 * i % 255, 80, 120)).save(data / "img" / f"{i}.png")
        entry = "signs" if i % 2 == 0 else "counts"
        record: dict[str, object] = {
            "id": f"s{i}",
            "question": f"What does it say? QID-{i}"
            + (" QSLOW" if i in slow else "")
            + (" QFAIL" if i in fail else ""),
            "image": f"img/{i}.png",
        }
        if entry == "signs":
            record["answer"] = f"ans{i}"
        else:
            record["answers"] = [f"ans{i}"] * 10
        lines[entry].append(json.dumps(record))
    for entry, rows in lines.items():
        (data / f"{entry}.jsonl").write_text("\n".join(rows) + "\n")
    suite = root / "tiny.toml"
    suite.write_text(SUITE)
    return suite, data


def answer(seen: Seen, delay: float = 0.0) -> Reply:
    text = json.dumps(seen.body.get("messages") or seen.body.get("prompt"))
    found = QID.findall(text)
    i = int(found[-1]) if found else -1
    said = f"ans{i}" if i % 3 else "nope"
    slow = "QSLOW" in text
    if "QFAIL" in text and not FAILING_FIXED.is_set():
        return Reply(status=500, body={"error": {"message": "the server is down"}})
    if slow:  # held until the test says otherwise: it outlasts any --timeout, however slow
        assert SLOW_FIXED.wait(HANG_S), "SLOW_FIXED was never set"
    return Reply(body=ok_body(f"[Thought]: I read it\n[Finish]: {said}"), delay=delay)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.responder = answer
    yield s
    s.close()


def env_for(server: FakeServer, tmp_path: Path) -> dict[str, str]:
    return served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))


def run(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def test_eval_report_and_runs_end_to_end(server: FakeServer, tmp_path: Path) -> None:
    suite, data = make_data(tmp_path, n=6)
    env = env_for(server, tmp_path)
    store = tmp_path / "runs.sqlite"
    base = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    code, out, err = run([*base, "--system", "naive", "--name", "t", "--limit", "2"], env)
    assert code == 0, err
    assert "run t: 4 samples, 8 at a time" in err  # a served model: 8 by default
    assert out.startswith("t: 4 samples, mean score ")
    # rerunning the same name resumes: only the new samples are asked
    asked = len(server.seen)
    code, out, err = run([*base, "--system", "naive", "--name", "t", "--concurrency", "3"], env)
    assert code == 0, err
    assert "resuming run t: 4 of 6 samples already done" in err
    assert len(server.seen) == asked + 2
    assert "t: 6 samples, mean score 66.7% (2 new in" in out and "4 already done" in out
    with RunStore(store) as s:
        assert set(s.sample_counts("t").values()) == {1} and len(s.sample_counts("t")) == 6
        rec = s.get("t", "signs", "s2")
        assert (rec.prediction, rec.score, rec.question_type) == ("ans2", 1.0, "ocr_reasoning")
        assert rec.trace is not None and rec.trace.agent and rec.trace.images
        assert s.get("t", "signs", "s0").score == 0.0
        info = s.run_info("t")
        assert info is not None and info.system == "naive" and info.suite == "tiny"
        assert info.config["llm.model"] == "fake" and info.settings["limit"] == 2
        # a served model: 300 s of wall-clock work per question unless llm.timeout_s is longer
        # (the test's client timeout is patience.HANG_S, a safety net of minutes)
        expected = max(300.0, HANG_S)
        assert (info.settings["timeout_s"], info.settings["timeout_counts"]) == (expected, "wall")

    # an agent as the system, and the default name SUITE-SYSTEM-DATE
    code, out, err = run([*base, "--system", "OCRReasoningAgent", "--limit", "1"], env)
    assert code == 0, err
    named = re.match(r"(tiny-OCRReasoningAgent-\d{4}-\d\d-\d\d): 2 samples", out)
    assert named, out
    other = named.group(1)

    code, out, err = run(["report", "t", other, "--store", str(store)], env)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split("|")[2].strip() == "t" and lines[0].split("|")[3].strip() == other
    row = next(ln for ln in lines if ln.startswith("| ocr_reasoning (signs)"))
    assert "66.7 ±" in row.split("|")[2]
    row = next(ln for ln in lines if ln.startswith("| complex_counting (counts)"))
    assert "66.7 ±" in row.split("|")[2]
    macro = next(ln for ln in lines if "Macro average" in ln)
    assert "**66.7 ±" in macro
    assert any("bootstrap" in ln for ln in lines)

    csv_out = tmp_path / "out" / "t.csv"
    code, _, err = run(
        ["report", "t", "--format", "csv", "--out", str(csv_out), "--store", str(store)], env
    )
    assert code == 0 and f"wrote {csv_out}" in err
    rows = csv_out.read_text().splitlines()
    assert rows[0] == "row,question_type,dataset,t mean %,t low %,t high %,t n"
    assert rows[-1].startswith("macro average,,,66.67,") and rows[-1].endswith(",6")
    code, out, _ = run(["report", "t", "--format", "html", "--store", str(store)], env)
    assert (
        code == 0
        and out.startswith('<table class="hammr-report">')
        and "<th>Macro average</th>" in out
    )

    code, out, _ = run(["runs", "--store", str(store)], env)
    assert code == 0
    head, first, second = out.splitlines()
    assert head.split() == ["name", "suite", "system", "done", "mean", "failed", "created"]
    assert first.split()[:6] == ["t", "tiny", "naive", "6", "66.7%", "0"]
    assert second.split()[:4] == [other, "tiny", "OCRReasoningAgent", "2"]


def test_a_served_models_slots_set_the_concurrency_and_each_question_keeps_one(
    server: FakeServer, tmp_path: Path
) -> None:
    """The scripted server says (llama.cpp's /props) it runs 2 requests at once: the run keeps
    2 questions in flight, each question's calls name one slot (id_slot), and the run's
    first line says why; --concurrency overrides the figure, not the pinning."""
    server.get_replies["/props"] = Reply(body={"total_slots": 2, "model_alias": "fake"})
    suite, data = make_data(tmp_path, n=6)
    env = env_for(server, tmp_path)
    base = ["eval", "--suite", str(suite), "--data-dir", str(data)]
    base += ["--store", str(tmp_path / "runs.sqlite"), "--system", "naive"]
    code, _, err = run([*base, "--name", "slots", "--limit", "2"], env)
    assert code == 0, err
    assert "expected:" not in err  # nothing answered before: no estimate
    assert "run slots: 4 samples, 2 at a time (the server runs 2 requests at once " in err
    assert "llama.cpp /props" in err
    assert server.gets[0] == "/props"
    # stderr is no terminal here: one plain progress line per sample, in order
    progress = [ln for ln in err.splitlines() if re.match(r"slots: \d/4 ", ln)]
    assert [ln.split()[1] for ln in progress] == ["1/4", "2/4", "3/4", "4/4"], err
    assert all(" finished, score " in ln and "; acc " in ln for ln in progress)
    slot_of: dict[str, set[int]] = {}
    for seen in server.seen:
        qid = QID.findall(json.dumps(seen.body["messages"]))[-1]
        slot_of.setdefault(qid, set()).add(seen.body["id_slot"])
    assert len(slot_of) == 4 and all(len(v) == 1 for v in slot_of.values())
    assert set().union(*slot_of.values()) <= {0, 1}
    assert server.peak_active <= 2

    server.seen.clear()
    code, _, err = run([*base, "--name", "slots3", "--limit", "2", "--concurrency", "3"], env)
    assert code == 0, err
    assert "run slots3: 4 samples, 3 at a time (--concurrency)" in err
    # the first run's answers (same system, same model) say how long this one will take
    assert re.search(
        r"expected: about \d+ s \(4 to ask, a median [\d.]+ s each, 3 at a time; naive on "
        r"this model in 4 stored answers\)",
        err,
    ), err
    assert {seen.body["id_slot"] for seen in server.seen} <= {0, 1}


def test_a_server_that_cannot_say_its_slots_gets_the_stated_default(
    server: FakeServer, tmp_path: Path
) -> None:
    """/props lies (0 slots): 8 at a time, said with the reason; no slot is named."""
    server.get_replies["/props"] = Reply(body={"total_slots": 0})
    suite, data = make_data(tmp_path, n=2)
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--system", "naive"]
    code, _, err = run(
        [*args, "--store", str(tmp_path / "runs.sqlite"), "--name", "lies"],
        env_for(server, tmp_path),
    )
    assert code == 0, err
    assert "2 samples, 8 at a time (8 for " in err and "total_slots = 0" in err
    assert all("id_slot" not in seen.body for seen in server.seen)


def test_timeouts_and_failures_are_stored_and_retried_on_request(
    server: FakeServer, tmp_path: Path
) -> None:
    FAILING_FIXED.clear()
    SLOW_FIXED.clear()
    suite, data = make_data(tmp_path, n=5, slow=(1,), fail=(4,))
    (data / "img" / "2.png").write_bytes(b"not an image")
    env = env_for(server, tmp_path)
    store = tmp_path / "runs.sqlite"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    # 5 s: the slow sample never answers in time; the others have the rest as margin
    args += ["--system", "naive", "--name", "t", "--timeout", "5"]
    code, out, err = run(args, env)
    assert code == 0, err
    assert "1 errors, 1 timeouts (scored 0)" in out
    assert "1 samples ended in llm_failure (is the LLM server up?)" in err
    assert "1 samples timed out (5 s of work each, counted in wall-clock time" in err
    assert "--retry-failed and a longer --timeout (--timeout 0: no limit)" in err
    with RunStore(store) as s:
        slow = s.get("t", "counts", "s1")
        assert (slow.status, slow.score) == ("timeout", 0.0)
        assert str(slow.error).startswith("no answer within 5 s of work; stopped in ")
        assert str(slow.error).endswith(" step 1: waiting for the model")
        assert slow.trace is not None and slow.trace.status == "timeout"  # kept, partial
        broken = s.get("t", "signs", "s2")
        assert broken.status == "error" and "not a readable image" in str(broken.error)
        down = s.get("t", "signs", "s4")
        assert down.status == "llm_failure" and "the server is down" in str(down.error)
    code, out, _ = run(["report", "t", "--store", str(store)], env)
    assert "t: error (1), llm_failure (1), timeout (1) counted as wrong." in out
    code, out, _ = run(["runs", "--store", str(store)], env)
    assert out.splitlines()[1].split()[:6] == ["t", "tiny", "naive", "5", "0.0%", "3"]
    # --retry-failed asks exactly those three again
    PILImage.new("RGB", (32, 24)).save(data / "img" / "2.png")
    FAILING_FIXED.set()
    SLOW_FIXED.set()
    asked = len(server.seen)
    code, out, err = run([*args, "--timeout", "30", "--retry-failed"], env)
    assert code == 0, err
    assert "asking 3 failed samples again" in err and len(server.seen) == asked + 3
    assert "t: 5 samples, mean score 60.0%" in out


def test_bad_input_is_one_line(server: FakeServer, tmp_path: Path) -> None:
    suite, data = make_data(tmp_path, n=2)
    env = env_for(server, tmp_path)
    store = tmp_path / "runs.sqlite"
    cases = [
        (["eval", "--suite", "nope", "--data-dir", str(data)], "unknown suite 'nope'"),
        (["eval", "--suite", str(suite), "--data-dir", str(tmp_path)], "does not exist"),
        (
            ["eval", "--suite", str(suite), "--data-dir", str(data), "--system", "X"],
            "unknown system",
        ),
        (["report", "missing"], "no run named 'missing'"),
    ]
    for args, needle in cases:
        code, _, err = run([*args, "--store", str(store)], env)
        assert code == 2, (args, err)
        assert err.startswith("hammr: error: ") and needle in err, err
        assert "Traceback" not in err
    run(
        [
            "eval",
            "--suite",
            str(suite),
            "--data-dir",
            str(data),
            "--system",
            "naive",
            "--name",
            "a",
            "--store",
            str(store),
        ],
        env,
    )
    code, _, err = run(
        [
            "eval",
            "--suite",
            str(suite),
            "--data-dir",
            str(data),
            "--system",
            "OCRReasoningAgent",
            "--name",
            "a",
            "--store",
            str(store),
        ],
        env,
    )
    assert code == 2 and "already exists with suite 'tiny' and system 'naive'" in err
    code, out, err = run(["runs", "--store", str(tmp_path / "empty.sqlite")], env)
    assert code == 0 and out == "" and "no runs in" in err
    code, _, err = run(["report", "x", "--store", str(tmp_path / "empty.sqlite")], env)
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "empty.sqlite").exists()  # reading never creates a store


def test_report_rows_macro_and_footnotes(tmp_path: Path) -> None:
    def rec(run: str, sid: str, qt: str, ds: str, score: float, **kw: object) -> RunRecord:
        return RunRecord(run, sid, ds, qt, "q", ("a",), "a", score, **kw)  # type: ignore[arg-type]

    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("a", "generic-vqa", "hammr")
        store.open_run("b", "generic-vqa", "naive")
        store.open_run("empty", "generic-vqa", "naive")
        for i in range(4):
            store.add(rec("a", f"g{i}", "spatial_reasoning", "gqa", 1.0))
            store.add(rec("b", f"g{i}", "spatial_reasoning", "gqa", float(i % 2)))
            judge = "bem" if i else "exact"
            store.add(
                rec("a", f"e{i}", "single_hop", "encvqa_single_hop", 0.0, judge=judge),
                metric="encvqa",
            )
        store.add(rec("b", "t0", "complex_counting", "tallyqa", 0.0, status="timeout"))
        report = build_report(store, ["a", "b", "empty"])
        with pytest.raises(StoreError, match="no run named 'nope'"):
            build_report(store, ["a", "nope"])
    assert [r.label for r in report.rows] == [
        "single_hop (encvqa_single_hop)",
        "spatial_reasoning (gqa)",
        "complex_counting (tallyqa)",
    ]
    gqa = report.rows[1].cells
    assert gqa[0] == Cell(1.0, 1.0, 1.0, 4) and gqa[1] is not None and gqa[1].mean == 0.5
    assert gqa[2] is None
    assert report.rows[0].cells[1] is None and report.rows[2].cells[0] is None
    macro = report.macro
    assert macro[0] is not None and macro[0].mean == pytest.approx(0.5) and macro[0].n == 8
    assert macro[1] is not None and macro[1].mean == pytest.approx(0.25) and macro[2] is None
    text = report.render("markdown")
    assert "EncVQA judged in a by: bem (3), exact (1)." in text
    assert "b: timeout (1) counted as wrong." in text
    assert "Runs cover different rows" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| spatial_reasoning (gqa)"))
    assert [c.strip() for c in row.split("|")[2:5]] == ["100.0 ±0.0", "50.0 ±50.0", "–"]


def test_help_texts_show_examples() -> None:
    for cmd, needle in (("eval", "--concurrency"), ("report", "--format"), ("runs", "--store")):
        r = CliRunner().invoke(main, [cmd, "--help"])
        assert r.exit_code == 0 and needle in r.output
    r = CliRunner().invoke(main, ["eval", "--help"])
    assert "hammr eval --suite generic-vqa" in r.output and "run the same command again" in r.output


def stored_rows(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(path, timeout=10)
    try:
        return int(db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        db.close()


def test_a_killed_run_resumes_to_the_same_table(tmp_path: Path) -> None:
    n = 12
    suite, data = make_data(tmp_path, n=n)
    crashed = tmp_path / "crashed.sqlite"
    killed = threading.Event()

    def held_once_three_are_stored(seen: Seen) -> Reply:
        # the run is killed with some samples stored and some not, however fast it runs
        if stored_rows(crashed) >= 3:
            assert killed.wait(HANG_S), "the run was never killed"
        return answer(seen)

    slow_server = FakeServer()
    slow_server.responder = held_once_three_are_stored
    try:
        env = {**os.environ, **env_for(slow_server, tmp_path)}
        cmd = [sys.executable, "-m", "hammr.cli", "eval", "--suite", str(suite)]
        cmd += ["--data-dir", str(data), "--system", "naive", "--name", "run"]
        cmd += ["--concurrency", "2"]
        proc = subprocess.Popen(
            [*cmd, "--store", str(crashed)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def three_stored() -> bool:
            assert proc.poll() is None, proc.communicate()
            return stored_rows(crashed) >= 3

        wait_until(three_stored, "the run to store 3 samples")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed.set()
        kept = stored_rows(crashed)
        assert 3 <= kept < n, kept
        done = subprocess.run(
            [*cmd, "--store", str(crashed)],
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
        assert done.returncode == 0, done.stderr
        assert f"resuming run run: {kept} of {n} samples already done" in done.stderr
        assert f"({n - kept} new in" in done.stdout

        # the same run without interruption, in its own store
        whole = tmp_path / "whole.sqlite"
        code, _, err = run([*cmd[3:], "--store", str(whole)], env_for(slow_server, tmp_path))
        assert code == 0, err
    finally:
        slow_server.close()

    reports = []
    for path in (crashed, whole):
        code, out, err = run(["report", "run", "--store", str(path)], {"HAMMR_CONFIG": ""})
        assert code == 0, err
        reports.append(out)
        with RunStore(path) as s:
            counts = s.sample_counts("run")
        assert len(counts) == n and set(counts.values()) == {1}
    assert reports[0] == reports[1]
    assert "66.7 ±" in reports[0]


def test_errors_counts_exports_and_tabulates_labels(server: FakeServer, tmp_path: Path) -> None:
    suite, data = make_data(tmp_path, n=6)
    env = {**env_for(server, tmp_path), "HAMMR_AGENT__ROUTER": "neighbours"}
    store = tmp_path / "runs.sqlite"
    base = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    code, _, err = run([*base, "--system", "hammr", "--name", "h"], env)
    assert code == 0, err

    code, out, err = run(["errors", "h", "--store", str(store)], env)
    assert code == 0, err
    assert "formul" in out.lower() and "neighbours" in out  # counts and the routing matrix

    labels = tmp_path / "wrong.csv"
    code, _, err = run(
        ["errors", "h", "--store", str(store), "--export", str(labels), "--per-type", "5"], env
    )
    assert code == 0 and "wrote 2 wrong answers" in err  # s0 and s3 are answered wrongly
    import csv

    rows = list(csv.DictReader(labels.open()))
    assert {r["sample_id"] for r in rows} == {"s0", "s3"}
    for r, label in zip(rows, ("reasoning", "tool_failure"), strict=True):
        r["label"] = label
    with labels.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    code, out, err = run(["errors", "h", "--store", str(store), "--labels", str(labels)], env)
    assert code == 0, err
    # accuracy 4/6; the two labelled mistakes share the remaining third equally
    assert re.search(r"\| Reasoning \| 16\.7% \|", out), out
    assert re.search(r"\| Tool failure \| 16\.7% \|", out), out
    assert re.search(r"\| No error \| 66\.7% \|", out), out

    code, _, err = run(["errors", "nope", "--store", str(store)], env)
    assert code == 2 and "no run named 'nope'" in err


def errors_store(path: Path) -> Path:
    """A store with one run of two wrong answers, for `hammr errors --export`."""
    with RunStore(path) as store:
        store.open_run("r", "generic-vqa", "naive")
        for sid in ("s0", "s1"):
            store.add(RunRecord("r", sid, "gqa", "spatial_reasoning", "q", ("a",), "b", 0.0))
    return path


def test_errors_export_to_an_unwritable_path_is_one_line(tmp_path: Path) -> None:
    store = errors_store(tmp_path / "runs.sqlite")
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "adir").mkdir()
    cases = {
        tmp_path / "afile" / "wrong.csv": "a file is in the way of its folder",
        tmp_path / "afile" / "sub" / "wrong.csv": "a file is in the way of its folder",
        tmp_path / "adir": "is a folder; name the CSV file to write",
    }
    for target, reason in cases.items():
        code, out, err = run(["errors", "r", "--store", str(store), "--export", str(target)], {})
        assert code == 2, err
        assert out == "" and "Traceback" not in err
        assert err.count("\n") == 1 and err.startswith("hammr: error: "), err
        assert str(target) in err and reason in err
    assert (tmp_path / "afile").read_text() == "not a folder"
    assert list((tmp_path / "adir").iterdir()) == []
    # the same command to a writable path works, so the failures above are the path's
    code, _, err = run(
        ["errors", "r", "--store", str(store), "--export", str(tmp_path / "new" / "w.csv")], {}
    )
    assert code == 0 and "wrote 2 wrong answers" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_errors_export_into_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    store = errors_store(tmp_path / "runs.sqlite")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        target = locked / "wrong.csv"
        code, out, err = run(["errors", "r", "--store", str(store), "--export", str(target)], {})
    finally:
        locked.chmod(0o755)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == f"hammr: error: cannot write {target}: Permission denied\n"


def test_errors_help_explains_every_option() -> None:
    import click

    from hammr.eval.errors_cli import errors_cmd

    options = [p for p in errors_cmd.params if isinstance(p, click.Option)]
    assert {"--per-type", "--seed"} <= {o.opts[0] for o in options}
    assert [o.opts[0] for o in options if not o.help] == []
    r = CliRunner().invoke(main, ["errors", "--help"])
    assert r.exit_code == 0 and "seed of the random draw" in r.output
