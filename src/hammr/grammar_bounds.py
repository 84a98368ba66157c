"""How long the longest output of a GBNF grammar can be, so a request's ``max_tokens`` can
hold every sentence the grammar allows.

A reply cut at ``max_tokens`` is cut mid-sentence, whatever the grammar: a grammar that
allows a 1,000-character thought under a 256-token budget lets a model ramble into a reply
that never reaches its action. :func:`longest_output_bytes` reads a grammar (the subset of
llama.cpp's GBNF that hammr writes: literals, character classes, rule references, groups,
alternatives, ``?``, ``*``, ``+`` and ``{m}``/``{m,}``/``{m,n}``) and gives the most UTF-8
bytes a sentence can take, or None when there is no bound (``*``, ``+``, ``{m,}`` or a
recursive rule). Every tokenizer llama.cpp, vLLM and SGLang run gives each token at least one
byte, so that many tokens always suffice; :func:`tokens_for` is the request budget that fits.
A character class that admits non-ASCII characters counts 4 bytes a character.
"""

from __future__ import annotations

import functools
import re

_RULE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*::=\s*(.*)$")


class GrammarBoundError(ValueError):
    """The grammar could not be read (a rule missing, an unbalanced group, ...)."""


def _rules(grammar: str) -> dict[str, str]:
    """Rule name -> its right-hand side (a rule may continue on indented lines)."""
    rules: dict[str, str] = {}
    current: str | None = None
    for line in grammar.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _RULE.match(line)
        if m:
            current = m.group(1)
            rules[current] = m.group(2)
        elif current is not None:
            rules[current] += " " + line.strip()
        else:
            raise GrammarBoundError(f"not a rule: {line.strip()[:60]!r}")
    return rules


def _unescape_char(text: str, i: int) -> tuple[str, int]:
    """The character at ``text[i]`` (after a backslash escape if there is one), next index."""
    ch = text[i]
    if ch != "\\":
        return ch, i + 1
    nxt = text[i + 1]
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
    if nxt in simple:
        return simple[nxt], i + 2
    if nxt in "xuU":
        width = {"x": 2, "u": 4, "U": 8}[nxt]
        return chr(int(text[i + 2 : i + 2 + width], 16)), i + 2 + width
    return nxt, i + 2


_TOKEN = re.compile(
    r"""\s*(?:("(?:[^"\\]|\\.)*")|(\[(?:[^\]\\]|\\.)*\])|(\{[^}]*\})|([A-Za-z0-9_-]+)"""
    r"""|([()|?*+.])|(\#.*$)|(\S))"""
)


@functools.lru_cache(maxsize=4096)
def _tokens(rhs: str) -> tuple[tuple[str, str], ...]:
    """A rule's right-hand side as (kind, text) tokens: lit, class, count, name, op."""
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(rhs):
        lit, cls, count, name, op, _comment, bad = m.groups()
        if bad is not None:
            raise GrammarBoundError(f"unexpected {bad!r} in {rhs[:40]!r}")
        if lit is not None:
            out.append(("lit", lit))
        elif cls is not None:
            out.append(("class", cls))
        elif count is not None:
            out.append(("count", count))
        elif name is not None:
            out.append(("name", name))
        elif op is not None:
            out.append(("op", op))
    return tuple(out)


def _literal_bytes(token: str) -> int:
    body = token[1:-1]
    if "\\" in body:
        i, out = 0, []
        while i < len(body):
            c, i = _unescape_char(body, i)
            out.append(c)
        body = "".join(out)
    return len(body.encode("utf-8"))


def _class_bytes(token: str) -> int:
    if token.startswith("[^"):
        return 4  # negated: any other character
    return 1 if token.isascii() else 4


class _Bounds:
    def __init__(self, grammar: str) -> None:
        self.rules = _rules(grammar)
        self.memo: dict[str, int | None] = {}
        self.visiting: set[str] = set()

    def rule(self, name: str) -> int | None:
        if name in self.memo:
            return self.memo[name]
        if name not in self.rules:
            raise GrammarBoundError(f"rule {name!r} is used but not defined")
        if name in self.visiting:
            return None  # recursion: unbounded
        self.visiting.add(name)
        tokens = _tokens(self.rules[name])
        length, end = self.alternatives(tokens, 0)
        if end != len(tokens):
            raise GrammarBoundError(f"rule {name!r}: unexpected {tokens[end][1]!r}")
        self.visiting.discard(name)
        self.memo[name] = length
        return length

    def alternatives(self, t: tuple[tuple[str, str], ...], i: int) -> tuple[int | None, int]:
        best, i = self.sequence(t, i)
        while i < len(t) and t[i] == ("op", "|"):
            other, i = self.sequence(t, i + 1)
            best = None if best is None or other is None else max(best, other)
        return best, i

    def sequence(self, t: tuple[tuple[str, str], ...], i: int) -> tuple[int | None, int]:
        total: int | None = 0
        while i < len(t) and t[i] not in (("op", "|"), ("op", ")")):
            item, i = self.repeated(t, i)
            total = None if total is None or item is None else total + item
        return total, i

    def repeated(self, t: tuple[tuple[str, str], ...], i: int) -> tuple[int | None, int]:
        one, i = self.atom(t, i)
        if i >= len(t):
            return one, i
        kind, text = t[i]
        if (kind, text) == ("op", "?"):
            return one, i + 1
        if kind == "op" and text in "*+":
            return (None if one != 0 else 0), i + 1
        if kind == "count":
            low, comma, high = text[1:-1].replace(" ", "").partition(",")
            if comma and not high:
                return (None if one != 0 else 0), i + 1
            count = int(high) if comma else int(low)
            return (None if one is None else one * count), i + 1
        return one, i

    def atom(self, t: tuple[tuple[str, str], ...], i: int) -> tuple[int | None, int]:
        if i >= len(t):
            raise GrammarBoundError("a rule ends where a symbol was expected")
        kind, text = t[i]
        if kind == "lit":
            return _literal_bytes(text), i + 1
        if kind == "class":
            return _class_bytes(text), i + 1
        if kind == "name":
            return self.rule(text), i + 1
        if (kind, text) == ("op", "."):
            return 4, i + 1
        if (kind, text) == ("op", "("):
            inner, i = self.alternatives(t, i + 1)
            if i >= len(t) or t[i] != ("op", ")"):
                raise GrammarBoundError("a group is not closed")
            return inner, i + 1
        raise GrammarBoundError(f"unexpected {text!r}")


@functools.lru_cache(maxsize=512)
def longest_output_bytes(grammar: str, root: str = "root") -> int | None:
    """The most UTF-8 bytes a sentence of ``grammar`` can take; None when unbounded."""
    return _Bounds(grammar).rule(root)


def tokens_for(grammar: str | None, max_tokens: int) -> int:
    """A ``max_tokens`` that holds every sentence of ``grammar``: ``max_tokens`` itself when
    it already does (or there is no grammar, or no bound), else the grammar's longest sentence
    in bytes (a token is at least one byte)."""
    if grammar is None:
        return max_tokens
    longest = longest_output_bytes(grammar)
    return max_tokens if longest is None else max(max_tokens, longest)


__all__ = ["GrammarBoundError", "longest_output_bytes", "tokens_for"]
