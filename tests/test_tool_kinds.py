"""Argument types are precise: a union of kinds (page or text, entity or text) is a union,
not 'any', so the step grammar offers exactly the literals and variables a tool accepts,
validation accepts exactly those, and the card says so (issue 20, bug 3: the grammar offered
the image variable to AnswerWithContext(context=...) and WikipediaArticle(entity=...))."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from PIL import Image as PILImage

from hammr.grammar import _alternatives, _VarIndex, step_grammar
from hammr.tools.base import (
    BadArguments,
    FunctionTool,
    Param,
    Tool,
    bind_arguments,
    coerce,
    tool,
)
from hammr.tools.knowledge_tools import AnswerWithContext, WikipediaArticle
from hammr.tools.library import builtin_tools
from hammr.values import Box, Entity, Image, Page, Value, value_kind

IMAGE = Image(PILImage.new("RGB", (64, 48), (90, 120, 150)))
CROP = Image(PILImage.new("RGB", (32, 24), (10, 20, 30)))

# one live variable of every kind a value can have (value_kind), lists included
VARIABLES: dict[str, Value] = {
    "image": IMAGE,
    "crops": [CROP, IMAGE],
    "box": Box(1, 2, 10, 12),
    "boxes": [Box(1, 2, 10, 12), Box(5, 5, 8, 8)],
    "question": "how old is it?",
    "words": ["a dog", "a cat"],
    "price": 3.5,
    "prices": [3.5, 4.0],
    "count": 3,
    "counts": [1, 2],
    "flag": True,
    "point": (10.0, 20.0),
    "page": Page(title="Eiffel Tower", text="The tower is 330 metres tall."),
    "pages": [Page(title="A", text="a"), Page(title="B", text="b")],
    "entity": Entity("Eiffel Tower"),
    "entities": [Entity("Eiffel Tower"), Entity("Louvre")],
    "table": {"a": 1},
    "mixed": [1, "a"],
}

# a value each literal rule of the grammar can write
LITERALS: dict[str, Value] = {
    "lit-str": "Eiffel Tower",
    "lit-num": 2.5,
    "lit-int": 2,
    "lit-bool": False,
    "lit-box": [1, 2, 10, 12],
    "lit-boxes": [[1, 2, 10, 12], [3, 4, 5, 6]],
    "lit-point": [10, 20],
    "lit-strs": ["a", "b"],
}


def rule(grammar: str, name: str) -> str:
    (line,) = [ln for ln in grammar.splitlines() if ln.startswith(f"{name} ::= ")]
    return line.split(" ::= ", 1)[1]


def test_every_kind_of_value_has_a_variable() -> None:
    kinds = {value_kind(v) for v in VARIABLES.values()}
    assert {"image", "box", "page", "entity", "boolean", "integer", "number", "text"} <= kinds
    assert {"point", "value", "list-image", "list-box", "list-text", "list-page"} <= kinds


# -- the two tools of the issue --------------------------------------------------------------


def test_the_grammar_offers_no_image_to_answer_with_context_or_wikipedia_article() -> None:
    grammar = step_grammar([AnswerWithContext, WikipediaArticle], VARIABLES)
    context = rule(grammar, "t0-context").split(" | ")
    entity = rule(grammar, "t1-entity").split(" | ")
    for alternatives in (context, entity):
        assert '"image"' not in alternatives and '"crops" "[" idx "]"' not in alternatives
        assert not {'"box"', '"boxes"', "lit-boxes", '"table"', '"mixed"'} & set(alternatives)
        assert "lit-str" in alternatives and '"question"' in alternatives
    assert '"page"' in context and '"page"' not in entity
    assert '"entity"' in entity and '"entity"' in context  # an entity's name is a text
    assert "lit-num" not in context  # the literals of page and text: strings only


def test_the_cards_say_what_the_union_parameters_accept() -> None:
    assert AnswerWithContext.card().startswith(
        "AnswerWithContext(question: text, context: page | text) -> the short answer"
    )
    assert WikipediaArticle.card().startswith("WikipediaArticle(entity: entity | text) -> page")


def test_binding_accepts_exactly_the_union_kinds() -> None:
    page = VARIABLES["page"]
    assert bind_arguments(AnswerWithContext, ["q", page], {})["context"] is page
    assert bind_arguments(AnswerWithContext, ["q", "some text"], {})["context"] == "some text"
    with pytest.raises(BadArguments) as info:
        bind_arguments(AnswerWithContext, ["q", IMAGE], {})
    assert "AnswerWithContext argument 'context' must be a page variable or a string, got" in (
        str(info.value)
    )
    entity = bind_arguments(WikipediaArticle, [VARIABLES["entity"]], {})["entity"]
    assert entity == Entity("Eiffel Tower")
    named = bind_arguments(WikipediaArticle, ["Louvre"], {})["entity"]
    assert isinstance(named, Entity | str) and str(getattr(named, "name", named)) == "Louvre"
    for wrong in (IMAGE, Box(1, 2, 3, 4), [Entity("a"), Entity("b")], VARIABLES["page"]):
        with pytest.raises(BadArguments, match=r"must be an entity variable or a string"):
            bind_arguments(WikipediaArticle, [wrong], {})


def test_a_union_of_kinds_in_any_tool() -> None:
    @tool
    def Mark(where: Box | tuple[float, float], label: str | None = None) -> str:
        """Mark a box or a point.

        Args:
            where: a box or a point.
        """
        return "ok"

    where = Mark.params[0]
    assert where.kinds == ("box", "point") and Mark.params[1].kinds == ("text",)
    assert "where: box | point" in Mark.card()
    alts = _alternatives(where, _VarIndex(VARIABLES), False)
    assert set(alts) == {"lit-box", '"box"', '"boxes" "[" idx "]"', "lit-point", '"point"'}
    assert coerce([1, 2], where, "w") == (1.0, 2.0)
    assert coerce([1, 2, 3, 4], where, "w") == Box(1, 2, 3, 4)
    with pytest.raises(BadArguments, match=r"must be a box \[x, y, w, h\] or a point \[x, y\]"):
        coerce("here", where, "w")
    with pytest.raises(ValueError, match="names each kind once"):
        Param("x", "text", also=("text",))
    with pytest.raises(ValueError, match="not 'any'"):
        Param("x", "text", also=("any",))


# -- every tool ------------------------------------------------------------------------------

TRULY_ANY: set[tuple[str, str]] = set()
"""(tool, parameter) pairs that take any value at all; none of the built-in tools does."""


def test_no_builtin_tool_takes_any_value_unless_it_truly_does() -> None:
    loose = {(t.name, p.name) for t in builtin_tools() for p in t.params if "any" in p.kinds}
    assert loose == TRULY_ANY


def fits(value: Any, annotation: Any) -> bool:
    """Whether ``value`` is of the Python type ``annotation`` (what the tool's function takes),
    independently of hammr's kinds."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin in (list, Sequence):
        return isinstance(value, list | tuple) and all(fits(v, args[0]) for v in value)
    if origin is tuple:
        return (
            isinstance(value, tuple)
            and len(value) == len(args)
            and all(fits(v, a) for v, a in zip(value, args, strict=True))
        )
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def offered_values(alternative: str) -> list[Value]:
    """The value(s) a grammar alternative lets the model write (a variable, an element of a
    list variable, a list of image variables, a literal)."""
    if alternative in LITERALS:
        return [LITERALS[alternative]]
    if m := re.fullmatch(r'"(\w+)"', alternative):
        return [VARIABLES[m.group(1)]]
    if m := re.fullmatch(r'"(\w+)" "\[" idx "\]"', alternative):
        items = VARIABLES[m.group(1)]
        assert isinstance(items, list)
        return [items[0]]
    if alternative.startswith('"[" ('):  # a list of image variables, written out
        inner = alternative[len('"[" (') :].split(")")[0]
        images = [v for a in inner.split(" | ") for v in offered_values(a.strip())]
        return [images]
    if alternative.startswith('"\'" ('):  # one of the parameter's choices
        return [re.findall(r'"(\w+)"', alternative)[0]]
    raise AssertionError(f"an alternative this test does not know: {alternative}")


def every_tool() -> list[Tool]:
    from hammr.agents import AgentSystems

    systems = AgentSystems.build(builtin_tools(), {}, setting="tools_only")
    return [*builtin_tools(), *systems.agents.values()]


@pytest.mark.parametrize("t", every_tool(), ids=lambda t: t.name)
def test_the_grammar_never_offers_a_value_the_tool_rejects(t: Tool) -> None:
    """Every alternative the grammar offers for every parameter, with a variable of every
    kind live, is accepted by validation and is of the type the tool's function takes."""
    vars_ = _VarIndex(VARIABLES)
    vectorised = getattr(t, "vectorised_over", None)
    batched = bool(getattr(t, "batched", False))
    hints = typing.get_type_hints(t.fn) if isinstance(t, FunctionTool) else {}
    for p in t.params:
        alternatives = _alternatives(p, vars_, vectorised == p.name)
        assert alternatives, f"{t.name}.{p.name}: nothing offered"
        for alternative in alternatives:
            for value in offered_values(alternative):
                where = f"{t.name}.{p.name} <- {alternative}"
                if p.choices and isinstance(value, str) and value not in p.choices:
                    # a text variable for a parameter of fixed choices: the kind fits (its
                    # value is checked when called)
                    assert coerce(value, replace(p, choices=None), where) == value
                    continue
                each = value if vectorised == p.name and isinstance(value, list) else [value]
                for v in each:
                    coerced = coerce(v, p, where)  # validation accepts what is offered
                    if p.name in hints:  # and so does the tool's own function
                        takes = [coerced] if vectorised == p.name and batched else coerced
                        assert fits(takes, hints[p.name]), where


async def test_an_avis_action_over_a_union_parameter_still_gets_the_query() -> None:
    """A graph's ``[actions.wiki] tool = "WikipediaArticle"`` fills its entity-or-text
    parameter with the query, as it did when the parameter was 'any'."""
    from hammr.avis.actions import ActionInput, ActionRunner
    from hammr.avis.context import VisualContext, VisualObject
    from hammr.avis.graph import ActionSpec
    from hammr.tools.base import ToolContext

    class KB:
        def __init__(self) -> None:
            self.asked: list[str] = []

        async def article(self, title: str) -> Page:
            self.asked.append(title)
            return Page(title=title, text=f"{title} is a tower.")

    kb = KB()
    whole = VisualObject(0, "whole image", IMAGE, IMAGE.bounds())
    given = ActionInput("Eiffel Tower", whole, VisualContext([whole]), "", {})
    runner = ActionRunner(
        {"wiki": ActionSpec("wiki", "Read the article.", "knowledge", tool="WikipediaArticle")},
        {"WikipediaArticle": WikipediaArticle},
        None,
    )
    ctx = ToolContext(backends={"kb": kb})
    outcome = await runner.run("wiki", given, None, ctx)  # type: ignore[arg-type]
    assert outcome.error is None and kb.asked == ["Eiffel Tower"]
    assert outcome.observation.startswith("WikipediaArticle: ")


def test_a_program_checker_accepts_exactly_the_union_kinds() -> None:
    """MulProg's static checker reads the same kinds: a text or a page fits
    AnswerWithContext's context, an image does not."""
    from hammr.programs.checks import param_kinds, validate
    from hammr.programs.language import parse_program
    from hammr.programs.modules import modules_with

    table = modules_with([AnswerWithContext])
    assert param_kinds(AnswerWithContext)["context"] == "page | text"

    def errors(context: str) -> list[str]:
        text = (
            "ANSWER0=VQA(image=IMAGE,question='what is written?')\n"
            f"ANSWER1=AnswerWithContext(question='how old?',context={context})\n"
            "FINAL_RESULT=RESULT(var=ANSWER1)"
        )
        program = parse_program(text, table, {"IMAGE"})
        return [e.message for e in validate(program, table, {"IMAGE": "image"})]

    assert errors("ANSWER0") == []
    assert errors("'The tower is 330 metres tall.'") == []
    (message,) = errors("IMAGE")
    assert "argument 'context' must be a page or text, but IMAGE is an image" in message
