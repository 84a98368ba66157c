"""The prefix-reuse benchmark's figures and tables (benchmarks/prefix_reuse.py), on synthetic
server exchanges and a synthetic trace: no server needed."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hammr.trace import Step, StepUsage, Trace

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "prefix_reuse.py"


@pytest.fixture(scope="module")
def pr() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prefix_reuse", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["prefix_reuse"] = module
    spec.loader.exec_module(module)
    return module


SYSTEM = "You answer questions about images.\nTools: ..."
CHILD = "You read text in images.\nTools: ..."


def chat(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in turns], "max_tokens": 64}


def reply(prompt: int, cached: int | None, *, openai_style: bool = False) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": 9}
    out: dict[str, Any] = {"choices": [{"message": {"content": "x"}}], "usage": usage}
    if cached is not None and openai_style:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    elif cached is not None:
        out["timings"] = {"cache_n": cached, "prompt_n": prompt - cached}
    return out


def agent_calls(pr: ModuleType) -> list[Any]:
    """A ReAct run (3 calls) that hands over to a child agent (2 calls) between its first and
    second step; question 0 of 'hammr'."""
    task = ("user", "Question: What is the plate?\nVariables:\n- image: image 640x480")
    first = chat(("system", SYSTEM), task)
    second = chat(("system", SYSTEM), task, ("assistant", "[Act]: a = Read(image)"),
                  ("user", "[Observe]: 154-JDX (stored in 'a')"))  # fmt: skip
    third = chat(*[(m["role"], m["content"]) for m in second["messages"]],
                 ("assistant", "[Act]: b = Count(a)"), ("user", "[Observe]: 7"))  # fmt: skip
    child_task = ("user", "Question: What is the plate?\nVariables:\n- image: image 640x480")
    child1 = chat(("system", CHILD), child_task)
    child2 = chat(("system", CHILD), child_task, ("assistant", "[Act]: t = OCR(image)"),
                  ("user", "[Observe]: 154-JDX"))  # fmt: skip
    exchanges = [
        (first, reply(1000, 0)),
        (child1, reply(800, 10)),  # a child's first call: not a later step
        (child2, reply(850, 840, openai_style=True)),
        (second, reply(1100, 1045)),  # 95%
        (third, reply(1200, 1188)),  # 99%
    ]
    return [pr.call_of("hammr", 0, req, rep) for req, rep in exchanges]


def planner_calls(pr: ModuleType) -> list[Any]:
    """A planner whose single-message prompt is rebuilt per step: its list of actions loses
    the one tried, right after the opening line; and a reply that says nothing of a cache."""
    head = "Your goal is to answer this query about an image: which car?\nActions:\n"
    one = chat(("user", head + "- image_search: find it\n- vqa: ask\nContext: (nothing)"))
    two = chat(("user", head + "- vqa: ask\nContext: image_search found nothing"))
    three = chat(("user", head + "- vqa: ask\nContext: image_search found nothing\n- more"))
    return [
        pr.call_of("avis", 0, one, reply(600, 0)),
        pr.call_of("avis", 0, two, reply(580, 29)),  # 5%
        pr.call_of("avis", 0, three, reply(590, None)),  # the server did not say
    ]


def test_calls_conversations_and_later_steps(pr: ModuleType) -> None:
    calls = agent_calls(pr)
    assert all(c is not None for c in calls)
    assert [c.cached_tokens for c in calls] == [0, 10, 840, 1045, 1188]
    parent, child = calls[0].conversation, calls[1].conversation
    assert parent != child
    assert parent.startswith("You answer questions about images. / Question: What is the plate?")
    later = pr.later_calls(calls)
    # the parent's 2 later steps and the child's 1; the child's first call is not one
    assert [(lc.call.conversation, lc.call.cached_tokens) for lc in later] == [
        (child, 840),
        (parent, 1045),
        (parent, 1188),
    ]
    assert [round(lc.share, 4) for lc in later] == [round(840 / 850, 4), 0.95, 0.99]
    # all of the previous prompt was kept (the reply's tokens too: counted as 100%)
    assert [lc.reused for lc in later] == [1.0, 1.0, 1.0]
    assert all(lc.extends for lc in later) and all(lc.differs == "" for lc in later)
    # a reply that is not a completion is no call
    assert pr.call_of("hammr", 0, chat(("user", "x")), {"data": []}) is None


def test_a_rebuilt_prompt_is_found_and_located(pr: ModuleType) -> None:
    later = pr.later_calls(planner_calls(pr))
    assert [lc.share for lc in later] == [pytest.approx(0.05), None]
    assert later[0].extends is False
    assert later[0].differs.startswith("message 1 (user): '- image_search: find it")
    assert "became '- vqa: ask" in later[0].differs
    assert 0 < later[0].kept < 1
    # the third prompt only appends to the second one
    assert later[1].extends is True
    ok, kept, where = pr.difference("line one\nline two", "line one\nline 2")
    assert (ok, where) == (False, "line 2: 'line two' became 'line 2'")
    assert kept == pytest.approx(len("line one\nline ") / len("line one\nline 2"))
    # the last message grew (a program line appended): still appending
    grew = pr.render_prompt(chat(("system", "S"), ("user", "Program:\nL1")))
    more = pr.render_prompt(chat(("system", "S"), ("user", "Program:\nL1\nL2")))
    assert pr.difference(grew, more)[0] is True


def test_system_figures_and_rows(pr: ModuleType) -> None:
    calls = agent_calls(pr) + planner_calls(pr)
    run = pr.SystemRun("hammr", questions=1, answered=1, wall_s=12.34)
    f = pr.system_figures(run, calls)
    assert f["llm_calls"] == 5 and f["later_calls"] == 3
    assert f["prompt_tokens_per_question"] == 1000 + 800 + 850 + 1100 + 1200
    assert f["evaluated_tokens_per_question"] == 4950 - (0 + 10 + 840 + 1045 + 1188)
    assert f["later_share_min"] == pytest.approx(0.95)
    assert f["later_share_median"] == pytest.approx(840 / 850)
    assert f["later_extending"] == 3 and f["target_met"] is True
    assert pr.system_row(f) == (
        "hammr", "1", "1/1", "5.0", "4,950", "1,867", "3", "95.0%", "98.8%", "yes",
    )  # fmt: skip

    avis = pr.system_figures(pr.SystemRun("avis", questions=2, answered=0), calls)
    assert avis["llm_calls_per_question"] == 1.5 and avis["target_met"] is False
    assert pr.system_row(avis)[7:] == ("5.0%", "5.0%", "no")
    single = pr.system_figures(pr.SystemRun("cot", questions=1, answered=1), [
        pr.call_of("cot", 0, chat(("user", "q")), reply(50, 0))
    ])  # fmt: skip
    assert pr.system_row(single)[6:] == ("0", "–", "–", "–")
    skipped = pr.system_figures(pr.SystemRun("muse", skipped="no memory file (x)"), calls)
    row = pr.system_row(skipped)
    assert row[:3] == ("muse", "0", "skipped") and len(row) == len(pr.COLUMNS)


def test_conversation_table_and_markdown(pr: ModuleType) -> None:
    calls = agent_calls(pr) + planner_calls(pr)
    groups = {g["conversation"]: g for g in pr.conversation_figures(calls)}
    assert len(groups) == 3
    planner = next(g for k, g in groups.items() if k.startswith("Your goal"))
    assert (planner["calls"], planner["later_calls"], planner["extending"]) == (3, 2, 1)
    assert planner["first_difference"].startswith("message 1 (user)")
    assert planner["reused_min"] == pytest.approx(29 / 600)
    figures = [
        pr.system_figures(pr.SystemRun("hammr", 1, 1), calls),
        pr.system_figures(pr.SystemRun("avis", 1, 0, problems=["q1: no answer (error: x)"]), calls),
        pr.system_figures(pr.SystemRun("muse", skipped="no memory file"), calls),
    ]
    text = pr.markdown(figures, list(groups.values()))
    lines = text.splitlines()
    assert lines[0].startswith("| system ") and "from cache: min" in lines[0]
    assert lines[1].startswith("|:-") and lines[1].endswith(":|")
    assert any(ln.startswith("| hammr ") and "95.0%" in ln and "yes" in ln for ln in lines)
    assert any(ln.startswith("| muse ") and "skipped" in ln for ln in lines)
    assert "- muse: skipped: no memory file" in lines
    assert "- avis: q1: no answer (error: x)" in lines
    # the conversation table: text columns left-aligned, one row per conversation that loops
    conv = lines[lines.index(next(ln for ln in lines if "conversation (its" in ln)) :]
    assert conv[1].startswith("|:-") and len([ln for ln in conv if ln.startswith("| ")]) == 4
    assert any("2/2" in ln for ln in conv) and any("1/2" in ln for ln in conv)


def test_the_same_figures_from_a_trace(pr: ModuleType) -> None:
    child = Trace(agent="OCRReasoningAgent", question="What is the plate?")
    child.steps = [
        Step(index=0, usage=StepUsage(800, 9, 10)),
        Step(index=1, usage=StepUsage(850, 9, 840)),
    ]
    trace = Trace(agent="QuestionDispatcherAgent", question="What is the plate?")
    trace.steps = [
        Step(index=0, router="neighbours", child=child),  # no call of its own
        Step(index=1, usage=StepUsage(1000, 9, 0)),
        Step(index=2, usage=StepUsage(1100, 9, 1045)),
        Step(index=3, usage=StepUsage(600, 9, 500), calls=2),  # summed: left out
        Step(index=4, usage=StepUsage(1200, 9, None)),  # the backend did not say
        Step(index=5, error_kind="llm_failure"),  # no reply: no usage
    ]
    calls = pr.trace_calls("hammr", 0, trace)
    assert [(c.conversation, c.prompt_tokens) for c in calls] == [
        ("QuestionDispatcherAgent > OCRReasoningAgent (step 1)", 800),
        ("QuestionDispatcherAgent > OCRReasoningAgent (step 1)", 850),
        ("QuestionDispatcherAgent", 1000),
        ("QuestionDispatcherAgent", 1100),
        ("QuestionDispatcherAgent", 1200),
    ]
    later = pr.later_calls(calls)
    assert [lc.share for lc in later] == [pytest.approx(840 / 850), pytest.approx(0.95), None]
    assert all(lc.extends is None for lc in later)
    f = pr.system_figures(pr.SystemRun("hammr", 1, 1), calls)
    assert (f["later_calls"], f["later_extending"]) == (3, None)
    assert f["later_share_min"] == pytest.approx(0.95)
    assert pr.conversation_row(pr.conversation_figures(calls)[0])[7] == "–"


def test_avis_steps_sum_the_cached_prompt_tokens_of_their_calls() -> None:
    from hammr.avis.system import _add_usage
    from hammr.backends.llm.base import LLMResponse, Usage

    step = Step(index=0)
    _add_usage(step, LLMResponse("a", Usage(600, 9), cached_prompt_tokens=30))
    assert step.usage == StepUsage(600, 9, 30)
    _add_usage(step, LLMResponse("b", Usage(400, 5), cached_prompt_tokens=350))
    assert step.usage == StepUsage(1000, 14, 380)
    # a reply that does not say: the step's figure is unknown, not a partial sum
    _add_usage(step, LLMResponse("c", Usage(10, 1)))
    assert step.usage == StepUsage(1010, 15, None)


async def test_a_cot_trace_keeps_cached_prompt_tokens() -> None:
    from hammr.backends.llm.base import LLMRequest, LLMResponse, Usage
    from hammr.muse.system import CoTSystem

    class Cached:
        name = "cached"
        grammar_support = "none"

        async def complete(self, request: LLMRequest) -> LLMResponse:
            return LLMResponse("It is red.\nAnswer: red", Usage(120, 7), cached_prompt_tokens=100)

    result = await CoTSystem(Cached()).run("What colour?")
    assert result.trace.steps[0].usage == StepUsage(120, 7, 100)


def as_body(request: Any) -> dict[str, Any]:
    """An LLMRequest as the JSON body a server gets (text only)."""
    return {"messages": [{"role": m.role, "content": m.text()} for m in request.messages]}


async def test_mulprog_line_calls_and_their_repair_each_extend_the_previous_prompt(
    pr: ModuleType,
) -> None:
    from hammr.backends.llm.scripted import ScriptedLLM
    from hammr.programs.modules import default_modules
    from hammr.programs.planner import ProgramPlanner, load_examples

    planner = ProgramPlanner(default_modules(), load_examples()[:2])
    bad = ["BOX0=LOC(image=IMAGE,object='dog')", "ANSWER0=COUNT(box=BOX9)", ""]
    good = ["BOX0=LOC(image=IMAGE,object='dog')", "ANSWER0=COUNT(box=BOX0)",
            "FINAL_RESULT=RESULT(var=ANSWER0)"]  # fmt: skip
    llm = ScriptedLLM([*bad, *good], grammar="gbnf")
    await planner.write("How many dogs?", llm)
    errors = "line 2: BOX9 is not defined"
    await planner.write("How many dogs?", llm, previous="\n".join(bad), errors=errors)
    assert len(llm.requests) == 6
    prompts = [pr.render_prompt(as_body(r)) for r in llm.requests]
    for before, after in itertools.pairwise(prompts):
        assert pr.difference(before, after)[0], pr.difference(before, after)[2]
    # the repair: the failed program where it was written, then the errors, then the new lines
    *_, first_turn, repair = llm.requests[-1].messages
    assert first_turn.text().endswith("Program:\n" + "\n".join(bad[:2]))
    assert repair.text().startswith("The program above cannot run:\n" + errors)
    assert repair.text().endswith("Program:\n" + "\n".join(good[:2]))


def test_the_server_runs_on_the_projects_default_threads(
    pr: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `--threads`: LocalLlamaServer's own default (one, as the embedded model's), not
    llama.cpp's one-per-core; `--threads N` sets N and `--threads 0` leaves it to llama.cpp."""
    from hammr.backends.llm import local_server

    assert pr.default_threads() == local_server.LocalLlamaServer().n_threads == 1
    made: list[dict[str, Any]] = []

    class Started(Exception):
        pass

    class Server:
        def __init__(self, **kw: Any) -> None:
            made.append(kw)

        def __enter__(self) -> None:
            raise Started

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(local_server, "LocalLlamaServer", Server)
    for threads in (None, 3, 0):
        with pytest.raises(Started):
            pr.measure(["react"], threads=threads, log=lambda _m: None)
    slot = {"n_parallel": 1, "per_slot_ctx": 8192}
    assert made == [slot, {**slot, "n_threads": 3}, {**slot, "n_threads": None}]
