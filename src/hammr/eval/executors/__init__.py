"""Where an evaluation's samples are answered.

* local (the default): this process, :func:`hammr.eval.runner.run_eval`.
* ray: Ray actors on a cluster, :func:`hammr.eval.executors.ray_executor.run_eval_ray`.

Either way the driver alone writes the run store, one transaction per sample, through
:func:`hammr.eval.runner.run_samples`, so resuming, ``--retry-failed`` and "stored exactly
once" mean the same thing everywhere.
"""

from __future__ import annotations

EXECUTORS = ("local", "ray")


class ExecutorError(RuntimeError):
    """The executor cannot run (Ray missing or unreachable, workers that cannot start);
    the message is one line saying what to do."""


__all__ = ["EXECUTORS", "ExecutorError"]
