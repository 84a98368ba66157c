"""A client for any server that speaks the OpenAI chat/completions protocol.

Covers vLLM, SGLang, llama.cpp's ``llama-server``, Ollama, OpenAI and Gemini's OpenAI endpoint.
The servers differ only in how they take a grammar, which ``server`` selects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import httpx

from hammr.backends.http_client import OpenAIStyleClient
from hammr.backends.http_replies import excerpt, server_message
from hammr.backends.llm.base import (
    GrammarSupport,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    Usage,
    VisionLimits,
    apply_stop,
    flatten_messages,
)
from hammr.backends.llm.slots import current_lane
from hammr.backends.pool import ReplicaPool

ServerKind = Literal["auto", "vllm", "sglang", "llamacpp", "ollama", "openai", "gemini"]
Mode = Literal["chat", "completion"]


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


def _message_json(m: Message, vision: bool = True) -> dict[str, Any]:
    """A message as the chat API takes it; for a model that does not see (``vision``
    False) its images are the ``<image>`` placeholder of :meth:`Message.text`, as the
    embedded model gets them (a text-only server refuses image parts)."""
    if isinstance(m.content, str) or not vision:
        return {"role": m.role, "content": m.text()}
    parts: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, str):
            parts.append({"type": "text", "text": p})
        else:
            parts.append({"type": "image_url", "image_url": {"url": p.data_url()}})
    return {"role": m.role, "content": parts}


class OpenAICompatLLM(OpenAIStyleClient):
    """An :class:`~hammr.backends.llm.base.LLM` over an OpenAI-compatible HTTP server.

    ``max_retries`` is the number of tries in all (1 = no retry). Retries cover 429, 5xx,
    connection errors and timeouts, with exponential backoff and jitter; a ``Retry-After``
    header is honoured up to ``max_retry_after_s``.

    ``base_url`` may list several replicas of the same server (or be a
    :class:`~hammr.backends.pool.ReplicaPool`): each try goes to the one the pool chooses.
    A try that fails at the transport level (refused, timed out, dropped) sets that replica
    aside and is repeated at once, without backoff, on a replica not yet tried in this try
    while one is up; only when none is left does the try count against ``max_retries``.

    Errors name the server as ``server_label`` and point to the hammr.toml table
    ``config_table`` (a client configured elsewhere, as the served VLM, names its own).
    """

    error_type: ClassVar[type[Exception]] = LLMError
    _unreachable_says_tries: ClassVar[bool] = False
    _no_key_env_advice: ClassVar[str] = (
        "set api_key_env in hammr.toml [{table}] to the variable holding the key"
    )

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
        vision: bool = False,
        vision_limits: VisionLimits | None = None,
        config_table: str = "llm",
        server_label: str = "LLM server",
    ) -> None:
        if mode not in ("chat", "completion"):
            raise ValueError(f"mode must be 'chat' or 'completion', got {mode!r}")
        if server not in ("auto", "vllm", "sglang", "llamacpp", "ollama", "openai", "gemini"):
            raise ValueError(f"unknown server kind {server!r}")
        self.pool = base_url if isinstance(base_url, ReplicaPool) else ReplicaPool(base_url)
        super().__init__(
            self.pool.urls,
            model,
            api_key_env=api_key_env,
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            max_retry_after_s=max_retry_after_s,
        )
        self.base_url = self.pool.urls[0]
        """The first (often the only) replica's URL; every one is in ``base_urls``."""
        self.mode: Mode = mode
        self.server: ServerKind = server
        self.extra_body = dict(extra_body or {})
        self.vision = vision and mode == "chat"  # the model sees images; completion takes text
        self.vision_limits = vision_limits or VisionLimits()
        self.config_table = config_table
        self.server_label = server_label
        self._context: int | None = None

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

    async def context_window(self) -> int | None:
        """The tokens the served model's context holds, asked of the server once: llama.cpp's
        ``/props`` (``n_ctx`` per slot) or vLLM's ``/v1/models`` (``max_model_len``); None
        for other servers or when the server does not say (nothing is then trimmed)."""
        if self._context is None:
            self._context = await self._ask_context() or 0
        return self._context or None

    async def _ask_context(self) -> int | None:
        root = self.base_url.removesuffix("/").removesuffix("/v1")
        if self.server == "llamacpp":
            props = await self._get_json(root + "/props")
            settings = props.get("default_generation_settings") if props else None
            size = settings.get("n_ctx") if isinstance(settings, dict) else None
        elif self.server == "vllm":
            models = await self._get_json(self.base_url + "/models")
            data = models.get("data") if models else None
            first = data[0] if isinstance(data, list) and data else None
            size = first.get("max_model_len") if isinstance(first, dict) else None
        else:
            return None
        return size if isinstance(size, int) and size > 0 else None

    async def count_tokens(self, text: str) -> int | None:
        """``text``'s tokens by llama.cpp's ``/tokenize`` (None elsewhere: estimated)."""
        if self.server != "llamacpp":
            return None
        root = self.base_url.removesuffix("/").removesuffix("/v1")
        reply = await self._get_json(root + "/tokenize", {"content": text})
        tokens = reply.get("tokens") if reply else None
        return len(tokens) if isinstance(tokens, list) else None

    async def _get_json(
        self, url: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """A small JSON request beside the completions (GET, or POST with ``body``); None on
        any failure: these only refine a prompt's size."""
        try:
            async with httpx.AsyncClient(timeout=30.0) as client:
                r = await (client.post(url, json=body) if body else client.get(url))
            data = r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) else None

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
            body["messages"] = [_message_json(m, self.vision) for m in request.messages]
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
            if self.server == "llamacpp" and self.mode == "completion":
                # llama-server's /v1/completions ignores response_format (its chat endpoint
                # honours it) and takes the schema as a top-level json_schema
                body["json_schema"] = request.json_schema
        if request.grammar and self.grammar_support == "gbnf":
            body.update(_grammar_fields(self.server, request.grammar))
        _merge(body, self.extra_body)
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = self.build_body(request)
        client = self._client_for_loop()
        attempt = 0
        tried: set[str] = set()  # replicas unreachable in this try
        lane = current_lane()
        prefer = lane.url.rstrip("/") if lane is not None else None
        while True:
            async with self.pool.acquire(avoid=tried, prefer=prefer) as url:
                sent = body
                if lane is not None and lane.slot is not None and url == prefer:
                    # the question's own slot, whose prefix cache holds its conversation
                    sent = {**body, "id_slot": lane.slot}
                outcome = await self._attempt(client, self.endpoint_at(url), sent, url)
                if isinstance(outcome, httpx.Response):
                    return self._parse(outcome, request, url)
            if outcome.unreachable is not None:
                self.pool.mark_down(url, outcome.unreachable)
                tried.add(url)
                if self.pool.available(avoid=tried):
                    continue  # fail over at once to another replica
            attempt += 1
            if attempt >= self.max_retries:
                break
            tried.clear()
            await asyncio.sleep(self._delay(attempt - 1, outcome.retry_after))
        failure = outcome.message
        if outcome.unreachable is not None and len(self.pool) > 1 and self.pool.all_down():
            failure = (
                f"all {len(self.pool)} {self.server_label}s are unreachable: "
                f"{self.pool.describe_down()} — are they running? {self._config_hint()}"
            )
        raise LLMError(failure)

    def _answered(self, url: str) -> None:
        self.pool.mark_up(url)

    def _request_text(self, url: str, status: int) -> str:
        # a 404 names the model and the endpoint asked; another refusal names neither
        return f" for model {self.model!r} at {self.endpoint_at(url)}" if status == 404 else ""

    def _client_error(
        self, resp: httpx.Response, url: str, body: dict[str, Any] | None = None
    ) -> Exception:
        """A refused grammar, JSON schema or over-long prompt says so; other 4xx replies as
        the base class words them."""
        refusal = _refusal(resp, body or {}) if resp.status_code == 400 else None
        if refusal is None:
            return super()._client_error(resp, url, body)
        msg = server_message(resp)
        where = self._where(url)
        if refusal == "grammar":
            return LLMError(
                f"{where} refused the grammar hammr sent (HTTP 400): {msg} (the grammar is "
                f"sent as server = {self.server!r} takes it; with hammr.toml "
                f"[{self.config_table}] server = 'auto' none is sent)"
            )
        if refusal == "json_schema":
            return LLMError(
                f"{where} refused the JSON schema hammr sent as response_format (HTTP 400): {msg}"
            )
        data = resp.json()
        err = data["error"]
        return LLMError(
            f"{where} refused the request (HTTP 400): the prompt is "
            f"{err.get('n_prompt_tokens', '?')} tokens but each of its slots holds "
            f"{err.get('n_ctx', '?')} — start the server with a larger context (llama.cpp: "
            f"--ctx-size, which --parallel slots share) or shorten the prompt"
        )

    def _parse(self, resp: httpx.Response, request: LLMRequest, url: str) -> LLMResponse:
        data = self._reply_json(resp, url)
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
            # Not an empty reply but none at all (a refusal, tool calls, a reasoning model
            # that spent max_tokens thinking): every system would read it as a format
            # mistake by the model, so it is the server's failure, said as such.
            raise LLMError(no_text_message(self._where(url), self.mode, choice))
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
            cached_prompt_tokens=_cached_prompt_tokens(data),
        )


