"""Results that are not results, and runs that would mix two experiments (issue 26).

A run whose samples are failures (every one, or more than half for one cause:
:mod:`hammr.eval.run_health`) is FAILED with its cause in ``hammr eval`` (exit 1), ``hammr
experiment run`` (a failed step, exit 1, the other steps still run), ``hammr report``,
``hammr runs``, ``hammr experiment report`` and the viewer's data alike, never ``0.0 ±0.0``.
A stored run is never resumed with another model or another setting that changes answers
(:mod:`hammr.eval.resume`), and ``hammr eval`` never adds to an experiment's run. The model is
the scripted OpenAI-compatible server throughout.
"""

from __future__ import annotations

import csv
import shutil
import sqlite3
from pathlib import Path

import pytest
import tests.test_experiments_runner as runner_tests
from click.testing import CliRunner
from tests.test_eval_cli import make_data

from browser_support import CHROMIUM, needs_browser, sync_playwright
from fake_openai_server import FakeServer, served_env
from hammr.cli import main
from hammr.eval.resume import config_changes, operational, resume_refusal
from hammr.eval.run_health import failure_cause, run_verdict
from hammr.eval.store import RunInfo, RunStore
from hammr.web.api import Api
from hammr.web.static_report import report_data

IMAGE_GONE = "ImageLoadError: image file not found: /data/img/{i}.png"


# -- the rule --------------------------------------------------------------------------------


def test_every_sample_failed_is_failed_with_the_cause_and_the_first_error_line() -> None:
    verdict = run_verdict(12, [("error", IMAGE_GONE.format(i=i)) for i in range(12)])
    assert verdict is not None
    assert verdict.text == (
        "12 of 12 samples could not load their image (ImageLoadError: image file not found: "
        "/data/img/0.png)"
    )
    assert verdict.advice == "check that the images are under the data folder"
    assert verdict.next_step("ask again") == (
        "check that the images are under the data folder, then ask again"
    )


def test_more_than_half_for_one_cause_is_failed_half_or_mixed_causes_is_not() -> None:
    finished = [("finished", None)] * 5
    most = [("timeout", "no answer within 300 s of work\nmore")] * 7
    verdict = run_verdict(12, [*finished, *most])
    assert verdict is not None
    assert verdict.text == "7 of 12 samples timed out (no answer within 300 s of work)"
    assert run_verdict(12, [("finished", None)] * 6 + [("timeout", "t")] * 6) is None  # half
    # 8 of 12 failed, but for three causes: none above half, and some samples answered
    mixed = [("timeout", "t")] * 3 + [("llm_failure", "down")] * 3 + [("error", "boom")] * 2
    assert run_verdict(12, [("finished", None)] * 4 + mixed) is None
    # every sample failed, whatever the causes: the most common is named
    verdict = run_verdict(8, mixed)
    assert verdict is not None
    assert verdict.text == "all 8 samples failed, 3 of them timed out (t)"
    assert run_verdict(0, []) is None
    assert run_verdict(3, [("finished", None), ("max_steps", "no answer after 8 steps")]) is None


@pytest.mark.parametrize(
    ("status", "error", "text"),
    [
        ("error", "ImageLoadError: x.png: not a readable image (it is empty)", "could not load"),
        ("error", "scoring failed: ValueError: no metric 'x'", "could not be scored"),
        ("error", "RuntimeError: boom", "failed with RuntimeError"),
        ("error", None, "ended in error"),
        ("timeout", None, "timed out"),
        ("llm_failure", "HTTP 500", "got no answer from the LLM server"),
    ],
)
def test_causes_are_read_from_the_status_and_the_error(
    status: str, error: str | None, text: str
) -> None:
    assert failure_cause(status, error).text.startswith(text)


