"""`hammr agents`, `hammr route` and `hammr ask --agent`; a scripted server plays the LLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from fake_openai_server import FakeServer, Reply, ok_body, served_env
from hammr.agents.spec import BUILTIN_DIR
from hammr.cli import main


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    base = {"HAMMR_CONFIG": "", "HAMMR_LLM__CACHE": "false"}
    r = CliRunner().invoke(main, args, env={**base, **(env or {})}, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def served(server: FakeServer) -> dict[str, str]:
    return served_env(server)


def test_agents_prints_the_tree_with_each_agents_tools() -> None:
    code, out, _ = run(["agents"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "# setting: tools_only; router: auto"
    assert lines[1].startswith("QuestionDispatcherAgent [dispatcher]")
    # specialists one level in, SingleHop again under TwoHop
    assert (
        sum(1 for ln in lines if ln.startswith("    ") and ln.strip().endswith(")") and "[" in ln)
        >= 8
    )
    two_hop = next(i for i, ln in enumerate(lines) if "TwoHopEncyclopedicAgent [two_hop]" in ln)
    assert any("        SingleHopEncyclopedicAgent [single_hop]" in ln for ln in lines[two_hop:])
    assert "OCR" in out and "VQA (no backend)" in out
    code, out, _ = run(["agents", "--setting", "with_vqa"])
    ocr_block = out.split("OCRReasoningAgent")[1].splitlines()[1]
    assert "VQA (no backend)" in ocr_block


def test_agents_shows_a_users_agent_from_the_configured_folder(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    text = (BUILTIN_DIR / "ocr_reasoning.toml").read_text()
    (folder / "signs.toml").write_text(
        text.replace('name = "OCRReasoningAgent"', 'name = "SignReader"').replace(
            'question_type = "ocr_reasoning"', 'question_type = "signs"'
        )
    )
    code, out, _ = run(["agents"], {"HAMMR_AGENT__DIR": str(folder)})
    assert code == 0
    assert f"SignReader [signs] (image)  ({folder / 'signs.toml'})" in out
    (folder / "broken.toml").write_text("name = 'X'")
    code, _, err = run(["agents"], {"HAMMR_AGENT__DIR": str(folder)})
    assert code == 2 and "broken.toml" in err and "'description' is required" in err


def test_route_with_neighbours_prints_decision_votes_and_neighbours() -> None:
    code, out, _ = run(
        ["route", "what is the number on the licence plate?", "--router", "neighbours"]
    )
    assert code == 0
    assert out.splitlines()[0] == "specialist: OCRReasoningAgent"
    assert "decided by: neighbours" in out
    neighbours = out.split("nearest labelled questions:\n")[1].splitlines()
    assert len(neighbours) == 8
    scores = [float(ln.split()[0]) for ln in neighbours]
    assert scores == sorted(scores, reverse=True)


def test_route_with_a_point_narrows_to_the_pointing_specialists() -> None:
    code, out, _ = run(
        ["route", "How many of these are there?", "--point", "120,80", "--router", "neighbours"]
    )
    assert code == 0
    assert "candidates for these inputs: PointQALocalAgent, PointQALookTwiceAgent" in out
    assert out.splitlines()[0] == "specialist: PointQALookTwiceAgent"


def test_route_with_the_llm_dispatcher_in_routing_only_mode(server: FakeServer) -> None:
    server.script = [
        Reply(
            body=ok_body("[Thought]: two lookups.\n[Act]: a = TwoHopEncyclopedicAgent('q', image)")
        )
    ]
    code, out, err = run(
        ["route", "Who founded the city where this bridge is?", "--router", "llm"], served(server)
    )
    assert code == 0, err
    assert out.splitlines()[0] == "specialist: TwoHopEncyclopedicAgent"
    assert "decided by: llm" in out
    assert len(server.seen) == 1  # the specialist was not run
    assert "LLM dispatcher (routing only):" in out


def test_ask_refuses_an_unknown_agent_listing_the_choices() -> None:
    code, _, err = run(["ask", str(EXAMPLES / "plate.png"), "q", "--agent", "Nobody"])
    assert code == 2
    assert "unknown system or agent 'Nobody'" in err and "hammr, naive" in err
    assert "OCRReasoningAgent" in err


def test_ask_runs_one_specialist_directly(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("[Thought]: I know.\n[Finish]: nothing to read"))]
    code, out, err = run(
        ["ask", str(EXAMPLES / "plate.png"), "what does it say?", "--agent", "OCRReasoningAgent"],
        served(server),
    )
    assert code == 0, err
    assert out.strip() == "nothing to read"
    system = server.seen[0].body["messages"][0]["content"]
    assert system.startswith("You answer questions by reading the text in an image.")
