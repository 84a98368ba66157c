"""``avis.prompts = "paper"``: AVIS's reasoner in the paper's reply format (think, then
"Answer is ..." or "cannot be answered"), read as the paper's loop (its Listing 7) reads it,
asked in free text; and ``avis.prompt_file``, the published texts a user supplies, used
verbatim. Replayed with scripted models (``tests/avis_policy.py``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from PIL import Image as PILImage

from avis_policy import AvisPolicy, offered, plan
from hammr.avis.paper_prompts import REASON_PAPER_KNOWLEDGE, parse_paper_judgement
from hammr.avis.system import AvisSystem
from hammr.config import ConfigError, load_config
from hammr.experiments.spec import ExperimentError, parse_experiment
from hammr.experiments.validate import validate
from hammr.systems import build_system
from hammr.tools.base import ToolContext
from hammr.values import Image

IMAGE = Image(PILImage.new("RGB", (90, 60), "white"))


@pytest.mark.parametrize(
    ("reply", "verdict", "answer"),
    [
        (
            "yes, answerable. The query asks about the bridge. From the search results the most "
            "relevant entry names its style. Therefore, the predicted answer is Ottoman "
            "architecture.",
            "answerable",
            "Ottoman architecture",
        ),
        ("not informative", "not_informative", None),
        (
            "Think: nothing here names the place.\nTherefore, given the provided information, "
            "this query cannot be answered.",
            "not_informative",
            None,
        ),
        (
            "Think: object 1 shows a stone tower.\nAnswer is: Tower of London",
            "answerable",
            "Tower of London",
        ),
        ("yes, informative. The object is a castle; its name is not given.", "informative", None),
        (
            "yes, informative. It seems a bridge; the predicted answer is a bridge.",
            "informative",
            "a bridge",
        ),
        ("The results mention several museums.", "informative", None),
    ],
)
def test_paper_replies_are_read_as_the_papers_loop_reads_them(
    reply: str, verdict: str, answer: str | None
) -> None:
    judgement = parse_paper_judgement(reply)
    assert (judgement.verdict, judgement.answer) == (verdict, answer)
    if reply.startswith("Think:"):
        assert judgement.reason == reply.split("\n")[0].removeprefix("Think: ")


def config_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "hammr.toml"
    path.write_text('[avis]\nprompts = "paper"\n' + extra)
    return path


async def run_once(tmp_path: Path, system_name: str, cfg: Path, reason: str) -> AvisPolicy:
    system, _ = build_system(load_config(cfg, env={}), system_name)
    assert isinstance(system, AvisSystem)
    policy = AvisPolicy(
        {
            "decompose": ["Visual: what colour is it?\nKnowledge: #"],
            "plan": [plan("vqa", "what colour is it?"), plan("llm_qa", "what colour is it?")],
            "llm_qa": ["white"],
            reason: ["Think: the notes say white.\nyes, answerable. Answer is white."],
        }
    )
    llm = policy.llm(grammar=True)  # a backend that takes a grammar: the paper asks without
    result = await system.run("What colour?", {"image": IMAGE}, ctx=ToolContext(llm=llm))
    assert result.answer == "white"
    return policy


async def test_scripted_avis_asks_the_paper_reasoner_in_free_text_and_reads_its_answer(
    tmp_path: Path,
) -> None:
    policy = await run_once(tmp_path, "avis-autonomous", config_file(tmp_path), "reason_paper")
    (prompt,) = policy.prompts("reason_paper")
    assert prompt.startswith(REASON_PAPER_KNOWLEDGE.strip())
    assert prompt.rstrip().endswith("Query: what colour is it?\nKnowledge: [\nLLM answer: white\n]")
    reasoner = [g for p, g in policy.requests if p.startswith("Think step by step")]
    assert reasoner == [None]  # free text
    assert all(g for p, g in policy.requests if p.startswith("Your goal"))  # the planner's


async def test_scripted_prompt_file_texts_are_used_verbatim(tmp_path: Path) -> None:
    texts = tmp_path / "published.toml"
    texts.write_text(
        "reason_knowledge = '''PUBLISHED REASONER (knowledge): say \"Answer is\".'''\n"
        "[planner_examples]\n"
        "llm_qa = ['''Query: what do koalas eat?\nContext: [\n]\nAction: llm_qa''']\n"
        "[descriptions]\n"
        "llm_qa = 'PUBLISHED DESCRIPTION of llm_qa'\n"
    )
    cfg = config_file(tmp_path, f"prompt_file = '{texts}'\n")
    policy = await run_once(tmp_path, "avis-autonomous", cfg, "reason_file")
    (prompt,) = policy.prompts("reason_file")
    assert prompt.startswith('PUBLISHED REASONER (knowledge): say "Answer is".\n\nQuery: ')
    planner = policy.prompts("plan")[0]
    assert "- llm_qa: PUBLISHED DESCRIPTION of llm_qa" in planner
    assert "Query: what do koalas eat?\nContext: [\n]\nAction: llm_qa" in planner
    assert "llm_qa" in offered(planner)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "does not exist"),
        ("reason_visual = 3\n", "reason_visual must be a non-empty text"),
        ("planner = 'x'\n", "unknown key 'planner'"),
        ("[planner_examples]\nvqa = 'one'\n", "planner_examples.vqa must be a list of texts"),
        ("reason_visual = \n", "is not TOML"),
    ],
)
def test_a_bad_prompt_file_is_one_line(tmp_path: Path, text: str | None, message: str) -> None:
    path = tmp_path / "published.toml"
    if text is not None:
        path.write_text(text)
    cfg = config_file(tmp_path, f"prompt_file = '{path}'\n")
    with pytest.raises(ConfigError, match=r"avis\.prompt_file") as e:
        build_system(load_config(cfg, env={}), "avis")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_experiment_setting_paper_prompts_for_systems_without_them_is_refused() -> None:
    doc = """
name = "x"
title = "t"
paper = "hammr"
source = "s"
[settings]
"avis.prompts" = "paper"
[data]
suite = "demo"
[[run]]
name = "hammr"
system = "hammr"
[[table]]
name = "t"
title = "t"
columns = [{ label = "All", cell = "overall" }]
[[table.row]]
label = "hammr"
run = "hammr"
paper = { "All" = 1.0 }
"""
    with pytest.raises(ExperimentError, match=r"avis\.prompts = 'paper' selects the paper's"):
        validate(parse_experiment(tomllib.loads(doc), "x.toml"))
