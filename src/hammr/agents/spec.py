"""An agent declared as data: one TOML file per agent, read into an :class:`AgentSpec`.

A file holds everything that makes an agent what it is, so agents can be improved one at a
time, and users add or override agents by dropping a file in ``[agents] dir``::

    name = "OCRReasoningAgent"
    role = "specialist"              # or "dispatcher": its tools are all the specialists
    question_type = "ocr_reasoning"  # the label routing is scored against
    description = "..."              # what callers (the dispatcher) see on the tool card
    inputs = { image = "image" }     # variables a caller hands over, besides the question
    tools = ["DetectObject", "CropImage", "OCR"]   # tool or agent names
    instructions = "..."
    examples = ["...", "..."]        # worked examples: full Question/Thought/Act/Observe traces
    naive_examples = ["..."]         # the same patterns without agent calls, for the flat
                                     # naive baseline (only when ``examples`` call agents)
    routing_examples = ["...", ...]  # labelled questions for the nearest-neighbour router
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from hammr.toml_file import TomlFileError, read_toml
from hammr.tools.base import ParamKind

Role = Literal["specialist", "dispatcher"]

_KEYS = {
    "name",
    "role",
    "question_type",
    "description",
    "inputs",
    "tools",
    "instructions",
    "examples",
    "naive_examples",
    "routing_examples",
    "max_steps",
}
_REQUIRED = ("name", "description", "instructions")
_INPUT_KINDS = ("image", "images", "point", "box", "boxes", "text")


class SpecError(ValueError):
    """An agent file is invalid; the message names the file and the key."""


@dataclass(frozen=True)
class AgentSpec:
    name: str
    description: str
    instructions: str
    tools: tuple[str, ...] = ()
    role: Role = "specialist"
    question_type: str | None = None
    inputs: Mapping[str, ParamKind] = field(default_factory=lambda: {"image": "image"})
    examples: tuple[str, ...] = ()
    naive_examples: tuple[str, ...] | None = None
    routing_examples: tuple[str, ...] = ()
    max_steps: int | None = None
    source: Path | None = None

    @property
    def routable(self) -> bool:
        """Offered to the dispatcher (and the router) as a specialist."""
        return self.role == "specialist" and self.question_type is not None

    @property
    def where(self) -> str:
        return str(self.source) if self.source else f"agent {self.name}"


def _strings(where: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: '{key}' must be a list of strings")
    return tuple(value)


def spec_from_dict(data: Mapping[str, Any], source: Path | None = None) -> AgentSpec:
    where = str(source) if source else f"agent {data.get('name', '?')}"
    unknown = set(data) - _KEYS
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(_KEYS))}"
        )
    for key in _REQUIRED:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise SpecError(f"{where}: '{key}' is required and must be a non-empty string")
    name = data["name"]
    if not name.isidentifier():
        raise SpecError(f"{where}: name {name!r} must be an identifier (letters, digits, _)")
    role = data.get("role", "specialist")
    if role not in get_args(Role):
        raise SpecError(f"{where}: role must be 'specialist' or 'dispatcher', not {role!r}")
    inputs = data.get("inputs", {"image": "image"})
    if not isinstance(inputs, dict) or not all(
        isinstance(k, str) and k.isidentifier() and v in _INPUT_KINDS for k, v in inputs.items()
    ):
        raise SpecError(
            f"{where}: 'inputs' must map variable names to kinds ({', '.join(_INPUT_KINDS)}), "
            f'e.g. {{ image = "image", point = "point" }}'
        )
    max_steps = data.get("max_steps")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise SpecError(f"{where}: 'max_steps' must be a positive integer")
    question_type = data.get("question_type")
    if question_type is not None and not isinstance(question_type, str):
        raise SpecError(f"{where}: 'question_type' must be a string")
    naive = data.get("naive_examples")
    return AgentSpec(
        name=name,
        description=" ".join(data["description"].split()),
        instructions=data["instructions"].strip(),
        tools=_strings(where, "tools", data.get("tools", [])),
        role=cast(Role, role),
        question_type=question_type,
        inputs=cast(dict[str, ParamKind], dict(inputs)),
        examples=tuple(e.strip() for e in _strings(where, "examples", data.get("examples", []))),
        naive_examples=None
        if naive is None
        else tuple(e.strip() for e in _strings(where, "naive_examples", naive)),
        routing_examples=_strings(where, "routing_examples", data.get("routing_examples", [])),
        max_steps=max_steps,
        source=source,
    )


def load_spec(path: Path) -> AgentSpec:
    try:
        data = read_toml(path)
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror or e}") from None
    except TomlFileError as e:
        raise SpecError(str(e)) from None
    return spec_from_dict(data, path)


def load_specs(folder: Path) -> list[AgentSpec]:
    """Every ``*.toml`` in ``folder``, in file-name order."""
    if not folder.is_dir():
        raise SpecError(f"agents folder {folder} does not exist or is not a folder")
    return [load_spec(p) for p in sorted(folder.glob("*.toml"))]


BUILTIN_DIR = Path(__file__).parent / "specs"


def builtin_specs() -> list[AgentSpec]:
    return load_specs(BUILTIN_DIR)
