"""The MulProg program language: one module call per line, parsed safely and checked before
it runs.

A program is what an LLM writes for a question, in the style of the MEAgent paper::

    BOX0=LOC(image=IMAGE,object='woman')
    IMAGE0=CROP_RIGHTOF(image=IMAGE,box=BOX0)
    ANSWER0=VQA(image=IMAGE0,question='What is the man wearing?')
    FINAL_RESULT=RESULT(var=ANSWER0)

Each line is parsed by :func:`hammr.actions.parse_act` (an :mod:`ast` whitelist: one call,
literal or variable arguments, nothing evaluated). :func:`parse_program` tolerates what
models wrap programs in (blank lines, code fences, ``1.`` / ``Step 1:`` numbering, trailing
``#`` comments, a ``Program:`` header; a ``Question:`` line after the program ends it, as the
model has started another example), checks that each line calls a known module, assigns a
new name and uses only names defined before it. The checks that need the modules themselves
(argument kinds, the one RESULT at the end) are in :mod:`hammr.programs.checks`. Every error
is collected with its line, so one repair round can show the model all of them
(:func:`format_errors`).

Line numbers: :attr:`ProgramError.line` and :attr:`ProgramLine.index` count program lines
from 0 (blank and fence lines are not program lines); messages show them from 1.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args, runtime_checkable

from hammr.actions import Act, ParseError, ParseErrorKind, parse_act
from hammr.tools.base import ParamKind, ToolContext, ToolResult
from hammr.values import Value

MAX_PROGRAM_LINES = 64
RESULT_MODULE = "RESULT"

ProgramErrorKind = Literal[
    "syntax",
    "unknown_module",
    "unknown_variable",
    "bad_arguments",
    "no_result",
    "redefined",
    "too_long",
]

MODEL_MISTAKES: frozenset[str] = frozenset((*get_args(ProgramErrorKind), *get_args(ParseErrorKind)))
"""Error kinds that say the model's program (or reply) is wrong, not that a module or backend
failed: a run they end has no answer (status ``no_answer``), a result like a wrong answer,
not a failure to ask again."""


@dataclass(frozen=True)
class ProgramError:
    """One thing wrong with a program: ``line`` is the 0-based program line, or None when the
    error is about the whole program (no RESULT, too long); ``text`` is that line's source."""

    kind: ProgramErrorKind
    line: int | None
    message: str
    text: str = ""

    def render(self) -> str:
        where = "program" if self.line is None else f"line {self.line + 1}"
        if self.text:
            where += f" `{_clip(self.text, 120)}`"
        return f"{where}: [{self.kind}] {self.message}"


class ProgramErrors(Exception):
    """A program that cannot run; :attr:`errors` holds every error found, in line order."""

    def __init__(self, errors: Sequence[ProgramError]) -> None:
        self.errors = sorted_errors(errors)
        super().__init__(format_errors(self.errors))


def sorted_errors(errors: Iterable[ProgramError]) -> list[ProgramError]:
    """Errors in line order, whole-program errors last."""
    return sorted(errors, key=lambda e: e.line if e.line is not None else MAX_PROGRAM_LINES + 1)


def format_errors(errors: Sequence[ProgramError]) -> str:
    """The errors as lines for a repair prompt (or a trace's error)."""
    return "\n".join(e.render() for e in sorted_errors(errors))


@dataclass(frozen=True)
class ProgramLine:
    """A parsed line: its 0-based position, the call, and the line's text as written."""

    index: int
    act: Act
    text: str

    @property
    def module(self) -> str:
        return self.act.tool

    @property
    def target(self) -> str | None:
        return self.act.target


@dataclass(frozen=True)
class Program:
    lines: tuple[ProgramLine, ...]
    inputs: tuple[str, ...] = ()
    """The names the program may use without defining them (``IMAGE``)."""

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[ProgramLine]:
        return iter(self.lines)

    def source(self) -> str:
        return "\n".join(line.text for line in self.lines)


# -- what a module may add to the Tool protocol -------------------------------------------


@runtime_checkable
class VariableReader(Protocol):
    """A module that reads the program's variables by name inside its text arguments (EVAL's
    ``{ANSWER0}``). The interpreter calls :meth:`invoke_with_variables` instead of
    ``invoke``, and :func:`hammr.programs.checks.validate` checks that each ``{NAME}`` is
    defined on an earlier line."""

    async def invoke_with_variables(
        self, args: dict[str, Value], ctx: ToolContext, variables: Mapping[str, Value]
    ) -> ToolResult: ...


@runtime_checkable
class DeclaresKinds(Protocol):
    """A module whose parameters take ``any`` value at run time but that the checker should
    check as a kind: a LOC result may be an empty list of boxes, which the ``boxes`` kind
    of :func:`hammr.tools.base.coerce` refuses, so COUNT's ``box`` is ``any`` with
    ``expects = {"box": "boxes"}``."""

    @property
    def expects(self) -> Mapping[str, ParamKind]: ...


# -- parsing -----------------------------------------------------------------------------

