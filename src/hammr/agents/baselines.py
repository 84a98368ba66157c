"""Two of HAMMR's reference points, as systems: the oracle-routed specialists and the bare VLM.

- ``hammr-oracle`` (HAMMR's Table 2): each question goes straight to the specialist of its
  ground-truth question type; no dispatcher runs, so the score is what the specialists reach
  when routing is perfect. The type comes with the call (:attr:`ToolContext.task`, which an
  evaluation fills from the sample's suite entry; ``hammr ask --question-type``). The mapping
  from type to specialist is the agent files' own (``question_type`` in each file).
- ``vlm`` (HAMMR's Table 5, the workshop paper's Table 1): the configured VQA backend
  (``[tools.vqa]``) answers the question in one call, with no agent and no LLM. A question
  with a point gets the point drawn on the image; one with a second image gets both images
  side by side, left then right; so one call always suffices.

Both leave a trace of the usual shape (one step, its call, its answer) for ``hammr replay``
and the viewer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image as PILImage

from hammr.agent import AgentResult, ReActAgent, traced
from hammr.agents.routing import RoutedDispatcher, RouteDecision
from hammr.agents.spec import SpecError
from hammr.backends.llm.meter import step_meter
from hammr.tools.base import ToolContext, ToolError, unavailable_reason
from hammr.tools.point_tools import MarkPoint
from hammr.tools.vision_tools import VQA
from hammr.trace import Step, Trace, encode_value
from hammr.values import Image, Value

if TYPE_CHECKING:
    from hammr.systems import Workbench

ORACLE = "hammr-oracle"
VLM = "vlm"


# -- hammr-oracle ----------------------------------------------------------------------------


@dataclass
class OracleDecision(RouteDecision):
    """The route the sample's own question type gives."""

    question_type: str = ""

    def explain(self) -> str:
        return f"oracle routing: question type {self.question_type!r} goes to {self.agent}"


class OracleDispatcher(RoutedDispatcher):
    """HAMMR's specialists with the dispatcher replaced by the ground truth: the question type
    in ``ctx.task`` picks the specialist. Its trace has the routed dispatcher's shape (one
    step calling the specialist, marked ``router: oracle``, no LLM call)."""

    def __init__(self, dispatcher: ReActAgent, by_type: Mapping[str, str]) -> None:
        super().__init__(dispatcher, None, mode="llm")
        self.name = ORACLE
        self.by_type = {t: a for t, a in by_type.items() if a in self.specialists}

    def problem(self, question_type: str | None) -> str | None:
        """Why a question of ``question_type`` cannot be routed (None: it can)."""
        known = ", ".join(sorted(self.by_type))
        if not question_type:
            return (
                f"{ORACLE} sends each question to the specialist of its question type, and "
                f"none was given (hammr ask --question-type TYPE; one of: {known})"
            )
        if question_type not in self.by_type:
            return (
                f"{ORACLE}: no specialist answers question type {question_type!r}; "
                f"known types: {known}"
            )
        return None

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        inputs = dict(inputs or {})
        question_type = (ctx.task or ("", ""))[1]
        started = time.perf_counter()
        trace, step = self._start_trace(
            question, inputs, ctx, f"oracle routing by question type {question_type!r}", "oracle"
        )
        problem = self.problem(question_type)
        agent = self.by_type.get(question_type)
        if problem is None and agent is not None:
            missing = [n for n in self.specialists[agent].inputs if n not in inputs]
            if missing:
                problem = (
                    f"question type {question_type!r} goes to {agent}, which needs "
                    f"{', '.join(missing)}; the question came without"
                )
        if problem is not None:
            step.error_kind, step.error = "bad_arguments", problem
            step.observation = f"#ERROR#: {problem}"
            trace.status, trace.error = "error", problem
            return AgentResult(None, trace)
        decision = OracleDecision(agent, "oracle", confidence=1.0, question_type=question_type)
        return await self._run_routed(question, inputs, decision, ctx, trace, started)


def oracle_system(bench: Workbench) -> OracleDispatcher:
    """The ``hammr-oracle`` system: HAMMR's specialists (same setting, tools and step limits
    as ``hammr``) routed by each question's ground-truth type."""
    agents = bench.agents
    spec = agents.catalog.dispatcher
    if spec is None:
        raise SpecError("no dispatcher agent (role = 'dispatcher') among the agent files")
    return OracleDispatcher(agents.agents[spec.name], agents.catalog.by_question_type())


