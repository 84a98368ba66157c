"""EVAL expressions of MulProg programs: the shapes the paper's programs write, the binding
rules, refusals of everything else, and fuzzing that nothing but ExpressionError escapes."""

from __future__ import annotations

import ast
import builtins
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammr.programs.expressions import (
    MAX_EXPR_CHARS,
    MAX_STR_CHARS,
    ErrorKind,
    ExpressionError,
    evaluate_expression,
)
from hammr.values import Box
from patience import cpu_s

KINDS = set(get_args(ErrorKind))


def refused(expr: str, variables: dict[str, object] | None = None) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        evaluate_expression(expr, variables or {})
    assert info.value.kind in KINDS
    assert "\n" not in str(info.value) and str(info.value)
    return info.value


# --- the shapes the paper's programs write (GQA and NLVR prompts of FS-MEVQA / VisProg) ---

PAPER_CASES: list[tuple[str, dict[str, object], object]] = [
    # "On which side of the photo is the old vehicle?" (COUNT in the left crop)
    ("'left' if {ANSWER0} > 0 else 'right'", {"ANSWER0": 2}, "left"),
    ("'left' if {ANSWER0} > 0 else 'right'", {"ANSWER0": 0}, "right"),
    # "Is the license plate both black and small?"
    (
        "'yes' if {ANSWER0} == 'black' and {ANSWER1} == 'small' else 'no'",
        {"ANSWER0": "black", "ANSWER1": "small"},
        "yes",
    ),
    (
        "'yes' if {ANSWER0} == 'black' and {ANSWER1} == 'small' else 'no'",
        {"ANSWER0": "black", "ANSWER1": "large"},
        "no",
    ),
    # "Are there either glasses or ties in the image?"
    ("'yes' if {ANSWER0} + {ANSWER1} > 0 else 'no'", {"ANSWER0": 0, "ANSWER1": 1}, "yes"),
    ("'yes' if {ANSWER0} + {ANSWER1} > 0 else 'no'", {"ANSWER0": 0, "ANSWER1": 0}, "no"),
    # "Is the color of the table different than the color of the floor?"
    ("'yes' if {ANSWER0} != {ANSWER1} else 'no'", {"ANSWER0": "brown", "ANSWER1": "white"}, "yes"),
    ("'yes' if {ANSWER0} != {ANSWER1} else 'no'", {"ANSWER0": "wood", "ANSWER1": "wood"}, "no"),
    # "Is the chair that is not full white or black?"
    ("'white' if {ANSWER0} == 'white' else 'black'", {"ANSWER0": "white"}, "white"),
    ("'white' if {ANSWER0} == 'white' else 'black'", {"ANSWER0": "black"}, "black"),
    # "Is the baseball mitt made of leather black and open?" (a yes/no VQA answer)
    (
        "'yes' if {ANSWER0} == 'black' and {ANSWER1} == 'yes' else 'no'",
        {"ANSWER0": "black", "ANSWER1": "yes"},
        "yes",
    ),
    (
        "'yes' if {ANSWER0} == 'black' and {ANSWER1} == 'yes' else 'no'",
        {"ANSWER0": "black", "ANSWER1": "no"},
        "no",
    ),
    # "Is the man ... wearing a suit?"
    ("'yes' if {ANSWER0} == 'suit' else 'no'", {"ANSWER0": "jeans"}, "no"),
    # "Are the glass and the picture frame made of the same material?"
    ("'yes' if {ANSWER0} == {ANSWER1} else 'no'", {"ANSWER0": "glass", "ANSWER1": "glass"}, "yes"),
    # NLVR: yes/no answers combined with and / xor
    ("{ANSWER0} and {ANSWER2}", {"ANSWER0": "yes", "ANSWER2": "yes"}, True),
    ("{ANSWER0} and {ANSWER2}", {"ANSWER0": "yes", "ANSWER2": "no"}, False),
    (
        "{ANSWER0} and {ANSWER2} and {ANSWER4}",
        {"ANSWER0": "yes", "ANSWER2": "yes", "ANSWER4": "no"},
        False,
    ),
    ("{ANSWER6} xor {ANSWER7}", {"ANSWER6": True, "ANSWER7": False}, True),
    ("{ANSWER6} xor {ANSWER7}", {"ANSWER6": True, "ANSWER7": True}, False),
    ("{ANSWER6} xor {ANSWER7}", {"ANSWER6": "no", "ANSWER7": "no"}, False),
    # NLVR: counts compared with numbers, mixed with yes/no answers
    (
        "{ANSWER0} == 5 and {ANSWER2} and {ANSWER4}",
        {"ANSWER0": 5, "ANSWER2": "yes", "ANSWER4": "yes"},
        True,
    ),
    ("{ANSWER0} == 1 and {ANSWER2}", {"ANSWER0": 2, "ANSWER2": "yes"}, False),
    ("{ANSWER1} >= 2 and {ANSWER5}", {"ANSWER1": 3, "ANSWER5": "yes"}, True),
    # the question of the module's example: both a cat and a dog
    (
        "'yes' if {ANSWER0} > 0 and {ANSWER1} > 0 else 'no'",
        {"ANSWER0": 1, "ANSWER1": 0},
        "no",
    ),
    # yes/no results compared as text, with not, with or
    ("'yes' if not {ANSWER0} else 'no'", {"ANSWER0": "no"}, "yes"),
    ("'yes' if {ANSWER0} or {ANSWER1} else 'no'", {"ANSWER0": "no", "ANSWER1": "Yes"}, "yes"),
]


