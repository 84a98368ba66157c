"""Image and text embeddings from a served model behind an OpenAI-compatible ``/v1/embeddings``.

Serves the 'similarity' capability (``embed_images`` / ``embed_texts``) and, if wanted, the
'embed' capability (``embed_queries`` / ``embed_passages``, both the same as ``embed_texts``)
with a multimodal embedding model served by vLLM (``vllm serve TIGER-Lab/VLM2Vec-Full
--task embed``; also DSE-Qwen2, CLIP, ...), or any server that speaks the same protocol.

The requests follow vLLM's embeddings API (docs.vllm.ai, "OpenAI Chat Embedding Client For
Multimodal" and the Embeddings API of the OpenAI-compatible server):

- texts, ``batch_size`` at a time: ``{"model": M, "input": [text, ...], "encoding_format":
  "float"}`` (each text cut to :data:`hammr.text_limits.MAX_EMBED_CHARS` characters and
  prefixed with ``text_prompt``, default none);
- one image per request, chat style: ``{"model": M, "messages": [{"role": "user", "content":
  [{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}, {"type": "text",
  "text": image_prompt}]}], "encoding_format": "float"}``;
- images with a text, jointly (:meth:`OpenAIEmbedder.embed_joint`, an experience bank's
  viewpoint holding both: MuSEAgent embeds a state's images and text in one pass), one
  request per item, chat style: the item's images as ``image_url`` parts, then its text as
  the ``text`` part;
- the reply ``{"data": [{"index": i, "embedding": [...]}, ...]}``, put back in ``index`` order.

Images whose longer side is above ``max_image_side`` are scaled down to it first (0: never).
At most ``concurrency`` requests are in flight at once. Failed tries (HTTP 429 or 5xx, a
refused or dropped connection, a timeout) are tried again with exponential backoff, honouring
``Retry-After``; ``max_retries`` is the number of tries in all. A failure, or a reply with the
wrong number of rows, rows of different sizes, or values that are not finite numbers, raises
:class:`EmbeddingError` (a :class:`~hammr.tools.base.ToolError`, so an agent sees it as an
observation) naming the server. Rows come back L2-normalised, float32.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import httpx
import numpy as np
from PIL import Image as PILImage

from hammr.backends.http_client import OpenAIStyleClient, PerLoopSemaphore, gather_all
from hammr.backends.http_replies import excerpt
from hammr.backends.llm.base import ImagePart
from hammr.text_limits import clip_for_embedding
from hammr.tools.base import ToolError
from hammr.values import Image

DEFAULT_IMAGE_PROMPT = "Represent the given image."
MAX_RETRY_AFTER_S = 30.0


class EmbeddingError(ToolError):
    """The embedding server failed, could not be reached, or sent rows that cannot be used."""


def send_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The size an image of ``width`` x ``height`` is sent at: its longer side at most
    ``max_side`` (0: unchanged), the aspect ratio kept."""
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


