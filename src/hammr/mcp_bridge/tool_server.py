"""hammr's tools and systems offered to any MCP host: the server behind ``hammr mcp``.

Every built-in tool (:func:`hammr.tools.library.builtin_tools`) becomes an MCP tool whose
JSON Schema is made from its parameters (:func:`param_schema`), and every registered system
an ``ask_<system>`` tool that answers a question about an image. A call's arguments are
checked by hammr itself (:func:`~hammr.tools.base.bind_arguments`) once its images are
decoded through :meth:`hammr.values.Image.from_bytes` (with ``images.max_pixels``), so a
malformed call, a picture that is not one and a decompression bomb all come back as an error
result (``isError``) that says why, never as a dropped connection.

An image argument is a ``data:image/...;base64,`` URL or bare base64; over stdio (where the
host runs hammr as its own user) also the path of an image file, read through
:mod:`hammr.input_file`. Nothing is fetched from a URL. An image result comes back as PNG
(``ImageContent``) with a line of text saying what it is; any other value as hammr renders it
(``TextContent``) and as JSON (``structuredContent``, boxes as ``[x, y, w, h]``).

:class:`HammrTools` holds what calls run on (the tool backends and the LLM, built once from
the configuration as ``hammr ask`` builds them; the systems, built on their first call) and
answers ``tools/list`` and ``tools/call``; :meth:`HammrTools.server` wraps it in the SDK's
:class:`mcp.server.lowlevel.Server`. :func:`serve_stdio` and :func:`http_server` are the two
transports.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.server.lowlevel import Server

from hammr.agents.system import System
from hammr.config import Config
from hammr.data_url import (
    DataUrlError,
    decode_image,
    image_from_data_url,
    is_data_url,
    png_base64,
    read_base64,
)
from hammr.terminal_text import echo, safe_line
from hammr.tools.base import (
    Backends,
    BadArguments,
    Param,
    ParamKind,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    bind_arguments,
)
from hammr.values import Image, ImageLoadError, Page, Value, render_value, value_json

if TYPE_CHECKING:
    from hammr.web.asgi_server import BoundServer

SERVER_NAME = "hammr"
ASK_PREFIX = "ask_"
MAX_HTTP_BODY = 48 * 1024 * 1024
"""The largest request hammr accepts over HTTP (an image travels as base64 in it)."""
MAX_PATH_CHARS = 4096
INSTRUCTIONS = (
    "hammr's vision and knowledge tools (crop, zoom, OCR, detection, similarity, a "
    "calculator, ...) and its visual question answering systems (ask_<system>: an agent "
    "answers a question about an image; minutes on a small model). Pass images as "
    "data:image/png;base64,... URLs or bare base64. Boxes are [x, y, w, h] in the image's "
    "pixels, points [x, y]."
)


class ArgumentProblem(Exception):
    """An argument hammr cannot use; the message is the error result's text."""


# -- schemas -----------------------------------------------------------------------------------


def image_note(local_files: bool) -> str:
    text = "an image: a data URL (data:image/png;base64,...) or bare base64 of an image file"
    return text + (", or the path of an image file on this machine" if local_files else "")


_NUMBER: dict[str, Any] = {"type": "number"}
_BOX: dict[str, Any] = {"type": "array", "items": _NUMBER, "minItems": 4, "maxItems": 4}
_POINT: dict[str, Any] = {"type": "array", "items": _NUMBER, "minItems": 2, "maxItems": 2}


