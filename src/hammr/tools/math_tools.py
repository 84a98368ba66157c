"""Arithmetic and equation solving, without ``eval``.

Both tools parse the model's text with :func:`ast.parse` and walk a whitelisted subset of
Python expressions: numbers, ``+ - * / // % **``, unary ``+``/``-``, parentheses and calls
to a few named functions. Anything else (attributes, subscripts, comparisons, unknown
names or functions, keyword arguments, strings) is refused with a message the agent can act
on. ``^`` is read as a power and ``×``/``÷`` as ``*``/``/``; a number directly followed by a
name or a parenthesis is multiplied (``2x``, ``3(x + 1)``).

:func:`Calculator` keeps integers and decimal literals exact (as fractions) through
``+ - * / // % **``; the result is an ``int`` when it is a whole number computed exactly
and a ``float`` otherwise (functions such as ``sqrt`` or ``sin`` give floats, except
``sqrt`` of a perfect square). :func:`SolveMathEquation` builds sympy objects from the same
tree itself, because sympy's own parser (``parse_expr``/``sympify``) calls ``eval``.

SolveMathEquation also takes a math word problem, as MuSE's tool does (MuSEAgent, appendix C:
"algebraic equations or math-related word problems presented in natural language"): text that
does not parse as an equation and reads as words (:func:`reads_as_words`) goes to the run's LLM
once (``ctx.llm``), which writes the equation; that equation then takes the path above (our
parser, our sympy builder, the time limit). Nothing the model writes is evaluated any other way.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import math
import re
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

from hammr.backends.llm.base import LLMRequest, Message
from hammr.tools.base import BadArguments, ToolContext, ToolError, ToolResult, tool
from hammr.values import render_value

MAX_EXPRESSION_CHARS = 300
"""Longer expressions are refused."""

MAX_NESTING = 40
"""Deeper nesting of operators and parentheses is refused."""

MAX_EXPONENT = 10_000
"""Powers with a larger exponent (in absolute value) are refused."""

MAX_MAGNITUDE = 1e300
"""Calculator results and intermediate values above this (in absolute value) are refused."""

MAX_EQUATION_EXPONENT = 100
"""SolveMathEquation refuses powers of an unknown above this (degree-10^4 polynomials hang)."""

SOLVE_TIMEOUT_S = 10.0
"""How long SolveMathEquation waits for sympy before giving up."""

MAX_RUNAWAY_SOLVERS = 2
"""Solver threads that ran past the time limit cannot be stopped (Python threads cannot be
killed); they run on as daemon threads and finish or die with the process. While this many
are still running, new equations are refused instead of starting more."""

_MAX_DENOMINATOR_BITS = 2048
"""Exact fractions whose denominator grows beyond this many bits continue as floats."""

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}

Number = int | float | Fraction

_BINOP_SYMBOL: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}

_OTHER_NODES: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access (a.b)",
    ast.Subscript: "indexing (a[b])",
    ast.Compare: "comparisons",
    ast.BoolOp: "and/or",
    ast.Lambda: "lambda",
    ast.IfExp: "if/else",
    ast.Tuple: "tuples (is there a comma in a number? write 1000, not 1,000)",
    ast.List: "lists",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.ListComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.NamedExpr: "assignment (:=)",
    ast.Starred: "*args",
    ast.JoinedStr: "strings",
}


# -- parsing ---------------------------------------------------------------------------------

_IMPLICIT_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?|\.\d+)(?![eE][+-]?\d)(?=\s*[A-Za-z_(])")
_IMPLICIT_PAREN = re.compile(r"\)(?=\s*[\w(])")


def normalise_expression(text: str) -> str:
    """``^`` -> ``**``, ``×``/``÷`` -> ``*``/``/``; ``2x``, ``2(...)``, ``)(`` get a ``*``."""
    text = text.replace("^", "**").replace("×", "*").replace("÷", "/").replace("−", "-")
    text = _IMPLICIT_NUMBER.sub(r"\1*", text)
    return _IMPLICIT_PAREN.sub(")*", text)


def parse_expression(text: str, tool_name: str) -> ast.expr:
    """Parse model text into an expression tree (syntax only; the walkers check the nodes)."""
    if not isinstance(text, str) or not text.strip():
        raise BadArguments(f"{tool_name} needs a non-empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise BadArguments(
            f"{tool_name}: the expression is {len(text)} characters long, above the limit of "
            f"{MAX_EXPRESSION_CHARS}; split the calculation into steps"
        )
    source = normalise_expression(text.strip())
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        detail = e.msg if isinstance(e, SyntaxError) else type(e).__name__
        raise BadArguments(f"{tool_name}: cannot parse {text.strip()!r} ({detail})") from None
    _check_depth(tree.body, tool_name)
    return tree.body


def _check_depth(node: ast.AST, tool_name: str) -> None:
    stack: list[tuple[ast.AST, int]] = [(node, 1)]
    while stack:
        n, d = stack.pop()
        if d > MAX_NESTING:
            raise BadArguments(
                f"{tool_name}: the expression is nested more than {MAX_NESTING} levels deep"
            )
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))


def _refuse(node: ast.AST, tool_name: str) -> BadArguments:
    what = _OTHER_NODES.get(type(node))
    if isinstance(node, ast.Constant):
        what = f"the constant {node.value!r} (only real numbers are allowed)"
    elif isinstance(node, ast.BinOp | ast.UnaryOp):
        what = f"the operator {type(node.op).__name__}"
    return BadArguments(f"{tool_name}: not allowed: {what or type(node).__name__}")


def _literal(node: ast.Constant, tool_name: str) -> int | Fraction:
    v = node.value
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _refuse(node, tool_name)
    if isinstance(v, int):
        return v
    if not math.isfinite(v):
        raise BadArguments(f"{tool_name}: the number {v!r} is too large")
    return Fraction(repr(v))  # 0.1 stays exactly 1/10


def _call_parts(node: ast.Call, tool_name: str, allowed: dict[str, Any]) -> tuple[str, Any]:
    if not isinstance(node.func, ast.Name):
        raise BadArguments(f"{tool_name}: only calls to named functions are allowed")
    name = node.func.id
    if name not in allowed:
        raise BadArguments(
            f"{tool_name}: unknown function {name}(); allowed: {', '.join(sorted(allowed))}"
        )
    if node.keywords:
        raise BadArguments(f"{tool_name}: {name}() takes no keyword arguments")
    if not node.args:
        raise BadArguments(f"{tool_name}: {name}() needs an argument")
    return name, allowed[name]


# -- Calculator ------------------------------------------------------------------------------


def _to_float(v: Number) -> float:
    try:
        return float(v)
    except OverflowError:
        raise BadArguments(f"Calculator: a value is above the limit of {MAX_MAGNITUDE:g}") from None


def _exact_int(v: Number) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, Fraction) and v.denominator == 1:
        return v.numerator
    return None


def _sqrt(x: Number) -> Number:
    n = _exact_int(x)
    if n is not None and n >= 0:
        r = math.isqrt(n)
        if r * r == n:
            return r
    return math.sqrt(_to_float(x))


def _abs(x: Number) -> Number:
    return -x if x < 0 else x


def _round(x: Number, ndigits: Number | None = None) -> Number:
    nd = 0 if ndigits is None else _exact_int(ndigits)
    if nd is None or abs(nd) > 20:
        raise BadArguments("Calculator: round(x, n) needs a whole number n between -20 and 20")
    if isinstance(x, float):
        return round(x, nd)
    exact: Fraction = round(Fraction(x), nd)  # half to even, like Python's round
    return exact


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(_to_float(x)) if base is None else math.log(_to_float(x), _to_float(base))


def _float_fn(f: Callable[[float], float]) -> Callable[[Number], Number]:
    return lambda x: f(_to_float(x))


CALCULATOR_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": _sqrt,
    "abs": _abs,
    "round": _round,
    "min": min,
    "max": max,
    "floor": lambda x: math.floor(x),
    "ceil": lambda x: math.ceil(x),
    "log": _log,
    "log10": _float_fn(math.log10),
    "log2": _float_fn(math.log2),
    "exp": _float_fn(math.exp),
    "sin": _float_fn(math.sin),
    "cos": _float_fn(math.cos),
    "tan": _float_fn(math.tan),
    "asin": _float_fn(math.asin),
    "acos": _float_fn(math.acos),
    "atan": _float_fn(math.atan),
    "degrees": _float_fn(math.degrees),
    "radians": _float_fn(math.radians),
}
"""Functions Calculator knows (trigonometry in radians)."""

_ARITY: dict[str, tuple[int, int]] = {
    "round": (1, 2),
    "log": (1, 2),
    "min": (1, 50),
    "max": (1, 50),
}


def _check_magnitude(v: Number) -> Number:
    if isinstance(v, float) and math.isnan(v):
        raise BadArguments("Calculator: the result is not a number (NaN)")
    if _abs(v) > MAX_MAGNITUDE:
        raise BadArguments(f"Calculator: a value is above the limit of {MAX_MAGNITUDE:g}")
    if isinstance(v, Fraction):
        if v.denominator == 1:
            return v.numerator
        if v.denominator.bit_length() > _MAX_DENOMINATOR_BITS:
            return float(v)
    return v


def _power(base: Number, exp: Number) -> Number:
    if _abs(exp) > MAX_EXPONENT:
        raise BadArguments(
            f"Calculator: the exponent {_show(exp)} is above the limit of {MAX_EXPONENT}"
        )
    n = _exact_int(exp)
    b = _to_float(base)
    # Estimate the size before computing, so 9**9**9 is refused instead of hanging.
    if b not in (0, 1, -1) and _to_float(exp) * math.log10(abs(b)) > math.log10(MAX_MAGNITUDE):
        raise BadArguments(
            f"Calculator: {_show(base)}**{_show(exp)} is above the limit of {MAX_MAGNITUDE:g}"
        )
    if n is not None and not isinstance(base, float):
        if base == 0 and n < 0:
            raise BadArguments("Calculator: division by zero (0 to a negative power)")
        return Fraction(base) ** n
    if b == 0 and _to_float(exp) < 0:
        raise BadArguments("Calculator: division by zero (0 to a negative power)")
    if b < 0 and not _to_float(exp).is_integer():
        raise BadArguments(
            f"Calculator: ({_show(base)})**{_show(exp)} is not a real number "
            "(a negative number to a fractional power)"
        )
    try:
        return math.pow(b, _to_float(exp))
    except OverflowError:
        raise BadArguments(
            f"Calculator: {_show(base)}**{_show(exp)} is above the limit of {MAX_MAGNITUDE:g}"
        ) from None


def _show(v: Number) -> str:
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{float(v):g}"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _binop(op: ast.operator, a: Number, b: Number) -> Number:
    if isinstance(op, ast.Pow):
        return _power(a, b)
    if isinstance(op, ast.Div | ast.FloorDiv | ast.Mod) and b == 0:
        raise BadArguments(
            f"Calculator: division by zero ({_show(a)} {_BINOP_SYMBOL[type(op)]} {_show(b)})"
        )
    if isinstance(a, float) or isinstance(b, float):
        a, b = _to_float(a), _to_float(b)
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Div):
        return Fraction(a) / Fraction(b) if not isinstance(a, float) else a / b
    if isinstance(op, ast.FloorDiv):
        return a // b
    if isinstance(op, ast.Mod):
        return a % b
    raise BadArguments(f"Calculator: the operator {type(op).__name__} is not allowed")


def _evaluate(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        return _literal(node, "Calculator")
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in CALCULATOR_FUNCTIONS:
            raise BadArguments(f"Calculator: {node.id} is a function; call it as {node.id}(...)")
        raise BadArguments(
            f"Calculator: unknown name {node.id!r}; it only takes numbers, the constants pi "
            "and e, and functions (use SolveMathEquation for unknowns)"
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _evaluate(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SYMBOL:
        left, right = _evaluate(node.left), _evaluate(node.right)
        return _check_magnitude(_binop(node.op, left, right))
    if isinstance(node, ast.Call):
        name, fn = _call_parts(node, "Calculator", CALCULATOR_FUNCTIONS)
        lo, hi = _ARITY.get(name, (1, 1))
        if not lo <= len(node.args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise BadArguments(
                f"Calculator: {name}() takes {want} argument(s), got {len(node.args)}"
            )
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise BadArguments("Calculator: *args is not allowed")
        args = [_evaluate(a) for a in node.args]
        try:
            value = fn(*args)
        except (ValueError, ZeroDivisionError):
            shown = ", ".join(_show(a) for a in args)
            raise BadArguments(f"Calculator: {name}({shown}) is undefined") from None
        except OverflowError:
            raise BadArguments(
                f"Calculator: {name}(...) is above the limit of {MAX_MAGNITUDE:g}"
            ) from None
        return _check_magnitude(value)
    raise _refuse(node, "Calculator")


def calculate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely; see the module docstring for the rules."""
    tree = parse_expression(expression, "Calculator")
    value = _check_magnitude(_evaluate(tree))
    exact = _exact_int(value)
    if exact is not None:
        return exact
    result = _to_float(value)
    if not math.isfinite(result):
        raise BadArguments(f"Calculator: the result is not a finite number ({result})")
    return result


@tool
def Calculator(expression: str) -> float:
    """Evaluate an arithmetic expression exactly, e.g. '(3 + 4.5) * 2' or 'sqrt(2) / 2'.

    Args:
        expression: numbers, + - * / // % ** (or ^), parentheses, pi, e and the functions
            sqrt abs round min max floor ceil log log10 log2 exp sin cos tan asin acos atan
            degrees radians (angles in radians). No variables.

    Returns:
        a number (a whole number when the result is exact and whole)
    """
    return calculate(expression)


# -- SolveMathEquation -----------------------------------------------------------------------


def _sympy_functions() -> dict[str, Any]:
    import sympy

    return {
        "sqrt": sympy.sqrt,
        "abs": sympy.Abs,
        "round": lambda x: sympy.floor(x + sympy.Rational(1, 2)),
        "min": sympy.Min,
        "max": sympy.Max,
        "floor": sympy.floor,
        "ceil": sympy.ceiling,
        "log": sympy.log,
        "log10": lambda x: sympy.log(x, 10),
        "log2": lambda x: sympy.log(x, 2),
        "exp": sympy.exp,
        "sin": sympy.sin,
        "cos": sympy.cos,
        "tan": sympy.tan,
        "asin": sympy.asin,
        "acos": sympy.acos,
        "atan": sympy.atan,
    }


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,19}$")


