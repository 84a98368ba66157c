"""AVIS's prompts and worked examples, written for hammr (the paper's structure, our text).

Four prompts: the question decomposition, the planner (candidate descriptions plus worked
examples for the candidates only, or the descriptions alone for the no-graph baseline as
the paper ran it), the object selector and the reasoner (one prompt for
outputs of visual actions, one for knowledge actions). Each ends where the model writes,
in a fixed line format that :mod:`hammr.avis.replies` parses and, where the backend takes a
grammar, constrains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hammr.avis.graph import ActionSpec, Phase

DECOMPOSE = """\
Split a question about an image into two parts. "Visual" asks what the image shows that the
question depends on. "Knowledge" asks the rest, with # standing for the answer to the visual
part; write just # when the visual answer is already the answer.

Question: what year was this bridge opened?
Visual: which bridge is this?
Knowledge: what year was # opened?

Question: what is the natural habitat of this animal?
Visual: which animal is shown?
Knowledge: natural habitat of #?

Question: what breed is the dog?
Visual: what breed is the dog?
Knowledge: #

Question: who designed the car on the left?
Visual: which car model is on the left?
Knowledge: who designed #?

Question: how many people live in the city where this photo was taken?
Visual: which city is shown?
Knowledge: population of #?

Question: what colour is the umbrella?
Visual: what colour is the umbrella?
Knowledge: #

Question: {question}
"""

PLANNER = """\
Your goal is to answer this query about an image: {query}
Choose the next action. The actions you can take now:
{actions}

Examples of when each action fits:
{examples}

Query: {query}
Context:
{context}
Write the action's name and the query to send it, as in the examples.
"""

PLANNER_BARE = """\
Your goal is to answer this query about an image: {query}
Choose the next action. The actions you can take now:
{actions}

Query: {query}
Context:
{context}
Write "Action:" with one action's name, then "Query:" with the query to send it.
"""
"""The planner of the paper's no-graph baseline: the candidates' task descriptions and no
worked example (``avis.autonomous_examples = false``)."""

OBJECT_SELECT = """\
Pick the object that best helps answer the query. Explain in one sentence, then write
"Object: #ID".

Query: which river is this?
Object #0 (whole image): a river with boats under a stone bridge
Object #1 (center): a stone bridge with arches
Object #2 (lower left): a red boat
Why: the bridge is the landmark most likely to name the river.
Object: #1

Query: what is the name of this flower?
Object #0 (whole image): a garden with a path and flowers
Object #1 (upper right): a pink flower with many petals
Why: the query is about the flower, which object 1 shows up close.
Object: #1

Query: {query}
{objects}
"""

REASON_VISUAL = """\
Judge whether what an image tool returned helps answer a query about the image. Titles of
matching images that agree with each other, and high scores, are strong evidence; unrelated
titles are not informative. Give one sentence of reasoning, then a verdict: "not
informative" (nothing useful), "informative" (useful; give the answer it points to if
there is one) or "answerable" (it answers the query), then "Answer:" with a short answer
unless not informative. Never answer from outside the output.

Query: which landmark is this?
Output: Retrievals: [high confidence: Sydney Opera House at dusk (score=93.1), Opera House
sails close-up (score=88.0)]
Why: both matching images name the Sydney Opera House.
Verdict: answerable
Answer: Sydney Opera House

Query: what kind of bird is this?
Output: Retrievals: [garden hose reel (score=41.2), blue paint swatch (score=39.9)]
Why: the matches are about unrelated objects.
Verdict: not informative

Query: which car model is on the left?
Output: Object #1 (left): a small red car; entities: Fiat 500 (score=71.0)
Why: the object is recognised as a Fiat 500, with a fair score.
Verdict: informative
Answer: Fiat 500

Query: {query}
Output: {output}
"""

REASON_KNOWLEDGE = """\
Judge whether search results or an answer from a text model answer a query. Prefer the
entry most relevant to the query; a fact repeated by several entries is more likely right.
Give one sentence of reasoning, then a verdict: "not informative" (irrelevant), "informative"
(relevant but not the answer) or "answerable" (it answers the query), then "Answer:" with a
short answer unless not informative. Never answer from outside the output.

Query: what year was Tower Bridge opened?
Output: Tower Bridge: Tower Bridge is a bridge in London, opened in 1894 after eight years
of construction.
Why: the entry about Tower Bridge gives its opening year.
Verdict: answerable
Answer: 1894

Query: natural habitat of the snow leopard?
Output: Leopard print fashion: a pattern of dark rosettes used in clothing.
Why: the result is about fashion, not the animal.
Verdict: not informative

Query: {query}
Output: {output}
"""

LLM_QA = """\
Answer the question in a few words, using the notes when they help.

Notes:
{notes}

Question: {query}
Answer:"""

BEST_EVIDENCE = """\
Answer a question about an image in a few words from the evidence gathered so far. If the
evidence does not settle it, give your best guess.

