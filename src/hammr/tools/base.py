"""The tool protocol, the ``@tool`` decorator and argument validation.

A tool's prompt card is generated from its signature and docstring, so the card cannot
drift from the code. Arguments coming from a model are validated and coerced against the
annotations (four numbers become a Box, a single box where a list is expected becomes a
list, ...); anything that does not fit raises :class:`BadArguments` with a message the
agent can act on.

A parameter annotated with a union of kinds (``context: Page | str``) accepts exactly those
kinds (:attr:`Param.kinds`: page, then text), and says so on the card (``context: page |
text``); the step grammar offers exactly the literals and variables of those kinds. Only an
annotation hammr has no kind for (``Any``, ``dict``, a union with such a member) is ``any``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from hammr.backends.llm.meter import metered
from hammr.values import Box, Entity, Image, Page, Value, ValueError_

if TYPE_CHECKING:
    from hammr.trace import Trace

ErrorKind = Literal[
    "syntax",
    "no_action",
    "unknown_tool",
    "unknown_variable",
    "bad_arguments",
    "tool_failure",
    "capability_missing",
    "llm_failure",
    "step_limit",
    "repeated_action",
]


class ToolError(Exception):
    """A tool call failed; the message is shown to the agent as an observation."""

    kind: ErrorKind = "tool_failure"


class BadArguments(ToolError):
    kind: ErrorKind = "bad_arguments"


class CapabilityMissing(ToolError):
    """The capability has no backend here: none is configured, or (``reason``) the configured
    one cannot run (a missing program, a file that does not exist, ...), which the message
    says rather than "not configured", so neither the agent nor its user looks in vain."""

    kind: ErrorKind = "capability_missing"

    def __init__(self, capability: str, reason: str | None = None) -> None:
        if reason:
            message = (
                f"capability '{capability}' is configured but its backend cannot run here: {reason}"
            )
        else:
            message = (
                f"capability '{capability}' has no backend configured "
                f"(see hammr.toml [tools.{capability}])"
            )
        super().__init__(message)
        self.capability = capability
        self.reason = reason


class Backends(dict[str, Any]):
    """The backend of each capability (capability -> backend), remembering in
    :attr:`unavailable` why a configured capability has none (capability -> reason), so a
    tool that needs it can say the reason (:meth:`ToolContext.backend`)."""

    def __init__(
        self,
        backends: Mapping[str, Any] | None = None,
        unavailable: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(backends or {})
        self.unavailable: dict[str, str] = dict(unavailable or {})


def unavailable_reason(backends: Mapping[str, Any], capability: str) -> str | None:
    """Why ``capability``'s configured backend could not be built, when ``backends`` knows
    (a :class:`Backends`); None otherwise."""
    if isinstance(backends, Backends):
        return backends.unavailable.get(capability)
    return None


ParamKind = Literal[
    "image",
    "images",
    "box",
    "boxes",
    "text",
    "texts",
    "number",
    "integer",
    "boolean",
    "point",
    "page",
    "entity",
    "any",
]

_KIND_HINT: dict[str, str] = {
    "image": "an image variable",
    "images": "a list of images",
    "box": "a box [x, y, w, h]",
    "boxes": "a list of boxes [[x, y, w, h], ...]",
    "text": "a string",
    "texts": "a list of strings",
    "number": "a number",
    "integer": "an integer",
    "boolean": "True or False",
    "point": "a point [x, y]",
    "page": "a page variable",
    "entity": "an entity variable",
    "any": "any value",
}


class _NoDefault:
    def __repr__(self) -> str:
        return "<required>"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind
    """The kind the parameter takes; for a union, the first of :attr:`kinds`."""
    default: Any = NO_DEFAULT
    doc: str = ""
    choices: tuple[str, ...] | None = None
    also: tuple[ParamKind, ...] = ()
    """The other kinds a union parameter accepts (``Page | str``: kind 'page', also
    ('text',)), tried in order after ``kind``."""

    def __post_init__(self) -> None:
        kinds = self.kinds
        if len(set(kinds)) < len(kinds) or ("any" in kinds and len(kinds) > 1):
            raise ValueError(
                f"parameter {self.name!r}: a union of kinds names each kind once and not "
                f"'any', got {' | '.join(self.kinds)}"
            )

    @property
    def kinds(self) -> tuple[ParamKind, ...]:
        """Every kind the parameter accepts, in the order a value is tried against them."""
        return (self.kind, *self.also)

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def hint(self) -> str:
        """What the parameter accepts, in words ('a page variable or a string')."""
        return " or ".join(_KIND_HINT[k] for k in self.kinds)

    def signature(self) -> str:
        text = f"{self.name}: {' | '.join(self.kinds)}"
        if self.choices:
            text = f"{self.name}: one of " + "|".join(repr(c) for c in self.choices)
        if not self.required:
            text += f" = {self.default!r}"
        return text


@dataclass
class ToolResult:
    value: Value
    observation: str | None = None
    """Text for the agent instead of the default rendering of ``value``."""
    child_trace: Trace | None = None
    final: bool = False
    """End the calling agent's run with this observation as its answer (routing probes)."""
    retrieved: dict[str, Any] | None = None
    """What a memory tool retrieved, for the calling step's ``retrieved`` list in the trace
    (see :mod:`hammr.advice`)."""


