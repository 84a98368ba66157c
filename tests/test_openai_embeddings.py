"""The served-embedding backend (``backend = "openai"``) against a fake OpenAI-compatible
``/v1/embeddings`` server on 127.0.0.1: request shapes, reply checks, retries, concurrency,
configuration, and its use by the similarity tools and the AVIS image index."""

from __future__ import annotations

import asyncio
import base64
import io
import math
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

from fake_openai_server import FakeServer, Reply, Seen
from hammr.avis.image_index import ImageIndex
from hammr.backends.embed.openai_embeddings import (
    EmbeddingError,
    OpenAIEmbedder,
    embed_from_config,
    from_config,
    send_size,
)
from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.backends.registry import FACTORIES, backend_names, build_backends
from hammr.tools.base import ToolContext, ToolError, bind_arguments
from hammr.tools.similarity_tools import ImageSimilarity, ImageTextSimilarity
from hammr.values import Image

MODEL = "TIGER-Lab/VLM2Vec-Full"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def embedder(server: FakeServer, **kw: Any) -> OpenAIEmbedder:
    opts: dict[str, Any] = {"api_key_env": "", "max_retries": 1, "timeout_s": 5, "backoff_s": 0}
    return OpenAIEmbedder(server.url, MODEL, **{**opts, **kw})


def solid(colour: tuple[int, int, int], size: tuple[int, int] = (16, 16)) -> Image:
    return Image(PILImage.new("RGB", size, colour))


def noise(w: int, h: int, seed: int = 0) -> Image:
    """An image whose pixels all differ, so a decoded copy proves nothing was resampled."""
    data = bytes(
        (x * 7 + y * 13 + seed * 31 + c * 5) % 256
        for y in range(h)
        for x in range(w)
        for c in range(3)
    )
    return Image(PILImage.frombytes("RGB", (w, h), data))


