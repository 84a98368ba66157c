"""AVIS as a system, replayed with a scripted LLM (``tests/avis_policy.py``) and everything
else real: the visual context from the default backends (Haar detection, tesseract), crops,
perceptual-hash search over an image index built here from PIL pictures, the bundled
knowledge base as the web.

Three scenarios shaped like the paper's Table 4 and Figs. 14-16, then the graph's guarantee
as a property, the autonomous baseline, and recovery from bad model replies.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from avis_policy import AvisPolicy, offered, plan, query_of, verdict
from hammr.avis.actions import ActionInput, ActionOutcome, ActionRunner
from hammr.avis.graph import BUILTIN_ACTIONS, START, autonomous_graph, default_graph, parse_graph
from hammr.avis.index_search import IndexSearch
from hammr.avis.system import AvisSettings, AvisSystem
from hammr.backends.llm.base import LLM
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools, default_backends
from hammr.trace import Step, Trace
from hammr.values import Image

W, H = 320, 240


def scene(seed: int) -> PILImage.Image:
    """Blurred colour noise: strong low-frequency structure a perceptual hash keeps apart."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (H // 16, W // 16, 3)).astype(np.uint8)
    return PILImage.fromarray(small).resize((W, H), PILImage.Resampling.BICUBIC)


def thumbnail(img: PILImage.Image) -> Image:
    buf = io.BytesIO()
    img.resize((200, 150), PILImage.Resampling.LANCZOS).save(buf, "JPEG", quality=70)
    return Image(PILImage.open(io.BytesIO(buf.getvalue())).convert("RGB"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, PILImage.Image]]:
    """An image collection of three pictures with titles, as a JSONL corpus."""
    root = tmp_path_factory.mktemp("corpus")
    pictures = {"tower": scene(1), "bridge": scene(2), "hose": scene(3)}
    titles = {
        "tower": ("Eiffel Tower seen from the Champ de Mars", "the iron tower in Paris"),
        "bridge": ("Golden Gate Bridge in fog", "a red suspension bridge"),
        "hose": ("Garden hose reel", "a green hose on a reel"),
    }
    lines = []
    for name, img in pictures.items():
        img.save(root / f"{name}.png")
        title, caption = titles[name]
        lines.append(json.dumps({"image": f"{name}.png", "title": title, "caption": caption}))
    (root / "index.jsonl").write_text("\n".join(lines) + "\n")
    return root / "index.jsonl", pictures


def make_system(index_file: Path | None, *, graph: Any = None, max_steps: int = 10) -> AvisSystem:
    g = graph or default_graph()
    index = IndexSearch(index_file) if index_file is not None else None
    tools = {t.name: t for t in builtin_tools()}
    runner = ActionRunner(g.actions, tools, index)
    return AvisSystem(g, runner, settings=AvisSettings(max_steps=max_steps))


def context(llm: LLM) -> ToolContext:
    return ToolContext(backends=default_backends(), llm=llm)


def action_steps(trace: Trace) -> list[Step]:
    return [s for s in trace.steps if s.state is not None]