def no_text_message(where: str, mode: str, choice: dict[str, Any]) -> str:
    """Why a reply ``choice`` whose content (chat) or text (completion) is null holds no text,
    with what the server sent instead when it says (a refusal, tool calls, reasoning)."""
    field = "message.content" if mode == "chat" else "text"
    finish = choice.get("finish_reason")
    text = f"{where} returned no text ({field} is null"
    text += f", finish_reason: {finish})" if isinstance(finish, str) and finish else ")"
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    refusal = message.get("refusal")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(refusal, str) and refusal.strip():
        text += f"; the model refused: {excerpt(refusal)!r}"
    elif message.get("tool_calls"):
        text += "; it sent tool calls, which hammr does not ask for"
    elif isinstance(reasoning, str) and reasoning.strip():
        text += (
            f"; it wrote only reasoning ({len(reasoning)} characters): raise [llm] max_tokens "
            "or turn the server's reasoning off"
        )
    return text


def _count(value: object) -> int | None:
    """``value`` when it is a count of tokens (an int, not a bool, not negative)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _parse_usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    return Usage(
        prompt_tokens=_count(usage.get("prompt_tokens")) or 0,
        completion_tokens=_count(usage.get("completion_tokens")) or 0,
    )


def _cached_prompt_tokens(data: dict[str, Any]) -> int | None:
    """The prompt tokens the server took from its prefix cache: OpenAI's and vLLM's
    ``usage.prompt_tokens_details.cached_tokens``, else llama.cpp's ``timings.cache_n``;
    None when the reply says neither."""
    usage = data.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    if isinstance(details, dict) and (n := _count(details.get("cached_tokens"))) is not None:
        return n
    timings = data.get("timings")
    return _count(timings.get("cache_n")) if isinstance(timings, dict) else None


_GRAMMAR_FIELDS = ("grammar", "ebnf", "structured_outputs", "guided_grammar")


def _refusal(resp: httpx.Response, body: dict[str, Any]) -> str | None:
    """What a 400 refused, when the reply says: "grammar", "json_schema", "context" (a
    llama.cpp ``exceed_context_size_error``), else None."""
    msg = server_message(resp).lower()
    if any(k in body for k in _GRAMMAR_FIELDS) and ("grammar" in msg or "ebnf" in msg):
        return "grammar"
    if "response_format" in body and ("schema" in msg or "response_format" in msg):
        return "json_schema"
    try:
        data = resp.json()
    except ValueError:
        return None
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("type") == "exceed_context_size_error":
        return "context"
    return None
