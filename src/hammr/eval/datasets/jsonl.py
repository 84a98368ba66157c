"""Plain JSON Lines questions: the project's own format (``examples/demo/questions.jsonl``) and
the way in for any dataset without an adapter.

One JSON object per line: ``{"id", "question", "answers": [...] | "answer": "...", "image",
"image2"?, "point": [x, y]?, "choices": [...]?, "type"?}``. Image paths are relative to
``images`` when given, else to the file's folder (absolute paths are used as they are).
``answers`` may be one string or a list; for multiple choice give the letter ('B'). ``type`` is
the question type (default: the option ``question_type``, itself '' by default); a line
without ``id`` gets its line number. Every other key goes to ``meta``. The option ``dataset``
names the samples' dataset (default 'jsonl').
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    bad_record,
    field,
    image_root,
    path_value,
    question_field,
    read_jsonl,
    text_value,
    texts_value,
)
from hammr.eval.types import Sample

NAME = "jsonl"
EXPECTS = (
    "JSON Lines: one {id, question, answers | answer, image, image2?, point?, choices?, type?} "
    "per line, image paths relative to the file"
)
KNOWN = {"id", "question", "answers", "answer", "image", "image2", "point", "choices", "type"}


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    dataset: str = NAME,
    question_type: str = "",
    only_type: str = "",
) -> list[Sample]:
    """``split`` is not used; ``only_type`` keeps the lines of that ``type`` (one file can
    then feed one suite entry per question type)."""
    root = image_root(path, images)
    samples = []
    for line, record in read_jsonl(path, NAME, EXPECTS):
        if only_type and record.get("type") != only_type:
            continue
        where = f"line {line}"
        key = "answers" if "answers" in record else "answer"
        raw: Any = field(record, key, NAME, path, where, EXPECTS)
        answers = texts_value(raw, key, NAME, path, where, EXPECTS)
        if not answers:
            raise bad_record(NAME, path, where, "empty 'answers'", EXPECTS)
        variables = {
            name: root / path_value(record[name], name, NAME, path, where, EXPECTS)
            for name in ("image", "image2")
            if record.get(name) not in (None, "")
        }
        if "image" not in variables:
            raise bad_record(NAME, path, where, "no 'image'", EXPECTS)
        point = record.get("point")
        if point is not None and not (
            isinstance(point, list)
            and len(point) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in point)
        ):
            raise bad_record(NAME, path, where, f"'point' {point!r} is not [x, y]", EXPECTS)
        choices = record.get("choices") or []
        if not isinstance(choices, list):
            raise bad_record(NAME, path, where, "'choices' is not a list", EXPECTS)
        kind = record.get("type")
        samples.append(
            Sample(
                id=text_value(record.get("id", line), "id", NAME, path, where, EXPECTS),
                dataset=dataset,
                question=question_field(record, "question", NAME, path, where, EXPECTS),
                answers=answers,
                images=variables,
                question_type=(
                    text_value(kind, "type", NAME, path, where, EXPECTS, numbers=False)
                    if kind
                    else question_type
                ),
                point=(float(point[0]), float(point[1])) if point is not None else None,
                choices=texts_value(choices, "choices", NAME, path, where, EXPECTS),
                meta={k: v for k, v in record.items() if k not in KNOWN},
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="",
    schema="the project's own format",
)
