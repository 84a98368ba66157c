"""Every example in every `--help` can be typed: each is found by walking the command tree
(a new example is covered with no change here), parses against the real command line, names
real suites, systems, agents and viewpoints, and names only files that exist, that another
example writes, or that are clearly placeholders (mapped below to a bundled stand-in or to
what the reader brings). The cheap ones are run offline in a temporary folder with a
temporary run store and cache, and must exit 0: `hammr systems`, `hammr route` on the
neighbour router, `hammr avis graph`, `hammr memory build --no-annotate`, `show` and `search`
on a small stored run (test_memory_bank's), and `hammr ask` against a scripted
OpenAI-compatible server (the embedded model takes minutes a question on a busy machine).
The rest need a real evaluation's run, a dataset download, a server, a model's long work or
an image embedder, and are checked for parse only."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from command_line_support import (
    Parsed,
    ShellCommand,
    check_command,
    logical_lines,
    shell_commands,
)
from conftest import ROOT
from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.agents.catalog import AgentCatalog
from hammr.cli import main
from hammr.eval.suites import SuiteError, available_suites, load_suite
from hammr.memory.viewpoints import ViewpointError, needs_images, viewpoint_names
from hammr.systems import registered_systems
from test_memory_bank import make_store

EXAMPLE_LINE = re.compile(r"^(\$ )?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(\.venv/bin/)?hammr\s")

STAND_INS: dict[str, str] = {
    "photo.jpg": "examples/demo/street.png",
    "a.jpg": "examples/demo/motorcycle_left.jpg",
    "b.jpg": "examples/demo/motorcycle_right.jpg",
    "sign.jpg": "examples/sign.png",
    "my_suite.toml": "src/hammr/eval/suites/demo.toml",
    "learned.toml": "src/hammr/avis/default_graph.toml",
}
"""Placeholder files -> the bundled file that stands in for them (and is used to run)."""

READERS_OWN: dict[str, str] = {
    "~/data/vqa": "generic-vqa's downloads",
    "/shared/vqa": "generic-vqa's downloads on a shared disk",
    "~/data/FS-MEVQA/dataset": "MEVQA's download",
    "~/data": "the data folder `hammr data get` fills",
    "DATA": "a suite's downloads",
    "DIR": "a suite's downloads",
    "gpt4o.toml": "a config whose [llm] is the annotator",
    "mine.jsonl": "annotations made elsewhere",
}
"""Placeholders for what the reader brings (datasets, their own config): nothing stands in."""

WRITTEN = {"out", "out_dir", "out_path", "output", "trace_path", "export_path", "html_out",
           "csv_out", "scaling_dir"}  # fmt: skip
"""Path parameters a command writes (the files they name need not exist)."""


@dataclass(frozen=True)
class Example:
    """One hammr command in the help of ``owner`` (the first command whose help shows it)."""

    owner: tuple[str, ...]
    text: str
    command: ShellCommand

    @property
    def id(self) -> str:
        return " ".join(("hammr", *self.owner)) + f": {self.text}"


def _walk(cmd: click.Command, path: tuple[str, ...], ctx: click.Context) -> Iterator[
    tuple[tuple[str, ...], click.Command]
]:  # fmt: skip
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            yield from _walk(sub, (*path, name), click.Context(sub, info_name=name, parent=ctx))


def no_wrap_blocks(text: str) -> Iterator[list[str]]:
    """The lines of every click `\\b` paragraph (from a `\\b` line to the next blank line)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "\b":
            continue
        block = []
        for following in lines[i + 1 :]:
            if not following.strip():
                break
            block.append(following)
        yield block


def help_examples(root: click.Command = main) -> list[Example]:
    """Every example in the help text and epilog of every command, each once."""
    found: list[Example] = []
    seen: set[str] = set()
    for path, cmd in _walk(root, (), click.Context(root, info_name="hammr")):
        for text in (cmd.help or "", cmd.epilog or ""):
            for block in no_wrap_blocks(text):
                for _, line in logical_lines(0, block):
                    if not EXAMPLE_LINE.match(line.strip()):
                        continue
                    for command in shell_commands(line):
                        words = [f"{k}={v}" for k, v in command.env]
                        text_of_it = shlex.join([*words, command.program, *command.args])
                        if text_of_it not in seen:
                            seen.add(text_of_it)
                            found.append(Example(path, text_of_it, command))
    return found


EXAMPLES = help_examples()


def stray_examples(root: click.Command = main) -> list[str]:
    """Indented lines that start like an example outside every `\\b` paragraph: click would
    rewrap them into the prose, and the walk above would not see them."""
    found = []
    for path, cmd in _walk(root, (), click.Context(root, info_name="hammr")):
        for text in (cmd.help or "", cmd.epilog or ""):
            inside = {line for block in no_wrap_blocks(text) for line in block}
            for line in text.splitlines():
                indented = re.match(r"^\s{2,}\S", line) is not None
                if indented and EXAMPLE_LINE.match(line.strip()) and line not in inside:
                    found.append(f"hammr {' '.join(path)}: {line.strip()}")
    return found


