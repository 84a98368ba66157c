"""Tests for the action parser: tolerant of model noise, strict about meaning, never evaluates."""

from __future__ import annotations

import keyword
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hammr.actions import (
    Act,
    DictExpr,
    Expr,
    Finish,
    ListExpr,
    Lit,
    ParsedStep,
    ParseError,
    ResolveError,
    Var,
    act_source,
    expr_source,
    parse_act,
    parse_step,
    resolve,
)
from patience import cpu_s

TOOLS = frozenset({"CropImage", "OCR", "VQA", "Caption", "LocateObjects"})
VARS = frozenset({"image", "crops", "boxes", "answer_1", "x"})


def step(text: str, tools: Any = TOOLS, variables: Any = VARS) -> ParsedStep:
    return parse_step(text, tools, variables)


def act(text: str, tools: Any = TOOLS, variables: Any = VARS) -> Act:
    parsed = step(text, tools, variables)
    assert isinstance(parsed.action, Act), parsed
    return parsed.action


def error(text: str, tools: Any = TOOLS, variables: Any = VARS) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_step(text, tools, variables)
    return info.value


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the main thread once the process has used ``seconds`` of
    processor time (the re engine checks signals): a bound on work, which a busy machine
    does not stretch as it does the wall clock."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"took more than {seconds} s of processor time")

    old = signal.signal(signal.SIGPROF, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def norm(e: Expr) -> Any:
    """A type-aware, comparable form (Lit(1) == Lit(True) == Lit(1.0) as dataclasses)."""
    if isinstance(e, Lit):
        return ("lit", type(e.value).__name__, repr(e.value))
    if isinstance(e, Var):
        return ("var", e.name, e.index)
    if isinstance(e, ListExpr):
        return ("list", tuple(norm(i) for i in e.items))
    assert isinstance(e, DictExpr)
    return ("dict", tuple((type(k).__name__, repr(k), norm(v)) for k, v in e.items))


def norm_act(a: Act) -> Any:
    return (
        a.tool,
        a.target,
        tuple(norm(x) for x in a.args),
        tuple((k, norm(v)) for k, v in a.kwargs),
    )


# -- the happy path and the paper's format ----------------------------------------------------


def test_paper_format_crop() -> None:
    parsed = step(
        "[Thought]: I need to crop the sign.\n"
        "[Act]: crops = CropImage(image, [[174, 466, 141, 80]])"
    )
    assert parsed.thought == "I need to crop the sign."
    assert parsed.action == Act(
        tool="CropImage",
        args=(Var("image"), ListExpr((ListExpr((Lit(174), Lit(466), Lit(141), Lit(80))),))),
        target="crops",
        source="crops = CropImage(image, [[174, 466, 141, 80]])",
    )


def test_finish() -> None:
    parsed = step("[Thought]: The sign says STOP.\n[Finish]: STOP")
    assert parsed == ParsedStep("The sign says STOP.", Finish("STOP"))


def test_finish_takes_first_line_only() -> None:
    assert step("[Finish]: yes\nbecause the sign is red").action == Finish("yes")


def test_multiline_thought_is_collapsed() -> None:
    parsed = step("[Thought]: first line\n   second   line\n[Act]: OCR(image)")
    assert parsed.thought == "first line second line"


def test_unlabelled_text_before_first_label_is_thought() -> None:
    assert step("Let me read it.\n[Act]: OCR(image)").thought == "Let me read it."


# -- tolerances ----------------------------------------------------------------------------------

TOLERATED = {
    "spaces_around_labels": "  [ Thought ]  :  read it\n  [ Act ]   :   OCR(image)",
    "space_before_colon": "[Thought] : read it\n[Act] :OCR(image)",
    "no_brackets": "Thought: read it\nAct: OCR(image)",
    "lowercase_labels": "thought: read it\nact: OCR(image)",
    "open_bracket_only": "[Thought: read it\n[Act: OCR(image)",
    "fenced_whole_reply": "```\n[Thought]: read it\n[Act]: OCR(image)\n```",
    "fenced_act_body": "[Thought]: read it\n[Act]:\n```python\nOCR(image)\n```",
    "fence_on_label_line": "[Thought]: read it\n[Act]: ```python\nOCR(image)\n```",
    "inline_backticks": "[Thought]: read it\n[Act]: `OCR(image)`",
    "bold_labels": "**Thought**: read it\n**Act**: OCR(image)",
    "bold_tool_name": "[Thought]: read it\n[Act]: **OCR**(image)",
    "quote_prefix": "> Thought: read it\n> Act: OCR(image)",
    "prose_after_call": "[Thought]: read it\n[Act]: OCR(image) to read the text on it.",
    "prose_after_call_with_quote": "[Thought]: read it\n[Act]: OCR(image) and that's it (I hope)",
    "prose_on_next_line": "[Thought]: read it\n[Act]: OCR(image)\nThis should reveal the text.",
    "invented_observe": "[Thought]: read it\n[Act]: OCR(image)\n[Observe]: 'STOP'\n[Finish]: STOP",
    "invented_observation": "Thought: read it\nAction: OCR(image)\nObservation: 'STOP'",
    "action_synonym": "Thought: read it\nAction: OCR(image)",
    "crlf_free_trailing_spaces": "[Thought]: read it   \n[Act]: OCR(image)   ",
}


@pytest.mark.parametrize("text", TOLERATED.values(), ids=TOLERATED.keys())
def test_tolerated_noise(text: str) -> None:
    parsed = step(text)
    assert parsed.thought == "read it"
    assert isinstance(parsed.action, Act)
    assert parsed.action.tool == "OCR"
    assert parsed.action.args == (Var("image"),)
    assert parsed.action.target is None


def test_bold_tool_name_with_assignment() -> None:
    a = act("[Act]: crops = **CropImage**(image, [[1, 2, 3, 4]])")
    assert (a.tool, a.target) == ("CropImage", "crops")


def test_final_answer_synonym() -> None:
    assert step("Thought: done\nFinal Answer: 42").action == Finish("42")
    assert step("Final   answer : 42").action == Finish("42")


def test_observe_before_act_means_the_rest_is_ignored() -> None:
    e = error("[Thought]: hmm\n[Observe]: made up\n[Act]: OCR(image)")
    assert e.kind == "no_action"


def test_finish_before_act_wins() -> None:
    assert step("[Thought]: t\n[Finish]: cat\n[Act]: OCR(image)").action == Finish("cat")


def test_act_before_finish_wins() -> None:
    assert isinstance(step("[Thought]: t\n[Act]: OCR(image)\n[Finish]: cat").action, Act)


@pytest.mark.parametrize(
    ("src", "literal"),
    [
        ('VQA(image, "what is (x)?")', "what is (x)?"),
        ("VQA(image, 'a)b')", "a)b"),
        ("VQA(image, ')')", ")"),
        ("VQA(image, 'it\\'s )')", "it's )"),
        ('VQA(image, "[[(")', "[[("),
        ('VQA(image, "say \\"hi)\\"")', 'say "hi)"'),
    ],
)
def test_paren_inside_string_does_not_end_call(src: str, literal: str) -> None:
    a = act(f"[Act]: {src} trailing prose)")
    assert a.args == (Var("image"), Lit(literal))


def test_multiline_call_arguments() -> None:
    a = act(
        "[Thought]: crop two\n[Act]: crops = CropImage(\n    image,\n"
        "    [[1, 2, 3, 4],\n     [5, 6, 7, 8]],\n)\nNow OCR them."
    )
    assert a.target == "crops"
    assert a.args[1] == ListExpr(
        (ListExpr(tuple(map(Lit, (1, 2, 3, 4)))), ListExpr(tuple(map(Lit, (5, 6, 7, 8)))))
    )


# -- meaning: literals, variables, indices, keywords ---------------------------------------------


def test_literals() -> None:
    a = act(
        "[Act]: VQA(image, 'q', 3, -2, -1.5, +4, True, None, (1, 2), [], "
        "{'a': [1, {'b': x}], 2: 3})"
    )
    assert a.args == (
        Var("image"),
        Lit("q"),
        Lit(3),
        Lit(-2),
        Lit(-1.5),
        Lit(4),
        Lit(True),
        Lit(None),
        ListExpr((Lit(1), Lit(2))),
        ListExpr(()),
        DictExpr((("a", ListExpr((Lit(1), DictExpr((("b", Var("x")),))))), (2, Lit(3)))),
    )
    assert type(a.args[6].value) is bool  # type: ignore[union-attr]


@pytest.mark.parametrize(("src", "index"), [("crops[0]", 0), ("crops[-1]", -1), ("crops[12]", 12)])
def test_indexing(src: str, index: int) -> None:
    a = act(f"[Act]: OCR({src})")
    assert a.args == (Var("crops", index),)
    assert a.variables() == [Var("crops", index)]
    assert act_source(a) == f"OCR({src})"


def test_keyword_arguments() -> None:
    a = act("[Act]: out = VQA(image=crops[0], question='what colour?', top_k=3)")
    assert a.args == ()
    assert a.kwargs == (
        ("image", Var("crops", 0)),
        ("question", Lit("what colour?")),
        ("top_k", Lit(3)),
    )
    assert act_source(a) == "out = VQA(image=crops[0], question='what colour?', top_k=3)"


def test_target_may_reuse_an_existing_variable() -> None:
    assert act("[Act]: crops = OCR(crops[0])").target == "crops"


def test_lenient_mode_without_tool_or_variable_sets() -> None:
    a = parse_act("anything = Whatever(foo, bar[1], k=baz)")
    assert a.tool == "Whatever"
    assert a.variables() == [Var("foo"), Var("bar", 1), Var("baz")]


def test_unknown_tool_lists_available_tools() -> None:
    e = error("[Thought]: t\n[Act]: Segment(image)")
    assert e.kind == "unknown_tool"
    assert "Segment" in e.message
    assert "Caption, CropImage, LocateObjects, OCR, VQA" in e.message
    assert e.thought == "t"


def test_unknown_variable_lists_known_variables() -> None:
    e = error("[Thought]: t\n[Act]: OCR(picture)")
    assert e.kind == "unknown_variable"
    assert "picture" in e.message
    assert "answer_1, boxes, crops, image, x" in e.message
    assert e.thought == "t"


@pytest.mark.parametrize(
    "src", ["OCR(pics[0])", "OCR(image, k=pics)", "OCR([[pics]])", "OCR({'a': pics})"]
)
def test_unknown_variable_anywhere(src: str) -> None:
    assert error(f"[Act]: {src}").kind == "unknown_variable"


def test_unknown_variable_with_no_variables_says_none() -> None:
    e = error("[Act]: OCR(image)", variables=set())
    assert e.kind == "unknown_variable"
    assert "none" in e.message


# -- errors that are not whitelist exclusions ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n  ",
        "[Thought]: I should look closer.",
        "I think the answer is 4.",
        "[Observe]: nothing\n[Act]: OCR(image)",
    ],
)
def test_no_action(text: str) -> None:
    e = error(text)
    assert e.kind == "no_action"
    assert "[Act]" in e.message and "[Finish]" in e.message


