"""MuSEAgent's exploration / evaluation split: Table 1's counts, stratification, seeds, the limit
drawn inside a half, and `hammr eval --split` on the bundled muse-demo suite (the LLM played by
the scripted OpenAI-compatible server)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.cli import main
from hammr.eval.splits import (
    EVALUATION,
    EXPLORATION,
    SplitCounts,
    split_counts,
    split_samples,
    split_then_limit,
)
from hammr.eval.store import RunStore
from hammr.eval.suites import SuiteError, load_suite
from hammr.eval.types import Sample

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo"


def make(dataset: str, sizes: dict[str, int]) -> list[Sample]:
    return [
        Sample(f"{sub}-{i:04d}", dataset, "q?", ("A",), {}, question_type=sub, choices=("x", "y"))
        for sub, n in sizes.items()
        for i in range(n)
    ]


# MuSEAgent's benchmarks at the sizes its Table 1 implies, and the (exploration, evaluation)
# counts it gives per sub-task.
TABLE_1 = {
    "vstar": ({"attribute": 115, "relation": 76}, {"attribute": (57, 58), "relation": (38, 38)}),
    "mme_realworld_lite": (
        {"perception": 1169, "reasoning": 750},
        {"perception": (584, 585), "reasoning": (375, 375)},
    ),
    "zoombench": ({"multiple_choice": 621}, {"multiple_choice": (310, 311)}),
    "hrbench_8k": ({"multiple_choice": 200}, {"multiple_choice": (100, 100)}),
}


@pytest.mark.parametrize("dataset", sorted(TABLE_1))
def test_table_1_counts_are_reproduced(dataset: str) -> None:
    sizes, expected = TABLE_1[dataset]
    counts = split_counts(make(dataset, sizes), seed=0)
    assert counts == [SplitCounts(sub, *expected[sub]) for sub in sorted(expected)]
    # whatever the seed
    assert split_counts(make(dataset, sizes), seed=7) == counts


def test_halves_are_disjoint_cover_everything_and_keep_the_input_order() -> None:
    samples = make("vstar", {"attribute": 115, "relation": 76})
    halves = split_samples(samples, seed=3)
    exp, ev = halves[EXPLORATION], halves[EVALUATION]
    assert not {s.id for s in exp} & {s.id for s in ev}
    assert sorted(s.id for s in exp + ev) == sorted(s.id for s in samples)
    position = {s.id: i for i, s in enumerate(samples)}
    assert [position[s.id] for s in exp] == sorted(position[s.id] for s in exp)
    # stratified: each sub-task is cut in half on its own
    assert Counter(s.question_type for s in exp) == {"attribute": 57, "relation": 38}


def test_seed_decides_the_halves_not_the_file_order() -> None:
    samples = make("zoombench", {"multiple_choice": 40})
    first = {s.id for s in split_samples(samples, seed=0)[EXPLORATION]}
    again = {s.id for s in split_samples(samples, seed=0)[EXPLORATION]}
    shuffled = list(samples)
    random.Random(5).shuffle(shuffled)
    reordered = {s.id for s in split_samples(shuffled, seed=0)[EXPLORATION]}
    other = {s.id for s in split_samples(samples, seed=1)[EXPLORATION]}
    assert first == again == reordered
    assert other != first and len(other) == len(first) == 20


def test_odd_strata_give_the_extra_sample_to_evaluation() -> None:
    halves = split_samples(make("d", {"a": 1, "b": 3}), seed=0)
    assert Counter(s.question_type for s in halves[EXPLORATION]) == {"b": 1}
    assert Counter(s.question_type for s in halves[EVALUATION]) == {"a": 1, "b": 2}


def test_limit_draws_inside_the_half() -> None:
    samples = make("mme_realworld_lite", {"perception": 30, "reasoning": 20})
    evaluation = {s.id for s in split_samples(samples, seed=0)[EVALUATION]}
    for limit in (1, 5, 25, 100):
        chosen = split_then_limit(samples, "evaluation", limit=limit, seed=4)
        assert len(chosen) == min(limit, 25)
        assert {s.id for s in chosen} <= evaluation
    # the limit's draw is prefix-stable, like sample_subset
    five = split_then_limit(samples, "evaluation", limit=5, seed=4)
    assert split_then_limit(samples, "evaluation", limit=3, seed=4) == five[:3]
    with pytest.raises(ValueError, match="unknown split 'train'"):
        split_then_limit(samples, "train")


def test_repeated_ids_are_refused() -> None:
    samples = make("d", {"a": 2})
    with pytest.raises(ValueError, match="sample ids repeat"):
        split_samples([*samples, samples[0]])


def test_suite_halves_of_muse_demo() -> None:
    suite = load_suite("muse-demo")
    exp = suite.samples(DEMO, half="exploration", check_images=True)
    ev = suite.samples(DEMO, half="evaluation", check_images=True)
    whole = suite.samples(DEMO)
    assert len(whole) == 20 and len(exp) == len(ev) == 10
    assert {s.id for _, s in exp}.isdisjoint({s.id for _, s in ev})
    assert Counter(s.question_type for _, s in exp) == {"attribute": 5, "relation": 5}
    limited = suite.samples(DEMO, half="evaluation", limit=3, seed=2)
    assert len(limited) == 3 and {s.id for _, s in limited} <= {s.id for _, s in ev}
    other_seed = suite.samples(DEMO, half="exploration", split_seed=1)
    assert {s.id for _, s in other_seed} != {s.id for _, s in exp}
    with pytest.raises(SuiteError, match="entry 'muse_demo': unknown split 'nope'"):
        suite.samples(DEMO, half="nope")


# -- hammr eval --split ------------------------------------------------------------------------


def always_b(seen: Seen) -> Reply:
    return Reply(body=ok_body("[Thought]: looking closely\n[Finish]: B"))


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.responder = always_b
    yield s
    s.close()


def test_scripted_eval_split_runs_one_half_and_records_it(
    server: FakeServer, tmp_path: Path
) -> None:
    env = served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "c"))
    store = tmp_path / "runs.sqlite"
    base = ["eval", "--suite", "muse-demo", "--data-dir", str(DEMO), "--store", str(store)]
    base += ["--system", "naive", "--no-progress"]
    runner = CliRunner()
    r = runner.invoke(main, [*base, "--split", "exploration", "--name", "exp"], env=env)
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(
        main, [*base, "--split", "evaluation", "--name", "ev", "--limit", "4"], env=env
    )
    assert r.exit_code == 0, r.stderr
    with RunStore(store) as s:
        exp_rows, ev_rows = s.score_rows("exp"), s.score_rows("ev")
        exp_info, ev_info = s.run_info("exp"), s.run_info("ev")
    assert exp_info is not None and ev_info is not None
    assert (exp_info.settings["split"], exp_info.settings["split_seed"]) == ("exploration", 0)
    assert ev_info.settings["split"] == "evaluation" and ev_info.settings["limit"] == 4
    assert len(exp_rows) == 10 and len(ev_rows) == 4
    assert {r.sample_id for r in exp_rows}.isdisjoint({r.sample_id for r in ev_rows})
    assert {(r.dataset, r.question_type) for r in exp_rows} == {
        ("muse_demo", "attribute"),
        ("muse_demo", "relation"),
    }
    answers = {
        json.loads(line)["id"]: json.loads(line)["answer"]
        for line in (DEMO / "mc_questions.jsonl").read_text().splitlines()
    }
    # the server always answers B: a sample is right exactly when its answer is B
    assert all(r.score == (1.0 if answers[r.sample_id] == "B" else 0.0) for r in exp_rows)
    bad = runner.invoke(main, [*base, "--split", "train"], env=env)
    assert bad.exit_code == 2 and "'train' is not one of" in bad.stderr
    # resuming a run with the other half (or none) is refused: the halves never mix in a run
    mixed = runner.invoke(main, [*base, "--split", "evaluation", "--name", "exp"], env=env)
    assert mixed.exit_code == 2
    assert "run 'exp' was made with the exploration split (seed 0)" in mixed.stderr
    mixed = runner.invoke(main, [*base, "--name", "exp"], env=env)
    assert mixed.exit_code == 2 and "give this half its own --name" in mixed.stderr
    again = runner.invoke(main, [*base, "--split", "exploration", "--name", "exp"], env=env)
    assert again.exit_code == 0 and "10 of 10 samples already done" in again.stderr
    with RunStore(store) as s:
        assert s.count("exp") == 10
