"""The Reflexion baseline (Shinn et al. 2023, as MuSEAgent's Table 2 runs it): verbal
reflections on failed exploration attempts, shown to the shared tool agent on similar
questions.

**Building** (:func:`build_reflections`, ``hammr memory reflect``): for every failed sample of
an exploration run (score below ``correct_at``) a model reads the trajectory, is told only
that the attempt failed (Reflexion's binary evaluator; never the right answer, so a
reflection cannot carry an answer to the evaluation) and writes a short reflection: what went
wrong and what to do differently. Each reflection is stored at once with its question's
embedding and task (:class:`~hammr.muse.trajectories.MemoryFile`), so an interrupted build
goes on where it stopped: samples that already have one are skipped. A reply that is not a
usable reflection is asked again with the error; one that stays unusable is recorded in the
file's ``calls`` table and the sample is left without a reflection (a later build retries it).

**Evaluation** (:func:`reflexion_system`, ``--system reflexion``): before the agent's first
step, :class:`ReflexionAdvisor` embeds the question and shows the ``memory.k`` (3) nearest
reflections, the question's own task first (see :func:`~hammr.muse.trajectories.nearest`),
in the task message. The step's ``retrieved`` record (source ``reflexion``) lists them with
their similarity and source sample.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hammr.advice import Advice, Situation
from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.backends.llm.base import LLM
from hammr.config import Config
from hammr.eval.store import RunStore
from hammr.memory.experiences import clip_text
from hammr.muse.agent import react_agent
from hammr.muse.trajectories import (
    BaselineError,
    Entry,
    MemoryFile,
    QuestionEmbedder,
    Trajectory,
    ask_strict,
    load_trajectories,
    nearest,
    question_embedder,
    render_trajectory,
)
from hammr.systems import Workbench

MIN_CHARS = 15
MAX_CHARS = 800

PROMPT = """\
You are coaching an agent that answers questions about images by calling visual tools
(detecting objects, zooming in, cropping, reading text). Below is one of its earlier
attempts{task}.

{trajectory}

Feedback: this attempt FAILED. Its final answer was judged wrong. You are not told the right
answer, and you should not try to guess it.

Write a short reflection the agent can use the next time it meets a similar question: in two
to four sentences, say what most likely went wrong (a step, a tool used badly or not at all,
an assumption never checked) and what it should do differently. Give advice about how to look
and check, not about this particular image.

