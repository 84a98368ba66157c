"""``[[tools.mcp]]``: hammr's agents use the tools of external MCP servers.

The servers here are real: tests/fixtures/mcp_lens_server.py, built on the official SDK, is
started over stdio through the configuration (and once over streamable HTTP, served by
uvicorn on 127.0.0.1). Only the language model is scripted (ScriptedLLM, as the test names
say). Timeouts are hang guards; the tests assert outcomes and their order, never timing.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.cli import main
from hammr.config import Config, ConfigError, load_config
from hammr.grammar import step_grammar
from hammr.tools.base import Tool, ToolContext, bind_arguments
from hammr.tools.library import builtin_tools, configured_tools
from hammr.values import Box, Entity, Image

HERE = Path(__file__).resolve().parent
SERVER = HERE / "fixtures" / "mcp_lens_server.py"
EXAMPLES = HERE.parent / "examples"

try:
    import mcp  # noqa: F401

    HAS_SDK = True
except ImportError:
    HAS_SDK = False
needs_sdk = pytest.mark.skipif(
    not HAS_SDK, reason="the MCP SDK is not installed (pip install 'hammr[mcp]')"
)

if not HAS_SDK:  # say why on the terminal too, not only in pytest's summary
    sys.stderr.write("test_mcp_tools: the MCP SDK is not installed; its server tests skip\n")

GREEN = (10, 200, 30)


def green() -> Image:
    return Image(PILImage.new("RGB", (40, 30), GREEN))


def write_config(folder: Path, entries: str, extra: str = "") -> Config:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "hammr.toml"
    file.write_text(entries + "\n" + extra)
    return load_config(file, env={})


def lens_entry(name: str = "lens", **limits: object) -> str:
    """An entry starting the lens server over stdio; its start may take long on a loaded
    machine (startup_timeout_s is a hang guard)."""
    limits.setdefault("startup_timeout_s", 300)
    lines = [
        "[[tools.mcp]]",
        f'name = "{name}"',
        f'command = ["{sys.executable}", "{SERVER}"]',
    ]
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in limits.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def lens_cfg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Config]:
    """Two lens servers for the module (started at their first use, stopped at the end):
    'lens', whose calls may take long (timeout_s a hang guard), and 'sleepy', whose calls
    time out sooner (its Hang's timeout is the outcome a test looks at)."""
    if not HAS_SDK:
        pytest.skip("the MCP SDK is not installed (pip install 'hammr[mcp]')")
    from hammr.mcp_bridge.remote_tools import close_remote_tools

    folder = tmp_path_factory.mktemp("lens")
    entries = lens_entry(timeout_s=300, max_result_chars=500)
    entries += lens_entry("sleepy", timeout_s=10, tools=["Hang", "Echo"])
    yield write_config(folder, entries)
    close_remote_tools()


@pytest.fixture(scope="module")
def lens_tools(lens_cfg: Config) -> dict[str, Tool]:
    return {t.name: t for t in configured_tools(lens_cfg)}


def agent(tools: dict[str, Tool], names: list[str], llm: ScriptedLLM) -> ReActAgent:
    return ReActAgent(
        name="LensUser",
        description="uses the lens",
        instructions="Answer with the lens.",
        tools=[tools[n] for n in names],
        llm=llm,
        max_steps=8,
    )


# -- configuration -------------------------------------------------------------------------


def test_a_config_with_mcp_servers_is_read_and_shown(tmp_path: Path) -> None:
    entries = (
        lens_entry(timeout_s=5) + '[[tools.mcp]]\nname = "web"\nurl = "http://127.0.0.1:9/mcp"\n'
    )
    cfg = write_config(tmp_path, entries)
    names = [e["name"] for e in cfg.get("tools.mcp")]
    assert names == ["lens", "web"]
    r = CliRunner().invoke(main, ["config", "show", "--config", str(cfg.path)], env={})
    assert r.exit_code == 0, r.output
    assert "tools.mcp = [{'name': 'lens'" in r.output and "# " + str(cfg.path) in r.output
    assert "tools.mcp.backend" not in r.output  # an array of servers, not a capability


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[tools.mcp]\nname = "x"\ncommand = ["a"]\n', "write [[tools.mcp]] (two brackets)"),
        ('[[tools.mcp]]\nname = "x"\ncomand = ["a"]\n', "#1 'x' (from "),
        ('[[tools.mcp]]\nname = "x"\ncomand = ["a"]\n', "unknown key 'comand'"),
        ('[[tools.mcp]]\nname = "x"\n', "give exactly one of command"),
        ('[[tools.mcp]]\nname = "x"\ncommand = ["a"]\nurl = "http://h/mcp"\n', "not both"),
        ('[[tools.mcp]]\nname = "x"\ncommand = "python s.py"\n', '["python", ...]'),
        ('[[tools.mcp]]\nname = "x-y"\ncommand = ["a"]\n', "name = 'x-y' should be a letter"),
        ('[[tools.mcp]]\ncommand = ["a"]\n', "name = None"),
        ('[[tools.mcp]]\nname = "x"\nurl = "ftp://h"\n', "url = 'ftp://h' should be"),
        ('[[tools.mcp]]\nname = "x"\ncommand = ["a"]\ntimeout_s = 0\n', "timeout_s = 0"),
        ('[[tools.mcp]]\nname = "x"\ncommand = ["a"]\nmax_result_chars = 0\n', "at least 1"),
        ('[[tools.mcp]]\nname = "x"\ncommand = ["a"]\ntools = "Echo"\n', "tools = 'Echo'"),
        ('[[tools.mcp]]\nname = "x"\ncommand = ["a"]\nheaders = {A = "1"}\n', "headers does"),
        ('[[tools.mcp]]\nname = "x"\nurl = "http://h/mcp"\ncwd = "."\n', "cwd does not apply"),
        (
            '[[tools.mcp]]\nname = "x"\ncommand = ["a"]\n[[tools.mcp]]\nname = "x"\nurl = "http://h"\n',
            "#2 'x' (from ",
        ),
        (
            '[[tools.mcp]]\nname = "x"\ncommand = ["a"]\n[[tools.mcp]]\nname = "x"\nurl = "http://h"\n',
            "already used by entry #1",
        ),
    ],
)
def test_a_bad_mcp_entry_is_one_error_naming_the_entry_and_source(
    tmp_path: Path, text: str, expected: str
) -> None:
    file = tmp_path / "hammr.toml"
    file.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(file, env={})
    assert expected in str(e.value) and "\n" not in str(e.value)
    assert str(file) in str(e.value)


