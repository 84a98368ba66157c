"""One TOML file (plus environment variables) chooses the LLM and a backend per capability.

Where a value comes from, in order of precedence:
1. an environment variable ``HAMMR_<SECTION>__<KEY>`` (``HAMMR_LLM__BASE_URL``,
   ``HAMMR_TOOLS__OCR__LANG``); its text is read as a TOML value when it parses as one
   (``3``, ``true``, ``0.5``) and as a plain string otherwise; a ``base_url`` may list
   several replicas separated by commas (``http://a:8000/v1,http://b:8000/v1``);
2. the config file: ``--config PATH``, else ``$HAMMR_CONFIG``, else ``./hammr.toml`` if present;
3. the defaults below.

``[[tools.mcp]]`` is the one array of tables: each entry names an external MCP server whose
tools hammr's agents may call (:mod:`hammr.mcp_bridge.remote_tools`); :data:`MCP_KEYS` are
the keys an entry may have, checked here (the server is only contacted when tools are built).
"""

from __future__ import annotations

import copy
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hammr.backends.pool import parse_base_urls
from hammr.input_file import input_problem
from hammr.paper_settings import faithfulness
from hammr.toml_file import TomlFileError, read_toml

ENV_PREFIX = "HAMMR_"
DEFAULT_FILE = "hammr.toml"

