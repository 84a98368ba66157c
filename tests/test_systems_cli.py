"""`hammr systems`: every registered system with its paper, what it needs and whether the
configuration runs it; `hammr ask/eval --help` naming every system from the registry; and
`hammr config show` saying what the timeouts mean on the configured backend."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hammr.cli import main
from hammr.system_info import PAPERS, SYSTEMS, assess, needs_text
from hammr.systems import FACTORIES, registered_systems

OFFLINE = {"HAMMR_CONFIG": ""}
SERVED_VLM = {
    "HAMMR_CONFIG": "",
    "HAMMR_LLM__BACKEND": "openai",
    "HAMMR_LLM__BASE_URL": "http://127.0.0.1:9/v1",
    "HAMMR_LLM__MODEL": "Qwen/Qwen2.5-VL-7B-Instruct",
}


def run(args: list[str], env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, args, env=env or OFFLINE)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./hammr.toml of the checkout's
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


# -- the metadata --------------------------------------------------------------------------


def test_every_registered_system_has_its_paper_and_needs() -> None:
    assert set(SYSTEMS) == set(registered_systems())
    assert len(SYSTEMS) == 14
    for info in SYSTEMS.values():
        assert info.paper in PAPERS
        assert info.role == "the method" or info.role.startswith("baseline: ")
        assert needs_text(info)
    methods = {i.paper: i.name for i in SYSTEMS.values() if i.role == "the method"}
    assert methods == {"HAMMR": "hammr", "MEAgent": "mulprog", "AVIS": "avis", "MuSEAgent": "muse"}


def capabilities(tool_names: object) -> set[str]:
    from hammr.tools.library import builtin_tools

    by_name = {t.name: getattr(t, "capability", None) for t in builtin_tools()}
    return {c for n in tool_names for c in [by_name.get(n)] if c}  # type: ignore[attr-defined]


def test_the_capabilities_listed_are_the_ones_the_tools_call() -> None:
    from hammr.agents import AgentCatalog
    from hammr.muse.agent import TOOL_NAMES
    from hammr.programs.modules import modules_with

    catalog = AgentCatalog.load()
    leaf = {t for s in catalog.specialists for t in catalog.leaf_tools(s, "with_vqa")}
    assert set(SYSTEMS["hammr"].tools) == capabilities(leaf)
    assert set(SYSTEMS["naive"].tools) == capabilities(leaf)
    for name in ("react", "muse", "reflexion", "expel"):
        assert set(SYSTEMS[name].tools) == capabilities(TOOL_NAMES), name
    modules = {getattr(m, "capability", None) for m in modules_with().values()}
    assert set(SYSTEMS["mulprog"].tools) == modules - {None}


def test_offline_every_system_but_the_memory_ones_runs() -> None:
    from hammr.config import load_config
    from hammr.factory import build_backends

    cfg = load_config(env={})
    built = build_backends(cfg)
    ready = assess(cfg, built.backends, built.unavailable)
    blocked = {n for n, r in ready.items() if not r.runs}
    # vlm is nothing but its VQA backend, and there is none offline
    assert blocked == {"muse", "reflexion", "expel", "vlm"}
    assert "[tools.vqa] backend = " in " ".join(p.fix for p in ready["vlm"].problems)
    for name in blocked - {"vlm"}:
        fixes = " ".join(p.fix for p in ready[name].problems if p.blocking)
        assert "--memory" in fixes and "hammr memory" in fixes
    # no VQA backend offline: every system whose tools call it says how to give it one
    for name, info in SYSTEMS.items():
        says = [p for p in ready[name].problems if p.capability == "vqa"]
        assert bool(says) == ("vqa" in info.tools), name
        assert all("[tools.vqa] backend = " in p.fix for p in says)
    # the models that must see are told that this one does not
    for name in ("mulprog-direct", "cot"):
        assert any("llm.backend = 'openai'" in p.fix for p in ready[name].problems)


# -- hammr systems ------------------------------------------------------------------------------


def test_hammr_systems_lists_all_eleven_and_whether_they_run_here() -> None:
    r = run(["systems"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "# model: embedded SmolLM2-135M-Instruct" in out
    table = {ln.split()[0]: ln for ln in out.split("\n\n")[1].splitlines()[1:]}
    assert set(table) == set(registered_systems())
    for name, line in table.items():
        assert SYSTEMS[name].paper in line
    assert table["muse"].split("  ")[-1].strip().startswith("no: no memory file")
    assert "yes" in table["hammr"] and "yes" in table["mulprog"]
    for paper in PAPERS.values():
        assert paper.title in out
    assert "mulprog · MEAgent, the method · runs here: yes, limited" in out
    assert "no backend for vqa" in out and "vqa: set [tools.vqa] backend = " in out
    assert "Agents by name" in out and "OCRReasoningAgent (ocr_reasoning)" in out


def test_hammr_systems_with_a_memory_file_runs_muse(tmp_path: Path) -> None:
    bank = tmp_path / "bank.db"
    r = run(["systems", "muse", "--memory", str(bank)])
    assert r.exit_code == 0
    assert f"muse: no experience bank at {bank}" in r.stdout
    bank.write_bytes(b"")  # not a bank: refused as `hammr ask` refuses it
    r = run(["systems", "muse", "--memory", str(bank), "--json"])
    assert r.exit_code == 0, r.output
    (muse,) = json.loads(r.stdout)["systems"]
    assert muse["runs"] is False and muse["status"] == "blocked"
    blocking = [p["what"] for p in muse["problems"] if p["blocking"]]
    assert blocking == [f"muse: {bank} is an empty file, not an experience bank; make one with "
                        f"`hammr memory build RUN -o {bank}`"]  # fmt: skip


def memory_files(tmp_path: Path) -> dict[str, Path]:
    """A zero-byte file, a run store, and a Reflexion and an ExpeL memory (empty, as
    `hammr memory reflect|insights` makes them)."""
    from hammr.eval.store import RunStore
    from hammr.muse.trajectories import MemoryFile

    files = {name: tmp_path / f"{name}.db" for name in ("zero", "store", "reflexion", "expel")}
    files["zero"].write_bytes(b"")
    with RunStore(files["store"]) as store:
        store.open_run("explore", "vstar", "react")
    for kind in ("reflexion", "expel"):
        MemoryFile(files[kind], kind).close()  # type: ignore[arg-type]
    return files


@pytest.mark.parametrize("system", ["muse", "reflexion", "expel"])
def test_systems_says_what_ask_says_of_a_memory_file(tmp_path: Path, system: str) -> None:
    """`hammr systems S --memory FILE` reads the memory with the function `hammr ask
    --system S --memory FILE` reads it with (issue 26): a file the system cannot read is
    "no" with ask's own line; one it can read is not blocked."""
    image = Path(__file__).resolve().parent.parent / "examples" / "demo" / "coffee.jpg"
    for name, path in memory_files(tmp_path).items():
        before = path.read_bytes()
        r = run(["systems", system, "--memory", str(path), "--json"])
        assert r.exit_code == 0, r.output
        (info,) = json.loads(r.stdout)["systems"]
        blocking = [p["what"] for p in info["problems"] if p["blocking"]]
        if name == system:  # the right kind of memory (`ask` would go on and ask the model)
            assert info["runs"] is True and blocking == [], (name, info)
            continue
        assert info["runs"] is False, (name, info)
        asked = run(["ask", str(image), "What is this?", "--system", system, "--memory", str(path)])
        assert path.read_bytes() == before  # neither command writes to it
        assert asked.exit_code == 2 and asked.stdout == "", (name, asked.output)
        assert blocking == [asked.stderr.removeprefix("hammr: error: ").rstrip("\n")], name
        assert str(path) in blocking[0]
        table = run(["systems", system, "--memory", str(path)]).stdout
        row = next(line for line in table.splitlines() if line.startswith(f"{system} "))
        assert row.split("  ")[-1].strip() == f"no: {blocking[0]}"


