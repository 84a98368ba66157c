"""GBNF grammars for MulProg programs, one line at a time, built from the registered modules
and the variables the earlier lines defined.

Under it a model writes only ``NAME=MODULE(param=value,...)`` naming a registered module with
its parameters in order, each value a defined variable of a fitting kind (an image variable
where an image goes, a box variable where boxes go) or, where text goes, a quoted string or
an earlier answer; the target is the next free name of the module's kind (``IMAGEn``,
``BOXn``, ``ANSWERn``, the programs' convention); or it ends the program with
``FINAL_RESULT=RESULT(var=...)``. A whole program in one grammar could not know which names
are defined (a context-free grammar cannot count), so the planner asks line by line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hammr.programs.checks import param_kinds
from hammr.tools.base import Tool

MAX_LINES = 16
RESULT = "RESULT"
INPUT_IMAGE = "IMAGE"


def output_kind(module: str) -> str:
    """The kind of variable a module's line assigns, by the programs' naming convention."""
    if module == "LOC":
        return "box"
    if module.startswith("CROP"):
        return "image"
    return "answer"


def _value_rule(kind: str) -> str:
    if kind in ("image", "images"):
        return "image-var"
    if kind in ("box", "boxes"):
        return "box-var"
    if kind in ("number", "integer"):
        return "(number | answer-var)"
    if kind in ("text", "texts"):
        return "(sq-string | dq-string | answer-var)"
    return "any-var"


def _call_rule(tool: Tool, usable: set[str] | None = None) -> str:
    """``MODULE(p1=..., p2=...)``; with ``usable``, variable rules not in it are left out of
    the alternatives (a line cannot name a kind of variable that does not exist yet)."""
    kinds = param_kinds(tool)  # what the checker expects (a module may declare more than Param)
    parts = [f'"{tool.name}("']
    for i, p in enumerate(tool.params):
        if not p.required:
            continue
        sep = '"," " "? ' if i else ""
        value = _value_rule(kinds[p.name])
        if usable is not None:
            options = [o for o in value.strip("()").split(" | ") if o in usable or "var" not in o]
            value = options[0] if len(options) == 1 else f"({' | '.join(options)})"
        parts.append(f'{sep}"{p.name}=" {value}')
    parts.append('")"')
    return " ".join(parts)


def _rule_name(module: str) -> str:
    # GBNF rule names are letters, digits and hyphens
    return "call-" + "".join(c if c.isalnum() else "-" for c in module.lower())


def _alternatives(names: list[str]) -> str:
    return " | ".join(f'"{n}"' for n in names)


def next_name(kind: str, defined: Mapping[str, str]) -> str:
    """The next variable name of a kind: BOX0, BOX1, ... (IMAGE alone is the question's image)."""
    prefix = {"image": "IMAGE", "box": "BOX"}.get(kind, "ANSWER")
    taken = [n[len(prefix) :] for n in defined if n.startswith(prefix)]
    numbers = [int(t) for t in taken if t.isdigit()]
    return f"{prefix}{max(numbers) + 1 if numbers else 0}"


def line_grammar(
    modules: Sequence[Tool], defined: Mapping[str, str], *, final_only: bool = False
) -> str:
    """The grammar of the NEXT line of a program, given the variables defined so far (name ->
    'image' | 'box' | 'answer'): a new line may only read defined variables of the kind its
    parameter takes, and assigns the next free name of its module's kind; or the program
    ends with ``FINAL_RESULT=RESULT(var=...)`` over a defined variable."""
    by_kind = {k: [n for n, v in defined.items() if v == k] for k in ("image", "box", "answer")}
    refs = {
        "image-var": by_kind["image"],
        "box-var": by_kind["box"],
        "answer-var": by_kind["answer"],
        "any-var": [*by_kind["image"], *by_kind["box"], *by_kind["answer"]],
    }
    lines: list[str] = []
    rules: list[str] = []
    for tool in modules:
        if tool.name == RESULT:
            continue
        kinds = param_kinds(tool)
        needed = [_value_rule(kinds[p.name]) for p in tool.params if p.required]
        # a call is possible only when every variable-only parameter has a variable to name
        if any(rule in refs and not refs[rule] for rule in needed):
            continue
        target = next_name(output_kind(tool.name), defined)
        lines.append(f'"{target}=" {_rule_name(tool.name)}')
        usable = {name for name, names in refs.items() if names}
        rules.append(f"{_rule_name(tool.name)} ::= {_call_rule(tool, usable)}")
    results = [n for n in refs["any-var"] if n != INPUT_IMAGE]  # a result of the program
    ends = ['"FINAL_RESULT=RESULT(var=" result-var ")"'] if results else []
    refs["result-var"] = results
    root = " | ".join(ends if final_only and ends else [*lines, *ends])
    out = [f"root ::= {root}"]
    out += [f"{name} ::= {_alternatives(names)}" for name, names in refs.items() if names]
    # a text may name an earlier result in braces ({ANSWER0}, as EVAL reads it), and only
    # a defined one: braces are otherwise left out of its characters
    readable = [n for n in refs["any-var"] if n != INPUT_IMAGE]
    ref = f' | "{{" ({_alternatives(readable)}) "}}"' if readable else ""
    out += [
        'number ::= "-"? [0-9]{1,6} ("." [0-9]{1,3})?',
        f'sq-string ::= "\'" ([^\'\\n{{}}]{ref}){{1,120}} "\'"',
        f'dq-string ::= "\\"" ([^"\\n{{}}]{ref}){{1,300}} "\\""',
        *rules,
    ]
    return "\n".join(out) + "\n"
