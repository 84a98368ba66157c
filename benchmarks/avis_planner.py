"""(l) AVIS vs its autonomous baseline: planner prompt tokens per call and LLM calls per
question, on the demo's encyclopedic questions, with a scripted policy.

Both systems run the 8 single- and two-hop demo questions over the real offline tools (the
demo image collection for the image searches, the bundled knowledge base as the web, Haar
detection, tesseract). A scripted model plays planner and reasoner, the same for both, so
they differ only in the graph:

* the reasoner is an oracle over the real tool output: an image search whose hits name the
  question's first entity is informative (that entity is the visual answer); a search
  result holding the reference answer is answerable; anything else is not informative;
* the planner is either *phase-aware* (the first action of the query's phase among those
  offered: identical image search, image search, object select, VQA for the visual query;
  web search, LLM QA for the knowledge query) or *uniform* (a seeded random pick among the
  offered actions, 5 seeds per question), the latter standing for a model that has to be
  steered by what it is offered.

Every planner request is counted with the embedded model's real tokenizer and chat template
(SmolLM2 through llama.cpp), as benchmark (e) does.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from agent_prompts import Tokenizer  # noqa: E402
from avis_policy import AvisPolicy, offered, plan, query_of, verdict  # noqa: E402
from hammr.avis.actions import ActionRunner  # noqa: E402
from hammr.avis.graph import autonomous_graph, default_graph  # noqa: E402
from hammr.avis.index_search import IndexSearch  # noqa: E402
from hammr.avis.system import AvisSystem  # noqa: E402
from hammr.backends.llm.base import LLMRequest  # noqa: E402
from hammr.tools.base import ToolContext  # noqa: E402
from hammr.tools.library import builtin_tools, default_backends  # noqa: E402
from hammr.values import Image  # noqa: E402

DEMO = ROOT / "examples" / "demo"
SEEDS = 5
COLUMNS = [
    "system",
    "policy",
    "planner prompt tokens / call (median)",
    "largest planner prompt",
    "LLM calls / question (median)",
    "steps / question (mean)",
    "answered correctly",
]
VISUAL_ORDER = ("identical_image_search", "image_search", "object_select", "vqa")
KNOWLEDGE_ORDER = ("web_search", "llm_qa")


def questions() -> list[dict[str, object]]:
    rows = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text().splitlines()]
    return [r for r in rows if r["type"] in ("single_hop", "two_hop")]


def oracle_reasoner(question: dict[str, object]) -> Callable[[str], str]:
    entity = str(question["entities"][0]).split(",")[0].split("(")[0].strip()  # type: ignore[index]
    answer = str(question["answer"])

    def judge(prompt: str) -> str:
        output = prompt.split("\nOutput: ")[-1]
        if prompt.startswith("Judge whether what an image tool"):
            titles = output.split("Retrievals")[-1]
            if entity.lower() in titles.lower():
                return verdict("informative", entity)
            return verdict("not informative")
        if answer.lower() in output.lower():
            return verdict("answerable", answer)
        return verdict("not informative")

    return judge


def planner_policy(kind: str, visual_query: list[str], rng: random.Random) -> Callable[[str], str]:
    def choose(prompt: str) -> str:
        candidates = offered(prompt)
        query = query_of(prompt)
        if kind == "uniform":
            return plan(rng.choice(candidates), query)
        order = VISUAL_ORDER if query == visual_query[0] else KNOWLEDGE_ORDER
        pick = next((a for a in order if a in candidates), candidates[0])
        return plan(pick, query)

    return choose


async def run_one(
    system: AvisSystem, question: dict[str, object], kind: str, seed: int
) -> tuple[list[LLMRequest], int, int, bool]:
    visual = "which person, thing or place is shown?"  # names nothing the web could find
    knowledge = str(question["question"]).replace("this", "#", 1)
    judge = oracle_reasoner(question)
    rng = random.Random(seed)
    policy = AvisPolicy(
        {
            "decompose": [f"Visual: {visual}\nKnowledge: {knowledge}"],
            "plan": [planner_policy(kind, [visual], rng)] * 40,
            "reason": [judge] * 40,
            "object": ["Why: the whole picture.\nObject: #0"] * 40,
            "llm_qa": ["I do not know"] * 40,
            "evidence": ["unknown"],
        }
    )
    llm = policy.llm()
    image = Image.open(DEMO / str(question["image"]))
    ctx = ToolContext(backends=BACKENDS, llm=llm)
    result = await system.run(str(question["question"]), {"image": image}, ctx=ctx)
    planner = [r for r in llm.requests if r.messages[-1].text().startswith("Your goal is")]
    steps = sum(1 for s in result.trace.steps if s.state is not None)
    correct = (result.answer or "").lower() == str(question["answer"]).lower()
    return planner, result.trace.llm_calls, steps, correct


BACKENDS = default_backends()


def build(autonomous: bool) -> AvisSystem:
    base = default_graph()
    graph = autonomous_graph(base.actions) if autonomous else base
    index = IndexSearch(DEMO / "image_index.jsonl")
    runner = ActionRunner(graph.actions, {t.name: t for t in builtin_tools()}, index)
    return AvisSystem(graph, runner, name="avis-autonomous" if autonomous else "avis")


def run() -> list[tuple[str, ...]]:
    tokenizer = Tokenizer()
    rows: list[tuple[str, ...]] = []
    qs = questions()
    for autonomous in (False, True):
        system = build(autonomous)
        for kind in ("phase-aware", "uniform"):
            seeds = range(SEEDS) if kind == "uniform" else range(1)
            tokens: list[int] = []
            calls: list[int] = []
            steps: list[int] = []
            correct = 0
            for q in qs:
                for seed in seeds:
                    requests, n_calls, n_steps, ok = asyncio.run(run_one(system, q, kind, seed))
                    tokens += [tokenizer.count(r) for r in requests]
                    calls.append(n_calls)
                    steps.append(n_steps)
                    correct += ok
            runs = len(qs) * len(seeds)
            rows.append(
                (
                    system.name,
                    kind,
                    f"{statistics.median(tokens):.0f}",
                    f"{max(tokens)}",
                    f"{statistics.median(calls):.0f}",
                    f"{statistics.mean(steps):.1f}",
                    f"{correct}/{runs}",
                )
            )
    return rows


if __name__ == "__main__":
    import run as runner

    runner.main(["avis"])