def _to_sympy(node: ast.expr, fns: dict[str, Any]) -> Any:
    """Build a sympy expression from a whitelisted tree (never through sympy's eval parser)."""
    import sympy

    if isinstance(node, ast.Constant):
        v = _literal(node, "SolveMathEquation")
        return (
            sympy.Integer(v) if isinstance(v, int) else sympy.Rational(v.numerator, v.denominator)
        )
    if isinstance(node, ast.Name):
        if node.id == "pi":
            return sympy.pi
        if node.id == "e":
            return sympy.E
        if node.id in fns:
            raise BadArguments(
                f"SolveMathEquation: {node.id} is a function; call it as {node.id}(...)"
            )
        if not _NAME.match(node.id):
            raise BadArguments(f"SolveMathEquation: {node.id!r} is not a usable variable name")
        return sympy.Symbol(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _to_sympy(node.operand, fns)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SYMBOL:
        a, b = _to_sympy(node.left, fns), _to_sympy(node.right, fns)
        op = node.op
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div | ast.FloorDiv | ast.Mod) and b.is_zero:
            raise BadArguments("SolveMathEquation: division by zero")
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return sympy.floor(a / b)
        if isinstance(op, ast.Mod):
            return sympy.Mod(a, b)
        return _sympy_power(a, b)
    if isinstance(node, ast.Call):
        name, fn = _call_parts(node, "SolveMathEquation", fns)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise BadArguments("SolveMathEquation: *args is not allowed")
        if name not in ("min", "max") and len(node.args) != 1:
            raise BadArguments(f"SolveMathEquation: {name}() takes one argument")
        return fn(*[_to_sympy(a, fns) for a in node.args])
    raise _refuse(node, "SolveMathEquation")


