from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools import math_tools
from hammr.tools.base import BadArguments, ToolContext, ToolError, bind_arguments
from hammr.tools.math_tools import (
    Calculator,
    SolveMathEquation,
    calculate,
    equation_from_reply,
    normalise_expression,
    reads_as_words,
    run_with_time_limit,
    solve_equation,
)
from patience import HANG_S, async_wait_until


async def call(tool: Any, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(tool, list(args), kwargs)
    return (await tool.invoke(bound, ToolContext())).value


# -- Calculator: values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("-3 ** 2", -9),  # power binds tighter than unary minus, as in Python
        ("2 ** -2", 0.25),
        ("7 / 2", 3.5),
        ("8 / 2", 4),
        ("10 // 3", 3),
        ("-7 // 2", -4),
        ("10 % 3", 1),
        ("0.1 + 0.2", 0.3),  # decimal literals are exact fractions
        ("1 / 3 * 3", 1),
        ("2 ^ 10", 1024),
        ("2^3 + 1", 9),  # ^ is a power with power precedence, not XOR
        ("6 × 7 ÷ 2", 21),
        ("2(3 + 4)", 14),
        ("(1 + 1)(2 + 3)", 10),
        ("1e3 + 1", 1001),
        ("sqrt(16)", 4),
        ("abs(-3.5)", 3.5),
        ("round(2.567, 2)", 2.57),
        ("round(7 / 2)", 4),
        ("min(4, 2, 9)", 2),
        ("max(4, 2, 9)", 9),
        ("floor(2.7) + ceil(2.1)", 5),
        ("log(8, 2)", 3.0),
        ("2 ** 100", 2**100),
    ],
)
def test_calculator_values(expression: str, expected: float) -> None:
    got = calculate(expression)
    assert got == pytest.approx(expected, rel=1e-12)


def test_exact_results_are_ints_and_others_floats() -> None:
    assert type(calculate("8 / 2")) is int
    assert type(calculate("0.5 * 4")) is int
    assert type(calculate("7 / 2")) is float
    assert type(calculate("sqrt(2)")) is float
    assert calculate("2 ** 100") == 1267650600228229401496703205376  # exact, not a float


def test_float_functions() -> None:
    assert calculate("sqrt(2)") == pytest.approx(1.4142135623730951)
    assert calculate("sin(pi / 2)") == pytest.approx(1.0)
    assert calculate("cos(0)") == pytest.approx(1.0)
    assert calculate("tan(pi / 4)") == pytest.approx(1.0)
    assert calculate("exp(1)") == pytest.approx(math.e)
    assert calculate("log(e)") == pytest.approx(1.0)
    assert calculate("log10(1000)") == pytest.approx(3.0)
    assert calculate("degrees(pi)") == pytest.approx(180.0)


async def test_calculator_tool() -> None:
    assert await call(Calculator, "(3 + 4.5) * 2") == 15
    assert "Calculator(expression: text)" in Calculator.card()


# -- Calculator: rejections ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("x + 1", "unknown name 'x'"),
        ("__import__('os').system('true')", "only calls to named functions"),
        ("__import__('os')", "unknown function __import__()"),
        ("().__class__", "not allowed: attribute access"),
        ("math.pi", "not allowed: attribute access"),
        ("foo(1)", "unknown function foo()"),
        ("sqrt", "sqrt is a function"),
        ("(lambda: 1)()", "not allowed: lambda"),
        ("[1, 2][0]", "not allowed: indexing"),
        ("1 < 2", "not allowed: comparisons"),
        ("'a' * 3", "not allowed: the constant 'a'"),
        ("True + 1", "not allowed: the constant True"),
        ("1j", "unknown name 'j'"),
        ("1, 000", "is there a comma in a number?"),
        ("1 & 2", "not allowed: the operator BitAnd"),
        ("~1", "not allowed: the operator Invert"),
        ("sin(x=1)", "takes no keyword arguments"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument(s), got 2"),
        ("min()", "min() needs an argument"),
        ("9**9**9", "the exponent 387420489 is above the limit"),
        ("2 ** 100000", "the exponent 100000 is above the limit"),
        ("10 ** 400", "is above the limit"),
        ("10.0 ** 301", "is above the limit"),
        ("1e308 * 10", "is above the limit"),
        ("exp(1000)", "above the limit"),
        ("1 / 0", "division by zero (1 / 0)"),
        ("5 // 0", "division by zero"),
        ("5 % (2 - 2)", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("sqrt(-1)", "sqrt(-1) is undefined"),
        ("log(0)", "log(0) is undefined"),
        ("(-8) ** (1/3)", "not a real number"),
        ("1 +", "cannot parse"),
        ("", "non-empty"),
        ("1 + " * 200 + "1", "characters long, above the limit"),
        ("-" * 60 + "1", "nested more than"),
    ],
)
def test_calculator_rejections(expression: str, message: str) -> None:
    with pytest.raises(BadArguments) as e:
        calculate(expression)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


