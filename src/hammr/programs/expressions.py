"""The expression language of MulProg's EVAL step, evaluated without Python's ``eval``.

A program combines earlier results with lines such as::

    ANSWER2=EVAL(expr="'yes' if {ANSWER0} > 0 and {ANSWER1} == 'red' else 'no'")

The paper's public code pastes the variables' values into the text and runs ``eval`` on it.
Here the text is never run: ``{NAME}`` placeholders are replaced by fresh identifiers bound
to the variables' values (a variable holding ``"__import__('os')"`` stays that string), the
text is parsed with ``ast.parse`` and a small interpreter walks a whitelist of node types.

What programs write, and what it means here:

* ``{NAME}`` (or a bare ``NAME`` that is a known variable) is the variable's value, bound the
  way the paper's pasting behaves: a string that is a plain number (``"3"``, ``"-2.5"``) is
  that number; ``"yes"``/``"no"`` (also ``"true"``/``"false"``, any case, a trailing period
  ignored) are ``True``/``False``, so ``{A} and {B}`` and ``{A} xor {B}`` work on VQA answers;
  any other string stays a string.
* ``'{NAME}'`` (a placeholder inside quotes) is the value as text: strings as they are,
  numbers written out, booleans as ``'yes'``/``'no'``. A placeholder inside longer quoted
  text is filled in the same way.
* ``==``, ``!=``, ``in`` compare by meaning where the binding above could have changed a
  type: a boolean equals ``'yes'``/``'no'`` text of the same meaning and a number equals text
  that spells it, so ``{ANSWER0} == 'yes'`` holds whether ANSWER0 was bound as text or not.
  Ordering (``<`` ...) follows Python: text against a number is a type error.
* ``a xor b`` (infix, as the paper's programs write it; ``or``'s precedence, result a
  boolean), the function ``xor(a, b)``, and ``^`` between booleans.
* ``and or not``, ``+ - * / // % **`` (numbers; ``+`` and ``*`` also build text and lists,
  within size limits), comparisons, ``x if c else y``, list/tuple displays, and the
  functions ``len abs min max int float str xor``.

Anything else (attributes, indexing, other calls, lambdas, comprehensions, f-strings, ``:=``,
sets, dicts, dunder names, ...) is refused with an :class:`ExpressionError` whose message an
LLM can act on. Sizes are bounded (text, nesting, integers, built strings and lists, ``**``),
so every evaluation is quick.
"""

from __future__ import annotations

import ast
import operator
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal

ErrorKind = Literal["syntax", "unknown_variable", "not_allowed", "type", "math", "too_big"]

MAX_EXPR_CHARS = 2000
"""Longest expression text accepted."""
MAX_DEPTH = 50
"""Deepest nesting of brackets and of syntax-tree nodes accepted."""
MAX_STR_CHARS = 10_000
"""Longest string an expression may build (variables' own strings may be longer)."""
MAX_SEQ_ITEMS = 10_000
"""Longest list or tuple an expression may build."""
MAX_INT_BITS = 1024
"""Largest integer (in bits) an expression may write or compute."""
MAX_EXPONENT = 64
"""Largest exponent magnitude ``**`` accepts."""

_FUNCTIONS = frozenset({"len", "abs", "min", "max", "int", "float", "str", "xor"})
_KEYWORDS = frozenset({"and", "or", "not", "if", "else", "in", "is", "lambda", "for", "async"})
_STRING_PREFIXES = frozenset({"r", "u", "f", "b", "br", "rb", "fr", "rf"})
_PLACEHOLDER = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_MAX_NUMBER_CHARS = 40
_TRUE_WORDS = frozenset({"yes", "true"})
_FALSE_WORDS = frozenset({"no", "false"})
_MAX_LISTED = 30

_NOT_ALLOWED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access (a.b)",
    ast.Subscript: "indexing (a[0])",
    ast.Slice: "slices",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.JoinedStr: "f-strings (write the placeholder {NAME} directly)",
    ast.FormattedValue: "f-strings (write the placeholder {NAME} directly)",
    ast.NamedExpr: "assignment (:=)",
    ast.Starred: "starred arguments (*a)",
    ast.Set: "sets (braces may only wrap a variable name, like {ANSWER0})",
    ast.Dict: "dicts (braces may only wrap a variable name, like {ANSWER0})",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}