def _sympy_power(base: Any, exp: Any) -> Any:
    import sympy

    if exp.is_Number:
        if abs(exp) > MAX_EQUATION_EXPONENT and base.free_symbols:
            raise BadArguments(
                f"SolveMathEquation: the exponent {exp} is above the limit of "
                f"{MAX_EQUATION_EXPONENT} for powers of unknowns"
            )
        if abs(exp) > MAX_EXPONENT:
            raise BadArguments(
                f"SolveMathEquation: the exponent {exp} is above the limit of {MAX_EXPONENT}"
            )
        # sympy computes number**number at once: estimate the size first (9**9**9).
        if base.is_Number and abs(base) > 1 and float(exp) * math.log10(float(abs(base))) > 1000:
            raise BadArguments(f"SolveMathEquation: {base}**{exp} is too large (above 10^1000)")
        if base.is_zero and exp.is_negative:
            raise BadArguments("SolveMathEquation: division by zero (0 to a negative power)")
    return sympy.Pow(base, exp)


def _format_solution(sol: Any) -> str:
    import sympy

    exact = str(sol).replace("**", "^")
    if isinstance(sol, sympy.Integer):
        return exact
    if not sol.free_symbols:
        try:
            approx = sympy.N(sol, 6)
        except (TypeError, ValueError):  # pragma: no cover - defensive
            return exact
        re_part, im_part = (float(p) for p in approx.as_real_imag())
        shown = f"{re_part:.6g}"
        if abs(im_part) > 1e-12:
            shown = f"{re_part:.6g} {'+' if im_part > 0 else '-'} {abs(im_part):.6g}*I"
            if abs(re_part) <= 1e-12:
                shown = f"{im_part:.6g}*I"
        if shown != exact:
            return f"{exact} ≈ {shown}"
    return exact


