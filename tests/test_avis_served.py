"""AVIS against an OpenAI-compatible server on 127.0.0.1 (the test server plays the model):
on a server that takes a JSON schema (OpenAI, Gemini, Ollama) the planner's choice is an
``enum`` of the candidates and the verdict an ``enum`` of the three; on one that takes a
grammar (vLLM) the grammar lists exactly the candidates; the replies are read either way."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image as PILImage

from avis_policy import kind_of, offered
from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.avis.actions import ActionRunner
from hammr.avis.graph import START, default_graph
from hammr.avis.system import AvisSystem
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.tools.base import ToolContext
from hammr.values import Image


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def prompt_of(seen: Seen) -> str:
    content = seen.body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def json_replies(seen: Seen) -> Reply:
    """What a model under the schema would write: one JSON object of the schema's fields."""
    kind = kind_of(prompt_of(seen))
    reply: dict[str, Any] = {
        "decompose": {"visual": "what colour is the car?", "knowledge": "#"},
        "plan": {"action": "vqa", "query": "what colour is the car?"},
        "reason": {"why": "the model says red", "verdict": "answerable", "answer": "red"},
    }[kind]
    return Reply(body=ok_body(json.dumps(reply)))


async def test_a_schema_server_gets_the_candidates_as_an_enum(server: FakeServer) -> None:
    server.responder = json_replies
    llm = OpenAICompatLLM(server.url, "fake", server="openai", max_retries=1)
    graph = default_graph()

    class Vqa(ActionRunner):
        async def run(self, action: str, given: Any, model: Any, ctx: Any) -> Any:
            from hammr.avis.actions import ActionOutcome

            return ActionOutcome("VQA answer: red", "red")

    system = AvisSystem(graph, Vqa(graph.actions, {}, None))
    image = Image(PILImage.new("RGB", (40, 30), "red"))
    result = await system.run("What colour is the car?", {"image": image}, ctx=ToolContext(llm=llm))
    assert result.answer == "red"
    bodies = {kind_of(prompt_of(s)): s.body for s in server.seen}
    plan_schema = bodies["plan"]["response_format"]["json_schema"]["schema"]
    assert plan_schema["properties"]["action"]["enum"] == list(graph.edges[START])
    assert plan_schema["properties"]["action"]["enum"] == offered(prompt_of(server.seen[1]))
    reason_schema = bodies["reason"]["response_format"]["json_schema"]["schema"]
    assert reason_schema["properties"]["verdict"]["enum"] == [
        "not informative",
        "informative",
        "answerable",
    ]
    assert "grammar" not in bodies["plan"] and "structured_outputs" not in bodies["plan"]
    step = next(s for s in result.trace.steps if s.state is not None)
    assert step.tool == "vqa" and step.verdict == "answerable"


async def test_a_grammar_server_gets_only_the_candidates_in_its_grammar(
    server: FakeServer,
) -> None:
    def lines(seen: Seen) -> Reply:
        kind = kind_of(prompt_of(seen))
        text = {
            "decompose": "Visual: which tower?\nKnowledge: #",
            "plan": "Action: object_select\nQuery: which tower?",
            "object": "Why: the only object.\nObject: #0",
            "reason": "Why: nothing new.\nVerdict: not informative",
        }.get(kind, "Action: vqa\nQuery: which tower?")
        if kind == "plan" and len([s for s in server.seen if "structured_outputs" in s.body]) > 2:
            text = "Action: vqa\nQuery: which tower?"
        return Reply(body=ok_body(text))

    server.responder = lines
    llm = OpenAICompatLLM(server.url, "fake", server="vllm", max_retries=1)
    graph = default_graph()
    system = AvisSystem(graph, ActionRunner(graph.actions, {}, None))
    image = Image(PILImage.new("RGB", (40, 30)))
    await system.run("Which tower?", {"image": image}, ctx=ToolContext(llm=llm))
    plans = [s for s in server.seen if kind_of(prompt_of(s)) == "plan"]
    assert plans
    for seen in plans:
        grammar = seen.body["structured_outputs"]["grammar"]
        root = grammar.splitlines()[0]
        assert re.findall(r'"([a-z_]+)"', root) == offered(prompt_of(seen))
        assert "response_format" not in seen.body