DEFAULTS: dict[str, Any] = {
    "llm": {
        # embedded: llama.cpp in-process on the bundled SmolLM2 (offline, weak);
        # openai: any OpenAI-compatible server (vLLM, SGLang, Ollama, llama-server, OpenAI, Gemini)
        "backend": "embedded",
        "model": "",
        "base_url": "",
        "api_key_env": "OPENAI_API_KEY",
        "mode": "chat",
        "server": "auto",
        # seconds one request to a served model may take (each of max_retries tries): long
        # enough for a grammar-constrained request to a llama.cpp server on a loaded CPU
        # (535 s seen), as the OpenAI Python client's default; the embedded model runs in
        # this process and makes no request to time out (see `hammr config show`)
        "timeout_s": 600.0,
        "max_retries": 3,
        "temperature": 0.0,
        "max_tokens": 256,
        "grammar": "auto",
        # does the model see images? on: the agent shows it the input images and every image a
        # tool returns (a served VLM); off: it reads them as text ("image 640x480 ..."), as the
        # embedded SmolLM2 must; auto: on for an OpenAI-compatible chat server whose model name
        # is a known VLM family (Qwen-VL, LLaVA, InternVL, Gemma 3, GPT-4o, Gemini, ...: the
        # list is hammr.vision.VLM_FAMILIES), off otherwise. Within one run at most max_images
        # are shown (past that, new images are left out and the prompt says so; earlier turns
        # never change, so the server's prefix cache keeps working), each downscaled to at most
        # max_image_pixels (1_003_520 = 1280*28*28, Qwen2.5-VL's default)
        "vision": "auto",
        "max_images": 8,
        "max_image_pixels": 1_003_520,
        "model_path": "",
        "n_ctx": 8192,
        # the embedded model's CPU threads (0: one per physical core). llama.cpp's threads
        # wait for each other, spinning, after every operation: with more threads than idle
        # cores (any other busy program) a reply slows a hundredfold, so one by default
        # (benchmarks/embedded_threads.py); raise it on a machine with cores to spare
        "threads": 1,
        "cache": True,
        "cache_path": "",
    },
    "agent": {
        # steps per agent: set here (or --max-steps), it binds every agent, the dispatcher
        # included; left at the default, an agent file's own limit wins (the dispatcher's 4)
        "max_steps": 8,
        # a step calling a tool that does not exist: 'observe' (the error lists the tools and
        # the run goes on) or 'end' (the run ends with that error, as in HAMMR's Fig. C.5)
        "unknown_tool": "observe",
        # weak models loop: refuse an action already run on the same inputs, and let the last
        # step (or the one after two refusals) only finish; false: neither (HAMMR's harness)
        "loop_guard": True,
        # the LLM dispatcher is offered 'matching' specialists (those taking the question's
        # inputs: no two-image agent for one image) or 'all' of them (as in the HAMMR paper)
        "dispatcher_offers": "matching",
        # what `hammr ask` runs: 'hammr' (dispatcher + specialists), 'naive' (the flat
        # baseline) or any agent's name (see `hammr agents`)
        "system": "hammr",
        # a folder of extra agent files (*.toml); a file with a built-in agent's name replaces it
        "dir": "",
        # tools_only: VQA withheld from the GQA/TallyQA/TextVQA specialists (HAMMR section 4.2);
        # with_vqa: every specialist also gets VQA (section 4.4); auto: with_vqa if [tools.vqa]
        "setting": "auto",
        # who picks the specialist: 'llm' (the dispatcher agent, as in the paper),
        # 'neighbours' (nearest labelled questions), 'hybrid' (neighbours when their vote is
        # at least router_threshold, else the LLM) or 'auto' (hybrid with a served LLM;
        # neighbours on the embedded SmolLM2, which routes worse than chance)
        "router": "auto",
        "router_threshold": 0.7,
        "router_k": 8,
    },
    # a served vision-language model that capabilities with backend = "vlm" share
    "vlm": {
        "base_url": "",
        "model": "",
        "api_key_env": "OPENAI_API_KEY",
        "timeout_s": 600.0,  # a VLM served on a loaded CPU takes minutes
        "max_retries": 3,
        "box_format": "auto",
        "max_image_side": 1280,
        "size_multiple": 1,
        "concurrency": 4,
        "max_tokens": 512,
    },
    "images": {
        "max_pixels": 64_000_000,
    },
    # the AVIS systems (--system avis / avis-autonomous)
    "avis": {
        # a transition graph file (TOML; `hammr avis graph` shows the bundled one)
        "graph": "",
        # a folder of images or a JSONL of {image, title, caption} for the image searches
        "image_index": "",
        "max_steps": 10,
        "max_tries_per_state": 5,
        "max_objects": 4,
        # what the detector is asked for, comma-separated (default: its own classes)
        "object_names": "",
        # avis-autonomous's planner shows each action's worked examples (true); false: the
        # task descriptions only, as the paper's no-graph baseline ran
        "autonomous_examples": True,
        # the reasoner's prompt and reply format: hammr (a verdict line under a grammar) or
        # paper (the paper's format, Listings 5-7: think step by step, then "Answer is ..."
        # or "cannot be answered", read as its loop reads it; in our words unless
        # prompt_file holds the published texts: see hammr.avis.paper_prompts)
        "prompts": "hammr",
        "prompt_file": "",
    },
    # hammr eval and experiment run, where their flags say nothing
    "eval": {
        # who decides Encyclopedic-VQA answers no string matched (--judge): auto, bem, llm,
        # embedding or none
        "judge": "auto",
        # a local BEM checkpoint folder (--bem-checkpoint; the HAMMR paper's judge)
        "bem_checkpoint": "",
    },
    # the MulProg system (--system mulprog): what its planner's prompt holds
    "mulprog": {
        # 'nearest': the 8 worked examples nearest to the question (with a text embedder; all
        # of them without one); 'all': every worked example, the same for every question, as
        # the paper's prompt held its N = 16
        "examples": "nearest",
        # rounds that show the model its program's errors and ask for another (0: none)
        "repair_rounds": 1,
    },
    # memory of past runs (MuSEAgent's experience bank; the Reflexion and ExpeL baselines):
    # what --system muse / reflexion / expel read, and how the bank is searched
    "memory": {
        # the memory file: an experience bank (`hammr memory build`) for muse and for any agent
        # given SearchExperiences; a reflexion or expel memory for those systems
        "path": "",
        # agent: the agent calls SearchExperiences when it wants; every_step: a search is made
        # before each action (every step, MuSEAgent's section 3.3) and its guidance shown
        # with the state
        "policy": "agent",
        # breadth: hits per search; depth: viewpoints a deep search goes through
        "k": 3,
        "depth": 3,
        # how a deep search picks its viewpoints: upfront (all named before the first round,
        # in order) or per_round (MuSEAgent's Eqs. 5-6: each round's viewpoint chosen after
        # seeing the earlier rounds' hits, by the agent's model; SearchExperiences then
        # searches one viewpoint a call, calls in a row being the rounds)
        "deep_search": "upfront",
        # keep experiences the annotator scored at least this (0-10, inclusive; 0 keeps every
        # annotated experience)
        "min_score": 5,
        # correct (learned from success), incorrect (from failure) or both
        "sources": "both",
        # the viewpoints searched, in order, '+'-joined components separated by commas
        # (e.g. "question+images, question, task+history"); "": the bank's own order
        "viewpoints": "",
        # only experiences from datasets other than the question's (the out-of-domain setting)
        "out_of_domain": False,
        # one hit per source task (MuSEAgent ranks plain top-k by cosine similarity)
        "dedupe": True,
        # the hindsight model that scores and explains each explored step (`hammr memory
        # build`; its --annotator-config / --annotator-model go over these): a model name
        # ("" = the [llm] model), asked on the [llm] server unless annotator_base_url names
        # another OpenAI-compatible one (its API key read from annotator_api_key_env, ""
        # = [llm]'s). MuSEAgent's Table 5 compares four such models
        "annotator_model": "",
        "annotator_base_url": "",
        "annotator_api_key_env": "",
        # beyond the paper: HAMMR agents that also get SearchExperiences over the bank at
        # path (comma-separated agent names, or "all": every agent but the dispatcher)
        "agents": "",
    },
    "tools": {
        "ocr": {"backend": "tesseract", "lang": "eng"},
    },
}

