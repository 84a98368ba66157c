"""How much text hammr accepts as a question, and how much reaches an embedder.

A question is embedded (by the router, the experience bank's search, the knowledge tools) and
written into every prompt, and CPU embedders cost about a second per thousand characters: a
100,000-character question took 100 s to route before anything was answered. The questions of
every dataset hammr reads are short (the longest in the bundled suites and the papers'
benchmarks is a few hundred characters, a multiple-choice prompt with its options included
well under 2,000), so hammr refuses a question longer than :data:`MAX_QUESTION_CHARS`: ``ask``,
``route`` and ``memory search`` in one line, the dataset adapters at load, naming the file and
the line. :data:`MAX_EMBED_CHARS` bounds, in every embedding backend, the text one input may
send, whatever its source.
"""

from __future__ import annotations

MAX_QUESTION_CHARS = 4_000
"""The longest question hammr accepts, in characters."""

MAX_EMBED_CHARS = 8_000
"""The most characters of one text an embedding backend embeds; the rest is cut. It is above
every question hammr accepts and every knowledge passage (at most a few hundred words), so it
only ever cuts text that did not come from either (a long stored state, a caller's own text),
and bounds what that costs: E5 models see 512 tokens at a time, a few thousand characters."""


def question_problem(question: str) -> str | None:
    """None when ``question`` can be asked, else one line saying why not (it is empty or
    longer than :data:`MAX_QUESTION_CHARS`). ``ask``, ``route`` and ``memory search`` share it."""
    if not question.strip():
        return "the question is empty"
    if len(question) > MAX_QUESTION_CHARS:
        return (
            f"the question is {len(question):,} characters long, above the limit of "
            f"{MAX_QUESTION_CHARS:,}"
        )
    return None


def clip_for_embedding(texts: list[str]) -> list[str]:
    """``texts`` with each cut to :data:`MAX_EMBED_CHARS` characters (the same list object
    when none is longer)."""
    if all(len(t) <= MAX_EMBED_CHARS for t in texts):
        return texts
    return [t[:MAX_EMBED_CHARS] for t in texts]
