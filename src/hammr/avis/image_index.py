"""A local image index for AVIS's ``identical_image_search`` and ``image_search`` actions.

AVIS (Hu et al. 2023) looks an image (or a selected object crop) up in an image search
engine and reads back the titles of the pages that show identical or similar images, as
``Retrievals: [high confidence: <title> (score=95.3), <title> (score=55.3), ...]``. Offline we
search a corpus the user supplies instead (:func:`load_corpus`):

* a **folder** of images (searched recursively, hidden files and folders left out): the
  title is the file's stem with ``_`` and ``-`` read as spaces; the caption comes from a
  sidecar ``NAME.txt`` next to ``NAME.jpg`` when there is one;
* a **JSONL** file (``.jsonl`` / ``.ndjson``), one object per line: ``image`` (a path
  relative to the JSONL file's folder, or absolute), ``title``, optional ``caption`` (or
  ``summary``) and ``url``.

Missing, corrupt or oversized images (hammr's :meth:`hammr.values.Image.open` limits) and
unreadable JSONL lines are skipped and listed in :attr:`Corpus.skipped` with their reasons;
a source that does not exist, or that has no usable image, is a :class:`CorpusError`.

**Identical search** (:meth:`ImageIndex.identical`) compares 64-bit perceptual hashes
(``imagehash.phash``): an image is *identical* when the Hamming distance is at most
``hash_threshold`` (default 8), which survives resizing and JPEG re-encoding. Its score is
``100 * (1 - distance / 64)``. When a similarity embedder is in use, an identical hit must
also have cosine similarity >= ``cosine_threshold`` (default 0.9) and its score is the mean
of the two: ``50 * (1 - distance / 64) + 50 * cosine``.

**Similar search** (:meth:`ImageIndex.similar`) ranks the corpus by cosine similarity of
the embedder's image embeddings (score ``100 * cosine``, clipped at 0). The corpus is
embedded once, in batches, and the rows are cached on disk per embedder, keyed by each
image's content hash (so a second build, or a grown corpus, embeds only what is new).
Without an embedder it falls back to ranking by perceptual-hash distance (score as for
identical search) and says so (:attr:`SimilarResult.ranked_by`, :attr:`SimilarResult.note`).

A hit is **high confidence** when its score is at least :data:`HIGH_CONFIDENCE_SCORE` (80).

The embedding cache lives in ``$XDG_CACHE_HOME/hammr/avis/`` (default
``~/.cache/hammr/avis/``), one ``.npz`` file per embedder, named as every cache of
embeddings names it (:func:`hammr.backends.capabilities.embedder_name`: its ``cache_key``
when it has a string one, else its ``repr``); an embedder whose ``repr`` is Python's default
(``<... object at 0x...>``, which names no model) is never cached on disk. Name your
embedder so that two different models never share a name.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import imagehash
import numpy as np

from hammr.backends.capabilities import embedder_name
from hammr.input_file import read_input_bytes, read_input_text
from hammr.output_file import OutputError, write_output
from hammr.values import DEFAULT_MAX_PIXELS, Image, ImageLoadError

HASH_BITS = 64
"""Bits of the perceptual hash (``imagehash.phash`` with hash_size 8)."""

DEFAULT_HASH_THRESHOLD = 8
"""At most this many differing hash bits count as *identical*."""

DEFAULT_COSINE_THRESHOLD = 0.9
"""With an embedder, identical hits also need at least this cosine similarity."""

HIGH_CONFIDENCE_SCORE = 80.0
"""A hit scoring at least this (0-100) is reported as ``high confidence``."""

DEFAULT_BATCH_SIZE = 32

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"})
JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})

NO_EMBEDDER_NOTE = "ranked by perceptual hash: no similarity backend"

_CAPTION_CHARS = 100


class CorpusError(ValueError):
    """A corpus source is missing, of an unknown kind, or has no usable image."""


class ImageIndexError(RuntimeError):
    """The index cannot do what was asked (a bad embedder output, a corpus file changed)."""


@runtime_checkable
class ImageEmbedder(Protocol):
    """What the index needs of the 'similarity' backend: one embedding row per image."""

    async def embed_images(self, images: list[Image]) -> np.ndarray: ...


# -- the corpus -------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusEntry:
    """One usable corpus image, with what the index needs of it (not its pixels)."""

    title: str
    caption: str | None
    url: str | None
    image_path: Path
    content_hash: str
    """:meth:`hammr.values.Image.content_hash` of the decoded pixels."""
    phash: int
    """The 64-bit perceptual hash as an integer."""
    width: int
    height: int


@dataclass
class Corpus:
    """The images a search runs over, and what was left out (``(item, reason)`` pairs)."""

    source: Path
    kind: Literal["folder", "jsonl"]
    entries: list[CorpusEntry]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hammr/avis`` (``~/.cache/hammr/avis`` when unset), as for hammr's
    LLM cache (:func:`hammr.factory.default_cache_path`)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "hammr" / "avis"


def title_from_stem(stem: str) -> str:
    """``eiffel_tower-at-night`` -> ``eiffel tower at night``."""
    return " ".join(re.sub(r"[_-]+", " ", stem).split())


def perceptual_hash(image: Image) -> int:
    """The 64-bit ``imagehash.phash`` of an image, as an integer."""
    bits = imagehash.phash(image.pixels).hash.flatten()
    value = 0
    for bit in bits:
        value = (value << 1) | int(bool(bit))
    return value


def hamming(a: int, b: int) -> int:
    """The number of differing bits between two hashes."""
    return (a ^ b).bit_count()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _entry(
    path: Path, title: str, caption: str | None, url: str | None, max_pixels: int
) -> CorpusEntry:
    """Load one image (raising ImageLoadError) and describe it."""
    img = Image.open(path, max_pixels=max_pixels)
    return CorpusEntry(
        title=title,
        caption=caption,
        url=url,
        image_path=path,
        content_hash=img.content_hash(),
        phash=perceptual_hash(img),
        width=img.width,
        height=img.height,
    )


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _sidecar_caption(image_path: Path) -> str | None:
    side = image_path.with_suffix(".txt")
    if not side.is_file():
        return None
    try:
        text = read_input_text(side, errors="replace")
    except OSError:
        return None
    return _one_line(text) or None


def _load_folder(root: Path, max_pixels: int) -> Corpus:
    entries: list[CorpusEntry] = []
    skipped: list[tuple[str, str]] = []
    paths = sorted(
        p
        for p in root.rglob("*")
        if p.suffix.lower() in IMAGE_SUFFIXES and not _hidden(p, root) and not p.is_dir()
    )
    for path in paths:
        rel = str(path.relative_to(root))
        try:
            entries.append(
                _entry(
                    path,
                    title_from_stem(path.stem) or path.name,
                    _sidecar_caption(path),
                    None,
                    max_pixels,
                )
            )
        except ImageLoadError as e:
            skipped.append((rel, str(e)))
    return Corpus(root, "folder", entries, skipped)


def _optional_text(obj: dict[str, object], *keys: str) -> str | None:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value)
    return None


def _load_jsonl(path: Path, max_pixels: int) -> Corpus:
    try:
        raw = read_input_bytes(path)
    except OSError as e:
        raise CorpusError(f"cannot read the corpus file {path}: {e.strerror or e}") from None
    base = path.parent
    entries: list[CorpusEntry] = []
    skipped: list[tuple[str, str]] = []
    for lineno, line_bytes in enumerate(raw.splitlines(), start=1):
        where = f"{path.name}:{lineno}"
        try:
            line = line_bytes.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            skipped.append((where, "not UTF-8 text"))
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            skipped.append((where, f"not valid JSON ({e.msg} at column {e.colno})"))
            continue
        if not isinstance(obj, dict):
            skipped.append((where, f"expected a JSON object, got {type(obj).__name__}"))
            continue
        image = obj.get("image")
        if not isinstance(image, str) or not image.strip():
            skipped.append((where, "no 'image' path"))
            continue
        title = _optional_text(obj, "title")
        if title is None:
            skipped.append((where, "no 'title'"))
            continue
        image_path = Path(image).expanduser()
        if not image_path.is_absolute():
            image_path = base / image_path
        try:
            entries.append(
                _entry(
                    image_path,
                    title,
                    _optional_text(obj, "caption", "summary"),
                    _optional_text(obj, "url"),
                    max_pixels,
                )
            )
        except ImageLoadError as e:
            skipped.append((where, str(e)))
    return Corpus(path, "jsonl", entries, skipped)


def load_corpus(source: str | Path, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Corpus:
    """Read a corpus from a folder of images or a JSONL file (see the module doc).

    Every image is decoded once here (for its content and perceptual hashes); this blocks,
    so async code should call it through ``asyncio.to_thread`` (as
    :meth:`ImageIndex.build` does when given a path).

    Raises:
        CorpusError: the source does not exist, is neither a folder nor a ``.jsonl`` file,
            or has no usable image (the message names the source and the first reasons).
    """
    path = Path(source).expanduser()
    if not path.exists():
        raise CorpusError(f"image corpus not found: {path}")
    if path.is_dir():
        corpus = _load_folder(path, max_pixels)
    elif path.suffix.lower() in JSONL_SUFFIXES:
        corpus = _load_jsonl(path, max_pixels)
    else:
        raise CorpusError(
            f"image corpus {path}: expected a folder of images or a .jsonl file "
            "(one object per line with 'image' and 'title')"
        )
    if not corpus.entries:
        what = "image files" if corpus.kind == "folder" else "entries"
        detail = f"; skipped {_skipped_text(corpus.skipped)}" if corpus.skipped else ""
        raise CorpusError(f"image corpus {path} has no usable images (no readable {what}){detail}")
    return corpus


def _skipped_text(skipped: Sequence[tuple[str, str]], first: int = 3) -> str:
    parts = [f"{item}: {reason}" for item, reason in skipped[:first]]
    if len(skipped) > first:
        parts.append(f"and {len(skipped) - first} more")
    return "; ".join(parts)


# -- hits -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageHit:
    """One retrieved corpus image.

    ``score`` is 0-100 (see the module doc for how each search computes it); ``distance``
    is the Hamming distance between the perceptual hashes (0-64), set by every search of
    :class:`ImageIndex` (``None`` is left for hits made elsewhere); ``high_confidence`` is
    ``score >= HIGH_CONFIDENCE_SCORE`` (80).
    """

    title: str
    caption: str | None
    url: str | None
    image_path: Path
    score: float
    distance: int | None
    high_confidence: bool


def _hit(entry: CorpusEntry, score: float, distance: int | None) -> ImageHit:
    score = round(min(100.0, max(0.0, score)), 4)
    return ImageHit(
        title=entry.title,
        caption=entry.caption,
        url=entry.url,
        image_path=entry.image_path,
        score=score,
        distance=distance,
        high_confidence=score >= HIGH_CONFIDENCE_SCORE,
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def render_hit(hit: ImageHit) -> str:
    """``high confidence: Title: caption (score=95.3)``; captions are shortened."""
    text = _one_line(hit.title)
    if hit.caption:
        text += f": {_short(_one_line(hit.caption), _CAPTION_CHARS)}"
    text += f" (score={hit.score:.1f})"
    return f"high confidence: {text}" if hit.high_confidence else text


def render_hits(
    hits: Sequence[ImageHit],
    *,
    heading: str = "Retrievals",
    empty: str = "no matching images found",
) -> str:
    """The paper's text: ``Retrievals: [high confidence: Title (score=95.3), Other
    (score=55.3)]``, or ``Retrievals: no matching images found`` when there is none."""
    if not hits:
        return f"{heading}: {empty}"
    return f"{heading}: [" + ", ".join(render_hit(h) for h in hits) + "]"


@dataclass(frozen=True)
class SimilarResult:
    """The hits of a similar-image search and how they were ranked.

    ``ranked_by`` is ``"embedding"`` (cosine of the similarity backend's embeddings) or
    ``"phash"`` (perceptual-hash distance, when no embedder is available); ``note`` is
    :data:`NO_EMBEDDER_NOTE` in the second case, for the caller to pass on to the agent.
    """

    hits: list[ImageHit]
    ranked_by: Literal["embedding", "phash"]
    note: str | None = None

    @property
    def fallback(self) -> bool:
        """True when ranked by perceptual hash for want of a similarity backend."""
        return self.ranked_by == "phash"

    def render(self, *, heading: str = "Retrievals") -> str:
        """:func:`render_hits`, with the note in the heading when there is one."""
        head = f"{heading} ({self.note})" if self.note else heading
        return render_hits(self.hits, heading=head, empty="no similar images found")


@dataclass(frozen=True)
class PrepareReport:
    """What :meth:`ImageIndex.prepare` did: distinct images embedded now and corpus rows read
    from the disk cache (both 0 when the index already held the rows); the cache file, if
    one is used."""

    embedder: str
    embedded: int
    from_cache: int
    cache_file: Path | None


# -- the embedding cache ----------------------------------------------------------------


def _cache_file(cache_dir: Path, name: str) -> Path:
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]
    return cache_dir / f"embeddings-{digest}.npz"


def _read_cache(path: Path, name: str) -> dict[str, np.ndarray]:
    """Rows by content hash from a cache file; an unreadable or foreign file reads as empty."""
    try:
        with np.load(io.BytesIO(read_input_bytes(path)), allow_pickle=False) as data:
            if str(data["name"]) != name:
                return {}
            hashes = [str(h) for h in data["hashes"]]
            rows = np.asarray(data["rows"], dtype=np.float32)
    except (OSError, KeyError, ValueError, EOFError):
        return {}
    if rows.ndim != 2 or rows.shape[0] != len(hashes):
        return {}
    return {h: rows[i] for i, h in enumerate(hashes)}


def _write_cache(path: Path, name: str, rows: dict[str, np.ndarray]) -> None:
    """Write atomically (a temporary file, then a rename); failures leave no cache."""
    if not rows:
        return
    hashes = sorted(rows)
    matrix = np.stack([rows[h] for h in hashes]).astype(np.float32)
    np.savez(buffer := io.BytesIO(), name=np.array(name), hashes=np.array(hashes), rows=matrix)
    with contextlib.suppress(OutputError):
        write_output(path, buffer.getvalue(), what="the embedding cache file")


def _normalised(arr: object, n: int, what: str) -> np.ndarray:
    m = np.asarray(arr, dtype=np.float32)
    if m.ndim != 2 or m.shape[0] != n:
        raise ImageIndexError(
            f"the similarity backend returned embeddings of shape {m.shape} for {n} {what}"
        )
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise ImageIndexError(
            f"the similarity backend returned an empty or invalid embedding for {what}"
        )
    out: np.ndarray = (m / norms).astype(np.float32)
    return out


def _load_entries(entries: Sequence[CorpusEntry], max_pixels: int) -> list[Image]:
    images: list[Image] = []
    for entry in entries:
        try:
            img = Image.open(entry.image_path, max_pixels=max_pixels)
        except ImageLoadError as e:
            raise ImageIndexError(
                f"a corpus image can no longer be read ({e}); load the corpus again"
            ) from None
        if img.content_hash() != entry.content_hash:
            raise ImageIndexError(
                f"corpus image {entry.image_path} changed since the corpus was loaded; "
                "load the corpus again"
            )
        images.append(img)
    return images


# -- the index --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rows:
    """The corpus embedded by one embedder, in corpus order (L2-normalised float32 rows)."""

    embedder: ImageEmbedder
    matrix: np.ndarray
    from_cache: bool


class ImageIndex:
    """Identical and similar image search over a :class:`Corpus` (see the module doc).

    Build it with ``await ImageIndex.build(corpus_or_path, embedder)``; an embedder given
    there (or to :meth:`prepare`) is used by every search that names none. A search that
    names an embedder the index has not seen embeds the corpus for it first (cached).
    """

    def __init__(
        self,
        corpus: Corpus,
        *,
        hash_threshold: int = DEFAULT_HASH_THRESHOLD,
        cosine_threshold: float = DEFAULT_COSINE_THRESHOLD,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        if not corpus.entries:
            raise CorpusError(f"image corpus {corpus.source} has no usable images")
        if isinstance(hash_threshold, bool) or not 0 <= hash_threshold <= HASH_BITS:
            raise ValueError(f"hash_threshold must be within 0..{HASH_BITS}, got {hash_threshold}")
        if not (math.isfinite(cosine_threshold) and -1.0 <= cosine_threshold <= 1.0):
            raise ValueError(f"cosine_threshold must be within -1..1, got {cosine_threshold}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.corpus = corpus
        self.hash_threshold = int(hash_threshold)
        self.cosine_threshold = float(cosine_threshold)
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.use_cache = use_cache
        self.batch_size = batch_size
        self.max_pixels = max_pixels
        self.embedder: ImageEmbedder | None = None
        self.last_prepare: PrepareReport | None = None
        self._hashes = np.array([e.phash for e in corpus.entries], dtype=np.uint64)
        # embedder id -> the corpus rows (holding the embedder keeps its id unique)
        self._rows: dict[int, _Rows] = {}
        self._lock = asyncio.Lock()

    @classmethod
    async def build(
        cls,
        corpus: Corpus | str | Path,
        embedder: ImageEmbedder | None = None,
        *,
        hash_threshold: int = DEFAULT_HASH_THRESHOLD,
        cosine_threshold: float = DEFAULT_COSINE_THRESHOLD,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> ImageIndex:
        """An index over a corpus (or a corpus path, loaded in a thread), with the corpus
        embedded for ``embedder`` when one is given."""
        if not isinstance(corpus, Corpus):
            corpus = await asyncio.to_thread(load_corpus, corpus, max_pixels=max_pixels)
        index = cls(
            corpus,
            hash_threshold=hash_threshold,
            cosine_threshold=cosine_threshold,
            cache_dir=cache_dir,
            use_cache=use_cache,
            batch_size=batch_size,
            max_pixels=max_pixels,
        )
        if embedder is not None:
            await index.prepare(embedder)
        return index

    def __len__(self) -> int:
        return len(self.corpus.entries)

    async def prepare(self, embedder: ImageEmbedder) -> PrepareReport:
        """Embed the corpus for ``embedder`` (rows from the disk cache where it has them, the
        rest in batches) and make it the index's default embedder."""
        async with self._lock:
            report = await self._prepare(embedder)
        self.embedder = embedder
        return report

    async def _prepare(self, embedder: ImageEmbedder, *, fresh_only: bool = False) -> PrepareReport:
        """Embed the corpus for ``embedder`` unless it already is; ``fresh_only`` embeds it
        all again, ignoring (and then replacing) the disk cache."""
        name = embedder_name(embedder)
        label = name or type(embedder).__name__
        held = self._rows.get(id(embedder))
        if not fresh_only and held is not None and held.embedder is embedder:
            report = PrepareReport(label, 0, 0, None)
            self.last_prepare = report
            return report
        path = _cache_file(self.cache_dir, name) if self.use_cache and name else None
        cached: dict[str, np.ndarray] = {}
        if path is not None and name is not None and not fresh_only:
            cached = await asyncio.to_thread(_read_cache, path, name)
        entries = self.corpus.entries
        if len({row.shape[0] for row in cached.values()}) > 1:
            cached = {}
        fresh = await self._embed_missing(embedder, cached)
        dims = {row.shape[0] for row in fresh.values()}
        if len(dims) > 1:
            raise ImageIndexError(f"embedder {label} returned rows of different sizes")
        if cached and dims and dims != {next(iter(cached.values())).shape[0]}:
            # the embedder changed its output size under the same name: the cache is stale
            cached = {}
            fresh.update(await self._embed_missing(embedder, fresh))
        known = {**cached, **fresh}
        matrix = np.stack([known[e.content_hash] for e in entries]).astype(np.float32)
        if path is not None and name is not None and fresh:
            await asyncio.to_thread(_write_cache, path, name, known)
        from_cache = sum(1 for e in entries if e.content_hash in cached)
        self._rows[id(embedder)] = _Rows(embedder, matrix, from_cache > 0)
        report = PrepareReport(label, len(fresh), from_cache, path)
        self.last_prepare = report
        return report

    async def _embed_missing(
        self, embedder: ImageEmbedder, have: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Embed, in batches, each distinct corpus image whose content hash is not in ``have``."""
        todo: list[CorpusEntry] = []
        seen: set[str] = set()
        for e in self.corpus.entries:
            if e.content_hash not in have and e.content_hash not in seen:
                todo.append(e)
                seen.add(e.content_hash)
        fresh: dict[str, np.ndarray] = {}
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            images = await asyncio.to_thread(_load_entries, chunk, self.max_pixels)
            rows = _normalised(await embedder.embed_images(images), len(chunk), "corpus images")
            for e, row in zip(chunk, rows, strict=True):
                fresh[e.content_hash] = row
        return fresh

    def embeddings(self, embedder: ImageEmbedder | None = None) -> np.ndarray | None:
        """The corpus's rows for ``embedder`` (default: the index's own), in corpus order,
        L2-normalised; ``None`` when the corpus has not been embedded for it."""
        if embedder is None:
            embedder = self.embedder
        held = self._rows.get(id(embedder)) if embedder is not None else None
        if held is None or held.embedder is not embedder:
            return None
        return held.matrix.copy()

    async def _corpus_rows(self, embedder: ImageEmbedder) -> _Rows:
        held = self._rows.get(id(embedder))
        if held is None or held.embedder is not embedder:
            async with self._lock:
                await self._prepare(embedder)
            held = self._rows[id(embedder)]
        return held

    def _distances(self, query_hash: int) -> np.ndarray:
        x = np.bitwise_xor(self._hashes, np.uint64(query_hash))
        bits = np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1)
        out: np.ndarray = bits.sum(axis=1).astype(np.int64)
        return out

    async def _query(
        self, image: Image, embedder: ImageEmbedder | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Hash distances to every entry, and cosines when an embedder is in use."""
        query_hash = await asyncio.to_thread(perceptual_hash, image)
        distances = self._distances(query_hash)
        if embedder is None:
            return distances, None
        held = await self._corpus_rows(embedder)
        row = _normalised(await embedder.embed_images([image]), 1, "the query image")[0]
        if row.shape[0] != held.matrix.shape[1] and held.from_cache:
            # the corpus rows came from a cache written by another model of the same name
            async with self._lock:
                await self._prepare(embedder, fresh_only=True)
            held = self._rows[id(embedder)]
        matrix = held.matrix
        if row.shape[0] != matrix.shape[1]:
            raise ImageIndexError(
                f"the query embedding has {row.shape[0]} values, the corpus rows "
                f"{matrix.shape[1]} (a stale embedding cache in {self.cache_dir}? delete it)"
            )
        cosines = np.clip(matrix @ row, -1.0, 1.0).astype(np.float64)
        return distances, cosines

    @staticmethod
    def _check_k(k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")

    async def identical(
        self, image: Image, k: int = 5, embedder: ImageEmbedder | None = None
    ) -> list[ImageHit]:
        """Corpus images identical to ``image`` (or a crop: its own pixels are compared),
        best first, at most ``k``; empty when there is none (see the module doc)."""
        self._check_k(k)
        if embedder is None:
            embedder = self.embedder
        distances, cosines = await self._query(image, embedder)
        scored: list[tuple[float, int, int]] = []
        for i, d in enumerate(distances.tolist()):
            if d > self.hash_threshold:
                continue
            hash_part = 1.0 - d / HASH_BITS
            if cosines is None:
                score = 100.0 * hash_part
            else:
                c = float(cosines[i])
                if c < self.cosine_threshold:
                    continue
                score = 50.0 * hash_part + 50.0 * max(c, 0.0)
            scored.append((score, d, i))
        scored.sort(key=lambda t: (-t[0], t[1], t[2]))
        entries = self.corpus.entries
        return [_hit(entries[i], s, d) for s, d, i in scored[:k]]

    async def similar(
        self, image: Image, k: int = 5, embedder: ImageEmbedder | None = None
    ) -> SimilarResult:
        """The ``k`` corpus images most like ``image``: by embedding cosine with an
        embedder, else by perceptual-hash distance (flagged in the result)."""
        self._check_k(k)
        if embedder is None:
            embedder = self.embedder
        distances, cosines = await self._query(image, embedder)
        entries = self.corpus.entries
        dist = distances.tolist()
        if cosines is None:
            order = sorted(range(len(entries)), key=lambda i: (dist[i], i))[:k]
            hits = [_hit(entries[i], 100.0 * (1.0 - dist[i] / HASH_BITS), dist[i]) for i in order]
            return SimilarResult(hits, "phash", NO_EMBEDDER_NOTE)
        cos = cosines.tolist()
        order = sorted(range(len(entries)), key=lambda i: (-cos[i], dist[i], i))[:k]
        hits = [_hit(entries[i], 100.0 * max(cos[i], 0.0), dist[i]) for i in order]
        return SimilarResult(hits, "embedding")

    def summary(self) -> str:
        """One paragraph: the corpus, what was skipped (first reasons) and how it searches."""
        c = self.corpus
        n = len(c.entries)
        text = f"image index over {c.kind} {c.source}: {n} image{'s' if n != 1 else ''}"
        text += f", {len(c.skipped)} skipped"
        if c.skipped:
            text += f" ({_skipped_text(c.skipped)})"
        text += f"; identical = perceptual-hash distance <= {self.hash_threshold}/64"
        if self.embedder is not None:
            label = embedder_name(self.embedder) or type(self.embedder).__name__
            text += f" and cosine >= {self.cosine_threshold:g}; similar = cosine of {label}"
        else:
            text += "; similar = perceptual hash (no similarity backend)"
        return text
