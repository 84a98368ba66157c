"""The 16 modules of MulProg as hammr tools: thin adapters over the library's capabilities.

The module set, what each does and its geometry follow the paper's public code, repository
LivXue/FS-MEVQA at commit 7853094a07dd648d1276638d68a21f1e5635c16b, file
engine/step_interpreters.py (``register_step_interpreters``); the argument names are those
its programs write (prompts/program_prompt.py). This is our own implementation:

* ``LOC(image, object)``: every box of the object, best first, through the library's
  DetectObject (the 'detect' capability: OWLv2, a served VLM, Haar, ...); an empty list when
  there is none. The names ``'TOP'``, ``'BOTTOM'``, ``'LEFT'`` and ``'RIGHT'`` are the
  image's halves, found without a detector.
* ``COUNT(box)``: how many boxes.
* ``CROP(image, box)``: the first (best) box enlarged 1.5 times about its centre, clipped to
  the image; with no box, the image itself. ``CROP_FRONTOF``, ``CROP_INFRONTOF``,
  ``CROP_INFRONT``, ``CROP_BEHIND`` and ``CROP_AHEAD`` are the same crop (a photo has no
  depth axis to cut along).
* ``CROP_LEFTOF`` / ``CROP_RIGHTOF`` / ``CROP_ABOVE`` / ``CROP_BELOW(image, box)``: the part
  of the image left of / right of / above / below the first box's centre, at full height
  (or width); with no box, the left / right / top / bottom half.
* ``VQA(image, question)``: the 'vqa' capability through the library's VQA tool.
* ``EVAL(expr)``: :func:`hammr.programs.expressions.evaluate_expression` over the program's
  variables, ``{NAME}`` naming one (never Python's ``eval``).
* ``SIZE(box)``: of the first box, ``'large'`` above 480x480 pixels of area, ``'medium'``
  above 320x320, else ``'small'``.
* ``RESULT(var)``: the variable's value, the program's answer.

Differences from that code, on purpose: boxes are in root-image pixels whatever crop they
were found in (each module maps them into the pixels of the image it is handed, and every
crop keeps its lineage, so the trace can draw them on the question's image); crops reach the
image's last row and column (the code's ``w - 1`` bounds drop them under PIL's exclusive
crop); CROP_ABOVE and CROP_BELOW with no box give the top and bottom halves (the code gives
the left half for both); SIZE with no box is a clear error (an IndexError there).
"""

from __future__ import annotations

import keyword
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from hammr.programs.expressions import ExpressionError, evaluate_expression
from hammr.tools import vision_tools
from hammr.tools.base import (
    BadArguments,
    Param,
    ParamKind,
    Tool,
    ToolContext,
    ToolResult,
    coerce,
)
from hammr.tools.image_tools import crop_one
from hammr.values import Box, Image, Value, ValueError_

CROP_SCALE = 1.5
"""How much CROP enlarges its box about the centre (the public code's ``expand_box``)."""
LARGE_AREA = 480 * 480
MEDIUM_AREA = 320 * 320
HALVES = ("TOP", "BOTTOM", "LEFT", "RIGHT")

ModuleFn = Callable[[dict[str, Value], ToolContext], Awaitable[Value]]
"""A module's body: the bound arguments and the context -> a value (or a ToolResult)."""


@dataclass(eq=False)
class Module:
    """A program module: a Tool with its parameters declared by hand.

    ``expects`` gives the kind the program checker should expect where the parameter takes
    ``any`` value at run time (a LOC result may be an empty list of boxes, which the
    ``boxes`` kind refuses), see :class:`hammr.programs.language.DeclaresKinds`.
    """

    name: str
    description: str
    params: tuple[Param, ...]
    returns: str
    fn: ModuleFn
    capability: str | None = None
    expects: dict[str, ParamKind] = field(default_factory=dict)

    def card(self) -> str:
        sig = ", ".join(f"{p.name}: {self.expects.get(p.name, p.kind)}" for p in self.params)
        lines = [f"{self.name}({sig}) -> {self.returns}", f"  {self.description}"]
        lines += [f"  {p.name}: {p.doc}" for p in self.params if p.doc]
        return "\n".join(lines)

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        try:
            value = await self.fn(args, ctx)
        except ValueError_ as e:
            raise BadArguments(f"{self.name}: {e}") from None
        return value if isinstance(value, ToolResult) else ToolResult(value)