@pytest.mark.parametrize(("expr", "variables", "expected"), PAPER_CASES)
def test_the_paper_programs_shapes(
    expr: str, variables: dict[str, object], expected: object
) -> None:
    result = evaluate_expression(expr, variables)
    assert result == expected and type(result) is type(expected)


def test_there_are_at_least_twenty_paper_cases() -> None:
    assert len(PAPER_CASES) >= 20


# --- binding rules -------------------------------------------------------------------


def test_numeric_strings_are_numbers_as_the_papers_pasting_made_them() -> None:
    assert evaluate_expression("{ANSWER0} > 2", {"ANSWER0": "3"}) is True
    assert evaluate_expression("{ANSWER0} + 1", {"ANSWER0": " 3 "}) == 4
    assert evaluate_expression("{ANSWER0} * 2", {"ANSWER0": "-2.5"}) == -5.0
    # a number equals text that spells it, both ways round
    assert evaluate_expression("{ANSWER0} == '3'", {"ANSWER0": 3}) is True
    assert evaluate_expression("{ANSWER0} == '3.0'", {"ANSWER0": "3"}) is True
    assert evaluate_expression("{ANSWER0} != '4'", {"ANSWER0": "3"}) is True
    # text that is not a plain number stays text
    assert evaluate_expression("{ANSWER0}", {"ANSWER0": "3 dogs"}) == "3 dogs"
    assert evaluate_expression("{ANSWER0}", {"ANSWER0": "1e5"}) == "1e5"
    assert evaluate_expression("{ANSWER0}", {"ANSWER0": "9" * 60}) == "9" * 60


def test_a_literal_numeric_string_is_not_coerced_for_ordering() -> None:
    assert refused("'3' > 2").kind == "type"


def test_yes_no_answers_are_booleans_that_still_equal_their_words() -> None:
    v = {"A": "Yes.", "B": " no ", "C": "true", "D": False}
    assert evaluate_expression("{A}", v) is True
    assert evaluate_expression("{B}", v) is False
    assert evaluate_expression("{A} == 'yes' and {B} == 'no'", v) is True
    assert evaluate_expression("'no' == {B}", v) is True
    assert evaluate_expression("{A} == 'no'", v) is False
    assert evaluate_expression("{C} and not {D}", v) is True
    assert evaluate_expression("{D} == 'no'", v) is True
    assert evaluate_expression("{A} in ['yes', 'maybe']", v) is True
    assert evaluate_expression("{A} + {C}", v) == 2  # booleans count like Python's


