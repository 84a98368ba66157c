"""Model text -> a Thought plus an Act or a Finish.

Tolerant of the noise small models produce (spacing around labels, missing brackets, code
fences, markdown bold, prose after the call, an invented ``[Observe]``), strict about meaning:
the act is parsed with :mod:`ast` and only a whitelist is accepted — one call of a tool name,
optionally assigned to one new name, whose arguments are literals (numbers, strings, nested
lists/tuples/dicts, negative numbers), variable names, an integer index into a variable, and
keyword arguments. Nothing is ever evaluated.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hammr.values import Value

ParseErrorKind = Literal["syntax", "no_action", "unknown_tool", "unknown_variable", "bad_arguments"]

MAX_ACTION_CHARS = 8000
MAX_NESTING = 32


@dataclass(frozen=True)
class Lit:
    value: str | int | float | bool | None


@dataclass(frozen=True)
class Var:
    name: str
    index: int | None = None

    def source(self) -> str:
        return self.name if self.index is None else f"{self.name}[{self.index}]"


@dataclass(frozen=True)
class ListExpr:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class DictExpr:
    items: tuple[tuple[str | int | float, Expr], ...]


Expr = Lit | Var | ListExpr | DictExpr


@dataclass(frozen=True)
class Act:
    tool: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()
    target: str | None = None
    source: str = ""

    def variables(self) -> list[Var]:
        found: list[Var] = []

        def walk(e: Expr) -> None:
            if isinstance(e, Var):
                found.append(e)
            elif isinstance(e, ListExpr):
                for item in e.items:
                    walk(item)
            elif isinstance(e, DictExpr):
                for _, item in e.items:
                    walk(item)

        for a in self.args:
            walk(a)
        for _, a in self.kwargs:
            walk(a)
        return found


@dataclass(frozen=True)
class Finish:
    answer: str


@dataclass(frozen=True)
class ParsedStep:
    thought: str
    action: Act | Finish


class ParseError(Exception):
    """The model's text is not a usable step; ``kind`` says why, the message says what to fix."""

    def __init__(self, kind: ParseErrorKind, message: str, thought: str = "", source: str = ""):
        super().__init__(message)
        self.kind: ParseErrorKind = kind
        self.message = message
        self.thought = thought
        self.source = source


# -- finding the labelled sections --------------------------------------------------------------

_LABEL = re.compile(
    r"(?im)^[ \t>*_#`]*(?:\[[ \t]*)?"
    r"(thought|act|action|finish|final[ \t]+answer|observe|observation)"
    r"(?:[ \t]*\])?[ \t*_]*:[ \t]*"
)
_FENCE = re.compile(r"(?m)^[ \t]*```[\w-]*[ \t]*$")
_BOLD_NAME = re.compile(r"^([ \t]*(?:\w+[ \t]*=[ \t]*)?)\*\*(\w+)\*\*(?=[ \t]*\()")


def _canonical(label: str) -> str:
    label = " ".join(label.lower().split())
    if label in ("act", "action"):
        return "act"
    if label in ("finish", "final answer"):
        return "finish"
    if label in ("observe", "observation"):
        return "observe"
    return "thought"


def _sections(text: str) -> list[tuple[str, str]]:
    """(label, body) pairs in order; text before the first label is an unlabelled thought."""
    matches = list(_LABEL.finditer(text))
    out: list[tuple[str, str]] = []
    head = text[: matches[0].start()] if matches else text
    if head.strip():
        out.append(("", head.strip()))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.append((_canonical(m.group(1)), text[m.end() : end].strip()))
    return out


def _call_extent(text: str) -> str:
    """The text of the first ``name(...)`` call, with its assignment, through the closing paren.

    Scans with awareness of string literals so a ')' inside a string does not end the call, and
    drops whatever prose follows the call.
    """
    depth = 0
    quote: str | None = None
    escaped = False
    opened = False
    for i, ch in enumerate(text):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            elif ch == "\n" and depth == 0:
                break
            continue
        if ch in ("'", '"'):
            quote = ch
        elif ch in "([{":
            depth += 1
            opened = opened or ch == "("
            if depth > MAX_NESTING:
                raise ParseError("syntax", f"the action nests brackets deeper than {MAX_NESTING}")
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                break
            if depth == 0 and opened:
                return text[: i + 1]
        elif ch == "\n" and depth == 0 and opened:
            break
    first_line = text.split("\n", 1)[0]
    return first_line if not opened else text


def _clean_act(body: str) -> str:
    body = re.sub(r"^\*{1,2}[ \t]+", "", body.strip())
    fenced = body.startswith("`")
    body = body.strip("`").strip()
    if fenced:
        body = re.sub(r"^[\w+-]*[ \t]*\n", "", body)
    return _BOLD_NAME.sub(r"\1\2", body.strip(), count=1)


# -- validating the call with ast ------------------------------------------------------------


