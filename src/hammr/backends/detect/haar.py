"""Detection with OpenCV's Haar cascades: a few fixed classes, no model download.

``opencv-python-headless<5`` ships the cascade files (``cv2.data.haarcascades``); OpenCV 5
dropped them. The classes and the names that reach them:

* face (human face, person's face) -- ``frontalface_alt2``, which on the bundled photos
  finds the astronaut's face and, unlike ``frontalface_default``, none of the coins
* eye -- ``eye``
* licence plate (license plate, number plate, registration plate) -- ``russian_plate_number``
* cat face (cat, cat's face) -- ``frontalcatface_extended``; it needs the whole face with
  its ears in view
* person (body, pedestrian, people) -- ``fullbody``; upper body -- ``upperbody``

Names are matched case-insensitively, in the singular or plural. Any other name raises
:class:`UnknownClass`, which tells the agent to configure an open-vocabulary detector.

**Scores.** A cascade says yes or no; it has no probability. Each window that passes every
stage is one *vote*, and windows at nearby positions and scales are grouped as OpenCV's
``groupRectangles`` does (a group needs more than ``min_neighbors`` votes). A group's score
combines how many votes it got, counted per scale step so ``scale_factor`` does not change
it, with the margin by which its best window cleared the last stage (the stage sum that
``detectMultiScale3(..., outputRejectLevels=True)`` reports, less that stage's threshold,
over the largest margin the stage can give):

    score = 1 - exp(-(votes * ln(scale_factor) / ln(1.1)) * (0.5 + margin) / VOTE_SCALE)

so a face found at many positions and scales scores about 0.9 and a group of four weak
votes about 0.2. Groups overlapping a better one by IoU > ``nms_iou`` are dropped.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import re
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hammr.backends.local._common import pairs
from hammr.tools.base import ToolError
from hammr.values import Box, Image

if TYPE_CHECKING:  # numpy, Pillow and OpenCV are imported to detect, not to be configured
    import numpy as np

INSTALL_HINT = "pip install 'opencv-python-headless>=4.8,<5'"

CASCADES: dict[str, str] = {
    "face": "haarcascade_frontalface_alt2.xml",
    "eye": "haarcascade_eye.xml",
    "licence plate": "haarcascade_russian_plate_number.xml",
    "cat face": "haarcascade_frontalcatface_extended.xml",
    "person": "haarcascade_fullbody.xml",
    "upper body": "haarcascade_upperbody.xml",
}
"""Each class the detector knows -> its cascade file in ``cv2.data.haarcascades``."""

SYNONYMS: dict[str, str] = {
    "human face": "face",
    "persons face": "face",
    "peoples face": "face",
    "human eye": "eye",
    "license plate": "licence plate",
    "number plate": "licence plate",
    "registration plate": "licence plate",
    "vehicle registration plate": "licence plate",
    "car plate": "licence plate",
    "cat": "cat face",
    "cats face": "cat face",
    "cat head": "cat face",
    "body": "person",
    "full body": "person",
    "human body": "person",
    "human": "person",
    "pedestrian": "person",
    "people": "person",
    "persons": "person",
    "upperbody": "upper body",
    "head and shoulders": "upper body",
}
"""Other names (normalised: lower case, no apostrophes, singular) -> a class of CASCADES."""

VOTE_SCALE = 12.0
"""Votes (at scale steps of 1.1, weighted by 0.5 + margin) for a score of 1 - 1/e."""

MAX_RAW_WINDOWS = 4000
"""Raw windows grouped per image at most (the best by stage sum); more only on noise."""

_GROUP_EPS = 0.2  # OpenCV's GROUP_EPS: how far apart two windows of one group may be


class UnknownClass(ToolError):
    """The Haar detector has no cascade for this name; another backend is needed."""

    kind = "capability_missing"


def _normalise(name: str) -> str:
    text = name.lower().replace("\u2019", "'").replace("'", "")
    text = " ".join(re.sub(r"[^a-z0-9 ]+", " ", text).split())
    return re.sub(r"^(a|an|the) ", "", text)


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2].endswith(("s", "x", "ch", "sh")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def class_of(name: str) -> str | None:
    """The class of CASCADES a name means (``"Faces"`` -> ``"face"``), or None."""
    text = _normalise(name)
    words = text.split()
    forms = [text]
    if words:
        forms.append(" ".join([*words[:-1], _singular(words[-1])]))
    for form in forms:
        if form in CASCADES:
            return form
        if form in SYNONYMS:
            return SYNONYMS[form]
    return None


def unknown_class_message(name: str) -> str:
    known = ", ".join(CASCADES)
    return (
        f"the haar detector only knows: {known}; configure an open-vocabulary detector "
        f"([tools.detect] backend = 'owlv2' or 'vlm') for {name!r}"
    )


def cv2_available() -> bool:
    return importlib.util.find_spec("cv2") is not None


def _cv2() -> Any:
    import cv2

    return cv2


def last_stage_range(path: Path) -> tuple[float, float]:
    """(threshold, largest possible sum) of a cascade file's last stage."""
    stages = ET.parse(path).getroot().findall("./cascade/stages/_")
    if not stages:
        raise ValueError(f"{path} is not a cascade in OpenCV's format (no stages)")
    last = stages[-1]
    threshold = float(last.findtext("stageThreshold") or "nan")
    top = 0.0
    for weak in last.findall("./weakClassifiers/_"):
        top += max(float(v) for v in (weak.findtext("leafValues") or "0").split())
    if not math.isfinite(threshold) or top <= threshold:
        raise ValueError(f"{path}: cannot read the last stage's threshold and leaf values")
    return threshold, top