@pytest.mark.parametrize("text", ["[Finish]:", "[Finish]:   ", "[Thought]: t\n[Finish]:\n"])
def test_finish_without_answer_is_an_error(text: str) -> None:
    e = error(text)
    assert e.kind == "syntax"
    assert "answer" in e.message


def test_empty_act_is_an_error_with_an_example() -> None:
    e = error("[Thought]: t\n[Act]:   ")
    assert e.kind == "syntax"
    assert "OCR(image)" in e.message
    assert e.thought == "t"


def test_prose_instead_of_call() -> None:
    e = error("[Act]: I will now read the text")
    assert e.kind == "syntax"
    assert "cannot parse" in e.message


def test_not_text() -> None:
    with pytest.raises(ParseError) as info:
        parse_step(None, TOOLS, VARS)  # type: ignore[arg-type]
    assert info.value.kind == "syntax"


# -- whitelist exclusions ----------------------------------------------------------------------

# (source, substring the message must contain so the model knows what to change)
REJECTED = {
    "attribute_in_args": ("OCR(image.size)", "attribute"),
    "attribute_callee": ("os.system('ls')", "attribute"),
    "method_on_tool": ("OCR.run(image)", "attribute"),
    "import": ("import os", "import"),
    "from_import": ("from os import system", "import"),
    "lambda": ("OCR(lambda: image)", "lambda"),
    "list_comprehension": ("OCR([c for c in crops])", "comprehension"),
    "set_comprehension": ("OCR({c for c in crops})", "comprehension"),
    "dict_comprehension": ("OCR({c: 1 for c in crops})", "comprehension"),
    "generator": ("OCR(c for c in crops)", "comprehension"),
    "call_in_args": ("OCR(CropImage(image, [1, 2, 3, 4]))", "variable first"),
    "call_in_list_arg": ("OCR([CropImage(image, [1, 2, 3, 4])])", "variable first"),
    "dunder_arg": ("OCR(__import__)", "not allowed"),
    "dunder_callee": ("__import__('os')", "not allowed"),
    "dunder_target": ("__builtins__ = OCR(image)", "not allowed"),
    "dunder_kwarg": ("OCR(image, __class__=1)", "not allowed"),
    "dunder_indexed": ("OCR(__dict__[0])", "not allowed"),
    "starred": ("OCR(*crops)", "*arguments"),
    "double_starred": ("OCR(**crops)", "**arguments"),
    "binary_op": ("OCR(1 + 2)", "write the value itself"),
    "power": ("OCR(10 ** 5)", "write the value itself"),
    "bool_op": ("OCR(image or crops)", "write the value itself"),
    "compare": ("OCR(1 < 2)", "write the value itself"),
    "assign_to_tool": ("OCR = VQA(image, 'q')", "is a tool"),
    "tuple_target": ("a, b = OCR(image)", "one plain name"),
    "list_target": ("[a, b] = OCR(image)", "one plain name"),
    "chained_target": ("a = b = OCR(image)", "one plain name"),
    "subscript_target": ("crops[0] = OCR(image)", "one plain name"),
    "attribute_target": ("image.x = OCR(image)", "one plain name"),
    "aug_assign": ("crops += OCR(image)", "one tool call"),
    "ann_assign": ("crops: list = OCR(image)", "one tool call"),
    "not_a_call": ("crops", "must call a tool"),
    "walrus": ("(y := OCR(image))", "must call a tool"),
    "two_statements": ("y = [1]; OCR(crops)", "exactly one"),
    "index_of_index": ("OCR(crops[0][1])", "only a variable can be indexed"),
    "index_of_literal": ("OCR([1, 2][0])", "only a variable can be indexed"),
    "string_index": ("OCR(crops['a'])", "whole number"),
    "bool_index": ("OCR(crops[True])", "whole number"),
    "float_index": ("OCR(crops[1.0])", "whole number"),
    "variable_index": ("OCR(crops[x])", "whole number"),
    "slice": ("OCR(crops[0:2])", "Slice"),
    "sign_on_variable": ("OCR(-x)", "only numbers"),
    "sign_on_bool": ("OCR(-True)", "only numbers"),
    "not": ("OCR(not x)", "not allowed"),
    "ternary": ("OCR(x if x else image)", "not allowed"),
    "set_literal": ("OCR({1, 2})", "not allowed"),
    "fstring": ("OCR(f'{x}')", "not allowed"),
    "bytes": ("OCR(b'x')", "bytes"),
    "complex": ("OCR(1j)", "complex"),
    "ellipsis": ("OCR(...)", "ellipsis"),
    "dict_key_variable": ("OCR({x: 1})", "keys"),
    "dict_key_bool": ("OCR({True: 1})", "keys"),
    "dict_key_none": ("OCR({None: 1})", "keys"),
    "dict_unpack": ("OCR({**x})", "keys"),
    "call_a_literal": ("'abc'(image)", "by its name"),
    "call_a_subscript": ("crops[0](image)", "by its name"),
    "await": ("await OCR(image)", "must call a tool"),
    "positional_after_kwarg": ("OCR(k=1, image)", "cannot parse"),
    "unclosed": ("OCR(image", "cannot parse"),
    "deeply_nested_args": ("OCR(" + "[" * 33 + "]" * 33 + ")", "deeper than"),
}


