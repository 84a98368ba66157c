"""Multimodal explanations and their visual metrics (MEAgent / MulProg, the MEVQA benchmark).

A multimodal explanation is text whose ``[BOX]`` tokens follow the names of the objects they
ground ("the apple [BOX] is left of the pear [BOX]"), each token linked to boxes in root-image
pixels: :class:`GroundedExplanation` with one :class:`BoxRef` (name + boxes) per token.

Two visual metrics (appendix B.2 of the MEAgent paper):

- :func:`detection_score`, the paper's Eq. 2: for every object name ``s`` of the reference, the
  i-th box group of ``s`` is compared with the boxes of the i-th ``[BOX]`` that follows ``s`` in
  the prediction's text; missing and redundant ``[BOX]`` tokens count as zeros. Ported from the
  official code, github.com/LivXue/FS-MEVQA at commit
  c7edea2a264e025b4ab6bfcaabb932bdc95943bb, ``metrics/visual_metrics.py`` (``vis_eval``,
  ``find_obj``, ``find_box_token``; ``evaluation.py`` at 551e68709fb0cd0eb26f130a561e2bbb2bc26949
  reports it as 'IoU'). See :func:`detection_score_xyxy` for the exact computation and the one
  place the official code departs from the paper's formula.
- :func:`grounding_score`, REX's Eq. 1 (Chen & Zhao 2022): the IoU of the pixel area covered by
  all reference boxes and that covered by all predicted boxes, wherever their tokens stand.
  As REX's official code computes it: github.com/szzexpoi/rex at commit
  3dbb66b5128180212b5dc1b9970d8a865e517f7a, ``model/util/evaluation.py``
  (``Grounding_Evaluator.eval_grounding``).

Scores are per explanation in 0..1; the official scripts report corpus means times 100.
Language metrics (BLEU, METEOR, ROUGE-L, CIDEr, SPICE) are in
:mod:`hammr.eval.metrics.language` and re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import fmean
from typing import Any

from hammr.eval.metrics.language import (
    LANGUAGE_METRICS,
    JavaMissingError,
    LanguageMetricError,
    LanguageScores,
    language_scores,
    spice_unavailable,
)
from hammr.values import Box

__all__ = [
    "BOX_TOKEN",
    "LANGUAGE_METRICS",
    "LOC_NAME",
    "LOC_PHRASE",
    "BoxRef",
    "ExplanationScores",
    "GroundedExplanation",
    "JavaMissingError",
    "LanguageMetricError",
    "LanguageScores",
    "box_iou_xyxy",
    "box_token_positions",
    "detection_score",
    "detection_score_xyxy",
    "grounding_score",
    "language_scores",
    "official_text",
    "score_explanations",
    "spice_unavailable",
    "tokens_following",
    "union_iou",
    "word_before",
    "zero_area",
]

BOX_TOKEN = "[BOX]"
LOC_NAME = "LOC"
"""MEVQA's name for a grounded *location* (a box with no object name)."""
LOC_PHRASE = "located here"
"""The words a ``LOC`` box follows in MEVQA explanations ('... located here [BOX]')."""

XYXY = Sequence[float]
"""A box as the official files write it: [x1, y1, x2, y2] in image pixels."""


@dataclass(frozen=True)
class BoxRef:
    """The boxes of one ``[BOX]`` token and the object name the token follows."""

    name: str
    boxes: tuple[Box, ...]

    def __post_init__(self) -> None:
        boxes = tuple(self.boxes)
        for b in boxes:
            if not isinstance(b, Box):
                raise TypeError(f"BoxRef {self.name!r}: expected Box values, got {b!r}")
        object.__setattr__(self, "boxes", boxes)


def box_from_xyxy(values: XYXY) -> Box:
    """[x1, y1, x2, y2] -> :class:`Box` (x, y, w, h); ValueError for a degenerate box."""
    if len(values) != 4:
        raise ValueError(f"a box needs 4 numbers [x1, y1, x2, y2], got {list(values)!r}")
    x1, y1, x2, y2 = (float(v) for v in values)
    return Box(x1, y1, x2 - x1, y2 - y1)