@dataclass
class Found:
    """One detection in the pixels of the image searched."""

    x: float
    y: float
    w: float
    h: float
    score: float


class Cascade:
    """One loaded cascade; OpenCV's classifier is not safe to share across threads, so
    every call holds the lock."""

    def __init__(self, path: Path) -> None:
        cv2 = _cv2()
        self.path = path
        self.classifier = cv2.CascadeClassifier(str(path))
        if self.classifier.empty():
            raise ToolError(f"OpenCV could not load the cascade {path}")
        self.window: tuple[int, int] = tuple(self.classifier.getOriginalWindowSize())
        self.threshold, self.top = last_stage_range(path)
        self.lock = threading.Lock()

    def raw(
        self, gray: np.ndarray, scale_factor: float, min_size: tuple[int, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every window that passed all stages: (N, 4) x, y, w, h and its margin in [0, 1]."""
        import numpy as np

        with self.lock:
            rects, _levels, weights = self.classifier.detectMultiScale3(
                gray,
                scaleFactor=scale_factor,
                minNeighbors=0,
                minSize=min_size,
                outputRejectLevels=True,
            )
        boxes = np.asarray(rects, dtype=np.float64).reshape(-1, 4)
        sums = np.asarray(weights, dtype=np.float64).reshape(-1)
        margins = ((sums - self.threshold) / (self.top - self.threshold)).clip(0.0, 1.0)
        return boxes, margins


def group_windows(boxes: np.ndarray, eps: float = _GROUP_EPS) -> list[np.ndarray]:
    """Indices of each group of similar windows (OpenCV's ``SimilarRects`` rule: all four
    sides closer than ``eps`` times the mean of the smaller width and height), joined
    transitively. One row of comparisons at a time, so memory stays linear."""
    import numpy as np

    x, y, w, h = (boxes[:, i] for i in range(4))
    x2, y2 = x + w, y + h
    label = np.full(len(boxes), -1)
    groups: list[np.ndarray] = []
    for start in range(len(boxes)):
        if label[start] >= 0:
            continue
        label[start] = len(groups)
        members, frontier = [start], [start]
        while frontier:
            found: list[int] = []
            for i in frontier:
                delta = eps * (np.minimum(w, w[i]) + np.minimum(h, h[i])) * 0.5
                near = (
                    (label < 0)
                    & (np.abs(x - x[i]) <= delta)
                    & (np.abs(y - y[i]) <= delta)
                    & (np.abs(x2 - x2[i]) <= delta)
                    & (np.abs(y2 - y2[i]) <= delta)
                )
                idx = np.flatnonzero(near)
                label[idx] = len(groups)
                found.extend(int(k) for k in idx)
            members.extend(found)
            frontier = found
        groups.append(np.array(sorted(members)))
    return groups


def group_score(votes: int, margin: float, scale_factor: float) -> float:
    """See the module docstring: 0 with no votes, towards 1 with many strong ones."""
    steps = votes * math.log(scale_factor) / math.log(1.1)
    return 1.0 - math.exp(-steps * (0.5 + margin) / VOTE_SCALE)


def select(
    boxes: np.ndarray,
    margins: np.ndarray,
    scale_factor: float,
    min_neighbors: int,
    nms_iou: float,
    max_boxes: int,
) -> list[Found]:
    """Group raw windows, score the groups with enough votes, suppress overlaps, best first."""
    import numpy as np

    from hammr.backends.local.owlv2 import nms

    if len(boxes) > MAX_RAW_WINDOWS:
        keep = np.argsort(-margins, kind="stable")[:MAX_RAW_WINDOWS]
        boxes, margins = boxes[keep], margins[keep]
    found: list[Found] = []
    for members in group_windows(boxes):
        if len(members) <= min_neighbors:
            continue
        x, y, w, h = boxes[members].mean(axis=0)
        score = group_score(len(members), float(margins[members].max()), scale_factor)
        found.append(Found(float(x), float(y), float(w), float(h), score))
    if not found:
        return []
    xyxy = np.array([[f.x, f.y, f.x + f.w, f.y + f.h] for f in found])
    scores = np.array([f.score for f in found])
    return [found[i] for i in nms(xyxy, scores, nms_iou)][:max_boxes]


class HaarDetector:
    """The 'detect' and 'object_in_image' capabilities for the classes in :data:`CASCADES`.

    ``detect(images, names)``: one name per image, or one image and several names, like every
    detector. Boxes come back in each image's own pixels, labelled with the name asked for,
    best first. ``contains`` is true when a box scores at least ``presence_threshold``.

    ``min_size`` is the smallest object looked for, as a fraction of the image's shorter side
    (never below the cascade's own window). Images whose shorter side is under
    ``upscale_below`` pixels are enlarged first (at most 4x), so small crops still work, and
    images whose longer side is over ``max_side`` are shrunk, which keeps large photos fast.
    """

    def __init__(
        self,
        scale_factor: float = 1.1,
        min_neighbors: int = 3,
        min_size: float = 0.02,
        nms_iou: float = 0.3,
        max_boxes: int = 50,
        presence_threshold: float = 0.4,
        equalize: bool = False,
        upscale_below: int = 96,
        max_side: int = 1280,
        cascade_dir: str | None = None,
    ) -> None:
        if not 1.0 < scale_factor <= 2.0:
            raise ValueError(f"scale_factor must be in (1, 2], got {scale_factor}")
        if min_neighbors < 0 or upscale_below < 0 or max_boxes < 1 or max_side < 64:
            raise ValueError(
                "min_neighbors and upscale_below must be >= 0, max_boxes >= 1, max_side >= 64"
            )
        if not 0.0 <= min_size < 1.0:
            raise ValueError(f"min_size must be in [0, 1), got {min_size}")
        if not 0.0 < nms_iou <= 1.0:
            raise ValueError(f"nms_iou must be in (0, 1], got {nms_iou}")
        if not 0.0 <= presence_threshold <= 1.0:
            raise ValueError(f"presence_threshold must be in [0, 1], got {presence_threshold}")
        self.scale_factor = scale_factor
        self.min_neighbors = min_neighbors
        self.min_size = min_size
        self.nms_iou = nms_iou
        self.max_boxes = max_boxes
        self.presence_threshold = presence_threshold
        self.equalize = equalize
        self.upscale_below = upscale_below
        self.max_side = max_side
        self._cascade_dir = Path(cascade_dir) if cascade_dir else None
        self._cascades: dict[str, Cascade] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"HaarDetector(classes={list(CASCADES)}, scale_factor={self.scale_factor}, "
            f"min_neighbors={self.min_neighbors})"
        )

    @property
    def cascade_dir(self) -> Path:
        """The folder of the cascade files: ``cascade_dir``, else OpenCV's own (found when
        first needed: importing OpenCV takes a while, and building the detector must not)."""
        if self._cascade_dir is None:
            self._cascade_dir = Path(_cv2().data.haarcascades)
        return self._cascade_dir

    @property
    def classes(self) -> list[str]:
        """The fixed classes it finds (what AVIS's visual context asks it for)."""
        return list(CASCADES)

    @staticmethod
    def knows(name: str) -> bool:
        return class_of(name) is not None

    def cascade(self, name: str) -> Cascade:
        cls = class_of(name)
        if cls is None:
            raise UnknownClass(unknown_class_message(name))
        with self._lock:
            if cls not in self._cascades:
                path = self.cascade_dir / CASCADES[cls]
                if not path.is_file():
                    raise ToolError(f"the cascade file for {cls!r} is missing: {path}")
                self._cascades[cls] = Cascade(path)
            return self._cascades[cls]

    async def detect(self, images: list[Image], names: list[str]) -> list[list[Box]]:
        queries = pairs(images, names, "detect")
        for wanted in queries:
            for name in wanted:
                self.cascade(name)  # unknown names fail before any work
        return await asyncio.to_thread(self._detect_all, images, queries)

    async def contains(self, images: list[Image], names: list[str]) -> list[bool]:
        if len(names) != len(images):
            raise ValueError(f"contains: got {len(images)} images and {len(names)} names")
        found = await self.detect(images, names)
        return [any((b.score or 0.0) >= self.presence_threshold for b in f) for f in found]

    def _detect_all(self, images: list[Image], queries: list[list[str]]) -> list[list[Box]]:
        out: list[list[Box]] = []
        for image, wanted in zip(images, queries, strict=True):
            boxes: list[Box] = []
            for name in wanted:
                boxes.extend(
                    Box(f.x, f.y, f.w, f.h, label=name, score=f.score)
                    for f in self.find(image, name)
                )
            boxes.sort(key=lambda b: -(b.score or 0.0))
            out.append(boxes)
        return out

    def working_scale(self, width: int, height: int) -> float:
        """How much an image is resized before the search: small crops are enlarged (at
        most 4x), large photos shrunk so their longer side is ``max_side``."""
        short, long = min(width, height), max(width, height)
        if 0 < short < self.upscale_below:
            return min(4.0, self.upscale_below / short, self.max_side / long)
        if long > self.max_side:
            return self.max_side / long
        return 1.0

    def find(self, image: Image, name: str) -> list[Found]:
        """Detections of one name in one image, in its pixels, best first (blocking)."""
        import numpy as np
        from PIL import Image as PILImage

        cv2 = _cv2()
        cascade = self.cascade(name)
        pixels = image.pixels.convert("L")
        scale = self.working_scale(pixels.width, pixels.height)
        if scale != 1.0:
            size = (max(1, round(pixels.width * scale)), max(1, round(pixels.height * scale)))
            pixels = pixels.resize(size, PILImage.Resampling.BILINEAR)
        gray = np.asarray(pixels, dtype=np.uint8)
        if self.equalize:
            gray = cv2.equalizeHist(gray)
        win_w, win_h = cascade.window
        grow = max(1.0, self.min_size * min(gray.shape) / min(win_w, win_h))
        min_size = (round(win_w * grow), round(win_h * grow))
        if gray.shape[1] < min_size[0] or gray.shape[0] < min_size[1]:
            return []
        boxes, margins = cascade.raw(gray, self.scale_factor, min_size)
        found = select(
            boxes, margins, self.scale_factor, self.min_neighbors, self.nms_iou, self.max_boxes
        )
        width, height = image.width, image.height
        out: list[Found] = []
        for f in found:
            x0, y0 = max(0.0, f.x / scale), max(0.0, f.y / scale)
            x1, y1 = min(width, (f.x + f.w) / scale), min(height, (f.y + f.h) / scale)
            if x1 > x0 and y1 > y0:
                out.append(Found(x0, y0, x1 - x0, y1 - y0, f.score))
        return out


OPTIONS: dict[str, type] = {
    "scale_factor": float,
    "min_neighbors": int,
    "min_size": float,
    "nms_iou": float,
    "max_boxes": int,
    "presence_threshold": float,
    "equalize": bool,
    "upscale_below": int,
    "max_side": int,
    "cascade_dir": str,
}


def _build(where: str, options: dict[str, Any]) -> HaarDetector:
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options(where, options, OPTIONS)
    if not cv2_available():
        raise BackendUnavailable(f"the haar detector needs OpenCV; install it with: {INSTALL_HINT}")
    return HaarDetector(**opts)


def from_config(options: dict[str, Any]) -> HaarDetector:
    """The ``[tools.detect] backend = "haar"`` factory."""
    return _build("tools.detect", options)


def presence_from_config(options: dict[str, Any]) -> HaarDetector:
    """The ``[tools.object_in_image] backend = "haar"`` factory."""
    return _build("tools.object_in_image", options)
