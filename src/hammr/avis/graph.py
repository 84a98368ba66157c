"""AVIS's transition graph as data: which actions the planner may choose after which.

A graph file is TOML::

    description = "..."
    [edges]                      # state -> the actions allowed next
    START = ["object_select", "vqa"]
    object_select = ["vqa", "image_search"]
    vqa = ["web_search", "llm_qa"]

    [actions.read_text]          # optional: any tool of the library as an action
    tool = "OCR"                 # the library tool it calls
    description = "..."          # what the planner reads about it
    phase = "visual"             # which reasoner prompt judges its output
    answers = true               # may its output answer a query

The states are ``START`` and one per action (the state an action leads to, once its output
was informative). A graph is checked when it is read; every error names the file and the
key: an unknown action, a state that cannot be reached from START, no path from START to an
action that can answer.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from hammr.agents.spec import SpecError
from hammr.toml_file import TomlFileError, read_toml

START = "START"
Phase = Literal["visual", "knowledge"]
PHASES: tuple[Phase, ...] = ("visual", "knowledge")


class GraphError(SpecError):
    """A graph file is wrong; the message names the file and the key (a SpecError, so the
    commands that build systems report it as the configuration mistake it is)."""


@dataclass(frozen=True)
class ActionSpec:
    """One action the planner can choose: what it is told about it, and how it is judged."""

    name: str
    description: str
    phase: Phase
    answers: bool = True
    """Whether the reasoner may find this action's output answers a query (object_select
    only picks a region, so it never answers)."""
    tool: str | None = None
    """For an action over a library tool (a graph's ``[actions.NAME]``): the tool's name."""


BUILTIN_ACTIONS: dict[str, ActionSpec] = {
    a.name: a
    for a in (
        ActionSpec(
            "object_select",
            "Choose one of the detected objects (or the whole image) to look at more closely; "
            "good when the query is about one particular thing in the picture.",
            "visual",
            answers=False,
        ),
        ActionSpec(
            "identical_image_search",
            "Find copies of this picture (or of the chosen object) in the image collection and "
            "read their titles; good when the query is about the whole scene or a famous "
            "place, artwork or product.",
            "visual",
        ),
        ActionSpec(
            "image_search",
            "Find pictures that look like the chosen object and read their titles and "
            "captions; good when more clues about what the object is would help.",
            "visual",
        ),
        ActionSpec(
            "vqa",
            "Ask a simple question about what is visible (colour, count, what something is "
            "doing) to a visual question answering model.",
            "visual",
        ),
        ActionSpec(
            "web_search",
            "Search the web (or the knowledge base) with a text query; good when the query "
            "needs facts that are not in the picture.",
            "knowledge",
        ),
        ActionSpec(
            "llm_qa",
            "Ask a language model a text question, using what has been found so far; good "
            "for common knowledge or for reading an answer out of gathered text.",
            "knowledge",
        ),
    )
}
"""The six actions of the paper, with our own descriptions."""


@dataclass(frozen=True)
class TransitionGraph:
    edges: Mapping[str, tuple[str, ...]]
    actions: Mapping[str, ActionSpec]
    description: str = ""
    source: str = "<graph>"
    """Where it was read from (the file, or 'default' / 'autonomous')."""
    _reachable: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def candidates(self, state: str, tried: Iterable[str] = ()) -> list[str]:
        """The actions allowed at ``state`` that were not tried there yet, in graph order."""
        done = set(tried)
        return [a for a in self.edges.get(state, ()) if a not in done]

    def states(self) -> list[str]:
        return [START, *self.actions]

    def to_toml(self, header: str = "") -> str:
        """The graph as a file :func:`load_graph` reads back (custom actions included)."""
        out = [f"# {line}" if line else "#" for line in header.splitlines()]
        if self.description:
            out.append(f"description = {_toml_str(self.description)}")
        out += ["", "[edges]"]
        for state in self.states():
            if state in self.edges:
                targets = ", ".join(_toml_str(a) for a in self.edges[state])
                out.append(f"{_key(state)} = [{targets}]")
        for name, spec in self.actions.items():
            if spec.tool is None:
                continue
            out += ["", f"[actions.{_key(name)}]", f"tool = {_toml_str(spec.tool)}"]
            out.append(f"description = {_toml_str(spec.description)}")
            out.append(f'phase = "{spec.phase}"')
            out.append(f"answers = {'true' if spec.answers else 'false'}")
        return "\n".join(out) + "\n"


def _toml_str(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _key(name: str) -> str:
    bare = name.replace("_", "").replace("-", "").isalnum()
    return name if bare else _toml_str(name)


def default_graph_path() -> Path:
    return Path(str(resources.files("hammr.avis").joinpath("default_graph.toml")))


def default_graph() -> TransitionGraph:
    """The bundled graph: the visual phase first, then the knowledge phase."""
    text = resources.files("hammr.avis").joinpath("default_graph.toml").read_text()
    return parse_graph(tomllib.loads(text), "default_graph.toml")


def autonomous_graph(actions: Mapping[str, ActionSpec] | None = None) -> TransitionGraph:
    """The baseline without a transition graph: every action allowed at every state."""
    specs = dict(actions if actions is not None else BUILTIN_ACTIONS)
    every = tuple(specs)
    edges = {state: every for state in [START, *specs]}
    return _checked(TransitionGraph(edges, specs, "every action at every state", "autonomous"))


def load_graph(path: str | Path, tools: Iterable[str] | None = None) -> TransitionGraph:
    """The graph in a TOML file. ``tools``: the names of the library's tools, which custom
    actions may call (None: any name accepted). GraphError for any mistake."""
    p = Path(path)
    try:
        data = read_toml(p)
    except FileNotFoundError:
        raise GraphError(f"{p}: no such graph file") from None
    except OSError as e:
        raise GraphError(f"{p}: cannot read the graph file ({e.strerror or e})") from None
    except TomlFileError as e:
        raise GraphError(str(e)) from None
    return parse_graph(data, str(p), tools)


def parse_graph(
    data: Mapping[str, Any], source: str, tools: Iterable[str] | None = None
) -> TransitionGraph:
    """The graph a parsed TOML document describes (see the module docstring)."""
    unknown = set(data) - {"description", "edges", "actions"}
    if unknown:
        raise GraphError(
            f"{source}: unknown key {sorted(unknown)[0]!r} (a graph has description, "
            "[edges] and [actions.NAME] tables)"
        )
    description = data.get("description", "")
    if not isinstance(description, str):
        raise GraphError(f"{source}: description should be a string")
    actions = dict(BUILTIN_ACTIONS)
    known_tools = set(tools) if tools is not None else None
    raw_actions = data.get("actions", {})
    if not isinstance(raw_actions, dict):
        raise GraphError(f"{source}: [actions] should be a table of [actions.NAME] tables")
    for name, spec in raw_actions.items():
        actions[name] = _custom_action(name, spec, source, known_tools)
    edges_raw = data.get("edges")
    if not isinstance(edges_raw, dict) or not edges_raw:
        raise GraphError(f"{source}: [edges] is missing or empty (state = [actions allowed next])")
    known = ", ".join(actions)
    edges: dict[str, tuple[str, ...]] = {}
    for state, targets in edges_raw.items():
        if state != START and state not in actions:
            raise GraphError(
                f"{source}: edges.{state}: unknown state {state!r} (states are {START} and "
                f"the actions: {known})"
            )
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise GraphError(f"{source}: edges.{state} should be a list of action names")
        for i, target in enumerate(targets):
            if target not in actions:
                raise GraphError(
                    f"{source}: edges.{state}[{i}]: unknown action {target!r} (known: {known}; "
                    "declare others as [actions.NAME] with a tool)"
                )
        if len(set(targets)) != len(targets):
            raise GraphError(f"{source}: edges.{state} names an action twice")
        edges[state] = tuple(targets)
    used = {a for targets in edges.values() for a in targets} | set(edges) - {START}
    specs = {n: s for n, s in actions.items() if n in used}
    return _checked(TransitionGraph(edges, specs, description, source))


def _custom_action(name: str, spec: Any, source: str, tools: set[str] | None) -> ActionSpec:
    where = f"{source}: actions.{name}"
    if name == START or name in BUILTIN_ACTIONS:
        raise GraphError(f"{where}: {name!r} is a built-in name; choose another")
    if not isinstance(spec, dict):
        raise GraphError(f"{where} should be a table with tool and description")
    extra = set(spec) - {"tool", "description", "phase", "answers"}
    if extra:
        raise GraphError(f"{where}: unknown key {sorted(extra)[0]!r}")
    tool, description = spec.get("tool"), spec.get("description")
    if not isinstance(tool, str) or not tool:
        raise GraphError(f"{where}.tool: name the library tool this action calls")
    if tools is not None and tool not in tools:
        raise GraphError(f"{where}.tool: unknown tool {tool!r} (known: {', '.join(sorted(tools))})")
    if not isinstance(description, str) or not description.strip():
        raise GraphError(f"{where}.description: say what the action is good for")
    phase = spec.get("phase", "visual")
    if phase not in PHASES:
        raise GraphError(f"{where}.phase should be 'visual' or 'knowledge', got {phase!r}")
    answers = spec.get("answers", True)
    if not isinstance(answers, bool):
        raise GraphError(f"{where}.answers should be true or false")
    return ActionSpec(name, description.strip(), phase, answers, tool)


def _checked(graph: TransitionGraph) -> TransitionGraph:
    """Reachability from START and a path to an answering action, or GraphError."""
    src = graph.source
    if START not in graph.edges or not graph.edges[START]:
        raise GraphError(f"{src}: edges.{START} is missing or empty: the planner cannot begin")
    reachable = {START}
    frontier = [START]
    while frontier:
        for target in graph.edges.get(frontier.pop(), ()):
            if target not in reachable:
                reachable.add(target)
                frontier.append(target)
    for state in graph.edges:
        if state not in reachable:
            raise GraphError(f"{src}: edges.{state}: state {state!r} cannot be reached from START")
    if not any(graph.actions[a].answers for a in reachable - {START}):
        reached = sorted(reachable - {START})
        which = "it cannot" if len(reached) == 1 else "none of them can"
        raise GraphError(
            f"{src}: no path to an answer: from {START} only {', '.join(reached)} can be "
            f"reached, and {which} answer a query"
        )
    return TransitionGraph(graph.edges, graph.actions, graph.description, src, frozenset(reachable))