def test_hammr_systems_json_says_the_same() -> None:
    r = run(["systems", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert [s["name"] for s in data["systems"]] == registered_systems()
    assert data["sees_images"] is False and "vqa" not in data["capabilities"]
    by_name = {s["name"]: s for s in data["systems"]}
    assert by_name["muse"]["runs"] is False and by_name["muse"]["status"] == "blocked"
    assert by_name["avis"]["requirements"]["graph"] is True
    assert by_name["mulprog-direct"]["requirements"]["sight"] == "needs"
    assert by_name["muse"]["requirements"]["memory"] == "an experience bank"
    assert by_name["hammr"]["paper"] == "HAMMR" and by_name["hammr"]["role"] == "the method"
    assert {a["name"] for a in data["agents"]} >= {"OCRReasoningAgent", "TwoImageVQAAgent"}


def test_a_served_vlm_sees_and_an_unnamed_server_runs_nothing() -> None:
    r = run(["systems", "mulprog-direct", "cot", "--json"], SERVED_VLM)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["sees_images"] is True
    for system in data["systems"]:
        assert system["status"] == "ready", system
    r = run(["systems", "--json"], {"HAMMR_CONFIG": "", "HAMMR_LLM__BACKEND": "openai"})
    assert r.exit_code == 0, r.output
    for system in json.loads(r.stdout)["systems"]:
        assert system["runs"] is False
        assert any("llm.base_url" in p["fix"] for p in system["problems"])


def test_hammr_systems_refuses_an_unknown_name_in_one_line() -> None:
    r = run(["systems", "hamr"])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert "unknown system 'hamr'" in line and "mulprog-direct" in line


# -- help names every system ------------------------------------------------------------------


def listed_systems(help_text: str) -> set[str]:
    block = help_text.split("Systems (--system NAME", 1)[1]
    names: set[str] = set()
    for line in block.splitlines()[1:]:
        if line.strip().startswith("or an agent"):
            break
        names |= set(re.findall(r"([a-z][a-z-]*)(?: \(the method\))?(?:,|$)", line.split("  ")[-1]))
    return names


@pytest.mark.parametrize("command", ["ask", "eval"])
def test_ask_and_eval_help_name_every_registered_system(command: str) -> None:
    r = run([command, "--help"])
    assert r.exit_code == 0
    assert listed_systems(r.stdout) == set(registered_systems())
    assert "`hammr systems`" in r.stdout


def test_a_new_system_appears_in_the_help_without_touching_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hammr.cli_common import systems_epilog

    monkeypatch.setitem(FACTORIES, "brand-new", "somewhere:factory")
    assert "other" in systems_epilog() and "brand-new" in systems_epilog()


# -- what the timeouts mean here --------------------------------------------------------------


def test_config_show_says_what_the_timeouts_mean_on_this_backend() -> None:
    r = run(["config", "show"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("llm.timeout_s = "))
    assert line.startswith("llm.timeout_s = 600.0    # default; not used: the embedded model")
    assert "# hammr eval --timeout (work per question) on this backend: no limit" in r.stdout
    assert "time the model's threads wait for a processor other programs hold" in r.stdout
    r = run(["config", "show"], SERVED_VLM)
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("llm.timeout_s = "))
    assert "seconds per request to the served model" in line
    assert "on this backend: 600 s by default; a limit counts wall-clock time" in r.stdout


def test_eval_help_says_what_the_timeout_counts() -> None:
    r = run(["eval", "--help"])
    text = " ".join(r.stdout.split())
    assert "Work is wall-clock time less time queued for a model slot" in text
    assert "also less the time its threads wait for a processor that other programs hold" in text
    assert "Default: no limit on the embedded model" in text


def test_hammr_systems_with_a_bad_config_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "h.toml"
    bad.write_text('[llm]\nbackend = "nope"\n')
    r = run(["systems", "--config", str(bad)])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("hammr: error: llm.backend = 'nope'")
