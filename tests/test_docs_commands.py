"""The README and docs/*.md say only what can be typed: every `hammr` command in their code
blocks parses against the real command line (commands, options, choices, required values),
names in inline code are real commands and options, a code block says `.venv/bin/hammr`
unless its page tells the reader to activate the virtual environment, and every relative
link (and #anchor) points at something that exists."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from command_line_support import VENV_HAMMR, check_command, logical_lines, shell_commands
from conftest import ROOT
from hammr.cli import main

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ACTIVATE = "source .venv/bin/activate"
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console", "text"}


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    program: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.program} {shlex.join(self.args)}"


# -- reading the pages ------------------------------------------------------------------------


def code_blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(number of its first line, language, lines) of every fenced and indented code block;
    a fenced block's fences are the lines just before and after it."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+|~~~+)\s*([\w+-]*)", lines[i])
        if fence:
            start, language, body = i + 1, fence.group(2).lower(), []
            i += 1
            while i < len(lines) and not lines[i].startswith(fence.group(1)):
                body.append(lines[i])
                i += 1
            yield start + 1, language, body
            i += 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            start, body = i, []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append(lines[i][4:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            yield start + 1, "", body
            continue
        i += 1


def prose(text: str) -> str:
    """The page without its code blocks (their lines blanked, so line numbers hold)."""
    lines = text.splitlines()
    for start, _, body in code_blocks(text):
        first, last = start - 1, start - 1 + len(body)  # 0-based, last excluded
        if first > 0 and re.match(r"^(```|~~~)", lines[first - 1]):
            first, last = first - 1, last + 1  # the fences too
        for n in range(first, min(last, len(lines))):
            lines[n] = ""
    return "\n".join(lines)


def block_commands(page: Path) -> list[Command]:
    """Every hammr command in the page's shell code blocks (after `$ ` prompts and leading
    VAR=value assignments, and in each part of a `&&`, `;` or `|` chain)."""
    found: list[Command] = []
    for start, language, body in code_blocks(page.read_text()):
        if language not in SHELL_LANGUAGES:
            continue
        for number, line in logical_lines(start, body):
            for command in shell_commands(line):
                found.append(Command(page, number, command.program, command.args))
    return found


def inline_commands(page: Path) -> list[tuple[int, list[str]]]:
    """(line, words) of every inline code span in the prose that starts with a hammr command."""
    found = []
    for number, line in enumerate(prose(page.read_text()).splitlines(), start=1):
        for span in re.findall(r"`([^`]+)`", line):
            words = span.split()
            if words and words[0] in ("hammr", VENV_HAMMR):
                found.append((number, words[1:]))
    return found


# -- checking a command against the real command line -------------------------------------------


def check_names(words: list[str]) -> None:
    """The command path in WORDS exists and every option word names one of its options."""
    cmd: click.Command = main
    ctx = click.Context(main, info_name="hammr")
    i = 0
    while isinstance(cmd, click.Group) and i < len(words) and not words[i].startswith("-"):
        sub = cmd.get_command(ctx, words[i])
        if sub is None:
            raise click.UsageError(f"no such command '{ctx.command_path} {words[i]}'", ctx)
        cmd, i = sub, i + 1
        ctx = click.Context(cmd, info_name=words[i - 1], parent=ctx)
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    for word in words[i:]:
        option = word.split("=", 1)[0].rstrip(",.;:)")
        if re.fullmatch(r"--?[A-Za-z][\w-]*", option) and option not in known:
            raise click.UsageError(f"no such option {option!r} for '{ctx.command_path}'", ctx)


# -- links --------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(page: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(prose(page.read_text()).splitlines(), start=1):
        line = re.sub(r"`[^`]*`", "", line)
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                found.append((number, target))
    return found


# -- the tests ----------------------------------------------------------------------------------


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_hold_commands() -> None:
    assert len(block_commands(ROOT / "README.md")) >= 10
    assert (ROOT / "docs").is_dir() and len(PAGES) > 5


@pytest.mark.parametrize("args", [["nope"], ["memory", "nope"], ["avis"]])
def test_the_check_rejects_unknown_commands(args: list[str]) -> None:
    with pytest.raises(click.UsageError):
        check_command(args)


@pytest.mark.parametrize(
    "args",
    [
        ["ask", "a.png", "What?", "--bogus"],
        ["ask", "a.png", "What?", "extra"],
        ["ask", "a.png"],
        ["ask", "a.png", "What?", "--system"],
        ["ask", "a.png", "What?", "--router", "nobody"],
        ["eval", "--data-dir", "d"],
        ["eval", "--suite", "s", "--data-dir", "d", "--limit", "many"],
        ["memory", "build", "run"],
    ],
)
def test_the_check_rejects_bad_options_and_arguments(args: list[str]) -> None:
    with pytest.raises(click.UsageError):
        check_command(args)


def test_the_check_accepts_a_good_command() -> None:
    check_command(["eval", "--suite", "demo", "--data-dir", "examples/demo", "--limit", "1"])
    check_command(["memory", "build", "a", "b", "-o", "bank.db"])
    check_names(["avis", "analyze", "-o"])
    with pytest.raises(click.UsageError):
        check_names(["report", "--layut"])


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_code_block_command_parses(page: Path) -> None:
    problems = []
    for command in block_commands(page):
        try:
            check_command(list(command.args))
        except click.UsageError as e:
            problems.append(f"{command}\n    {e.format_message()}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_inline_command_names_real_commands_and_options(page: Path) -> None:
    problems = []
    for number, words in inline_commands(page):
        try:
            check_names(words)
        except click.UsageError as e:
            problems.append(f"{page_id(page)}:{number}: `hammr {' '.join(words)}`: {e.message}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_code_blocks_say_venv_hammr_unless_the_page_activates_it(page: Path) -> None:
    if ACTIVATE in page.read_text():
        return
    bare = [str(c) for c in block_commands(page) if c.program == "hammr"]
    assert not bare, (
        f"after `bash scripts/setup.sh` only {VENV_HAMMR} exists; write it, or tell the "
        f"reader `{ACTIVATE}` first:\n" + "\n".join(bare)
    )


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_point_at_files_and_headings_that_exist(page: Path) -> None:
    problems = []
    for number, target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            problems.append(f"{page_id(page)}:{number}: {target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            problems.append(f"{page_id(page)}:{number}: {target}: no heading #{anchor}")
    assert not problems, "\n".join(problems)
