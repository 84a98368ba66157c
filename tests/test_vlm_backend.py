"""The served-VLM backend against a scripted fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image as PILImage

from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.backends.registry import BackendUnavailable
from hammr.backends.vlm import (
    CAPTION_PROMPT,
    OCR_PROMPT,
    RawBox,
    VLMBackend,
    boxes_from_raw,
    from_config,
    parse_entities,
    parse_ocr,
    parse_raw_boxes,
    parse_yes_no,
)
from hammr.tools.base import ToolError
from hammr.values import Box, Entity, Image
from patience import HANG_S


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def vlm(server: FakeServer, **kw: Any) -> VLMBackend:
    return VLMBackend(server.url, "fake-vlm", api_key_env="", max_retries=1, timeout_s=5, **kw)


def noise(w: int, h: int, seed: int = 0) -> Image:
    """An image whose pixels all differ, so a decoded copy proves nothing was resampled."""
    data = bytes(
        (x * 7 + y * 13 + seed * 31 + c * 5) % 256
        for y in range(h)
        for x in range(w)
        for c in range(3)
    )
    return Image(PILImage.frombytes("RGB", (w, h), data))


def parts(seen: Seen) -> tuple[PILImage.Image, str]:
    """The one image and the one text of a recorded chat request."""
    messages = seen.body["messages"]
    assert len(messages) == 1 and messages[0]["role"] == "user"
    content = messages[0]["content"]
    images = [p for p in content if p["type"] == "image_url"]
    texts = [p["text"] for p in content if p["type"] == "text"]
    assert len(images) == 1 and len(texts) == 1
    url = images[0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    pixels = PILImage.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    pixels.load()
    return pixels, texts[0]


def same_pixels(a: PILImage.Image, b: PILImage.Image) -> bool:
    return a.size == b.size and a.convert("RGB").tobytes() == b.convert("RGB").tobytes()


# -- request shape ---------------------------------------------------------------------------


async def test_caption_request_shape_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body('  "A red car\n parked on a street."  '))]
    img = noise(40, 30)
    assert await vlm(server).caption([img]) == ["A red car parked on a street."]
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == "fake-vlm" and seen.body["temperature"] == 0.0
    pixels, text = parts(seen)
    assert same_pixels(pixels, img.pixels)
    assert text == CAPTION_PROMPT


async def test_vqa_prompt_holds_the_question_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("Red"))]
    img = noise(20, 20)
    assert await vlm(server).answer([img], ["What colour is\nthe car?"]) == ["Red"]
    pixels, text = parts(server.seen[0])
    assert same_pixels(pixels, img.pixels)
    assert "Question: What colour is the car?" in text


async def test_ocr_request_and_parsing_with_scripted_server(server: FakeServer) -> None:
    server.script = [
        Reply(body=ok_body("```\n154-JDX\n```")),
        Reply(body=ok_body("NONE")),
        Reply(body=ok_body("OPEN\n24  HOURS")),
    ]
    imgs = [noise(30, 10, seed=i) for i in range(3)]
    out = await vlm(server, concurrency=1).read(imgs)
    assert out == ["154-JDX", "", "OPEN 24 HOURS"]
    for seen, img in zip(server.seen, imgs, strict=True):
        pixels, text = parts(seen)
        assert same_pixels(pixels, img.pixels) and text == OCR_PROMPT


async def test_contains_prompt_and_yes_no_with_scripted_server(server: FakeServer) -> None:
    server.script = [
        Reply(body=ok_body("Yes.")),
        Reply(body=ok_body("No, there is none.")),
        Reply(body=ok_body("It is hard to tell.")),
    ]
    imgs = [noise(16, 16, seed=i) for i in range(3)]
    out = await vlm(server, concurrency=1).contains(imgs, ["traffic light"] * 3)
    assert out == [True, False, False]
    _, text = parts(server.seen[0])
    assert "traffic light" in text and "yes or no" in text


async def test_recognize_json_and_plain_with_scripted_server(server: FakeServer) -> None:
    server.script = [
        Reply(body=ok_body('```json\n{"entity": "Eiffel Tower", "confidence": 0.93}\n```')),
        Reply(body=ok_body("Golden Gate Bridge.")),
        Reply(body=ok_body('{"entity": null}')),
    ]
    imgs = [noise(16, 16, seed=i) for i in range(3)]
    out = await vlm(server, concurrency=1).recognize(imgs)
    assert out == [[Entity("Eiffel Tower", 0.93)], [Entity("Golden Gate Bridge")], []]
    pixels, text = parts(server.seen[0])
    assert same_pixels(pixels, imgs[0].pixels) and '"entity"' in text


def test_parse_helpers() -> None:
    assert parse_yes_no("yes") and parse_yes_no("TRUE") and parse_yes_no("Yeah, on the left")
    assert not parse_yes_no("no") and not parse_yes_no("") and not parse_yes_no("maybe")
    assert not parse_yes_no("Nothing like that; not visible")  # no yes/no word: counted as no
    assert parse_ocr('Text: "STOP"') == "STOP"
    assert parse_ocr("There is no text in this image.") == ""
    assert parse_ocr("no text") == ""
    assert parse_entities('{"name": "Labrador Retriever", "score": "80%", "type": "breed"}') == [
        Entity("Labrador Retriever", 0.8, "breed")
    ]
    assert parse_entities(
        '[{"entity": "A", "confidence": 0.2}, {"entity": "B", "confidence": 0.9}]'
    ) == [
        Entity("B", 0.9),
        Entity("A", 0.2),
    ]
    assert parse_entities('"Big Ben"') == [Entity("Big Ben")]
    assert parse_entities("Unknown") == [] and parse_entities("") == []
    assert parse_entities("The entity is: Mount Fuji") == [Entity("Mount Fuji")]
    assert parse_entities("This is the Sydney Opera House.") == [Entity("Sydney Opera House")]


# -- grounding -------------------------------------------------------------------------------


async def test_detect_qwen25_absolute_json_in_fence_with_scripted_server(
    server: FakeServer,
) -> None:
    reply = (
        "Here are the boxes:\n```json\n[\n"
        '  {"bbox_2d": [10, 20, 50, 60], "label": "dog"},\n'
        '  {"bbox_2d": [70, 5, 95, 40], "label": "dog"}\n]\n```'
    )
    server.script = [Reply(body=ok_body(reply))]
    img = noise(100, 80)
    (boxes,) = await vlm(server).detect([img], ["dog"])
    assert boxes == [Box(10, 20, 40, 40, "dog"), Box(70, 5, 25, 35, "dog")]
    pixels, text = parts(server.seen[0])
    assert same_pixels(pixels, img.pixels)
    assert "dog" in text and "bbox_2d" in text and "100x80" in text


def test_grounding_parse_variants() -> None:
    # a single object, 'bbox' and 'box' keys, corner dicts, wrapped lists
    assert parse_raw_boxes('{"bbox": [1, 2, 3, 4], "label": "cat"}') == [RawBox(1, 2, 3, 4, "cat")]
    assert parse_raw_boxes('[{"box": [1, 2, 3, 4]}]') == [RawBox(1, 2, 3, 4)]
    assert parse_raw_boxes('{"objects": [{"bbox_2d": ["1", "2", "3", "4"]}]}') == [
        RawBox(1, 2, 3, 4)
    ]
    assert parse_raw_boxes('{"x1": 1, "y1": 2, "x2": 3, "y2": 4, "confidence": 0.5}') == [
        RawBox(1, 2, 3, 4, score=0.5)
    ]
    assert parse_raw_boxes("[[1, 2, 3, 4], [5, 6, 7, 8]]") == [
        RawBox(1, 2, 3, 4),
        RawBox(5, 6, 7, 8),
    ]
    # Qwen2-VL's special-token text
    assert parse_raw_boxes("<|box_start|>(100,200),(300,400)<|box_end|>") == [
        RawBox(100, 200, 300, 400)
    ]
    # a reply cut off by max_tokens keeps the complete objects
    cut = '[{"bbox_2d": [1, 2, 3, 4], "label": "a"}, {"bbox_2d": [5, 6'
    assert parse_raw_boxes(cut) == [RawBox(1, 2, 3, 4, "a")]
    # junk
    for junk in (
        "I can't see any.",
        "",
        "[]",
        "{}",
        '{"bbox_2d": "left"}',
        "```json\n```",
        "[1, 2]",
    ):
        assert parse_raw_boxes(junk) == [], junk


def test_box_conversion_clips_orders_and_drops_degenerate() -> None:
    raw = [
        RawBox(50, 40, 10, 20),  # corners swapped
        RawBox(-10, -10, 30, 30),  # partly outside
        RawBox(5, 5, 5.5, 30),  # under a pixel wide
        RawBox(200, 200, 300, 300),  # wholly outside
        RawBox(10, 20, 50, 40),  # repeat of the first
    ]
    boxes = boxes_from_raw(raw, "absolute", (100, 80), (100, 80), "x")
    assert boxes == [Box(10, 20, 40, 20, "x"), Box(0, 0, 30, 30, "x")]


async def test_detect_single_object_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body('{"bbox_2d": [0, 0, 30, 10], "label": "sign"}'))]
    (boxes,) = await vlm(server).detect([noise(60, 40)], ["sign"])
    assert boxes == [Box(0, 0, 30, 10, "sign")]


async def test_detect_normalized_coords_auto_and_explicit_with_scripted_server(
    server: FakeServer,
) -> None:
    reply = ok_body('[{"bbox_2d": [0.1, 0.25, 0.5, 0.75]}]')
    server.script = [Reply(body=reply), Reply(body=reply)]
    img = noise(200, 100)
    for fmt in ("auto", "normalized"):
        (boxes,) = await vlm(server, box_format=fmt).detect([img], ["cup"])
        assert boxes == [Box(20, 25, 80, 50, "cup")]
    _, text = parts(server.seen[1])
    assert "from 0 to 1" in text


async def test_detect_qwen2_1000_coords_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body('[{"bbox_2d": [100, 250, 500, 750], "label": "cup"}]'))]
    img = noise(200, 100)
    (boxes,) = await vlm(server, box_format="qwen2-1000").detect([img], ["cup"])
    assert boxes == [Box(20, 25, 80, 50, "cup")]
    _, text = parts(server.seen[0])
    assert "0 to 1000" in text


async def test_detect_junk_reply_is_empty_with_scripted_server(server: FakeServer) -> None:
    server.script = [
        Reply(body=ok_body("Sorry, I cannot help with that {not json")),
        Reply(body=ok_body("[]")),
    ]
    b = vlm(server, concurrency=1)
    assert await b.detect([noise(10, 10), noise(10, 10)], ["cat", "cat"]) == [[], []]


async def test_detect_on_downscaled_send_maps_back_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body('[{"bbox_2d": [100, 50, 300, 250]}]'))]
    img = Image(PILImage.new("RGB", (2000, 1000), (10, 200, 30)))
    (boxes,) = await vlm(server, max_image_side=1000).detect([img], ["field"])
    pixels, text = parts(server.seen[0])
    assert pixels.size == (1000, 500) and "1000x500" in text
    assert boxes == [Box(200, 100, 400, 400, "field")]


async def test_size_multiple_rounds_sides_and_maps_back_with_scripted_server(
    server: FakeServer,
) -> None:
    # Qwen2.5-VL style: sides rounded to multiples of 28 (640x432 -> 644x420)
    server.script = [Reply(body=ok_body('[{"bbox_2d": [0, 0, 322, 210]}]'))]
    img = noise(640, 432)
    (boxes,) = await vlm(server, size_multiple=28).detect([img], ["half"])
    pixels, _ = parts(server.seen[0])
    assert pixels.size == (644, 420)
    assert boxes == [Box(0, 0, 320, 216, "half")]


# -- failures --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_server_down_is_one_line_tool_error() -> None:
    b = VLMBackend(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1, timeout_s=2)
    with pytest.raises(ToolError) as info:
        await b.caption([noise(8, 8)])
    msg = str(info.value)
    assert info.value.kind == "tool_failure"
    assert (
        msg.startswith("caption failed: cannot reach the VLM server")
        and "connection refused" in msg
    )
    assert "[vlm] base_url" in msg and "\n" not in msg


async def test_slow_server_is_one_line_tool_error_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("late"), delay=HANG_S)]  # held until closed
    b = VLMBackend(server.url, "m", max_retries=1, timeout_s=0.3)
    with pytest.raises(ToolError) as info:
        await b.detect([noise(8, 8)], ["x"])
    msg = str(info.value)
    assert (
        msg.startswith("detection failed: the VLM server") and "did not answer within 0.3 s" in msg
    )
    assert "\n" not in msg


async def test_http_error_is_tool_error_with_scripted_server(server: FakeServer) -> None:
    server.script = [Reply(status=400, body={"error": {"message": "image input not supported"}})]
    with pytest.raises(ToolError, match=r"^VQA failed: .*HTTP 400.*image input not supported$"):
        await vlm(server).answer([noise(8, 8)], ["q"])


# -- batching --------------------------------------------------------------------------------


async def test_batch_is_concurrent_bounded_and_in_order_with_scripted_server(
    server: FakeServer,
) -> None:
    cond = threading.Condition()
    state = {"now": 0, "peak": 0, "arrived": 0}

    def respond(seen: Seen) -> Reply:
        # Each request waits until three are in flight (or none more can come): concurrency
        # is shown by the order of arrivals, not by how long the batch took.
        pixels, _ = parts(seen)
        with cond:
            state["now"] += 1
            state["arrived"] += 1
            state["peak"] = max(state["peak"], state["now"])
            cond.notify_all()
            ok = cond.wait_for(lambda: state["now"] >= 3 or state["arrived"] == 7, HANG_S / 10)
            state["now"] -= 1
        assert ok, "the requests came one after another"
        return Reply(body=ok_body(f"image {pixels.width}"))

    server.responder = respond
    imgs = [Image(PILImage.new("RGB", (10 + i, 10))) for i in range(7)]
    out = await vlm(server, concurrency=3).caption(imgs)
    assert out == [f"image {10 + i}" for i in range(7)]
    assert len(server.seen) == 7
    assert state["peak"] == 3


async def test_mismatched_lists_are_refused(server: FakeServer) -> None:
    with pytest.raises(ValueError, match="2 images but 1 names"):
        await vlm(server).detect([noise(4, 4), noise(4, 4)], ["a"])


# -- configuration ---------------------------------------------------------------------------


def test_from_config() -> None:
    with pytest.raises(BackendUnavailable, match=r"set \[vlm\] base_url and model"):
        from_config({"base_url": "", "model": "", "api_key_env": "OPENAI_API_KEY"})
    with pytest.raises(BackendUnavailable):
        from_config({"base_url": "http://h/v1"})
    b = from_config(
        {
            "base_url": "http://h/v1",
            "model": "qwen",
            "timeout_s": "5",
            "max_retries": "2",
            "box_format": "qwen2-1000",
            "concurrency": 8,
            "max_image_side": "896",
            "size_multiple": 28,
        }
    )
    assert (b.llm.base_url, b.llm.model, b.llm.timeout_s, b.llm.max_retries) == (
        "http://h/v1",
        "qwen",
        5.0,
        2,
    )
    assert (b.box_format, b.concurrency, b.max_image_side, b.size_multiple) == (
        "qwen2-1000",
        8,
        896,
        28,
    )
    with pytest.raises(ValueError, match="box_format must be one of"):
        from_config({"base_url": "http://h/v1", "model": "m", "box_format": "xyxy"})
    with pytest.raises(ValueError, match=r"unknown setting vlm\.colour"):
        from_config({"base_url": "http://h/v1", "model": "m", "colour": 1})
    with pytest.raises(ValueError, match="at least 1"):
        from_config({"base_url": "http://h/v1", "model": "m", "concurrency": 0})


def test_send_size() -> None:
    b = VLMBackend("http://h/v1", "m", max_image_side=1280)
    assert b.send_size(640, 432) == (640, 432)
    assert b.send_size(4000, 3000) == (1280, 960)
    assert b.send_size(3000, 10) == (1280, 4)
    assert VLMBackend("http://h/v1", "m", max_image_side=0).send_size(4000, 3000) == (4000, 3000)
    assert VLMBackend("http://h/v1", "m", size_multiple=28).send_size(5, 5) == (28, 28)