def solve_equation(equation: str, variable: str = "x") -> list[str]:
    """Solve ``lhs = rhs`` (or ``expr``, meaning ``expr = 0``) for ``variable`` with sympy.

    Blocking and possibly slow; :func:`SolveMathEquation` runs it under a time limit.
    """
    import sympy

    if not isinstance(equation, str) or not equation.strip():
        raise BadArguments("SolveMathEquation needs a non-empty equation")
    if not _NAME.match(variable) or variable in ("pi", "e"):
        raise BadArguments(f"SolveMathEquation: {variable!r} is not a usable variable name")
    text = equation.replace("==", "=")
    sides = text.split("=")
    if len(sides) > 2:
        raise BadArguments("SolveMathEquation takes one equation with one '=', e.g. '2*x + 3 = 11'")
    fns = _sympy_functions()
    if variable in fns:
        raise BadArguments(f"SolveMathEquation: {variable!r} is a function name, not a variable")
    trees = [parse_expression(s, "SolveMathEquation") for s in sides]
    exprs = [_to_sympy(t, fns) for t in trees]
    expr = exprs[0] - exprs[1] if len(exprs) == 2 else exprs[0]
    # Solve over the reals: the unknown is a real symbol (other unknowns stay general).
    symbol = sympy.Symbol(variable, real=True)
    expr = expr.subs(sympy.Symbol(variable), symbol)
    if symbol not in expr.free_symbols:
        if not expr.free_symbols:
            if sympy.simplify(expr) == 0:
                raise BadArguments(
                    f"SolveMathEquation: the equation holds for every value of {variable}"
                )
            return []  # a contradiction such as x + 1 = x
        present = ", ".join(sorted(str(s) for s in expr.free_symbols)) or "none"
        raise BadArguments(
            f"SolveMathEquation: {variable} does not appear in the equation "
            f"(unknowns present: {present}); pass variable='...'"
        )
    if sympy.simplify(expr) == 0:
        raise BadArguments(f"SolveMathEquation: the equation holds for every value of {variable}")
    try:
        solutions = sympy.solve(expr, symbol)
    except NotImplementedError:
        raise ToolError(
            f"SolveMathEquation: sympy cannot solve {equation.strip()!r} for {variable} "
            "in closed form"
        ) from None
    return [_format_solution(s) for s in solutions]