def sent_image(seen: Seen) -> tuple[PILImage.Image, str]:
    """The one image (decoded from its data URL) and the one text of an image request."""
    messages = seen.body["messages"]
    assert len(messages) == 1 and messages[0]["role"] == "user"
    content = messages[0]["content"]
    assert [p["type"] for p in content] == ["image_url", "text"]
    url = content[0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    pixels = PILImage.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    pixels.load()
    return pixels, content[1]["text"]


def mean_colour(pixels: PILImage.Image) -> list[float]:
    arr = np.asarray(pixels.convert("RGB"), dtype=np.float64)
    return [float(v) for v in arr.reshape(-1, 3).mean(axis=0)]


def text_vector(text: str) -> list[float]:
    """A deterministic vector per text, different for every test text."""
    return [float(len(text)), float(ord(text[0])), float(sum(map(ord, text)) % 97) + 1.0]


def reply_rows(rows: list[list[float]], *, shuffle: bool = True) -> Reply:
    data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
    if shuffle:
        data.reverse()
    return Reply(body={"object": "list", "model": MODEL, "data": data})


def serve_vectors(seen: Seen) -> Reply:
    """Images embed as their mean colour, texts as :func:`text_vector`; rows reversed."""
    if "messages" in seen.body:
        pixels, _ = sent_image(seen)
        return reply_rows([mean_colour(pixels)])
    return reply_rows([text_vector(t) for t in seen.body["input"]])


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    out: np.ndarray = a / np.linalg.norm(a)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- request shapes and row order ------------------------------------------------------------


async def test_one_chat_request_per_image_in_order(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HAMMR_TEST_EMBED_KEY", "sekrit")
    server.responder = serve_vectors
    images = [noise(20, 10, seed=1), noise(12, 14, seed=2), noise(9, 9, seed=3)]
    e = embedder(server, concurrency=1, api_key_env="HAMMR_TEST_EMBED_KEY", image_prompt="Img:")
    rows = await e.embed_images(images)

    assert len(server.seen) == 3
    for seen, img in zip(server.seen, images, strict=True):
        assert seen.path == "/v1/embeddings"
        assert seen.headers["authorization"] == "Bearer sekrit"
        assert set(seen.body) == {"model", "messages", "encoding_format"}
        assert seen.body["model"] == MODEL and seen.body["encoding_format"] == "float"
        pixels, prompt = sent_image(seen)
        assert prompt == "Img:"
        # small images go as they are, pixel for pixel (PNG)
        assert pixels.size == img.pixels.size
        assert pixels.convert("RGB").tobytes() == img.pixels.tobytes()
    assert rows.dtype == np.float32 and rows.shape == (3, 3)
    for row, img in zip(rows, images, strict=True):
        assert row == pytest.approx(unit(mean_colour(img.pixels)), abs=1e-6)
    assert np.linalg.norm(rows, axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)


async def test_images_and_a_text_go_together_in_one_request_per_item(server: FakeServer) -> None:
    """A viewpoint holding both (MuSEAgent's joint state embedding): its images as image_url
    parts, then its text, in one request; rows in item order."""

    def joint_vectors(seen: Seen) -> Reply:
        content = seen.body["messages"][0]["content"]
        kinds = [p["type"] for p in content]
        assert kinds[-1] == "text" and set(kinds[:-1]) == {"image_url"}
        return reply_rows([[float(len(kinds) - 1), *text_vector(content[-1]["text"])]])

    server.responder = joint_vectors
    e = embedder(server, concurrency=1, text_prompt="query: ")
    items = [("red things", [solid((250, 0, 0))]), ("two blues", [solid((0, 0, 250))] * 2)]
    rows = await e.embed_joint(items)
    assert len(server.seen) == 2
    texts = [seen.body["messages"][0]["content"][-1]["text"] for seen in server.seen]
    assert texts == ["query: red things", "query: two blues"]
    for row, (text, images) in zip(rows, items, strict=True):
        expected = unit([float(len(images)), *text_vector("query: " + text)])
        assert row == pytest.approx(expected, abs=1e-6)
    assert (await e.embed_joint([])).shape == (0, 0)


async def test_texts_are_batched_and_rows_follow_index_not_reply_order(
    server: FakeServer,
) -> None:
    server.responder = serve_vectors  # every reply lists its rows in reverse
    texts = ["apple", "banana split", "cherry", "dates!", "elderberry wine"]
    e = embedder(server, batch_size=2, text_prompt="query: ", concurrency=1)
    rows = await e.embed_texts(texts)

    bodies = [s.body for s in server.seen]
    assert [b["input"] for b in bodies] == [
        ["query: apple", "query: banana split"],
        ["query: cherry", "query: dates!"],
        ["query: elderberry wine"],
    ]
    assert all(b["model"] == MODEL and b["encoding_format"] == "float" for b in bodies)
    assert all("messages" not in b for b in bodies)
    expected = np.stack([unit(text_vector("query: " + t)) for t in texts])
    assert rows.shape == (5, 3)
    assert np.allclose(rows, expected, atol=1e-6)
    # the 'embed' capability's methods are the same
    assert np.allclose(await e.embed_queries(texts), expected, atol=1e-6)
    assert np.allclose(await e.embed_passages(texts), expected, atol=1e-6)


async def test_empty_lists_send_nothing(server: FakeServer) -> None:
    e = embedder(server)
    assert (await e.embed_images([])).shape[0] == 0
    assert (await e.embed_texts([])).shape[0] == 0
    assert server.seen == []


async def test_large_images_are_downscaled_before_sending(server: FakeServer) -> None:
    server.responder = serve_vectors
    big, tall = solid((200, 30, 30), (3000, 1500)), solid((10, 20, 250), (300, 2048))
    e = embedder(server, max_image_side=1024, concurrency=1)
    await e.embed_images([big, tall, noise(40, 30)])
    sizes = [sent_image(s)[0].size for s in server.seen]
    assert sizes == [(1024, 512), (150, 1024), (40, 30)]
    assert send_size(3000, 1500, 1024) == (1024, 512)

    server.seen.clear()
    await embedder(server, max_image_side=0).embed_images([big])
    assert sent_image(server.seen[0])[0].size == (3000, 1500)


# -- failures --------------------------------------------------------------------------------


async def test_a_503_is_retried_then_succeeds(server: FakeServer) -> None:
    server.script = [
        Reply(status=503, body={"error": {"message": "model is loading"}}),
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
        reply_rows([[3.0, 4.0]]),
    ]
    rows = await embedder(server, max_retries=3).embed_texts(["hello"])
    assert len(server.seen) == 3
    assert all(s.body == server.seen[0].body for s in server.seen)
    assert rows.tolist() == [pytest.approx([0.6, 0.8])]


async def test_a_503_every_time_is_a_clear_error(server: FakeServer) -> None:
    server.responder = lambda seen: Reply(status=503, body={"error": {"message": "no GPU"}})
    with pytest.raises(EmbeddingError) as info:
        await embedder(server, max_retries=2).embed_images([solid((1, 2, 3))])
    msg = str(info.value)
    assert len(server.seen) == 2
    assert f"the embedding server at {server.url}/embeddings failed (HTTP 503, 2 tries)" in msg
    assert msg.endswith("no GPU")
    assert isinstance(info.value, ToolError)


async def test_a_client_error_is_not_retried_and_names_the_model(server: FakeServer) -> None:
    server.responder = lambda seen: Reply(
        status=400, body={"error": {"message": "model does not support chat embeddings"}}
    )
    with pytest.raises(EmbeddingError) as info:
        await embedder(server, max_retries=3).embed_images([solid((1, 2, 3))])
    assert len(server.seen) == 1
    msg = str(info.value)
    assert "HTTP 400" in msg and MODEL in msg and "does not support chat embeddings" in msg


async def test_server_down_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    e = OpenAIEmbedder(url, MODEL, api_key_env="", max_retries=2, backoff_s=0, timeout_s=2)
    with pytest.raises(EmbeddingError) as info:
        await e.embed_texts(["hello"])
    msg = str(info.value)
    assert msg.startswith(f"cannot reach the embedding server at {url}/embeddings")
    assert "connection refused" in msg and "[tools.similarity] base_url" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([[1.0, 2.0]], r"sent 1 embeddings for 2 inputs"),
        ([[1.0, 2.0], [1.0, 2.0], [3.0, 4.0]], r"sent 3 embeddings for 2 inputs"),
        ([[1.0, 2.0], [1.0, 2.0, 3.0]], r"embeddings of different sizes: \[2, 3\]"),
        ([[1.0, math.nan], [1.0, 2.0]], r"not finite \(NaN or infinity\) for input 0"),
        ([[1.0, 2.0], [math.inf, 2.0]], r"not finite \(NaN or infinity\) for input 1"),
        ([[1.0, 2.0], [0.0, 0.0]], r"all-zero embedding for input 1"),
        ([[1.0, 2.0], "AAAA"], r"embedding 1 that is not a list of numbers"),
        ([[1.0, 2.0], [1.0, "x"]], r"embedding 1 that is not a list of numbers"),
    ],
)
async def test_bad_rows_are_clear_errors(server: FakeServer, rows: list[Any], match: str) -> None:
    server.script = [reply_rows(rows)]
    with pytest.raises(EmbeddingError, match=match) as info:
        await embedder(server).embed_texts(["one", "two"])
    assert f"the embedding server at {server.url}/embeddings" in str(info.value)


