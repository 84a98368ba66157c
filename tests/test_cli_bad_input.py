"""Bad input never ends in a traceback: one line `hammr: error: ...` on stderr, exit status 2.

`hammr ask` runs against a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conftest import EXAMPLES, needs_tesseract
from fake_openai_server import FakeServer, Reply, ok_body, served_env
from hammr.cli import main

PLATE = EXAMPLES / "plate.png"


def run(args: list[str], env: dict[str, str] | None = None) -> Result:
    base = {"HAMMR_CONFIG": "", "HAMMR_LLM__CACHE": "false"}
    return CliRunner().invoke(main, args, env={**base, **(env or {})}, catch_exceptions=False)


def error_line(r: Result) -> str:
    """The one error line of a refused command, without its `hammr: error: ` prefix."""
    assert "Traceback" not in r.output + r.stderr
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("hammr: error: "), lines[0]
    return lines[0].removeprefix("hammr: error: ")


def usage_error_line(r: Result) -> str:
    """Click's own usage errors (bad option values): usage, a hint and one `Error:` line."""
    assert "Traceback" not in r.output + r.stderr
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.responder = lambda seen: Reply(body=ok_body("[Thought]: easy\n[Finish]: 154-JDX"))
    yield s
    s.close()


def served(server: FakeServer) -> dict[str, str]:
    return served_env(server)


# -- 1. the config file -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'[agent]\nsystem = "na\xefve"\n', "not UTF-8 text (byte 0xef on line 2)"),
        (b"[agent\nmax_steps = 3\n", "not valid TOML"),
        (b'[agent]\nmax_steps = "ten"\n', "agent.max_steps = 'ten'"),
        (b"[agent]\nmax_steps = 2.5\n", "should be a whole number"),
        (b'[llm]\ntemperature = "hot"\n', "llm.temperature = 'hot'"),
        (b"agent = 3\n", "agent is a section ([agent])"),
        (b"[tools]\nocr = 3\n", "tools.ocr is a section ([tools.ocr])"),
        (b"[tools]\ncaption = 3\n", "tools.caption = 3"),
    ],
    ids=["latin1", "not-toml", "str-for-int", "float-for-int", "str-for-float", "value-for-section",
         "value-for-tool-section", "value-for-tool-table"],
)  # fmt: skip
def test_bad_config_file_is_one_line(tmp_path: Path, content: bytes, needle: str) -> None:
    cfg = tmp_path / "hammr.toml"
    cfg.write_bytes(content)
    for args in (["config", "show"], ["tools"], ["ask", str(PLATE), "q"]):
        line = error_line(run([*args, "--config", str(cfg)]))
        assert needle in line, line
        assert str(cfg) in line, line


# -- 2. --trace PATH that cannot be written --------------------------------------------------


