"""The MulProg planner: one LLM call maps a question to a whole program.

The prompt holds the module cards (from the modules' signatures and docstrings) and worked
examples (``examples.toml``: 16 questions in the style of GQA with their programs); with
``k`` and a text embedder only the k examples nearest to the question are shown (beyond the
paper: smaller prompts). Where the backend takes a grammar, the program is written line by
line under :func:`hammr.programs.grammar.line_grammar`. A program that fails validation gets
one repair round that shows the model its program and the errors. Each call's messages begin
with the previous call's, so a server's prefix cache keeps them: a line is appended to the
turn being written, and under a grammar a repair leaves the failed program where it was
written and adds a turn with the errors, after which the corrected program is written.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from hammr.backends.llm.base import LLM, LLMRequest, LLMResponse, Message
from hammr.programs.grammar import INPUT_IMAGE, MAX_LINES, line_grammar, output_kind
from hammr.toml_file import read_toml
from hammr.tools.base import Tool

INSTRUCTIONS = """\
You answer a question about an image by writing a short program. Each line calls one
module and stores its result: NAME=MODULE(param=value,...). The question's image is IMAGE.
Name boxes BOX0, BOX1, ..., cropped images IMAGE0, IMAGE1, ..., other results ANSWER0,
ANSWER1, .... Values are earlier names or quoted text. Find objects with LOC, look closer
with CROP, ask about a crop with VQA, count with COUNT, combine answers with EVAL (its
expression names earlier results in braces, e.g. "'yes' if {ANSWER0} > 0 else 'no'").
The last line is FINAL_RESULT=RESULT(var=NAME). Write only the program."""

REPAIR = """\
The program below cannot run:
{errors}

Program:
{program}

Write the corrected program for the same question, only the program."""

REPAIR_AFTER = """\
The program above cannot run:
{errors}

