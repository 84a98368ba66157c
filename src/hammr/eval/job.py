"""What a process needs to answer and score the samples of a run, built the same way wherever
it runs: in the driver for the local executor, once in each Ray worker for the Ray executor.

An :class:`EvalJob` is plain, picklable data (the resolved configuration and the command's
choices); :meth:`EvalJob.build` turns it into live objects (the system, its LLM and tool
backends, the metrics), which are expensive and are built once per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hammr.agents.system import System
from hammr.backends.llm.base import LLM
from hammr.config import Config, ConfigError
from hammr.eval.runner import Answer, default_metric_factory, local_answerer, prepare

# re-exported: their home before sample_budget.py, which `hammr config show` reads alone
from hammr.eval.sample_budget import SERVED_SAMPLE_TIMEOUT_S as SERVED_SAMPLE_TIMEOUT_S
from hammr.eval.sample_budget import WorkCounted as WorkCounted
from hammr.eval.sample_budget import sample_timeout as sample_timeout
from hammr.eval.sample_budget import work_counted as work_counted
from hammr.factory import build_llm, default_concurrency
from hammr.systems import build_system
from hammr.tools.base import ToolContext
from hammr.work_clock import stall_clock

JUDGES = ("auto", "bem", "llm", "embedding", "none")


@dataclass(frozen=True)
class JudgeChoice:
    """The judge and BEM checkpoint a run was asked for: the flags, else ``[eval] judge`` and
    ``[eval] bem_checkpoint`` in the configuration."""

    judge: str
    """One of :data:`JUDGES` ('auto' is made concrete by :func:`resolve_judge`)."""
    checkpoint: str | None
    where: str
    """Where the checkpoint was given, for messages: '--bem-checkpoint' or the setting."""

    @classmethod
    def of(cls, judge: str, checkpoint: Path | None, cfg: Config) -> JudgeChoice:
        asked = judge if judge != "auto" else str(cfg.get("eval.judge"))
        if checkpoint is not None:
            return cls(asked, str(checkpoint.expanduser()), "--bem-checkpoint")
        configured = str(cfg.get("eval.bem_checkpoint") or "")
        path = str(Path(configured).expanduser()) if configured else None
        return cls(asked, path, "[eval] bem_checkpoint")

    def problem(self) -> str | None:
        """Why this choice cannot judge (one line), before anything runs; None when it can."""
        if self.judge == "bem" and self.checkpoint is None:
            return "--judge bem needs --bem-checkpoint PATH (or [eval] bem_checkpoint)"
        if self.checkpoint is not None and self.judge not in ("bem", "auto"):
            return f"{self.where} goes with --judge bem (or auto), not --judge {self.judge}"
        if self.checkpoint is not None and not Path(self.checkpoint).is_dir():
            return f"{self.where} {self.checkpoint}: no such folder (a local BEM checkpoint)"
        return None


def resolve_judge(judge: str, cfg: Config, bem_checkpoint: str | None) -> str:
    """'auto' made concrete: BEM with a checkpoint, else the LLM when it is served, else none."""
    if judge != "auto":
        return judge
    if bem_checkpoint:
        return "bem"
    return "llm" if cfg.get("llm.backend") == "openai" else "none"


@dataclass(frozen=True)
class EvalJob:
    """The configuration and the choices of one ``hammr eval`` (judge already resolved)."""

    config: Config
    system: str
    max_steps: int | None = None
    cache: bool | None = None
    """False: no LLM response cache; None: as llm.cache says."""
    judge: str = "none"
    bem_checkpoint: str | None = None
    timeout_s: float | None = None
    """Seconds of work per question (None: no limit); see :func:`sample_timeout`."""
    work: WorkCounted = "wall"
    """What ``timeout_s`` counts; see :func:`work_counted`."""
    concurrency: int | None = None
    """Questions in flight per process (None: the default for the configured LLM)."""
    metrics_used: tuple[str, ...] = ()
    """The metrics (by name) the run's suite entries score with: each is made when the job
    is built, so a judge that cannot be made (a BEM checkpoint that is not there, torch
    missing) stops the run at its start in one line, not every sample as an error."""

    def __post_init__(self) -> None:
        if self.judge not in JUDGES or self.judge == "auto":
            raise ValueError(f"judge must be one of bem, llm, embedding, none; got {self.judge!r}")
        if self.judge == "bem" and not self.bem_checkpoint:
            raise ConfigError("--judge bem needs --bem-checkpoint PATH")
        if self.bem_checkpoint and self.judge != "bem":
            raise ConfigError(
                f"--bem-checkpoint goes with --judge bem (or auto), not --judge {self.judge}"
            )

    @property
    def max_pixels(self) -> int:
        return int(self.config.get("images.max_pixels"))

    @property
    def in_flight(self) -> int:
        return self.concurrency or default_concurrency(self.config)

    def build(self) -> BuiltJob:
        """The live system, LLM, backends and metrics (ConfigError, LLMError or SpecError
        when the configuration cannot be built here)."""
        system, backends = build_system(self.config, self.system, self.max_steps)
        llm = build_llm(self.config, cache=self.cache)
        return BuiltJob(self, system, llm, backends)

    def judge_options(self, llm: LLM, backends: dict[str, Any]) -> dict[str, Any]:
        """The options of the EncVQA metric for this job's judge."""
        options: dict[str, Any] = {"judge": None if self.judge == "none" else self.judge}
        if self.judge == "bem":
            options["checkpoint"] = self.bem_checkpoint
        elif self.judge == "llm":
            options["llm"] = llm
        elif self.judge == "embedding":
            if "embed" not in backends:
                raise ConfigError(
                    "--judge embedding needs a text embedder ([tools.embed] in hammr.toml)"
                )
            options["embedder"] = backends["embed"]
        return options


@dataclass(frozen=True)
class _MetricOf:
    """A suite entry reduced to its metric's name, to build that metric ahead of time."""

    metric: str
    name: str = ""
    question_type: str = ""
    dataset: str = ""


@dataclass
class BuiltJob:
    """An :class:`EvalJob` made live in this process."""

    job: EvalJob
    system: System
    llm: LLM
    backends: dict[str, Any]

    def __post_init__(self) -> None:
        self.metrics = default_metric_factory(
            {"encvqa": self.job.judge_options(self.llm, self.backends)}
        )
        for name in self.job.metrics_used:
            try:
                self.metrics(_MetricOf(name))  # built once here, then reused
            except Exception as e:
                judge = f" with --judge {self.job.judge}" if name == "encvqa" else ""
                reason = " ".join(str(e).split()) or type(e).__name__
                raise ConfigError(f"cannot score with metric {name!r}{judge}: {reason}") from None

    def context(self) -> ToolContext:
        return ToolContext(backends=self.backends, llm=self.llm)

    def answerer(self, run_name: str) -> Answer:
        return local_answerer(
            self.system,
            run_name=run_name,
            ctx_factory=self.context,
            timeout_s=self.job.timeout_s,
            metrics=self.metrics,
            max_pixels=self.job.max_pixels,
            work_clock=stall_clock() if self.job.work == "wall_less_processor_waits" else None,
        )

    async def prepare(self) -> None:
        """One-time setup before the first sample (model load, router embeddings)."""
        await prepare(self.system, self.llm)

    async def aclose(self) -> None:
        close = getattr(self.llm, "aclose", None)
        if close is not None:
            await close()
