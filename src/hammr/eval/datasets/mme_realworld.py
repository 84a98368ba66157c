"""MME-RealWorld-Lite (Zhang et al. 2024): the 50-per-task subset of MME-RealWorld, multiple-choice
questions on high-resolution real-world images (MuSEAgent's second benchmark).

Official files: the question JSON and image folders of ``data.zip`` in the Hugging Face dataset
``yifanzhang114/MME-RealWorld-Lite``, whose card says the question format is identical to the
full split's ``MME_RealWorld.json``. Schema: a JSON list of ``{"Question_id", "Image" (path
relative to the image root), "Text" (the question), "Question Type" (sometimes spelled
"Question type"; 'Multiple Choice'), "Answer choices": ["(A) ...", "(B) ...", ...],
"Ground truth": "B", "Task" (Perception | Reasoning), "Subtask", "Category", "Dataset"?}``.

Choices are the answer choices without their '(A) ' prefixes (they must run A, B, C, ...);
``answers == (ground-truth letter,)``; ``meta`` keeps task, subtask and category. The question
type is the record's ``Task`` in lower case ('perception', 'reasoning': the sub-tasks MuSEAgent
reports), 'multiple_choice' when the record has none. Option ``multiple_choice_only``
(default True) skips a record whose question type is given and is not multiple choice.
Images: ``<images>/<Image>`` (``images`` defaults to the file's folder). Sample id:
``Question_id``.

Verified against the official repository's example of this format
(github.com/yfzhang114/MME-RealWorld, ``evaluation/output_test_template.json``, and its
evaluation script ``evaluation/model_vqa_mme_real_world.py``), not against a Lite file itself;
that the Lite JSON matches is the dataset card's statement.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    LETTERS,
    Adapter,
    answer_letter,
    bad_record,
    field,
    image_root,
    path_field,
    question_field,
    read_json_records,
    text_field,
    text_value,
)
from hammr.eval.types import Sample

NAME = "mme_realworld_lite"
EXPECTS = (
    "MME-RealWorld(-Lite) JSON: [{Question_id, Image, Text, 'Answer choices': ['(A) ...', ...], "
    "'Ground truth': letter, Task, Subtask, Category}], images <images>/<Image>"
)
_PREFIX = re.compile(r"^\s*\(?([A-Z])[).:]\s*")


def _choices(raw: list[Any]) -> tuple[str, ...] | None:
    out = []
    for i, choice in enumerate(raw):
        m = _PREFIX.match(str(choice))
        if m is None or m.group(1) != LETTERS[i]:
            return None
        out.append(str(choice)[m.end() :].strip())
    return tuple(out)


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    multiple_choice_only: bool = True,
) -> list[Sample]:
    """``split`` is not used."""
    root = image_root(path, images)
    samples = []
    for _, where, record in read_json_records(path, NAME, EXPECTS):
        kind = record.get("Question Type", record.get("Question type"))
        if multiple_choice_only and kind is not None and "choice" not in str(kind).lower():
            continue
        raw = field(record, "Answer choices", NAME, path, where, EXPECTS)
        choices = _choices(raw) if isinstance(raw, list) and len(raw) >= 2 else None
        if choices is None:
            raise bad_record(
                NAME, path, where, "'Answer choices' is not a list like ['(A) ...', ...]", EXPECTS
            )
        truth = field(record, "Ground truth", NAME, path, where, EXPECTS)
        letter = answer_letter(truth, len(choices))
        if letter is None:
            raise bad_record(NAME, path, where, f"ground truth {truth!r} is not an option", EXPECTS)
        task = record.get("Task")
        samples.append(
            Sample(
                id=text_field(record, "Question_id", NAME, path, where, EXPECTS),
                dataset=NAME,
                question=question_field(record, "Text", NAME, path, where, EXPECTS),
                answers=(letter,),
                images={"image": root / path_field(record, "Image", NAME, path, where, EXPECTS)},
                question_type=(
                    text_value(task, "Task", NAME, path, where, EXPECTS, numbers=False).lower()
                    if task
                    else "multiple_choice"
                ),
                choices=choices,
                meta={
                    "task": record.get("Task", ""),
                    "subtask": record.get("Subtask", ""),
                    "category": record.get("Category", ""),
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="multiple_choice",
    schema="verified: the official repository's example file of the (shared) question format",
)