def zero_area(values: XYXY) -> bool:
    """True for [x1, y1, x2, y2] with x2 == x1 or y2 == y1 (and neither side inverted): a box
    of no area, which the reference files may hold (a point or a line of GQA's annotations).

    The official metrics score such a box without complaint: ``torchvision.ops.box_iou`` gives
    it IoU 0 with any box of positive area (nothing intersects it; :func:`box_iou_xyxy` agrees,
    and gives 0 also where torchvision's 0/0 gives NaN), so in ``vis_eval`` it counts as a
    reference box nothing found; REX's mask slice ``[int(y1):int(y2), int(x1):int(x2)]`` is
    empty, so it paints no pixel. A :class:`Box` cannot hold it, so a reference keeps it in
    :attr:`GroundedExplanation.reference_xyxy` for the detection score and leaves it out of
    its BoxRefs (which only grounding and display read)."""
    if len(values) != 4:
        return False
    x1, y1, x2, y2 = (float(v) for v in values)
    return x2 >= x1 and y2 >= y1 and (x2 == x1 or y2 == y1)


RawGroups = tuple[tuple[str, tuple[tuple[tuple[float, ...], ...], ...]], ...]
"""A reference's boxes exactly as its file gave them: ((name, groups), ...), each group a
tuple of [x1, y1, x2, y2] tuples."""


def xyxy(box: Box) -> tuple[float, float, float, float]:
    return (box.x, box.y, box.x2, box.y2)


@dataclass(frozen=True)
class GroundedExplanation:
    """Text with ``[BOX]`` tokens and the :class:`BoxRef` of each token: ``boxes[i]`` belongs
    to the i-th ``[BOX]`` of ``text`` (the official prediction files pair them the same way).

    As a reference, the detection metric reads it by name: the k-th BoxRef named ``s`` is the
    k-th group of ``s``, and the names are scored in ``name_order`` (then any others, in order
    of first appearance). The order matters only to the official padding (see
    :func:`detection_score_xyxy`); :meth:`from_named_boxes` keeps the dataset's order there.
    """

    text: str
    boxes: Sequence[BoxRef]
    name_order: tuple[str, ...] = ()
    reference_xyxy: RawGroups | None = None
    """The file's boxes as given, zero-area ones included (see :func:`zero_area`), when
    :meth:`from_named_boxes` built this reference and some box had no area; the detection
    score reads them (:meth:`named_xyxy`). None: the BoxRefs hold every box."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "boxes", tuple(self.boxes))
        object.__setattr__(self, "name_order", tuple(self.name_order))

    @property
    def token_count(self) -> int:
        """How many ``[BOX]`` tokens the text holds (case-insensitive, as the official code)."""
        return len(box_token_positions(self.text))

    def named_groups(self) -> dict[str, list[tuple[Box, ...]]]:
        """Object name -> its box groups: the names of ``name_order`` (with no groups when no
        BoxRef has that name), then the others in order of first appearance in ``boxes``."""
        out: dict[str, list[tuple[Box, ...]]] = {name: [] for name in self.name_order}
        for ref in self.boxes:
            out.setdefault(ref.name, []).append(ref.boxes)
        return out

    def named_xyxy(self) -> dict[str, list[list[list[float]]]]:
        """:meth:`named_groups` in MEVQA's reference form: {name: [[[x1, y1, x2, y2], ...]]};
        the file's own boxes, zero-area ones included, when :attr:`reference_xyxy` holds them."""
        if self.reference_xyxy is not None:
            return {
                name: [[list(b) for b in group] for group in groups]
                for name, groups in self.reference_xyxy
            }
        return {
            name: [[list(xyxy(b)) for b in group] for group in groups]
            for name, groups in self.named_groups().items()
        }

    def token_xyxy(self) -> list[list[list[float]]]:
        """The boxes in the official prediction form: one [[x1, y1, x2, y2], ...] per BoxRef."""
        return [[list(xyxy(b)) for b in ref.boxes] for ref in self.boxes]

    @classmethod
    def from_named_boxes(
        cls, text: str, named: Mapping[str, Sequence[Sequence[XYXY]]]
    ) -> GroundedExplanation:
        """A reference in MEVQA's form: ``named`` is {object name: [group, ...]}, each group a
        list of [x1, y1, x2, y2] boxes (the ``boxes`` field of the dataset files).

        The k-th group of a name is put at the k-th ``[BOX]`` that follows the name (the
        pairing the official metric assumes). When that does not place every group on its own
        token, one for each token, the BoxRefs stay name by name in ``named``'s order, which
        the detection score reads the same way. ``name_order`` is ``named``'s order.

        A box of no area (:func:`zero_area`) is scored as the official code scores it (IoU 0
        with anything): it stays in :attr:`reference_xyxy` and out of the BoxRefs. Any other
        box that is not a box (x2 < x1 or y2 < y1) is a ValueError."""
        grouped = [
            (
                name,
                [tuple(box_from_xyxy(b) for b in group if not zero_area(b)) for group in groups],
            )
            for name, groups in named.items()
        ]
        order = tuple(named)
        raw: RawGroups | None = None
        if any(zero_area(b) for groups in named.values() for group in groups for b in group):
            raw = tuple(
                (name, tuple(tuple(tuple(float(v) for v in b) for b in group) for group in groups))
                for name, groups in named.items()
            )
        by_token: dict[int, BoxRef] = {}
        clash = False
        reading = official_text(text)
        for name, groups in grouped:
            ordinals = tokens_following(reading, name)
            if len(ordinals) < len(groups):
                clash = True
                break
            for ordinal, group in zip(ordinals, groups, strict=False):
                clash = clash or ordinal in by_token
                by_token[ordinal] = BoxRef(name, group)
        if not clash and sorted(by_token) == list(range(len(box_token_positions(text)))):
            return cls(text, [by_token[i] for i in sorted(by_token)], order, raw)
        refs = [BoxRef(name, group) for name, groups in grouped for group in groups]
        return cls(text, refs, order, raw)

    @classmethod
    def from_token_boxes(cls, text: str, boxes: Sequence[Sequence[XYXY]]) -> GroundedExplanation:
        """A prediction in the official results form: ``boxes[i]`` is the list of
        [x1, y1, x2, y2] boxes of the i-th ``[BOX]``; each BoxRef is named by the word before
        its token (:func:`word_before`; '' for groups beyond the tokens)."""
        n = len(box_token_positions(text))
        refs = [
            BoxRef(word_before(text, i) if i < n else "", tuple(box_from_xyxy(b) for b in group))
            for i, group in enumerate(boxes)
        ]
        return cls(text, refs)