Reply on one line, starting with "Reflection: "."""

GRAMMAR = f'root ::= "Reflection: " [^\\n]{{{MIN_CHARS},{MAX_CHARS}}}\n'
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reflection": {"type": "string"}},
    "required": ["reflection"],
    "additionalProperties": False,
}


def reflection_prompt(t: Trajectory) -> str:
    """What the reflector reads: the trajectory and that it failed (no ground truth)."""
    task = f" (task: {t.dataset}{' / ' + t.sub_task if t.sub_task else ''})"
    return PROMPT.format(task=task, trajectory=render_trajectory(t))


def parse_reflection(reply: str) -> str:
    """The reflection in a reply (a ``Reflection:`` line or ``{"reflection": ...}``);
    ValueError when there is none worth keeping."""
    text = reply.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"the JSON reply does not parse ({e.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("reflection"), str):
            raise ValueError('the JSON reply has no "reflection" text')
        text = data["reflection"]
    else:
        head, sep, rest = text.partition("Reflection:")
        if sep and not head.strip():
            text = rest
    flat = " ".join(text.split())
    if len(flat) < MIN_CHARS:
        raise ValueError(f"the reflection is empty or too short (under {MIN_CHARS} characters)")
    return clip_text(flat, MAX_CHARS)


@dataclass
class ReflectReport:
    """What a build did."""

    samples: int = 0
    """Trajectories read (finished samples with a trace)."""
    failed: int = 0
    """Failed samples (one reflection each)."""
    already: int = 0
    """Failed samples the file already had a reflection for."""
    made: int = 0
    unusable: dict[str, list[str]] = field(default_factory=dict)
    """Sample -> why its replies were rejected (left without a reflection)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Samples not read, by reason."""


async def build_reflections(
    store: RunStore,
    runs: list[str],
    memory: MemoryFile,
    llm: LLM,
    embedder: QuestionEmbedder,
    *,
    correct_at: float = 1.0,
    grammar: bool | None = None,
    attempts: int = 3,
    concurrency: int = 4,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[Trajectory, bool], None] | None = None,
) -> ReflectReport:
    """One reflection per failed sample of ``runs`` not yet in ``memory`` (see the module
    docstring). ``on_start(n)`` is told how many are to be made, ``on_done`` each outcome."""
    memory.check_embedder(embedder.name)
    loaded = load_trajectories(store, runs, correct_at=correct_at)
    failed = loaded.failed()
    report = ReflectReport(len(loaded.trajectories), len(failed), skipped=loaded.skipped)
    todo = [t for t in failed if not memory.has(t.id)]
    report.already = len(failed) - len(todo)
    if on_start is not None:
        on_start(len(todo))
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(t: Trajectory) -> None:
        async with limit:
            asked = await ask_strict(
                llm,
                reflection_prompt(t),
                parse_reflection,
                grammar=GRAMMAR,
                schema=SCHEMA,
                setting=grammar,
                max_tokens=400,
                attempts=attempts,
            )
            if asked.ok:
                vector = (await embedder.embed([t.question]))[0]
                entry = Entry(
                    t.id, t.run, t.dataset, t.sample_id, t.sub_task, t.question,
                    str(asked.value), llm.name,
                )  # fmt: skip
                memory.add(entry, vector, embedder.name)
                report.made += 1
            else:
                report.unusable[t.id] = asked.errors
                memory.record_call(f"reflect {t.id}", False, {"errors": asked.errors})
        if on_done is not None:
            on_done(t, asked.ok)

    await asyncio.gather(*(one(t) for t in todo))
    return report


# -- evaluation ---------------------------------------------------------------------------

HEADER = "Reflections from earlier attempts at similar questions:"


@dataclass
class ReflexionAdvisor:
    """Shows the nearest reflections in the task message (step 0 only)."""

    entries: list[Entry]
    vectors: np.ndarray
    embedder: QuestionEmbedder
    k: int = 3
    name: str = "reflexion"

    async def advise(self, situation: Situation) -> Advice | None:
        if situation.step != 0 or not self.entries:
            return None
        query = (await self.embedder.embed([situation.question]))[0]
        task = situation.ctx.task
        found = nearest(query, self.entries, self.vectors, self.k, task)
        text = "\n".join([HEADER, *(f"- {f.entry.text}" for f in found)])
        record = {
            "source": "reflexion",
            "policy": "advisor",
            "text": text,
            "query": situation.question,
            "task": list(task) if task else None,
            "reflections": [
                {
                    "text": f.entry.text,
                    "similarity": f.similarity,
                    "id": f.entry.id,
                    "source": f.entry.source(),
                    "task": list(f.entry.task),
                    "same_task": f.same_task,
                }
                for f in found
            ],
        }
        return Advice(text, record)


def memory_path(cfg: Config, system: str, make: str) -> str:
    """``memory.path``, or a SpecError saying how to make the file."""
    path = str(cfg.get("memory.path") or "")
    if not path:
        raise SpecError(
            f"--system {system} reads its memory from memory.path, which is not set: make one "
            f"from an exploration run (`hammr eval ... --split exploration --system react`, then "
            f"`{make}`) and pass it with --memory FILE (or set [memory] path)"
        )
    return path


def reflexion_memory(
    cfg: Config, backends: Mapping[str, Any]
) -> tuple[QuestionEmbedder, list[Entry], np.ndarray]:
    """What ``--system reflexion`` reads: the reflections of ``memory.path``, their vectors
    and the embedder that searches them; SpecError (one line) when memory.path is unset,
    is no reflexion memory (an empty file, a run store, another kind of memory) or was
    embedded otherwise. ``hammr systems`` checks a memory with it too
    (:func:`hammr.system_info.memory_problem`), so both say the same."""
    path = memory_path(cfg, "reflexion", "hammr memory reflect RUN -o reflexion.db")
    try:
        embedder = question_embedder(dict(backends), "--system reflexion")
        with MemoryFile(path, "reflexion", create=False) as memory:
            memory.check_embedder(embedder.name)
            entries, vectors = memory.entries()
    except BaselineError as e:
        raise SpecError(str(e)) from None
    return embedder, entries, vectors


def reflexion_system(bench: Workbench) -> ReActAgent:
    """The shared tool agent with the reflections of ``memory.path`` before its first step."""
    embedder, entries, vectors = reflexion_memory(bench.config, bench.backends)
    k = int(bench.config.get("memory.k", 3))
    return react_agent(bench, advisors=[ReflexionAdvisor(entries, vectors, embedder, k)])


__all__ = [
    "GRAMMAR",
    "HEADER",
    "SCHEMA",
    "ReflectReport",
    "ReflexionAdvisor",
    "build_reflections",
    "memory_path",
    "parse_reflection",
    "reflection_prompt",
    "reflexion_memory",
    "reflexion_system",
]
