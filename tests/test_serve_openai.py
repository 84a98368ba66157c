"""`hammr serve` answered through the real `openai` client (no fake on the client side),
served in this process on 127.0.0.1 with a SCRIPTED model standing in for the LLM (the
machinery under test is the server; tests/test_serve_cli.py runs the real command)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image as PILImage

from hammr.backends.llm.base import LLMRequest, LLMResponse, Usage
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.config import load_config
from hammr.eval.store import RunStore
from hammr.serve.app import TRACE_HEADER, build_app
from hammr.serve.image_source import ImagePolicy
from hammr.serve.service import ChatService, ServedModel
from hammr.web.asgi_server import BoundServer
from patience import HANG_S

openai = pytest.importorskip("openai", reason="the openai client is not installed")

FINISH_RED = "[Thought]: The car is red.\n[Finish]: red"


def png(width: int = 24, height: int = 16, colour: str = "red", fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), colour).save(out, fmt)
    return out.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def user(text: str | None, *urls: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": parts}]


class GatedLLM:
    """A scripted model whose every call waits until the test opens the gate (threading,
    so the test thread can open it); ``calls`` counts the calls that started."""

    name = "gated"
    grammar_support = "none"

    def __init__(self, reply: str = FINISH_RED) -> None:
        self.reply = reply
        self.gate = threading.Event()
        self.calls = 0
        self.started = threading.Event()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        self.started.set()
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        return LLMResponse(self.reply, Usage(5, 2), model="gated", finish_reason="stop")


class Served:
    def __init__(self, server: BoundServer, service: ChatService, store: RunStore) -> None:
        self.server, self.service, self.store = server, service, store
        self.base = f"{server.url}v1"

    def client(self, **kw: Any) -> Any:
        return openai.OpenAI(
            base_url=self.base,
            api_key=kw.pop("api_key", "unused"),
            max_retries=0,
            timeout=HANG_S,
            **kw,
        )

    def records(self, model: str = "naive") -> list[Any]:
        run = self.service.run_name(model)
        if self.store.run_info(run) is None:
            return []
        return self.store.records(run, 0, 100)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(
        llm: Any = None,
        *,
        api_key: str | None = None,
        concurrency: int = 2,
        max_queue: int = 8,
        max_body: int = 32 * 2**20,
        images: ImagePolicy | None = None,
        timeout_s: float | None = None,
    ) -> Served:
        cfg = load_config(None, env={})
        store = RunStore(tmp_path / f"runs{len(started)}.sqlite")
        service = ChatService(
            cfg,
            {"naive": ServedModel("naive", "ready"), "hammr": ServedModel("hammr", "ready")},
            store=store,
            session="t",
            llm=llm or ScriptedLLM(lambda _r: FINISH_RED),
            concurrency=concurrency,
            max_queue=max_queue,
            images=images,
            timeout_s=timeout_s,
        )
        app = build_app(service, api_key=api_key, max_body=max_body)
        server = BoundServer(app, "127.0.0.1", 0, lifespan="off")
        server.start_in_thread()
        s = Served(server, service, store)
        started.append(s)
        return s

    yield start
    for s in started:
        gate = getattr(s.service.llm, "gate", None)
        if gate is not None:
            gate.set()
        s.server.stop()
        s.store.close()


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


# -- answering -----------------------------------------------------------------------------------


def test_openai_client_gets_the_answer_usage_and_trace_id_scripted_model(serve: Any) -> None:
    s = serve()
    client = s.client()
    raw = client.chat.completions.with_raw_response.create(
        model="naive", messages=user("What colour is the car?", data_url(png()))
    )
    reply = raw.parse()
    assert reply.choices[0].message.content == "red"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "naive"
    assert raw.headers[TRACE_HEADER] == reply.id
    extra = reply.model_extra["hammr"]
    assert extra["trace_id"] == reply.id and extra["status"] == "finished" and extra["stored"]
    # usage is the sum of the agent's model calls, as its trace has them
    (rec,) = s.records()
    assert rec.sample_id == reply.id and rec.prediction == "red" and rec.status == "finished"
    assert rec.llm_calls == 1 == extra["llm_calls"]
    assert reply.usage.prompt_tokens == rec.prompt_tokens > 0
    assert reply.usage.completion_tokens == rec.completion_tokens > 0
    assert reply.usage.total_tokens == rec.prompt_tokens + rec.completion_tokens
    assert rec.question == "What colour is the car?" and rec.dataset == "served"
    assert rec.trace.inputs["image"]  # the image was an input of the run
    assert s.store.run_info(s.service.run_name("naive")).system == "naive"


def test_models_lists_the_served_systems(serve: Any) -> None:
    s = serve()
    ids = [m.id for m in s.client().models.list()]
    assert ids == ["naive", "hammr"]
    assert s.client().models.retrieve("hammr").id == "hammr"
    with pytest.raises(openai.NotFoundError):
        s.client().models.retrieve("gpt-4o")


def test_streaming_gives_content_usage_and_steps_on_request_scripted_model(serve: Any) -> None:
    s = serve()
    stream = s.client().chat.completions.create(
        model="naive",
        messages=user("What colour is the car?", data_url(png())),
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"hammr_steps": True},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "red"
    steps = [
        c.model_extra["hammr"]["step"]
        for c in chunks
        if "step" in (c.model_extra or {}).get("hammr", {})
    ]
    assert steps and steps[-1]["finished"] and steps[-1]["agent"]
    assert [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    usage = [c.usage for c in chunks if c.usage is not None]
    (rec,) = s.records()
    assert len(usage) == 1 and usage[0].prompt_tokens == rec.prompt_tokens
    assert chunks[-1].choices == []  # the usage chunk comes last
    assert len({c.id for c in chunks}) == 1 and chunks[0].id == rec.sample_id


def test_streaming_without_asking_sends_no_steps_scripted_model(serve: Any) -> None:
    s = serve()
    chunks = list(
        s.client().chat.completions.create(
            model="naive", messages=user("What colour?", data_url(png())), stream=True
        )
    )
    assert all("step" not in (c.model_extra or {}).get("hammr", {}) for c in chunks)
    assert all(c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "red"


def test_a_multiple_choice_question_is_answered_with_its_letter_scripted_model(serve: Any) -> None:
    s = serve()
    question = (
        "What colour is the car?\nA. blue\nB. red\nC. green\n"
        "Answer with the option's letter from the given choices directly."
    )
    reply = s.client().chat.completions.create(
        model="naive", messages=user(question, data_url(png()))
    )
    assert reply.choices[0].message.content == "B"
    (rec,) = s.records()
    assert rec.question_type == "multiple_choice" and rec.prediction == "B"
    assert rec.trace.answer == "red"  # the agent's own words stay in its trace


def test_two_images_are_image_and_image2_scripted_model(serve: Any) -> None:
    s = serve()
    s.client().chat.completions.create(
        model="naive", messages=user("Same car?", data_url(png()), data_url(png(colour="blue")))
    )
    (rec,) = s.records()
    assert set(rec.trace.inputs) == {"image", "image2"}


def test_no_answer_is_an_empty_message_with_the_reason_scripted_model(serve: Any) -> None:
    s = serve(ScriptedLLM(lambda _r: "[Thought]: hmm\n[Finish]: What colour?"))
    reply = s.client().chat.completions.create(
        model="naive", messages=user("What colour?", data_url(png()))
    )
    assert reply.choices[0].message.content == ""
    extra = reply.model_extra["hammr"]
    assert extra["status"] == "no_answer" and extra["error"]
    (rec,) = s.records()
    assert rec.status == "no_answer" and rec.prediction is None


def test_a_failing_model_is_a_502_with_the_trace_recorded_scripted_model(serve: Any) -> None:
    s = serve(ScriptedLLM([]))  # raises LLMError at its first call
    client = openai.OpenAI(base_url=s.base, api_key="unused", timeout=HANG_S)  # retries on 5xx
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(
            model="naive", messages=user("What colour?", data_url(png()))
        )
    assert e.value.status_code == 502
    assert e.value.body["code"] == "model_failed"
    (rec,) = s.records()
    assert rec.status == "llm_failure" and e.value.response.headers[TRACE_HEADER] == rec.sample_id
    assert e.value.response.headers["x-should-retry"] == "false"  # asked once, not three times
    # what to do next is said for a served run, not `hammr eval --retry-failed`
    from hammr.cli_common import failed_run_message, unfinished_run
    from hammr.eval.report import build_report

    run = s.service.run_name("naive")
    for said in (
        failed_run_message(s.store, run),
        unfinished_run(s.store, [run]).message,  # type: ignore[union-attr]
        " ".join(build_report(s.store, [run]).footnotes),
    ):
        assert said is not None and "through the server's client" in said
        assert "hammr eval" not in said and "--retry-failed" not in said


def test_a_store_that_fails_costs_the_record_not_the_answer_scripted_model(
    serve: Any, capfd: Any
) -> None:
    s = serve()

    def full_disk(_record: Any, **_kw: Any) -> bool:
        raise __import__("sqlite3").OperationalError("database or disk is full")

    s.store.add = full_disk  # type: ignore[method-assign]
    reply = s.client().chat.completions.create(
        model="naive", messages=user("What colour?", data_url(png()))
    )
    assert reply.choices[0].message.content == "red"
    assert reply.model_extra["hammr"]["stored"] is False
    assert s.service.unstored == 1
    err = capfd.readouterr().err
    assert f"{reply.id} not recorded in the store: database or disk is full" in err
    assert "Traceback" not in err


# -- refusals: OpenAI error bodies, the server up, nothing stored ---------------------------------


def post(s: Served, body: bytes | dict[str, Any], **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{s.base}/chat/completions",
        content=content,
        headers={"content-type": "application/json", **headers},
        timeout=HANG_S,
    )


def body(messages: Any, model: str = "naive", **more: Any) -> dict[str, Any]:
    return {"model": model, "messages": messages, **more}


def bomb_png() -> bytes:
    """A PNG whose header claims 40000 x 40000 pixels (1.6 G: above any limit)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 40000, 40000, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("name", "request_body", "status", "code_or_words"),
    [
        ("malformed JSON", b'{"model": "naive", "messages": [', 400, "not valid JSON"),
        ("not an object", b"[1, 2]", 400, "must be a JSON object"),
        ("no model", {"messages": user("q", data_url(png()))}, 400, "'model' is required"),
        ("unknown model", body(user("q", data_url(png())), model="gpt-4o"), 404, "model_not_found"),
        ("no text", body(user(None, data_url(png()))), 400, "has no text"),
        ("no image", body(user("What colour?")), 400, "image_missing"),
        (
            "string content",
            body([{"role": "user", "content": "What colour?"}]),
            400,
            "image_missing",
        ),
        ("no user message", body([{"role": "system", "content": "x"}]), 400, "no user message"),
        ("three images", body(user("q", *[data_url(png())] * 3)), 400, "3 images"),
        (
            "not an image",
            body(user("q", data_url(b"hello, world", "image/png"))),
            400,
            "not_an_image",
        ),
        ("text media type", body(user("q", data_url(b"hello", "text/plain"))), 400, "not_an_image"),
        (
            "lies about its type",
            body(user("q", data_url(png(fmt="JPEG"), "image/png"))),
            400,
            "image_type_mismatch",
        ),
        ("bad base64", body(user("q", "data:image/png;base64,@@@")), 400, "not valid base64"),
        ("decompression bomb", body(user("q", data_url(bomb_png()))), 400, "bad_image"),
        (
            "image URL not allowed",
            body(user("q", "http://example.com/a.png")),
            400,
            "image_url_not_allowed",
        ),
        ("file URL", body(user("q", "file:///etc/passwd")), 400, "not an image hammr can read"),
        ("n > 1", body(user("q", data_url(png())), n=2), 400, "'n' must be 1"),
        (
            "tools",
            body(user("q", data_url(png())), tools=[{"type": "function"}]),
            400,
            "tool calling",
        ),
        ("overlong question", body(user("x" * 5000, data_url(png()))), 400, "above the limit"),
        ("stream not a bool", body(user("q", data_url(png())), stream="yes"), 400, "'stream'"),
    ],
)
def test_bad_requests_get_openai_error_bodies(
    serve: Any, name: str, request_body: Any, status: int, code_or_words: str
) -> None:
    s = serve()
    r = post(s, request_body)
    assert r.status_code == status, (name, r.text)
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert code_or_words in (error["code"] or "") or code_or_words in error["message"], error
    assert s.records() == []  # refused requests were never asked
    assert httpx.get(f"{s.server.url}health", timeout=HANG_S).json()["status"] == "ok"