@dataclass
class ToolContext:
    """What a running tool may use besides its arguments: backends per capability, the LLM."""

    backends: dict[str, Any] = field(default_factory=dict)
    llm: Any = None
    depth: int = 0
    """How many agents deep this call is (the top agent is 0)."""
    on_step: Callable[[str, int, Any], None] | None = None
    """Called as ``on_step(agent_name, depth, step)`` when any agent in the run starts a step
    and again when it has finished it (progress displays)."""
    on_trace: Callable[[Trace], None] | None = None
    """Called with a run's trace as soon as the run creates it; the trace then grows in place.
    A caller that gives up on the run (a timeout) still holds what was done so far."""
    task: tuple[str, str] | None = None
    """(dataset, sub-task) of the question being answered, when the caller knows it (an
    evaluation: the sample's suite entry and question type, as its stored record has them);
    memory search uses it as the state's task descriptor."""
    caller: Trace | None = None
    """The trace of the agent whose step is calling the tool (its last step is the calling
    one), set by :meth:`for_step`; a memory search makes its query from it."""

    def child(self) -> ToolContext:
        """The context for an agent called one level deeper."""
        return replace(self, depth=self.depth + 1)

    def trace_started(self, trace: Trace) -> None:
        """Tell whoever asked (:attr:`on_trace`) that this run's trace exists."""
        if self.on_trace is not None:
            self.on_trace(trace)

    def for_step(self, step: Any, caller: Trace | None = None) -> ToolContext:
        """The context for a tool called by ``step`` (of the trace ``caller``): an agent it
        runs links its trace to the step as soon as it starts (``step.child``), so a run cut
        short keeps the child's partial trace too. Its model is metered
        (:meth:`with_metered_llm`)."""

        def link(trace: Trace) -> None:
            step.child = trace

        return replace(self, llm=metered(self.llm), on_trace=link, caller=caller)

    def with_metered_llm(self) -> ToolContext:
        """This context with its model's replies added to the current meter (the step's
        whose tool is running: see :mod:`hammr.backends.llm.meter`)."""
        return self if self.llm is metered(self.llm) else replace(self, llm=metered(self.llm))

    def backend(self, capability: str) -> Any:
        b = self.backends.get(capability)
        if b is None:
            raise CapabilityMissing(capability, unavailable_reason(self.backends, capability))
        return b


@runtime_checkable
class Tool(Protocol):
    """Anything an agent can call: plain tools and agents alike."""

    name: str
    description: str

    @property
    def params(self) -> tuple[Param, ...]: ...

    @property
    def returns(self) -> str: ...

    def card(self) -> str: ...

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult: ...


def tool_card(tool: Tool, more: Sequence[str] = ()) -> str:
    """The prompt card of a tool: its signature, description and parameters' docs, then
    ``more`` lines."""
    sig = ", ".join(p.signature() for p in tool.params)
    lines = [f"{tool.name}({sig}) -> {tool.returns or 'value'}", f"  {tool.description}"]
    lines += [f"  {p.name}: {p.doc}" for p in tool.params if p.doc]
    return "\n".join([*lines, *more])


