"""The SearchExperiences tool and the every-step advisor over a real bank (the stub
bag-of-words embedder of tests/test_memory_bank.py): the query is the caller's live state,
wide and deep search give the expected experiences in order with their rounds, the settings
(threshold, sources, out-of-domain) change what is found, bad calls are recoverable errors
listing the bank's viewpoints, and the ground truth never reaches the agent.

The bank of :func:`make_bank` and :func:`run_ctx` are shared with tests/test_muse_system.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from hammr.advice import Situation
from hammr.memory import (
    Annotation,
    Experience,
    ExperienceBank,
    ExperienceSearcher,
    Provenance,
    SearchSettings,
    State,
    Task,
)
from hammr.memory.experiences import experience_id
from hammr.muse.advisors import ADVICE_HEADING, EveryStepAdvisor
from hammr.muse.search_tool import SearchExperiences, SearchOptions, query_state
from hammr.tools.base import BadArguments, ToolContext
from hammr.trace import Step, Trace
from test_memory_bank import WordsEmbedder

VIEWPOINTS = ("question", "task", "history", "question+task", "task+history", "images")
SECRET = "SECRET-GROUND-TRUTH"

UMBRELLA = "what colour is the umbrella"


def exp(
    sample: str,
    question: str,
    *,
    history: Sequence[str] = (),
    correct: bool = True,
    dataset: str = "vstar",
    sub_task: str = "attribute",
) -> Experience:
    prov = Provenance(
        "explore", dataset, sample, "", 0, "VisualToolAgent", correct, float(correct), (SECRET,)
    )
    return Experience(
        experience_id("explore", dataset, sample, "", 0),
        State(question, Task(dataset, sub_task), (), tuple(history)),
        "act",
        None,
        "obs",
        prov,
    )


ITEMS: tuple[tuple[Experience, int, str], ...] = (
    (exp("A", UMBRELLA), 8, "GA: locate the umbrella first"),
    (exp("B", "what colour is the umbrella on the beach"), 6, "GB: zoom on the canopy"),
    (
        exp("C", "how many cars are parked", history=("z = ZoomIn(image, [0, 0, 10, 10], 2)",)),
        9,
        "GC: after a zoom, detect in the zoomed image",
    ),
    (
        exp("D", "count the birds", history=("crop = CropImage(image, boxes)",), correct=False),
        5,
        "GD: cropping before detecting lost birds",
    ),
    (exp("E", "what colour is the umbrella held", dataset="hrbench"), 7, "GE: other dataset"),
)


async def make_bank(
    path: Path,
    items: Sequence[tuple[Experience, int, str]] = ITEMS,
    embedder: object | None = None,
) -> ExperienceBank:
    bank = ExperienceBank(path, embedder or WordsEmbedder(), viewpoints=VIEWPOINTS)
    bank.add([e for e, _, _ in items])
    bank.annotate({e.id: Annotation(s, g, "test") for e, s, g in items})
    await bank.build()
    return bank


def caller_trace(question: str, history: Sequence[Step] = ()) -> Trace:
    """A running agent's trace: earlier steps, then the step calling the tool."""
    t = Trace(agent="VisualToolAgent", question=question)
    t.steps = [*history, Step(index=len(history))]
    return t


def run_ctx(trace: Trace, task: tuple[str, str] | None = ("vstar", "attribute")) -> ToolContext:
    return ToolContext(task=task, caller=trace)


def samples(record: dict[str, object]) -> list[str]:
    return [h["source"]["sample_id"] for h in record["hits"]]  # type: ignore[attr-defined,index]


async def search(
    bank: ExperienceBank,
    viewpoints: object,
    k: int = 2,
    *,
    settings: SearchSettings | None = None,
    trace: Trace | None = None,
    task: tuple[str, str] | None = ("vstar", "attribute"),
) -> tuple[str, dict[str, object]]:
    tool = SearchExperiences(ExperienceSearcher(bank, settings), SearchOptions(k=2, depth=3))
    ctx = run_ctx(trace or caller_trace(UMBRELLA), task)
    result = await tool.invoke({"viewpoints": viewpoints, "k": k}, ctx)
    assert result.observation == result.value and result.retrieved is not None
    return result.observation, result.retrieved


