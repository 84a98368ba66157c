"""MEVQA / SME (Xue et al., "Few-Shot Multimodal Explanation for Visual Question Answering",
the MEAgent paper): GQA questions with an answer and a multimodal explanation whose ``[BOX]``
tokens follow the names of the objects they ground.

Official release: github.com/LivXue/FS-MEVQA, ``dataset/dataset.zip`` (+ ``.z01``), holding the
split files the authors' scripts read: ``SME_test.json``, the dataset's current name (README:
"the SME dataset"; read by ``1generate_program.py`` at 7853094a07dd648d1276638d68a21f1e5635c16b
and ``4recover_boxes.py`` at f8f16a1b9dff2900407185a5e4bbfa85984da7ca), or the older
``MEGQA_test.json`` (``evaluation.py``, ``GPT4V_baseline.py``); images are GQA's
(``images.zip``) as ``<images>/<imageId>.jpg``. ``path`` may name the split file or a folder:
in a folder the first of :data:`SPLIT_FILES` there (or in its ``data/`` subfolder, where
``1generate_program.py`` looks) is read, and images are looked for from the folder itself.

Schema: one JSON object ``{question_id: {question, imageId, answer, explanation, boxes, ...}}``
where ``explanation`` is text with ``[BOX]`` tokens ("The apple [BOX] is to the left of the pear
[BOX].") and ``boxes`` is ``{object name: [group, ...]}``, each group a list of
``[x1, y1, x2, y2]`` boxes in image pixels: the k-th group of a name belongs to the k-th
``[BOX]`` that follows that name (a location with no name is ``LOC``, written 'located here
[BOX]').

Samples: ``answers == (answer,)``; ``images['image']`` is ``<images>/images/<imageId>.jpg``
when an ``images`` folder is there (the layout the authors' GPT-4V script reads,
``dataset/images/<imageId>.jpg`` beside the split file), else ``<images>/<imageId>.jpg``;
``.png`` is used when only that exists (as ``1generate_program.py`` falls back). ``images``
defaults to the file's folder (the folder given as ``path``, when it is one). Question type
'spatial_reasoning' (the GQA adapter's).
``meta``: ``explanation`` (text), ``boxes`` (the file's dict, unchanged), ``reference`` (a
:class:`~hammr.eval.metrics.explanation.GroundedExplanation` built from them), ``image_id``, and
``full_answer`` when the record has GQA's ``fullAnswer``.

Partly verified against the official code (commits c7edea2a264e025b4ab6bfcaabb932bdc95943bb,
551e68709fb0cd0eb26f130a561e2bbb2bc26949, e2fa6813be88c3a9e817140e8523c3e26b9b1adb): the top
level ``{qid: record}`` and the keys ``question``, ``imageId``, ``answer`` (read by
``evaluation.py``, ``1generate_program.py``, ``GPT4V_baseline.py``), ``explanation`` and
``boxes`` (read by ``metrics/language_metrics.py`` and ``metrics/visual_metrics.py``), the form
of ``boxes`` (built by ``dataset/4separate_text_and_box.py``, scored as xyxy by
``torchvision.ops.box_iou`` in ``visual_metrics.py``; a box of no area is kept and scored as
that code scores it, IoU 0: :func:`~hammr.eval.metrics.explanation.zero_area`; an inverted box,
x2 < x1 or y2 < y1, is refused as a sign of a misread file) and the ``LOC``/'located here' pairing
(``dataset/6GPT_check_grammar.py``, ``visual_metrics.find_obj``). Assumed: the step that renames
the construction scripts' ``exp``/``box`` to ``explanation``/``boxes`` and adds the GQA fields
is not in the public code, and no real split file was read here (the archive is not in the
searchable index), so other keys of the released records are unknown and ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    MissingFileError,
    bad_record,
    field,
    question_field,
    read_json,
    require_inside,
    subdir_if_present,
    text,
    text_field,
)
from hammr.eval.metrics.explanation import GroundedExplanation
from hammr.eval.types import Sample

NAME = "mevqa"
SPLIT_FILES = ("SME_test.json", "MEGQA_test.json")
"""The test split's names, current first, that a folder given as ``path`` is searched for."""
EXPECTS = (
    "MEVQA/SME split JSON (SME_test.json or MEGQA_test.json, or a folder holding one): "
    "{question_id: {question, imageId, answer, explanation with [BOX] tokens, boxes: "
    "{name: [[[x1, y1, x2, y2], ...], ...]}}}, images <images>/images/<imageId>.jpg or "
    "<images>/<imageId>.jpg"
)
QUESTION_TYPE = "spatial_reasoning"


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_boxes(value: Any) -> str | None:
    """None when ``value`` is {name: [[[x1, y1, x2, y2], ...], ...]}, else what is wrong."""
    if not isinstance(value, dict):
        return "'boxes' is not a JSON object {name: [group, ...]}"
    for name, groups in value.items():
        if not isinstance(groups, list):
            return f"'boxes'[{name!r}] is not a list of box groups"
        for group in groups:
            if not isinstance(group, list):
                return f"'boxes'[{name!r}] has a group that is not a list of boxes"
            if group and all(map(is_number, group)):
                return f"'boxes'[{name!r}] has the box {group!r} where a list of boxes belongs"
            for box in group:
                if not (isinstance(box, list) and len(box) == 4 and all(map(is_number, box))):
                    return f"'boxes'[{name!r}] has {box!r}, not [x1, y1, x2, y2]"
    return None