_CHOICES: dict[str, tuple[str, ...]] = {
    "llm.backend": ("embedded", "openai"),
    "llm.mode": ("chat", "completion"),
    "llm.server": ("auto", "vllm", "sglang", "llamacpp", "ollama", "openai", "gemini"),
    "llm.grammar": ("auto", "on", "off"),
    "llm.vision": ("auto", "on", "off"),
    "agent.setting": ("auto", "tools_only", "with_vqa"),
    "agent.router": ("auto", "llm", "neighbours", "hybrid"),
    "agent.unknown_tool": ("observe", "end"),
    "agent.dispatcher_offers": ("matching", "all"),
    "vlm.box_format": ("auto", "absolute", "qwen2-1000", "normalized"),
    "eval.judge": ("auto", "bem", "llm", "embedding", "none"),
    "mulprog.examples": ("nearest", "all"),
    "avis.prompts": ("hammr", "paper"),
    "memory.policy": ("agent", "every_step"),
    "memory.deep_search": ("upfront", "per_round"),
    "memory.sources": ("correct", "incorrect", "both"),
}


_LIMITS: dict[str, tuple[Callable[[float], bool], str]] = {
    "llm.timeout_s": (lambda v: v > 0, "above 0 (seconds)"),
    "llm.max_retries": (lambda v: v >= 1, "at least 1 (1 = no retry)"),
    "llm.temperature": (lambda v: v >= 0, "0 or more"),
    "llm.max_tokens": (lambda v: v >= 1, "at least 1"),
    "llm.n_ctx": (lambda v: v >= 1, "at least 1 (tokens of context)"),
    "llm.threads": (lambda v: v >= 0, "0 (one per physical core) or more"),
    "llm.max_images": (lambda v: v >= 1, "at least 1 (images in one conversation)"),
    "llm.max_image_pixels": (lambda v: v >= 1, "at least 1 (pixels of one image)"),
    "agent.max_steps": (lambda v: v >= 1, "at least 1"),
    "agent.router_threshold": (lambda v: 0 <= v <= 1, "between 0 and 1"),
    "agent.router_k": (lambda v: v >= 1, "at least 1"),
    "vlm.timeout_s": (lambda v: v > 0, "above 0 (seconds)"),
    "vlm.max_retries": (lambda v: v >= 1, "at least 1 (1 = no retry)"),
    "vlm.max_image_side": (lambda v: v >= 1, "at least 1 (pixels)"),
    "vlm.size_multiple": (lambda v: v >= 1, "at least 1 (pixels)"),
    "vlm.concurrency": (lambda v: v >= 1, "at least 1"),
    "vlm.max_tokens": (lambda v: v >= 1, "at least 1"),
    "images.max_pixels": (lambda v: v >= 1, "at least 1"),
    "avis.max_steps": (lambda v: v >= 1, "at least 1"),
    "avis.max_tries_per_state": (lambda v: v >= 1, "at least 1"),
    "avis.max_objects": (lambda v: v >= 0, "0 or more"),
    "mulprog.repair_rounds": (lambda v: v >= 0, "0 or more"),
    "memory.k": (lambda v: v >= 1, "at least 1"),
    "memory.depth": (lambda v: v >= 1, "at least 1"),
    "memory.min_score": (lambda v: 0 <= v <= 10, "0-10"),
}
"""The range of every numeric setting, as (test, what the message says it should be)."""