def test_a_body_over_the_limit_is_413(serve: Any) -> None:
    s = serve(max_body=50_000)
    r = post(s, body(user("q", data_url(png(400, 400, fmt="BMP"), "image/bmp"))))
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    assert s.records() == []


def test_unknown_paths_and_methods_are_openai_errors(serve: Any) -> None:
    s = serve()
    r = httpx.get(f"{s.base}/completions", timeout=HANG_S)
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(f"{s.base}/chat/completions", timeout=HANG_S)
    assert r.status_code == 405 and "error" in r.json()


def test_a_foreign_host_header_is_refused(serve: Any) -> None:
    s = serve()
    r = post(s, body(user("q", data_url(png()))), host="evil.example")
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_host"


def test_the_api_key_is_required_and_checked(serve: Any) -> None:
    s = serve(api_key="s3cret")
    for key in ("wrong", ""):
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key=key or "x").chat.completions.create(
                model="naive", messages=user("q", data_url(png()))
            )
    r = post(s, body(user("q", data_url(png()))))  # no Authorization at all
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert httpx.get(f"{s.server.url}health", timeout=HANG_S).status_code == 200
    reply = s.client(api_key="s3cret").chat.completions.create(
        model="naive", messages=user("q", data_url(png()))
    )
    assert reply.choices[0].message.content == "red"
    assert len(s.records()) == 1


