"""One path per effect, checked on the source (DESIGN.md, "One path per effect").

Every file hammr reads at a path goes through :mod:`hammr.input_file`, every file it writes
through :mod:`hammr.output_file`, every SQLite file through :mod:`hammr.sqlite_file`, and every
text that reaches a terminal through :mod:`hammr.terminal_text` (``echo``, ``safe_console``).
This test reads every module of the package with ``ast`` and fails on a call that does any of
these things another way, unless the call is in :data:`ALLOWED` with the reason it is safe.
So a new command inherits the hardening instead of repeating it, and a command that forgets
it is caught here rather than by a user.

What counts as a violation (outside the four modules that own the effects):

* files: the builtin ``open``; ``os.open``/``os.fdopen``/``io.open``; ``Path.open``,
  ``read_text``, ``read_bytes``, ``write_text``, ``write_bytes`` (package data read through
  ``importlib.resources`` is not a user path and passes); ``np.load``/``np.save``/``np.savez``
  on a path (``np.load(io.BytesIO(...))`` of bytes read by the reader passes);
  ``tempfile.mkstemp``/``NamedTemporaryFile``; ``shutil.copy*``;
* SQLite: ``sqlite3.connect`` of anything but ``":memory:"``;
* terminal: the builtin ``print``; ``click.echo``/``click.secho``; ``sys.stdout.write``/
  ``sys.stderr.write``; a rich ``Console(...)`` made directly.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "hammr"

OWNERS = {"input_file.py", "output_file.py", "sqlite_file.py", "terminal_text.py"}
"""The modules that own the effects: they alone may do them directly."""

ALLOWED: dict[tuple[str, str, str], str] = {
    # (module relative to src/hammr, enclosing function, the call as it reads) -> why it is safe
    ("work_clock.py", "StallClock._read", ".read_text"): (
        "reads /proc/self/task/*/schedstat, a kernel file, never a user path"
    ),
    ("eval/driver_lock.py", "process_start", ".read_text"): (
        "reads /proc/sys/kernel/random/boot_id and /proc/PID/stat, kernel files"
    ),
    ("backends/llm/local_server.py", "LocalLlamaServer.start", ".open"): (
        "the server's log file, in a temporary folder this object made"
    ),
    ("backends/llm/local_server.py", "LocalLlamaServer._wait_for_address", ".read_text"): (
        "the address file the child writes, in a temporary folder this object made"
    ),
    ("backends/llm/local_server.py", "_tail_note", ".read_bytes"): (
        "the server's log file, in a temporary folder the server object made"
    ),
    ("backends/llm/local_server.py", "main", ".write_text"): (
        "the child's address file, in the temporary folder its parent made"
    ),
    ("backends/llm/local_server.py", "main", "print"): (
        "the child process's lines to its parent (a pipe, not a terminal)"
    ),
    ("eval/executors/ray_executor.py", "SampleWorker._unpacked", ".write_bytes"): (
        "a shipped image written into the worker's own temporary spool folder"
    ),
    ("datasets/unpack.py", "_read_zip", ".open"): (
        "ZipFile.open: a member of an archive already opened through hammr.input_file, read "
        "to be written through hammr.output_file; no path"
    ),
    ("eval/metrics/language.py", "link_corenlp", "shutil.copyfile"): (
        "copies a jar of the installed pycocoevalcap into its own folder"
    ),
}


@dataclass(frozen=True)
class Call:
    module: str
    function: str
    what: str
    line: int

    def key(self) -> tuple[str, str, str]:
        return (self.module, self.function, self.what)

    def __str__(self) -> str:
        return f"src/hammr/{self.module}:{self.line} in {self.function}: {self.what}"


FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes"}
MODULE_CALLS = {
    ("os", "open"),
    ("os", "fdopen"),
    ("io", "open"),
    ("tempfile", "mkstemp"),
    ("tempfile", "NamedTemporaryFile"),
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("click", "echo"),
    ("click", "secho"),
}
PASSED_PRINTERS = {"click.echo", "click.secho", "sys.stdout.write", "sys.stderr.write"}
OPEN_RECEIVERS = {"Image", "PILImage", "webbrowser"}
"""``X.open`` that is no file opening (``Image.open`` reads through hammr.input_file)."""


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    return "?"


def _package_data(node: ast.expr) -> bool:
    """Whether the receiver is package data (``resources.files(...)...``)."""
    return any(
        isinstance(n, ast.Call) and _dotted(n.func) == "resources.files" for n in ast.walk(node)
    )


def _in_memory(call: ast.Call) -> bool:
    """Whether the call's first argument is a buffer made right there (``io.BytesIO()``, or
    ``buffer := io.BytesIO()``): bytes in memory, no file."""
    first = call.args[0] if call.args else None
    if isinstance(first, ast.NamedExpr):
        first = first.value
    return isinstance(first, ast.Call) and _dotted(first.func) == "io.BytesIO"


def _violation(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        if func.id in ("open", "print"):
            return func.id
        if func.id == "Console":
            return "Console"
        return None
    if not isinstance(func, ast.Attribute):
        return None
    receiver = _dotted(func.value)
    if receiver == "np" and func.attr in ("load", "save", "savez", "savez_compressed"):
        return None if _in_memory(call) else f"np.{func.attr}"
    if (receiver, func.attr) in MODULE_CALLS:
        return f"{receiver}.{func.attr}"
    if receiver in ("sys.stdout", "sys.stderr") and func.attr == "write":
        return f"{receiver}.write"
    if receiver == "sqlite3" and func.attr == "connect":
        first = call.args[0] if call.args else None
        memory = isinstance(first, ast.Constant) and first.value == ":memory:"
        return None if memory else "sqlite3.connect"
    if func.attr in FILE_METHODS and not _package_data(func.value):
        return f".{func.attr}"
    if func.attr == "open" and receiver not in OPEN_RECEIVERS and not _package_data(func.value):
        return ".open"
    if func.attr == "Console" and receiver.endswith("console"):
        return "Console"
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.found: list[Call] = []
        self.called: set[int] = set()

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter

    def _add(self, what: str, line: int) -> None:
        function = ".".join(self.scope) or "<module>"
        self.found.append(Call(self.module, function, what, line))

    def visit_Call(self, node: ast.Call) -> None:
        what = _violation(node)
        if what is not None:
            self._add(what, node.lineno)
        self.called.add(id(node.func))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """A printer handed on as a value (``say=click.echo``) prints all the same."""
        if id(node) not in self.called and _dotted(node) in PASSED_PRINTERS:
            self._add(f"{_dotted(node)} (passed on)", node.lineno)
        self.generic_visit(node)


def scan(source: str, module: str) -> list[Call]:
    scanner = _Scanner(module)
    scanner.visit(ast.parse(source))
    return scanner.found


def _all_calls() -> list[Call]:
    found: list[Call] = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if module in OWNERS:
            continue
        found += scan(path.read_text(encoding="utf-8"), module)
    return found


def test_every_effect_goes_through_its_one_path() -> None:
    bad = [c for c in _all_calls() if c.key() not in ALLOWED]
    assert not bad, (
        "effects outside hammr.input_file / output_file / sqlite_file / terminal_text "
        "(use those, or add the call to ALLOWED with why it is safe):\n"
        + "\n".join(f"  {c}" for c in bad)
    )


def test_every_allowance_is_still_needed() -> None:
    """An allowance whose call is gone is removed, so the list stays the short list of real
    exceptions."""
    used = {c.key() for c in _all_calls()}
    stale = [key for key in ALLOWED if key not in used]
    assert not stale, f"allowances for calls that no longer exist: {stale}"


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("def show(answer):\n    print(answer)\n", "print"),
        ("import click\ndef show(answer):\n    click.echo(answer)\n", "click.echo"),
        ("def save(p, text):\n    p.write_text(text)\n", ".write_text"),
        ("def load(p):\n    return open(p).read()\n", "open"),
        ("def load(p):\n    with p.open() as f:\n        return f.read()\n", ".open"),
        ("import sqlite3\ndef db(p):\n    return sqlite3.connect(p)\n", "sqlite3.connect"),
        ("from rich.console import Console\ndef c():\n    return Console()\n", "Console"),
        ("import sys\ndef out(t):\n    sys.stdout.write(t)\n", "sys.stdout.write"),
        ("import click\ndef run(say=click.echo):\n    say('x')\n", "click.echo (passed on)"),
        ("import numpy as np\ndef load(p):\n    return np.load(p)\n", "np.load"),
        ("import numpy as np\ndef save(p, m):\n    np.save(p, m)\n", "np.save"),
    ],
)
def test_a_deliberate_violation_is_caught(source: str, what: str) -> None:
    """The checker itself: each kind of effect written the direct way is found (the
    deliberate violations this test was shown to catch)."""
    assert [c.what for c in scan(source, "new_command.py")] == [what]


@pytest.mark.parametrize(
    "source",
    [
        "from hammr.terminal_text import echo\ndef show(a):\n    echo(a)\n",
        "from hammr.input_file import read_input_text\n"
        "def load(p):\n    return read_input_text(p)\n",
        "from importlib import resources\n"
        "def bundled():\n    return resources.files('hammr').joinpath('x.toml').read_text()\n",
        "import sqlite3\ndef scratch():\n    return sqlite3.connect(':memory:')\n",
        "import io, numpy as np\ndef load(b):\n    return np.load(io.BytesIO(b))\n",
        "import io, numpy as np\ndef save(m):\n    np.save(buffer := io.BytesIO(), m)\n",
        "from hammr.values import Image\ndef load(p):\n    return Image.open(p)\n",
    ],
)
def test_the_one_paths_pass(source: str) -> None:
    assert scan(source, "new_command.py") == []
