"""Static checks of a MulProg program: what can be known wrong before anything runs.

:func:`validate` checks that every line assigns a new name, calls a known module with the
arguments it takes, of fitting kinds, uses only names defined on earlier lines (EVAL's
``{NAME}``s included), and that the program ends with its one RESULT. The kind of each
variable follows from the module that made it (the first word of the tool's ``returns``:
LOC's ``boxes``, CROP's ``image``, ...); a kind the checker does not know is accepted
anywhere, so a library tool with a free-text ``returns`` is checked leniently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from hammr.actions import Act, Expr, ListExpr, Lit, Var, expr_source
from hammr.programs.language import (
    PLACEHOLDER,
    RESULT_MODULE,
    DeclaresKinds,
    Program,
    ProgramError,
    ProgramErrors,
    ProgramLine,
    VariableReader,
    name_list,
    parse_lines,
    sorted_errors,
    unknown_names,
)
from hammr.tools.base import ParamKind, Tool
from hammr.values import Value, value_kind


def param_kinds(tool: Tool) -> dict[str, str]:
    """The kind the checker expects for each parameter of ``tool`` ('page | text' for a
    parameter that takes a union of kinds)."""
    kinds: dict[str, str] = {p.name: " | ".join(p.kinds) for p in tool.params}
    if isinstance(tool, DeclaresKinds):
        kinds.update({k: v for k, v in tool.expects.items() if k in kinds})
    return kinds


KNOWN_KINDS = frozenset(k for k in get_args(ParamKind) if k != "any")

_FITS: dict[str, frozenset[str]] = {
    "image": frozenset({"image"}),
    "images": frozenset({"image", "images"}),
    "box": frozenset({"box", "boxes"}),
    "boxes": frozenset({"box", "boxes"}),
    "text": frozenset({"text", "number", "integer", "entity"}),
    "texts": frozenset({"text", "texts"}),
    "number": frozenset({"number", "integer", "text"}),
    "integer": frozenset({"integer", "number"}),
    "boolean": frozenset({"boolean", "text"}),
    "point": frozenset({"point"}),
    "page": frozenset({"page"}),
    "entity": frozenset({"entity", "text"}),
}

_ELEMENT = {"boxes": "box", "images": "image", "texts": "text"}

_VALUE_KINDS = {
    "image": "image",
    "box": "box",
    "page": "page",
    "entity": "entity",
    "boolean": "boolean",
    "integer": "integer",
    "number": "number",
    "text": "text",
    "point": "point",
    "list-box": "boxes",
    "list-image": "images",
    "list-text": "texts",
}


def kinds_of(values: Mapping[str, Value]) -> dict[str, str]:
    """The checker's kind of each input value (``image`` for an Image, ...)."""
    return {name: _VALUE_KINDS.get(value_kind(v), "any") for name, v in values.items()}


def returns_kind(tool: Tool) -> str | None:
    """The kind a tool's result has, when its ``returns`` text starts with a kind name."""
    words = tool.returns.strip().split()
    first = words[0].strip(".,:;()").lower() if words else ""
    return first if first in KNOWN_KINDS else None


def _expr_kind(expr: Expr, kinds: Mapping[str, str | None]) -> str | None:
    if isinstance(expr, Lit):
        v = expr.value
        if v is None:
            return None
        return {bool: "boolean", int: "integer", float: "number", str: "text"}[type(v)]
    if isinstance(expr, Var):
        kind = kinds.get(expr.name)
        return kind if expr.index is None or kind is None else _ELEMENT.get(kind)
    if isinstance(expr, ListExpr):
        items = expr.items
        if len(items) == 4 and all(_expr_kind(i, kinds) in ("integer", "number") for i in items):
            return "box"
        inner = {_expr_kind(i, kinds) for i in items}
        if len(inner) == 1:
            return {"box": "boxes", "image": "images", "text": "texts"}.get(str(inner.pop()))
    return None


def _fits(got: str | None, want: str) -> bool:
    wants = want.split(" | ")
    if got is None or got not in KNOWN_KINDS or any(w not in _FITS for w in wants):
        return True
    return any(got in _FITS[w] for w in wants)


def _a(kind: str) -> str:
    if " | " in kind:
        return " or ".join(_a(k) for k in kind.split(" | "))
    plural = kind.endswith("s") or kind in ("text",)
    return kind if plural else ("an " if kind[0] in "aeiou" else "a ") + kind


def _usage(tool: Tool, kinds: Mapping[str, str]) -> str:
    return f"{tool.name}({', '.join(f'{p.name}={kinds[p.name]}' for p in tool.params)})"


def _check_arguments(
    line: ProgramLine, tool: Tool, kinds: Mapping[str, str | None], made_by: Mapping[str, int]
) -> list[ProgramError]:
    act = line.act
    expected = param_kinds(tool)
    names = [p.name for p in tool.params]
    usage = _usage(tool, expected)

    def err(message: str) -> ProgramError:
        return ProgramError("bad_arguments", line.index, message, line.text)

    if len(act.args) > len(names):
        return [err(f"{act.tool} takes {len(names)} argument(s), {len(act.args)} given; {usage}")]
    bound: dict[str, Expr] = dict(zip(names, act.args, strict=False))
    errors: list[ProgramError] = []
    for key, expr in act.kwargs:
        if key not in expected:
            errors.append(err(f"{act.tool} has no argument '{key}'; {usage}"))
        elif key in bound:
            errors.append(err(f"{act.tool} got argument '{key}' twice; {usage}"))
        else:
            bound[key] = expr
    for p in tool.params:
        if p.name not in bound:
            if p.required:
                errors.append(err(f"{act.tool} is missing argument '{p.name}'; {usage}"))
            continue
        expr = bound[p.name]
        got, want = _expr_kind(expr, kinds), expected[p.name]
        if not _fits(got, want):
            source = expr_source(expr)
            origin = ""
            if isinstance(expr, Var) and expr.name in made_by:
                origin = f" (from line {made_by[expr.name] + 1})"
            errors.append(
                err(
                    f"{act.tool} argument '{p.name}' must be {_a(want)}, "
                    f"but {source}{origin} is {_a(str(got))}"
                )
            )
        elif (
            p.choices
            and isinstance(expr, Lit)
            and isinstance(expr.value, str)
            and expr.value not in p.choices
        ):
            allowed = ", ".join(repr(c) for c in p.choices)
            errors.append(err(f"{act.tool} argument '{p.name}' must be one of {allowed}"))
    return errors