class ExpressionFailed(BadArguments):
    """EVAL's expression was refused or failed; ``expression_kind`` is the evaluator's kind."""

    def __init__(self, expr: str, error: ExpressionError) -> None:
        super().__init__(f"EVAL cannot evaluate {expr!r}: [{error.kind}] {error.message}")
        self.expression_kind = error.kind


def _evaluate(expr: str, variables: Mapping[str, Value]) -> Value:
    try:
        return evaluate_expression(expr, variables)
    except ExpressionError as e:
        raise ExpressionFailed(expr, e) from None


async def _eval_alone(args: dict[str, Value], ctx: ToolContext) -> Value:
    return _evaluate(str(args["expr"]), {})


@dataclass(eq=False)
class EvalModule(Module):
    """EVAL: reads the program's variables (:class:`hammr.programs.language.VariableReader`);
    called outside a program it sees none."""

    async def invoke_with_variables(
        self, args: dict[str, Value], ctx: ToolContext, variables: Mapping[str, Value]
    ) -> ToolResult:
        return ToolResult(_evaluate(str(args["expr"]), variables))


# -- boxes and regions -------------------------------------------------------------------

_BOXES = Param("box", "boxes")


def _fmt(v: float) -> str:
    return str(round(v)) if abs(v - round(v)) < 1e-6 else f"{v:.1f}"


def _where(box: Box) -> str:
    return f"[{_fmt(box.x)}, {_fmt(box.y)}, {_fmt(box.w)}, {_fmt(box.h)}]"


def boxes_of(value: Value, where: str) -> list[Box]:
    """The boxes a ``box`` argument holds: a LOC result (maybe empty), one box, or numbers."""
    if isinstance(value, list | tuple) and not value:
        return []
    return list(coerce(value, _BOXES, where))


def _first_local(image: Image, boxes: list[Box], module: str) -> Box | None:
    """The first box in ``image``'s own pixels, clipped to it (None when there is no box)."""
    if not boxes:
        return None
    box, region = boxes[0], image.bounds()
    if box.intersection(region) <= 0:
        raise BadArguments(
            f"{module}: the box {_where(box)} lies outside the image, which covers the region "
            f"{_where(region)} of the original image (boxes are in original-image pixels)"
        )
    local = image.to_local(box)
    x0, y0 = max(0.0, local.x), max(0.0, local.y)
    x1, y1 = min(float(image.width), local.x2), min(float(image.height), local.y2)
    return Box(x0, y0, x1 - x0, y1 - y0)


Region = Callable[[Box | None, float, float], tuple[float, float, float, float] | None]
"""(first box in local pixels or None, image width, height) -> (left, top, right, bottom) in
local pixels, or None for the whole image."""


def _enlarged(box: Box | None, w: float, h: float) -> tuple[float, float, float, float] | None:
    if box is None:
        return None
    (cx, cy), dw, dh = box.center, CROP_SCALE * box.w / 2, CROP_SCALE * box.h / 2
    return (max(0.0, cx - dw), max(0.0, cy - dh), min(w, cx + dw), min(h, cy + dh))


def _left_of(box: Box | None, w: float, h: float) -> tuple[float, float, float, float]:
    return (0.0, 0.0, box.center[0] if box else w / 2, h)


def _right_of(box: Box | None, w: float, h: float) -> tuple[float, float, float, float]:
    return (box.center[0] if box else w / 2, 0.0, w, h)


def _above(box: Box | None, w: float, h: float) -> tuple[float, float, float, float]:
    return (0.0, 0.0, w, box.center[1] if box else h / 2)


