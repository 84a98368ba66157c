"""The `hammr` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from hammr.cli_common import (
    HammrGroup,
    SystemsEpilogCommand,
    config_option,
    fail,
    require_question,
)
from hammr.terminal_text import echo, safe_console, safe_line, safe_markup, safe_text

if TYPE_CHECKING:
    from hammr.agents.routing import RouterKind
    from hammr.trace import Trace
    from hammr.values import Image

LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "avis": (
        "hammr.avis.avis_cli:avis",
        "AVIS: analyse its stored runs, learn a transition graph from them, check graph files.",
    ),
    "data": (
        "hammr.datasets.data_cli:data",
        "The datasets the papers' tables read: where each comes from, and what a data folder "
        "holds of them.",
    ),
    "errors": (
        "hammr.eval.errors_cli:errors_cmd",
        "Error analysis of stored runs: automatic counts, a sample to label, or Table 4.",
    ),
    "eval": (
        "hammr.eval.eval_cli:eval_cmd",
        "Evaluate a system on a suite; the results go to the run store as they come.",
    ),
    "experiment": (
        "hammr.experiments.experiment_cli:experiment",
        "Reproduce a paper's table or figure: list, show, run and report experiments.",
    ),
    "explain": (
        "hammr.eval.explain_cli:explain_cmd",
        "Grounded explanations of stored runs ([BOX] tokens linked to the boxes the run found), "
        "scored against a suite's reference explanations when one is given (MEVQA).",
    ),
    "kb": (
        "hammr.backends.kb.kb_cli:kb",
        "Build and search local knowledge bases (the 'kb' tool capability).",
    ),
    "mcp": (
        "hammr.mcp_bridge.mcp_cli:mcp_cmd",
        "Offer hammr's tools and systems to an MCP host (Model Context Protocol).",
    ),
    "memory": (
        "hammr.memory.memory_cli:memory",
        "Memory from past runs: MuSEAgent's experience bank (and the Reflexion and ExpeL "
        "baselines' memories).",
    ),
    "report": (
        "hammr.eval.eval_cli:report_cmd",
        "Print the results table of one or more runs (`hammr runs` lists them).",
    ),
    "runs": (
        "hammr.eval.eval_cli:runs_cmd",
        "List the stored evaluation runs: name, suite, system, samples done, mean score "
        "(FAILED where every sample, or more than half for one cause, failed), and failed "
        "samples (error, timeout or llm_failure; `hammr eval ...",
    ),
    "serve": (
        "hammr.serve.serve_cli:serve_cmd",
        "Answer OpenAI chat-completions requests with hammr's systems: each system is a model.",
    ),
    "view": (
        "hammr.web.web_cli:view_cmd",
        "Browse runs, compare two, filter samples and read one sample's trace in a browser.",
    ),
}
"""The commands defined in other modules: name -> ("module:attribute", summary). The module
is imported only when its command is run or its help shown; the summary (the command's
short help) is what `hammr --help` lists meanwhile. tests/test_cli_imports.py checks that each
summary is the command's own."""

EPILOG_ASK = """\b
Examples:
  hammr ask examples/plate.png "What is the licence plate number?"
  hammr ask photo.jpg "How many cars are there?" --show --trace out/trace.json
  hammr ask photo.jpg "What colour is the umbrella?" --system muse --memory bank.db
  HAMMR_LLM__BACKEND=openai HAMMR_LLM__BASE_URL=http://127.0.0.1:8000/v1 \\
    HAMMR_LLM__MODEL=Qwen/Qwen2.5-VL-7B-Instruct hammr ask photo.jpg "What is this?"

With no configuration, hammr runs offline on its embedded model (SmolLM2-135M through
llama.cpp, tool calls constrained by a grammar). It is tiny: expect the machinery to work,
not the answers to be good. Point [llm] in hammr.toml at a served model for real answers.

"""
"""The epilog of `hammr ask`; every system's name follows it (SystemsEpilogCommand adds them
when the help is shown: the registry is not read for every command)."""


@click.group(
    cls=HammrGroup,
    lazy_commands=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="hammr")
