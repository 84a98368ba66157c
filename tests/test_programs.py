"""MulProg programs: the language, the 16 modules, the interpreter.

Detection and VQA are served by TEST STAND-INS (``SceneDetector``, ``PixelVQA``): scripted
boxes per object name, and colour answers read from the pixels each crop hands over. The
image operations (crops, crops of crops, zooms, lineage) are the real ones, on a drawn scene
and on a photo from ``skimage.data``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage
from PIL import ImageDraw
from skimage import data as skdata

from hammr.programs.checks import compile_program, kinds_of, param_kinds, validate
from hammr.programs.interpreter import ProgramRun, run_program
from hammr.programs.language import (
    MAX_PROGRAM_LINES,
    Program,
    ProgramErrorKind,
    ProgramErrors,
    format_errors,
    parse_program,
)
from hammr.programs.modules import MODULES, default_modules, modules_with
from hammr.tools import vision_tools
from hammr.tools.base import Tool, ToolContext, bind_arguments
from hammr.tools.image_tools import ZoomIn
from hammr.tools.ocr import OCR
from hammr.trace import Step, Trace
from hammr.values import Box, Image

# -- the scene and the stand-ins ------------------------------------------------------------

W, H = 240, 120
COLOURS = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 220)}
GREEN = Box(10, 40, 20, 20, score=0.8)
RED = Box(60, 40, 30, 30, score=0.7)
BLUE_A = Box(140, 20, 30, 30, score=0.9)
BLUE_B = Box(190, 70, 30, 30, score=0.6)
PAINT = ((GREEN, "green"), (RED, "red"), (BLUE_A, "blue"), (BLUE_B, "blue"))
SCENE: dict[str, list[Box]] = {
    "square": [GREEN, RED, BLUE_A, BLUE_B],
    "red square": [RED],
    "blue square": [BLUE_B, BLUE_A],  # listed worst first: LOC must order them
    "green square": [GREEN],
    "circle": [],
}


def scene_image() -> Image:
    pixels = PILImage.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(pixels)
    for box, colour in PAINT:
        draw.rectangle((box.x, box.y, box.x2 - 1, box.y2 - 1), fill=COLOURS[colour])
    return Image(pixels)


def photo() -> Image:
    return Image(PILImage.fromarray(skdata.chelsea()))  # 451 x 300


class SceneDetector:
    """TEST STAND-IN for 'detect': the scripted root boxes of a name that lie more than half
    inside the handed image, in that image's pixels (as a real detector reports them)."""

    def __init__(self, scene: Mapping[str, list[Box]] = SCENE) -> None:
        self.scene = scene
        self.calls: list[tuple[str, Box]] = []

    async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]:
        out = []
        for image, name in zip(images, names, strict=True):
            region = image.bounds()
            self.calls.append((name, region))
            found = []
            for b in self.scene.get(name, []):
                if b.intersection(region) > 0.5 * b.area:
                    local = image.to_local(b)
                    found.append(Box(local.x, local.y, local.w, local.h, name, b.score))
            out.append(found)
        return out


class PixelVQA:
    """TEST STAND-IN for 'vqa': a 'what color' question is answered with the scene colour
    covering most pixels of the handed image ('none' if no colour); other questions from
    ``script``."""

    def __init__(self, script: Mapping[str, str] | None = None) -> None:
        self.script = dict(script or {})
        self.seen: list[tuple[Box, str]] = []

    async def answer(self, images: list[Image], questions: list[str]) -> list[str]:
        out = []
        for image, question in zip(images, questions, strict=True):
            self.seen.append((image.bounds(), question))
            if question.lower().startswith("what color"):
                arr = np.asarray(image.pixels.convert("RGB"))
                counts = {c: int(np.all(arr == rgb, axis=-1).sum()) for c, rgb in COLOURS.items()}
                best = max(counts, key=lambda c: counts[c])
                out.append(best if counts[best] else "none")
            else:
                out.append(self.script.get(question, "unknown"))
        return out


def context(**backends: Any) -> ToolContext:
    chosen = {"detect": SceneDetector(), "vqa": PixelVQA()} | backends
    return ToolContext(backends={k: v for k, v in chosen.items() if v is not None})


TABLE = modules_with()
INPUTS = {"IMAGE": "image"}


async def run(
    text: str,
    image: Image | None = None,
    ctx: ToolContext | None = None,
    modules: Mapping[str, Tool] = TABLE,
) -> ProgramRun:
    program = compile_program(text, modules, INPUTS)
    return await run_program(
        program, {"IMAGE": image or scene_image()}, modules, ctx or context(), question="q"
    )


def step_of(result: ProgramRun, var: str) -> Any:
    (step,) = [s for s in result.trace.steps if s.output_var == var]
    return step


