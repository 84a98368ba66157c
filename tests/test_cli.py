"""The command line, its LLM served by a scripted fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from conftest import EXAMPLES, needs_tesseract
from fake_openai_server import FakeServer, Reply, ok_body, served_env
from hammr.cli import main


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def env_for(server: FakeServer) -> dict[str, str]:
    return served_env(server)


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, args, env=env or {"HAMMR_CONFIG": ""}, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@needs_tesseract
def test_ask_answers_saves_trace_and_replays_with_scripted_server(
    server: FakeServer, tmp_path: Path
) -> None:
    box = json.loads((EXAMPLES / "plate.json").read_text())["boxes"][0]
    server.script = [
        Reply(body=ok_body(f"[Thought]: crop the plate\n[Act]: plate = CropImage(image, {box})")),
        Reply(body=ok_body("[Thought]: read it\n[Act]: text = OCR(plate)")),
        Reply(body=ok_body("[Thought]: done\n[Finish]: 154-JDX")),
    ]
    trace = tmp_path / "out" / "trace.json"
    code, out, err = run(
        [
            "ask",
            str(EXAMPLES / "plate.png"),
            "What is the licence plate number?",
            "--show",
            "--trace",
            str(trace),
        ],
        env_for(server),
    )
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "154-JDX"
    assert "act: text = OCR(plate)" in out
    assert "observe: 154-JDX (stored in 'text')" in out
    # the model saw the real OCR result
    assert server.seen[2].body["messages"][-1]["content"] == "[Observe]: 154-JDX (stored in 'text')"
    assert trace.is_file() and (trace.parent / "images").is_dir()
    code, out, _ = run(["replay", str(trace)])
    assert code == 0 and "QuestionDispatcherAgent: What is the licence plate number?" in out
    # the neighbours routed it (a served LLM means router 'hybrid'); the specialist used the LLM
    assert "[router: neighbours]" in out
    assert "  OCRReasoningAgent: What is the licence plate number?" in out


def test_ask_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    big = tmp_path / "big.png"
    PILImage.new("1", (20_000, 20_000)).save(big)
    cases = [
        ([str(tmp_path / "missing.png"), "q"], "image file not found"),
        ([str(corrupt), "q"], "not a readable image"),
        ([str(text), "q"], "not a readable image"),
        ([str(big), "q"], "above the limit"),
        ([str(EXAMPLES / "plate.png"), "   "], "the question is empty"),
    ]
    for args, needle in cases:
        code, out, err = run(["ask", *args])
        assert code == 2, (args, out, err)
        assert err.startswith("hammr: error: ") and needle in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_ask_with_unreachable_server_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "HAMMR_LLM__BACKEND": "openai",
        "HAMMR_LLM__BASE_URL": f"http://127.0.0.1:{port}/v1",
        "HAMMR_LLM__MODEL": "m",
        "HAMMR_LLM__CACHE": "false",
        "HAMMR_LLM__MAX_RETRIES": "1",
        "HAMMR_CONFIG": "",
    }
    code, _, err = run(["ask", str(EXAMPLES / "plate.png"), "q"], env)
    assert code == 1
    assert "llm_failure" in err and "cannot reach the LLM server" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ask_without_action_reaches_step_limit_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("I am not sure.")) for _ in range(2)]
    code, out, err = run(
        ["ask", str(EXAMPLES / "plate.png"), "q", "--max-steps", "2", "--show"], env_for(server)
    )
    assert code == 1
    assert "no answer (step_limit" in err
    assert out.count("[no_action]") == 2


def test_config_show_lists_sources(tmp_path: Path) -> None:
    cfg = tmp_path / "h.toml"
    cfg.write_text("[agent]\nmax_steps = 3\n")
    r = CliRunner().invoke(
        main, ["config", "show", "--config", str(cfg)], env={"HAMMR_LLM__MODEL": "zz"}
    )
    assert r.exit_code == 0
    assert f"agent.max_steps = 3    # {cfg}" in r.stdout
    assert "llm.model = 'zz'    # $HAMMR_LLM__MODEL" in r.stdout
    assert "llm.backend = 'embedded'    # default" in r.stdout


def test_bad_config_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "h.toml"
    cfg.write_text('[llm]\nbackend = "nope"\n')
    code, _, err = run(["ask", str(EXAMPLES / "plate.png"), "q", "--config", str(cfg)])
    assert code == 2 and "llm.backend = 'nope'" in err


def test_tools_lists_cards_and_backend_state() -> None:
    code, out, _ = run(["tools"], {"HAMMR_TOOLS__OCR__BACKEND": "none", "HAMMR_CONFIG": ""})
    assert code == 0
    assert "CropImage(image: image, boxes: boxes)" in out
    assert "ocr: NO BACKEND (see hammr.toml [tools.ocr])" in out


def test_replay_of_a_non_trace_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text("{}")
    code, _, err = run(["replay", str(f)])
    assert code == 2 and "not a hammr trace" in err


def test_help_teaches() -> None:
    code, out, _ = run(["ask", "--help"])
    assert code == 0 and "Examples:" in out and "hammr.toml" in out


def test_ask_over_a_plain_completion_endpoint_with_scripted_server(server: FakeServer) -> None:
    server.script = [
        Reply(
            body=ok_body(
                "[Thought]: measure\n[Act]: c = CropImage(image, [0, 0, 5, 5])", completion=True
            )
        ),
        Reply(body=ok_body("[Thought]: done\n[Finish]: five", completion=True)),
    ]
    env = {**env_for(server), "HAMMR_LLM__MODE": "completion"}
    code, out, err = run(["ask", str(EXAMPLES / "plate.png"), "How big?", "--agent", "naive"], env)
    assert code == 0, err
    assert out.strip() == "five"
    assert [s.path for s in server.seen] == ["/v1/completions", "/v1/completions"]
    prompt = server.seen[1].body["prompt"]
    assert "Question: How big?" in prompt
    assert "[Observe]: image 5x5 (region left:0/top:0/width:5/height:5 of the original)" in prompt


def test_ask_with_second_image_and_point_inputs_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("[Thought]: ok\n[Finish]: same"))]
    code, out, err = run(
        [
            "ask",
            str(EXAMPLES / "plate.png"),
            "Do the images match near the point?",
            "--image2",
            str(EXAMPLES / "sign.png"),
            "--point",
            "100, 230",
            "--agent",
            "naive",
        ],
        env_for(server),
    )
    assert code == 0, err
    assert out.strip() == "same"
    task = server.seen[0].body["messages"][1]["content"]
    assert "- image: image 640x432" in task
    assert "- image2: image " in task
    assert "- point: [100, 230]" in task


def test_ask_point_outside_image_is_a_usage_error() -> None:
    code, _, err = run(["ask", str(EXAMPLES / "plate.png"), "q", "--point", "5000,1"])
    assert code == 2 and "outside the 640x432 image" in err
