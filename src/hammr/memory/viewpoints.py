"""Viewpoints: which parts of a state an embedding is made of (MuSEAgent's compositional state
representation, section 3.2).

A state has four components: ``question``, ``task``, ``images`` and ``history``. A viewpoint
is a non-empty combination of them, named by its components joined with ``+`` in that order
(``question``, ``question+images``, ``question+task+images+history``, ...): 15 in all
(:data:`ALL_VIEWPOINTS`, smallest first). :func:`viewpoint_name` accepts the components in any
order and gives the canonical name.

What a viewpoint embeds (:func:`view_input`): a text made of the textual components, each on
its own lines (``Question: ...``, ``Task: dataset / sub-task``, ``History:`` and one line per
earlier step, or ``History: none (first step)``), and, for viewpoints with ``images``, the
images seen so far (at most ``max_images``: the first input image, then the most recent
ones). A state with no image has nothing to embed under ``images`` alone (its
:class:`ViewInput` is empty and the bank stores no vector for it); under ``question+images``
it is its text alone.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hammr.memory.experiences import State
from hammr.values import Image

COMPONENTS: tuple[str, ...] = ("question", "task", "images", "history")
"""The four parts of a state, in the order viewpoint names list them."""

COMPONENT_DOCS: dict[str, str] = {
    "question": "the question asked",
    "task": "the kind of task (dataset and sub-task)",
    "images": "the images seen so far",
    "history": "the steps taken so far",
}
"""What each component matches, in words (an agent choosing a viewpoint reads them)."""

ALL_VIEWPOINTS: tuple[str, ...] = tuple(
    "+".join(combo) for n in range(1, 5) for combo in itertools.combinations(COMPONENTS, n)
)
"""Every non-empty combination of the components (15), smallest first."""

DEFAULT_MAX_IMAGES = 4


class ViewpointError(ValueError):
    """A viewpoint name that is not a combination of the four components."""


def viewpoint_name(spec: str | Iterable[str]) -> str:
    """The canonical name of a viewpoint given as ``"images+question"`` or components."""
    parts = [p.strip() for p in spec.split("+")] if isinstance(spec, str) else list(spec)
    unknown = [p for p in parts if p not in COMPONENTS]
    if unknown or not parts:
        raise ViewpointError(
            f"not a viewpoint: {'+'.join(parts) or '(empty)'!r}; a viewpoint joins some of "
            f"{', '.join(COMPONENTS)} with '+', e.g. question+images"
        )
    if len(set(parts)) != len(parts):
        raise ViewpointError(f"viewpoint {'+'.join(parts)!r} names a component twice")
    return "+".join(c for c in COMPONENTS if c in parts)


def viewpoint_names(specs: Iterable[str]) -> tuple[str, ...]:
    """Canonical names, each once, in the order given."""
    out: list[str] = []
    for s in specs:
        name = viewpoint_name(s)
        if name not in out:
            out.append(name)
    if not out:
        raise ViewpointError("no viewpoint given")
    return tuple(out)


def components(viewpoint: str) -> tuple[str, ...]:
    return tuple(viewpoint_name(viewpoint).split("+"))


def needs_images(viewpoint: str) -> bool:
    return "images" in components(viewpoint)


def describe(viewpoint: str) -> str:
    """What a search under ``viewpoint`` matches, in words ("the question asked and the
    steps taken so far")."""
    docs = [COMPONENT_DOCS[c] for c in components(viewpoint)]
    return docs[0] if len(docs) == 1 else ", ".join(docs[:-1]) + " and " + docs[-1]


@dataclass(frozen=True)
class ViewContent:
    """What a viewpoint embeds of one state, images by content hash."""

    text: str
    images: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.text and not self.images

    def key(self) -> str:
        """Identifies the content (identical content embeds to the identical vector)."""
        doc = json.dumps([self.text, list(self.images)], ensure_ascii=False)
        return hashlib.sha256(doc.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class ViewInput:
    """What an embedder receives: the text and the images themselves."""

    text: str
    images: tuple[Image, ...] = ()


def pick_images(images: Sequence[str], max_images: int = DEFAULT_MAX_IMAGES) -> tuple[str, ...]:
    """The first image (the input) and the most recent ones, at most ``max_images``."""
    if len(images) <= max_images:
        return tuple(images)
    if max_images <= 0:
        return ()
    if max_images == 1:
        return (images[0],)
    return (images[0], *images[len(images) - (max_images - 1) :])


def view_text(state: State, viewpoint: str) -> str:
    """The text part of ``viewpoint`` for ``state`` (empty for ``images`` alone)."""
    parts: list[str] = []
    comps = components(viewpoint)
    if "question" in comps:
        parts.append(f"Question: {state.question}")
    if "task" in comps:
        parts.append(f"Task: {state.task.text()}")
    if "history" in comps:
        if state.history:
            parts.append("History:\n" + "\n".join(state.history))
        else:
            parts.append("History: none (first step)")
    return "\n".join(parts)


def view_content(
    state: State, viewpoint: str, *, max_images: int = DEFAULT_MAX_IMAGES
) -> ViewContent:
    """What ``viewpoint`` embeds of ``state`` (see the module docstring)."""
    images = pick_images(state.images, max_images) if needs_images(viewpoint) else ()
    return ViewContent(view_text(state, viewpoint), images)


def view_input(content: ViewContent, image: Callable[[str], Image | None]) -> ViewInput:
    """The content with its images looked up (those not found are left out)."""
    found = [img for h in content.images if (img := image(h)) is not None]
    return ViewInput(content.text, tuple(found))


__all__ = [
    "ALL_VIEWPOINTS",
    "COMPONENTS",
    "COMPONENT_DOCS",
    "DEFAULT_MAX_IMAGES",
    "ViewContent",
    "ViewInput",
    "ViewpointError",
    "components",
    "describe",
    "needs_images",
    "pick_images",
    "view_content",
    "view_input",
    "view_text",
    "viewpoint_name",
    "viewpoint_names",
]
