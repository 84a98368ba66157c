"""MulProg as a system: plan a program (one LLM call, one repair round), run it, explain it.

One trace holds the whole run: step 0 is the planner's call (its raw text is the program;
a program that cannot run is a step error with the errors' kind, followed by the repair
call), then one step per program line (``Step.line``), then an ``EXPLAIN`` step whose output
is the grounded explanation (text with ``[BOX]`` tokens and, per token, the object's name and
boxes in root-image pixels). So the store, ``hammr errors``, the viewer and replay read it
like any other trace.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from hammr.agent import AgentResult, traced
from hammr.backends.llm.base import LLM, LLMError, LLMResponse
from hammr.backends.llm.meter import Meter, metered, metering
from hammr.eval.metrics.explanation import GroundedExplanation
from hammr.programs.checks import compile_program
from hammr.programs.explain import ExplanationError, llm_explanation, template_explanation
from hammr.programs.interpreter import run_program
from hammr.programs.language import Program, ProgramErrors, format_errors
from hammr.programs.modules import modules_with
from hammr.programs.planner import ProgramPlanner, load_examples
from hammr.tools.base import Tool, ToolContext, unavailable_reason
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Image, Value

if TYPE_CHECKING:
    from hammr.systems import Workbench

NAME = "mulprog"
AGENT = "MulProg"
Explainer = Literal["llm", "template"]
# the checker's kinds are the runtime's error kinds where the meaning is the same
_STEP_KINDS = {"unknown_module": "unknown_tool"}

NEAREST_EXAMPLES = 8
"""Worked examples a question's prompt shows under ``mulprog.examples = 'nearest'``."""


def model_and_image(
    system: str, llm: LLM | None, ctx: ToolContext, inputs: Mapping[str, Value] | None
) -> tuple[LLM, Image]:
    """The model a one-image system runs on (its own, else the context's) and the input
    'image'; ValueError naming the system when either is missing."""
    model = llm or ctx.llm
    if model is None:
        raise ValueError(f"{system} has no LLM: pass llm= or set ToolContext.llm")
    image = (inputs or {}).get("image")
    if not isinstance(image, Image):
        raise ValueError(f"{system} answers questions about one image: give the input 'image'")
    return model, image


def _own_reply(step: Step, reply: LLMResponse) -> None:
    """Record ``reply`` as ``step``'s own model call: its text, usage and whether hammr's
    response cache replayed it."""
    step.raw, step.cached, step.usage = reply.text, reply.cached, StepUsage.of(reply)


def explanation_output(e: GroundedExplanation) -> dict[str, Any]:
    """The EXPLAIN step's output: the text and, per [BOX] token, its object and boxes."""
    images: dict[str, Any] = {}
    return {
        "text": e.text,
        "boxes": [{"name": r.name, "boxes": encode_value(list(r.boxes), images)} for r in e.boxes],
    }


