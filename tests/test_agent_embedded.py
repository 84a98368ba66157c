"""The embedded default for real: SmolLM2-135M through xllamacpp driving an agent, grammar on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, needs_embedded_model, needs_tesseract
from hammr.backends.llm.embedded import EmbeddedLLM
from hammr.general_agent import general_agent
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools, default_backends
from hammr.values import Image
from patience import HANG_S

FORMULATION_ERRORS = {"syntax", "no_action", "unknown_tool", "unknown_variable"}

pytestmark = [needs_embedded_model, needs_tesseract]


async def test_smollm2_runs_agent_steps_under_the_grammar(
    plate: tuple[Image, dict[str, Any]],
) -> None:
    image, meta = plate
    tools = builtin_tools()
    agent = general_agent(tools, max_steps=3)
    llm = EmbeddedLLM(n_ctx=4096)
    ctx = ToolContext(backends=default_backends(), llm=llm)
    result = await agent.run(meta["question"], {"image": image}, ctx=ctx)
    trace = result.trace
    assert trace.steps, "the agent made no step"
    for step in trace.steps:
        assert step.error_kind not in FORMULATION_ERRORS, (step.raw, step.error)
        assert step.raw.startswith("[Thought]: ")
        assert step.usage.prompt_tokens > 0 and step.usage.completion_tokens > 0
        if step.tool is not None:
            assert step.tool in {t.name for t in tools}
    # under the grammar the last step can only finish, so a run always ends with an answer
    assert trace.status == "finished" and result.answer


def test_readme_main_job_runs_offline_end_to_end(tmp_path: Path) -> None:
    """`hammr ask` on a bundled example with no configuration at all."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HAMMR_") and k != "OPENAI_API_KEY"
    }
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    trace = tmp_path / "trace.json"
    question = json.loads((EXAMPLES / "plate.json").read_text())["question"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hammr.cli",
            "ask",
            str(EXAMPLES / "plate.png"),
            question,
            "--max-steps",
            "3",
            "--trace",
            str(trace),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "no answer printed"
    assert proc.stderr.strip() == "", proc.stderr  # llama.cpp's log stays quiet
    saved = json.loads(trace.read_text())
    assert saved["model"].startswith("embedded:SmolLM2")
    assert (tmp_path / "cache" / "hammr" / "llm.sqlite").is_file()
