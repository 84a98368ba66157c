"""A client for any server that speaks the OpenAI chat/completions protocol.

Covers vLLM, SGLang, llama.cpp's ``llama-server``, Ollama, OpenAI and Gemini's OpenAI endpoint.
The servers differ only in how they take a grammar, which ``server`` selects.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal

import httpx

from hammr.backends.http_replies import (
    excerpt,
    network_reason,
    retry_after_s,
    server_message,
    tls_context,
)
from hammr.backends.llm.base import (
    GrammarSupport,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    Usage,
    apply_stop,
    flatten_messages,
)
from hammr.backends.pool import ReplicaPool

ServerKind = Literal["auto", "vllm", "sglang", "llamacpp", "ollama", "openai", "gemini"]
Mode = Literal["chat", "completion"]

_CONFIG_HINT = "(hammr.toml [llm] base_url)"


def _grammar_fields(server: ServerKind, grammar: str) -> dict[str, Any]:
    """The request fields that carry a GBNF grammar, per server.

    - llama.cpp ``llama-server``: top-level ``grammar`` (tools/server/README.md).
    - vLLM >= 0.12: ``structured_outputs.grammar`` (``guided_grammar`` was removed in 0.12.0;
      docs.vllm.ai features/structured_outputs). Its xgrammar backend reads GBNF.
    - SGLang: top-level ``ebnf`` (docs.sglang.io advanced_features/structured_outputs;
      xgrammar, GGML BNF syntax).
    """
    if server == "llamacpp":
        return {"grammar": grammar}
    if server == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    if server == "sglang":
        return {"ebnf": grammar}
    return {}


def _merge(body: dict[str, Any], extra: dict[str, Any]) -> None:
    """Merge ``extra`` into ``body``, one level deep for dict values (e.g. structured_outputs)."""
    for k, v in extra.items():
        old = body.get(k)
        if isinstance(old, dict) and isinstance(v, dict):
            body[k] = {**old, **v}
        else:
            body[k] = v


def _message_json(m: Message) -> dict[str, Any]:
    if isinstance(m.content, str):
        return {"role": m.role, "content": m.content}
    parts: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, str):
            parts.append({"type": "text", "text": p})
        else:
            parts.append({"type": "image_url", "image_url": {"url": p.data_url()}})
    return {"role": m.role, "content": parts}


class OpenAICompatLLM:
    """An :class:`~hammr.backends.llm.base.LLM` over an OpenAI-compatible HTTP server.

    ``max_retries`` is the number of tries in all (1 = no retry). Retries cover 429, 5xx,
    connection errors and timeouts, with exponential backoff and jitter; a ``Retry-After``
    header is honoured up to ``max_retry_after_s``.

    ``base_url`` may list several replicas of the same server (or be a
    :class:`~hammr.backends.pool.ReplicaPool`): each try goes to the one the pool chooses.
    A try that fails at the transport level (refused, timed out, dropped) sets that replica
    aside and is repeated at once, without backoff, on a replica not yet tried in this try
    while one is up; only when none is left does the try count against ``max_retries``.
    """

    def __init__(
        self,
        base_url: str | Sequence[str] | ReplicaPool,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        mode: Mode = "chat",
        server: ServerKind = "auto",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_retry_after_s: float = 30.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if mode not in ("chat", "completion"):
            raise ValueError(f"mode must be 'chat' or 'completion', got {mode!r}")
        if server not in ("auto", "vllm", "sglang", "llamacpp", "ollama", "openai", "gemini"):
            raise ValueError(f"unknown server kind {server!r}")
        self.pool = base_url if isinstance(base_url, ReplicaPool) else ReplicaPool(base_url)
        self.base_url = self.pool.urls[0]
        """The first (often the only) replica's URL; every one is in ``base_urls``."""
        self.model = model
        self.api_key_env = api_key_env
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.mode: Mode = mode
        self.server: ServerKind = server
        self.timeout_s = float(timeout_s)
        self.max_retries = max(1, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.extra_body = dict(extra_body or {})
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def name(self) -> str:
        return self.model

    @property
    def grammar_support(self) -> GrammarSupport:
        return "gbnf" if self.server in ("vllm", "sglang", "llamacpp") else "none"

    @property
    def json_schema_support(self) -> bool:
        """Whether ``response_format`` with a JSON schema constrains the reply, for servers
        that take no grammar (OpenAI's structured outputs, Gemini's and Ollama's
        OpenAI-compatible endpoints)."""
        return self.server in ("openai", "gemini", "ollama")

    @property
    def base_urls(self) -> tuple[str, ...]:
        return self.pool.urls

    @property
    def endpoint(self) -> str:
        return self.endpoint_at(self.base_url)

    def endpoint_at(self, base_url: str) -> str:
        path = "/chat/completions" if self.mode == "chat" else "/completions"
        return base_url + path

    def build_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so callers can log or inspect it)."""
        body: dict[str, Any] = {"model": self.model}
        if self.mode == "chat":
            body["messages"] = [_message_json(m) for m in request.messages]
        else:
            body["prompt"] = flatten_messages(request.messages)
        body["max_tokens"] = request.max_tokens
        body["temperature"] = request.temperature
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.json_schema},
            }
        if request.grammar and self.grammar_support == "gbnf":
            body.update(_grammar_fields(self.server, request.grammar))
        _merge(body, self.extra_body)
        return body

    def _client_for_loop(self) -> httpx.AsyncClient:
        # An AsyncClient is bound to the loop it first ran on; the CLI may call asyncio.run
        # several times, so make a fresh one whenever the loop changes.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._loop is not loop:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            # Plain http never does TLS (redirects are not followed), so skip the CA bundle.
            https = any(u.startswith("https:") for u in self.base_urls)
            verify: ssl.SSLContext | bool = tls_context() if https else False
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s), headers=headers, verify=verify
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        loop, self._loop = self._loop, None
        if client is None or client.is_closed:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - aclose is async, a loop always runs
            return
        if loop is running:
            await client.aclose()

    async def __aenter__(self) -> OpenAICompatLLM:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        return float(self.backoff_s * (2**attempt) * random.uniform(0.5, 1.0))

    def _where(self, url: str) -> str:
        return f"the LLM server at {url}"

    def _tries(self) -> str:
        n = self.max_retries
        return f"{n} {'try' if n == 1 else 'tries'}"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = self.build_body(request)
        client = self._client_for_loop()
        failure = ""
        attempt = 0
        tried: set[str] = set()  # replicas unreachable in this try
        while True:
            retry_after: float | None = None
            unreachable: str | None = None  # why the replica could not be reached
            async with self.pool.acquire(avoid=tried) as url:
                try:
                    resp = await client.post(self.endpoint_at(url), json=body)
                except httpx.TimeoutException:
                    unreachable = f"no answer within {self.timeout_s:g} s"
                    failure = (
                        f"{self._where(url)} did not answer within {self.timeout_s:g} s "
                        f"({self._tries()}); is it overloaded, or is the model still loading?"
                    )
                except httpx.ConnectError as e:
                    unreachable = network_reason(e)
                    failure = (
                        f"cannot reach the LLM server at {url}: {unreachable} "
                        f"— is it running? {_CONFIG_HINT}"
                    )
                except httpx.TransportError as e:
                    unreachable = network_reason(e)
                    failure = (
                        f"the connection to {self._where(url)} failed "
                        f"({self._tries()}): {unreachable}"
                    )
                else:
                    self.pool.mark_up(url)
                    status = resp.status_code
                    if status == 429 or status >= 500:
                        what = "is rate-limiting requests" if status == 429 else "failed"
                        failure = (
                            f"{self._where(url)} {what} (HTTP {status}, {self._tries()}): "
                            f"{server_message(resp)}"
                        )
                        retry_after = retry_after_s(resp)
                    elif status >= 400:
                        raise self._client_error(resp, url)
                    else:
                        return self._parse(resp, request, url)
            if unreachable is not None:
                self.pool.mark_down(url, unreachable)
                tried.add(url)
                if self.pool.available(avoid=tried):
                    continue  # fail over at once to another replica
            attempt += 1
            if attempt >= self.max_retries:
                break
            tried.clear()
            await asyncio.sleep(self._delay(attempt - 1, retry_after))
        if unreachable is not None and len(self.pool) > 1 and self.pool.all_down():
            failure = (
                f"all {len(self.pool)} LLM servers are unreachable: {self.pool.describe_down()} "
                f"— are they running? {_CONFIG_HINT}"
            )
        raise LLMError(failure)

    def _client_error(self, resp: httpx.Response, url: str) -> LLMError:
        status = resp.status_code
        msg = server_message(resp)
        if status in (401, 403):
            if self.api_key_env is None:
                how = "set api_key_env in hammr.toml [llm] to the variable holding the key"
            elif self.api_key:
                how = f"check the key in {self.api_key_env}"
            else:
                how = f"set {self.api_key_env} to a valid key; it is not set now"
            return LLMError(
                f"{self._where(url)} rejected the API key (HTTP {status}; {how}): {msg}"
            )
        if status == 404:
            return LLMError(
                f"{self._where(url)} answered 404 for model {self.model!r} at "
                f"{self.endpoint_at(url)}: {msg} (check hammr.toml [llm] model, and that "
                "base_url ends in /v1)"
            )
        return LLMError(f"{self._where(url)} refused the request (HTTP {status}): {msg}")

    def _parse(self, resp: httpx.Response, request: LLMRequest, url: str) -> LLMResponse:
        try:
            data = resp.json()
        except (ValueError, UnicodeDecodeError):
            raise LLMError(
                f"{self._where(url)} sent a reply that is not JSON: {excerpt(resp.text)!r}"
            ) from None
        choice = None
        if isinstance(data, dict):
            choices = data.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                choice = choices[0]
        if choice is None:
            raise LLMError(
                f"{self._where(url)} sent JSON without choices: {excerpt(json.dumps(data))!r}"
            )
        if self.mode == "chat":
            message = choice.get("message")
            text = message.get("content") if isinstance(message, dict) else None
        else:
            text = choice.get("text")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise LLMError(
                f"{self._where(url)} sent a choice without text: {excerpt(json.dumps(choice))!r}"
            )
        usage = data.get("usage")
        finish = choice.get("finish_reason")
        model = data.get("model")
        return LLMResponse(
            text=apply_stop(text, request.stop),
            usage=_parse_usage(usage),
            model=model if isinstance(model, str) and model else self.model,
            finish_reason=finish if isinstance(finish, str) else None,
        )


def _parse_usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        return Usage()

    def count(key: str) -> int:
        v = usage.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

    return Usage(prompt_tokens=count("prompt_tokens"), completion_tokens=count("completion_tokens"))
