"""AVIS's reasoner as the paper ran it (``avis.prompts = "paper"``), and the published prompt
texts from a file the user supplies (``avis.prompt_file``).

The paper publishes its prompts (its appendix, Listings 1-6) and the loop that reads the
reasoner's replies (Listing 7). hammr ships no text copied from a paper, so the ``paper``
setting keeps the paper's *reply format and reading*, in our own words:

* the reasoner thinks step by step about the most relevant entries, then writes "Answer is"
  and a short answer, or says the query "cannot be answered" from the output;
* a reply is read as Listing 7's loop reads it: "not informative" (or "cannot be answered")
  marks the action tried; a reply holding "answer is" gives the answer (answerable); any
  other reply is informative, its text the context of the next state. A "Think:" line, where
  there is one, is the reason kept in the trace. The replies are free text (no grammar or
  schema), as the paper's calls to its model were.

For the published words themselves, put them in a TOML file and name it with
``avis.prompt_file`` (read only under ``avis.prompts = "paper"``)::

    reason_visual = '''...the text of Listing 5, up to where the query goes...'''
    reason_knowledge = '''...Listing 6...'''
    [planner_examples]        # Listing 2: per action, the worked examples, shown verbatim
    vqa = ["Query: ...\\nContext: [...]\\nAction: vqa", ...]
    [descriptions]            # Listing 1's task instructions, per action
    vqa = "..."

Each prompt then ends with the query and the output, as the listings' code appends them
(``Query: ...`` then ``Knowledge: [...]``); a key the file leaves out keeps ours.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hammr.avis.graph import Phase
from hammr.avis.replies import Judgement

PROMPT_STYLES = ("hammr", "paper")

REASON_PAPER_VISUAL = """\
Think step by step. You are given a "Query" about an image and what an image tool returned
for it: matching images with their titles and scores, or objects with what was recognised
in them. First say whether the output helps: "not informative" when it does not, "yes,
informative" when it helps without settling the query, "yes, answerable" when it settles it.
Then explain which entries matter most (a title that recurs, a high score, is stronger), and
end with "Answer is" and a short answer. If the output cannot tell, say "cannot be answered".
Use nothing but the output.
"""

REASON_PAPER_KNOWLEDGE = """\
Think step by step. You are given a "Query" and the "Knowledge" a search returned for it.
First say whether the knowledge helps: "not informative" when it does not, "yes,
informative" when it helps without settling the query, "yes, answerable" when it settles it.
Then name the most relevant entry (a fact that several entries repeat is more likely right),
and end with "Answer is" and a short answer. If the knowledge is irrelevant or you are
unsure, say "cannot be answered". Use nothing but the knowledge.
"""


class PromptFileError(ValueError):
    """An ``avis.prompt_file`` that cannot be used: one line naming the file and the key."""


@dataclass(frozen=True)
class PaperPrompts:
    """The paper-format prompt texts: ours, or the published ones from ``avis.prompt_file``."""

    reason_visual: str = REASON_PAPER_VISUAL
    reason_knowledge: str = REASON_PAPER_KNOWLEDGE
    planner_examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per action, worked examples shown verbatim (empty: ours)."""
    descriptions: Mapping[str, str] = field(default_factory=dict)
    """Per action, its task description (empty: the graph's)."""
    source: str = "hammr's words, the paper's format"

    def reasoner_prompt(self, phase: Phase, query: str, output: str) -> str:
        head = self.reason_visual if phase == "visual" else self.reason_knowledge
        label = "Output" if phase == "visual" else "Knowledge"
        return f"{head.rstrip()}\n\nQuery: {query}\n{label}: [\n{output}\n]\n"


def read_prompt_file(path: Path) -> PaperPrompts:
    """The published texts in ``path`` (see the module docstring); PromptFileError, one line,
    when the file cannot be read or a key holds the wrong kind of value."""
    from hammr.input_file import input_problem, read_input_text

    problem = input_problem(path)
    if problem is not None:
        raise PromptFileError(f"avis.prompt_file {path} {problem}")
    try:
        doc = tomllib.loads(read_input_text(path))
    except OSError as e:
        raise PromptFileError(f"avis.prompt_file {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as e:
        raise PromptFileError(f"avis.prompt_file {path} is not TOML: {e}") from None
    known = {"reason_visual", "reason_knowledge", "planner_examples", "descriptions"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise PromptFileError(
            f"avis.prompt_file {path}: unknown key {unknown[0]!r} (it may hold "
            f"{', '.join(sorted(known))})"
        )
    texts: dict[str, str] = {}
    for key in ("reason_visual", "reason_knowledge"):
        if key in doc:
            value = doc[key]
            if not isinstance(value, str) or not value.strip():
                raise PromptFileError(f"avis.prompt_file {path}: {key} must be a non-empty text")
            texts[key] = value
    examples: dict[str, tuple[str, ...]] = {}
    for action, items in _table(doc, "planner_examples", path).items():
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise PromptFileError(
                f"avis.prompt_file {path}: planner_examples.{action} must be a list of texts"
            )
        examples[action] = tuple(items)
    descriptions: dict[str, str] = {}
    for action, text in _table(doc, "descriptions", path).items():
        if not isinstance(text, str):
            raise PromptFileError(f"avis.prompt_file {path}: descriptions.{action} must be a text")
        descriptions[action] = text
    return PaperPrompts(
        texts.get("reason_visual", REASON_PAPER_VISUAL),
        texts.get("reason_knowledge", REASON_PAPER_KNOWLEDGE),
        examples,
        descriptions,
        f"the texts of {path}",
    )


def _table(doc: Mapping[str, object], key: str, path: Path) -> Mapping[str, object]:
    value = doc.get(key, {})
    if not isinstance(value, Mapping):
        raise PromptFileError(f"avis.prompt_file {path}: {key} must be a table")
    return value


_ANSWER = re.compile(r"answer is\s*[:\-]?\s*(.+)", re.IGNORECASE)
_THINK = re.compile(r"(?im)^\s*think\s*:\s*(.+)$")


def parse_paper_judgement(text: str) -> Judgement:
    """A paper-format reply read as the paper's loop reads it (see the module docstring)."""
    low = text.lower()
    think = _THINK.findall(text)
    reason = think[-1].strip() if think else " ".join(text.split())[:300]
    if "not informative" in low or "cannot be answered" in low:
        return Judgement("not_informative", None, reason)
    found = _ANSWER.findall(text)
    if found:
        answer = found[-1].strip().splitlines()[0].strip().rstrip(".").strip(" \"'")
        if answer:
            informative = "yes, informative" in low and "answerable" not in low
            return Judgement("informative" if informative else "answerable", answer, reason)
    return Judgement("informative", None, reason)


__all__ = [
    "PROMPT_STYLES",
    "REASON_PAPER_KNOWLEDGE",
    "REASON_PAPER_VISUAL",
    "PaperPrompts",
    "PromptFileError",
    "parse_paper_judgement",
    "read_prompt_file",
]
