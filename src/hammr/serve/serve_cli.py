"""``hammr serve``: every system of a configuration as a model behind OpenAI's chat API.

Registered by :mod:`hammr.cli`; the HTTP application is :mod:`hammr.serve.app`, what it does
with a question :mod:`hammr.serve.service`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click

from hammr.cli_common import (
    API_KEY_ENV,
    api_key_option,
    config_option,
    fail,
    listening_key,
    serve_until_stopped,
    store_option,
)
from hammr.terminal_text import echo

DEFAULT_PORT = 8400

EPILOG_SERVE = f"""\b
Examples:
  hammr serve                                   # every system this configuration runs
  hammr serve --system hammr --system avis --port 8400
  HAMMR_LLM__BACKEND=openai HAMMR_LLM__BASE_URL=http://127.0.0.1:8000/v1 \\
    HAMMR_LLM__MODEL=Qwen/Qwen2.5-VL-7B-Instruct hammr serve --concurrency 4 --allow-image-urls

\b
Then, from any OpenAI client (the model is a hammr system):
  from openai import OpenAI
  client = OpenAI(base_url="http://127.0.0.1:{DEFAULT_PORT}/v1", api_key="unused")
  reply = client.chat.completions.create(model="hammr", messages=[{{"role": "user",
      "content": [{{"type": "text", "text": "What is the licence plate number?"}},
                  {{"type": "image_url", "image_url": {{"url": "data:image/png;base64,..."}}}}]}}])
  print(reply.choices[0].message.content, reply.usage, reply.model_extra["hammr"])