# -- image URLs ------------------------------------------------------------------------------------


class ImageSite:
    """A small web server on 127.0.0.1: /ok.png, a redirect to a private address, a slow
    image and an HTML page."""

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.responses import RedirectResponse, Response, StreamingResponse
        from starlette.routing import Route

        image = png()

        async def ok(_r: Any) -> Any:
            return Response(image, media_type="image/png")

        async def to_private(_r: Any) -> Any:
            return RedirectResponse("http://10.1.2.3/x.png")

        async def to_ok(_r: Any) -> Any:
            return RedirectResponse("/ok.png")

        async def slow(_r: Any) -> Any:
            async def trickle() -> Any:
                for b in image:
                    yield bytes([b])
                    await asyncio.sleep(0.5)

            return StreamingResponse(trickle(), media_type="image/png")

        async def page(_r: Any) -> Any:
            return Response("<html></html>", media_type="text/html")

        app = Starlette(
            routes=[
                Route("/ok.png", ok),
                Route("/private", to_private),
                Route("/redirect", to_ok),
                Route("/slow.png", slow),
                Route("/page", page),
            ]
        )
        self.server = BoundServer(app, "127.0.0.1", 0)
        self.server.start_in_thread()
        self.url = self.server.url.rstrip("/")


@pytest.fixture
def site() -> Iterator[ImageSite]:
    s = ImageSite()
    yield s
    s.server.stop()