def written_by_examples() -> set[str]:
    """The files some example writes (-o, --out, --trace, --export, ...)."""
    out = set()
    for example in EXAMPLES:
        try:
            parsed = check_command(list(example.command.args))
        except click.UsageError:
            continue
        for param, values in parsed.given():
            if param.name in WRITTEN:
                out.update(values)
    return out


def system_names() -> set[str]:
    return {*registered_systems(), *AgentCatalog.load().specs}


def problems_of(parsed: Parsed, written: set[str], systems: set[str]) -> list[str]:
    """What the parsed example names that does not exist (empty: nothing)."""
    problems = []
    by_option: dict[str, list[str]] = {}
    for param, values in parsed.given():
        for option in param.opts:
            by_option[option] = values
        if isinstance(param.type, click.Path) and param.name not in WRITTEN:
            for v in values:
                known = v in STAND_INS or v in READERS_OWN or v in written
                if not known and not (ROOT / v).exists():
                    problems.append(f"{v}: no such file, and not a known placeholder")
        if parsed.path == ("systems",) and param.name == "names":
            by_option["--system"] = values
    suites = available_suites()
    for suite in by_option.get("--suite", []):
        if suite not in suites and not (ROOT / STAND_INS.get(suite, suite)).is_file():
            problems.append(f"--suite {suite}: no such suite (bundled: {', '.join(suites)})")
    for name in by_option.get("--system", []):
        if name not in systems:
            problems.append(f"--system {name}: no such system or agent")
    viewpoints = by_option.get("--viewpoint", []) + by_option.get("--viewpoints", [])
    if viewpoints:
        try:
            viewpoint_names(part for v in viewpoints for part in v.split(","))
        except ViewpointError as e:
            problems.append(str(e))
    suite, data_dir = by_option.get("--suite", [""])[0], by_option.get("--data-dir", ["."])[0]
    if suite in suites and data_dir != "." and (ROOT / data_dir).is_dir():
        try:  # a bundled data folder holds what the suite reads
            load_suite(suite).samples(ROOT / data_dir, limit=1, check_images=True)
        except SuiteError as e:
            problems.append(f"--suite {suite} --data-dir {data_dir}: {e}")
    return problems


# -- the tests ----------------------------------------------------------------------------------


def test_the_walk_finds_the_examples_of_every_documented_command() -> None:
    owners = {e.owner for e in EXAMPLES}
    for owner in [("ask",), ("eval",), ("route",), ("systems",), ("view",), ("memory", "reflect"),
                  ("memory", "insights"), ("memory", "show"), ("avis",)]:  # fmt: skip
        assert owner in owners, owner
    assert len(EXAMPLES) >= 50
    # a continued line is one example, its VAR=value prefix kept
    served = [e for e in EXAMPLES if dict(e.command.env).get("HAMMR_LLM__BACKEND") == "openai"]
    assert served and all(e.command.args for e in served)


def test_the_walk_reads_no_wrap_paragraphs_and_flags_examples_outside_them() -> None:
    sub = click.Command(
        "sub",
        help="Text.\n\n\b\n  hammr sub --flag \\\n    --more  # a comment\n\n  hammr sub --lost\n",
        epilog="\b\nExamples:\n  X=1 hammr sub | head\n",
    )
    group = click.Group("hammr", commands=[sub])
    found = [(e.owner, e.text) for e in help_examples(group)]
    assert found == [(("sub",), "hammr sub --flag --more"), (("sub",), "X=1 hammr sub")]
    assert stray_examples(group) == ["hammr sub: hammr sub --lost"]


def test_every_example_is_in_a_no_wrap_paragraph() -> None:
    assert not stray_examples(), "put a \\b line before them:\n" + "\n".join(stray_examples())


def test_the_check_catches_a_suite_system_viewpoint_or_file_that_is_not_there() -> None:
    systems, written = system_names(), {"bank.db"}
    cases = {
        "eval --suite vstar --data-dir DATA": "no such suite",
        "ask photo.jpg Q --system nobody": "no such system",
        "memory search bank.db Q --viewpoint question+colour": "not a viewpoint",
        "memory show nowhere.db": "no such file",
    }
    for args, problem in cases.items():
        found = problems_of(check_command(args.split()), written, systems)
        assert any(problem in p for p in found), (args, found)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_every_help_example_parses_and_names_real_things(example: Example) -> None:
    try:
        parsed = check_command(list(example.command.args))
    except click.UsageError as e:
        pytest.fail(f"{example.text}\n    {e.format_message()}")
    problems = problems_of(parsed, written_by_examples(), system_names())
    assert not problems, f"{example.text}\n    " + "\n    ".join(problems)


