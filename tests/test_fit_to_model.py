"""Requests that fit the model they run on: a step grammar whose longest reply fits
``max_tokens``, a prompt whose worked examples fit the context, replies the server cut or
left empty said as such, and MulProg offered only the modules that have a backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES, needs_embedded_model, needs_tesseract
from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLMRequest, LLMResponse, Message
from hammr.backends.llm.local_server import LocalLlamaServer
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import load_config
from hammr.context_fit import PromptTooLong, estimate_tokens, fit_examples
from hammr.grammar import step_grammar, thought_chars
from hammr.grammar_bounds import GrammarBoundError, longest_output_bytes, tokens_for
from hammr.programs.grammar import line_grammar
from hammr.programs.modules import modules_with
from hammr.programs.planner import load_examples
from hammr.programs.system import modules_with_backends, program_modules
from hammr.systems import build_system
from hammr.tools.library import builtin_tools
from hammr.values import Image
from real_server import real_client

# -- the longest sentence of a grammar --------------------------------------------------------


@pytest.mark.parametrize(
    ("grammar", "longest"),
    [
        ('root ::= "abc"', 3),
        ('root ::= "ab" | "abcd"', 4),
        ('root ::= "a"? "bc"', 3),
        ("root ::= [a-z]{2,5}", 5),
        ("root ::= [^x]{3}", 12),  # any character: up to 4 bytes of UTF-8 each
        ('root ::= x x\nx ::= "é" [0-9]', 6),
        ('root ::= ("a" | "bb"){0,3} "\\n"', 7),
        ('root ::= "\\"" [^"\\\\]{1,2} "\\""', 10),
        ('root ::= "a" x\nx ::= "b" | "c"*', None),
        ('root ::= "a"+', None),
        ('root ::= x\nx ::= "a" x | "b"', None),
        ("root ::= [a-z]{1,}", None),
    ],
)
def test_longest_output_of_small_grammars(grammar: str, longest: int | None) -> None:
    assert longest_output_bytes(grammar) == longest


def test_an_undefined_rule_is_an_error() -> None:
    with pytest.raises(GrammarBoundError, match="'missing'"):
        longest_output_bytes("root ::= missing")


@pytest.mark.parametrize("max_tokens", [64, 256, 1024])
def test_step_grammar_is_bounded_and_sized_by_max_tokens(max_tokens: int) -> None:
    """Every tool's step grammar has a longest reply (no `*`), and tokens_for reserves it."""
    image = Image.open(EXAMPLES / "demo" / "menu.png")
    for tool in builtin_tools():
        grammar = step_grammar([tool], {"image": image}, max_tokens=max_tokens)
        longest = longest_output_bytes(grammar)
        assert longest is not None, tool.name
        assert tokens_for(grammar, max_tokens) >= longest
        assert f"{{0,{thought_chars(max_tokens) - 1}}}" in grammar
    whole = step_grammar(builtin_tools(), {"image": image}, max_tokens=max_tokens)
    assert tokens_for(whole, max_tokens) == max(max_tokens, longest_output_bytes(whole) or 0)


def test_the_thought_shrinks_with_the_budget() -> None:
    small = step_grammar(builtin_tools(), {}, max_tokens=64)
    large = step_grammar(builtin_tools(), {}, max_tokens=1024)
    assert (longest_output_bytes(small) or 0) < (longest_output_bytes(large) or 0)


@needs_embedded_model
async def test_a_rambling_model_is_never_cut_under_the_step_grammar() -> None:
    """Sampling hot (the kind of reply that rambled past 256 tokens before), every reply
    under the step grammar ends by the grammar, not at max_tokens."""
    from hammr.backends.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM(n_ctx=4096)
    image = Image.open(EXAMPLES / "demo" / "menu.png")
    grammar = step_grammar(builtin_tools(), {"image": image}, max_tokens=64)
    prompt = (
        "Write a [Thought] of very many long numbers like 25200000000000000000000000 = "
        "25200000000000000000000000 and then an [Act] calling a tool."
    )
    for seed in range(3):
        reply = await llm.complete(
            LLMRequest(
                messages=(Message("user", prompt),),
                max_tokens=tokens_for(grammar, 64),
                temperature=1.0,
                seed=seed,
                grammar=grammar,
            )
        )
        assert reply.finish_reason == "stop", reply.text
        assert reply.text.startswith("[Thought]: ")


# -- replies the server cut or left empty ----------------------------------------------------


class CutOrEmptyLLM(ScriptedLLM):
    """Scripted fake: replies with the texts given, each with its finish_reason."""

    def __init__(self, replies: list[tuple[str, str | None]]) -> None:
        super().__init__([text for text, _ in replies])
        self.reasons = [reason for _, reason in replies]

    async def complete(self, request: LLMRequest) -> LLMResponse:
        reason = self.reasons[len(self.requests)]
        reply = await super().complete(request)
        return LLMResponse(reply.text, reply.usage, reply.model, finish_reason=reason)


