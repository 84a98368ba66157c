"""hammr.avis.image_index: corpora, perceptual-hash identical search, embedding similarity
search with its disk cache, the no-embedder fallback and the paper-like rendering.

Every picture is real pixels drawn with PIL/numpy in tmp_path (blurred noise, shapes,
stripes: structures a 64-bit phash separates); nothing is downloaded.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage
from PIL import ImageDraw

from hammr.avis.image_index import (
    HIGH_CONFIDENCE_SCORE,
    NO_EMBEDDER_NOTE,
    Corpus,
    CorpusError,
    ImageHit,
    ImageIndex,
    ImageIndexError,
    default_cache_dir,
    hamming,
    load_corpus,
    perceptual_hash,
    render_hits,
    title_from_stem,
)
from hammr.values import Box, Image

W, H = 320, 240

# -- pictures ---------------------------------------------------------------------------


def scene(seed: int, tint: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> PILImage.Image:
    """Blurred colour noise (strong low-frequency structure, so phash is stable), tinted."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (H // 16, W // 16, 3)).astype(np.float64)
    small *= np.array(tint)
    img = PILImage.fromarray(np.clip(small, 0, 255).astype(np.uint8))
    return img.resize((W, H), PILImage.Resampling.BICUBIC)


def shapes() -> PILImage.Image:
    img = PILImage.new("RGB", (W, H), (20, 40, 90))
    d = ImageDraw.Draw(img)
    d.ellipse((30, 30, 150, 150), fill=(250, 220, 30))
    d.ellipse((180, 90, 300, 220), fill=(200, 30, 30))
    d.rectangle((10, 180, 120, 230), fill=(30, 200, 60))
    return img


def stripes() -> PILImage.Image:
    yy, xx = np.mgrid[0:H, 0:W]
    a = ((np.sin((xx + yy) / 12) + 1) * 120).astype(np.uint8)
    return PILImage.fromarray(np.stack([a, 255 - a, a], -1))


