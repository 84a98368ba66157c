"""OpenAICompatLLM against real llama.cpp HTTP servers on 127.0.0.1, no fake.

Two real servers speak llama-server's OpenAI-compatible API here: the one xllamacpp runs
inside this process beside the embedded model (``in-process``), and llama.cpp's server in a
process of its own (``subprocess``, :class:`~hammr.backends.llm.local_server.LocalLlamaServer`,
shared by the session). The HTTP client, the grammar field for ``server="llamacpp"``, the
JSON schema, the prefix cache and an agent run over HTTP meet the real thing; so do the bad
replies a real server gives: a refused grammar, a reply cut at max_tokens, a prompt too long
for a slot, a server killed mid-reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from conftest import needs_embedded_model, needs_tesseract
from hammr.actions import Act, ParseError, parse_step
from hammr.backends.llm.base import LLMError, LLMRequest, Message
from hammr.backends.llm.cache import CachedLLM
from hammr.backends.llm.embedded import EmbeddedLLM
from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.general_agent import general_agent
from hammr.grammar import step_grammar
from hammr.tools.base import Tool, ToolContext, tool
from hammr.tools.library import builtin_tools, default_backends
from hammr.values import Image
from real_server import real_client

pytestmark = needs_embedded_model

GRAMMAR = 'root ::= "[Act]: " ("Foo" | "Bar") "(" [a-z]{1,6} ")"'


@pytest.fixture(scope="module", params=["in-process", "subprocess"])
def base_url(request: pytest.FixtureRequest) -> str:
    """The /v1 URL of each real llama.cpp server in turn."""
    if request.param == "in-process":
        url = EmbeddedLLM(n_ctx=4096).server_url
    else:
        server: LocalLlamaServer = request.getfixturevalue("real_llm_server")
        url = server.base_url
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url), url
    return url


def client(base_url: str, **kw: Any) -> OpenAICompatLLM:
    return real_client(base_url, **kw)


def ask(text: str, **kw: Any) -> LLMRequest:
    return LLMRequest(messages=(Message("user", text),), **kw)


# -- on both real servers ----------------------------------------------------------------------


async def test_chat_reply_over_http(base_url: str) -> None:
    r = await client(base_url).complete(
        LLMRequest(
            messages=(Message("system", "Be brief."), Message("user", "Say hello.")),
            max_tokens=12,
        )
    )
    assert r.text.strip()
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.finish_reason in ("stop", "length") and not r.cached
    assert r.cached_prompt_tokens is not None  # llama.cpp says how much came from its cache


async def test_grammar_reaches_llama_server(base_url: str) -> None:
    llm = client(base_url, server="llamacpp")
    assert llm.grammar_support == "gbnf"
    for prompt in ("Call a tool.", "What is the capital of France?", "Write a poem."):
        r = await llm.complete(ask(prompt, max_tokens=20, grammar=GRAMMAR))
        assert re.fullmatch(r"\[Act\]: (Foo|Bar)\([a-z]{1,6}\)", r.text), r.text


async def test_completion_endpoint_over_http(base_url: str) -> None:
    r = await client(base_url, mode="completion").complete(
        ask("The capital of France is", max_tokens=5)
    )
    assert r.text.strip()
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


@needs_tesseract
async def test_agent_over_http_with_grammar(
    real_llm_server: LocalLlamaServer, plate: tuple[Image, dict[str, Any]]
) -> None:
    """(On the subprocess server only: a run takes minutes on a busy machine.)"""
    image, meta = plate
    tools = builtin_tools()
    agent = general_agent(tools, max_steps=3)
    llm = client(real_llm_server.base_url, server="llamacpp")
    result = await agent.run(
        meta["question"], {"image": image}, ctx=ToolContext(backends=default_backends(), llm=llm)
    )
    formulation = {"syntax", "no_action", "unknown_tool", "unknown_variable"}
    assert all(s.error_kind not in formulation for s in result.trace.steps), [
        (s.raw, s.error) for s in result.trace.steps
    ]
    assert result.trace.status == "finished"


# -- the grammar hammr sends is the grammar the server enforces ---------------------------------


@tool
def Caption(image: Image) -> str:
    """Describes the image in one sentence."""
    return "a picture"


@tool
def ReadText(image: Image) -> str:
    """Reads the text in the image."""
    return ""


@tool
def CountObjects(image: Image, name: str) -> int:
    """Counts the objects of one kind in the image."""
    return 0


TOOLS: list[Tool] = [Caption, ReadText, CountObjects]
TOOL_PROMPT = """\
You answer questions about an image by calling one tool. Tools:
- Caption(image): describes the image in one sentence.
- ReadText(image): reads the text in the image.
- CountObjects(image, name): counts the objects of one kind.
Reply with one line [Thought]: ... and one line [Act]: Tool(image).