def enlarged(box: Box, w: float, h: float) -> Box:
    """CROP's region for ``box``: 1.5 times about the centre, clipped, on whole pixels."""
    cx, cy = box.x + box.w / 2, box.y + box.h / 2
    left, top = max(0.0, cx - 0.75 * box.w), max(0.0, cy - 0.75 * box.h)
    right, bottom = min(w, cx + 0.75 * box.w), min(h, cy + 0.75 * box.h)
    x0, y0 = math.floor(left), math.floor(top)
    return Box(x0, y0, math.ceil(right) - x0, math.ceil(bottom) - y0)


def same_pixels(crop: Image, root: Image) -> bool:
    r = crop.crop_box
    assert r is not None
    expected = root.pixels.crop((int(r.x), int(r.y), int(r.x2), int(r.y2)))
    return bool(np.array_equal(np.asarray(crop.pixels), np.asarray(expected)))


# -- the module set ---------------------------------------------------------------------------


def test_the_sixteen_modules_of_the_public_code() -> None:
    names = [m.name for m in default_modules()]
    assert len(names) == len(set(names)) == 16
    assert set(names) == {
        "LOC",
        "COUNT",
        "CROP",
        "CROP_RIGHTOF",
        "CROP_LEFTOF",
        "CROP_FRONTOF",
        "CROP_INFRONTOF",
        "CROP_INFRONT",
        "CROP_BEHIND",
        "CROP_AHEAD",
        "CROP_BELOW",
        "CROP_ABOVE",
        "VQA",
        "EVAL",
        "RESULT",
        "SIZE",
    }
    assert all(isinstance(m, Tool) for m in MODULES)
    # the argument names the paper's programs write
    assert [p.name for p in TABLE["LOC"].params] == ["image", "object"]
    assert [p.name for p in TABLE["CROP_LEFTOF"].params] == ["image", "box"]
    assert [p.name for p in TABLE["VQA"].params] == ["image", "question"]
    assert [p.name for p in TABLE["EVAL"].params] == ["expr"]
    assert [p.name for p in TABLE["RESULT"].params] == ["var"]
    assert param_kinds(TABLE["COUNT"]) == {"box": "boxes"}
    assert TABLE["CROP"].card().startswith("CROP(image: image, box: boxes) -> image")


# -- question shapes, end to end ------------------------------------------------------------


async def test_attribute_loc_crop_vqa_crops_the_best_box_scripted_vision() -> None:
    result = await run(
        """BOX0=LOC(image=IMAGE,object='blue square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
ANSWER0=VQA(image=IMAGE0,question='What color is the square?')
FINAL_RESULT=RESULT(var=ANSWER0)"""
    )
    assert result.ok and result.answer == "blue"
    boxes = result.variables["BOX0"]
    assert [b.xywh() for b in boxes] == [BLUE_A.xywh(), BLUE_B.xywh()]  # best score first
    crop = result.variables["IMAGE0"]
    assert crop.crop_box == enlarged(BLUE_A, W, H)
    assert same_pixels(crop, result.variables["IMAGE"])
    loc = step_of(result, "BOX0")
    assert loc.output[0]["$box"] == BLUE_A.xywh() and loc.output[0]["label"] == "blue square"
    assert step_of(result, "IMAGE0").output["region"] == crop.crop_box.xywh()


async def test_relation_through_a_directional_crop_then_a_crop_of_the_crop_scripted_vision() -> (
    None
):
    result = await run(
        """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP_LEFTOF(image=IMAGE,box=BOX0)
BOX1=LOC(image=IMAGE0,object='square')
IMAGE1=CROP(image=IMAGE0,box=BOX1)
ANSWER0=VQA(image=IMAGE1,question='What color is the square?')
FINAL_RESULT=RESULT(var=ANSWER0)"""
    )
    assert result.answer == "green"
    assert result.variables["IMAGE0"].crop_box == Box(0, 0, RED.x + RED.w / 2, H)
    # found inside the crop, reported in the question image's pixels
    assert [b.xywh() for b in result.variables["BOX1"]] == [GREEN.xywh()]
    assert result.variables["IMAGE1"].crop_box == enlarged(GREEN, RED.x + RED.w / 2, H)
    assert same_pixels(result.variables["IMAGE1"], result.variables["IMAGE"])


async def test_relation_count_right_of_an_object_scripted_vision() -> None:
    result = await run(
        """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP_RIGHTOF(image=IMAGE,box=BOX0)
BOX1=LOC(image=IMAGE0,object='square')
ANSWER0=COUNT(box=BOX1)
FINAL_RESULT=RESULT(var=ANSWER0)"""
    )
    assert result.answer == "2" and result.value == 2
    assert {tuple(b.xywh()) for b in result.variables["BOX1"]} == {
        tuple(BLUE_A.xywh()),
        tuple(BLUE_B.xywh()),
    }