async def test_not_informative_output_makes_the_planner_backtrack_at_the_same_state(
    corpus: tuple[Path, dict[str, PILImage.Image]],
) -> None:
    """Table 4, first row: an image search returns unrelated titles, the reasoner says not
    informative, and the planner chooses again at START among the actions left."""
    index_file, pictures = corpus

    def judge_visual(prompt: str) -> str:
        # the script reads the real tool output the reasoner was shown
        if "Eiffel Tower" in prompt.split("Output:")[-1].split("Retrievals")[-1][:120]:
            return verdict("informative", "Eiffel Tower", "the identical images name it")
        return verdict("not informative", why="the titles are unrelated")

    policy = AvisPolicy(
        {
            "decompose": ["Visual: which tower is this?\nKnowledge: what year was # completed?"],
            "plan": [
                plan("image_search", "which tower is this?"),
                plan("identical_image_search", "which tower is this?"),
                plan("web_search", "Eiffel Tower completed"),
            ],
            "reason": [
                # the similar-image search ranks the whole collection; the script reads
                # the first hit: a copy of the tower ranks first, so force not informative
                verdict("not informative", why="no title agrees on a tower"),
                judge_visual,
                verdict("answerable", "1889", "the article gives the year"),
            ],
        }
    )
    system = make_system(index_file)
    image = thumbnail(pictures["tower"])
    result = await system.run(
        "What year was this tower completed?", {"image": image}, ctx=context(policy.llm())
    )
    steps = action_steps(result.trace)
    assert [s.tool for s in steps] == ["image_search", "identical_image_search", "web_search"]
    assert [s.state for s in steps] == [START, START, "identical_image_search"]
    full = list(default_graph().edges[START])
    assert steps[0].candidates == full
    assert steps[1].candidates == [a for a in full if a != "image_search"]  # tried: gone
    assert steps[2].candidates == list(default_graph().edges["identical_image_search"])
    assert [s.verdict for s in steps] == ["not_informative", "informative", "answerable"]
    assert [s.backtrack for s in steps] == [True, False, False]
    # what the model was offered is what the trace records
    assert [offered(p) for p in policy.prompts("plan")] == [s.candidates for s in steps]
    # the identical search found the tower's thumbnail in the real index
    assert "high confidence: Eiffel Tower seen from the Champ de Mars" in steps[1].observation
    assert steps[1].output["hits"][0]["title"].startswith("Eiffel Tower")
    assert result.answer == "1889"
    assert result.trace.status == "finished"


async def test_informative_visual_answer_fills_the_hash_and_moves_to_knowledge(
    corpus: tuple[Path, dict[str, PILImage.Image]],
) -> None:
    """Fig. 14's shape: the visual answer found by search fills ``#``; the knowledge phase
    searches the web (the bundled knowledge base) with it and reads the answer out."""
    index_file, pictures = corpus
    policy = AvisPolicy(
        {
            "decompose": ["Visual: which bridge is this?\nKnowledge: which city is # in?"],
            "plan": [
                plan("identical_image_search", "which bridge is this?"),
                lambda p: plan("web_search", query_of(p)),
            ],
            "reason": [
                verdict("informative", "Golden Gate Bridge", "both titles name the bridge"),
                lambda p: verdict(
                    "answerable" if "San Francisco" in p else "not informative",
                    "San Francisco" if "San Francisco" in p else None,
                ),
            ],
        }
    )
    system = make_system(index_file)
    result = await system.run(
        "Which city is this bridge in?",
        {"image": thumbnail(pictures["bridge"])},
        ctx=context(policy.llm()),
    )
    decompose = result.trace.steps[0]
    assert decompose.tool == "DECOMPOSE"
    assert decompose.output == {
        "visual": "which bridge is this?",
        "knowledge": "which city is # in?",
    }
    steps = action_steps(result.trace)
    assert [s.tool for s in steps] == ["identical_image_search", "web_search"]
    assert steps[0].extracted == "Golden Gate Bridge"
    # the second state's query is the knowledge sub-question with # filled
    plan_prompts = policy.prompts("plan")
    assert query_of(plan_prompts[1]) == "which city is Golden Gate Bridge in?"
    assert steps[1].state == "identical_image_search"
    assert set(steps[1].candidates) >= {"web_search", "llm_qa"}
    # the web search really ran over the knowledge base and found the bridge's article
    assert "Title: Golden Gate Bridge" in steps[1].observation
    assert steps[1].verdict == "answerable"
    assert result.answer == "San Francisco"
    assert steps[1].finish == "San Francisco"


