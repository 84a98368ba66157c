"""What an agent did, step by step: JSON round-trip (images beside it by hash), tree print."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from hammr.input_file import read_input_bytes
from hammr.output_file import output_target, write_output
from hammr.terminal_text import safe_text
from hammr.values import Box, Entity, Image, Page, Value

if TYPE_CHECKING:
    from hammr.backends.llm.base import LLMResponse

Status = Literal[
    "running", "finished", "step_limit", "llm_failure", "error", "timeout", "cancelled", "no_answer"
]
"""'timeout': an evaluation's deadline ended the run (the trace holds what was done);
'cancelled': a run inside it that was cut short with it; 'no_answer': the model ended the
run with a reply that is not an answer (empty, the question or hammr's own instruction
repeated: see :mod:`hammr.non_answers`), or a program system's model wrote a program (or
reply) that could not run to its answer (:data:`hammr.programs.language.MODEL_MISTAKES`);
like a wrong answer, a result rather than a failure to ask again."""
Verdict = Literal["not_informative", "informative", "answerable"]
"""An AVIS reasoner's label of one tool output (its paper's three)."""
JSON = Any

IMAGE_DIR = "images"
FORMAT = "hammr-trace/1"


class TraceFormatError(ValueError):
    """A trace document has a missing, unknown or wrongly typed field; the message names it."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_is_int, "an integer"),
    "int?": (lambda v: v is None or _is_int(v), "an integer or null"),
    "number": (_is_number, "a number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "str?": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "object?": (lambda v: v is None or isinstance(v, dict), "an object or null"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "status": (lambda v: v in get_args(Status), "one of " + ", ".join(get_args(Status))),
    "verdict?": (
        lambda v: v is None or v in get_args(Verdict),
        "null or one of " + ", ".join(get_args(Verdict)),
    ),
    "any": (lambda v: True, "any JSON value"),
}

_USAGE_FIELDS = {
    "prompt_tokens": "int",
    "completion_tokens": "int",
    "cached_prompt_tokens": "int?",
}
_STEP_FIELDS = {
    "index": "int",
    "thought": "str",
    "raw": "str",
    "action": "str?",
    "tool": "str?",
    "arguments": "object",
    "output_var": "str?",
    "output": "any",
    "observation": "str",
    "error_kind": "str?",
    "error": "str?",
    "finish": "str?",
    "llm_latency_s": "number",
    "tool_latency_s": "number",
    "usage": "object",
    "cached": "bool",
    "forced": "bool",
    "router": "str?",
    "line": "int?",
    "state": "str?",
    "candidates": "list",
    "verdict": "verdict?",
    "extracted": "str?",
    "reasoner": "str",
    "backtrack": "bool",
    "calls": "int?",
    "tool_calls": "int",
    "tool_cached_calls": "int",
    "tool_usage": "object",
    "retrieved": "list",
    "child": "object?",
}
_TOOL_FIELDS = ("tool_calls", "tool_cached_calls", "tool_usage")
"""A step's record of the model calls made for it (written only where there were any)."""
_TRACE_FIELDS = {
    "format": "str",
    "image_dir": "str",
    "agent": "str",
    "question": "str",
    "inputs": "object",
    "steps": "list",
    "answer": "str?",
    "status": "status",
    "error": "str?",
    "model": "str",
    "latency_s": "number",
    "notes": "list",
}


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _checked(
    doc: Any, where: str, kinds: Mapping[str, str], required: tuple[str, ...]
) -> dict[str, Any]:
    """``doc`` itself once every field is known, of its kind, and the required ones present."""
    if not isinstance(doc, dict):
        raise TraceFormatError(f"{where or 'the document'} should be an object, got {_show(doc)}")
    for key in required:
        if key not in doc:
            raise TraceFormatError(f"{_at(where, key)} is missing")
    for key, value in doc.items():
        kind = kinds.get(key)
        if kind is None:
            raise TraceFormatError(f"unknown field {_at(where, key)} (known: {', '.join(kinds)})")
        check, what = _KINDS[kind]
        if not check(value):
            raise TraceFormatError(f"{_at(where, key)} should be {what}, got {_show(value)}")
    return doc


