"""Reading `hammr` commands out of text and checking them against the real command line,
for the tests of the docs (test_docs_commands.py) and of the examples in every `--help`
(test_help_examples.py).

:func:`shell_commands` finds the hammr commands in one shell line (after a `$ ` prompt, in
each part of a `&&`, `;` or `|` chain, with their leading VAR=value assignments);
:func:`check_command` parses one the way click would, without running it or touching the
files it names, and says what each parameter was given.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import click

from hammr.cli import main

VENV_HAMMR = ".venv/bin/hammr"
PROGRAMS = ("hammr", VENV_HAMMR)
OPERATORS = {"&&", "||", ";", "|"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MENTIONS_HAMMR = re.compile(r"(^|[\s;&|])(\.venv/bin/)?hammr(\s|$)")
CHECKED_TYPES = (click.Choice, click.types.IntParamType, click.types.FloatParamType)


@dataclass(frozen=True)
class ShellCommand:
    """One hammr command of a shell line: its VAR=value assignments, program and words."""

    env: tuple[tuple[str, str], ...]
    program: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Parsed:
    """What click made of a command: the command reached (None for `hammr --help` or
    `hammr --version`), its path of names, and each parameter's value as given."""

    command: click.Command | None
    path: tuple[str, ...]
    values: dict[str, Any] = field(default_factory=dict)

    def given(self) -> Iterator[tuple[click.Parameter, list[str]]]:
        """Each parameter given a value, with its values as strings (flags left out)."""
        if self.command is None:
            return
        for param in self.command.params:
            value = self.values.get(param.name) if param.name else None
            if not _given(value) or isinstance(value, bool):
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            yield param, [str(v) for v in values]


def logical_lines(start: int, body: list[str]) -> Iterator[tuple[int, str]]:
    """Lines with their backslash continuations joined, and their line numbers."""
    pending, first = "", start
    for offset, raw in enumerate(body):
        if not pending:
            first = start + offset
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        yield first, pending + raw
        pending = ""
    if pending:
        yield first, pending


def shell_commands(line: str) -> list[ShellCommand]:
    """The hammr commands in one (joined) shell line; none when it does not mention hammr."""
    text = line.strip().removeprefix("$ ")
    if not MENTIONS_HAMMR.search(text):
        return []
    parts: list[list[str]] = [[]]
    for token in shlex.split(text, comments=True):
        if token in OPERATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    found = []
    for part in parts:
        env = []
        while part and ENV_ASSIGNMENT.match(part[0]):
            name, _, value = part[0].partition("=")
            env.append((name, value))
            part = part[1:]
        if part and part[0] in PROGRAMS:
            found.append(ShellCommand(tuple(env), part[0], tuple(part[1:])))
    return found


def _given(value: object) -> bool:
    return isinstance(value, (str, bool, int, float, list, tuple)) and value != ()


def check_command(args: list[str]) -> Parsed:
    """Parse ``hammr ARGS`` the way click would, without running it or touching the files it
    names: raise click.UsageError for an unknown command or option, a missing value, a bad
    choice or number, a missing required option or argument, or an extra argument."""
    cmd: click.Command = main
    ctx: click.Context | None = None
    name = "hammr"
    path: list[str] = []
    while True:
        ctx = click.Context(cmd, info_name=name, parent=ctx)
        opts, rest, _ = cmd.make_parser(ctx).parse_args(list(args))
        if isinstance(cmd, click.Group):
            if not rest:
                if opts or ctx.parent is None:
                    return Parsed(None, tuple(path), opts)  # `hammr --version`, a bare group
                raise click.UsageError(f"'{ctx.command_path}' needs a command", ctx)
            name, args = rest[0], rest[1:]
            sub = cmd.get_command(ctx, name)
            if sub is None:
                raise click.UsageError(f"no such command '{ctx.command_path} {name}'", ctx)
            cmd = sub
            path.append(name)
            continue
        if "help" in opts:
            return Parsed(None, tuple(path), opts)
        if rest:
            raise click.UsageError(f"unexpected extra arguments {rest}", ctx)
        for param in cmd.params:
            value: Any = opts.get(param.name) if param.name else None
            if not _given(value):
                if param.required:
                    raise click.UsageError(f"missing {param.get_error_hint(ctx)}", ctx)
                continue
            if isinstance(param.type, CHECKED_TYPES):
                values = value if isinstance(value, (list, tuple)) else [value]
                for v in values:
                    param.type.convert(v, param, ctx)
        return Parsed(cmd, tuple(path), opts)
