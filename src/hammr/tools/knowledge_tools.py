"""Knowledge and text tools: look an entity up in the knowledge base, answer a question from
a text, split a question in two.

``WikipediaArticle`` uses the 'kb' capability. ``AnswerWithContext`` and
``DecomposeQuestion`` use the run's LLM (``ctx.llm``); ``AnswerWithContext`` also uses the
'embed' capability, when one is configured, to pick the passages of a long page that are put
in the prompt (otherwise a small BM25 scorer does).

Settings for the text tools come from ``ctx.backends["text"]`` when that holds a
:class:`TextToolSettings`, else the defaults below. Token counts are estimates: words
times 1.3 (:func:`estimate_tokens`), close enough for English with common tokenizers and
on the safe side for budgets.
"""

from __future__ import annotations

import json
import math
import re
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from hammr.backends.llm.base import LLMRequest, Message
from hammr.tools.base import BadArguments, ToolContext, ToolError, tool
from hammr.values import Entity, Page

if TYPE_CHECKING:  # numpy is imported to rank passages by embedding, not to list the tools
    import numpy as np

TOKENS_PER_WORD = 1.3


@dataclass(frozen=True)
class TextToolSettings:
    """Knobs of the text tools (put one in ``ToolContext.backends["text"]`` to change them)."""

    context_budget_tokens: int = 1200
    """The most (estimated) tokens of an AnswerWithContext prompt, instructions included."""
    passage_min_words: int = 100
    passage_max_words: int = 200
    answer_max_tokens: int = 64
    decompose_max_tokens: int = 160


DEFAULT_SETTINGS = TextToolSettings()


def settings_from_config(options: dict[str, Any]) -> TextToolSettings:
    """``[tools.text]`` in hammr.toml, e.g. ``context_budget_tokens = 2000``."""
    from hammr.backends.registry import parse_options

    schema = {f.name: int for f in fields(TextToolSettings)}
    settings = TextToolSettings(**parse_options("tools.text", options, schema))
    if settings.passage_min_words > settings.passage_max_words:
        raise ValueError("tools.text.passage_min_words is above passage_max_words")
    return settings


def settings_of(ctx: ToolContext) -> TextToolSettings:
    s = ctx.backends.get("text")
    return s if isinstance(s, TextToolSettings) else DEFAULT_SETTINGS


def estimate_tokens(text: str) -> int:
    """Approximate token count: whitespace-separated words times 1.3, rounded up."""
    return math.ceil(len(text.split()) * TOKENS_PER_WORD)


def _llm(ctx: ToolContext, tool_name: str) -> object:
    if ctx.llm is None:
        raise ToolError(f"{tool_name} needs a language model, and this run has none")
    return ctx.llm


# -- WikipediaArticle ------------------------------------------------------------------------


async def _wikipedia_article(entity: Entity | str, ctx: ToolContext) -> Page:
    """Fetch the encyclopedia article about an entity (a landmark, species, vehicle, ...).

    Args:
        entity: an entity variable or its name, e.g. "Eiffel Tower".

    Returns:
        page
    """
    if isinstance(entity, Entity):
        name = entity.name
    elif isinstance(entity, str):
        name = entity
    else:
        raise BadArguments(
            f"WikipediaArticle argument 'entity' must be an entity or a name, got {entity!r}"
        )
    name = name.strip()
    if not name:
        raise BadArguments("WikipediaArticle argument 'entity' is an empty name")
    page = await ctx.backend("kb").article(name)
    if page is None:
        raise ToolError(f"no article found for {name!r}")
    if not isinstance(page, Page):
        raise ToolError(f"the kb backend returned a {type(page).__name__}, not a page")
    return page


WikipediaArticle = tool(_wikipedia_article, name="WikipediaArticle", capability="kb")


# -- passages and ranking --------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_WORD = re.compile(r"\w+")
_STOP_WORDS = (
    "a an the of in on at to for from by with and or but is are was were be been being it "
    "its this that these those what which who whom whose when where why how do does did has "
    "have had as into than then there their they them he she his her i you we our your not no"
)
_STOP = frozenset(_STOP_WORDS.split())


