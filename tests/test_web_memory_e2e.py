"""The viewer's memory panels in a real headless browser (Debian's /usr/bin/chromium driven by
Playwright, no browser download). A store holds a source run (a ReAct tool agent's traces) and
a MuSE run whose steps carry ``retrieved`` records written by hand in the exact shape the agent
writes them (``hammr.advice``; hits as ``hammr.memory.search.Hit.to_dict``): an every-step
search before the model call, the agent's own SearchExperiences call (a deep search over three
viewpoints, a hit found again by a later one, one from a run no longer stored), a failed
retrieval, and Reflexion's and ExpeL's records (their lists shown generically). The page must
show each hit's guidance, score, viewpoint, success or failure and similarity, link the hits to
their source samples (anchored at the step) and show the missing run as text. Screenshots go
to tests/artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import CHROMIUM, Page, needs_browser, sync_playwright
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.trace import Step, Trace
from hammr.web.static_report import write_report

ARTIFACTS = Path(__file__).parent / "artifacts"
SOURCE_RUN = "react-src"
MUSE_RUN = "muse-deep"
GONE_RUN = "old-run"
DATASET = "vstar"
QUESTION = "What is the colour of the umbrella held by the woman?"
ERROR = "RuntimeError: the experience bank has no vectors for viewpoint 'images'"
GUIDANCE = {
    "s1": "Crop around the person first; the held object is small and the colour only shows "
    "once it is enlarged.",
    "s2": "Answering from the whole image guessed the colour of the coat, not of the object "
    "asked about: locate the object before judging its colour.",
    "s3": "When two candidates are close in colour, zoom on each and compare them side by side.",
}
REFLECTION = "I answered from the whole image; crop to the object first."
RULES = (
    "Locate the object the question names before judging any of its attributes.",
    "Compare close colours on enlarged crops, never on the whole image.",
)
SOURCE_QUESTIONS = {
    "s1": "What colour is the bag the man carries?",
    "s2": "What colour is the kite?",
    "s3": "Is the cup red or orange?",
}

pytestmark = needs_browser("test_web_memory_e2e")


# -- the runs -------------------------------------------------------------------------------------


def source_trace(sid: str) -> Trace:
    """A ReAct tool agent's run: locate, crop, answer."""
    t = Trace(agent="MuSEReAct", question=SOURCE_QUESTIONS[sid], model="m")
    t.steps = [
        Step(
            index=0,
            thought="Find the object first.",
            action="boxes = Grounding(image, 'object')",
            tool="Grounding",
            observation="1 box",
        ),
        Step(
            index=1,
            thought="Enlarge it.",
            action="crop = Crop(image, boxes[0])",
            tool="Crop",
            observation="an image 120x80",
        ),
        Step(index=2, thought="It is clear now.", finish="red"),
    ]
    if sid == "s3":  # step 1 asked a helper agent (a child trace)
        child = Trace(agent="ZoomHelper", question="Compare the two cups.", model="m")
        child.steps = [
            Step(index=0, action="a = Zoom(image, 2)", tool="Zoom", observation="zoomed"),
            Step(index=1, action="b = Zoom(image, 4)", tool="Zoom", observation="zoomed more"),
            Step(index=2, finish="red"),
        ]
        child.answer, child.status = "red", "finished"
        t.steps[1].child = child
    t.answer, t.status = "red", "finished"
    return t