def test_operational_settings_may_change_the_others_may_not() -> None:
    stored = {"llm.model": "a", "llm.timeout_s": 60.0, "llm.base_url": "http://x", "k": 1}
    now = {"llm.model": "b", "llm.timeout_s": 90.0, "llm.base_url": "http://y", "new": 2}
    first, changed = config_changes(stored, now)
    assert first == "llm.model = 'a' (now 'b')"  # the first in key order
    assert changed == ["llm.base_url", "llm.timeout_s"]
    assert config_changes({}, {"new": 2})[0] == "new = (unset) (now 2)"
    # a capability added to the configuration is a difference; a setting hammr added since
    # (at its default) or no longer has is not
    same = {"llm.model": "a"}
    assert config_changes(same, {**same, "tools.vqa.backend": "vlm"})[0] == (
        "tools.vqa.backend = (unset) (now 'vlm')"
    )
    assert config_changes(same, {**same, "llm.n_ctx": 8192})[0] is None
    assert config_changes({**same, "llm.retired": 1}, same)[0] is None
    assert operational("vlm.concurrency") and operational("tools.ocr.timeout_s")
    assert not operational("llm.temperature") and not operational("memory.path")
    info = RunInfo("r", "tiny", "naive", {"llm.model": "a"}, "", {"limit": 2, "seed": 0})
    assert resume_refusal(info, {"limit": 5, "seed": 0}, {"llm.model": "a"}) is None
    line = resume_refusal(info, {"limit": 5, "seed": 1}, {"llm.model": "a"})
    assert line is not None and "seed = 0 (now 1)" in line


# -- hammr eval, report, runs, the viewer's data: a data folder without its images -----------


@pytest.fixture
def server() -> FakeServer:
    s = FakeServer()
    s.responder = runner_tests.respond
    yield s  # type: ignore[misc]
    s.close()


def invoke(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def hide_images(data: Path, which: tuple[int, ...] | None = None) -> Path:
    """Move the data folder's images aside (all, or these); returns where they went."""
    aside = data.parent / "aside"
    aside.mkdir(exist_ok=True)
    for png in sorted((data / "img").glob("*.png")):
        if which is None or int(png.stem) in which:
            shutil.move(png, aside / png.name)
    return aside


def restore_images(data: Path, aside: Path) -> None:
    for png in aside.glob("*.png"):
        shutil.move(png, data / "img" / png.name)


def test_scripted_eval_of_a_data_folder_without_images_is_failed_everywhere(
    server: FakeServer, tmp_path: Path
) -> None:
    suite, data = make_data(tmp_path, n=6)
    aside = hide_images(data)
    env = served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))
    store = tmp_path / "runs.sqlite"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    args += ["--system", "naive", "--name", "t"]
    code, out, err = invoke(args, env)
    assert code == 1, err
    assert out.startswith("t: 6 samples, FAILED (6 new in ") and "mean score" not in out
    (line,) = [ln for ln in err.splitlines() if ln.startswith("hammr: error:")]
    assert line.startswith(
        "hammr: error: run t FAILED: 6 of 6 samples could not load their image "
        "(ImageLoadError: image file not found: "
    )
    assert "check that the images are under the data folder, then ask them again: " in line
    assert line.endswith(f"--name t --store {store} --retry-failed`")

    # hammr report: FAILED in every cell of the run, the cause under the table, a warning
    code, out, err = invoke(["report", "t", "--store", str(store)], env)
    assert code == 0, err
    assert "0.0 ±" not in out
    macro = next(ln for ln in out.splitlines() if "Macro average" in ln)
    assert "**FAILED**" in macro
    assert "t: FAILED, its numbers are not results: 6 of 6 samples could not load" in out
    assert err.startswith("hammr: warning: run 't' has no finished samples (6 stored")
    code, out, _ = invoke(["report", "t", "--store", str(store), "--format", "csv"], env)
    rows = list(csv.reader(out.splitlines()))
    assert rows[-2][:4] == ["macro average", "", "", ""] and rows[-2][6] == "6"
    assert rows[-1][0] == "run status" and rows[-1][3].startswith("FAILED: 6 of 6 samples")
    code, out, _ = invoke(["report", "t", "--store", str(store), "--format", "html"], env)
    assert '<td class="failed"><b>FAILED</b></td>' in out and "0.0 ±" not in out
    code, out, _ = invoke(["runs", "--store", str(store)], env)
    assert out.splitlines()[1].split()[:6] == ["t", "tiny", "naive", "6", "FAILED", "6"]
    # the viewer (and `hammr report --html`, which embeds the same entries)
    with RunStore(store) as s:
        entry = Api(s, ci_samples=20).run_entry("t")
        embedded = report_data(s, ["t"], ci_samples=20)["runs"][0]
    assert entry["verdict"]["cause"] == "image"
    assert entry["verdict"]["text"].startswith("6 of 6 samples could not load their image")
    assert embedded["verdict"] == entry["verdict"]

    # the images back in place, --retry-failed makes it a result
    restore_images(data, aside)
    code, out, err = invoke([*args, "--retry-failed"], env)
    assert code == 0, err
    assert "t: 6 samples, mean score 66.7%" in out
    code, out, err = invoke(["report", "t", "--store", str(store)], env)
    assert "FAILED" not in out and "warning" not in err
    with RunStore(store) as s:
        assert Api(s, ci_samples=20).run_entry("t")["verdict"] is None