# -- argument coercion -----------------------------------------------------------------------


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _box(v: Any, where: str) -> Box:
    if isinstance(v, Box):
        return v
    if isinstance(v, list | tuple):
        if len(v) == 1 and isinstance(v[0], Box | list | tuple):
            return _box(v[0], where)
        if len(v) == 4 and all(_is_number(x) for x in v):
            return Box.from_xywh(v)
    raise BadArguments(f"{where} must be a box [x, y, w, h] (4 numbers), got {_show(v)}")


def _show(v: Any) -> str:
    from hammr.values import render_value

    text = render_value(v, limit=80)
    return text if not isinstance(v, str) else repr(text)


def coerce(value: Any, param: Param, where: str) -> Any:
    """Validate one argument against its parameter's kinds (each in turn, for a union) and
    return it coerced by the first that fits; raise BadArguments when none does."""
    if not param.also:
        return _coerce_to(value, param.kind, param, where)
    for k in param.kinds:
        try:
            return _coerce_to(value, k, param, where)
        except BadArguments:
            continue
    raise BadArguments(f"{where} must be {param.hint()}, got {_show(value)}")


def _coerce_to(value: Any, k: ParamKind, param: Param, where: str) -> Any:
    """Validate one argument against one kind ``k`` of ``param``."""
    try:
        if k == "any":
            return value
        if k == "image":
            if isinstance(value, Image):
                return value
            raise BadArguments(f"{where} must be an image variable, got {_show(value)}")
        if k == "images":
            if isinstance(value, Image):
                return [value]
            if (
                isinstance(value, list | tuple)
                and value
                and all(isinstance(v, Image) for v in value)
            ):
                return list(value)
            raise BadArguments(f"{where} must be a non-empty list of images, got {_show(value)}")
        if k == "box":
            return _box(value, where)
        if k == "boxes":
            if isinstance(value, Box):
                return [value]
            if isinstance(value, list | tuple):
                if not value:
                    raise BadArguments(f"{where} is an empty list of boxes")
                if len(value) == 4 and all(_is_number(x) for x in value):
                    return [Box.from_xywh(value)]
                return [_box(v, f"{where}[{i}]") for i, v in enumerate(value)]
            raise BadArguments(f"{where} must be a list of boxes, got {_show(value)}")
        if k == "text":
            if isinstance(value, str):
                text = value
            elif _is_number(value):
                text = str(value)
            elif isinstance(value, Entity):
                text = value.name
            else:
                raise BadArguments(f"{where} must be a string, got {_show(value)}")
            if param.choices and text not in param.choices:
                allowed = ", ".join(repr(c) for c in param.choices)
                raise BadArguments(f"{where} must be one of {allowed}, got {text!r}")
            return text
        if k == "texts":
            if isinstance(value, str):
                return [value]
            if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                return list(value)
            raise BadArguments(f"{where} must be a list of strings, got {_show(value)}")
        if k == "number":
            if _is_number(value):
                return float(value)
            if isinstance(value, str):
                try:
                    return float(value)
                except ValueError:
                    pass
            raise BadArguments(f"{where} must be a number, got {_show(value)}")
        if k == "integer":
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise BadArguments(f"{where} must be an integer, got {_show(value)}")
        if k == "boolean":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("yes", "no", "true", "false"):
                return value.lower() in ("yes", "true")
            raise BadArguments(f"{where} must be True or False, got {_show(value)}")
        if k == "point":
            if (
                isinstance(value, list | tuple)
                and len(value) == 2
                and all(_is_number(x) for x in value)
            ):
                return (float(value[0]), float(value[1]))
            raise BadArguments(f"{where} must be a point [x, y], got {_show(value)}")
        if k == "page":
            if isinstance(value, Page):
                return value
            raise BadArguments(f"{where} must be a page variable, got {_show(value)}")
        if k == "entity":
            if isinstance(value, Entity):
                return value
            if isinstance(value, str):
                return Entity(value)
            raise BadArguments(f"{where} must be an entity, got {_show(value)}")
    except ValueError_ as e:
        raise BadArguments(f"{where}: {e}") from None
    raise BadArguments(f"{where}: unsupported parameter kind {k!r}")  # pragma: no cover


