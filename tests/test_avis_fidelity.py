"""AVIS as the paper ran it, replayed with scripted models (``tests/avis_policy.py``):

* the object selector never picks an object twice in a run (the paper's selector excludes
  the objects already chosen), and object_select is not offered once none is left;
* ``avis.autonomous_examples = false``: the no-graph baseline's planner sees the task
  descriptions only, no worked example (the paper's baseline); true (our default) shows them;
* ``llm-only``: the text-only baseline of AVIS's Table 5, one call over the question alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PIL import Image as PILImage

from avis_policy import AvisPolicy, offered, plan, verdict
from hammr.avis import system as avis_system_module
from hammr.avis.actions import ActionInput, ActionRunner
from hammr.avis.context import VisualContext, VisualObject
from hammr.avis.graph import START, autonomous_graph
from hammr.avis.llm_only import LLMOnlySystem, QAExample, load_examples
from hammr.avis.prompts import PLANNER_EXAMPLES
from hammr.avis.system import AvisSystem
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.config import load_config
from hammr.systems import build_system
from hammr.tools.base import ToolContext
from hammr.trace import Step, Trace
from hammr.values import Box, Image

IMAGE = Image(PILImage.new("RGB", (90, 60), "white"))


def three_objects(image: Image) -> VisualContext:
    """The whole image and two objects, as a detector would have found them."""
    boxes = [Box(0, 0, 90, 60, "whole image"), Box(0, 0, 40, 60, "tower"), Box(50, 0, 40, 60)]
    regions = ["whole image", "left", "right"]
    captions = ["a street with a tower", "a stone tower", "a tree"]
    return VisualContext(
        [
            VisualObject(i, regions[i], image, boxes[i], caption=captions[i])
            for i in range(len(boxes))
        ]
    )


def action_steps(trace: Trace) -> list[Step]:
    return [s for s in trace.steps if s.state is not None]


def listed_objects(prompt: str) -> list[int]:
    """The object ids an object-selector prompt offers (its 'Object #N (' lines after the
    worked examples)."""
    tail = prompt.split("Query: ")[-1]
    return [int(n) for n in re.findall(r"^Object #(\d+) \(", tail, flags=re.M)]


# -- object selection never repeats an id -------------------------------------------------------


async def test_scripted_selector_cannot_pick_the_same_object_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner selects object #1, then asks for object_select again and the scripted
    selector names #1 once more: the second selector prompt no longer lists #1, the reply
    naming it is a recorded error the run recovers from, and #1 is selected once."""

    async def fake_context(image: Image, ctx: ToolContext, **_: object) -> VisualContext:
        return three_objects(image)

    monkeypatch.setattr(avis_system_module, "build_context", fake_context)
    policy = AvisPolicy(
        {
            "decompose": ["Visual: which tower is this?\nKnowledge: #"],
            "plan": [
                plan("object_select", "which tower is this?"),
                plan("object_select", "which tower is this?"),
                plan("llm_qa", "which tower is this?"),
            ],
            "object": [
                "Why: the tower is on the left.\nObject: #1",
                "Why: the tower again.\nObject: #1",
            ],
            "llm_qa": ["Big Ben"],
            "reason": [
                verdict("informative", why="the tower is in focus"),
                verdict("answerable", "Big Ben"),
            ],
        }
    )
    g = autonomous_graph()
    system = AvisSystem(g, ActionRunner(g.actions, {}, None))
    result = await system.run(
        "Which tower is this?", {"image": IMAGE}, ctx=ToolContext(llm=policy.llm())
    )
    steps = action_steps(result.trace)
    assert [s.tool for s in steps] == ["object_select", "object_select", "llm_qa"]
    first, second = policy.prompts("object")
    assert listed_objects(first) == [0, 1, 2]
    assert listed_objects(second) == [0, 2]  # #1 was selected: not offered again
    assert steps[0].arguments["object"] == 1
    assert steps[1].error_kind == "bad_arguments" and "object" not in steps[1].arguments
    assert steps[1].backtrack
    chosen = [s.arguments["object"] for s in steps if "object" in s.arguments]
    assert chosen == [1]
    assert result.answer == "Big Ben"


