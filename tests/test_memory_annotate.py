"""Hindsight annotation of an experience bank: scripted annotators (valid replies, retries that
name the problem, failures kept and the run going on, guidance that gives the answer away,
interrupted and resumed runs, bounded concurrency, the prompt of correct and incorrect
trajectories, images for a model that sees), the reply checks, and one run of the real
embedded model through its GBNF grammar."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from conftest import needs_embedded_model
from hammr.backends.llm.base import ImagePart, LLMError, LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.eval.store import RunStore
from hammr.memory import (
    Annotation,
    AnnotationFailed,
    ExperienceBank,
    HindsightAnnotator,
    Trajectory,
    TrajectoryAnnotation,
    annotate_bank,
    experiences_from_runs,
    pending_trajectories,
)
from hammr.memory.annotate import trajectory_prompt
from hammr.memory.annotation_replies import (
    ReplyProblem,
    answer_terms,
    check_reply,
    option_text,
    reply_grammar,
    reply_schema,
)
from test_memory_bank import RED, cup_trace, make_store, record, solid

# -- a bank and scripted models -------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = make_store(tmp_path / "runs.sqlite")
    yield s  # type: ignore[misc]
    s.close()


@pytest.fixture
def bank(tmp_path: Path, store: RunStore) -> ExperienceBank:
    """Run 'explore': the umbrella (correct; a 4-step top trace and a 2-step child trace)
    and the cup (incorrect, 2 steps): three trajectories, eight experiences."""
    b = ExperienceBank(tmp_path / "bank.db")
    b.add(experiences_from_runs(store, "explore").experiences, store)
    yield b  # type: ignore[misc]
    b.close()


def first_text(request: LLMRequest) -> str:
    return request.messages[0].text()


def question_of(request: LLMRequest) -> str:
    m = re.search(r"^Question: (.*)$", first_text(request), re.MULTILINE)
    assert m is not None
    return m.group(1)


def steps_of(request: LLMRequest) -> int:
    return len(re.findall(r"^\d+\. ", first_text(request), re.MULTILINE))


def attempt_of(request: LLMRequest) -> int:
    """1 for the first call on a trajectory; each retry adds a reply and a correction."""
    return len(request.messages) // 2 + 1


def good_reply(n: int, base: int = 5) -> str:
    """Scores base+1, base+2, ... and guidance naming the step."""
    steps = [
        {"step": i, "score": min(10, base + i), "guidance": f"Step {i}: look before you leap."}
        for i in range(1, n + 1)
    ]
    return json.dumps({"steps": steps})


def good(request: LLMRequest) -> str:
    return good_reply(steps_of(request))


UMBRELLA = "What colour is the umbrella?"
CHILD = "Which colour is this umbrella?"
CUP = "Is the cup to the left of the plate?"


# -- annotating a bank ----------------------------------------------------------------------


async def test_scripted_replies_annotate_every_step(bank: ExperienceBank) -> None:
    llm = ScriptedLLM(good, model="hindsight-scripted")
    report = await annotate_bank(bank, HindsightAnnotator(llm))
    assert (report.annotated, report.trajectories, report.pending) == (8, 3, 3)
    assert report.failed == () and report.attempts == 3 and report.skipped == 0
    assert report.annotator == "hindsight-scripted"
    # the build's model calls and tokens (no question's trace holds them): in its report
    assert report.usage is not None and report.usage.calls == 3 == llm.calls
    prompt = sum(len(m.text().split()) for r in llm.requests for m in r.messages)
    assert report.usage.usage.prompt_tokens == prompt
    assert f"3 calls, {prompt}+" in report.lines()[0]
    assert bank.experiences(annotated=False) == []
    # each step got its own entry: step i of a trajectory scored 5 + i
    for s in bank.experiences():
        assert s.annotation == Annotation(
            5 + s.experience.provenance.step + 1,
            f"Step {s.experience.provenance.step + 1}: look before you leap.",
            "hindsight-scripted",
        )
    # one call per trajectory, its steps numbered as action -> observation lines
    assert sorted(steps_of(r) for r in llm.requests) == [2, 2, 4]
    umbrella = next(r for r in llm.requests if question_of(r) == UMBRELLA)
    assert "1. boxes = LocateObjects(image, 'umbrella') -> boxes: 1 box" in first_text(umbrella)
    assert "4. [Finish]: red" in first_text(umbrella)
    # a plain model gets neither a grammar nor a schema; nothing is left to do afterwards
    assert all(r.grammar is None and r.json_schema is None for r in llm.requests)
    assert pending_trajectories(bank) == []
    again = await annotate_bank(bank, HindsightAnnotator(llm))
    assert again.pending == 0 and again.skipped == 8 and llm.calls == 3


async def test_the_reply_is_constrained_where_the_backend_can(bank: ExperienceBank) -> None:
    gbnf = ScriptedLLM(good, grammar="gbnf")
    await annotate_bank(bank, HindsightAnnotator(gbnf), limit=1)
    (request,) = gbnf.requests
    assert request.grammar == reply_grammar(4) and request.json_schema is None
    assert 's4 ::= "{\\"step\\": 4, \\"score\\": " score' in request.grammar
    assert "s5 ::=" not in request.grammar

    schema_llm = ScriptedLLM(good)
    schema_llm.json_schema_support = True  # type: ignore[attr-defined]
    await annotate_bank(bank, HindsightAnnotator(schema_llm), limit=1)
    (request,) = schema_llm.requests
    assert request.grammar is None and request.json_schema == reply_schema(2)
    assert request.json_schema["properties"]["steps"]["minItems"] == 2
    # [llm] grammar = "off": asked in words only
    plain = ScriptedLLM(good, grammar="gbnf")
    await annotate_bank(bank, HindsightAnnotator(plain, grammar=False), limit=1)
    assert plain.requests[0].grammar is None


async def test_bad_replies_are_retried_with_what_was_wrong(bank: ExperienceBank) -> None:
    def script(request: LLMRequest) -> str:
        if question_of(request) != CUP:
            return good(request)
        return {
            1: "Step 1 was fine and step 2 was wrong.",
            2: json.dumps({"steps": [{"step": 1, "score": 2, "guidance": "Crop first."}]}),
            3: good_reply(2, base=1),
        }[attempt_of(request)]

    llm = ScriptedLLM(script)
    report = await annotate_bank(bank, HindsightAnnotator(llm), concurrency=1)
    assert report.annotated == 8 and report.failed == () and report.attempts == 5
    cup = [r for r in llm.requests if question_of(r) == CUP]
    assert [len(r.messages) for r in cup] == [1, 3, 5]
    # each retry shows the model its reply and says what was wrong with it
    assert cup[1].messages[1].text() == "Step 1 was fine and step 2 was wrong."
    assert "not JSON" in cup[1].messages[2].text()
    assert "step 2 missing" in cup[2].messages[4].text()
    scores = sorted(
        s.annotation.score
        for s in bank.experiences()
        if s.experience.provenance.sample_id == "s2" and s.annotation
    )
    assert scores == [2, 3]


async def test_a_trajectory_that_never_gets_a_good_reply_is_recorded_and_skipped(
    bank: ExperienceBank,
) -> None:
    def script(request: LLMRequest) -> str:
        if question_of(request) == CUP:
            return '{"steps": [{"step": 1, "score": 11, "guidance": ""}]}'
        return good(request)

    report = await annotate_bank(bank, HindsightAnnotator(ScriptedLLM(script), max_attempts=2))
    assert report.annotated == 6 and report.trajectories == 2 and report.attempts == 4
    (failure,) = report.failed
    assert failure.place() == "explore/vstar/s2" and failure.attempts == 2
    assert "no usable reply in 2 attempts" in failure.reason
    assert "score must be a whole number 0-10, not 11" in failure.reason
    assert "step 1's guidance is empty" in failure.reason and "step 2 missing" in failure.reason
    assert failure.reply == '{"steps": [{"step": 1, "score": 11, "guidance": ""}]}'
    assert bank.annotation_failures() == [failure] or (
        [(f.place(), f.reason, f.reply) for f in bank.annotation_failures()]
        == [(failure.place(), failure.reason, failure.reply)]
    )
    assert any("not annotated: 1 trajectories" in line for line in report.lines())
    assert {s.experience.provenance.sample_id for s in bank.experiences(annotated=False)} == {"s2"}
    # a later success clears the record
    await annotate_bank(bank, HindsightAnnotator(ScriptedLLM(good)))
    assert bank.annotation_failures() == [] and bank.experiences(annotated=False) == []


async def test_guidance_that_gives_the_answer_away_is_rejected(bank: ExperienceBank) -> None:
    def script(request: LLMRequest) -> str:
        if question_of(request) != UMBRELLA or attempt_of(request) > 1:
            return good(request)
        steps = json.loads(good_reply(4))["steps"]
        steps[3]["guidance"] = "Answer that the umbrella is Red."
        return json.dumps({"steps": steps})

    llm = ScriptedLLM(script)
    report = await annotate_bank(bank, HindsightAnnotator(llm))
    assert report.failed == () and report.attempts == 4
    retry = next(r for r in llm.requests if question_of(r) == UMBRELLA and len(r.messages) == 3)
    assert "step 4's guidance gives away this question's answer ('red')" in retry.messages[2].text()
    assert all("red" not in (s.annotation.guidance if s.annotation else "").lower().split()
               for s in bank.experiences())  # fmt: skip


async def test_an_interrupted_run_keeps_its_work_and_a_rerun_does_only_the_rest(
    bank: ExperienceBank,
) -> None:
    def flaky(request: LLMRequest) -> str:
        if question_of(request) == CHILD:
            raise LLMError("the server went away")
        return good(request)

    first = ScriptedLLM(flaky)
    report = await annotate_bank(bank, HindsightAnnotator(first))
    assert report.annotated == 6 and len(report.failed) == 1
    assert report.failed[0].place() == "explore/vstar/s1 2.child"
    assert report.failed[0].reason == "the model failed: the server went away"
    # a new run (a new process: the bank reopened) asks for the child trajectory only
    path = bank.path
    bank.close()
    with ExperienceBank(path) as reopened:
        second = ScriptedLLM(good)
        again = await annotate_bank(reopened, HindsightAnnotator(second))
        assert second.calls == 1 and question_of(second.requests[0]) == CHILD
        assert (again.annotated, again.skipped, again.pending) == (2, 6, 1)
        assert reopened.experiences(annotated=False) == []
        assert reopened.annotation_failures() == []


async def test_cancelling_a_run_keeps_the_trajectories_already_written(
    bank: ExperienceBank,
) -> None:
    class Slow:
        name = "slow"

        def __init__(self) -> None:
            self.done = 0

        async def annotate(self, t: Trajectory) -> TrajectoryAnnotation:
            if self.done >= 1:
                await asyncio.sleep(30)
            self.done += 1
            return TrajectoryAnnotation(tuple(Annotation(6, "Fine.", "slow") for _ in t.steps))

    task = asyncio.ensure_future(annotate_bank(bank, Slow(), concurrency=1))
    while bank.info().annotated == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bank.info().annotated == 4  # the first trajectory, written whole
    assert len(pending_trajectories(bank)) == 2


async def test_the_prompt_tells_the_outcome_and_only_a_wrong_one_gets_the_truth(
    bank: ExperienceBank,
) -> None:
    llm = ScriptedLLM(good)
    await annotate_bank(bank, HindsightAnnotator(llm))
    by_question = {question_of(r): first_text(r) for r in llm.requests}
    cup = by_question[CUP]
    assert 'Outcome: the final answer was judged WRONG. The agent answered "yes".' in cup
    assert 'Correct answer: "no"' in cup and "Task: vstar / relation" in cup
    umbrella = by_question[UMBRELLA]
    assert "Outcome: the final answer was judged CORRECT." in umbrella
    assert "Correct answer" not in umbrella and "Task: vstar / attribute" in umbrella
    child = by_question[CHILD]
    assert "helper agent, AttributeAgent" in child and "2. [Finish]: red" in child


async def test_concurrency_is_bounded_and_a_broken_annotator_does_not_end_the_run(
    tmp_path: Path, store: RunStore
) -> None:
    class Counting:
        name = "counting"

        def __init__(self) -> None:
            self.active = self.peak = 0

        async def annotate(self, t: Trajectory) -> TrajectoryAnnotation:
            self.active += 1
            self.peak = max(self.peak, self.active)
            await asyncio.sleep(0.05)
            self.active -= 1
            if t.first.provenance.sample_id == "s2":
                raise RuntimeError("annotator bug")
            return TrajectoryAnnotation(tuple(Annotation(5, "Ok.", "c") for _ in t.steps), 2)

    harvest = experiences_from_runs(store, "explore")
    for limit in (1, 2, 3):
        with ExperienceBank(tmp_path / f"bank{limit}.db") as bank:
            bank.add(harvest.experiences, store)
            annotator = Counting()
            report = await annotate_bank(bank, annotator, concurrency=limit)
            assert annotator.peak == limit  # three trajectories
            assert report.failed[0].reason == "RuntimeError: annotator bug"
            assert report.annotated == 6 and report.attempts == 5


async def test_an_annotator_giving_the_wrong_number_of_annotations_fails_that_trajectory(
    bank: ExperienceBank,
) -> None:
    class Short:
        name = "short"

        async def annotate(self, t: Trajectory) -> TrajectoryAnnotation:
            if len(t.steps) == 4:
                raise AnnotationFailed("gave up", "raw text", 3)
            return TrajectoryAnnotation((Annotation(5, "Ok.", "short"),))

    report = await annotate_bank(bank, Short())
    assert report.annotated == 0 and report.attempts == 5
    reasons = sorted(f.reason for f in report.failed)
    assert reasons == ["1 annotations for 2 steps", "1 annotations for 2 steps", "gave up"]


async def test_a_model_that_sees_gets_the_input_images(bank: ExperienceBank) -> None:
    llm = ScriptedLLM(good, vision=True)
    await annotate_bank(bank, HindsightAnnotator(llm))
    by_question = {question_of(r): r.messages[0] for r in llm.requests}
    shown = by_question[UMBRELLA].images()
    assert len(shown) == 1 and shown[0] == solid(RED)
    assert "image is below" in by_question[UMBRELLA].text()
    assert any(isinstance(p, ImagePart) for p in by_question[UMBRELLA].content)
    # the cup's image is not in the bank: text only, nothing fails
    assert by_question[CUP].images() == [] and isinstance(by_question[CUP].content, str)
    # a text-only model gets no image parts
    text_only = ScriptedLLM(good)
    await annotate_bank(bank, HindsightAnnotator(text_only))
    assert text_only.calls == 0  # everything was annotated already


# -- the reply checks -----------------------------------------------------------------------


def test_check_reply_accepts_fenced_json_and_says_everything_wrong() -> None:
    fenced = "Here it is:\n```json\n" + good_reply(2) + "\n```"
    assert check_reply(fenced, 2) == [
        (6, "Step 1: look before you leap."),
        (7, "Step 2: look before you leap."),
    ]
    whole = json.dumps({"steps": [{"step": 1, "score": 7.0, "guidance": "Crop, e.g. the cup."}]})
    assert check_reply(whole, 1) == [(7, "Crop, e.g. the cup.")]
    cases = {
        "no JSON here": "not JSON",
        '{"steps": [}': "not valid JSON",
        '{"answer": 1}': 'no "steps" list',
        json.dumps({"steps": [{"step": 1, "score": 5, "guidance": "A."}] * 2}): "appears more",
        json.dumps({"steps": [{"step": 3, "score": 5, "guidance": "A."}]}): "no step 3",
        json.dumps({"steps": [{"step": 1, "score": True, "guidance": "A."}]}): "not True",
        json.dumps({"steps": [{"step": 1, "score": 5, "guidance": "x" * 301}]}): "301 characters",
        json.dumps({"steps": [{"step": 1, "score": 5, "guidance": "A. B. C."}]}): "3 sentences",
        json.dumps({"steps": ["x"]}): "entry 1 is not an object",
    }
    for reply, problem in cases.items():
        with pytest.raises(ReplyProblem, match=re.escape(problem)):
            check_reply(reply, 1)


def test_answer_terms_and_option_texts() -> None:
    mc = "Where is the cup?\nA. left of the plate\nB. right of the plate\nC: on it"
    assert option_text(mc, "B") == "right of the plate" and option_text(mc, "C") == "on it"
    assert option_text("(A) a red bus (B) a blue car", "B") == "a blue car"
    assert option_text("What colour is it?", "A") is None
    assert answer_terms(mc, ["B"]) == ["right of the plate"]
    assert answer_terms(mc, ["(a)"]) == ["left of the plate"]
    # short answers are not checked; a letter without listed options neither
    assert answer_terms("How many?", ["3", "no", "D"]) == []
    assert answer_terms("x", ["Red", "red", "blue sky"]) == ["Red", "blue sky"]
    reply = json.dumps({"steps": [{"step": 1, "score": 5, "guidance": "Say right of the plate."}]})
    with pytest.raises(ReplyProblem, match="gives away"):
        check_reply(reply, 1, answer_terms(mc, ["B"]))
    # words only: 'reddish' does not contain the answer 'red'
    ok = json.dumps({"steps": [{"step": 1, "score": 5, "guidance": "Reddish tones mislead."}]})
    assert check_reply(ok, 1, ["red"])[0][0] == 5


def test_the_prompt_of_a_multiple_choice_question(tmp_path: Path, store: RunStore) -> None:
    trace = cup_trace()
    trace.question = "Where is the cup?\nA. left of the plate\nB. right of the plate"
    store.add(record("explore", "s9", trace, 0.0, answers=("B",), question_type="relation"))
    with ExperienceBank(tmp_path / "mc.db") as b:
        b.add(experiences_from_runs(store, "explore").experiences, store)
        (t,) = [t for t in pending_trajectories(b) if t.first.provenance.sample_id == "s9"]
        prompt = trajectory_prompt(t)
        assert 'Correct answer: "B"' in prompt and "with exactly 2 entries" in prompt


# -- the real embedded model ----------------------------------------------------------------


@needs_embedded_model
async def test_the_embedded_model_annotates_through_its_grammar(
    tmp_path: Path, store: RunStore
) -> None:
    from hammr.backends.llm.embedded import EmbeddedLLM

    cup = [
        e
        for e in experiences_from_runs(store, "explore").experiences
        if e.provenance.sample_id == "s2"
    ]
    with ExperienceBank(tmp_path / "real.db") as b:
        b.add(cup, store)
        llm = EmbeddedLLM(n_ctx=4096)
        report = await annotate_bank(b, HindsightAnnotator(llm))
        assert report.annotator.startswith("embedded:")
        # The grammar holds the form (JSON, every step, whole scores, one or two sentences);
        # what a 135M model writes in it may still give the answer away ("the correct answer
        # is no"), which the check refuses and the bank records: for that reason only.
        for failure in report.failed:
            reason = failure.reason
            assert "gives away" in reason or "speaks of this question's answer" in reason, reason
            for form in ("JSON", "missing", "characters long", "sentences", "score must"):
                assert form not in reason, reason
            assert [s["step"] for s in json.loads(failure.reply)["steps"]] == [1, 2]
        assert report.annotated == (0 if report.failed else 2)
        for s in b.experiences(annotated=True):
            assert s.annotation is not None
            assert 0 <= s.annotation.score <= 10
            assert 5 <= len(s.annotation.guidance) <= 300
            assert "correct answer" not in s.annotation.guidance.lower()