def main() -> None:
    """Answer visual questions with LLM agents that think, call vision tools and observe.

    Start with `hammr ask IMAGE "QUESTION"` (`hammr systems` lists the systems that may
    answer and whether each runs on this configuration, `hammr agents` HAMMR's agents,
    `hammr route` which one would). Evaluate with `hammr eval`, then read the results with
    `hammr report`, `hammr errors` and `hammr view`. See `hammr COMMAND --help` for each
    command; settings live in hammr.toml (see `hammr config show`).
    """


@main.command(cls=SystemsEpilogCommand, epilog=EPILOG_ASK)
@click.argument("image", type=click.Path(path_type=Path))
@click.argument("question")
@click.option(
    "--system",
    "--agent",
    "agent_name",
    help="Who answers: a system (listed below; `hammr systems` says what each needs and "
    "whether it runs on this configuration) or an agent's name from `hammr agents`. "
    "Default: agent.system (hammr). --agent is the same option.",
)
@click.option(
    "--memory",
    "memory_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The memory file (sets memory.path): an experience bank for --system muse or the "
    "agents of [memory] agents; the memory of --system reflexion or expel.",
)
@click.option(
    "--router",
    type=click.Choice(["llm", "neighbours", "hybrid"]),
    help="How hammr picks the specialist (default: agent.router).",
)
@config_option
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(path_type=Path),
    help="Save the full trace as JSON here (images go in images/ beside it).",
)
@click.option("--show", is_flag=True, help="Print every step as a tree after the answer.")
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    help="Step limit of every agent, the dispatcher included (default: agent.max_steps if "
    "set, else each agent file's own limit, else 8).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.option(
    "--image2",
    "image2",
    type=click.Path(path_type=Path),
    help="A second image, for two-image questions (variable 'image2'; IMAGE is the left one).",
)
@click.option(
    "--point",
    "point",
    type=str,
    metavar="X,Y",
    help="A point in IMAGE's pixels the question refers to (variable 'point').",
)
@click.option(
    "--question-type",
    metavar="TYPE",
    help="The question's type (e.g. ocr_reasoning; `hammr agents` lists each specialist's): "
    "--system hammr-oracle sends the question to that type's specialist.",
)
def ask(
    image: Path,
    question: str,
    agent_name: str | None,
    memory_path: Path | None,
    router: str | None,
    config_path: Path | None,
    trace_path: Path | None,
    show: bool,
    max_steps: int | None,
    no_cache: bool,
    image2: Path | None,
    point: str | None,
    question_type: str | None,
) -> None:
    """Answer QUESTION about the picture in IMAGE (QUESTION: at most 4,000 characters).

    By default the HAMMR dispatcher routes the question to a specialist agent (see
    `hammr agents`), which calls its tools. Prints the answer on stdout (and the step tree
    with --show). Exit status: 0 answered, 1 the agent gave no answer, 2 bad input or
    configuration.
    """
    from hammr.agents import SpecError
    from hammr.agents.names import HAMMR
    from hammr.agents.system import build_systems
    from hammr.backends.llm.base import LLMError, run_sync
    from hammr.config import ConfigError, load_config
    from hammr.factory import build_llm
    from hammr.systems import build_system
    from hammr.tools.base import ToolContext
    from hammr.trace import format_trace
    from hammr.values import Image, ImageLoadError

    require_question(question)
    try:
        cfg = load_config(config_path)
        if memory_path is not None:
            cfg.data["memory"]["path"] = str(memory_path)
            cfg.sources["memory.path"] = "--memory"
        max_pixels = int(cfg.get("images.max_pixels"))
        img = Image.open(image, max_pixels=max_pixels)
        inputs: dict[str, object] = {"image": img}
        if image2 is not None:
            inputs["image2"] = Image.open(image2, max_pixels=max_pixels)
        if point is not None:
            inputs["point"] = _parse_point(point, img)
        name = agent_name or str(cfg.get("agent.system"))
        if name == HAMMR and router:
            systems, backends = build_systems(cfg, max_steps)
            system: Any = systems.dispatcher(cast("RouterKind", router))
        else:
            system, backends = build_system(cfg, name, max_steps)
        llm = build_llm(cfg, cache=False if no_cache else None)
    except (ConfigError, ImageLoadError, LLMError, SpecError) as e:
        fail(str(e))
    from hammr.agents.baselines import OracleDispatcher

    if isinstance(system, OracleDispatcher) and (why := system.problem(question_type)):
        fail(why)
    task = ("", question_type) if question_type else None
    with _Progress(f"{system.name} is working on it") as progress:
        ctx = ToolContext(backends=backends, llm=llm, on_step=progress.on_step, task=task)
        try:
            result = run_sync(system.run(question, inputs, ctx=ctx))
        except LLMError as e:
            fail(str(e))
        except KeyboardInterrupt:
            fail("interrupted", code=130)
    trace = result.trace
    if show:
        echo(format_trace(trace), err=False)
        echo("")
    if result.answer is not None:
        echo(result.answer)
    # saved after printing: a path that cannot be written must not cost the model's work
    problem = _save_trace(trace, trace_path) if trace_path is not None else None
    if trace.status == "no_answer":  # the model's reply was not an answer; the error says why
        no_answer = safe_line(f"no answer: {trace.error}")
    else:
        no_answer = safe_text(f"no answer ({trace.status}: {trace.error})")
    if problem is not None:
        fail(problem if result.answer is not None else f"{problem}; and {no_answer}")
    if result.answer is None:
        echo(f"hammr: {no_answer}", err=True)
        sys.exit(1)