@pytest.mark.parametrize(("src", "hint"), REJECTED.values(), ids=REJECTED.keys())
def test_whitelist_rejections(src: str, hint: str) -> None:
    e = error(f"[Thought]: t\n[Act]: {src}")
    assert e.kind == "syntax", e.message
    assert hint in e.message, e.message
    assert e.thought == "t"


def test_assignment_to_tool_name_is_allowed_in_lenient_mode() -> None:
    assert parse_act("OCR = VQA(image)").target == "OCR"


def test_nothing_is_evaluated(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    for src in [
        f"__import__('pathlib').Path({str(marker)!r}).touch()",
        f"OCR(open({str(marker)!r}, 'w'))",
        f"OCR(image, k=exec('open({str(marker)!r}, \"w\")'))",
    ]:
        with pytest.raises(ParseError):
            step(f"[Act]: {src}")
    assert not marker.exists()


# -- robustness: size, nesting, odd characters ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[Thought]: " + "blah " * 20_000,
        "[Thought]: t\n[Act]: OCR(image, '" + "a" * 100_000 + "')",
        "[Act]: OCR(" + "image, " * 15_000 + ")",
        "[Thought]: " + "[" * 10_000,
        "[Act]: OCR(" + "[" * 10_000,
        "[Act]: OCR(" + "[" * 5_000,
        "[Act]: OCR(" + "[" * 3_000 + "]" * 3_000 + ")",
        "[Act]: OCR(" + "(" * 10_000,
        "[Act]: OCR(" + "-" * 7_000 + "1)",
        "[Act]: OCR(" + "{'a':" * 2_000 + "1" + "}" * 2_000 + ")",
        "[Act]: OCR(" + "crops[0]" * 900 + ")",
        "[Act]: OCR(" + "x." * 3_000 + "y)",
        "[Act]: OCR(" + "1+" * 3_000 + "1)",
        "Thought:\n" * 20_000,
        "[Act]: OCR(image)\n" * 6_000,
    ],
    ids=lambda t: f"{len(t)}chars:{t[:16]!r}",
)
def test_huge_or_deep_input_fails_fast_with_parse_error(text: str) -> None:
    assert len(text) >= 5_000
    start = cpu_s()
    try:
        with time_limit(5.0):
            parse_step(text, TOOLS, VARS)
    except ParseError:
        pass
    assert cpu_s() - start < 2.0


