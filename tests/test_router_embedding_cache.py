"""The router's label-embedding cache is keyed by what produced the vectors (the embedder's
``cache_key``: model and endpoint), and a change of dimension is never a numpy crash: a stale
cache is rebuilt, a server that changed between calls is a one-line error naming it.

Embedding servers are scripted fakes on 127.0.0.1 (tests/fake_openai_server.py) that serve
deterministic vectors of a dimension the test sets (384, then 576: issue 20's case).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from fake_openai_server import FakeServer, Reply, Seen
from hammr.agents import AgentCatalog, AgentSystems, NeighbourRouter
from hammr.agents.routing import RouterError
from hammr.backends.capabilities import embedder_name
from hammr.backends.embed.openai_embeddings import OpenAIEmbedder
from hammr.cli import main
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools
from hammr.values import Image

QUESTION = "How much does a cappuccino cost?"
MODEL = "fake-embed"


class VectorServer(FakeServer):
    """A fake ``/v1/embeddings`` server: each text embeds as a fixed random vector of
    ``dim`` numbers (seeded by the text and ``seed``); ``dims`` records what it sent."""

    def __init__(self, dim: int, seed: int = 0) -> None:
        super().__init__()
        self.dim = dim
        self.seed = seed
        self.dims: list[int] = []
        self.responder = self._reply

    def _reply(self, seen: Seen) -> Reply:
        dim = self.dim
        self.dims.append(dim)
        rows = []
        for text in seen.body["input"]:
            digest = hashlib.sha256(f"{self.seed}:{text}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            rows.append([float(x) for x in rng.standard_normal(dim)])
        data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
        return Reply(body={"object": "list", "model": MODEL, "data": data})

    def texts_embedded(self) -> list[int]:
        """How many texts each request asked for."""
        return [len(s.body["input"]) for s in self.seen]


@pytest.fixture
def servers() -> Iterator[list[VectorServer]]:
    made: list[VectorServer] = []
    yield made
    for s in made:
        s.close()


def serve(made: list[VectorServer], dim: int, seed: int = 0) -> VectorServer:
    s = VectorServer(dim, seed)
    made.append(s)
    return s


def embedder(server: VectorServer) -> OpenAIEmbedder:
    return OpenAIEmbedder(server.url, MODEL, api_key_env=None, max_retries=1, timeout_s=5)


def router(server: VectorServer, cache_dir: Path) -> NeighbourRouter:
    return NeighbourRouter.from_catalog(AgentCatalog.load(), embedder(server), cache_dir=cache_dir)


def cached_widths(cache_dir: Path) -> list[int]:
    return sorted(int(np.load(p).shape[1]) for p in cache_dir.glob("router-*.npy"))


# -- the cache key ---------------------------------------------------------------------------


def test_the_openai_embedders_cache_key_names_model_endpoint_and_prompts() -> None:
    a = OpenAIEmbedder("http://127.0.0.1:8001/v1", "e5-small", api_key_env=None)
    key = embedder_name(a)
    assert key == a.cache_key
    assert "http://127.0.0.1:8001/v1" in key and "e5-small" in key
    others = [
        OpenAIEmbedder("http://127.0.0.1:8002/v1", "e5-small", api_key_env=None),
        OpenAIEmbedder("http://127.0.0.1:8001/v1", "e5-large", api_key_env=None),
        OpenAIEmbedder("http://127.0.0.1:8001/v1", "e5-small", api_key_env=None, text_prompt="q: "),
    ]
    assert len({key, *(embedder_name(o) for o in others)}) == 4


def test_one_embedder_name_for_every_cache() -> None:
    """The router, the AVIS image index and the experience bank name an embedder alike."""
    import hammr.avis.image_index as image_index
    import hammr.memory.embedders as memory_embedders

    class Unnamed:
        pass

    class Named:
        cache_key = "my-model v2"

    assert embedder_name(Unnamed()) is None  # Python's default repr names no model
    assert embedder_name(Named()) == "my-model v2"
    assert image_index.embedder_name is embedder_name
    assert memory_embedders.embedder_name is embedder_name
    assert not hasattr(memory_embedders, "backend_name")  # no second copy


# -- through the router ----------------------------------------------------------------------


async def test_two_fake_servers_384_then_576_keep_separate_caches(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    small, large = serve(servers, 384), serve(servers, 576)
    first = await router(small, tmp_path).route(QUESTION, ["image"])
    second = await router(large, tmp_path).route(QUESTION, ["image"])
    assert first.agent and second.agent
    assert all(np.isfinite(n.score) for n in second.neighbours)
    assert cached_widths(tmp_path) == [384, 576]
    # the second server embedded the labelled questions itself (one batch of 32 or fewer
    # per request, then the question)
    assert sum(large.texts_embedded()) > 1 + 1


async def test_two_fake_servers_of_one_dimension_do_not_share_vectors(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    a, b = serve(servers, 384, seed=1), serve(servers, 384, seed=2)
    await router(a, tmp_path).route(QUESTION, ["image"])
    labelled = sum(a.texts_embedded()) - 1
    await router(b, tmp_path).route(QUESTION, ["image"])
    assert sum(b.texts_embedded()) == labelled + 1  # not read from a's cache
    assert len(list(tmp_path.glob("router-*.npy"))) == 2


async def test_a_stale_cache_at_the_same_url_is_rebuilt_fake_server_384_then_576(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    s = serve(servers, 384)
    await router(s, tmp_path).route(QUESTION, ["image"])
    assert cached_widths(tmp_path) == [384]
    s.dim = 576  # the same URL and model name now serve another model
    decision = await router(s, tmp_path).route(QUESTION, ["image"])
    assert decision.agent is not None
    assert all(np.isfinite(n.score) for n in decision.neighbours)
    assert cached_widths(tmp_path) == [576]  # rebuilt, not left stale


async def test_a_corrupt_or_misshapen_cache_file_is_rebuilt_fake_server(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    s = serve(servers, 384)
    await router(s, tmp_path).route(QUESTION, ["image"])
    (path,) = tmp_path.glob("router-*.npy")
    path.write_bytes(b"not an array")
    assert (await router(s, tmp_path).route(QUESTION, ["image"])).agent is not None
    np.save(path, np.zeros((3,), dtype=np.float32))  # one-dimensional
    assert (await router(s, tmp_path).route(QUESTION, ["image"])).agent is not None
    assert cached_widths(tmp_path) == [384]


async def test_a_fake_server_that_changes_dimension_between_calls_is_a_one_line_error(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    s = serve(servers, 384)
    r = router(s, tmp_path)
    await r.prepare()
    s.dim = 576
    with pytest.raises(RouterError) as info:
        await r.route(QUESTION, ["image"])
    message = str(info.value)
    assert "\n" not in message
    assert f"{s.url}/embeddings" in message
    assert "384" in message and "576" in message
    # also without a disk cache (nothing to rebuild from)
    s.dim = 384
    r = router(s, tmp_path / "none")
    r.cache_dir = None
    await r.prepare()
    s.dim = 576
    with pytest.raises(RouterError, match=r"384 .*576|576 .*384"):
        await r.route(QUESTION, ["image"])


async def test_the_routed_dispatcher_records_the_error_in_its_trace_fake_server(
    servers: list[VectorServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    s = serve(servers, 384)
    systems = AgentSystems.build(builtin_tools(), {"embed": embedder(s)}, setting="tools_only")
    dispatcher = systems.dispatcher("neighbours")
    await dispatcher.prepare()
    s.dim = 576
    blank = Image(PILImage.new("RGB", (32, 32)))
    result = await dispatcher.run(QUESTION, {"image": blank}, ctx=ToolContext())
    assert result.answer is None
    assert result.trace.status == "llm_failure"
    assert result.trace.error and "384" in result.trace.error and "576" in result.trace.error
    assert result.trace.steps[0].error_kind == "llm_failure"


# -- through `hammr route` -------------------------------------------------------------------


def route_cli(server: VectorServer, tmp_path: Path) -> tuple[int, str, str]:
    config = tmp_path / f"hammr-{server.port}.toml"
    config.write_text(
        "[llm]\ncache = false\n\n"
        f'[tools.embed]\nbackend = "openai"\nbase_url = "{server.url}"\nmodel = "{MODEL}"\n'
        'api_key_env = ""\nmax_retries = 1\n'
    )
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = CliRunner().invoke(
        main,
        ["route", QUESTION, "--router", "neighbours", "--config", str(config)],
        env=env,
        catch_exceptions=False,
    )
    return r.exit_code, r.stdout, r.stderr


def test_hammr_route_with_a_384_then_a_576_fake_server(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    small, large = serve(servers, 384), serve(servers, 576)
    for s in (small, large, small):
        code, out, err = route_cli(s, tmp_path)
        assert code == 0, err
        assert out.startswith("specialist: ") and "decided by: neighbours" in out
    assert large.dims and set(large.dims) == {576}


def test_hammr_route_after_the_fake_server_at_one_url_changed_dimension(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    s = serve(servers, 384)
    assert route_cli(s, tmp_path)[0] == 0
    s.dim = 576
    code, out, err = route_cli(s, tmp_path)
    assert code == 0, err
    assert out.startswith("specialist: ")


def test_hammr_route_when_the_fake_server_changes_dimension_mid_run(
    servers: list[VectorServer], tmp_path: Path
) -> None:
    s = serve(servers, 384)
    switch = s.responder
    assert switch is not None

    def reply(seen: Seen) -> Reply:
        # the labelled questions first, at 384; then the question, at 576
        s.dim = 576 if seen.body["input"] == [QUESTION] else 384
        return switch(seen)

    s.responder = reply
    code, out, err = route_cli(s, tmp_path)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hammr: error: ")
    assert f"{s.url}/embeddings" in lines[0] and "384" in lines[0] and "576" in lines[0]
    assert "Traceback" not in err and "matmul" not in err