def _placeholder_names(act: Act) -> set[str]:
    names: set[str] = set()

    def walk(e: Expr) -> None:
        if isinstance(e, Lit) and isinstance(e.value, str):
            names.update(PLACEHOLDER.findall(e.value))
        elif isinstance(e, ListExpr):
            for item in e.items:
                walk(item)

    for a in act.args:
        walk(a)
    for _, a in act.kwargs:
        walk(a)
    return names


def validate(
    program: Program, modules: Mapping[str, Tool], input_kinds: Mapping[str, str]
) -> list[ProgramError]:
    """Every static error of ``program`` over ``modules`` (empty: it may run).

    ``input_kinds`` names the inputs and their kinds (``{"IMAGE": "image"}``, see
    :func:`kinds_of`); a kind the checker does not know is accepted anywhere.
    """
    kinds: dict[str, str | None] = dict(input_kinds)
    made_by: dict[str, int] = {}
    errors: list[ProgramError] = []
    for line in program.lines:
        act = line.act
        tool = modules.get(act.tool)
        if act.target is None and act.tool != RESULT_MODULE:
            errors.append(
                ProgramError(
                    "syntax",
                    line.index,
                    f"store the result in a new name, as in NAME={act.tool}(...)",
                    line.text,
                )
            )
        elif act.target is not None and act.target in kinds:
            errors.append(
                ProgramError(
                    "redefined",
                    line.index,
                    f"'{act.target}' is already defined; give each result a new name",
                    line.text,
                )
            )
        used = {v.name for v in act.variables()}
        if isinstance(tool, VariableReader):
            used |= _placeholder_names(act)
        missing = sorted(used - kinds.keys())
        if missing:
            errors.append(unknown_names(line.index, line.text, missing, kinds.keys()))
        result_kind: str | None = None
        if tool is None:
            errors.append(
                ProgramError(
                    "unknown_module",
                    line.index,
                    f"module {act.tool} does not exist; modules: {name_list(modules)}",
                    line.text,
                )
            )
        else:
            errors += _check_arguments(line, tool, kinds, made_by)
            if act.tool == RESULT_MODULE and len(act.variables()) == 1:
                result_kind = kinds.get(act.variables()[0].name)
            else:
                result_kind = returns_kind(tool)
        if act.target is not None and act.target not in kinds:
            kinds[act.target] = result_kind
            made_by[act.target] = line.index
    errors += _result_errors(program)
    return sorted_errors(errors)


def _result_errors(program: Program) -> list[ProgramError]:
    results = [line for line in program.lines if line.module == RESULT_MODULE]
    end = "end the program with FINAL_RESULT=RESULT(var=NAME)"
    if not results:
        return [ProgramError("no_result", None, f"the program has no RESULT line; {end}")]
    errors: list[ProgramError] = []
    if len(results) > 1:
        where = ", ".join(str(r.index + 1) for r in results)
        for r in results[:-1]:
            errors.append(
                ProgramError(
                    "no_result",
                    r.index,
                    f"RESULT appears on lines {where}; a program has exactly one RESULT, "
                    "its last line",
                    r.text,
                )
            )
    last = results[-1]
    if last is not program.lines[-1]:
        errors.append(
            ProgramError(
                "no_result",
                last.index,
                "RESULT must be the last line; the lines after it would never run",
                last.text,
            )
        )
    return errors


def compile_program(
    text: str, modules: Mapping[str, Tool], input_kinds: Mapping[str, str]
) -> Program:
    """:func:`parse_program` then :func:`validate`; raise :class:`ProgramErrors` with all
    the errors found.

    When some lines do not parse, the others are still validated (the names the failed
    lines assign count as defined, of unknown kind), so one repair round sees every error.
    """
    parsed = parse_lines(text, modules.keys(), input_kinds.keys())
    program = Program(tuple(parsed.lines), tuple(input_kinds))
    if not parsed.errors:
        errors = validate(program, modules, input_kinds)
        if errors:
            raise ProgramErrors(errors)
        return program
    known = dict(input_kinds) | {t: "any" for _, t in parsed.failed if t is not None}
    # the parse checked names; a RESULT on a failed or cut-off line is not missing
    unsure = any(RESULT_MODULE in line for line, _ in parsed.failed) or any(
        e.kind == "too_long" for e in parsed.errors
    )
    later = [
        e
        for e in validate(program, modules, known)
        if e.kind != "redefined" and not (e.kind == "no_result" and unsure)
    ]
    raise ProgramErrors(parsed.errors + later)


__all__ = [
    "KNOWN_KINDS",
    "compile_program",
    "kinds_of",
    "param_kinds",
    "returns_kind",
    "validate",
]