def hit(
    sid: str,
    step: int,
    *,
    similarity: float,
    viewpoint: str,
    learned_from: str,
    score: int,
    round_: int = 1,
    run: str = SOURCE_RUN,
    also: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One hit as ``Hit.to_dict`` writes it."""
    return {
        "id": f"{sid}{step:02d}" + "ab" * 10,
        "similarity": similarity,
        "viewpoint": viewpoint,
        "round": round_,
        "learned_from": learned_from,
        "score": score,
        "guidance": GUIDANCE[sid],
        "action": "crop = Crop(image, boxes[0])" if step == 1 else "boxes = Grounding(image, 'x')",
        "source": {
            "run": run,
            "dataset": DATASET,
            "sample_id": sid,
            "trace_path": "",
            "step": step,
        },
        "also_found_by": list(also),
    }


def every_step_record() -> dict[str, Any]:
    hits = [
        hit(
            "s1", 1, similarity=0.9132, viewpoint="question+images", learned_from="success", score=8
        ),
        hit(
            "s2", 0, similarity=0.8021, viewpoint="question+images", learned_from="failure", score=6
        ),
    ]
    return {
        "source": "muse",
        "policy": "advisor",
        "query": {"viewpoints": ["question+images"], "k": 3},
        "hits": hits,
        "rounds": [
            {
                "round": 1,
                "viewpoint": "question+images",
                "method": "exact",
                "eligible": 41,
                "found": 2,
            }
        ],
        "notes": [],
        "text": "Experience from similar tasks:\n1. " + GUIDANCE["s1"] + "\n2. " + GUIDANCE["s2"],
    }


def tool_record() -> dict[str, Any]:
    views = ["question+images", "question", "images"]
    hits = [
        hit(
            "s3", 1, similarity=0.8844, viewpoint="question+images", learned_from="success", score=9
        ),
        hit(
            "s1",
            1,
            similarity=0.7710,
            viewpoint="question",
            learned_from="success",
            score=7,
            round_=2,
            also=("images",),
        ),
        hit(
            "s2",
            0,
            similarity=0.6502,
            viewpoint="images",
            learned_from="failure",
            score=5,
            round_=3,
            run=GONE_RUN,
        ),
        hit("s3", 1, similarity=0.6011, viewpoint="images", learned_from="success", score=6),
    ]
    hits[-1]["source"]["trace_path"] = "1.child"  # learned inside the helper agent's run
    return {
        "source": "muse",
        "policy": "tool",
        "query": {"viewpoints": views, "k": 3},
        "hits": hits,
        "rounds": [
            {"round": i + 1, "viewpoint": v, "method": "exact", "eligible": 41, "found": n}
            for i, (v, n) in enumerate(zip(views, (2, 1, 1), strict=True))
        ],
        "notes": ["images: 3 experiences without vectors were left out"],
        "text": "1. " + GUIDANCE["s3"],
    }


def muse_trace() -> Trace:
    t = Trace(agent="MuSEAgent", question=QUESTION, model="m")
    t.steps = [
        Step(
            index=0,
            thought="Look for similar tasks before acting.",
            action="exp = SearchExperiences(question, image)",
            tool="SearchExperiences",
            observation="1. " + GUIDANCE["s3"],
            retrieved=[every_step_record(), tool_record()],
        ),
        Step(
            index=1,
            thought="Locate the umbrella.",
            action="crop = Crop(image, [120, 40, 80, 90])",
            tool="Crop",
            observation="an image 160x180",
            retrieved=[
                {"source": "muse", "policy": "advisor", "text": "", "error": ERROR},
                {
                    "source": "reflexion",
                    "policy": "advisor",
                    "text": "Lessons from earlier attempts:\n- " + REFLECTION,
                    "query": QUESTION,
                    "task": [DATASET, "attribute"],
                    "reflections": [
                        {
                            "text": REFLECTION,
                            "similarity": 0.71,
                            "source": {"run": SOURCE_RUN, "dataset": DATASET, "sample_id": "s2"},
                            "task": [DATASET, "attribute"],
                            "same_task": True,
                        }
                    ],
                },
                {
                    "source": "expel",
                    "policy": "advisor",
                    "text": "Rules:\n1. " + RULES[0] + "\n2. " + RULES[1],
                    "query": QUESTION,
                    "task": [DATASET, "attribute"],
                    "rules": [{"text": RULES[0], "votes": 3}, {"text": RULES[1], "votes": 1}],
                    "examples": [
                        {
                            "source": {"run": GONE_RUN, "dataset": DATASET, "sample_id": "s9"},
                            "similarity": 0.64,
                            "task": [DATASET, "attribute"],
                            "same_task": True,
                        }
                    ],
                },
            ],
        ),
        Step(index=2, thought="The umbrella is yellow.", finish="yellow"),
    ]
    t.answer, t.status = "yellow", "finished"
    return t


def plain_trace() -> Trace:
    t = Trace(agent="MuSEAgent", question="How many cars?", model="m")
    t.steps = [Step(index=0, finish="2")]
    t.answer, t.status = "2", "finished"
    return t


def record(run: str, sid: str, trace: Trace, truth: str) -> RunRecord:
    return RunRecord(
        run=run,
        sample_id=sid,
        dataset=DATASET,
        question_type="attribute",
        question=trace.question,
        answers=(truth,),
        prediction=trace.answer,
        score=1.0 if trace.answer == truth else 0.0,
        status=trace.status,
        trace=trace,
    )


@pytest.fixture(scope="module")
def memory_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("memory") / "runs.sqlite"
    with RunStore(path) as store:
        store.open_run(SOURCE_RUN, "vstar", "react")
        for sid, truth in (("s1", "red"), ("s2", "blue"), ("s3", "red")):
            store.add(record(SOURCE_RUN, sid, source_trace(sid), truth))
        store.open_run(MUSE_RUN, "vstar", "muse")
        store.add(record(MUSE_RUN, "q1", muse_trace(), "yellow"))
        store.add(record(MUSE_RUN, "q2", plain_trace(), "2"))
    yield path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    ARTIFACTS.mkdir(exist_ok=True)
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


def open_page(browser: object, errors: list[str]) -> Page:
    page: Page = browser.new_page(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page


# -- what the page must show ---------------------------------------------------------------------


def wait_question(page: Page, question: str) -> None:
    """Wait until the sample page shows this question (a hash change keeps the old page up
    until the new one is drawn)."""
    page.wait_for_function(
        "q => (document.querySelector('.sample-head .question') || {}).textContent === q",
        arg=question,
    )


def check_sample(page: Page, base: str, shot: str) -> None:
    """The MuSE sample q1: every panel, then the first hit's link to its source sample."""
    page.goto(base + f"#/run/{MUSE_RUN}/sample/{DATASET}/q1")
    wait_question(page, QUESTION)
    step0 = page.locator(".trace .step[data-step='0']")
    step0.wait_for()
    page.locator(".mem-record .hit").first.wait_for()  # the run names have arrived
    summary = page.locator("#memory-summary").inner_text()
    assert summary == ("6 experiences, 1 reflection, 2 rules, 1 example retrieved in 2 steps"), (
        summary
    )
    assert step0.locator(".step-head .badge.memory").inner_text() == "memory 6"

    # before the model call: the every-step search, open (few records)
    before = step0.locator("details.retrieved.before")
    assert before.evaluate("e => e.open") is True
    rec = before.locator(".mem-record")
    assert rec.count() == 1
    assert rec.get_attribute("data-policy") == "advisor"
    assert rec.locator(".mem-title").inner_text() == "every-step search"
    assert rec.locator(".mem-query .chip.view").all_inner_texts() == ["question+images"]
    assert rec.locator(".mem-k").inner_text() == "k = 3"
    hits = rec.locator(".hit")
    assert hits.count() == 2
    assert hits.locator(".hit-guidance").all_inner_texts() == [GUIDANCE["s1"], GUIDANCE["s2"]]
    assert hits.locator(".hit-score").all_inner_texts() == ["8/10", "6/10"]
    assert hits.locator(".learned").all_inner_texts() == ["✓ success", "✗ failure"]
    assert hits.locator(".learned").evaluate_all("bs => bs.map(b => b.dataset.learned)") == [
        "success",
        "failure",
    ]
    colours = hits.locator(".learned").evaluate_all("bs => bs.map(b => getComputedStyle(b).color)")
    assert colours[0] != colours[1]
    assert hits.locator(".hit-sim").all_inner_texts() == ["sim 0.913", "sim 0.802"]
    assert hits.locator(".hit-view").all_inner_texts() == ["question+images"] * 2
    # what the model was shown stays folded
    shown = rec.locator("details.mem-shown")
    assert shown.evaluate("e => e.open") is False
    assert GUIDANCE["s1"] in (shown.locator("pre").text_content() or "")
    # the placement: before the thought, and the tool's record after the act
    order = step0.locator(".step-body > *").evaluate_all(
        "es => es.map(e => e.classList.contains('retrieved') ? e.className : "
        "(e.querySelector('.tag') || {}).textContent)"
    )
    assert order[:4] == ["retrieved before", "Thought", "Act", "retrieved after"], order

    # the agent's SearchExperiences call: a deep search over three viewpoints
    tool = step0.locator("details.retrieved.after .mem-record")
    assert tool.get_attribute("data-policy") == "tool"
    assert tool.locator(".mem-title").inner_text() == "SearchExperiences (agent)"
    assert tool.locator(".mem-query .chip.view").all_inner_texts() == [
        "question+images",
        "question",
        "images",
    ]
    assert tool.locator(".mem-notes").inner_text() == (
        "images: 3 experiences without vectors were left out"
    )
    shown_hits = tool.locator(":scope > ol.hits > .hit")
    assert shown_hits.count() == 3  # the fourth is folded
    more = tool.locator("details.more-hits")
    assert more.locator("summary").inner_text() == "1 more experience"
    assert more.evaluate("e => e.open") is False
    second = shown_hits.nth(1)
    assert second.locator(".hit-view").inner_text() == "question · round 2"
    assert second.locator(".hit-also").inner_text() == "also found by images"
    scores = tool.locator(".hit-score").evaluate_all("es => es.map(e => e.textContent)")
    assert scores == ["9/10", "7/10", "5/10", "6/10"]
    # a hit from a run that is not in the store: its source as text, no link
    gone = shown_hits.nth(2)
    assert gone.locator("a").count() == 0
    assert gone.locator(".source-text").inner_text().startswith(f"{GONE_RUN} / {DATASET} / s2")
    rounds = tool.locator("details.mem-rounds")
    rounds.locator("summary").click()
    assert rounds.locator("tr").count() == 4  # the header and three rounds

    # step 1: a failed retrieval, and a Reflexion record shown generically
    step1 = page.locator(".trace .step[data-step='1']")
    panel = step1.locator("details.retrieved.before")
    assert panel.locator(".mem-summary").inner_text() == (
        "1 reflection, 2 rules, 1 example retrieved"
    )
    assert panel.locator("summary .badge.err").inner_text() == "1 error"
    err = panel.locator(".mem-record.has-error")
    assert err.locator(".row.error .txt").inner_text() == ERROR
    assert step1.locator(".step-head .badge.memory.err").count() == 1
    refl = panel.locator(".mem-record[data-source=reflexion]")
    assert refl.locator(".mem-title").inner_text() == "Reflexion reflections"
    assert refl.locator(".mem-query-text").inner_text() == f"query “{QUESTION}”"
    item = refl.locator(".mem-item")
    assert item.locator(".hit-guidance").inner_text() == REFLECTION
    assert item.locator(".hit-sim").inner_text() == "sim 0.710"
    assert item.locator(".mem-extra").inner_text() == "task vstar / attribute · same task true"
    # its source sample links to the sample when the run is here
    assert item.locator("a.source-link").inner_text() == f"{SOURCE_RUN} / {DATASET} / s2"
    expel = panel.locator(".mem-record[data-source=expel]")
    assert expel.locator(".mem-title").inner_text() == "ExpeL rules and examples"
    rules = expel.locator("ol.hits[data-key=rules] .mem-item")
    assert rules.locator(".hit-guidance").all_inner_texts() == list(RULES)
    example = expel.locator("ol.hits[data-key=examples] .mem-item")
    assert example.locator("a").count() == 0
    gone_text = example.locator(".source-text").inner_text()
    assert gone_text == f"{GONE_RUN} / {DATASET} / s9 (run not here)"
    # the last step retrieved nothing: no panel
    assert page.locator(".trace .step[data-step='2'] details.retrieved").count() == 0
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)

    # the first hit's link opens its source sample at the step it was learned from
    link = hits.nth(0).locator("a.source-link")
    assert link.inner_text() == f"{SOURCE_RUN} / {DATASET} / s1 · step 1"
    link.click()
    page.wait_for_function(f"location.hash.indexOf('/run/{SOURCE_RUN}/sample/{DATASET}/s1') > 0")
    wait_question(page, SOURCE_QUESTIONS["s1"])
    target = page.locator(".trace .step.target")
    target.wait_for()
    assert target.get_attribute("data-step") == "1"
    assert target.count() == 1
    assert page.locator("#memory-summary").count() == 0  # the source retrieved nothing

    # the folded fourth hit was learned inside a child trace: the link opens that step
    page.go_back()
    wait_question(page, QUESTION)
    folded = page.locator(".trace .step[data-step='0'] details.more-hits")
    folded.locator("summary").click()
    child_link = folded.locator("a.source-link")
    assert child_link.inner_text() == f"{SOURCE_RUN} / {DATASET} / s3 · 1.child step 1"
    child_link.click()
    target = page.locator(".trace .step.target")
    target.wait_for()
    assert target.get_attribute("data-step") == "1"
    assert target.get_attribute("data-agent") == "ZoomHelper"
    assert "b = Zoom(image, 4)" in target.inner_text()