def _below(box: Box | None, w: float, h: float) -> tuple[float, float, float, float]:
    return (0.0, box.center[1] if box else h / 2, w, h)


def crop_region(image: Image, boxes: list[Box], region: Region, module: str) -> Image:
    """Cut ``region`` of the first box out of ``image``; the crop keeps its lineage."""
    local = _first_local(image, boxes, module)
    cut = region(local, float(image.width), float(image.height))
    if cut is None:
        return image
    left, top, right, bottom = cut
    return crop_one(image, image.to_root(Box(left, top, right - left, bottom - top)), "region")


def half_box(image: Image, which: str) -> Box:
    """The TOP / BOTTOM / LEFT / RIGHT half of ``image``, in root pixels."""
    w, h = float(image.width), float(image.height)
    local = {
        "TOP": (0.0, 0.0, w, h / 2),
        "BOTTOM": (0.0, h / 2, w, h / 2),
        "LEFT": (0.0, 0.0, w / 2, h),
        "RIGHT": (w / 2, 0.0, w / 2, h),
    }[which]
    return image.to_root(Box(*local, label=which))


# -- the modules ---------------------------------------------------------------------------

_IMAGE = Param("image", "image", doc="an image variable (IMAGE or a crop).")
_BOX = Param("box", "any", doc="boxes from LOC (may be none).")
_BOX_KIND: dict[str, ParamKind] = {"box": "boxes"}


async def _loc(args: dict[str, Value], ctx: ToolContext) -> Value:
    image, name = args["image"], str(args["object"])
    if not name.strip():
        raise BadArguments("LOC needs the name of an object, as in object='dog'")
    if name in HALVES:
        return [half_box(image, name)]
    return await vision_tools.DetectObject.invoke({"image": image, "name": name}, ctx)


async def _count(args: dict[str, Value], ctx: ToolContext) -> Value:
    return len(boxes_of(args["box"], "COUNT argument 'box'"))


async def _size(args: dict[str, Value], ctx: ToolContext) -> Value:
    boxes = boxes_of(args["box"], "SIZE argument 'box'")
    if not boxes:
        raise BadArguments("SIZE got no box (LOC found nothing); check COUNT first")
    area = boxes[0].area
    return "large" if area > LARGE_AREA else "medium" if area > MEDIUM_AREA else "small"


async def _vqa(args: dict[str, Value], ctx: ToolContext) -> Value:
    question = str(args["question"])
    if not question.strip():
        raise BadArguments("VQA needs a question, as in question='What color is it?'")
    return await vision_tools.VQA.invoke({"image": args["image"], "question": question}, ctx)


async def _result(args: dict[str, Value], ctx: ToolContext) -> Value:
    return args["var"]


def crop_module(name: str, region: Region, description: str) -> Module:
    """A CROP-family module cutting ``region`` (see :data:`Region`) around the first box."""

    async def run(args: dict[str, Value], ctx: ToolContext) -> Value:
        boxes = boxes_of(args["box"], f"{name} argument 'box'")
        return crop_region(args["image"], boxes, region, name)

    return Module(name, description, (_IMAGE, _BOX), "image", run, expects=_BOX_KIND)


