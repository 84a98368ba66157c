"""A pool of model server replicas: routing by outstanding load, failover, cool-down and
probing, the all-down error, configuration; against scripted OpenAI-compatible servers."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.agent import ReActAgent
from hammr.backends.http_replies import CLOSED_EARLY
from hammr.backends.llm.base import LLMError, LLMRequest, Message
from hammr.backends.llm.cache import CachedLLM
from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.backends.pool import ReplicaPool, parse_base_urls
from hammr.backends.vlm import VLMBackend
from hammr.cli import main
from hammr.config import ConfigError, load_config
from hammr.eval.runner import run_eval
from hammr.eval.store import RunStore
from hammr.eval.suites import SuiteEntry
from hammr.eval.types import Sample
from hammr.factory import build_backends, build_llm
from hammr.tools.base import ToolContext
from hammr.values import Image
from patience import HANG_S, async_wait_until
from real_server import SIZE_EXAMPLE, ImageSize, real_client
from test_eval_cli import make_data


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


def req(text: str = "hello") -> LLMRequest:
    return LLMRequest(messages=(Message("user", text),))


def delayed(seconds: float, text: str = "ok") -> Any:
    def respond(seen: Seen) -> Reply:
        return Reply(body=ok_body(text), delay=seconds)

    return respond


def never(text: str = "late") -> Any:
    """A server that holds every request until it is closed (a stuck replica)."""
    return delayed(HANG_S, text)


def held_until(gate: threading.Event, text: str = "ok") -> Any:
    """A server that answers only once ``gate`` is set (a replica slower than any other,
    however slowly a busy machine runs the others)."""

    def respond(seen: Seen) -> Reply:
        assert gate.wait(HANG_S), "the gate was never opened"
        return Reply(body=ok_body(text))

    return respond


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    made = [FakeServer(), FakeServer(), FakeServer()]
    yield made
    for s in made:
        s.close()


def client(urls: list[str] | ReplicaPool, **kw: Any) -> OpenAICompatLLM:
    kw.setdefault("api_key_env", None)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("max_retries", 1)
    kw.setdefault("timeout_s", 60)  # a safety net: no test here waits for it
    return OpenAICompatLLM(urls, "fake-model", **kw)


async def run_many(llm: OpenAICompatLLM, n: int, in_flight: int) -> list[str]:
    """``n`` requests, at most ``in_flight`` at once (as `hammr eval` keeps 8 questions going)."""
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> str:
        async with gate:
            return (await llm.complete(req(f"q{i}"))).text

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def counts(pool: ReplicaPool) -> list[int]:
    return [s.requests for s in pool.status()]


# -- the pool itself, on a fake clock ---------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_least_outstanding_then_round_robin_on_ties() -> None:
    pool = ReplicaPool(["http://a/v1", "http://b/v1/", "http://c/v1"])
    assert pool.urls == ("http://a/v1", "http://b/v1", "http://c/v1")
    # sequential requests: every replica idle, so ties, taken in turn
    chosen = []
    for _ in range(4):
        async with pool.acquire() as url:
            chosen.append(url)
    assert chosen == ["http://a/v1", "http://b/v1", "http://c/v1", "http://a/v1"]
    # held requests: each goes to the least loaded replica
    async with pool.acquire() as first, pool.acquire() as second:
        assert {first, second} == {"http://b/v1", "http://c/v1"}
        async with pool.acquire() as third:
            assert third == "http://a/v1"
            assert [s.outstanding for s in pool.status()] == [1, 1, 1]
        async with pool.acquire() as fourth:
            assert fourth == "http://a/v1"  # a freed its slot: it is the least loaded
    assert [s.outstanding for s in pool.status()] == [0, 0, 0]


async def test_set_aside_cool_down_doubles_and_one_probe_at_a_time() -> None:
    clock = Clock()
    pool = ReplicaPool(["http://a/v1", "http://b/v1"], cooldown_s=1, max_cooldown_s=3, clock=clock)
    pool.mark_down("http://a/v1", "connection refused")
    pool.mark_down("http://a/v1", "connection refused")  # a straggler: no longer cool-down
    [a, b] = pool.status()
    assert (a.up, a.reason, a.retry_in_s, b.up) == (False, "connection refused", 1.0, True)
    for _ in range(3):
        async with pool.acquire() as url:
            assert url == "http://b/v1"
    assert pool.available() and not pool.available(avoid={"http://b/v1"})
    clock.now += 1.0  # cool-down over: the next request probes a, and only that one
    async with pool.acquire() as probe:
        assert probe == "http://a/v1"
        async with pool.acquire() as other:
            assert other == "http://b/v1"
        pool.mark_down(probe, "connection refused")  # the probe failed
    assert pool.status()[0].retry_in_s == 2.0  # doubled
    clock.now += 2.0
    async with pool.acquire() as probe:
        assert probe == "http://a/v1"
        pool.mark_down(probe, "no answer within 5 s")
    assert pool.status()[0].retry_in_s == 3.0  # capped at max_cooldown_s
    assert pool.describe_down() == "http://a/v1 (no answer within 5 s)"
    clock.now += 3.0
    async with pool.acquire() as probe:
        assert probe == "http://a/v1"
        pool.mark_up(probe)  # it answered
    assert [s.up for s in pool.status()] == [True, True] and pool.describe_down() == ""
    # every replica down: requests still go out, to the least loaded one
    pool.mark_down("http://a/v1", "refused")
    pool.mark_down("http://b/v1", "refused")
    assert pool.all_down() and not pool.available()
    async with pool.acquire() as x, pool.acquire() as y:
        assert {x, y} == {"http://a/v1", "http://b/v1"}


async def test_a_cancelled_request_gives_back_its_slot(servers: list[FakeServer]) -> None:
    for s in servers[:2]:
        s.responder = never()
    llm = client([s.url for s in servers[:2]])
    tasks = [asyncio.create_task(llm.complete(req())) for _ in range(6)]
    await async_wait_until(
        lambda: sum(s.outstanding for s in llm.pool.status()) == 6, "6 requests outstanding"
    )
    assert [s.outstanding for s in llm.pool.status()] == [3, 3]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert [s.outstanding for s in llm.pool.status()] == [0, 0]
    assert all(s.up for s in llm.pool.status())  # cancelling is not a server failure
    await llm.aclose()


def test_parse_base_urls() -> None:
    assert parse_base_urls("http://a:8000/v1") == ("http://a:8000/v1",)
    assert parse_base_urls(" http://a/v1 , https://b/v1,") == ("http://a/v1", "https://b/v1")
    assert parse_base_urls(["http://a/v1", "http://b/v1"]) == ("http://a/v1", "http://b/v1")
    for bad, needle in [
        ("localhost:8000/v1", "'localhost:8000/v1' is not an http(s) URL"),
        ("http://a/v1,ftp://b/v1", "'ftp://b/v1' is not an http(s) URL"),
        (["http://a/v1", "http:///v1"], "'http:///v1' is not an http(s) URL"),
        (["http://a/v1", "http://a:99999/v1"], "'http://a:99999/v1' is not an http(s) URL"),
        (["http://a/v1", 8000], "entry 8000 is not a string"),
        (["http://a/v1", "http://a/v1/"], "lists 'http://a/v1/' twice"),
        ([], "lists no URL"),
        (5, "5 should be a URL or a list of URLs"),
    ]:
        with pytest.raises(ValueError) as e:
            parse_base_urls(bad)
        assert needle in str(e.value) and "\n" not in str(e.value), (bad, str(e.value))


# -- spreading the load, with fake servers -----------------------------------------------------


async def test_faster_server_gets_more_with_scripted_servers(servers: list[FakeServer]) -> None:
    """40 requests, 8 in flight: the slow server answers nothing until the fast one has
    answered 30, so the fast one frees its slots and is the least loaded every time; the
    slow one holds the 4 it got at the start. (40 sent at once would split 20/20: nothing
    has finished when they are routed.) Slowness here is an order, not a speed: a busy
    machine cannot turn it around."""
    fast, slow = servers[0], servers[1]
    fast_done = threading.Event()

    def fast_reply(seen: Seen) -> Reply:
        if len(fast.seen) >= 30:
            fast_done.set()
        return Reply(body=ok_body("ok"))

    fast.responder, slow.responder = fast_reply, held_until(fast_done)
    llm = client([fast.url, slow.url])
    out = await run_many(llm, 40, in_flight=8)
    assert out == ["ok"] * 40
    n_fast, n_slow = len(fast.seen), len(slow.seen)
    assert counts(llm.pool) == [n_fast, n_slow] and n_fast + n_slow == 40
    assert n_fast >= 30 and n_fast >= 2 * n_slow, (n_fast, n_slow)
    # least-outstanding: a replica reaches k outstanding only when every other one has at
    # least k - 1, so with C in flight none ever holds more than ceil(C / replicas)
    bound = math.ceil(8 / 2)
    assert max(s.peak for s in llm.pool.status()) <= bound
    assert max(fast.peak_active, slow.peak_active) <= bound
    await llm.aclose()


async def test_equal_servers_share_evenly_with_scripted_servers(
    servers: list[FakeServer],
) -> None:
    for s in servers:
        s.responder = delayed(0.05)
    llm = client([s.url for s in servers])
    assert await run_many(llm, 60, in_flight=9) == ["ok"] * 60
    seen = [len(s.seen) for s in servers]
    assert sum(seen) == 60 and max(seen) - min(seen) <= 6, seen
    assert max(s.peak for s in llm.pool.status()) <= math.ceil(9 / 3)
    # all at once: routed before any finishes (here no server answers before all 40 have
    # arrived, however slowly they come), so exactly even
    arrived, lock, burst_seen = threading.Event(), threading.Lock(), [0]

    def burst_reply(seen: Seen) -> Reply:
        with lock:
            burst_seen[0] += 1
            if burst_seen[0] == 40:
                arrived.set()
        assert arrived.wait(HANG_S), "the burst never arrived whole"
        return Reply(body=ok_body("ok"))

    for s in servers[:2]:
        s.responder = burst_reply
    burst = client([s.url for s in servers[:2]])
    assert await run_many(burst, 40, in_flight=40) == ["ok"] * 40
    assert counts(burst.pool) == [20, 20]
    assert max(s.peak for s in burst.pool.status()) == math.ceil(40 / 2)
    await llm.aclose()
    await burst.aclose()


# -- failures --------------------------------------------------------------------------------


async def test_stopped_server_is_avoided_then_back_on_its_port_with_scripted_servers(
    servers: list[FakeServer],
) -> None:
    a, b = servers[0], servers[1]
    a.responder = b.responder = delayed(0.02)
    pool = ReplicaPool([a.url, b.url], cooldown_s=0.2, max_cooldown_s=0.4)
    llm = client(pool)  # one try in all: a failover is not a retry
    assert await run_many(llm, 20, in_flight=4) == ["ok"] * 20
    assert len(a.seen) > 0 and len(b.seen) > 0

    a.close()
    answered_by_b = len(b.seen)
    assert await run_many(llm, 30, in_flight=4) == ["ok"] * 30  # none failed
    assert len(b.seen) == answered_by_b + 30
    [down, up] = pool.status()
    assert not down.up and down.reason == "connection refused" and up.up

    again = FakeServer(port=a.port)  # the replica restarted on the same port
    servers.append(again)
    again.responder = delayed(0.02)
    assert again.url == a.url

    async def back_in_use() -> bool:
        assert await run_many(llm, 4, in_flight=2) == ["ok"] * 4
        return len(again.seen) >= 3

    await async_wait_until(back_in_use, "the restarted replica to be used again")
    assert all(s.up for s in pool.status())
    await llm.aclose()


async def test_timeout_sets_a_replica_aside_and_the_request_moves_with_scripted_servers(
    servers: list[FakeServer],
) -> None:
    stuck, fine = servers[0], servers[1]
    stuck.responder, fine.responder = never(), delayed(0, "prompt")
    # 2 s: the stuck replica is waited for that long; the fine one answers well within it
    llm = client([stuck.url, fine.url], timeout_s=2)
    assert (await llm.complete(req())).text == "prompt"
    assert len(stuck.seen) == 1 and len(fine.seen) == 1
    assert [(s.up, s.reason) for s in llm.pool.status()] == [
        (False, "no answer within 2 s"),
        (True, ""),
    ]
    # while set aside, no request goes to it
    for _ in range(3):
        assert (await llm.complete(req())).text == "prompt"
    assert len(stuck.seen) == 1
    await llm.aclose()


async def test_an_error_from_the_model_is_not_a_dead_replica_with_scripted_servers(
    servers: list[FakeServer],
) -> None:
    a, b = servers[0], servers[1]
    a.script = [Reply(status=400, body={"error": {"message": "prompt too long"}})]
    llm = client([a.url, b.url], max_retries=3)
    with pytest.raises(LLMError, match=f"the LLM server at {a.url} refused the request"):
        await llm.complete(req())
    assert len(b.seen) == 0 and all(s.up for s in llm.pool.status())
    await llm.aclose()


async def test_all_down_is_one_error_naming_every_server() -> None:
    urls = [dead_url(), dead_url(), dead_url()]
    llm = client(urls, max_retries=2)
    with pytest.raises(LLMError) as e:
        await llm.complete(req())
    msg = str(e.value)
    assert msg.startswith("all 3 LLM servers are unreachable: "), msg
    assert ", ".join(f"{u} (connection refused)" for u in urls) in msg
    assert "\n" not in msg and "base_url" in msg
    assert llm.pool.all_down()
    await llm.aclose()


def test_eval_with_every_server_down_stores_llm_failure(tmp_path: Path) -> None:
    suite, data = make_data(tmp_path, n=4)
    urls = [dead_url(), dead_url()]
    env = {
        "HAMMR_CONFIG": "",
        "HAMMR_LLM__BACKEND": "openai",
        "HAMMR_LLM__BASE_URL": ",".join(urls),
        "HAMMR_LLM__MODEL": "fake",
        "HAMMR_LLM__CACHE": "false",
        "HAMMR_LLM__MAX_RETRIES": "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    store = tmp_path / "runs.sqlite"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    r = CliRunner().invoke(main, [*args, "--system", "naive", "--name", "t"], env=env)
    assert r.exit_code == 1, r.output  # every sample failed: the run is FAILED, cause named
    assert "4 samples ended in llm_failure" in r.stderr
    assert "run t FAILED: 4 of 4 samples got no answer from the LLM server" in r.stderr
    with RunStore(store) as s:
        records = s.records("t", limit=None, traces=False)
        assert len(records) == 4
        for rec in records:
            assert (rec.status, rec.score) == ("llm_failure", 0.0)
            assert str(rec.error).startswith("all 2 LLM servers are unreachable: ")
            assert all(f"{u} (connection refused)" in str(rec.error) for u in urls)


# -- configuration ---------------------------------------------------------------------------


def test_config_takes_a_list_from_toml_and_commas_from_the_environment(tmp_path: Path) -> None:
    a, b = "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"
    path = tmp_path / "hammr.toml"
    path.write_text(
        f'[llm]\nbackend = "openai"\nmodel = "m"\nbase_url = ["{a}", "{b}"]\n'
        f'cache = false\n[vlm]\nbase_url = "{a}"\nmodel = "v"\n'
    )
    cfg = load_config(path, env={})
    assert cfg.get("llm.base_url") == [a, b] and cfg.get("vlm.base_url") == a
    llm = build_llm(cfg)
    assert isinstance(llm, OpenAICompatLLM) and llm.base_urls == (a, b)

    env = {"HAMMR_LLM__BASE_URL": f"{a}, {b}", "HAMMR_VLM__BASE_URL": f"{b},{a}"}
    cfg = load_config(path, env=env)
    assert cfg.get("llm.base_url") == [a, b] and cfg.get("vlm.base_url") == [b, a]
    env = {"HAMMR_LLM__BASE_URL": f'["{a}", "{b}"]'}  # a TOML array works too
    assert load_config(path, env=env).get("llm.base_url") == [a, b]
    env = {"HAMMR_LLM__BASE_URL": a}  # a single URL stays a string
    assert load_config(path, env=env).get("llm.base_url") == a

    vlm_cfg = load_config(
        path, env={"HAMMR_VLM__BASE_URL": f"{a},{b}", "HAMMR_TOOLS__CAPTION__BACKEND": "vlm"}
    )
    caption = build_backends(vlm_cfg).backends["caption"]
    assert isinstance(caption, VLMBackend) and caption.llm.base_urls == (a, b)
    assert repr(caption) == f"VLMBackend(base_url={[a, b]!r}, model='v')"


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"HAMMR_LLM__BASE_URL": "http://a/v1,localhost:8000/v1"},
            "llm.base_url (from $HAMMR_LLM__BASE_URL): 'localhost:8000/v1' is not an http(s) URL",
        ),
        (
            {"HAMMR_VLM__BASE_URL": '["http://a/v1", "ftp://b/v1"]'},
            "vlm.base_url (from $HAMMR_VLM__BASE_URL): 'ftp://b/v1' is not an http(s) URL",
        ),
        (
            {"HAMMR_LLM__BASE_URL": '["http://a/v1", 3]'},
            "llm.base_url (from $HAMMR_LLM__BASE_URL): entry 3 is not a string",
        ),
        ({"HAMMR_LLM__BASE_URL": "[]"}, "llm.base_url (from $HAMMR_LLM__BASE_URL): lists no URL"),
    ],
)
def test_malformed_urls_are_refused_in_one_line(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, env={"HAMMR_CONFIG": "", **env})
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_config_show_lists_the_replicas(tmp_path: Path) -> None:
    a, b = "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"
    r = CliRunner().invoke(
        main, ["config", "show"], env={"HAMMR_CONFIG": "", "HAMMR_LLM__BASE_URL": f"{a},{b}"}
    )
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("llm.base_url = "))
    assert line == f"llm.base_url = ['{a}', '{b}']    # $HAMMR_LLM__BASE_URL"
    r = CliRunner().invoke(
        main, ["config", "show"], env={"HAMMR_CONFIG": "", "HAMMR_LLM__BASE_URL": "nope"}
    )
    assert r.exit_code != 0 and "llm.base_url (from $HAMMR_LLM__BASE_URL): 'nope'" in r.output


async def test_cache_key_does_not_depend_on_the_replica_with_scripted_servers(
    servers: list[FakeServer], tmp_path: Path
) -> None:
    a, b = servers[0], servers[1]
    a.responder = b.responder = delayed(0, "stored")
    single = CachedLLM(client([a.url]), tmp_path / "llm.sqlite")
    first = await single.complete(req("same question"))
    assert first.text == "stored" and not first.cached
    pooled = CachedLLM(client([b.url, a.url]), tmp_path / "llm.sqlite")
    assert pooled.name == single.name == "fake-model"
    again = await pooled.complete(req("same question"))
    assert again.cached and again.text == "stored"
    assert len(a.seen) + len(b.seen) == 1


# -- the served VLM backend ------------------------------------------------------------------


async def test_vlm_backend_uses_every_replica_with_scripted_servers(
    servers: list[FakeServer],
) -> None:
    a, b = servers[0], servers[1]
    a.responder = b.responder = delayed(0.1, "a red square")
    vlm = VLMBackend([a.url, b.url], "m", api_key_env="", concurrency=4, max_retries=1)
    images = [Image(PILImage.new("RGB", (8 + i, 8), (200, 0, 0))) for i in range(8)]
    assert await vlm.caption(images) == ["a red square"] * 8
    # the first four are routed two and two; how the rest fall depends on which answers first
    assert len(a.seen) >= 2 and len(b.seen) >= 2 and len(a.seen) + len(b.seen) == 8
    assert max(a.peak_active, b.peak_active) <= 2  # 4 in flight over 2 replicas
    a.close()
    assert await vlm.caption(images[:4]) == ["a red square"] * 4  # b answers for both
    await vlm.aclose()


def test_evaluation_keeps_eight_questions_per_replica_in_flight() -> None:
    from hammr.config import load_config
    from hammr.factory import default_concurrency

    def served(urls: str) -> int:
        env = {"HAMMR_LLM__BACKEND": "openai", "HAMMR_LLM__BASE_URL": urls}
        return default_concurrency(load_config(None, env=env))

    assert served("http://a:8000/v1") == 8
    assert served("http://a:8000/v1,http://b:8000/v1,http://c:8000/v1") == 24
    assert default_concurrency(load_config(None, env={})) == 1  # the embedded model


# -- two real llama.cpp replicas, one killed mid-request -------------------------------------


async def test_an_eval_over_two_real_replicas_loses_nothing_when_one_is_killed_mid_request(
    real_llm_server: LocalLlamaServer, spare_llm_server: LocalLlamaServer, tmp_path: Path
) -> None:
    """An evaluation of an agent (grammar on) over a pool of two llama.cpp servers, its 4
    samples in flight at once; once the second replica is writing replies, it is killed by PID.
    Every sample is answered and stored; the requests cut off moved to the first replica."""
    survivor, doomed = real_llm_server, spare_llm_server
    pool = ReplicaPool([survivor.base_url, doomed.base_url])
    llm = real_client(pool, server="llamacpp")  # one try: only failover can save a request
    agent = ReActAgent(
        name="Sizer",
        description="Answers questions about an image's size.",
        instructions="Answer questions about the image's size: measure it, then finish.",
        tools=[ImageSize],
        examples=[SIZE_EXAMPLE],
        max_steps=2,
    )
    entry = SuiteEntry(
        name="sizes",
        dataset="sizes",
        file="sizes.jsonl",
        metric="exact_match",
        question_type="other",
    )
    samples = []
    for i in range(4):
        path = tmp_path / f"{i}.png"
        PILImage.new("RGB", (40 + i, 30), (30 * i, 90, 160)).save(path)
        question = f"How {'wide' if i % 2 else 'tall'} is the image?"
        answer = str(40 + i if i % 2 else 30)
        samples.append(
            (
                entry,
                Sample(
                    id=f"s{i}",
                    dataset="sizes",
                    question=question,
                    answers=(answer,),
                    images={"image": path},
                ),
            )
        )
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.open_run("pool", "sizes", "Sizer")
        run = asyncio.create_task(
            run_eval(
                agent,
                samples,
                store=store,
                run_name="pool",
                ctx_factory=lambda: ToolContext(llm=llm),
                concurrency=4,
            )
        )

        async def decoding() -> bool:
            assert not run.done(), "the run ended before replica 2 replied"
            return await asyncio.to_thread(doomed.decoding) >= 1

        await async_wait_until(decoding, "replica 2 to reply")
        in_flight = pool.status()[1].outstanding
        doomed.kill()
        out = await run
        records = store.records("pool", limit=None)
    assert in_flight >= 1
    assert (out.total, out.ran) == (4, 4)
    assert len(records) == 4
    for rec in records:
        assert rec.status in ("finished", "step_limit"), (rec.id, rec.status, rec.error)
        assert rec.trace is not None
        assert all(s.error_kind != "llm_failure" for s in rec.trace.steps), rec.error
    first, second = pool.status()
    assert first.up and first.requests > 0
    assert not second.up and second.reason in (CLOSED_EARLY, "connection refused")
    assert second.requests >= in_flight
    await llm.aclose()
