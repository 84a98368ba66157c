"""The viewer in a real headless browser (Debian's /usr/bin/chromium driven by Playwright, no
browser download) over a real stored run: `hammr eval --system hammr` on a tiny suite whose LLM
is the scripted fake server. The dispatcher hands the question to OCRReasoningAgent, which
tries DetectObject (no backend: an error), crops a region and reads it; the page must show the
two-level trace, the child agent's steps and the crop's region drawn on the image. Screenshots
go to tests/artifacts/."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage
from PIL import ImageDraw

from browser_support import CHROMIUM, Page, needs_browser, sync_playwright
from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Image
from hammr.values import Page as KbPage
from hammr.web.static_report import write_report
from patience import HANG_S
from test_eval_cli import env_for, make_data

ARTIFACTS = Path(__file__).parent / "artifacts"
QID = re.compile(r"QID-(\d+)")
REGION = [40, 50, 200, 80]

pytestmark = needs_browser("test_web_e2e")


def script(seen: Seen) -> Reply:
    """Dispatcher -> OCRReasoningAgent(DetectObject, CropImage, OCR, Finish) -> Finish."""
    msgs = seen.body.get("messages") or []
    system = str(msgs[0].get("content", "")) if msgs else ""
    convo = json.dumps(msgs[1:])
    found = QID.findall(json.dumps(msgs))
    i = int(found[-1]) if found else -1
    said = f"ans{i}" if i % 3 else "nope"
    turn = convo.count("[Observe]")
    if system.startswith("You do not answer questions yourself"):
        if turn == 0:
            text = (
                "[Thought]: The answer is printed text in the image.\n"
                "[Act]: answer = OCRReasoningAgent(question, image)"
            )
        else:
            text = f"[Thought]: The specialist answered.\n[Finish]: {said}"
    elif turn == 0:
        text = "[Thought]: Find the sign first.\n[Act]: signs = DetectObject(image, 'sign')"
    elif turn == 1:
        text = (
            "[Thought]: No detector; crop where the sign is.\n"
            f"[Act]: sign = CropImage(image, {REGION})"
        )
    elif turn == 2:
        text = "[Thought]: Read the crop.\n[Act]: text = OCR(sign)"
    else:
        text = f"[Thought]: The sign says it.\n[Finish]: {said}"
    return Reply(body=ok_body(text))


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("e2e")
    suite, data = make_data(root, n=4)
    for i in range(4):  # bigger pictures than make_data's, with a sign to crop
        img = PILImage.new("RGB", (320, 200), (120 + 30 * i, 170, 205))
        draw = ImageDraw.Draw(img)
        draw.rectangle((0, 150, 320, 200), fill=(90, 130, 80))
        x, y, w, h = REGION
        draw.rectangle((x, y, x + w, y + h), fill=(200, 30, 30), outline=(255, 255, 255), width=3)
        draw.text((x + 20, y + 30), f"SIGN {i}", fill=(255, 255, 255))
        img.save(data / "img" / f"{i}.png")
    server = FakeServer()
    server.responder = script
    env = env_for(server, root)
    env["HAMMR_AGENT__ROUTER"] = "llm"
    store = root / "runs.sqlite"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    r = CliRunner().invoke(main, [*args, "--system", "hammr", "--name", "e2e"], env=env)
    server.close()
    assert r.exit_code == 0, r.stderr
    with RunStore(store) as s:
        rec = s.get("e2e", "signs", "s0")
        assert rec.trace is not None and rec.score == 0.0
        child = rec.trace.steps[0].child
        assert child is not None and child.agent == "OCRReasoningAgent", rec.trace
    yield store, "e2e"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    ARTIFACTS.mkdir(exist_ok=True)
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


def check_trace(page: Page, shot: str) -> None:
    """The open sample shows the dispatcher with the specialist nested, its steps, and boxes."""
    top = page.locator(".trace > details.agent-block.top")
    top.wait_for()
    assert top.get_attribute("data-agent") == "QuestionDispatcherAgent"
    child = top.locator(".agent-block[data-agent=OCRReasoningAgent]")
    assert child.count() == 1
    assert child.evaluate("el => el.open") is True
    steps = child.locator(".step")
    assert steps.count() == 4
    text = child.inner_text()
    for tool in ("DetectObject", "CropImage", "OCR"):
        assert tool in text
    assert child.locator(".step.has-error .badge.err").count() >= 1  # DetectObject: no backend
    assert "wrong" in page.locator("#prediction").inner_text()
    # the crop's region outlined on the original image, at the crop's place
    region = page.locator("svg.overlay rect.box.region").first
    region.wait_for()
    assert [float(region.get_attribute(k) or "nan") for k in ("x", "y", "width", "height")] == [
        float(v) for v in REGION
    ]
    box = region.bounding_box()
    assert box is not None and box["width"] > 20 and box["height"] > 5
    assert page.locator("svg.overlay text.label").count() >= 1
    # every image has loaded (served by /api/images or embedded as data: URLs)
    page.wait_for_function(
        "[...document.images].every(i => i.complete && i.naturalWidth > 0)", timeout=HANG_S * 1000
    )
    # collapsing the child block hides its steps
    child.locator(":scope > summary").click()
    assert not steps.first.is_visible()
    child.locator(":scope > summary").click()
    assert steps.first.is_visible()
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)


def test_viewer_shows_runs_filters_and_the_two_level_trace(
    stored_run: tuple[Path, str], browser: object
) -> None:
    from hammr.web.server import ViewerServer

    store_path, run = stored_run
    store = RunStore(store_path)
    server = ViewerServer(store, port=0)
    server.start_in_thread()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.locator("tr.run-row[data-run=e2e]").wait_for()
        assert "Macro avg" in page.inner_text("table.runs")
        page.screenshot(path=str(ARTIFACTS / "runs.png"), full_page=True)

        page.click("a.run-link")
        page.locator("#samples tbody tr.sample-row").first.wait_for()
        assert page.locator("#samples tbody tr.sample-row").count() == 4
        assert page.inner_text("#page-info") == "1–4 of 4"
        page.select_option("#filter-correct", "false")
        page.wait_for_function("location.hash.includes('correct=false')")
        page.wait_for_function(
            "document.querySelectorAll('#samples tbody tr.sample-row').length === 2"
        )
        ids = page.locator("#samples tbody tr.sample-row").evaluate_all(
            "rows => rows.map(r => r.dataset.id)"
        )
        assert sorted(ids) == ["s0", "s3"]
        page.screenshot(path=str(ARTIFACTS / "run_wrong.png"), full_page=True)

        page.click("#samples tbody tr.sample-row[data-id=s0] td.question")
        page.wait_for_function("location.hash.includes('/sample/signs/s0')")
        check_trace(page, "sample_trace.png")
        assert not errors, errors

        # the same run against itself: nothing differs
        page.goto(server.url + f"#/compare/{run}/{run}")
        page.locator("#filter-differ").wait_for()
        page.wait_for_function("document.querySelector('#page-info')")
        assert page.inner_text("#page-info") == "0–0 of 0"
        page.uncheck("#filter-differ")
        page.wait_for_function("document.querySelector('#page-info').textContent.endsWith('of 4')")
        page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
        assert not errors, errors
    finally:
        server.stop()
        store.close()


def test_static_report_renders_the_same_trace_from_disk(
    stored_run: tuple[Path, str], browser: object, tmp_path: Path
) -> None:
    store_path, run = stored_run
    out = tmp_path / "report.html"
    r = CliRunner().invoke(
        main,
        ["report", run, "--store", str(store_path), "--html", str(out)],
        env={"HAMMR_CONFIG": ""},
    )
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert 'id="hammr-data"' in html and "http://" not in html.split('id="hammr-data"')[0]
    shutil.copy(out, ARTIFACTS / "report.html")
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda req: requests.append(req.url))
    page.goto(out.as_uri() + f"#/run/{run}?correct=false")
    page.locator("#samples tbody tr.sample-row").first.wait_for()
    assert page.locator("#samples tbody tr.sample-row").count() == 2
    page.click("#samples tbody tr.sample-row[data-id=s0] a")
    check_trace(page, "static_sample_trace.png")
    assert not errors, errors
    assert all(u.startswith(("file:", "data:")) for u in requests), requests


# -- names with '/', the judge line, page links -------------------------------------------------

SLASH_RUN = "exp/try1"
SLASH_ID = "val/0001"  # V* Bench ids are <category>/<name>
SAFE_PAGES = {"https://en.wikipedia.org/wiki/Cat": "Cat", "http://example.org/dog": "Dog"}
UNSAFE_PAGES = {
    "javascript:alert(document.domain)": "Evil",
    " JavaScript:alert(1)": "Evil too",
    "file:///etc/passwd": "Local",
    "data:text/html,<script>alert(1)</script>": "Inline",
}


def page_trace(question: str) -> Trace:
    """A dispatcher whose inputs hold an image and pages, and a step whose output is a page."""
    images: dict[str, Image] = {}
    t = Trace(agent="QuestionDispatcherAgent", question=question, model="m", answer="a cat")
    t.status = "finished"
    pages = [KbPage(title, "some words here", url) for url, title in SAFE_PAGES.items()]
    pages += [KbPage(title, "more words", url) for url, title in UNSAFE_PAGES.items()]
    t.inputs = {
        "image": encode_value(Image(PILImage.new("RGB", (64, 48), (30, 90, 200))), images),
        "pages": encode_value(pages, images),
    }
    t.steps.append(
        Step(
            index=0,
            thought="look it up",
            action="article = WikipediaArticle('Mouse')",
            tool="WikipediaArticle",
            output_var="article",
            output=encode_value(KbPage("Mouse", "a small rodent", "javascript:alert('mouse')"), {}),
            observation="page 'Mouse' (3 words)",
        )
    )
    t.steps.append(
        Step(
            index=1,
            action="answer = AnswerWithContext('What is it?', article)",
            tool="AnswerWithContext",
            output_var="answer",
            output="a cat",
            observation="a cat (stored in 'answer')",
            tool_calls=1,  # the tool asked the model once: shown beside the step's own usage
            tool_usage=StepUsage(120, 4),
        )
    )
    t.steps.append(Step(index=2, finish="a cat"))
    t.images.update(images)
    return t


@pytest.fixture(scope="module")
def slash_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("slash") / "runs.sqlite"
    with RunStore(path) as store:
        store.open_run(SLASH_RUN, "vstar", "hammr")
        for sid, judge in ((SLASH_ID, "none"), ("val/0002", "exact"), ("rel/0001", "exact")):
            store.add(
                RunRecord(
                    run=SLASH_RUN,
                    sample_id=sid,
                    dataset="vstar",
                    question_type="direct_attributes",
                    question=f"What animal is in {sid}?",
                    answers=("a cat",),
                    prediction="a cat",
                    score=1.0,
                    judge=judge,
                    trace=page_trace(f"What animal is in {sid}?"),
                )
            )
    yield path


def check_slash_sample(page: Page) -> None:
    """The open sample is vstar / val/0001: its content, the judge line and the page links."""
    page.locator("#judge").wait_for()
    assert page.locator(".toolbar h1").inner_text() == f"vstar / {SLASH_ID}"
    assert page.locator(".question").first.inner_text() == f"What animal is in {SLASH_ID}?"
    # "Judge" and its value are apart (it read "JUDGEnone")
    judge = page.locator("#judge")
    assert page.locator("#judge .judge-value").inner_text() == "none"
    assert re.fullmatch(r"judge\s+none", judge.inner_text().strip(), re.IGNORECASE), (
        judge.inner_text()
    )
    tag = judge.locator(".tag").bounding_box()
    value = page.locator("#judge .judge-value").bounding_box()
    assert tag is not None and value is not None and value["x"] >= tag["x"] + tag["width"] + 4
    # pages: a link only for http(s) URLs; the others are text, not links
    chips = page.locator(".chip.page").evaluate_all(
        "cs => cs.map(c => { const a = c.querySelector('a'), b = c.querySelector('b');"
        " return [(a || b).textContent, a ? a.getAttribute('href') : null]; })"
    )
    linked = {href: title for title, href in chips if href is not None}
    unlinked = sorted(title for title, href in chips if href is None)
    assert linked == SAFE_PAGES
    assert unlinked == sorted([*UNSAFE_PAGES.values(), "Mouse"])  # + the step's output
    assert "javascript:alert(document.domain)" in page.locator(".inputs").inner_text()
    bad = page.evaluate(
        "[...document.querySelectorAll('a[href]')].map(e => e.getAttribute('href'))"
        ".filter(h => !/^(#|https?:)/i.test(h))"
    )
    assert bad == [], bad
    # the model calls a tool made, where the step's own tokens are shown
    tool_calls = page.locator(".metric", has_text="tool: 1 call").inner_text()
    assert tool_calls == "tool: 1 call · 120→4 tok"


def test_names_with_slashes_open_by_clicking(slash_store: Path, browser: object) -> None:
    from hammr.web.server import ViewerServer

    store = RunStore(slash_store)
    server = ViewerServer(store, port=0)
    server.start_in_thread()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        errors: list[str] = []
        bad_status: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: bad_status.append(r.url) if r.status >= 400 else None)
        page.goto(server.url)
        page.locator(f'tr.run-row[data-run="{SLASH_RUN}"] a.run-link').click()
        page.wait_for_function("location.hash === '#/run/exp%2Ftry1'")
        rows = page.locator("#samples tbody tr.sample-row")
        rows.first.wait_for()
        assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.id)")) == [
            "rel/0001", "val/0001", "val/0002",
        ]  # fmt: skip
        assert page.locator(".toolbar h1").inner_text() == SLASH_RUN
        page.click(f'#samples tbody tr.sample-row[data-id="{SLASH_ID}"] td.question')
        page.wait_for_function("location.hash === '#/run/exp%2Ftry1/sample/vstar/val%2F0001'")
        check_slash_sample(page)
        page.screenshot(path=str(ARTIFACTS / "slash_sample.png"), full_page=True)

        # the crumb back to the run, and a deep link opened afresh
        page.click("#crumbs a:has-text('exp/try1')")
        page.wait_for_function("location.hash === '#/run/exp%2Ftry1'")
        rows.first.wait_for()
        fresh = browser.new_page()  # type: ignore[attr-defined]
        fresh.on("pageerror", lambda e: errors.append(str(e)))
        fresh.goto(server.url + "#/run/exp%2Ftry1/sample/vstar/val%2F0001")
        check_slash_sample(fresh)

        # compare the run with itself and follow a sample link
        page.goto(server.url + "#/compare/exp%2Ftry1/exp%2Ftry1?only=all")
        page.locator("tr.compare-row").first.wait_for()
        page.locator("tr.compare-row", has_text=SLASH_ID).locator("td.side a").first.click()
        page.wait_for_function("location.hash.endsWith('/sample/vstar/val%2F0001')")
        check_slash_sample(page)
        assert not errors, errors
        assert not bad_status, bad_status
    finally:
        server.stop()
        store.close()


def test_static_report_opens_names_with_slashes(
    slash_store: Path, browser: object, tmp_path: Path
) -> None:
    out = tmp_path / "slash.html"
    with RunStore(slash_store) as store:
        write_report(store, [SLASH_RUN], out, ci_samples=20)
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    page.locator(f'tr.run-row[data-run="{SLASH_RUN}"] a.run-link').click()
    page.locator(f'#samples tbody tr.sample-row[data-id="{SLASH_ID}"] a').click()
    page.wait_for_function("location.hash === '#/run/exp%2Ftry1/sample/vstar/val%2F0001'")
    check_slash_sample(page)
    page.screenshot(path=str(ARTIFACTS / "static_slash_sample.png"), full_page=True)
    assert not errors, errors


# -- MulProg: the program listing and the grounded explanation ----------------------------------


@pytest.fixture(scope="module")
def mulprog_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict]]:
    from mulprog_web_support import store_mulprog_run

    path = tmp_path_factory.mktemp("mulprog") / "runs.sqlite"
    with RunStore(path) as store:
        traces = store_mulprog_run(store)
    yield path, traces


def rect_of(locator: object) -> tuple[float, float, float, float]:
    box = locator.bounding_box()  # type: ignore[attr-defined]
    assert box is not None
    return box["x"], box["y"], box["width"], box["height"]


def check_mulprog_sample(page: Page, trace: Trace, shot: str) -> None:
    """The 'right' sample: planning attempts collapsed, the five program rows with their
    outputs, and explanation chips that light up exactly their own boxes on the image."""
    from mulprog_web_support import RIGHT_OF_GREEN

    block = page.locator(".trace > details.agent-block.top[data-agent=MulProg]")
    block.wait_for()
    # planning: two attempts, the first rejected with the checker's errors, collapsed
    plan = block.locator("details.plan-attempts")
    assert plan.evaluate("el => el.open") is False
    assert plan.locator(".plan-attempt").count() == 2
    first = plan.locator(".plan-attempt").first
    assert not first.is_visible()
    plan.locator(":scope > summary").click()
    assert first.is_visible()
    assert "has-error" in (first.get_attribute("class") or "")
    assert "FIND" in first.inner_text() and "unknown_tool" in first.inner_text()
    # the program: one row per line, numbered, with the line's source
    rows = block.locator("table.program tr.prog-line")
    lines = RIGHT_OF_GREEN.splitlines()
    assert rows.count() == len(lines)
    assert rows.locator("td.ln").all_inner_texts() == [str(i + 1) for i in range(len(lines))]
    assert rows.locator("td.src > code").all_inner_texts() == lines
    assert block.locator("tr.prog-line.has-error").count() == 0
    # LOC rows draw their boxes on the thumbnail; CROP shows the crop and its place
    loc_steps = [s for s in trace.steps if s.tool == "LOC"]
    for st in loc_steps:
        row = block.locator(f"tr.prog-line[data-line='{st.line}']")
        assert row.locator("td.out svg.overlay rect.box").count() == len(st.output)
    crop = next(s for s in trace.steps if s.tool == "CROP_RIGHTOF")
    crop_row = block.locator(f"tr.prog-line[data-line='{crop.line}'] td.out")
    assert crop_row.locator("img").count() == 2
    region = crop_row.locator("rect.box.region")
    assert [float(region.get_attribute(k) or "nan") for k in ("x", "y", "width", "height")] == (
        crop.output["region"]
    )
    assert "→ 3" in block.locator("tr.prog-line").last.inner_text()

    # the explanation: one chip per [BOX], named, with its box count
    explain = trace.steps[-1]
    refs = explain.output["boxes"]
    chips = block.locator(".explanation .box-chip")
    assert chips.count() == explain.output["text"].count("[BOX]") == len(refs) == 2
    for i, ref in enumerate(refs):
        assert chips.nth(i).locator(".chip-name").inner_text() == ref["name"]
        assert chips.nth(i).locator(".chip-count").inner_text() == str(len(ref["boxes"]))
    text = block.locator(".explanation .explain-text").inner_text()
    assert text.startswith("Right of the green square") and "[BOX]" not in text
    img = block.locator(".explanation .explain-wrap img")
    img.scroll_into_view_if_needed()
    img.evaluate(
        "i => i.complete && i.naturalWidth ? 0 : new Promise(ok => i.addEventListener('load', ok))"
    )
    ix, iy, iw, ih = rect_of(img)
    root_w, root_h = trace.inputs["IMAGE"]["size"]
    assert iw > 100 and abs(ih - iw * root_h / root_w) < 2  # shown at the image's aspect

    def expected(i: int) -> list[tuple[float, float, float, float]]:
        out = []
        for b in refs[i]["boxes"]:
            x, y, w, h = b["$box"]
            out.append(
                (ix + x * iw / root_w, iy + y * ih / root_h, w * iw / root_w, h * ih / root_h)
            )
        return sorted(out)

    def lit(i: int) -> None:
        """Chip i's boxes, and only they, are highlighted, where its boxes are."""
        on = block.locator(".explanation .xbox.on")
        assert on.count() == len(refs[i]["boxes"])
        assert {on.nth(k).get_attribute("data-ref") for k in range(on.count())} == {str(i)}
        got = sorted(rect_of(on.nth(k)) for k in range(on.count()))
        for g, e in zip(got, expected(i), strict=True):
            assert all(abs(a - b) <= 1.5 for a, b in zip(g, e, strict=True)), (g, e)
        others = block.locator(f".explanation .xbox:not([data-ref='{i}'])")
        assert others.count() >= 1
        for k in range(others.count()):
            assert "on" not in (others.nth(k).get_attribute("class") or "").split()
            assert float(others.nth(k).evaluate("e => getComputedStyle(e).opacity")) < 0.5

    assert block.locator(".explanation .xbox.on").count() == 0
    chips.nth(1).hover()  # the squares right of the green one: three boxes
    lit(1)
    assert [s["$box"] for s in refs[1]["boxes"]] == [b["$box"] for b in loc_steps[1].output]
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    page.mouse.move(5, 5)
    assert block.locator(".explanation .xbox.on").count() == 0
    chips.nth(0).click()  # pinned: stays after the pointer leaves
    page.mouse.move(5, 5)
    lit(0)
    assert chips.nth(0).get_attribute("aria-pressed") == "true"
    assert block.locator(".explanation .xbox.on .xbox-label").first.inner_text() == "green square"
    chips.nth(0).click()  # unpinned: shown while hovered, gone when the pointer leaves
    lit(0)
    page.mouse.move(5, 5)
    assert chips.nth(0).get_attribute("aria-pressed") == "false"
    assert block.locator(".explanation .xbox.on").count() == 0