async def test_scripted_object_select_is_not_offered_once_every_object_was_selected() -> None:
    """With the whole image the only object (no detector here), one selection uses it up:
    the next state's candidates leave object_select out, and a planner that names it anyway
    gets a recorded error and chooses again; the selector was asked once."""
    policy = AvisPolicy(
        {
            "decompose": ["Visual: what colour is it?\nKnowledge: #"],
            "plan": [
                plan("object_select", "what colour is it?"),
                plan("object_select", "what colour is it?"),
                plan("llm_qa", "what colour is it?"),
            ],
            "object": ["Why: the whole picture.\nObject: #0"],
            "llm_qa": ["white"],
            "reason": [
                verdict("informative", why="the image is in focus"),
                verdict("answerable", "white"),
            ],
        }
    )
    g = autonomous_graph()
    system = AvisSystem(g, ActionRunner(g.actions, {}, None))
    result = await system.run("What colour?", {"image": IMAGE}, ctx=ToolContext(llm=policy.llm()))
    steps = action_steps(result.trace)
    assert steps[0].state == START and "object_select" in steps[0].candidates
    assert [s.state for s in steps[1:]] == ["object_select", "object_select"]
    for s in steps[1:]:
        assert "object_select" not in s.candidates
    assert "object_select" not in offered(policy.prompts("plan")[1])
    assert steps[1].error_kind == "unknown_tool"
    assert len(policy.prompts("object")) == 1
    assert result.answer == "white"


async def test_scripted_selector_with_every_object_taken_fails_without_a_model_call() -> None:
    """The runner itself refuses when nothing is left to select: an observation the planner
    can recover from (a tool failure), and no model call."""
    context = three_objects(IMAGE)
    g = autonomous_graph()
    runner = ActionRunner(g.actions, {}, None)
    given = ActionInput("q?", context.objects[0], context, "", {}, frozenset({0, 1, 2}))
    llm = ScriptedLLM([])
    outcome = await runner.run("object_select", given, llm, ToolContext(llm=llm))
    assert outcome.error_kind == "tool_failure"
    assert outcome.observation.startswith("#ERROR#: every object was already selected")
    assert "#0, #1, #2" in outcome.observation
    assert llm.calls == 0


# -- avis.autonomous_examples -------------------------------------------------------------------


def has_worked_example(prompt: str) -> bool:
    """Whether a planner prompt shows a worked example: every example carries an 'Action:'
    line of its own, and the bundled ones are known by their text."""
    bundled = [e.text() for examples in PLANNER_EXAMPLES.values() for e in examples]
    return bool(re.search(r"^Action: ", prompt, flags=re.M)) or any(b in prompt for b in bundled)


async def planner_prompts(tmp_path: Path, system_name: str, examples: bool | None) -> list[str]:
    cfg_file = tmp_path / "hammr.toml"
    setting = "" if examples is None else f"autonomous_examples = {str(examples).lower()}\n"
    cfg_file.write_text("[avis]\n" + setting)
    system, _ = build_system(load_config(cfg_file, env={}), system_name)
    assert isinstance(system, AvisSystem)
    policy = AvisPolicy(
        {
            "decompose": ["Visual: what colour is it?\nKnowledge: #"],
            "plan": [plan("vqa", "what colour is it?"), plan("llm_qa", "what colour is it?")],
            "llm_qa": ["white"],
            "reason": [verdict("answerable", "white")],
        }
    )
    result = await system.run("What colour?", {"image": IMAGE}, ctx=ToolContext(llm=policy.llm()))
    assert result.answer == "white"
    prompts = policy.prompts("plan")
    assert len(prompts) == 2  # vqa has no backend here: a failure, then llm_qa
    return prompts


async def test_scripted_autonomous_planner_without_examples_shows_descriptions_only(
    tmp_path: Path,
) -> None:
    prompts = await planner_prompts(tmp_path, "avis-autonomous", False)
    actions = autonomous_graph().actions
    for prompt in prompts:
        assert not has_worked_example(prompt)
        assert "Examples of" not in prompt
        # every candidate is still described, and the reply's form is still asked for
        for name in offered(prompt):
            assert f"- {name}: {actions[name].description}" in prompt
        assert '"Action:"' in prompt and '"Query:"' in prompt
    assert offered(prompts[0]) == list(actions)
    assert "vqa" not in offered(prompts[1])  # tried at START: the candidates still shrink


