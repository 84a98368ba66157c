"""What may change when a stored run is resumed, and what may not.

A run's numbers must come from one model under one configuration: a resumed run whose
later samples were answered otherwise would mix two experiments in every cell, and nothing
in a report could tell. So ``hammr eval`` (and through it ``hammr experiment run``) refuses
to add samples to a stored run when anything that changes answers or scores differs from
what the run was made with, in one line naming the first difference
(:func:`resume_refusal`); the way on is a new ``--name`` (``--prefix`` for an experiment).

What may change, with a note: how the work is done, not what it computes
(:func:`operational`): timeouts and retries, server addresses and replicas, API key
variables, threads, concurrency, the response cache. A larger ``--limit`` may extend a run
(the seeded draws are nested: the first k of a larger draw are the draw for k), and so may
``--timeout`` (``--retry-failed`` with a longer one is how timed-out samples are asked
again). A setting that hammr added after the run was made (at its default) or no longer
has is not a difference.

A run an experiment made (its settings carry ``experiment``: see
:mod:`hammr.experiments.state`) is added to only by that experiment: its identity decides
which samples it plans and how they are asked, which a plain ``hammr eval`` cannot know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hammr.eval.store import RunInfo

OPERATIONAL_LEAVES = frozenset(
    {
        "timeout_s",
        "max_retries",
        "base_url",
        "api_key_env",
        "threads",
        "concurrency",
        "cache",
        "cache_path",
    }
)
"""Last parts of setting keys that say how work is done, never what it computes."""

OPERATIONAL_KEYS = frozenset({"agent.system"})
"""Whole keys that do not change a run's answers (``agent.system`` is only the default of
``--system``; the run's system is stored and compared on its own)."""

RUN_SETTINGS = ("data_dir", "seed", "max_steps", "judge")
"""The run settings (``hammr eval``'s options as stored) compared on resume, in order. The
suite and the system are compared by :meth:`hammr.eval.store.RunStore.open_run`, the split
and its seed by :func:`hammr.eval.evaluate.evaluate` (which says how to keep two halves
apart)."""

EXPERIMENT_SETTINGS = ("experiment", "experiment_run", "demo", "identity")
"""The settings an experiment stores with its runs (compared when both sides have them)."""


def operational(key: str) -> bool:
    """Whether a setting only says how the work is done (see the module docstring)."""
    return key in OPERATIONAL_KEYS or key.rsplit(".", 1)[-1] in OPERATIONAL_LEAVES


def _shown(value: Any) -> str:
    return "(unset)" if value is None else repr(value)


_ABSENT = object()


def _newer_or_retired(key: str, stored: Any, now: Any) -> bool:
    """Whether a setting only one side has is hammr's doing, not the user's: one added to
    hammr after the run was made, at its default now, or one hammr no longer has (outside
    the capability sections, whose keys a configuration adds and removes itself)."""
    from hammr.config import DEFAULTS, flatten_settings

    defaults = flatten_settings(DEFAULTS)
    if stored is _ABSENT:
        return key in defaults and defaults[key] == now
    return now is _ABSENT and key not in defaults and not key.startswith("tools.")


def config_changes(
    stored: Mapping[str, Any], now: Mapping[str, Any]
) -> tuple[str | None, list[str]]:
    """(the first setting, in key order, that changes results and differs, as ``KEY = OLD
    (now NEW)``, or None; the operational settings that differ). A setting only one side has
    differs (a capability's backend added, say), unless hammr added it since the run was made
    (and it is at its default) or no longer has it."""
    first: str | None = None
    changed: list[str] = []
    for key in sorted(set(stored) | set(now)):
        old, new = stored.get(key, _ABSENT), now.get(key, _ABSENT)
        if old == new or ((old is _ABSENT or new is _ABSENT) and _newer_or_retired(key, old, new)):
            continue
        if operational(key):
            changed.append(key)
        elif first is None:
            shown = [("(unset)" if v is _ABSENT else _shown(v)) for v in (old, new)]
            first = f"{key} = {shown[0]} (now {shown[1]})"
    return first, changed


def settings_difference(
    stored: Mapping[str, Any], now: Mapping[str, Any], *, judged: bool
) -> str | None:
    """The first run setting (:data:`RUN_SETTINGS`) that differs, as ``KEY = OLD (now
    NEW)``; None when they agree. ``seed`` counts only when a --limit draws a subset,
    ``judge`` only when the suite has answers a judge decides (``judged``: EncVQA)."""
    for key in RUN_SETTINGS:
        if key == "seed" and not (stored.get("limit") or now.get("limit")):
            continue
        if key == "judge" and not judged:
            continue
        if key not in stored:
            continue  # not recorded by the hammr that made the run
        if stored[key] != now.get(key):
            return f"{key} = {_shown(stored[key])} (now {_shown(now.get(key))})"
    return None


def resume_refusal(
    info: RunInfo,
    settings: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    judged: bool = False,
    new_name: str = "give this evaluation its own --name",
) -> str | None:
    """One line when the stored run ``info`` must not be resumed with these ``settings``
    (what ``hammr eval`` stores as the run's settings) and ``config`` (the recorded
    configuration); None when it may. ``new_name`` says how to keep both."""
    name = info.name
    stored = info.settings
    owner = stored.get("experiment")
    if owner and not settings.get("experiment"):
        return (
            f"run {name!r} belongs to experiment {owner!r} (its run "
            f"{stored.get('experiment_run')!r}): `hammr eval` does not add to it, since "
            f"its samples would not be the experiment's; go on with `hammr experiment run "
            f"{owner}` (--retry-failed asks its failed samples again), or {new_name}"
        )
    if settings.get("experiment") and not owner:
        return f"run {name!r} was not made by an experiment; {new_name}"
    if owner:
        for key in EXPERIMENT_SETTINGS:
            if stored.get(key) != settings.get(key):
                return (
                    f"run {name!r} was made by experiment {owner!r} with another {key}; {new_name}"
                )
    diff = settings_difference(stored, settings, judged=judged)
    if diff is None:
        diff = config_changes(info.config, config)[0]
    if diff is None:
        return None
    return (
        f"run {name!r} was made with {diff}; its samples would mix both, so it is not "
        f"resumed: {new_name}, or resume it with what it was made with"
    )


__all__ = [
    "OPERATIONAL_KEYS",
    "OPERATIONAL_LEAVES",
    "config_changes",
    "operational",
    "resume_refusal",
    "settings_difference",
]