def save(img: PILImage.Image, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".webp":
        img.save(path, lossless=True)
    else:
        img.save(path)
    return path


def resized_jpeg(img: PILImage.Image, size: tuple[int, int] = (160, 120)) -> Image:
    """A smaller, JPEG re-encoded copy, as a search engine's thumbnail would be."""
    buf = io.BytesIO()
    img.resize(size, PILImage.Resampling.LANCZOS).save(buf, "JPEG", quality=60)
    return Image.from_bytes(buf.getvalue(), source="copy.jpg")


def corrupt(path: Path) -> Path:
    path.write_bytes(np.random.default_rng(7).integers(0, 256, 2048, dtype=np.uint8).tobytes())
    return path


# -- fake embedders ---------------------------------------------------------------------


def mean_colour(img: Image) -> np.ndarray:
    """Mean RGB centred on grey, plus a small constant (never a zero vector)."""
    rgb = np.asarray(img.pixels.convert("RGB"), dtype=np.float64).reshape(-1, 3).mean(axis=0)
    return np.array([*(rgb / 255.0 - 0.5), 0.05])


def unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = v / np.linalg.norm(v)
    return out


class MeanColourEmbedder:
    """Deterministic 'similarity' backend: an image's vector is its mean colour. Records the
    size of every embed_images call."""

    def __init__(self, cache_key: str = "mean-colour-v1") -> None:
        self.cache_key = cache_key
        self.calls: list[int] = []

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        self.calls.append(len(images))
        return np.stack([unit(mean_colour(img)) for img in images]).astype(np.float32)


class Scrambler:
    """An embedder that puts every distinct image in an unrelated random direction."""

    cache_key = "scrambler"

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        rows = []
        for img in images:
            rng = np.random.default_rng(int(img.content_hash()[:8], 16))
            rows.append(unit(rng.normal(size=16)))
        return np.stack(rows)


class Anonymous:
    """Has Python's default repr, which names no model: never cached on disk."""

    def __init__(self) -> None:
        self.calls = 0

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        self.calls += 1
        return np.stack([unit(mean_colour(img)) for img in images])


# -- corpora ----------------------------------------------------------------------------


@pytest.fixture
def pictures() -> dict[str, PILImage.Image]:
    return {
        "eiffel_tower": scene(1),
        "golden-gate_bridge": scene(2),
        "red_fox": shapes(),
        "zebra_crossing": stripes(),
        "blue_lagoon": scene(5),
    }


@pytest.fixture
def folder(tmp_path: Path, pictures: dict[str, PILImage.Image]) -> Path:
    root = tmp_path / "corpus"
    save(pictures["eiffel_tower"], root / "eiffel_tower.png")
    (root / "eiffel_tower.txt").write_text("  The Eiffel Tower\nat night, Paris. ")
    save(pictures["golden-gate_bridge"], root / "golden-gate_bridge.jpg")
    save(pictures["red_fox"], root / "animals" / "red_fox.png")
    save(pictures["zebra_crossing"], root / "zebra_crossing.webp")
    save(pictures["blue_lagoon"], root / ".hidden" / "blue_lagoon.png")  # left out
    corrupt(root / "broken.jpg")
    (root / "notes.md").write_text("not an image, not counted")
    return root


def test_folder_corpus(folder: Path) -> None:
    corpus = load_corpus(folder)
    assert corpus.kind == "folder" and corpus.source == folder
    by_title = {e.title: e for e in corpus.entries}
    assert sorted(by_title) == [
        "eiffel tower",
        "golden gate bridge",
        "red fox",
        "zebra crossing",
    ]
    assert by_title["eiffel tower"].caption == "The Eiffel Tower at night, Paris."
    assert by_title["golden gate bridge"].caption is None
    assert by_title["red fox"].image_path == folder / "animals" / "red_fox.png"
    assert all(e.url is None and (e.width, e.height) == (W, H) for e in corpus.entries)
    assert len({e.phash for e in corpus.entries}) == 4
    # the corrupt .jpg is skipped with its reason; notes.md and .hidden/ are not images here
    assert len(corpus.skipped) == 1
    item, reason = corpus.skipped[0]
    assert item == "broken.jpg" and "not a readable image" in reason
    assert len(corpus) == 4


def test_title_from_stem() -> None:
    assert title_from_stem("golden-gate__bridge") == "golden gate bridge"
    assert title_from_stem("Mehmed_Paša-Sokolović") == "Mehmed Paša Sokolović"


def test_jsonl_corpus_skips_bad_lines_and_missing_images(
    tmp_path: Path, pictures: dict[str, PILImage.Image]
) -> None:
    images = tmp_path / "imgs"
    save(pictures["eiffel_tower"], images / "a.png")
    absolute = save(pictures["red_fox"], tmp_path / "elsewhere" / "b.png")
    corrupt(images / "c.jpg")
    lines = [
        json.dumps({"image": "imgs/a.png", "title": "Eiffel Tower - Wikipedia", "caption": "x"}),
        json.dumps(
            {
                "image": str(absolute),
                "title": "Red fox",
                "summary": "A fox\nin the snow",
                "url": "https://example.org/fox",
            }
        ),
        "",
        json.dumps({"image": "imgs/missing.png", "title": "Missing"}),
        '{"image": "imgs/a.png", "title": ',
        json.dumps([1, 2]),
        json.dumps({"image": "imgs/a.png"}),
        json.dumps({"title": "no image"}),
        json.dumps({"image": "imgs/c.jpg", "title": "Corrupt"}),
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe not utf-8\n")
    corpus = load_corpus(path)
    assert corpus.kind == "jsonl"
    assert [(e.title, e.caption, e.url) for e in corpus.entries] == [
        ("Eiffel Tower - Wikipedia", "x", None),
        ("Red fox", "A fox in the snow", "https://example.org/fox"),
    ]
    assert corpus.entries[0].image_path == images / "a.png"
    assert corpus.entries[1].image_path == absolute
    reasons = dict(corpus.skipped)
    assert list(reasons) == [
        "corpus.jsonl:4",
        "corpus.jsonl:5",
        "corpus.jsonl:6",
        "corpus.jsonl:7",
        "corpus.jsonl:8",
        "corpus.jsonl:9",
        "corpus.jsonl:10",
    ]
    assert "image file not found" in reasons["corpus.jsonl:4"]
    assert "not valid JSON" in reasons["corpus.jsonl:5"]
    assert "expected a JSON object" in reasons["corpus.jsonl:6"]
    assert reasons["corpus.jsonl:7"] == "no 'title'"
    assert reasons["corpus.jsonl:8"] == "no 'image' path"
    assert "not a readable image" in reasons["corpus.jsonl:9"]
    assert reasons["corpus.jsonl:10"] == "not UTF-8 text"


def test_oversized_images_are_skipped_by_the_loader_limit(
    tmp_path: Path, pictures: dict[str, PILImage.Image]
) -> None:
    save(pictures["eiffel_tower"], tmp_path / "small.png")  # 320x240 = 76,800 pixels
    save(scene(9).resize((400, 400)), tmp_path / "big.png")  # 160,000 pixels
    corpus = load_corpus(tmp_path, max_pixels=100_000)
    assert [e.title for e in corpus.entries] == ["small"]
    assert corpus.skipped[0][0] == "big.png"
    assert "above the limit of 100000" in corpus.skipped[0][1]


def test_corpus_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"image corpus not found: .*nowhere"):
        load_corpus(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusError, match=r"empty has no usable images"):
        load_corpus(empty)
    corrupt(empty / "only.jpg")
    with pytest.raises(CorpusError, match=r"no usable images.*only\.jpg: .*not a readable"):
        load_corpus(empty)
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    with pytest.raises(CorpusError, match=r"blank\.jsonl has no usable images"):
        load_corpus(blank)
    other = tmp_path / "list.csv"
    other.write_text("image,title\n")
    with pytest.raises(CorpusError, match=r"expected a folder of images or a \.jsonl file"):
        load_corpus(other)
    with pytest.raises(CorpusError, match="no usable images"):
        ImageIndex(Corpus(tmp_path, "folder", []))


# -- identical search -------------------------------------------------------------------


async def test_identical_finds_resized_jpeg_copies_and_exact_copies(
    folder: Path, tmp_path: Path
) -> None:
    index = await ImageIndex.build(folder)
    titles = sorted(e.title for e in index.corpus.entries)
    assert len(titles) == 4
    for entry in index.corpus.entries:
        # an exact copy: the same file, somewhere else
        copied = tmp_path / f"copy{entry.image_path.suffix}"
        shutil.copyfile(entry.image_path, copied)
        exact = await index.identical(Image.open(copied))
        assert [h.title for h in exact] == [entry.title]  # and nothing else is identical
        assert exact[0].distance == 0 and exact[0].score == 100.0 and exact[0].high_confidence
        assert exact[0].image_path == entry.image_path
        # a half-size JPEG (quality 60) of it
        original = Image.open(entry.image_path)
        copy = await index.identical(resized_jpeg(original.pixels))
        assert [h.title for h in copy] == [entry.title]
        d = copy[0].distance
        assert d is not None and d <= index.hash_threshold
        assert copy[0].score == pytest.approx(100 * (1 - d / 64))
        assert copy[0].high_confidence
        # ... and a larger one
        bigger = await index.identical(resized_jpeg(original.pixels, (480, 360)), k=1)
        assert [h.title for h in bigger] == [entry.title]


async def test_identical_does_not_match_a_different_image(
    folder: Path, pictures: dict[str, PILImage.Image]
) -> None:
    index = await ImageIndex.build(folder)
    # blue_lagoon sits in .hidden/, so it is not in the corpus
    other = Image(pictures["blue_lagoon"])
    assert await index.identical(other) == []
    hashes = [e.phash for e in index.corpus.entries]
    assert min(hamming(perceptual_hash(other), h) for h in hashes) > index.hash_threshold
    # ... and a crop works on its own pixels: a crop of the shapes is not the whole picture
    root = Image(pictures["red_fox"])
    crop = Image(
        root.pixels.crop((180, 90, 300, 220)), parent=root, crop_box=Box(180, 90, 120, 130)
    )
    assert await index.identical(crop) == []


async def test_identical_threshold_is_configurable(
    folder: Path, pictures: dict[str, PILImage.Image]
) -> None:
    index = await ImageIndex.build(folder)
    # a copy shifted by 24 pixels: several bits away, not zero
    shifted = PILImage.new("RGB", (W, H))
    shifted.paste(pictures["eiffel_tower"], (24, 0))
    eiffel = next(e for e in index.corpus.entries if e.title == "eiffel tower")
    d = hamming(perceptual_hash(Image(shifted)), eiffel.phash)
    assert 0 < d <= 30
    strict = await ImageIndex.build(index.corpus, hash_threshold=d - 1)
    loose = await ImageIndex.build(index.corpus, hash_threshold=d)
    assert await strict.identical(Image(shifted)) == []
    assert [h.title for h in await loose.identical(Image(shifted))] == ["eiffel tower"]
    with pytest.raises(ValueError, match="hash_threshold"):
        ImageIndex(index.corpus, hash_threshold=65)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        await index.identical(Image(shifted), k=0)


async def test_identical_with_an_embedder_also_needs_cosine(
    folder: Path, tmp_path: Path, pictures: dict[str, PILImage.Image]
) -> None:
    corpus = load_corpus(folder)
    copy = resized_jpeg(pictures["golden-gate_bridge"])
    agreeing = await ImageIndex.build(corpus, MeanColourEmbedder(), cache_dir=tmp_path / "c")
    (hit,) = await agreeing.identical(copy)
    entry = next(e for e in corpus.entries if e.title == "golden gate bridge")
    original = Image.open(entry.image_path)
    cos = float(unit(mean_colour(copy)) @ unit(mean_colour(original)))
    assert cos >= 0.9
    assert hit.distance is not None
    assert hit.score == pytest.approx(50 * (1 - hit.distance / 64) + 50 * cos, abs=1e-3)
    # the same hash match, but an embedder that sees unrelated images: not identical
    scrambled = await ImageIndex.build(corpus, Scrambler(), cache_dir=tmp_path / "c")
    assert await scrambled.identical(copy) == []
    # an exact copy embeds identically, so it stays identical under any embedder
    (exact,) = await scrambled.identical(original)
    assert exact.title == "golden gate bridge" and exact.score == pytest.approx(100.0)
    # the embedder can also be given per call, overriding none at build time
    plain = await ImageIndex.build(corpus)
    assert await plain.identical(copy, embedder=Scrambler()) == []
    assert len(await plain.identical(copy)) == 1


# -- similar search ---------------------------------------------------------------------


@pytest.fixture
def tinted(tmp_path: Path) -> Path:
    root = tmp_path / "tinted"
    tints = {
        "red_one": (1.0, 0.2, 0.2),
        "green_one": (0.2, 1.0, 0.2),
        "blue_one": (0.2, 0.2, 1.0),
        "yellow_one": (1.0, 1.0, 0.1),
        "grey_one": (0.5, 0.5, 0.5),
    }
    for i, (name, tint) in enumerate(tints.items()):
        save(scene(20 + i, tint), root / f"{name}.png")
    return root


async def test_similar_ranks_by_cosine_of_the_embeddings(tinted: Path, tmp_path: Path) -> None:
    embedder = MeanColourEmbedder()
    index = await ImageIndex.build(tinted, embedder, cache_dir=tmp_path / "cache")
    query = Image(scene(99, (1.0, 0.5, 0.1)))  # orange-ish, not in the corpus
    result = await index.similar(query, k=3)
    assert result.ranked_by == "embedding" and result.note is None and not result.fallback
    q = unit(mean_colour(query))
    expected = sorted(
        (
            (float(q @ unit(mean_colour(Image.open(e.image_path)))), e.title)
            for e in index.corpus.entries
        ),
        reverse=True,
    )
    assert [h.title for h in result.hits] == [t for _, t in expected[:3]]
    assert result.hits[0].title in ("red one", "yellow one")
    for hit, (cos, _) in zip(result.hits, expected, strict=False):
        assert hit.score == pytest.approx(100 * max(cos, 0.0), abs=1e-3)
        assert hit.high_confidence == (hit.score >= HIGH_CONFIDENCE_SCORE)
        assert hit.distance is not None and 0 <= hit.distance <= 64
    # scores are clipped at 0 for opposite directions
    everything = await index.similar(query, k=10)
    assert len(everything.hits) == 5
    assert all(0.0 <= h.score <= 100.0 for h in everything.hits)
    assert [h.score for h in everything.hits] == sorted(
        (h.score for h in everything.hits), reverse=True
    )


async def test_embeddings_are_cached_on_disk_and_batched(tinted: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = MeanColourEmbedder()
    index = await ImageIndex.build(tinted, first, cache_dir=cache, batch_size=2)
    assert first.calls == [2, 2, 1]  # five images in batches of two
    assert index.last_prepare is not None
    assert (index.last_prepare.embedded, index.last_prepare.from_cache) == (5, 0)
    assert index.last_prepare.cache_file is not None and index.last_prepare.cache_file.is_file()
    before = await index.similar(Image(scene(99)), k=5)

    second = MeanColourEmbedder()
    again = await ImageIndex.build(tinted, second, cache_dir=cache, batch_size=2)
    assert second.calls == []  # nothing re-embedded
    assert again.last_prepare is not None and again.last_prepare.from_cache == 5
    after = await again.similar(Image(scene(99)), k=5)
    assert second.calls == [1]  # the query only
    assert after.hits == before.hits

    # a grown corpus embeds only the new image; another embedder name embeds everything
    save(scene(40, (0.9, 0.1, 0.9)), tinted / "purple_one.png")
    third = MeanColourEmbedder()
    await ImageIndex.build(tinted, third, cache_dir=cache)
    assert third.calls == [1]
    renamed = MeanColourEmbedder(cache_key="mean-colour-v2")
    renamed_index = await ImageIndex.build(tinted, renamed, cache_dir=cache)
    assert renamed.calls == [6]
    assert renamed_index.last_prepare is not None
    renamed_file = renamed_index.last_prepare.cache_file
    assert len(list(cache.glob("*.npz"))) == 2

    # an embedder whose repr names no model is not cached on disk
    anon = Anonymous()
    await ImageIndex.build(tinted, anon, cache_dir=tmp_path / "anon")
    await ImageIndex.build(tinted, anon, cache_dir=tmp_path / "anon")
    assert anon.calls == 2 and not (tmp_path / "anon").exists()

    # a corrupt cache file is ignored and rewritten
    (cache_file,) = [p for p in cache.glob("*.npz") if p != renamed_file]
    cache_file.write_bytes(b"garbage")
    fourth = MeanColourEmbedder()
    await ImageIndex.build(tinted, fourth, cache_dir=cache)
    assert fourth.calls == [6]


async def test_default_cache_dir_follows_xdg(
    tinted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "hammr" / "avis"
    await ImageIndex.build(tinted, MeanColourEmbedder())
    assert len(list((tmp_path / "xdg" / "hammr" / "avis").glob("embeddings-*.npz"))) == 1
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "hammr" / "avis"


class Wider(MeanColourEmbedder):
    """Another model under the same cache key, with 8-value rows."""

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        rows = await super().embed_images(images)
        out: np.ndarray = np.concatenate([rows, rows], axis=1) / np.sqrt(2)
        return out


async def test_a_stale_cache_of_another_row_size_is_replaced(tinted: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    await ImageIndex.build(tinted, MeanColourEmbedder(), cache_dir=cache)
    # all rows come from the stale cache; the query shows the size differs: embed again
    wider = Wider()
    index = await ImageIndex.build(tinted, wider, cache_dir=cache)
    assert wider.calls == []
    result = await index.similar(Image(scene(99, (1.0, 0.5, 0.1))), k=2)
    assert wider.calls == [1, 5]
    rows = index.embeddings()
    assert rows is not None and rows.shape == (5, 8)
    assert result.hits[0].title in ("red one", "yellow one")
    # the cache now holds the wider rows
    again = Wider()
    await ImageIndex.build(tinted, again, cache_dir=cache)
    assert again.calls == []
    # a new image shows the size differs while preparing: everything is embedded again
    await ImageIndex.build(tinted, MeanColourEmbedder(), cache_dir=cache)
    save(scene(41), tinted / "new_one.png")
    narrow = MeanColourEmbedder()
    index = await ImageIndex.build(tinted, narrow, cache_dir=cache)
    assert narrow.calls == [1, 5]
    rows = index.embeddings()
    assert rows is not None and rows.shape == (6, 4)


async def test_a_corpus_file_that_changed_is_a_clear_error(tinted: Path, tmp_path: Path) -> None:
    corpus = load_corpus(tinted)
    save(scene(77), tinted / "red_one.png")
    with pytest.raises(ImageIndexError, match=r"red_one\.png changed since the corpus"):
        await ImageIndex.build(corpus, MeanColourEmbedder(), cache_dir=tmp_path / "c")
    os.remove(tinted / "red_one.png")
    with pytest.raises(ImageIndexError, match=r"can no longer be read.*image file not found"):
        await ImageIndex.build(corpus, MeanColourEmbedder(), cache_dir=tmp_path / "c")


async def test_bad_embedder_output_is_a_clear_error(tinted: Path, tmp_path: Path) -> None:
    class Short:
        cache_key = "short"

        async def embed_images(self, images: list[Image]) -> np.ndarray:
            return np.ones((1, 4))

    with pytest.raises(ImageIndexError, match=r"shape \(1, 4\) for 5 corpus images"):
        await ImageIndex.build(tinted, Short(), cache_dir=tmp_path / "c")


async def test_similar_without_an_embedder_falls_back_to_the_hash(
    folder: Path, pictures: dict[str, PILImage.Image]
) -> None:
    index = await ImageIndex.build(folder)
    result = await index.similar(resized_jpeg(pictures["red_fox"]), k=3)
    assert result.ranked_by == "phash" and result.fallback
    assert result.note == NO_EMBEDDER_NOTE == "ranked by perceptual hash: no similarity backend"
    assert len(result.hits) == 3
    assert result.hits[0].title == "red fox" and result.hits[0].high_confidence
    distances = [h.distance for h in result.hits]
    assert distances == sorted(d for d in distances if d is not None)
    for h in result.hits:
        assert h.distance is not None and h.score == pytest.approx(100 * (1 - h.distance / 64))
    assert not result.hits[2].high_confidence  # unrelated pictures are ~half the bits away
    text = result.render()
    assert text.startswith(
        "Retrievals (ranked by perceptual hash: no similarity backend): [high confidence: red fox"
    )


# -- rendering and summary --------------------------------------------------------------


def test_render_hits() -> None:
    hits = [
        ImageHit("Condor - AERO International", None, None, Path("a.jpg"), 97.25, 1, True),
        ImageHit(
            "Willow", "A tree\nby the  water " + "x" * 200, None, Path("b.jpg"), 55.3, 30, False
        ),
    ]
    text = render_hits(hits)
    assert text.startswith(
        "Retrievals: [high confidence: Condor - AERO International (score=97.2), "
        "Willow: A tree by the water xxx"
    )
    assert text.endswith("... (score=55.3)]")
    assert "\n" not in text and len(text) < 250
    assert render_hits([], heading="Identical images") == (
        "Identical images: no matching images found"
    )
    assert render_hits([], empty="no identical images found") == (
        "Retrievals: no identical images found"
    )


async def test_summary(folder: Path, tinted: Path, tmp_path: Path) -> None:
    index = await ImageIndex.build(folder)
    text = index.summary()
    assert f"image index over folder {folder}: 4 images, 1 skipped (broken.jpg: " in text
    assert "no similarity backend" in text
    many = tmp_path / "many"
    save(scene(3), many / "good.png")
    for i in range(5):
        corrupt(many / f"bad{i}.jpg")
    text = (await ImageIndex.build(many, MeanColourEmbedder(), cache_dir=tmp_path / "c")).summary()
    assert ": 1 image, 5 skipped (bad0.jpg: " in text and "and 2 more)" in text
    assert "bad3.jpg" not in text
    assert "similar = cosine of mean-colour-v1" in text


# -- a real CLIP (tiny, random weights) -------------------------------------------------


def tiny_clip() -> tuple[Any, Any]:
    """A random-weight CLIP and an image processor, built from configs (nothing downloaded);
    skips, saying why, when torch or transformers is missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
    except ImportError as e:
        reason = f"torch/transformers not importable ({e}); pip install 'hammr[local]'"
        print(reason)
        pytest.skip(reason)
    torch.manual_seed(0)
    tiny = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1}
    tiny["num_attention_heads"] = 2
    config = transformers.CLIPConfig(
        text_config={**tiny, "vocab_size": 600, "max_position_embeddings": 24},
        vision_config={**tiny, "image_size": 32, "patch_size": 8},
        projection_dim=12,
    )
    model: Any = transformers.CLIPModel(config)
    model.eval()
    processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    return model, processor


async def test_with_a_real_tiny_clip(
    folder: Path, pictures: dict[str, PILImage.Image], tmp_path: Path
) -> None:
    model, processor = tiny_clip()
    from hammr.backends.local.clip import ClipEmbedder

    forwards = [0]
    model.vision_model.register_forward_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    embedder = ClipEmbedder.from_pretrained_objects(model, processor, batch_size=3)
    cache = tmp_path / "clip-cache"
    index = await ImageIndex.build(folder, embedder, cache_dir=cache)
    assert forwards[0] == 2  # four corpus images in batches of three
    assert index.last_prepare is not None and index.last_prepare.embedded == 4

    result = await index.similar(Image(pictures["eiffel_tower"]), k=4)  # the corpus PNG's pixels
    assert result.ranked_by == "embedding" and len(result.hits) == 4
    assert all(0.0 <= h.score <= 100.0 for h in result.hits)
    top = max(h.score for h in result.hits)
    mine = next(h for h in result.hits if h.title == "eiffel tower")
    assert mine.score == pytest.approx(100.0, abs=1e-3) and mine.score >= top - 1e-3

    # a resized JPEG copy is the same picture to both the hash and the model
    copy = resized_jpeg(pictures["red_fox"])
    row = (await embedder.embed_images([copy]))[0]
    hits = await index.identical(copy)
    assert [h.title for h in hits] == ["red fox"]
    rows = index.embeddings()
    assert rows is not None and rows.shape == (4, 12)
    fox = [e.title for e in index.corpus.entries].index("red fox")
    cos = float(rows[fox] @ row)
    assert cos >= 0.9
    assert hits[0].distance is not None
    assert hits[0].score == pytest.approx(50 * (1 - hits[0].distance / 64) + 50 * cos, abs=1e-3)

    # the second build reads the cache: no forward pass over the corpus
    before = forwards[0]
    again = await ImageIndex.build(folder, embedder, cache_dir=cache)
    assert forwards[0] == before
    np.testing.assert_allclose(again.embeddings(embedder), rows, atol=1e-6)