def check_mulprog_safety_and_errors(page: Page, base: str) -> None:
    """An object named like HTML is text everywhere; a failing line is marked, the rest not run."""
    from mulprog_web_support import EVIL, RUN

    page.goto(base + f"#/run/{RUN}/sample/scene/evil")
    page.wait_for_function("document.querySelector('.toolbar h1')?.textContent === 'scene / evil'")
    chip = page.locator(".explanation .box-chip")
    chip.wait_for()
    assert chip.locator(".chip-name").inner_text() == EVIL
    assert EVIL in page.locator("table.program tr.prog-line").first.inner_text()
    chip.click()
    assert page.locator(".explanation .xbox.on .xbox-label").inner_text() == EVIL
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("document.body.innerHTML.includes('<img src=x')") is False

    page.goto(base + f"#/run/{RUN}/sample/scene/broken")
    page.wait_for_function(
        "document.querySelector('.toolbar h1')?.textContent === 'scene / broken'"
    )
    rows = page.locator("table.program tr.prog-line")
    rows.first.wait_for()
    assert rows.count() == 4
    states = rows.evaluate_all("rs => rs.map(r => r.className.replace('prog-line', '').trim())")
    assert states == ["ran", "ran", "has-error", "not-run"]
    assert rows.nth(2).locator("td.out .badge.err").inner_text() == "capability_missing"
    assert "not run" in rows.nth(3).inner_text()
    assert page.locator(".explanation").count() == 0