async def test_images_of_different_sizes_across_requests_are_an_error(server: FakeServer) -> None:
    server.script = [reply_rows([[1.0, 2.0]]), reply_rows([[1.0, 2.0, 3.0]])]
    with pytest.raises(EmbeddingError, match="different sizes"):
        await embedder(server, concurrency=1).embed_images([solid((1, 1, 1)), solid((2, 2, 2))])


async def test_bad_indices_and_non_json_are_clear_errors(server: FakeServer) -> None:
    bad_index = {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}
    server.script = [
        Reply(body=bad_index),
        Reply(body=b"<html>gateway</html>"),
        Reply(body={"object": "list"}),
    ]
    e = embedder(server)
    with pytest.raises(EmbeddingError, match=r"indices \[0, 0\], expected 0 to 1"):
        await e.embed_texts(["a", "b"])
    with pytest.raises(EmbeddingError, match="not JSON: '<html>gateway</html>'"):
        await e.embed_texts(["a"])
    with pytest.raises(EmbeddingError, match="without a 'data' list"):
        await e.embed_texts(["a"])


async def test_concurrency_is_bounded() -> None:
    server = FakeServer()
    try:
        server.responder = lambda seen: Reply(body=serve_vectors(seen).body, delay=0.15)
        images = [solid((i * 20 + 5, 40, 90)) for i in range(7)]
        rows = await embedder(server, concurrency=2).embed_images(images)
        assert len(server.seen) == 7 and rows.shape == (7, 3)
        assert server.peak_active == 2
        for row, img in zip(rows, images, strict=True):
            assert row == pytest.approx(unit(mean_colour(img.pixels)), abs=1e-6)
    finally:
        server.close()