def kind_schema(kind: ParamKind, choices: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The JSON Schema of one hammr parameter kind."""
    if kind == "image":
        return {"type": "string"}
    if kind == "images":
        return {"type": "array", "items": {"type": "string"}, "minItems": 1}
    if kind == "box":
        return dict(_BOX)
    if kind == "boxes":
        return {"type": "array", "items": dict(_BOX), "minItems": 1}
    if kind == "text":
        return {"type": "string", "enum": list(choices)} if choices else {"type": "string"}
    if kind == "texts":
        return {"type": "array", "items": {"type": "string"}}
    if kind == "number":
        return dict(_NUMBER)
    if kind == "integer":
        return {"type": "integer"}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "point":
        return dict(_POINT)
    if kind in ("page", "entity"):
        return {"type": "string"}
    return {}


_KIND_NOTE: dict[str, str] = {
    "images": "a list of images",
    "box": "a box [x, y, w, h] in the image's pixels",
    "boxes": "a list of boxes [[x, y, w, h], ...] in the image's pixels",
    "point": "a point [x, y] in the image's pixels",
    "page": "the text of a page",
    "entity": "the name of an entity",
}


def param_schema(param: Param, *, local_files: bool, vectorised: bool = False) -> dict[str, Any]:
    """The JSON Schema of one parameter: its kinds (``anyOf`` for a union of kinds that differ
    in JSON), its doc, its default; a vectorised parameter takes a list of its values too."""
    members: list[dict[str, Any]] = []
    for kind in param.kinds:
        schema = kind_schema(kind, param.choices if kind == "text" else None)
        if schema not in members:
            members.append(schema)
    out: dict[str, Any] = members[0] if len(members) == 1 else {"anyOf": members}
    if vectorised:
        out = {"anyOf": [out, {"type": "array", "items": out, "minItems": 1}]}
    notes = [param.doc.strip()] if param.doc.strip() else []
    if any(k in ("image", "images") for k in param.kinds):
        notes.append(
            image_note(local_files)
            + (" (a list of them for images)" if "images" in param.kinds else "")
        )
    notes += [_KIND_NOTE[k] for k in param.kinds if k in _KIND_NOTE and k != "images"]
    if vectorised:
        notes.append("a list gives one result per item")
    if notes:
        out["description"] = " ".join(_sentence(n) for n in notes)
    if not param.required and param.default is not None:
        out["default"] = to_json(param.default)
    return out


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".;")
    return text[:1].upper() + text[1:] + "."


def tool_schema(tool: Tool, *, local_files: bool) -> dict[str, Any]:
    vector = getattr(tool, "vectorised_over", None)
    return {
        "type": "object",
        "properties": {
            p.name: param_schema(p, local_files=local_files, vectorised=p.name == vector)
            for p in tool.params
        },
        "required": [p.name for p in tool.params if p.required],
        "additionalProperties": False,
    }


def ask_schema(local_files: bool, *, question_type: bool = False) -> dict[str, Any]:
    from hammr.text_limits import MAX_QUESTION_CHARS

    image = {"type": "string", "description": image_note(local_files)}
    properties: dict[str, Any] = {
        "question": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUESTION_CHARS,
            "description": "the question about the image",
        },
        "image": image,
        "image2": {**image, "description": "a second image, for two-image questions; "
                   + image_note(local_files)},
        "point": {**_POINT, "description": "a point [x, y] in the image's pixels that the "
                  "question refers to"},
    }  # fmt: skip
    if question_type:
        properties["question_type"] = {
            "type": "string",
            "description": "the question's type (e.g. ocr_reasoning): the specialist of that "
            "type answers",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": ["question", "image"],
        "additionalProperties": False,
    }


def ask_name(system: str) -> str:
    """The MCP tool name of ``system``'s ask tool (``ask_`` and the name, in [A-Za-z0-9_-])."""
    return ASK_PREFIX + re.sub(r"[^A-Za-z0-9_-]", "_", system)


# -- values ------------------------------------------------------------------------------------


def to_json(value: Value) -> Any:
    """A hammr value as JSON: boxes as [x, y, w, h], points as [x, y], a page or an entity
    as an object, an image as its description."""
    return value_json(value, image=lambda img: img.render())


def value_text(value: Value) -> str:
    """A tool's value as the text an MCP host reads: whole (hammr's prompt rendering cuts
    long texts for an agent's context; a host gets all of it)."""
    if isinstance(value, str):
        return value or '""'
    if isinstance(value, Page):
        head = f"{value.title}\n{value.url}" if value.url else value.title
        return f"{head}\n\n{value.text}"
    if isinstance(value, list) and value and all(isinstance(v, Page) for v in value):
        return "\n\n".join(value_text(v) for v in value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return json.dumps(value, ensure_ascii=False)
    return render_value(value, limit=100_000)


def images_of(value: Value) -> list[Image]:
    if isinstance(value, Image):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, Image) for v in value):
        return list(value)
    return []


def image_content(image: Image) -> types.ImageContent:
    data = png_base64(image)
    return types.ImageContent(type="image", data=data, mime_type="image/png")