_FENCE = re.compile(r"^```[\w+-]*$")
_HEADER = re.compile(r"^\**program\**\s*:\**$", re.I)
_QUESTION = re.compile(r"^\**question\**\s*:", re.I)
_NUMBERING = re.compile(r"^(?:step\s*\d+\s*[:.)]|\d+\s*[.:)]|[-*•]\s)\s*", re.I)
_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")
PLACEHOLDER = re.compile(r"\{\s*([A-Za-z_]\w*)\s*\}")
"""A variable named inside an EVAL expression, as in ``{ANSWER0}``."""


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a '#' inside a string literal stays)."""
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(line):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def program_lines(text: str) -> list[str]:
    """The program lines of a model's text, cleaned (see the module docstring)."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _FENCE.match(line) or line.startswith("#") or _HEADER.match(line):
            continue
        if _QUESTION.match(line):
            if out:
                break  # the model went on to write another example
            continue
        line = _NUMBERING.sub("", line, count=1)
        line = _strip_comment(line).strip().strip("`").strip()
        if line:
            out.append(line)
    return out


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_list(names: Collection[str]) -> str:
    """Names for a message, sorted, at most 40."""
    shown = sorted(names)
    return ", ".join(shown[:40]) + (", ..." if len(shown) > 40 else "") if shown else "none"


_PARSE_KINDS: dict[str, ProgramErrorKind] = {
    "syntax": "syntax",
    "no_action": "syntax",
    "unknown_tool": "unknown_module",
    "unknown_variable": "unknown_variable",
    "bad_arguments": "bad_arguments",
}


@dataclass
class ParsedLines:
    """What :func:`parse_lines` made of a text: the lines that parsed, every error, and
    ``failed``: (text, target name or None) of each line that did not."""

    lines: list[ProgramLine]
    errors: list[ProgramError]
    failed: list[tuple[str, str | None]]


def parse_lines(text: str, modules: Collection[str], inputs: Collection[str]) -> ParsedLines:
    """Parse every line of ``text`` it can, collecting the errors of the others."""
    if not isinstance(text, str):
        return ParsedLines([], [ProgramError("syntax", None, "the program is not text")], [])
    module_names = set(modules)
    defined: set[str] = set(inputs)
    out = ParsedLines([], [], [])
    for index, line in enumerate(program_lines(text)):
        if index >= MAX_PROGRAM_LINES:
            message = f"the program is longer than {MAX_PROGRAM_LINES} lines"
            out.errors.append(ProgramError("too_long", None, message))
            break
        try:
            act = parse_act(line, None, None)
        except ParseError as e:
            out.errors.append(ProgramError(_PARSE_KINDS[e.kind], index, e.message, line))
            m = _TARGET.match(line)
            target = m.group(1) if m else None
            out.failed.append((line, target))
            if target is not None:
                defined.add(target)
            continue
        error = _line_error(index, line, act, module_names, defined)
        if act.target is not None:
            defined.add(act.target)
        if error is not None:
            out.errors.append(error)
            out.failed.append((line, act.target))
        else:
            out.lines.append(ProgramLine(index, act, line))
    return out


def parse_program(text: str, modules: Collection[str], inputs: Collection[str]) -> Program:
    """Parse a program over ``modules`` that may use ``inputs``; raise :class:`ProgramErrors`
    with every line's error when any line cannot be parsed.

    A line that fails still defines its target name (when one can be read), so one mistake
    does not make every later use of that name an error too.
    """
    parsed = parse_lines(text, modules, inputs)
    if parsed.errors:
        raise ProgramErrors(parsed.errors)
    return Program(tuple(parsed.lines), tuple(inputs))


def _line_error(
    index: int, line: str, act: Act, modules: set[str], defined: set[str]
) -> ProgramError | None:
    if line.startswith(act.source):
        rest = line[len(act.source) :].strip()
        if rest:
            return ProgramError(
                "syntax",
                index,
                f"unexpected text after the call: {_clip(rest, 40)!r}; write one call per line",
                line,
            )
    if act.tool not in modules:
        return ProgramError(
            "unknown_module",
            index,
            f"module {act.tool} does not exist; modules: {name_list(modules)}",
            line,
        )
    if act.target is not None and act.target in modules:
        return ProgramError(
            "syntax",
            index,
            f"'{act.target}' is a module; store the result under another name",
            line,
        )
    if act.target is not None and act.target in defined:
        return ProgramError(
            "redefined",
            index,
            f"'{act.target}' is already defined; give each result a new name",
            line,
        )
    missing = sorted({v.name for v in act.variables()} - defined)
    if missing:
        return unknown_names(index, line, missing, defined)
    return None


def unknown_names(
    index: int, line: str, names: Sequence[str], defined: Collection[str]
) -> ProgramError:
    """The error for names used on line ``index`` but not defined before it."""
    what = ", ".join(f"'{n}'" for n in names)
    return ProgramError(
        "unknown_variable",
        index,
        f"{what} {'is' if len(names) == 1 else 'are'} not defined on an earlier line; "
        f"defined: {name_list(defined)}",
        line,
    )


__all__ = [
    "MAX_PROGRAM_LINES",
    "MODEL_MISTAKES",
    "PLACEHOLDER",
    "RESULT_MODULE",
    "DeclaresKinds",
    "ParsedLines",
    "Program",
    "ProgramError",
    "ProgramErrorKind",
    "ProgramErrors",
    "ProgramLine",
    "VariableReader",
    "format_errors",
    "name_list",
    "parse_lines",
    "parse_program",
    "program_lines",
    "sorted_errors",
    "unknown_names",
]