URL_KEYS = ("llm.base_url", "vlm.base_url")
"""Settings holding one server URL or a list of replicas (a TOML array, or commas)."""

_KIND_NAMES = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and where it came from."""


MCP_TABLE = "mcp"
"""``[[tools.mcp]]``: an array of tables, one per MCP server, not a capability's table."""

MCP_KEYS: dict[str, str] = {
    "name": "a string: the prefix of its tools' names (lens: lens_FindEntity, ...)",
    "command": "a list of strings: the program and its arguments (stdio)",
    "url": "a string: the server's streamable HTTP endpoint, http(s)://HOST/PATH",
    "env": "a table of strings: environment variables for the command",
    "cwd": "a string: the command's working folder (relative to, and by default, the config's)",
    "headers": "a table of strings: HTTP headers sent to the url",
    "api_key_env": "a string: the environment variable whose value is sent as a Bearer token",
    "tools": "a list of strings: the server's tools to use (default: every one)",
    "timeout_s": "a number above 0: seconds one call may take",
    "max_result_chars": "a whole number of at least 1: the longest text result kept",
    "startup_timeout_s": "a number above 0: seconds to start and list the tools",
}
"""Every key of a ``[[tools.mcp]]`` entry, and what it takes."""

MCP_DEFAULTS: dict[str, Any] = {
    "timeout_s": 60.0,
    "max_result_chars": 20_000,
    "startup_timeout_s": 30.0,
}
"""The values of an entry's optional limits when it does not set them."""

_MCP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def setting_note(cfg: Config, key: str) -> str | None:
    """What a setting means for this configuration, where that depends on the backend (the
    timeouts), and for a setting a paper ran otherwise (:mod:`hammr.paper_settings`) whether
    its value here is the paper's; ``hammr config show`` prints it beside the value."""
    if key == "llm.timeout_s":
        if cfg.get("llm.backend") == "embedded":
            return (
                "not used: the embedded model runs in this process, with no request to time "
                "out; seconds per request to a served model (llm.backend = 'openai')"
            )
        return (
            "seconds per request to the served model (each of llm.max_retries = "
            f"{cfg.get('llm.max_retries')} tries)"
        )
    if key == "vlm.timeout_s":
        return "seconds per request to the served VLM ([vlm] base_url)"
    value = cfg.get(key)
    effective = effective_setting(cfg, key)
    paper = faithfulness(key, effective)
    if paper is not None and effective != value:
        return f"{value} here means {effective!r}: {paper}"
    return paper


def effective_setting(cfg: Config, key: str) -> Any:
    """What an 'auto' setting resolves to on this configuration, where the configuration
    alone says (agent.router, agent.setting); any other value as it is."""
    value = cfg.get(key)
    if value != "auto":
        return value
    if key == "agent.router":
        # the embedded model routes worse than chance (benchmarks/routing_accuracy.py), so
        # it only gets the neighbours' decisions
        return "neighbours" if cfg.get("llm.backend") == "embedded" else "hybrid"
    if key == "agent.setting":
        backend = str(cfg.get("tools.vqa.backend") or "none")
        return "tools_only" if backend == "none" else "with_vqa"
    return value


def flatten_settings(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys ("memory.k") for nested tables (memory = { k = 3 }), values as they are."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten_settings(v, key + "."))
        else:
            out[key] = v
    return out


def _set(data: dict[str, Any], dotted: str, value: Any, source: str) -> None:
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        nxt = node.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"{dotted} (from {source}): '{p}' is a value, not a section")
        node = nxt
    if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
        raise ConfigError(
            f"{dotted} = {value!r} (from {source}): {dotted} is a section ([{dotted}]) of "
            f"settings, not a value; set its keys, e.g. {dotted}.KEY"
        )
    node[parts[-1]] = value