@pytest.mark.parametrize(("name", "expected"), [("blue square", 2), ("circle", 0)])
async def test_counting_scripted_vision(name: str, expected: int) -> None:
    result = await run(
        f"BOX0=LOC(image=IMAGE,object='{name}')\nANSWER0=COUNT(box=BOX0)\n"
        "FINAL_RESULT=RESULT(var=ANSWER0)"
    )
    assert result.ok and result.value == expected and result.answer == str(expected)


async def test_comparison_of_two_crops_with_eval_scripted_vision() -> None:
    result = await run(
        """BOX0=LOC(image=IMAGE,object='green square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
BOX1=LOC(image=IMAGE,object='red square')
IMAGE1=CROP(image=IMAGE,box=BOX1)
ANSWER0=VQA(image=IMAGE0,question='What color is the square?')
ANSWER1=VQA(image=IMAGE1,question='What color is the square?')
ANSWER2=EVAL(expr="'yes' if {ANSWER0} == {ANSWER1} else 'no'")
FINAL_RESULT=RESULT(var=ANSWER2)"""
    )
    assert (result.variables["ANSWER0"], result.variables["ANSWER1"]) == ("green", "red")
    assert result.answer == "no"


async def test_comparison_of_counts_with_eval_scripted_vision() -> None:
    result = await run(
        """BOX0=LOC(image=IMAGE,object='blue square')
BOX1=LOC(image=IMAGE,object='green square')
ANSWER0=COUNT(box=BOX0)
ANSWER1=COUNT(box=BOX1)
ANSWER2=EVAL(expr="'yes' if {ANSWER0} > {ANSWER1} else 'no'")
FINAL_RESULT=RESULT(var=ANSWER2)"""
    )
    assert result.answer == "yes"


@pytest.mark.parametrize(("name", "expected"), [("green square", "yes"), ("circle", "no")])
async def test_existence_scripted_vision(name: str, expected: str) -> None:
    result = await run(
        f"""BOX0=LOC(image=IMAGE,object='{name}')
ANSWER0=COUNT(box=BOX0)
ANSWER1=EVAL(expr="'yes' if {{ANSWER0}} > 0 else 'no'")
FINAL_RESULT=RESULT(var=ANSWER1)"""
    )
    assert result.answer == expected


async def test_choose_between_two_options_in_the_right_half_scripted_vision() -> None:
    result = await run(
        """BOX0=LOC(image=IMAGE,object='RIGHT')
IMAGE0=CROP(image=IMAGE,box=BOX0)
BOX1=LOC(image=IMAGE0,object='square')
IMAGE1=CROP(image=IMAGE0,box=BOX1)
ANSWER0=VQA(image=IMAGE1,question='What color is the square?')
ANSWER1=EVAL(expr="'red' if {ANSWER0} == 'red' else 'blue'")
FINAL_RESULT=RESULT(var=ANSWER1)"""
    )
    assert result.answer == "blue"
    assert result.variables["BOX0"][0].xywh() == [W / 2, 0, W / 2, H]
    assert result.variables["IMAGE0"].crop_box == enlarged(Box(W / 2, 0, W / 2, H), W, H)


async def test_choose_a_side_with_the_left_half_and_no_detector_for_it_scripted_vision() -> None:
    text = """BOX0=LOC(image=IMAGE,object='LEFT')
IMAGE0=CROP(image=IMAGE,box=BOX0)
BOX1=LOC(image=IMAGE0,object='{name}')
ANSWER0=COUNT(box=BOX1)
ANSWER1=EVAL(expr="'left' if {{ANSWER0}} > 0 else 'right'")
FINAL_RESULT=RESULT(var=ANSWER1)"""
    detector = SceneDetector()
    green = await run(text.format(name="green square"), ctx=context(detect=detector))
    blue = await run(text.format(name="blue square"), ctx=context(detect=detector))
    assert (green.answer, blue.answer) == ("left", "right")
    assert [name for name, _ in detector.calls] == ["green square", "blue square"]


async def test_vqa_answers_a_scripted_question_about_the_crop_scripted_vision() -> None:
    vqa = PixelVQA({"Is the square shiny?": "yes"})
    result = await run(
        """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
ANSWER0=VQA(image=IMAGE0,question='Is the square shiny?')
FINAL_RESULT=RESULT(var=ANSWER0)""",
        ctx=context(vqa=vqa),
    )
    assert result.answer == "yes"
    assert vqa.seen == [(enlarged(RED, W, H), "Is the square shiny?")]


# -- geometry ---------------------------------------------------------------------------------


async def crop(module: str, image: Image, boxes: list[Box] | Box) -> Image:
    tool = TABLE[module]
    out = await tool.invoke(bind_arguments(tool, [], {"image": image, "box": boxes}), context())
    assert isinstance(out.value, Image)
    return out.value


