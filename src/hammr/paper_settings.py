"""Where our everyday defaults differ from what a paper ran, setting by setting.

hammr keeps better defaults for everyday use (the nearest-neighbour router, the step grammar,
VQA for every specialist when a VQA backend exists, ...); the papers' experiments ran
otherwise. Each such setting is listed here once, with the value each paper ran, so that
``hammr config show`` can say of a configuration which of the two it uses, and every
experiment report can say the same of every run (from the run's stored configuration).

A paper value may depend on the table: HAMMR withholds VQA in its Tables 2-3 and gives it
to every specialist in its Table 5; :attr:`PaperSetting.value` is then the value of most of
its tables, and :attr:`PaperSetting.note` says which tables differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PaperSetting:
    """One setting on which a paper's experiments and our default differ."""

    key: str
    """The dotted configuration key (``hammr config show`` lists them all)."""
    paper: str
    """Which paper: hammr, avis, mulprog or muse."""
    value: Any
    """What the paper ran."""
    why: str
    """What the paper's value means, in a few words."""
    note: str = ""
    """Tables that ran another value, if any."""


PAPER_SETTINGS: tuple[PaperSetting, ...] = (
    PaperSetting(
        "agent.router",
        "hammr",
        "llm",
        "the dispatcher agent (an LLM) picks the specialist",
    ),
    PaperSetting(
        "llm.grammar",
        "hammr",
        "off",
        "no constrained decoding: a step may call a tool that does not exist",
    ),
    PaperSetting(
        "agent.setting",
        "hammr",
        "tools_only",
        "VQA withheld from the GQA, TallyQA and TextVQA specialists",
        note="Table 5 and the workshop's Table 1 ran with_vqa",
    ),
    PaperSetting(
        "agent.unknown_tool",
        "hammr",
        "end",
        "a step calling a tool that does not exist ends the run with that error (Fig. C.5)",
    ),
    PaperSetting(
        "agent.loop_guard",
        "hammr",
        False,
        "no guard against loops: a repeated action runs again, no step is forced to finish",
    ),
    PaperSetting(
        "agent.dispatcher_offers",
        "hammr",
        "all",
        "the dispatcher is offered every specialist, whatever the question's inputs",
    ),
    PaperSetting(
        "avis.autonomous_examples",
        "avis",
        False,
        "the no-graph baseline's planner sees task descriptions only, no worked examples",
    ),
    PaperSetting(
        "avis.prompts",
        "avis",
        "paper",
        "the reasoner thinks step by step and writes 'Answer is ...' or 'cannot be answered', "
        "read as its loop reads it (Listings 5-7; in hammr's words unless avis.prompt_file "
        "holds the published texts)",
    ),
    PaperSetting(
        "mulprog.examples",
        "mulprog",
        "all",
        "every worked example in the prompt, the same for every question (its N = 16)",
    ),
    PaperSetting(
        "mulprog.repair_rounds",
        "mulprog",
        0,
        "no repair round: a program that cannot run has no answer",
    ),
    PaperSetting(
        "llm.grammar",
        "mulprog",
        "off",
        "programs written without constrained decoding",
    ),
    PaperSetting(
        "memory.deep_search",
        "muse",
        "per_round",
        "each round's viewpoint is chosen after seeing the previous round's hits (Eqs. 5-6)",
    ),
    PaperSetting(
        "memory.policy",
        "muse",
        "every_step",
        "the bank is consulted before each action",
    ),
    PaperSetting(
        "memory.dedupe",
        "muse",
        False,
        "plain top-k by cosine similarity (its Wide Search): several hits may come from one "
        "explored task",
    ),
)
"""Every setting whose paper value differs from our default, in the order of the papers."""


def paper_settings(key: str) -> list[PaperSetting]:
    """The papers that ran ``key`` otherwise than our default (several may: llm.grammar)."""
    return [s for s in PAPER_SETTINGS if s.key == key]


def faithfulness(key: str, value: Any) -> str | None:
    """Per paper that ran ``key`` otherwise, 'as the PAPER paper ran: ...' when ``value`` is
    what it ran, else 'not as the PAPER paper ran (X: ...)', joined by '; '; None for a key
    no paper ran differently."""
    said = []
    for setting in paper_settings(key):
        if value == setting.value:
            said.append(f"as the {setting.paper} paper ran: {setting.why}")
        else:
            extra = f"; {setting.note}" if setting.note else ""
            said.append(
                f"not as the {setting.paper} paper ran ({setting.value!r}: {setting.why}{extra})"
            )
    return "; ".join(said) or None


def differences(config: Mapping[str, Any], papers: tuple[str, ...] = ()) -> list[str]:
    """One line per paper setting (of ``papers``, or of every paper) whose value in the flat
    ``config`` (dotted key -> value, as a run stores it) is not the paper's."""
    lines = []
    for s in PAPER_SETTINGS:
        if papers and s.paper not in papers:
            continue
        value = config.get(s.key)
        if value != s.value:
            lines.append(f"{s.key} = {value!r} where the {s.paper} paper ran {s.value!r} ({s.why})")
    return lines
