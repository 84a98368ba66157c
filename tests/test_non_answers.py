"""Replies that are not answers (hammr's own instruction, the question, nothing) are recorded
as no answer, whatever the system: scripted fake models, the eval runner and `hammr ask`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from conftest import EXAMPLES
from fake_openai_server import FakeServer, Reply, ok_body, served_env
from hammr.agent import LAST_STEP_NOTE, AgentResult, ReActAgent
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.eval.runner import run_eval
from hammr.eval.store import RunStore
from hammr.eval.suites import SuiteEntry
from hammr.eval.types import Sample
from hammr.muse.system import CoTSystem
from hammr.non_answers import (
    EMPTY,
    INSTRUCTION,
    LABEL,
    PROMPTS,
    QUESTION,
    non_answer,
    prompt_instructions,
)
from hammr.tools.base import tool
from hammr.trace import Trace, format_trace
from hammr.values import Image

COPIED = "write [Thought] and [Finish] with your best answer."
"""What the embedded 135M model answered at its forced last step (issue 26)."""


def img() -> Image:
    return Image(PILImage.new("RGB", (64, 48), (200, 30, 30)))


@tool
def Width(image: Image) -> int:
    """The width of an image in pixels."""
    return image.width


def agent(llm: ScriptedLLM, **kw: object) -> ReActAgent:
    return ReActAgent(
        name="Tester",
        description="A test agent.",
        instructions="Answer the question about the image. Answer with one word.",
        tools=[Width],
        llm=llm,
        **kw,
    )


# -- through the ReAct loop, with scripted models -------------------------------------------


async def test_scripted_instruction_copied_at_the_forced_last_step_is_no_answer() -> None:
    llm = ScriptedLLM(["I am not sure.", f"[Thought]: I must finish.\n[Finish]: {COPIED}"])
    r = await agent(llm, max_steps=2).run("What is the licence plate number?", {"image": img()})
    assert LAST_STEP_NOTE in llm.requests[1].messages[-1].text()  # the model was told that
    assert r.answer is None and not r.ok
    t = r.trace
    assert (t.answer, t.status) == (None, "no_answer")
    assert t.error == f'{INSTRUCTION}: "{COPIED}"'
    last = t.steps[-1]
    assert last.forced and last.finish is None
    assert last.error_kind == "no_action"  # hammr's kind for a reply with no usable step
    assert last.error == f'not an answer: {INSTRUCTION}: "{COPIED}"'
    assert COPIED in last.raw  # what the model wrote is kept
    assert ("Tester", last) in t.errors()
    # the record survives a save and a load
    again = Trace.from_dict(t.to_dict())
    assert (again.status, again.answer, again.steps[-1].error_kind) == (
        "no_answer",
        None,
        "no_action",
    )
    shown = format_trace(t)
    assert "ended: no_answer (the model repeated hammr's instruction" in shown
    assert "answer: (no answer)" in shown


@pytest.mark.parametrize(
    "copied",
    [
        LAST_STEP_NOTE,
        "This is your last step",
        "the short answer",  # the step format's [Finish] line
        "[Thought]: what you will do next and why",
        "Answer with one word.",  # the agent's own instructions
        "The width of an image in pixels",  # a tool card
    ],
)
async def test_scripted_copies_of_hammrs_prompt_are_no_answer(copied: str) -> None:
    llm = ScriptedLLM([f"[Thought]: done\n[Finish]: {copied}"])
    r = await agent(llm).run("What colour is the car?", {"image": img()})
    assert r.answer is None and r.trace.status == "no_answer"
    assert r.trace.error is not None and r.trace.error.startswith(INSTRUCTION)


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("What is the licence plate number?", "What is the licence plate number?"),
        ("What is the licence plate number?", "what is the licence plate number"),
        ("What is the licence plate number?", "Question: What is the licence  plate number?"),
        ("Which colour is the car?\nOptions:\nA. red\nB. blue", "Which colour is the car?"),
    ],
)
async def test_scripted_question_repeated_is_no_answer(question: str, reply: str) -> None:
    llm = ScriptedLLM([f"[Thought]: done\n[Finish]: {reply}"])
    r = await agent(llm).run(question, {"image": img()})
    assert r.answer is None and r.trace.status == "no_answer"
    assert r.trace.error == f'{QUESTION}: "{" ".join(reply.split())}"'
    assert r.trace.steps[-1].error_kind == "no_action"


@pytest.mark.parametrize("reply", ["...", '""', "?!", "-"])
async def test_scripted_empty_answer_is_no_answer(reply: str) -> None:
    llm = ScriptedLLM([f"[Thought]: done\n[Finish]: {reply}"])
    r = await agent(llm).run("How many cars are there?", {"image": img()})
    assert r.answer is None and r.trace.status == "no_answer"
    assert r.trace.error == EMPTY


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("How many cars are there?", "2"),
        ("Is the car blue?", "yes"),
        ("Is the car blue?", "blue"),  # a word of the question
        ("Is the car blue or red?", "red"),
        ("What is the licence plate number?", "154-JDX"),
        ("What does the sign say?", "your best answer"),  # too short to tell from an answer
        ("Where is the dog?", "in the middle of the image"),
        ("Where is the dog?", "on the left"),
        ("How much is a cappuccino?", "$3.50"),
        ("What symbol is on the card?", "♥"),
        ("What is the licence plate number?", "The licence plate number is 154-JDX"),
    ],
)
async def test_scripted_legit_answers_are_kept(question: str, reply: str) -> None:
    llm = ScriptedLLM([f"[Thought]: done\n[Finish]: {reply}"])
    r = await agent(llm).run(question, {"image": img()})
    assert r.answer == reply and r.ok
    assert r.trace.steps[-1].error_kind is None and r.trace.steps[-1].finish == reply


async def test_scripted_specialist_copying_the_note_fails_as_a_tool_of_its_parent() -> None:
    child_llm = ScriptedLLM(["I am not sure.", f"[Finish]: {COPIED}"])
    child = ReActAgent("Child", "Answers.", "Answer.", [Width], llm=child_llm, max_steps=2)
    parent_llm = ScriptedLLM(["[Act]: a = Child('What colour?', image)", "[Finish]: red"])
    parent = ReActAgent("Parent", "Routes.", "Route.", [child], llm=parent_llm)
    r = await parent.run("What colour?", {"image": img()})
    assert r.answer == "red"  # the parent answered on its own
    step = r.trace.steps[0]
    assert step.error_kind == "tool_failure" and step.child is not None
    assert step.child.status == "no_answer" and INSTRUCTION in str(step.error)


async def test_scripted_one_call_system_goes_through_the_same_check() -> None:
    # CoT is not a ReAct agent: its answer is refused where every system's result is made
    llm = ScriptedLLM(["The image is red.\nAnswer: the short answer"])
    r = await CoTSystem(llm).run("What colour is it?", {"image": img()})
    assert r.answer is None and r.trace.status == "no_answer"
    assert r.trace.steps[0].error_kind == "no_action"
    ok = await CoTSystem(ScriptedLLM(["It is red.\nAnswer: red"])).run("What colour?")
    assert ok.answer == "red"


def test_a_result_made_by_any_system_is_checked() -> None:
    trace = Trace(agent="Mine", question="Is it red?", answer="Is it red?", status="finished")
    r = AgentResult("Is it red?", trace)
    assert r.answer is None and trace.status == "no_answer" and trace.answer is None
    kept = AgentResult("yes", Trace(agent="Mine", question="Is it red?", status="finished"))
    assert kept.answer == "yes"


# -- the rule itself --------------------------------------------------------------------------


def test_non_answer_rule() -> None:
    q = "Is the car blue?"
    assert non_answer("", q) == EMPTY
    assert non_answer("   ", q) == EMPTY
    assert non_answer("Is the car blue", q) == QUESTION
    assert non_answer(COPIED, q) == INSTRUCTION
    assert non_answer(COPIED.upper().replace(" ", "  "), q) == INSTRUCTION
    # a fragment of a sentence of at least eight words is a copy too
    assert non_answer("and [Finish] with your best answer", q) is None  # six words
    assert non_answer("This is your last step: write [Thought] and", q) == INSTRUCTION
    # the system's own text, passed with its result
    assert non_answer("Look twice before you answer.", q, ["Look twice before you answer."])
    for legit in ["blue", "no", "2", "the car", "car blue", "a blue car", "red car"]:
        assert non_answer(legit, q) is None, legit


def test_a_label_of_hammr_s_reply_format_is_no_answer() -> None:
    """The embedded model answered AVIS's rocket question with its reasoner's verdict word
    ("answerable: answerable"); the word is not the answer, whatever system gave it."""
    q = "Which company builds this rocket?"
    for label in ["answerable", "Answerable.", "not informative", "NOT_INFORMATIVE", "informative"]:
        assert non_answer(label, q) == LABEL, label
    for legit in ["SpaceX", "answerable questions", "not very informative", "informed"]:
        assert non_answer(legit, q) is None, legit
    trace = Trace(agent="AVIS", question=q, answer="answerable", status="finished")
    assert AgentResult("answerable", trace).answer is None
    assert trace.status == "no_answer" and trace.error == f'{LABEL}: "answerable"'


def test_every_prompt_named_exists_and_worked_example_answers_are_answers() -> None:
    assert prompt_instructions().words  # PROMPTS all resolve (a renamed constant fails here)
    assert len(PROMPTS) == len({(m, n) for m, n, _ in PROMPTS})
    # the answers of AVIS's worked examples are in its prompts, after their instructions
    for answer in ["Sydney Opera House", "Fiat 500", "1894", "what breed is the dog"]:
        assert non_answer(answer, "Which landmark is this?") is None, answer


# -- evaluation and the command line --------------------------------------------------------


async def test_scripted_eval_scores_a_non_answer_as_answered_wrong(tmp_path: Path) -> None:
    image = tmp_path / "img.png"
    PILImage.new("RGB", (64, 48), (200, 30, 30)).save(image)
    entry = SuiteEntry(name="gqa", dataset="gqa", file="gqa.jsonl", metric="exact_match")
    samples = [
        (entry, Sample(id=i, dataset="gqa", question=q, answers=("2",), images={"image": image}))
        for i, q in [("copy", "How many cars?"), ("ok", "How many cars are there?")]
    ]

    def reply(request: LLMRequest) -> str:
        text = request.messages[-1].text()
        return f"[Finish]: {COPIED}" if "How many cars?" in text else "[Finish]: 2"

    system = agent(ScriptedLLM(reply))
    with RunStore(tmp_path / "s.sqlite") as store:
        store.open_run("r", "tiny", "Tester")
        out = await run_eval(system, samples, store=store, run_name="r")
        assert (out.ran, out.errors) == (2, 0)
        copy, ok = store.get("r", "gqa", "copy"), store.get("r", "gqa", "ok")
        assert (copy.status, copy.prediction, copy.score) == ("no_answer", None, 0.0)
        assert copy.error is not None and copy.error.startswith(INSTRUCTION)
        assert copy.trace is not None and copy.trace.steps[-1].error_kind == "no_action"
        assert (ok.status, ok.prediction, ok.score) == ("finished", "2", 1.0)
        assert store.summary("r").mean == pytest.approx(0.5)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


@pytest.mark.parametrize("show", [False, True])
def test_scripted_ask_says_the_model_gave_no_answer(server: FakeServer, show: bool) -> None:
    server.script = [
        Reply(body=ok_body("I am not sure.")),
        Reply(body=ok_body(f"[Thought]: last step\n[Finish]: {COPIED}")),
    ]
    args = ["ask", str(EXAMPLES / "plate.png"), "What is the licence plate number?"]
    args += ["--system", "OCRReasoningAgent", "--max-steps", "2", *(["--show"] if show else [])]
    r = CliRunner().invoke(main, args, env=served_env(server), catch_exceptions=False)
    assert r.exit_code == 1
    assert r.stderr == f'hammr: no answer: {INSTRUCTION}: "{COPIED}"\n'
    if show:
        assert "└─ ended: no_answer (the model repeated hammr's instruction" in r.stdout
        assert "[no_action]" in r.stdout
        assert r.stdout.strip().splitlines()[-1].startswith("answer: (no answer)")
    else:
        assert r.stdout == ""


def test_scripted_ask_prints_a_legit_answer(server: FakeServer) -> None:
    server.script = [Reply(body=ok_body("[Thought]: read it\n[Finish]: 154-JDX"))]
    args = ["ask", str(EXAMPLES / "plate.png"), "What is the licence plate number?"]
    args += ["--system", "OCRReasoningAgent"]
    r = CliRunner().invoke(main, args, env=served_env(server), catch_exceptions=False)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "154-JDX\n", "")


def test_scripted_ask_escapes_the_models_text_in_the_reason(server: FakeServer) -> None:
    # a bell and a right-to-left override: not words, and not for the terminal
    server.script = [Reply(body=ok_body("[Finish]: What is the \x07licence plate\u202e number?"))]
    args = ["ask", str(EXAMPLES / "plate.png"), "What is the licence plate number?"]
    args += ["--system", "OCRReasoningAgent"]
    r = CliRunner().invoke(main, args, env=served_env(server), catch_exceptions=False)
    assert r.exit_code == 1
    assert r.stderr == f'hammr: no answer: {QUESTION}: "What is the licence plate number?"\n'