# --- where the [BOX] tokens are and which names they follow -----------------------------------


def box_token_positions(text: str) -> list[int]:
    """Character offsets of every ``[BOX]`` in ``text``, case-insensitively (the official
    ``find_box_token`` on lowercased text)."""
    lower = text.lower()
    out: list[int] = []
    i = lower.find("[box]")
    while i != -1:
        out.append(i)
        i = lower.find("[box]", i + 1)
    return out


def official_text(text: str) -> str:
    """The explanation as the official detection metric reads it: '.', ';' and ',' removed,
    lowercased."""
    return text.replace(".", "").replace(";", "").replace(",", "").lower()


def tokens_following(text: str, name: str) -> list[int]:
    """Ordinals of the ``[BOX]`` tokens of ``text`` that follow ``name`` (the official
    ``find_obj``): the text before the token, less the one character just before it (the
    space), ends with ``' ' + name``. ``LOC`` stands for 'located here'. ``name`` is compared
    as given (the official code lowercases the text only); pass :func:`official_text` for the
    metric's reading."""
    lower = text.lower()
    wanted = " " + (LOC_PHRASE if name == LOC_NAME else name)
    # pos - 1 is -1 for a token at offset 0: the official slice then keeps all but the last
    # character, and so does this one.
    return [
        i
        for i, pos in enumerate(box_token_positions(lower))
        if (" " + lower[: pos - 1]).endswith(wanted)
    ]


def word_before(text: str, ordinal: int) -> str:
    """The word right before the ``ordinal``-th ``[BOX]`` (what the official pipeline hands
    its locator when it must find a box for a name: ``exp[exp[:li-1].rfind(' ')+1:li-1]``),
    with trailing '.', ',' and ';' dropped; IndexError when there is no such token."""
    pos = box_token_positions(text)[ordinal]
    before = text[:pos].rstrip()
    return before.rsplit(" ", 1)[-1].rstrip(".,;") if before else ""


# --- detection (Eq. 2, official FS-MEVQA code) ----------------------------------------------


def box_iou_xyxy(a: XYXY, b: XYXY) -> float:
    """IoU of two [x1, y1, x2, y2] boxes as ``torchvision.ops.box_iou`` computes it (areas
    (x2-x1)*(y2-y1), no +1), in float64; 0.0 where the union is empty (torchvision: NaN)."""
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = area_a + area_b - inter
    return inter / union if union > 0 else 0.0


