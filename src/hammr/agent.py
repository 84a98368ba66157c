"""The multimodal ReAct loop. An agent is itself a Tool, so agents can call agents.

The model reads every value as a line of text (``image 640x480 (stored in 'crop')``). A model
that sees (its backend's ``vision`` is True, hammr.toml ``[llm] vision``) is also shown the
images: the task message carries the input images after the text naming them, and every
``[Observe]`` turn whose result holds images carries them after the observation, each
labelled with its variable, within the backend's :class:`~hammr.backends.llm.base.VisionLimits`
(see :mod:`hammr.vision`). The messages of each step are a byte-identical prefix of the next
step's, so a server's prefix cache keeps working: past the image count limit, *new* images are
left out and their turn says so; images already shown are never dropped, re-encoded or moved.
(One exception, as for text-only models: the note that forces a [Finish] is added to the newest
turn of that request only.) A text-only model gets exactly the messages it always had.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field, replace

from hammr.actions import Act, Finish, ParseError, ResolveError, act_source, parse_step, resolve
from hammr.advice import Advisor, Situation, advice_record
from hammr.backends.llm.base import (
    LLM,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    run_sync,
    sees_images,
    vision_limits_of,
)
from hammr.backends.llm.meter import step_meter, unmetered
from hammr.context_fit import FittedPrompt, PromptTooLong, fit_examples
from hammr.grammar import step_grammar
from hammr.grammar_bounds import tokens_for
from hammr.non_answers import refuse_non_answer
from hammr.tools.base import (
    Param,
    ParamKind,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    bind_arguments,
)
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Image, Value, render_value
from hammr.vision import ImageBudget, labelled_images

MAX_AGENT_DEPTH = 6

FORMAT_RULES = """\
Work in steps. In each step write exactly two lines:
[Thought]: what you will do next and why
[Act]: one tool call, for example: crops = CropImage(image, [[10, 20, 50, 40]])
The call's arguments are literals (numbers, 'text', [lists]) or names of variables; write
name = Tool(...) to keep the result in a variable. You then see the result after [Observe]:.
When you know the answer, write:
[Thought]: why this is the answer
[Finish]: the short answer"""


REPEATABLE_OUTCOMES = (None, "capability_missing", "repeated_action")
"""Outcomes that the same call with the same inputs would only produce again: a success, a
capability with no backend, a refusal. (A tool failure may be transient, so it may be retried.)"""

TASK_TOKENS = 200
"""Room for the question and its variables, when fitting examples to a context."""
STEP_TOKENS = 200
"""Room for one step's thought, action and observation, when fitting examples."""

LAST_STEP_NOTE = "This is your last step: write [Thought] and [Finish] with your best answer."


@dataclass
class AgentResult:
    """What a system's run gave: its answer (None: none) and the trace of how.

    Every system's run ends in one, and here its answer is checked, whatever the system:
    a reply that is not an answer (empty, the question or hammr's own instruction repeated)
    becomes None, and the trace records why (:func:`hammr.non_answers.refuse_non_answer`).
    ``instructions``: text the system wrote for its model beyond the prompts
    :data:`hammr.non_answers.PROMPTS` names (a ReAct agent's instructions and tool cards)."""

    answer: str | None
    trace: Trace
    instructions: InitVar[Sequence[str]] = ()

    def __post_init__(self, instructions: Sequence[str]) -> None:
        self.answer = refuse_non_answer(self.answer, self.trace, instructions)

    @property
    def ok(self) -> bool:
        return self.trace.status == "finished"


class AgentFailed(ToolError):
    """A child agent ended without an answer; carries the child's trace for the parent's step."""

    def __init__(self, message: str, trace: Trace) -> None:
        super().__init__(message)
        self.trace = trace


def mark_cancelled(trace: Trace) -> None:
    """Record in a trace that its run was cancelled (by a timeout or the user) mid-way."""
    trace.status = "cancelled"
    last = trace.steps[-1] if trace.steps else None
    where = f" in step {last.index + 1}" if last is not None else " before its first step"
    doing = f" ({last.action})" if last is not None and last.action else ""
    trace.error = f"cancelled{where}{doing}"