async def test_rejection_reaches_the_agent_as_bad_arguments() -> None:
    with pytest.raises(BadArguments, match="division by zero"):
        await call(Calculator, "1/0")


def test_normalise_keeps_scientific_notation_and_function_names() -> None:
    assert normalise_expression("2e5 + 1.5E-3") == "2e5 + 1.5E-3"
    assert normalise_expression("2log10(5)") == "2*log10(5)"
    assert normalise_expression("3x^2") == "3*x**2"


# -- SolveMathEquation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("equation", "variable", "expected"),
    [
        ("2*x + 3 = 11", "x", ["4"]),
        ("3x = 1", "x", ["1/3 ≈ 0.333333"]),
        ("x^2 - 5x + 6 = 0", "x", ["2", "3"]),
        ("x**2 - 5*x + 6", "x", ["2", "3"]),  # no '=' means '= 0'
        ("x^2 = 2", "x", ["-sqrt(2) ≈ -1.41421", "sqrt(2) ≈ 1.41421"]),
        ("2*y - 1 == 0", "y", ["1/2 ≈ 0.5"]),
        ("exp(t) = 2", "t", ["log(2) ≈ 0.693147"]),
        ("abs(x) = 2", "x", ["-2", "2"]),
        ("a*x + b = 0", "x", ["-b/a"]),
        ("sqrt(x) = 3", "x", ["9"]),
        ("x^5 - x + 1 = 0", "x", ["CRootOf(x^5 - x + 1, 0) ≈ -1.1673"]),
    ],
)
def test_solve(equation: str, variable: str, expected: list[str]) -> None:
    assert solve_equation(equation, variable) == expected


@pytest.mark.parametrize("equation", ["x^2 + 1 = 0", "x + 1 = x", "1/x = 0"])
def test_no_real_solution_is_empty(equation: str) -> None:
    assert solve_equation(equation) == []


@pytest.mark.parametrize(
    ("equation", "variable", "message"),
    [
        ("x = x", "x", "holds for every value of x"),
        ("(x + 1)^2 = x^2 + 2x + 1", "x", "holds for every value of x"),
        ("y + 1 = 2", "x", "x does not appear in the equation (unknowns present: y)"),
        ("x = 1 = 2", "x", "one '='"),
        ("x.real = 1", "x", "not allowed: attribute access"),
        ("__import__('os') = 1", "x", "unknown function __import__()"),
        ("system(x) = 1", "x", "unknown function system()"),
        ("x**1000 = 1", "x", "above the limit of 100 for powers of unknowns"),
        ("x = 9**9**9", "x", "the exponent 387420489 is above the limit"),
        ("x = 9**9999", "x", "too large"),
        ("x / 0 = 1", "x", "division by zero"),
        ("x +", "x", "cannot parse"),
        ("", "x", "non-empty"),
        ("x = 1", "1x", "not a usable variable name"),
        ("x = 1", "sqrt", "function name"),
        ("x = '1'", "x", "not allowed: the constant '1'"),
    ],
)
def test_solve_rejections(equation: str, variable: str, message: str) -> None:
    with pytest.raises(BadArguments) as e:
        solve_equation(equation, variable)
    assert message in str(e.value)


def test_solve_without_closed_form_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="cannot solve"):
        solve_equation("2^x = x^2 + 1")


async def test_solve_tool() -> None:
    assert await call(SolveMathEquation, "x^2 - 5x + 6 = 0") == ["2", "3"]
    assert await call(SolveMathEquation, "2*n = 8", variable="n") == ["4"]
    with pytest.raises(BadArguments, match="does not appear"):
        await call(SolveMathEquation, "y = 2")