def group_iou(reference: Sequence[XYXY], predicted: Sequence[XYXY]) -> float:
    """The official score of one box group: each reference box's best IoU with any predicted
    box, averaged over the reference boxes (``box_iou(gt, re).max(dim=1)[0].mean()``)."""
    if not reference or not predicted:
        return 0.0
    return fmean(max(box_iou_xyxy(g, p) for p in predicted) for g in reference)


def detection_score_xyxy(
    reference: Mapping[str, Sequence[Sequence[XYXY]]],
    explanation: str,
    boxes: Sequence[Sequence[XYXY]],
    *,
    official_padding: bool = True,
) -> float:
    """The detection score of one explanation in the official data forms.

    ``reference``: {object name: [group, ...]} (MEVQA's ``boxes``), each group a list of
    [x1, y1, x2, y2]; ``explanation``/``boxes``: the prediction's text and one box list per
    ``[BOX]`` token, in token order (the official results' ``explanation`` and ``boxes``).

    As ``vis_eval`` computes it: the text is read through :func:`official_text`; for each name
    ``s`` of the reference, in the reference's order, the i-th group of ``s`` is paired with the
    i-th token following ``s`` (:func:`tokens_following`) for i below both counts, and scores
    :func:`group_iou` with that token's boxes, or 0 when the token has no boxes (or no entry in
    ``boxes``). The scores are then padded with zeros up to max(G, P), G being the number of
    reference groups and P ``len(boxes)`` (so missing and redundant tokens count as zeros), and
    averaged; no scores at all give 0.

    ``official_padding=True`` (the default) pads as the official code does: inside the loop
    over names, with G counted so far. With several names this pads early (to P after the
    first name when P exceeds its groups) and the later names' scores then lengthen the list:
    a perfect prediction of two names with one box each scores 2/3, and the result depends on
    the names' order. ``official_padding=False`` pads once after the loop, which is the
    paper's Eq. 2 with N = max(G, P); both agree when the reference has one name.
    """
    text = official_text(explanation)
    scores: list[float] = []
    seen_groups = 0

    def pad() -> None:
        scores.extend([0.0] * (max(seen_groups, len(boxes)) - len(scores)))

    for name, groups in reference.items():
        ordinals = tokens_following(text, name)
        paired = min(len(groups), len(ordinals))
        seen_groups += len(groups)
        for i, ordinal in enumerate(ordinals[:paired]):
            if ordinal >= len(boxes) or len(boxes[ordinal]) == 0:
                scores.append(0.0)
                continue
            scores.append(group_iou(groups[i], boxes[ordinal]))
        if official_padding:
            pad()
    if not official_padding:
        pad()
    return fmean(scores) if scores else 0.0


def detection_score(
    reference: GroundedExplanation,
    prediction: GroundedExplanation,
    *,
    official_padding: bool = True,
) -> float:
    """Eq. 2 of the MEAgent paper as the official code computes it (see
    :func:`detection_score_xyxy`): the reference's names and groups
    (:meth:`GroundedExplanation.named_groups`) against the prediction's text and per-token
    boxes. The prediction's BoxRef names are not used: the official metric reads the names
    from its text."""
    return detection_score_xyxy(
        reference.named_xyxy(),
        prediction.text,
        prediction.token_xyxy(),
        official_padding=official_padding,
    )


# --- grounding (REX's Eq. 1) --------------------------------------------------------------------

Rect = tuple[int, int, int, int]


def pixel_rect(box: Box, image_size: tuple[int, int] | None) -> Rect:
    """The pixels a box paints in REX's mask: ``mask[int(y1):int(y2), int(x1):int(x2)]``,
    clipped to the image (and at 0: REX's numpy slice would wrap a negative start)."""
    x1, y1, x2, y2 = (int(v) for v in xyxy(box))
    x1, y1 = max(0, x1), max(0, y1)
    if image_size is not None:
        width, height = image_size
        x1, x2 = min(x1, width), min(x2, width)
        y1, y2 = min(y1, height), min(y2, height)
    return (x1, y1, x2, y2)