def test_scripted_eval_where_most_samples_failed_for_one_cause_is_failed(
    server: FakeServer, tmp_path: Path
) -> None:
    suite, data = make_data(tmp_path, n=6)
    hide_images(data, (0, 1, 2, 3))
    env = served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))
    store = tmp_path / "runs.sqlite"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    code, out, err = invoke([*args, "--system", "naive", "--name", "t"], env)
    assert code == 1 and "FAILED: 4 of 6 samples could not load their image" in err
    code, out, err = invoke(["report", "t", "--store", str(store)], env)
    assert code == 0 and "FAILED" in out
    # two of the six answered: not "no finished samples", but the run is still not a result
    (warning,) = err.strip().splitlines()
    assert warning.startswith("hammr: warning: run 't' FAILED: 4 of 6 samples could not load")
    assert warning.endswith("--retry-failed`")


# -- hammr experiment run and report ---------------------------------------------------------


def test_scripted_experiment_with_images_missing_marks_the_step_failed_and_goes_on(
    server: FakeServer, tmp_path: Path
) -> None:
    path, data = runner_tests.write_experiment(tmp_path)
    # explore asks all six questions and 4 of them lose their image (more than half: FAILED);
    # ocr asks the three even ones (signs), of which one loses it: a result
    aside = hide_images(data, (0, 1, 3, 5))
    store = tmp_path / "runs.sqlite"
    env = runner_tests.env_for(server, tmp_path)
    code, out, err = invoke(runner_tests.run_args(path, data, store), env)
    assert code == 1, err
    assert "step 1/4 run explore (scripted.explore): scripted.explore: 6 samples, FAILED" in err
    assert (
        "hammr: warning: step 1/4 run explore (scripted.explore): failed: 4 of 6 samples could "
        "not load their image (ImageLoadError: image file not found: "
    ) in err
    assert "run the experiment again with --retry-failed" in err
    assert "step 2/4 memory refl (reflect from explore): skipped, its run 'explore' did not" in err
    assert "scripted: 1 of 4 steps done (2 worked on now, 0 already done)" in out
    assert "  run explore: failed: 4 of 6 samples could not load their image" in out
    with RunStore(store) as s:
        assert s.count("scripted.ocr") == 3 and s.run_info("scripted.reflexion") is None

    out_csv = tmp_path / "t.csv"
    args = ["experiment", "report", str(path), "--store", str(store), "--csv", str(out_csv)]
    args += ["--html", str(tmp_path / "t.html")]
    code, out, err = invoke(args, env)
    assert code == 0, err
    assert "0.0 ±" not in out and "run scripted.explore: failed: 4 of 6 samples" in out
    cells = {(r["row"], r["column"]): r for r in csv.DictReader(out_csv.open())}
    naive = cells[("naive", "All")]
    assert (naive["status"], naive["ours"]) == ("failed", "")
    assert naive["reason"].startswith("failed: 4 of 6 samples could not load their image")
    assert cells[("ocr only", "All")]["status"] == "ok"
    assert "run scripted.explore: failed: 4 of 6 samples" in (tmp_path / "t.html").read_text()
    code, out, _ = invoke(["experiment", "show", str(path), "--store", str(store)], env)
    assert "-> scripted.explore  [failed: 4 of 6 samples could not load their image" in out
    # hammr report on the experiment's run says how to ask them again: through the experiment
    code, _, err = invoke(["report", "scripted.explore", "--store", str(store)], env)
    assert f"`hammr experiment run scripted --data-dir {data.resolve()} --store {store}" in err

    # run again as it is: still failed, nothing asked
    asked = runner_tests.chats(server)
    code, out, err = invoke(runner_tests.run_args(path, data, store), env)
    assert code == 1 and "run explore: failed: 4 of 6" in out
    assert "step 4/4 run ocr (scripted.ocr): done (3 samples stored)" in err
    # the images back, --retry-failed asks the failed samples again and the rest follows
    restore_images(data, aside)
    code, out, err = invoke(runner_tests.run_args(path, data, store, "--retry-failed"), env)
    assert code == 0, err
    assert "scripted: 4 of 4 steps done" in out
    assert runner_tests.chats(server) > asked
    code, out, err = invoke(["experiment", "report", str(path), "--store", str(store)], env)
    assert code == 0 and "failed" not in out


