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
        ('[agent]\nmax_steps = "many"\n', {}, "should be a int"),
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
