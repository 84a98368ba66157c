from __future__ import annotations

from pathlib import Path

import pytest

from hammr.config import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "hammr.toml"
    p.write_text(text)
    return p


def test_defaults_without_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(env={})
    assert cfg.path is None
    assert cfg.get("llm.backend") == "embedded"
    assert dict((k, s) for k, _, s in cfg.items())["llm.backend"] == "default"


def test_file_then_env_precedence_and_sources(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        '[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        '[agent]\nmax_steps = 5\n[tools.ocr]\nlang = "deu"\n',
    )
    env = {"HAMMR_AGENT__MAX_STEPS": "3", "HAMMR_TOOLS__OCR__LANG": "fra", "OTHER": "x"}
    cfg = load_config(p, env=env)
    assert cfg.get("llm.backend") == "openai"
    assert cfg.get("agent.max_steps") == 3  # parsed as a TOML integer
    assert cfg.get("tools.ocr.lang") == "fra"
    sources = {k: s for k, _, s in cfg.items()}
    assert sources["llm.backend"] == str(p)
    assert sources["agent.max_steps"] == "$HAMMR_AGENT__MAX_STEPS"
    assert sources["llm.temperature"] == "default"


def test_hammr_config_env_and_cwd_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, "[agent]\nmax_steps = 4\n")
    assert load_config(env={"HAMMR_CONFIG": str(p)}).get("agent.max_steps") == 4
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).path == Path("hammr.toml")


@pytest.mark.parametrize(
    ("text", "env", "needle"),
    [
        ('[llm]\nbackend = "gpt"\n', {}, "llm.backend = 'gpt'"),
        ("[llm]\nbakend = 1\n", {}, "unknown setting llm.bakend"),
        ('[agent]\nmax_steps = "many"\n', {}, "should be a whole number"),
        ("[llm\n", {}, "not valid TOML"),
        ("", {"HAMMR_LLM__GRAMMAR": "maybe"}, "$HAMMR_LLM__GRAMMAR"),
    ],
)
def test_bad_config_names_key_and_source(
    tmp_path: Path, text: str, env: dict[str, str], needle: str
) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        load_config(write(tmp_path, text), env=env)
    assert needle in str(e.value)


def test_missing_file_is_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml", env={})


def test_every_numeric_setting_refuses_minus_one() -> None:
    from hammr.config import DEFAULTS

    numeric = [
        f"{section}.{key}"
        for section, table in DEFAULTS.items()
        if section != "tools"
        for key, value in table.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
    assert "agent.max_steps" in numeric and "images.max_pixels" in numeric
    for key in numeric:
        name = "HAMMR_" + key.upper().replace(".", "__")
        with pytest.raises(ConfigError) as e:
            load_config(env={"HAMMR_CONFIG": "", name: "-1"})
        assert str(e.value).startswith(f"{key} = -1 (from ${name}) should be "), str(e.value)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("agent.max_steps", "0", "0 (from $HAMMR_AGENT__MAX_STEPS) should be at least 1"),
        ("llm.timeout_s", "0", "0 (from $HAMMR_LLM__TIMEOUT_S) should be above 0 (seconds)"),
        ("llm.timeout_s", "nan", "nan (from $HAMMR_LLM__TIMEOUT_S) should be above 0 (seconds)"),
        ("vlm.timeout_s", "inf", "inf (from $HAMMR_VLM__TIMEOUT_S) should be above 0 (seconds)"),
        ("llm.n_ctx", "0", "0 (from $HAMMR_LLM__N_CTX) should be at least 1 (tokens of context)"),
        ("vlm.concurrency", "0", "0 (from $HAMMR_VLM__CONCURRENCY) should be at least 1"),
        ("images.max_pixels", "0", "0 (from $HAMMR_IMAGES__MAX_PIXELS) should be at least 1"),
        (
            "agent.router_threshold",
            "1.5",
            "1.5 (from $HAMMR_AGENT__ROUTER_THRESHOLD) should be between 0 and 1",
        ),
    ],
)
def test_numeric_settings_out_of_range(key: str, value: str, message: str) -> None:
    name = "HAMMR_" + key.upper().replace(".", "__")
    with pytest.raises(ConfigError) as e:
        load_config(env={"HAMMR_CONFIG": "", name: value})
    assert str(e.value) == f"{key} = {message}"


def test_numeric_settings_at_their_limits_are_accepted() -> None:
    env = {
        "HAMMR_CONFIG": "",
        "HAMMR_AGENT__MAX_STEPS": "1",
        "HAMMR_AGENT__ROUTER_THRESHOLD": "0",
        "HAMMR_LLM__TEMPERATURE": "0",
        "HAMMR_LLM__TIMEOUT_S": "0.5",
        "HAMMR_VLM__TIMEOUT_S": "3",  # an integer where a float is expected
    }
    cfg = load_config(env=env)
    assert cfg.get("agent.max_steps") == 1 and cfg.get("vlm.timeout_s") == 3


