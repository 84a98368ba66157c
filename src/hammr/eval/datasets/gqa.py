"""GQA (Hudson & Manning 2019), balanced questions: HAMMR's *spatial reasoning* questions.

Official file: ``questions1.2/testdev_balanced_questions.json`` (also ``val_balanced_...``,
``train_balanced_...``) from the GQA download page, with images from ``images.zip``.

Schema: one JSON object ``{question_id: {imageId, question, answer, fullAnswer, types{structural,
semantic, detailed}, isBalanced, groups, semantic[...], semanticStr, annotations, entailed,
equivalent}}``. Image: ``<images>/<imageId>.jpg`` (``images`` defaults to the file's folder).
One ground-truth answer per question: ``answers == (answer,)``.

Verified against real data: /work/shared/data/gqa holds real testdev balanced questions (the
GQA-OOD re-serialisation, same keys and nesting); the tests load it. Image paths follow the
official ``images.zip`` layout (``images/n54424.jpg``), which that excerpt cannot show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    bad_record,
    image_root,
    question_field,
    read_json,
    text_field,
)
from hammr.eval.types import Sample

NAME = "gqa"
EXPECTS = (
    "GQA balanced questions JSON (e.g. testdev_balanced_questions.json): "
    "{question_id: {imageId, question, answer, ...}}, images <images>/<imageId>.jpg"
)


def load(path: Path, *, images: Path | None = None, split: str | None = None) -> list[Sample]:
    """All questions of the file, in file order. ``split`` is not used (the file is one split)."""
    data = read_json(path, NAME, EXPECTS)
    if not isinstance(data, dict):
        raise bad_record(NAME, path, "top level", "not a JSON object", EXPECTS)
    root = image_root(path, images)
    samples = []
    for qid, record in data.items():
        where = f"question {qid}"
        if not isinstance(record, dict):
            raise bad_record(NAME, path, where, "not a JSON object", EXPECTS)
        image_id = text_field(record, "imageId", NAME, path, where, EXPECTS)
        types: Any = record.get("types") or {}
        samples.append(
            Sample(
                id=str(qid),
                dataset=NAME,
                question=question_field(record, "question", NAME, path, where, EXPECTS),
                answers=(text_field(record, "answer", NAME, path, where, EXPECTS),),
                images={"image": root / f"{image_id}.jpg"},
                question_type="spatial_reasoning",
                meta={
                    "image_id": image_id,
                    "full_answer": record.get("fullAnswer", ""),
                    "structural": types.get("structural", "") if isinstance(types, dict) else "",
                    "semantic": types.get("semantic", "") if isinstance(types, dict) else "",
                    "detailed": types.get("detailed", "") if isinstance(types, dict) else "",
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="spatial_reasoning",
    schema="verified: real testdev balanced questions (GQA-OOD excerpt, same schema)",
)
