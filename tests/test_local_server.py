"""LocalLlamaServer: llama.cpp's HTTP server in a child process, started, checked, stopped by
PID; a server that cannot start says why, with what it wrote."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from hammr.backends.llm.local_server import LocalLlamaServer, LocalServerError
from real_server import SKIP_REASON

needs_xllamacpp = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")


def test_settings_are_checked() -> None:
    for kw, needle in [
        ({"n_parallel": 0}, "n_parallel must be at least 1"),
        ({"per_slot_ctx": 10}, "per_slot_ctx must be at least 64"),
        ({"n_threads": 0}, "n_threads must be at least 1"),
        ({"port": 70000}, "port must be 0"),
        ({"startup_timeout_s": 0}, "startup_timeout_s must be above 0"),
    ]:
        with pytest.raises(ValueError, match=needle):
            LocalLlamaServer(Path("m.gguf"), **kw)  # type: ignore[arg-type]
    server = LocalLlamaServer(Path("m.gguf"), n_parallel=3, per_slot_ctx=1024)
    assert server.n_ctx == 3072 and server.pid is None and not server.running()
    with pytest.raises(LocalServerError, match="not started; call start"):
        _ = server.base_url
    server.stop()  # nothing to stop: nothing happens


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(LocalServerError, match=r"model file not found: .*nope\.gguf"):
        LocalLlamaServer(tmp_path / "nope.gguf").start()


def test_a_file_that_is_not_gguf_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a GGUF file")
    with pytest.raises(LocalServerError, match=r"bad\.gguf is not a GGUF model file"):
        LocalLlamaServer(bad).start()


@needs_xllamacpp
def test_a_server_that_cannot_load_its_model_says_why(tmp_path: Path) -> None:
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)  # a GGUF header and nothing after it
    server = LocalLlamaServer(bad, n_parallel=1, per_slot_ctx=256, startup_timeout_s=120)
    with pytest.raises(LocalServerError) as e:
        server.start()
    msg = str(e.value)
    assert msg.startswith("the local llama.cpp server for cut.gguf exited with status 1 "), msg
    assert "while starting; its output ended:\n" in msg
    assert f"llama.cpp could not serve {bad} (n_ctx=256, n_parallel=1): " in msg
    assert "Traceback" not in msg
    assert not server.running() and server.pid is None


@needs_xllamacpp
def test_start_serve_stop_by_pid() -> None:
    with LocalLlamaServer(n_parallel=1, per_slot_ctx=512, n_threads=1, alias="tiny") as server:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", server.base_url), server.base_url
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        pid = server.pid
        assert pid is not None and server.running()
        with urllib.request.urlopen(server.base_url + "/models", timeout=30) as resp:
            models = json.loads(resp.read())
        assert [m["id"] for m in models["data"]] == ["tiny"]
        assert [s["is_processing"] for s in server.slots()] == [False]
        assert server.decoding() == 0
        assert server.start() is server  # already running: the same server
        assert server.pid == pid
    assert not server.running() and server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@needs_xllamacpp
def test_kill_ends_it_at_once() -> None:
    server = LocalLlamaServer(n_parallel=1, per_slot_ctx=512, n_threads=1).start()
    try:
        url, pid = server.base_url, server.pid
        assert pid is not None
        server.kill()
        assert not server.running() and server.base_url == url
        with pytest.raises(OSError):
            urllib.request.urlopen(url + "/models", timeout=5)
    finally:
        server.stop()