def _is_dunder(name: str) -> bool:
    return name.startswith("__")


class _Converter:
    def __init__(self, variables: Collection[str] | None) -> None:
        self.variables = variables

    def expr(self, node: ast.expr, depth: int = 0) -> Expr:
        if depth > MAX_NESTING:
            raise ParseError("syntax", "arguments are nested too deeply")
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, float) and not math.isfinite(v):
                raise ParseError("syntax", "numbers must be finite; write the value itself")
            if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
                raise ParseError("syntax", "the number is too large; use at most 64 bits")
            if isinstance(v, bool) or v is None or isinstance(v, str | int | float):
                return Lit(v)
            raise ParseError("syntax", f"unsupported literal {type(v).__name__} in the action")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = node.operand
            if (
                isinstance(inner, ast.Constant)
                and isinstance(inner.value, int | float)
                and not isinstance(inner.value, bool)
            ):
                return Lit(-inner.value if isinstance(node.op, ast.USub) else inner.value)
            raise ParseError("syntax", "only numbers may carry a sign")
        if isinstance(node, ast.List | ast.Tuple):
            return ListExpr(tuple(self.expr(e, depth + 1) for e in node.elts))
        if isinstance(node, ast.Dict):
            items: list[tuple[str | int | float, Expr]] = []
            for k, val in zip(node.keys, node.values, strict=True):
                key = self.expr(k, depth + 1) if isinstance(k, ast.Constant | ast.UnaryOp) else None
                if (
                    not isinstance(key, Lit)
                    or isinstance(key.value, bool)
                    or not isinstance(key.value, str | int | float)
                ):
                    raise ParseError("syntax", "dictionary keys must be strings or numbers")
                items.append((key.value, self.expr(val, depth + 1)))
            return DictExpr(tuple(items))
        if isinstance(node, ast.Name):
            return self.var(node.id)
        if isinstance(node, ast.Subscript):
            if not isinstance(node.value, ast.Name):
                raise ParseError("syntax", "only a variable can be indexed, as in crops[0]")
            idx = self.expr(node.slice, depth + 1)
            if not (
                isinstance(idx, Lit)
                and isinstance(idx.value, int)
                and not isinstance(idx.value, bool)
            ):
                raise ParseError("syntax", "an index must be a whole number, as in crops[0]")
            base = self.var(node.value.id)
            return Var(base.name, idx.value)
        if isinstance(node, ast.Call):
            raise ParseError(
                "syntax",
                "a call inside the arguments is not allowed; store its result in a variable first",
            )
        if isinstance(node, ast.Attribute):
            raise ParseError("syntax", "attribute access (a.b) is not allowed in an action")
        if isinstance(node, ast.Lambda):
            raise ParseError("syntax", "lambdas are not allowed in an action")
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            raise ParseError("syntax", "comprehensions are not allowed in an action")
        if isinstance(node, ast.Starred):
            raise ParseError("syntax", "*arguments are not allowed in an action")
        if isinstance(node, ast.BinOp | ast.BoolOp | ast.Compare):
            raise ParseError(
                "syntax", "expressions are not allowed in arguments; write the value itself"
            )
        raise ParseError("syntax", f"{type(node).__name__} is not allowed in an action")

    def var(self, name: str) -> Var:
        if _is_dunder(name):
            raise ParseError("syntax", f"the name '{name}' is not allowed")
        if self.variables is not None and name not in self.variables:
            known = ", ".join(sorted(self.variables)) or "none"
            raise ParseError(
                "unknown_variable", f"variable '{name}' does not exist; variables: {known}"
            )
        return Var(name)