def _save_trace(trace: Trace, path: Path) -> str | None:
    """Save the trace at ``path``; None once saved, else one line saying why not."""
    if path.is_dir():
        return (
            f"cannot save the trace to {path}: it is a directory; "
            f"give a file name, e.g. --trace {path / 'trace.json'}"
        )
    blocker = next((d for d in reversed(path.parents) if d.exists() and not d.is_dir()), None)
    if blocker is not None:
        return (
            f"cannot save the trace to {path}: {blocker} is a file, not a folder; "
            "choose another --trace path"
        )
    from hammr.output_file import OutputError

    try:
        trace.save(path)
    except OutputError as e:
        return f"cannot save the trace to {path}: {e.reason}; choose another --trace path"
    except OSError as e:
        culprit = Path(e.filename) if e.filename else None
        at = f" ({culprit})" if culprit is not None and culprit in path.parents else ""
        return (
            f"cannot save the trace to {path}: {e.strerror or e}{at}; "
            "choose a --trace path in a writable folder"
        )
    return None


def _parse_point(text: str, image: Image) -> tuple[float, float]:
    try:
        x, y = (float(v) for v in text.replace(" ", "").split(","))
    except ValueError:
        raise click.BadParameter(
            f"expected X,Y such as 120,80; got {text!r}", param_hint="--point"
        ) from None
    if not (0 <= x < image.width and 0 <= y < image.height):
        raise click.BadParameter(
            f"({x:g}, {y:g}) is outside the {image.width}x{image.height} image",
            param_hint="--point",
        )
    return (x, y)


