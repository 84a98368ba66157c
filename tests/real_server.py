"""Real OpenAI-compatible servers for the tests: llama.cpp's own C++ HTTP server, started
through xllamacpp in a child process on 127.0.0.1 from the shipped SmolLM2 GGUF
(:class:`hammr.backends.llm.local_server.LocalLlamaServer`).

- ``real_llm_server`` (session): one chat/completion server, 2 slots of 4096 tokens;
- ``real_embedding_server`` (session): one ``/v1/embeddings`` server (mean pooling);
- ``spare_llm_server`` (per test): a server of the test's own, for tests that kill it.

A test that asks for one is skipped, with the reason, when xllamacpp or the GGUF is missing.
The fake server (fake_openai_server.py) stays for scripted replies and faults.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.backends.pool import ReplicaPool
from hammr.tools.base import tool
from hammr.values import Image
from patience import HANG_S

MODEL = "smollm2"
"""The name the servers report for their model (their alias)."""
STARTUP_S = HANG_S
"""How long a server may take to answer /v1/models (a safety net: a loaded 2-core machine
is slow)."""
CLIENT_TIMEOUT_S = 300.0
"""A request's time limit: grammar-constrained requests on a busy CPU can take minutes."""


# -- a tool and worked example a tiny model copies (agent tests on a real server) --


@tool
def ImageSize(image: Image) -> str:
    """The image's width and height in pixels, as WIDTHxHEIGHT."""
    return f"{image.width}x{image.height}"


SIZE_EXAMPLE = """\
Question: How wide is the image?
Variables:
- image: image 640x480
[Thought]: I measure the image.
[Act]: size = ImageSize(image)
[Observe]: 640x480 (stored in 'size')
[Thought]: The image is 640 pixels wide.
[Finish]: 640"""


def embedded_model_missing() -> str | None:
    """Why llama.cpp cannot run the shipped model here (None when it can); conftest's
    ``needs_embedded_model`` reads it too."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp)"
    from hammr.backends.llm.base import LLMError
    from hammr.backends.llm.embedded import default_model_path

    try:
        default_model_path()
    except LLMError as e:
        return f"the embedded model is missing: {e}"
    return None


_MISSING = embedded_model_missing()
SKIP_REASON = None if _MISSING is None else f"no real server: {_MISSING}"


def _server(**kw: Any) -> LocalLlamaServer:
    if SKIP_REASON is not None:
        pytest.skip(SKIP_REASON)
    return LocalLlamaServer(alias=MODEL, startup_timeout_s=STARTUP_S, **kw)


@pytest.fixture(scope="session")
def real_llm_server() -> Iterator[LocalLlamaServer]:
    """llama.cpp's server for chat and completion requests, shared by the session."""
    with _server(n_parallel=2, per_slot_ctx=4096) as server:
        yield server


@pytest.fixture(scope="session")
def real_embedding_server() -> Iterator[LocalLlamaServer]:
    """llama.cpp's server for ``/v1/embeddings`` (SmolLM2, mean pooling: 576 numbers a row)."""
    with _server(n_parallel=2, per_slot_ctx=1024, n_threads=1, embedding=True) as server:
        yield server


@pytest.fixture
def spare_llm_server() -> Iterator[LocalLlamaServer]:
    """A chat server of the test's own, which it may kill; stopped after the test."""
    with _server(n_parallel=2, per_slot_ctx=2048, n_threads=1) as server:
        yield server


def real_client(urls: str | Sequence[str] | ReplicaPool, **kw: Any) -> OpenAICompatLLM:
    """An LLM client of the real server(s) at ``urls``: no API key, one try, generous time."""
    kw.setdefault("api_key_env", None)
    kw.setdefault("timeout_s", CLIENT_TIMEOUT_S)
    kw.setdefault("max_retries", 1)
    return OpenAICompatLLM(urls, MODEL, **kw)
