"""Caption, VQA, DetectObject, ObjectInImage and RecognizeEntity, served by the VLM backend
talking to a scripted fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image as PILImage

from conftest import EXAMPLES
from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.agent import ReActAgent
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.backends.vlm import VLMBackend
from hammr.tools.base import CapabilityMissing, Tool, ToolContext, ToolError, bind_arguments
from hammr.tools.image_tools import CropImage, ZoomIn
from hammr.tools.vision_tools import (
    VISION_TOOLS,
    VQA,
    Caption,
    DetectObject,
    ObjectInImage,
    RecognizeEntity,
)
from hammr.values import Box, Entity, Image, render_value
from patience import HANG_S


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


CAPS = ("caption", "vqa", "detect", "object_in_image", "entity")


def ctx_for(server: FakeServer, **kw: Any) -> ToolContext:
    b = VLMBackend(server.url, "fake-vlm", api_key_env="", max_retries=1, timeout_s=5, **kw)
    return ToolContext(backends=dict.fromkeys(CAPS, b))


async def call(tool: Any, ctx: ToolContext, *args: Any, **kw: Any) -> Any:
    bound = bind_arguments(tool, list(args), kw)
    return await tool.invoke(bound, ctx)


def sent_image(seen: Seen) -> PILImage.Image:
    (part,) = [p for p in seen.body["messages"][0]["content"] if p["type"] == "image_url"]
    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    pixels = PILImage.open(io.BytesIO(data))
    pixels.load()
    return pixels


def prompt_of(seen: Seen) -> str:
    (text,) = [p["text"] for p in seen.body["messages"][0]["content"] if p["type"] == "text"]
    return str(text)


def solid(w: int, h: int, colour: tuple[int, int, int] = (90, 90, 90)) -> Image:
    return Image(PILImage.new("RGB", (w, h), colour))


def test_cards() -> None:
    assert all(isinstance(t, Tool) for t in VISION_TOOLS)
    assert [t.capability for t in VISION_TOOLS] == [
        "caption",
        "vqa",
        "detect",
        "object_in_image",
        "entity",
    ]
    assert Caption.card().startswith("Caption(image: image) -> text")
    assert VQA.card().startswith("VQA(image: image, question: text) -> text")
    assert DetectObject.card().startswith("DetectObject(image: image, name: text) -> boxes")
    assert ObjectInImage.card().startswith("ObjectInImage(image: image, name: text) -> boolean")
    assert RecognizeEntity.card().startswith("RecognizeEntity(image: image) -> entity")
    assert Caption.batched and Caption.vectorised_over == "image"


async def test_detect_on_crop_of_zoom_of_crop_is_in_root_pixels_with_scripted_server(
    server: FakeServer,
) -> None:
    photo = Image.open(EXAMPLES / "plate.png")
    ctx = ToolContext()
    c1 = (await call(CropImage, ctx, photo, [100, 50, 400, 300])).value
    zoom = (await call(ZoomIn, ctx, c1, [150, 100, 200, 150], 2.0)).value
    c2 = (await call(CropImage, ctx, zoom, [200, 150, 100, 80])).value
    # c2 shows root region x 200..300, y 150..230 at 2 image pixels per root pixel
    assert (c2.width, c2.height, c2.zoom) == (200, 160, 2.0)
    assert c2.crop_box == Box(200, 150, 100, 80)

    server.script = [
        Reply(
            body=ok_body(
                '```json\n[{"bbox_2d": [100, 100, 180, 150], "label": "plate", "confidence": 0.4},'
                ' {"bbox_2d": [20, 40, 120, 100], "label": "plate", "confidence": 0.9}]\n```'
            )
        )
    ]
    result = await call(DetectObject, ctx_for(server), c2, "licence plate")
    # local [20, 40, 120, 100] -> root (200 + 20/2, 150 + 40/2, 100/2, 60/2)
    # local [100, 100, 180, 150] -> root (200 + 100/2, 150 + 100/2, 80/2, 50/2)
    assert result.value == [
        Box(210, 170, 50, 30, "licence plate", 0.9),
        Box(250, 200, 40, 25, "licence plate", 0.4),
    ]
    assert result.observation is None
    # the model saw exactly the crop's pixels, and was asked about the name in its own pixels
    (seen,) = server.seen
    assert sent_image(seen).tobytes() == c2.pixels.tobytes()
    assert "licence plate" in prompt_of(seen) and "200x160" in prompt_of(seen)
    # the root boxes crop the same region out of the original photo
    crop = (await call(CropImage, ctx, photo, result.value[0])).value
    assert crop.crop_box == Box(210, 170, 50, 30)


async def test_detect_sorts_by_score_then_position_with_scripted_server(
    server: FakeServer,
) -> None:
    server.script = [
        Reply(
            body=ok_body(
                '[{"bbox_2d": [50, 50, 60, 60]}, {"bbox_2d": [10, 50, 20, 60]},'
                ' {"bbox_2d": [30, 5, 40, 15]}, {"bbox_2d": [0, 70, 9, 79], "score": 0.2}]'
            )
        )
    ]
    boxes = (await call(DetectObject, ctx_for(server), solid(100, 100), "cup")).value
    assert [(b.x, b.y, b.score) for b in boxes] == [
        (0, 70, 0.2),
        (30, 5, None),
        (10, 50, None),
        (50, 50, None),
    ]
    assert all(b.label == "cup" for b in boxes)


async def test_detect_none_found_says_so_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("I see no dogs here."))]
    result = await call(DetectObject, ctx_for(server), solid(20, 20), "dog")
    assert result.value == []
    assert result.observation == "no 'dog' found: empty list"


async def test_capability_missing() -> None:
    with pytest.raises(CapabilityMissing) as info:
        await call(DetectObject, ToolContext(), solid(8, 8), "dog")
    assert str(info.value) == (
        "capability 'detect' has no backend configured (see hammr.toml [tools.detect])"
    )
    assert info.value.kind == "capability_missing"
    for t, args in [
        (Caption, ()),
        (VQA, ("q",)),
        (ObjectInImage, ("x",)),
        (RecognizeEntity, ()),
    ]:
        with pytest.raises(CapabilityMissing, match=f"'{t.capability}'"):
            await call(t, ToolContext(), solid(8, 8), *args)


async def test_caption_batches_several_images_in_order_with_scripted_server(
    server: FakeServer,
) -> None:
    def respond(seen: Seen) -> Reply:
        return Reply(body=ok_body(f"a grey square {sent_image(seen).width} wide"))

    server.responder = respond
    imgs = [solid(10 + i, 10) for i in range(5)]
    out = (await call(Caption, ctx_for(server, concurrency=2), imgs)).value
    assert out == [f"a grey square {10 + i} wide" for i in range(5)]
    assert len(server.seen) == 5
    assert render_value(out).startswith("['a grey square 10 wide', ")
    # one image in, one string out
    assert (await call(Caption, ctx_for(server), imgs[0])).value == "a grey square 10 wide"


async def test_vqa_and_object_in_image_over_lists_with_scripted_server(
    server: FakeServer,
) -> None:
    def respond(seen: Seen) -> Reply:
        red = sent_image(seen).getpixel((0, 0)) == (255, 0, 0)
        if "yes or no" in prompt_of(seen):
            return Reply(body=ok_body("Yes" if red else "No"))
        return Reply(body=ok_body("red" if red else "blue"))

    server.responder = respond
    imgs = [solid(8, 8, (255, 0, 0)), solid(8, 8, (0, 0, 255)), solid(9, 8, (255, 0, 0))]
    ctx = ctx_for(server)
    assert (await call(VQA, ctx, imgs, "What colour is it?")).value == ["red", "blue", "red"]
    assert all("What colour is it?" in prompt_of(s) for s in server.seen)
    assert (await call(ObjectInImage, ctx, imgs, "red square")).value == [True, False, True]
    assert (await call(ObjectInImage, ctx, imgs[1], "red square")).value is False
    assert "red square" in prompt_of(server.seen[-1])


async def test_recognize_entity_with_scripted_server(server: FakeServer) -> None:
    server.script = [
        Reply(body=ok_body('{"entity": "Tower Bridge", "confidence": 0.8}')),
        Reply(body=ok_body('{"entity": null}')),
    ]
    ctx = ctx_for(server)
    assert (await call(RecognizeEntity, ctx, solid(8, 8))).value == Entity("Tower Bridge", 0.8)
    with pytest.raises(ToolError, match="no entity recognised") as info:
        await call(RecognizeEntity, ctx, solid(8, 8))
    assert info.value.kind == "tool_failure"


async def test_recognize_entity_takes_the_top_score() -> None:
    class Lens:
        async def recognize(self, images: list[Image]) -> list[list[Entity]]:
            return [[Entity("bird", 0.3), Entity("Atlantic puffin", 0.7), Entity("seabird")]]

    ctx = ToolContext(backends={"entity": Lens()})
    assert (await call(RecognizeEntity, ctx, solid(8, 8))).value.name == "Atlantic puffin"


async def test_backend_result_count_is_checked() -> None:
    class Broken:
        async def caption(self, images: list[Image]) -> list[str]:
            return []

    with pytest.raises(ToolError, match="caption backend returned 0 results for 2 images"):
        await call(Caption, ToolContext(backends={"caption": Broken()}), [solid(4, 4)] * 2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent(tools: list[Tool], llm: ScriptedLLM) -> ReActAgent:
    return ReActAgent("Looker", "looks", "Answer questions about the image.", tools, llm=llm)


async def test_server_down_is_a_tool_failure_and_the_scripted_agent_finishes() -> None:
    dead = VLMBackend(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1, timeout_s=2)
    llm = ScriptedLLM(
        [
            "[Thought]: look\n[Act]: c = Caption(image)",
            "[Thought]: no caption\n[Finish]: unknown",
        ]
    )
    result = await agent([Caption], llm).run(
        "What is this?", {"image": solid(16, 16)}, ctx=ToolContext(backends={"caption": dead})
    )
    assert result.answer == "unknown"
    step = result.trace.steps[0]
    assert step.error_kind == "tool_failure"
    assert step.error is not None and step.error.startswith("caption failed: cannot reach the VLM")
    assert "\n" not in step.error
    # the model was shown the failure and went on
    assert "cannot reach the VLM server" in llm.requests[1].messages[-1].text()


async def test_slow_server_is_a_tool_failure_and_the_scripted_agent_finishes(
    server: FakeServer,
) -> None:
    server.script = [Reply(body=ok_body("[]"), delay=HANG_S)]  # held until closed
    slow = VLMBackend(server.url, "m", max_retries=1, timeout_s=0.3)
    llm = ScriptedLLM(["[Act]: b = DetectObject(image, 'dog')", "[Finish]: no idea"])
    result = await agent([DetectObject], llm).run(
        "Where is the dog?", {"image": solid(16, 16)}, ctx=ToolContext(backends={"detect": slow})
    )
    assert result.answer == "no idea"
    step = result.trace.steps[0]
    assert step.error_kind == "tool_failure"
    assert step.error is not None and "did not answer within 0.3 s" in step.error


async def test_detect_then_crop_in_a_scripted_agent_run(server: FakeServer) -> None:
    photo = Image.open(EXAMPLES / "plate.png")
    server.script = [Reply(body=ok_body('[{"bbox_2d": [36, 214, 186, 258], "label": "plate"}]'))]
    llm = ScriptedLLM(
        [
            "[Act]: boxes = DetectObject(image, 'licence plate')",
            "[Act]: plate = CropImage(image, boxes)",
            "[Finish]: done",
        ]
    )
    result = await agent([DetectObject, CropImage], llm).run(
        "Crop the plate", {"image": photo}, ctx=ctx_for(server)
    )
    assert result.answer == "done"
    assert [s.error_kind for s in result.trace.steps] == [None, None, None]
    assert "1 box: licence plate at left:36/top:214/width:150/height:44" in (
        result.trace.steps[0].observation
    )
    assert "region left:36/top:214/width:150/height:44" in result.trace.steps[1].observation