async def test_directional_crops_on_a_photo() -> None:
    root = photo()
    w, h = root.width, root.height
    b = Box(100, 50, 80, 60)
    cx, cy = b.x + b.w / 2, b.y + b.h / 2
    expected = {
        "CROP_LEFTOF": Box(0, 0, cx, h),
        "CROP_RIGHTOF": Box(cx, 0, w - cx, h),
        "CROP_ABOVE": Box(0, 0, w, cy),
        "CROP_BELOW": Box(0, cy, w, h - cy),
        "CROP": Box(cx - 0.75 * b.w, cy - 0.75 * b.h, 1.5 * b.w, 1.5 * b.h),
    }
    for module, region in expected.items():
        out = await crop(module, root, [b])
        assert out.crop_box == region, module
        assert (out.width, out.height) == (region.w, region.h)
        assert out.parent is root and same_pixels(out, root)
    for module in ("CROP_FRONTOF", "CROP_INFRONTOF", "CROP_INFRONT", "CROP_BEHIND", "CROP_AHEAD"):
        assert (await crop(module, root, [b])).crop_box == expected["CROP"]


async def test_only_the_first_box_counts() -> None:
    root = photo()
    first, second = Box(100, 50, 80, 60), Box(300, 200, 40, 40)
    out = await crop("CROP_RIGHTOF", root, [first, second])
    assert out.crop_box is not None and out.crop_box.x == first.x + first.w / 2


async def test_a_crop_of_a_crop_keeps_boxes_in_root_pixels() -> None:
    root = photo()
    b = Box(100, 50, 80, 60)
    right = await crop("CROP_RIGHTOF", root, [b])
    ox = b.x + b.w / 2
    inner = Box(300, 100, 40, 40)  # root pixels, inside `right`
    above = await crop("CROP_ABOVE", right, [inner])
    assert above.crop_box == Box(ox, 0, root.width - ox, inner.y + inner.h / 2)
    left = await crop("CROP_LEFTOF", right, [inner])
    assert left.crop_box == Box(ox, 0, inner.x + inner.w / 2 - ox, root.height)
    assert above.parent is right and same_pixels(above, root) and same_pixels(left, root)


async def test_crops_of_a_zoomed_image_map_back_to_root_pixels() -> None:
    root = photo()
    zone, factor = Box(100, 100, 100, 100), 2.0
    zoomed = (await ZoomIn.invoke({"image": root, "box": zone, "factor": factor}, context())).value
    b = Box(120, 130, 20, 40)
    out = await crop("CROP_LEFTOF", zoomed, [b])
    cx = b.x + b.w / 2
    assert out.crop_box == Box(zone.x, zone.y, cx - zone.x, zone.h)
    assert (out.width, out.height) == ((cx - zone.x) * factor, zone.h * factor)
    assert out.zoom == factor


async def test_crop_is_clipped_at_the_image_edge() -> None:
    root = photo()
    out = await crop("CROP", root, [Box(0, 0, 40, 40)])
    assert out.crop_box == Box(0, 0, 20 + 0.75 * 40, 20 + 0.75 * 40)


async def test_no_box_falls_back_to_the_image_or_its_half() -> None:
    root = photo()
    w, h = root.width, root.height
    assert await crop("CROP", root, []) is root
    halves = {
        "CROP_LEFTOF": Box(0, 0, math.ceil(w / 2), h),
        "CROP_RIGHTOF": Box(math.floor(w / 2), 0, w - math.floor(w / 2), h),
        "CROP_ABOVE": Box(0, 0, w, h / 2),
        "CROP_BELOW": Box(0, h / 2, w, h / 2),
    }
    for module, region in halves.items():
        assert (await crop(module, root, [])).crop_box == region, module


async def test_loc_halves_of_a_crop_are_in_root_pixels() -> None:
    root = photo()
    right = await crop("CROP_RIGHTOF", root, [Box(100, 50, 80, 60)])
    (top,) = (await TABLE["LOC"].invoke({"image": right, "object": "TOP"}, ToolContext())).value
    region = right.crop_box
    assert region is not None
    assert top == Box(region.x, 0, region.w, root.height / 2, label="TOP")


@pytest.mark.parametrize(
    ("side", "expected"),
    [(481, "large"), (480, "medium"), (321, "medium"), (320, "small"), (10, "small")],
)
async def test_size_thresholds_of_the_public_code(side: int, expected: str) -> None:
    boxes = [Box(0, 0, side, side), Box(0, 0, 1000, 1000)]
    size = TABLE["SIZE"]
    out = await size.invoke(bind_arguments(size, [boxes], {}), ToolContext())
    assert out.value == expected


# -- the trace ----------------------------------------------------------------------------------


