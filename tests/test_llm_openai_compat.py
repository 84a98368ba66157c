from __future__ import annotations

import asyncio
import base64
import io
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

from fake_http_server import LocalServer, QuietHandler
from fake_openai_server import FakeServer, Reply, ok_body
from hammr.backends.llm.base import ImagePart, LLMError, LLMRequest, Message
from hammr.backends.llm.cache import CachedLLM
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.values import Image
from patience import HANG_S


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def req(text: str = "hello", **kw: Any) -> LLMRequest:
    return LLMRequest(messages=(Message("user", text),), **kw)


def fast(srv: FakeServer, **kw: Any) -> OpenAICompatLLM:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("api_key_env", None)
    return OpenAICompatLLM(srv.url, "fake-model", **kw)


async def test_text_reply_and_usage(server: FakeServer) -> None:
    server.script.append(Reply(body=ok_body("Paris")))
    async with fast(server) as llm:
        resp = await llm.complete(
            LLMRequest(
                messages=(Message("system", "be brief"), Message("user", "capital of France?")),
                max_tokens=17,
                temperature=0.5,
                stop=("\n\n",),
                seed=7,
            )
        )
    assert resp.text == "Paris"
    assert resp.usage.prompt_tokens == 11 and resp.usage.completion_tokens == 3
    assert resp.model == "fake-model" and resp.finish_reason == "stop" and not resp.cached
    [seen] = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == "fake-model"
    assert seen.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "capital of France?"},
    ]
    assert seen.body["max_tokens"] == 17 and seen.body["temperature"] == 0.5
    assert seen.body["stop"] == ["\n\n"] and seen.body["seed"] == 7
    assert "grammar" not in seen.body and "response_format" not in seen.body
    assert "authorization" not in seen.headers


async def test_missing_usage_is_zero_and_stop_applied(server: FakeServer) -> None:
    body = ok_body("answer STOP and more")
    del body["usage"]
    server.script.append(Reply(body=body))
    resp = await fast(server).complete(req(stop=("STOP",)))
    assert resp.text == "answer "
    assert resp.usage.total == 0


async def test_image_part_arrives_intact(server: FakeServer) -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    image = Image(PILImage.fromarray(pixels, "RGB"))
    msg = Message("user", ("What is this?", ImagePart(image), "Answer briefly."))
    await fast(server, vision=True).complete(LLMRequest(messages=(msg,)))
    parts = server.seen[0].body["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "What is this?"}
    assert parts[2] == {"type": "text", "text": "Answer briefly."}
    assert parts[1]["type"] == "image_url"
    url = parts[1]["image_url"]["url"]
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    got = PILImage.open(io.BytesIO(base64.b64decode(url[len(prefix) :])))
    assert got.format == "PNG"
    assert np.array_equal(np.asarray(got.convert("RGB")), pixels)


async def test_500_then_success_retries(server: FakeServer) -> None:
    server.script.append(Reply(status=500, body={"error": {"message": "boom"}}))
    resp = await fast(server).complete(req())
    assert resp.text == "ok"
    assert len(server.seen) == 2


async def test_500_every_time_gives_one_line_error(server: FakeServer) -> None:
    server.script.extend(
        Reply(status=503, body={"error": {"message": "overloaded\nnow"}}) for _ in range(5)
    )
    with pytest.raises(LLMError) as e:
        await fast(server, max_retries=3).complete(req())
    msg = str(e.value)
    assert "\n" not in msg and "HTTP 503" in msg and "overloaded now" in msg and "3 tries" in msg
    assert len(server.seen) == 3


async def test_429_honours_retry_after(server: FakeServer) -> None:
    server.script.append(Reply(status=429, headers={"Retry-After": "1"}))
    t0 = time.monotonic()
    resp = await fast(server).complete(req())
    assert resp.text == "ok"
    assert time.monotonic() - t0 >= 0.9
    assert len(server.seen) == 2


async def test_retry_after_is_capped(server: FakeServer) -> None:
    server.script.append(Reply(status=429, headers={"Retry-After": str(int(HANG_S))}))
    # the call would outlast the wait below by minutes had it waited the Retry-After
    await asyncio.wait_for(fast(server, max_retry_after_s=0.1).complete(req()), HANG_S / 2)
    assert len(server.seen) == 2


async def test_timeout(server: FakeServer) -> None:
    server.script.extend(Reply(delay=HANG_S) for _ in range(5))  # held until closed
    with pytest.raises(LLMError) as e:
        await fast(server, timeout_s=0.3, max_retries=2).complete(req())
    msg = str(e.value)
    assert "\n" not in msg
    assert "did not answer within 0.3 s (2 tries)" in msg
    assert len(server.seen) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_server_down() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    llm = OpenAICompatLLM(url, "m", api_key_env=None, backoff_s=0.01, max_retries=2)
    with pytest.raises(LLMError) as e:
        await llm.complete(req())
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"cannot reach the LLM server at {url}: connection refused")
    assert "is it running?" in msg and "base_url" in msg


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (b"<html>Bad gateway page</html>", "not JSON: '<html>Bad gateway page</html>'"),
        ({"object": "list", "data": []}, "without choices"),
        ({"choices": []}, "without choices"),
    ],
)
async def test_malformed_body(
    server: FakeServer, body: bytes | dict[str, Any], expect: str
) -> None:
    server.script.append(Reply(body=body))
    with pytest.raises(LLMError) as e:
        await fast(server).complete(req())
    assert expect in str(e.value) and "\n" not in str(e.value)
    assert len(server.seen) == 1