Write the corrected program for the same question, only the program.
Program:"""
"""The repair turn under a grammar: the failed program stays where it was written, and the
corrected one is written after this turn, a line per call."""


LINE_TOKENS = 120
"""Tokens for one line written under the grammar."""


@dataclass(frozen=True)
class ProgramExample:
    question: str
    program: str
    shape: str = ""
    answer: str = ""
    explanation: str = ""
    """With ``{BOXn}`` after each object it names (the direct baseline's form)."""
    boxes: tuple[tuple[str, tuple[float, float, float, float]], ...] = ()

    def text(self) -> str:
        return f"Question: {self.question}\nProgram:\n{self.program.strip()}"


def load_examples(path: str | Path | None = None) -> list[ProgramExample]:
    """The worked examples: the bundled ones, or a TOML file of ``[[example]]`` tables."""
    if path is None:
        data = tomllib.loads(
            resources.files("hammr.programs").joinpath("examples.toml").read_text()
        )
    else:
        data = read_toml(Path(path))
    return [
        ProgramExample(
            str(e["question"]),
            str(e["program"]),
            str(e.get("shape", "")),
            str(e.get("answer", "")),
            str(e.get("explanation", "")),
            tuple((str(k), tuple(float(x) for x in v)) for k, v in e.get("boxes", {}).items()),  # type: ignore[misc]
        )
        for e in data.get("example", [])
    ]


class ProgramPlanner:
    """Writes programs over ``modules`` (see the module docstring)."""

    def __init__(
        self,
        modules: Sequence[Tool],
        examples: Sequence[ProgramExample] | None = None,
        *,
        k: int | None = None,
        embedder: Any = None,
        grammar: bool | None = None,
        max_tokens: int = 400,
    ) -> None:
        self.modules = list(modules)
        self.examples = list(examples) if examples is not None else load_examples()
        self.k = k
        self.embedder = embedder
        self.grammar = grammar
        self.max_tokens = max_tokens
        self._matrix: np.ndarray | None = None

    async def prepare(self) -> None:
        """Embed the examples' questions now (once), when examples are chosen by similarity."""
        if self.k is not None and self.embedder is not None and self._matrix is None:
            texts = [e.question for e in self.examples]
            self._matrix = np.asarray(await self.embedder.embed_queries(texts), dtype=np.float32)

    async def examples_for(self, question: str) -> list[ProgramExample]:
        """All examples, or the k nearest to ``question`` (most similar last, nearest the
        question in the prompt)."""
        if self.k is None or self.embedder is None or self.k >= len(self.examples):
            return self.examples
        await self.prepare()
        assert self._matrix is not None
        query = np.asarray(await self.embedder.embed_queries([question]), dtype=np.float32)[0]
        norms = np.linalg.norm(self._matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        scores = self._matrix @ query / np.where(norms == 0, 1.0, norms)
        order = np.argsort(-scores, kind="stable")[: self.k]
        return [self.examples[int(i)] for i in reversed(order)]

    def system_prompt(self) -> str:
        cards = "\n".join(m.card() for m in self.modules)
        return f"{INSTRUCTIONS}\n\nModules:\n{cards}"

    def uses_grammar(self, llm: LLM) -> bool:
        return llm.grammar_support == "gbnf" and self.grammar is not False

    def request(
        self,
        question: str,
        examples: Sequence[ProgramExample],
        llm: LLM,
        repair: str = "",
        *,
        written: Sequence[str] = (),
        failed: Sequence[str] = (),
    ) -> LLMRequest:
        """The prompt for the whole program, or (under a grammar, with the lines ``written``
        so far) for its next line, constrained to the variables those lines define.
        ``repair`` is the turn asking for a repair; under a grammar it follows the ``failed``
        program's lines and the lines ``written`` follow it."""
        shots = "\n\n".join(e.text() for e in examples)
        so_far = "".join(f"\n{line}" for line in written)
        head = f"{shots}\n\nQuestion: {question}\nProgram:"
        messages = [Message("system", self.system_prompt())]
        if repair and self.uses_grammar(llm):
            messages.append(Message("user", head + "".join(f"\n{line}" for line in failed)))
            messages.append(Message("user", repair + so_far))
        else:
            messages.append(Message("user", head + so_far))
            if repair:
                messages.append(Message("user", repair))
        if not self.uses_grammar(llm):
            return LLMRequest(
                messages=tuple(messages), max_tokens=self.max_tokens, stop=("\nQuestion:", "\n\n\n")
            )
        defined = {INPUT_IMAGE: "image"}
        calls: list[str] = []
        for line in written:
            target, _, call = line.partition("=")
            defined[target] = output_kind(call.partition("(")[0])
            calls.append(call)
        # the last line allowed, or a call repeated (a weak model's loop), may only finish
        looping = len(calls) >= 2 and calls[-1] in calls[:-1]
        final_only = len(written) >= MAX_LINES - 1 or looping
        return LLMRequest(
            messages=tuple(messages),
            max_tokens=LINE_TOKENS,
            stop=("\n",),
            grammar=line_grammar(self.modules, defined, final_only=final_only),
        )

    async def write(
        self, question: str, llm: LLM, *, previous: str = "", errors: str = ""
    ) -> list[LLMResponse]:
        """The model's program for ``question`` (with ``previous`` and ``errors``: its
        repair), as the replies of the calls that wrote it: one call for the whole program,
        or, under a grammar, one call per line, each allowed only the variables defined by
        the lines before it (the prompt grows by a line, so a server's prefix cache keeps
        the rest). The program's text is the replies' texts, one per line."""
        examples = await self.examples_for(question)
        if not self.uses_grammar(llm):
            repair = REPAIR.format(errors=errors, program=previous) if previous else ""
            return [await llm.complete(self.request(question, examples, llm, repair))]
        # a repair: the failed lines stay as the last attempt wrote them, the errors follow
        failed = [line.strip() for line in previous.splitlines() if line.strip()]
        repair = REPAIR_AFTER.format(errors=errors) if previous else ""
        replies: list[LLMResponse] = []
        written: list[str] = []
        for _ in range(MAX_LINES):
            reply = await llm.complete(
                self.request(question, examples, llm, repair, written=written, failed=failed)
            )
            replies.append(reply)
            line = reply.text.strip().split("\n", 1)[0].strip()
            written.append(line)
            if not line or line.startswith("FINAL_RESULT="):
                break
        return replies