class MulProgSystem:
    """Answers with a program over ``modules`` and explains the answer with grounded text."""

    name = NAME

    def __init__(
        self,
        planner: ProgramPlanner,
        modules: Mapping[str, Tool],
        *,
        llm: LLM | None = None,
        explainer: Explainer = "llm",
        repair_rounds: int = 1,
    ) -> None:
        self.planner = planner
        self.modules = dict(modules)
        self.llm = llm
        self.explainer = explainer
        self.repair_rounds = repair_rounds
        self.notes: tuple[str, ...] = ()
        """Said in every trace (e.g. modules withheld for want of a backend)."""

    async def prepare(self) -> None:
        await self.planner.prepare()

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        model, image = model_and_image(AGENT, self.llm, ctx, inputs)
        program_inputs: dict[str, Value] = {"IMAGE": image}
        trace = Trace(agent=AGENT, question=question, model=model.name)
        trace.inputs = {n: encode_value(v, trace.images) for n, v in program_inputs.items()}
        trace.notes.extend(self.notes)
        with traced(trace, ctx):
            program = await self._plan(question, model, trace, ctx)
            if program is None:
                return AgentResult(None, trace)
            run = await run_program(
                program, program_inputs, self.modules, ctx, question=question, trace=trace
            )
            if run.answer is None:
                return AgentResult(None, trace)
            await self._explain(question, run.answer, model, trace, ctx)
            trace.answer, trace.status = run.answer, "finished"
            return AgentResult(run.answer, trace)

    async def _plan(
        self, question: str, model: LLM, trace: Trace, ctx: ToolContext
    ) -> Program | None:
        """One PLAN step per LLM call (one for a whole program, one per line under a
        grammar); the last step of an attempt carries its program or its errors."""
        previous, errors = "", ""
        for attempt in range(1 + self.repair_rounds):
            step = Step(index=len(trace.steps), tool="PLAN")
            step.thought = "writing a program" if attempt == 0 else "repairing the program"
            trace.steps.append(step)
            self._notify(ctx, step)
            t0 = time.perf_counter()
            written = Meter()  # under a grammar, the lines written before a call that fails
            try:
                with metering(written):
                    replies = await self.planner.write(
                        question, metered(model), previous=previous, errors=errors
                    )
            except LLMError as e:
                step.llm_latency_s = time.perf_counter() - t0
                step.error_kind, step.error = "llm_failure", str(e)
                if written.calls:  # their calls, and the one that failed
                    step.calls, step.usage = written.calls + 1, written.usage
                trace.status, trace.error = "llm_failure", str(e)
                self._notify(ctx, step)
                return None
            spent = (time.perf_counter() - t0) / len(replies)
            for i, reply in enumerate(replies):
                if i:
                    step = Step(index=len(trace.steps), tool="PLAN", thought="next line")
                    trace.steps.append(step)
                step.raw, step.cached, step.llm_latency_s = reply.text, reply.cached, spent
                step.usage = StepUsage.of(reply)
            text = "\n".join(r.text.strip() for r in replies)
            try:
                program = compile_program(text, self.modules, {"IMAGE": "image"})
            except ProgramErrors as e:
                first = e.errors[0].kind
                step.error_kind = _STEP_KINDS.get(first, first)
                step.error = format_errors(e.errors)
                step.observation = f"#ERROR#: {step.error}"
                self._notify(ctx, step)
                previous, errors = text, step.error
                continue
            step.action = program.source()
            step.observation = f"a program of {len(program.lines)} lines"
            self._notify(ctx, step)
            return program
        trace.status = "no_answer"  # the model wrote no runnable program: a result
        trace.error = f"no runnable program after {1 + self.repair_rounds} attempts: {errors}"
        return None

    async def _explain(
        self, question: str, answer: str, model: LLM, trace: Trace, ctx: ToolContext
    ) -> None:
        step = Step(index=len(trace.steps), tool="EXPLAIN", thought="explaining the answer")
        trace.steps.append(step)
        self._notify(ctx, step)
        t0 = time.perf_counter()
        explanation = template_explanation(trace, answer)
        step.router = "template"  # written by code, no model call
        if self.explainer == "llm":
            step.router = None  # the model is asked (a call, used or not)
            try:
                explanation = await llm_explanation(
                    trace, question, answer, model, on_reply=lambda r: _own_reply(step, r)
                )
            except (ExplanationError, LLMError) as e:
                # recorded, and the template's explanation is used: never a made-up box
                step.error = f"the model's explanation was not used: {e}"
        step.llm_latency_s = time.perf_counter() - t0
        step.output = explanation_output(explanation)
        step.observation = explanation.text
        self._notify(ctx, step)

    @staticmethod
    def _notify(ctx: ToolContext, step: Step) -> None:
        if ctx.on_step is not None:
            ctx.on_step(AGENT, ctx.depth, step)


def mulprog_system(
    bench: Workbench,
    *,
    extra_modules: Sequence[Tool] = (),
    explainer: Explainer | None = None,
) -> MulProgSystem:
    """The `mulprog` system of a configuration: the 16 modules over its backends, the
    bundled examples (``mulprog.examples``: the 8 nearest with a text embedder, or all),
    the grammar where supported (``llm.grammar``), ``mulprog.repair_rounds`` repairs."""
    from hammr.factory import grammar_setting

    cfg = bench.config
    nearest = cfg.get("mulprog.examples") == "nearest"
    embedder = bench.backends.get("embed") if nearest else None
    modules, withheld = modules_with_backends(modules_with(extra_modules), bench.backends)
    examples = [e for e in load_examples() if program_modules(e.program) <= set(modules)]
    planner = ProgramPlanner(
        list(modules.values()),
        examples,
        k=NEAREST_EXAMPLES if embedder is not None else None,
        embedder=embedder,
        grammar=grammar_setting(cfg),
    )
    served = cfg.get("llm.backend") != "embedded"
    chosen: Explainer = explainer or ("llm" if served else "template")
    rounds = int(cfg.get("mulprog.repair_rounds"))
    system = MulProgSystem(planner, modules, explainer=chosen, repair_rounds=rounds)
    if withheld:
        broken = {
            cap: why
            for cap in dict.fromkeys(withheld.values())
            if (why := unavailable_reason(bench.backends, cap))
        }
        system.notes = (
            "modules withheld for want of a backend: "
            + ", ".join(f"{m} ({cap})" for m, cap in withheld.items())
            + f"; {len(examples)} of {len(load_examples())} worked examples use none of them"
            " (configure the capabilities in hammr.toml [tools.NAME] to offer them)",
            *(f"{cap} is configured but cannot run here: {why}" for cap, why in broken.items()),
        )
    return system


def modules_with_backends(
    modules: Mapping[str, Tool], backends: Mapping[str, Any]
) -> tuple[dict[str, Tool], dict[str, str]]:
    """The modules whose capability has a backend, and the others (name -> capability): a
    program cannot call a module that could only answer 'not available'."""
    usable: dict[str, Tool] = {}
    withheld: dict[str, str] = {}
    for name, module in modules.items():
        capability = getattr(module, "capability", None)
        if capability is None or capability in backends:
            usable[name] = module
        else:
            withheld[name] = str(capability)
    return usable, withheld


def program_modules(program: str) -> set[str]:
    """The modules a program's lines call."""
    return set(re.findall(r"=\s*([A-Z][A-Z0-9_]*)\(", program))