def _parse_env(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


@dataclass
class Config:
    data: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for p in dotted.split("."):
            if not isinstance(node, dict) or p not in node:
                return default
            node = node[p]
        return node

    def section(self, dotted: str) -> dict[str, Any]:
        value = self.get(dotted, {})
        return dict(value) if isinstance(value, dict) else {}

    def items(self) -> list[tuple[str, Any, str]]:
        """(key, value, source) for every leaf, sorted by key."""
        flat = flatten_settings(self.data)
        return [(k, flat[k], self.sources.get(k, "default")) for k in sorted(flat)]


def _read_urls(cfg: Config) -> None:
    """Check every URL of the :data:`URL_KEYS`; several (an array, or a string with commas)
    become a list. A single string is kept as it is; "" means unset."""
    for key in URL_KEYS:
        value = cfg.get(key)
        if value == "":
            continue
        source = cfg.sources.get(key, "default")
        try:
            urls = parse_base_urls(value)
        except ValueError as e:
            raise ConfigError(f"{key} (from {source}): {e}") from None
        if not (isinstance(value, str) and len(urls) == 1):
            _set(cfg.data, key, list(urls), source)


def _read_switches(cfg: Config) -> None:
    """``llm.vision = true / false`` (TOML booleans, or HAMMR_LLM__VISION=true) mean "on" /
    "off"."""
    value = cfg.get("llm.vision")
    if isinstance(value, bool):
        _set(cfg.data, "llm.vision", "on" if value else "off", "")


def _validate(cfg: Config) -> None:
    for key, choices in _CHOICES.items():
        v = cfg.get(key)
        if v not in choices:
            where = cfg.sources.get(key, "default")
            raise ConfigError(f"{key} = {v!r} (from {where}) is not one of: {', '.join(choices)}")
    known = flatten_settings({k: v for k, v in DEFAULTS.items() if k != "tools"})
    for key, value, source in cfg.items():
        if key == f"tools.{MCP_TABLE}":
            _validate_mcp(value, source)
            continue
        if key.startswith(f"tools.{MCP_TABLE}."):
            raise ConfigError(
                f"{key} (from {source}): MCP servers are an array of tables, one per server: "
                "write [[tools.mcp]] (two brackets), not [tools.mcp]"
            )
        if key.startswith("tools."):
            _validate_tool_key(key, value, source)
            continue
        if key not in known:
            raise ConfigError(
                f"unknown setting {key} (from {source}); known settings: "
                + ", ".join(sorted(known))
            )
        default = known[key]
        if key in URL_KEYS:
            continue  # checked by _read_urls
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise ConfigError(
                f"{key} = {value!r} (from {source}) should be {_KIND_NAMES[type(default)]}"
            )
        limit = _LIMITS.get(key)
        if limit is not None:
            test, what = limit
            if not math.isfinite(value) or not test(value):
                raise ConfigError(f"{key} = {value!r} (from {source}) should be {what}")


def _validate_mcp(entries: Any, source: str) -> None:
    """``[[tools.mcp]]``: a list of tables, each with known keys of the right types, a name
    that can prefix a tool's name in a step, and exactly one of command and url."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(
            f"tools.mcp (from {source}) should be an array of tables, one per MCP server: "
            '[[tools.mcp]] name = "lens" command = ["python", "lens_server.py"] '
            '(or url = "http://127.0.0.1:9000/mcp")'
        )
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        name = entry.get("name")
        where = f"[[tools.mcp]] #{i + 1}" + (f" {name!r}" if isinstance(name, str) else "")
        where += f" (from {source})"
        unknown = sorted(set(entry) - set(MCP_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(MCP_KEYS)}"
            )
        if not isinstance(name, str) or not _MCP_NAME.fullmatch(name):
            raise ConfigError(
                f"{where}: name = {name!r} should be a letter then up to 31 letters, digits or "
                "underscores (it prefixes the server's tools' names: lens_FindEntity)"
            )
        if name in seen:
            raise ConfigError(f"{where}: name {name!r} is already used by entry #{seen[name]}")
        seen[name] = i + 1
        for key, value in entry.items():
            problem = _mcp_value_problem(key, value)
            if problem is not None:
                raise ConfigError(f"{where}: {key} = {value!r} should be {MCP_KEYS[key]}{problem}")
        has_command, has_url = "command" in entry, "url" in entry
        if has_command == has_url:
            raise ConfigError(
                f"{where}: give exactly one of command (a program hammr starts and talks to "
                "over stdio) and url (a streamable HTTP server)"
                + (", not both" if has_command else "")
            )
        misplaced = ("headers", "api_key_env") if has_command else ("env", "cwd")
        wrong = [k for k in misplaced if k in entry]
        if wrong:
            kind = "command" if has_command else "url"
            raise ConfigError(
                f"{where}: {wrong[0]} does not apply to a server given by {kind} "
                "(env and cwd are for command; headers and api_key_env for url)"
            )


def _mcp_value_problem(key: str, value: Any) -> str | None:
    """None when ``value`` fits ``[[tools.mcp]]`` key ``key``, else "" or a note to add."""

    def strings(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    def table(v: Any) -> bool:
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())

    def number(v: Any) -> bool:
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        return ok and math.isfinite(v) and v > 0

    if key == "command":
        if isinstance(value, str):
            return f' (split it: command = ["{value.split(" ")[0]}", ...])'
        return None if strings(value) and value and value[0] else ""
    if key == "url":
        ok = isinstance(value, str) and value.startswith(("http://", "https://"))
        return None if ok else ""
    if key in ("env", "headers"):
        return None if table(value) else ""
    if key == "tools":
        return None if strings(value) and value else ""
    if key in ("timeout_s", "startup_timeout_s"):
        return None if number(value) else ""
    if key == "max_result_chars":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if ok else ""
    return None if isinstance(value, str) and value else ""  # name, cwd, api_key_env


def _validate_tool_key(key: str, value: Any, source: str) -> None:
    """``tools.CAPABILITY.KEY`` only: the backend checks the key and its value when built."""
    parts = key.split(".")
    if len(parts) == 2:
        raise ConfigError(
            f"{key} = {value!r} (from {source}) should be a table: [{key}] with backend = ... "
            "and the backend's settings"
        )
    if len(parts) > 3:
        raise ConfigError(
            f"{key} (from {source}) is nested too deep: tool settings are "
            f"tools.CAPABILITY.KEY, e.g. [{'.'.join(parts[:2])}] {parts[2]} = ..."
        )


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        return read_toml(file)
    except OSError as e:
        raise ConfigError(f"cannot read the config file {file}: {e.strerror or e}") from None
    except TomlFileError as e:
        raise ConfigError(str(e)) from None


def _no_config(file: Path, problem: str) -> str:
    if problem == "does not exist":
        return f"config file not found: {file}"
    return f"config file {file} {problem}"


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Defaults, then the file, then the environment; a bad value raises ConfigError naming it."""
    env = os.environ if env is None else env
    data = copy.deepcopy(DEFAULTS)
    sources: dict[str, str] = {}
    file: Path | None = None
    if path is not None:
        file = Path(path)
        problem = input_problem(file)
        if problem is not None:
            raise ConfigError(_no_config(file, problem))
    elif env.get("HAMMR_CONFIG"):
        file = Path(env["HAMMR_CONFIG"])
        problem = input_problem(file)
        if problem is not None:
            raise ConfigError(_no_config(file, problem) + " (from $HAMMR_CONFIG)")
    elif Path(DEFAULT_FILE).is_file():
        file = Path(DEFAULT_FILE)
    if file is not None:
        loaded = _read_toml(file)
        for k, v in flatten_settings(loaded).items():
            _set(data, k, v, str(file))
            sources[k] = str(file)
    for name, text in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name or name == "HAMMR_CONFIG":
            continue
        dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        _set(data, dotted, _parse_env(text), f"${name}")
        sources[dotted] = f"${name}"
    cfg = Config(data, sources, file)
    _read_urls(cfg)
    _read_switches(cfg)
    _validate(cfg)
    return cfg


def with_settings(cfg: Config, settings: Mapping[str, Any], source: str) -> Config:
    """A copy of ``cfg`` with dotted ``settings`` applied over it (an experiment's run
    overrides; ``source`` says where they came from), checked as a loaded file is: an
    unknown key or a bad value raises ConfigError naming the key and ``source``."""
    known = flatten_settings({k: v for k, v in DEFAULTS.items() if k != "tools"})
    data = copy.deepcopy(cfg.data)
    sources = dict(cfg.sources)
    for key, value in settings.items():
        if key not in known and not key.startswith("tools."):
            raise ConfigError(
                f"unknown setting {key} (from {source}); `hammr config show` lists them"
            )
        _set(data, key, value, source)
        sources[key] = source
    out = Config(data, sources, cfg.path)
    _read_urls(out)
    _read_switches(out)
    _validate(out)
    return out