async def test_trace_records_each_line_and_round_trips_scripted_vision(tmp_path: Path) -> None:
    seen: list[Trace] = []
    events: list[tuple[str, int | None]] = []
    ctx = context()
    ctx.on_trace = seen.append
    ctx.on_step = lambda agent, depth, step: events.append((agent, step.line))
    text = """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
ANSWER0=VQA(image=IMAGE0,question='What color is the square?')
FINAL_RESULT=RESULT(var=ANSWER0)"""
    program = compile_program(text, TABLE, INPUTS)
    result = await run_program(
        program, {"IMAGE": scene_image()}, TABLE, ctx, question="What color?", agent="Prog"
    )
    trace = result.trace
    assert seen == [trace] and trace.agent == "Prog" and trace.status == "finished"
    assert [s.line for s in trace.steps] == [0, 1, 2, 3]
    assert [s.tool for s in trace.steps] == ["LOC", "CROP", "VQA", "RESULT"]
    assert [s.action for s in trace.steps] == text.splitlines()
    assert events == [("Prog", i) for i in (0, 0, 1, 1, 2, 2, 3, 3)]
    crop_out = trace.steps[1].output
    assert crop_out["$image"] in trace.images and trace.steps[1].arguments["box"][0]["$box"]
    assert trace.steps[3].finish == "red" and trace.answer == "red"
    assert Trace.from_dict(trace.to_dict()).to_dict() == trace.to_dict()
    loaded = Trace.load(trace.save(tmp_path / "t.json"))
    assert loaded.steps[1].line == 1 and crop_out["$image"] in loaded.images


async def test_lines_append_to_a_given_trace_after_its_steps_scripted_vision() -> None:
    seen: list[Trace] = []
    ctx = context()
    ctx.on_trace = seen.append
    trace = Trace(agent="MulProg", question="q", model="planner-llm")
    trace.steps.append(Step(index=0, raw="BOX0=..."))  # e.g. the planner's call
    program = compile_program(
        lines("BOX0=LOC(image=IMAGE,object='blue square')", "ANSWER0=COUNT(box=BOX0)", GOOD_END),
        TABLE,
        INPUTS,
    )
    result = await run_program(program, {"IMAGE": scene_image()}, TABLE, ctx, trace=trace)
    assert result.trace is trace and not seen  # its owner announced it
    assert [(s.index, s.line) for s in trace.steps] == [(0, None), (1, 0), (2, 1), (3, 2)]
    assert trace.answer == "2" and trace.model == "planner-llm"


# -- bad input ----------------------------------------------------------------------------------


def errors_of(text: str, modules: Mapping[str, Tool] = TABLE) -> list[tuple[str, int | None]]:
    with pytest.raises(ProgramErrors) as info:
        compile_program(text, modules, INPUTS)
    return [(e.kind, e.line) for e in info.value.errors]


GOOD_END = "FINAL_RESULT=RESULT(var=ANSWER0)"


def lines(*text: str) -> str:
    return "\n".join(text)


def test_unknown_module() -> None:
    text = lines("BOX0=FIND(image=IMAGE,object='cat')", "ANSWER0=COUNT(box=BOX0)", GOOD_END)
    assert errors_of(text) == [("unknown_module", 0)]


def test_undefined_variable() -> None:
    assert errors_of(f"ANSWER0=COUNT(box=BOX7)\n{GOOD_END}") == [("unknown_variable", 0)]


def test_undefined_variable_inside_an_eval_expression() -> None:
    text = f'ANSWER0=EVAL(expr="{{ANSWER9}} > 0")\n{GOOD_END}'
    assert errors_of(text) == [("unknown_variable", 0)]


def test_missing_result() -> None:
    assert errors_of("BOX0=LOC(image=IMAGE,object='cat')\nANSWER0=COUNT(box=BOX0)") == [
        ("no_result", None)
    ]
    assert errors_of("") == [("no_result", None)]


def test_result_twice_or_not_last() -> None:
    start = ("BOX0=LOC(image=IMAGE,object='cat')", "ANSWER0=COUNT(box=BOX0)")
    twice = lines(*start, "A=RESULT(var=BOX0)", GOOD_END)
    assert errors_of(twice) == [("no_result", 2)]
    early = lines(*start, GOOD_END, "X=COUNT(box=BOX0)")
    assert errors_of(early) == [("no_result", 2)]


def test_redefined_names_and_inputs() -> None:
    text = lines(
        "BOX0=LOC(image=IMAGE,object='a')",
        "BOX0=LOC(image=IMAGE,object='b')",
        "ANSWER0=COUNT(box=BOX0)",
        GOOD_END,
    )
    assert errors_of(text) == [("redefined", 1)]
    assert ("redefined", 0) in errors_of(f"IMAGE=CROP(image=IMAGE,box=[0,0,5,5])\n{GOOD_END}")


def test_too_long() -> None:
    body = "\n".join(f"BOX{i}=LOC(image=IMAGE,object='cat')" for i in range(MAX_PROGRAM_LINES))
    assert ("too_long", None) in errors_of(f"{body}\nANSWER0=COUNT(box=BOX0)\n{GOOD_END}")


