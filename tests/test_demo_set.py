"""The bundled demo set (examples/demo/): its files, its ground truth checked against the real
offline backends (tesseract, the bundled knowledge base), and the annotation stand-in."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from conftest import needs_tesseract
from demo_support import (
    DEMO,
    QUESTION_TYPES,
    AnnotatedVision,
    DemoQuestion,
    HaarThenAnnotations,
    demo_annotations,
    demo_backends,
    demo_image,
    load_demo_questions,
)
from hammr.tools.base import ToolContext, bind_arguments
from hammr.tools.image_tools import CropImage, crop_one
from hammr.tools.knowledge_tools import WikipediaArticle
from hammr.tools.vision_tools import VQA, DetectObject, RecognizeEntity
from hammr.values import Box, Image

QUESTIONS = load_demo_questions()
ENCYCLOPEDIC = [q for q in QUESTIONS if q.type in ("single_hop", "two_hop")]


def norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9.:]+", " ", text.lower()).split())


async def call(tool: Any, ctx: ToolContext, *args: Any) -> Any:
    return (await tool.invoke(bind_arguments(tool, list(args), {}), ctx)).value


# -- the files -------------------------------------------------------------------------------


def test_questions_are_well_formed() -> None:
    assert len(QUESTIONS) >= 24
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    counts = Counter(q.type for q in QUESTIONS)
    assert set(counts) == set(QUESTION_TYPES)
    assert min(counts.values()) >= 3, counts
    for q in QUESTIONS:
        assert q.agent == QUESTION_TYPES[q.type], q.id
        assert q.question.strip() and q.answer.strip(), q.id
        assert (q.image2 is not None) == (q.type == "two_image"), q.id
        assert (q.point is not None) == (q.type in ("local_pointing", "look_twice")), q.id
        assert bool(q.entities) == (q in ENCYCLOPEDIC), q.id
    for q in QUESTIONS:
        if q.type == "two_image":
            assert q.answer in ("true", "false"), q.id


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q.id)
def test_files_exist_load_and_points_lie_inside(q: DemoQuestion) -> None:
    for name in q.images:
        img = demo_image(name)
        assert (img.width, img.height) == tuple(demo_annotations()[name]["size"])
    if q.point is not None:
        img = demo_image(q.image)
        assert 0 <= q.point[0] < img.width and 0 <= q.point[1] < img.height


def test_every_image_is_annotated_and_every_box_lies_inside() -> None:
    files = {p.name for p in DEMO.iterdir() if p.suffix in (".jpg", ".png")}
    assert files == set(demo_annotations())
    assert {n for q in QUESTIONS for n in q.images} <= files
    for name, ann in demo_annotations().items():
        width, height = ann["size"]
        assert ann["caption"] and ann["objects"], name
        for o in ann["objects"]:
            x, y, w, h = o["box"]
            assert o["label"] and w > 0 and h > 0, (name, o)
            assert x >= 0 and y >= 0 and x + w <= width and y + h <= height, (name, o)


def test_the_folder_stays_small() -> None:
    assert sum(p.stat().st_size for p in DEMO.iterdir()) < 3_000_000


def test_pointed_objects_are_annotated_under_the_point() -> None:
    for q in QUESTIONS:
        if q.point is None:
            continue
        x, y = q.point
        under = [
            o
            for o in demo_annotations()[q.image]["objects"]
            if o["box"][0] <= x < o["box"][0] + o["box"][2]
            and o["box"][1] <= y < o["box"][1] + o["box"][3]
        ]
        assert under, q.id


# -- ground truth against the real backends --------------------------------------------------


def text_objects(name: str) -> list[dict[str, Any]]:
    return [o for o in demo_annotations()[name]["objects"] if "text" in o]


@needs_tesseract
async def test_tesseract_reads_every_annotated_text() -> None:
    from hammr.backends.ocr.tesseract import from_config

    ocr = from_config({})
    crops, texts = [], []
    for name in demo_annotations():
        img = demo_image(name)
        for o in text_objects(name):
            crops.append(crop_one(img, Box.from_xywh(o["box"])))
            texts.append(o["text"])
    read = await ocr.read(crops)
    wrong = [(t, r) for t, r in zip(texts, read, strict=True) if norm(t) not in norm(r)]
    assert not wrong


@needs_tesseract
async def test_printed_ocr_answers_are_read_from_their_crop() -> None:
    from hammr.backends.ocr.tesseract import from_config

    ocr = from_config({})
    printed = 0
    for q in QUESTIONS:
        if q.type != "ocr_reasoning":
            continue
        holders = [o for o in text_objects(q.image) if norm(q.answer) in norm(o["text"])]
        if not holders:  # computed answers (a sum, "latte" from prices) are not printed
            continue
        smallest = min(holders, key=lambda o: o["box"][2] * o["box"][3])
        (text,) = await ocr.read([crop_one(demo_image(q.image), Box.from_xywh(smallest["box"]))])
        assert norm(q.answer) in norm(text), (q.id, text)
        printed += 1
    assert printed >= 5


@pytest.fixture(scope="module")
def kb_ctx() -> ToolContext:
    from hammr.backends.kb.sqlite_kb import from_config

    return ToolContext(backends={"kb": from_config({})})


@pytest.mark.parametrize("q", ENCYCLOPEDIC, ids=lambda q: q.id)
async def test_the_knowledge_base_holds_every_hop(q: DemoQuestion, kb_ctx: ToolContext) -> None:
    assert len(q.entities) == (1 if q.type == "single_hop" else 2)
    # the first hop is what a perfect recogniser says about the image
    assert q.entities[0] == demo_annotations()[q.image]["entity"]
    pages = [await call(WikipediaArticle, kb_ctx, e) for e in q.entities]
    assert [p.title for p in pages] == list(q.entities)
    if len(pages) == 2:  # the first article leads to the second
        second = q.entities[1].split(" (")[0]
        assert second.split(",")[0] in pages[0].text
    assert norm(q.answer) in norm(pages[-1].text)


# -- the annotation stand-in -------------------------------------------------------------------


async def test_stand_in_detects_in_the_handed_images_pixels() -> None:
    vision = AnnotatedVision()
    coins = demo_image("coins.jpg")
    (found,) = await vision.detect([coins], ["coins"])
    assert len(found) == 24 and all(b.label == "coins" and b.score == 1.0 for b in found)
    ctx = ToolContext(backends={"detect": vision})
    top = await call(CropImage, ctx, coins, Box(0, 0, 384, 80))
    in_crop = await call(DetectObject, ctx, top, "coin")
    assert len(in_crop) == 6  # the top row; boxes back in root pixels
    ann_boxes = [Box.from_xywh(o["box"]) for o in demo_annotations()["coins.jpg"]["objects"][:6]]
    assert all(max(b.iou(a) for a in ann_boxes) > 0.99 for b in in_crop)
    shapes = demo_image("shapes.png")
    counts = await vision.detect([shapes] * 4, ["red shapes", "circles", "yellow triangle", "dog"])
    assert [len(c) for c in counts] == [5, 5, 3, 0]
    assert await vision.contains([shapes, shapes], ["blue square", "blue circle"]) == [True, False]


async def test_stand_in_answers_about_the_pointed_object() -> None:
    ctx = ToolContext(backends={"vqa": AnnotatedVision()})
    for q in QUESTIONS:
        if q.type != "local_pointing":
            continue
        assert q.point is not None
        img = demo_image(q.image)
        x, y = q.point
        crop = await call(CropImage, ctx, img, Box(x - 40, y - 40, 80, 80))
        assert await call(VQA, ctx, crop, q.question) == q.answer, q.id


async def test_stand_in_recognises_and_captions() -> None:
    vision = AnnotatedVision()
    ctx = ToolContext(backends={"entity": vision, "caption": vision})
    for q in ENCYCLOPEDIC:
        entity = await call(RecognizeEntity, ctx, demo_image(q.image))
        assert entity.name == q.entities[0]
    astronaut = demo_image("astronaut.jpg")
    flag = crop_one(astronaut, Box(0, 0, 90, 250))
    (caption,) = await vision.caption([flag])
    assert caption == "a flag"
    assert (await vision.recognize([flag]))[0][0].name == "Flag of the United States"
    with pytest.raises(AssertionError, match="only knows the demo images"):
        await vision.caption([Image(astronaut.pixels.resize((64, 64)))])


@needs_tesseract
async def test_demo_backends_mix_haar_and_the_annotations() -> None:
    backends = demo_backends()
    detect = backends["detect"]
    assert isinstance(detect, HaarThenAnnotations)
    astronaut = demo_image("astronaut.jpg")
    (faces,) = await detect.detect([astronaut], ["face"])  # the real cascade
    assert len(faces) == 1 and faces[0].score != 1.0
    (towers,) = await detect.detect([demo_image("rocket.jpg")], ["towers"])  # annotations
    assert len(towers) == 4
    (title,) = [o for o in demo_annotations()["menu.png"]["objects"] if o["label"] == "menu title"]
    crop = crop_one(demo_image("menu.png"), Box.from_xywh(title["box"]))
    assert await backends["ocr"].read([crop]) == ["CAFE MENU"]
    assert (await backends["kb"].article("Eileen Collins")).title == "Eileen Collins"


# -- the multiple-choice set of the muse-demo suite ---------------------------------------------

MC = [json.loads(line) for line in (DEMO / "mc_questions.jsonl").read_text().splitlines()]
MC_BY_ID = {q["id"]: q for q in MC}


def mc_answer(qid: str) -> str:
    q = MC_BY_ID[qid]
    return str(q["choices"]["ABCD".index(q["answer"])])


def objects(image: str, label: str) -> list[dict[str, Any]]:
    return [o for o in demo_annotations()[image]["objects"] if o["label"] == label]


def centre(o: dict[str, Any]) -> tuple[float, float]:
    x, y, w, h = o["box"]
    return x + w / 2, y + h / 2


def test_multiple_choice_questions_are_well_formed() -> None:
    assert 16 <= len(MC) <= 24 and len(MC_BY_ID) == len(MC)
    counts = Counter(q["type"] for q in MC)
    assert set(counts) == {"attribute", "relation"} and min(counts.values()) >= 8
    for q in MC:
        assert q["image"] in demo_annotations(), q["id"]
        assert (DEMO / q["image"]).is_file(), q["id"]
        assert 2 <= len(q["choices"]) <= 4 and len(set(q["choices"])) == len(q["choices"])
        assert q["answer"] in "ABCD"[: len(q["choices"])], q["id"]
        assert q["question"].strip().endswith("?"), q["id"]
    # the right letter is not always the same one
    assert len({q["answer"] for q in MC}) == 4


def test_multiple_choice_set_loads_through_the_muse_demo_suite() -> None:
    from hammr.eval.suites import load_suite

    pairs = load_suite("muse-demo").samples(DEMO, check_images=True)
    assert len(pairs) == len(MC)
    for entry, s in pairs:
        q = MC_BY_ID[s.id]
        assert entry.name == "muse_demo" and s.dataset == "muse_demo"
        assert s.question_type == q["type"] and s.choices == tuple(q["choices"])
        assert s.answers == (q["answer"],)


LEFT_RIGHT = {
    "mc_r01": ("street.png", "tree", "car"),
    "mc_r02": ("street.png", "street sign", "car"),
    "mc_r03": ("coffee.jpg", "spoon", "cup"),
    "mc_r04": ("camera.jpg", "tripod", "man"),
    "mc_r10": ("motorcycle_left.jpg", "front wheel", "rear wheel"),
}


@pytest.mark.parametrize("qid", sorted(LEFT_RIGHT))
def test_left_right_answers_agree_with_the_annotated_boxes(qid: str) -> None:
    image, thing, other = LEFT_RIGHT[qid]
    assert MC_BY_ID[qid]["image"] == image
    (a,), (b,) = objects(image, thing), objects(image, other)
    side = "left" if centre(a)[0] < centre(b)[0] else "right"
    assert mc_answer(qid) == side


def poster_grid() -> list[list[str]]:
    words = sorted(objects("poster.png", "word"), key=lambda o: centre(o)[1])
    rows = [words[i : i + 3] for i in range(0, 9, 3)]
    return [[o["text"] for o in sorted(r, key=lambda o: centre(o)[0])] for r in rows]


def test_poster_shapes_and_menu_relations_agree_with_the_annotations() -> None:
    grid = poster_grid()
    at = {w: (r, c) for r, row in enumerate(grid) for c, w in enumerate(row)}
    r, c = at["CLOUD"]
    assert mc_answer("mc_r05") == grid[r - 1][c]
    r, c = at["RIVER"]
    assert mc_answer("mc_r06") == grid[r][c + 1]
    r, c = at["PIANO"]
    assert mc_answer("mc_r07") == grid[r + 1][c]
    items = [o["text"].rsplit(" ", 1)[0] for o in objects("menu.png", "menu item")]
    assert mc_answer("mc_r09") == items[items.index("CAPPUCCINO") + 1]
    # shapes: the middle row, left to right
    shapes = demo_annotations()["shapes.png"]["objects"]
    middle = sorted((o for o in shapes if 150 < centre(o)[1] < 250), key=lambda o: centre(o)[0])
    green = next(i for i, o in enumerate(middle) if o["caption"] == "a green circle")
    assert mc_answer("mc_r08") == middle[green + 1]["caption"]


def test_attribute_answers_agree_with_the_annotations() -> None:
    colours = {
        "mc_a01": ("street.png", "car"),
        "mc_a06": ("astronaut.jpg", "spacesuit"),
        "mc_a07": ("chelsea.jpg", "eye"),
        "mc_a09": ("coffee.jpg", "cup"),
    }
    for qid, (image, label) in colours.items():
        assert {o["attributes"]["color"] for o in objects(image, label)} == {mc_answer(qid)}
    (tiger,) = [o for o in objects("poster.png", "word") if o["text"] == "TIGER"]
    assert mc_answer("mc_a10") == tiger["attributes"]["color"]
    (sign,) = objects("street.png", "street sign")
    assert mc_answer("mc_a02") == sign["text"]
    (number,) = objects("card_right.png", "number")
    assert mc_answer("mc_a08") == number["text"]
    prices = {
        o["text"].rsplit(" ", 1)[0]: o["attributes"]["price"]
        for o in objects("menu.png", "menu item")
    }
    assert mc_answer("mc_a03") == prices["LATTE"]
    assert mc_answer("mc_a04") == str(len(objects("bakery.png", "loaf of bread")))
    assert mc_answer("mc_a05") == str(len(objects("shapes.png", "triangle")))