@contextmanager
def traced(trace: Trace, ctx: ToolContext) -> Iterator[Trace]:
    """The frame of a system's run: the trace is announced (``ctx.on_trace``) before the run
    begins, marked cancelled if the run is cut short, and timed into ``trace.latency_s``.
    The run's own model calls are in its steps, so none is added to a meter of a caller's
    (:func:`hammr.backends.llm.meter.unmetered`); its steps meter their tools' calls."""
    ctx.trace_started(trace)
    started = time.perf_counter()
    try:
        with unmetered():
            yield trace
    except asyncio.CancelledError:
        mark_cancelled(trace)
        raise
    finally:
        trace.latency_s = time.perf_counter() - started


def reply_problem(model: LLM, request: LLMRequest, response: LLMResponse) -> str | None:
    """Why a reply that holds no step is not the model's fault alone: the server sent no
    text, or cut the reply at ``max_tokens``; None when neither (a plain format mistake)."""
    if not response.text.strip():
        why = f" (finish_reason: {response.finish_reason})" if response.finish_reason else ""
        return f"{model.name} returned no text{why}; write [Thought] and then [Act] or [Finish]"
    if response.finish_reason == "length":
        return (
            f"the model's reply was cut at max_tokens ({request.max_tokens}) before it "
            "finished its step; write a shorter [Thought] (or raise [llm] max_tokens in "
            "hammr.toml)"
        )
    return None


def observation_for(var: str, value: Value, result: ToolResult) -> str:
    text = result.observation if result.observation is not None else render_value(value)
    return f"{text} (stored in '{var}')"


def with_note(message: Message, note: str) -> Message:
    """``message`` with a line of text added at its end; its images stay where they are."""
    if isinstance(message.content, str):
        return Message(message.role, message.content + "\n" + note)
    *head, last = message.content
    if isinstance(last, str):
        return Message(message.role, (*head, last + "\n" + note))
    return Message(message.role, (*message.content, "\n" + note))


@dataclass
class _Run:
    """The private state of one run: fresh for every call, so concurrent runs share nothing."""

    variables: dict[str, Value]
    messages: list[Message]
    trace: Trace
    auto_names: dict[str, int] = field(default_factory=dict)
    bound_at: dict[str, int] = field(default_factory=dict)
    """The step that last stored each variable (inputs are absent)."""
    images: ImageBudget | None = None
    """What the model has been shown, when it sees images; None for a text-only model."""

    def auto_name(self, tool: str) -> str:
        base = "".join(ch if ch.isalnum() else "_" for ch in tool.lower()) or "out"
        n = self.auto_names.get(base, 0) + 1
        while f"{base}_{n}" in self.variables:
            n += 1
        self.auto_names[base] = n
        return f"{base}_{n}"