async def test_answerable_output_ends_the_run(
    corpus: tuple[Path, dict[str, PILImage.Image]],
) -> None:
    """Table 4, third row: when the knowledge part is just ``#``, an answerable visual
    output ends the run at once; object_select crops first (a real crop of a real box)."""
    index_file, pictures = corpus
    policy = AvisPolicy(
        {
            "decompose": ["Visual: which tower is this?\nKnowledge: #"],
            "plan": [
                plan("object_select", "which tower is this?"),
                plan("identical_image_search", "which tower is this?"),
            ],
            "object": ["Why: the whole picture shows the tower.\nObject: #0"],
            "reason": [
                verdict("informative", why="the object is the tower"),
                verdict("answerable", "Eiffel Tower", "an identical image names it"),
            ],
        }
    )
    system = make_system(index_file)
    image = thumbnail(pictures["tower"])
    result = await system.run("Which tower is this?", {"image": image}, ctx=context(policy.llm()))
    steps = action_steps(result.trace)
    assert [s.tool for s in steps] == ["object_select", "identical_image_search"]
    assert [s.state for s in steps] == [START, "object_select"]
    assert steps[1].candidates == list(default_graph().edges["object_select"])
    selected = steps[0]
    assert selected.arguments["object"] == 0
    assert selected.output["box"]["$box"] == [0, 0, image.width, image.height]
    assert selected.calls == 3  # planner, object selector, reasoner
    assert steps[1].verdict == "answerable" and steps[1].finish == "Eiffel Tower"
    assert result.answer == "Eiffel Tower"
    # decomposition + one model call per planner, selector and reasoner; CONTEXT is code
    assert result.trace.llm_calls == 1 + 3 + 2 == len(policy.calls)
    assert [k for k, _ in policy.calls].count("reason") == 2


async def test_object_select_crops_a_detected_object_for_the_next_actions() -> None:
    """The Haar detector finds the face in skimage's astronaut photo; selecting it makes the
    next visual action look at that crop (its box in root-image pixels)."""
    photo = Path(__file__).parent.parent / "examples" / "demo" / "astronaut.jpg"
    image = Image.open(photo)
    seen: list[Image] = []

    class Recorder(ActionRunner):
        async def run(
            self, action: str, given: ActionInput, model: LLM, ctx: ToolContext
        ) -> ActionOutcome:
            if action == "vqa":
                seen.append(given.focus.image)
                return ActionOutcome("VQA answer: an astronaut", "an astronaut")
            return await super().run(action, given, model, ctx)

    policy = AvisPolicy(
        {
            "decompose": ["Visual: who is this person?\nKnowledge: #"],
            "plan": [plan("object_select", "who is this?"), plan("vqa", "who is this?")],
            "object": [lambda p: "Why: the face.\nObject: #1"],
            "reason": [verdict("informative"), verdict("answerable", "an astronaut")],
        }
    )
    g = default_graph()
    system = AvisSystem(g, Recorder(g.actions, {}, None))
    result = await system.run("Who is this?", {"image": image}, ctx=context(policy.llm()))
    objects = result.trace.steps[1].output["objects"]
    assert objects[0]["region"] == "whole image" and len(objects) >= 2
    assert "Object #1" in policy.prompts("object")[0]
    box = action_steps(result.trace)[0].output["box"]["$box"]
    assert box == objects[1]["box"]["$box"]
    assert seen and seen[0].crop_box is not None
    assert seen[0].crop_box.xywh() == pytest.approx(box, abs=1.0)
    assert result.answer == "an astronaut"


# -- the graph's guarantee, as a property ------------------------------------------------------

ACTIONS = list(BUILTIN_ACTIONS)


@st.composite
def graphs(draw: st.DrawFn) -> Any:
    """A random valid graph over the six actions (START reaches an answering action)."""
    edges: dict[str, list[str]] = {}
    for state in [START, *ACTIONS]:
        targets = draw(st.lists(st.sampled_from(ACTIONS), unique=True, max_size=6))
        if targets:
            edges[state] = targets
    start = draw(st.lists(st.sampled_from(ACTIONS), unique=True, min_size=1, max_size=6))
    if all(a == "object_select" for a in start):
        start = [*start, "vqa"] if "vqa" not in start else start
    edges[START] = start
    # keep only states reachable from START, as a graph file must
    reach, todo = {START}, [START]
    while todo:
        for t in edges.get(todo.pop(), []):
            if t not in reach:
                reach.add(t)
                todo.append(t)
    return parse_graph({"edges": {s: t for s, t in edges.items() if s in reach}}, "random")


class FakeRunner(ActionRunner):
    """Every action 'runs' at once (the property is about choosing, not tools)."""

    def __init__(self, graph: Any) -> None:
        super().__init__(graph.actions, {}, None)
        self.executed: list[str] = []

    async def run(
        self, action: str, given: ActionInput, model: LLM, ctx: ToolContext
    ) -> ActionOutcome:
        self.executed.append(action)
        return ActionOutcome(f"output of {action}", action)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), data=st.data(), grammar=st.booleans())
