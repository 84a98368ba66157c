"""A served model's slots (hammr.backends.llm.slots): what each server says, what a pool of
them adds up to, the lanes questions hold, and the id_slot a question's calls carry. Scripted
servers play llama.cpp's /props and SGLang's /get_server_info and their faults; the real
llama.cpp server shows a conversation keeping its slot (its cache figures)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import httpx
import pytest

from fake_openai_server import FakeServer, Reply
from hammr.backends.llm.base import LLMRequest, Message, run_sync
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.backends.llm.slots import (
    DEFAULT_PER_REPLICA,
    Lane,
    conversation_lane,
    current_lane,
    probe_slots,
)
from hammr.backends.pool import ReplicaPool
from hammr.config import load_config
from hammr.factory import resolve_concurrency
from patience import HANG_S
from real_server import real_client, real_llm_server  # noqa: F401  (fixture)


def pins(lanes: Sequence[Lane]) -> list[tuple[str, int | None]]:
    return [(lane.url, lane.slot) for lane in lanes]


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    made = [FakeServer() for _ in range(2)]
    yield made
    for s in made:
        s.close()


def test_llamacpp_props_give_the_slots_and_pinned_lanes(servers: list[FakeServer]) -> None:
    a = servers[0]
    a.get_replies["/props"] = Reply(body={"total_slots": 3})
    found = run_sync(probe_slots([a.url], "auto"))
    assert found.total == 3 and found.known
    assert pins(found.lanes()) == [(a.url, 0), (a.url, 1), (a.url, 2)]
    assert [lane.index for lane in found.lanes()] == [0, 1, 2]
    assert found.reason() == "the server runs 3 requests at once (llama.cpp /props)"
    assert a.gets == ["/props"]


def test_a_pool_sums_replicas_that_report_different_slot_counts(
    servers: list[FakeServer],
) -> None:
    a, b = servers
    a.get_replies["/props"] = Reply(body={"total_slots": 2})
    b.get_replies["/props"] = Reply(body={"total_slots": 4})
    found = run_sync(probe_slots([a.url, b.url], "llamacpp"))
    assert found.total == 6
    # interleaved: the first lanes spread over both replicas
    assert pins(found.lanes()) == [
        (a.url, 0), (b.url, 0), (a.url, 1), (b.url, 1), (b.url, 2), (b.url, 3),
    ]  # fmt: skip
    assert "2 of 2 servers run 2 + 4 requests at once" in found.reason()


def test_sglang_says_its_running_requests_and_is_not_pinned(servers: list[FakeServer]) -> None:
    a = servers[0]
    a.get_replies["/get_server_info"] = Reply(body={"max_running_requests": 5})
    found = run_sync(probe_slots([a.url], "auto"))
    assert found.total == 5
    assert {lane.slot for lane in found.lanes()} == {None}
    assert "SGLang /get_server_info" in found.reason()
    assert a.gets == ["/props", "/get_server_info"]


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (None, "/props: HTTP 404"),
        (Reply(body={"total_slots": 0}), "total_slots = 0"),
        (Reply(body={"total_slots": "two"}), "total_slots = 'two'"),
        (Reply(body=b"not json"), "/props: not JSON"),
        (Reply(status=500, body={"error": "x"}), "/props: HTTP 500"),
    ],
)
def test_a_server_that_does_not_say_or_lies_gets_the_default(
    servers: list[FakeServer], reply: Reply | None, said: str
) -> None:
    a = servers[0]
    if reply is not None:
        a.get_replies["/props"] = reply
    found = run_sync(probe_slots([a.url], "llamacpp"))
    assert not found.known and found.total == DEFAULT_PER_REPLICA
    assert pins(found.lanes()) == [(a.url, None)] * DEFAULT_PER_REPLICA
    assert len(set(found.lanes())) == DEFAULT_PER_REPLICA  # each its own HTTP client
    assert said in found.reason() and "which did not say" in found.reason()


def test_props_that_time_out_get_the_default(servers: list[FakeServer]) -> None:
    """The scripted /props answers only after the safety net: the probe gives up at its own
    limit and says so (the outcome, not how fast)."""
    a = servers[0]
    a.get_replies["/props"] = Reply(body={"total_slots": 2}, delay=HANG_S)
    found = run_sync(probe_slots([a.url], "auto", timeout_s=0.5))
    assert found.total == DEFAULT_PER_REPLICA and "/props timed out" in found.reason()
    assert a.gets == ["/props"]  # a server that hangs is not asked again the SGLang way


def test_a_server_that_is_down_gets_the_default() -> None:
    closed = FakeServer()
    closed.close()
    found = run_sync(probe_slots([closed.url], "auto"))
    assert found.total == DEFAULT_PER_REPLICA and "ConnectError" in found.reason()


def test_hosted_apis_are_not_asked(servers: list[FakeServer]) -> None:
    a = servers[0]
    found = run_sync(probe_slots([a.url], "openai"))
    assert found.total == DEFAULT_PER_REPLICA and a.gets == []


def test_resolve_concurrency_from_the_configuration(
    servers: list[FakeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    a = servers[0]
    a.get_replies["/props"] = Reply(body={"total_slots": 2})
    monkeypatch.setenv("HAMMR_CONFIG", "")
    monkeypatch.setenv("HAMMR_LLM__BACKEND", "openai")
    monkeypatch.setenv("HAMMR_LLM__BASE_URL", a.url)
    monkeypatch.setenv("HAMMR_LLM__MODEL", "fake")
    cfg = load_config(None)
    got = resolve_concurrency(cfg)
    assert (got.n, pins(got.lanes)) == (2, [(a.url, 0), (a.url, 1)])
    given = resolve_concurrency(cfg, 5)
    assert (given.n, given.why) == (5, "--concurrency")
    assert pins(given.lanes) == [(a.url, 0), (a.url, 1)] * 2 + [(a.url, 0)]
    assert len(set(given.lanes)) == 5  # each question in flight has its own lane
    monkeypatch.setenv("HAMMR_LLM__BACKEND", "embedded")
    embedded = resolve_concurrency(load_config(None))
    assert (embedded.n, embedded.lanes) == (1, ())
    assert "one slot" in embedded.why


def test_the_lane_travels_with_the_task_and_is_reset() -> None:
    seen: list[Lane | None] = []

    async def inner() -> None:
        seen.append(current_lane())

    async def go() -> None:
        with conversation_lane(Lane("http://x", 1)):
            await asyncio.gather(inner(), asyncio.create_task(inner()))
        seen.append(current_lane())

    asyncio.run(go())
    assert seen == [Lane("http://x", 1), Lane("http://x", 1), None]


def _ask(llm: OpenAICompatLLM, lane: Lane | None) -> None:
    async def go() -> None:
        with conversation_lane(lane):
            await llm.complete(LLMRequest((Message("user", "hi"),), max_tokens=4))
        await llm.aclose()

    asyncio.run(go())


def test_a_lane_sends_its_calls_to_its_replica_with_its_slot(servers: list[FakeServer]) -> None:
    a, b = servers
    llm = OpenAICompatLLM([a.url, b.url], "fake", api_key_env=None, max_retries=1)
    for _ in range(3):
        _ask(llm, Lane(b.url, 1))
    assert a.seen == [] and [s.body["id_slot"] for s in b.seen] == [1, 1, 1]
    _ask(llm, None)  # no lane: as the pool chooses, no slot named
    new = [*a.seen, *b.seen[3:]]
    assert len(new) == 1 and "id_slot" not in new[0].body
    _ask(llm, Lane(a.url))  # a lane without a slot (a server that takes none)
    assert "id_slot" not in a.seen[-1].body


def test_a_lane_whose_replica_is_down_goes_elsewhere_without_its_slot(
    servers: list[FakeServer],
) -> None:
    a, b = servers
    down = b.url
    b.close()
    llm = OpenAICompatLLM(ReplicaPool([a.url, down]), "fake", api_key_env=None, max_retries=1)
    _ask(llm, Lane(down, 1))
    assert len(a.seen) == 1 and "id_slot" not in a.seen[0].body


def test_the_pool_prefers_a_lane_replica_only_while_it_is_up() -> None:
    pool = ReplicaPool(["http://a", "http://b"])

    async def pick(prefer: str, avoid: tuple[str, ...] = ()) -> str:
        async with pool.acquire(avoid=avoid, prefer=prefer) as url:
            return url

    assert [asyncio.run(pick("http://b/")) for _ in range(3)] == ["http://b"] * 3
    assert asyncio.run(pick("http://b", avoid=("http://b",))) == "http://a"
    pool.mark_down("http://b", "connection refused")
    assert asyncio.run(pick("http://b")) == "http://a"
    assert asyncio.run(pick("http://unknown")) in ("http://a", "http://b")


def test_a_real_llamacpp_server_says_its_slots_and_a_conversation_keeps_its_slot(
    real_llm_server,  # noqa: F811
) -> None:
    """llama.cpp's own server (2 slots): /props sets the concurrency; two conversations, one
    per lane, interleaved turn by turn, each find their earlier prompt in their slot's cache
    (the reply's cache figures), and /slots shows each conversation in its own slot."""
    server = real_llm_server
    found = run_sync(probe_slots([server.base_url], "auto"))
    assert found.total == 2 and [lane.slot for lane in found.lanes()] == [0, 1]
    llm = real_client(server.base_url, server="llamacpp")
    # the first conversation in the second slot: where llama.cpp, left to choose an idle
    # slot, would not have put it
    lanes = found.lanes()[::-1]
    history: list[list[Message]] = [
        [Message("system", "You write one short line about the sea. " * 20)],
        [Message("system", "You write one short line about the mountains. " * 30)],
    ]
    cached: list[list[int]] = [[], []]
    prompts: list[list[int]] = [[], []]

    async def turn(i: int, n: int) -> None:
        history[i].append(Message("user", f"Line {n}, please."))
        with conversation_lane(lanes[i]):
            reply = await llm.complete(LLMRequest(tuple(history[i]), max_tokens=8, temperature=0.0))
        history[i].append(Message("assistant", reply.text))
        cached[i].append(reply.cached_prompt_tokens or 0)
        prompts[i].append(reply.usage.prompt_tokens)

    async def go() -> list[dict[str, object]]:
        for n in range(3):
            for i in (0, 1):
                await turn(i, n)
        await llm.aclose()
        async with httpx.AsyncClient(timeout=60) as client:
            slots = (await client.get(server.url + "/slots")).json()
        return slots if isinstance(slots, list) else []

    slots = asyncio.run(go())
    for i in (0, 1):
        # every later turn found the conversation's previous prompt in its slot's cache
        for n in (1, 2):
            assert cached[i][n] >= prompts[i][n - 1] - 1, (i, cached, prompts)
    # each slot last held its own conversation's last prompt (the slot counts a few tokens
    # of the reply's start beside the prompt; the conversations differ by 90)
    held = {s["id"]: s.get("n_prompt_tokens") or 0 for s in slots}
    assert abs(held[1] - prompts[0][-1]) <= 8 and abs(held[0] - prompts[1][-1]) <= 8, (
        held,
        prompts,
    )
