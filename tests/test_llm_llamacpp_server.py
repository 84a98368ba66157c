"""OpenAICompatLLM against a real llama.cpp server on 127.0.0.1.

xllamacpp's in-process server also listens on a loopback port and speaks llama-server's
OpenAI-compatible HTTP API, so the HTTP client, the grammar field for `server="llamacpp"`
and an agent run over HTTP are tested against the real thing, not a fake.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from conftest import needs_embedded_model, needs_tesseract
from hammr.backends.llm.base import LLMRequest, Message
from hammr.backends.llm.embedded import EmbeddedLLM
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.general_agent import general_agent
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools, default_backends
from hammr.values import Image

pytestmark = needs_embedded_model

GRAMMAR = 'root ::= "[Act]: " ("Foo" | "Bar") "(" [a-z]{1,6} ")"'


@pytest.fixture(scope="module")
def base_url() -> str:
    url = EmbeddedLLM(n_ctx=4096, n_threads=2).server_url
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url), url
    return url


def client(base_url: str, **kw: Any) -> OpenAICompatLLM:
    return OpenAICompatLLM(base_url, "smollm2", api_key_env=None, timeout_s=120, **kw)


async def test_chat_reply_over_http(base_url: str) -> None:
    r = await client(base_url).complete(
        LLMRequest(messages=(Message("user", "Say hello."),), max_tokens=12)
    )
    assert r.text.strip()
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


async def test_grammar_reaches_llama_server(base_url: str) -> None:
    llm = client(base_url, server="llamacpp")
    assert llm.grammar_support == "gbnf"
    for prompt in ("Call a tool.", "What is the capital of France?", "Write a poem."):
        r = await llm.complete(
            LLMRequest(messages=(Message("user", prompt),), max_tokens=20, grammar=GRAMMAR)
        )
        assert re.fullmatch(r"\[Act\]: (Foo|Bar)\([a-z]{1,6}\)", r.text), r.text


async def test_completion_endpoint_over_http(base_url: str) -> None:
    r = await client(base_url, mode="completion").complete(
        LLMRequest(messages=(Message("user", "The capital of France is"),), max_tokens=5)
    )
    assert r.text.strip()


@needs_tesseract
async def test_agent_over_http_with_grammar(
    base_url: str, plate: tuple[Image, dict[str, Any]]
) -> None:
    image, meta = plate
    tools = builtin_tools()
    agent = general_agent(tools, max_steps=3)
    llm = client(base_url, server="llamacpp")
    result = await agent.run(
        meta["question"], {"image": image}, ctx=ToolContext(backends=default_backends(), llm=llm)
    )
    formulation = {"syntax", "no_action", "unknown_tool", "unknown_variable"}
    assert all(s.error_kind not in formulation for s in result.trace.steps), [
        (s.raw, s.error) for s in result.trace.steps
    ]
    assert result.trace.status == "finished"