# -- resuming with other settings ------------------------------------------------------------


def kill_midway(store: Path, run: str, ids: tuple[str, ...]) -> None:
    """As if ``run`` had been killed before storing these samples."""
    db = sqlite3.connect(store)
    with db:
        marks = ", ".join("?" for _ in ids)
        db.execute(f"DELETE FROM samples WHERE run = ? AND sample_id IN ({marks})", (run, *ids))
    db.close()


def test_scripted_experiment_resumed_with_another_model_is_refused_in_one_line(
    server: FakeServer, tmp_path: Path
) -> None:
    path, data = runner_tests.write_experiment(tmp_path)
    store = tmp_path / "runs.sqlite"
    env = runner_tests.env_for(server, tmp_path)
    assert invoke(runner_tests.run_args(path, data, store), env)[0] == 0
    kill_midway(store, "scripted.reflexion", ("s1", "s4"))
    asked = len(server.seen)
    other = {**env, "HAMMR_LLM__MODEL": "other-model"}
    code, out, err = invoke(runner_tests.run_args(path, data, store), other)
    assert code == 2 and len(server.seen) == asked  # refused before anything ran
    (line,) = err.strip().splitlines()
    assert line == (
        "hammr: error: run 'explore' is stored as 'scripted.explore' with llm.model = 'fake' "
        "(now 'other-model'); rename with --prefix to keep both"
    )
    # a setting of how the work is done may change: the killed run resumes, with a note
    slower = {**env, "HAMMR_LLM__TIMEOUT_S": "777"}
    code, out, err = invoke(runner_tests.run_args(path, data, store), slower)
    assert code == 0, err
    assert "resuming run scripted.reflexion: 4 of 6 samples already done" in err
    assert "note: settings differ from the run's start: llm.timeout_s" in err
    # the other model under its own prefix: its runs, its report line
    code, out, err = invoke(runner_tests.run_args(path, data, store, "--prefix", "m2."), other)
    assert code == 0, err
    code, out, _ = invoke(
        ["experiment", "report", str(path), "--store", str(store), "--prefix", "m2."], env
    )
    assert "LLM: openai other-model" in out and "LLM: openai fake" not in out


def test_scripted_eval_into_an_experiment_s_run_is_refused(
    server: FakeServer, tmp_path: Path
) -> None:
    path, data = runner_tests.write_experiment(tmp_path)
    store = tmp_path / "runs.sqlite"
    env = runner_tests.env_for(server, tmp_path)
    assert invoke(runner_tests.run_args(path, data, store), env)[0] == 0
    kill_midway(store, "scripted.explore", ("s1",))
    asked = len(server.seen)
    suite = tmp_path / "tiny.toml"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    args += ["--system", "naive", "--name", "scripted.explore"]
    code, _, err = invoke(args, env)
    assert code == 2 and len(server.seen) == asked
    (line,) = err.strip().splitlines()
    assert line.startswith(
        "hammr: error: run 'scripted.explore' belongs to experiment 'scripted' (its run "
        "'explore'): `hammr eval` does not add to it"
    )
    assert "`hammr experiment run scripted`" in line and "its own --name" in line
    with RunStore(store) as s:
        assert s.count("scripted.explore") == 5


