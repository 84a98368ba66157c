"""The `hammr serve` command as a user runs it: a real process on 127.0.0.1, asked through the
real `openai` client; the embedded model answers, or (for shutdown, where the model must be
held mid-question) a scripted OpenAI-style model server does. Served questions are read back
by `hammr runs`, `report`, `errors` and `view` (in Debian's Chromium, through Playwright)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser_support import CHROMIUM, needs_browser, sync_playwright
from conftest import EXAMPLES, needs_embedded_model
from fake_openai_server import FakeServer, Reply, Seen, ok_body, served_env
from hammr.eval.store import RunStore
from patience import HANG_S

openai = pytest.importorskip("openai", reason="the openai client is not installed")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HAMMR_") and k != "OPENAI_API_KEY"
    }
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.update(extra)
    return env


class Serving:
    """`hammr serve` in a child process; :attr:`base` is the URL it printed."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hammr.cli", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        assert self.proc.stdout is not None
        self.base = self.proc.stdout.readline().strip()  # printed once it is listening
        if not self.base:
            _, err = self.proc.communicate(timeout=HANG_S)
            raise AssertionError(f"hammr serve did not start: {err}")

    def client(self) -> Any:
        return openai.OpenAI(base_url=self.base, api_key="unused", max_retries=0, timeout=HANG_S)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=HANG_S)
        return self.proc.returncode, err