def parse_act(
    source: str,
    tools: Collection[str] | None = None,
    variables: Collection[str] | None = None,
) -> Act:
    """Parse one act line (``[target =] Tool(args)``) against the registered tools and variables."""
    text = _clean_act(source)
    if not text:
        raise ParseError("syntax", "the [Act] is empty; write one tool call such as OCR(image)")
    if len(text) > MAX_ACTION_CHARS:
        raise ParseError("syntax", f"the action is longer than {MAX_ACTION_CHARS} characters")
    code = _call_extent(text).strip()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences in junk
            module = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        msg = getattr(e, "msg", None) or str(e) or type(e).__name__
        raise ParseError(
            "syntax", f"cannot parse the action {code[:120]!r}: {msg}", source=code
        ) from None
    if len(module.body) != 1:
        raise ParseError("syntax", "write exactly one tool call per [Act]", source=code)
    stmt = module.body[0]
    target: str | None = None
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise ParseError("syntax", "assign the result to one plain name, as in crops = ...")
        target = stmt.targets[0].id
        if _is_dunder(target):
            raise ParseError("syntax", f"the name '{target}' is not allowed", source=code)
        if tools is not None and target in tools:
            raise ParseError("syntax", f"'{target}' is a tool; store the result under another name")
        call = stmt.value
    elif isinstance(stmt, ast.Expr):
        call = stmt.value
    elif isinstance(stmt, ast.Import | ast.ImportFrom):
        raise ParseError("syntax", "imports are not allowed in an action", source=code)
    else:
        raise ParseError(
            "syntax", "an action is one tool call, as in crops = CropImage(image, [0, 0, 50, 50])"
        )
    if not isinstance(call, ast.Call):
        raise ParseError("syntax", "an action must call a tool, as in OCR(image)", source=code)
    if isinstance(call.func, ast.Attribute):
        raise ParseError("syntax", "attribute access (a.b) is not allowed in an action")
    if not isinstance(call.func, ast.Name):
        raise ParseError("syntax", "call a tool by its name, as in OCR(image)")
    name = call.func.id
    if _is_dunder(name):
        raise ParseError("syntax", f"the name '{name}' is not allowed")
    if tools is not None and name not in tools:
        available = ", ".join(sorted(tools))
        raise ParseError(
            "unknown_tool",
            f"tool {name} is not registered; available tools: {available}",
            source=code,
        )
    conv = _Converter(variables)
    args = tuple(conv.expr(a) for a in call.args)
    kwargs: list[tuple[str, Expr]] = []
    for kw in call.keywords:
        if kw.arg is not None and any(kw.arg == k for k, _ in kwargs):
            raise ParseError("syntax", f"keyword argument '{kw.arg}' is given twice")
        if kw.arg is None:
            raise ParseError("syntax", "**arguments are not allowed in an action")
        if _is_dunder(kw.arg):
            raise ParseError("syntax", f"the name '{kw.arg}' is not allowed")
        kwargs.append((kw.arg, conv.expr(kw.value)))
    return Act(tool=name, args=args, kwargs=tuple(kwargs), target=target, source=code)


def parse_step(
    text: str,
    tools: Collection[str] | None = None,
    variables: Collection[str] | None = None,
) -> ParsedStep:
    """Parse one model reply into a thought and an action; raise :class:`ParseError` if unusable."""
    if not isinstance(text, str):
        raise ParseError("syntax", "the model reply is not text")
    text = _FENCE.sub("", text)
    thought_parts: list[str] = []
    for label, body in _sections(text):
        if label == "observe":
            break  # the model started inventing observations; ignore the rest
        if label in ("", "thought"):
            thought_parts.append(body)
            continue
        thought = " ".join(" ".join(thought_parts).split())
        if label == "finish":
            answer = body.split("\n", 1)[0].strip() if body else ""
            if not answer:
                raise ParseError("syntax", "the [Finish] has no answer", thought=thought)
            return ParsedStep(thought, Finish(answer))
        try:
            return ParsedStep(thought, parse_act(body, tools, variables))
        except ParseError as e:
            e.thought = thought
            raise
    thought = " ".join(" ".join(thought_parts).split())
    raise ParseError(
        "no_action",
        "no [Act] or [Finish] found; end every step with [Act]: Tool(...) or [Finish]: answer",
        thought=thought,
    )


# -- resolving an act's arguments against the variables -----------------------------------------


class ResolveError(Exception):
    def __init__(self, kind: ParseErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ParseErrorKind = kind


def resolve(expr: Expr, variables: Mapping[str, Value]) -> Any:
    """Turn an argument expression into a value, looking names up in ``variables``."""
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, Var):
        if expr.name not in variables:
            known = ", ".join(sorted(variables)) or "none"
            raise ResolveError(
                "unknown_variable", f"variable '{expr.name}' does not exist; variables: {known}"
            )
        value = variables[expr.name]
        if expr.index is None:
            return value
        if not isinstance(value, list | tuple):
            raise ResolveError(
                "bad_arguments", f"'{expr.name}' is not a list, so it cannot be indexed"
            )
        if not -len(value) <= expr.index < len(value):
            raise ResolveError(
                "bad_arguments",
                f"index {expr.index} is out of range for '{expr.name}' ({len(value)} items)",
            )
        return value[expr.index]
    if isinstance(expr, ListExpr):
        return [resolve(e, variables) for e in expr.items]
    return {k: resolve(v, variables) for k, v in expr.items}


def expr_source(expr: Expr) -> str:
    """Canonical source text of an expression (used in traces and tests)."""
    if isinstance(expr, Lit):
        return repr(expr.value)
    if isinstance(expr, Var):
        return expr.source()
    if isinstance(expr, ListExpr):
        return "[" + ", ".join(expr_source(e) for e in expr.items) + "]"
    return "{" + ", ".join(f"{k!r}: {expr_source(v)}" for k, v in expr.items) + "}"


def act_source(act: Act) -> str:
    parts = [expr_source(a) for a in act.args] + [f"{k}={expr_source(v)}" for k, v in act.kwargs]
    call = f"{act.tool}({', '.join(parts)})"
    return f"{act.target} = {call}" if act.target else call