class ExpressionError(Exception):
    """An EVAL expression was refused or failed; ``kind`` says which way, the message how."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        one_line = " ".join(message.split())
        super().__init__(one_line)
        self.kind: ErrorKind = kind
        self.message = one_line


def evaluate_expression(expr: str, variables: Mapping[str, object]) -> object:
    """Evaluate an EVAL expression over the program's variables (see the module docstring).

    Raises :class:`ExpressionError` for anything refused or failing; never runs the text.
    """
    text = expr.strip()
    if len(text) > MAX_EXPR_CHARS:
        raise ExpressionError(
            "too_big", f"the expression is {len(text)} characters; at most {MAX_EXPR_CHARS}"
        )
    if not text:
        raise ExpressionError("syntax", "the expression is empty")
    source = _Rewriter(text, variables).rewrite()
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal" for `1and`
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source.text, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(
            "syntax",
            f"invalid expression ({e.msg}); write e.g. 'yes' if {{ANSWER0}} > 0 else 'no'",
        ) from None
    except ValueError as e:  # e.g. a NUL character
        raise ExpressionError("syntax", f"invalid expression: {e}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError("too_big", "the expression is nested too deeply") from None
    interpreter = _Interpreter(source, variables)
    interpreter.check(tree)
    return interpreter.value(tree.body)


# --- rewriting the text: placeholders and infix xor -------------------------------------


class _Source:
    """The rewritten text and what its fresh identifiers stand for."""

    def __init__(self, text: str, bound: dict[str, object], xor_marker: str) -> None:
        self.text = text
        self.bound = bound
        self.xor_marker = xor_marker


class _Rewriter:
    """Replaces ``{NAME}`` outside string literals by fresh identifiers and infix ``xor`` by
    ``or MARK or`` (the parser flattens ``or`` chains, so the marker sits in the ``BoolOp``'s
    values exactly where the ``xor`` was, with ``or``'s precedence)."""

    def __init__(self, text: str, variables: Mapping[str, object]) -> None:
        self.text = text
        self.variables = variables
        prefix = "_hv"
        while prefix in text:
            prefix += "_"
        self.prefix = prefix
        self.out: list[str] = []
        self.bound: dict[str, object] = {}
        self.by_name: dict[str, str] = {}
        self.operand_before = False
        self.depth = 0

    def rewrite(self) -> _Source:
        text, n, i = self.text, len(self.text), 0
        while i < n:
            c = text[i]
            if c in "'\"":
                i = self._string(i)
            elif c == "#":
                end = text.find("\n", i)
                end = n if end < 0 else end
                self.out.append(text[i:end])
                i = end
            elif c.isalnum() or c == "_":
                i = self._word(i)
            elif c == "{":
                i = self._brace(i)
            else:
                if c in "([":
                    self._open()
                elif c in ")]}":
                    self.depth -= 1
                if not c.isspace():
                    self.operand_before = c in ")]}"
                self.out.append(c)
                i += 1
        return _Source("".join(self.out).strip(), self.bound, self.prefix + "x")

    def _open(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError("too_big", f"brackets are nested more than {MAX_DEPTH} deep")

    def _string(self, i: int) -> int:
        text = self.text
        quote = text[i]
        delim = quote * 3 if text.startswith(quote * 3, i) else quote
        j = i + len(delim)
        while j < len(text):
            if text[j] == "\\":
                j += 2
            elif text.startswith(delim, j):
                j += len(delim)
                break
            else:
                j += 1
        j = min(j, len(text))
        self.out.append(text[i:j])
        self.operand_before = True
        return j

    def _word(self, i: int) -> int:
        text = self.text
        j = i
        while j < len(text) and (text[j].isalnum() or text[j] == "_"):
            j += 1
        word = text[i:j]
        if j < len(text) and text[j] in "'\"" and word.lower() in _STRING_PREFIXES:
            self.out.append(word)
            return self._string(j)
        if word.lower() == "xor" and self.operand_before:
            self.out.append(f" or {self.prefix}x or ")
            self.operand_before = False
            return j
        self.out.append(word)
        self.operand_before = word not in _KEYWORDS
        return j

    def _brace(self, i: int) -> int:
        match = _PLACEHOLDER.match(self.text, i)
        if match is None:
            self._open()
            self.operand_before = False
            self.out.append("{")
            return i + 1
        name = _known_name(match.group(1), self.variables)
        fresh = self.by_name.get(name)
        if fresh is None:
            fresh = f"{self.prefix}{len(self.by_name)}"
            self.by_name[name] = fresh
            self.bound[fresh] = _bind(self.variables[name])
        self.out.append(f" {fresh} ")
        self.operand_before = True
        return match.end()


def _known_name(name: str, variables: Mapping[str, object]) -> str:
    if name.startswith("__"):
        raise ExpressionError("not_allowed", f"names starting with __ are not allowed: {name}")
    if name not in variables:
        shown = sorted(variables)[:_MAX_LISTED]
        more = ", ..." if len(variables) > _MAX_LISTED else ""
        available = ", ".join(shown) + more if shown else "none"
        raise ExpressionError(
            "unknown_variable", f"unknown variable {{{name}}}; available: {available}"
        )
    return name


# --- binding values ---------------------------------------------------------------------


def _yes_no(text: str) -> bool | None:
    if len(text) > 12:
        return None
    word = text.strip().rstrip(".!").strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None


def _number(text: str) -> int | float | None:
    stripped = text.strip()
    if len(stripped) > _MAX_NUMBER_CHARS or not _NUMBER.fullmatch(stripped):
        return None
    return float(stripped) if "." in stripped else int(stripped)


def _bind(value: object) -> object:
    """A variable's value as an unquoted placeholder sees it (as the paper's pasting did)."""
    if isinstance(value, str):
        meaning = _yes_no(value)
        if meaning is not None:
            return meaning
        number = _number(value)
        if number is not None:
            return number
    return value


def _as_text(value: object, name: str) -> str:
    """A variable's value as a quoted placeholder sees it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "none"
    raise ExpressionError(
        "type", f"{{{name}}} holds {_describe(value)}, which cannot be put inside quotes"
    )


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, int | float):
        return f"the number {_short(value)}"
    if isinstance(value, str):
        return f"the text {_short(value)}"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)} items"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def _short(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


# --- checking and evaluating the tree ---------------------------------------------------

_ALLOWED_BINOPS = (
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.BitXor,
)
_ALLOWED_CMPOPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)
_ORDERINGS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_OP_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitXor: "^",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitAnd: "&",
    ast.Invert: "~",
    ast.Is: "is",
    ast.IsNot: "is not",
}


def _symbol(op: ast.AST) -> str:
    return _OP_SYMBOLS.get(type(op), type(op).__name__)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)


def _check_int(value: object) -> None:
    if isinstance(value, int) and abs(value).bit_length() > MAX_INT_BITS:
        raise ExpressionError("too_big", f"integers are limited to {MAX_INT_BITS} bits")


def _check_size(value: object) -> None:
    if isinstance(value, str) and len(value) > MAX_STR_CHARS:
        raise ExpressionError("too_big", f"strings are limited to {MAX_STR_CHARS} characters")
    if isinstance(value, list | tuple) and len(value) > MAX_SEQ_ITEMS:
        raise ExpressionError("too_big", f"lists are limited to {MAX_SEQ_ITEMS} items")
    _check_int(value)


def _equal(a: object, b: object) -> bool:
    """``==`` by meaning: yes/no text against booleans, numeric text against numbers."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, bool) and isinstance(y, str):
            meaning = _yes_no(y)
            if meaning is not None:
                return x == meaning
        elif _is_number(x) and isinstance(y, str):
            number = _number(y)
            if number is not None:
                return x == number
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        raise ExpressionError(
            "type", f"cannot compare {_describe(a)} with {_describe(b)}"
        ) from None


def _contains(item: object, container: object) -> bool:
    if isinstance(container, str):
        if not isinstance(item, str):
            raise ExpressionError(
                "type", f"'in' text needs text on the left, got {_describe(item)}"
            )
        return item in container
    if isinstance(container, list | tuple):
        return any(_equal(item, element) for element in container)
    raise ExpressionError(
        "type", f"'in' needs text or a list on the right, got {_describe(container)}"
    )


def _order(op: ast.cmpop, a: object, b: object) -> bool:
    try:
        return bool(_ORDERINGS[type(op)](a, b))
    except (TypeError, ValueError):
        raise ExpressionError(
            "type", f"cannot compare {_describe(a)} with {_describe(b)} using {_symbol(op)}"
        ) from None


def _truth(value: object) -> bool:
    try:
        return bool(value)
    except (TypeError, ValueError):
        raise ExpressionError("type", f"{_describe(value)} is neither true nor false") from None


def _pow(base: object, exponent: object) -> object:
    if not (_is_number(base) and _is_number(exponent)):
        raise ExpressionError(
            "type", f"** needs numbers, got {_describe(base)} and {_describe(exponent)}"
        )
    assert isinstance(base, int | float) and isinstance(exponent, int | float)
    if abs(exponent) > MAX_EXPONENT:
        raise ExpressionError("too_big", f"exponents are limited to {MAX_EXPONENT}")
    # (bits - 1) * exponent is a lower bound of the result's size: refuse before computing
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS
    ):
        raise ExpressionError("too_big", f"integers are limited to {MAX_INT_BITS} bits")
    try:
        result: object = base**exponent
    except ZeroDivisionError:
        raise ExpressionError("math", "zero cannot be raised to a negative power") from None
    except OverflowError:
        raise ExpressionError("too_big", "the power is too large") from None
    if isinstance(result, complex):
        raise ExpressionError("math", "a negative number has no real fractional power")
    _check_int(result)
    return result


def _arithmetic(op: ast.operator, a: object, b: object) -> object:
    symbol = _symbol(op)
    if isinstance(op, ast.Pow):
        return _pow(a, b)
    if isinstance(op, ast.BitXor):
        if isinstance(a, bool) and isinstance(b, bool):
            return a != b
        raise ExpressionError("type", "^ only combines yes/no values; write a xor b")
    if isinstance(op, ast.Add):
        if isinstance(a, str) and isinstance(b, str):
            _check_size_of(a, len(a) + len(b))
            return a + b
        if isinstance(a, list) and isinstance(b, list):
            _check_size_of(a, len(a) + len(b))
            return a + b
        if isinstance(a, tuple) and isinstance(b, tuple):
            _check_size_of(a, len(a) + len(b))
            return a + b
    if isinstance(op, ast.Mult):
        seq, times = (a, b) if isinstance(a, str | list | tuple) else (b, a)
        if isinstance(seq, str | list | tuple) and isinstance(times, int):
            _check_size_of(seq, len(seq) * max(times, 0))
            return seq * times
    if not (_is_number(a) and _is_number(b)):
        raise ExpressionError(
            "type",
            f"{symbol} needs numbers, got {_describe(a)} and {_describe(b)}"
            + ("; use str() to join text and numbers" if symbol == "+" else ""),
        )
    assert isinstance(a, int | float) and isinstance(b, int | float)
    try:
        if isinstance(op, ast.Add):
            result: int | float = a + b
        elif isinstance(op, ast.Sub):
            result = a - b
        elif isinstance(op, ast.Mult):
            result = a * b
        elif isinstance(op, ast.Div):
            result = a / b
        elif isinstance(op, ast.FloorDiv):
            result = a // b
        else:
            result = a % b
    except ZeroDivisionError:
        raise ExpressionError("math", f"division by zero in {symbol}") from None
    except OverflowError:
        raise ExpressionError("math", f"the result of {symbol} is too large") from None
    _check_int(result)
    return result


def _check_size_of(seq: str | list[object] | tuple[object, ...], size: int) -> None:
    limit = MAX_STR_CHARS if isinstance(seq, str) else MAX_SEQ_ITEMS
    if size > limit:
        what = "strings" if isinstance(seq, str) else "lists"
        unit = "characters" if isinstance(seq, str) else "items"
        raise ExpressionError("too_big", f"{what} are limited to {limit} {unit}")


def _to_int(value: object) -> int:
    if isinstance(value, str) and len(value) > _MAX_NUMBER_CHARS:
        raise ExpressionError("too_big", "int() of text is limited to short numbers")
    if not isinstance(value, int | float | str):
        raise ExpressionError("type", f"int() needs a number or text, got {_describe(value)}")
    try:
        result = int(value)
    except ValueError:
        raise ExpressionError("type", f"int() cannot read {_describe(value)}") from None
    except OverflowError:
        raise ExpressionError("math", f"int() cannot convert {_describe(value)}") from None
    _check_int(result)
    return result


def _to_float(value: object) -> float:
    if isinstance(value, str) and len(value) > _MAX_NUMBER_CHARS:
        raise ExpressionError("too_big", "float() of text is limited to short numbers")
    if not isinstance(value, int | float | str):
        raise ExpressionError("type", f"float() needs a number or text, got {_describe(value)}")
    try:
        return float(value)
    except ValueError:
        raise ExpressionError("type", f"float() cannot read {_describe(value)}") from None
    except OverflowError:
        raise ExpressionError("math", f"float() cannot convert {_describe(value)}") from None


def _to_str(value: object) -> str:
    if isinstance(value, str | int | float) or value is None:
        return str(value)
    raise ExpressionError("type", f"str() needs text or a number, got {_describe(value)}")


def _min_max(name: str, args: list[object]) -> object:
    items: Any = args[0] if len(args) == 1 else args
    if not isinstance(items, list | tuple | str) or not items:
        raise ExpressionError(
            "type", f"{name}() needs a non-empty list or several values, got {_describe(items)}"
        )
    try:
        return min(items) if name == "min" else max(items)
    except (TypeError, ValueError):
        raise ExpressionError("type", f"{name}() cannot order {_describe(items)}") from None


class _Interpreter:
    """Checks a parsed expression against the whitelist, then evaluates it."""

    def __init__(self, source: _Source, variables: Mapping[str, object]) -> None:
        self.source = source
        self.variables = variables

    # checking ------------------------------------------------------------------------

    def check(self, tree: ast.Expression) -> None:
        """Refuse the whole expression before evaluating any of it (short-circuits do not
        hide a forbidden node)."""
        stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise ExpressionError("too_big", f"the expression is nested over {MAX_DEPTH} deep")
            stack.extend((child, depth + 1) for child in self._children(node))

    def _children(self, node: ast.AST) -> list[ast.AST]:
        if isinstance(node, ast.Constant):
            self._check_constant(node)
            return []
        if isinstance(node, ast.Name):
            self._check_name(node.id)
            return []
        if isinstance(node, ast.BoolOp):
            return self._check_boolop(node)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.Not | ast.USub | ast.UAdd):
                raise ExpressionError(
                    "not_allowed", f"the operator '{_symbol(node.op)}' is not allowed"
                )
            return [node.operand]
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _ALLOWED_BINOPS):
                raise ExpressionError(
                    "not_allowed", f"the operator '{_symbol(node.op)}' is not allowed"
                )
            return [node.left, node.right]
        if isinstance(node, ast.Compare):
            for op in node.ops:
                if not isinstance(op, _ALLOWED_CMPOPS):
                    raise ExpressionError(
                        "not_allowed",
                        f"the comparison '{_symbol(op)}' is not allowed; use == or !=",
                    )
            return [node.left, *node.comparators]
        if isinstance(node, ast.IfExp):
            return [node.test, node.body, node.orelse]
        if isinstance(node, ast.List | ast.Tuple):
            return list(node.elts)
        if isinstance(node, ast.Call):
            return self._check_call(node)
        what = _NOT_ALLOWED.get(type(node), type(node).__name__)
        raise ExpressionError(
            "not_allowed",
            f"not allowed: {what}; an expression may only use values, {{NAME}} placeholders,"
            " operators, comparisons, 'x if c else y' and the functions "
            + ", ".join(sorted(_FUNCTIONS)),
        )

    def _check_constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, str):
            _check_size(value)
            for match in _PLACEHOLDER.finditer(value):
                _known_name(match.group(1), self.variables)
        elif isinstance(value, bool | int | float) or value is None:
            _check_int(value)
        else:
            raise ExpressionError(
                "not_allowed", f"the constant {_short(value)} is not allowed; use text or numbers"
            )

    def _check_name(self, name: str) -> None:
        if name in self.source.bound:
            return
        if name in (self.source.xor_marker, "xor"):
            raise ExpressionError("syntax", "xor needs a value on each side")
        if name in _FUNCTIONS:
            raise ExpressionError("not_allowed", f"{name} is a function: call it, like {name}(x)")
        _known_name(name, self.variables)

    def _check_boolop(self, node: ast.BoolOp) -> list[ast.AST]:
        marker = self.source.xor_marker
        values = node.values
        children: list[ast.AST] = []
        for i, value in enumerate(values):
            if isinstance(value, ast.Name) and value.id == marker:
                previous_is_marker = i > 0 and self._is_marker(values[i - 1])
                if i == 0 or i == len(values) - 1 or previous_is_marker:
                    raise ExpressionError("syntax", "xor needs a value on each side")
            else:
                children.append(value)
        return children

    def _is_marker(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == self.source.xor_marker

    def _check_call(self, node: ast.Call) -> list[ast.AST]:
        func = node.func
        if not isinstance(func, ast.Name) or func.id not in _FUNCTIONS:
            called = f"{func.id}()" if isinstance(func, ast.Name) else "a computed function"
            raise ExpressionError(
                "not_allowed",
                f"calling {called} is not allowed; the only functions are "
                + ", ".join(sorted(_FUNCTIONS)),
            )
        if node.keywords:
            raise ExpressionError("not_allowed", f"{func.id}() takes no keyword arguments")
        return list(node.args)

    # evaluating ----------------------------------------------------------------------

    def value(self, node: ast.AST) -> object:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return self._text(node.value)
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.source.bound:
                return self.source.bound[node.id]
            return _bind(self.variables[node.id])
        if isinstance(node, ast.BoolOp):
            return self._boolop(node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.BinOp):
            return _arithmetic(node.op, self.value(node.left), self.value(node.right))
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.IfExp):
            return self.value(node.body if _truth(self.value(node.test)) else node.orelse)
        if isinstance(node, ast.List):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise ExpressionError("not_allowed", f"{type(node).__name__} is not allowed")

    def _text(self, literal: str) -> str:
        whole = _PLACEHOLDER.fullmatch(literal)
        if whole is not None:
            name = whole.group(1)
            return _as_text(self.variables[name], name)
        if "{" not in literal:
            return literal
        filled = _PLACEHOLDER.sub(
            lambda m: _as_text(self.variables[m.group(1)], m.group(1)), literal
        )
        _check_size(filled)
        return filled

    def _boolop(self, node: ast.BoolOp) -> object:
        values = node.values
        result = self.value(values[0])
        if isinstance(node.op, ast.And):
            for value in values[1:]:
                if not _truth(result):
                    return result
                result = self.value(value)
            return result
        i = 1
        while i < len(values):
            if self._is_marker(values[i]):
                result = _truth(result) != _truth(self.value(values[i + 1]))
                i += 2
            else:
                if not _truth(result):
                    result = self.value(values[i])
                i += 1
        return result

    def _unary(self, node: ast.UnaryOp) -> object:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return not _truth(operand)
        if not isinstance(operand, int | float):
            raise ExpressionError(
                "type", f"unary minus/plus needs a number, got {_describe(operand)}"
            )
        return -operand if isinstance(node.op, ast.USub) else +operand

    def _compare(self, node: ast.Compare) -> bool:
        left = self.value(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.value(comparator)
            if isinstance(op, ast.Eq):
                holds = _equal(left, right)
            elif isinstance(op, ast.NotEq):
                holds = not _equal(left, right)
            elif isinstance(op, ast.In):
                holds = _contains(left, right)
            elif isinstance(op, ast.NotIn):
                holds = not _contains(left, right)
            else:
                holds = _order(op, left, right)
            if not holds:
                return False
            left = right
        return True

    def _call(self, node: ast.Call) -> object:
        assert isinstance(node.func, ast.Name)
        name = node.func.id
        args = [self.value(a) for a in node.args]
        if name in ("min", "max"):
            if not args:
                raise ExpressionError("type", f"{name}() needs at least one argument")
            return _min_max(name, args)
        wanted = 2 if name == "xor" else 1
        if len(args) != wanted:
            raise ExpressionError("type", f"{name}() takes {wanted} argument(s), got {len(args)}")
        if name == "xor":
            return _truth(args[0]) != _truth(args[1])
        arg = args[0]
        if name == "len":
            if not isinstance(arg, str | list | tuple):
                raise ExpressionError("type", f"len() needs text or a list, got {_describe(arg)}")
            return len(arg)
        if name == "abs":
            if not isinstance(arg, int | float):
                raise ExpressionError("type", f"abs() needs a number, got {_describe(arg)}")
            return abs(arg)
        if name == "int":
            return _to_int(arg)
        if name == "float":
            return _to_float(arg)
        result = _to_str(arg)
        _check_size(result)
        return result