def _agent(**kw: Any) -> ReActAgent:
    return ReActAgent("A", "answers", "Answer.", builtin_tools(), max_steps=3, **kw)


async def test_scripted_reply_cut_at_max_tokens_is_said_so() -> None:
    llm = CutOrEmptyLLM(
        [
            ("[Thought]: 2520000000000000", "length"),
            ("", "stop"),
            ("[Thought]: ok\n[Finish]: 4", "stop"),
        ]
    )
    result = await _agent().run("How many?", {}, llm=llm)
    first, second, _third = result.trace.steps
    assert first.error_kind == "no_action"
    assert "cut at max_tokens (256)" in (first.error or "")
    assert "[llm] max_tokens" in (first.error or "")
    assert second.error_kind is not None and "returned no text" in (second.error or "")
    assert result.answer == "4"
    # the model hears of both, and the run went on
    assert "cut at max_tokens" in llm.requests[1].messages[-1].text()


async def test_a_plain_format_mistake_keeps_its_own_message() -> None:
    llm = CutOrEmptyLLM([("I think it is 4.", "stop"), ("[Thought]: ok\n[Finish]: 4", "stop")])
    result = await _agent().run("How many?", {}, llm=llm)
    assert "cut at" not in (result.trace.steps[0].error or "")
    assert "no text" not in (result.trace.steps[0].error or "")


# -- worked examples that fit the context ----------------------------------------------------


class SmallContextLLM(ScriptedLLM):
    """Scripted fake with a context of ``context`` tokens (estimated by bytes)."""

    def __init__(self, script: list[str], context: int) -> None:
        super().__init__(script)
        self.context = context

    async def context_window(self) -> int:
        return self.context


def test_fit_keeps_as_many_examples_in_order_as_fit() -> None:
    examples = [f"Example {i}: " + "word " * 100 for i in range(10)]

    def build(chosen: Any) -> str:
        return "Instructions.\n" + "\n".join(chosen)

    one = estimate_tokens(examples[0]) + 1
    base = estimate_tokens(build([]))
    llm = SmallContextLLM([], context=base + 4 * one + 300)
    fitted = asyncio_run(fit_examples(llm, build, examples, reserve=300))
    assert fitted.kept == 4 and fitted.total == 10
    assert fitted.text == build(examples[:4])
    assert fitted.note is not None and "4 of 10 worked examples" in fitted.note
    with pytest.raises(PromptTooLong, match="lower it"):
        asyncio_run(fit_examples(llm, build, examples, reserve=10**6, advice="lower it"))
    roomy = SmallContextLLM([], context=10**6)
    assert asyncio_run(fit_examples(roomy, build, examples, reserve=300)).note is None


def asyncio_run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


async def test_scripted_small_context_agent_says_what_it_left_out() -> None:
    examples = [f"Question: q{i}?\n[Thought]: " + "think " * 80 + "\n[Finish]: a" for i in range(6)]
    agent = ReActAgent("A", "answers", "Answer.", [], examples=examples, max_steps=2)
    prompt_alone = estimate_tokens(agent._prompt_with([]))
    llm = SmallContextLLM(
        ["[Thought]: ok\n[Finish]: yes"], context=prompt_alone + agent.run_reserve() + 400
    )
    result = await agent.run("Is it?", {}, llm=llm)
    assert result.answer == "yes"
    kept = result.trace.notes[0]
    assert "of 6 worked examples kept" in kept
    system = llm.requests[0].messages[0].text()
    assert "q0?" in system and "q5?" not in system
    assert json.loads(json.dumps(result.trace.to_dict()))["notes"] == result.trace.notes


async def test_scripted_context_too_small_for_any_prompt_is_a_stated_failure() -> None:
    agent = _agent()
    llm = SmallContextLLM(["[Thought]: ok\n[Finish]: yes"], context=300)
    result = await agent.run("Is it?", {}, llm=llm)
    assert result.answer is None and result.trace.status == "llm_failure"
    assert "without any worked example" in (result.trace.error or "")
    assert "[agent] max_steps" in (result.trace.error or "")
    assert llm.requests == []


@needs_embedded_model
async def test_naive_prompt_fits_the_embedded_model() -> None:
    """Bug 4: the naive baseline's whole prompt is over 10,000 tokens; on SmolLM2 (8,192)
    it keeps the examples that fit, one of each question type first."""
    system, _ = build_system(load_config(None), "naive")
    assert isinstance(system, ReActAgent)
    from hammr.backends.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM()
    whole = await llm.count_tokens(system.system_prompt())
    assert whole is not None and whole > 8192
    fitted = await system.fitted_prompt(llm)
    assert 0 < fitted.kept < len(system.examples)
    assert fitted.tokens + system.run_reserve() <= 8192
    assert await llm.context_window() == 8192
    assert fitted.note is not None and f"of {len(system.examples)} worked examples" in fitted.note


# -- MulProg offered what has a backend ---------------------------------------------------------