Evidence:
{evidence}

Question: {question}
Answer:"""


class ShownExample(Protocol):
    """A worked example as the planner's prompt shows it."""

    def text(self) -> str: ...


@dataclass(frozen=True)
class VerbatimExample:
    """A worked example given as its whole text (``avis.prompt_file``'s, shown as it is)."""

    body: str

    def text(self) -> str:
        return self.body.strip()


@dataclass(frozen=True)
class PlannerExample:
    query: str
    context: str
    action: str
    action_query: str

    def text(self) -> str:
        return (
            f"Query: {self.query}\nContext:\n{self.context}\n"
            f"Action: {self.action}\nQuery: {self.action_query}"
        )


PLANNER_EXAMPLES: dict[str, tuple[PlannerExample, ...]] = {
    "object_select": (
        PlannerExample(
            "which tower is this?",
            "Object #0 (whole image): a city street with a tall tower behind trees\n"
            "Object #1 (upper center): a tall stone tower with a clock",
            "object_select",
            "which tower is this?",
        ),
        PlannerExample(
            "what is the name of this fish?",
            "Object #0 (whole image): a man on a boat holding a large fish",
            "object_select",
            "what is the name of this fish?",
        ),
    ),
    "identical_image_search": (
        PlannerExample(
            "which castle is this?",
            "Object #0 (whole image): a white castle on a hill above a forest",
            "identical_image_search",
            "which castle is this?",
        ),
        PlannerExample(
            "what is the name of this painting?",
            "Object #0 (whole image): a painting of a woman with a pearl earring",
            "identical_image_search",
            "what is the name of this painting?",
        ),
    ),
    "image_search": (
        PlannerExample(
            "which species of beetle is this?",
            "Object #1 (center): a shiny green beetle on a leaf",
            "image_search",
            "which species of beetle is this?",
        ),
        PlannerExample(
            "what model is this aircraft?",
            "Object #1 (center): a grey jet on a runway; entities: Jet aircraft (score=40.2)",
            "image_search",
            "what model is this aircraft?",
        ),
    ),
    "vqa": (
        PlannerExample(
            "what is the man holding?",
            "Object #0 (whole image): a man standing on a beach",
            "vqa",
            "what is the man holding?",
        ),
        PlannerExample(
            "what colour is the car?",
            "Object #0 (whole image): a car parked next to a house",
            "vqa",
            "what colour is the car?",
        ),
    ),
    "web_search": (
        PlannerExample(
            "what year was the Eiffel Tower completed?",
            "the landmark was found to be the Eiffel Tower",
            "web_search",
            "Eiffel Tower completed year",
        ),
        PlannerExample(
            "how tall does the giant sequoia grow?",
            "the tree was found to be a giant sequoia",
            "web_search",
            "giant sequoia height",
        ),
    ),
    "llm_qa": (
        PlannerExample(
            "what do pandas mostly eat?",
            "the animal was found to be a giant panda",
            "llm_qa",
            "what do giant pandas mostly eat?",
        ),
        PlannerExample(
            "which continent is Kenya in?",
            "search result: Kenya is a country in East Africa",
            "llm_qa",
            "which continent is Kenya in?",
        ),
    ),
}
"""Two worked examples per built-in action; an action without examples (a custom one) is
shown by its description alone."""


def decompose_prompt(question: str) -> str:
    return DECOMPOSE.format(question=question.strip())


def planner_prompt(
    query: str,
    context: str,
    candidates: Sequence[ActionSpec],
    examples: Mapping[str, Sequence[ShownExample]] | None = PLANNER_EXAMPLES,
) -> str:
    """The planner's prompt: only the candidates' descriptions and examples are shown;
    ``examples=None``: the descriptions alone (the paper's no-graph baseline)."""
    actions = "\n".join(f"- {a.name}: {a.description}" for a in candidates)
    if examples is None:
        return PLANNER_BARE.format(query=query, actions=actions, context=context or "(nothing yet)")
    shown = [e.text() for a in candidates for e in examples.get(a.name, ())]
    return PLANNER.format(
        query=query,
        actions=actions,
        examples="\n\n".join(shown) if shown else "(none)",
        context=context or "(nothing yet)",
    )


def object_select_prompt(query: str, objects: str) -> str:
    return OBJECT_SELECT.format(query=query, objects=objects)


def reasoner_prompt(phase: Phase, query: str, output: str) -> str:
    template = REASON_VISUAL if phase == "visual" else REASON_KNOWLEDGE
    return template.format(query=query, output=output)


def llm_qa_prompt(query: str, notes: str) -> str:
    return LLM_QA.format(query=query, notes=notes or "(none)")


def best_evidence_prompt(question: str, evidence: str) -> str:
    return BEST_EVIDENCE.format(question=question, evidence=evidence or "(none)")