def _show(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def encode_value(value: Value, images: dict[str, Image]) -> JSON:
    """A JSON-safe form of a value; images are referenced by content hash and kept in ``images``."""
    if isinstance(value, Image):
        h = value.content_hash()
        images[h] = value
        out: dict[str, Any] = {"$image": h, "size": [value.width, value.height]}
        if value.crop_box is not None:
            out["region"] = value.crop_box.xywh()
            out["zoom"] = value.zoom
        return out
    if isinstance(value, Box):
        box: dict[str, Any] = {"$box": value.xywh()}
        if value.label is not None:
            box["label"] = value.label
        if value.score is not None:
            box["score"] = value.score
        return box
    if isinstance(value, Page):
        return {"$page": value.title, "url": value.url, "words": len(value.text.split())}
    if isinstance(value, Entity):
        return {"$entity": value.name, "score": value.score}
    if isinstance(value, list | tuple):
        return [encode_value(v, images) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v, images) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


@dataclass
class StepUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int | None = None
    """Of ``prompt_tokens``, those the server took from its prefix (KV) cache rather than
    evaluating them; None where the backend does not say (older traces, most fakes)."""

    @classmethod
    def of(cls, response: LLMResponse) -> StepUsage:
        """The usage of one model reply."""
        return cls(
            response.usage.prompt_tokens,
            response.usage.completion_tokens,
            response.cached_prompt_tokens,
        )

    def plus(self, other: StepUsage, *, first: bool = False) -> StepUsage:
        """This usage and ``other``'s summed. ``first``: this one counts no reply yet, so
        the sum's cached prompt tokens are ``other``'s; otherwise they are summed while both
        say how many (None as soon as one reply did not)."""
        had, new = self.cached_prompt_tokens, other.cached_prompt_tokens
        return StepUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            new if first else (had + new if had is not None and new is not None else None),
        )


@dataclass
class Step:
    index: int
    thought: str = ""
    raw: str = ""
    """The model's text exactly as returned."""
    action: str | None = None
    tool: str | None = None
    arguments: dict[str, JSON] = field(default_factory=dict)
    output_var: str | None = None
    output: JSON = None
    observation: str = ""
    error_kind: str | None = None
    error: str | None = None
    finish: str | None = None
    llm_latency_s: float = 0.0
    tool_latency_s: float = 0.0
    usage: StepUsage = field(default_factory=StepUsage)
    cached: bool = False
    forced: bool = False
    """The last step, where the agent was asked to (and under a grammar could only) finish."""
    router: str | None = None
    """Set when a router, not the LLM, chose this step's action (no LLM call was made)."""
    line: int | None = None
    """The program line (0-based) this step ran, when a program made it (MulProg); its
    module is :attr:`tool` and the line's text :attr:`action`."""
    state: str | None = None
    """AVIS: the transition-graph state this step was planned at (``START`` or the action
    whose state it is); set on every action step, so analyses find them by it."""
    candidates: list[str] = field(default_factory=list)
    """AVIS: the actions the planner could choose from (graph[state] minus those tried)."""
    verdict: Verdict | None = None
    """AVIS: the reasoner's label of this step's output."""
    extracted: str | None = None
    """AVIS: the answer the reasoner drew from the output, when it drew one."""
    reasoner: str = ""
    """AVIS: the reasoner's text exactly as returned."""
    backtrack: bool = False
    """AVIS: after this step the planner chose again at an earlier or the same state (the
    output was not informative, or the state had nothing left to try)."""
    calls: int | None = None
    """Model calls this step made, where not one (AVIS: planner, object selector and
    reasoner in one step); None counts as one, or none for a router's or a program's step.
    Its (their) usage is :attr:`usage`; the calls its tools made are :attr:`tool_calls`."""
    tool_calls: int = 0
    """Model calls made *for* this step beside its own: by the tool it ran (AnswerWithContext,
    DecomposeQuestion, a word problem's equation, a VLM-backed tool, a MulProg module, the
    image description an AVIS CONTEXT step builds) and by the advisors asked before its
    model call (MuSE's viewpoint choice), whatever model answered them. A child agent's calls
    are not here but in :attr:`child`. As for the step's own call, a reply replayed from
    hammr's response cache counts (see :attr:`tool_cached_calls`). Measured by
    :mod:`hammr.backends.llm.meter`."""
    tool_cached_calls: int = 0
    """Of :attr:`tool_calls`, the replies replayed from hammr's response cache (no server
    call was made for them)."""
    tool_usage: StepUsage = field(default_factory=StepUsage)
    """The tokens of :attr:`tool_calls`, summed (their cached prompt tokens while every reply
    said how many)."""
    retrieved: list[dict[str, JSON]] = field(default_factory=list)
    """What memory gave this step: one record per retrieval (an advisor's before the model
    call, a memory tool's after it), each with ``source``, ``policy`` and ``text`` and, for
    experience search, the ``hits`` with their scores (see :mod:`hammr.advice`)."""
    child: Trace | None = None

    def to_dict(self) -> dict[str, JSON]:
        d = {k: v for k, v in asdict(self).items() if k != "child"}
        if not self.tool_calls:  # most steps: the document stays as it was without them
            for key in _TOOL_FIELDS:
                del d[key]
        d["child"] = self.child.to_dict() if self.child is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, JSON], where: str = "step") -> Step:
        """The step ``d`` describes; TraceFormatError names the first bad field (``where``
        is the step's place in the document, e.g. ``steps[2]``)."""
        d = dict(_checked(d, where, _STEP_FIELDS, ("index",)))
        child = d.pop("child", None)
        usage = _checked(d.pop("usage", {}), _at(where, "usage"), _USAGE_FIELDS, ())
        # absent in traces written before tools' model calls were counted: none recorded
        tool_usage = _checked(d.pop("tool_usage", {}), _at(where, "tool_usage"), _USAGE_FIELDS, ())
        step = cls(**d, usage=StepUsage(**usage), tool_usage=StepUsage(**tool_usage))
        step.child = Trace.from_dict(child, _at(where, "child")) if child is not None else None
        return step