def test_wrong_argument_kind_is_found_before_running() -> None:
    text = lines(
        "BOX0=LOC(image=IMAGE,object='cat')",
        "IMAGE0=CROP(image=BOX0,box=BOX0)",
        "ANSWER0=VQA(image=IMAGE0,question='q')",
        GOOD_END,
    )
    with pytest.raises(ProgramErrors) as info:
        compile_program(text, TABLE, INPUTS)
    (error,) = info.value.errors
    assert (error.kind, error.line) == ("bad_arguments", 1)
    assert "must be an image" in error.message and "BOX0 (from line 1)" in error.message
    for wrong, kind in [
        ("ANSWER0=COUNT(box=IMAGE)", "bad_arguments"),
        ("ANSWER0=VQA(image=IMAGE)", "bad_arguments"),  # missing question
        ("ANSWER0=VQA(image=IMAGE,question='q',extra=1)", "bad_arguments"),
        ("ANSWER0=LOC(image='IMAGE',object='cat')", "bad_arguments"),
        ("ANSWER0=COUNT(box=[])\nLOC(image=IMAGE,object='cat')", "syntax"),  # no target
    ]:
        assert [k for k, _ in errors_of(f"{wrong}\n{GOOD_END}")] == [kind], wrong


async def test_wrong_argument_kind_at_run_time_is_a_step_error_scripted_vision() -> None:
    program = parse_program(
        lines(
            "BOX0=LOC(image=IMAGE,object='red square')",
            "ANSWER0=VQA(image=BOX0,question='q')",
            GOOD_END,
        ),
        TABLE,
        INPUTS,
    )
    assert validate(program, TABLE, INPUTS)
    result = await run_program(program, {"IMAGE": scene_image()}, TABLE, context(), check=False)
    assert result.trace.status == "no_answer" and result.answer is None
    assert result.trace.steps[-1].error_kind == "bad_arguments"
    assert "line 2" in (result.trace.error or "")
    checked = await run_program(program, {"IMAGE": scene_image()}, TABLE, context())
    assert checked.trace.status == "no_answer" and not checked.trace.steps
    assert format_errors(validate(program, TABLE, INPUTS)) in (checked.trace.error or "")


def test_all_errors_are_collected_with_their_lines() -> None:
    text = """BOX0=LOC(image=IMAGE,object='cat')
IMAGE0=CROP(image=BOX0,box=BOX0)
ANSWER0=FIND(x=1)
ANSWER1=COUNT(box=BOX9)
ANSWER2=VQA(image=IMAGE0 question='q')
ANSWER3=EVAL(expr="{ANSWER2} == 'a'")"""
    found = errors_of(text)
    assert found == [
        ("bad_arguments", 1),
        ("unknown_module", 2),
        ("unknown_variable", 3),
        ("syntax", 4),
        ("no_result", None),
    ]
    with pytest.raises(ProgramErrors) as info:
        compile_program(text, TABLE, INPUTS)
    rendered = format_errors(info.value.errors)
    assert "line 3 `ANSWER0=FIND(x=1)`: [unknown_module]" in rendered
    assert rendered.count("\n") == len(found) - 1


async def test_box_outside_the_image_is_a_clear_step_error_scripted_vision() -> None:
    result = await run(
        """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
IMAGE1=CROP_LEFTOF(image=IMAGE0,box=[200,100,10,10])
ANSWER0=VQA(image=IMAGE1,question='What color is it?')
FINAL_RESULT=RESULT(var=ANSWER0)"""
    )
    assert result.trace.status == "no_answer" and len(result.trace.steps) == 3
    step = result.trace.steps[-1]
    assert step.error_kind == "bad_arguments" and "outside the image" in (step.error or "")
    assert (result.trace.error or "").startswith("line 3 (IMAGE1=CROP_LEFTOF")


async def test_a_capability_with_no_backend_is_a_step_error() -> None:
    result = await run(
        f"BOX0=LOC(image=IMAGE,object='cat')\nANSWER0=COUNT(box=BOX0)\n{GOOD_END}",
        ctx=ToolContext(),
    )
    assert result.trace.status == "error"
    assert result.trace.steps[0].error_kind == "capability_missing"
    assert "detect" in (result.trace.steps[0].error or "")


@pytest.mark.parametrize(
    ("expr", "kind"),
    [("{ANSWER0} +", "syntax"), ("{ANSWER0} > 'a'", "type"), ("__import__('os')", "not_allowed")],
)
async def test_an_eval_error_is_a_step_error_scripted_vision(
    expr: str, kind: ProgramErrorKind
) -> None:
    result = await run(
        f"""BOX0=LOC(image=IMAGE,object='blue square')
ANSWER0=COUNT(box=BOX0)
ANSWER1=EVAL(expr="{expr}")
FINAL_RESULT=RESULT(var=ANSWER1)"""
    )
    step = result.trace.steps[-1]
    assert result.trace.status == "no_answer" and step.tool == "EVAL"
    assert step.error_kind == "bad_arguments" and f"[{kind}]" in (step.error or "")