\b
Every question is recorded in the run store as the run serve-SESSION-MODEL: read them with
`hammr view`, `hammr report` and `hammr errors` while the server runs. A question whose
options are lettered lines (A. red / B. blue) is answered with the letter. The server listens
on 127.0.0.1 only unless --host says otherwise, and then only with an API key (--api-key or
${API_KEY_ENV}). docs/serving.md has recipes for lmms-eval, VLMEvalKit and MCP hosts.
"""


@click.command("serve", epilog=EPILOG_SERVE)
@click.option(
    "--system",
    "systems",
    multiple=True,
    metavar="NAME",
    help="A system to offer as a model (repeat for several; an agent's name works too). "
    "Default: every system `hammr systems` says this configuration runs.",
)
@config_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: a free one; the URL is printed).",
)
@store_option
@click.option(
    "--name",
    "session",
    metavar="SESSION",
    help="The session's name in run names (serve-SESSION-MODEL); default: the start time.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Questions answered at once; more wait in a queue. Default: as `hammr eval`'s (1 on "
    "the embedded model; as many as a served model's servers say they run at once, each "
    "question in a slot of its own; else 8 per server).",
)
@click.option(
    "--max-queue",
    default=32,
    show_default=True,
    type=click.IntRange(min=0),
    help="Questions that may wait for a place; past that, 429 with Retry-After.",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Give up on a question after this many seconds (504; recorded as a timeout). "
    "Default: no limit.",
)
@click.option(
    "--allow-image-urls",
    is_flag=True,
    help="Fetch http(s) image URLs (public addresses only, with size and time limits); "
    "otherwise only data: URLs are read.",
)
@click.option(
    "--max-body-mb",
    default=32.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="The largest request body, in MiB (413 past it).",
)
@api_key_option(
    "Require this key (Authorization: Bearer KEY); required to listen beyond 127.0.0.1."
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.option(
    "--shutdown-grace-s",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="On SIGTERM or Ctrl-C, how long questions in flight may finish before they are "
    "cancelled (and recorded as cancelled).",
)
@click.option("--verbose", is_flag=True, help="Log every request (uvicorn's access log).")
def serve_cmd(
    systems: tuple[str, ...],
    config_path: Path | None,
    host: str,
    port: int,
    store_path: Path | None,
    session: str | None,
    concurrency: int | None,
    max_queue: int,
    timeout_s: float | None,
    allow_image_urls: bool,
    max_body_mb: float,
    api_key: str | None,
    no_cache: bool,
    shutdown_grace_s: float,
    verbose: bool,
) -> None:
    """Answer OpenAI chat-completions requests with hammr's systems: each system is a model.

    POST /v1/chat/completions takes the last user message's text as the question and its
    image_url parts (data: URLs) as the image(s), runs the system named as the model, and
    answers with its answer, the usage of every model call it made, and the trace id
    (x-hammr-trace-id). GET /v1/models lists the systems. Stop with Ctrl-C or SIGTERM.
    """
    from hammr.agents import SpecError
    from hammr.config import ConfigError, load_config
    from hammr.eval.store import StoreError, default_store_path
    from hammr.factory import build_llm, resolve_concurrency
    from hammr.serve.image_source import ImagePolicy
    from hammr.serve.service import ChatService

    api_key = listening_key(host, api_key)
    try:
        cfg = load_config(config_path)
        models = served_models(cfg, systems)
        llm = build_llm(cfg, cache=False if no_cache else None)
        in_flight = resolve_concurrency(cfg, concurrency)
    except (ConfigError, SpecError) as e:
        fail(str(e))
    if not models:
        fail("no system runs on this configuration (`hammr systems` says why)")
    where = store_path if store_path is not None else default_store_path()
    from hammr.eval.store import RunStore

    try:
        store = RunStore(where)
    except (StoreError, OSError) as e:
        fail(str(e))
    service = ChatService(
        cfg,
        models,
        store=store,
        session=session or time.strftime("%Y%m%d-%H%M%S"),
        llm=llm,
        concurrency=in_flight.n,
        lanes=in_flight.lanes,
        max_queue=max_queue,
        timeout_s=timeout_s,
        images=ImagePolicy(
            allow_urls=allow_image_urls, max_pixels=int(cfg.get("images.max_pixels"))
        ),
    )
    try:
        server = serve_server(
            service,
            host=host,
            port=port,
            api_key=api_key,
            max_body=int(max_body_mb * 2**20),
            shutdown_grace_s=shutdown_grace_s,
            verbose=verbose,
        )
    except OSError as e:
        store.close()
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    base = f"{server.url}v1"
    echo(
        f"hammr serve: {base} (models: {', '.join(models)}; {service.concurrency} at a time "
        f"({in_flight.why}), "
        f"{max_queue} may wait); questions go to {store.path} as runs "
        f"{service.run_name('MODEL')}  (Ctrl-C to stop)",
        err=True,
    )
    echo(base)
    try:
        serve_until_stopped(server)
    finally:
        store.close()
    echo("hammr serve: stopped", err=True)


NOT_SERVED = {
    "hammr-oracle": "it needs each question's type (hammr ask --question-type), which a chat "
    "request does not carry",
}
"""Systems a chat request cannot drive, and why."""


def served_models(cfg: Any, wanted: tuple[str, ...]) -> dict[str, Any]:
    """The systems to offer (``wanted``, else every one that runs on ``cfg``), as
    :class:`~hammr.serve.service.ServedModel` by name; ConfigError/SpecError for a wanted
    one that is unknown or cannot run."""
    from hammr.agents import AgentCatalog, SpecError
    from hammr.factory import build_backends
    from hammr.serve.service import ServedModel
    from hammr.system_info import SYSTEMS, assess
    from hammr.systems import registered_systems

    built = build_backends(cfg)
    known = [n for n in registered_systems() if n not in NOT_SERVED]
    for name in wanted:
        if name in NOT_SERVED:
            raise SpecError(f"{name} cannot be served: {NOT_SERVED[name]}")
    agents = list(AgentCatalog.from_config(cfg).specs) if wanted else []
    for name in wanted:
        if name not in known and name not in agents:
            raise SpecError(f"unknown system or agent {name!r}; choose from: {', '.join(known)}")
    systems = [n for n in (wanted or known) if n in known]
    ready = assess(cfg, built.backends, built.unavailable, systems)
    out: dict[str, ServedModel] = {}
    for name in wanted or known:
        r = ready.get(name)
        if r is not None and not r.runs:
            if wanted:
                why = "; ".join(p.what for p in r.problems if p.blocking)
                raise SpecError(f"{name} cannot run on this configuration: {why}")
            continue
        info = SYSTEMS.get(name)
        out[name] = ServedModel(
            name,
            r.status if r is not None else "ready",
            info.paper if info is not None else "",
            tuple(p.what for p in r.problems) if r is not None else (),
        )
    return out


def serve_server(
    service: Any,
    *,
    host: str,
    port: int,
    api_key: str | None,
    max_body: int,
    shutdown_grace_s: float = 30.0,
    verbose: bool = False,
) -> Any:
    """A :class:`~hammr.web.asgi_server.BoundServer` for ``service``, its socket bound: the
    model is loaded at startup, and on shutdown every question still in flight is
    cancelled and recorded."""
    from hammr.eval.runner import prepare
    from hammr.serve.app import build_app
    from hammr.web.asgi_server import BoundServer, is_loopback

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        await prepare(service.llm)
        try:
            yield
        finally:
            await service.shutdown()

    app = build_app(
        service,
        loopback_only=is_loopback(host),
        api_key=api_key,
        max_body=max_body,
        lifespan=lifespan,
    )
    return BoundServer(
        app,
        host,
        port,
        name="hammr-serve",
        verbose=verbose,
        lifespan="on",
        shutdown_grace_s=shutdown_grace_s,
    )


__all__ = ["serve_cmd", "serve_server", "served_models"]
