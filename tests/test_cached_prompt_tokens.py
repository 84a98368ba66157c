"""Prompt tokens a server took from its prefix cache: reported by the backends (llama.cpp's
``timings.cache_n``), kept in a step's usage, carried through a trace's JSON; an agent's
later steps reuse the earlier steps' prompt on a real llama.cpp server."""

from __future__ import annotations

import itertools
import json

import pytest
from PIL import Image as PILImage

from conftest import needs_embedded_model
from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLMRequest, LLMResponse, Message, Usage
from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.tools.base import ToolContext
from hammr.trace import Step, StepUsage, Trace, TraceFormatError
from hammr.values import Image
from real_server import SIZE_EXAMPLE, ImageSize, real_client


def test_step_usage_of_a_reply() -> None:
    reply = LLMResponse("x", Usage(120, 9), cached_prompt_tokens=100)
    assert StepUsage.of(reply) == StepUsage(120, 9, 100)
    assert StepUsage.of(LLMResponse("x", Usage(5, 1))) == StepUsage(5, 1, None)


def test_cached_prompt_tokens_round_trip_and_old_traces_load() -> None:
    t = Trace(agent="A", question="q?", answer="x", status="finished")
    t.steps.append(Step(index=0, finish="x", usage=StepUsage(120, 9, 100)))
    t.steps.append(Step(index=1, finish="x", usage=StepUsage(50, 2)))
    doc = json.loads(json.dumps(t.to_dict()))
    assert doc["steps"][0]["usage"] == {
        "prompt_tokens": 120,
        "completion_tokens": 9,
        "cached_prompt_tokens": 100,
    }
    back = Trace.from_dict(doc)
    assert [s.usage for s in back.steps] == [StepUsage(120, 9, 100), StepUsage(50, 2, None)]
    # a trace written before the field existed
    del doc["steps"][0]["usage"]["cached_prompt_tokens"]
    assert Trace.from_dict(doc).steps[0].usage == StepUsage(120, 9, None)
    doc["steps"][0]["usage"]["cached_prompt_tokens"] = "100"
    with pytest.raises(TraceFormatError, match=r"usage\.cached_prompt_tokens should be an integer"):
        Trace.from_dict(doc)


@needs_embedded_model
async def test_the_embedded_model_reports_cached_prompt_tokens() -> None:
    from hammr.backends.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM(n_ctx=4096)
    system = Message("system", "You are a patient assistant for cached tokens. " * 10)
    first = await llm.complete(LLMRequest((system, Message("user", "One.")), max_tokens=2))
    second = await llm.complete(LLMRequest((system, Message("user", "Two.")), max_tokens=2))
    assert first.cached_prompt_tokens is not None
    assert second.cached_prompt_tokens is not None
    assert first.usage.prompt_tokens // 2 < second.cached_prompt_tokens
    assert second.cached_prompt_tokens < second.usage.prompt_tokens


async def test_an_agents_later_steps_come_from_the_servers_cache(
    real_llm_server: LocalLlamaServer,
) -> None:
    agent = ReActAgent(
        name="Sizer",
        description="Answers questions about an image's size.",
        instructions="Answer questions about the image's size (cache check): measure, finish.",
        tools=[ImageSize],
        examples=[SIZE_EXAMPLE],
        max_steps=3,
    )
    llm = real_client(real_llm_server.base_url, server="llamacpp")
    image = Image(PILImage.new("RGB", (41, 30)))
    result = await agent.run("How wide is the image?", {"image": image}, ctx=ToolContext(llm=llm))
    steps = [s for s in result.trace.steps if s.usage.prompt_tokens]
    assert len(steps) >= 2, [(s.raw, s.error) for s in result.trace.steps]
    for before, later in itertools.pairwise(steps):
        cached = later.usage.cached_prompt_tokens
        # the later prompt repeats the earlier one (and its reply): taken from the cache
        assert cached is not None and cached >= before.usage.prompt_tokens - 1, (
            before.usage,
            later.usage,
        )
    back = Trace.from_dict(json.loads(json.dumps(result.trace.to_dict())))
    assert [s.usage for s in back.steps] == [s.usage for s in result.trace.steps]
    await llm.aclose()