def test_scripted_eval_resumed_with_other_settings_is_refused_naming_the_difference(
    server: FakeServer, tmp_path: Path
) -> None:
    suite, data = make_data(tmp_path, n=6)
    env = served_env(server, HAMMR_CONFIG="", XDG_CACHE_HOME=str(tmp_path / "cache"))
    store = tmp_path / "runs.sqlite"
    args = ["eval", "--suite", str(suite), "--data-dir", str(data), "--store", str(store)]
    args += ["--system", "naive", "--name", "t"]
    assert invoke([*args, "--limit", "1"], env)[0] == 0
    asked = len(server.seen)
    for extra, changed_env, needle in [
        ([], {"HAMMR_LLM__MODEL": "other"}, "llm.model = 'fake' (now 'other')"),
        ([], {"HAMMR_LLM__TEMPERATURE": "0.7"}, "llm.temperature = 0.0 (now 0.7)"),
        (["--max-steps", "2"], {}, "max_steps = (unset) (now 2)"),
        (["--seed", "3"], {}, "seed = 0 (now 3)"),
    ]:
        code, _, err = invoke([*args, "--limit", "1", *extra], {**env, **changed_env})
        assert code == 2, (extra, err)
        (line,) = err.strip().splitlines()
        assert f"run 't' was made with {needle}" in line, line
        assert "give this evaluation its own --name" in line
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)
    code, _, err = invoke([*args[:4], str(moved), *args[5:], "--limit", "1"], env)
    assert code == 2 and "data_dir = " in err
    assert len(server.seen) == asked
    # a larger --limit extends the run, a longer --timeout is how failures are asked again
    code, _, err = invoke([*args, "--limit", "2", "--timeout", "60"], env)
    assert code == 0, err
    assert "resuming run t: 2 of 4 samples already done" in err
    with RunStore(store) as s:
        assert s.count("t") == 4
        info = s.run_info("t")
        assert info is not None and info.config["llm.model"] == "fake"


# -- the viewer, in a real browser -----------------------------------------------------------


@needs_browser("test_run_health")
def test_the_static_report_shows_a_failed_run_as_failed_in_the_browser(tmp_path: Path) -> None:
    from hammr.eval.types import RunRecord

    store = tmp_path / "runs.sqlite"
    with RunStore(store) as s:
        for run in ("broken", "fine"):
            s.open_run(run, "tiny", "naive")
        for i in range(3):
            gone = IMAGE_GONE.format(i=i)
            s.add(RunRecord("broken", f"s{i}", "signs", "ocr_reasoning", "q", ("a",), None, 0.0,
                            status="error", error=gone))  # fmt: skip
            s.add(RunRecord("fine", f"s{i}", "signs", "ocr_reasoning", "q", ("a",), "a", 1.0))
    out = tmp_path / "report.html"
    code, _, err = invoke(["report", "broken", "fine", "--store", str(store), "--html", str(out)],
                          {"HAMMR_CONFIG": ""})  # fmt: skip
    assert code == 0, err
    assert sync_playwright is not None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(out.as_uri())
            broken = page.locator("tr.run-row[data-run=broken]")
            broken.wait_for()
            failed = broken.locator("td.failed")
            assert failed.count() == 2  # the signs column and the macro average
            assert {failed.nth(i).inner_text() for i in range(2)} == {"FAILED"}
            title = failed.first.get_attribute("title") or ""
            assert title.startswith("not a result: 3 of 3 samples could not load their image")
            assert "0.0" not in broken.inner_text()
            fine = page.locator("tr.run-row[data-run=fine]")
            assert fine.locator("td.failed").count() == 0 and "100.0" in fine.inner_text()
            page.goto(out.as_uri() + "#/run/broken")
            box = page.locator(".run-failed")
            box.wait_for()
            assert box.inner_text().startswith(
                "FAILED: its numbers are not results: 3 of 3 samples could not load their image"
            )
            assert not errors, errors
        finally:
            browser.close()
