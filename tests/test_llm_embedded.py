"""Real-model tests of EmbeddedLLM (SmolLM2-135M via xllamacpp); skipped when either is missing."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import needs_embedded_model
from hammr.backends.llm.base import LLM, LLMError, LLMRequest, Message
from hammr.backends.llm.embedded import EmbeddedLLM, default_model_path
from patience import HANG_S

pytestmark = needs_embedded_model

ACT = 'root ::= "[Act]: " ("Foo" | "Bar") "(" [a-z]{1,6} ")"'
ACT_RE = re.compile(r"\[Act\]: (Foo|Bar)\([a-z]{1,6}\)")


@pytest.fixture(scope="module")
def llm() -> Iterator[EmbeddedLLM]:
    model = EmbeddedLLM(n_ctx=2048)
    model.load()
    yield model


@pytest.fixture(scope="module")
def completion_llm(llm: EmbeddedLLM) -> EmbeddedLLM:
    # same (path, n_ctx, threads) -> shares the already loaded server
    return EmbeddedLLM(n_ctx=2048, mode="completion")


def req(prompt: str, **kwargs: object) -> LLMRequest:
    return LLMRequest(messages=(Message("user", prompt),), **kwargs)  # type: ignore[arg-type]


def test_default_model_path_is_gguf() -> None:
    path = default_model_path()
    assert isinstance(path, Path) and path.suffix == ".gguf" and path.is_file()


async def test_plain_chat_reply(llm: EmbeddedLLM) -> None:
    assert isinstance(llm, LLM)
    assert llm.grammar_support == "gbnf"
    r = await llm.complete(req("What is the capital of France?", max_tokens=12))
    assert r.text.strip()
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 12
    assert r.model == llm.name and r.finish_reason in ("stop", "length")


@pytest.mark.parametrize(
    "prompt",
    [
        "Pick a tool to count the apples.",
        "Hello!",
        "Which action finds the red car in the image?",
        "Write a long poem about the sea.",
        "Answer in JSON: what is 2+2?",
    ],
)
async def test_grammar_constrains_output(llm: EmbeddedLLM, prompt: str) -> None:
    r = await llm.complete(req(prompt, max_tokens=16, grammar=ACT))
    assert ACT_RE.fullmatch(r.text), r.text


async def test_stop_sequence(llm: EmbeddedLLM) -> None:
    grammar = 'root ::= "alpha beta gamma delta"'
    r = await llm.complete(req("Say it.", max_tokens=16, grammar=grammar, stop=("gamma",)))
    assert r.text == "alpha beta "
    assert r.finish_reason == "stop"


async def test_completion_mode(completion_llm: EmbeddedLLM) -> None:
    r = await completion_llm.complete(req("One, two, three, four,", max_tokens=6))
    assert r.text
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    g = await completion_llm.complete(req("Act now.", max_tokens=16, grammar=ACT))
    assert ACT_RE.fullmatch(g.text), g.text


async def test_bad_grammar_raises_llm_error(llm: EmbeddedLLM) -> None:
    with pytest.raises(LLMError, match="grammar"):
        await llm.complete(req("hi", max_tokens=4, grammar="root ::= foo("))
    # the model is still usable afterwards
    r = await llm.complete(req("hi", max_tokens=4))
    assert r.usage.completion_tokens > 0


async def test_prompt_longer_than_context(llm: EmbeddedLLM) -> None:
    with pytest.raises(LLMError, match="n_ctx"):
        await llm.complete(req("word " * 3000, max_tokens=4))


async def test_concurrent_calls(llm: EmbeddedLLM) -> None:
    a, b = await asyncio.gather(
        llm.complete(req("Name a fruit.", max_tokens=6)),
        llm.complete(req("Name a colour.", max_tokens=16, grammar=ACT.replace("{1,6}", "{1,3}"))),
    )
    assert a.text and b.text
    assert re.fullmatch(r"\[Act\]: (Foo|Bar)\([a-z]{1,3}\)", b.text), b.text


async def test_seeded_sampling_is_repeatable(llm: EmbeddedLLM) -> None:
    r1 = await llm.complete(req("Tell me a word.", max_tokens=6, temperature=1.0, seed=7))
    r2 = await llm.complete(req("Tell me a word.", max_tokens=6, temperature=1.0, seed=7))
    assert r1.text == r2.text


async def test_images_become_placeholders(llm: EmbeddedLLM) -> None:
    from PIL import Image as PILImage

    from hammr.backends.llm.base import ImagePart
    from hammr.values import Image

    image = Image(PILImage.new("RGB", (4, 4)))
    msg = Message("user", ("Look: ", ImagePart(image), " what is it?"))
    r = await llm.complete(LLMRequest(messages=(msg,), max_tokens=4))
    assert r.usage.prompt_tokens > 0


def test_missing_model_file_is_llm_error(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="not found"):
        EmbeddedLLM(tmp_path / "nope.gguf").load()
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(LLMError, match="not a GGUF"):
        EmbeddedLLM(bogus).load()


def test_quiet_by_default(tmp_path: Path) -> None:
    """A fresh process loading the model and hitting a bad grammar prints nothing to stderr."""
    code = (
        "from hammr.backends.llm.embedded import EmbeddedLLM\n"
        "from hammr.backends.llm.base import LLMError, LLMRequest, Message\n"
        "m = EmbeddedLLM(n_ctx=512)\n"
        "r = m.complete_blocking(LLMRequest((Message('user', 'hi'),), max_tokens=2))\n"
        "try:\n"
        "    m.complete_blocking(LLMRequest((Message('user', 'hi'),), grammar='root ::= x('))\n"
        "except LLMError as e:\n"
        "    print('ERR', 'expecting' in str(e))\n"
        "print('OK', r.usage.completion_tokens)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ERR", "True", "OK", "2"]
    assert proc.stderr == ""