def bind_arguments(
    tool: Tool, positional: Sequence[Value], keywords: dict[str, Value]
) -> dict[str, Value]:
    """Match a call's arguments to the tool's parameters, then coerce each one."""
    params = tool.params
    usage = f"usage: {tool.name}({', '.join(p.signature() for p in params)})"
    if len(positional) > len(params):
        raise BadArguments(
            f"{tool.name} takes {len(params)} argument(s) but {len(positional)} were given; {usage}"
        )
    bound: dict[str, Value] = {}
    for p, v in zip(params, positional, strict=False):
        bound[p.name] = v
    by_name = {p.name: p for p in params}
    for k, v in keywords.items():
        if k not in by_name:
            raise BadArguments(f"{tool.name} has no argument '{k}'; {usage}")
        if k in bound:
            raise BadArguments(f"{tool.name} got argument '{k}' twice; {usage}")
        bound[k] = v
    out: dict[str, Value] = {}
    vector = getattr(tool, "vectorised_over", None)
    for p in params:
        if p.name not in bound:
            if p.required:
                raise BadArguments(f"{tool.name} is missing argument '{p.name}'; {usage}")
            out[p.name] = p.default
            continue
        v = bound[p.name]
        where = f"{tool.name} argument '{p.name}'"
        if p.name == vector and isinstance(v, list | tuple):
            if not v:
                raise BadArguments(f"{where} is an empty list")
            out[p.name] = [coerce(x, p, f"{where}[{i}]") for i, x in enumerate(v)]
        else:
            out[p.name] = coerce(v, p, where)
    return out


# -- the @tool decorator ---------------------------------------------------------------------


def _kinds_of(annotation: Any) -> tuple[ParamKind, ...]:
    """The kinds a parameter annotated ``annotation`` accepts: one, or several for a union
    of kinds (``Page | str``: page, text); ``("any",)`` when a member has no kind."""
    origin = typing.get_origin(annotation)
    if origin not in (typing.Union, types.UnionType):
        return (_kind_of(annotation),)
    kinds: list[ParamKind] = []
    for member in typing.get_args(annotation):
        if member is type(None):
            continue  # ``X | None``: None is the default, not a kind a model may write
        for k in _kinds_of(member):
            if k not in kinds:
                kinds.append(k)
    if "any" in kinds or not kinds:
        return ("any",)
    if set(kinds) == {"image", "images"}:
        return ("image",)  # one image or a list of them: a vectorised image parameter
    return tuple(kinds)


def _kind_of(annotation: Any) -> ParamKind:
    """The one kind of ``annotation`` ('any' for a union of several: see :func:`_kinds_of`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = _kinds_of(annotation)
        return kinds[0] if len(kinds) == 1 else "any"
    if origin is Literal:
        return "text"
    if origin in (list, Sequence, tuple) or annotation in (list, tuple):
        inner = args[0] if args else Any
        if origin is tuple and len(args) == 2 and all(a is float or a is int for a in args):
            return "point"
        return {Image: "images", Box: "boxes", str: "texts"}.get(inner, "any")  # type: ignore[return-value]
    table: dict[Any, ParamKind] = {
        Image: "image",
        Box: "box",
        str: "text",
        int: "integer",
        float: "number",
        bool: "boolean",
        Page: "page",
        Entity: "entity",
    }
    return table.get(annotation, "any")


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return)\s*:\s*$", re.I)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str], str]:
    """Split a Google-style docstring into (description, {param: doc}, returns)."""
    if not doc:
        return "", {}, ""
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    returns: list[str] = []
    section = "desc"
    current: str | None = None
    for line in lines:
        m = _SECTION.match(line)
        if m:
            section = "returns" if m.group(1).lower().startswith("return") else "args"
            current = None
            continue
        if section == "desc":
            desc.append(line)
        elif section == "args":
            pm = re.match(r"^\s*(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", line)
            if pm and not line.startswith("        "):
                current = pm.group(1)
                params[current] = pm.group(3).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
        else:
            if line.strip():
                returns.append(line.strip())
    description = " ".join(" ".join(desc).split())
    return description, params, " ".join(returns)


@dataclass
class FunctionTool:
    """A tool made from a typed Python function by :func:`tool`."""

    fn: Callable[..., Any]
    name: str
    description: str
    params: tuple[Param, ...]
    returns: str
    vectorised_over: str | None = None
    batched: bool = False
    blocking: bool = False
    capability: str | None = None
    uses_llm: bool = False
    """The tool calls the run's LLM (``ctx.llm``) itself, e.g. to answer from a text."""
    wants_context: bool = False

    def card(self) -> str:
        more: tuple[str, ...] = ()
        if self.vectorised_over:
            more = (
                f"  Also accepts a list for '{self.vectorised_over}' and returns one result each.",
            )
        return tool_card(self, more)

    async def _call(self, args: dict[str, Value], ctx: ToolContext) -> Any:
        kwargs = dict(args)
        if self.wants_context:
            kwargs["ctx"] = ctx
        if self.blocking:
            return await asyncio.to_thread(self.fn, **kwargs)
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        vec = self.vectorised_over
        try:
            if vec is not None and isinstance(args.get(vec), list) and not self.batched:
                calls = [self._call({**args, vec: item}, ctx) for item in args[vec]]
                value: Any = list(await asyncio.gather(*calls))
            elif vec is not None and self.batched:
                many = isinstance(args.get(vec), list)
                items = args[vec] if many else [args[vec]]
                out = await self._call({**args, vec: items}, ctx)
                value = list(out) if many else out[0]
            else:
                value = await self._call(args, ctx)
        except ToolError:
            raise
        except ValueError_ as e:
            raise BadArguments(f"{self.name}: {e}") from None
        if isinstance(value, ToolResult):
            return value
        return ToolResult(value)