@pytest.mark.parametrize(
    "text",
    [
        "[Thought]: t\n" + " " * 100_000 + "\n[Act]: OCR(image)",
        "[Thought]: t\n" + "\t" * 100_000 + "x\n[Act]: OCR(image)",
        "[Thought]: t\nThought" + " " * 100_000 + "x\n[Act]: OCR(image)",
    ],
    ids=["spaces_line", "tabs_line", "spaces_after_label_word"],
)
def test_long_whitespace_runs_are_fast(text: str) -> None:
    with time_limit(1.0):
        parsed = parse_step(text, TOOLS, VARS)
    assert isinstance(parsed.action, Act)


@pytest.mark.parametrize(
    "text",
    [
        "[Thought]: a\x00b\n[Act]: OCR(image)",
        "[Act]: OCR(image\x00)",
        "[Act]: OCR('\x00')",
        "[Act]: \x00",
        "\x00" * 1000,
        "[Finish]: \x00",
        "[Act]: OCR('\ud800')",
        "[Act]: OCR(image) \ud800",
        "[Act]: OCR(\u00e9t\u00e9)",
        "[Act]: OCR(\ufb01)",
        "[Act]: OCR(image, '\u202e')",
    ],
)
def test_odd_characters_never_raise_anything_but_parse_error(text: str) -> None:
    try:
        parsed = parse_step(text, TOOLS, VARS)
    except ParseError:
        return
    if isinstance(parsed.action, Act):
        assert {v.name for v in parsed.action.variables()} <= VARS