def test_config_file_that_is_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "hammr.toml"
    p.write_bytes("[agent]\nmax_steps = 3\n# réglages\n".encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        load_config(p, env={})
    assert str(e.value) == (
        f"{p}: not UTF-8 text (byte 0xe9 on line 3); TOML files must be UTF-8, so save it as UTF-8"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("agent = 3\n", "agent is a section ([agent]) of settings, not a value"),
        ("[tools]\nocr = 'eng'\n", "tools.ocr is a section ([tools.ocr]) of settings"),
        ("[tools]\ncaption = 3\n", "tools.caption = 3 (from {p}) should be a table"),
        ("[tools.ocr.lang]\nx = 1\n", "'lang' is a value, not a section"),
        ("[tools.caption.x]\ny = 1\n", "tools.caption.x.y (from {p}) is nested too deep"),
    ],
)
def test_values_and_sections_are_not_confused(tmp_path: Path, text: str, needle: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p, env={})
    assert needle.format(p=p) in str(e.value)


def test_config_show_lists_unset_tool_settings(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hammr.backends.registry import FACTORIES, build_backends
    from hammr.cli import main

    p = write(tmp_path, '[tools.caption]\nbackend = "vlm"\n[tools.ocr]\npsm = 7\n')
    r = CliRunner().invoke(main, ["config", "show", "--config", str(p)], env={"HAMMR_CONFIG": ""})
    assert r.exit_code == 0, r.output
    rows = {
        ln.split(" = ")[0]: ln.split(" = ", 1)[1]
        for ln in r.stdout.splitlines()
        if not ln.startswith("#")
    }
    # every capability's backend, set or not
    for cap in {c for c, _ in FACTORIES}:
        assert f"tools.{cap}.backend" in rows, cap
    assert rows["tools.caption.backend"] == f"'vlm'    # {p}"
    assert rows["tools.vqa.backend"] == "'none'    # default"
    assert rows["tools.ocr.backend"] == "'tesseract'    # default"
    # the options of the backend in use, unset ones as None
    assert rows["tools.ocr.psm"] == f"7    # {p}"
    assert rows["tools.ocr.lang"] == "'eng'    # default"
    assert rows["tools.ocr.timeout_s"] == "None    # default (unset)"
    assert rows["tools.caption.base_url"] == "None    # default (unset)"
    assert rows["tools.detect.scale_factor"] == "None    # default (unset)"
    assert rows["tools.text.context_budget_tokens"] == "None    # default (unset)"
    assert "tools.vqa.base_url" not in rows  # no backend, no options
    assert list(rows) == sorted(rows)
    # the listed keys are the ones the backends take: all of them, empty, still build
    tools: dict[str, dict[str, object]] = {}
    for key in rows:
        if key.startswith("tools.") and not key.endswith(".backend"):
            _, cap, name = key.split(".")
            tools.setdefault(cap, {})[name] = ""
    for key, shown in rows.items():
        if key.startswith("tools.") and key.endswith(".backend"):
            tools.setdefault(key.split(".")[1], {})["backend"] = shown.split("'")[1]
    tools["caption"]["backend"] = "none"  # a vlm backend needs a served model to build
    build_backends(tools)


def test_the_embedded_model_computes_on_one_thread_unless_told() -> None:
    """llama.cpp's threads meet, spinning, after every operation: beside any busy program a
    second thread slows every reply by orders of magnitude (benchmarks/embedded_threads.py),
    so the default is one thread; 0 asks for llama.cpp's count of physical cores."""
    from hammr.backends.llm.embedded import EmbeddedLLM
    from hammr.factory import build_llm

    def threads(env: dict[str, str]) -> tuple[int, int]:
        llm = build_llm(load_config(None, env={"HAMMR_CONFIG": "", **env}), cache=False)
        assert isinstance(llm, EmbeddedLLM)  # built, not loaded: nothing runs here
        return llm.n_threads, llm.n_threads_batch

    assert threads({}) == (1, 1)
    assert threads({"HAMMR_LLM__THREADS": "0"}) == (-1, -1)
    assert threads({"HAMMR_LLM__THREADS": "3"}) == (3, 3)
    with pytest.raises(ConfigError, match=r"llm\.threads"):
        load_config(None, env={"HAMMR_CONFIG": "", "HAMMR_LLM__THREADS": "-2"})
