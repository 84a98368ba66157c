"""V* Bench (Wu & Xie 2024, "V*: Guided Visual Search"): 191 multiple-choice questions about
small details of high-resolution images (MuSEAgent's first benchmark).

Official release: the Hugging Face dataset ``craigwu/vstar_bench``, a folder with
``direct_attributes/`` (115 questions, 4 options) and ``relative_position/`` (76 questions,
2 options), each holding an image and a JSON annotation of the same name (``sa_4690.jpg`` +
``sa_4690.json``), plus ``test_questions.jsonl`` at the top.

Two ways in, depending on ``path``:

* ``test_questions.jsonl`` (or the folder holding it): one ``{image, text, category,
  question_id, label}`` per line, ``image`` relative to the folder
  ('direct_attributes/sa_4690.jpg'),
  ``text`` the question followed by lettered options ('(A) rubber' ...) and an instruction,
  ``label`` the correct letter. The options keep the file's letters. Sample id: question_id.
* a folder without that file: every ``<category>/<name>.json`` annotation ``{question, options,
  target_object, bbox}``, whose ``options[0]`` is the correct option (the official evaluation
  scores the options by likelihood, so the file has no letters). The options are put in an
  order drawn from the sample id (the same on every run), so the correct letter is not always A.
  Sample id: ``<category>/<name>``.

Choices are the option texts, ``answers == (letter,)``, ``meta['category']`` =
direct_attributes | relative_position. The question type is the sub-task MuSEAgent reports
(its Table 2 columns): 'attribute' for direct_attributes, 'relation' for relative_position
(:data:`SUB_TASKS`; any other category is kept as it is).

Partly verified, no real file read: the folder layout, the annotation keys ``question`` and
``options`` (with the correct option first) and the jsonl keys ``image, text, category,
question_id, label`` are those read by public evaluation code for this dataset (the V* authors'
loader and other V* evaluation scripts). Schema assumed from those loaders for the rest: the
exact layout of ``text`` (options on their own lines as '(A) ...') and ``target_object``/``bbox``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from hammr.eval.datasets._common import (
    LETTERS,
    Adapter,
    DatasetError,
    answer_letter,
    bad_record,
    field,
    path_field,
    present,
    question_field,
    question_text,
    read_json,
    read_jsonl,
    require_file,
    split_options,
    text_field,
    text_value,
    texts_value,
)
from hammr.eval.types import Sample

NAME = "vstar"
EXPECTS = (
    "V* Bench: the vstar_bench folder (direct_attributes/ and relative_position/ with <name>.jpg "
    "+ <name>.json {question, options}) or its test_questions.jsonl {image, text, category, "
    "question_id, label}"
)
QUESTIONS_FILE = "test_questions.jsonl"
IMAGE_SUFFIXES = (".jpg", ".JPG", ".jpeg", ".png", ".webp")
SUB_TASKS = {"direct_attributes": "attribute", "relative_position": "relation"}
"""V* category -> the sub-task (question type) its samples carry."""


def sub_task(category: object) -> str:
    """The question type of a V* category ('attribute', 'relation'; others unchanged)."""
    name = str(category)
    return SUB_TASKS.get(name, name)


def _from_jsonl(path: Path, root: Path) -> list[Sample]:
    samples = []
    for line, record in read_jsonl(path, NAME, EXPECTS):
        where = f"line {line}"
        prompt = text_field(record, "text", NAME, path, where, EXPECTS, numbers=False)
        parsed = split_options(prompt)
        if parsed is None:
            raise bad_record(NAME, path, where, "no lettered options in 'text'", EXPECTS)
        question, choices = parsed
        question = question_text(question, "text", NAME, path, where, EXPECTS)
        label = field(record, "label", NAME, path, where, EXPECTS)
        letter = answer_letter(label, len(choices))
        if letter is None:
            raise bad_record(NAME, path, where, f"label {label!r} is not an option", EXPECTS)
        image = path_field(record, "image", NAME, path, where, EXPECTS)
        category = record.get("category", image.split("/", 1)[0])
        samples.append(
            Sample(
                id=text_value(
                    record.get("question_id", line - 1), "question_id", NAME, path, where, EXPECTS
                ),
                dataset=NAME,
                question=question,
                answers=(letter,),
                images={"image": root / image},
                question_type=sub_task(category),
                choices=choices,
                meta={"category": category, "prompt": prompt},
            )
        )
    return samples


def _image_for(annotation: Path) -> Path:
    for suffix in IMAGE_SUFFIXES:
        candidate = annotation.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return annotation.with_suffix(".jpg")


def shuffled(options: Sequence[str], key: str) -> tuple[tuple[str, ...], str]:
    """The options in an order drawn from ``key`` and the letter of ``options[0]``."""
    order = list(range(len(options)))
    random.Random(f"vstar:{key}").shuffle(order)
    return tuple(options[i] for i in order), LETTERS[order.index(0)]


def _from_folders(root: Path) -> list[Sample]:
    annotations = sorted(
        p for sub in sorted(root.iterdir()) if sub.is_dir() for p in sub.glob("*.json")
    )
    if not annotations:
        raise DatasetError(
            f"{NAME}: {root} has neither {QUESTIONS_FILE} nor <category>/<name>.json "
            f"annotations; it expects {EXPECTS}"
        )
    samples = []
    for annotation in annotations:
        record = read_json(annotation, NAME, EXPECTS)
        where = "annotation"
        if not isinstance(record, dict):
            raise bad_record(NAME, annotation, where, "not a JSON object", EXPECTS)
        options = field(record, "options", NAME, annotation, where, EXPECTS)
        if not isinstance(options, list) or len(options) < 2:
            raise bad_record(NAME, annotation, where, "'options' is not a list of 2+", EXPECTS)
        category = annotation.parent.name
        sample_id = f"{category}/{annotation.stem}"
        texts = texts_value(options, "options", NAME, annotation, where, EXPECTS)
        choices, letter = shuffled(texts, sample_id)
        meta = {"category": category, **present(record, ("target_object", "bbox"))}
        samples.append(
            Sample(
                id=sample_id,
                dataset=NAME,
                question=question_field(record, "question", NAME, annotation, where, EXPECTS),
                answers=(letter,),
                images={"image": _image_for(annotation)},
                question_type=sub_task(category),
                choices=choices,
                meta=meta,
            )
        )
    return samples


def load(path: Path, *, images: Path | None = None, split: str | None = None) -> list[Sample]:
    """``images`` overrides the folder the jsonl's image paths are relative to (in folder mode
    the images sit next to their annotations). ``split`` is not used."""
    if path.is_dir():
        if (path / QUESTIONS_FILE).exists():
            return _from_jsonl(path / QUESTIONS_FILE, images or path)
        return _from_folders(path)
    require_file(path, NAME, EXPECTS)
    return _from_jsonl(path, images or path.parent)


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="multiple_choice",
    schema="partly verified: layout and keys as read by public V* loaders; schema assumed from "
    "those loaders for the option text layout (no real file read)",
)