def test_null_byte_inside_call_is_a_syntax_error() -> None:
    assert error("[Act]: OCR(image\x00)").kind == "syntax"


def test_nul_in_string_literal_is_kept() -> None:
    assert act("[Act]: OCR(image, '\\x00')").args[1] == Lit("\x00")


def test_huge_decimal_integer_literal() -> None:
    digits = "9" * 5_000
    try:
        a = act(f"[Act]: OCR(image, {digits})")
    except ParseError as e:
        assert e.kind == "syntax"
    else:
        assert a.args[1] == Lit(int(digits))


def test_huge_hex_integer_literal_does_not_break_act_source() -> None:
    try:
        a = act("[Act]: OCR(image, 0x" + "f" * 5_000 + ")")
    except ParseError:
        return
    act_source(a)


def test_overflowing_float_is_rejected_or_round_trips() -> None:
    try:
        a = act("[Act]: OCR(image, 1e999)")
    except ParseError:
        return
    assert norm_act(parse_act(act_source(a), TOOLS, VARS | {"inf"})) == norm_act(a)


def test_bold_markers_inside_string_literals_are_kept() -> None:
    assert act("[Act]: VQA(image, 'is **this** bold?')").args[1] == Lit("is **this** bold?")


def test_bold_label_with_colon_inside() -> None:
    assert act("**Thought:** read it\n**Act:** OCR(image)").tool == "OCR"


