"""TextVQA v0.5.1 (Singh et al. 2019): HAMMR's *OCR-based reasoning* questions.

Official files: ``TextVQA_0.5.1_val.json`` (also ``_train``, ``_test``) and the images of
``train_val_images.zip`` (which unpacks to ``train_images/``; the val split's images are in it
too) or ``test_images.zip``.

Schema: ``{"dataset_type", "dataset_name": "textvqa", "dataset_version": "0.5.1", "data": [
{question_id, question, image_id, answers: [10 strings], image_classes, flickr_original_url,
flickr_300k_url, image_width, image_height, question_tokens, set_name}]}``. The test split has no
answers and cannot be scored. ``answers`` keeps all 10 annotator answers, repeats included
(TextVQA accuracy counts them).

Images: ``<images>/train_images/<image_id>.jpg`` for train and val, ``<images>/test_images/...``
for test; when that sub-folder does not exist, ``<images>/<image_id>.jpg`` (so ``images`` may
point at the root of the unpacked archive or at ``train_images`` itself). The split is
``split`` when given, else the file's ``dataset_type``.

Not verified against real data (no TextVQA file was available here): the schema is the
documented v0.5.1 one, written into the test fixture by hand.
"""

from __future__ import annotations

from pathlib import Path

from hammr.eval.datasets._common import (
    Adapter,
    bad_record,
    image_root,
    question_field,
    read_json,
    subdir_if_present,
    text_field,
    texts_value,
)
from hammr.eval.types import Sample

NAME = "textvqa"
EXPECTS = (
    "TextVQA v0.5.1 JSON (e.g. TextVQA_0.5.1_val.json): {'data': [{question_id, question, "
    "image_id, answers: [10 strings], ...}]}, images <images>/train_images/<image_id>.jpg"
)


def load(path: Path, *, images: Path | None = None, split: str | None = None) -> list[Sample]:
    data = read_json(path, NAME, EXPECTS)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise bad_record(NAME, path, "top level", "no 'data' list", EXPECTS)
    split = split or str(data.get("dataset_type") or "")
    folder = "test_images" if split == "test" else "train_images"
    root = subdir_if_present(image_root(path, images), folder)
    samples = []
    for i, record in enumerate(data["data"]):
        where = f"data[{i}]"
        if not isinstance(record, dict):
            raise bad_record(NAME, path, where, "not a JSON object", EXPECTS)
        answers = record.get("answers")
        if not answers:
            raise bad_record(
                NAME,
                path,
                where,
                "no 'answers' (the TextVQA test split has no public answers; use val)",
                EXPECTS,
            )
        if not isinstance(answers, list):
            raise bad_record(NAME, path, where, "'answers' is not a list", EXPECTS)
        image_id = text_field(record, "image_id", NAME, path, where, EXPECTS)
        samples.append(
            Sample(
                id=text_field(record, "question_id", NAME, path, where, EXPECTS),
                dataset=NAME,
                question=question_field(record, "question", NAME, path, where, EXPECTS),
                answers=texts_value(answers, "answers", NAME, path, where, EXPECTS),
                images={"image": root / f"{image_id}.jpg"},
                question_type="ocr_reasoning",
                meta={
                    "image_id": image_id,
                    "image_classes": list(record.get("image_classes") or []),
                    "set_name": record.get("set_name", split),
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="ocr_reasoning",
    schema="assumed: documented TextVQA v0.5.1 schema (no real file available here)",
)
