"""A GBNF grammar for one ReAct step, built from the registered tools and the live variables.

Under it a model can only write ``[Thought]: ...`` followed by ``[Act]: [name =] Tool(args)``
naming a registered tool with arguments of the right kind (literals or live variables of a
fitting type), or ``[Finish]: answer``. llama.cpp (embedded or served), vLLM and SGLang accept
this grammar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from hammr.tools.base import Param, Tool
from hammr.values import Image, Value, value_kind

DEFAULT_STEP_TOKENS = 256
"""The reply budget a step grammar is sized for when its caller names none."""


def thought_chars(max_tokens: int) -> int:
    """The longest thought a step may write under a ``max_tokens`` budget: half of it (a
    thought is ASCII, so one token holds at least one of its characters), at least 32."""
    return max(32, max_tokens // 2)


def answer_chars(max_tokens: int) -> int:
    """The longest [Finish] answer under a ``max_tokens`` budget (any script): at least 24."""
    return max(24, max_tokens // 5)


def literal_chars(max_tokens: int) -> int:
    """The longest quoted text argument under a ``max_tokens`` budget (any script)."""
    return max(24, max_tokens // 5)


_BASE_RULES = r"""
ws ::= " "?
lit-num ::= "-"? [0-9]{1,5} ("." [0-9]{1,2})?
lit-int ::= "-"? [0-9]{1,5}
lit-bool ::= "True" | "False"
lit-box ::= "[" coord "," ws coord "," ws extent "," ws extent "]"
lit-boxes ::= "[" lit-box ("," ws lit-box){0,9} "]"
lit-point ::= "[" coord "," ws coord "]"
lit-strs ::= "[" lit-str ("," ws lit-str){0,3} "]"
idx ::= [0-9] | [1-9] [0-9]
target ::= [a-z] [a-z0-9_]{0,15}
"""


def int_range_rule(high: int, *, zero: bool) -> str:
    """GBNF alternatives for the whole numbers from 0 (or 1) to ``high``, no leading zeros."""
    digits = str(high)
    if len(digits) == 1:
        return f"[{0 if zero else 1}-{high}]"
    alts = ["[0-9]" if zero else "[1-9]"]
    alts += [f"[1-9] [0-9]{{{n - 1}}}" for n in range(2, len(digits))]
    for i, ch in enumerate(digits):
        low = 1 if i == 0 else 0
        if int(ch) > low:
            rest = len(digits) - i - 1
            prefix = f"{_q(digits[:i])} " if i else ""
            alts.append(f"{prefix}[{low}-{int(ch) - 1}]" + (f" [0-9]{{{rest}}}" if rest else ""))
    alts.append(_q(digits))
    return " | ".join(f"({a})" if " " in a else a for a in alts)


def _coordinate_rules(variables: Mapping[str, Value]) -> list[str]:
    """Literal box and point coordinates are whole pixels within the largest image, so a
    model cannot write a box that lies wholly outside every image (a bad argument)."""
    sides = [max(v.root.width, v.root.height) for v in variables.values() if isinstance(v, Image)]
    if not sides:
        return ["coord ::= [0-9]{1,5}", "extent ::= [1-9] [0-9]{0,4}"]
    high = max(sides)
    return [
        f"coord ::= {int_range_rule(high - 1, zero=True)}",
        f"extent ::= {int_range_rule(high, zero=False)}",
    ]


def _q(text: str) -> str:
    """A GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _VarIndex:
    def __init__(self, variables: Mapping[str, Value]) -> None:
        self.by_kind: dict[str, list[str]] = {}
        self.all = [n for n in variables if re.fullmatch(r"[A-Za-z_]\w*", n)]
        for name in self.all:
            self.by_kind.setdefault(value_kind(variables[name]), []).append(name)

    def names(self, *kinds: str) -> list[str]:
        return [_q(n) for k in kinds for n in self.by_kind.get(k, [])]

    def indexed(self, kind: str) -> list[str]:
        return [f'{_q(n)} "[" idx "]"' for n in self.by_kind.get("list-" + kind, [])]


def _alternatives(param: Param, vars_: _VarIndex, vectorised: bool) -> list[str]:
    """What the grammar lets a model write for ``param``: the literals and the live variables
    of each kind it accepts (every kind of a union, in order, each alternative once)."""
    if param.choices:
        quoted = '"\'" (' + " | ".join(_q(c) for c in param.choices) + ') "\'"'
        return [quoted, *vars_.names("text")]
    alts: list[str] = []
    for k in param.kinds:
        alts += [a for a in _kind_alternatives(k, vars_, vectorised) if a not in alts]
    return alts