class _Progress:
    """A spinner on stderr naming the agent, step and action in flight (terminals only)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._status: Any = None

    def __enter__(self) -> _Progress:
        if sys.stderr.isatty():
            self._status = safe_console(stderr=True).status(self.text)
            self._status.__enter__()
        return self

    def on_step(self, agent: str, depth: int, step: Any) -> None:
        if self._status is not None:
            doing = step.action or ("thinking" if not step.raw else step.error_kind or "done")
            line = f"{'  ' * depth}{agent} · step {step.index + 1} · {doing}"
            self._status.update(safe_markup(safe_line(line)))  # the action is a model's text

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)


@main.command()
@click.argument("trace_file", type=click.Path(path_type=Path))
def replay(trace_file: Path) -> None:
    """Print a saved trace (from `hammr ask --trace`) as a step tree."""
    from hammr.trace import Trace, format_trace

    try:
        trace = Trace.load(trace_file)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot read the trace {trace_file}: {e.strerror or e}")
    echo(format_trace(trace))


@main.group()
def config() -> None:
    """Inspect the effective configuration."""


@config.command("show")
@config_option
def config_show(config_path: Path | None) -> None:
    """Print every setting, its value and where it came from (default, file, environment).

    Tool settings that are not set anywhere are listed too, as None with the source
    'default (unset)': the backend then uses its own default.
    """
    from hammr.backends.options import tool_settings
    from hammr.config import ConfigError, load_config, setting_note
    from hammr.eval.sample_budget import sample_timeout, work_counted

    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        fail(str(e))
    rows = {key: (value, source) for key, value, source in cfg.items()}
    for key, value in tool_settings(cfg.section("tools")).items():
        rows.setdefault(key, (value, "default" if value is not None else "default (unset)"))
    echo(f"# config file: {cfg.path or '(none; defaults and environment only)'}")
    for key in sorted(rows):
        value, source = rows[key]
        note = setting_note(cfg, key)
        echo(f"{key} = {value!r}    # {source}" + (f"; {note}" if note else ""))
    timeout = sample_timeout(cfg)
    counted = "wall-clock time, less time queued for a model slot" + (
        " and time the model's threads wait for a processor other programs hold"
        if work_counted(cfg) != "wall"
        else ""
    )
    limit = "no limit" if timeout is None else f"{timeout:g} s"
    echo(
        f"# hammr eval --timeout (work per question) on this backend: {limit} by default; "
        f"a limit counts {counted}"
    )


@main.command("tools")
@config_option
def tools_cmd(config_path: Path | None) -> None:
    """List every tool with its card and whether its capability has a backend now.

    The tools of the MCP servers in [[tools.mcp]] are listed too (each server is started to
    list them), with the server they come from."""
    from hammr.config import ConfigError, load_config
    from hammr.factory import build_backends
    from hammr.tools.library import configured_tools

    try:
        cfg = load_config(config_path)
        built = build_backends(cfg)
        tools = configured_tools(cfg)
    except ConfigError as e:
        fail(str(e))
    for t in tools:
        cap = getattr(t, "capability", None)
        server = getattr(t, "mcp_server", None)
        if server is not None:
            state = f"MCP server '{server}'"
        elif cap is None:
            state = "uses the agent's LLM" if getattr(t, "uses_llm", False) else "built in"
        elif cap in built.backends:
            state = f"{cap}: {built.backends[cap]!r}"
        elif cap in built.unavailable:
            state = f"{cap}: UNAVAILABLE: {built.unavailable[cap]}"
        else:
            state = f"{cap}: NO BACKEND (see hammr.toml [tools.{cap}])"
        echo(f"{t.card()}\n  [{state}]\n")  # a backend's error quotes files


EPILOG_SYSTEMS = """\b
Examples:
  hammr systems                      # every system, and whether it runs here
  hammr systems muse --memory bank.db
  hammr systems --json
  HAMMR_LLM__BACKEND=openai HAMMR_LLM__BASE_URL=http://127.0.0.1:8000/v1 \\
    HAMMR_LLM__MODEL=Qwen/Qwen2.5-VL-7B-Instruct hammr systems

