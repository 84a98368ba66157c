"""AVIS as a system: decompose, describe the image, then plan / act / judge under the
transition graph with a stack of states (working memory) and backtracking.

At the state on top of the stack the planner chooses among graph[state] minus the actions
tried there (and minus object_select once every object has been selected: the selector
never picks an object twice in a run). The reasoner labels the output:

* not informative (or the action failed, or no verdict): the action is marked tried and the
  planner chooses again at the same state (a backtrack);
* informative or answerable with an answer while the visual sub-question is open: the
  answer fills ``#`` of the knowledge sub-question and a state is pushed with that query
  (unless the knowledge part is just ``#``: then the visual answer is the answer);
* answerable with an answer to the knowledge query: the run ends with it;
* informative otherwise: a state is pushed with the same query and the new finding.

A state with nothing left to try (or out of tries) is popped, a backtrack to the state below.
When the stack empties or the step budget is spent, a last forced ``ANSWER`` step answers
from the best evidence: the latest answer drawn from the knowledge phase (or the visual one
when it is the answer), else one model call over everything found.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hammr.agent import AgentResult, traced
from hammr.avis.actions import ActionInput, ActionOutcome, ActionRunner, ImageSearch
from hammr.avis.context import VisualContext, VisualObject, build_context
from hammr.avis.graph import START, ActionSpec, Phase, TransitionGraph
from hammr.avis.planner import Planner
from hammr.avis.prompts import (
    PLANNER_EXAMPLES,
    ShownExample,
    VerbatimExample,
    best_evidence_prompt,
)
from hammr.avis.reasoner import Reasoner
from hammr.avis.replies import Decomposition, ReplyError
from hammr.backends.llm.base import LLM, LLMError, LLMRequest, LLMResponse, Message
from hammr.backends.llm.meter import step_meter
from hammr.programs.system import model_and_image
from hammr.tools.base import ToolContext
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Value

if TYPE_CHECKING:
    from hammr.avis.paper_prompts import PaperPrompts
    from hammr.systems import Workbench

AGENT = "AVIS"
NOTE_CHARS = 300
CONTEXT_CHARS = 1800


@dataclass
class Frame:
    """One state of the working memory."""

    state: str
    query: str
    phase: Phase
    focus: VisualObject
    notes: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    tries: int = 0


@dataclass(frozen=True)
class AvisSettings:
    max_steps: int = 10
    """Action steps per question (planner choices, failed ones included)."""
    max_tries_per_state: int = 5
    max_objects: int = 4
    object_names: tuple[str, ...] = ()


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _add_usage(step: Step, response: LLMResponse) -> None:
    """Add a reply's usage to the step's (the step's calls summed; the prompt tokens taken
    from the server's cache too, while every reply so far said how many)."""
    first = step.usage == StepUsage()
    had, new = step.usage.cached_prompt_tokens, response.cached_prompt_tokens
    step.usage = StepUsage(
        step.usage.prompt_tokens + response.usage.prompt_tokens,
        step.usage.completion_tokens + response.usage.completion_tokens,
        new if first else (had + new if had is not None and new is not None else None),
    )
    step.cached = step.cached or response.cached


class AvisSystem:
    """AVIS over a transition graph (``avis``), or over the complete graph
    (``avis-autonomous``): the two differ only in :attr:`graph`."""

    def __init__(
        self,
        graph: TransitionGraph,
        runner: ActionRunner,
        *,
        planner: Planner | None = None,
        reasoner: Reasoner | None = None,
        llm: LLM | None = None,
        settings: AvisSettings | None = None,
        name: str = "avis",
        prepare_index: Any = None,
    ) -> None:
        self.graph = graph
        self.runner = runner
        self.planner = planner or Planner(graph.actions)
        self.reasoner = reasoner or Reasoner()
        self.llm = llm
        self.settings = settings or AvisSettings()
        self.name = name
        self._prepare_index = prepare_index

    async def prepare(self) -> None:
        """Build the image index once (hash and embed the corpus) before the first question."""
        if self._prepare_index is not None:
            await self._prepare_index()

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        model, image = model_and_image(AGENT, self.llm, ctx, inputs)
        # the tools it runs (actions, the image description) reach ctx.llm metered: their
        # model calls go to the step that ran them (its own calls are in its steps)
        ctx = ctx.with_metered_llm()
        trace = Trace(agent=AGENT, question=question, model=model.name)
        trace.inputs = {"image": encode_value(image, trace.images)}
        with traced(trace, ctx):
            try:
                decomposition = await self._decompose(question, model, trace, ctx)
                context = await self._context(image, trace, ctx)
                run = _Run(self, question, decomposition, context, model, trace, ctx)
                answer = await run.search()
            except LLMError as e:
                if trace.steps and trace.steps[-1].error_kind is None:
                    trace.steps[-1].error_kind, trace.steps[-1].error = "llm_failure", str(e)
                trace.status, trace.error = "llm_failure", str(e)
                return AgentResult(None, trace)
            trace.answer, trace.status = answer, "finished"
            return AgentResult(answer, trace)

    async def _decompose(
        self, question: str, model: LLM, trace: Trace, ctx: ToolContext
    ) -> Decomposition:
        step = self._begin(trace, ctx, "DECOMPOSE", "splitting the question")
        t0 = time.perf_counter()
        try:
            decomposition, response = await self.planner.decompose(question, model)
            step.raw = response.text
            _add_usage(step, response)
        except ReplyError as e:
            # recorded; the run goes on with the whole question as the visual part
            step.error_kind, step.error = e.kind, str(e)
            if e.response is not None:
                step.raw = e.response.text
                _add_usage(step, e.response)
            decomposition = Decomposition(question, "#")
        step.llm_latency_s = time.perf_counter() - t0
        step.output = {"visual": decomposition.visual, "knowledge": decomposition.knowledge}
        step.observation = f"visual: {decomposition.visual} | knowledge: {decomposition.knowledge}"
        self._end(step, ctx)
        return decomposition

    async def _context(self, image: Any, trace: Trace, ctx: ToolContext) -> VisualContext:
        step = self._begin(trace, ctx, "CONTEXT", "describing the image")
        step.router = "code"  # built by the library's tools, no model call
        t0 = time.perf_counter()
        with step_meter(step):  # a VLM's captions, detections, OCR: this step's tools' calls
            context = await build_context(
                image,
                ctx,
                max_objects=self.settings.max_objects,
                object_names=self.settings.object_names,
            )
        step.tool_latency_s = time.perf_counter() - t0
        step.output = context.to_json(trace.images)
        step.observation = context.render()
        if context.note():
            step.error = context.note()  # shown, not an error kind: the run goes on
        self._end(step, ctx)
        return context

    def _begin(self, trace: Trace, ctx: ToolContext, tool: str | None, thought: str) -> Step:
        step = Step(index=len(trace.steps), tool=tool, thought=thought)
        trace.steps.append(step)
        self._end(step, ctx)
        return step

    @staticmethod
    def _end(step: Step, ctx: ToolContext) -> None:
        if ctx.on_step is not None:
            ctx.on_step(AGENT, ctx.depth, step)


class _Run:
    """One question's search: the stack, the budget and the evidence."""

    def __init__(
        self,
        system: AvisSystem,
        question: str,
        decomposition: Decomposition,
        context: VisualContext,
        model: LLM,
        trace: Trace,
        ctx: ToolContext,
    ) -> None:
        self.s = system
        self.question = question
        self.d = decomposition
        self.context = context
        self.model = model
        self.trace = trace
        self.ctx = ctx
        self.answers: list[tuple[Phase, str]] = []
        self.findings: list[str] = []
        self.selected: list[int] = []
        """Objects object_select chose so far: never offered to it again."""

    def _context_text(self, frame: Frame) -> str:
        base = self.context.render() if frame.focus.id == 0 else frame.focus.render()
        if frame.notes:
            base += "\nFound so far:\n" + "\n".join(f"- {n}" for n in frame.notes)
        return base if len(base) <= CONTEXT_CHARS else base[-CONTEXT_CHARS:]

    async def search(self) -> str:
        s = self.s
        first_phase: Phase = "visual"
        stack = [Frame(START, self.d.visual, first_phase, self.context.objects[0])]
        taken = 0
        while stack:
            if taken >= s.settings.max_steps:
                return await self._best_evidence(
                    f"the budget of {s.settings.max_steps} steps is spent"
                )
            frame = stack[-1]
            candidates = self._offerable(s.graph.candidates(frame.state, frame.tried))
            if not candidates or frame.tries >= s.settings.max_tries_per_state:
                stack.pop()  # nothing left here: back to the state below
                self._mark_backtrack()
                continue
            taken += 1
            frame.tries += 1
            step = Step(len(self.trace.steps), state=frame.state, candidates=candidates, calls=0)
            self.trace.steps.append(step)
            AvisSystem._end(step, self.ctx)
            answer = await self._act(step, frame, stack)
            AvisSystem._end(step, self.ctx)
            if answer is not None:
                return answer
        return await self._best_evidence("every path was tried")

    def _offerable(self, candidates: list[str]) -> list[str]:
        """The graph's candidates less object_select once every object has been selected
        (the paper's selector excludes objects already chosen)."""
        if "object_select" in candidates and "object_select" in self.s.runner.actions:
            spec = self.s.runner.actions["object_select"]
            ids = {o.id for o in self.context.objects}
            if spec.tool is None and ids <= set(self.selected):
                return [c for c in candidates if c != "object_select"]
        return candidates

    def _mark_backtrack(self) -> None:
        for step in reversed(self.trace.steps):
            if step.state is not None:
                step.backtrack = True
                return

    async def _act(self, step: Step, frame: Frame, stack: list[Frame]) -> str | None:
        """Plan, run and judge one action; the answer when the run ends here."""
        s = self.s
        t0 = time.perf_counter()
        choice, response, error = await s.planner.choose(
            frame.query, self._context_text(frame), step.candidates, self.model
        )
        step.calls = 1
        step.raw = response.text
        _add_usage(step, response)
        step.llm_latency_s = time.perf_counter() - t0
        if choice is None:
            assert error is not None
            step.error_kind, step.error = error.kind, str(error)
            step.observation = f"#ERROR#: {error}"
            return None
        action, query = choice.action, choice.query or frame.query
        spec = s.graph.actions[action]
        step.tool, step.arguments = action, {"query": query}
        step.action = f"{action}(query={query!r})"
        t1 = time.perf_counter()
        given = ActionInput(
            query,
            frame.focus,
            self.context,
            "\n".join(frame.notes),
            self.trace.images,
            frozenset(self.selected),
        )
        with step_meter(step):  # a tool's calls; the runner's own are outcome.responses
            outcome = await s.runner.run(action, given, self.model, self.ctx)
        step.tool_latency_s = time.perf_counter() - t1
        for r in outcome.responses:
            step.calls += 1
            _add_usage(step, r)
        step.observation, step.output, step.thought = (
            outcome.observation,
            outcome.output,
            outcome.reason,
        )
        if outcome.focus is not None:
            step.arguments["object"] = outcome.focus.id
            if action == "object_select":
                self.selected.append(outcome.focus.id)
        if outcome.error_kind is not None:
            step.error_kind, step.error = outcome.error_kind, outcome.error
            self._not_informative(step, frame, action)
            return None
        t2 = time.perf_counter()
        judgement, response, error = await s.reasoner.judge(
            spec.phase, frame.query, outcome.observation, self.model
        )
        step.calls += 1
        step.reasoner = response.text
        _add_usage(step, response)
        step.llm_latency_s += time.perf_counter() - t2
        if judgement is None:
            assert error is not None
            step.error_kind, step.error = error.kind, str(error)
            self._not_informative(step, frame, action)
            return None
        step.verdict, step.extracted = judgement.verdict, judgement.answer
        if judgement.verdict == "not_informative":
            self._not_informative(step, frame, action)
            return None
        return self._advance(step, frame, stack, action, outcome, can_answer=spec.answers)

    def _not_informative(self, step: Step, frame: Frame, action: str) -> None:
        frame.tried.append(action)
        step.backtrack = True

    def _advance(
        self,
        step: Step,
        frame: Frame,
        stack: list[Frame],
        action: str,
        outcome: ActionOutcome,
        *,
        can_answer: bool,
    ) -> str | None:
        """After an informative or answerable output: finish, or push the next state (an
        action that cannot answer, such as object_select, only ever pushes)."""
        answer = step.extracted
        frame.tried.append(action)  # coming back to this state, try something else
        focus = outcome.focus or frame.focus
        finding = (
            f"{action}: {answer}"
            if answer
            else f"{action}: {_clip(outcome.observation, NOTE_CHARS)}"
        )
        self.findings.append(finding)
        notes = [*frame.notes, finding]
        if not can_answer:
            answer = None
        if answer and frame.phase == "visual" and not self.d.visual_only:
            self.answers.append(("visual", answer))
            query = self.d.fill(answer) if "#" in self.d.knowledge else self.d.knowledge
            stack.append(Frame(action, query, "knowledge", focus, notes))
            return None
        if answer:
            self.answers.append((frame.phase, answer))
            if step.verdict == "answerable":
                step.finish = answer
                return answer
        stack.append(Frame(action, frame.query, frame.phase, focus, notes))
        return None

    async def _best_evidence(self, why: str) -> str:
        step = self.s._begin(
            self.trace, self.ctx, "ANSWER", f"{why}: answering from the best evidence"
        )
        step.forced = True
        final = [a for phase, a in self.answers if phase == "knowledge" or self.d.visual_only]
        if final:
            step.router = "best evidence"  # the latest answer drawn, no model call
            answer = final[-1]
            step.observation = f"the latest answer the reasoner drew: {answer}"
        else:
            evidence = "\n".join(f"- {f}" for f in self.findings) or self.context.render()
            t0 = time.perf_counter()
            request = LLMRequest(
                messages=(Message("user", best_evidence_prompt(self.question, evidence)),),
                max_tokens=48,
                temperature=0.0,
            )
            response = await self.model.complete(request)
            step.llm_latency_s = time.perf_counter() - t0
            step.raw = response.text
            _add_usage(step, response)
            answer = (
                " ".join(response.text.strip().splitlines()[0].split())
                if response.text.strip()
                else ""
            )
            step.observation = "answered by the model from the evidence gathered"
        step.finish = answer
        AvisSystem._end(step, self.ctx)
        return answer


# -- factories -----------------------------------------------------------------------------


def settings_from(config: Any) -> AvisSettings:
    names = str(config.get("avis.object_names", "") or "")
    return AvisSettings(
        max_steps=int(config.get("avis.max_steps", 10)),
        max_tries_per_state=int(config.get("avis.max_tries_per_state", 5)),
        max_objects=int(config.get("avis.max_objects", 4)),
        object_names=tuple(n.strip() for n in names.split(",") if n.strip()),
    )


def _graph_of(bench: Workbench, autonomous: bool) -> TransitionGraph:
    from hammr.avis.graph import autonomous_graph, default_graph, load_graph

    path = str(bench.config.get("avis.graph", "") or "")
    if path:
        base = bench.config.path.parent if bench.config.path is not None else Path.cwd()
        file = Path(path) if Path(path).is_absolute() else base / path
        # a custom action may call any tool of the configuration, an MCP server's included
        graph = load_graph(file, [t.name for t in bench.agents.tools])
    else:
        graph = default_graph()
    return autonomous_graph(graph.actions) if autonomous else graph


def _build(bench: Workbench, *, autonomous: bool) -> AvisSystem:
    from hammr.factory import grammar_setting

    graph = _graph_of(bench, autonomous)
    grammar = grammar_setting(bench.config)
    # avis.autonomous_examples = false: the paper's no-graph baseline (descriptions only)
    bare = autonomous and not bool(bench.config.get("avis.autonomous_examples", True))
    paper = _paper_prompts(bench.config)
    index, prepare = _image_index(bench)
    runner = ActionRunner(
        graph.actions, {t.name: t for t in bench.agents.tools}, index, grammar=grammar
    )
    actions: Mapping[str, ActionSpec] = graph.actions
    examples: Mapping[str, Sequence[ShownExample]] | None = None if bare else PLANNER_EXAMPLES
    if paper is not None:
        actions = {
            name: replace(spec, description=paper.descriptions.get(name, spec.description))
            for name, spec in graph.actions.items()
        }
        if examples is not None and paper.planner_examples:
            given = {
                a: [VerbatimExample(t) for t in ts] for a, ts in paper.planner_examples.items()
            }
            examples = {**examples, **given}
    return AvisSystem(
        graph,
        runner,
        planner=Planner(actions, examples=examples, grammar=grammar),
        reasoner=Reasoner(grammar=grammar, paper=paper),
        settings=settings_from(bench.config),
        name="avis-autonomous" if autonomous else "avis",
        prepare_index=prepare,
    )


def _paper_prompts(config: Any) -> PaperPrompts | None:
    """``avis.prompts = "paper"``: the paper's reasoner format, with the texts of
    ``avis.prompt_file`` where one is named (ConfigError, one line, when it cannot be used)."""
    from hammr.avis.paper_prompts import PaperPrompts, PromptFileError, read_prompt_file
    from hammr.config import ConfigError

    if str(config.get("avis.prompts", "hammr")) != "paper":
        return None
    file = str(config.get("avis.prompt_file") or "")
    if not file:
        return PaperPrompts()
    try:
        return read_prompt_file(Path(file).expanduser())
    except PromptFileError as e:
        raise ConfigError(str(e)) from None


def _image_index(bench: Workbench) -> tuple[ImageSearch | None, Any]:
    source = str(bench.config.get("avis.image_index", "") or "")
    if not source:
        return None, None
    from hammr.avis.index_search import IndexSearch

    base = bench.config.path.parent if bench.config.path is not None else Path.cwd()
    path = Path(source) if Path(source).is_absolute() else base / source
    search = IndexSearch(path, bench.backends.get("similarity"))
    return search, search.prepare


def avis_system(bench: Workbench) -> AvisSystem:
    """``--system avis``: the planner under the configured (or bundled) transition graph."""
    return _build(bench, autonomous=False)


def autonomous_system(bench: Workbench) -> AvisSystem:
    """``--system avis-autonomous``: the same system with every action allowed everywhere."""
    return _build(bench, autonomous=True)