class ReActAgent:
    """A multimodal ReAct agent.

    ``inputs`` names the variables a caller hands over (by default one image called ``image``);
    when the agent is used as a tool, its parameters are the question followed by these inputs.
    ``llm=None`` means: use the model of whoever runs it (the :class:`ToolContext`).

    Two habits of weak models are handled here. After a repeated action the next call
    samples (temperature >= 0.7, seeded by the step) instead of decoding greedily into the
    same loop. With ``finish_on_last_step`` the last step asks for a [Finish] (and, under a
    grammar, allows nothing else); such a step is marked ``forced`` in the trace.
    """

    def __init__(
        self,
        name: str,
        description: str,
        instructions: str,
        tools: Sequence[Tool],
        examples: Sequence[str] = (),
        llm: LLM | None = None,
        max_steps: int = 8,
        inputs: Mapping[str, ParamKind] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        grammar: bool | None = None,
        finish_on_last_step: bool = True,
        question_variable: bool = False,
        final_tools: Collection[str] = (),
        advisors: Sequence[Advisor] = (),
        refuse_repeats: bool = True,
        unknown_tool_ends_run: bool = False,
    ) -> None:
        names = [t.name for t in tools]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"agent {name}: tools registered twice: {', '.join(sorted(dupes))}")
        self.name = name
        self.description = description
        self.instructions = instructions
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.examples = list(examples)
        self.llm = llm
        self.max_steps = max_steps
        self.inputs: dict[str, ParamKind] = (
            dict(inputs) if inputs is not None else {"image": "image"}
        )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.grammar = grammar
        """True: always constrain; False: never; None: when the backend supports grammars."""
        self.finish_on_last_step = finish_on_last_step
        self.refuse_repeats = refuse_repeats
        """Refuse an action that already ran on the same inputs (off: it runs again)."""
        self.unknown_tool_ends_run = unknown_tool_ends_run
        """A step calling a tool that is not registered ends the run with its error (the
        HAMMR paper's harness, Fig. C.5: status ``no_answer``, a result); off, the error lists
        the tools and the run goes on."""
        self.question_variable = question_variable
        """Also hand the question over as the variable 'question', so the agent can pass it on
        by name instead of retyping it (a dispatcher must not reword what it routes)."""
        self.final_tools = frozenset(final_tools)
        """Tools whose successful result is this agent's answer: the run ends there (the
        dispatcher relays its specialist's answer without another LLM call)."""
        self.advisors: tuple[Advisor, ...] = tuple(advisors)
        """Asked before every model call; their advice joins the newest user turn (see
        :mod:`hammr.advice`)."""
        unknown = self.final_tools - set(self.tools)
        if unknown:
            raise ValueError(f"agent {name}: final_tools not among its tools: {sorted(unknown)}")
        self._system_prompt: str | None = None
        self._fitted: dict[str, FittedPrompt] = {}

    def with_tools(self, tools: Sequence[Tool]) -> ReActAgent:
        """The same agent with other tools (final tools kept where still present)."""
        return self._copy(tools=tools)

    def with_advisors(self, advisors: Sequence[Advisor]) -> ReActAgent:
        """The same agent asking ``advisors`` (instead of its own) before every model call."""
        return self._copy(advisors=advisors)

    def _copy(
        self, *, tools: Sequence[Tool] | None = None, advisors: Sequence[Advisor] | None = None
    ) -> ReActAgent:
        tools = list(self.tools.values()) if tools is None else tools
        names = {t.name for t in tools}
        return ReActAgent(
            name=self.name,
            description=self.description,
            instructions=self.instructions,
            tools=tools,
            examples=self.examples,
            llm=self.llm,
            max_steps=self.max_steps,
            inputs=self.inputs,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            grammar=self.grammar,
            finish_on_last_step=self.finish_on_last_step,
            refuse_repeats=self.refuse_repeats,
            unknown_tool_ends_run=self.unknown_tool_ends_run,
            question_variable=self.question_variable,
            final_tools=[n for n in self.final_tools if n in names],
            advisors=self.advisors if advisors is None else advisors,
        )

    # -- the Tool protocol ----------------------------------------------------------------

    @property
    def params(self) -> tuple[Param, ...]:
        return (
            Param("question", "text", doc="the question to answer"),
            *(Param(n, k) for n, k in self.inputs.items()),
        )

    @property
    def returns(self) -> str:
        return "answer"

    def card(self) -> str:
        sig = ", ".join(p.signature() for p in self.params)
        return f"{self.name}({sig}) -> answer\n  {self.description}"

    async def invoke(self, args: dict[str, Value], ctx: ToolContext) -> ToolResult:
        if ctx.depth >= MAX_AGENT_DEPTH:
            raise ToolError(f"agents are nested more than {MAX_AGENT_DEPTH} deep; answer directly")
        question = str(args["question"])
        inputs = {n: args[n] for n in self.inputs}
        result = await self.run(question, inputs, ctx=ctx.child())
        if result.answer is None:
            reason = result.trace.error or result.trace.status
            raise AgentFailed(f"{self.name} could not answer: {reason}", result.trace)
        return ToolResult(result.answer, observation=result.answer, child_trace=result.trace)

    # -- prompting ------------------------------------------------------------------------

    def system_prompt(self) -> str:
        """The system prompt with every worked example."""
        if self._system_prompt is None:
            self._system_prompt = self._prompt_with(self.examples)
        return self._system_prompt

    def _prompt_with(self, examples: Sequence[str]) -> str:
        parts = [self.instructions.strip(), FORMAT_RULES, "Tools:"]
        parts.append("\n".join(t.card() for t in self.tools.values()))
        if examples:
            parts.append("Examples:")
            parts.append("\n\n".join(e.strip() for e in examples))
        return "\n\n".join(parts)

    def prompt_instructions(self) -> list[str]:
        """What this agent's prompt tells its model beyond the shared step format: its
        instructions and its tool cards (not its worked examples, whose answers are answers)."""
        return [self.instructions, *(t.card() for t in self.tools.values())]

    def run_reserve(self) -> int:
        """Tokens kept free beside the system prompt for the question, every step's reply
        and observation, and the last reply."""
        return TASK_TOKENS + self.max_steps * STEP_TOKENS + self.max_tokens

    async def fitted_prompt(self, model: LLM) -> FittedPrompt:
        """The system prompt with as many worked examples (in order) as ``model``'s context
        holds beside :meth:`run_reserve`; PromptTooLong when none does."""
        key = model.name
        fitted = self._fitted.get(key)
        if fitted is None:
            fitted = await fit_examples(
                model,
                self._prompt_with,
                self.examples,
                reserve=self.run_reserve(),
                what=f"{self.name}'s prompt",
                advice="lower [agent] max_steps or serve a model with a longer context",
            )
            self._fitted[key] = fitted
        return fitted

    def task_message(self, question: str, variables: Mapping[str, Value]) -> str:
        lines = [f"Question: {question}", "Variables:"]
        lines += [f"- {n}: {render_value(v)}" for n, v in variables.items()]
        return "\n".join(lines)

    def _use_grammar(self, llm: LLM) -> bool:
        if self.grammar is None:
            return llm.grammar_support == "gbnf"
        return self.grammar and llm.grammar_support == "gbnf"

    # -- the loop -------------------------------------------------------------------------

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
        llm: LLM | None = None,
    ) -> AgentResult:
        """Answer ``question`` about ``inputs``; never raises for model or tool trouble.

        Every model call of the run is in its trace once: a step's own in its ``usage``,
        those its tool and advisors make in its ``tool_*`` fields, a child agent's in the
        child's trace (none is added to a meter of a caller's: see
        :mod:`hammr.backends.llm.meter`)."""
        with unmetered():
            return await self._run(question, inputs, ctx=ctx, llm=llm)

    async def _run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None,
        *,
        ctx: ToolContext | None,
        llm: LLM | None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        model = llm or self.llm or ctx.llm
        if model is None:
            raise ValueError(f"agent {self.name} has no LLM: pass llm= or set ToolContext.llm")
        if ctx.llm is not model:
            ctx = replace(ctx, llm=model)  # agents this one calls inherit its model
        if not question or not question.strip():
            raise ValueError("the question is empty")
        variables: dict[str, Value] = dict(inputs or {})
        if self.question_variable:
            variables = {"question": question, **variables}
        trace = Trace(agent=self.name, question=question, model=model.name)
        trace.inputs = {n: encode_value(v, trace.images) for n, v in variables.items()}
        ctx.trace_started(trace)
        try:
            prompt = await self.fitted_prompt(model)
        except PromptTooLong as e:
            trace.status, trace.error = "llm_failure", str(e)
            return AgentResult(None, trace)
        if prompt.note:
            trace.notes.append(prompt.note)
        run = _Run(
            variables=variables,
            messages=[Message("system", prompt.text)],
            trace=trace,
            images=ImageBudget(vision_limits_of(model)) if sees_images(model) else None,
        )
        started = time.perf_counter()
        try:
            task = self.task_message(question, variables)
            shown = [im for n, v in variables.items() for im in labelled_images(n, v)]
            run.messages.append(await self._user_turn(run, task, shown))
            for index in range(self.max_steps):
                done = await self._step(run, index, model, ctx)
                if ctx.on_step is not None:
                    ctx.on_step(self.name, ctx.depth, trace.steps[-1])
                if done:
                    break
            else:
                trace.status = "step_limit"
                trace.error = f"no answer after {self.max_steps} steps"
        except asyncio.CancelledError:
            mark_cancelled(trace)
            raise
        finally:
            trace.latency_s = time.perf_counter() - started
        return AgentResult(trace.answer, trace, self.prompt_instructions())

    def run_sync(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
        llm: LLM | None = None,
    ) -> AgentResult:
        """:meth:`run` for synchronous code (scripts, notebooks without a running loop)."""
        return run_sync(self.run(question, inputs, ctx=ctx, llm=llm))

    async def _step(self, run: _Run, index: int, model: LLM, ctx: ToolContext) -> bool:
        step = Step(index=index)
        previous = run.trace.steps[-1] if run.trace.steps else None
        run.trace.steps.append(step)
        if self.advisors:
            with step_meter(step):  # an advisor's model calls are made for this step
                await self._advise(run, step, ctx.with_metered_llm())
        messages = list(run.messages)
        looping = len(run.trace.steps) > 2 and all(
            s.error_kind == "repeated_action" for s in run.trace.steps[-3:-1]
        )
        final_step = index == self.max_steps - 1 and index > 0
        # the last step, or after two refused repeats in a row (the model is stuck in a
        # loop that more steps will not break), may only finish
        step.forced = self.finish_on_last_step and (final_step or looping)
        if step.forced:
            messages[-1] = with_note(messages[-1], LAST_STEP_NOTE)
        temperature, seed = self.temperature, None
        if previous is not None and previous.error_kind == "repeated_action":
            temperature, seed = max(temperature, 0.7), index
        grammar = None
        if self._use_grammar(model):
            grammar = step_grammar(
                self.tools.values(),
                run.variables,
                finish_only=step.forced,
                max_tokens=self.max_tokens,
            )
        request = LLMRequest(
            messages=tuple(messages),
            # room for the grammar's longest step, so a constrained reply is never cut
            max_tokens=tokens_for(grammar, self.max_tokens),
            temperature=temperature,
            seed=seed,
            stop=("[Observe]", "\n[Observe"),
            grammar=grammar,
        )
        if ctx.on_step is not None:
            ctx.on_step(self.name, ctx.depth, step)
        t0 = time.perf_counter()
        try:
            response = await model.complete(request)
        except LLMError as e:
            step.llm_latency_s = time.perf_counter() - t0
            step.error_kind, step.error = "llm_failure", str(e)
            run.trace.status, run.trace.error = "llm_failure", str(e)
            return True
        step.llm_latency_s = time.perf_counter() - t0
        step.raw = response.text
        step.cached = response.cached
        step.usage = StepUsage.of(response)
        reply = response.text.strip()
        run.messages.append(Message("assistant", reply))
        try:
            parsed = parse_step(reply, self.tools.keys(), run.variables.keys())
        except ParseError as e:
            step.thought = e.thought
            step.action = e.source or None
            self._fail(run, step, e.kind, reply_problem(model, request, response) or e.message)
            if e.kind == "unknown_tool" and self.unknown_tool_ends_run:
                run.trace.status = "no_answer"  # the model's mistake ends it: a result
                run.trace.error = f"step {index + 1}: {step.error}"
                return True
            return False
        step.thought = parsed.thought
        if isinstance(parsed.action, Finish):
            step.finish = parsed.action.answer
            run.trace.answer = parsed.action.answer
            run.trace.status = "finished"
            return True
        await self._act(run, step, parsed.action, ctx)
        return run.trace.status == "finished"

    async def _act(self, run: _Run, step: Step, act: Act, ctx: ToolContext) -> None:
        step.action = act_source(act)
        step.tool = act.tool
        earlier = next(
            (
                s
                for s in run.trace.steps[:-1]
                if s.action == step.action and s.error_kind in REPEATABLE_OUTCOMES
            ),
            None,
        )
        if (
            self.refuse_repeats
            and earlier is not None
            and all(run.bound_at.get(v.name, -1) < earlier.index for v in act.variables())
        ):
            # Weak models loop on one call; with the same inputs it cannot give anything new.
            if earlier.error_kind is None:
                outcome = f"stored its result in '{earlier.output_var}'; use that result"
            else:
                outcome = f"got: {earlier.error}; it would fail again"
            self._fail(
                run,
                step,
                "repeated_action",
                f"step {earlier.index + 1} already ran {step.action} and {outcome}, "
                "call another tool, or [Finish]",
            )
            return
        tool = self.tools[act.tool]
        t0 = time.perf_counter()
        try:
            positional = [resolve(a, run.variables) for a in act.args]
            keywords = {k: resolve(v, run.variables) for k, v in act.kwargs}
            args = bind_arguments(tool, positional, keywords)
            step.arguments = {k: encode_value(v, run.trace.images) for k, v in args.items()}
            with step_meter(step):  # the tool's model calls (a child agent's are its own)
                result = await tool.invoke(args, ctx.for_step(step, run.trace))
        except ResolveError as e:
            self._fail(run, step, e.kind, str(e))
            return
        except AgentFailed as e:
            step.child = e.trace
            self._fail(run, step, e.kind, str(e))
            return
        except ToolError as e:
            self._fail(run, step, e.kind, str(e))
            return
        except Exception as e:  # a broken tool must not end the run
            self._fail(run, step, "tool_failure", f"{act.tool} failed: {type(e).__name__}: {e}")
            return
        finally:
            step.tool_latency_s = time.perf_counter() - t0
        var = act.target or run.auto_name(act.tool)
        run.variables[var] = result.value
        run.bound_at[var] = step.index
        step.output_var = var
        step.output = encode_value(result.value, run.trace.images)
        step.child = result.child_trace
        step.observation = observation_for(var, result.value, result)
        if result.retrieved is not None:
            step.retrieved.append(result.retrieved)
        shown = labelled_images(var, result.value)
        run.messages.append(await self._user_turn(run, f"[Observe]: {step.observation}", shown))
        if result.final or act.tool in self.final_tools:
            step.finish = result.observation if result.observation is not None else ""
            run.trace.answer = step.finish
            run.trace.status = "finished"

    async def _advise(self, run: _Run, step: Step, ctx: ToolContext) -> None:
        """Ask the advisors; their advice joins the newest user turn, not yet sent. A failing
        advisor is recorded in the step and the run goes on without its advice."""
        situation = Situation(
            self.name, run.trace.question, step.index, run.trace, run.variables, ctx
        )
        for advisor in self.advisors:
            try:
                advice = await advisor.advise(situation)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                step.retrieved.append(
                    {
                        "source": advisor.name,
                        "policy": "advisor",
                        "text": "",
                        "error": f"{type(e).__name__}: {e}",
                    }
                )
                continue
            if advice is None:
                continue
            step.retrieved.append(advice_record(advisor.name, advice))
            if advice.text.strip():
                run.messages[-1] = with_note(run.messages[-1], advice.text.strip())

    async def _user_turn(
        self, run: _Run, text: str, images: Sequence[tuple[str, Image]]
    ) -> Message:
        """A new user turn: ``text``, plus ``images`` when the model sees (downscaled and
        encoded off the event loop)."""
        if run.images is None or not images:
            return Message("user", text)
        return Message("user", await asyncio.to_thread(run.images.turn, text, images))

    def _fail(self, run: _Run, step: Step, kind: str, message: str) -> None:
        step.error_kind = kind
        step.error = message
        step.observation = f"#ERROR#: {message}"
        run.messages.append(Message("user", f"[Observe]: {step.observation}"))


__all__ = ["AgentFailed", "AgentResult", "ReActAgent", "mark_cancelled"]
