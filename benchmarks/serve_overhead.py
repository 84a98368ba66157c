"""(p) What `hammr serve` adds to a question: requests per second and latency through the
OpenAI-compatible server vs the same system called in this process.

Both sides run the naive system on a scripted model that answers at once (so what is measured
is hammr, not a model): in process, ``system.run`` with ``concurrency`` questions in flight;
served, the same questions as chat-completions requests (a 64x48 PNG data URL each) from an
httpx client in this process to `hammr serve`'s application in a child process (uvicorn,
Starlette, the request parsing and image decoding, the run store's commit of every question).
The added latency is the median served latency less the median in-process one at the same
concurrency (target: under 5 ms at concurrency 8); the added work per question is the
difference of the wall times per question (1 / q/s), what each question costs the machine
more when it comes through the server. The client's own cost (httpx, in this process, on the
same cores) is counted in both; the HTTP floor is the same client against the same server
stack answering a fixed completion, so served − floor is what hammr's own work adds.
"""

from __future__ import annotations

import asyncio
import base64
import io
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from PIL import Image as PILImage

COLUMNS = [
    "concurrency",
    "questions",
    "in process q/s",
    "served q/s",
    "HTTP floor q/s",
    "in process median",
    "served median",
    "HTTP floor median",
    "added latency",
    "added work per question",
]
LEVELS = (1, 8, 32)
REPLY = "[Thought]: It is red.\n[Finish]: red"


def _png() -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (64, 48), "red").save(out, "PNG")
    return out.getvalue()


def _floor(port_out: Any) -> None:
    """The child process of the floor: the same server (uvicorn behind hammr's hardening,
    Starlette) whose endpoint reads the body and answers a fixed completion, no hammr."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from hammr.web.asgi_server import BoundServer

    async def chat(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": "red"}}]})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    server = BoundServer(app, "127.0.0.1", 0)
    port_out.put(server.port)
    server.serve_forever()


def _serve(port_out: Any, store: str, concurrency: int) -> None:
    """The child process: `hammr serve`'s application on a scripted model."""
    from hammr.backends.llm.scripted import ScriptedLLM
    from hammr.config import load_config
    from hammr.eval.store import RunStore
    from hammr.serve.app import build_app
    from hammr.serve.service import ChatService, ServedModel
    from hammr.web.asgi_server import BoundServer

    service = ChatService(
        load_config(None, env={}),
        {"naive": ServedModel("naive", "ready")},
        store=RunStore(store),
        session="bench",
        llm=ScriptedLLM(lambda _r: REPLY),
        concurrency=concurrency,
        max_queue=1024,
    )
    server = BoundServer(build_app(service), "127.0.0.1", 0)
    port_out.put(server.port)
    server.serve_forever()


async def _in_process(n: int, concurrency: int) -> tuple[float, list[float]]:
    from hammr.backends.llm.scripted import ScriptedLLM
    from hammr.config import load_config
    from hammr.systems import build_system
    from hammr.tools.base import ToolContext
    from hammr.values import Image

    system, backends = build_system(load_config(None, env={}), "naive")
    llm = ScriptedLLM(lambda _r: REPLY)
    image = Image.from_bytes(_png())
    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(i: int) -> None:
        async with slots:
            started = time.perf_counter()
            ctx = ToolContext(backends=dict(backends), llm=llm)
            result = await system.run(f"What colour? ({i})", {"image": image}, ctx=ctx)
            assert result.answer == "red"
            latencies.append(time.perf_counter() - started)

    await one(-1)  # warm up
    latencies.clear()
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started, latencies


async def _served(base: str, n: int, concurrency: int) -> tuple[float, list[float]]:
    url = "data:image/png;base64," + base64.b64encode(_png()).decode()
    latencies: list[float] = []
    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=600) as client:

        async def one(i: int) -> None:
            body = {
                "model": "naive",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": f"What colour? ({i})"},
                            {"type": "image_url", "image_url": {"url": url}},
                        ],
                    }
                ],
            }
            async with slots:
                started = time.perf_counter()
                r = await client.post("/v1/chat/completions", json=body)
                reply = r.json()["choices"][0]["message"]["content"]
                assert r.status_code == 200 and reply == "red"
                latencies.append(time.perf_counter() - started)

        await one(-1)
        latencies.clear()
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - started, latencies


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f} ms"


def run(levels: tuple[int, ...] = LEVELS) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    spawn = multiprocessing.get_context("spawn")

    def through(target: Any, args: tuple[Any, ...], n: int, c: int) -> tuple[float, list[float]]:
        ports = spawn.Queue()
        child = spawn.Process(target=target, args=(ports, *args))
        child.start()
        try:
            port = ports.get(timeout=120)
            return asyncio.run(_served(f"http://127.0.0.1:{port}", n, c))
        finally:
            child.terminate()
            child.join(30)

    for concurrency in levels:
        n = max(256, 16 * concurrency)
        with tempfile.TemporaryDirectory() as tmp:
            store = str(Path(tmp) / "runs.sqlite")
            served_wall, served = through(_serve, (store, concurrency), n, concurrency)
        floor_wall, floor = through(_floor, (), n, concurrency)
        local_wall, local = asyncio.run(_in_process(n, concurrency))
        added = statistics.median(served) - statistics.median(local)
        rows.append(
            (
                str(concurrency),
                str(n),
                f"{n / local_wall:.0f}",
                f"{n / served_wall:.0f}",
                f"{n / floor_wall:.0f}",
                _ms(statistics.median(local)),
                _ms(statistics.median(served)),
                _ms(statistics.median(floor)),
                _ms(added),
                _ms(served_wall / n - local_wall / n),
            )
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(" | ".join(row))
