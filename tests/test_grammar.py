"""The per-step GBNF grammar: what it admits, and that llama.cpp accepts it for every kind."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image as PILImage

from conftest import needs_embedded_model
from hammr.backends.llm.base import LLMRequest, Message
from hammr.grammar import step_grammar
from hammr.tools.base import Tool, tool
from hammr.values import Box, Entity, Image, Page


def _img() -> Image:
    return Image(PILImage.new("RGB", (8, 8)))


@tool
def EveryKind(
    image: Image,
    images: list[Image],
    box: Box,
    boxes: list[Box],
    text: str,
    texts: list[str],
    number: float,
    integer: int,
    flag: bool,
    point: tuple[float, float],
    page: Page,
    entity: Entity,
    anything: Any,
    relation: Literal["left", "right"] = "left",
) -> str:
    """Takes one argument of every kind."""
    return "ok"


@tool
def NeedsPage(page: Page) -> str:
    """Needs a page variable."""
    return page.title


@tool(vectorised="image")
def Read(image: Image, hint: str = "") -> str:
    """Reads."""
    return hint


VARIABLES: dict[str, Any] = {
    "image": _img(),
    "crops": [_img(), _img()],
    "plate": Box(1, 2, 3, 4),
    "plates": [Box(1, 2, 3, 4)],
    "name": "x",
    "names": ["a", "b"],
    "score": 0.5,
    "count": 3,
    "ok": True,
    "article": Page("T", "text"),
    "who": Entity("E"),
}


def rule(grammar: str, name: str) -> str:
    return next(ln for ln in grammar.splitlines() if ln.startswith(f"{name} ::= "))


def test_grammar_offers_only_registered_tools_and_live_variables_of_the_right_kind() -> None:
    g = step_grammar([Read, NeedsPage], {"image": _img(), "crops": [_img()], "n": 3})
    assert '"Read("' in g
    assert "NeedsPage" not in g  # no page variable exists, so the tool cannot be called yet
    image_rule = rule(g, "t0-image")
    assert '"image"' in image_rule and '"crops"' in image_rule  # vectorised: the list too
    assert '"n"' not in image_rule
    assert "call ::= call-0\n" in g + "\n" or rule(g, "call") == "call ::= call-0"
    g2 = step_grammar([Read, NeedsPage], {"image": _img(), "doc": Page("T", "t")})
    assert rule(g2, "call") == "call ::= call-0 | call-1"
    assert '"doc"' in rule(g2, "t1-page")


def test_finish_only_grammar() -> None:
    g = step_grammar([Read], {"image": _img()}, finish_only=True)
    assert rule(g, "root") == 'root ::= "[Thought]: " thought "\\n" finish'


@needs_embedded_model
@pytest.mark.parametrize(
    "tools",
    [[EveryKind], [Read, NeedsPage], [EveryKind, Read, NeedsPage]],
    ids=["every-kind", "vectorised-and-missing", "all"],
)
async def test_llama_cpp_accepts_the_grammar(tools: list[Tool]) -> None:
    from hammr.backends.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM(n_ctx=2048)
    for variables in (VARIABLES, {"image": _img()}):
        for finish_only in (False, True):
            g = step_grammar(tools, variables, finish_only=finish_only)
            r = await llm.complete(
                LLMRequest(messages=(Message("user", "Go."),), max_tokens=2, grammar=g)
            )
            assert r.text.startswith("[")


def _as_regex(gbnf: str) -> str:
    return "^(?:" + gbnf.replace('"', "").replace(" ", "") + ")$"


@given(st.integers(min_value=1, max_value=20000))
def test_int_range_rule_matches_exactly_the_whole_numbers_up_to_high(high: int) -> None:
    import re as _re

    from hammr.grammar import int_range_rule

    with_zero = _re.compile(_as_regex(int_range_rule(high, zero=True)))
    without = _re.compile(_as_regex(int_range_rule(high, zero=False)))
    probes = {0, 1, high - 1, high, high + 1, high * 10, *range(0, min(high + 30, 400))}
    for n in probes:
        assert bool(with_zero.match(str(n))) == (0 <= n <= high), n
        assert bool(without.match(str(n))) == (1 <= n <= high), n
    assert not with_zero.match("0" + str(high))  # no leading zeros


def test_literal_boxes_and_points_are_bounded_by_the_largest_image() -> None:
    from PIL import Image as PILImage

    from hammr.grammar import step_grammar
    from hammr.tools.image_tools import CropImage
    from hammr.values import Image

    image = Image(PILImage.new("RGB", (512, 384)))
    grammar = step_grammar([CropImage], {"image": image})
    coord = (
        '[0-9] | ([1-9] [0-9]{1}) | ([1-4] [0-9]{2}) | ("5" [0-0] [0-9]{1}) | ("51" [0-0]) | "511"'
    )
    assert f"coord ::= {coord}" in grammar
    assert "extent ::= [1-9] |" in grammar and '"512"' in grammar
    no_images = step_grammar([CropImage], {})
    assert "coord ::= [0-9]{1,5}" in no_images