async def test_no_action_outside_the_candidates_is_ever_executed(
    graph: Any, data: st.DataObject, grammar: bool
) -> None:
    names = [*ACTIONS, "teleport", "google", ""]
    verdicts = ["not informative", "informative", "answerable", "maybe"]
    grammars: list[str] = []

    def planner_reply(prompt: str) -> str:
        cands = offered(prompt)
        if grammar:  # a grammar backend can only write one of the alternatives it was given
            alternatives = re.findall(r'"([a-z_]+)"', grammars[-1].split("\n")[0])
            assert alternatives == cands
            return plan(data.draw(st.sampled_from(alternatives)), "q")
        return plan(data.draw(st.sampled_from(names)), "q")

    def reasoner_reply(prompt: str) -> str:
        label = data.draw(st.sampled_from(verdicts))
        return verdict(label, data.draw(st.sampled_from([None, "x"])))

    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: k #?"],
            "plan": [planner_reply] * 50,
            "reason": [reasoner_reply] * 50,
            "object": ["Why: w\nObject: #0"] * 50,
            "evidence": ["guess"],
            "llm_qa": ["x"] * 50,
        }
    )
    llm = policy.llm(grammar=grammar)
    original = llm.complete

    async def complete(request: Any) -> Any:
        if request.grammar:
            grammars.append(request.grammar)
        return await original(request)

    llm.complete = complete  # type: ignore[method-assign]
    runner = FakeRunner(graph)
    system = AvisSystem(graph, runner, settings=AvisSettings(max_steps=12))
    img = Image(PILImage.new("RGB", (32, 32), "white"))
    result = await system.run("q?", {"image": img}, ctx=ToolContext(llm=llm))
    steps = action_steps(result.trace)
    executed_steps = [s for s in steps if s.tool is not None]
    assert [s.tool for s in executed_steps] == runner.executed
    for prev, s in zip([None, *steps], steps, strict=False):
        assert s.candidates, "a step is only planned when something is left to try"
        allowed = list(graph.edges[s.state])
        assert [a for a in allowed if a in s.candidates] == s.candidates  # a subset, in order
        if s.tool is not None:
            assert s.tool in s.candidates
        same_state = prev is not None and prev.state == s.state
        if same_state and prev.backtrack and prev.tool and prev.verdict == "not_informative":
            # tried here: never offered again, unless the state is its own successor: then a
            # frame whose every action failed is popped to the frame below, which has the same
            # name and has not tried that action yet
            assert prev.tool not in s.candidates or s.state in graph.edges[s.state]
    if grammar:
        assert not any(s.error_kind in ("unknown_tool", "no_action") for s in steps)
    assert result.trace.status == "finished"


# -- the autonomous baseline -------------------------------------------------------------------


def test_the_autonomous_baseline_differs_only_in_its_graph(tmp_path: Path) -> None:
    from hammr.config import load_config
    from hammr.systems import build_system

    cfg_file = tmp_path / "hammr.toml"
    cfg_file.write_text('[avis]\nmax_steps = 7\nobject_names = "face"\n')
    cfg = load_config(cfg_file, env={})
    avis, _ = build_system(cfg, "avis")
    auto, _ = build_system(cfg, "avis-autonomous")
    assert isinstance(avis, AvisSystem) and isinstance(auto, AvisSystem)
    assert avis.graph.edges == default_graph().edges
    assert auto.graph.edges == autonomous_graph(default_graph().actions).edges
    assert auto.graph.actions == avis.graph.actions
    for a, b in ((avis, auto), (avis.runner, auto.runner)):
        same = {k: v for k, v in vars(a).items() if k not in ("graph", "name", "planner")}
        other = {k: v for k, v in vars(b).items() if k not in ("graph", "name", "planner")}
        assert same.keys() == other.keys()
        for k in same:
            assert type(same[k]) is type(other[k]), k
    assert avis.settings == auto.settings == AvisSettings(7, 5, 4, ("face",))
    assert vars(avis.planner).keys() == vars(auto.planner).keys()
    assert avis.planner.actions == auto.planner.actions
    assert avis.planner.grammar == auto.planner.grammar
    assert (avis.name, auto.name) == ("avis", "avis-autonomous")