# -- vlm -------------------------------------------------------------------------------------

POINT_NOTE = "(The point the question refers to is marked on the image with a circle.)"
TWO_IMAGES_NOTE = "(Two images are shown side by side: the left image, then the right image.)"


def side_by_side(left: Image, right: Image) -> Image:
    """One image holding ``left`` then ``right``, both scaled to the taller one's height."""
    height = max(left.pixels.height, right.pixels.height)
    parts = [
        im.pixels.convert("RGB").resize(
            (max(1, round(im.pixels.width * height / im.pixels.height)), height)
        )
        for im in (left, right)
    ]
    canvas = PILImage.new("RGB", (sum(p.width for p in parts), height), "white")
    canvas.paste(parts[0], (0, 0))
    canvas.paste(parts[1], (parts[0].width, 0))
    return Image(canvas)


def vqa_view(question: str, inputs: Mapping[str, Value]) -> tuple[Image, str]:
    """The one image and the question the VQA backend gets for ``inputs``."""
    image = inputs.get("image")
    if not isinstance(image, Image):
        raise ToolError(f"{VLM} needs an input image (variable 'image')")
    point = inputs.get("point")
    if point is not None:
        marked = MarkPoint.fn(image, point)
        assert isinstance(marked, Image)
        image, question = marked, f"{question} {POINT_NOTE}"
    second = inputs.get("image2")
    if isinstance(second, Image):
        image, question = side_by_side(image, second), f"{question} {TWO_IMAGES_NOTE}"
    return image, question


def backend_label(backend: Any) -> str:
    """What the trace names as the run's model: the backend's model, else its class."""
    for attr in ("model", "name"):
        value = getattr(backend, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(backend).__name__


class DirectVLM:
    """The question goes to the VQA backend as it is, in exactly one call."""

    name = VLM

    async def run(
        self,
        question: str,
        inputs: Mapping[str, Value] | None = None,
        *,
        ctx: ToolContext | None = None,
    ) -> AgentResult:
        ctx = ctx or ToolContext()
        inputs = dict(inputs or {})
        backend = ctx.backends.get("vqa")
        trace = Trace(agent=self.name, question=question, model=backend_label(backend))
        trace.inputs = {n: encode_value(v, trace.images) for n, v in inputs.items()}
        with traced(trace, ctx):
            step = Step(index=0, thought="the VQA backend answers directly", tool=VQA.name)
            step.router = "direct"  # the call is fixed: no model chose it
            trace.steps.append(step)
            t0 = time.perf_counter()
            try:
                image, asked = vqa_view(question, inputs)
                args: dict[str, Value] = {"image": image, "question": asked}
                step.action = "answer = VQA(image, question)"
                step.arguments = {k: encode_value(v, trace.images) for k, v in args.items()}
                with step_meter(step):  # the VQA backend's model call (a served VLM's)
                    result = await VQA.invoke(args, ctx)
            except ToolError as e:
                step.error_kind, step.error = e.kind, str(e)
                step.observation = f"#ERROR#: {e}"
                trace.status, trace.error = "error", str(e)
                return AgentResult(None, trace)
            finally:
                step.tool_latency_s = time.perf_counter() - t0
            answer = str(result.value)
            step.output_var, step.output = "answer", answer
            step.observation = f"{answer} (stored in 'answer')"
            step.finish = trace.answer = answer
            trace.status = "finished"
        return AgentResult(answer, trace)


def vlm_system(bench: Workbench) -> DirectVLM:
    """The ``vlm`` system; SpecError in one line when no VQA backend is configured."""
    if "vqa" not in bench.backends:
        why = unavailable_reason(bench.backends, "vqa")
        raise SpecError(
            f"the {VLM} system answers with the VQA backend, and "
            + (f"it could not be built: {why}" if why else "none is configured")
            + "; set [tools.vqa] backend = 'vlm' (a served VLM, with [vlm] base_url) or "
            "'blip2' in hammr.toml (`hammr tools` shows the backends)"
        )
    return DirectVLM()


__all__ = [
    "ORACLE",
    "VLM",
    "DirectVLM",
    "OracleDispatcher",
    "oracle_system",
    "side_by_side",
    "vlm_system",
]
