"""Agents that see: images reach a vision model as content parts, in order, within limits,
and every request repeats the previous one byte for byte (the OpenAI-compatible test server on
127.0.0.1 records what arrives). A text-only model gets exactly the messages it always had."""

from __future__ import annotations

import base64
import io
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from conftest import EXAMPLES
from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.agent import LAST_STEP_NOTE, ReActAgent
from hammr.backends.llm.base import (
    DEFAULT_MAX_IMAGE_PIXELS,
    LLM,
    ImagePart,
    LLMRequest,
    Message,
    VisionLimits,
    sees_images,
    vision_limits_of,
)
from hammr.backends.llm.cache import CachedLLM, request_key
from hammr.backends.llm.openai_compat import OpenAICompatLLM
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import ConfigError, load_config
from hammr.factory import build_llm
from hammr.tools.base import ToolContext, tool
from hammr.tools.image_tools import CropImage, ZoomIn
from hammr.values import Box, Image
from hammr.vision import looks_like_vlm

PNG_URL = "data:image/png;base64,"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def noise(w: int = 64, h: int = 48, seed: int = 0) -> Image:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    return Image(PILImage.fromarray(pixels, "RGB"))


def halves(w: int, h: int) -> Image:
    """Left half red, right half blue."""
    pixels = np.zeros((h, w, 3), dtype=np.uint8)
    pixels[:, : w // 2] = (255, 0, 0)
    pixels[:, w // 2 :] = (0, 0, 255)
    return Image(PILImage.fromarray(pixels, "RGB"))


def decode(part: dict[str, Any]) -> np.ndarray[Any, Any]:
    """The pixels of an image_url content part, which must be a PNG data URL."""
    assert part["type"] == "image_url", part
    url = part["image_url"]["url"]
    assert url.startswith(PNG_URL)
    with PILImage.open(io.BytesIO(base64.b64decode(url[len(PNG_URL) :]))) as im:
        assert im.format == "PNG"
        return np.asarray(im.convert("RGB"))


def pixels(image: Image) -> np.ndarray[Any, Any]:
    return np.asarray(image.pixels.convert("RGB"))


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def bodies(server: FakeServer) -> list[dict[str, Any]]:
    return [s.body for s in server.seen]


def assert_prefix_chain(sent: list[dict[str, Any]]) -> None:
    """Each request's messages are a byte-identical prefix of the next request's."""
    for k, (a, b) in enumerate(itertools.pairwise(sent)):
        ma, mb = a["messages"], b["messages"]
        assert len(mb) == len(ma) + 2, k
        for i, (x, y) in enumerate(zip(ma, mb, strict=False)):
            assert json.dumps(x) == json.dumps(y), (k, i)


def image_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        p
        for m in body["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]


def play(server: FakeServer, *replies: str, completion: bool = False) -> None:
    server.script = [Reply(body=ok_body(r, completion=completion)) for r in replies]


def vlm(server: FakeServer, **kw: Any) -> OpenAICompatLLM:
    kw.setdefault("vision", True)
    return OpenAICompatLLM(server.url, "fake-vlm", api_key_env=None, max_retries=1, **kw)


def looker(llm: Any, **kw: Any) -> ReActAgent:
    return ReActAgent("Looker", "Looks.", "Answer.", [CropImage, ZoomIn], llm=llm, **kw)


CROP = "[Thought]: look closer\n[Act]: c = CropImage(image, [[8, 8, 16, 16]])"
ZOOM = "[Thought]: zoom\n[Act]: z = ZoomIn(image, [0, 0, 8, 6], 2)"
FINISH = "[Thought]: done\n[Finish]: red"
TASK = "Question: What colour?\nVariables:\n- image: image 64x48"
OBS_CROP = (
    "[Observe]: image 16x16 (region left:8/top:8/width:16/height:16 of the original) "
    "(stored in 'c')"
)
OBS_ZOOM = (
    "[Observe]: image 16x12 (region left:0/top:0/width:8/height:6 of the original, zoom x2) "
    "(stored in 'z')"
)


# -- images arrive, in order ------------------------------------------------------------------


async def test_input_and_observed_images_arrive_as_parts_in_order(server: FakeServer) -> None:
    play(server, CROP, ZOOM, FINISH)
    image = noise()
    async with vlm(server) as llm:
        r = await looker(llm).run("What colour?", {"image": image})
    assert r.answer == "red"
    first, second, third = bodies(server)
    # the task message: the text naming the variables, then each image after its label
    task = first["messages"][1]
    assert task["role"] == "user"
    assert task["content"][0] == text(TASK + "\nimage 'image' (64x48):")
    assert len(task["content"]) == 2
    assert np.array_equal(decode(task["content"][1]), pixels(image))
    # the observation after the crop carries the crop, after the observation text
    obs = second["messages"][3]
    assert obs["role"] == "user" and len(obs["content"]) == 2
    assert obs["content"][0] == text(OBS_CROP + "\nimage 'c' (16x16):")
    assert np.array_equal(decode(obs["content"][1]), pixels(image)[8:24, 8:24])
    # and the zoom, as the tool made it
    zoomed = await ZoomIn.invoke(
        {"image": image, "box": Box(0, 0, 8, 6), "factor": 2.0}, ToolContext()
    )
    obs = third["messages"][5]
    assert obs["content"][0] == text(OBS_ZOOM + "\nimage 'z' (16x12):")
    assert decode(obs["content"][1]).shape == (12, 16, 3)
    assert np.array_equal(decode(obs["content"][1]), pixels(zoomed.value))
    # three images in all, in the order they were seen
    assert [decode(p).shape for p in image_parts(third)] == [(48, 64, 3), (16, 16, 3), (12, 16, 3)]
    assert_prefix_chain(bodies(server))


async def test_a_list_of_crops_is_shown_item_by_item(server: FakeServer) -> None:
    play(server, "[Act]: crops = CropImage(image, [[0, 0, 8, 8], [16, 8, 10, 6]])", FINISH)
    image = noise()
    async with vlm(server) as llm:
        await looker(llm).run("What colour?", {"image": image})
    obs = bodies(server)[1]["messages"][3]["content"]
    assert [p["type"] for p in obs] == ["text", "image_url", "text", "image_url"]
    assert obs[0]["text"].endswith("(stored in 'crops')\nimage 'crops[0]' (8x8):")
    assert obs[2] == text("\nimage 'crops[1]' (10x6):")
    assert np.array_equal(decode(obs[1]), pixels(image)[0:8, 0:8])
    assert np.array_equal(decode(obs[3]), pixels(image)[8:14, 16:26])


async def test_images_are_downscaled_to_the_pixel_limit(server: FakeServer) -> None:
    play(server, "[Act]: c = CropImage(image, [[0, 0, 400, 400]])", FINISH)
    image = halves(2000, 1000)
    async with vlm(server, vision_limits=VisionLimits(max_image_pixels=20_000)) as llm:
        await looker(llm).run("What colour?", {"image": image})
    first, second = bodies(server)
    task = first["messages"][1]["content"]
    assert task[0]["text"].endswith("\nimage 'image' (2000x1000, shown at 200x100):")
    shown = decode(task[1])
    assert shown.shape == (100, 200, 3)  # sqrt(20000 / 2000000) = 0.1 of each side
    assert tuple(shown[50, 10]) == (255, 0, 0) and tuple(shown[50, 190]) == (0, 0, 255)
    obs = second["messages"][3]["content"]
    assert obs[0]["text"].endswith("\nimage 'c' (400x400, shown at 141x141):")
    crop = decode(obs[1])
    assert crop.shape == (141, 141, 3) and crop.shape[0] * crop.shape[1] <= 20_000
    assert (crop == (255, 0, 0)).all()  # the crop lies in the red half
    # the model is told the real size; the variable keeps every pixel
    assert "- image: image 2000x1000" in task[0]["text"]


async def test_count_limit_leaves_new_images_out_and_says_so_in_the_new_turn(
    server: FakeServer,
) -> None:
    play(
        server,
        "[Act]: crops = CropImage(image, [[0, 0, 8, 8], [8, 8, 8, 8], [16, 16, 8, 8]])",
        ZOOM,
        "[Act]: w = CropImage(crops[2], [[16, 16, 4, 4]])",
        FINISH,
    )
    image = noise()
    async with vlm(server, vision_limits=VisionLimits(max_images=2)) as llm:
        r = await looker(llm).run("What colour?", {"image": image})
    assert r.answer == "red"
    sent = bodies(server)
    # the input image and crops[0] fill the two places; crops[1] and crops[2] are left out
    obs = sent[1]["messages"][3]["content"]
    assert [p["type"] for p in obs] == ["text", "image_url", "text"]
    assert obs[0]["text"].endswith("\nimage 'crops[0]' (8x8):")
    assert np.array_equal(decode(obs[1]), pixels(image)[0:8, 0:8])
    assert obs[2] == text(
        "\n(images 'crops[1]', 'crops[2]' are not shown: this conversation already shows 2 "
        "images, the most allowed; their variables still work in tool calls)"
    )
    # later images are left out too, said in their own (new) turn, which stays plain text
    assert sent[2]["messages"][5]["content"] == (
        OBS_ZOOM + "\n(image 'z' is not shown: this conversation already shows 2 images, "
        "the most allowed; its variable still works in tool calls)"
    )
    # a variable whose image was never shown still works in a tool call
    assert r.trace.steps[2].error is None and r.trace.steps[2].output_var == "w"
    assert all(len(image_parts(b)) <= 2 for b in sent)
    assert len(image_parts(sent[-1])) == 2
    # nothing earlier was dropped, re-encoded or moved
    assert_prefix_chain(sent)


async def test_the_last_step_note_keeps_the_images(server: FakeServer) -> None:
    play(server, CROP, FINISH)
    image = noise()
    async with vlm(server) as llm:
        r = await looker(llm, max_steps=2).run("What colour?", {"image": image})
    assert r.trace.steps[-1].forced
    _, last = bodies(server)
    obs = last["messages"][-1]["content"]
    assert [p["type"] for p in obs] == ["text", "image_url", "text"]
    assert obs[0] == text(OBS_CROP + "\nimage 'c' (16x16):")
    assert np.array_equal(decode(obs[1]), pixels(image)[8:24, 8:24])
    assert obs[2] == text("\n" + LAST_STEP_NOTE)
    assert_prefix_chain(bodies(server))


async def test_sub_agents_see_their_own_inputs(server: FakeServer) -> None:
    child = ReActAgent(
        "Child", "Answers about an image.", "You are the child.", [CropImage], llm=None
    )
    parent = ReActAgent("Parent", "d", "You are the parent.", [CropImage, child])
    replies = {
        "parent": [CROP, "[Act]: a = Child('What colour is it?', c)", FINISH],
        "child": ["[Thought]: it is red\n[Finish]: red"],
    }

    def respond(seen: Seen) -> Reply:
        who = "child" if "You are the child." in seen.body["messages"][0]["content"] else "parent"
        return Reply(body=ok_body(replies[who].pop(0)))

    server.responder = respond
    image = noise()
    async with vlm(server) as llm:
        r = await parent.run("What colour?", {"image": image}, llm=llm)
    assert r.answer == "red"
    [child_request] = [
        b for b in bodies(server) if "You are the child." in b["messages"][0]["content"]
    ]
    task = child_request["messages"][1]["content"]
    assert task[0] == text(
        "Question: What colour is it?\nVariables:\n"
        "- image: image 16x16 (region left:8/top:8/width:16/height:16 of the original)\n"
        "image 'image' (16x16):"
    )
    assert np.array_equal(decode(task[1]), pixels(image)[8:24, 8:24])
    # the child's answer comes back to the parent as text
    parents = [b for b in bodies(server) if "You are the parent." in b["messages"][0]["content"]]
    assert parents[-1]["messages"][-1]["content"] == "[Observe]: red (stored in 'a')"
    assert_prefix_chain(parents)


async def test_an_image_seen_before_is_not_attached_again() -> None:
    llm = ScriptedLLM(["[Act]: c = CropImage(image, [[0, 0, 64, 48]])", FINISH], vision=True)
    await looker(llm).run("What colour?", {"image": noise()})
    obs = llm.requests[1].messages[-1]
    assert obs.content == (
        "[Observe]: image 64x48 (region left:0/top:0/width:64/height:48 of the original) "
        "(stored in 'c')\nimage 'c' (64x48): the same as image 'image'"
    )
    assert sum(len(m.images()) for m in llm.requests[1].messages) == 1


# -- text-only models: today's messages, byte for byte ----------------------------------------

TEXT_ONLY_MESSAGES = [
    {"role": "user", "content": TASK},
    {"role": "assistant", "content": CROP},
    {"role": "user", "content": OBS_CROP},
    {"role": "assistant", "content": ZOOM},
    {"role": "user", "content": OBS_ZOOM},
]
"""What the agent sent (after the system prompt) before models could see: recorded from it."""


@pytest.mark.parametrize(
    "make",
    [
        # a VLM's name, but vision off
        lambda s: OpenAICompatLLM(s.url, "Qwen/Qwen2.5-VL-7B-Instruct", api_key_env=None),
        # vision asked of a completion endpoint, which takes text only
        lambda s: OpenAICompatLLM(s.url, "m", api_key_env=None, vision=True, mode="completion"),
    ],
    ids=["vision-off", "completion"],
)
async def test_text_only_requests_are_unchanged(
    server: FakeServer, make: Callable[[FakeServer], OpenAICompatLLM]
) -> None:
    completion = make(server).mode == "completion"
    play(server, CROP, ZOOM, FINISH, completion=completion)
    async with make(server) as llm:
        assert not sees_images(llm)
        agent = looker(llm)
        r = await agent.run("What colour?", {"image": noise()})
    assert r.answer == "red"
    sent = bodies(server)
    system = {"role": "system", "content": agent.system_prompt()}
    if not completion:
        for k, n in enumerate((1, 3, 5)):
            assert sent[k]["messages"] == [system, *TEXT_ONLY_MESSAGES[:n]]
            assert sent[k]["stop"] == ["[Observe]", "\n[Observe"]
            assert sent[k]["max_tokens"] == 256 and sent[k]["temperature"] == 0.0
            assert set(sent[k]) == {"model", "messages", "max_tokens", "temperature", "stop"}
    else:
        expected = "\n".join([system["content"], *(m["content"] for m in TEXT_ONLY_MESSAGES)])
        assert sent[-1]["prompt"] == expected + "\n"
        assert "<image>" not in sent[-1]["prompt"]


async def test_text_only_last_step_note_is_unchanged(server: FakeServer) -> None:
    play(server, CROP, FINISH)
    async with vlm(server, vision=False) as llm:
        await looker(llm, max_steps=2).run("What colour?", {"image": noise()})
    assert bodies(server)[1]["messages"][-1]["content"] == OBS_CROP + "\n" + LAST_STEP_NOTE


@tool
def Width(image: Image) -> int:
    """The width of an image in pixels."""
    return image.width


async def test_a_seeing_model_gets_plain_text_turns_where_there_is_no_image(
    server: FakeServer,
) -> None:
    play(server, "[Act]: w = Width(image)", FINISH, FINISH)
    async with vlm(server) as llm:
        agent = ReActAgent("Measurer", "d", "Answer.", [Width], llm=llm)
        await agent.run("How wide?", {"image": noise()})
        await agent.run("How wide?", {"note": "hello"})
    first, second, third = bodies(server)
    assert [p["type"] for p in first["messages"][1]["content"]] == ["text", "image_url"]
    assert second["messages"][3]["content"] == "[Observe]: 64 (stored in 'w')"
    assert third["messages"][1]["content"] == "Question: How wide?\nVariables:\n- note: hello"


# -- deciding whether the model sees ----------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "Qwen/Qwen2-VL-7B-Instruct",
        "Qwen/Qwen2.5-VL-72B-Instruct-AWQ",
        "Qwen/Qwen3-VL-32B-Instruct",
        "qwen2.5vl:7b",
        "Qwen/Qwen3.5-397B-A17B",
        "llava-hf/llava-onevision-qwen2-7b-ov-hf",
        "llava:13b",
        "OpenGVLab/InternVL3-8B",
        "google/gemma-3-27b-it",
        "gemma3:12b",
        "gpt-4o-2024-08-06",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-5-mini",
        "gemini-2.5-flash",
        "models/gemini-2.0-flash",
        "mistralai/Pixtral-12B-2409",
        "HuggingFaceM4/idefics2-8b",
        "allenai/Molmo-7B-D-0924",
        "microsoft/Phi-3.5-vision-instruct",
        "microsoft/Phi-4-multimodal-instruct",
        "openbmb/MiniCPM-V-2_6",
        "HuggingFaceTB/SmolVLM-Instruct",
        "meta-llama/Llama-3.2-11B-Vision-Instruct",
        "llama3.2-vision",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "moonshotai/Kimi-VL-A3B-Instruct",
        "deepseek-ai/deepseek-vl2-small",
        "THUDM/GLM-4.1V-9B-Thinking",
        "qwen2.5-vl-7b-instruct-q4_k_m.gguf",
    ],
)
def test_known_vlm_families_are_detected(model: str) -> None:
    assert looks_like_vlm(model)


@pytest.mark.parametrize(
    "model",
    [
        "fake",
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen3-8B",
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama3.2:3b",
        "google/gemma-2-9b-it",
        "google/gemma-3-1b-it",
        "gemma3:1b",
        "gemma-3-270m",
        "gpt-3.5-turbo",
        "gpt-4",
        "gpt-4-1106-preview",
        "gpt-oss-20b",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "embedded:smollm2-135m-instruct-q8_0",
    ],
)
def test_text_only_models_are_not_taken_for_vlms(model: str) -> None:
    assert not looks_like_vlm(model)


def built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> LLM:
    monkeypatch.chdir(tmp_path)  # no ./hammr.toml
    base = {"HAMMR_LLM__BACKEND": "openai", "HAMMR_LLM__BASE_URL": "http://127.0.0.1:9/v1"}
    cfg = load_config(env={**base, **{f"HAMMR_LLM__{k.upper()}": v for k, v in env.items()}})
    return build_llm(cfg, cache=False)


def test_vision_setting_auto_on_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def sees(**env: str) -> bool:
        return sees_images(built(monkeypatch, tmp_path, **env))

    assert sees(model="Qwen/Qwen2.5-VL-7B-Instruct")  # auto, the default
    assert not sees(model="Qwen/Qwen2.5-7B-Instruct")
    assert not sees(model="Qwen/Qwen2.5-VL-7B-Instruct", vision="off")
    assert sees(model="my-finetune", vision="on")
    assert sees(model="my-finetune", vision="true")  # a TOML boolean means on / off
    assert not sees(model="Qwen/Qwen2.5-VL-7B-Instruct", vision="false")
    assert not sees(model="Qwen/Qwen2.5-VL-7B-Instruct", mode="completion")
    llm = built(monkeypatch, tmp_path, model="gpt-4o", max_images="3", max_image_pixels="5000")
    assert vision_limits_of(llm) == VisionLimits(max_images=3, max_image_pixels=5000)
    llm = built(monkeypatch, tmp_path, model="gpt-4o")
    assert vision_limits_of(llm) == VisionLimits(8, DEFAULT_MAX_IMAGE_PIXELS)
    assert DEFAULT_MAX_IMAGE_PIXELS == 1280 * 28 * 28
    # the response cache passes the setting through
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cfg = load_config(
        env={
            "HAMMR_LLM__BACKEND": "openai",
            "HAMMR_LLM__BASE_URL": "http://127.0.0.1:9/v1",
            "HAMMR_LLM__MODEL": "gpt-4o",
            "HAMMR_LLM__MAX_IMAGES": "2",
        }
    )
    cached = build_llm(cfg)
    assert isinstance(cached, CachedLLM)
    assert sees_images(cached) and vision_limits_of(cached).max_images == 2
    cached.close()


def test_vision_setting_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"llm.vision = 'maybe'.*auto, on, off"):
        built(monkeypatch, tmp_path, model="m", vision="maybe")
    with pytest.raises(ConfigError, match=r"llm.max_images = 0 .* at least 1"):
        built(monkeypatch, tmp_path, model="m", max_images="0")
    with pytest.raises(ConfigError, match=r"needs llm.mode = 'chat'"):
        built(monkeypatch, tmp_path, model="m", vision="on", mode="completion")
    with pytest.raises(ConfigError, match=r"embedded model is text-only"):
        built(monkeypatch, tmp_path, backend="embedded", vision="on")