async def test_a_failing_backend_is_a_step_error_not_a_crash_scripted_vision() -> None:
    class Broken:
        async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]:
            raise RuntimeError("GPU on fire")

    result = await run(
        f"BOX0=LOC(image=IMAGE,object='cat')\nANSWER0=COUNT(box=BOX0)\n{GOOD_END}",
        ctx=context(detect=Broken()),
    )
    assert result.trace.status == "error"  # a module failing is no result of the model's
    assert result.trace.steps[0].error_kind == "tool_failure"
    assert "GPU on fire" in (result.trace.error or "")


async def test_size_of_no_box_is_a_step_error_scripted_vision() -> None:
    result = await run(f"BOX0=LOC(image=IMAGE,object='circle')\nANSWER0=SIZE(box=BOX0)\n{GOOD_END}")
    assert result.trace.steps[-1].error_kind == "bad_arguments"


async def test_a_timeout_keeps_the_partial_trace_scripted_vision() -> None:
    """The deadline comes while VQA (step 3) waits: it is made to expire there, so the
    steps before it finish however slowly a busy machine runs them."""
    deadline = asyncio.timeout(None)

    class Slow:
        async def answer(self, images: list[Image], questions: list[str]) -> list[str]:
            deadline.reschedule(asyncio.get_running_loop().time())
            await asyncio.sleep(60)
            return []

    seen: list[Trace] = []
    ctx = context(vqa=Slow())
    ctx.on_trace = seen.append
    program = compile_program(
        f"BOX0=LOC(image=IMAGE,object='red square')\nIMAGE0=CROP(image=IMAGE,box=BOX0)\n"
        f"ANSWER0=VQA(image=IMAGE0,question='q')\n{GOOD_END}",
        TABLE,
        INPUTS,
    )
    with pytest.raises(TimeoutError):
        async with deadline:
            await run_program(program, {"IMAGE": scene_image()}, TABLE, ctx)
    (trace,) = seen
    assert trace.status == "cancelled" and [s.tool for s in trace.steps] == ["LOC", "CROP", "VQA"]
    assert "step 3" in (trace.error or "")


# -- registering more modules --------------------------------------------------------------------


class SizeReader:
    """TEST STAND-IN for 'ocr': reads the size of the image handed over as its text."""

    async def read(self, images: list[Image]) -> list[str]:
        return [f"{i.width}x{i.height}" for i in images]


async def test_a_library_tool_joins_under_its_own_name_scripted_vision() -> None:
    table = modules_with([OCR])
    result = await run(
        """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
ANSWER0=OCR(image=IMAGE0)
FINAL_RESULT=RESULT(var=ANSWER0)""",
        ctx=context(ocr=SizeReader()),
        modules=table,
    )
    region = enlarged(RED, W, H)
    assert result.answer == f"{round(region.w)}x{round(region.h)}"
    assert errors_of("ANSWER0=OCR(image=IMAGE)\nFINAL_RESULT=RESULT(var=ANSWER0)") == [
        ("unknown_module", 0)
    ]


def test_registering_names() -> None:
    with pytest.raises(ValueError, match="already a module"):
        modules_with([vision_tools.VQA])
    assert modules_with({"ASK": vision_tools.VQA})["ASK"] is vision_tools.VQA
    assert modules_with({"VQA": vision_tools.VQA})["VQA"] is vision_tools.VQA
    with pytest.raises(ValueError, match="cannot name a module"):
        modules_with({"not a name": OCR})
    assert set(modules_with(base=[OCR])) == {"OCR"}


# -- parsing what models write -------------------------------------------------------------------

CLEAN = """BOX0=LOC(image=IMAGE,object='red square')
IMAGE0=CROP(image=IMAGE,box=BOX0)
ANSWER0=VQA(image=IMAGE0,question='Is it #1?')
FINAL_RESULT=RESULT(var=ANSWER0)"""


def test_parsing_tolerates_fences_numbering_headers_and_comments() -> None:
    messy = """Program:
```python
1. BOX0=LOC(image=IMAGE,object='red square')   # find the square

Step 2: IMAGE0=CROP(image=IMAGE,box=BOX0)
- ANSWER0=VQA(image=IMAGE0,question='Is it #1?')  # '#' in the text stays
`FINAL_RESULT=RESULT(var=ANSWER0)`
```
Question: What is next?
Program:
BOX9=LOC(image=IMAGE,object='dog')"""
    clean = parse_program(CLEAN, TABLE, INPUTS)
    tolerant = compile_program(messy, TABLE, INPUTS)
    assert [line.act for line in tolerant] == [line.act for line in clean]
    assert tolerant.source() == CLEAN
    assert [line.index for line in tolerant] == [0, 1, 2, 3]