def test_offline_mulprog_is_not_offered_vqa() -> None:
    system, backends = build_system(load_config(None), "mulprog")
    assert "vqa" not in backends
    modules = system.modules  # type: ignore[attr-defined]
    assert "VQA" not in modules and "LOC" in modules and "EVAL" in modules
    planner = system.planner  # type: ignore[attr-defined]
    assert "VQA(" not in planner.system_prompt()
    assert planner.examples and all(
        "VQA" not in program_modules(e.program) for e in planner.examples
    )
    assert len(planner.examples) < len(load_examples())
    assert any("VQA (vqa)" in note for note in system.notes)  # type: ignore[attr-defined]


def test_modules_with_a_backend_keep_vqa() -> None:
    usable, withheld = modules_with_backends(modules_with(), {"vqa": object(), "detect": object()})
    assert "VQA" in usable and withheld == {}
    usable, withheld = modules_with_backends(modules_with(), {})
    assert withheld == {"LOC": "detect", "VQA": "vqa"}


def test_program_text_names_only_defined_results_in_braces() -> None:
    """An EVAL expression may read {ANSWER0} only once a line defined it."""
    mods = list(modules_with().values())
    before = line_grammar(mods, {"IMAGE": "image"})
    assert '"{"' not in before and "[^'\\n{}]" in before
    after = line_grammar(mods, {"IMAGE": "image", "BOX0": "box", "ANSWER0": "answer"})
    assert '"{" ("BOX0" | "ANSWER0") "}"' in after


# -- the case, end to end -------------------------------------------------------------


@needs_embedded_model
@needs_tesseract
def test_react_acts_on_the_embedded_model(tmp_path: Path) -> None:
    """Bug 2's command: before, all 8 steps failed with no_action (cut mid-thought)."""
    trace = tmp_path / "react.json"
    result = CliRunner().invoke(
        main,
        [
            "ask",
            "--system",
            "react",
            str(EXAMPLES / "demo" / "menu.png"),
            "How much does a cappuccino cost?",
            "--no-cache",
            "--max-steps",
            "4",
            "--trace",
            str(trace),
        ],
    )
    assert trace.exists(), result.output
    steps = json.loads(trace.read_text())["steps"]
    assert any(s.get("tool") for s in steps), [s.get("raw") for s in steps]
    assert not any("cut at max_tokens" in (s.get("error") or "") for s in steps)


async def test_scripted_cot_asks_for_a_letter_only_when_there_are_options() -> None:
    from hammr.muse.system import COT_CHOICE_RULE, CoTSystem

    llm = ScriptedLLM(["Answer: 4", "Answer: B"])
    cot = CoTSystem(llm)
    await cot.run("How many coins?", {})
    await cot.run("What colour?\nOptions:\nA. red\nB. blue", {})
    free, choice = (r.messages[0].text() for r in llm.requests)
    assert COT_CHOICE_RULE not in free
    assert COT_CHOICE_RULE in choice


async def test_a_real_llamacpp_server_tells_its_context_and_counts_tokens(
    real_llm_server: LocalLlamaServer,
) -> None:
    """A served naive agent is fitted like the embedded one: llama.cpp's /props gives the
    slot's context and /tokenize the prompt's tokens."""
    llm = real_client(real_llm_server.base_url, server="llamacpp")
    assert await llm.context_window() == real_llm_server.per_slot_ctx
    assert (await llm.count_tokens("Hello there, how are you?") or 0) > 3
    examples = [f"Question: q{i}?\n[Thought]: " + "think it over " * 60 for i in range(20)]
    agent = ReActAgent("A", "answers", "Answer.", [], examples=examples, max_steps=2)
    fitted = await agent.fitted_prompt(llm)
    assert 0 < fitted.kept < len(examples)
    assert fitted.tokens + agent.run_reserve() <= real_llm_server.per_slot_ctx
    assert fitted.tokens == await llm.count_tokens(fitted.text)
    assert await real_client(real_llm_server.base_url, server="openai").context_window() is None


@pytest.mark.parametrize("steps", [1, 4, 8])
def test_scripted_annotator_and_avis_requests_hold_their_grammars_longest_reply(
    steps: int,
) -> None:
    """The hindsight annotator's JSON was cut at 40 + 100 per step tokens by rambling
    guidance (then not JSON); every constrained request now has room for its grammar."""
    from hammr.avis.replies import constrained_request, planner_grammar
    from hammr.memory.annotate import HindsightAnnotator
    from hammr.memory.annotation_replies import reply_grammar

    llm = ScriptedLLM([], grammar="gbnf")
    request = HindsightAnnotator(llm).request([Message("user", "annotate")], steps)
    assert request.grammar == reply_grammar(steps)
    assert request.max_tokens >= (longest_output_bytes(request.grammar) or 10**9)
    grammar = planner_grammar(["Caption", "OCR"])
    planned = constrained_request(
        "plan", llm, grammar=grammar, schema=None, setting=None, max_tokens=96
    )
    assert planned.max_tokens >= (longest_output_bytes(grammar) or 10**9)