class OpenAIEmbedder(OpenAIStyleClient):
    """Image and text embeddings from an OpenAI-compatible ``/embeddings`` endpoint (see the
    module doc for the requests sent)."""

    error_type: ClassVar[type[Exception]] = EmbeddingError
    server_label = "embedding server"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 60,
        max_retries: int = 3,
        concurrency: int = 4,
        image_prompt: str = DEFAULT_IMAGE_PROMPT,
        text_prompt: str = "",
        max_image_side: int = 1024,
        batch_size: int = 32,
        backoff_s: float = 0.5,
    ) -> None:
        base = base_url.strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not model.strip():
            raise ValueError("model must name the served model")
        if max_retries < 1 or concurrency < 1 or batch_size < 1:
            raise ValueError(
                "max_retries, concurrency and batch_size must be at least 1, got "
                f"{max_retries}, {concurrency} and {batch_size}"
            )
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be above 0, got {timeout_s}")
        if max_image_side < 0:
            raise ValueError(f"max_image_side must be 0 (no limit) or more, got {max_image_side}")
        if backoff_s < 0:
            raise ValueError(f"backoff_s must be 0 or more, got {backoff_s}")
        super().__init__(
            [base],
            model,
            api_key_env=api_key_env or None,
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            max_retry_after_s=MAX_RETRY_AFTER_S,
        )
        self.base_url = base
        self.endpoint = base + "/embeddings"
        self.concurrency = int(concurrency)
        self.image_prompt = image_prompt
        self.text_prompt = text_prompt
        self.max_image_side = int(max_image_side)
        self.batch_size = int(batch_size)
        self.config_table = "tools.similarity"
        """The hammr.toml table named in connection errors (the factory sets it)."""
        # What the rows depend on besides the pixels or text: the model and the endpoint that
        # serves it, and what is sent with each input. Every cache of embeddings (the router's
        # labelled questions, the AVIS image index, the experience bank) keys by it, through
        # hammr.backends.capabilities.embedder_name. The text prompt is named only when set,
        # so caches made before it was part of the key stay valid.
        self.cache_key = (
            f"openai-embeddings base_url={self.base_url} model={model} "
            f"image_prompt={image_prompt!r} max_image_side={self.max_image_side}"
            + (f" text_prompt={text_prompt!r}" if text_prompt else "")
        )
        self._limit = PerLoopSemaphore()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r})"

    # -- the capability methods ------------------------------------------------------------

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        """One L2-normalised row per image, in order (one request per image)."""
        if not images:
            return np.zeros((0, 0), dtype=np.float32)
        rows = await gather_all([self._embed_image(img) for img in images])
        return _stack(rows, self.endpoint)

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised row per text, in order (``batch_size`` texts per request)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        chunks = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        parts = await gather_all([self._embed_chunk(c) for c in chunks])
        return _stack([row for part in parts for row in part], self.endpoint)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        """The 'embed' capability: the same as :meth:`embed_texts`."""
        return await self.embed_texts(texts)

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        """The 'embed' capability: the same as :meth:`embed_texts`."""
        return await self.embed_texts(texts)

    async def embed_joint(self, items: list[tuple[str, list[Image]]]) -> np.ndarray:
        """One L2-normalised row per (text, images) item, both in one request each (see the
        module docstring), in order."""
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        rows = await gather_all([self._embed_joint(text, images) for text, images in items])
        return _stack(rows, self.endpoint)

    def _client_error(
        self, resp: httpx.Response, url: str, body: dict[str, Any] | None = None
    ) -> Exception:
        """A refused image request also asks whether the served model takes images."""
        error = super()._client_error(resp, url, body)
        if resp.status_code == 400 and body is not None and "messages" in body:
            return EmbeddingError(
                f"{error} (an image is sent as a chat message with an image_url part, as "
                "vLLM's multimodal embedding models take it; does the served model take "
                "images?)"
            )
        return error

    # -- requests --------------------------------------------------------------------------

    def image_body(self, image: Image) -> dict[str, Any]:
        """The request body for one image (downscaled as ``max_image_side`` says)."""
        return self.joint_body(self.image_prompt, [image], clip=False)

    def joint_body(
        self, text: str, images: Sequence[Image], *, clip: bool = True
    ) -> dict[str, Any]:
        """The request body for images and a text embedded together (each image downscaled as
        ``max_image_side`` says; the text cut as every embedded text is)."""
        content: list[dict[str, Any]] = []
        for image in images:
            size = send_size(image.width, image.height, self.max_image_side)
            if size != (image.width, image.height):
                image = Image(image.pixels.resize(size, PILImage.Resampling.LANCZOS))
            content.append({"type": "image_url", "image_url": {"url": ImagePart(image).data_url()}})
        said = clip_for_embedding([self.text_prompt + text])[0] if clip else text
        content.append({"type": "text", "text": said})
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "encoding_format": "float",
        }

    def text_body(self, texts: Sequence[str]) -> dict[str, Any]:
        """The request body for a batch of texts."""
        return {
            "model": self.model,
            "input": [self.text_prompt + t for t in clip_for_embedding(list(texts))],
            "encoding_format": "float",
        }

    async def _embed_image(self, image: Image) -> np.ndarray:
        async with self._limit.current(self.concurrency):
            body = await asyncio.to_thread(self.image_body, image)
            return (await self._post(body, 1))[0]

    async def _embed_joint(self, text: str, images: list[Image]) -> np.ndarray:
        async with self._limit.current(self.concurrency):
            body = await asyncio.to_thread(self.joint_body, text, images)
            return (await self._post(body, 1))[0]

    async def _embed_chunk(self, texts: list[str]) -> list[np.ndarray]:
        async with self._limit.current(self.concurrency):
            return await self._post(self.text_body(texts), len(texts))

    async def _post(self, body: dict[str, Any], n: int) -> list[np.ndarray]:
        """Send ``body`` (retrying as the module doc says) and return its ``n`` rows."""
        client = self._client_for_loop()
        failure = ""
        retry_after: float | None = None
        for attempt in range(self.max_retries):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1, retry_after))
            outcome = await self._attempt(client, self.endpoint, body, self.endpoint)
            if isinstance(outcome, httpx.Response):
                return self._rows(outcome, n)
            failure, retry_after = outcome.message, outcome.retry_after
        raise EmbeddingError(failure)

    def _rows(self, resp: httpx.Response, n: int) -> list[np.ndarray]:
        """The rows of a reply, in ``index`` order, checked: ``n`` of them, flat lists of
        numbers (:func:`_stack` checks their sizes and values)."""
        where = self._where(self.endpoint)
        data = self._reply_json(resp, self.endpoint)
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise EmbeddingError(
                f"{where} sent a reply without a 'data' list: {excerpt(resp.text)!r}"
            )
        if len(items) != n:
            raise EmbeddingError(
                f"{where} sent {len(items)} embeddings for {n} {'input' if n == 1 else 'inputs'}"
            )
        indices = [
            it.get("index", pos) if isinstance(it, dict) else pos for pos, it in enumerate(items)
        ]
        if sorted(i for i in indices if isinstance(i, int)) != list(range(n)):
            raise EmbeddingError(
                f"{where} sent embeddings with indices {indices}, expected 0 to {n - 1}"
            )
        out: list[np.ndarray] = [np.zeros(0)] * n
        for index, item in zip(indices, items, strict=True):
            values = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(values, list) or not values:
                raise EmbeddingError(
                    f"{where} sent embedding {index} that is not a list of numbers "
                    "(the request asked for encoding_format float)"
                )
            try:
                row = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError):
                raise EmbeddingError(
                    f"{where} sent embedding {index} that is not a list of numbers"
                ) from None
            if row.ndim != 1:
                raise EmbeddingError(f"{where} sent embedding {index} that is not flat")
            out[index] = row
        return out