def test_text_after_a_call_is_refused() -> None:
    assert errors_of(f"ANSWER0=COUNT(box=[]) then stop\n{GOOD_END}") == [("syntax", 0)]
    assert errors_of(f"ANSWER0=COUNT(box=[]); X=COUNT(box=[])\n{GOOD_END}") == [("syntax", 0)]


def test_nothing_in_a_program_is_evaluated() -> None:
    for text in (
        "X=__import__('os')",
        "X=LOC(image=IMAGE.size,object='a')",
        "X=LOC(image=IMAGE,object=open('f'))",
        "import os",
        "X=LOC(image=IMAGE,object=lambda: 1)",
    ):
        first = errors_of(f"{text}\nFINAL_RESULT=RESULT(var=X)")[0]
        assert first in (("syntax", 0), ("unknown_module", 0)), text


# -- fuzzing -------------------------------------------------------------------------------------

ERROR_KINDS = set(get_args(ProgramErrorKind))
TOKENS = [
    "BOX0", "BOX1", "IMAGE", "IMAGE0", "ANSWER0", "FINAL_RESULT", "=", "==", "(", ")", ",",
    "LOC", "CROP", "CROP_LEFTOF", "COUNT", "VQA", "EVAL", "RESULT", "SIZE", "FOO",
    "image=", "object=", "box=", "question=", "expr=", "var=", "'cat'", '"{ANSWER0} > 0"',
    "'", '"', "{", "}", "[", "]", "1", "-2.5", "\n", " ", "#", "```", "1. ", "Step 1:",
    "Question:", "Program:", "__import__", ".", "lambda", ":", "*", "\\", "\x00", "é",
]  # fmt: skip


def check_parse(text: str) -> Program | None:
    try:
        return compile_program(text, TABLE, INPUTS)
    except ProgramErrors as e:
        assert e.errors and {err.kind for err in e.errors} <= ERROR_KINDS
        assert format_errors(e.errors)
        return None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_arbitrary_text(text: str) -> None:
    check_parse(text)
    try:
        parse_program(text, TABLE, INPUTS)
    except ProgramErrors as e:
        assert {err.kind for err in e.errors} <= ERROR_KINDS


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=80).map("".join))
def test_fuzz_program_like_text_scripted_vision(text: str) -> None:
    program = check_parse(text)
    if program is not None:  # whatever the checker accepts runs to an outcome
        result = asyncio.run(run_program(program, {"IMAGE": scene_image()}, TABLE, context()))
        assert result.trace.status in ("finished", "error", "no_answer")


@st.composite
def valid_programs(draw: st.DrawFn) -> str:
    """Programs that are well formed by construction: the checker must accept all of them,
    and each must run to an answer or a step error."""
    images, boxes, answers, lines = ["IMAGE"], [], [], []
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["LOC", "CROP", "COUNT", "VQA", "EVAL", "SIZE"]))
        if op == "LOC" or (not boxes and op in ("CROP", "COUNT", "SIZE")):
            name = draw(st.sampled_from([*SCENE, "LEFT", "TOP"]))
            boxes.append(f"BOX{len(boxes)}")
            lines.append(f"{boxes[-1]}=LOC(image={draw(st.sampled_from(images))},object='{name}')")
        elif op == "CROP":
            module = draw(st.sampled_from([m.name for m in MODULES if m.name.startswith("CROP")]))
            image, box = draw(st.sampled_from(images)), draw(st.sampled_from(boxes))
            images.append(f"IMAGE{len(images) - 1}")
            lines.append(f"{images[-1]}={module}(image={image},box={box})")
        elif op in ("COUNT", "SIZE"):
            answers.append(f"ANSWER{len(answers)}")
            lines.append(f"{answers[-1]}={op}(box={draw(st.sampled_from(boxes))})")
        elif op == "VQA":
            answers.append(f"ANSWER{len(answers)}")
            image = draw(st.sampled_from(images))
            lines.append(f"{answers[-1]}=VQA(image={image},question='What color is it?')")
        elif answers:
            a = draw(st.sampled_from(answers))
            answers.append(f"ANSWER{len(answers)}")
            lines.append(f"{answers[-1]}=EVAL(expr=\"'yes' if {{{a}}} == 'red' else 'no'\")")
    last = answers[-1] if answers else images[-1]
    return "\n".join([*lines, f"FINAL_RESULT=RESULT(var={last})"])


@settings(max_examples=100, deadline=None)
@given(valid_programs())
def test_fuzz_well_formed_programs_run_to_an_outcome_scripted_vision(text: str) -> None:
    program = compile_program(text, TABLE, kinds_of({"IMAGE": scene_image()}))
    result = asyncio.run(run_program(program, {"IMAGE": scene_image()}, TABLE, context()))
    trace = result.trace
    if trace.status == "finished":
        assert result.answer is not None and trace.steps[-1].tool == "RESULT"
    else:
        assert trace.status == "no_answer" and trace.steps[-1].error_kind in (
            "bad_arguments",  # e.g. SIZE of no box, a box outside a later crop
        )
