"""TallyQA (Acharya, Kafle & Kanan 2019): HAMMR's *complex counting* questions.

Official file: ``test.json`` of ``tallyqa.zip`` (also ``train.json``). Schema: a JSON list of
``{image, question, answer (int), issimple (bool), data_source, question_id, image_id}``.
``image`` is a path relative to an images root that holds both Visual Genome and COCO folders,
e.g. ``VG_100K_2/2410408.jpg`` or ``val2014/COCO_val2014_000000393225.jpg``; the image is
``<images>/<image>``.

Option ``complex`` (default True): keep only ``issimple == False`` questions, the test set's
complex part (the paper's "complex counting"); False keeps every question, and simple ones get
the question type 'simple_counting'. ``answers == (str(answer),)``.

The authors' evaluation code (manoja328/tallyqacode, ``eval_extra.py`` ``eval_simp_comp``,
commit 1efda74df3c01ac20fb667f671ca7fc94dd1aa78) splits differently: complex = ``data_source
== 'amt'``, simple = the other questions with ``issimple`` true. The two agree if every
non-simple test question came from AMT, which could not be checked here.

Not verified against real data (no TallyQA file was available here): the schema is the one the
TallyQA release documents, written into the test fixture by hand.
"""

from __future__ import annotations

from pathlib import Path

from hammr.eval.datasets._common import (
    Adapter,
    DatasetError,
    field,
    image_root,
    path_field,
    question_field,
    read_json_records,
    text,
    text_field,
    text_value,
)
from hammr.eval.types import Sample

NAME = "tallyqa"
EXPECTS = (
    "TallyQA test.json: [{image, question, answer, issimple, data_source, question_id}], "
    "images <images>/<image> (e.g. VG_100K_2/1.jpg, val2014/COCO_val2014_...jpg)"
)


def _flag(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "1", "yes"}
    return bool(value)


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    complex: bool = True,
) -> list[Sample]:
    if not isinstance(complex, bool):
        raise DatasetError(f"{NAME}: option 'complex' must be true or false, not {complex!r}")
    root = image_root(path, images)
    samples = []
    for i, where, record in read_json_records(path, NAME, EXPECTS):
        simple = _flag(field(record, "issimple", NAME, path, where, EXPECTS))
        if complex and simple:
            continue
        qid = record.get("question_id")
        samples.append(
            Sample(
                id=text_value(qid, "question_id", NAME, path, where, EXPECTS)
                if qid is not None
                else str(i),
                dataset=NAME,
                question=question_field(record, "question", NAME, path, where, EXPECTS),
                answers=(text_field(record, "answer", NAME, path, where, EXPECTS),),
                images={"image": root / path_field(record, "image", NAME, path, where, EXPECTS)},
                question_type="simple_counting" if simple else "complex_counting",
                meta={
                    "issimple": simple,
                    "data_source": record.get("data_source", ""),
                    "image_id": text(record.get("image_id", "")),
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="complex_counting",
    schema="assumed: schema documented with the TallyQA release (no real file available here)",
)
