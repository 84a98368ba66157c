"""``hammr mcp``: hammr's tools and systems offered to any MCP host (Claude Desktop, an IDE,
an agent framework), over stdio or streamable HTTP.

Registered by :mod:`hammr.cli`; the server itself is :mod:`hammr.mcp_bridge.tool_server`,
imported only when the command runs (so ``import hammr.cli`` does not import the MCP SDK).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hammr.cli_common import (
    api_key_option,
    config_option,
    fail,
    listening_key,
    serve_until_stopped,
)
from hammr.terminal_text import echo

DEFAULT_PORT = 8765
DEFAULT_TIMEOUT_S = 600.0

EPILOG_MCP = """\b
Examples:
  hammr mcp                                     # stdio: for a host that starts hammr
  hammr mcp --http --port 8765                  # http://127.0.0.1:8765/mcp
  hammr mcp --http --port 0 --no-systems        # a free port (printed); tools only
  HAMMR_API_KEY=change-me hammr mcp --http --host 0.0.0.0 --port 8765

\b
A host that starts servers itself (Claude Desktop: claude_desktop_config.json) runs it so:
  {"mcpServers": {"hammr": {
      "command": "/path/to/hammr/.venv/bin/hammr",
      "args": ["mcp", "--config", "/path/to/hammr.toml"]}}}

\b
What a host sees: every tool of `hammr tools` (CropImage, ZoomIn, OCR, DetectObject,
Calculator, ...) with a JSON Schema made from its parameters, and one ask_<system> tool per
system of `hammr systems` (question, image, and optionally image2 and point) that runs an
agent and returns its answer. Images go in as data:image/png;base64,... URLs or bare
base64 (over stdio also as paths of image files) and come back as PNG. A call that fails
(bad arguments, a file that is not an image, an image above images.max_pixels, a tool with
no backend here, --timeout-s passed) comes back as an error result saying why.

\b
Over stdio, standard output carries the protocol and nothing else; hammr's messages go to
standard error. Over --http the server listens on 127.0.0.1 unless told otherwise, refuses
requests whose Host names another machine while it does, and needs an API key (--api-key,
or better HAMMR_API_KEY, which `ps` does not show) before it listens on any other address;
a client then sends "Authorization: Bearer KEY". Stop it with Ctrl-C.
"""


@click.command("mcp", epilog=EPILOG_MCP)
@config_option
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="With --http: the address to listen on (any but a loopback one needs an API key).",
)
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="With --http: the port to listen on (0: a free one; the URL is printed).",
)
@api_key_option(
    "With --http: the key every request must carry (Authorization: Bearer KEY). "
    "Needed to listen on an address other than loopback."
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="The most one tool call or one question may take, in seconds.",
)
@click.option(
    "--systems/--no-systems",
    default=True,
    show_default=True,
    help="Offer an ask_<system> tool per system (an agent answers a question about an "
    "image), or only the tools.",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.pass_context
def mcp_cmd(
    ctx: click.Context,
    config_path: Path | None,
    use_http: bool,
    host: str,
    port: int,
    api_key: str | None,
    timeout_s: float,
    systems: bool,
    no_cache: bool,
) -> None:
    """Offer hammr's tools and systems to an MCP host (Model Context Protocol).

    By default the server speaks over standard input and output, as a host that starts it
    expects; --http serves the streamable HTTP transport instead. Tools run on the
    configuration's backends and model, built once at start; a system is built on its first
    question. Exit status: 0 when the host closes the connection (or Ctrl-C stops the HTTP
    server), 2 for a bad option or configuration.
    """
    from_line = click.core.ParameterSource.COMMANDLINE
    if not use_http:
        given = [
            f"--{name.replace('_', '-')}"
            for name in ("host", "port", "api_key")
            if ctx.get_parameter_source(name) == from_line
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            fail(f"{', '.join(given)} {verb} to --http only (without it hammr mcp uses stdio)")
    api_key = listening_key(host, api_key) if use_http else None
    tools = _build(
        config_path,
        local_files=not use_http,
        systems=systems,
        timeout_s=timeout_s,
        cache=False if no_cache else None,
    )
    if use_http:
        _serve_http(tools, host, port, api_key)
    else:
        _serve_stdio(tools)


def _build(
    config_path: Path | None,
    *,
    local_files: bool,
    systems: bool,
    timeout_s: float,
    cache: bool | None,
) -> Any:
    from hammr.backends.llm.base import LLMError
    from hammr.config import ConfigError, load_config

    try:
        from hammr.mcp_bridge.tool_server import HammrTools
    except ImportError as e:  # pragma: no cover - the SDK is a dependency
        fail(f"the MCP SDK is not installed ({e}); pip install 'mcp>=2'")
    try:
        cfg = load_config(config_path)
        return HammrTools(
            cfg, local_files=local_files, systems=systems, timeout_s=timeout_s, cache=cache
        )
    except (ConfigError, LLMError) as e:
        fail(str(e))


def _serve_stdio(tools: Any) -> None:
    import asyncio

    from hammr.mcp_bridge.tool_server import serve_stdio

    server = tools.server()
    echo(
        f"hammr mcp: {len(tools.listing())} tools over stdio; "
        "this process answers until its standard input closes",
        err=True,
    )
    try:
        asyncio.run(serve_stdio(server))
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    except Exception as e:  # the transport's task group raises what broke it, grouped
        broken = _os_error(e)
        if broken is None:
            raise
        fail(f"cannot write to standard output: {broken.strerror or broken}")


def _os_error(e: BaseException) -> OSError | None:
    """The OSError inside ``e`` (an exception group from the transport's tasks), if any."""
    if isinstance(e, OSError):
        return e
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            found = _os_error(inner)
            if found is not None:
                return found
    return None


def _serve_http(tools: Any, host: str, port: int, api_key: str | None) -> None:
    from hammr.mcp_bridge.tool_server import http_server

    try:
        bound = http_server(tools.server(), host, port, api_key=api_key)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    url = f"{bound.url}mcp"
    keyed = " (an API key is required)" if api_key else ""
    echo(
        f"hammr mcp: {len(tools.listing())} tools at {url}{keyed}  (Ctrl-C to stop)",
        err=True,
    )
    echo(url)
    try:
        serve_until_stopped(bound)
    finally:
        bound.socket.close()
    echo("stopped", err=True)


__all__ = ["mcp_cmd"]