def bad_trace_paths(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    a_dir = tmp_path / "a_dir"
    a_dir.mkdir()
    return {
        "parent-is-a-file": (a_file / "sub" / "trace.json", f"{a_file} is a file, not a folder"),
        "is-a-directory": (a_dir, f"it is a directory; give a file name, e.g. --trace {a_dir}/"),
    }


@pytest.mark.parametrize("case", ["parent-is-a-file", "is-a-directory"])
def test_unwritable_trace_prints_the_answer_first(
    server: FakeServer, tmp_path: Path, case: str
) -> None:
    path, needle = bad_trace_paths(tmp_path)[case]
    r = run(["ask", str(PLATE), "plate?", "--agent", "naive", "--trace", str(path)], served(server))
    line = error_line(r)
    assert line.startswith(f"cannot save the trace to {path}: ") and needle in line, line
    assert r.stdout.strip().splitlines() == ["154-JDX"]
    assert len(server.seen) == 1


def test_unwritable_trace_keeps_the_show_output(server: FakeServer, tmp_path: Path) -> None:
    path, _ = bad_trace_paths(tmp_path)["is-a-directory"]
    r = run(
        ["ask", str(PLATE), "plate?", "--agent", "naive", "--show", "--trace", str(path)],
        served(server),
    )
    assert "cannot save the trace" in error_line(r)
    out = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert out[0] == "NaiveGenericAgent: plate?"
    assert "finish: 154-JDX" in r.stdout and out[-1] == "154-JDX"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_trace_in_a_read_only_directory(server: FakeServer, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        r = run(
            ["ask", str(PLATE), "plate?", "--agent", "naive", "--trace", str(ro / "t.json")],
            served(server),
        )
    finally:
        ro.chmod(0o700)
    assert "Permission denied" in error_line(r)
    assert r.stdout.strip() == "154-JDX"


def test_unwritable_trace_without_an_answer_says_both(server: FakeServer, tmp_path: Path) -> None:
    server.responder = lambda seen: Reply(body=ok_body("I am not sure."))
    path, _ = bad_trace_paths(tmp_path)["is-a-directory"]
    r = run(
        ["ask", str(PLATE), "q", "--agent", "naive", "--max-steps", "1", "--trace", str(path)],
        served(server),
    )
    line = error_line(r)
    assert "cannot save the trace" in line and "no answer (step_limit" in line
    assert r.stdout == ""


# -- 3. replay of a malformed trace ------------------------------------------------------------

GOOD = {"agent": "A", "question": "q?", "steps": [{"index": 0, "finish": "x"}], "answer": "x"}


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({**GOOD, "steps": "x"}, 'steps should be a list, got "x"'),
        ({**GOOD, "steps": [{"index": "0"}]}, 'steps[0].index should be an integer, got "0"'),
        ({**GOOD, "steps": [7]}, "steps[0] should be an object, got 7"),
        ({**GOOD, "answer": 3}, "answer should be a string or null, got 3"),
        ({"question": "q?", "steps": []}, "agent is missing"),
        ({**GOOD, "steps": [{"finish": "x"}]}, "steps[0].index is missing"),
        ({**GOOD, "status": "done"}, "status should be one of running, finished"),
        ({**GOOD, "colour": "red"}, "unknown field colour"),
        (
            {**GOOD, "steps": [{"index": 0, "usage": {"prompt_tokens": "many"}}]},
            "steps[0].usage.prompt_tokens should be an integer",
        ),
        (
            {**GOOD, "steps": [{"index": 0, "child": {"agent": "B", "steps": []}}]},
            "steps[0].child.question is missing",
        ),
        ({**GOOD, "image_dir": 3}, "image_dir should be a string, got 3"),
        ([GOOD], "is not a hammr trace"),
    ],
    ids=["steps-str", "index-str", "step-int", "answer-int", "no-agent", "no-index",
         "bad-status", "unknown-key", "usage-str", "child-no-question", "image-dir-int", "list"],
)  # fmt: skip
def test_replay_of_a_malformed_trace_names_file_and_field(
    tmp_path: Path, doc: object, needle: str
) -> None:
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(doc))
    line = error_line(run(["replay", str(f)]))
    assert line.startswith(str(f)) and needle in line, line


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not UTF-8 text"), (b'{"agent": ', "invalid JSON")],
    ids=["binary", "cut-short"],
)
def test_replay_of_a_file_that_is_not_json(tmp_path: Path, content: bytes, needle: str) -> None:
    f = tmp_path / "trace.json"
    f.write_bytes(content)
    line = error_line(run(["replay", str(f)]))
    assert str(f) in line and needle in line, line


def test_replay_of_a_directory(tmp_path: Path) -> None:
    line = error_line(run(["replay", str(tmp_path)]))
    assert line == f"cannot read the trace {tmp_path}: it is a folder, not a regular file"


# -- 4. step limits and other numeric settings ---------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1"])
def test_ask_max_steps_below_one_is_refused(value: str) -> None:
    line = usage_error_line(run(["ask", str(PLATE), "q", "--max-steps", value]))
    assert f"Invalid value for '--max-steps': {value} is not in the range x>=1" in line


@pytest.mark.parametrize("value", ["0", "-1"])
def test_eval_max_steps_below_one_is_refused(value: str) -> None:
    line = usage_error_line(run(["eval", "--suite", "demo", "--max-steps", value]))
    assert f"Invalid value for '--max-steps': {value} is not in the range x>=1" in line


@pytest.mark.parametrize(
    "args",
    [["config", "show"], ["tools"], ["agents"], ["route", "q"], ["ask", str(PLATE), "q"]],
    ids=["config-show", "tools", "agents", "route", "ask"],
)
def test_max_steps_below_one_in_the_environment_is_refused(args: list[str]) -> None:
    line = error_line(run(args, {"HAMMR_AGENT__MAX_STEPS": "-1"}))
    assert line == "agent.max_steps = -1 (from $HAMMR_AGENT__MAX_STEPS) should be at least 1"