def union_area(rects: Sequence[Rect]) -> int:
    """Pixels covered by the union of integer rectangles (x1, y1, x2, y2), by sweeping the
    x-intervals between rectangle edges and merging the y-intervals over each."""
    live = [r for r in rects if r[2] > r[0] and r[3] > r[1]]
    xs = sorted({x for r in live for x in (r[0], r[2])})
    total = 0
    for left, right in pairwise(xs):
        spans = sorted((r[1], r[3]) for r in live if r[0] <= left and r[2] >= right)
        if not spans:
            continue
        covered = 0
        top, bottom = spans[0]
        for y1, y2 in spans[1:]:
            if y1 > bottom:
                covered += bottom - top
                top, bottom = y1, y2
            else:
                bottom = max(bottom, y2)
        covered += bottom - top
        total += covered * (right - left)
    return total


def union_iou(a: Sequence[Rect], b: Sequence[Rect]) -> float:
    """IoU of the pixel areas covered by two sets of rectangles; 0.0 when both are empty
    (REX turns that NaN into 0)."""
    pairs = [
        (max(p[0], q[0]), max(p[1], q[1]), min(p[2], q[2]), min(p[3], q[3])) for p in a for q in b
    ]
    inter = union_area(pairs)
    union = union_area(a) + union_area(b) - inter
    return inter / union if union > 0 else 0.0


def grounding_score(
    reference: GroundedExplanation,
    prediction: GroundedExplanation,
    *,
    image_size: tuple[int, int] | None = None,
    last_reference_box_only: bool = False,
) -> float:
    """REX's grounding score (MEAgent's Eq. 1): IoU of the pixel masks painted by all
    reference boxes and by all predicted boxes, ignoring names and token positions.

    As ``Grounding_Evaluator.eval_grounding`` computes it: each box paints the pixels
    ``[int(y1):int(y2), int(x1):int(x2)]`` of an image-sized mask (``image_size`` = (width,
    height) clips the boxes to the image; without it nothing is clipped, which gives the same
    IoU for boxes inside the image); IoU = |A and B| / |A or B|, 0 when both are empty. The
    union is computed exactly on the integer rectangles rather than on a mask array. REX
    divides by a per-question upper bound set by its detector's proposals; with free-form boxes
    there is none (bound 1).

    ``last_reference_box_only=True`` reproduces an indentation slip in REX's code, where only
    the last reference object's box is painted (``gt[y1:y2,x1:x2] = 1`` sits after the loop
    over ``roi``); the default paints them all, as Eq. 1 reads.
    """
    ref_boxes = [b for ref in reference.boxes for b in ref.boxes]
    if last_reference_box_only:
        ref_boxes = ref_boxes[-1:]
    pred_boxes = [b for ref in prediction.boxes for b in ref.boxes]
    return union_iou(
        [pixel_rect(b, image_size) for b in ref_boxes],
        [pixel_rect(b, image_size) for b in pred_boxes],
    )


# --- corpus scores -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExplanationScores:
    """Corpus means over the references' ids (0..1; the official scripts print x100)."""

    samples: int
    detection: float
    grounding: float
    language: LanguageScores | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "samples": self.samples,
            "detection": self.detection,
            "grounding": self.grounding,
        }
        if self.language is not None:
            out.update(self.language.values)
            out["unavailable"] = dict(self.language.unavailable)
        return out


EMPTY = GroundedExplanation("", ())


def score_explanations(
    references: Mapping[str, GroundedExplanation],
    predictions: Mapping[str, GroundedExplanation],
    *,
    language: Sequence[str] = (),
    official_padding: bool = True,
    image_sizes: Mapping[str, tuple[int, int]] | None = None,
) -> ExplanationScores:
    """Detection and grounding averaged over ``references`` (as ``vis_eval`` averages over the
    ground truths), and the ``language`` metrics (names from :data:`LANGUAGE_METRICS`; none by
    default, since they need Java). A reference with no prediction scores as an empty
    explanation (0 on both visual metrics)."""
    ids = list(references)
    det = [
        detection_score(references[k], predictions.get(k, EMPTY), official_padding=official_padding)
        for k in ids
    ]
    sizes = image_sizes or {}
    grd = [
        grounding_score(references[k], predictions.get(k, EMPTY), image_size=sizes.get(k))
        for k in ids
    ]
    lang = None
    if language:
        lang = language_scores(
            {k: [references[k].text] for k in ids},
            {k: predictions.get(k, EMPTY).text for k in ids},
            metrics=tuple(language),
        )
    return ExplanationScores(
        samples=len(ids),
        detection=fmean(det) if det else 0.0,
        grounding=fmean(grd) if grd else 0.0,
        language=lang,
    )