def test_quoted_placeholders_are_the_value_as_text() -> None:
    v = {"ANSWER0": "red", "N": 3, "Y": "yes", "F": False, "X": 2.5}
    assert evaluate_expression("'{ANSWER0}' == 'red'", v) is True
    assert evaluate_expression('"{ANSWER0}" == "red"', v) is True
    assert evaluate_expression("'{N}'", v) == "3"
    assert evaluate_expression("'{Y}'", v) == "yes"
    assert evaluate_expression("'{F}'", v) == "no"
    assert evaluate_expression("'{X}' + '!'", v) == "2.5!"
    assert evaluate_expression("'the {ANSWER0} one, {N} times'", v) == "the red one, 3 times"
    # braces that are not a placeholder stay literal text inside quotes
    assert evaluate_expression("'{} {0} {a.b}'", v) == "{} {0} {a.b}"


def test_bare_variable_names_are_bound_like_placeholders() -> None:
    v = {"ANSWER0": "2", "ANSWER1": "no"}
    assert evaluate_expression("ANSWER0 > 1", v) is True
    assert evaluate_expression("'yes' if ANSWER0 > 1 and not ANSWER1 else 'no'", v) == "yes"
    assert evaluate_expression("{ ANSWER0 } * 3", v) == 6


def test_xor_forms_and_precedence() -> None:
    v = {"A": "yes", "B": "no", "N": 1, "M": 0}
    assert evaluate_expression("{A} xor {B}", v) is True
    assert evaluate_expression("{A} XOR {A}", v) is False
    # xor binds like `or`: comparisons and `and` first
    assert evaluate_expression("{N} > 0 xor {M} > 0", v) is True
    assert evaluate_expression("{N} > 0 and {A} xor {B}", v) is True
    assert evaluate_expression("{B} or {B} xor {A}", v) is True
    assert evaluate_expression("({A} or {B}) xor {A}", v) is False
    assert evaluate_expression("'yes' if {A} xor {B} else 'no'", v) == "yes"
    assert evaluate_expression("xor({A}, {B})", v) is True
    assert evaluate_expression("{A} ^ {B}", v) is True
    # the word inside text is text
    assert evaluate_expression("'xor' + {A2}", {"A2": "x"}) == "xorx"
    assert refused("{A} xor", v).kind == "syntax"
    assert refused("xor {A}", v).kind == "syntax"
    assert refused("{A} xor xor {B}", v).kind == "syntax"
    assert refused("xor", v).kind == "syntax"
    assert refused("{N} ^ {M}", v).kind == "type"


def test_operators_follow_python() -> None:
    assert evaluate_expression("7 // 2 + 7 % 2 - 2 ** 3 / 4", {}) == 7 // 2 + 7 % 2 - 2**3 / 4
    assert evaluate_expression("-{A} + +{A}", {"A": 4}) == 0
    assert evaluate_expression("1 < {A} <= 4 != 5", {"A": 4}) is True
    assert evaluate_expression("1 < {A} < 3", {"A": 4}) is False
    assert evaluate_expression("'a' + 'b' * 2", {}) == "abb"
    assert evaluate_expression("'ab' in {T} and 'z' not in {T}", {"T": "cabs"}) is True
    assert evaluate_expression("[1, 2] + [3]", {}) == [1, 2, 3]
    assert evaluate_expression("(1, 'a')", {}) == (1, "a")
    assert evaluate_expression("0 or '' or None", {}) is None
    assert evaluate_expression("1 and 'x'", {}) == "x"
    assert evaluate_expression("2 ** -1", {}) == 0.5


def test_whitelisted_functions() -> None:
    boxes = [Box(0, 0, 5, 5), Box(1, 1, 2, 2)]
    v = {"BOX0": boxes, "NONE": [], "T": "abc"}
    assert evaluate_expression("len({BOX0}) > 1", v) is True
    assert evaluate_expression("'yes' if {NONE} else 'no'", v) == "no"
    assert evaluate_expression("len({T}) + abs(-2)", v) == 5
    assert evaluate_expression("max(1, 4, 2) - min([3, 2])", v) == 2
    assert evaluate_expression("int('12') + int(2.9) + float('0.5')", v) == 14.5
    assert evaluate_expression("str(3) + {T}", v) == "3abc"
    assert refused("len(3)").kind == "type"
    assert refused("max()").kind == "type"
    assert refused("min([])").kind == "type"
    assert refused("max(1, 'a')").kind == "type"
    assert refused("int('abc')").kind == "type"
    assert refused("abs('a')").kind == "type"
    assert refused("xor(1)").kind == "type"
    assert refused("len(x=1)").kind == "not_allowed"
    assert refused("str({BOX0})", v).kind == "type"