def test_short_fence_tag_on_label_line() -> None:
    assert act("[Act]: ```py\nOCR(image)\n```").tool == "OCR"


def test_second_call_on_the_same_line_is_dropped_as_trailing_text() -> None:
    # Documents current behaviour: everything after the first call's ')' is prose.
    a = act("[Act]: OCR(image); OCR(crops)")
    assert (a.tool, a.args, a.source) == ("OCR", (Var("image"),), "OCR(image)")


def test_repeated_keyword_argument_is_rejected() -> None:
    e = error("[Act]: OCR(image, k=1, k=2)")
    assert e.kind == "syntax"
    assert "k" in e.message


def test_negative_dict_key() -> None:
    assert act("[Act]: OCR({-1: image})").args == (DictExpr(((-1, Var("image")),)),)


# -- resolve() and act_source() ------------------------------------------------------------------

VALUES: dict[str, Any] = {
    "image": "IMG",
    "crops": ["c0", "c1", "c2"],
    "boxes": (1, 2),
    "n": 7,
}


def test_resolve_nested_with_variables() -> None:
    a = act(
        "[Act]: VQA([image, [crops[0], crops[-1]], {'k': boxes[1], 'n': [n, -3]}], q='x')",
        variables=VALUES.keys(),
    )
    assert [resolve(e, VALUES) for e in a.args] == [["IMG", ["c0", "c2"], {"k": 2, "n": [7, -3]}]]
    assert resolve(a.kwargs[0][1], VALUES) == "x"
    assert resolve(Var("crops"), VALUES) == ["c0", "c1", "c2"]


@pytest.mark.parametrize("index", [3, -4, 100, -100])
def test_resolve_index_out_of_range(index: int) -> None:
    with pytest.raises(ResolveError) as info:
        resolve(ListExpr((Var("crops", index),)), VALUES)
    assert info.value.kind == "bad_arguments"
    assert "out of range" in str(info.value) and "3 items" in str(info.value)


@pytest.mark.parametrize("index", [2, -3])
def test_resolve_index_edges(index: int) -> None:
    assert resolve(Var("crops", index), VALUES) == VALUES["crops"][index]


@pytest.mark.parametrize("name", ["image", "n"])
def test_resolve_index_into_non_list(name: str) -> None:
    with pytest.raises(ResolveError) as info:
        resolve(Var(name, 0), VALUES)
    assert info.value.kind == "bad_arguments"
    assert "not a list" in str(info.value)


def test_resolve_unknown_variable_lists_known() -> None:
    with pytest.raises(ResolveError) as info:
        resolve(DictExpr((("a", Var("ghost")),)), VALUES)
    assert info.value.kind == "unknown_variable"
    assert "ghost" in str(info.value)
    assert "boxes, crops, image, n" in str(info.value)
    with pytest.raises(ResolveError, match="none"):
        resolve(Var("ghost"), {})