def check_plain(page: Page, base: str) -> None:
    page.goto(base + f"#/run/{MUSE_RUN}/sample/{DATASET}/q2")
    wait_question(page, "How many cars?")
    page.locator(".trace .step[data-step='0']").wait_for()
    assert page.locator("details.retrieved").count() == 0
    assert page.locator("#memory-summary").count() == 0


def test_viewer_shows_retrieved_memory(memory_store: Path, browser: object) -> None:
    from hammr.web.server import ViewerServer

    store = RunStore(memory_store)
    server = ViewerServer(store, port=0)
    server.start_in_thread()
    try:
        errors: list[str] = []
        page = open_page(browser, errors)
        page.goto(server.url + f"#/run/{MUSE_RUN}")
        page.locator("#samples tbody tr.sample-row[data-id=q1]").click()
        page.wait_for_function(f"location.hash.endsWith('/sample/{DATASET}/q1')")
        check_sample(page, server.url, "memory_sample.png")
        page.screenshot(path=str(ARTIFACTS / "memory_source.png"), full_page=True)
        check_plain(page, server.url)
        assert not errors, errors
    finally:
        server.stop()
        store.close()


def test_static_report_shows_retrieved_memory(
    memory_store: Path, browser: object, tmp_path: Path
) -> None:
    out = tmp_path / "memory.html"
    with RunStore(memory_store) as store:
        write_report(store, [MUSE_RUN, SOURCE_RUN], out, ci_samples=20)
    errors: list[str] = []
    page = open_page(browser, errors)
    page.goto(out.as_uri() + f"#/run/{MUSE_RUN}")
    row = page.locator("#samples tbody tr.sample-row[data-id=q1]")
    row.wait_for()
    assert row.locator(".badge.memory").inner_text() == "memory 10"
    assert page.locator("#samples tbody tr.sample-row[data-id=q2] .badge.memory").count() == 0
    page.screenshot(path=str(ARTIFACTS / "static_memory_run.png"))
    check_sample(page, out.as_uri(), "static_memory_sample.png")
    check_plain(page, out.as_uri())
    # a report without the source run shows the sources as text
    alone = tmp_path / "alone.html"
    with RunStore(memory_store) as store:
        write_report(store, [MUSE_RUN], alone, ci_samples=20)
    page.goto(alone.as_uri() + f"#/run/{MUSE_RUN}/sample/{DATASET}/q1")
    page.locator(".mem-record .hit").first.wait_for()
    assert page.locator("a.source-link").count() == 0
    # 6 hits (one folded), the reflection and the example
    assert page.locator(".source-text").count() == 8
    assert not errors, errors