def text_content(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[text_content(message)], is_error=True)


def tool_result(result: ToolResult) -> types.CallToolResult:
    value = result.value
    images = images_of(value)
    text = result.observation or value_text(value)
    content: list[types.ContentBlock] = [text_content(text)]
    content += [image_content(img) for img in images]
    structured = None if images else {"result": to_json(value)}
    return types.CallToolResult(content=content, structured_content=structured)


# -- the server --------------------------------------------------------------------------------


@dataclass
class BuiltSystem:
    system: System | None
    backends: dict[str, Any]
    problem: str | None = None


class HammrTools:
    """hammr's built-in tools and its systems, as MCP tools, on one configuration.

    ``local_files``: an image argument may be a path on this machine (stdio: the host runs
    hammr as its own user); ``systems``: offer the ``ask_<system>`` tools; ``timeout_s``:
    the most one call may take; ``cache``: use the LLM response cache (None: as configured).
    """

    def __init__(
        self,
        cfg: Config,
        *,
        local_files: bool,
        systems: bool = True,
        timeout_s: float = 600.0,
        cache: bool | None = None,
        llm: Any = None,
    ) -> None:
        from hammr.factory import build_backends, build_llm
        from hammr.systems import registered_systems
        from hammr.tools.library import builtin_tools

        self.cfg = cfg
        self.local_files = local_files
        self.timeout_s = timeout_s
        self.max_pixels = int(cfg.get("images.max_pixels"))
        built = build_backends(cfg)
        self.backends: Backends = built.backends
        self.llm = build_llm(cfg, cache=cache) if llm is None else llm
        self.tools: dict[str, Tool] = {t.name: t for t in builtin_tools()}
        self.systems: dict[str, str] = (
            {ask_name(name): name for name in registered_systems()} if systems else {}
        )
        self._built: dict[str, BuiltSystem] = {}
        self._listing = [self._describe(t) for t in self.tools.values()]
        self._listing += [self._describe_system(n, s) for n, s in self.systems.items()]
        self._schemas = {t.name: t.input_schema for t in self._listing}

    # -- tools/list

    def listing(self) -> list[types.Tool]:
        return list(self._listing)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        return self._schemas.get(name)

    def _describe(self, tool: Tool) -> types.Tool:
        text = tool.description
        if tool.returns:
            text += f"\nReturns: {tool.returns}."
        capability = getattr(tool, "capability", None)
        if capability is not None and capability not in self.backends:
            why = self.backends.unavailable.get(capability)
            text += f"\nNot available on this server: its capability '{capability}' " + (
                f"cannot run here ({why})." if why else "has no backend configured."
            )
        return types.Tool(
            name=tool.name,
            description=text,
            input_schema=tool_schema(tool, local_files=self.local_files),
            annotations=types.ToolAnnotations(read_only_hint=True),
        )

    def _describe_system(self, tool_name: str, system: str) -> types.Tool:
        from hammr.system_info import SYSTEMS

        info = SYSTEMS.get(system)
        about = f" ({info.paper}, {info.role}): {info.what}" if info is not None else ""
        text = (
            f"Answer a question about an image with hammr's system '{system}'{about}. "
            "An agent run: it can take minutes. Returns the answer as text, or says why there "
            "is none."
        )
        return types.Tool(
            name=tool_name,
            title=f"hammr {system}",
            description=text,
            input_schema=ask_schema(self.local_files, question_type=system == "hammr-oracle"),
            annotations=types.ToolAnnotations(read_only_hint=True),
        )

    # -- tools/call

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """Run the tool ``name``: its result, or an error result that says what went wrong
        (never an exception, but cancellation)."""
        args = dict(arguments or {})
        try:
            if name in self.tools:
                return await self._call_tool(self.tools[name], args)
            if name in self.systems:
                return await self._ask(self.systems[name], args)
        except ArgumentProblem as e:
            return error_result(str(e))
        except TimeoutError:
            return error_result(f"{name} did not finish within {self.timeout_s:g} s")
        except Exception as e:  # a bug in a tool or a backend: say so, keep serving
            echo(f"hammr mcp: {name} failed: {safe_line(f'{type(e).__name__}: {e}')}", err=True)
            return error_result(f"{name} failed: {type(e).__name__}: {e}")
        return error_result(f"unknown tool {name!r}; tools/list names the tools")

    async def _call_tool(self, tool: Tool, args: dict[str, Any]) -> types.CallToolResult:
        prepared = {k: self._prepare(tool, k, v) for k, v in args.items()}
        try:
            bound = bind_arguments(tool, [], prepared)
        except BadArguments as e:
            return error_result(str(e))
        try:
            result = await asyncio.wait_for(tool.invoke(bound, self.context()), self.timeout_s)
        except ToolError as e:
            return error_result(str(e))
        return tool_result(result)

    def context(self) -> ToolContext:
        return ToolContext(backends=self.backends, llm=self.llm)

    def _prepare(self, tool: Tool, name: str, value: Any) -> Any:
        """An argument as hammr's coercion takes it: image strings decoded to images, a
        string for a page parameter made a page (the rest is left to the coercion)."""
        param = next((p for p in tool.params if p.name == name), None)
        if param is None:
            return value
        where = f"{tool.name} argument '{name}'"
        if "image" in param.kinds or "images" in param.kinds:
            return self._images(value, where)
        if param.kinds == ("page",) and isinstance(value, str):
            return Page(title="text", text=value)
        return value

    def _images(self, value: Any, where: str) -> Any:
        if isinstance(value, str):
            return self.load_image(value, where)
        if isinstance(value, list):
            return [self._images(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def load_image(self, text: str, where: str) -> Image:
        """The image an argument names: a data URL, bare base64, or (``local_files``) a path.
        :class:`ArgumentProblem` when it is none of these or not a readable image within
        the pixel limit."""
        s = text.strip()
        try:
            if is_data_url(s):
                return image_from_data_url(s, where, max_pixels=self.max_pixels)
            if self.local_files and (path := self._path(s)) is not None:
                return Image.open(path, max_pixels=self.max_pixels)
            if re.match(r"^[a-z][a-z0-9+.-]*://", s, re.I):
                raise ArgumentProblem(
                    f"{where}: hammr does not fetch URLs; send the image itself as a data URL "
                    "(data:image/png;base64,...)"
                )
            try:
                data = read_base64(s, where)
            except DataUrlError:
                if self.local_files:
                    raise ArgumentProblem(
                        f"{where} is neither a data URL, nor base64, nor an image file "
                        "that exists on this machine"
                    ) from None
                raise ArgumentProblem(
                    f"{where} is neither a data URL nor base64 (this server reads no "
                    "files: send the image itself, data:image/png;base64,...)"
                ) from None
            return decode_image(data, "", where, max_pixels=self.max_pixels)
        except (ImageLoadError, DataUrlError) as e:
            raise ArgumentProblem(str(e)) from None

    @staticmethod
    def _path(text: str) -> Path | None:
        """``text`` as the path of something that exists (None: it is not one)."""
        if not text or len(text) > MAX_PATH_CHARS or "\n" in text or "\0" in text:
            return None
        if text.startswith("file://"):
            text = text[len("file://") :]
        path = Path(text).expanduser()
        return path if os.path.lexists(path) else None

    # -- the ask tools

    async def _ask(self, system_name: str, args: dict[str, Any]) -> types.CallToolResult:
        from hammr.text_limits import question_problem

        tool = f"{ask_name(system_name)}"
        allowed = {"question", "image", "image2", "point"}
        if system_name == "hammr-oracle":
            allowed.add("question_type")
        unknown = sorted(set(args) - allowed)
        if unknown:
            return error_result(
                f"{tool} has no argument {unknown[0]!r}; it takes {', '.join(sorted(allowed))}"
            )
        question = args.get("question")
        if not isinstance(question, str):
            return error_result(f"{tool} needs 'question', a string")
        problem = question_problem(question)
        if problem is not None:
            return error_result(f"{tool}: {problem}")
        if not isinstance(args.get("image"), str):
            return error_result(f"{tool} needs 'image', {image_note(self.local_files)}")
        image = self.load_image(args["image"], f"{tool} argument 'image'")
        inputs: dict[str, Value] = {"image": image}
        if args.get("image2") is not None:
            if not isinstance(args["image2"], str):
                return error_result(f"{tool} argument 'image2' must be a string")
            inputs["image2"] = self.load_image(args["image2"], f"{tool} argument 'image2'")
        if args.get("point") is not None:
            inputs["point"] = self._point(args["point"], image, f"{tool} argument 'point'")
        question_type = args.get("question_type")
        if question_type is not None and not isinstance(question_type, str):
            return error_result(f"{tool} argument 'question_type' must be a string")
        built = self._system(system_name)
        if built.system is None:
            return error_result(f"the system '{system_name}' cannot run here: {built.problem}")
        from hammr.agents.baselines import OracleDispatcher

        if isinstance(built.system, OracleDispatcher) and (
            why := built.system.problem(question_type)
        ):
            return error_result(why.replace("hammr ask --question-type TYPE", "question_type"))
        ctx = ToolContext(
            backends=built.backends,
            llm=self.llm,
            task=("", question_type) if question_type else None,
        )
        from hammr.backends.llm.base import LLMError

        try:
            result = await asyncio.wait_for(
                built.system.run(question, inputs, ctx=ctx), self.timeout_s
            )
        except LLMError as e:
            return error_result(f"{system_name}: the model failed: {e}")
        trace = result.trace
        facts = {
            "answer": result.answer,
            "status": trace.status,
            "error": trace.error,
            "system": system_name,
            "steps": len(trace.steps),
        }
        if result.answer is not None:
            return types.CallToolResult(
                content=[text_content(result.answer)], structured_content=facts
            )
        return types.CallToolResult(
            content=[text_content(f"no answer ({trace.status}: {trace.error})")],
            structured_content=facts,
            is_error=True,
        )

    @staticmethod
    def _point(value: Any, image: Image, where: str) -> tuple[float, float]:
        if not (
            isinstance(value, list | tuple)
            and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        ):
            raise ArgumentProblem(f"{where} must be a point [x, y], got {render_value(value)}")
        x, y = float(value[0]), float(value[1])
        if not (0 <= x < image.width and 0 <= y < image.height):
            raise ArgumentProblem(
                f"{where}: ({x:g}, {y:g}) is outside the {image.width}x{image.height} image"
            )
        return (x, y)

    def _system(self, name: str) -> BuiltSystem:
        """The system ``name``, built on its first call (and its reason, when it cannot be)."""
        if name not in self._built:
            from hammr.agents import SpecError
            from hammr.backends.llm.base import LLMError
            from hammr.config import ConfigError
            from hammr.systems import build_system

            try:
                system, backends = build_system(self.cfg, name)
                self._built[name] = BuiltSystem(system, backends)
            except (ConfigError, SpecError, LLMError, ValueError, OSError) as e:
                self._built[name] = BuiltSystem(None, {}, str(e))
        return self._built[name]

    # -- the SDK's server

    def server(self) -> Server[Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            hammr_version = version("hammr")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree
            hammr_version = ""

        async def list_tools(
            ctx: Any, params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.listing())

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await self.call(params.name, params.arguments)

        return Server(
            SERVER_NAME,
            version=hammr_version,
            instructions=INSTRUCTIONS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            get_tool_input_schema=self.input_schema,
        )


# -- transports --------------------------------------------------------------------------------


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one host over this process's stdin and stdout until stdin ends."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def http_server(
    server: Server[Any], host: str, port: int, *, api_key: str | None = None
) -> BoundServer:
    """A :class:`~hammr.web.asgi_server.BoundServer` (bound now: an ``OSError`` says why it
    cannot be) serving the streamable HTTP transport at ``/mcp``: requests naming another host
    are refused while bound to a loopback address, and with ``api_key`` every request must
    carry it (``Authorization: Bearer KEY``)."""
    from hammr.web.asgi_server import ASGIApp, BearerKeyCheck, BoundServer, HostCheck, is_loopback

    app: ASGIApp = server.streamable_http_app(
        host=host.strip("[]"), max_request_body_size=MAX_HTTP_BODY
    )
    app = HostCheck(app, loopback_only=is_loopback(host))
    if api_key:
        app = BearerKeyCheck(app, api_key, refusal=lambda why: {"error": f"unauthorized: {why}"})
    return BoundServer(app, host, port, name="hammr-mcp", lifespan="on")


__all__ = [
    "ArgumentProblem",
    "HammrTools",
    "ask_name",
    "ask_schema",
    "http_server",
    "kind_schema",
    "param_schema",
    "serve_stdio",
    "tool_schema",
]
