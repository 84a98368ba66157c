"""External MCP servers' tools as hammr tools: ``[[tools.mcp]]`` in hammr.toml.

A user with an entity service, a search service or a detector behind the Model Context
Protocol gives it to hammr's agents by configuration alone::

    [[tools.mcp]]
    name = "lens"                            # its tools become lens_FindEntity, ...
    command = ["python", "lens_server.py"]   # stdio; or: url = "http://127.0.0.1:9000/mcp"

(the keys, and what each takes: :data:`hammr.config.MCP_KEYS`). A tool is named
``<name>_<tool>``, with every character outside ``[A-Za-z0-9_]`` made ``_``, so it fits a
step's grammar like a built-in tool; an agent file lists it by that name.

**Connections.** The SDK's sessions live in the task group that opened them, while hammr runs
systems under event loops of its own (``hammr ask``'s ``asyncio.run``, an evaluation's
workers). So each configured server gets one background thread that owns an event loop and
the session (:class:`McpServer`); a call made on any loop is handed to that thread
(:func:`asyncio.run_coroutine_threadsafe`) and awaited where it was made
(:func:`asyncio.wrap_future`). Servers are started once per process per configuration
(:func:`remote_tools`) and stopped at exit (:func:`close_remote_tools`, registered with
:mod:`atexit`; every wait in it is bounded). A stdio server's stderr goes to a pipe whose end
hammr keeps (the last lines are quoted when it fails), never to the terminal.

How a tool's schema becomes hammr parameters, arguments JSON and results values is
:mod:`hammr.mcp_bridge.remote_schema`.

**Faults** are :class:`~hammr.tools.base.ToolError`\\ s, which the agent reads as an
observation, never a crash: an error result (``isError``), a call past ``timeout_s`` (the
server is sent a cancellation), content that cannot be read (an image that is no image), a
refused call, and a server that has exited or closed its connection: that call and every
later one say so, quoting the end of its stderr. A running system does not restart it; the
next system built (the next ``hammr ask``, or :func:`remote_tools` in a long-lived process)
starts it anew.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hammr.config import MCP_DEFAULTS, MCP_TABLE, Config, ConfigError
from hammr.mcp_bridge.remote_schema import (
    Wire,
    description_of,
    image_data,
    params_from_schema,
    result_of,
    returns_of,
    to_json,
)
from hammr.tools.base import (
    Param,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    tool_card,
)
from hammr.values import DEFAULT_MAX_PIXELS, Image, Value

INSTALL = "pip install 'hammr[mcp]'"
"""How to get the MCP SDK, which [[tools.mcp]] needs."""

CALL_GRACE_S = 15.0
"""Beyond an entry's ``timeout_s``, how long a caller waits for the server's thread to give up
on a call itself (the SDK's own timeout), before giving up on that thread."""

STDERR_TAIL_BYTES = 4096
"""How much of the end of a stdio server's stderr is kept, to quote when it fails."""

STDERR_WAIT_S = 10.0
"""How long, after a server's connection closes, hammr waits for the rest of its stderr (it
has exited, so the pipe ends at once; this only bounds a wait on a loaded machine)."""

CLOSE_WAIT_S = 10.0
"""How long closing waits for one server to stop (the SDK's shutdown: stdin closed, then
SIGTERM, then SIGKILL, each wait bounded at 2 s) before leaving its thread behind."""


class McpServerError(ConfigError):
    """A configured MCP server cannot be used: the SDK is missing, the command cannot start,
    the server exits or does not answer, the URL is down. A :class:`ConfigError`, so commands
    print it as the one line it is."""


def _sdk() -> None:
    """Make sure the MCP SDK can be imported (McpServerError, saying how to install it)."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpServerError(
            f"[[tools.mcp]] needs the MCP SDK, which is not installed: {INSTALL}"
        ) from None


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSpec:
    """One ``[[tools.mcp]]`` entry, checked (:func:`hammr.config.load_config`) and resolved."""

    name: str
    where: str
    """The entry as messages name it: ``[[tools.mcp]] 'lens' (from hammr.toml)``."""
    command: tuple[str, ...] = ()
    url: str = ""
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    api_key_env: str = ""
    tools: tuple[str, ...] | None = None
    timeout_s: float = float(MCP_DEFAULTS["timeout_s"])
    max_result_chars: int = int(MCP_DEFAULTS["max_result_chars"])
    startup_timeout_s: float = float(MCP_DEFAULTS["startup_timeout_s"])

    @property
    def key(self) -> str:
        """What identifies the server: two entries with equal keys share one connection."""
        return json.dumps(
            [self.name, self.command, self.url, self.env, self.cwd, self.headers, self.api_key_env],
            sort_keys=True,
        )

    @property
    def shown(self) -> str:
        """The command or URL, for messages and listings."""
        return " ".join(self.command) if self.command else self.url


def server_specs(cfg: Config) -> list[ServerSpec]:
    """The ``[[tools.mcp]]`` entries of ``cfg`` (none: []). A relative ``cwd``, and the
    working folder of a command that names none, is the config file's folder when the entries
    came from it, else the current folder."""
    entries = cfg.get(f"tools.{MCP_TABLE}") or []
    source = cfg.sources.get(f"tools.{MCP_TABLE}", "default")
    from_file = cfg.path is not None and source == str(cfg.path)
    base = cfg.path.parent if from_file and cfg.path is not None else Path.cwd()
    out: list[ServerSpec] = []
    for entry in entries:
        name = str(entry["name"])
        command = tuple(str(c) for c in entry.get("command", ()))
        cwd: str | None = None
        if command:
            chosen = Path(str(entry.get("cwd") or "."))
            cwd = str(chosen if chosen.is_absolute() else (base / chosen))
        allowed = entry.get("tools")
        out.append(
            ServerSpec(
                name=name,
                where=f"[[tools.mcp]] {name!r} (from {source})",
                command=command,
                url=str(entry.get("url") or ""),
                env=tuple(sorted((str(k), str(v)) for k, v in (entry.get("env") or {}).items())),
                cwd=cwd,
                headers=tuple(
                    sorted((str(k), str(v)) for k, v in (entry.get("headers") or {}).items())
                ),
                api_key_env=str(entry.get("api_key_env") or ""),
                tools=tuple(str(t) for t in allowed) if allowed is not None else None,
                timeout_s=float(entry.get("timeout_s", MCP_DEFAULTS["timeout_s"])),
                max_result_chars=int(
                    entry.get("max_result_chars", MCP_DEFAULTS["max_result_chars"])
                ),
                startup_timeout_s=float(
                    entry.get("startup_timeout_s", MCP_DEFAULTS["startup_timeout_s"])
                ),
            )
        )
    return out


# -- a server's stderr -----------------------------------------------------------------------


class _StderrTail:
    """The end of a stdio server's stderr: a pipe the child writes and a thread that drains it
    (a chatty server never blocks on a full pipe), keeping the last bytes."""

    def __init__(self, label: str) -> None:
        self._read_fd, self.write_fd = os.pipe()
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._eof = threading.Event()
        self._writer_open = True
        threading.Thread(target=self._drain, name=f"{label}-stderr", daemon=True).start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 65536):
                with self._lock:
                    self._tail += chunk
                    del self._tail[:-STDERR_TAIL_BYTES]
        except OSError:
            pass
        finally:
            os.close(self._read_fd)
            self._eof.set()

    def release_writer(self) -> None:
        """Close hammr's copy of the pipe's write end (the child has its own), once."""
        with self._lock:
            if self._writer_open:
                self._writer_open = False
                os.close(self.write_fd)

    def note(self, wait_s: float = 0.0) -> str:
        """'; its stderr ends: ...' with the last few lines (waiting up to ``wait_s`` for the
        pipe to end), or '' when it wrote nothing."""
        if wait_s > 0:
            self._eof.wait(wait_s)
        with self._lock:
            text = self._tail.decode("utf-8", errors="replace")
        lines = [" ".join(line.split())[:200] for line in text.splitlines()]
        lines = [line for line in lines if line][-3:]
        return f"; its stderr ends: {' | '.join(lines)}" if lines else ""


# -- one server: its thread, event loop and session ------------------------------------------


class McpServer:
    """A connection to one configured server, owned by a thread of its own (see the module
    docstring). :meth:`start` connects and lists the tools; :meth:`call` may be awaited on
    any event loop; :meth:`close` stops the server and the thread."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.pid = os.getpid()
        self.listed: list[Any] = []
        """The server's tools as it lists them (``mcp_types.Tool``), after :meth:`start`."""
        self.gone: str | None = None
        """Why calls can no longer be made (the server exited, hammr closed it), or None."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, name=f"hammr-mcp-{spec.name}", daemon=True
        )
        self._stop = asyncio.Event()
        self._client: Any = None
        self._holder: concurrent.futures.Future[None] | None = None
        self._held = threading.Event()
        """Set when :meth:`_hold` has let the session go (the server is stopped)."""
        self._stderr: _StderrTail | None = None

    # the server's thread

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    async def _transport(self, stack: AsyncExitStack) -> Any:
        """The SDK transport of this server (an HTTP client it needs is entered on ``stack``)."""
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        spec = self.spec
        if spec.command:
            self._stderr = _StderrTail(f"hammr-mcp-{spec.name}")
            params = StdioServerParameters(
                command=spec.command[0],
                args=list(spec.command[1:]),
                env=dict(spec.env) or None,
                cwd=spec.cwd,
            )
            errlog: Any = self._stderr.write_fd  # a file descriptor: the child's stderr
            return stdio_client(params, errlog=errlog)
        headers = dict(spec.headers)
        if spec.api_key_env:
            key = os.environ.get(spec.api_key_env, "")
            if not key:
                raise McpServerError(
                    f"{spec.where}: api_key_env names ${spec.api_key_env}, which is not set"
                )
            headers["Authorization"] = f"Bearer {key}"
        if not headers:
            return streamable_http_client(spec.url)
        # The SDK's transport takes an httpx2 client (its public way to send headers): the
        # SDK's own timeouts (30 s, reads 300 s: a response stream stays open); a client the
        # transport is given is the giver's to close.
        import httpx2

        client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        http = await stack.enter_async_context(client)
        return streamable_http_client(spec.url, http_client=http)

    async def _hold(self, ready: concurrent.futures.Future[list[Any]]) -> None:
        """Open the session, list the tools, then hold the session until told to stop: the
        SDK's task groups are entered and left by this one task."""
        from mcp import Client, Implementation

        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                info = Implementation(name="hammr", version="0.1.0")
                client = await stack.enter_async_context(Client(transport, client_info=info))
                self._release_stderr()
                listed = await _list_tools(client)
                self._client = client
                ready.set_result(listed)
                await self._stop.wait()
        except BaseException as e:  # the session's task groups raise groups of anything
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(repr(e)))
            elif self.gone is None and isinstance(e, Exception):
                what = _leaf(e)
                note = await asyncio.to_thread(self._stderr_note, STDERR_WAIT_S)
                self.gone = (
                    f"the connection to the MCP server {self.spec.name!r} failed "
                    f"({type(what).__name__}: {_one_line(what)}){note}"
                )
            if not isinstance(e, Exception):
                raise
        finally:
            self._client = None
            self._release_stderr()
            self._held.set()

    def _release_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.release_writer()

    def _stderr_note(self, wait_s: float = 0.0) -> str:
        return self._stderr.note(wait_s) if self._stderr is not None else ""

    async def _call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float, shown: str
    ) -> Any:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = self._client
        if client is None:
            raise ToolError(self.gone or f"the MCP server {self.spec.name!r} is not connected")
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                await self._lost()
                raise ToolError(str(self.gone)) from None
            if e.code == REQUEST_TIMEOUT:
                raise ToolError(self._timeout_message(shown, timeout_s)) from None
            raise ToolError(
                f"the MCP server {self.spec.name!r} refused the call of {shown}: {_one_line(e)}"
            ) from None
        except ToolError:
            raise
        except Exception as e:
            what = _leaf(e)
            raise ToolError(
                f"the call of {shown} on the MCP server {self.spec.name!r} failed: "
                f"{type(what).__name__}: {_one_line(what)}"
            ) from None

    async def _lost(self) -> None:
        """The connection closed under a call: remember why, and let the session go."""
        if self.gone is None:
            note = await asyncio.to_thread(self._stderr_note, STDERR_WAIT_S)
            what = "exited" if self.spec.command else "closed its connection"
            self.gone = (
                f"the MCP server {self.spec.name!r} ({self.spec.shown}) {what}, so its tools "
                f"cannot be called any more in this run{note}"
            )
        self._stop.set()

    def _timeout_message(self, tool: str, timeout_s: float) -> str:
        return (
            f"{tool} did not answer within {timeout_s:g} s (timeout_s of {self.spec.where}); "
            "try another tool or [Finish]"
        )

    # any thread

    def start(self) -> list[Any]:
        """Start the server (or connect to its URL) and list its tools; McpServerError, naming
        the entry, when it cannot within ``startup_timeout_s``."""
        spec = self.spec
        self._thread.start()
        ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        self._holder = asyncio.run_coroutine_threadsafe(self._hold(ready), self._loop)
        try:
            self.listed = ready.result(timeout=spec.startup_timeout_s)
            return self.listed
        except TimeoutError:
            problem = (
                f"did not start and list its tools within startup_timeout_s = "
                f"{spec.startup_timeout_s:g} s"
            )
            self._holder.cancel()  # still entering the session: stop that
        except McpServerError:
            self.close()
            raise
        except Exception as e:
            problem = _startup_problem(e, spec)
        self.close()
        raise McpServerError(f"{spec.where}: {problem}{self._stderr_note(STDERR_WAIT_S)}")

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float, shown: str | None = None
    ) -> Any:
        """Call ``tool`` with JSON ``arguments`` on the server's thread and return its
        ``CallToolResult``; ToolError for anything but a result (``shown``: the tool's name in
        messages, default ``tool``)."""
        shown = shown or tool
        if self.gone is not None:
            raise ToolError(self.gone)
        try:
            future = asyncio.run_coroutine_threadsafe(
                self._call(tool, arguments, timeout_s, shown), self._loop
            )
        except RuntimeError:  # its loop has been closed
            raise ToolError(self.gone or f"the MCP server {self.spec.name!r} is closed") from None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s + CALL_GRACE_S)
        except TimeoutError:
            raise ToolError(self._timeout_message(shown, timeout_s)) from None

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Stop the server and its thread; every wait bounded by about ``wait_s``."""
        self.signal_close()
        self.wait_closed(wait_s)

    def signal_close(self) -> None:
        """Tell the server's thread to let the session go (returns at once)."""
        if self.gone is None:
            self.gone = f"hammr has closed its connection to the MCP server {self.spec.name!r}"
        if not self._thread.is_alive():
            return
        try:
            self._loop.call_soon_threadsafe(self._stop.set)
        except RuntimeError:
            return  # the loop is already closed

    def wait_closed(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Wait (at most about ``wait_s``) for the session to end, then stop the thread."""
        if not self._thread.is_alive():
            return
        holder = self._holder
        if holder is not None and not self._held.wait(wait_s):
            holder.cancel()  # still starting: cancel the task that is entering the session
            self._held.wait(wait_s)
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:
            return
        self._thread.join(timeout=wait_s)


async def _list_tools(client: Any) -> list[Any]:
    """Every tool the server lists, page after page (at most 100 pages)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools += list(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _leaf(e: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups, or ``e``."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _one_line(e: object, limit: int = 300) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _startup_problem(e: BaseException, spec: ServerSpec) -> str:
    """Why a server could not be started, in words."""
    what = _leaf(e)
    if isinstance(what, FileNotFoundError) and spec.command:
        if spec.cwd is not None and not Path(spec.cwd).is_dir():
            return f"its working folder {spec.cwd} does not exist"
        return f"cannot start {spec.command[0]!r}: no such program (command = {list(spec.command)})"
    if isinstance(what, PermissionError) and spec.command:
        return f"cannot start {spec.command[0]!r}: permission denied"
    if isinstance(what, OSError) and spec.command:
        return f"cannot start {spec.shown!r}: {what.strerror or what}"
    name = type(what).__name__
    if name == "MCPError" and getattr(what, "code", None) == -32000:  # CONNECTION_CLOSED
        if spec.command:
            return "the server exited (or closed its stdout) before it answered the handshake"
        return "the server closed the connection before it answered the handshake"
    if spec.url and name in ("ConnectError", "ConnectTimeout"):
        return f"cannot connect to {spec.url} ({_one_line(what)})"
    return f"cannot connect ({name}: {_one_line(what)})"


# -- the tools -------------------------------------------------------------------------------


@dataclass
class RemoteTool:
    """One tool of an MCP server, as a hammr :class:`~hammr.tools.base.Tool`."""

    name: str
    description: str
    params: tuple[Param, ...]
    returns: str
    server: McpServer
    spec: ServerSpec
    """Its entry: the limits its calls are held to."""
    remote_name: str
    """The tool's name on the server."""
    wires: dict[str, Wire] = field(default_factory=dict)
    max_pixels: int = DEFAULT_MAX_PIXELS

    @property
    def mcp_server(self) -> str:
        """The ``name`` of its ``[[tools.mcp]]`` entry."""
        return self.spec.name

    def card(self) -> str:
        return tool_card(self)

    def arguments(self, args: Mapping[str, Value]) -> dict[str, Any]:
        """The call's JSON arguments; an optional one left at None is left out."""
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name not in args:
                continue
            value = args[p.name]
            if value is None and not p.required:
                continue
            wire = self.wires.get(p.name, Wire(p.name))
            if p.kind == "image" and isinstance(value, Image):
                out[wire.name] = image_data(value, wire.image)
            elif p.kind == "images" and isinstance(value, list):
                out[wire.name] = [image_data(v, wire.image) for v in value]
            else:
                out[wire.name] = to_json(value)
        return out

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        spec = self.spec
        arguments = await asyncio.to_thread(self.arguments, args)  # PNG encoding: off the loop
        result = await self.server.call(self.remote_name, arguments, spec.timeout_s, self.name)
        return result_of(
            result,
            self.name,
            server=spec.name,
            where=spec.where,
            max_chars=spec.max_result_chars,
            max_pixels=self.max_pixels,
        )


def tool_name(server: str, tool: str) -> str:
    """``<server>_<tool>`` with every character outside [A-Za-z0-9_] made '_'."""
    return f"{server}_{re.sub(r'[^A-Za-z0-9_]', '_', tool)}"


def tools_of(
    server: McpServer, spec: ServerSpec | None = None, max_pixels: int = DEFAULT_MAX_PIXELS
) -> list[RemoteTool]:
    """The hammr tools of a started server, under ``spec`` (its entry; default the one it was
    started with: the allow-list and limits); McpServerError when the allow-list names a tool
    the server does not offer or two names clash once sanitised."""
    spec = spec or server.spec
    listed = {str(t.name): t for t in server.listed}
    names = list(listed) if spec.tools is None else list(spec.tools)
    missing = [n for n in names if n not in listed]
    if missing:
        raise McpServerError(
            f"{spec.where}: tools lists {', '.join(repr(n) for n in missing)}, which the "
            f"server does not offer; it offers: {', '.join(listed) or 'no tools'}"
        )
    out: list[RemoteTool] = []
    seen: dict[str, str] = {}
    for remote in names:
        listing = listed[remote]
        name = tool_name(spec.name, remote)
        if name in seen:
            raise McpServerError(
                f"{spec.where}: its tools {seen[name]!r} and {remote!r} are both {name} in "
                "hammr; keep one with tools = [...]"
            )
        seen[name] = remote
        params, wires = params_from_schema(getattr(listing, "input_schema", None))
        description = description_of(
            getattr(listing, "description", None) or getattr(listing, "title", None) or remote
        )
        out.append(
            RemoteTool(
                name=name,
                description=f"{description} (MCP server '{spec.name}')",
                params=params,
                returns=returns_of(getattr(listing, "output_schema", None)),
                server=server,
                spec=spec,
                remote_name=remote,
                wires=wires,
                max_pixels=max_pixels,
            )
        )
    return out


# -- once per process per configuration ------------------------------------------------------

_LOCK = threading.Lock()
_SERVERS: dict[str, McpServer] = {}
_AT_EXIT = False


def remote_tools(cfg: Config, reserved: Sequence[str] = ()) -> list[Tool]:
    """The tools of every ``[[tools.mcp]]`` server of ``cfg`` (none: [] and the SDK is never
    imported). Each server is started once per process and kept until exit; one that has
    gone since is started anew. ``reserved``: names already taken (the built-in tools), which
    a remote tool may not take. McpServerError (a ConfigError) naming the entry when the SDK
    is missing or a server cannot be used."""
    global _AT_EXIT
    specs = server_specs(cfg)
    if not specs:
        return []
    _sdk()
    logging.getLogger("mcp.client").addHandler(logging.NullHandler())  # its errors are ours
    max_pixels = int(cfg.get("images.max_pixels") or DEFAULT_MAX_PIXELS)
    out: list[Tool] = []
    owner: dict[str, str] = {name: "a built-in tool" for name in reserved}
    with _LOCK:
        if not _AT_EXIT:
            atexit.register(close_remote_tools)
            _AT_EXIT = True
        for spec in specs:
            server = _SERVERS.get(spec.key)
            if server is not None and (server.gone is not None or server.pid != os.getpid()):
                if server.pid == os.getpid():
                    server.close()
                del _SERVERS[spec.key]
                server = None
            if server is None:
                server = McpServer(spec)
                server.start()
                _SERVERS[spec.key] = server
            for t in tools_of(server, spec, max_pixels):
                if t.name in owner:
                    raise McpServerError(
                        f"{spec.where}: its tool {t.remote_name!r} would be {t.name}, which is "
                        f"{owner[t.name]}; rename the entry or leave the tool out with "
                        "tools = [...]"
                    )
                owner[t.name] = f"a tool of {spec.where}"
                out.append(t)
    return out


def close_remote_tools() -> None:
    """Stop every server :func:`remote_tools` started in this process (at exit; tests).
    Every server is told first, then each waited for, every wait bounded."""
    with _LOCK:
        servers = [s for s in _SERVERS.values() if s.pid == os.getpid()]
        _SERVERS.clear()
    for server in servers:
        server.signal_close()
    for server in servers:
        server.wait_closed()


__all__ = [
    "INSTALL",
    "McpServer",
    "McpServerError",
    "RemoteTool",
    "ServerSpec",
    "close_remote_tools",
    "params_from_schema",
    "remote_tools",
    "result_of",
    "server_specs",
    "to_json",
    "tool_name",
    "tools_of",
]
