"""`hammr mcp`: hammr's tools and systems offered to MCP hosts, tested with the official SDK's
own client (`mcp.Client`) against the real command, over stdio and over streamable HTTP.

Over stdio the client starts `.venv/bin/hammr mcp` itself, as a host does; over HTTP the test
starts `hammr mcp --http --port 0` and reads the URL it prints. Every server runs with a
temporary HOME and cache, no configuration file (the embedded default model and the offline
backends), in a temporary folder. Tests assert outcomes, never timings.
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip(
    "mcp", reason="the MCP SDK (mcp>=2.3) is not installed: hammr mcp is not tested"
)

from click.testing import CliRunner  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.types import CallToolResult, ImageContent, TextContent  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from conftest import EXAMPLES, ROOT, needs_embedded_model  # noqa: E402
from hammr.cli import main  # noqa: E402
from hammr.mcp_bridge.tool_server import ask_name, param_schema, tool_schema  # noqa: E402
from hammr.tools.base import Param  # noqa: E402
from hammr.tools.library import builtin_tools  # noqa: E402
from patience import HANG_S  # noqa: E402

HAMMR = str(ROOT / ".venv" / "bin" / "hammr")


def env_for(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache"), "HAMMR_CONFIG": ""}


def png(width: int, height: int, colour: str = "red", fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (width, height), colour).save(buf, format=fmt)
    return buf.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def png_claiming(width: int, height: int) -> bytes:
    """A PNG header claiming a huge size over almost no data (a decompression bomb's shape)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def images_of(result: CallToolResult) -> list[PILImage.Image]:
    return [
        PILImage.open(io.BytesIO(base64.b64decode(c.data)))
        for c in result.content
        if isinstance(c, ImageContent)
    ]


@asynccontextmanager
async def stdio(tmp_path: Path, *args: str) -> AsyncIterator[Client]:
    """The SDK's client on `hammr mcp ARGS`, started by the SDK's stdio transport as a host
    starts it (the server's stderr kept in stderr.txt)."""
    from mcp.client.stdio import stdio_client as sdk_stdio_client

    params = StdioServerParameters(
        command=HAMMR, args=["mcp", *args], env=env_for(tmp_path), cwd=str(tmp_path)
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        transport = sdk_stdio_client(params, errlog=errlog)
        async with Client(transport, read_timeout_seconds=HANG_S) as client:
            yield client


# -- the schemas, without a server ---------------------------------------------------------------


def test_each_kind_has_its_json_schema() -> None:
    tools = {t.name: t for t in builtin_tools()}
    crop = tool_schema(tools["CropImage"], local_files=False)
    assert crop["required"] == ["image", "boxes"]
    assert crop["properties"]["image"]["type"] == "string"
    assert "data URL" in crop["properties"]["image"]["description"]
    assert "path" not in crop["properties"]["image"]["description"]  # over HTTP: no paths
    boxes = crop["properties"]["boxes"]
    assert boxes["type"] == "array" and boxes["items"]["type"] == "array"
    assert boxes["items"]["minItems"] == boxes["items"]["maxItems"] == 4
    zoom = tool_schema(tools["ZoomIn"], local_files=True)["properties"]
    assert zoom["factor"] == {**zoom["factor"], "type": "number", "default": 2.0}
    assert "path of an image file" in zoom["image"]["description"]
    spatial = tool_schema(tools["SpatialSelection"], local_files=True)
    assert "leftmost" in spatial["properties"]["relation"]["enum"]
    assert spatial["properties"]["point"]["minItems"] == 2
    assert "point" not in spatial["required"]
    assert tool_schema(tools["WebSearch"], local_files=True)["properties"]["k"]["type"] == "integer"
    similarity = tool_schema(tools["ImageTextSimilarity"], local_files=True)["properties"]
    assert similarity["texts"]["items"] == {"type": "string"}
    # a union of kinds that are all strings in JSON is one string; a vectorised parameter
    # takes one value or a list of them
    context = tool_schema(tools["AnswerWithContext"], local_files=True)["properties"]["context"]
    assert context["type"] == "string"
    ocr_image = tool_schema(tools["OCR"], local_files=True)["properties"]["image"]
    assert [m.get("type") for m in ocr_image["anyOf"]] == ["string", "array"]
    assert param_schema(Param("x", "any"), local_files=False) == {}
    assert ask_name("mulprog-direct") == "ask_mulprog-direct"
    assert ask_name("a b/c") == "ask_a_b_c"


async def test_a_call_past_the_timeout_is_an_error_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process, through the SDK's client on the server object: a tool that runs past
    --timeout-s is cancelled and answers an error result; the server goes on."""
    import asyncio

    from hammr.config import load_config
    from hammr.mcp_bridge.tool_server import HammrTools
    from hammr.tools.base import tool

    monkeypatch.chdir(tmp_path)

    @tool
    async def Sleep(seconds: float) -> str:
        """Sleep, then say so.

        Args:
            seconds: how long.
        """
        await asyncio.sleep(seconds)
        return "awake"

    hammr_tools = HammrTools(
        load_config(None, env={}), local_files=False, systems=False, timeout_s=0.5, cache=False
    )
    hammr_tools.tools["Sleep"] = Sleep
    async with Client(hammr_tools.server()) as client:
        slow = await client.call_tool("Sleep", {"seconds": HANG_S})
        quick = await client.call_tool("Sleep", {"seconds": 0})
    assert slow.is_error and "did not finish within 0.5 s" in text_of(slow)
    assert not quick.is_error and text_of(quick) == "awake"


# -- over stdio ----------------------------------------------------------------------------------


async def test_a_host_lists_every_tool_and_an_ask_tool_per_system(tmp_path: Path) -> None:
    from hammr.systems import registered_systems

    async with stdio(tmp_path) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert {t.name for t in builtin_tools()} <= set(listed)
    assert {ask_name(s) for s in registered_systems()} <= set(listed)
    crop = listed["CropImage"].input_schema
    assert crop["required"] == ["image", "boxes"]
    assert crop["properties"]["image"]["type"] == "string"
    assert crop["properties"]["boxes"]["items"]["maxItems"] == 4
    ask = listed["ask_hammr"].input_schema
    assert ask["required"] == ["question", "image"]
    assert ask["properties"]["question"]["maxLength"] == 4000
    assert set(ask["properties"]) == {"question", "image", "image2", "point"}
    # a tool whose capability has no backend here says so in its description
    assert "Not available" in (listed["VQA"].description or "")
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "tools over stdio" in stderr


async def test_crop_calculator_and_a_local_file(tmp_path: Path) -> None:
    async with stdio(tmp_path, "--no-systems") as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert not any(name.startswith("ask_") for name in listed)
        one = await client.call_tool(
            "CropImage", {"image": data_url(png(100, 80)), "boxes": [[10, 10, 30, 20]]}
        )
        assert not one.is_error, text_of(one)
        assert [im.size for im in images_of(one)] == [(30, 20)]
        assert "30x20" in text_of(one)
        two = await client.call_tool(
            "CropImage",
            {
                "image": base64.b64encode(png(64, 64)).decode(),
                "boxes": [[0, 0, 8, 8], [8, 8, 16, 4]],
            },
        )
        assert [im.size for im in images_of(two)] == [(8, 8), (16, 4)]
        calc = await client.call_tool("Calculator", {"expression": "2 * (3 + 4)"})
        assert not calc.is_error and text_of(calc) == "14"
        assert calc.structured_content == {"result": 14}
        overlap = await client.call_tool(
            "BoundingBoxOverlap",
            {"anchor": [0, 0, 10, 10], "boxes": [[0, 0, 10, 10], [20, 20, 5, 5]]},
        )
        assert overlap.structured_content == {"result": [1.0, 0.0]}, text_of(overlap)
        # over stdio an image may be a file on this machine (read through hammr's reader)
        plate = EXAMPLES / "plate.png"
        with PILImage.open(plate) as shown:
            width, height = shown.size
        zoomed = await client.call_tool(
            "ZoomIn", {"image": str(plate), "box": [0, 0, width / 2, height / 2], "factor": 2}
        )
        assert not zoomed.is_error, text_of(zoomed)
        assert images_of(zoomed)[0].size == (width, height)


async def test_bad_calls_are_error_results_and_the_server_goes_on(tmp_path: Path) -> None:
    bomb = data_url(png_claiming(100_000, 100_000))
    small = data_url(png(20, 20))
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("Calculator", {"expresion": "1"}, "has no argument 'expresion'"),
        ("Calculator", {}, "missing argument 'expression'"),
        ("CropImage", {"image": small, "boxes": [[1, 2, 3]]}, "box"),
        ("CropImage", {"image": small, "boxes": "left"}, "boxes"),
        ("CropImage", {"image": data_url(b"hello", "text/plain"), "boxes": [[0, 0, 1, 1]]},
         "not an image"),
        ("CropImage", {"image": data_url(b"hello, not a picture"), "boxes": [[0, 0, 1, 1]]},
         "not an image (no image format Pillow reads)"),
        ("CropImage", {"image": data_url(png(8, 8, fmt="JPEG")), "boxes": [[0, 0, 1, 1]]},
         "declared image/png but holds JPEG data"),
        ("CropImage", {"image": bomb, "boxes": [[0, 0, 1, 1]]}, "above the limit"),
        ("CropImage", {"image": "data:image/png;base64,@@@@", "boxes": [[0, 0, 1, 1]]},
         "not valid base64"),
        ("CropImage", {"image": "https://example.com/a.png", "boxes": [[0, 0, 1, 1]]},
         "does not fetch URLs"),
        ("CropImage", {"image": str(tmp_path / "none.png"), "boxes": [[0, 0, 1, 1]]},
         "neither a data URL"),
        ("CropImage", {"image": str(tmp_path), "boxes": [[0, 0, 1, 1]]}, "folder"),
        ("Calculator", {"expression": "__import__('os').system('true')"}, ""),
        ("VQA", {"image": small, "question": "what?"}, "capability 'vqa'"),
        ("NoSuchTool", {}, "unknown tool"),
    ]  # fmt: skip
    async with stdio(tmp_path, "--no-systems") as client:
        for name, args, said in cases:
            result = await client.call_tool(name, args)
            assert result.is_error, (name, args, text_of(result))
            assert said in text_of(result), (name, text_of(result))
        still = await client.call_tool("Calculator", {"expression": "6 * 7"})
        assert not still.is_error and text_of(still) == "42"


async def test_ask_tools_check_their_inputs_and_say_why_a_system_cannot_run(
    tmp_path: Path,
) -> None:
    image = data_url(png(40, 30))
    async with stdio(tmp_path) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("ask_hammr", {"question": "", "image": image}, "the question is empty"),
            ("ask_hammr", {"question": "why " * 2000, "image": image}, "above the limit"),
            ("ask_hammr", {"question": "q?"}, "needs 'image'"),
            ("ask_hammr", {"question": "q?", "image": image, "point": [400, 1]}, "outside"),
            ("ask_hammr", {"question": "q?", "image": image, "colour": "red"}, "no argument"),
            ("ask_vlm", {"question": "q?", "image": image}, "cannot run here"),
            ("ask_hammr-oracle", {"question": "q?", "image": image}, "question_type"),
        ]
        for name, args, said in cases:
            result = await client.call_tool(name, args)
            assert result.is_error, (name, text_of(result))
            assert said in text_of(result), (name, text_of(result))


@needs_embedded_model
async def test_ask_hammr_answers_on_the_embedded_model(tmp_path: Path) -> None:
    menu = (EXAMPLES / "demo" / "menu.png").read_bytes()
    async with stdio(tmp_path, "--no-cache") as client:
        result = await client.call_tool(
            "ask_hammr", {"question": "How much does a cappuccino cost?", "image": data_url(menu)}
        )
    facts = result.structured_content
    assert isinstance(facts, dict) and facts["system"] == "hammr" and facts["steps"] >= 1
    if facts["answer"] is not None:  # the 135M model's answer, whatever it is
        assert not result.is_error and text_of(result) == facts["answer"]
    else:  # no answer: the trace's status and reason, as `hammr ask` says them
        assert result.is_error and text_of(result).startswith("no answer (")


def test_stdout_carries_the_protocol_and_nothing_else(tmp_path: Path) -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "Calculator", "arguments": {"expression": "1 +"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "Calculator", "arguments": {"expression": "1 + 1"}}},
    ]  # fmt: skip
    proc = subprocess.Popen(
        [HAMMR, "mcp", "--no-systems"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env_for(tmp_path)},
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
    proc.stdin.flush()  # kept open until the answers are in, as a host does
    answers = [json.loads(proc.stdout.readline()) for _ in range(3)]  # each line is JSON-RPC
    proc.stdin.close()
    assert proc.stderr is not None
    rest, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=HANG_S)
    assert proc.returncode == 0, err
    assert rest == ""
    by_id = {a["id"]: a for a in answers}
    assert set(by_id) == {1, 2, 3}
    assert by_id[2]["result"]["isError"] is True
    assert by_id[3]["result"]["content"][0]["text"] == "2"
    assert "Traceback" not in err


# -- over HTTP -----------------------------------------------------------------------------------


@contextmanager
def http_serving(tmp_path: Path, *args: str) -> Iterator[str]:
    """`hammr mcp --http --port 0 --no-systems ARGS` running; yields the URL it prints on
    stdout, and stops it after."""
    proc = subprocess.Popen(
        [HAMMR, "mcp", "--http", "--port", "0", "--no-systems", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env_for(tmp_path)},
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), url
        yield url
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=HANG_S)
        assert "Traceback" not in err, err


async def test_over_http_a_host_lists_and_calls_tools(tmp_path: Path) -> None:
    with http_serving(tmp_path) as url:
        await list_and_call_over_http(url)


async def list_and_call_over_http(url: str) -> None:
    async with Client(url, read_timeout_seconds=HANG_S) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert {t.name for t in builtin_tools()} == set(listed)
        # over HTTP an image is data, never a path on the server's machine
        assert (
            "path" not in (listed["CropImage"].input_schema["properties"]["image"]["description"])
        )
        crop = await client.call_tool(
            "CropImage", {"image": data_url(png(50, 50)), "boxes": [[5, 5, 10, 20]]}
        )
        assert [im.size for im in images_of(crop)] == [(10, 20)]
        refused = await client.call_tool(
            "CropImage", {"image": str(EXAMPLES / "plate.png"), "boxes": [[0, 0, 5, 5]]}
        )
        assert refused.is_error and "reads no files" in text_of(refused)


async def test_over_http_an_api_key_is_required_once_given(tmp_path: Path) -> None:
    with http_serving(tmp_path, "--api-key", "test-key-123") as url:
        await keyed_calls(url)


async def keyed_calls(http_server: str) -> None:
    import httpx
    import httpx2

    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient(timeout=HANG_S) as plain:
        none = await plain.post(http_server, json=ping)
        wrong = await plain.post(
            http_server, json=ping, headers={"Authorization": "Bearer not-the-key"}
        )
        other_host = await plain.post(
            http_server,
            json=ping,
            headers={"Authorization": "Bearer test-key-123", "Host": "evil.example"},
        )
    assert (none.status_code, wrong.status_code) == (401, 401)
    assert "no API key" in none.text and "wrong API key" in wrong.text
    assert other_host.status_code == 403
    from mcp.client.streamable_http import streamable_http_client

    keyed = httpx2.AsyncClient(headers={"Authorization": "Bearer test-key-123"})
    async with keyed, Client(streamable_http_client(http_server, http_client=keyed)) as client:
        result = await client.call_tool("Calculator", {"expression": "6 * 7"})
    assert text_of(result) == "42"


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--http", "--host", "0.0.0.0"], {}, "give an API key"),
        (["--http", "--host", "0.0.0.0"], {"HAMMR_API_KEY": "  "}, "give an API key"),
        (["--port", "9"], {}, "--port applies to --http only"),
        (["--config", "nowhere.toml"], {}, "nowhere.toml"),
    ],
)
def test_refusals_are_one_line_and_exit_2(
    args: list[str], env: dict[str, str], said: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["mcp", *args], env={**env_for(tmp_path), **env})
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


def test_importing_the_cli_does_not_import_the_sdk() -> None:
    code = (
        "import sys, hammr.cli; "
        "sys.exit(any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=HANG_S).returncode == 0