def test_max_steps_zero_in_the_config_file_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "hammr.toml"
    cfg.write_text("[agent]\nmax_steps = 0\n")
    line = error_line(run(["ask", str(PLATE), "q", "--config", str(cfg)]))
    assert line == f"agent.max_steps = 0 (from {cfg}) should be at least 1"


# -- 5. files that are not images ----------------------------------------------------------------


def not_images(tmp_path: Path) -> dict[str, Path]:
    text = tmp_path / "notes.png"
    text.write_text("these are notes, not pixels\n")
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.png"
    data = PLATE.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    header_only = tmp_path / "header.png"
    header_only.write_bytes(data[:40])
    return {"text": text, "empty": empty, "truncated": truncated, "header-only": header_only}


@pytest.mark.parametrize("kind", ["text", "empty", "truncated", "header-only"])
@pytest.mark.parametrize("where", ["ask IMAGE", "ask --image2", "route --image", "route --image2"])
def test_a_file_that_is_not_an_image_is_named(tmp_path: Path, kind: str, where: str) -> None:
    bad = not_images(tmp_path)[kind]
    args = {
        "ask IMAGE": ["ask", str(bad), "q"],
        "ask --image2": ["ask", str(PLATE), "q", "--image2", str(bad)],
        "route --image": ["route", "q", "--image", str(bad)],
        "route --image2": ["route", "q", "--image2", str(bad)],
    }[where]
    line = error_line(run(args))
    assert line.startswith(f"{bad}: not a readable image ("), line
    assert "BytesIO" not in line and " at 0x" not in line, line


# -- 6. OCR languages --------------------------------------------------------------------------


@needs_tesseract
def test_tools_shows_a_missing_ocr_language_as_unavailable(tmp_path: Path) -> None:
    cfg = tmp_path / "hammr.toml"
    cfg.write_text('[tools.ocr]\nlang = "xyz"\n')
    r = run(["tools", "--config", str(cfg)])
    assert r.exit_code == 0, r.stderr
    assert "[ocr: UNAVAILABLE: tesseract has no language data for xyz (installed: " in r.stdout
    assert "install it with: apt-get install tesseract-ocr-xyz]" in r.stdout
    cfg.write_text('[tools.ocr]\nlang = "eng"\n')
    r = run(["tools", "--config", str(cfg)])
    assert r.exit_code == 0, r.stderr
    assert "[ocr: TesseractOCR(lang='eng'" in r.stdout and "UNAVAILABLE" not in r.stdout


# -- 8. route takes --point X,Y and --image2 PATH as ask does ------------------------------------


def test_route_checks_the_point_against_the_stand_in_image() -> None:
    inside = run(["route", "How many of these are there?", "--point", "639,479"])
    assert inside.exit_code == 0, inside.stderr
    assert "candidates for these inputs: PointQALocalAgent, PointQALookTwiceAgent" in inside.stdout
    line = usage_error_line(run(["route", "q", "--point", "640,10"]))
    assert "(640, 10) is outside the 640x480 image" in line
    line = usage_error_line(run(["route", "q", "--point", "here"]))
    assert "expected X,Y such as 120,80; got 'here'" in line


def test_route_checks_the_point_against_the_given_image() -> None:
    line = usage_error_line(run(["route", "q", "--image", str(PLATE), "--point", "100,450"]))
    assert "(100, 450) is outside the 640x432 image" in line


def test_route_with_a_second_image_offers_the_two_image_specialist() -> None:
    r = run(["route", "Are both dogs brown?", "--image2", str(EXAMPLES / "sign.png")])
    assert r.exit_code == 0, r.stderr
    assert "candidates for these inputs: TwoImageVQAAgent" in r.stdout
    missing = error_line(run(["route", "q", "--image2", "nowhere.png"]))
    assert missing == "image file not found: nowhere.png"


def test_route_help_examples_parse() -> None:
    r = run(["route", "--help"])
    examples = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("hammr route")]
    assert any("--point 120,80" in ln for ln in examples)
    r = run(["route", "How many of these are there?", "--point", "120,80"])
    assert r.exit_code == 0, r.stderr
