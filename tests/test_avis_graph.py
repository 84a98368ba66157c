"""AVIS's transition graph as data: reading, validation errors that name file and key,
TOML round trip, the autonomous graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from hammr.avis.graph import (
    BUILTIN_ACTIONS,
    START,
    GraphError,
    autonomous_graph,
    default_graph,
    load_graph,
)
from hammr.tools.library import builtin_tools

TOOLS = [t.name for t in builtin_tools()]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "graph.toml"
    p.write_text(text)
    return p


def test_default_graph_has_the_two_phases() -> None:
    g = default_graph()
    visual = {a for a, s in g.actions.items() if s.phase == "visual"}
    knowledge = {a for a, s in g.actions.items() if s.phase == "knowledge"}
    assert visual == {"object_select", "identical_image_search", "image_search", "vqa"}
    assert knowledge == {"web_search", "llm_qa"}
    # the visual phase comes first: no knowledge action at START
    assert set(g.edges[START]) <= visual
    # once in the knowledge phase, only knowledge actions follow
    for state in knowledge:
        assert set(g.edges[state]) <= knowledge


def test_candidates_drop_tried_actions_in_graph_order() -> None:
    g = default_graph()
    assert g.candidates(START) == list(g.edges[START])
    assert g.candidates(START, ["vqa", "object_select"]) == [
        "identical_image_search",
        "image_search",
    ]
    assert g.candidates("llm_qa", ["web_search", "llm_qa"]) == []


def test_round_trip_through_toml(tmp_path: Path) -> None:
    text = """
description = "mine"
[edges]
START = ["read_text", "vqa"]
read_text = ["web_search"]
vqa = ["llm_qa"]

[actions.read_text]
tool = "OCR"
description = "Read the text in the image."
phase = "visual"
answers = false
"""
    g = load_graph(_write(tmp_path, text), TOOLS)
    assert g.actions["read_text"].tool == "OCR" and not g.actions["read_text"].answers
    again = load_graph(_write(tmp_path, g.to_toml("written by a test")), TOOLS)
    assert again.edges == g.edges
    assert again.actions == g.actions
    assert again.description == "mine"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[edges]\nSTART = ["vqa", "teleport"]\n', "edges.START[1]: unknown action 'teleport'"),
        ('[edges]\nSTART = ["vqa"]\nflying = ["vqa"]\n', "edges.flying: unknown state 'flying'"),
        (
            '[edges]\nSTART = ["vqa"]\nweb_search = ["llm_qa"]\n',
            "edges.web_search: state 'web_search' cannot be reached from START",
        ),
        ('[edges]\nSTART = ["object_select"]\n', "no path to an answer"),
        ("[edges]\nSTART = []\n", "edges.START is missing or empty"),
        ('description = "x"\n', "[edges] is missing"),
        ('[edges]\nSTART = "vqa"\n', "edges.START should be a list"),
        ('[edges]\nSTART = ["vqa", "vqa"]\n', "edges.START names an action twice"),
        ('colour = 1\n[edges]\nSTART = ["vqa"]\n', "unknown key 'colour'"),
        (
            '[edges]\nSTART = ["x"]\n[actions.x]\ntool = "Teleport"\ndescription = "d"\n',
            "actions.x.tool: unknown tool 'Teleport'",
        ),
        (
            '[edges]\nSTART = ["x"]\n[actions.x]\ntool = "OCR"\n',
            "actions.x.description",
        ),
        (
            '[edges]\nSTART = ["vqa"]\n[actions.vqa]\ntool = "OCR"\ndescription = "d"\n',
            "actions.vqa: 'vqa' is a built-in name",
        ),
        ("[edges\n", "not valid TOML"),
    ],
)
def test_bad_graph_files_name_the_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(GraphError) as e:
        load_graph(path, TOOLS)
    assert str(path) in str(e.value)
    assert expected in str(e.value)


def test_missing_graph_file(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="no such graph file"):
        load_graph(tmp_path / "nope.toml")


def test_autonomous_graph_allows_every_action_everywhere() -> None:
    g = autonomous_graph()
    assert set(g.edges) == {START, *BUILTIN_ACTIONS}
    for targets in g.edges.values():
        assert list(targets) == list(BUILTIN_ACTIONS)
    mine = default_graph().actions
    assert set(autonomous_graph(mine).edges[START]) == set(mine)