def only_127_0_0_1(ip: Any) -> bool:
    """The test's web server is on 127.0.0.1: treat that one address as public."""
    return str(ip) == "127.0.0.1"


def test_image_urls_are_fetched_only_when_allowed_and_only_from_public_addresses(
    serve: Any, site: ImageSite
) -> None:
    lenient = serve(images=ImagePolicy(allow_urls=True, timeout_s=3.0, address_ok=only_127_0_0_1))
    for path in ("/ok.png", "/redirect"):
        r = post(lenient, body(user("What colour?", site.url + path)))
        assert r.status_code == 200, r.text
    refusals = {
        "/private": "image_url_private",  # a redirect to 10.1.2.3
        "/slow.png": "image_url_timeout",
        "/page": "not_an_image",
        "/missing": "image_url_failed",
    }
    for path, code in refusals.items():
        r = post(lenient, body(user("What colour?", site.url + path)))
        assert r.status_code == 400 and r.json()["error"]["code"] == code, (path, r.text)
    assert len(lenient.records()) == 2
    strict = serve(images=ImagePolicy(allow_urls=True))
    port = site.server.port
    for url in (
        site.url + "/ok.png",
        f"http://localhost:{port}/ok.png",
        "http://[::1]/x.png",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/a.png",
    ):
        r = post(strict, body(user("What colour?", url)))
        assert r.status_code == 400 and r.json()["error"]["code"] == "image_url_private", url


# -- concurrency, queueing, disconnects ------------------------------------------------------------


def test_past_the_queue_requests_get_429_with_retry_after_scripted_model(serve: Any) -> None:
    llm = GatedLLM()
    s = serve(llm, concurrency=1, max_queue=1)
    results: list[Any] = []

    def ask() -> None:
        results.append(post(s, body(user("What colour?", data_url(png())))))

    first = threading.Thread(target=ask)
    first.start()
    wait_for(lambda: s.service.running == 1, "the first question runs")
    second = threading.Thread(target=ask)
    second.start()
    wait_for(lambda: s.service.waiting == 1, "the second question waits")
    third = post(s, body(user("What colour?", data_url(png()))))
    assert third.status_code == 429
    assert third.json()["error"]["type"] == "rate_limit_error"
    assert int(third.headers["retry-after"]) >= 1
    llm.gate.set()
    first.join(HANG_S)
    second.join(HANG_S)
    assert [r.status_code for r in results] == [200, 200]
    assert [r.status for r in s.records()] == ["finished", "finished"]
    assert llm.calls == 2