def test_act_source_canonical_forms() -> None:
    a = act("[Act]:   out=VQA( image ,[ crops[ -1 ] , ( 1 , ) ] , {'a':-2.5} , k = None )")
    assert act_source(a) == "out = VQA(image, [crops[-1], [1]], {'a': -2.5}, k=None)"
    assert expr_source(DictExpr(((1, Lit("s")),))) == "{1: 's'}"
    assert act_source(Act("OCR")) == "OCR()"


# -- property-based ------------------------------------------------------------------------------

PROP_TOOLS = sorted(TOOLS)
PROP_VARS = sorted(VARS)
BOLD = re.compile(
    r"\*\*\w+\*\*"
)  # known bug, see test_bold_markers_inside_string_literals_are_kept

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s) and not s.startswith("__")
)
targets = identifiers.filter(lambda s: s not in TOOLS)
safe_text = st.text(max_size=12).filter(lambda s: not BOLD.search(s))


def _lit_src(value: Any) -> str:
    return repr(value)


def _leaf() -> st.SearchStrategy[tuple[Expr, str]]:
    ints = st.integers(min_value=-(10**15), max_value=10**15)
    floats = st.floats(allow_nan=False, allow_infinity=False)
    lits = st.one_of(ints, floats, safe_text, st.booleans(), st.none()).map(
        lambda v: (Lit(v), _lit_src(v))
    )
    var = st.sampled_from(PROP_VARS).map(lambda n: (Var(n), n))
    indexed = st.tuples(st.sampled_from(PROP_VARS), st.integers(-20, 20)).map(
        lambda t: (Var(t[0], t[1]), f"{t[0]}[{t[1]}]")
    )
    return st.one_of(lits, var, indexed)


def _containers(
    children: st.SearchStrategy[tuple[Expr, str]],
) -> st.SearchStrategy[tuple[Expr, str]]:
    def as_list(items: list[tuple[Expr, str]], style: str) -> tuple[Expr, str]:
        srcs = [s for _, s in items]
        if style == "tuple":
            body = ", ".join(srcs) + ("," if len(srcs) == 1 else "")
            src = f"({body})"
        else:
            src = "[" + ", ".join(srcs) + "]"
        return ListExpr(tuple(e for e, _ in items)), src

    keys = st.one_of(safe_text, st.integers(0, 10**6), st.floats(0, 1e6))

    def as_dict(items: list[tuple[Any, tuple[Expr, str]]]) -> tuple[Expr, str]:
        src = "{" + ", ".join(f"{k!r}: {s}" for k, (_, s) in items) + "}"
        return DictExpr(tuple((k, e) for k, (e, _) in items)), src

    return st.one_of(
        st.builds(as_list, st.lists(children, max_size=4), st.sampled_from(["list", "tuple"])),
        st.lists(st.tuples(keys, children), max_size=3).map(as_dict),
    )


exprs = st.recursive(_leaf(), _containers, max_leaves=12)

THOUGHT_LABELS = ["[Thought]:", "Thought:", "  [ Thought ] :", "thought :", "**Thought**:"]
ACT_LABELS = ["[Act]:", "Act:", "Action:", " [ Act ]  :", "**Act**:", "> Act:"]
FENCES = ["none", "block", "block_python", "on_label_line", "inline"]
TRAILERS = ["", " to crop it.", "  # then OCR", " (hopefully) 'done'", "\nThat should work."]
OBSERVES = ["", "\n[Observe]: ['made up']", "\nObservation: 42\n[Finish]: 42"]


