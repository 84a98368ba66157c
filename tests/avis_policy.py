"""A scripted policy for AVIS's model calls (tests and benchmarks): each call is told apart by
its prompt (decomposition, planner, object selector, reasoner, llm_qa, best evidence) and
answered by that kind's own script — a list handed out in order, or a function of the
prompt — so a test reads as the run it replays."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM

KINDS = {
    "decompose": "Split a question about an image",
    "plan": "Your goal is to answer this query",
    "object": "Pick the object that best helps",
    "reason": "Judge whether",
    "reason_paper": "Think step by step. You are given",
    "reason_file": "PUBLISHED REASONER",
    "llm_qa": "Answer the question in a few words",
    "evidence": "Answer a question about an image in a few words",
}

Reply = str | Callable[[str], str]


def kind_of(prompt: str) -> str:
    for kind, start in KINDS.items():
        if prompt.startswith(start):
            return kind
    raise AssertionError(f"not an AVIS prompt: {prompt[:60]!r}")


def offered(prompt: str) -> list[str]:
    """The candidate actions a planner prompt lists (its '- name: ...' lines, before the
    examples, or before the query where the prompt shows none)."""
    head = prompt.split("Examples of when each action fits:")[0].split("\nQuery: ")[0]
    return re.findall(r"^- ([a-z_]+):", head, flags=re.M)


def query_of(prompt: str) -> str:
    """The query the prompt is about (the last 'Query: ' line before the model writes)."""
    return re.findall(r"^Query: (.*)$", prompt, flags=re.M)[-1]


@dataclass
class AvisPolicy:
    scripts: dict[str, list[Reply]]
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(kind, prompt) of every call, in order."""
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    """(prompt, the grammar it was sent with) of every call, in order."""

    def __call__(self, request: LLMRequest) -> str:
        prompt = request.messages[-1].text()
        kind = kind_of(prompt)
        self.calls.append((kind, prompt))
        self.requests.append((prompt, request.grammar))
        queue = self.scripts.get(kind)
        if not queue:
            raise AssertionError(f"no scripted reply left for a {kind} call")
        reply = queue.pop(0)
        return reply(prompt) if callable(reply) else reply

    def prompts(self, kind: str) -> list[str]:
        return [p for k, p in self.calls if k == kind]

    def llm(self, *, grammar: bool = False) -> ScriptedLLM:
        return ScriptedLLM(self, grammar="gbnf" if grammar else "none")


def plan(action: str, query: str) -> str:
    return f"Action: {action}\nQuery: {query}"


def verdict(label: str, answer: str | None = None, why: str = "judged by the script") -> str:
    text = f"Why: {why}\nVerdict: {label}"
    return text + (f"\nAnswer: {answer}" if answer else "")
