"""The image index as AVIS's two image-search actions: built once (hashes, embeddings with
the 'similarity' backend when one is configured), searched with the object in focus."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hammr.avis.image_index import ImageHit, ImageIndex, render_hits
from hammr.tools.base import ToolContext
from hammr.values import Image


def _hits_json(hits: list[ImageHit]) -> list[dict[str, Any]]:
    rows = [{k: v for k, v in asdict(h).items() if v is not None} for h in hits]
    return [{**r, "image_path": str(r["image_path"])} for r in rows]


class IndexSearch:
    """:class:`hammr.avis.actions.ImageSearch` over an :class:`ImageIndex` (or a corpus
    path, indexed on first use or in :meth:`prepare`)."""

    def __init__(self, source: ImageIndex | str | Path, embedder: Any = None) -> None:
        self._index = source if isinstance(source, ImageIndex) else None
        self._source = source
        self.embedder = embedder
        self._lock = asyncio.Lock()

    async def prepare(self) -> ImageIndex:
        async with self._lock:
            if self._index is None:
                assert not isinstance(self._source, ImageIndex)
                self._index = await ImageIndex.build(self._source, self.embedder)
            elif self.embedder is not None and self._index.embedder is None:
                await self._index.prepare(self.embedder)
            return self._index

    def summary(self) -> str:
        return self._index.summary() if self._index is not None else f"{self._source} (not built)"

    async def search_identical(
        self, image: Image, ctx: ToolContext, k: int
    ) -> tuple[str, dict[str, Any]]:
        index = await self.prepare()
        hits = await index.identical(image, k)
        text = render_hits(hits, empty="no identical images found")
        return text, {"hits": _hits_json(hits), "index": index.summary()}

    async def search_similar(
        self, image: Image, ctx: ToolContext, k: int
    ) -> tuple[str, dict[str, Any]]:
        index = await self.prepare()
        result = await index.similar(image, k)
        out = {"hits": _hits_json(result.hits), "ranked_by": result.ranked_by}
        return result.render(), {**out, "index": index.summary()}