@st.composite
def replies(draw: st.DrawFn) -> tuple[str, Act, str]:
    tool = draw(st.sampled_from(PROP_TOOLS))
    target = draw(st.none() | targets)
    args = draw(st.lists(exprs, max_size=4))
    kw_names = draw(st.lists(identifiers, max_size=3, unique=True))
    kwargs = [(k, draw(exprs)) for k in kw_names]
    parts = [s for _, s in args] + [f"{k}={s}" for k, (_, s) in kwargs]
    sep = draw(st.sampled_from([", ", ",", " , ", ",\n    "]))
    callee = f"**{tool}**" if draw(st.booleans()) else tool
    call = f"{callee}({sep.join(parts)})"
    src = f"{target}{draw(st.sampled_from([' = ', '=', '  =  ']))}{call}" if target else call
    fence = draw(st.sampled_from(FENCES))
    if fence == "block":
        body = f"\n```\n{src}\n```"
    elif fence == "block_python":
        body = f"\n```python\n{src}\n```"
    elif fence == "on_label_line":
        body = f" ```python\n{src}\n```"
    elif fence == "inline":
        body = f" `{src}`"
    else:
        body = f" {src}"
    trailer = draw(st.sampled_from(TRAILERS)) if fence in ("none", "inline") else ""
    thought = draw(st.text(max_size=40).filter(lambda s: "\n" not in s))
    text = (
        f"{draw(st.sampled_from(THOUGHT_LABELS))} {thought}\n"
        f"{draw(st.sampled_from(ACT_LABELS))}{body}{trailer}{draw(st.sampled_from(OBSERVES))}"
    )
    expected = Act(
        tool=tool,
        args=tuple(e for e, _ in args),
        kwargs=tuple((k, e) for k, (e, _) in kwargs),
        target=target,
    )
    return text, expected, " ".join(thought.split())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replies())
def test_property_valid_actions_round_trip(reply: tuple[str, Act, str]) -> None:
    text, expected, thought = reply
    parsed = parse_step(text, TOOLS, VARS)
    assert isinstance(parsed.action, Act)
    assert norm_act(parsed.action) == norm_act(expected)
    assert parsed.thought == thought
    again = parse_act(act_source(parsed.action), TOOLS, VARS)
    assert norm_act(again) == norm_act(parsed.action)
    assert act_source(again) == act_source(parsed.action)


GRAMMAR_TOKENS = [
    *"[]()'\",=:_ \n-*`{}.#\\",
    *"abcxyzAZ019",
    "[Thought]:",
    "[Act]:",
    "Act:",
    "Action:",
    "Thought:",
    "[Finish]:",
    "Final Answer:",
    "[Observe]:",
    "```",
    "```python\n",
    "**",
    *PROP_TOOLS,
    *PROP_VARS,
    "ghost",
    "__import__",
    "lambda",
    "import ",
    " for ",
    " = ",
    "crops[0]",
    "crops[-1]",
]

junk = st.one_of(
    st.text(max_size=200),
    st.text(alphabet="[]()'\",=:_ abcdefghijklmnopqrstuvwxyzAOTF\n", max_size=200),
    st.lists(st.sampled_from(GRAMMAR_TOKENS), max_size=60).map("".join),
)


def _check_junk(text: str, tools: Any, variables: Any) -> None:
    try:
        parsed = parse_step(text, tools, variables)
    except ParseError as e:
        assert e.kind in ("syntax", "no_action", "unknown_tool", "unknown_variable")
        assert e.message
        return
    assert isinstance(parsed, ParsedStep)
    assert isinstance(parsed.thought, str)
    if isinstance(parsed.action, Act):
        assert parsed.action.tool in tools
        assert {v.name for v in parsed.action.variables()} <= set(variables)
        assert parsed.action.target is None or parsed.action.target not in tools
    else:
        assert parsed.action.answer.strip()


@settings(max_examples=300, deadline=None)
@given(junk)
def test_property_junk_never_raises_other_exceptions(text: str) -> None:
    _check_junk(text, TOOLS, VARS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(GRAMMAR_TOKENS), max_size=40).map("".join))
def test_property_junk_after_act_label(text: str) -> None:
    _check_junk("[Thought]: t\n[Act]: " + text, TOOLS, VARS)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200), st.sampled_from(PROP_TOOLS))
def test_property_junk_after_a_valid_call_is_ignored(text: str, tool: str) -> None:
    tail = text.split("\n", 1)[0]
    parsed = parse_step(f"[Act]: {tool}(image){tail}", TOOLS, VARS)
    assert isinstance(parsed.action, Act)
    assert (parsed.action.tool, parsed.action.args) == (tool, (Var("image"),))