# -- running the cheap ones ---------------------------------------------------------------------


def offline_kind(example: Example) -> str | None:
    """How an example runs offline in seconds: 'plain' as it is, 'stored' on a small stored
    run named 'explore' and an experience bank built from it, 'served' asking a scripted
    server; None: checked for parse only (it needs a stored run of a real evaluation, a
    dataset download, a server, a model's long work, or an image embedder)."""
    try:
        parsed = check_command(list(example.command.args))
    except click.UsageError:
        return None  # the parse test says why
    given = dict((p.name, v) for p, v in parsed.given())
    if parsed.path in (("systems",), ("avis", "graph")):
        return "plain"
    if parsed.path == ("route",) and parsed.values.get("router") != "llm":
        return "plain"
    if parsed.path == ("ask",) and not given.keys() & {"agent_name", "memory_path", "config_path"}:
        return "served"
    if parsed.path == ("memory", "build") and parsed.values.get("no_annotate"):
        return "stored" if given.get("runs") == ["explore"] else None
    if parsed.path == ("memory", "show"):
        return "stored"
    if parsed.path in (("experiment", "list"), ("experiment", "show"), ("experiment", "report")):
        bundled = given.get("name_or_file", given.get("experiment", [""]))[0]
        return "stored" if "labels" not in given and not bundled.endswith(".toml") else None
    if parsed.path == ("memory", "search") and "image_paths" not in given:
        viewpoints = [v for vs in given.get("viewpoints", []) for v in vs.split(",")]
        return None if any(needs_images(v) for v in viewpoints) else "stored"
    return None


def local_args(args: tuple[str, ...]) -> list[str]:
    """The example's words with its placeholder files replaced by their bundled stand-ins and
    its repository paths made absolute (it runs in a temporary folder)."""
    out = []
    for word in args:
        word = STAND_INS.get(word, word)
        out.append(str(ROOT / word) if "/" in word and (ROOT / word).exists() else word)
    return out


RUNNABLE = [e for e in EXAMPLES if offline_kind(e) in ("plain", "stored")]
SERVED = [e for e in EXAMPLES if offline_kind(e) == "served"]


def invoke(args: list[str], env: dict[str, str]) -> Result:
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module (the router embeds its labelled questions once), whose run
    store holds test_memory_bank's small run 'explore'."""
    cache = tmp_path_factory.mktemp("cache")
    (cache / "hammr").mkdir()
    make_store(cache / "hammr" / "runs.sqlite").close()
    return cache


@pytest.fixture(scope="module")
def bank(cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An experience bank of run 'explore', vectors only (no annotator model)."""
    path = tmp_path_factory.mktemp("bank") / "bank.db"
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(cache_dir)}
    built = invoke(["memory", "build", "explore", "-o", str(path), "--no-annotate"], env)
    assert built.exit_code == 0, built.stderr
    return path


def test_the_runnable_examples_include_each_kind() -> None:
    kinds = {(e.owner, offline_kind(e)) for e in EXAMPLES}
    assert {(("ask",), "served"), (("route",), "plain"), (("systems",), "plain"),
            (("memory", "show"), "stored"), (("memory", "build"), "stored"),
            (("experiment",), "stored"), (("experiment", "report"), "stored")} <= kinds  # fmt: skip


def assert_it_ran(example: Example, args: list[str], result: Result) -> None:
    assert result.exit_code == 0, f"{example.text}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip(), example.text
    for param, values in check_command(args).given():
        if param.name in WRITTEN:
            assert all(Path(v).exists() for v in values), (example.text, values)


@pytest.mark.parametrize("example", RUNNABLE, ids=lambda e: e.id)
def test_cheap_help_examples_run_offline(
    example: Example,
    cache_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.chdir(tmp_path)
    if "bank.db" in example.command.args and example.command.args[:2] != ("memory", "build"):
        shutil.copy(request.getfixturevalue("bank"), tmp_path / "bank.db")
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(cache_dir), **dict(example.command.env)}
    args = local_args(example.command.args)
    assert_it_ran(example, args, invoke(args, env))


def finish_everything(seen: Seen) -> Reply:
    return Reply(body=ok_body("[Thought]: I can answer now.\n[Finish]: 154-JDX"))


@pytest.mark.parametrize("example", SERVED, ids=lambda e: e.id)
def test_ask_help_examples_run_with_a_scripted_server(
    example: Example, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step of the command line runs for real (image, router, agent, trace, tree);
    only the model's replies are scripted."""
    monkeypatch.chdir(tmp_path)
    server = FakeServer()
    server.responder = finish_everything
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(cache_dir), **dict(example.command.env)}
    env.update(served_env(server))
    args = local_args(example.command.args)
    try:
        result = invoke(args, env)
    finally:
        server.close()
    assert_it_ran(example, args, result)
    assert server.seen and result.stdout.strip().splitlines()[-1] == "154-JDX"