async def test_wide_search_gives_the_guidance_in_similarity_order(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        text, record = await search(bank, "question", 2)
    assert samples(record) == ["A", "E"]  # the two nearest questions; E is another dataset
    hits = record["hits"]
    assert isinstance(hits, list) and hits[0]["similarity"] > hits[1]["similarity"]
    assert text.index("GA: locate") < text.index("GE: other")
    assert "GB" not in text and "GC" not in text
    assert text.splitlines()[1].startswith("1. learned from success, score 8/10 (via question")
    assert record["source"] == "muse" and record["policy"] == "tool" and record["text"] == text
    assert record["query"] == {"viewpoints": ["question"], "k": 2}
    assert {h["viewpoint"] for h in hits} == {"question"} and hits[0]["learned_from"] == "success"
    assert SECRET not in text and SECRET not in json.dumps(record)


async def test_deep_search_goes_round_by_round_adding_new_sources(tmp_path: Path) -> None:
    zoom = Step(
        index=0,
        action="z = ZoomIn(image, [0, 0, 10, 10], 2)",
        tool="ZoomIn",
        observation="image 20x20 (stored in 'z')",
    )
    trace = caller_trace(UMBRELLA, [zoom])
    with await make_bank(tmp_path / "b.db") as bank:
        text, record = await search(bank, ["question", "task+history"], 2, trace=trace)
    rounds = record["rounds"]
    assert [(r["round"], r["viewpoint"], r["found"]) for r in rounds] == [  # type: ignore[attr-defined,index]
        (1, "question", 2),
        (2, "task+history", 2),
    ]
    assert samples(record)[:2] == ["A", "E"]
    assert samples(record)[2] == "C"  # the zoom in the history matches C's
    assert len(set(samples(record))) == 4
    assert [h["round"] for h in record["hits"]] == [1, 1, 2, 2]  # type: ignore[attr-defined,index]
    assert "deep search under question -> task+history" in text


async def test_the_query_is_the_callers_state(tmp_path: Path) -> None:
    trace = caller_trace("how many cars are parked", [Step(index=0, action="a = OCR(image)")])
    state = query_state(run_ctx(trace, ("vstar", "count")), trace)
    assert state.question == "how many cars are parked"
    assert state.task == Task("vstar", "count") and state.history == ("a = OCR(image)",)
    assert query_state(ToolContext(), trace).task == Task("", "")  # unknown task


async def test_threshold_sources_and_out_of_domain_change_what_is_found(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        _, strict = await search(bank, "question", 5, settings=SearchSettings(min_score=8))
        assert set(samples(strict)) == {"A", "C"}
        _, failures = await search(
            bank, "question", 5, settings=SearchSettings(sources="incorrect")
        )
        assert samples(failures) == ["D"] and failures["hits"][0]["learned_from"] == "failure"  # type: ignore[index]
        _, away = await search(bank, "question", 5, settings=SearchSettings(out_of_domain=True))
        assert samples(away) == ["E"]  # only the other dataset's
        _, home = await search(
            bank, "question", 5, settings=SearchSettings(out_of_domain=True), task=("hrbench", "")
        )
        assert "E" not in samples(home) and "A" in samples(home)
        _, unknown = await search(
            bank, "question", 5, settings=SearchSettings(out_of_domain=True), task=None
        )
        assert len(samples(unknown)) == 5  # no dataset known: nothing left out


async def test_bad_calls_list_the_banks_viewpoints(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        for viewpoints, k, expect in (
            ("colour", 2, "'colour' is not a viewpoint; choose from: question, task, history"),
            ("images", 2, "no viewpoint 'images'; choose from: question"),  # text-only bank
            ([], 2, "name at least one viewpoint"),
            ("question", 0, "k is 1 to 10, got 0"),
            ("question", 11, "k is 1 to 10"),
        ):
            with pytest.raises(BadArguments, match=expect):
                await search(bank, viewpoints, k)


async def test_more_viewpoints_than_the_depth_are_cut_with_a_note(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        tool = SearchExperiences(ExperienceSearcher(bank), SearchOptions(depth=2))
        result = await tool.invoke(
            {"viewpoints": ["question", "task", "history"], "k": 1}, run_ctx(caller_trace(UMBRELLA))
        )
    assert result.retrieved is not None and len(result.retrieved["rounds"]) == 2
    assert "history not searched" in str(result.observation)


async def test_a_deep_search_skips_viewpoints_the_bank_lacks_and_says_so(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:  # text only: no image viewpoints
        tool = SearchExperiences(ExperienceSearcher(bank))
        result = await tool.invoke(
            {"viewpoints": ["question+images", "question"], "k": 2},
            run_ctx(caller_trace(UMBRELLA)),
        )
    assert result.retrieved is not None
    assert [r["viewpoint"] for r in result.retrieved["rounds"]] == ["question"]
    assert result.retrieved["hits"]
    assert "question+images: not in this experience bank" in str(result.observation)


async def test_configured_viewpoints_are_the_ones_offered(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        tool = SearchExperiences(
            ExperienceSearcher(bank), SearchOptions(viewpoints=("task+history", "question"))
        )
        assert tool.offered() == ["task+history", "question"]
        assert "from: task+history, question" in tool.card()
        with pytest.raises(BadArguments, match="choose from: task\\+history, question"):
            await tool.invoke({"viewpoints": "task", "k": 1}, run_ctx(caller_trace(UMBRELLA)))


async def test_the_every_step_advisor_searches_the_current_state(tmp_path: Path) -> None:
    with await make_bank(tmp_path / "b.db") as bank:
        tool = SearchExperiences(ExperienceSearcher(bank), SearchOptions(k=1, depth=2))
        advisor = EveryStepAdvisor(tool)
        trace = caller_trace(UMBRELLA)
        situation = Situation("VisualToolAgent", UMBRELLA, 0, trace, {}, run_ctx(trace))
        advice = await advisor.advise(situation)
    assert advice is not None and advice.text.startswith(ADVICE_HEADING)
    assert advice.record["policy"] == "advisor" and advice.record["source"] == "muse"
    # the bank's order, at most depth of them; 'task' has text at every state
    assert advice.record["query"] == {"viewpoints": ["question", "task"], "k": 1}
    assert samples(advice.record)[0] == "A" and "GA: locate" in advice.text
