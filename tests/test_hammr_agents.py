"""HAMMR machinery with scripted LLMs: catalog, settings, naive baseline, routing, agent files."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from hammr.agent import ReActAgent
from hammr.agents import AgentCatalog, AgentSystems, NeighbourRouter, SpecError, routing_only
from hammr.agents.catalog import NAIVE_NAME
from hammr.agents.routing import RoutedDispatcher
from hammr.agents.spec import BUILTIN_DIR
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools
from hammr.values import Image

BLANK = Image(PILImage.new("RGB", (64, 48), (200, 200, 200)))


class BagOfWordsEmbedder:
    """A deterministic stand-in for the text embedder: hashed word counts, L2-normalised."""

    cache_key = "bag of words, 256 buckets"

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        rows = np.zeros((len(texts), 256), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                rows[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        return await self.embed_queries(texts)


def systems(**kw) -> AgentSystems:
    return AgentSystems.build(builtin_tools(), {"embed": BagOfWordsEmbedder()}, **kw)


def test_hammr_is_a_tree_of_agents_and_two_hop_calls_single_hop() -> None:
    s = systems(setting="tools_only")
    dispatcher = s.agents["QuestionDispatcherAgent"]
    specialists = [t for t in dispatcher.tools.values() if isinstance(t, ReActAgent)]
    assert len(specialists) == 8 and len(dispatcher.tools) == 8
    two_hop = s.agents["TwoHopEncyclopedicAgent"]
    assert two_hop.tools["SingleHopEncyclopedicAgent"] is s.agents["SingleHopEncyclopedicAgent"]
    # each specialist's prompt holds only its own tools
    ocr = s.agents["OCRReasoningAgent"]
    assert set(ocr.tools) == {"DetectObject", "CropImage", "OCR"}


def test_tools_only_withholds_vqa_and_with_vqa_gives_it_to_every_specialist() -> None:
    only = systems(setting="tools_only").agents
    withv = systems(setting="with_vqa").agents
    for name in ("SpatialReasoningAgent", "ComplexCountingAgent", "OCRReasoningAgent"):
        assert "VQA" not in only[name].tools
        assert "VQA" in withv[name].tools
    assert "VQA" in only["PointQALocalAgent"].tools
    assert "VQA" not in withv["QuestionDispatcherAgent"].tools
    # auto follows the configured backends
    assert systems(setting="auto").setting == "tools_only"
    auto_vqa = AgentSystems.build(builtin_tools(), {"vqa": object()}, setting="auto")
    assert auto_vqa.setting == "with_vqa"


def test_the_naive_baseline_is_generated_from_the_same_files() -> None:
    s = systems(setting="tools_only")
    naive = s.naive()
    catalog = s.catalog
    assert naive.name == NAIVE_NAME
    assert not any(isinstance(t, ReActAgent) for t in naive.tools.values())
    union = {t for spec in catalog.specialists for t in catalog.leaf_tools(spec)}
    assert set(naive.tools) == union
    prompt = naive.system_prompt()
    for spec in catalog.specialists:
        for example in catalog.naive_examples(spec):
            assert example in prompt
        assert spec.instructions in prompt
    # no example in the flat prompt calls an agent
    assert "SingleHopEncyclopedicAgent(" not in prompt
    # HAMMR's per-agent prompts are each much shorter than the naive one
    longest = max(len(a.system_prompt()) for a in s.agents.values())
    assert longest < len(prompt) / 2


def test_routing_only_mode_records_the_dispatchers_choice_without_running_it() -> None:
    s = systems(setting="tools_only")
    llm = ScriptedLLM(
        [
            "[Thought]: The answer is printed text.\n"
            "[Act]: answer = OCRReasoningAgent('what does the sign say?', image)"
        ]
    )
    probe = routing_only(s.agents["QuestionDispatcherAgent"])
    result = probe.run_sync("what does the sign say?", {"image": BLANK}, llm=llm)
    assert result.answer == "OCRReasoningAgent"
    assert llm.calls == 1  # the specialist was never run
    assert result.trace.steps[0].tool == "OCRReasoningAgent"
    assert result.trace.steps[0].child is None


def test_dispatcher_runs_the_specialist_it_calls_with_a_scripted_llm() -> None:
    s = systems(setting="tools_only")
    script = [
        "[Thought]: printed text.\n[Act]: answer = OCRReasoningAgent('what does it say?', image)",
        "[Thought]: Read the whole image.\n[Act]: text = OCR(image)",
        "[Thought]: Nothing readable.\n[Finish]: nothing",
        "[Thought]: The specialist answered.\n[Finish]: nothing",
    ]
    llm = ScriptedLLM(script)
    result = s.agents["QuestionDispatcherAgent"].run_sync(
        "what does it say?", {"image": BLANK}, ctx=ToolContext(backends={}), llm=llm
    )
    step = result.trace.steps[0]
    assert step.child is not None and step.child.agent == "OCRReasoningAgent"
    assert step.child.steps[0].error_kind == "capability_missing"
    assert result.answer == "nothing"


async def test_neighbour_router_gates_by_inputs_and_votes_by_similarity() -> None:
    catalog = AgentCatalog.load()
    embedder = BagOfWordsEmbedder()
    router = NeighbourRouter.from_catalog(catalog, embedder, k=5)
    only_two_image = await router.route("The left image has more dogs.", ["image", "image2"])
    assert only_two_image.agent == "TwoImageVQAAgent" and only_two_image.by == "inputs"
    assert embedder.calls == 0  # decided by the inputs alone
    pointed = await router.route("what color is this?", ["image", "point"])
    assert set(pointed.candidates) == {"PointQALocalAgent", "PointQALookTwiceAgent"}
    assert pointed.agent in pointed.candidates and pointed.by == "neighbours"
    assert all(n.agent in pointed.candidates for n in pointed.neighbours)
    plain = await router.route("what is written on the licence plate?", ["image"])
    assert "PointQALocalAgent" not in plain.candidates
    assert abs(sum(plain.votes.values()) - 1.0) < 1e-6
    scores = [n.score for n in plain.neighbours]
    assert scores == sorted(scores, reverse=True)
    assert embedder.calls == 3  # the examples once, then one call per question


async def test_router_embeddings_are_cached_on_disk(tmp_path: Path) -> None:
    catalog = AgentCatalog.load()
    first = BagOfWordsEmbedder()
    await NeighbourRouter.from_catalog(catalog, first, cache_dir=tmp_path).route("x y", ["image"])
    second = BagOfWordsEmbedder()
    await NeighbourRouter.from_catalog(catalog, second, cache_dir=tmp_path).route("x y", ["image"])
    assert first.calls == 2 and first.texts > 100
    # one labelled question, to check the cached vectors are still this embedder's; the question
    assert second.calls == 2 and second.texts == 2
    assert len(list(tmp_path.glob("router-*.npy"))) == 1


async def test_an_embedder_with_no_name_is_not_cached_on_disk(tmp_path: Path) -> None:
    class Unnamed(BagOfWordsEmbedder):
        cache_key = ""  # and Python's default repr: nothing says which model it is

    await NeighbourRouter.from_catalog(AgentCatalog.load(), Unnamed(), cache_dir=tmp_path).route(
        "x y", ["image"]
    )
    assert not list(tmp_path.iterdir())


def _hybrid(threshold: float) -> tuple[RoutedDispatcher, ScriptedLLM]:
    s = systems(setting="tools_only", router="hybrid", router_threshold=threshold)
    llm = ScriptedLLM(
        lambda req: (
            "[Thought]: read it.\n[Act]: t = OCR(image)"
            if req.messages[0].text().startswith("You answer questions by reading")
            and len(req.messages) == 2
            else "[Thought]: done.\n[Finish]: FROM "
            + ("SPECIALIST" if "reading" in req.messages[0].text()[:60] else "DISPATCHER")
        )
    )
    return s.dispatcher(), llm


async def test_hybrid_routes_directly_when_confident_and_the_trace_keeps_the_dispatcher_shape() -> (
    None
):
    dispatcher, llm = _hybrid(threshold=0.0)
    result = await dispatcher.run(
        "what does the licence plate say?",
        {"image": BLANK},
        ctx=ToolContext(backends={}, llm=llm),
    )
    trace = result.trace
    assert trace.agent == "QuestionDispatcherAgent"
    assert trace.steps[0].router == "neighbours"
    assert trace.steps[0].tool == "OCRReasoningAgent"
    child = trace.steps[0].child
    assert child is not None and child.agent == "OCRReasoningAgent"
    assert result.answer == "FROM SPECIALIST"
    # only the specialist's steps were LLM calls
    assert trace.llm_calls == child.llm_calls == len(llm.requests)


async def test_hybrid_defers_to_the_llm_dispatcher_below_the_threshold() -> None:
    dispatcher, llm = _hybrid(threshold=1.01)
    result = await dispatcher.run(
        "what does the licence plate say?", {"image": BLANK}, ctx=ToolContext(backends={}, llm=llm)
    )
    assert result.trace.steps[0].router is None
    assert result.answer == "FROM DISPATCHER"
    assert llm.requests[0].messages[0].text().startswith("You do not answer questions yourself")


async def test_decide_asks_the_llm_only_in_routing_only_mode() -> None:
    s = systems(router="llm")
    llm = ScriptedLLM(
        ["[Thought]: counting.\n[Act]: a = ComplexCountingAgent('How many red cars?', image)"]
    )
    decision = await s.dispatcher().decide(
        "How many red cars?", {"image": BLANK}, ToolContext(backends={}, llm=llm)
    )
    assert decision.agent == "ComplexCountingAgent" and decision.by == "llm"
    assert llm.calls == 1


# -- agents as files ----------------------------------------------------------------------

EXTRA = '''
name = "ColourAgent"
question_type = "colour"
description = "Answers what colour something is."
tools = ["CropImage", "VQA"]
instructions = "Crop the object and ask VQA its colour."
routing_examples = ["what colour is the car?", "which colour are the walls?"]
examples = ["""
Question: what colour is the door?
Variables:
- image: image 640x480
[Thought]: I ask VQA about the door's colour.
[Act]: colour = VQA(image, 'What color is the door?')
[Observe]: red (stored in 'colour')
[Thought]: The door is red.
[Finish]: red"""]
'''


def test_a_dropped_file_adds_an_agent_the_dispatcher_can_call(tmp_path: Path) -> None:
    (tmp_path / "colour.toml").write_text(EXTRA)
    catalog = AgentCatalog.load(tmp_path)
    s = AgentSystems.build(builtin_tools(), {}, catalog=catalog)
    assert "ColourAgent" in s.agents["QuestionDispatcherAgent"].tools
    assert (
        "ColourAgent(question: text, image: image)"
        in s.agents["QuestionDispatcherAgent"].system_prompt()
    )
    assert "VQA" in s.naive().tools


def test_a_dropped_file_with_a_builtin_name_replaces_that_agent(tmp_path: Path) -> None:
    text = (BUILTIN_DIR / "ocr_reasoning.toml").read_text()
    (tmp_path / "mine.toml").write_text(
        text.replace(
            'tools = ["DetectObject", "CropImage", "OCR"]', 'tools = ["CropImage", "OCR", "ZoomIn"]'
        )
    )
    catalog = AgentCatalog.load(tmp_path)
    assert catalog.specs["OCRReasoningAgent"].source == tmp_path / "mine.toml"
    s = AgentSystems.build(builtin_tools(), {}, catalog=catalog)
    assert set(s.agents["OCRReasoningAgent"].tools) == {"CropImage", "OCR", "ZoomIn"}
    assert len(catalog.specialists) == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'X'\ndescription = 'd'\ninstructions = 'i'\ncolour = 1", "unknown key"),
        ("name = 'X'\ninstructions = 'i'", "'description' is required"),
        ("name = 'X Y'\ndescription = 'd'\ninstructions = 'i'", "must be an identifier"),
        ("name = 'X'\ndescription = 'd'\ninstructions = 'i'\ninputs = {p = 'dot'}", "'inputs'"),
        ("name = 'X'\ndescription = 'd'\ninstructions = 'i'\ntools = 'OCR'", "list of strings"),
        ("name = = 'X'", "not valid TOML"),
    ],
)
def test_a_bad_agent_file_is_refused_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(SpecError, match=message) as info:
        AgentCatalog.load(tmp_path)
    assert "bad.toml" in str(info.value)


def test_unknown_tools_and_cycles_are_refused(tmp_path: Path) -> None:
    base = "description = 'd'\ninstructions = 'i'\nquestion_type = '{t}'\n"
    (tmp_path / "a.toml").write_text("name = 'A'\n" + base.format(t="a") + "tools = ['B']")
    (tmp_path / "b.toml").write_text("name = 'B'\n" + base.format(t="b") + "tools = ['A']")
    with pytest.raises(SpecError, match=r"cycle: (A -> B -> A|B -> A -> B)"):
        AgentCatalog.load(tmp_path)
    (tmp_path / "b.toml").write_text("name = 'B'\n" + base.format(t="b") + "tools = ['Magic']")
    catalog = AgentCatalog.load(tmp_path)
    with pytest.raises(SpecError, match="unknown tool 'Magic'"):
        catalog.build(builtin_tools())


def test_two_specialists_for_one_question_type_are_refused(tmp_path: Path) -> None:
    (tmp_path / "dup.toml").write_text(
        "name = 'MyOCR'\ndescription = 'd'\ninstructions = 'i'\nquestion_type = 'ocr_reasoning'"
    )
    with pytest.raises(SpecError, match="already answered by OCRReasoningAgent"):
        AgentCatalog.load(tmp_path)


def test_an_agent_in_python_calls_another_agent_as_a_tool() -> None:
    s = systems()
    mine = ReActAgent(
        name="Mine",
        description="d",
        instructions="i",
        tools=[s.agents["OCRReasoningAgent"], *builtin_tools()[:2]],
    )
    assert "OCRReasoningAgent(question: text, image: image) -> answer" in mine.system_prompt()


def test_the_llm_dispatcher_is_offered_only_specialists_that_take_the_given_inputs() -> None:
    dispatcher = systems(router="llm").dispatcher()
    plain = dispatcher.llm_dispatcher(["image"])
    assert "PointQALocalAgent" not in plain.tools and "TwoImageVQAAgent" not in plain.tools
    assert "PointQALocalAgent(" not in plain.system_prompt().split("Examples:")[0]
    assert len(plain.tools) == 5
    pointed = dispatcher.llm_dispatcher(["image", "point"])
    assert set(pointed.tools) == {"PointQALocalAgent", "PointQALookTwiceAgent"}
    assert pointed.final_tools == frozenset(pointed.tools)
    assert dispatcher.llm_dispatcher(["image"]) is plain  # built once per input signature


def test_the_papers_dispatcher_is_offered_every_specialist() -> None:
    from hammr.agents.catalog import Habits

    s = systems(router="llm")
    s.habits = Habits(offer_all=True)  # agent.dispatcher_offers = 'all' (Table B.1)
    dispatcher = s.dispatcher()
    offered = dispatcher.llm_dispatcher(["image"])
    assert offered is dispatcher.dispatcher  # one image, yet the two-image agent is offered
    assert {"PointQALocalAgent", "TwoImageVQAAgent"} <= set(offered.tools)
    assert len(offered.tools) == len(s.catalog.specialists)