def _kind_alternatives(k: str, vars_: _VarIndex, vectorised: bool) -> list[str]:
    """The literals and live variables of one parameter kind ``k`` (as :func:`coerce` in
    hammr.tools.base accepts them); 'any' takes every value, so every variable."""
    one_image = vars_.names("image") + vars_.indexed("image")
    if k == "image":
        return one_image + (vars_.names("list-image") if vectorised else [])
    if k == "images":
        alts = vars_.names("list-image")
        if one_image:
            alts.append(
                '"[" ('
                + " | ".join(one_image)
                + ') ("," ws ('
                + " | ".join(one_image)
                + ')){0,7} "]"'
            )
            alts += one_image
        return alts
    if k == "box":
        return ["lit-box", *vars_.names("box"), *vars_.indexed("box")]
    if k == "boxes":
        return ["lit-boxes", *vars_.names("list-box", "box")]
    if k == "text":
        return ["lit-str", *vars_.names("text", "entity"), *vars_.indexed("text")]
    if k == "texts":
        return ["lit-strs", *vars_.names("list-text", "text")]
    if k == "number":
        return ["lit-num", *vars_.names("number", "integer"), *vars_.indexed("number")]
    if k == "integer":
        return ["lit-int", *vars_.names("integer")]
    if k == "boolean":
        return ["lit-bool", *vars_.names("boolean")]
    if k == "point":
        return ["lit-point", *vars_.names("point")]
    if k == "page":
        return vars_.names("page")
    if k == "entity":
        return ["lit-str", *vars_.names("entity")]
    return ["lit-str", "lit-num", "lit-boxes", *[_q(n) for n in vars_.all]]


def _rule_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower() or "x"


def step_grammar(
    tools: Iterable[Tool],
    variables: Mapping[str, Value],
    *,
    finish_only: bool = False,
    max_tokens: int = DEFAULT_STEP_TOKENS,
) -> str:
    """The grammar of one step for these tools over these live variables.

    ``finish_only`` allows nothing but a thought and a [Finish] (an agent's last step). The
    thought, the answer and quoted texts are sized for a reply of ``max_tokens``; a call
    with many arguments may need more, which :func:`hammr.grammar_bounds.tokens_for` gives.
    """
    vars_ = _VarIndex(variables)
    rules: list[str] = []
    calls: list[str] = []
    for i, t in enumerate(tools):
        vectorised = getattr(t, "vectorised_over", None)
        pieces: list[str] = []
        optional: list[str] = []
        usable = True
        for p in t.params:
            alts = _alternatives(p, vars_, vectorised == p.name)
            rule = f"t{i}-{_rule_name(p.name)}"
            if not alts:
                if p.required:
                    usable = False
                    break
                continue
            rules.append(f"{rule} ::= " + " | ".join(alts))
            (pieces if p.required else optional).append(rule)
        if not usable:
            continue
        body = ' "," ws '.join(pieces)
        tail = ""
        for rule in reversed(optional):
            tail = f'("," ws {rule}{(" " + tail) if tail else ""})?'
        if tail:
            body = f"{body} {tail}" if body else tail.replace('"," ws ', "", 1)
        name = f"call-{i}"
        rules.append(f"{name} ::= {_q(t.name + '(')} {body} {_q(')')}".replace("  ", " "))
        calls.append(name)
    acts = " | ".join(calls) if calls else '"NoTool()"'
    head = [
        f'root ::= "[Thought]: " thought "\\n" {"finish" if finish_only else "(act | finish)"}',
        # ASCII without '[' (a thought cannot write a step marker); the first not a space
        f"thought ::= [!-Z\\\\-~] [ -Z\\\\-~]{{0,{thought_chars(max_tokens) - 1}}}",
        'act ::= "[Act]: " (target " = ")? call',
        f"call ::= {acts}",
        f'finish ::= "[Finish]: " [^ \\n\\[] [^\\n]{{0,{answer_chars(max_tokens) - 1}}}',
        f"lit-str ::= \"'\" [^' \\n\\\\] [^'\\n\\\\]{{0,{literal_chars(max_tokens) - 1}}} \"'\"",
    ]
    rules += _coordinate_rules(variables)
    return "\n".join(head + rules) + "\n" + _BASE_RULES.strip() + "\n"
