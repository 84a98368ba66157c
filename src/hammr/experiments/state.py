"""Where an experiment stands: which of its runs and memory steps are done, and why not.

Two places hold it, so that nothing is kept twice:

* **the run store** holds every run's samples, and in the run's stored settings the keys
  ``experiment``, ``experiment_run``, ``demo``, ``identity`` (what the run was asked with,
  see :func:`run_identity`) and ``planned`` (how many samples it plans). A run whose stored
  samples reach ``planned`` is done; fewer is partial (a killed or failing run);
* **a small JSON record beside the store** (:func:`state_path`) holds what the store cannot:
  each memory step's identity (the file it wrote is :func:`memory_path`) and, for a step
  that did not finish, its status and the one-line reason (a suite's data missing, a
  failure). The runner rewrites it after every step.

A report reads both through :func:`step_states`; it never needs the data folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hammr.experiments.spec import (
    Experiment,
    ExperimentError,
    MemoryStep,
    Run,
    stored_run_name,
)
from hammr.input_file import input_problem, read_input_text
from hammr.output_file import OutputError, output_target, write_output

if TYPE_CHECKING:
    from hammr.eval.run_health import RunVerdict
    from hammr.eval.store import RunStore

StepStatus = Literal["done", "partial", "no_data", "failed", "not_run"]
STATE_VERSION = 1


@dataclass(frozen=True)
class StepState:
    kind: Literal["run", "memory"]
    name: str
    """The step's name in the file."""
    stored_as: str
    """run: its name in the run store; memory: the memory file's path."""
    status: StepStatus
    reason: str = ""
    """no_data / failed / partial / not_run: one line saying why."""
    missing: Mapping[str, str] = field(default_factory=dict)
    """A run's suite entries that had no data when it ran (entry -> why); it ran the others."""


def step_key(step: Run | MemoryStep) -> str:
    """``run:NAME`` or ``memory:NAME``: the key of a step in :func:`step_states`."""
    return f"{'run' if isinstance(step, Run) else 'memory'}:{step.name}"


def experiments_dir(store_path: Path) -> Path:
    """The folder beside the store for experiments' memory files and records:
    ``<store dir>/<store stem>.experiments`` (two stores in one folder never share it)."""
    return store_path.parent / f"{store_path.stem}.experiments"


def memory_path(
    store_path: Path, experiment: str, step: str, *, prefix: str = "", demo: bool = False
) -> Path:
    """The file a memory step writes (and the runs that read it get as ``memory.path``)."""
    name = stored_run_name(experiment, step, prefix=prefix, demo=demo)
    return experiments_dir(store_path) / f"{name}.db"


def state_path(store_path: Path, experiment: str, *, prefix: str = "", demo: bool = False) -> Path:
    """The experiment's JSON record beside the store."""
    name = f"{prefix}{'demo.' if demo else ''}{experiment}"
    return experiments_dir(store_path) / f"{name}.state.json"


def fingerprint(identity: Mapping[str, Any]) -> str:
    """A short stable hash of an identity (what a memory file was made from)."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- the JSON record ---------------------------------------------------------------------------


class RecordError(ExperimentError):
    """The record beside the store cannot be read or written as a file (its folder is a
    file, the record is a folder or a FIFO, the disk is full...): one line naming it."""


def check_record(path: Path) -> None:
    """RecordError when the record (or the folder it goes in) is in a state no run could
    write it in; checked before an experiment starts, so nothing runs only to fail at its
    first record. Nothing is opened."""
    folder = path.parent
    if os.path.lexists(folder) and not folder.is_dir():
        raise RecordError(
            f"{folder} is not a folder: experiments keep their records and memory files "
            "there; move it away, or use another --store"
        )
    if os.path.lexists(path):
        problem = input_problem(path)
        if problem is not None:
            raise RecordError(
                f"the experiment record {path} {problem}; remove it (it is rebuilt from the "
                "run store)"
            )
    try:
        output_target(path, "the experiment record")
    except OutputError as e:
        raise RecordError(str(e)) from None


def read_record(path: Path) -> dict[str, dict[str, Any]]:
    """The steps of an experiment's record (``{"run:NAME": {...}}``); empty when there is
    none yet or it is not a record (it is rebuilt by the next run). RecordError when it is
    no file to read (a folder, a FIFO: see :func:`check_record`)."""
    try:
        doc = json.loads(read_input_text(path))
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        check_record(path)  # says what is in the way
        return {}
    except OSError as e:
        raise RecordError(f"cannot read the experiment record {path}: {e.strerror or e}") from None
    except ValueError:
        return {}
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, dict):
        return {}
    return {k: v for k, v in steps.items() if isinstance(v, dict)}


def write_record(path: Path, steps: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace the record at once (through :mod:`hammr.output_file`: written beside, then
    renamed, so a killed runner never leaves half a file); RecordError, one line, when it
    cannot be written."""
    check_record(path)
    doc = {"version": STATE_VERSION, "steps": {k: dict(v) for k, v in steps.items()}}
    try:
        write_output(path, json.dumps(doc, indent=2, sort_keys=True, default=str))
    except OutputError as e:
        raise RecordError(f"cannot write the experiment record {path}: {e.reason}") from None


