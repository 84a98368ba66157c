"""The learned graph, end to end: AVIS evaluated on the demo's encyclopedic questions (a
scripted policy, everything else real: the demo image collection, the knowledge base, the
store, the metrics), the paper's analyses counted from the stored run, a graph induced from
its successful traces, a second run under that graph, and one report holding both."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from avis_policy import AvisPolicy, offered, plan, query_of, verdict
from conftest import ROOT, needs_tesseract
from hammr.avis.actions import ActionRunner
from hammr.avis.analyses import analyze_records
from hammr.avis.graph import START, TransitionGraph, default_graph, load_graph
from hammr.avis.index_search import IndexSearch
from hammr.avis.system import AvisSystem
from hammr.cli import main
from hammr.eval.runner import local_answerer, run_samples
from hammr.eval.store import RunStore
from hammr.eval.suites import load_suite
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools, default_backends
from hammr.web.static_report import write_report

pytestmark = [needs_tesseract]
DEMO = ROOT / "examples" / "demo"


def oracle(answers: dict[str, str], seed: int) -> AvisPolicy:
    """A planner choosing uniformly among what it is offered (seeded), and a reasoner that
    reads the real tool outputs: an identical image's title is the visual answer; a search
    result holding the sample's reference answer is answerable."""
    rng = random.Random(seed)
    current: list[str] = []

    def decompose(prompt: str) -> str:
        question = prompt.rsplit("Question: ", 1)[-1].strip()
        current[:] = [answers[question]]
        return f"Visual: what is shown?\nKnowledge: {question.replace('this', '#', 1)}"

    def judge(prompt: str) -> str:
        output = prompt.split("\nOutput: ")[-1]
        if "high confidence: " in output:
            title = output.split("high confidence: ")[1].split(",")[0].split(" (")[0]
            return verdict("informative", title)
        if current and current[0].lower() in output.lower():
            return verdict("answerable", current[0])
        return verdict("not informative")

    return AvisPolicy(
        {
            "decompose": [decompose] * 50,
            "plan": [lambda p: plan(rng.choice(offered(p)), query_of(p))] * 500,
            "reason": [judge] * 500,
            "object": ["Why: the whole picture.\nObject: #0"] * 500,
            "llm_qa": ["I do not know"] * 500,
            "evidence": ["unknown"] * 50,
        }
    )


async def evaluate(store: RunStore, name: str, graph: TransitionGraph, seed: int) -> None:
    samples = [
        (e, s)
        for e, s in load_suite("demo").samples(DEMO)
        if e.question_type in ("single_hop", "two_hop")
    ]
    answers = {s.question: str(s.answers[0]) for _, s in samples}
    policy = oracle(answers, seed)
    index = IndexSearch(DEMO / "image_index.jsonl")
    runner = ActionRunner(graph.actions, {t.name: t for t in builtin_tools()}, index)
    system = AvisSystem(graph, runner)
    backends = default_backends()
    store.open_run(name, "demo", "avis")
    answer = local_answerer(
        system, run_name=name, ctx_factory=lambda: ToolContext(backends=backends, llm=policy.llm())
    )
    await run_samples(answer, samples, store=store, run_name=name, concurrency=1)


async def test_analyse_induce_rerun_and_compare_in_one_report(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with RunStore(db) as store:
        await evaluate(store, "hand", default_graph(), seed=3)
        records = store.records("hand", limit=None)
    assert len(records) == 8
    analysis = analyze_records(records, label="hand")
    # the figures, counted again from the stored traces
    sequences = [[s.tool for s in r.trace.steps if s.state is not None] for r in records]
    assert analysis.traces == 8
    assert analysis.tools == dict(Counter(t for seq in sequences for t in seq))
    assert analysis.positions[0] == dict(Counter(seq[0] for seq in sequences if seq))
    assert dict(analysis.lengths) == dict(Counter(len(seq) for seq in sequences))
    verdicts = Counter(
        s.verdict for r in records for s in r.trace.steps if s.state is not None and s.verdict
    )
    assert {k: v for k, v in analysis.verdicts.items() if v} == dict(verdicts)
    solved = [r for r in records if r.score >= 1]
    assert solved, "the oracle solves some questions"

    learned_file = tmp_path / "learned.toml"
    out = CliRunner().invoke(
        main,
        ["avis", "induce", "hand", "--store", str(db), "-o", str(learned_file)],
        env={"HAMMR_CONFIG": ""},
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    learned = load_graph(learned_file)
    # every learned edge was taken by a successful trace
    taken = {
        (s.state, s.tool) for r in solved for s in r.trace.steps if s.state is not None and s.tool
    }
    assert {(st, a) for st, targets in learned.edges.items() for a in targets} <= taken
    assert learned.edges[START]

    with RunStore(db) as store:
        await evaluate(store, "learned", learned, seed=3)
        again = store.records("learned", limit=None)
        for r in again:
            for s in r.trace.steps:
                if s.state is not None:
                    assert set(s.candidates) <= set(learned.edges.get(s.state, ()))
        report = tmp_path / "report.html"
        write_report(store, ["hand", "learned"], report)
    html = report.read_text()
    assert "Runs compared" in html
    assert html.count('class="avis-analysis') >= 2