async def test_404_model_not_found_includes_server_message(server: FakeServer) -> None:
    server.script.append(
        Reply(
            status=404,
            body={"object": "error", "message": "The model `nope` does not exist.", "code": 404},
        )
    )
    with pytest.raises(LLMError) as e:
        await fast(server).complete(req())
    msg = str(e.value)
    assert "404" in msg and "The model `nope` does not exist." in msg and "'fake-model'" in msg
    assert "\n" not in msg and len(server.seen) == 1


async def test_401_names_the_env_var(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HAMMR_TEST_KEY", raising=False)
    server.script.append(Reply(status=401, body={"error": {"message": "Invalid API key"}}))
    with pytest.raises(LLMError) as e:
        await fast(server, api_key_env="HAMMR_TEST_KEY").complete(req())
    msg = str(e.value)
    assert "rejected the API key" in msg and "HAMMR_TEST_KEY" in msg and "Invalid API key" in msg
    assert len(server.seen) == 1


async def test_other_4xx_is_not_retried(server: FakeServer) -> None:
    server.script.append(Reply(status=400, body={"error": {"message": "bad grammar"}}))
    with pytest.raises(LLMError, match=r"refused the request \(HTTP 400\): bad grammar"):
        await fast(server).complete(req())
    assert len(server.seen) == 1


async def test_api_key_header(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAMMR_TEST_KEY", "sk-test-123")
    await fast(server, api_key_env="HAMMR_TEST_KEY").complete(req())
    assert server.seen[0].headers["authorization"] == "Bearer sk-test-123"


async def test_completion_mode(server: FakeServer) -> None:
    server.script.append(Reply(body=ok_body(" Paris", completion=True)))
    llm = fast(server, mode="completion")
    msgs = (Message("system", "Answer."), Message("user", "Capital of France?"))
    resp = await llm.complete(LLMRequest(messages=msgs))
    assert resp.text == " Paris"
    [seen] = server.seen
    assert seen.path == "/v1/completions"
    assert seen.body["prompt"] == "Answer.\nCapital of France?\n"
    assert "messages" not in seen.body


@pytest.mark.parametrize(
    ("kind", "support", "field", "value"),
    [
        ("llamacpp", "gbnf", "grammar", 'root ::= "yes"'),
        ("vllm", "gbnf", "structured_outputs", {"grammar": 'root ::= "yes"'}),
        ("sglang", "gbnf", "ebnf", 'root ::= "yes"'),
        ("openai", "none", None, None),
        ("gemini", "none", None, None),
        ("ollama", "none", None, None),
        ("auto", "none", None, None),
    ],
)
async def test_grammar_field_per_server(
    server: FakeServer, kind: Any, support: str, field: str | None, value: Any
) -> None:
    llm = fast(server, server=kind)
    assert llm.grammar_support == support
    await llm.complete(req(grammar='root ::= "yes"'))
    body = server.seen[0].body
    grammar_keys = {"grammar", "structured_outputs", "ebnf", "guided_grammar"}
    if field is None:
        assert not grammar_keys & body.keys()
    else:
        assert body[field] == value
        assert grammar_keys & body.keys() == {field}


async def test_json_schema_and_extra_body(server: FakeServer) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    llm = fast(
        server, extra_body={"top_p": 0.9, "chat_template_kwargs": {"enable_thinking": False}}
    )
    await llm.complete(req(json_schema=schema))
    body = server.seen[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }
    assert body["top_p"] == 0.9
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_usable_across_event_loops(server: FakeServer) -> None:
    llm = fast(server)
    assert asyncio.run(llm.complete(req())).text == "ok"
    assert asyncio.run(llm.complete(req())).text == "ok"
    asyncio.run(llm.aclose())
    assert len(server.seen) == 2


async def test_concurrent_calls_share_one_client(server: FakeServer) -> None:
    async with fast(server) as llm:
        out = await asyncio.gather(*(llm.complete(req(f"q{i}")) for i in range(8)))
    assert [r.text for r in out] == ["ok"] * 8
    assert sorted(s.body["messages"][0]["content"] for s in server.seen) == sorted(
        f"q{i}" for i in range(8)
    )


async def test_cached_over_http(server: FakeServer, tmp_path: Path) -> None:
    async with CachedLLM(fast(server, server="vllm"), tmp_path / "c.sqlite") as llm:
        assert llm.grammar_support == "gbnf" and llm.name == "fake-model"
        first = await llm.complete(req())
        second = await llm.complete(req())
    assert not first.cached and second.cached and second.text == first.text
    assert second.usage == first.usage
    assert len(server.seen) == 1


# -- what a reply carries besides its text ----------------------------------------------------


@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_null_content_is_said_to_be_no_text_with_scripted_server(
    server: FakeServer, mode: Any
) -> None:
    """A reply with ``content: null`` (a refusal, a tool call, a reasoning model out of
    tokens) holds no text at all: an LLMError saying so (issue 21), which every system
    reports as the server's failure rather than as the model's format mistake. An empty
    text ("") is still a reply, which the agent loop turns into an observation."""
    body = ok_body(completion=mode == "completion")
    choice = body["choices"][0]
    choice["finish_reason"] = "length"
    if mode == "chat":
        choice["message"]["content"] = None
    else:
        choice["text"] = None
    server.script.append(Reply(body=body))
    field = "message.content" if mode == "chat" else "text"
    with pytest.raises(
        LLMError, match=rf"returned no text \({field} is null, finish_reason: length\)"
    ):
        await fast(server, mode=mode).complete(req())
    empty = ok_body("", completion=mode == "completion")
    empty["choices"][0]["finish_reason"] = "length"
    server.script.append(Reply(body=empty))
    resp = await fast(server, mode=mode).complete(req())
    assert (resp.text, resp.finish_reason) == ("", "length")
    assert resp.usage.prompt_tokens == 11


@pytest.mark.parametrize(
    ("extra", "cached"),
    [
        ({}, None),
        ({"usage": {"prompt_tokens": 11, "prompt_tokens_details": {"cached_tokens": 8}}}, 8),
        ({"timings": {"cache_n": 7, "prompt_n": 4}}, 7),
        (
            {
                "usage": {"prompt_tokens": 11, "prompt_tokens_details": {"cached_tokens": 9}},
                "timings": {"cache_n": 7},
            },
            9,
        ),
        ({"usage": {"prompt_tokens_details": None}, "timings": {"cache_n": 6}}, 6),
        ({"usage": {"prompt_tokens_details": {"cached_tokens": -1}}}, None),
        ({"timings": {"cache_n": True}}, None),
        ({"timings": "fast"}, None),
    ],
    ids=["neither", "openai", "llamacpp", "both", "null-details", "negative", "bool", "junk"],
)
async def test_cached_prompt_tokens_from_usage_or_timings_with_scripted_server(
    server: FakeServer, extra: dict[str, Any], cached: int | None
) -> None:
    server.script.append(Reply(body={**ok_body("x"), **extra}))
    resp = await fast(server).complete(req())
    assert resp.cached_prompt_tokens == cached


async def test_json_schema_also_goes_top_level_to_llama_cpp_completions_with_scripted_server(
    server: FakeServer,
) -> None:
    """llama-server's /v1/completions ignores response_format; it reads json_schema."""
    schema = {"type": "object"}
    for mode in ("completion", "chat"):
        await fast(server, server="llamacpp", mode=mode).complete(req(json_schema=schema))
    completion, chat = (s.body for s in server.seen)
    assert completion["json_schema"] == schema
    assert completion["response_format"]["json_schema"]["schema"] == schema
    assert "json_schema" not in chat and chat["response_format"]["json_schema"]["schema"] == schema


@pytest.mark.parametrize(
    ("grammar", "message", "expect"),
    [
        ('root ::= "a"', "failed to parse grammar", "refused the grammar hammr sent (HTTP 400)"),
        (None, "failed to parse grammar", "refused the request (HTTP 400)"),
        ('root ::= "a"', "model not loaded", "refused the request (HTTP 400)"),
    ],
)
async def test_a_refused_grammar_says_so_with_scripted_server(
    server: FakeServer, grammar: str | None, message: str, expect: str
) -> None:
    server.script.append(Reply(status=400, body={"error": {"message": message}}))
    with pytest.raises(LLMError) as e:
        await fast(server, server="llamacpp").complete(req(grammar=grammar))
    assert str(e.value).startswith(f"the LLM server at {server.url} {expect}: {message}")
    assert "\n" not in str(e.value) and len(server.seen) == 1


NO_KEY: dict[str, Any] = {"api_key_env": None, "backoff_s": 0.01}


class CutsRepliesShort(QuietHandler):
    """Announces a whole reply, sends the start of it, and closes the connection (a server
    that crashed mid-reply)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "500")
        self.end_headers()
        self.wfile.write(b'{"choices": [{"message": {"content": "The ans')
        self.wfile.flush()
        self.close_connection = True


async def test_a_reply_cut_mid_way_names_the_server_and_fails_over_with_scripted_servers(
    server: FakeServer,
) -> None:
    cutter = LocalServer(CutsRepliesShort)
    try:
        cut_url = f"http://127.0.0.1:{cutter.port}/v1"
        with pytest.raises(LLMError) as e:
            await OpenAICompatLLM(cut_url, "m", **NO_KEY, max_retries=2).complete(req())
        msg = str(e.value)
        assert msg == (
            f"the LLM server at {cut_url} closed the connection before its reply was "
            "complete (2 tries) — did the server crash or restart?"
        )
        # in a pool, the request moves to the other replica at once
        pooled = OpenAICompatLLM([cut_url, server.url], "m", **NO_KEY, max_retries=1)
        answers = [await pooled.complete(req()) for _ in range(3)]
        assert [a.text for a in answers] == ["ok"] * 3
        [cut, fine] = pooled.pool.status()
        assert (cut.up, cut.reason, fine.up) == (
            False,
            "connection closed before the reply was complete",
            True,
        )
    finally:
        cutter.close()


async def test_a_model_that_does_not_see_gets_the_image_placeholder(server: FakeServer) -> None:
    """A text-only server refuses image parts (llama.cpp: HTTP 500 'image input is not
    supported'): with vision off the client sends the text with <image> in its place."""
    image = Image(PILImage.new("RGB", (4, 4)))
    msg = Message("user", ("What is this?", ImagePart(image), "Answer briefly."))
    await fast(server).complete(LLMRequest(messages=(msg,)))
    assert server.seen[0].body["messages"][0]["content"] == "What is this?<image>Answer briefly."