def update_record(path: Path, key: str, entry: Mapping[str, Any] | None) -> None:
    """Set (or, with None, drop) one step's entry in the record."""
    steps = read_record(path)
    if entry is None:
        steps.pop(key, None)
    else:
        steps[key] = dict(entry)
    write_record(path, steps)


# --- reading the state -------------------------------------------------------------------------


RETRY = "run the experiment again with --retry-failed"
"""How an experiment's failed samples are asked again."""


def failed_reason(verdict: RunVerdict) -> str:
    """A failed run step's reason: the cause, then what to do."""
    return f"{verdict.text}; {verdict.next_step(RETRY)}"


def _run_state(
    store: RunStore, run: Run, stored: str, recorded: Mapping[str, Any] | None
) -> StepState:
    """A run step's state. A run whose stored samples are failures (every one failed, or
    more than half for one cause: :mod:`hammr.eval.run_health`, the check ``hammr report``
    and the viewer share) is ``failed`` with the cause, not done or partial: its numbers
    are not results."""
    from hammr.eval.run_health import stored_verdict

    reason = str(recorded.get("reason", "")) if recorded else ""
    gaps = recorded.get("missing_entries") if recorded else None
    missing = {str(k): str(v) for k, v in gaps.items()} if isinstance(gaps, Mapping) else {}
    info = store.run_info(stored)
    if info is None:
        if recorded and recorded.get("status") in ("no_data", "failed", "not_run"):
            return StepState("run", run.name, stored, recorded["status"], reason)
        return StepState("run", run.name, stored, "not_run", "not run yet")
    verdict = stored_verdict(store, stored)
    if verdict is not None:
        return StepState("run", run.name, stored, "failed", failed_reason(verdict))
    done = store.count(stored)
    planned = info.settings.get("planned")
    if isinstance(planned, int) and done >= planned:
        return StepState("run", run.name, stored, "done", missing=missing)
    of = f" of {planned}" if isinstance(planned, int) else ""
    why = f"{done}{of} samples stored"
    if reason:
        why += f"; {reason}"
    elif recorded is None or recorded.get("status") != "failed":
        why += "; run the experiment again to finish it"
    return StepState("run", run.name, stored, "partial", why, missing)


def _memory_state(step: MemoryStep, path: Path, recorded: Mapping[str, Any] | None) -> StepState:
    status = str(recorded.get("status", "")) if recorded else ""
    reason = str(recorded.get("reason", "")) if recorded else ""
    if status == "done" and path.exists():
        return StepState("memory", step.name, str(path), "done")
    if status in ("no_data", "failed", "not_run"):
        return StepState("memory", step.name, str(path), status, reason)  # type: ignore[arg-type]
    return StepState("memory", step.name, str(path), "not_run", reason or "not built yet")


def step_states(
    store: RunStore, experiment: Experiment, *, prefix: str = "", demo: bool = False
) -> dict[str, StepState]:
    """Every run and memory step of ``experiment`` as stored (keys ``run:NAME`` and
    ``memory:NAME``, in the order they run): done, partial (some samples stored), no_data
    (its suite's files were missing), failed, or not_run, each with a one-line reason."""
    record = read_record(state_path(store.path, experiment.name, prefix=prefix, demo=demo))
    out: dict[str, StepState] = {}
    for step in experiment.order():
        key = step_key(step)
        if isinstance(step, Run):
            stored = stored_run_name(experiment.name, step.name, prefix=prefix, demo=demo)
            out[key] = _run_state(store, step, stored, record.get(key))
        else:
            path = memory_path(store.path, experiment.name, step.name, prefix=prefix, demo=demo)
            out[key] = _memory_state(step, path, record.get(key))
    return out


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


__all__ = [
    "RETRY",
    "RecordError",
    "StepState",
    "StepStatus",
    "check_record",
    "experiments_dir",
    "failed_reason",
    "fingerprint",
    "memory_path",
    "read_record",
    "state_path",
    "step_key",
    "step_states",
    "update_record",
    "write_record",
]