async def test_autonomous_offers_every_action_at_every_state() -> None:
    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: #"],
            "plan": [plan("llm_qa", "v?")],
            "llm_qa": ["red"],
            "reason": [verdict("answerable", "red")],
        }
    )
    g = autonomous_graph()
    system = AvisSystem(g, ActionRunner(g.actions, {}, None))
    img = Image(PILImage.new("RGB", (32, 32), "red"))
    result = await system.run("What colour?", {"image": img}, ctx=ToolContext(llm=policy.llm()))
    assert action_steps(result.trace)[0].candidates == ACTIONS
    assert result.answer == "red"


# -- bad replies: recorded step errors the run recovers from ----------------------------------


async def test_a_planner_reply_naming_no_candidate_is_recorded_and_asked_again() -> None:
    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: #"],
            "plan": [plan("web_search", "v?"), "I would like to think", plan("vqa", "v?")],
            "reason": [verdict("answerable", "blue")],
        }
    )
    runner = FakeRunner(default_graph())
    system = AvisSystem(default_graph(), runner)
    img = Image(PILImage.new("RGB", (32, 32), "blue"))
    result = await system.run("What colour?", {"image": img}, ctx=ToolContext(llm=policy.llm()))
    steps = action_steps(result.trace)
    assert [s.error_kind for s in steps] == ["unknown_tool", "no_action", None]
    assert "'web_search', which is not allowed here" in (steps[0].error or "")
    assert steps[0].candidates == steps[1].candidates == steps[2].candidates
    assert runner.executed == ["vqa"]
    assert result.answer == "blue"


async def test_a_reasoner_reply_with_no_verdict_counts_as_not_informative() -> None:
    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: #"],
            "plan": [plan("vqa", "v?"), plan("image_search", "v?")],
            "reason": ["I am not sure what to say", verdict("answerable", "green")],
        }
    )
    system = AvisSystem(default_graph(), FakeRunner(default_graph()))
    img = Image(PILImage.new("RGB", (32, 32), "green"))
    result = await system.run("What colour?", {"image": img}, ctx=ToolContext(llm=policy.llm()))
    first, second = action_steps(result.trace)
    assert first.error_kind == "no_verdict" and first.verdict is None and first.backtrack
    assert "vqa" not in second.candidates
    assert result.answer == "green"


async def test_a_decomposition_without_its_lines_falls_back_to_the_whole_question() -> None:
    policy = AvisPolicy(
        {
            "decompose": ["sure! here you go"],
            "plan": [lambda p: plan("vqa", query_of(p))],
            "reason": [verdict("answerable", "two")],
        }
    )
    system = AvisSystem(default_graph(), FakeRunner(default_graph()))
    img = Image(PILImage.new("RGB", (32, 32)))
    result = await system.run("How many?", {"image": img}, ctx=ToolContext(llm=policy.llm()))
    step = result.trace.steps[0]
    assert step.error_kind == "syntax" and step.output == {"visual": "How many?", "knowledge": "#"}
    assert query_of(policy.prompts("plan")[0]) == "How many?"
    assert result.answer == "two"


async def test_every_path_exhausted_answers_from_the_best_evidence() -> None:
    graph = parse_graph({"edges": {START: ["vqa", "llm_qa"]}}, "small")
    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: what is #?"],
            "plan": [plan("vqa", "v?"), plan("llm_qa", "v?")],
            "reason": [verdict("not informative"), verdict("not informative")],
            "evidence": ["a guess"],
        }
    )
    system = AvisSystem(graph, FakeRunner(graph))
    img = Image(PILImage.new("RGB", (32, 32)))
    result = await system.run("q?", {"image": img}, ctx=ToolContext(llm=policy.llm()))
    last = result.trace.steps[-1]
    assert last.tool == "ANSWER" and last.forced and last.finish == "a guess"
    assert "every path was tried" in last.thought
    assert result.answer == "a guess" and result.trace.status == "finished"