def test_the_embedded_and_scripted_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    llm = built(monkeypatch, tmp_path, backend="embedded")  # auto: the model loads lazily
    assert getattr(llm, "vision", None) is False and not sees_images(llm)
    assert not sees_images(ScriptedLLM(["x"])) and sees_images(ScriptedLLM(["x"], vision=True))
    assert not sees_images(object())  # a backend that does not say is text-only
    assert vision_limits_of(object()) == VisionLimits()


# -- the response cache keys on pixels --------------------------------------------------------


def test_cache_key_covers_image_content() -> None:
    def req(*images: Image) -> LLMRequest:
        return LLMRequest((Message("user", ("look:", *(ImagePart(i) for i in images))),))

    a, b = noise(seed=1), noise(seed=2)
    assert request_key("m", req(a)) != request_key("m", req(b))  # same text, other pixels
    assert request_key("m", req(a)) == request_key("m", req(noise(seed=1)))  # same pixels
    assert request_key("m", req(a, b)) != request_key("m", req(b, a))  # order counts
    assert request_key("m", req(a)) != request_key("m", LLMRequest((Message("user", "look:"),)))


async def test_cached_runs_on_other_images_of_the_same_size_are_not_confused(
    tmp_path: Path,
) -> None:
    inner = ScriptedLLM(lambda r: "[Finish]: " + str(len(r.messages)), vision=True)
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    agent = looker(llm)
    first = await agent.run("What colour?", {"image": noise(seed=1)})
    again = await agent.run("What colour?", {"image": noise(seed=1)})
    other = await agent.run("What colour?", {"image": noise(seed=2)})
    assert first.trace.steps[0].cached is False and again.trace.steps[0].cached is True
    assert other.trace.steps[0].cached is False  # same text, other pixels: not a hit
    assert inner.calls == 2
    llm.close()


# -- the command line ---------------------------------------------------------------------------


def test_ask_with_vision_on_sends_the_image_and_the_crop(server: FakeServer) -> None:
    play(server, "[Thought]: crop\n[Act]: c = CropImage(image, [[0, 0, 40, 30]])", FINISH)
    env = served_env(server, HAMMR_LLM__VISION="on")
    r = CliRunner().invoke(
        main, ["ask", str(EXAMPLES / "plate.png"), "What colour?", "--agent", "naive"], env=env
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == "red"
    plate = np.asarray(PILImage.open(EXAMPLES / "plate.png").convert("RGB"))
    first, second = bodies(server)
    task = first["messages"][1]["content"]
    assert task[0]["text"].endswith("\nimage 'image' (640x432):")
    assert np.array_equal(decode(task[1]), plate)
    obs = second["messages"][3]["content"]
    assert obs[0]["text"].endswith("(stored in 'c')\nimage 'c' (40x30):")
    assert np.array_equal(decode(obs[1]), plate[0:30, 0:40])
    assert_prefix_chain([first, second])