def test_mcp_servers_from_the_environment_are_checked_too() -> None:
    env = {"HAMMR_TOOLS__MCP": '[{name = "web", url = "http://127.0.0.1:9/mcp"}]'}
    cfg = load_config(None, env=env)
    assert cfg.get("tools.mcp") == [{"name": "web", "url": "http://127.0.0.1:9/mcp"}]
    with pytest.raises(ConfigError, match=r"\$HAMMR_TOOLS__MCP\) should be an array of tables"):
        load_config(None, env={"HAMMR_TOOLS__MCP": "3"})


def test_without_mcp_servers_the_tools_are_the_builtin_ones_and_no_sdk_is_imported() -> None:
    code = (
        "import sys\n"
        "from hammr.config import load_config\n"
        "from hammr.tools.library import builtin_tools, configured_tools\n"
        "names = [t.name for t in configured_tools(load_config(None, env={}))]\n"
        "assert names == [t.name for t in builtin_tools()], names\n"
        "assert 'mcp' not in sys.modules, 'the SDK was imported'\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=HERE
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_mcp_server_without_the_sdk_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = write_config(tmp_path, lens_entry())
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now fails
    with pytest.raises(ConfigError, match=r"pip install 'hammr\[mcp\]'"):
        configured_tools(cfg)


# -- schemas to parameters, values to JSON --------------------------------------------------


@needs_sdk
def test_schema_properties_become_typed_parameters() -> None:
    from hammr.mcp_bridge.remote_schema import params_from_schema
    from hammr.mcp_bridge.remote_tools import tool_name

    schema = {
        "type": "object",
        "properties": {
            "note": {"type": "string", "description": "a  note\n on two lines"},
            "photo": {"type": "string", "contentEncoding": "base64"},
            "picture": {"type": "string", "format": "image"},
            "scan": {"type": "string", "contentMediaType": "image/jpeg"},
            "image_url": {"type": "string"},
            "frames": {"type": "array", "items": {"type": "string", "format": "image"}},
            "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}], "default": None},
            "from": {"type": "integer"},
            "max-size": {"type": ["number", "null"], "default": 2.5},
            "tags": {"type": "array", "items": {"type": "string"}},
            "box": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["photo", "from"],
        "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
    }
    params, wires = params_from_schema(schema)
    by_name = {p.name: p for p in params}
    assert [p.name for p in params[:2]] == ["photo", "from_"]  # required first, in order
    assert by_name["photo"].kind == "image" and wires["photo"].image == "base64"
    assert by_name["picture"].kind == "image" and wires["picture"].image == "data-url"
    assert by_name["scan"].kind == "image" and wires["scan"].image == "data-url"
    assert by_name["image_url"].kind == "text"  # a URL is text, not pixels
    assert by_name["frames"].kind == "images"
    assert by_name["mode"].kind == "text" and by_name["mode"].choices == ("fast", "slow")
    assert by_name["from_"].kind == "integer" and wires["from_"].name == "from"
    assert by_name["max_size"].kind == "number" and by_name["max_size"].default == 2.5
    assert wires["max_size"].name == "max-size"
    assert by_name["tags"].kind == "texts" and by_name["box"].kind == "any"
    assert by_name["note"].kind == "text" and by_name["note"].doc == "a note on two lines"
    assert not by_name["note"].required and by_name["note"].default is None
    assert tool_name("lens", "find-entity.v2") == "lens_find_entity_v2"


@needs_sdk
def test_any_parameters_travel_as_json() -> None:
    from hammr.mcp_bridge.remote_schema import to_json

    assert to_json(Box(1, 2, 3, 4)) == [1.0, 2.0, 3.0, 4.0]
    assert to_json(Entity("Eiffel Tower")) == "Eiffel Tower"
    assert to_json({"a": (1, [Box(0, 0, 1, 1)])}) == {"a": [1, [[0.0, 0.0, 1.0, 1.0]]]}
    assert str(to_json(green())).startswith("data:image/png;base64,")


# -- a real server over stdio --------------------------------------------------------------


def test_the_servers_tools_are_listed_with_cards_from_their_schemas(
    lens_tools: dict[str, Tool], lens_cfg: Config
) -> None:
    builtin = [t.name for t in builtin_tools()]
    names = list(lens_tools)
    assert names[: len(builtin)] == builtin  # the built-ins first, then the servers'
    assert names[-2:] == ["sleepy_Hang", "sleepy_Echo"]  # its allow-list, in its order
    assert set(names[len(builtin) : -2]) == {
        "lens_FindEntity",
        "lens_Echo",
        "lens_Measure",
        "lens_Thumbnail",
        "lens_Garbage",
        "lens_Hang",
        "lens_Huge",
        "lens_Boom",
        "lens_Exit",
    }
    card = lens_tools["lens_FindEntity"].card()
    assert card.splitlines()[0] == "lens_FindEntity(image: image) -> text"
    assert "Names the entity a photo shows" in card and "MCP server 'lens'" in card
    assert "image: the photo, base64 PNG" in card
    assert (
        lens_tools["lens_Echo"]
        .card()
        .startswith("lens_Echo(text: text, times: integer = 1) -> text")
    )
    measure = lens_tools["lens_Measure"].card().splitlines()[0]
    assert measure.startswith("lens_Measure(label: one of 'cat'|'dog', score: number, count:")
    assert "flag: boolean, tags: texts, extra: any = None) -> JSON object" in measure
    # `hammr tools` lists them with their server
    r = CliRunner().invoke(main, ["tools", "--config", str(lens_cfg.path)], env={})
    assert r.exit_code == 0, r.output
    assert "lens_FindEntity(image: image) -> text" in r.output
    assert "[MCP server 'lens']" in r.output


def test_the_step_grammar_offers_an_mcp_tool_like_a_builtin(lens_tools: dict[str, Tool]) -> None:
    tools = [lens_tools["lens_FindEntity"], lens_tools["lens_Echo"], lens_tools["CropImage"]]
    grammar = step_grammar(tools, {"image": green()})
    assert '"lens_FindEntity("' in grammar and '"CropImage("' in grammar
    lens_rule = next(line for line in grammar.splitlines() if line.startswith("t0-image ::="))
    assert lens_rule == 't0-image ::= "image"'  # the image variable, as for a built-in
    crop_rule = next(line for line in grammar.splitlines() if line.startswith("t2-image ::="))
    assert crop_rule.startswith('t2-image ::= "image"')


async def test_a_scripted_llm_agent_calls_lens_FindEntity_and_reads_its_result(
    lens_tools: dict[str, Tool],
) -> None:
    llm = ScriptedLLM(
        [
            "[Thought]: I ask the lens.\n[Act]: who = lens_FindEntity(image)",
            "[Thought]: It is green.\n[Finish]: a green photo",
        ],
        grammar="gbnf",  # the agent builds a grammar per step: the tool must be in it
    )
    lens_user = agent(lens_tools, ["lens_FindEntity", "CropImage"], llm)
    result = await lens_user.run("What is this?", {"image": green()}, ctx=ToolContext())
    first, _ = result.trace.steps
    assert first.tool == "lens_FindEntity" and first.error is None
    expected = "entity: a 40x30 photo, mean colour (10, 200, 30)"
    assert first.observation == f"{expected} (stored in 'who')"
    assert expected in llm.requests[1].messages[-1].text()  # the next prompt holds the result
    assert "lens_FindEntity(image: image) -> text" in llm.requests[0].messages[0].text()
    assert '"lens_FindEntity("' in str(llm.requests[0].grammar)
    assert result.answer == "a green photo" and result.trace.status == "finished"


def test_calls_work_from_event_loops_in_other_threads(lens_tools: dict[str, Tool]) -> None:
    echo = lens_tools["lens_Echo"]
    answers: list[Any] = []

    def one(text: str) -> None:
        args = bind_arguments(echo, [text, 2], {})
        answers.append(asyncio.run(echo.invoke(args, ToolContext())).value)

    one("here")
    worker = threading.Thread(target=one, args=("there",))
    worker.start()
    worker.join(timeout=300)
    assert answers == ["here here", "there there"]


async def test_an_image_result_becomes_an_image_value(lens_tools: dict[str, Tool]) -> None:
    thumb = lens_tools["lens_Thumbnail"]
    result = await thumb.invoke(bind_arguments(thumb, [5], {}), ToolContext())
    assert isinstance(result.value, Image) and (result.value.width, result.value.height) == (5, 5)
    assert result.value.pixels.getpixel((2, 2)) == (255, 0, 0)
    measure = lens_tools["lens_Measure"]
    args = bind_arguments(measure, ["dog", 0.5, 2, True, ["a", "b"]], {})
    structured = await measure.invoke(args, ToolContext())
    assert structured.value == {
        "label": "dog",
        "score": 0.5,
        "count": 2,
        "flag": True,
        "tags": ["a", "b"],
    }


async def test_faults_are_observations_and_the_run_goes_on_scripted_llm(
    lens_tools: dict[str, Tool],
) -> None:
    """Hang (past timeout_s), Huge (over max_result_chars: cut, with a note), Boom (the tool
    raises), Garbage (an image that is no image): each an observation, in order; the servers
    still answer afterwards, the one that hung included."""
    llm = ScriptedLLM(
        [
            "[Thought]: wait\n[Act]: h = sleepy_Hang()",
            "[Thought]: big\n[Act]: big = lens_Huge()",
            "[Thought]: fail\n[Act]: b = lens_Boom()",
            "[Thought]: junk\n[Act]: g = lens_Garbage()",
            "[Thought]: still there?\n[Act]: e = lens_Echo('still here')",
            "[Thought]: and you?\n[Act]: s = sleepy_Echo('awake')",
            "[Thought]: done\n[Finish]: ok",
        ]
    )
    names = ["sleepy_Hang", "lens_Huge", "lens_Boom", "lens_Garbage", "lens_Echo", "sleepy_Echo"]
    result = await agent(lens_tools, names, llm).run("go", {"image": green()}, ctx=ToolContext())
    hang, huge, boom, garbage, echo, awake, finish = result.trace.steps
    assert hang.error_kind == "tool_failure"
    assert hang.error is not None and "sleepy_Hang did not answer within 10 s" in hang.error
    assert huge.error is None and huge.observation is not None
    assert huge.observation.startswith("lens lens ")
    assert (
        "[... cut: the result had 100,000 characters; the first 500 are shown" in huge.observation
    )
    assert boom.error_kind == "tool_failure" and "the lens is cracked" in str(boom.error)
    assert garbage.error_kind == "tool_failure"
    assert "not an image (no image format Pillow reads)" in str(garbage.error)
    assert echo.error is None and echo.observation == "still here (stored in 'e')"
    assert awake.error is None and awake.observation == "awake (stored in 's')"
    assert finish.finish == "ok" and result.trace.status == "finished"
    assert "the lens is cracked" in llm.requests[3].messages[-1].text()


async def test_a_server_that_exits_makes_every_later_call_say_so_scripted_llm(
    tmp_path: Path,
) -> None:
    if not HAS_SDK:
        pytest.skip("the MCP SDK is not installed (pip install 'hammr[mcp]')")
    cfg = write_config(tmp_path, lens_entry("doomed"))
    tools = {t.name: t for t in configured_tools(cfg)}
    llm = ScriptedLLM(
        [
            "[Thought]: bye\n[Act]: x = doomed_Exit()",
            "[Thought]: hello?\n[Act]: y = doomed_Echo('anyone')",
            "[Thought]: it is gone\n[Finish]: gone",
        ]
    )
    result = await agent(tools, ["doomed_Exit", "doomed_Echo"], llm).run(
        "go", {"image": green()}, ctx=ToolContext()
    )
    exit_step, echo_step, _ = result.trace.steps
    for step in (exit_step, echo_step):
        assert step.error_kind == "tool_failure"
        assert "the MCP server 'doomed'" in str(step.error) and "exited" in str(step.error)
        assert "lens: shutting down on request" in str(step.error)  # its stderr's last line
    assert result.answer == "gone"
    # the next build (the next `hammr ask`) starts it anew
    again = {t.name: t for t in configured_tools(cfg)}
    fresh = await again["doomed_Echo"].invoke({"text": "back", "times": 1}, ToolContext())
    assert fresh.value == "back"


async def test_a_specialist_from_an_agent_file_gets_the_mcp_tool_scripted_llm(
    tmp_path: Path,
) -> None:
    if not HAS_SDK:
        pytest.skip("the MCP SDK is not installed (pip install 'hammr[mcp]')")
    from hammr.agents.system import build_systems

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "lens_agent.toml").write_text(
        'name = "LensAgent"\nquestion_type = "lens"\n'
        'description = "Names landmarks with the lens."\n'
        'tools = ["lens_FindEntity", "CropImage"]\n'
        'instructions = "Ask the lens."\n'
    )
    cfg = write_config(tmp_path, lens_entry(), f'[agent]\ndir = "{agents}"\n')
    systems, _ = build_systems(cfg)
    lens_agent = systems.agents["LensAgent"]
    assert list(lens_agent.tools) == ["lens_FindEntity", "CropImage"]
    llm = ScriptedLLM(
        ["[Thought]: look\n[Act]: e = lens_FindEntity(image)", "[Thought]: seen\n[Finish]: green"]
    )
    result = await lens_agent.run("what?", {"image": green()}, ctx=ToolContext(llm=llm))
    assert result.trace.steps[0].tool == "lens_FindEntity"
    assert "mean colour (10, 200, 30)" in str(result.trace.steps[0].observation)
    # an agent file naming a tool no server offers is still a clear error
    (agents / "lens_agent.toml").write_text(
        'name = "LensAgent"\ndescription = "d"\ntools = ["lens_NoSuchTool"]\ninstructions = "i"\n'
    )
    with pytest.raises(SpecError, match=r"unknown tool 'lens_NoSuchTool'.*lens_FindEntity"):
        build_systems(write_config(tmp_path, lens_entry(), f'[agent]\ndir = "{agents}"\n'))


def test_muse_react_and_avis_get_the_mcp_tools_scripted_llm(tmp_path: Path) -> None:
    if not HAS_SDK:
        pytest.skip("the MCP SDK is not installed (pip install 'hammr[mcp]')")
    from avis_policy import AvisPolicy, plan, verdict
    from hammr.avis.system import AvisSystem
    from hammr.systems import build_system

    graph = tmp_path / "graph.toml"
    graph.write_text(
        '[edges]\nSTART = ["find_entity", "vqa"]\nfind_entity = ["llm_qa"]\n'
        '[actions.find_entity]\ntool = "lens_FindEntity"\ndescription = "Name the entity."\n'
    )
    cfg = write_config(tmp_path, lens_entry(), f'[avis]\ngraph = "{graph}"\n')
    react, _ = build_system(cfg, "react")
    assert isinstance(react, ReActAgent) and "lens_FindEntity" in react.tools
    assert "lens_FindEntity(image: image)" in react.system_prompt()
    avis, backends = build_system(cfg, "avis")
    assert isinstance(avis, AvisSystem) and "find_entity" in avis.graph.actions
    policy = AvisPolicy(
        {
            "decompose": ["Visual: what is it?\nKnowledge: #"],
            "plan": [lambda p: plan("find_entity", "what is it?")],
            "reason": [lambda p: verdict("answerable", "green") if "(10, 200, 30)" in p else "no"],
        }
    )
    ctx = ToolContext(backends=backends, llm=policy.llm())
    result = asyncio.run(avis.run("What is this?", {"image": green()}, ctx=ctx))
    (step,) = [s for s in result.trace.steps if s.state is not None]
    assert step.tool == "find_entity" and "lens_FindEntity: entity: a 40x30 photo" in str(
        step.observation
    )
    assert result.answer == "green"


# -- a real server over streamable HTTP ----------------------------------------------------


async def test_a_server_over_streamable_http_scripted_llm(tmp_path: Path) -> None:
    if not HAS_SDK:
        pytest.skip("the MCP SDK is not installed (pip install 'hammr[mcp]')")
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # "PORT <n>" once it listens
        assert line.startswith("PORT "), line
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        entry = f'[[tools.mcp]]\nname = "remote"\nurl = "{url}"\nheaders = {{X-Test = "1"}}\n'
        entry += 'tools = ["FindEntity", "Echo"]\n'
        tools = {t.name: t for t in configured_tools(write_config(tmp_path, entry))}
        assert [n for n in tools if n.startswith("remote_")] == ["remote_FindEntity", "remote_Echo"]
        llm = ScriptedLLM(
            [
                "[Thought]: ask\n[Act]: who = remote_FindEntity(image)",
                "[Thought]: green\n[Finish]: green",
            ]
        )
        result = await agent(tools, ["remote_FindEntity"], llm).run(
            "what?", {"image": green()}, ctx=ToolContext()
        )
        assert "mean colour (10, 200, 30)" in str(result.trace.steps[0].observation)
        assert result.answer == "green"
    finally:
        server.terminate()
        server.wait(timeout=60)


# -- servers that cannot be used -----------------------------------------------------------


@needs_sdk
@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            '[[tools.mcp]]\nname = "ghost"\ncommand = ["no-such-program-for-hammr-tests"]\n',
            "[[tools.mcp]] 'ghost' (from {file}): cannot start 'no-such-program-for-hammr-tests':"
            " no such program",
        ),
        (
            f'[[tools.mcp]]\nname = "quitter"\ncommand = ["{sys.executable}", "-c", '
            "\"import sys; sys.stderr.write('no licence\\\\n'); sys.exit(4)\"]\n",
            "[[tools.mcp]] 'quitter' (from {file}): the server exited (or closed its stdout) "
            "before it answered the handshake; its stderr ends: no licence",
        ),
        (
            '[[tools.mcp]]\nname = "down"\nurl = "http://127.0.0.1:9/mcp"\n',
            "[[tools.mcp]] 'down' (from {file}): cannot connect to http://127.0.0.1:9/mcp",
        ),
        (
            f'[[tools.mcp]]\nname = "picky"\ncommand = ["{sys.executable}", "{SERVER}"]\n'
            'tools = ["Echo", "Teleport"]\n',
            "[[tools.mcp]] 'picky' (from {file}): tools lists 'Teleport', which the server does "
            "not offer; it offers: FindEntity, Echo",
        ),
    ],
)
def test_a_server_that_cannot_be_used_is_one_clear_error(
    tmp_path: Path, entry: str, expected: str
) -> None:
    cfg = write_config(tmp_path, entry)
    with pytest.raises(ConfigError) as e:
        configured_tools(cfg)
    assert str(e.value).startswith(expected.format(file=cfg.path)), str(e.value)
    assert "\n" not in str(e.value)


@needs_sdk
def test_hammr_ask_with_a_missing_command_fails_in_one_line(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path, '[[tools.mcp]]\nname = "ghost"\ncommand = ["no-such-program-for-hammr-tests"]\n'
    )
    r = CliRunner().invoke(
        main, ["ask", "--config", str(cfg.path), str(EXAMPLES / "plate.png"), "what?"], env={}
    )
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"hammr: error: [[tools.mcp]] 'ghost' (from {cfg.path}): cannot start "
        "'no-such-program-for-hammr-tests': no such program "
        "(command = ['no-such-program-for-hammr-tests'])"
    ]
    assert "Traceback" not in r.output


@needs_sdk
def test_hammr_systems_names_the_servers_without_starting_them(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path, '[[tools.mcp]]\nname = "ghost"\ncommand = ["no-such-program-for-hammr-tests"]\n'
    )
    r = CliRunner().invoke(main, ["systems", "--config", str(cfg.path)], env={})
    assert r.exit_code == 0, r.output
    assert "# MCP servers ([[tools.mcp]]): ghost: not contacted here" in r.output