def test_a_client_per_event_loop(server: FakeServer) -> None:
    server.responder = serve_vectors
    e = embedder(server)
    first = asyncio.run(e.embed_texts(["again"]))
    second = asyncio.run(e.embed_texts(["again"]))
    assert np.array_equal(first, second) and len(server.seen) == 2


# -- configuration ---------------------------------------------------------------------------


def test_from_config_builds_and_checks_options(server: FakeServer) -> None:
    e = from_config(
        {"base_url": server.url + "/", "model": MODEL, "concurrency": "3", "max_image_side": 512}
    )
    assert isinstance(e, OpenAIEmbedder)
    assert (e.base_url, e.model, e.concurrency, e.max_image_side) == (server.url, MODEL, 3, 512)
    assert e.endpoint == server.url + "/embeddings"
    assert repr(e) == f"OpenAIEmbedder(base_url={server.url!r}, model={MODEL!r})"
    assert server.url in e.cache_key and MODEL in e.cache_key
    other = from_config({"base_url": server.url, "model": MODEL, "image_prompt": "Photo:"})
    assert other.cache_key != e.cache_key  # another prompt gives other rows: another cache

    with pytest.raises(ValueError, match=r"tools\.similarity\.base_url is required"):
        from_config({"model": MODEL})
    with pytest.raises(ValueError, match=r"tools\.similarity\.model is required"):
        from_config({"base_url": server.url, "model": ""})
    with pytest.raises(ValueError, match=r"unknown setting tools\.similarity\.dims; known: "):
        from_config({"base_url": server.url, "model": MODEL, "dims": 3})
    with pytest.raises(ValueError, match=r"tools\.similarity\.batch_size = 'many' should be"):
        from_config({"base_url": server.url, "model": MODEL, "batch_size": "many"})
    with pytest.raises(ValueError, match=r"tools\.similarity: .*concurrency.* at least 1"):
        from_config({"base_url": server.url, "model": MODEL, "concurrency": 0})
    with pytest.raises(ValueError, match=r"tools\.similarity: base_url must start with http"):
        from_config({"base_url": "127.0.0.1:8000/v1", "model": MODEL})
    with pytest.raises(ValueError, match=r"unknown setting tools\.embed\.device"):
        embed_from_config({"base_url": server.url, "model": MODEL, "device": "cpu"})


async def test_registry_serves_similarity_and_embed(server: FakeServer) -> None:
    assert "openai" in backend_names("similarity") and "openai" in backend_names("embed")
    assert FACTORIES[("similarity", "openai")].startswith("hammr.backends.embed.openai_embed")
    table = {"backend": "openai", "base_url": server.url, "model": MODEL, "api_key_env": ""}
    built = build_backends({"similarity": table, "embed": dict(table)})
    assert isinstance(built.backends["similarity"], OpenAIEmbedder)
    embed = built.backends["embed"]
    assert isinstance(embed, OpenAIEmbedder) and embed.config_table == "tools.embed"
    with pytest.raises(ValueError, match=r"tools\.similarity\.base_url is required"):
        build_backends({"similarity": {"backend": "openai", "model": MODEL}})


# -- end to end: the similarity tools and the AVIS image index -------------------------------


async def call(tool: Any, ctx: ToolContext, *args: Any) -> Any:
    return (await tool.invoke(bind_arguments(tool, list(args), {}), ctx)).value


async def test_image_similarity_tool_gives_cosines_of_served_vectors(server: FakeServer) -> None:
    server.responder = serve_vectors
    ctx = ToolContext(backends={"similarity": embedder(server)})
    ref = solid((200, 40, 40))
    others = [solid((210, 50, 30)), solid((20, 200, 60)), solid((90, 90, 200))]
    got = await call(ImageSimilarity, ctx, ref, others)
    want = [float(unit(mean_colour(ref.pixels)) @ unit(mean_colour(o.pixels))) for o in others]
    assert got == pytest.approx(want, abs=1e-5)
    assert got.index(max(got)) == 0 and len(server.seen) == 4

    texts = ["red", "a green thing"]
    got = await call(ImageTextSimilarity, ctx, ref, texts)
    want = [float(unit(mean_colour(ref.pixels)) @ unit(text_vector(t))) for t in texts]
    assert got == pytest.approx(want, abs=1e-5)