def _stack(rows: list[np.ndarray], endpoint: str) -> np.ndarray:
    """The rows as one L2-normalised float32 matrix, checked: one size, finite, not zero."""
    where = f"the embedding server at {endpoint}"
    sizes = sorted({row.shape[0] for row in rows})
    if len(sizes) > 1:
        raise EmbeddingError(f"{where} sent embeddings of different sizes: {sizes}")
    matrix = np.stack(rows)
    bad = ~np.isfinite(matrix).all(axis=1)
    if bad.any():
        raise EmbeddingError(
            f"{where} sent embeddings with values that are not finite (NaN or infinity) "
            f"for input {int(np.argmax(bad))}"
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        raise EmbeddingError(
            f"{where} sent an all-zero embedding for input {int(np.argmax(norms[:, 0] == 0))}"
        )
    out: np.ndarray = (matrix / norms).astype(np.float32)
    return out


OPTIONS: dict[str, type] = {
    "base_url": str,
    "model": str,
    "api_key_env": str,
    "timeout_s": float,
    "max_retries": int,
    "concurrency": int,
    "image_prompt": str,
    "text_prompt": str,
    "max_image_side": int,
    "batch_size": int,
}


def from_config(options: dict[str, Any]) -> OpenAIEmbedder:
    """The ``[tools.similarity] backend = "openai"`` factory."""
    return _build("tools.similarity", options)


def embed_from_config(options: dict[str, Any]) -> OpenAIEmbedder:
    """The ``[tools.embed] backend = "openai"`` factory (queries and passages alike)."""
    return _build("tools.embed", options)


def _build(where: str, options: dict[str, Any]) -> OpenAIEmbedder:
    from hammr.backends.registry import parse_options

    opts = parse_options(where, options, OPTIONS)
    for key, example in (
        ("base_url", "http://127.0.0.1:8000/v1"),
        ("model", "TIGER-Lab/VLM2Vec-Full"),
    ):
        if not str(opts.get(key, "")).strip():
            raise ValueError(
                f"{where}.{key} is required with backend = 'openai' (the served embedding "
                f"model's {key.replace('_', ' ')}, e.g. {example!r})"
            )
    try:
        embedder = OpenAIEmbedder(**opts)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    embedder.config_table = where
    return embedder
