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

**Parameters** (:func:`params_from_schema`), from each property of the tool's input schema:
string → text (with ``enum``: one of the choices); number → number; integer → integer; boolean
→ boolean; an array of strings → texts; a string the schema says is an image
(``contentMediaType: image/*``, ``format: image``, or a name such as ``image`` or ``photo``
with ``contentEncoding: base64``) → image, sent as base64 PNG when the schema says
``contentEncoding: base64`` and as a ``data:image/png;base64,`` URL otherwise (an array of
such strings → images); anything else → any, sent as JSON (a box as [x, y, w, h], an entity
as its name, an image as a data URL). Required properties come first, in the schema's order.

**Results** (:func:`result_of`): a text content is text, an image content a
:class:`~hammr.values.Image` (decoded under ``images.max_pixels``), several contents a list;
where the server gives ``structuredContent`` the value is that JSON (a primitive's
``{"result": ...}`` wrapper unwrapped) and the observation the server's text. The agent reads
the whole text, not a 300-character rendering, up to ``max_result_chars``: a longer text is
**truncated** to that many characters with a note saying so (not refused: the start of a long
page is usually what the agent wanted).

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
import base64
import binascii
import concurrent.futures
import json
import keyword
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
from hammr.tools.base import NO_DEFAULT, Param, ParamKind, Tool, ToolContext, ToolError, ToolResult
from hammr.values import DEFAULT_MAX_PIXELS, Box, Entity, Image, ImageLoadError, Page, Value

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

MAX_DESCRIPTION_CHARS = 1000
"""The longest tool or parameter description put on a card (a server's text, into prompts)."""

_IMAGE_NAME = re.compile(r"(image|img|photo|picture|frame)s?(_?(b64|base64|data))?", re.I)


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


# -- schema -> parameters --------------------------------------------------------------------


@dataclass(frozen=True)
class _Wire:
    """How a parameter travels: its property's name, and how an image is encoded."""

    name: str
    image: str | None = None
    """'base64' or 'data-url' for an image (or images) parameter; None otherwise."""


def _resolve(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """``schema`` with a local ``$ref`` followed, and ``X | null`` (anyOf/oneOf) made X."""
    if not isinstance(schema, dict) or depth > 8:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        target = defs.get(ref.rsplit("/", 1)[1])
        merged = {**_resolve(target, defs, depth + 1), **{k: v for k, v in schema.items()}}
        merged.pop("$ref", None)
        return merged
    for union in ("anyOf", "oneOf"):
        options = schema.get(union)
        if isinstance(options, list):
            real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(real) == 1:
                rest = {k: v for k, v in schema.items() if k != union}
                return {**_resolve(real[0], defs, depth + 1), **rest}
    kind = schema.get("type")
    if isinstance(kind, list):
        real_types = [t for t in kind if t != "null"]
        if len(real_types) == 1:
            return {**schema, "type": real_types[0]}
    return schema


def _image_encoding(name: str, schema: Mapping[str, Any]) -> str | None:
    """'base64' or 'data-url' when the string property ``name`` is an image, else None."""
    if schema.get("type") not in ("string", None):
        return None
    media = str(schema.get("contentMediaType") or "")
    base64_encoded = str(schema.get("contentEncoding") or "").lower() == "base64"
    if media.startswith("image/") or schema.get("format") == "image":
        return "base64" if base64_encoded else "data-url"
    if base64_encoded and _IMAGE_NAME.fullmatch(name):
        return "base64"
    return None


def _kind_of(name: str, schema: Mapping[str, Any]) -> tuple[ParamKind, str | None]:
    """The parameter kind of one property, and its image encoding (see the module docstring)."""
    kind = schema.get("type")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum):
        return "text", None
    if kind == "string" or (kind is None and _image_encoding(name, schema)):
        encoding = _image_encoding(name, schema)
        return ("image", encoding) if encoding else ("text", None)
    if kind == "number":
        return "number", None
    if kind == "integer":
        return "integer", None
    if kind == "boolean":
        return "boolean", None
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, dict) and items.get("type") == "string":
            encoding = _image_encoding(name, items)
            return ("images", encoding) if encoding else ("texts", None)
    return "any", None


def _param_name(name: str, taken: set[str]) -> str:
    """A name a step can write as a keyword (``image-url`` → ``image_url``), unique."""
    clean = re.sub(r"\W", "_", name, flags=re.ASCII) or "arg"
    if clean[0].isdigit():
        clean = "_" + clean
    if keyword.iskeyword(clean):
        clean += "_"
    out, n = clean, 2
    while out in taken:
        out, n = f"{clean}_{n}", n + 1
    return out


def _description(text: Any) -> str:
    """A server's description, on one line, at most :data:`MAX_DESCRIPTION_CHARS`."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= MAX_DESCRIPTION_CHARS else flat[: MAX_DESCRIPTION_CHARS - 3] + "..."


def params_from_schema(schema: Any) -> tuple[tuple[Param, ...], dict[str, _Wire]]:
    """The parameters of a tool whose input schema is ``schema`` (required ones first, each in
    the schema's order), and how each travels (hammr name -> :class:`_Wire`)."""
    if not isinstance(schema, dict):
        return (), {}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return (), {}
    required = {r for r in schema.get("required") or () if isinstance(r, str)}
    order = [n for n in properties if n in required] + [n for n in properties if n not in required]
    params: list[Param] = []
    wires: dict[str, _Wire] = {}
    taken: set[str] = set()
    for prop in order:
        if not isinstance(prop, str):
            continue
        sub = _resolve(properties[prop], defs)
        kind, encoding = _kind_of(prop, sub)
        enum = sub.get("enum")
        choices = (
            tuple(enum)
            if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum)
            else None
        )
        if prop in required:
            default: Any = NO_DEFAULT
        else:
            default = sub.get("default")
            if kind in ("image", "images") or not _json_scalar(default):
                default = None  # None: the argument is left out of the call
        name = _param_name(prop, taken)
        taken.add(name)
        doc = _description(sub.get("description") or "")
        params.append(Param(name, kind, default, doc, choices))
        wires[name] = _Wire(prop, encoding)
    return tuple(params), wires


def _json_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _returns(schema: Any) -> str:
    """What a tool returns, in words, from its output schema ('value' without one)."""
    if not isinstance(schema, dict):
        return "value"
    properties = schema.get("properties")
    if isinstance(properties, dict) and set(properties) == {"result"}:
        schema = properties["result"] if isinstance(properties["result"], dict) else {}
    kind = schema.get("type")
    words = {"string": "text", "number": "number", "integer": "integer", "boolean": "boolean"}
    if kind in words:
        return words[str(kind)]
    if kind == "array":
        return "list"
    if kind == "object":
        return "JSON object"
    return "value"


# -- arguments and results -------------------------------------------------------------------


def _image_data(image: Image, encoding: str | None) -> str:
    data = base64.b64encode(image.png_bytes()).decode("ascii")
    return data if encoding == "base64" else f"data:image/png;base64,{data}"


def to_json(value: Value) -> Any:
    """A hammr value as JSON for an ``any`` parameter."""
    if isinstance(value, Image):
        return _image_data(value, "data-url")
    if isinstance(value, Box):
        return value.xywh()
    if isinstance(value, Entity):
        return value.name
    if isinstance(value, Page):
        return {"title": value.title, "text": value.text, "url": value.url}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _cut(text: str, limit: int, where: str) -> str:
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[... cut: the result had {len(text):,} characters; the first "
        f"{limit:,} are shown (max_result_chars of {where})]"
    )


def result_of(
    result: Any, tool: str, spec: ServerSpec, max_pixels: int = DEFAULT_MAX_PIXELS
) -> ToolResult:
    """A ``CallToolResult`` as hammr's value and observation (see the module docstring);
    ToolError for an error result or content that cannot be read."""
    content = getattr(result, "content", None)
    if not isinstance(content, list):
        raise ToolError(f"{tool}: the MCP server {spec.name!r} sent a reply with no content")
    texts: list[str] = []
    parts: list[Value] = []
    for i, item in enumerate(content):
        kind = getattr(item, "type", None)
        if kind == "text":
            text = str(getattr(item, "text", ""))
            texts.append(text)
            parts.append(text)
        elif kind == "image":
            image = _decoded_image(item, f"{tool}'s image #{i + 1}", max_pixels)
            texts.append(image.render())
            parts.append(image)
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            body = getattr(resource, "text", None)
            if isinstance(body, str):
                texts.append(body)
                parts.append(body)
            else:
                note = f"(a resource hammr does not read: {getattr(resource, 'uri', '?')})"
                texts.append(note)
                parts.append(note)
        elif kind == "resource_link":
            note = f"(a link to {getattr(item, 'uri', '?')})"
            texts.append(note)
            parts.append(note)
        else:
            note = f"({kind or 'unknown'} content, which hammr does not read)"
            texts.append(note)
            parts.append(note)
    full = "\n".join(texts)
    text = _cut(full, spec.max_result_chars, spec.where)
    if getattr(result, "is_error", False):
        raise ToolError(f"{tool} failed: {text or 'the MCP server reported an error'}")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        if isinstance(structured, dict) and set(structured) == {"result"}:
            structured = structured["result"]  # a primitive's wrapper (the SDK's servers)
        dumped = json.dumps(structured, ensure_ascii=False, default=str)
        if len(dumped) <= spec.max_result_chars:
            shown = text if texts else _cut(dumped, spec.max_result_chars, spec.where)
            return ToolResult(structured, observation=shown)
    if not parts:
        return ToolResult("", observation="(the tool returned nothing)")
    if len(parts) == 1:
        only = parts[0]
        if isinstance(only, Image):
            return ToolResult(only)
        return ToolResult(text, observation=text)
    if text != full:  # over max_result_chars: the text, cut, and the images
        return ToolResult([text, *[p for p in parts if isinstance(p, Image)]], observation=text)
    return ToolResult(parts, observation=text)


def _decoded_image(item: Any, where: str, max_pixels: int) -> Image:
    data = str(getattr(item, "data", ""))
    if data.startswith("data:"):
        data = data.split(",", 1)[-1]
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"{where} is not valid base64 data") from None
    try:
        return Image.from_bytes(raw, max_pixels=max_pixels, source=where)
    except ImageLoadError as e:
        raise ToolError(str(e)) from None


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
    wires: dict[str, _Wire] = field(default_factory=dict)
    max_pixels: int = DEFAULT_MAX_PIXELS

    @property
    def mcp_server(self) -> str:
        """The ``name`` of its ``[[tools.mcp]]`` entry."""
        return self.spec.name

    def card(self) -> str:
        sig = ", ".join(p.signature() for p in self.params)
        lines = [f"{self.name}({sig}) -> {self.returns or 'value'}", f"  {self.description}"]
        for p in self.params:
            if p.doc:
                lines.append(f"  {p.name}: {p.doc}")
        return "\n".join(lines)

    def arguments(self, args: Mapping[str, Value]) -> dict[str, Any]:
        """The call's JSON arguments; an optional one left at None is left out."""
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name not in args:
                continue
            value = args[p.name]
            if value is None and not p.required:
                continue
            wire = self.wires.get(p.name, _Wire(p.name))
            if p.kind == "image" and isinstance(value, Image):
                out[wire.name] = _image_data(value, wire.image)
            elif p.kind == "images" and isinstance(value, list):
                out[wire.name] = [_image_data(v, wire.image) for v in value]
            else:
                out[wire.name] = to_json(value)
        return out

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        spec = self.spec
        arguments = await asyncio.to_thread(self.arguments, args)  # PNG encoding: off the loop
        result = await self.server.call(self.remote_name, arguments, spec.timeout_s, self.name)
        return result_of(result, self.name, spec, self.max_pixels)


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
        description = _description(
            getattr(listing, "description", None) or getattr(listing, "title", None) or remote
        )
        out.append(
            RemoteTool(
                name=name,
                description=f"{description} (MCP server '{spec.name}')",
                params=params,
                returns=_returns(getattr(listing, "output_schema", None)),
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