async def test_scripted_autonomous_planner_shows_examples_by_default(tmp_path: Path) -> None:
    for setting in (None, True):
        prompts = await planner_prompts(tmp_path, "avis-autonomous", setting)
        assert all(has_worked_example(p) for p in prompts)
        assert PLANNER_EXAMPLES["llm_qa"][0].text() in prompts[0]


def test_graph_planner_keeps_its_examples_whatever_the_setting(tmp_path: Path) -> None:
    """The key is the no-graph baseline's: AVIS itself always shows its examples."""
    cfg_file = tmp_path / "hammr.toml"
    cfg_file.write_text("[avis]\nautonomous_examples = false\n")
    system, _ = build_system(load_config(cfg_file, env={}), "avis")
    assert isinstance(system, AvisSystem)
    prompt = system.planner.prompt("q?", "(nothing yet)", list(system.graph.edges[START]))
    assert has_worked_example(prompt)


def test_autonomous_examples_must_be_a_boolean(tmp_path: Path) -> None:
    from hammr.config import ConfigError

    cfg_file = tmp_path / "hammr.toml"
    cfg_file.write_text('[avis]\nautonomous_examples = "no"\n')
    with pytest.raises(ConfigError, match=r"avis\.autonomous_examples"):
        load_config(cfg_file, env={})
    assert load_config(None, env={}).get("avis.autonomous_examples") is True


# -- llm-only -----------------------------------------------------------------------------------


async def test_scripted_llm_only_makes_one_call_that_never_shows_the_image() -> None:
    llm = ScriptedLLM(["Answer: 1889"], vision=True)  # a model that could see
    system = LLMOnlySystem(llm)
    result = await system.run("What year was this tower completed?", {"image": IMAGE})
    assert llm.calls == 1
    (request,) = llm.requests
    for message in request.messages:
        assert isinstance(message.content, str) and not message.images()
    prompt = "\n".join(m.text() for m in request.messages)
    assert "<image>" not in prompt and "90x60" not in prompt and "image:" not in prompt
    examples = load_examples()
    assert len(examples) >= 4
    for e in examples:
        assert f"Question: {e.question}\nAnswer: {e.answer}" in prompt
    assert request.messages[-1].text() == "Question: What year was this tower completed?"
    assert "\nQuestion:" in request.stop  # cut before the model writes another example
    assert result.answer == "1889"
    assert result.trace.status == "finished" and result.trace.llm_calls == 1
    assert result.trace.agent == "LLMOnly"


async def test_scripted_llm_only_parses_the_answer_as_cot_does() -> None:
    llm = ScriptedLLM(
        [
            "The tower looks like a famous one.\nAnswer: Eiffel Tower.",
            "Answer: blue",
            "Paris",
        ]
    )
    system = LLMOnlySystem(llm, examples=[QAExample("Which city?", "Rome")])
    reasoned = await system.run("Which tower is this?")
    assert reasoned.answer == "Eiffel Tower"
    assert reasoned.trace.steps[0].error_kind is None
    choice = await system.run("What colour is the car?\nA. red\nB. blue")
    assert choice.answer == "B"  # the option's letter, as cot gives it
    assert "letter" in llm.requests[1].messages[0].text()
    bare = await system.run("Which city is this?")
    assert bare.answer == "Paris"
    assert bare.trace.steps[0].error_kind == "syntax"  # no 'Answer:' line: flagged
    assert "Question: Which city?\nAnswer: Rome" in llm.requests[0].messages[0].text()


def test_llm_only_is_registered_and_built_from_the_configuration(tmp_path: Path) -> None:
    cfg_file = tmp_path / "hammr.toml"
    cfg_file.write_text("[llm]\nmax_tokens = 40\n")
    system, _ = build_system(load_config(cfg_file, env={}), "llm-only")
    assert isinstance(system, LLMOnlySystem)
    assert system.max_tokens == 40
    assert system.examples == load_examples()


def test_llm_only_examples_that_are_malformed_say_where() -> None:
    with pytest.raises(ValueError, match=r"mine\.toml: example 2 has no answer"):
        text = '[[example]]\nquestion = "a?"\nanswer = "b"\n[[example]]\nquestion = "c?"\n'
        load_examples(text, "mine.toml")
    with pytest.raises(ValueError, match=r"mine\.toml: not valid TOML"):
        load_examples("[[example", "mine.toml")
    with pytest.raises(ValueError, match=r"no \[\[example\]\] tables"):
        load_examples("", "mine.toml")