def plate_message() -> tuple[list[dict[str, Any]], str]:
    meta = json.loads((EXAMPLES / "plate.json").read_text())
    url = (
        "data:image/png;base64," + base64.b64encode((EXAMPLES / "plate.png").read_bytes()).decode()
    )
    content = [
        {"type": "text", "text": meta["question"]},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    return [{"role": "user", "content": content}], meta["question"]


# -- the embedded model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """One question asked of `hammr serve --system naive` on the embedded model, then the same
    question streamed (the response cache answers it again), then SIGTERM."""
    root = tmp_path_factory.mktemp("serve")
    store = root / "runs.sqlite"
    env = clean_env(root, HAMMR_AGENT__MAX_STEPS="3")
    server = Serving(["--system", "naive", "--store", str(store), "--name", "s"], env, root)
    try:
        messages, question = plate_message()
        client = server.client()
        assert [m.id for m in client.models.list()] == ["naive"]
        raw = client.chat.completions.with_raw_response.create(model="naive", messages=messages)
        reply = raw.parse()
        chunks = list(
            client.chat.completions.create(
                model="naive",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    finally:
        code, err = server.stop()
    assert code == 0, err
    assert "Traceback" not in err
    yield store, {"reply": reply, "headers": raw.headers, "chunks": chunks, "question": question}


@needs_embedded_model
def test_the_embedded_model_answers_through_the_openai_client(served_store: Any) -> None:
    store, got = served_store
    reply = got["reply"]
    extra = reply.model_extra["hammr"]
    assert got["headers"]["x-hammr-trace-id"] == reply.id == extra["trace_id"]
    assert extra["status"] in ("finished", "no_answer", "step_limit"), extra
    assert (reply.choices[0].message.content != "") == (extra["status"] == "finished")
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    streamed = "".join(c.choices[0].delta.content or "" for c in got["chunks"] if c.choices)
    assert streamed == reply.choices[0].message.content  # the cache answered the same
    with RunStore(store, create=False) as s:
        records = s.records("serve-s-naive", 0, 10)
    assert [r.sample_id for r in records] == [reply.id, got["chunks"][0].id]
    assert records[0].question == got["question"]
    assert records[0].prompt_tokens == reply.usage.prompt_tokens
    assert records[0].llm_calls == extra["llm_calls"] >= 1


def hammr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hammr.cli", *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
    )


@needs_embedded_model
def test_served_questions_are_read_by_runs_report_and_errors(served_store: Any) -> None:
    store, _ = served_store
    runs = hammr("runs", "--store", str(store))
    assert runs.returncode == 0, runs.stderr
    (line,) = [x for x in runs.stdout.splitlines() if x.startswith("serve-s-naive")]
    assert line.split()[1:5] == ["served", "naive", "2", "unscored"]  # no ground truth: no %
    report = hammr("report", "serve-s-naive", "--store", str(store))
    assert report.returncode == 0, report.stderr
    assert "**unscored**" in report.stdout and "without a ground truth" in report.stdout
    errors = hammr("errors", "serve-s-naive", "--store", str(store))
    assert errors.returncode == 0, errors.stderr


@needs_embedded_model
@needs_browser(__name__)
def test_a_served_question_opens_in_the_viewer(served_store: Any) -> None:
    from hammr.web.server import ViewerServer

    store, got = served_store
    assert sync_playwright is not None
    with RunStore(store, create=False) as s:
        viewer = ViewerServer(s)
        viewer.start_in_thread()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
                page = browser.new_page()
                page.goto(viewer.url)
                page.get_by_text("serve-s-naive").first.click()
                page.get_by_text(got["question"]).first.click()
                page.get_by_text(got["reply"].id).first.wait_for()
                browser.close()
        finally:
            viewer.stop()


# -- shutdown, with a scripted model held mid-question ------------------------------------------


class HeldModel(FakeServer):
    """A scripted OpenAI-style model server whose replies wait until :attr:`release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.asked = threading.Event()

        def answer(_seen: Seen) -> Reply:
            self.asked.set()
            self.release.wait(HANG_S)
            return Reply(body=ok_body("[Thought]: It is red.\n[Finish]: red"))

        self.responder = answer


@pytest.fixture
def held() -> Iterator[HeldModel]:
    server = HeldModel()
    yield server
    server.release.set()
    server.close()


def ask_in_thread(base: str, results: list[Any]) -> threading.Thread:
    messages, _ = plate_message()

    def ask() -> None:
        try:
            results.append(
                httpx.post(
                    f"{base}/chat/completions",
                    json={"model": "naive", "messages": messages},
                    timeout=HANG_S,
                )
            )
        except httpx.HTTPError as e:
            results.append(e)

    t = threading.Thread(target=ask)
    t.start()
    return t


def test_sigterm_lets_a_question_in_flight_finish_scripted_model(
    tmp_path: Path, held: HeldModel
) -> None:
    store = tmp_path / "runs.sqlite"
    env = clean_env(tmp_path, **served_env(held))
    server = Serving(["--system", "naive", "--store", str(store), "--name", "g"], env, tmp_path)
    results: list[Any] = []
    t = ask_in_thread(server.base, results)
    assert held.asked.wait(HANG_S)
    server.proc.send_signal(signal.SIGTERM)
    held.release.set()
    t.join(HANG_S)
    code, err = server.stop()
    assert code == 0 and "Traceback" not in err, err
    (reply,) = results
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "red"
    with RunStore(store, create=False) as s:
        (rec,) = s.records("serve-g-naive", 0, 10)
    assert rec.status == "finished" and rec.prediction == "red"


def test_sigterm_past_the_grace_records_the_question_cancelled_scripted_model(
    tmp_path: Path, held: HeldModel
) -> None:
    store = tmp_path / "runs.sqlite"
    env = clean_env(tmp_path, **served_env(held))
    args = ["--system", "naive", "--store", str(store), "--name", "c", "--shutdown-grace-s", "0"]
    server = Serving(args, env, tmp_path)
    results: list[Any] = []
    t = ask_in_thread(server.base, results)
    assert held.asked.wait(HANG_S)
    code, err = server.stop()  # the model never answers
    t.join(HANG_S)
    assert code == 0 and "Traceback" not in err, err
    (reply,) = results
    assert isinstance(reply, httpx.HTTPError) or reply.status_code >= 500
    with RunStore(store, create=False) as s:
        (rec,) = s.records("serve-c-naive", 0, 10)
    assert rec.status == "cancelled" and "the server shut down" in rec.error
    assert rec.trace is not None and rec.trace.steps  # what it had done so far is kept


# -- refusals at the command line ------------------------------------------------------------------


def test_listening_beyond_loopback_needs_an_api_key(tmp_path: Path) -> None:
    r = hammr("serve", "--host", "0.0.0.0", "--port", "0", env=clean_env(tmp_path))
    assert r.returncode == 2
    assert r.stderr.startswith("hammr: error: --host 0.0.0.0 is not a loopback address")
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_an_unknown_system_is_refused_in_one_line(tmp_path: Path) -> None:
    r = hammr("serve", "--system", "gpt-4o", "--port", "0", env=clean_env(tmp_path))
    assert r.returncode == 2 and "unknown system or agent 'gpt-4o'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_models_are_the_systems_that_run_and_a_chat_can_drive(tmp_path: Path) -> None:
    from hammr.config import load_config
    from hammr.serve.serve_cli import served_models
    from hammr.systems import registered_systems

    models = served_models(load_config(None, env={}), ())
    assert "hammr" in models and "naive" in models and "avis" in models
    assert "hammr-oracle" not in models  # a chat request carries no question type
    assert "muse" not in models  # blocked offline: no experience bank
    assert set(models) < set(registered_systems())
    r = hammr("serve", "--system", "hammr-oracle", "--port", "0", env=clean_env(tmp_path))
    assert r.returncode == 2 and "needs each question's type" in r.stderr