def test_hammr_values_compare_but_do_no_arithmetic() -> None:
    box = Box(1, 2, 3, 4)
    v = {"B": [box], "C": [Box(1, 2, 3, 4)], "ONE": box}
    assert evaluate_expression("{B} == {C}", v) is True
    assert evaluate_expression("{ONE} in {B}", v) is True
    assert refused("{B} + 1", v).kind == "type"
    assert refused("{ONE} < {ONE}", v).kind == "type"
    assert refused("-{ONE}", v).kind == "type"
    assert refused("'{ONE}'", v).kind == "type"
    assert refused("{ONE} in 'abc'", v).kind == "type"
    assert refused("1 in {ONE}", v).kind == "type"


def test_type_and_math_errors_are_expression_errors() -> None:
    assert refused("'a' < 1").kind == "type"
    assert refused("{A} > 0", {"A": "many"}).kind == "type"
    assert refused("'a' - 'b'").kind == "type"
    assert refused("'%s' % 'a'").kind == "type"  # no printf-style formatting
    assert refused("{A} + 1", {"A": "red"}).kind == "type"
    assert refused("1 / 0").kind == "math"
    assert refused("{A} // 0", {"A": 3}).kind == "math"
    assert refused("1 % 0.0").kind == "math"
    assert refused("0 ** -1").kind == "math"
    assert refused("(-8) ** 0.5").kind == "math"


def test_unknown_variables_are_named_with_the_available_ones() -> None:
    error = refused("{ANSWER9} > 0", {"ANSWER0": 1, "BOX0": []})
    assert error.kind == "unknown_variable"
    assert "ANSWER9" in str(error) and "ANSWER0" in str(error) and "BOX0" in str(error)
    assert refused("ANSWER9 > 0", {"ANSWER0": 1}).kind == "unknown_variable"
    assert refused("'{ANSWER9}' == 'red'", {"ANSWER0": 1}).kind == "unknown_variable"
    # an unknown name in a branch that would not run is still refused
    assert refused("{A} or {ZZ}", {"A": 1}).kind == "unknown_variable"


def test_syntax_errors() -> None:
    for expr in ["", "   ", "1 +", "{A", "A}", "'unterminated", "{A}{A}", "1 2", "if"]:
        assert refused(expr, {"A": 1}).kind == "syntax", expr


# --- attacks -------------------------------------------------------------------------

ATTACKS: list[tuple[str, ErrorKind]] = [
    ("__import__('os').system('x')", "not_allowed"),
    ("__import__('os')", "not_allowed"),
    ("().__class__.__bases__[0].__subclasses__()", "not_allowed"),
    ("().__class__", "not_allowed"),
    ("'abc'.upper()", "not_allowed"),
    ("{A}.x", "not_allowed"),
    ("{L}[0]", "not_allowed"),
    ("{L}[0:1]", "not_allowed"),
    ("open('/etc/passwd')", "not_allowed"),
    ("exec('1')", "not_allowed"),
    ("eval('1')", "not_allowed"),
    ("compile('1', 'f', 'eval')", "not_allowed"),
    ("getattr(1, 'real')", "not_allowed"),
    ("globals()", "not_allowed"),
    ("locals()", "not_allowed"),
    ("vars()", "not_allowed"),
    ("type(1)", "not_allowed"),
    ("(lambda: 1)()", "not_allowed"),
    ("lambda: 1", "not_allowed"),
    ("[x for x in {L}]", "not_allowed"),
    ("{x for x in {L}}", "not_allowed"),
    ("{x: 1 for x in {L}}", "not_allowed"),
    ("list(x for x in {L})", "not_allowed"),
    ("(x for x in {L})", "not_allowed"),
    ("f'{A}'", "not_allowed"),
    ("f'{1+1}'", "not_allowed"),
    ("(y := 1)", "not_allowed"),
    ("[*{L}]", "not_allowed"),
    ("max(*{L})", "not_allowed"),
    ("{1, 2}", "not_allowed"),
    ("{'a': 1}", "not_allowed"),
    ("{A.B}", "not_allowed"),
    ("{0}", "not_allowed"),
    ("{__class__}", "not_allowed"),
    ("'{__class__}'", "not_allowed"),
    ("__builtins__", "not_allowed"),
    ("{A} is None", "not_allowed"),
    ("1 << 1000000", "not_allowed"),
    ("~1", "not_allowed"),
    ("b'x'", "not_allowed"),
    ("1j", "not_allowed"),
    ("...", "not_allowed"),
    ("len", "not_allowed"),
    ("max.__self__", "not_allowed"),
    ("10**10**10", "too_big"),
    ("9**99999", "too_big"),
    ("'a'*10**9", "too_big"),
    ("[0]*10**9", "too_big"),
    ("10**9*'a'", "too_big"),
    ("2.0**1000**1", "too_big"),
    ("(" * 10_000 + "1" + ")" * 10_000, "too_big"),
    ("(" * 60 + "1" + ")" * 60, "too_big"),
    ("not " * 200 + "1", "too_big"),
    ("-" * 1500 + "1", "too_big"),
    ("1" + "+1" * 60, "too_big"),
    ("1 + " * 1000 + "1", "too_big"),
    ("'" + "a" * 5000 + "'", "too_big"),
]


