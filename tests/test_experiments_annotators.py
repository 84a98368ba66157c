"""MuSEAgent's Table 5 as an experiment can run it: each memory step names its hindsight
model (``memory.annotator_model`` / ``annotator_base_url``), and the scripted
OpenAI-compatible server's request log shows which model annotated for which row."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.test_eval_cli import make_data
from tests.test_experiments_runner import env_for, invoke, run_args
from tests.test_memory_bank import bag_of_words

from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.experiments import bundled_names, load_experiment
from hammr.memory import ExperienceBank

EXPERIMENT = """
name = "annotators"
title = "Which model annotates"
paper = "muse"
source = "a test"
deviations = ["everything: it is a test"]

[settings]
"agent.max_steps" = 3

[data]
suite = "{suite}"

[[run]]
name = "explore"
system = "react"

[[memory]]
name = "bank-a"
command = "build"
from = "explore"
settings = {{ "memory.annotator_model" = "judge-a" }}

[[memory]]
name = "bank-b"
command = "build"
from = "explore"
settings = {{ "memory.annotator_model" = "judge-b", "memory.annotator_base_url" = "{other}" }}

[[run]]
name = "muse-a"
system = "muse"
memory = "bank-a"

[[run]]
name = "muse-b"
system = "muse"
memory = "bank-b"

[[table]]
name = "t"
title = "Accuracy by hindsight model"
columns = [{{ label = "All", cell = "overall" }}]

[[table.row]]
label = "judge-a annotates"
run = "muse-a"
paper = {{ "All" = 50.0 }}

[[table.row]]
label = "judge-b annotates"
run = "muse-b"
paper = {{ "All" = 60.0 }}
"""

GUIDE = "Looking back at it, judge every decision"


def respond(seen: Seen) -> Reply:
    """Embeddings by bag of words; a hindsight verdict (score 8 a step); otherwise crop
    once, then answer."""
    if seen.path.endswith("/embeddings"):  # text, or an image by its prompt's words
        texts = seen.body.get("input") or [json.dumps(seen.body.get("messages"))[-80:]]
        rows = bag_of_words(texts if isinstance(texts, list) else [texts])
        data = [{"index": i, "embedding": r.tolist()} for i, r in enumerate(rows)]
        return Reply(body={"data": data, "model": "fake-embed"})
    text = json.dumps(seen.body.get("messages"))
    if GUIDE in text:
        prompt = seen.body["messages"][0]["content"]
        n = len(re.findall(r"^\d+\. ", str(prompt), re.MULTILINE))
        steps = [{"step": i, "score": 8, "guidance": "Crop first."} for i in range(1, n + 1)]
        return Reply(body=ok_body(json.dumps({"steps": steps})))
    if "[Observe]" in text:
        return Reply(body=ok_body("[Thought]: I see it now.\n[Finish]: ans1"))
    return Reply(
        body=ok_body("[Thought]: Look closer.\n[Act]: part = CropImage(image, [0, 0, 16, 12])")
    )


@pytest.fixture
def servers() -> Any:
    main, other = FakeServer(), FakeServer()
    main.responder = other.responder = respond
    yield main, other
    main.close()
    other.close()


def hindsight(server: FakeServer) -> list[str]:
    """The model each hindsight request named."""
    return [s.body["model"] for s in server.seen if GUIDE in json.dumps(s.body.get("messages"))]


def test_each_memory_step_annotates_with_the_model_it_names_scripted_server(
    servers: tuple[FakeServer, FakeServer], tmp_path: Path
) -> None:
    main, other = servers
    suite, data = make_data(tmp_path, n=4)
    path = tmp_path / "annotators.toml"
    path.write_text(EXPERIMENT.format(suite=suite, other=other.url))
    store = tmp_path / "runs.sqlite"
    code, out, err = invoke(run_args(path, data, store), env_for(main, tmp_path))
    assert code == 0, err
    assert "5 of 5 steps done" in out
    # judge-a on the [llm] server, judge-b on the server its step names; one request per
    # trajectory (4 explored questions), no other model annotates
    assert hindsight(main) == ["judge-a"] * 4
    assert hindsight(other) == ["judge-b"] * 4
    agent_models = {s.body["model"] for s in main.seen if s.path.endswith("/chat/completions")}
    assert agent_models == {"fake", "judge-a"}
    folder = tmp_path / "runs.experiments"
    for bank, judge in (("bank-a", "judge-a"), ("bank-b", "judge-b")):
        with ExperienceBank(folder / f"annotators.{bank}.db") as b:
            annotated = [s.annotation.annotator for s in b.experiences() if s.annotation]
        assert annotated and set(annotated) == {judge}


def test_muse_table5_names_the_papers_four_hindsight_models() -> None:
    assert "muse-table5" in bundled_names()
    e = load_experiment("muse-table5")
    models = {
        m.name: m.settings.get("memory.annotator_model", "")
        for m in e.memories
        if m.command == "build"
    }
    assert models == {
        "bank": "",
        "bank-qwen3vl-235b": "Qwen/Qwen3-VL-235B-A22B-Instruct",
        "bank-qwen35-397b": "Qwen/Qwen3.5-397B-A17B",
        "bank-gpt4o": "gpt-4o",
    }
    rows = {row.run: row.paper for row in e.tables[0].rows}
    assert rows["muse-gpt4o"]["V* Micro"] == 85.42
    assert rows["muse-qwen35-397b"]["V* Rel. Pos."] == 92.11
    assert rows["muse-qwen3vl-235b"]["HR-Bench"] == 76.00
    # the demo data annotates every bank with the agent's own model (one smoke run)
    assert e.data.demo_settings.get("memory.annotator_model") == ""
