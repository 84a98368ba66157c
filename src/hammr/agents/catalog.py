"""The agents of a HAMMR system, built from their files: specialists, dispatcher, naive baseline.

The same files make both systems the paper compares (its Table 3): HAMMR, where the
dispatcher's tools are the specialists and specialists may call each other, and the naive
generic ReAct agent, one flat agent holding the union of the specialists' tools, instructions
and worked examples. So the two differ only in structure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from hammr.agents.spec import AgentSpec, SpecError, builtin_specs, load_specs
from hammr.agents.worked_examples import outline
from hammr.config import Config


class HabitArguments(TypedDict):
    unknown_tool_ends_run: bool
    refuse_repeats: bool
    finish_on_last_step: bool


@dataclass(frozen=True)
class Habits:
    """How every ReAct agent of a configuration treats two habits of models: a call of a tool
    that does not exist (``agent.unknown_tool``) and loops (``agent.loop_guard``: refuse an
    action already run on the same inputs, and let the last step only finish); and which
    specialists the dispatcher is offered."""

    unknown_tool_ends_run: bool = False
    loop_guard: bool = True
    offer_all: bool = False
    """The dispatcher is offered every specialist (``agent.dispatcher_offers = 'all'``)."""

    @classmethod
    def from_config(cls, cfg: Config) -> Habits:
        return cls(
            cfg.get("agent.unknown_tool") == "end",
            bool(cfg.get("agent.loop_guard")),
            cfg.get("agent.dispatcher_offers") == "all",
        )

    def agent_kwargs(self) -> HabitArguments:
        """The :class:`~hammr.agent.ReActAgent` arguments they are."""
        return {
            "unknown_tool_ends_run": self.unknown_tool_ends_run,
            "refuse_repeats": self.loop_guard,
            "finish_on_last_step": self.loop_guard,
        }


if TYPE_CHECKING:  # the agent runtime is imported to build agents, not to read their files
    from hammr.agent import ReActAgent
    from hammr.backends.llm.base import LLM
    from hammr.tools.base import Tool

Setting = Literal["tools_only", "with_vqa"]
SETTINGS: tuple[str, ...] = ("auto", "tools_only", "with_vqa")
VQA_TOOL = "VQA"
NAIVE_NAME = "NaiveGenericAgent"

NAIVE_INSTRUCTIONS = """\
You answer any kind of question about images by calling tools. First work out what kind of
question it is, then follow the guidance and the worked examples for that kind."""


@dataclass
class AgentCatalog:
    """Agent specs by name, in order: the built-in files, then a user folder's (same name
    replaces a built-in, so one agent can be improved without touching the others)."""

    specs: dict[str, AgentSpec] = field(default_factory=dict)

    @classmethod
    def load(cls, extra_dir: Path | None = None) -> AgentCatalog:
        catalog = cls({s.name: s for s in builtin_specs()})
        if extra_dir is not None:
            for spec in load_specs(extra_dir):
                catalog.specs[spec.name] = spec
        catalog.check()
        return catalog

    @classmethod
    def from_config(cls, cfg: Config) -> AgentCatalog:
        """The built-in agents plus those of the folder named by ``[agent] dir``."""
        folder = str(cfg.get("agent.dir") or "")
        return cls.load(Path(folder).expanduser() if folder else None)

    # -- the parts --------------------------------------------------------------------------

    @property
    def dispatcher(self) -> AgentSpec | None:
        found = [s for s in self.specs.values() if s.role == "dispatcher"]
        return found[0] if found else None

    @property
    def specialists(self) -> list[AgentSpec]:
        return [s for s in self.specs.values() if s.routable]

    def labelled_questions(self) -> list[tuple[str, AgentSpec]]:
        """Every question labelled with its specialist: each file's routing_examples and the
        questions of its worked examples (what the neighbour router learns from)."""
        return [
            (q, spec)
            for spec in self.specialists
            for q in (*spec.routing_examples, *(outline(e).question for e in spec.examples))
        ]

    def by_question_type(self) -> dict[str, str]:
        """question type -> the specialist that answers it."""
        return {s.question_type: s.name for s in self.specialists if s.question_type}

    def tool_names(self, spec: AgentSpec, setting: Setting = "tools_only") -> tuple[str, ...]:
        """The tools an agent gets: the dispatcher gets every specialist; in the with-VQA
        setting (the paper's section 4.4) every specialist also gets VQA."""
        if spec.role == "dispatcher":
            return tuple(s.name for s in self.specialists)
        names = spec.tools
        if setting == "with_vqa" and VQA_TOOL not in names:
            names = (*names, VQA_TOOL)
        return names

    def check(self) -> None:
        """Structural checks that need every spec: one dispatcher, no cycles, known types."""
        dispatchers = [s.name for s in self.specs.values() if s.role == "dispatcher"]
        if len(dispatchers) > 1:
            raise SpecError(f"more than one dispatcher agent: {', '.join(dispatchers)}")
        types: dict[str, str] = {}
        for s in self.specialists:
            assert s.question_type is not None
            if s.question_type in types:
                raise SpecError(
                    f"{s.where}: question_type {s.question_type!r} is already answered by "
                    f"{types[s.question_type]}; give each specialist its own type"
                )
            types[s.question_type] = s.name
        self._order(self.specs)

    def _order(self, wanted: Iterable[str]) -> list[str]:
        """Agent names with every agent after the agents it calls (depth-first)."""
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name: str, path: tuple[str, ...]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "active":
                cycle = " -> ".join((*path[path.index(name) :], name))
                raise SpecError(f"agents call each other in a cycle: {cycle}")
            state[name] = "active"
            for t in self.tool_names(self.specs[name]):
                if t in self.specs:
                    visit(t, (*path, name))
            state[name] = "done"
            order.append(name)

        for name in wanted:
            visit(name, ())
        return order

    # -- building ---------------------------------------------------------------------------

    def build(
        self,
        tools: Iterable[Tool],
        *,
        setting: Setting = "tools_only",
        llm: LLM | None = None,
        grammar: bool | None = None,
        max_steps: int = 8,
        only: Iterable[str] | None = None,
        override_steps: bool = False,
        max_tokens: int = 256,
        habits: Habits | None = None,
    ) -> dict[str, ReActAgent]:
        """ReActAgents for ``only`` (default: every spec) and the agents they call.

        ``max_steps`` is the limit of an agent whose file sets none; with ``override_steps``
        (a limit the user chose: ``--max-steps``, or ``[agent] max_steps`` in the config) it
        is every agent's, the dispatcher's fixed 4 included."""
        from hammr.agent import ReActAgent

        available = {t.name: t for t in tools}
        agents: dict[str, ReActAgent] = {}
        for name in self._order(only if only is not None else self.specs):
            spec = self.specs[name]
            members: list[Tool] = []
            for t in self.tool_names(spec, setting):
                if t in agents:
                    members.append(agents[t])
                elif t in available:
                    members.append(available[t])
                else:
                    raise SpecError(
                        f"{spec.where}: unknown tool {t!r}; tools: {', '.join(available)}; "
                        f"agents: {', '.join(self.specs)}"
                    )
            agents[name] = ReActAgent(
                name=spec.name,
                description=spec.description,
                instructions=spec.instructions,
                tools=members,
                examples=spec.examples,
                llm=llm,
                max_steps=steps_of(spec, max_steps, override_steps),
                inputs=spec.inputs,
                max_tokens=max_tokens,
                **(habits or Habits()).agent_kwargs(),
                grammar=grammar,
                **dispatcher_options(spec, members),
            )
        return agents

    def leaf_tools(self, spec: AgentSpec, setting: Setting = "tools_only") -> list[str]:
        """The plain tools an agent uses, directly or through the agents it calls."""
        out: list[str] = []
        for t in self.tool_names(spec, setting):
            for leaf in self.leaf_tools(self.specs[t], setting) if t in self.specs else [t]:
                if leaf not in out:
                    out.append(leaf)
        return out

    def naive_examples(self, spec: AgentSpec) -> tuple[str, ...]:
        if spec.naive_examples is not None:
            return spec.naive_examples
        calls = {t for e in spec.examples for t in outline(e).tools_called if t in self.specs}
        if calls:
            raise SpecError(
                f"{spec.where}: its examples call agents ({', '.join(sorted(calls))}); give "
                "'naive_examples' with the same reasoning in plain tools for the naive baseline"
            )
        return spec.examples

    def naive(
        self,
        tools: Iterable[Tool],
        *,
        setting: Setting = "tools_only",
        llm: LLM | None = None,
        grammar: bool | None = None,
        max_steps: int = 8,
        override_steps: bool = False,
        max_tokens: int = 256,
        habits: Habits | None = None,
    ) -> ReActAgent:
        """The naive generic ReAct agent: every specialist's tools, guidance and examples in
        one flat prompt (the paper's baseline, its section 3.2)."""
        from hammr.agent import ReActAgent

        available = {t.name: t for t in tools}
        names: list[str] = []
        guidance = [NAIVE_INSTRUCTIONS]
        per_type: list[tuple[str, ...]] = []
        inputs: dict[str, str] = {}
        for spec in self.specialists:
            for t in self.leaf_tools(spec, setting):
                if t not in names:
                    names.append(t)
            guidance.append(
                f"{spec.question_type} questions ({spec.description}):\n{spec.instructions}"
            )
            per_type.append(self.naive_examples(spec))
            inputs.update(spec.inputs)
        # one example of each question type, then a second of each, ...: where a small
        # context holds only the first few, they still cover the types
        examples = [e for group in itertools.zip_longest(*per_type) for e in group if e]
        missing = [n for n in names if n not in available]
        if missing:
            raise SpecError(f"naive agent: unknown tool(s) {', '.join(missing)}")
        steps = max(
            (steps_of(s, max_steps, override_steps) for s in self.specialists),
            default=max_steps,
        )
        return ReActAgent(
            name=NAIVE_NAME,
            description="Answers any visual question with every tool and worked example at once.",
            instructions="\n\n".join(guidance),
            tools=[available[n] for n in names],
            examples=examples,
            llm=llm,
            max_steps=steps,
            inputs={"image": "image"},
            max_tokens=max_tokens,
            **(habits or Habits()).agent_kwargs(),
            grammar=grammar,
        )


def steps_of(spec: AgentSpec, max_steps: int, override: bool = False) -> int:
    """An agent's step limit: its file's own (``max_steps`` in the agent file), else
    ``max_steps``; with ``override``, ``max_steps`` whatever the file says."""
    if override:
        return max_steps
    return spec.max_steps or max_steps


def dispatcher_options(spec: AgentSpec, tools: Iterable[Tool]) -> dict[str, Any]:
    """A dispatcher gets the question as a variable to pass on, and ends with the answer of
    the specialist it called (the paper's dispatcher relays it, Fig. C.4)."""
    if spec.role != "dispatcher":
        return {}
    from hammr.agent import ReActAgent

    agents = [t.name for t in tools if isinstance(t, ReActAgent)]
    return {"question_variable": True, "final_tools": agents}


def resolve_setting(setting: str, backends: Mapping[str, object]) -> Setting:
    """'auto' -> with_vqa when a VQA backend is configured, else the paper's tools-only."""
    if setting not in SETTINGS:
        raise SpecError(f"agents.setting must be one of {', '.join(SETTINGS)}, not {setting!r}")
    if setting == "auto":
        return "with_vqa" if "vqa" in backends else "tools_only"
    return "with_vqa" if setting == "with_vqa" else "tools_only"