@pytest.mark.parametrize(("expr", "kind"), ATTACKS)
def test_attacks_are_refused(expr: str, kind: ErrorKind) -> None:
    variables: dict[str, object] = {"A": "x", "L": [1, 2], "B": 1}
    started = cpu_s()
    assert refused(expr, variables).kind == kind
    assert cpu_s() - started < 2.0  # processor time: a busy machine does not stretch it


def test_big_numbers_are_refused_before_being_computed() -> None:
    assert evaluate_expression("9**64", {}) == 9**64
    assert evaluate_expression("2**64 * 2**64", {}) == 2**128
    assert refused("2**60 ** 2").kind == "too_big"  # exponent 3600
    big = "9" * 400  # about 1329 bits, over the 1024-bit limit
    assert refused(big).kind == "too_big"
    assert refused("(2**64)**17").kind == "too_big"  # 1088 bits
    n = "(2**64 * 2**64 * 2**64 * 2**64)"  # 256 bits
    assert refused(f"{n} * {n} * {n} * {n} * {n}").kind == "too_big"


def test_a_variable_holding_code_stays_text() -> None:
    code = "__import__('os').system('rm -rf /')"
    v = {"X": code, "Y": "{X}", "Z": "' + __import__('os') + '"}
    assert evaluate_expression("{X}", v) == code
    assert evaluate_expression("'{X}'", v) == code
    assert evaluate_expression("{X} == 'x'", v) is False
    assert evaluate_expression("len({X})", v) == len(code)
    # a value that looks like a placeholder is not expanded again
    assert evaluate_expression("{Y}", v) == "{X}"
    assert evaluate_expression("'{Y}'", v) == "{X}"
    # a value with quotes does not break out of a quoted placeholder
    assert evaluate_expression("'{Z}'", v) == v["Z"]
    assert evaluate_expression("'<{Z}>'", v) == "<" + str(v["Z"]) + ">"


def test_very_long_input_is_refused_early() -> None:
    error = refused("1+" * MAX_EXPR_CHARS + "1")
    assert error.kind == "too_big" and str(MAX_EXPR_CHARS) in str(error)
    assert refused("'a' * " + str(MAX_STR_CHARS + 1)).kind == "too_big"
    assert evaluate_expression("'a' * " + str(MAX_STR_CHARS), {}) == "a" * MAX_STR_CHARS


def test_the_text_is_parsed_never_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """eval/exec are never reached, and compile only ever builds a syntax tree."""
    real_compile = builtins.compile
    compiled: list[int] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("eval/exec called")

    def only_ast(source: Any, filename: Any, mode: Any, flags: int = 0, *a: Any, **k: Any) -> Any:
        assert flags & ast.PyCF_ONLY_AST, "compile() asked for code"
        compiled.append(flags)
        return real_compile(source, filename, mode, flags, *a, **k)

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    monkeypatch.setattr(builtins, "compile", only_ast)
    v = {"A": "__import__('os')", "N": "2"}
    assert evaluate_expression("'yes' if {N} > 1 and {A} != '' else 'no'", v) == "yes"
    assert compiled  # the parse went through compile(..., PyCF_ONLY_AST)