def image_path(folder: Path, image_id: str) -> Path:
    jpg = folder / f"{image_id}.jpg"
    png = folder / f"{image_id}.png"
    return png if not jpg.exists() and png.exists() else jpg


def split_file(folder: Path) -> Path:
    """The split file in ``folder``: the first of :data:`SPLIT_FILES` in it, else in its
    ``data/`` subfolder; MissingFileError naming every place looked at when there is none."""
    candidates = [folder / name for name in SPLIT_FILES]
    candidates += [folder / "data" / name for name in SPLIT_FILES]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise MissingFileError(f"{NAME}: no split file in the folder {folder} (looked for {looked})")


def load(path: Path, *, images: Path | None = None, split: str | None = None) -> list[Sample]:
    """All questions of the file, in file order. ``split`` is not used (one file per split).
    ``path`` may be a folder: see the module docstring."""
    folder: Path | None = None
    if path.is_dir():
        folder, path = path, split_file(path)
    data = read_json(path, NAME, EXPECTS)
    if not isinstance(data, dict):
        raise bad_record(NAME, path, "top level", "not a JSON object", EXPECTS)
    root = images if images is not None else folder or path.parent
    folder = subdir_if_present(root, "images")
    samples = []
    for qid, record in data.items():
        where = f"question {qid}"
        if not isinstance(record, dict):
            raise bad_record(NAME, path, where, "not a JSON object", EXPECTS)
        image_id = text_field(record, "imageId", NAME, path, where, EXPECTS)
        explanation = field(record, "explanation", NAME, path, where, EXPECTS)
        if not isinstance(explanation, str):
            raise bad_record(NAME, path, where, "'explanation' is not text", EXPECTS)
        boxes = field(record, "boxes", NAME, path, where, EXPECTS)
        problem = check_boxes(boxes)
        if problem is not None:
            raise bad_record(NAME, path, where, problem, EXPECTS)
        try:
            reference = GroundedExplanation.from_named_boxes(explanation, boxes)
        except ValueError as e:
            problem = f"a box in 'boxes' is not usable ({e})"
            raise bad_record(NAME, path, where, problem, EXPECTS) from e
        image = require_inside([root], image_path(folder, image_id), NAME, f"{path}, {where}")
        meta: dict[str, Any] = {
            "image_id": image_id,
            "explanation": explanation,
            "boxes": boxes,
            "reference": reference,
        }
        if "fullAnswer" in record:
            meta["full_answer"] = text(record["fullAnswer"])
        samples.append(
            Sample(
                id=str(qid),
                dataset=NAME,
                question=question_field(record, "question", NAME, path, where, EXPECTS),
                answers=(text_field(record, "answer", NAME, path, where, EXPECTS),),
                images={"image": image},
                question_type=QUESTION_TYPE,
                meta=meta,
            )
        )
    return samples


def references(samples: Sequence[Sample]) -> dict[str, GroundedExplanation]:
    """Sample id -> reference explanation, for :func:`~hammr.eval.metrics.explanation.
    score_explanations` (samples of other adapters are skipped)."""
    return {
        s.id: s.meta["reference"]
        for s in samples
        if isinstance(s.meta.get("reference"), GroundedExplanation)
    }


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type=QUESTION_TYPE,
    schema=(
        "partly verified: keys and box layout read by the authors' evaluation, metric and "
        "dataset-construction code; no released split file read"
    ),
)
