"""OK-VQA (Marino et al. 2019): outside-knowledge VQA on COCO, AVIS's second benchmark.

Official files (okvqa.allenai.org/download.html), in VQA v2's layout:
``OpenEnded_mscoco_val2014_questions.json`` (also ``_train2014_``) and
``mscoco_val2014_annotations.json``, with the images of COCO ``val2014.zip``. Schemas::

    {"data_subtype": "val2014", "questions": [{"image_id", "question", "question_id"}], ...}
    {"annotations": [{"question_id", "image_id", "question_type", "answer_type",
                      "answers": [{"answer_id", "answer", "raw_answer", "answer_confidence"}],
                      "confidence"}], ...}

Every question has 10 answers (5 annotators, each answer given twice); OK-VQA is scored with
the VQA challenge's accuracy over them (the ``vqa_accuracy`` metric, which compares each
answer record's ``answer``, not its ``raw_answer``). ``answers`` keeps all 10 in order, repeats
included.

* ``path`` is the questions file; the annotations are the option ``annotations`` (relative to
  the questions file's folder), by default the questions file's name without 'OpenEnded_' and
  with '_questions' turned into '_annotations' (``mscoco_val2014_annotations.json``; VQA v2's
  ``v2_OpenEnded_mscoco_val2014_questions.json`` gives ``v2_mscoco_val2014_annotations.json``).
  A question without an annotation, or whose annotation has no answers, is an error naming the
  annotations file and the question.
* Images: ``<images>/val2014/COCO_val2014_<image_id as 12 digits>.jpg``, or
  ``<images>/COCO_val2014_...jpg`` when there is no ``val2014/`` folder. The COCO set
  ('val2014', 'train2014') is ``<split>2014`` when ``split`` is given ('val', 'train'), else
  the questions file's ``data_subtype``.
* ``meta``: ``image_id``, ``question_type`` (OK-VQA's knowledge category: 'one' = vehicles and
  transportation ... 'ten' = weather and climate, 'other'), ``answer_type``, ``raw_answers``.

Not verified against real data (no OK-VQA file was available here): the keys are the VQA v2
format the release follows, as google-research/big_vision's OK-VQA builder
(``big_vision/datasets/okvqa/okvqa.py``, commit 11eea5740d595c2104da948849e087a27e92926f)
reads them; the test fixture is written by hand in that schema.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    DatasetError,
    bad_record,
    image_root,
    option_path,
    question_field,
    read_json,
    subdir_if_present,
    text_field,
)
from hammr.eval.types import Sample

NAME = "okvqa"
EXPECTS = (
    "OK-VQA questions JSON (e.g. OpenEnded_mscoco_val2014_questions.json): {'questions': "
    "[{image_id, question, question_id}]}, with mscoco_val2014_annotations.json beside it; "
    "images <images>/val2014/COCO_val2014_<12-digit image_id>.jpg"
)
ANNOTATIONS_EXPECTS = (
    "OK-VQA annotations JSON (e.g. mscoco_val2014_annotations.json): {'annotations': "
    "[{question_id, image_id, answers: [{answer, raw_answer, ...}], question_type, answer_type}]}"
)
_SUBTYPE = re.compile(r"(train|val|test)\d{4}")


def default_annotations(questions: Path) -> Path:
    """The annotations file that goes with a questions file of VQA v2's naming."""
    name = questions.name
    if "_questions" not in name:
        raise DatasetError(
            f"{NAME}: cannot tell the annotations file from {questions} (no '_questions' in its "
            "name); set the option 'annotations'"
        )
    return questions.with_name(name.replace("OpenEnded_", "").replace("_questions", "_annotations"))


def _subtype(data: dict[str, Any], path: Path, split: str | None) -> str:
    if split:
        return split if _SUBTYPE.fullmatch(split) else f"{split}2014"
    subtype = data.get("data_subtype")
    if isinstance(subtype, str) and subtype:
        return subtype
    found = _SUBTYPE.search(path.name)
    return found.group(0) if found else "val2014"


def read_annotations(path: Path) -> dict[str, dict[str, Any]]:
    """question_id (as text) -> annotation record."""
    data = read_json(path, NAME, ANNOTATIONS_EXPECTS)
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise bad_record(NAME, path, "top level", "no 'annotations' list", ANNOTATIONS_EXPECTS)
    out: dict[str, dict[str, Any]] = {}
    for i, record in enumerate(data["annotations"]):
        where = f"annotations[{i}]"
        if not isinstance(record, dict):
            raise bad_record(NAME, path, where, "not a JSON object", ANNOTATIONS_EXPECTS)
        qid = text_field(record, "question_id", NAME, path, where, ANNOTATIONS_EXPECTS)
        out[qid] = record
    return out


def _answers(record: dict[str, Any], path: Path, where: str) -> tuple[list[str], list[str]]:
    """(answer, raw_answer) of every answer record."""
    raw = record.get("answers")
    if not raw or not isinstance(raw, list):
        raise bad_record(NAME, path, where, "no 'answers'", ANNOTATIONS_EXPECTS)
    answers, raw_answers = [], []
    for j, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("answer"), str):
            raise bad_record(
                NAME, path, f"{where}, answers[{j}]", "no 'answer' string", ANNOTATIONS_EXPECTS
            )
        answers.append(item["answer"])
        raw_answers.append(str(item.get("raw_answer", item["answer"])))
    return answers, raw_answers


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    annotations: str = "",
) -> list[Sample]:
    data = read_json(path, NAME, EXPECTS)
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise bad_record(NAME, path, "top level", "no 'questions' list", EXPECTS)
    ann_path = option_path(annotations, path.parent) if annotations else default_annotations(path)
    by_question = read_annotations(ann_path)
    subtype = _subtype(data, path, split)
    root = subdir_if_present(image_root(path, images), subtype)
    samples = []
    for i, record in enumerate(data["questions"]):
        where = f"questions[{i}]"
        if not isinstance(record, dict):
            raise bad_record(NAME, path, where, "not a JSON object", EXPECTS)
        qid = text_field(record, "question_id", NAME, path, where, EXPECTS)
        annotation = by_question.get(qid)
        if annotation is None:
            raise bad_record(
                NAME,
                ann_path,
                f"question {qid} ({path.name}, {where})",
                "no annotation, so no answers",
                ANNOTATIONS_EXPECTS,
            )
        answers, raw_answers = _answers(annotation, ann_path, f"question {qid}")
        image_id = text_field(record, "image_id", NAME, path, where, EXPECTS)
        if not image_id.isdigit():
            raise bad_record(NAME, path, where, f"image_id {image_id!r} is not a number", EXPECTS)
        samples.append(
            Sample(
                id=qid,
                dataset=NAME,
                question=question_field(record, "question", NAME, path, where, EXPECTS),
                answers=tuple(answers),
                images={"image": root / f"COCO_{subtype}_{int(image_id):012d}.jpg"},
                question_type="outside_knowledge",
                meta={
                    "image_id": image_id,
                    "question_type": str(annotation.get("question_type", "")),
                    "answer_type": str(annotation.get("answer_type", "")),
                    "raw_answers": raw_answers,
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="outside_knowledge",
    schema="assumed: the VQA v2 layout of the OK-VQA release, as big_vision's OK-VQA builder "
    "reads it (no real file available here)",
)