def test_viewer_shows_a_mulprog_program_and_its_explanation(
    mulprog_store: tuple[Path, dict], browser: object
) -> None:
    from hammr.web.server import ViewerServer
    from mulprog_web_support import RUN

    store_path, traces = mulprog_store
    store = RunStore(store_path)
    server = ViewerServer(store, port=0)
    server.start_in_thread()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        errors: list[str] = []
        dialogs: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(server.url + f"#/run/{RUN}")
        page.locator("#samples tbody tr.sample-row[data-id=right]").click()
        page.wait_for_function("location.hash.endsWith('/sample/scene/right')")
        check_mulprog_sample(page, traces["right"], "mulprog_sample.png")
        check_mulprog_safety_and_errors(page, server.url)
        page.screenshot(path=str(ARTIFACTS / "mulprog_broken.png"), full_page=True)
        assert not errors, errors
        assert not dialogs, dialogs
    finally:
        server.stop()
        store.close()


def test_static_report_shows_the_mulprog_sample(
    mulprog_store: tuple[Path, dict], browser: object, tmp_path: Path
) -> None:
    from mulprog_web_support import RUN

    store_path, traces = mulprog_store
    out = tmp_path / "mulprog.html"
    with RunStore(store_path) as store:
        write_report(store, [RUN], out, ci_samples=20)
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(out.as_uri() + f"#/run/{RUN}/sample/scene/right")
    check_mulprog_sample(page, traces["right"], "static_mulprog_sample.png")
    check_mulprog_safety_and_errors(page, out.as_uri())
    assert not errors, errors
    assert not dialogs, dialogs