\b
'runs here' is read from the configuration alone: nothing is loaded and no server is
contacted (a served model that is down shows up in `hammr ask`). 'yes, limited' runs, with
less than the system needs (a tool capability with no backend, a model that does not see);
'no' does not start. Each line under a system says what is missing and the setting to
change.
"""


@main.command("systems", epilog=EPILOG_SYSTEMS)
@click.argument("names", nargs=-1)
@config_option
@click.option(
    "--memory",
    "memory_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A memory file, as `hammr ask --memory` would use it (sets memory.path).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def systems_cmd(
    names: tuple[str, ...], config_path: Path | None, memory_path: Path | None, as_json: bool
) -> None:
    """List the systems `hammr ask` and `hammr eval` run (--system NAME): each one's paper,
    what it is, what it needs, and whether this configuration runs it.

    NAMES: only these systems (default: all). HAMMR's agents, which --system also accepts
    by name, are listed after the systems.
    """
    import json
    import textwrap

    from hammr.agents import AgentCatalog, SpecError
    from hammr.config import ConfigError, load_config
    from hammr.factory import build_backends, vision_setting
    from hammr.system_info import PAPERS, SYSTEMS, assess, needs_text
    from hammr.systems import registered_systems

    known = registered_systems()
    unknown = [n for n in names if n not in known]
    if unknown:
        fail(f"unknown system {unknown[0]!r}; choose from: {', '.join(known)}")
    try:
        cfg = load_config(config_path)
        if memory_path is not None:
            cfg.data["memory"]["path"] = str(memory_path)
            cfg.sources["memory.path"] = "--memory"
        built = build_backends(cfg)
        catalog = AgentCatalog.from_config(cfg)
        try:
            sees = vision_setting(cfg)
        except ConfigError:
            sees = False
    except (ConfigError, SpecError) as e:
        fail(str(e))
    chosen = list(names) or known
    ready = assess(cfg, built.backends, built.unavailable, chosen)
    llm = cfg.section("llm")
    if llm["backend"] == "embedded":
        model_path = str(llm["model_path"] or "")
        model = f"embedded {Path(model_path).stem if model_path else 'SmolLM2-135M-Instruct'}"
        model += " (llama.cpp in this process; text-only)"
    else:
        model = f"served {llm['model'] or '(llm.model unset)'} at {llm['base_url'] or '?'}"
        model += " (sees images)" if sees else " (text-only)"
    capabilities = sorted(c for c in built.backends if c != "text")
    # [[tools.mcp]]: named, not contacted (a system that runs starts them; `hammr tools` lists)
    mcp_servers = [str(e.get("name")) for e in cfg.get("tools.mcp") or [] if isinstance(e, dict)]
    agents = [
        {"name": spec.name, "question_type": spec.question_type, "role": spec.role}
        for spec in catalog.specs.values()
    ]
    if as_json:
        rows = []
        for name in chosen:
            info = SYSTEMS.get(name)
            r = ready[name]
            rows.append(
                {
                    "name": name,
                    "paper": info.paper if info else None,
                    "paper_title": PAPERS[info.paper].title if info else None,
                    "role": info.role if info else None,
                    "what": info.what if info else None,
                    "needs": needs_text(info) if info else [],
                    "requirements": {
                        "sight": info.sight,
                        "tools": list(info.tools),
                        "memory": info.memory.kind if info.memory else None,
                        "graph": info.graph,
                        "embedder": info.embedder,
                        "image_index": info.image_index,
                    }
                    if info
                    else {},
                    "runs": r.runs,
                    "status": r.status,
                    "problems": [
                        {"what": p.what, "fix": p.fix, "blocking": p.blocking} for p in r.problems
                    ],
                }
            )
        out = {
            "config": str(cfg.path) if cfg.path else None,
            "model": model,
            "sees_images": sees,
            "capabilities": capabilities,
            "unavailable": dict(built.unavailable),
            "mcp_servers": mcp_servers,
            "systems": rows,
            "agents": agents,
        }
        echo(json.dumps(out, indent=2))
        return
    verdict = {"ready": "yes", "limited": "yes, limited", "blocked": "no"}
    echo(f"# config file: {cfg.path or '(none; defaults and environment only)'}")
    echo(safe_line(f"# model: {model}"))
    echo(f"# tools with a backend: {', '.join(capabilities) or 'none'}")
    if mcp_servers:
        echo(
            f"# MCP servers ([[tools.mcp]]): {', '.join(mcp_servers)}: not contacted here; "
            "their tools are started with a system, and `hammr tools` lists them"
        )
    table = [("system", "paper", "what it is", "runs here")]
    for name in chosen:
        info = SYSTEMS.get(name)
        r = ready[name]
        blocker = next((p.what for p in r.problems if p.blocking), None)
        here = verdict[r.status] + (f": {safe_line(blocker)}" if blocker else "")
        table.append((name, info.paper if info else "?", info.role if info else "?", here))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    echo("")
    for row in table:
        echo("  ".join(c.ljust(widths[i]) for i, c in enumerate(row[:3])) + "  " + row[3])
    wrap = textwrap.TextWrapper(width=100, subsequent_indent="    ", break_on_hyphens=False)
    no_backend: dict[str, str] = {}
    for name in chosen:
        info = SYSTEMS.get(name)
        r = ready[name]
        echo("")
        if info is None:
            echo(f"{name} · runs here: {verdict[r.status]}")
            continue
        echo(f"{name} · {info.paper}, {info.role} · runs here: {verdict[r.status]}")
        echo(wrap.fill(f"  {info.what[:1].upper()}{info.what[1:]}."))
        echo(wrap.fill(f"  Needs: {'; '.join(needs_text(info))}."))
        missing = [p.capability for p in r.problems if p.capability]
        for p in r.problems:
            if p.capability:
                no_backend.setdefault(p.capability.split(" or ")[0], p.fix)
                continue
            mark = "cannot run" if p.blocking else "limited"
            echo(wrap.fill(safe_line(f"  - {mark}: {p.what}; fix: {p.fix}")))
        if missing:
            echo(
                wrap.fill(
                    f"  - limited: no backend for {', '.join(missing)}: the tools that need "
                    "them are unavailable (see below)"
                )
            )
    if no_backend:
        echo("")
        echo("Tool capabilities with no backend here, and the setting that gives one:")
        for capability, fix in no_backend.items():
            why = built.unavailable.get(capability)
            echo(wrap.fill(f"  {capability}: {fix}" + (f" ({why})" if why else "")))
    echo("")
    echo("Papers:")
    for key in dict.fromkeys(SYSTEMS[n].paper for n in chosen if n in SYSTEMS):
        paper = PAPERS[key]
        by = f" ({paper.authors})" if paper.authors else ""
        echo(wrap.fill(f"  {key}: {paper.title}{by}"))
    if not names:
        echo("")
        echo("Agents by name (--system NAME runs one alone; `hammr agents` shows their tools):")
        echo(
            wrap.fill(
                "  " + ", ".join(f"{a['name']} ({a['question_type'] or a['role']})" for a in agents)
            )
        )


@main.command("agents")
@config_option
@click.option(
    "--setting",
    type=click.Choice(["auto", "tools_only", "with_vqa"]),
    help="Show the tools of this setting (default: agent.setting).",
)
def agents_cmd(config_path: Path | None, setting: str | None) -> None:
    """Print the agent tree: the dispatcher, its specialists and each agent's tools.

    Tools marked (no backend) tell the agent so when called; configure their capability in
    hammr.toml (see `hammr tools`); tools marked (cannot run here) have a backend configured
    that cannot run, and `hammr tools` says why. Add or replace an agent by dropping a TOML
    file in the folder named by agent.dir (copy one from the package's agents/specs/ to start).
    """
    from hammr.agents import AgentCatalog, SpecError, resolve_setting
    from hammr.config import ConfigError, load_config
    from hammr.factory import build_backends
    from hammr.tools.library import builtin_tools

    try:
        cfg = load_config(config_path)
        backends = build_backends(cfg).backends
        catalog = AgentCatalog.from_config(cfg)
        chosen = resolve_setting(setting or str(cfg.get("agent.setting")), backends)
    except (ConfigError, SpecError) as e:
        fail(str(e))
    capability = {t.name: getattr(t, "capability", None) for t in builtin_tools()}

    def tool_label(name: str) -> str:
        cap = capability.get(name)
        if cap is None or cap in backends:
            return name
        broken = cap in backends.unavailable
        return f"{name} (cannot run here)" if broken else f"{name} (no backend)"

    def show(name: str, indent: str, seen: tuple[str, ...]) -> None:
        spec = catalog.specs[name]
        kind = f"[{spec.question_type}]" if spec.question_type else f"[{spec.role}]"
        where = (
            ""
            if spec.source is None or "agents/specs" in str(spec.source)
            else f"  ({spec.source})"
        )
        echo(safe_line(f"{indent}{spec.name} {kind} ({', '.join(spec.inputs)}){where}"))
        names = catalog.tool_names(spec, chosen)
        plain = [tool_label(t) for t in names if t not in catalog.specs]
        if plain:
            echo(f"{indent}    tools: {', '.join(plain)}")
        for t in names:
            if t in catalog.specs and t not in seen:
                show(t, indent + "    ", (*seen, t))

    echo(f"# setting: {chosen}; router: {cfg.get('agent.router')}")
    roots = [catalog.dispatcher.name] if catalog.dispatcher else []
    reached = (
        {catalog.dispatcher.name, *catalog.tool_names(catalog.dispatcher)}
        if catalog.dispatcher
        else set()
    )
    roots += [n for n in catalog.specs if n not in reached]
    for root in roots:
        show(root, "", (root,))


@main.command(
    "route",
    epilog="""\b
Examples:
  hammr route "what is the licence plate number?"
  hammr route "How many of these are there?" --point 120,80
  hammr route "Is the dog in the left picture bigger?" --image a.jpg --image2 b.jpg
  hammr route "Who designed the bridge in the city where this tower stands?" --router llm
""",
)
@click.argument("question")
@config_option
@click.option(
    "--router",
    type=click.Choice(["llm", "neighbours", "hybrid"]),
    help="Default: agent.router.",
)
@click.option(
    "--point",
    "point",
    type=str,
    metavar="X,Y",
    help="The point the question refers to, in the image's pixels (as `hammr ask --point`).",
)
@click.option(
    "--image2",
    "image2",
    type=click.Path(path_type=Path),
    help="A second image: the question is about two images (as `hammr ask --image2`).",
)
@click.option(
    "--image",
    "image_path",
    type=click.Path(path_type=Path),
    help="The image, for the LLM dispatcher's prompt (default: a blank 640x480 stand-in).",
)
def route_cmd(
    question: str,
    config_path: Path | None,
    router: str | None,
    point: str | None,
    image2: Path | None,
    image_path: Path | None,
) -> None:
    """Show which specialist would answer QUESTION, without answering it (QUESTION: at most
    4,000 characters, as for `hammr ask`).

    Prints the decision, who made it, the vote per specialist and the nearest labelled
    questions with their similarity. The LLM dispatcher is only asked (in routing-only mode:
    its call to a specialist is recorded, not made) when the router is 'llm', or 'hybrid'
    and the neighbours' vote is below agent.router_threshold.
    """
    from hammr.agents import SpecError
    from hammr.agents.route_accuracy import stand_in_inputs
    from hammr.agents.system import build_systems
    from hammr.backends.llm.base import LLMError, run_sync
    from hammr.config import ConfigError, load_config
    from hammr.factory import build_llm
    from hammr.tools.base import ToolContext
    from hammr.values import Image, ImageLoadError

    require_question(question)
    try:
        cfg = load_config(config_path)
        max_pixels = int(cfg.get("images.max_pixels"))
        img = Image.open(image_path, max_pixels=max_pixels) if image_path is not None else None
        inputs = stand_in_inputs(["image"], img)
        if image2 is not None:
            inputs["image2"] = Image.open(image2, max_pixels=max_pixels)
        if point is not None:
            stand_in = inputs["image"]
            assert isinstance(stand_in, Image)
            inputs["point"] = _parse_point(point, stand_in)
        systems, backends = build_systems(cfg)
        dispatcher = systems.dispatcher(cast("RouterKind | None", router))
        needs_llm = dispatcher.mode != "neighbours"
        llm = build_llm(cfg) if needs_llm else None
    except (ConfigError, ImageLoadError, LLMError, SpecError) as e:
        fail(str(e))
    ctx = ToolContext(backends=backends, llm=llm)
    with _Progress("routing"):
        try:
            decision = run_sync(dispatcher.decide(question, inputs, ctx))
        except LLMError as e:
            fail(str(e))
    echo(f"specialist: {decision.agent or '(none)'}")
    echo(f"decided by: {decision.by} ({decision.explain()})")
    if decision.candidates:
        echo(f"candidates for these inputs: {', '.join(decision.candidates)}")
    if decision.votes:
        echo(f"threshold: {dispatcher.threshold:.2f}")
        echo("votes: " + ", ".join(f"{a} {v:.2f}" for a, v in decision.votes.items()))
    if decision.neighbours:
        echo("nearest labelled questions:")
        for n in decision.neighbours:
            echo(safe_line(f"  {n.score:.3f}  {n.agent:<28} {n.question}"))
    if decision.trace is not None:
        from hammr.trace import format_trace

        echo("LLM dispatcher (routing only):")
        echo(format_trace(decision.trace))


if __name__ == "__main__":  # pragma: no cover
    main()
