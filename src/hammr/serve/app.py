"""The HTTP face of `hammr serve`: OpenAI's chat-completions API on Starlette.

- ``GET /v1/models``, ``GET /v1/models/{id}``: the systems this configuration runs.
- ``POST /v1/chat/completions``: the question, answered by the system named as ``model``;
  ``stream: true`` answers in server-sent events as OpenAI's clients read them. The trace
  id is the completion's ``id``, the ``x-hammr-trace-id`` header and ``hammr.trace_id``.
  With ``hammr_steps: true`` (``extra_body`` in the openai client) the stream also carries
  each agent step, as it starts and as it ends, in the ``hammr.step`` field of chunks whose
  ``delta`` is empty: clients that do not look for it see nothing but empty deltas.
- ``GET /health``: up, and how many questions run and wait (no key needed).

A client that disconnects cancels its question (at the model call or tool it is waiting
on); the question is recorded as cancelled. Every refusal is an OpenAI error body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hammr.serve.chat_request import OpenAIError, parse_body, read_chat
from hammr.serve.service import ChatService, Job, Outcome
from hammr.terminal_text import echo
from hammr.web.asgi_server import SECURITY_HEADERS, BearerKeyCheck, HostCheck

TRACE_HEADER = "x-hammr-trace-id"
DEFAULT_MAX_BODY = 32 * 1024 * 1024
_STATUS_OF = {"timeout": 504, "llm_failure": 502, "error": 500}
"""Questions that ended without a fair try: an error status, with what happened."""


def error_response(e: OpenAIError) -> JSONResponse:
    return JSONResponse(e.body(), e.status, headers=_headers(e.headers))


def _headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {k.decode(): v.decode() for k, v in SECURITY_HEADERS}
    out.update(extra or {})
    return out


def usage(o: Outcome) -> dict[str, int]:
    return {
        "prompt_tokens": o.prompt_tokens,
        "completion_tokens": o.completion_tokens,
        "total_tokens": o.prompt_tokens + o.completion_tokens,
    }


def failure(o: Outcome) -> OpenAIError | None:
    """The error the client gets for a question that got no fair try, else None (an
    answer, or an honest 'no answer': an empty message with ``hammr.status`` saying why)."""
    status = _STATUS_OF.get(o.status)
    if status is None:
        return None
    kind = {"timeout": "timeout", "llm_failure": "model_failed"}.get(o.status, "agent_failed")
    return OpenAIError(
        status,
        f"{o.model} gave no answer ({o.status}): {o.error or 'no detail'}; trace {o.id} in run "
        f"{o.run!r}",
        type="server_error",
        code=kind,
        # the question was asked in full and recorded: the OpenAI clients would otherwise ask
        # it again at once, twice, paying for the whole agent run each time
        headers={TRACE_HEADER: o.id, "x-should-retry": "false"},
    )


def completion(job: Job, o: Outcome) -> dict[str, Any]:
    return {
        "id": job.id,
        "object": "chat.completion",
        "created": job.created,
        "model": o.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": o.answer or ""},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage(o),
        "hammr": o.hammr_field(),
    }


def chunk_body(
    job: Job, delta: dict[str, Any], finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": job.id,
        "object": "chat.completion.chunk",
        "created": job.created,
        "model": job.question.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **extra,
    }


def chunk(job: Job, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    return sse(chunk_body(job, delta, finish, **extra))


def sse(body: dict[str, Any] | str) -> bytes:
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past ``limit`` bytes before more is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    parts: list[bytes] = []
    total = 0
    async for part in request.stream():
        total += len(part)
        if total > limit:
            raise _too_large(limit)
        parts.append(part)
    return b"".join(parts)


def _too_large(limit: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"the request body is larger than the limit of {limit / 2**20:g} MiB (--max-body-mb)",
        code="body_too_large",
        headers={"connection": "close"},
    )


async def disconnected(request: Request) -> None:
    """Returns when the client has gone away (read after the whole body)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def build_app(
    service: ChatService,
    *,
    loopback_only: bool = True,
    api_key: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    lifespan: Any = None,
) -> Any:
    """The ASGI application: Starlette routes behind the Host check and the API key;
    ``lifespan``: Starlette's startup/shutdown context."""

    async def models(_request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [_model(m) for m in service.models]}, headers=_headers()
        )

    async def model(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            service.check_model(name)
        except OpenAIError as e:
            return error_response(e)
        return JSONResponse(_model(name), headers=_headers())

    def _model(name: str) -> dict[str, Any]:
        m = service.models[name]
        return {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "hammr",
            "hammr": {"status": m.status, "paper": m.paper, "problems": list(m.problems)},
        }

    async def health(_request: Request) -> Response:
        return JSONResponse(
            {"status": "ok", "running": service.running, "waiting": service.waiting},
            headers=_headers(),
        )

    async def chat(request: Request) -> Response:
        try:
            raw = await read_body(request, max_body)
            question = read_chat(parse_body(raw))
            inputs = await service.prepare(question)
            job = service.admit(question, inputs)
        except OpenAIError as e:
            return error_response(e)
        if question.stream:
            return StreamingResponse(
                _stream(job),
                media_type="text/event-stream",
                headers=_headers({TRACE_HEADER: job.id, "cache-control": "no-cache"}),
            )
        assert job.task is not None
        watcher = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({job.task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # uvicorn's shutdown, past its grace: the question is cancelled and recorded, and
            # the client told so, rather than the server logging a traceback
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            job.cancel("the server shut down")
            with contextlib.suppress(asyncio.CancelledError):
                await job.task
        finally:
            watcher.cancel()
        if not job.task.done():
            job.cancel("the client disconnected")
            with contextlib.suppress(asyncio.CancelledError):
                await job.task
            return Response(status_code=499)  # nobody is listening
        if job.task.cancelled():
            return error_response(
                OpenAIError(503, "the server shut down", type="server_error", code="shutdown")
            )
        outcome = job.task.result()
        wrong = failure(outcome)
        if wrong is not None:
            return error_response(wrong)
        return JSONResponse(completion(job, outcome), headers=_headers({TRACE_HEADER: job.id}))

    async def _stream(job: Job) -> AsyncIterator[bytes]:
        """The answer as OpenAI streams it: the role, step events if asked for, the content,
        the finish, the usage if asked for, [DONE]. A client gone cancels the question."""
        q = job.question
        ended = False
        try:
            yield chunk(job, {"role": "assistant", "content": ""})
            async for event in service.events(job):
                if isinstance(event, Outcome):
                    ended = True
                    wrong = failure(event)
                    if wrong is not None:
                        yield sse(wrong.body())
                        yield sse("[DONE]")
                        return
                    if event.answer:
                        yield chunk(job, {"content": event.answer})
                    yield chunk(job, {}, "stop", hammr=event.hammr_field())
                    if q.include_usage:  # a last chunk with no choices, as OpenAI sends it
                        yield sse({**chunk_body(job, {}), "choices": [], "usage": usage(event)})
                    yield sse("[DONE]")
                    return
                yield chunk(job, {}, hammr={"step": event})
        finally:
            if not ended:
                job.cancel("the client disconnected")

    async def not_found(_request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {
            404: "no such endpoint: hammr serves GET /v1/models and POST /v1/chat/completions",
            405: "method not allowed on this endpoint",
        }.get(status, "the server could not answer")
        return error_response(OpenAIError(status, message, code=f"http_{status}"))

    async def unexpected(_request: Request, exc: Exception) -> Response:
        echo(f"hammr serve: internal error: {type(exc).__name__}: {exc}", err=True)
        return error_response(
            OpenAIError(500, f"internal error: {type(exc).__name__}", type="server_error")
        )

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{name:path}", model, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: not_found, Exception: unexpected},
        lifespan=lifespan,
    )
    guarded: Any = app
    if api_key:
        guarded = BearerKeyCheck(
            guarded,
            api_key,
            refusal=lambda why: OpenAIError(
                401,
                f"{why}: send the server's key as 'Authorization: Bearer KEY'",
                type="authentication_error",
                code="invalid_api_key",
            ).body(),
            open_paths=frozenset({"/health"}),
        )
    return HostCheck(
        guarded,
        loopback_only=loopback_only,
        refusal=lambda: OpenAIError(403, "forbidden host", code="forbidden_host").body(),
    )


__all__ = ["TRACE_HEADER", "build_app"]