# -- long guidance stays inside its box ------------------------------------------------------------

LONG_RUN = "muse-long"
UNBROKEN = "CropTheObjectFirst" * 22  # 396 characters, no space: shown whole (under the fold)
UNBROKEN_FOLDED = "ZoomOnEachCandidate_" * 60  # 1200 characters, no space: folded
SENTENCE = (
    "When the question asks about the colour of a small object that a person holds or carries, "
    "first locate the person, then crop around their hands generously, enlarge the crop at "
    "least twice, and only then compare the candidate colours, because answering from the "
    "whole image tends to report the colour of the largest nearby surface instead."
)
LONG_URL = "https://example.org/" + "very-long-path-segment-" * 12


def long_trace() -> Trace:
    """A MuSE step whose hits carry a very long unbroken guidance, a long sentence and a long
    folded one, a rule that is one long word, and a long unbroken query."""
    hits = [
        hit("s1", 1, similarity=0.9, viewpoint="question", learned_from="success", score=8),
        hit("s2", 0, similarity=0.8, viewpoint="question", learned_from="failure", score=6),
        hit("s3", 1, similarity=0.7, viewpoint="question", learned_from="success", score=7),
    ]
    hits[0]["guidance"] = UNBROKEN
    hits[1]["guidance"] = SENTENCE
    hits[2]["guidance"] = UNBROKEN_FOLDED
    hits[0]["action"] = "crop = Crop(image, " + "x" * 200 + ")"
    t = Trace(agent="MuSEAgent", question=QUESTION, model="m")
    t.steps = [
        Step(
            index=0,
            thought="Look for similar tasks.",
            action="exp = SearchExperiences(question, image)",
            tool="SearchExperiences",
            observation="3 experiences",
            retrieved=[
                {
                    "source": "muse",
                    "policy": "tool",
                    "query": {"viewpoints": ["question"], "k": 3},
                    "hits": hits,
                    "notes": [LONG_URL],
                    "text": UNBROKEN,
                },
                {
                    "source": "expel",
                    "policy": "advisor",
                    "text": "Rules:\n1. " + UNBROKEN,
                    "query": "q" * 400,
                    "rules": [{"text": UNBROKEN, "votes": 2}, {"text": SENTENCE, "votes": 1}],
                },
            ],
        ),
        Step(index=1, finish="yellow"),
    ]
    t.answer, t.status = "yellow", "finished"
    return t


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("long") / "runs.sqlite"
    with RunStore(path) as store:
        store.open_run(LONG_RUN, "vstar", "muse")
        store.add(record(LONG_RUN, "q1", long_trace(), "yellow"))
    yield path


