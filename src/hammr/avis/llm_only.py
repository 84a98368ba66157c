"""``llm-only``: AVIS's text-only baseline (its Table 5, the language model answering from
the question alone, few-shot).

The configured model gets a handful of worked question-answer pairs (the bundled
``llm_only_examples.toml``) and the question, and answers in one call. It never sees the
image: nothing is attached (even when the model is a VLM), described or named as an input.
The baseline measures how much of a benchmark the wording of a question and the model's own
knowledge answer, the floor that AVIS's tools and search must rise above. The trace still
records the inputs the question came with, as every system's does.

The run is the ``cot`` system's (:class:`hammr.muse.system.CoTSystem`) with other
instructions and a prompt without inputs, so the reply is read the same way (the last
``Answer:`` line; a reply without one is flagged and its last line taken).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from hammr.backends.llm.base import LLM, Message
from hammr.muse.system import COT_CHOICE_RULE, CoTSystem, options_of
from hammr.values import Value

if TYPE_CHECKING:
    from hammr.systems import Workbench

NAME = "llm-only"
AGENT = "LLMOnly"
EXAMPLES_FILE = "llm_only_examples.toml"
MAX_TOKENS = 64
"""A short answer needs few tokens; a reply running past this is cut (and still parsed)."""

INSTRUCTIONS = """\
You answer questions about an image that you are not shown. Use only the wording of the
question and what you know, and give the most likely answer in a few words (a guess, never
a refusal). Reply with one line of the form
Answer: the short answer"""


@dataclass(frozen=True)
class QAExample:
    """One worked example: a question and its short answer."""

    question: str
    answer: str


def load_examples(text: str | None = None, source: str = EXAMPLES_FILE) -> list[QAExample]:
    """The examples of ``text`` (TOML with ``[[example]]`` tables), by default the bundled
    file's; ValueError naming ``source`` for a malformed one."""
    if text is None:
        text = resources.files("hammr.avis").joinpath(EXAMPLES_FILE).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{source}: not valid TOML ({e})") from e
    entries = data.get("example", [])
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{source}: no [[example]] tables")
    examples = []
    for i, entry in enumerate(entries, 1):
        question = entry.get("question") if isinstance(entry, dict) else None
        answer = entry.get("answer") if isinstance(entry, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{source}: example {i} has no question")
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError(f"{source}: example {i} has no answer")
        examples.append(QAExample(" ".join(question.split()), " ".join(answer.split())))
    return examples


def instructions_with(examples: Sequence[QAExample]) -> str:
    """The system message: the task, then the worked examples in the reply's own form."""
    shots = "\n\n".join(f"Question: {e.question}\nAnswer: {e.answer}" for e in examples)
    return f"{INSTRUCTIONS}\n\nExamples:\n\n{shots}"


class LLMOnlySystem(CoTSystem):
    """One model call over the question alone (see the module docstring)."""

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        examples: Sequence[QAExample] | None = None,
        max_tokens: int = MAX_TOKENS,
        temperature: float = 0.0,
    ) -> None:
        self.examples = list(examples) if examples is not None else load_examples()
        super().__init__(
            llm,
            max_tokens=max_tokens,
            temperature=temperature,
            name=AGENT,
            instructions=instructions_with(self.examples),
            stop=("\nQuestion:",),
        )

    async def messages(
        self, model: LLM, question: str, variables: Mapping[str, Value]
    ) -> tuple[Message, ...]:
        """The instructions and the question; ``variables`` (the image) are never shown."""
        instructions = self.instructions
        if options_of(question):
            instructions = f"{instructions}\n{COT_CHOICE_RULE}"
        return (Message("system", instructions), Message("user", f"Question: {question}"))


def llm_only_system(bench: Workbench) -> LLMOnlySystem:
    """``llm-only``: the configured model with the bundled examples."""
    cfg = bench.config
    return LLMOnlySystem(
        bench.agents.llm,
        max_tokens=int(cfg.get("llm.max_tokens", MAX_TOKENS)),
        temperature=float(cfg.get("llm.temperature", 0.0)),
    )