def split_passages(text: str, min_words: int = 100, max_words: int = 200) -> list[str]:
    """Split text into passages of about ``min_words``..``max_words`` words.

    Paragraphs (blank-line separated) stay whole when they fit; short ones are joined with
    the next, long ones are cut between sentences (and a sentence longer than ``max_words``
    between words).
    """
    pieces: list[str] = []  # paragraph or sentence-run units, each <= max_words
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if not para:
            continue
        if len(para.split()) <= max_words:
            pieces.append(para)
            continue
        run: list[str] = []
        for sentence in _SENTENCE.split(para):
            words = sentence.split()
            while len(words) > max_words:
                if run:
                    pieces.append(" ".join(run))
                    run = []
                pieces.append(" ".join(words[:max_words]))
                words = words[max_words:]
            if run and len(run) + len(words) > max_words:
                pieces.append(" ".join(run))
                run = []
            run.extend(words)
        if run:
            pieces.append(" ".join(run))
    passages: list[str] = []
    current: list[str] = []
    for piece in pieces:
        n = len(piece.split())
        if current and (len(current) >= min_words or len(current) + n > max_words):
            passages.append(" ".join(current))
            current = []
        current.extend(piece.split())
    if current:
        passages.append(" ".join(current))
    return passages


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def lexical_scores(
    query: str, passages: list[str], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """BM25 scores of each passage for the query, the passages being the whole collection."""
    docs = [Counter(_terms(p)) for p in passages]
    if not docs:
        return []
    lengths = [sum(d.values()) for d in docs]
    avg = (sum(lengths) / len(lengths)) or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    n = len(docs)
    scores: list[float] = []
    for d, length in zip(docs, lengths, strict=True):
        s = 0.0
        for t in set(_terms(query)):
            tf = d.get(t, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        scores.append(s)
    return scores


_PASSAGE_CACHE: weakref.WeakKeyDictionary[Any, OrderedDict[str, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)
PASSAGE_CACHE_SIZE = 4096
"""Passage embeddings kept per embedder (least recently used dropped): CPU embedders take
about a second per passage, and an agent often asks several questions about one page."""


async def _embed_passages_cached(embedder: Any, texts: list[str]) -> np.ndarray:
    import numpy as np

    try:
        cache = _PASSAGE_CACHE.setdefault(embedder, OrderedDict())
    except TypeError:  # not weak-referenceable: no cache
        return np.asarray(await embedder.embed_passages(texts), dtype=np.float32)
    missing = list(dict.fromkeys(t for t in texts if t not in cache))
    if missing:
        rows = np.asarray(await embedder.embed_passages(missing), dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(missing):
            raise ToolError(f"the embed backend returned an array of shape {rows.shape}")
        for t, row in zip(missing, rows, strict=True):
            cache[t] = row
    for t in texts:
        cache.move_to_end(t)
    out = np.stack([cache[t] for t in texts])
    while len(cache) > PASSAGE_CACHE_SIZE:
        cache.popitem(last=False)
    return out


async def rank_passages(
    question: str, passages: list[str], ctx: ToolContext, title: str = ""
) -> list[float]:
    """Scores (higher is better): BM25, then the 'embed' backend re-ranks the best
    :data:`RERANK_POOL` passages when one is configured (dense embedding on CPU costs about
    0.4 s per passage, so a long article is never embedded whole)."""
    embedder = ctx.backends.get("embed")
    lexical = lexical_scores(question, passages)
    if embedder is None or len(passages) <= 1:
        return lexical
    order = sorted(range(len(passages)), key=lambda i: -lexical[i])
    pool = order[:RERANK_POOL]
    dense = await _dense_scores(question, [passages[i] for i in pool], embedder, title)
    # re-ranked passages (scores 1..3) come before the rest, which keep their BM25 order
    scores = [0.0] * len(passages)
    for rank, i in enumerate(order):
        scores[i] = -1.0 - rank
    for i, d in zip(pool, dense, strict=True):
        scores[i] = 2.0 + d
    return scores


RERANK_POOL = 12


async def _dense_scores(
    question: str, passages: list[str], embedder: Any, title: str
) -> list[float]:
    import numpy as np

    prefix = f"{title}: " if title else ""
    try:
        q = np.asarray(await embedder.embed_queries([question]), dtype=np.float32)
        p = await _embed_passages_cached(embedder, [prefix + x for x in passages])
    except ToolError:
        raise
    except Exception as e:  # a backend failure, reported to the agent in one line
        raise ToolError(f"the embed backend failed: {type(e).__name__}: {e}") from None
    if q.ndim != 2 or p.ndim != 2 or p.shape[0] != len(passages) or q.shape[1] != p.shape[1]:
        raise ToolError(f"the embed backend returned arrays of shapes {q.shape} and {p.shape}")
    return [float(x) for x in p @ q[0]]


# -- AnswerWithContext -----------------------------------------------------------------------

ANSWER_SYSTEM = (
    "You answer a question using only the text provided. Reply with the answer alone: a few "
    "words, a name, a number or a date, no explanation. If the text does not contain the "
    "answer, reply exactly: not found"
)


def _answer_prompt(question: str, context: str) -> str:
    return f"Text:\n{context}\n\nQuestion: {question}\nAnswer:"


def _fit(words: list[str], budget_tokens: int) -> str:
    return " ".join(words[: max(0, int(budget_tokens / TOKENS_PER_WORD))])


async def select_context(
    question: str, page: Page, ctx: ToolContext, budget_tokens: int
) -> tuple[str, list[int]]:
    """The text to show for ``page``: all of it when it fits ``budget_tokens``, else the
    best-ranked passages that fit, in reading order, separated by ``...`` lines.
    Returns (text, indices of the chosen passages)."""
    s = settings_of(ctx)
    header = f"{page.title}\n" if page.title else ""
    full = header + page.text.strip()
    if estimate_tokens(full) <= budget_tokens:
        return full, []
    passages = split_passages(page.text, s.passage_min_words, s.passage_max_words)
    scores = await rank_passages(question, passages, ctx, page.title)
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    left = budget_tokens - estimate_tokens(header)
    chosen: list[int] = []
    for i in order:
        cost = estimate_tokens(passages[i]) + 1  # the "..." separator
        if cost <= left:
            chosen.append(i)
            left -= cost
    if not chosen:  # not even the best passage fits: cut it
        best = passages[order[0]].split()
        return header + _fit(best, budget_tokens - estimate_tokens(header)), [order[0]]
    chosen.sort()
    return header + "\n...\n".join(passages[i] for i in chosen), chosen


async def _answer_with_context(question: str, context: Page | str, ctx: ToolContext) -> str:
    """Answer a question from a text, such as a page from WikipediaArticle.

    Args:
        question: the question, self-contained (name the entity rather than "this").
        context: a page variable or a text.

    Returns:
        the short answer, or "not found" when the text does not say
    """
    llm = _llm(ctx, "AnswerWithContext")
    if not isinstance(question, str) or not question.strip():
        raise BadArguments("AnswerWithContext argument 'question' is empty")
    if isinstance(context, str):
        page = Page(title="", text=context)
    elif isinstance(context, Page):
        page = context
    else:
        raise BadArguments(
            f"AnswerWithContext argument 'context' must be a page or a text, got {context!r}"
        )
    if not page.text.strip():
        raise ToolError("AnswerWithContext got an empty text")
    s = settings_of(ctx)
    overhead = estimate_tokens(ANSWER_SYSTEM) + estimate_tokens(_answer_prompt(question, ""))
    budget = s.context_budget_tokens - overhead
    if budget < 20:
        raise ToolError(
            f"the question leaves no room for text in the {s.context_budget_tokens}-token budget"
        )
    text, _ = await select_context(question, page, ctx, budget)
    request = LLMRequest(
        messages=(
            Message("system", ANSWER_SYSTEM),
            Message("user", _answer_prompt(question.strip(), text)),
        ),
        max_tokens=s.answer_max_tokens,
        temperature=0,
    )
    response = await llm.complete(request)  # type: ignore[attr-defined]
    answer = " ".join(str(response.text).strip().split())
    answer = re.sub(r"^(answer|a)\s*:\s*", "", answer, flags=re.I).strip()
    return answer or "not found"


AnswerWithContext = tool(_answer_with_context, name="AnswerWithContext", uses_llm=True)


# -- DecomposeQuestion -----------------------------------------------------------------------

DECOMPOSE_SYSTEM = (
    "You split a complex question into exactly two simpler questions. Answering the first "
    "must help answer the second; the second may refer to the first answer as "
    '"the answer to question 1". Reply with the two questions only, as:\n1. ...\n2. ...'
)

_NUMBERED = re.compile(r"^\s*(?:q(?:uestion)?\s*)?(\d+)\s*[.):\-]\s*(.+)$", re.I)
_BULLET = re.compile(r"^\s*[-*•]\s+(.+)$")


def _clean(q: str) -> str:
    q = q.strip().strip("\"'`").strip()
    q = re.sub(r"^\*\*(.*)\*\*$", r"\1", q).strip()
    return " ".join(q.split())


def parse_two_questions(reply: str) -> list[str] | None:
    """The first two questions in a model's reply (JSON list or object, numbered list,
    bullets, or plain lines); None when fewer than two are found."""
    text = reply.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    start = min((i for i in (text.find("["), text.find("{")) if i != -1), default=-1)
    if start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            obj = next((v for v in obj.values() if isinstance(v, list)), None)
        if isinstance(obj, list):
            items = [_clean(x) for x in obj if isinstance(x, str) and x.strip()]
            if len(items) >= 2:
                return items[:2]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    numbered = [m.group(2) for m in map(_NUMBERED.match, lines) if m]
    bullets = [m.group(1) for m in map(_BULLET.match, lines) if m]
    questions = [ln for ln in lines if ln.strip().endswith("?")]
    for candidates in (numbered, bullets, questions):
        items = [c for c in map(_clean, candidates) if c]
        if len(items) >= 2:
            return items[:2]
    return None


async def _decompose_question(question: str, ctx: ToolContext) -> list[str]:
    """Split a question that needs two steps into two simpler questions, in order.

    Args:
        question: the complex question, e.g. "How tall is the tower in the city where X was born?"

    Returns:
        a list of two questions
    """
    llm = _llm(ctx, "DecomposeQuestion")
    if not question.strip():
        raise BadArguments("DecomposeQuestion argument 'question' is empty")
    request = LLMRequest(
        messages=(
            Message("system", DECOMPOSE_SYSTEM),
            Message("user", f"Question: {question.strip()}"),
        ),
        max_tokens=settings_of(ctx).decompose_max_tokens,
        temperature=0,
    )
    response = await llm.complete(request)  # type: ignore[attr-defined]
    parts = parse_two_questions(str(response.text))
    if parts is None:
        shown = " ".join(str(response.text).split())[:200]
        raise ToolError(f"could not read two questions from the model's reply: {shown!r}")
    return parts


DecomposeQuestion = tool(_decompose_question, name="DecomposeQuestion", uses_llm=True)

KNOWLEDGE_TOOLS = (WikipediaArticle, AnswerWithContext, DecomposeQuestion)