def test_a_client_that_disconnects_cancels_its_run_scripted_model(serve: Any) -> None:
    llm = GatedLLM()
    s = serve(llm)

    def ask() -> None:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{s.base}/chat/completions",
                json=body(user("What colour?", data_url(png()))),
                timeout=httpx.Timeout(HANG_S, read=0.5),
            )

    t = threading.Thread(target=ask)
    t.start()
    t.join(HANG_S)
    wait_for(lambda: len(s.records()) == 1, "the cancelled question is recorded")
    (rec,) = s.records()
    assert rec.status == "cancelled" and "the client disconnected" in rec.error
    assert rec.prediction is None
    calls = llm.calls
    llm.gate.set()
    time.sleep(0.2)
    assert llm.calls == calls == 1  # no model call after the disconnect
    assert s.service.running == 0 and not s.service.jobs


def test_a_streaming_client_that_disconnects_cancels_its_run_scripted_model(serve: Any) -> None:
    llm = GatedLLM()
    s = serve(llm)
    with httpx.stream(
        "POST",
        f"{s.base}/chat/completions",
        json=body(user("What colour?", data_url(png())), stream=True),
        timeout=HANG_S,
    ) as r:
        first = next(r.iter_lines())
        assert first.startswith("data: ") and '"role": "assistant"' in first
        wait_for(lambda: llm.started.is_set(), "the model was called")
    wait_for(lambda: len(s.records()) == 1, "the cancelled question is recorded")
    (rec,) = s.records()
    assert rec.status == "cancelled" and "the client disconnected" in rec.error
    assert rec.trace is not None and rec.trace.status == "cancelled"


def test_a_question_over_its_time_is_504_and_recorded_scripted_model(serve: Any) -> None:
    s = serve(GatedLLM(), timeout_s=0.3)
    r = post(s, body(user("What colour?", data_url(png()))))
    assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
    (rec,) = s.records()
    assert rec.status == "timeout" and r.headers[TRACE_HEADER] == rec.sample_id


def test_concurrent_questions_are_each_recorded_once_scripted_model(serve: Any) -> None:
    s = serve(concurrency=4)
    client = s.client()
    with __import__("concurrent.futures").futures.ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(
                lambda i: client.chat.completions.create(
                    model="naive", messages=user(f"What colour? ({i})", data_url(png()))
                ),
                range(16),
            )
        )
    assert [r.choices[0].message.content for r in replies] == ["red"] * 16
    records = s.records()
    assert sorted(r.sample_id for r in records) == sorted(r.id for r in replies)


# -- the request shapes of the evaluation harnesses ------------------------------------------------
# lmms-eval 0.7 (its `openai` model, EvolvingLMMs-Lab/lmms-eval lmms_eval/models/chat/openai.py)
# is not installed here: it pins torch 2.14 with CUDA wheels, which would replace the test
# environment's torch. Its requests are sent as it sends them, through the same openai client.


def test_lmms_eval_request_shape_images_first_png_scripted_model(serve: Any) -> None:
    """lmms-eval: the openai client, one user message [image_url..., text] (PNG data URLs,
    no detail), max_tokens and temperature 0; it reads choices[0].message.content."""
    s = serve()
    mmbench = (
        "What colour is the car? There are several options:\nA. blue\nB. red\n\n"
        "Answer with the option's letter from the given choices directly."
    )
    content = [
        {"type": "image_url", "image_url": {"url": data_url(png())}},
        {"type": "text", "text": mmbench},
    ]
    reply = s.client(api_key="sk-local").chat.completions.create(
        model="naive",
        messages=[{"role": "user", "content": content}],
        max_tokens=16,
        temperature=0,
    )
    assert reply.choices[0].message.content == "B"  # SEED-Bench scores pred.strip()[0]


def test_vlmevalkit_request_shape_jpeg_with_detail_scripted_model(serve: Any) -> None:
    """VLMEvalKit's GPT4V/OpenAIWrapper: a plain POST to the full /v1/chat/completions URL
    with an sk- key, n=1, JPEG data URLs with detail, its MCQ prompt; it reads
    resp['choices'][0]['message']['content']."""
    s = serve()
    prompt = (
        "Question: What colour is the car?\nOptions:\nA. blue\nB. red\n"
        "Please select the correct answer from the options above. \n"
    )
    content = [
        {
            "type": "image_url",
            "image_url": {"url": data_url(png(fmt="JPEG"), "image/jpeg"), "detail": "high"},
        },
        {"type": "text", "text": prompt},
    ]
    r = post(
        s,
        {
            "model": "naive",
            "messages": [{"role": "user", "content": content}],
            "n": 1,
            "temperature": 0,
            "max_tokens": 2048,
        },
        authorization="Bearer sk-local",
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].strip() == "B"
