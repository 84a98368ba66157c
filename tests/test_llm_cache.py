from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PIL import Image as PILImage

from hammr.backends.llm.base import ImagePart, LLMError, LLMRequest, LLMResponse, Message
from hammr.backends.llm.cache import CachedLLM, request_key
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.values import Image


def req(text: str = "hello", **kw: object) -> LLMRequest:
    return LLMRequest(messages=(Message("user", text),), **kw)  # type: ignore[arg-type,unused-ignore]


def image(color: tuple[int, int, int]) -> Image:
    return Image(PILImage.new("RGB", (4, 3), color))


async def test_second_identical_request_is_a_hit(tmp_path: Path) -> None:
    inner = ScriptedLLM(["first", "second"])
    llm = CachedLLM(inner, tmp_path / "cache.sqlite")
    a = await llm.complete(req())
    b = await llm.complete(req())
    assert inner.calls == 1
    assert a.text == b.text == "first"
    assert not a.cached and b.cached
    assert b.usage == a.usage and b.model == a.model and b.finish_reason == a.finish_reason
    llm.close()


async def test_any_field_change_is_a_miss(tmp_path: Path) -> None:
    inner = ScriptedLLM(lambda r: f"t={r.temperature}")
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    await llm.complete(req(temperature=0.0))
    r = await llm.complete(req(temperature=0.7))
    assert r.text == "t=0.7" and not r.cached
    for variant in (
        req(max_tokens=9),
        req(stop=("x",)),
        req(grammar='root ::= "a"'),
        req(json_schema={"type": "string"}),
        req(seed=1),
        req("other prompt"),
    ):
        assert not (await llm.complete(variant)).cached
    assert inner.calls == 8
    llm.close()


def test_key_includes_model_name() -> None:
    assert request_key("a", req()) != request_key("b", req())
    assert request_key("a", req()) == request_key("a", req())


async def test_images_keyed_by_pixels(tmp_path: Path) -> None:
    inner = ScriptedLLM(lambda r: "seen")
    llm = CachedLLM(inner, tmp_path / "c.sqlite")

    def with_image(img: Image) -> LLMRequest:
        return LLMRequest(messages=(Message("user", ("what?", ImagePart(img))),))

    await llm.complete(with_image(image((255, 0, 0))))
    assert (await llm.complete(with_image(image((255, 0, 0))))).cached
    assert not (await llm.complete(with_image(image((0, 255, 0))))).cached
    assert inner.calls == 2
    llm.close()


async def test_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.sqlite"
    inner1 = ScriptedLLM(["stored"])
    async with CachedLLM(inner1, path) as llm1:
        await llm1.complete(req())
    inner2 = ScriptedLLM(["never"])
    llm2 = CachedLLM(inner2, path)
    r = await llm2.complete(req())
    assert r.text == "stored" and r.cached and inner2.calls == 0
    llm2.close()


async def test_errors_are_not_cached(tmp_path: Path) -> None:
    inner = ScriptedLLM([])
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    with pytest.raises(LLMError):
        await llm.complete(req())
    inner.script = ["recovered"]
    r = await llm.complete(req())
    assert r.text == "recovered" and not r.cached
    llm.close()


class SlowScripted(ScriptedLLM):
    async def complete(self, request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0.02)
        return await super().complete(request)


async def test_concurrent_identical_requests(tmp_path: Path) -> None:
    inner = SlowScripted(["answer"])
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    out = await asyncio.gather(*(llm.complete(req()) for _ in range(10)))
    assert [r.text for r in out] == ["answer"] * 10
    assert inner.calls == 1
    assert sum(not r.cached for r in out) == 1
    assert not llm._inflight
    llm.close()


async def test_concurrent_distinct_requests(tmp_path: Path) -> None:
    inner = SlowScripted(lambda r: r.messages[0].text().upper())
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    out = await asyncio.gather(*(llm.complete(req(f"q{i % 5}")) for i in range(20)))
    assert [r.text for r in out] == [f"Q{i % 5}" for i in range(20)]
    assert inner.calls == 5
    llm.close()


def test_delegates_name_and_grammar_support(tmp_path: Path) -> None:
    inner = ScriptedLLM(["x"], model="tiny")
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    assert llm.name == "tiny" and llm.grammar_support == "none"
    llm.close()
