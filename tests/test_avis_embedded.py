"""`hammr ask --system avis` on the embedded default (SmolLM2-135M, grammar on), offline, end
to end: decomposition, visual context, planner, actions over the demo image collection and
the bundled knowledge base, reasoner, an answer, and not one formulation error.

SmolLM2 is far too small to answer well; what is checked is that under the grammars every
choice it writes is a candidate, every verdict one of the three, and the run ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import ROOT, needs_embedded_model, needs_tesseract
from hammr.avis.graph import default_graph
from hammr.cli import main
from hammr.trace import Trace

pytestmark = [needs_embedded_model, needs_tesseract]

DEMO = ROOT / "examples" / "demo"
FORMULATION = {"syntax", "no_action", "unknown_tool", "bad_arguments", "no_verdict"}


@pytest.mark.parametrize(
    ("system", "config", "image", "question"),
    [
        ("avis", "avis.toml", "astronaut.jpg", "In which year was this astronaut born?"),
        ("avis", None, "rocket.jpg", "Which company builds this rocket?"),
        ("avis-autonomous", "avis.toml", "coffee.jpg", "Where was this drink invented?"),
    ],
)
def test_hammr_ask_system_avis_runs_offline_without_formulation_errors(
    system: str, config: str | None, image: str, question: str, tmp_path: Path
) -> None:
    trace_file = tmp_path / "trace.json"
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ["ask", str(DEMO / image), question, "--system", system, "--trace", str(trace_file)]
    if config is not None:
        args += ["--config", str(DEMO / config)]
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    trace = Trace.load(trace_file)
    assert trace.agent == "AVIS" and trace.status == "finished"
    assert trace.answer and trace.answer in result.output
    assert [s.tool for s in trace.steps[:2]] == ["DECOMPOSE", "CONTEXT"]
    actions = [s for s in trace.steps if s.state is not None]
    assert actions, "the planner chose at least once"
    errors = [(s.tool, s.error_kind, s.error) for s in trace.steps if s.error_kind in FORMULATION]
    assert errors == []
    graph = default_graph()
    for s in actions:
        assert s.tool in s.candidates
        if system == "avis":
            assert set(s.candidates) <= set(graph.edges[s.state])
        # every action that ran was judged (or failed for want of a backend)
        assert s.verdict is not None or s.error_kind == "capability_missing"
    if config is not None:  # the image collection is searched for real
        searched = [s for s in actions if s.tool and "image_search" in s.tool]
        for s in searched:
            assert "Retrievals" in s.observation
