"""A persistent response cache in front of any LLM, keyed by the whole request."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from hammr.backends.llm.base import (
    LLM,
    GrammarSupport,
    ImagePart,
    LLMRequest,
    LLMResponse,
    Usage,
    VisionLimits,
    sees_images,
    vision_limits_of,
)
from hammr.context_fit import context_window, count_tokens
from hammr.sqlite_file import SqliteFile
from hammr.values import Image

_KEY_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    model TEXT NOT NULL,
    finish_reason TEXT,
    created REAL NOT NULL
)
"""


def _encode(o: object) -> Any:
    if isinstance(o, ImagePart):
        return {"image": o.image.content_hash()}
    if isinstance(o, Image):
        return {"image": o.content_hash()}
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    raise TypeError(f"cannot key a cached request on a {type(o).__name__}")


def request_key(model: str, request: LLMRequest) -> str:
    """sha256 of a canonical JSON of the model name and every field of the request.

    Fields are read generically, so a field added to :class:`LLMRequest` later is part of
    the key without touching this function. Images count by their pixel hash.
    """
    payload = {"v": _KEY_VERSION, "model": model, "request": _encode(request)}
    text = json.dumps(
        payload, default=_encode, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode()).hexdigest()


class CacheError(Exception):
    """The cache path is not an LLM response cache (one line naming it and why)."""


class ResponseFile(SqliteFile):
    """The cache's SQLite file, opened like every SQLite file of hammr's
    (:class:`~hammr.sqlite_file.SqliteFile`: WAL, refused when it is another kind of file)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            _SCHEMA,
            error=CacheError,
            what="LLM response cache",
            hint="; set llm.cache_path to a new file or turn llm.cache off",
        )

    def get(self, key: str) -> tuple[Any, ...] | None:
        rows = self._query(
            "SELECT text, prompt_tokens, completion_tokens, model, finish_reason "
            "FROM responses WHERE key = ?",
            (key,),
        )
        return tuple(rows[0]) if rows else None

    def put(self, row: tuple[Any, ...]) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", row)


class CachedLLM:
    """Wraps an LLM; identical requests are answered from an SQLite file (``cached=True``).

    Only successful responses are stored. Concurrent identical requests wait for the first
    one, so the inner model is called once.
    """

    def __init__(self, inner: LLM, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self._file = ResponseFile(self.path)
        self._inflight: dict[str, tuple[asyncio.Lock, int]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def grammar_support(self) -> GrammarSupport:
        return self.inner.grammar_support

    @property
    def json_schema_support(self) -> bool:
        """Whether the wrapped model's server takes a JSON schema (the cache keys on it)."""
        return bool(getattr(self.inner, "json_schema_support", False))

    @property
    def vision(self) -> bool:
        """Whether the wrapped model sees images (the cache keys on their pixels)."""
        return sees_images(self.inner)

    @property
    def vision_limits(self) -> VisionLimits:
        return vision_limits_of(self.inner)

    async def context_window(self) -> int | None:
        """The inner model's context (see :mod:`hammr.context_fit`)."""
        return await context_window(self.inner)

    async def count_tokens(self, text: str) -> int:
        """``text``'s tokens by the inner model's tokenizer, else estimated."""
        return await count_tokens(self.inner, text)

    async def prepare(self) -> None:
        """The wrapped model's one-time setup (see :func:`hammr.eval.runner.prepare`)."""
        prepare = getattr(self.inner, "prepare", None)
        if prepare is not None:
            await prepare()

    def _get(self, key: str) -> LLMResponse | None:
        row = self._file.get(key)
        if row is None:
            return None
        text, pt, ct, model, finish = row
        return LLMResponse(
            text=text,
            usage=Usage(prompt_tokens=pt, completion_tokens=ct),
            model=model,
            cached=True,
            finish_reason=finish,
        )

    def _put(self, key: str, resp: LLMResponse) -> None:
        self._file.put(
            (
                key,
                resp.text,
                resp.usage.prompt_tokens,
                resp.usage.completion_tokens,
                resp.model,
                resp.finish_reason,
                time.time(),
            )
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        key = request_key(self.inner.name, request)
        hit = await asyncio.to_thread(self._get, key)
        if hit is not None:
            self.hits += 1
            return hit
        lock, users = self._inflight.get(key) or (asyncio.Lock(), 0)
        self._inflight[key] = (lock, users + 1)
        try:
            async with lock:
                hit = await asyncio.to_thread(self._get, key)
                if hit is not None:
                    self.hits += 1
                    return hit
                self.misses += 1
                resp = await self.inner.complete(request)
                await asyncio.to_thread(self._put, key, resp)
                return resp
        finally:
            lock, users = self._inflight[key]
            if users <= 1:
                del self._inflight[key]
            else:
                self._inflight[key] = (lock, users - 1)

    def close(self) -> None:
        self._file.close()

    async def aclose(self) -> None:
        self.close()
        inner_close = getattr(self.inner, "aclose", None)
        if inner_close is not None:
            await inner_close()

    async def __aenter__(self) -> CachedLLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
