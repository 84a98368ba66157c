"""What the viewer shows about the question itself, in a real headless browser (Debian's
/usr/bin/chromium driven by Playwright, no browser download), over data made the way users make
it: `hammr eval --system naive` on a tiny JSONL suite (multiple-choice rows with lettered
`choices`, a pointing row with a `point`), the LLM played by the scripted fake server; and a
trace from `hammr ask --point X,Y --trace FILE` opened as `hammr view FILE` opens it (a
one-sample run without ground truth, :func:`hammr.web.web_cli.store_from_trace`).

The page must list a multiple-choice sample's options with the chosen and the correct one
marked, draw the question's point on the input image, and say "no ground truth" (never
"wrong" or a score) for a trace that has none: in the runs table, the sample list and the
sample page, served and in the static report. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage
from PIL import ImageDraw

from browser_support import CHROMIUM, Page, needs_browser, sync_playwright
from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.web.static_report import write_report
from patience import HANG_S
from test_eval_cli import env_for

ARTIFACTS = Path(__file__).parent / "artifacts"
RUN = "questions"
QID = re.compile(r"QID-(\w+)")
CHOICES = {
    "m1": ["blue", "red", "green", "white"],  # answered B: right
    "m2": ["a cat", "a dog", "a bird"],  # answered A, the correct one is C: wrong
    "m3": ["yes", "no"],  # answered with no option at all
}
TRUTH = {"m1": "B", "m2": "C", "m3": "A"}
SAID = {
    "m1": "B",
    "m2": "The answer is (A)",
    "m3": "I cannot tell from this picture.",
    "p1": "a red square",
    "ask": "a kite",
}
SIZE = (320, 200)
POINT = (240.0, 60.0)  # the dataset row's point, in the image's pixels
ASK_POINT = (100.0, 50.0)  # `hammr ask --point`
ASK_RUN = "ask-trace"  # the run `hammr view ask-trace.json` makes

SUITE = """
name = "questions"

[[entry]]
name = "mc"
question_type = "attribute"
dataset = "jsonl"
metric = "multiple_choice"
file = "mc.jsonl"