# Every element of the memory panels whose content is wider than its own box, and every text
# whose box leaves its record's box (in CSS pixels, with a pixel of slack for rounding).
OVERFLOWS = """root => {
  const bad = [];
  const records = [...root.querySelectorAll('.mem-record')];
  for (const el of [root, ...root.querySelectorAll('*')]) {
    if (el.getClientRects().length === 0) continue;  // not displayed (a closed fold)
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== 'inline') {
      bad.push(['scroll', el.className || el.tagName, el.scrollWidth, el.clientWidth]);
    }
  }
  for (const rec of records) {
    const box = rec.getBoundingClientRect();
    const walker = document.createTreeWalker(rec, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (r.width && (r.left < box.left - 1 || r.right > box.right + 1)) {
          bad.push(['text', n.textContent.slice(0, 30), r.left, r.right, box.left, box.right]);
        }
      }
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    bad.push(['page', document.documentElement.scrollWidth, window.innerWidth]);
  }
  return bad;
}"""


def check_long_guidance(page: Page, base: str, shot: str | None = None) -> None:
    page.goto(base + f"#/run/{LONG_RUN}/sample/{DATASET}/q1")
    wait_question(page, QUESTION)
    step = page.locator(".trace .step[data-step='0']")
    step.locator(".mem-record .hit").first.wait_for()
    guidance = step.locator(".hit .hit-guidance")
    assert guidance.nth(0).inner_text() == UNBROKEN  # whole, only wrapped
    assert guidance.nth(1).inner_text() == SENTENCE
    record_box = step.locator(".mem-record").first.bounding_box()
    assert record_box is not None
    # the unbroken text really is wider than its box would be on one line: it wraps
    first = guidance.nth(0).bounding_box()
    assert first is not None and first["height"] > 3 * 16, first
    panel = step.locator("details.retrieved.after")
    assert panel.evaluate(OVERFLOWS) == []
    # the folded long guidance: its summary, then the whole text once unfolded
    folded = step.locator("details.hit-guidance.long")
    assert folded.count() == 1
    folded.locator("summary").click()
    assert folded.locator(":scope > div").inner_text() == UNBROKEN_FOLDED
    before = step.locator("details.retrieved.before")
    for where in (panel, before):
        assert where.evaluate(OVERFLOWS) == []
    rules = before.locator("ol.hits[data-key=rules] .hit-guidance")
    assert rules.all_inner_texts() == [UNBROKEN, SENTENCE]
    # the page at a narrow width: still nothing sticks out
    page.set_viewport_size({"width": 520, "height": 900})
    for where in (panel, before):
        assert where.evaluate(OVERFLOWS) == []
    if shot:
        page.set_viewport_size({"width": 1000, "height": 900})
        panel.screenshot(path=str(ARTIFACTS / shot))
    page.set_viewport_size({"width": 1300, "height": 900})


def test_long_guidance_wraps_inside_its_box(long_store: Path, browser: object) -> None:
    from hammr.web.server import ViewerServer

    store = RunStore(long_store)
    server = ViewerServer(store, port=0)
    server.start_in_thread()
    try:
        errors: list[str] = []
        page = open_page(browser, errors)
        check_long_guidance(page, server.url, "memory_long_guidance.png")
        assert not errors, errors
    finally:
        server.stop()
        store.close()


def test_static_report_wraps_long_guidance(
    long_store: Path, browser: object, tmp_path: Path
) -> None:
    out = tmp_path / "long.html"
    with RunStore(long_store) as store:
        write_report(store, [LONG_RUN], out, ci_samples=20)
    errors: list[str] = []
    check_long_guidance(open_page(browser, errors), out.as_uri())
    assert not errors, errors