async def test_image_index_ranks_by_served_vectors(server: FakeServer, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    colours = {"fire_engine": (220, 20, 20), "lawn": (30, 200, 40), "sea": (20, 40, 230)}
    for name, colour in colours.items():
        PILImage.new("RGB", (32, 24), colour).save(corpus / f"{name}.png")
    server.responder = serve_vectors
    e = embedder(server)
    index = await ImageIndex.build(corpus, e, cache_dir=tmp_path / "cache")
    assert len(server.seen) == 3  # one request per corpus image

    query = solid((40, 90, 210))  # bluish, then greenish: sea, lawn, fire engine
    result = await index.similar(query, k=3)
    assert result.ranked_by == "embedding"
    assert [h.title for h in result.hits] == ["sea", "lawn", "fire engine"]
    q = unit(mean_colour(query.pixels))
    want = [100 * float(q @ unit(list(map(float, colours[n])))) for n in ("sea", "lawn")]
    assert [h.score for h in result.hits[:2]] == pytest.approx(want, abs=1e-3)

    # a second build reads the corpus rows from the disk cache (keyed by cache_key)
    before = len(server.seen)
    again = await ImageIndex.build(corpus, embedder(server), cache_dir=tmp_path / "cache")
    assert len(server.seen) == before
    assert again.last_prepare is not None and again.last_prepare.from_cache == 3


# -- a real /v1/embeddings: llama.cpp's server, SmolLM2 with mean pooling -----------------------


def real_embedder(server: LocalLlamaServer, **kw: Any) -> OpenAIEmbedder:
    opts: dict[str, Any] = {"api_key_env": "", "max_retries": 1, "timeout_s": 300}
    return OpenAIEmbedder(server.base_url, "smollm2", **{**opts, **kw})


async def test_texts_are_batched_and_rows_follow_index_on_a_real_server(
    real_embedding_server: LocalLlamaServer,
) -> None:
    texts = ["a red apple", "the stock market fell", "a green apple", "quantum physics"]
    e = real_embedder(real_embedding_server, batch_size=3, concurrency=2)
    rows = await e.embed_texts([*texts, "a red apple"])  # two requests: 3 texts, then 2
    assert rows.dtype == np.float32 and rows.shape == (5, 576)
    assert np.linalg.norm(rows, axis=1) == pytest.approx([1.0] * 5, abs=1e-5)
    # each row is the row of its own text, whichever batch it went in
    alone = np.concatenate([await e.embed_texts([t]) for t in texts])
    assert np.allclose(rows[:4], alone, atol=1e-3)
    assert np.allclose(rows[4], rows[0], atol=1e-3)
    assert (alone @ alone.T).argmax(axis=1).tolist() == [0, 1, 2, 3]
    assert float(rows[0] @ rows[1]) < 0.999  # different texts, different rows


async def test_registry_serves_embed_from_a_real_server(
    real_embedding_server: LocalLlamaServer,
) -> None:
    table = {
        "backend": "openai",
        "base_url": real_embedding_server.base_url,
        "model": "smollm2",
        "api_key_env": "",
    }
    embed = build_backends({"embed": table}).backends["embed"]
    assert isinstance(embed, OpenAIEmbedder)
    query = await embed.embed_queries(["a green apple"])
    passages = await embed.embed_passages(["the stock market fell", "a red apple"])
    assert query.shape == (1, 576) and passages.shape == (2, 576)
    assert (query @ passages.T).argmax() == 1  # the apple, not the market


async def test_an_image_sent_to_a_text_only_real_server_is_a_clear_error(
    real_embedding_server: LocalLlamaServer,
) -> None:
    e = real_embedder(real_embedding_server, max_retries=3)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_images([solid((200, 0, 0))])
    msg = str(err.value)
    assert msg.startswith(
        f"the embedding server at {real_embedding_server.base_url}/embeddings refused the "
        "request for model 'smollm2' (HTTP 400)"
    ), msg
    assert "does the served model take images?" in msg and "\n" not in msg


def test_a_client_per_event_loop_on_a_real_server(real_embedding_server: LocalLlamaServer) -> None:
    e = real_embedder(real_embedding_server)
    first = asyncio.run(e.embed_texts(["again"]))
    second = asyncio.run(e.embed_texts(["again"]))
    assert np.allclose(first, second, atol=1e-5)