# --- fuzzing ---------------------------------------------------------------------------

FUZZ_VARIABLES: dict[str, object] = {
    "A": "yes",
    "B": "3",
    "C": "red",
    "N": 0,
    "L": [Box(0, 0, 2, 2)],
    "X": "__import__('os')",
}
TOKENS = [
    "{A}", "{B}", "{C}", "{N}", "{L}", "{X}", "{ZZ}", "{", "}", "'{A}'", "'{C} x'", "A", "B",
    "0", "1", "2", "-1", "1.5", "10", "99999", "1e308", "'yes'", "'no'", "'red'", '"x"', "''",
    "+", "-", "*", "/", "//", "%", "**", "^", "==", "!=", "<", ">", "<=", ">=", "in", "not",
    "and", "or", "xor", "XOR", "if", "else", "is", "(", ")", "[", "]", ",", ".", ":", "=", ":=",
    "lambda", "for", "len", "abs", "min", "max", "int", "float", "str", "open", "__class__",
    "__import__", "f'", "'", "#", "\\", "*", "True", "False", "None", "x",
]  # fmt: skip


def check_outcome(expr: str) -> None:
    """The outcome is a value or a one-line ExpressionError, after little work (counted in
    processor time; hypothesis's own deadline counts wall time, which load stretches)."""
    started = cpu_s()
    try:
        evaluate_expression(expr, FUZZ_VARIABLES)
    except ExpressionError as error:
        assert error.kind in KINDS
        assert str(error) and "\n" not in str(error)
    assert cpu_s() - started < 2.0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_arbitrary_text(expr: str) -> None:
    check_outcome(expr)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40), st.sampled_from([" ", ""]))
def test_fuzz_expression_like_text(tokens: list[str], sep: str) -> None:
    check_outcome(sep.join(tokens))


Expr = tuple[str, object]


def _combine(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    def binary(pair: tuple[Expr, Expr, str]) -> Expr:
        (a, va), (b, vb), op = pair
        text = f"({a} {op} {b})"
        if op == "+":
            return text, va + vb  # type: ignore[operator]
        if op == "-":
            return text, va - vb  # type: ignore[operator]
        if op == "*":
            return text, va * vb  # type: ignore[operator]
        if op == "<":
            return text, va < vb  # type: ignore[operator]
        if op == "==":
            return text, va == vb
        if op == "and":
            return text, va and vb
        return text, va or vb

    def ternary(triple: tuple[Expr, Expr, Expr]) -> Expr:
        (c, vc), (a, va), (b, vb) = triple
        return f"({a} if {c} else {b})", va if vc else vb

    return st.one_of(
        st.tuples(children, children, st.sampled_from(["+", "-", "*", "<", "==", "and", "or"])).map(
            binary
        ),
        st.tuples(children, children, children).map(ternary),
        children.map(lambda e: (f"(not {e[0]})", not e[1])),
        children.map(lambda e: (f"(-{e[0]})", -e[1])),  # type: ignore[operator]
    )


NUMERIC_LEAVES: st.SearchStrategy[Expr] = st.integers(-20, 20).map(lambda n: (f"({n})", n))


@settings(max_examples=300, deadline=None)
@given(st.recursive(NUMERIC_LEAVES, _combine, max_leaves=12))
def test_numeric_expressions_agree_with_python_operators(case: Expr) -> None:
    """Random expressions built together with their value from Python's own operators."""
    text, expected = case
    result = evaluate_expression(text, {})
    assert result == expected and type(result) is type(expected)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_count_comparisons_from_strings_and_ints_agree(a: int, b: int) -> None:
    v = {"ANSWER0": str(a), "ANSWER1": b}
    assert evaluate_expression("{ANSWER0} > {ANSWER1}", v) is (a > b)
    assert evaluate_expression("{ANSWER0} + {ANSWER1}", v) == a + b
    assert evaluate_expression("'yes' if {ANSWER0} == {ANSWER1} else 'no'", v) == (
        "yes" if a == b else "no"
    )
