"""Turn a :class:`~hammr.config.Config` into live objects: the LLM and the tool backends."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hammr.config import Config, ConfigError

if TYPE_CHECKING:
    from hammr.backends.llm.base import LLM
    from hammr.backends.llm.slots import Lane
    from hammr.backends.registry import BuiltBackends


def default_cache_path() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "hammr" / "llm.sqlite"


def build_llm(cfg: Config, *, cache: bool | None = None) -> LLM:
    """The configured LLM, wrapped in the SQLite response cache unless that is turned off."""
    from hammr.backends.llm.base import VisionLimits

    s = cfg.section("llm")
    llm: LLM
    vision = vision_setting(cfg)
    if s["backend"] == "embedded":
        from hammr.backends.llm.embedded import EmbeddedLLM

        llm = EmbeddedLLM(
            model_path=s["model_path"] or None,
            n_ctx=int(s["n_ctx"]),
            n_threads=int(s["threads"]),
            mode=s["mode"],
        )
    else:
        from hammr.backends.llm.openai_compat import OpenAICompatLLM
        from hammr.backends.pool import parse_base_urls

        if not s["base_url"] or not s["model"]:
            raise ConfigError(
                "llm.backend = 'openai' needs llm.base_url and llm.model "
                "(e.g. base_url = 'http://127.0.0.1:8000/v1', "
                "model = 'Qwen/Qwen2.5-VL-7B-Instruct')"
            )
        try:
            urls = parse_base_urls(s["base_url"])  # one server, or replicas of it
        except ValueError as e:
            raise ConfigError(f"llm.base_url: {e}") from None
        llm = OpenAICompatLLM(
            urls,
            s["model"],
            api_key_env=s["api_key_env"] or None,
            mode=s["mode"],
            server=s["server"],
            timeout_s=float(s["timeout_s"]),
            max_retries=int(s["max_retries"]),
            vision=vision,
            vision_limits=VisionLimits(int(s["max_images"]), int(s["max_image_pixels"])),
        )
    use_cache = s["cache"] if cache is None else cache
    if use_cache:
        from hammr.backends.llm.cache import CachedLLM, CacheError

        path = Path(s["cache_path"]).expanduser() if s["cache_path"] else default_cache_path()
        try:
            llm = CachedLLM(llm, path)
        except CacheError as e:
            raise ConfigError(f"llm.cache_path: {e}") from None
    return llm


def vision_setting(cfg: Config) -> bool:
    """Whether the configured model sees images (llm.vision): 'on', 'off', or 'auto' — on for
    an OpenAI-compatible chat server whose model is a known VLM (:func:`looks_like_vlm`)."""
    from hammr.vision import looks_like_vlm

    s = cfg.section("llm")
    setting = s["vision"]
    where = cfg.sources.get("llm.vision", "default")
    if s["backend"] == "embedded":
        if setting == "on":
            raise ConfigError(
                f"llm.vision = 'on' (from {where}): the embedded model is text-only; serve a "
                "vision-language model (llm.backend = 'openai') or set llm.vision = 'off'"
            )
        return False
    if s["mode"] != "chat":
        if setting == "on":
            raise ConfigError(
                f"llm.vision = 'on' (from {where}) needs llm.mode = 'chat': a completion "
                "endpoint takes text only"
            )
        return False
    if setting == "auto":
        return looks_like_vlm(str(s["model"]))
    return bool(setting == "on")


def default_concurrency(cfg: Config) -> int:
    """Questions an evaluation keeps in flight when not told: one for the embedded model
    (one llama.cpp slot: more would only queue, and load the CPU the tools need), the
    default per replica of a served model that does not say (:func:`resolve_concurrency`
    asks it first)."""
    if cfg.get("llm.backend") == "embedded":
        return 1
    from hammr.backends.llm.slots import DEFAULT_PER_REPLICA
    from hammr.backends.pool import parse_base_urls

    try:
        replicas = len(parse_base_urls(cfg.get("llm.base_url"))) or 1
    except ValueError:
        replicas = 1
    return DEFAULT_PER_REPLICA * replicas


@dataclass(frozen=True)
class Concurrency:
    """Questions to keep in flight, why, and the lane each holds (empty: no lanes)."""

    n: int
    why: str
    lanes: tuple[Lane, ...] = ()


def resolve_concurrency(cfg: Config, given: int | None = None) -> Concurrency:
    """``given`` (``--concurrency``) when set; else for a served model as many as its
    replicas run at once (asked of them: :mod:`hammr.backends.llm.slots`), each question in
    a lane of its own; else :func:`default_concurrency`."""
    from hammr.backends.llm.slots import ServedSlots, probe_slots

    served = cfg.get("llm.backend") == "openai"
    slots: ServedSlots | None = None
    if served:
        from hammr.backends.llm.base import run_sync
        from hammr.backends.pool import parse_base_urls

        try:
            urls = parse_base_urls(cfg.get("llm.base_url"))
        except ValueError:
            urls = ()
        key_env = cfg.get("llm.api_key_env")
        key = os.environ.get(str(key_env)) if key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else None
        if urls:
            slots = run_sync(probe_slots(urls, str(cfg.get("llm.server")), headers=headers))
    if slots is not None:
        n = given or slots.total
        # one lane per question in flight: slots taken in turn where there are more
        base = slots.lanes()
        lanes = tuple(replace(base[i % len(base)], index=i) for i in range(n))
        return Concurrency(n, "--concurrency" if given else slots.reason(), lanes)
    if given is not None:
        return Concurrency(given, "--concurrency")
    n = default_concurrency(cfg)
    why = "the embedded model has one slot" if not served else "the default"
    return Concurrency(n, why)


def grammar_setting(cfg: Config) -> bool | None:
    """llm.grammar: 'on' -> True, 'off' -> False, 'auto' -> None (use it where supported)."""
    return {"on": True, "off": False}.get(str(cfg.get("llm.grammar")))


def build_backends(cfg: Config) -> BuiltBackends:
    """Every capability's backend, plus why any configured one could not be built."""
    from hammr.backends.registry import build_backends as build

    try:
        return build(cfg.section("tools"), cfg.section("vlm"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