@typing.overload
def tool(
    fn: Callable[..., Any],
    *,
    name: str | None = ...,
    vectorised: str | None = ...,
    batched: bool = ...,
    blocking: bool = ...,
    capability: str | None = ...,
    uses_llm: bool = ...,
) -> FunctionTool: ...


@typing.overload
def tool(
    fn: None = ...,
    *,
    name: str | None = ...,
    vectorised: str | None = ...,
    batched: bool = ...,
    blocking: bool = ...,
    capability: str | None = ...,
    uses_llm: bool = ...,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    vectorised: str | None = None,
    batched: bool = False,
    blocking: bool = False,
    capability: str | None = None,
    uses_llm: bool = False,
) -> Any:
    """Turn a typed function into a :class:`FunctionTool`.

    ``vectorised="image"`` lets the agent pass a list for that argument: the function then runs
    on every element (or, with ``batched=True``, receives the whole list at once and returns a
    list). ``blocking=True`` runs a synchronous function in a worker thread; ``uses_llm=True``
    says the tool calls the run's LLM. A parameter named
    ``ctx`` receives the :class:`ToolContext` and is hidden from the card.
    """

    def build(f: Callable[..., Any]) -> FunctionTool:
        hints = typing.get_type_hints(f)
        sig = inspect.signature(f)
        description, docs, returns_doc = parse_docstring(f.__doc__)
        params: list[Param] = []
        wants_context = False
        for pname, p in sig.parameters.items():
            if pname == "ctx":
                wants_context = True
                continue
            ann = hints.get(pname, Any)
            choices: tuple[str, ...] | None = None
            if typing.get_origin(ann) is Literal:
                choices = tuple(str(a) for a in typing.get_args(ann))
            kinds = _kinds_of(ann)
            if vectorised == pname and kinds == ("images",):
                kinds = ("image",)
            default = NO_DEFAULT if p.default is inspect.Parameter.empty else p.default
            params.append(
                Param(pname, kinds[0], default, docs.get(pname, ""), choices, also=kinds[1:])
            )
        if vectorised is not None and vectorised not in {p.name for p in params}:
            raise TypeError(f"@tool(vectorised={vectorised!r}): no such parameter in {f.__name__}")
        ret = hints.get("return", Any)
        returns = returns_doc or (_kind_of(ret) if ret is not Any else "value")
        return FunctionTool(
            fn=f,
            name=name or f.__name__,
            description=description or f"{f.__name__}.",
            params=tuple(params),
            returns=returns,
            vectorised_over=vectorised,
            batched=batched,
            blocking=blocking,
            capability=capability,
            uses_llm=uses_llm,
            wants_context=wants_context,
        )

    if fn is not None:
        return build(fn)
    return build


ToolFunction = Callable[..., Any | Awaitable[Any]]
