"""A question's budget of work: how long it may take (``hammr eval --timeout``) and what that
time counts, read from the configuration alone (apart from :mod:`hammr.eval.job`, which
builds the system: `hammr config show` says these without importing it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hammr.config import Config

SERVED_SAMPLE_TIMEOUT_S = 300.0
"""A question's default budget of work on a served model (raised to llm.timeout_s when that
is longer, so that one request may always run to its own limit)."""

WorkCounted = Literal["wall", "wall_less_processor_waits"]


def work_counted(cfg: Config) -> WorkCounted:
    """What a question's timeout counts (:mod:`hammr.work_clock`): on the embedded model,
    which computes in this process, wall-clock time less time queued for its slot and less
    time its threads waited for a processor other programs held; on a served one,
    wall-clock time less time queued."""
    return "wall_less_processor_waits" if cfg.get("llm.backend") == "embedded" else "wall"


def sample_timeout(cfg: Config, given: float | None = None) -> float | None:
    """Seconds of work per question (None: no limit). ``given``: ``--timeout`` (0: no limit;
    None: the default for the backend). On the embedded model there is none by default: each
    call is bounded by llm.max_tokens and each agent by its step limit, so every question
    ends, and a loaded CPU only makes it slower; on a served model
    :data:`SERVED_SAMPLE_TIMEOUT_S`, or llm.timeout_s when that is longer."""
    if given is not None:
        return given if given > 0 else None
    if cfg.get("llm.backend") == "embedded":
        return None
    return max(SERVED_SAMPLE_TIMEOUT_S, float(cfg.get("llm.timeout_s")))
