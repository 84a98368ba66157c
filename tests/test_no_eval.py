"""No module of hammr runs text as code: no call of the builtins ``eval``, ``exec``,
``compile`` or ``__import__``, no import of them under another name, and no
``ast.literal_eval`` outside a short list of reviewed uses on trusted data."""

from __future__ import annotations

import ast
from pathlib import Path

import hammr

PACKAGE = Path(hammr.__file__).resolve().parent
FORBIDDEN = frozenset({"eval", "exec", "compile", "__import__"})
LITERAL_EVAL_REVIEWED: dict[str, str] = {}
"""``path relative to src/hammr -> why its data is trusted``; empty: no use so far."""


def forbidden_uses(source: str) -> list[str]:
    """Lines that call a forbidden builtin (by name or via ``builtins.``) or import one."""
    hits: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN:
                hits.append(f"line {node.lineno}: {func.id}()")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in FORBIDDEN
                and isinstance(func.value, ast.Name)
                and func.value.id in {"builtins", "__builtins__"}
            ):
                hits.append(f"line {node.lineno}: {func.value.id}.{func.attr}()")
        elif isinstance(node, ast.ImportFrom) and node.module == "builtins":
            hits += [
                f"line {node.lineno}: import {a.name}" for a in node.names if a.name in FORBIDDEN
            ]
    return hits


def literal_eval_uses(source: str) -> list[str]:
    hits: list[str] = []
    for node in ast.walk(ast.parse(source)):
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else node.name
            if isinstance(node, ast.alias)
            else None
        )
        if name == "literal_eval":
            hits.append(f"line {getattr(node, 'lineno', '?')}")
    return hits


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_the_checker_sees_the_forms_it_looks_for() -> None:
    bad = "\n".join(
        [
            "eval('1')",
            "exec(code)",
            "x = compile(s, 'f', 'eval')",
            "__import__('os')",
            "builtins.eval('2')",
            "from builtins import exec as run",
        ]
    )
    assert len(forbidden_uses(bad)) == 6
    harmless = "model.eval()\nre.compile('x')\nself.exec = 1\nast.parse('1')\n"
    assert forbidden_uses(harmless) == []
    assert literal_eval_uses("import ast\nast.literal_eval('1')\n") == ["line 2"]
    assert len(literal_eval_uses("from ast import literal_eval\nliteral_eval('1')\n")) == 2


def test_no_module_of_hammr_calls_eval_exec_compile_or_import() -> None:
    found = sources()
    assert len(found) > 50 and "programs/expressions.py" in found
    hits = {path: h for path, text in found.items() if (h := forbidden_uses(text))}
    assert hits == {}


def test_literal_eval_only_where_reviewed() -> None:
    hits = {path: h for path, text in sources().items() if (h := literal_eval_uses(text))}
    unreviewed = {path: h for path, h in hits.items() if path not in LITERAL_EVAL_REVIEWED}
    assert unreviewed == {}
