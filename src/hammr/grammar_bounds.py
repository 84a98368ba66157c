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

import re
from dataclasses import dataclass

_RULE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*::=\s*(.*)$")


class GrammarBoundError(ValueError):
    """The grammar could not be read (a rule missing, an unbalanced group, ...)."""


@dataclass
class _Reader:
    text: str
    pos: int = 0

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n":
            self.pos += 1
        if self.pos < len(self.text) and self.text[self.pos] == "#":
            while self.pos < len(self.text) and self.text[self.pos] != "\n":
                self.pos += 1
            self.skip()


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
        reader = _Reader(self.rules[name])
        length = self.alternatives(reader)
        if reader.peek():
            raise GrammarBoundError(f"rule {name!r}: unexpected {reader.text[reader.pos :][:20]!r}")
        self.visiting.discard(name)
        self.memo[name] = length
        return length

    def alternatives(self, r: _Reader) -> int | None:
        best: int | None = self.sequence(r)
        while r.peek() == "|":
            r.pos += 1
            other = self.sequence(r)
            best = None if best is None or other is None else max(best, other)
        return best

    def sequence(self, r: _Reader) -> int | None:
        total: int | None = 0
        while r.peek() not in ("", "|", ")"):
            item = self.repeated(r)
            total = None if total is None or item is None else total + item
        return total

    def repeated(self, r: _Reader) -> int | None:
        one = self.atom(r)
        ch = r.text[r.pos] if r.pos < len(r.text) else " "
        if ch == "?":
            r.pos += 1
            return one
        if ch in "*+":
            r.pos += 1
            return None if one != 0 else 0
        if ch == "{":
            end = r.text.index("}", r.pos)
            spec = r.text[r.pos + 1 : end].replace(" ", "")
            r.pos = end + 1
            low, comma, high = spec.partition(",")
            if comma and not high:
                return None if one != 0 else 0
            count = int(high) if comma else int(low)
            return None if one is None else one * count
        return one

    def atom(self, r: _Reader) -> int | None:
        ch = r.peek()
        text = r.text
        if ch == '"':
            i, out = r.pos + 1, []
            while text[i] != '"':
                c, i = _unescape_char(text, i)
                out.append(c)
            r.pos = i + 1
            return len("".join(out).encode("utf-8"))
        if ch == "[":
            i = r.pos + 1
            negated = text[i] == "^"
            if negated:
                i += 1
            widest = 1
            while text[i] != "]":
                c, i = _unescape_char(text, i)
                widest = max(widest, len(c.encode("utf-8")))
            r.pos = i + 1
            return 4 if negated else widest
        if ch == "(":
            r.pos += 1
            inner = self.alternatives(r)
            if r.peek() != ")":
                raise GrammarBoundError("a group is not closed")
            r.pos += 1
            return inner
        if ch == ".":
            r.pos += 1
            return 4
        m = re.compile(r"[A-Za-z0-9_-]+").match(text, r.pos)
        if not m:
            raise GrammarBoundError(f"unexpected {text[r.pos :][:20]!r}")
        r.pos = m.end()
        return self.rule(m.group(0))


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