@dataclass
class Trace:
    agent: str
    question: str
    inputs: dict[str, JSON] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    answer: str | None = None
    status: Status = "running"
    error: str | None = None
    model: str = ""
    latency_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    """What the system adapted to the model or configuration it ran on (worked examples
    left out to fit the context, modules withheld for want of a backend, ...)."""
    images: dict[str, Image] = field(default_factory=dict, compare=False, repr=False)

    # -- derived figures ------------------------------------------------------------------

    # Every model call of the run is counted once: a step's own call(s) (usage), the calls
    # made for it by its tool and advisors (tool_usage), and a child agent's in its trace.

    @property
    def prompt_tokens(self) -> int:
        return sum(s.usage.prompt_tokens + s.tool_usage.prompt_tokens for s in self.steps) + sum(
            s.child.prompt_tokens for s in self.steps if s.child
        )

    @property
    def completion_tokens(self) -> int:
        return sum(
            s.usage.completion_tokens + s.tool_usage.completion_tokens for s in self.steps
        ) + sum(s.child.completion_tokens for s in self.steps if s.child)

    @property
    def llm_calls(self) -> int:
        # a router's decision and a program line are made by code, not by a model call
        own = sum(
            s.calls if s.calls is not None else int(s.router is None and s.line is None)
            for s in self.steps
        )
        tools = sum(s.tool_calls for s in self.steps)
        return own + tools + sum(s.child.llm_calls for s in self.steps if s.child)

    def errors(self) -> list[tuple[str, Step]]:
        """Every step with an error in this trace and its children, as (agent, step)."""
        found = [(self.agent, s) for s in self.steps if s.error_kind]
        for s in self.steps:
            if s.child is not None:
                found.extend(s.child.errors())
        return found

    def all_images(self) -> dict[str, Image]:
        out = dict(self.images)
        for s in self.steps:
            if s.child is not None:
                out.update(s.child.all_images())
        return out

    # -- JSON ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, JSON]:
        return {
            "agent": self.agent,
            "question": self.question,
            "inputs": self.inputs,
            "steps": [s.to_dict() for s in self.steps],
            "answer": self.answer,
            "status": self.status,
            "error": self.error,
            "model": self.model,
            "latency_s": self.latency_s,
            **({"notes": list(self.notes)} if self.notes else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON], where: str = "") -> Trace:
        """The trace ``d`` describes (as :meth:`to_dict` or a saved file has it);
        TraceFormatError names the first missing, unknown or wrongly typed field."""
        d = _checked(d, where, _TRACE_FIELDS, ("agent", "question"))
        place = _at(where, "steps")
        steps = [Step.from_dict(s, f"{place}[{i}]") for i, s in enumerate(d.get("steps", []))]
        fields = {k: v for k, v in d.items() if k not in ("steps", "format", "image_dir")}
        notes = fields.get("notes", [])
        if not all(isinstance(n, str) for n in notes):
            raise TraceFormatError(f"{_at(where, 'notes')} must be a list of strings")
        return cls(**fields, steps=steps)

    def save(self, path: str | Path) -> Path:
        """Write the trace as JSON and every image it references into ``images/`` beside it.

        The JSON goes through :func:`hammr.output_file.open_output` (OutputError when it
        cannot be written): a regular file is replaced whole; a device or a pipe
        (``--trace /dev/stdout``) is written in place and gets the JSON alone, since the
        folder beside it (``/dev``) is no place for images. Images are OSError."""
        p = Path(path)
        _, in_place = output_target(p, "the trace file")
        img_dir = p.parent / IMAGE_DIR
        images = {} if in_place else self.all_images()
        if images:
            img_dir.mkdir(parents=True, exist_ok=True)
        for h, img in images.items():
            target = img_dir / f"{h}.png"
            if not target.exists():
                tmp = target.with_suffix(".tmp")
                img.pixels.save(tmp, format="PNG")
                tmp.replace(target)
        doc = {"format": FORMAT, "image_dir": IMAGE_DIR, **self.to_dict()}
        write_output(p, json.dumps(doc, indent=1, ensure_ascii=False), what="the trace file")
        return p

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """A trace saved by :meth:`save`. FileNotFoundError when there is none; other read
        errors are OSError; TraceFormatError (a ValueError) names the file and what is wrong."""
        p = Path(path)
        try:
            doc = json.loads(read_input_bytes(p).decode("utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"trace file not found: {p}") from None
        except UnicodeDecodeError:
            raise TraceFormatError(f"{p} is not a trace (not UTF-8 text; a binary file?)") from None
        except json.JSONDecodeError as e:
            raise TraceFormatError(f"{p} is not a trace (invalid JSON: {e.msg})") from None
        if not isinstance(doc, dict) or "steps" not in doc:
            raise TraceFormatError(
                f"{p} is not a hammr trace (a JSON object with 'steps', as `hammr ask --trace` "
                "writes)"
            )
        if doc.get("format", FORMAT) != FORMAT:
            raise TraceFormatError(
                f"{p}: trace format {_show(doc['format'])} is not {FORMAT}, the one this "
                "hammr reads"
            )
        try:
            trace = cls.from_dict(doc)
        except TraceFormatError as e:
            raise TraceFormatError(f"{p} is not a valid hammr trace: {e}") from None
        folder = p.parent.resolve()
        name = str(doc.get("image_dir", IMAGE_DIR))
        img_dir = _confined(p, folder, folder / name, name, "image_dir")
        if img_dir.is_dir():
            _attach_images(
                trace,
                img_dir,
                lambda path, ref: _confined(p, folder, path, ref, "image reference"),
            )
        return trace


def image_refs(value: JSON) -> list[str]:
    """The content hashes of every image an encoded value (or a whole trace dict) refers to."""
    if isinstance(value, dict):
        if "$image" in value:
            return [str(value["$image"])]
        return [h for v in value.values() for h in image_refs(v)]
    if isinstance(value, list):
        return [h for v in value for h in image_refs(v)]
    return []


def _confined(trace_file: Path, folder: Path, path: Path, ref: str, what: str) -> Path:
    """``path`` resolved (links followed), once it is inside ``folder``, the trace's own
    folder: a trace file is data, and what it names must not open files elsewhere (``../``,
    an absolute path, a link out). TraceFormatError names the trace file and ``ref``."""
    try:
        target = path.resolve()
        inside = target.is_relative_to(folder)
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long, a link loop
        inside = False
    if not inside:
        raise TraceFormatError(
            f"{trace_file}: {what} {_show(ref)} points outside the trace's folder "
            f"({folder}); refusing to read it"
        )
    return target


def _attach_images(trace: Trace, img_dir: Path, confine: Callable[[Path, str], Path]) -> None:
    """Attach every image the trace refers to from ``img_dir``; ``confine(path, ref)`` gives
    the checked path of a reference's file (it raises for one that leads out of the trace's
    folder)."""
    refs = image_refs(trace.inputs)
    for s in trace.steps:
        refs += image_refs(s.arguments) + image_refs(s.output)
        if s.child is not None:
            _attach_images(s.child, img_dir, confine)
    for h in refs:
        if h in trace.images:
            continue
        f = confine(img_dir / f"{h}.png", h)
        if f.exists():
            trace.images[h] = Image.open(f)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_calls_line(step: Step) -> str:
    """``tool's model calls: 2, 310+25 tokens (1 from hammr's cache)``: the calls made for
    the step by its tool (and its advisors)."""
    u = step.tool_usage
    cached = f" ({step.tool_cached_calls} from hammr's cache)" if step.tool_cached_calls else ""
    whose = "tool's" if step.tool else "advisors'"
    return (
        f"{whose} model calls: {step.tool_calls}, "
        f"{u.prompt_tokens}+{u.completion_tokens} tokens{cached}"
    )


def format_trace(trace: Trace, width: int = 160) -> str:
    """A readable tree of the run: one block per step, child agents indented under their step
    (safe for a terminal: see :mod:`hammr.terminal_text`)."""
    lines: list[str] = []

    def walk(t: Trace, prefix: str) -> None:
        head = f"{t.agent}: {t.question}"
        lines.append(prefix + _clip(head, width))
        for i, s in enumerate(t.steps):
            last = i == len(t.steps) - 1 and t.status == "finished" and s.finish is not None
            branch, inner = ("└─ ", "   ") if last else ("├─ ", "│  ")
            first = f"step {s.index + 1}"
            if s.router:
                first += f"  [router: {s.router}]"
            if s.state is not None:
                first += f"  [at {s.state}; could do: {', '.join(s.candidates)}]"
            if s.thought:
                first += f"  thought: {s.thought}"
            lines.append(prefix + branch + _clip(first, width))
            sub = prefix + inner
            if s.action:
                lines.append(sub + _clip(f"act: {s.action}", width))
            elif s.error_kind and s.raw:
                lines.append(sub + _clip(f"model wrote: {s.raw}", width))
            if s.tool_calls:
                lines.append(sub + _tool_calls_line(s))
            if s.child is not None:
                walk(s.child, sub + "  ")
            if s.observation:
                lines.append(sub + _clip(f"observe: {s.observation}", width))
            if s.verdict is not None:
                said = s.verdict.replace("_", " ") + (f": {s.extracted}" if s.extracted else "")
                lines.append(sub + _clip(f"reasoner: {said}", width))
            if s.backtrack:
                lines.append(sub + "↩ backtrack")
            if s.error_kind:
                lines.append(sub + f"[{s.error_kind}]")
            if s.finish is not None:
                lines.append(sub + _clip(f"finish: {s.finish}", width))
        if t.status != "finished":
            lines.append(prefix + f"└─ ended: {t.status}" + (f" ({t.error})" if t.error else ""))

    walk(trace, "")
    answer = trace.answer if trace.answer is not None else "(no answer)"
    lines.append(
        f"answer: {answer}   [{trace.llm_calls} LLM calls, "
        f"{trace.prompt_tokens}+{trace.completion_tokens} tokens, {trace.latency_s:.2f} s]"
    )
    # every field is a model's or a file's text: for a terminal, without escape sequences
    return safe_text("\n".join(lines))
