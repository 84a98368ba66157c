"""The house is free of import circles: no module of hammr reaches itself through imports,
counting imports inside functions (a lazy import hides a circle, it does not remove it) and
the command modules `hammr` imports by name when one is run (hammr.cli's LAZY_COMMANDS)."""

from __future__ import annotations

import ast
from pathlib import Path

import hammr

SRC = Path(hammr.__file__).resolve().parent.parent


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in (SRC / "hammr").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            graph[mod] |= {t for n in names if (t := owner(n)) and t != mod}
    return graph


def lazy_commands() -> set[str]:
    """The modules hammr.cli imports by name ("module:attribute") when a command is run."""
    from hammr.cli import LAZY_COMMANDS

    return {spec.partition(":")[0] for spec, _ in LAZY_COMMANDS.values()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_of_hammr_imports_itself_back() -> None:
    mods = modules()
    graph = import_graph(mods)
    graph["hammr.cli"] |= lazy_commands()
    assert len(mods) > 50 and "hammr.eval.eval_cli" in graph["hammr.cli"]
    assert cycles(graph) == []