[[entry]]
name = "pts"
question_type = "local_pointing"
dataset = "jsonl"
metric = "exact_match"
file = "pts.jsonl"
"""

pytestmark = needs_browser("test_web_question_e2e")


def reply(seen: Seen) -> Reply:
    found = QID.findall(json.dumps(seen.body.get("messages") or []))
    said = SAID[found[-1]] if found else SAID["ask"]
    return Reply(body=ok_body(f"[Thought]: I looked.\n[Finish]: {said}"))


def picture(path: Path, seed: int) -> None:
    img = PILImage.new("RGB", SIZE, (90 + 40 * seed, 150, 200))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 150, 320, 200), fill=(90, 130, 80))
    draw.rectangle((220, 40, 260, 80), fill=(200, 30, 30))  # around POINT
    img.save(path)


@dataclass
class Stores:
    eval_store: Path
    ask_store: Path


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    root = tmp_path_factory.mktemp("questions")
    data = root / "data"
    data.mkdir()
    picture(data / "a.png", 0)
    picture(data / "b.png", 1)
    mc = [
        {
            "id": sid,
            "question": f"Which one is it? QID-{sid}",
            "choices": CHOICES[sid],
            "answer": TRUTH[sid],
            "image": "a.png",
            "type": "attribute",
        }
        for sid in CHOICES
    ]
    (data / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mc))
    pts = {
        "id": "p1",
        "question": "What is at the point? QID-p1",
        "answer": "a red square",
        "point": list(POINT),
        "image": "b.png",
    }
    (data / "pts.jsonl").write_text(json.dumps(pts) + "\n")
    suite = root / "questions.toml"
    suite.write_text(SUITE)
    server = FakeServer()
    server.responder = reply
    env = env_for(server, root)
    eval_store = root / "runs.sqlite"
    try:
        r = CliRunner().invoke(
            main,
            ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(eval_store),
             "--system", "naive", "--name", RUN],
            env=env,
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
        trace_file = root / f"{ASK_RUN}.json"
        r = CliRunner().invoke(
            main,
            ["ask", str(data / "b.png"), "What is flying here?", "--system", "naive",
             "--point", "{:g},{:g}".format(*ASK_POINT), "--trace", str(trace_file)],
            env=env,
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
        assert r.stdout.strip() == SAID["ask"]
    finally:
        server.close()
    with RunStore(eval_store) as s:
        assert [s.get(RUN, "mc", sid).score for sid in CHOICES] == [1.0, 0.0, 0.0]
        assert s.get(RUN, "pts", "p1").trace.inputs["point"] == list(POINT)
    from hammr.web.web_cli import store_from_trace

    ask_store = root / "ask.sqlite"
    store, name = store_from_trace(trace_file, ask_store)  # what `hammr view FILE` serves
    store.close()
    assert name == ASK_RUN
    yield Stores(eval_store, ask_store)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    ARTIFACTS.mkdir(exist_ok=True)
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


class Served:
    """The viewer over one store, on a free port, for the length of a `with` block."""

    def __init__(self, path: Path) -> None:
        from hammr.web.server import ViewerServer

        self.store = RunStore(path)
        self.server = ViewerServer(self.store, port=0)

    def __enter__(self) -> str:
        self.server.start_in_thread()
        return self.server.url

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.store.close()


def open_page(browser: object, errors: list[str]) -> Page:
    page: Page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
    return page


def open_sample(page: Page, url: str, run: str, dataset: str, sid: str) -> None:
    page.goto(url + f"#/run/{run}/sample/{dataset}/{sid}")
    page.wait_for_function(
        "t => (document.querySelector('.toolbar h1') || {}).textContent === t",
        arg=f"{dataset} / {sid}",
    )
    page.locator(".sample-head").wait_for()


def images_loaded(page: Page) -> None:
    page.wait_for_function(
        "[...document.images].every(i => i.complete && i.naturalWidth > 0)", timeout=HANG_S * 1000
    )


# -- 1. multiple-choice options ------------------------------------------------------------------


def options_of(page: Page) -> list[dict[str, object]]:
    return page.locator("#options li.option").evaluate_all(
        "ls => ls.map(l => ({letter: l.dataset.letter,"
        " text: l.querySelector('.opt-text').textContent,"
        " shown: l.querySelector('.opt-letter').textContent + ' ' +"
        " l.querySelector('.opt-text').textContent,"
        " chosen: l.classList.contains('chosen'), correct: l.classList.contains('correct'),"
        " marks: [...l.querySelectorAll('.opt-mark')].map(m => m.textContent)}))"
    )


def check_options(page: Page, url: str, shot: str | None = None) -> None:
    open_sample(page, url, RUN, "mc", "m1")  # right: B chosen, B correct
    page.locator("#options").wait_for()
    got = options_of(page)
    assert [o["shown"] for o in got] == ["A. blue", "B. red", "C. green", "D. white"]
    assert [o["letter"] for o in got] == ["A", "B", "C", "D"]
    assert [(o["chosen"], o["correct"]) for o in got] == [
        (False, False), (True, True), (False, False), (False, False),
    ]  # fmt: skip
    assert got[1]["marks"] == ["chosen", "correct"]
    assert page.locator(".sample-head .question").first.inner_text() == "Which one is it? QID-m1"

    open_sample(page, url, RUN, "mc", "m2")  # wrong: A chosen, C correct
    page.locator("#options").wait_for()
    got = options_of(page)
    assert [o["text"] for o in got] == CHOICES["m2"]
    assert [o["letter"] for o, c in zip(got, CHOICES["m2"], strict=True)] == ["A", "B", "C"]
    assert [(o["chosen"], o["correct"]) for o in got] == [
        (True, False), (False, False), (False, True),
    ]  # fmt: skip
    assert got[0]["marks"] == ["chosen"] and got[2]["marks"] == ["correct"]
    chosen = page.locator("#options li.option.chosen")
    right = page.locator("#options li.option.correct")
    # the two marks look different (not only by their word)
    styles = [
        x.evaluate("e => getComputedStyle(e).borderLeftColor + getComputedStyle(e).backgroundColor")
        for x in (chosen, right)
    ]
    assert styles[0] != styles[1]
    if shot:
        page.screenshot(path=str(ARTIFACTS / shot), full_page=True)

    open_sample(page, url, RUN, "mc", "m3")  # no option named: only the correct one marked
    page.locator("#options").wait_for()
    got = options_of(page)
    assert [o["shown"] for o in got] == ["A. yes", "B. no"]
    assert [(o["chosen"], o["correct"]) for o in got] == [(False, True), (False, False)]
    assert "names no option" in page.locator("#options-note").inner_text()

    # an open question lists no options
    open_sample(page, url, RUN, "pts", "p1")
    assert page.locator("#options").count() == 0


def test_viewer_shows_multiple_choice_options(stores: Stores, browser: object) -> None:
    errors: list[str] = []
    with Served(stores.eval_store) as url:
        page = open_page(browser, errors)
        check_options(page, url, "question_options.png")
    assert not errors, errors


def test_static_report_shows_multiple_choice_options(
    stores: Stores, browser: object, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    with RunStore(stores.eval_store) as store:
        write_report(store, [RUN], out, ci_samples=20)
    errors: list[str] = []
    check_options(open_page(browser, errors), out.as_uri())
    assert not errors, errors


# -- 2. the question's point ---------------------------------------------------------------------


def check_point(page: Page, point: tuple[float, float]) -> None:
    """The input image shows one marker, its centre at the point (scaled to the display)."""
    fig = page.locator(".inputs figure").first
    fig.wait_for()
    images_loaded(page)
    marker = fig.locator("svg.overlay .point-marker")
    assert marker.count() == 1
    assert [float(marker.get_attribute(k) or "nan") for k in ("data-x", "data-y")] == list(point)
    img = fig.locator("img").bounding_box()
    dot = marker.locator("circle").first.bounding_box()
    assert img is not None and dot is not None
    sx, sy = img["width"] / SIZE[0], img["height"] / SIZE[1]
    cx, cy = dot["x"] + dot["width"] / 2, dot["y"] + dot["height"] / 2
    assert abs(cx - (img["x"] + point[0] * sx)) <= 1.5, (cx, img, point)
    assert abs(cy - (img["y"] + point[1] * sy)) <= 1.5, (cy, img, point)
    assert 6 <= dot["width"] <= 60 and abs(dot["width"] - dot["height"]) <= 1  # round, visible
    caption = fig.locator("figcaption").inner_text()
    assert "point ({:g}, {:g})".format(*point) in caption, caption


def test_viewer_draws_the_question_point(stores: Stores, browser: object) -> None:
    errors: list[str] = []
    with Served(stores.eval_store) as url:
        page = open_page(browser, errors)
        open_sample(page, url, RUN, "pts", "p1")
        check_point(page, POINT)
        page.locator(".inputs").screenshot(path=str(ARTIFACTS / "question_point.png"))
        # a question without a point has no marker
        open_sample(page, url, RUN, "mc", "m1")
        page.locator(".inputs figure").first.wait_for()
        assert page.locator(".point-marker").count() == 0
    with Served(stores.ask_store) as url:  # `hammr ask --point`
        page = open_page(browser, errors)
        open_sample(page, url, ASK_RUN, "trace", ASK_RUN)
        check_point(page, ASK_POINT)
    assert not errors, errors


# -- 4. no ground truth ---------------------------------------------------------------------------


def check_no_truth(page: Page, url: str, shot: str | None = None) -> None:
    page.goto(url)
    row = page.locator(f"tr.run-row[data-run={ASK_RUN}]")
    row.wait_for()
    assert "no ground truth" in row.inner_text()
    assert not re.search(r"\d\.\d", row.locator("td.macro").inner_text())

    page.goto(url + f"#/run/{ASK_RUN}")
    sample = page.locator("#samples tbody tr.sample-row")
    sample.first.wait_for()
    assert sample.count() == 1
    text = sample.inner_text()
    assert "no ground truth" in text
    assert "0.00" not in text
    assert sample.locator(".badge.wrong, .badge.right").count() == 0
    stats = page.locator(".toolbar .run-stats").inner_text()
    assert "no ground truth" in stats and "0.0%" not in stats
    if shot:
        page.screenshot(path=str(ARTIFACTS / shot.replace(".png", "_list.png")))

    sample.locator("td.question").click()
    page.wait_for_function(f"location.hash.endsWith('/sample/trace/{ASK_RUN}')")
    head = page.locator(".sample-head")
    head.wait_for()
    text = head.inner_text()
    assert "no ground truth" in text.lower()
    assert "wrong" not in text.lower() and "0.00" not in text, text
    assert page.locator("#prediction .value").inner_text() == SAID["ask"]
    pred_class = page.locator("#prediction").get_attribute("class") or ""
    assert "wrong" not in pred_class and "right" not in pred_class
    assert head.locator(".badge.wrong, .badge.right, .verdict.wrong, .verdict.right").count() == 0
    if shot:
        page.screenshot(path=str(ARTIFACTS / shot), full_page=True)


def test_viewer_says_no_ground_truth_for_an_ask_trace(stores: Stores, browser: object) -> None:
    errors: list[str] = []
    with Served(stores.ask_store) as url:
        check_no_truth(open_page(browser, errors), url, "question_no_truth.png")
    assert not errors, errors


def test_static_report_says_no_ground_truth(
    stores: Stores, browser: object, tmp_path: Path
) -> None:
    out = tmp_path / "ask.html"
    with RunStore(stores.ask_store) as store:
        write_report(store, [ASK_RUN], out, ci_samples=20)
    errors: list[str] = []
    check_no_truth(open_page(browser, errors), out.as_uri())
    assert not errors, errors


def test_a_scored_run_still_shows_right_and_wrong(stores: Stores, browser: object) -> None:
    """The other side of 4: samples with ground truth keep their scores and verdicts."""
    errors: list[str] = []
    with Served(stores.eval_store) as url:
        page = open_page(browser, errors)
        page.goto(url)
        row = page.locator(f"tr.run-row[data-run={RUN}]")
        row.wait_for()
        assert "no ground truth" not in row.inner_text()
        assert re.search(r"\d+\.\d", row.locator("td.macro").inner_text())
        page.goto(url + f"#/run/{RUN}")
        page.locator("#samples tbody tr.sample-row").first.wait_for()
        badges = page.locator("#samples tbody tr.sample-row .badge.score").all_inner_texts()
        assert sorted(badges) == ["0.00", "0.00", "1.00", "1.00"]
        open_sample(page, url, RUN, "mc", "m2")
        assert "wrong" in page.locator("#prediction").inner_text()
    assert not errors, errors