T = TypeVar("T")

_runaway = 0
_runaway_lock = threading.Lock()


async def run_with_time_limit(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run blocking ``fn`` in a daemon thread and wait at most ``timeout_s`` for it.

    A thread that runs past the limit cannot be stopped; it is left to finish on its own
    (it does not keep the process alive), and while :data:`MAX_RUNAWAY_SOLVERS` such threads
    are still running, new calls are refused.
    """
    global _runaway
    with _runaway_lock:
        if _runaway >= MAX_RUNAWAY_SOLVERS:
            raise ToolError(
                f"{what}: still busy with earlier work that ran past the time limit; "
                "try a simpler input later"
            )
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()
    state: dict[str, Any] = {"outcome": None, "abandoned": False}

    def settle(outcome: tuple[bool, Any]) -> None:
        if fut.done():
            return
        if outcome[0]:
            fut.set_result(outcome[1])
        else:
            fut.set_exception(outcome[1])

    def work() -> None:
        global _runaway
        try:
            outcome: tuple[bool, Any] = (True, fn())
        except Exception as e:
            outcome = (False, e)
        with _runaway_lock:
            state["outcome"] = outcome
            if state["abandoned"]:
                _runaway -= 1
                return
        with contextlib.suppress(RuntimeError):  # the loop may have closed meanwhile
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="hammr-solver", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
    except TimeoutError:
        with _runaway_lock:
            outcome = state["outcome"]
            if outcome is None:
                state["abandoned"] = True
                _runaway += 1
        if outcome is None:
            raise ToolError(
                f"{what}: gave up after {timeout_s:g} s; simplify the input or split it into steps"
            ) from None
        if outcome[0]:  # finished in the same instant
            result: T = outcome[1]
            return result
        raise outcome[1] from None


# -- word problems ---------------------------------------------------------------------------

MAX_WORD_PROBLEM_CHARS = 2000
"""Longer word problems are refused (the prompt stays small)."""

WORD_PROBLEM_MAX_TOKENS = 120
"""The reply holds one equation; a little room for a model that adds a line."""

WORD_PROBLEM_SYSTEM = (
    "Translate the math problem you are given into a single equation with one unknown. "
    "Use only numbers, the unknown, + - * / ^ and parentheses, and exactly one '='. "
    "Reply with the equation alone, on one line, with no words and no working."
)

_WORD = re.compile(r"[A-Za-z]{2,}")
_WRAPPERS = " \t`$\"'"
"""What a model puts around an equation: spaces, backticks, $ of TeX, quotes."""
_REPLY_PREFIX = re.compile(r"^\s*(?:the\s+)?equation\s*(?:is)?\s*[:\-]?\s*", re.I)


def reads_as_words(text: str) -> bool:
    """True when ``text`` holds at least two words that are not a function or constant name
    of the equation language ('How many apples ...'), i.e. it is a word problem rather than a
    mistyped equation; only asked of text that does not parse as an equation."""
    known = set(_sympy_functions()) | {"pi"}
    return sum(1 for w in _WORD.findall(text) if w.lower() not in known) >= 2


def parses_as_equation(text: str) -> bool:
    """True when ``text`` is one or two expressions around '=' that the parser reads (the
    syntax only; :func:`solve_equation` checks the rest)."""
    sides = text.replace("==", "=").split("=")
    if len(sides) > 2:
        return False
    try:
        for side in sides:
            parse_expression(side, "SolveMathEquation")
    except BadArguments:
        return False
    return True


def equation_from_reply(reply: str) -> str | None:
    """The equation in a model's reply: the first line holding '=' once fences, a leading
    'Equation:', surrounding quotes, backticks or $ and a final full stop are taken off; None
    when no line holds one."""
    text = re.sub(r"```[a-zA-Z]*", "\n", reply)
    for line in text.splitlines():
        line = _REPLY_PREFIX.sub("", line.strip()).strip(_WRAPPERS).rstrip(".").strip(_WRAPPERS)
        if "=" in line:
            return line
    return None


def unknowns_of(equation: str) -> set[str]:
    """The names of the unknowns in an equation that parses (functions and pi, e left out)."""
    fns = _sympy_functions()
    names: set[str] = set()
    for side in equation.replace("==", "=").split("="):
        tree = parse_expression(side, "SolveMathEquation")
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return {n for n in names if n not in fns and n not in ("pi", "e")}


async def write_equation(problem: str, variable: str, ctx: ToolContext) -> str:
    """One LLM call (the run's model, ``ctx.llm``): the equation of a word problem, in
    ``variable`` where the model follows the instruction. ToolError when there is no model or
    its reply holds no equation."""
    if ctx.llm is None:
        raise ToolError(
            "SolveMathEquation: this reads as a word problem, and writing its equation needs a "
            "language model, which this run has none of; pass the equation, e.g. '2*x + 3 = 11'"
        )
    if len(problem) > MAX_WORD_PROBLEM_CHARS:
        raise BadArguments(
            f"SolveMathEquation: the problem is {len(problem)} characters long, above the limit "
            f"of {MAX_WORD_PROBLEM_CHARS}; state it more briefly or pass its equation"
        )
    request = LLMRequest(
        messages=(
            Message("system", WORD_PROBLEM_SYSTEM),
            Message("user", f"Problem: {problem.strip()}\nCall the unknown {variable}."),
        ),
        max_tokens=WORD_PROBLEM_MAX_TOKENS,
        temperature=0,
    )
    response = await ctx.llm.complete(request)
    written = equation_from_reply(str(response.text))
    if written is None:
        shown = " ".join(str(response.text).split())[:200]
        raise ToolError(
            f"SolveMathEquation: no equation in the model's reply to the word problem ({shown!r}); "
            "pass the equation itself"
        )
    return written


async def _solve(equation: str, variable: str = "x", *, ctx: ToolContext) -> ToolResult:
    """Solve an equation for one unknown, e.g. '2*x + 3 = 11' or 'x^2 - 5*x + 6 = 0', or a
    math word problem given in words: the model then writes its equation, which is solved
    the same way.

    Args:
        equation: 'left = right' (or an expression meaning expression = 0) with numbers,
            + - * / ** (or ^), parentheses, pi, e, sqrt abs log exp sin cos tan ... and
            unknowns; other unknowns stay symbolic in the solutions. Or a word problem, e.g.
            'A pen costs 3 more than a pencil; together they cost 11. What does the pencil cost?'
        variable: the unknown to solve for.

    Returns:
        the real solutions as text, exact with a decimal value ('sqrt(2) ≈ 1.41421'); an
        empty list when there is none
    """
    if (
        not isinstance(equation, str)
        or parses_as_equation(equation)
        or not reads_as_words(equation)
    ):
        solutions = await run_with_time_limit(
            lambda: solve_equation(equation, variable), SOLVE_TIMEOUT_S, "SolveMathEquation"
        )
        return ToolResult(solutions)
    written = await write_equation(equation, variable, ctx)
    try:
        present = unknowns_of(written)
        unknown = variable if variable in present or len(present) != 1 else present.pop()
        solutions = await run_with_time_limit(
            lambda: solve_equation(written, unknown), SOLVE_TIMEOUT_S, "SolveMathEquation"
        )
    except BadArguments as e:
        raise ToolError(
            f"SolveMathEquation: the equation written for the word problem, {written!r}, "
            f"cannot be solved ({e}); pass the equation itself"
        ) from None
    return ToolResult(
        solutions,
        observation=(
            f"equation written from the problem: {written}; solutions for {unknown}: "
            f"{render_value(solutions)}"
        ),
    )


SolveMathEquation = tool(_solve, name="SolveMathEquation", uses_llm=True)
"""Calls the run's LLM only for a word problem (one call, to write the equation)."""