LOC = Module(
    "LOC",
    "Find every box of an object, best first (none when it is absent). 'TOP', 'BOTTOM', "
    "'LEFT' and 'RIGHT' give that half of the image.",
    (_IMAGE, Param("object", "text", doc="what to find, e.g. 'red car'.")),
    "boxes",
    _loc,
    capability="detect",
)
COUNT = Module("COUNT", "Count the boxes.", (_BOX,), "integer", _count, expects=_BOX_KIND)
CROP = crop_module("CROP", _enlarged, "Crop the first box, enlarged 1.5 times (no box: all).")
CROP_LEFTOF = crop_module(
    "CROP_LEFTOF", _left_of, "Crop the image left of the first box's centre (no box: left half)."
)
CROP_RIGHTOF = crop_module(
    "CROP_RIGHTOF",
    _right_of,
    "Crop the image right of the first box's centre (no box: right half).",
)
CROP_ABOVE = crop_module(
    "CROP_ABOVE", _above, "Crop the image above the first box's centre (no box: top half)."
)
CROP_BELOW = crop_module(
    "CROP_BELOW", _below, "Crop the image below the first box's centre (no box: bottom half)."
)
_DEPTH_NOTE = "Crop around the first box, like CROP (in front of / behind it)."
CROP_FRONTOF = crop_module("CROP_FRONTOF", _enlarged, _DEPTH_NOTE)
CROP_INFRONTOF = crop_module("CROP_INFRONTOF", _enlarged, _DEPTH_NOTE)
CROP_INFRONT = crop_module("CROP_INFRONT", _enlarged, _DEPTH_NOTE)
CROP_BEHIND = crop_module("CROP_BEHIND", _enlarged, _DEPTH_NOTE)
CROP_AHEAD = crop_module("CROP_AHEAD", _enlarged, _DEPTH_NOTE)
VQA = Module(
    "VQA",
    "Answer a simple question about an image (crop first to look closer); the answer is short.",
    (_IMAGE, Param("question", "text", doc="one plain visual question.")),
    "text",
    _vqa,
    capability="vqa",
)
EVAL = EvalModule(
    "EVAL",
    "Evaluate an expression over earlier results, named in braces.",
    (
        Param(
            "expr",
            "text",
            doc="""e.g. "'yes' if {ANSWER0} > 0 else 'no'"; operators, comparisons, """
            "x if c else y, xor, len/min/max/int/float/str.",
        ),
    ),
    "value",
    _eval_alone,
)
SIZE = Module(
    "SIZE",
    "The size of the first box: 'large', 'medium' or 'small'.",
    (_BOX,),
    "text",
    _size,
    expects=_BOX_KIND,
)
RESULT = Module(
    "RESULT",
    "The program's answer: the value of a variable (the last line).",
    (Param("var", "any", doc="the variable holding the answer."),),
    "value",
    _result,
)

MODULES: tuple[Module, ...] = (
    LOC,
    COUNT,
    CROP,
    CROP_RIGHTOF,
    CROP_LEFTOF,
    CROP_FRONTOF,
    CROP_INFRONTOF,
    CROP_INFRONT,
    CROP_BEHIND,
    CROP_AHEAD,
    CROP_BELOW,
    CROP_ABOVE,
    VQA,
    EVAL,
    RESULT,
    SIZE,
)
"""The 16 modules, in the order the public code registers them."""


def default_modules() -> list[Tool]:
    """The 16 modules of the paper (see the module docstring)."""
    return list(MODULES)


def _check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
        raise ValueError(f"{name!r} cannot name a module: use a plain identifier such as OCR")


def modules_with(
    extra: Iterable[Tool] | Mapping[str, Tool] = (), *, base: Iterable[Tool] | None = None
) -> dict[str, Tool]:
    """The module table for programs: ``base`` (default: the 16 modules) by name, plus
    ``extra``, any library tool (OCR, an agent, ...) under its own name.

    A tool whose name is already taken is refused; to replace a module or give a tool
    another name, pass a mapping ``{"NAME": tool}``.
    """
    table: dict[str, Tool] = {t.name: t for t in (MODULES if base is None else base)}
    if isinstance(extra, Mapping):
        for name, t in extra.items():
            _check_name(name)
            table[name] = t
        return table
    for t in extra:
        _check_name(t.name)
        if t.name in table:
            raise ValueError(
                f"{t.name} is already a module; pass {{'{t.name}': tool}} to replace it, "
                "or a mapping that gives the tool a name of its own"
            )
        table[t.name] = t
    return table


__all__ = [
    "CROP_SCALE",
    "HALVES",
    "MODULES",
    "EvalModule",
    "ExpressionFailed",
    "Module",
    "boxes_of",
    "crop_module",
    "crop_region",
    "default_modules",
    "half_box",
    "modules_with",
]
