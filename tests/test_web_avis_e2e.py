"""The viewer's AVIS view in a real headless browser (Debian's /usr/bin/chromium driven by
Playwright, no browser download), over a store holding AVIS traces written by hand the way
``hammr.avis`` lays a run out (see its docstring): the two sub-questions, the visual context,
one row per planned action with its candidates, verdict, extracted answer, backtracking and
working memory, the selected object's box on the image, and a forced final answer. A plain
HAMMR trace in the same run keeps the generic step view. Screenshots go to $TMPDIR."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage
from PIL import ImageDraw

from browser_support import CHROMIUM, Page, needs_browser, sync_playwright
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace, encode_value
from hammr.values import Box, Entity, Image
from hammr.web.static_report import write_report
from patience import HANG_S

SHOTS = Path(tempfile.gettempdir()) / "hammr-avis-e2e"
RUN = "avis-run"
DATASET = "infoseek"
SIZE = (320, 220)
BUILDING = [110.0, 40.0, 100.0, 170.0]
VISUAL_Q = "What is this building?"
KNOWLEDGE_Q = "What country does # belong to?"
FILLED_Q = "What country does Millennium Tower belong to?"
FORCED_NOTE = "answered from the best evidence (every path exhausted / budget spent)"
LONG_OBSERVATION = (
    "Object: [a tall glass tower with a spire, rising above lower office buildings; the "
    "facade is a curtain wall of blue glass panels and the top floors carry a narrow "
    "antenna (Caption, center)], Entities: [Millennium Tower (skyscraper): a 55-storey "
    "office tower on the bank of the Danube in Vienna (score=87.0), DC Tower 1 "
    "(skyscraper): the tallest building in Austria (score=52.0)], Text: [MILLENNIUM]"
)

pytestmark = needs_browser("test_web_avis_e2e")


# -- the traces ---------------------------------------------------------------------------------


def scene() -> Image:
    """A tower (BUILDING) against the sky over green ground, its name on it."""
    img = PILImage.new("RGB", SIZE, (150, 195, 235))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 180, SIZE[0], SIZE[1]), fill=(90, 140, 80))
    x, y, w, h = (int(v) for v in BUILDING)
    draw.rectangle((x, y, x + w, y + h), fill=(70, 110, 160), outline=(30, 40, 60), width=3)
    for row in range(y + 12, y + h - 10, 18):
        draw.line((x + 8, row, x + w - 8, row), fill=(180, 210, 240), width=2)
    draw.text((x + 12, y + 70), "MILLENNIUM", fill=(255, 255, 255))
    return Image(img)


def crop(root: Image, xywh: list[float]) -> Image:
    x, y, w, h = (int(v) for v in xywh)
    return Image(root.pixels.crop((x, y, x + w, y + h)), parent=root, crop_box=Box(x, y, w, h))


def avis_step(index: int, state: str, candidates: list[str], tool: str, **kw: Any) -> Step:
    kw.setdefault("arguments", {"query": VISUAL_Q})
    kw.setdefault("calls", 2)
    return Step(index=index, state=state, candidates=candidates, tool=tool, **kw)


def building_trace() -> Trace:
    """Decompose, context, then: image_search (not informative, backtrack to another action at
    START), object_select (informative, its box on the image), image_search (informative, the
    visual answer that fills '#'), web_search (answerable: the run ends)."""
    images: dict[str, Image] = {}
    root = scene()
    tower = crop(root, BUILDING)
    t = Trace(agent="AVIS", question="What country does this building belong to?", model="m")
    t.inputs = {"image": encode_value(root, images)}
    context = {
        "objects": [
            {
                "id": 0,
                "region": "whole image",
                "box": Box(0, 0, *SIZE),
                "image": root,
                "caption": "a tall tower against a blue sky",
                "entities": [Entity("Vienna", 0.41)],
                "text": "",
            },
            {
                "id": 1,
                "region": "center",
                "box": Box(*BUILDING),
                "image": tower,
                "caption": "a tall glass tower",
                "entities": [Entity("Millennium Tower", 0.87), Entity("DC Tower 1", 0.52)],
                "text": "MILLENNIUM",
            },
        ],
        "missing": [],
    }
    t.steps = [
        Step(
            index=0,
            tool="DECOMPOSE",
            raw=f"Visual: {VISUAL_Q}\nKnowledge: {KNOWLEDGE_Q}",
            output={"visual": VISUAL_Q, "knowledge": KNOWLEDGE_Q},
        ),
        Step(
            index=1,
            tool="CONTEXT",
            router="code",
            output=encode_value(context, images),
            observation="Objects: #0 whole image: a tall tower ...; #1 center: a tall glass tower",
        ),
        avis_step(
            2,
            "START",
            ["identical_image_search", "image_search", "object_select", "vqa"],
            "image_search",
            output={"retrievals": ["willow - Britannica Kids", "Silky Willow Live Stakes"]},
            observation="Retrievals: [willow - Britannica Kids (score=57.2), "
            "Silky Willow Live Stakes (score=55.3)]",
            verdict="not_informative",
            reasoner="The retrievals are about willows, nothing about the building. "
            "not informative",
            backtrack=True,
        ),
        avis_step(
            3,
            "START",
            ["identical_image_search", "object_select", "vqa"],
            "object_select",
            arguments={"query": VISUAL_Q, "object": 1},
            output=encode_value(
                {"id": 1, "region": "center", "box": Box(*BUILDING), "image": tower}, images
            ),
            observation=LONG_OBSERVATION,
            verdict="informative",
            reasoner="The query asks about the building; object 1 is the tower. informative",
            calls=3,
        ),
        avis_step(
            4,
            "object_select",
            ["identical_image_search", "image_search", "vqa"],
            "image_search",
            output={"retrievals": ["Millennium Tower Office Building in Vienna, Austria"]},
            observation="Retrievals: [Millennium tower wien hi-res stock photography (score="
            "48.4), Millennium Tower Office Building in Vienna, Austria (score=61.0)]",
            verdict="informative",
            extracted="Millennium Tower",
            reasoner='From Retrievals, there are many mentions about "Millennium Tower" with '
            "high score. Therefore, the predicted answer is Millennium Tower.",
        ),
        avis_step(
            5,
            "image_search",
            ["web_search", "llm_qa"],
            "web_search",
            arguments={"query": FILLED_Q},
            output="Title: Millennium Tower (Vienna)\nContent: The Millennium Tower is a "
            "skyscraper in Vienna, Austria.",
            observation="Title: Millennium Tower (Vienna)\nContent: The Millennium Tower is a "
            "skyscraper in Vienna, Austria.",
            verdict="answerable",
            extracted="Austria",
            reasoner="yes, answerable. The Millennium Tower is in Vienna, Austria. "
            "The answer is Austria.",
            finish="Austria",
        ),
    ]
    t.answer, t.status = "Austria", "finished"
    t.images.update(images)
    return t


def forced_trace() -> Trace:
    """Nothing informative: two backtracks at START, then an ANSWER from the best evidence."""
    images: dict[str, Image] = {}
    root = scene()
    t = Trace(agent="AVIS", question="Which body of water is this place next to?", model="m")
    t.inputs = {"image": encode_value(root, images)}
    context = {
        "objects": [{"id": 0, "region": "whole image", "box": Box(0, 0, *SIZE), "text": ""}],
        "missing": ["caption", "entity"],
    }
    query = {"query": "What is this place?"}
    t.steps = [
        Step(
            index=0,
            tool="DECOMPOSE",
            output={
                "visual": "What is this place?",
                "knowledge": "Which body of water is # located in or next to?",
            },
        ),
        Step(index=1, tool="CONTEXT", router="code", output=encode_value(context, images)),
        avis_step(
            2,
            "START",
            ["image_search", "object_select", "vqa"],
            "vqa",
            arguments=query,
            output="a building",
            observation="a building",
            verdict="not_informative",
            reasoner="not informative",
            backtrack=True,
        ),
        avis_step(
            3,
            "START",
            ["image_search", "object_select"],
            "image_search",
            arguments=query,
            output={"retrievals": []},
            observation="Retrievals: []",
            verdict="not_informative",
            reasoner="no retrievals. not informative",
            backtrack=True,
        ),
        Step(index=4, tool="ANSWER", forced=True, finish="land", reasoner="best guess: land"),
    ]
    t.answer, t.status = "land", "finished"
    t.images.update(images)
    return t


def plain_trace() -> Trace:
    """A HAMMR trace (no `state` anywhere): the generic step view."""
    images: dict[str, Image] = {}
    t = Trace(agent="QuestionDispatcherAgent", question="What colour is the sky?", model="m")
    t.inputs = {"image": encode_value(scene(), images)}
    t.steps = [
        Step(
            index=0,
            thought="ask the VQA tool",
            action="colour = VQA(image, 'sky colour')",
            tool="VQA",
            output="blue",
            observation="blue",
        ),
        Step(index=1, finish="blue"),
    ]
    t.answer, t.status = "blue", "finished"
    t.images.update(images)
    return t


def traces() -> dict[str, tuple[Trace, str]]:
    return {
        "building": (building_trace(), "Austria"),
        "forced": (forced_trace(), "Atlantic"),
        "plain": (plain_trace(), "blue"),
    }


@pytest.fixture(scope="module")
def avis_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("avis") / "runs.sqlite"
    with RunStore(path) as store:
        store.open_run(RUN, "infoseek", "avis")
        for sid, (trace, truth) in traces().items():
            store.add(
                RunRecord(
                    run=RUN,
                    sample_id=sid,
                    dataset=DATASET,
                    question_type="knowledge",
                    question=trace.question,
                    answers=(truth,),
                    prediction=trace.answer,
                    score=1.0 if trace.answer == truth else 0.0,
                    status=trace.status,
                    trace=trace,
                    llm_calls=trace.llm_calls,
                )
            )
    yield path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


# -- what the page must show --------------------------------------------------------------------


def chips(row: Any, which: str) -> list[str]:
    texts: list[str] = row.locator(f".avis-cands .avis-cand{which}").all_inner_texts()
    return texts


def check_building(page: Page, shot: str) -> None:
    block = page.locator(".trace > details.agent-block.top[data-agent=AVIS]")
    block.wait_for()
    avis = block.locator(".avis")
    assert avis.count() == 1
    # the sub-questions, '#' marked, and the knowledge question as asked with the answer in
    q = avis.locator(".avis-questions")
    assert q.locator(".avis-subq.visual .txt").inner_text() == VISUAL_Q
    assert q.locator(".avis-subq.knowledge .txt").inner_text() == KNOWLEDGE_Q
    assert q.locator(".avis-subq.knowledge .hole").count() == 1
    assert q.locator(".avis-subq.filled .txt").inner_text() == FILLED_Q
    assert q.locator(".avis-subq.filled mark.filled").inner_text() == "Millennium Tower"
    assert "asked at step #5 (web_search)" in q.locator(".avis-subq.filled").inner_text()
    # the visual context: objects with region, caption, entities with scores, text
    ctx = avis.locator(".avis-context")
    objs = ctx.locator("tr.avis-object")
    assert objs.count() == 2
    assert objs.locator(".obj-region").all_inner_texts() == ["whole image", "center"]
    assert objs.nth(1).locator(".obj-caption").inner_text() == "a tall glass tower"
    assert objs.nth(1).locator(".chip.entity").all_inner_texts() == [
        "Millennium Tower 0.87",
        "DC Tower 1 0.52",
    ]
    assert objs.nth(1).locator(".obj-text").inner_text() == "MILLENNIUM"
    assert ctx.locator(".avis-missing").count() == 0
    assert ctx.locator(".avis-context-body > .figure svg.overlay rect.box").count() == 2

    # one row per action: state, candidates (chosen highlighted, tried struck), verdict
    rows = avis.locator(".avis-steps > .avis-step")
    assert rows.count() == 4
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.state)") == [
        "START",
        "START",
        "object_select",
        "image_search",
    ]
    expected = [
        (["identical_image_search", "image_search", "object_select", "vqa"], [], "image_search"),
        (["identical_image_search", "object_select", "vqa"], ["image_search"], "object_select"),
        (["identical_image_search", "image_search", "vqa"], [], "image_search"),
        (["web_search", "llm_qa"], [], "web_search"),
    ]
    for i, (offered, tried, chosen) in enumerate(expected):
        row = rows.nth(i)
        assert chips(row, ":not(.tried)") == offered, i
        assert chips(row, ".tried") == tried, i
        assert chips(row, ".chosen") == [chosen], i
        assert row.locator(".avis-call > b").inner_text() == chosen
    tried_chip = rows.nth(1).locator(".avis-cand.tried")
    assert tried_chip.evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"
    assert rows.nth(3).locator(".avis-query").inner_text() == FILLED_Q

    badges = rows.locator(".avis-reason .avis-verdict")
    assert badges.all_inner_texts() == [
        "not informative",
        "informative",
        "informative",
        "answerable",
    ]
    assert badges.evaluate_all("bs => bs.map(b => b.className)") == [
        "avis-verdict not-informative",
        "avis-verdict informative",
        "avis-verdict informative",
        "avis-verdict answerable",
    ]
    colours = badges.evaluate_all("bs => bs.map(b => getComputedStyle(b).color)")
    assert len(set(colours)) == 3, colours  # the three verdicts look different
    # backtrack: only on the first row; the planner stays at START
    assert rows.evaluate_all("rs => rs.map(r => r.classList.contains('backtracked'))") == [
        True,
        False,
        False,
        False,
    ]
    assert "backtrack" in rows.nth(0).locator(".avis-head .backtrack-mark").inner_text()
    assert block.locator(".backtrack-mark").count() == 2  # head and reasoner column of row 1
    # working memory: informative pushes, a backtrack stays
    memory = [
        rows.nth(i).locator(".avis-memory .mem").all_inner_texts() for i in range(rows.count())
    ]
    assert memory == [
        ["START"],
        ["START", "object_select"],
        ["START", "object_select", "image_search"],
        ["START", "object_select", "image_search"],
    ]
    changes = rows.locator(".avis-memory .change").all_inner_texts()
    assert changes == ["stay, choose again", "push object_select", "push image_search", "answered"]
    # extracted answers; the last row ends the run
    assert rows.nth(2).locator(".avis-extracted b").inner_text() == "Millennium Tower"
    assert rows.nth(3).locator(".avis-extracted b").inner_text() == "Austria"
    assert rows.nth(3).locator(".avis-ends").inner_text() == "the run ends here: Austria"
    assert [rows.nth(i).get_attribute("data-phase") for i in range(4)] == [
        "visual",
        "visual",
        "visual",
        "knowledge",
    ]

    # the object_select row: the selected box on the image at its place, and the crop
    sel = rows.nth(1)
    rect = sel.locator(".avis-visuals svg.overlay rect.box")
    assert rect.count() == 1
    assert [float(rect.get_attribute(k) or "nan") for k in ("x", "y", "width", "height")] == (
        BUILDING
    )
    assert rect.get_attribute("data-label") == "object 1"
    assert sel.locator(".avis-visuals img").count() == 2  # the image and the crop
    # the long observation folds; the reasoner's text is collapsed until opened
    obs = sel.locator("details.avis-obs")
    assert obs.evaluate("e => e.open") is False
    obs.locator("summary").click()
    assert sel.locator("details.avis-obs pre").inner_text() == LONG_OBSERVATION
    reasoner = rows.nth(2).locator("details.avis-reasoner")
    assert reasoner.evaluate("e => e.open") is False
    assert not reasoner.locator("pre").is_visible()
    reasoner.locator("summary").click()
    assert "Millennium Tower" in reasoner.locator("pre").inner_text()
    # the generic step view stays as a detail
    assert rows.nth(0).locator("details.line-more .step[data-step='2']").count() == 1

    final = avis.locator(".avis-final")
    assert final.locator(".avis-final-answer").inner_text() == "Austria"
    assert final.locator(".avis-final-how").inner_text() == "answerable at step #5 (web_search)"
    assert page.locator("#prediction .value").inner_text() == "Austria"
    # every shown image has loaded (those in closed details are lazy and need not)
    for y in ("document.body.scrollHeight", "0"):
        page.evaluate(f"window.scrollTo(0, {y})")
        page.wait_for_function(
            "[...document.images].filter(i => !i.closest('details:not([open])'))"
            ".every(i => i.complete && i.naturalWidth > 0)",
            timeout=HANG_S * 1000,
        )
    page.screenshot(path=str(SHOTS / shot), full_page=True)


def check_forced(page: Page, base: str) -> None:
    page.goto(base + f"#/run/{RUN}/sample/{DATASET}/forced")
    avis = page.locator(".trace .avis")
    avis.wait_for()
    assert avis.locator(".avis-missing").inner_text() == "not available: caption, entity"
    assert avis.locator(".avis-subq.filled").inner_text().endswith("no visual answer was found")
    rows = avis.locator(".avis-steps > .avis-step")
    assert rows.count() == 3
    assert chips(rows.nth(1), ".tried") == ["vqa"]
    assert chips(rows.nth(1), ".chosen") == ["image_search"]
    assert rows.locator(".avis-reason .avis-verdict").all_inner_texts() == ["not informative"] * 2
    answer = rows.nth(2)
    assert "avis-answer" in (answer.get_attribute("class") or "")
    assert "forced" in (answer.get_attribute("class") or "")
    assert answer.locator(".avis-forced-note").inner_text() == FORCED_NOTE
    assert answer.locator(".avis-extracted b").inner_text() == "land"
    assert avis.locator(".avis-final-answer").inner_text() == "land"
    assert avis.locator(".avis-final-how").inner_text() == FORCED_NOTE


def check_plain(page: Page, base: str) -> None:
    page.goto(base + f"#/run/{RUN}/sample/{DATASET}/plain")
    block = page.locator(".trace > details.agent-block.top[data-agent=QuestionDispatcherAgent]")
    block.wait_for()
    assert block.locator(".avis").count() == 0
    assert block.locator(":scope > .steps > .step").count() == 2
    assert "VQA" in block.inner_text()


def open_page(browser: object, errors: list[str]) -> Page:
    page: Page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page


def test_viewer_shows_an_avis_run(avis_store: Path, browser: object) -> None:
    from hammr.web.server import ViewerServer

    store = RunStore(avis_store)
    server = ViewerServer(store, port=0)
    server.start_in_thread()
    try:
        errors: list[str] = []
        page = open_page(browser, errors)
        page.goto(server.url + f"#/run/{RUN}")
        page.locator("#samples tbody tr.sample-row[data-id=building]").click()
        page.wait_for_function(f"location.hash.endsWith('/sample/{DATASET}/building')")
        check_building(page, "avis_sample.png")
        check_forced(page, server.url)
        page.screenshot(path=str(SHOTS / "avis_forced.png"), full_page=True)
        check_plain(page, server.url)
        assert not errors, errors
    finally:
        server.stop()
        store.close()


def test_static_report_shows_the_avis_run(
    avis_store: Path, browser: object, tmp_path: Path
) -> None:
    out = tmp_path / "avis.html"
    with RunStore(avis_store) as store:
        write_report(store, [RUN], out, ci_samples=20)
    html = out.read_text()
    assert "function renderAvis(" in html and 'src="static/app.js"' not in html
    errors: list[str] = []
    page = open_page(browser, errors)
    page.goto(out.as_uri() + f"#/run/{RUN}/sample/{DATASET}/building")
    check_building(page, "static_avis_sample.png")
    check_forced(page, out.as_uri())
    check_plain(page, out.as_uri())
    assert not errors, errors
