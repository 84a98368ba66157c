"""Running a MulProg program line by line, each line a step of a :class:`~hammr.trace.Trace`.

A line's arguments are resolved against the variables (:func:`hammr.actions.resolve`),
bound and checked against the module's parameters (:func:`hammr.tools.base.bind_arguments`)
and the module is invoked; its value is stored under the line's target. A module that reads
the program's variables by name (EVAL, a :class:`~hammr.programs.language.VariableReader`)
is handed the variable table as well. The step records the line (``Step.line``), the module
(``Step.tool``), the line's text (``Step.action``), the encoded arguments and output: LOC's
boxes and the crops' images (by hash, in ``trace.images``) are there for a viewer to draw.

A line that fails ends the run (later lines need its variable): the step holds the error
kind and message, the trace has status ``error`` and an error naming the line. RESULT's
value, rendered as text, is the answer (status ``finished``). Cancelled (a timeout), the
trace is marked ``cancelled`` and keeps the lines already run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from hammr.actions import ResolveError, resolve
from hammr.agent import AgentFailed, mark_cancelled
from hammr.backends.llm.meter import step_meter
from hammr.programs.checks import kinds_of, validate
from hammr.programs.language import (
    MODEL_MISTAKES,
    RESULT_MODULE,
    Program,
    ProgramLine,
    VariableReader,
    format_errors,
)
from hammr.tools.base import Tool, ToolContext, ToolError, ToolResult, bind_arguments
from hammr.trace import Step, Trace, encode_value
from hammr.values import Value, render_value

AGENT_NAME = "MulProg"


@dataclass
class ProgramRun:
    """What a program run gave: the answer (None unless it finished), RESULT's value, the
    trace, and every variable the run defined (inputs included)."""

    answer: str | None
    value: Value
    trace: Trace
    variables: dict[str, Value] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.trace.status == "finished"


async def run_program(
    program: Program,
    inputs: Mapping[str, Value],
    modules: Mapping[str, Tool],
    ctx: ToolContext | None = None,
    *,
    question: str = "",
    agent: str = AGENT_NAME,
    trace: Trace | None = None,
    check: bool = True,
) -> ProgramRun:
    """Run ``program`` on ``inputs`` (``{"IMAGE": image}``) with ``modules`` by name.

    Never raises for a bad program or a failing module: the trace says what went wrong.
    With ``check`` the program is validated first
    (:func:`~hammr.programs.checks.validate`) and not run at all when it has errors.
    Steps are appended to ``trace`` when one is given (e.g. after a planner's step; its
    owner has announced it), else to a new trace announced with ``ctx.trace_started``.
    """
    ctx = ctx or ToolContext()
    variables: dict[str, Value] = dict(inputs)
    if trace is None:
        trace = Trace(agent=agent, question=question)
        trace.inputs = {n: encode_value(v, trace.images) for n, v in variables.items()}
        ctx.trace_started(trace)
    run = ProgramRun(None, None, trace, variables)
    started = time.perf_counter()
    try:
        if check:
            errors = validate(program, modules, kinds_of(inputs))
            if errors:
                trace.status = "no_answer"  # the model's program is wrong: a result
                trace.error = "the program cannot run:\n" + format_errors(errors)
                return run
        for line in program.lines:
            if not await _run_line(run, line, modules, ctx):
                return run
            if line.module == RESULT_MODULE:
                return run
        trace.status = "no_answer"
        trace.error = "the program ended without a RESULT line"
        return run
    except asyncio.CancelledError:
        mark_cancelled(trace)
        raise
    finally:
        trace.latency_s += time.perf_counter() - started


async def _invoke(
    tool: Tool, args: dict[str, Value], ctx: ToolContext, variables: Mapping[str, Value]
) -> ToolResult:
    if isinstance(tool, VariableReader):
        return await tool.invoke_with_variables(args, ctx, variables)
    return await tool.invoke(args, ctx)


async def _run_line(
    run: ProgramRun, line: ProgramLine, modules: Mapping[str, Tool], ctx: ToolContext
) -> bool:
    """Run one line as one step; False when it failed (the run has ended)."""
    trace, act = run.trace, line.act
    step = Step(index=len(trace.steps), line=line.index, tool=act.tool, action=line.text)
    trace.steps.append(step)
    if ctx.on_step is not None:
        ctx.on_step(trace.agent, ctx.depth, step)
    try:
        return await _execute(run, step, line, modules, ctx)
    finally:
        if ctx.on_step is not None:
            ctx.on_step(trace.agent, ctx.depth, step)


async def _execute(
    run: ProgramRun,
    step: Step,
    line: ProgramLine,
    modules: Mapping[str, Tool],
    ctx: ToolContext,
) -> bool:
    act, trace = line.act, run.trace
    tool = modules.get(act.tool)
    if tool is None:
        return _fail(run, step, line, "unknown_module", f"module {act.tool} does not exist")
    t0 = time.perf_counter()
    try:
        positional = [resolve(a, run.variables) for a in act.args]
        keywords = {k: resolve(v, run.variables) for k, v in act.kwargs}
        args = bind_arguments(tool, positional, keywords)
        step.arguments = {k: encode_value(v, trace.images) for k, v in args.items()}
        with step_meter(step):  # a module's model calls (VQA on a VLM, ...) are the line's
            result = await _invoke(tool, args, ctx.for_step(step), run.variables)
    except ResolveError as e:
        return _fail(run, step, line, e.kind, str(e))
    except AgentFailed as e:
        step.child = e.trace
        return _fail(run, step, line, e.kind, str(e))
    except ToolError as e:
        return _fail(run, step, line, e.kind, str(e))
    except Exception as e:  # a broken module must not end the caller's process
        return _fail(run, step, line, "tool_failure", f"{act.tool} failed: {type(e).__name__}: {e}")
    finally:
        step.tool_latency_s = time.perf_counter() - t0
    value = result.value
    if act.target is not None:
        run.variables[act.target] = value
    step.output_var = act.target
    step.output = encode_value(value, trace.images)
    step.child = result.child_trace
    step.observation = result.observation if result.observation is not None else render_value(value)
    if act.tool == RESULT_MODULE:
        answer = render_value(value)
        step.finish = answer
        run.answer, run.value = answer, value
        trace.answer, trace.status = answer, "finished"
    return True


def _fail(run: ProgramRun, step: Step, line: ProgramLine, kind: str, message: str) -> bool:
    step.error_kind = kind
    step.error = message
    step.observation = f"#ERROR#: {message}"
    run.trace.status = "no_answer" if kind in MODEL_MISTAKES else "error"
    run.trace.error = f"line {line.index + 1} ({line.text}) failed: [{kind}] {message}"
    return False


__all__ = ["AGENT_NAME", "ProgramRun", "run_program"]