Example:
Question: What is in this picture?
[Thought]: I describe the image.
[Act]: Caption(image)"""
QUESTIONS = ("What is in this picture?", "What does the image show?")


async def _steps(llm: OpenAICompatLLM, offered: list[Tool]) -> list[Act | ParseError]:
    """The action the model's reply to each question parses to (or why it does not) when
    the step grammar offers ``offered``, and the agent knows every tool of TOOLS."""
    variables = {"image": Image(PILImage.new("RGB", (64, 48)))}
    grammar = step_grammar(offered, variables)
    out: list[Act | ParseError] = []
    for q in QUESTIONS:
        messages = (Message("system", TOOL_PROMPT), Message("user", f"Question: {q}"))
        r = await llm.complete(LLMRequest(messages=messages, max_tokens=256, grammar=grammar))
        try:
            step = parse_step(r.text, [t.name for t in TOOLS], variables)
        except ParseError as e:
            out.append(e)
            continue
        assert isinstance(step.action, Act), r.text  # a [Finish] would fail the check below
        out.append(step.action)
    return out


def _tools_called(steps: list[Act | ParseError]) -> list[str | None]:
    return [s.tool if isinstance(s, Act) else None for s in steps]


async def test_the_step_grammar_offering_one_tool_is_the_only_tool_called(
    real_llm_server: LocalLlamaServer,
) -> None:
    """The prompt shows the model calling Caption. Under a step grammar over all three tools
    it calls Caption; under one that offers ReadText alone (or CountObjects alone) every
    reply calls that tool; sent to a server kind that takes no grammar, the same request
    gets a reply that calls no tool at all."""
    served = client(real_llm_server.base_url, server="llamacpp")
    assert _tools_called(await _steps(served, TOOLS)) == ["Caption"] * len(QUESTIONS)
    assert _tools_called(await _steps(served, [ReadText])) == ["ReadText"] * len(QUESTIONS)
    assert _tools_called(await _steps(served, [CountObjects])) == ["CountObjects"] * len(QUESTIONS)

    unconstrained = client(real_llm_server.base_url, server="auto")
    assert "grammar" not in unconstrained.build_body(ask("x", grammar=GRAMMAR))
    free = await _steps(unconstrained, [ReadText])
    assert "ReadText" not in _tools_called(free), free


# -- JSON schema -------------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "country": {"type": "string", "maxLength": 40},
        "population_millions": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["city", "country", "population_millions"],
    "additionalProperties": False,
}


def _valid(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"city", "country", "population_millions"}
        and isinstance(value["city"], str)
        and len(value["city"]) <= 40
        and isinstance(value["country"], str)
        and len(value["country"]) <= 40
        and type(value["population_millions"]) is int
        and 0 <= value["population_millions"] <= 99
    )


@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_json_schema_is_enforced(real_llm_server: LocalLlamaServer, mode: Any) -> None:
    llm = client(real_llm_server.base_url, server="llamacpp", mode=mode)
    for prompt in ("Tell me about Paris.", "Write a poem about the sea."):
        r = await llm.complete(ask(prompt, max_tokens=120, json_schema=SCHEMA))
        assert r.finish_reason == "stop", r.text
        assert _valid(json.loads(r.text)), r.text
    # the same request without the schema is not JSON of that shape
    free = await llm.complete(ask("Write a poem about the sea.", max_tokens=40))
    with contextlib.suppress(ValueError):
        assert not _valid(json.loads(free.text))


# -- the prefix cache --------------------------------------------------------------------------


async def test_cached_prompt_tokens_are_reported(real_llm_server: LocalLlamaServer) -> None:
    llm = client(real_llm_server.base_url)
    # a fresh stamp first, so that no earlier request left this prompt in the cache
    system = Message("system", f"Run {time.time()}. " + "You are a careful assistant. " * 20)
    first = await llm.complete(
        LLMRequest(messages=(system, Message("user", "Say one.")), max_tokens=4)
    )
    second = await llm.complete(
        LLMRequest(messages=(system, Message("user", "Say two.")), max_tokens=4)
    )
    assert first.cached_prompt_tokens is not None and second.cached_prompt_tokens is not None
    # the first prompt's head (new text: a fresh run stamp) was evaluated, not cached...
    assert first.cached_prompt_tokens < first.usage.prompt_tokens // 2
    # ...and the second took the shared system prompt from the slot's cache
    assert second.cached_prompt_tokens > first.usage.prompt_tokens // 2
    assert second.cached_prompt_tokens < second.usage.prompt_tokens


# -- concurrency, event loops and hammr's own cache --------------------------------------------


async def test_concurrent_calls_share_the_slots(real_llm_server: LocalLlamaServer) -> None:
    async with client(real_llm_server.base_url) as llm:
        prompts = [f"Say the number {i}." for i in range(4)]
        out = await asyncio.gather(*(llm.complete(ask(p, max_tokens=8)) for p in prompts))
    assert all(r.usage.completion_tokens > 0 for r in out)
    assert all(r.finish_reason in ("stop", "length") for r in out)


def test_usable_across_event_loops(real_llm_server: LocalLlamaServer) -> None:
    llm = client(real_llm_server.base_url)
    first = asyncio.run(llm.complete(ask("Say hi.", max_tokens=4)))
    second = asyncio.run(llm.complete(ask("Say hi.", max_tokens=4)))
    asyncio.run(llm.aclose())
    assert first.usage.completion_tokens > 0 and second.usage.completion_tokens > 0


async def test_cached_over_http(real_llm_server: LocalLlamaServer, tmp_path: Path) -> None:
    async with CachedLLM(client(real_llm_server.base_url), tmp_path / "c.sqlite") as llm:
        first = await llm.complete(ask("Name a colour.", max_tokens=6))
        second = await llm.complete(ask("Name a colour.", max_tokens=6))
    assert not first.cached and second.cached
    assert (second.text, second.usage, second.finish_reason) == (
        first.text,
        first.usage,
        first.finish_reason,
    )


# -- bad input from a real server --------------------------------------------------------------


async def test_a_refused_grammar_names_the_server(real_llm_server: LocalLlamaServer) -> None:
    url = real_llm_server.base_url
    llm = client(url, server="llamacpp", max_retries=3)
    with pytest.raises(LLMError) as e:
        await llm.complete(ask("Hi.", max_tokens=4, grammar='root ::= "a" (unclosed'))
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"the LLM server at {url} refused the grammar hammr sent (HTTP 400)")
    assert "failed to parse grammar" in msg and "server = 'auto'" in msg
    assert all(s.up for s in llm.pool.status())  # a refusal is an answer, not a dead server


async def test_a_reply_cut_at_max_tokens_says_length(real_llm_server: LocalLlamaServer) -> None:
    for mode in ("chat", "completion"):
        r = await client(real_llm_server.base_url, mode=mode).complete(
            ask("Write a long story about a dragon.", max_tokens=3)
        )
        assert r.finish_reason == "length" and r.usage.completion_tokens == 3, (mode, r)


async def test_a_prompt_too_long_for_a_slot_says_so(real_llm_server: LocalLlamaServer) -> None:
    url = real_llm_server.base_url
    with pytest.raises(LLMError) as e:
        await client(url).complete(ask("word " * 5000, max_tokens=4))
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"the LLM server at {url} refused the request (HTTP 400): the prompt")
    assert re.search(r"the prompt is \d{4} tokens but each of its slots holds 4096", msg), msg
    assert "--ctx-size" in msg


async def wait_until_decoding(server: LocalLlamaServer, slots: int = 1) -> None:
    """Until ``slots`` of the server's slots are writing a reply (mid-reply)."""
    deadline = time.monotonic() + 120
    while await asyncio.to_thread(server.decoding) < slots:
        assert time.monotonic() < deadline, "the server never started replying"
        await asyncio.sleep(0.05)


async def test_a_server_killed_mid_reply_is_named_with_the_cause(
    spare_llm_server: LocalLlamaServer,
) -> None:
    url = spare_llm_server.base_url
    llm = client(url, extra_body={"ignore_eos": True})  # writes all 2000 tokens
    call = asyncio.create_task(llm.complete(ask("Write a long story.", max_tokens=2000)))
    await wait_until_decoding(spare_llm_server)
    spare_llm_server.kill()
    with pytest.raises(LLMError) as e:
        await call
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(
        f"the LLM server at {url} closed the connection before its reply was complete (1 try)"
    ), msg
    # the next request finds nobody there
    with pytest.raises(LLMError, match=f"cannot reach the LLM server at {url}: connection refused"):
        await llm.complete(ask("Hi.", max_tokens=2))
    await llm.aclose()