async def test_time_limit_gives_up_and_caps_runaway_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(math_tools, "_runaway", 0)
    release = threading.Event()
    # a limit that a quick call never meets, however busy the machine
    assert await run_with_time_limit(lambda: 42, HANG_S, "Test") == 42
    for _ in range(math_tools.MAX_RUNAWAY_SOLVERS):
        with pytest.raises(ToolError, match=r"Test: gave up after 0\.05 s"):
            await run_with_time_limit(lambda: release.wait(HANG_S), 0.05, "Test")
    with pytest.raises(ToolError, match="still busy"):
        await run_with_time_limit(lambda: 1, HANG_S, "Test")
    release.set()  # the runaway threads finish and free their slots
    await async_wait_until(lambda: not math_tools._runaway, "the runaway threads to end")
    assert await run_with_time_limit(lambda: 7, HANG_S, "Test") == 7


async def test_time_limit_passes_exceptions_through() -> None:
    def boom() -> None:
        raise BadArguments("nope")

    with pytest.raises(BadArguments, match="nope"):
        await run_with_time_limit(boom, HANG_S, "Test")


# -- SolveMathEquation: word problems (one call to a scripted LLM) ---------------------------

PROBLEM = "A pen costs 3 more than a pencil, and together they cost 11. What does the pencil cost?"


async def solve_with(llm: Any, *args: Any, **kwargs: Any) -> Any:
    bound = bind_arguments(SolveMathEquation, list(args), kwargs)
    return await SolveMathEquation.invoke(bound, ToolContext(llm=llm))


async def test_a_word_problem_is_written_as_an_equation_by_a_scripted_llm() -> None:
    llm = ScriptedLLM(["Equation: x + (x + 3) = 11."])
    out = await solve_with(llm, PROBLEM)
    assert out.value == ["4"]
    assert out.observation is not None
    assert "equation written from the problem: x + (x + 3) = 11" in out.observation
    assert llm.calls == 1
    (request,) = llm.requests
    assert PROBLEM in request.messages[-1].text() and "x" in request.messages[-1].text()
    # the model may name the unknown otherwise: its one unknown is solved for
    out = await solve_with(ScriptedLLM(["```\np + p + 3 = 11\n```"]), PROBLEM)
    assert out.value == ["4"] and "solutions for p" in str(out.observation)
    # the agent's variable name is asked for and used
    llm = ScriptedLLM(["2*n + 3 = 11"])
    assert (await solve_with(llm, PROBLEM, variable="n")).value == ["4"]
    assert "Call the unknown n" in llm.requests[0].messages[-1].text()


async def test_the_written_equation_goes_through_the_safe_parser_with_a_scripted_llm() -> None:
    # nothing the model writes is evaluated: its text meets the same whitelist as the agent's
    for reply in ("__import__('os').system('true') = 1", "x.real = 1"):
        with pytest.raises(ToolError, match="cannot be solved") as e:
            await solve_with(ScriptedLLM([reply]), PROBLEM)
        assert reply in str(e.value)
    with pytest.raises(ToolError, match="no equation in the model's reply"):
        await solve_with(ScriptedLLM(["The pencil costs four."]), PROBLEM)


async def test_equations_and_typos_never_call_the_scripted_llm() -> None:
    llm = ScriptedLLM([])  # any call would fail: it has no completion
    assert (await solve_with(llm, "x^2 - 5x + 6 = 0")).value == ["2", "3"]
    assert (await solve_with(llm, "sqrt(x) = 4")).value == ["16"]
    with pytest.raises(BadArguments, match="cannot parse"):
        await solve_with(llm, "2*x + = 11")  # a mistyped equation, not words
    with pytest.raises(BadArguments, match="cannot parse"):
        await solve_with(llm, "solve 2x + 3 = 11")  # one word: still an equation's typo
    assert llm.calls == 0


async def test_a_word_problem_without_a_model_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="needs a language model"):
        await solve_with(None, PROBLEM)
    with pytest.raises(BadArguments, match="above the limit of 2000"):
        await solve_with(ScriptedLLM(["x = 1"]), "how many apples " * 200)


def test_word_problem_helpers() -> None:
    assert reads_as_words(PROBLEM)
    assert not reads_as_words("sqrt(x) + log(x) = 2")
    assert not reads_as_words("solve 2x = 4")
    assert equation_from_reply("The equation is: `2x + 3 = 11`.") == "2x + 3 = 11"
    assert equation_from_reply("$y = 2$") == "y = 2"
    assert equation_from_reply("no equation here") is None
    assert "word problem" in SolveMathEquation.card()
    assert SolveMathEquation.uses_llm
