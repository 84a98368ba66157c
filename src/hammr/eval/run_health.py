"""Whether a stored run's numbers are results at all: the one check every report makes.

A run is **FAILED** when it holds samples and either every one of them failed, or more than
half of them failed for one cause. A sample failed when its status is one of
:data:`~hammr.eval.store.FAILED_STATUSES` (it got no fair try: an exception, the time limit,
an LLM server that failed); its cause is :func:`failure_cause`, read from that status and the
stored error (an image that could not be loaded, a sample that could not be scored, the
exception's type, a timeout, the LLM server). A wrong answer is not a failure, nor is an
agent that used up its steps: those are results.

The scores of such a run are the zeros its failures were given, so no report shows them as
a number: ``hammr report`` writes FAILED in the run's cells and says why under the table,
``hammr experiment report`` leaves its cells empty with the cause as their note, the viewer
and the HTML reports mark the run FAILED, ``hammr runs`` shows FAILED for its mean, ``hammr
eval`` and ``hammr experiment run`` end with exit status 1 and the cause, and the reading
commands warn (:func:`hammr.cli_common.warn_unfinished`). All of them ask
:func:`stored_verdict` (or :func:`run_verdict` with what they already hold).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hammr.eval.store import FAILED_STATUSES

if TYPE_CHECKING:
    from hammr.eval.store import RunStore

EXAMPLE_CHARS = 160
"""How much of the first error line a verdict quotes."""

_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt))\b")


@dataclass(frozen=True)
class Cause:
    """What made samples fail, as a verdict says it."""

    key: str
    """Samples with the same key failed for the same reason."""
    text: str
    """Follows 'N of M samples' ('could not load their image')."""
    advice: str = ""
    """What to fix before asking them again ('' when there is nothing general to say)."""


def failure_cause(status: str, error: str | None) -> Cause:
    """The cause of one failed sample (status in FAILED_STATUSES), from its stored error."""
    text = (error or "").strip()
    if status == "timeout":
        return Cause("timeout", "timed out", "a longer --timeout (0: no limit)")
    if status == "llm_failure":
        return Cause(
            "llm_failure", "got no answer from the LLM server", "check that the server is up"
        )
    if text.startswith("ImageLoadError"):
        return Cause(
            "image",
            "could not load their image",
            "check that the images are under the data folder",
        )
    if text.startswith("scoring failed"):
        return Cause("scoring", "could not be scored")
    found = _EXCEPTION.match(text)
    if found:
        name = found.group(1).rsplit(".", 1)[-1]
        return Cause(f"error:{name}", f"failed with {name}")
    return Cause(f"status:{status}", f"ended in {status}")


def _first_line(error: str | None) -> str:
    line = next((ln.strip() for ln in (error or "").splitlines() if ln.strip()), "")
    return line if len(line) <= EXAMPLE_CHARS else line[: EXAMPLE_CHARS - 1] + "…"


@dataclass(frozen=True)
class RunVerdict:
    """Why a run's numbers are not results (:func:`run_verdict`)."""

    total: int
    """Samples stored."""
    failed: int
    """Of them, failed (any cause)."""
    cause: Cause
    """The most common cause."""
    count: int
    """Samples that failed for :attr:`cause`."""
    example: str
    """The first error line of a sample that failed for it ('' when none was stored)."""

    @property
    def text(self) -> str:
        """One line: '12 of 12 samples could not load their image (ImageLoadError: ...)'."""
        quoted = f" ({self.example})" if self.example else ""
        if self.count == self.total or self.failed < self.total:
            return f"{self.count} of {self.total} samples {self.cause.text}{quoted}"
        return f"all {self.total} samples failed, {self.count} of them {self.cause.text}{quoted}"

    @property
    def advice(self) -> str:
        """What to fix before asking them again ('' when nothing general)."""
        return self.cause.advice

    def next_step(self, retry: str) -> str:
        """What to do, ``retry`` being how to ask the failed samples again ('ask them again
        with --retry-failed'): '<advice>, then <retry>'."""
        return f"{self.advice}, then {retry}" if self.advice else retry


def run_verdict(total: int, failures: Iterable[tuple[str, str | None]]) -> RunVerdict | None:
    """The verdict on a run of ``total`` stored samples whose failed ones are ``failures``
    ((status, error) of each, in the order they were stored; samples of other statuses are
    ignored): None when its numbers are results, else why they are not (every sample failed,
    or more than half failed for one cause)."""
    counts: dict[str, int] = {}
    causes: dict[str, Cause] = {}
    examples: dict[str, str] = {}
    failed = 0
    for status, error in failures:
        if status not in FAILED_STATUSES:
            continue
        failed += 1
        cause = failure_cause(status, error)
        counts[cause.key] = counts.get(cause.key, 0) + 1
        causes.setdefault(cause.key, cause)
        if not examples.get(cause.key):
            examples[cause.key] = _first_line(error)
    if total <= 0 or not counts:
        return None
    key = max(counts, key=lambda k: counts[k])  # ties: the cause met first
    if failed < total and 2 * counts[key] <= total:
        return None
    return RunVerdict(total, failed, causes[key], counts[key], examples.get(key, ""))


def stored_verdict(store: RunStore, run: str) -> RunVerdict | None:
    """:func:`run_verdict` of a run in the store (None for a run it does not hold). Reads the
    failed samples' errors only when failures could decide it (more than half failed)."""
    total = store.count(run)
    statuses = list(FAILED_STATUSES)
    failed = store.count(run, {"status": statuses})
    if total == 0 or 2 * failed <= total:
        return None
    records = store.records(run, limit=None, filters={"status": statuses}, traces=False)
    return run_verdict(total, ((r.status, r.error) for r in records))


__all__ = ["Cause", "RunVerdict", "failure_cause", "run_verdict", "stored_verdict"]