async def test_the_step_budget_ends_with_the_latest_answer_drawn() -> None:
    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: #"],
            "plan": [plan("vqa", "v?"), plan("web_search", "v?")],
            "reason": [verdict("informative", "maybe cats"), verdict("informative")],
        }
    )
    system = AvisSystem(
        default_graph(), FakeRunner(default_graph()), settings=AvisSettings(max_steps=2)
    )
    img = Image(PILImage.new("RGB", (32, 32)))
    result = await system.run("q?", {"image": img}, ctx=ToolContext(llm=policy.llm()))
    last = result.trace.steps[-1]
    assert last.forced and last.router == "best evidence"
    assert "budget of 2 steps" in last.thought
    assert result.answer == "maybe cats"
    assert not policy.prompts("evidence")  # no model call was needed


async def test_a_missing_capability_is_a_step_error_and_a_backtrack() -> None:
    """No 'vqa' backend offline: the action fails with a clear observation, the planner
    moves on without asking the reasoner."""
    policy = AvisPolicy(
        {
            "decompose": ["Visual: v?\nKnowledge: #"],
            "plan": [plan("vqa", "v?"), plan("identical_image_search", "v?")],
            "reason": [],
            "evidence": ["unknown"],
        }
    )
    g = parse_graph({"edges": {START: ["vqa", "identical_image_search"]}}, "g")
    system = AvisSystem(g, ActionRunner(g.actions, {}, None))
    img = Image(PILImage.new("RGB", (32, 32)))
    result = await system.run("q?", {"image": img}, ctx=context(policy.llm()))
    first, second = action_steps(result.trace)
    assert first.error_kind == "capability_missing" and "'vqa'" in (first.error or "")
    assert second.error_kind == "capability_missing" and "image_index" in (second.error or "")
    assert first.backtrack and second.backtrack
    assert result.trace.steps[-1].forced


async def test_a_library_tool_as_a_custom_action_of_the_graph(tmp_path: Path) -> None:
    """`[actions.read_text] tool = "OCR"`: the planner may choose it like a built-in, and it
    runs the library's OCR (tesseract) on the object in focus."""
    from hammr.avis.graph import load_graph

    graph_file = tmp_path / "graph.toml"
    graph_file.write_text(
        '[edges]\nSTART = ["read_text", "vqa"]\nread_text = ["llm_qa"]\n'
        '[actions.read_text]\ntool = "OCR"\ndescription = "Read the printed text."\n'
    )
    graph = load_graph(graph_file, [t.name for t in builtin_tools()])
    policy = AvisPolicy(
        {
            "decompose": ["Visual: what does the sign say?\nKnowledge: #"],
            "plan": [lambda p: plan("read_text", "what does the sign say?")],
            "reason": [
                lambda p: verdict("answerable", "OPEN") if "OPEN" in p else verdict("informative")
            ],
        }
    )
    sign = PILImage.new("RGB", (360, 120), "white")
    from PIL import ImageDraw, ImageFont

    ImageDraw.Draw(sign).text((40, 30), "OPEN", fill="black", font=ImageFont.load_default(60))
    system = make_system(None, graph=graph)
    result = await system.run(
        "What does the sign say?", {"image": Image(sign)}, ctx=context(policy.llm())
    )
    (step,) = action_steps(result.trace)
    assert step.tool == "read_text" and step.candidates == ["read_text", "vqa"]
    assert "description" not in offered(policy.prompts("plan")[0])
    assert "- read_text: Read the printed text." in policy.prompts("plan")[0]
    assert step.observation.startswith("OCR: ") and "OPEN" in step.observation
    assert result.answer == "OPEN"


def test_the_planner_prompt_shows_only_the_candidates_and_their_examples() -> None:
    from hammr.avis.planner import Planner
    from hammr.avis.prompts import PLANNER_EXAMPLES

    planner = Planner(default_graph().actions)
    prompt = planner.prompt("what is it?", "Object #0 (whole image): a bird", ["vqa", "llm_qa"])
    assert offered(prompt) == ["vqa", "llm_qa"]
    for action, examples in PLANNER_EXAMPLES.items():
        for example in examples:
            assert (example.text() in prompt) == (action in ("vqa", "llm_qa")), action
    assert prompt.rstrip().endswith(
        "Write the action's name and the query to send it, as in the examples."
    )
