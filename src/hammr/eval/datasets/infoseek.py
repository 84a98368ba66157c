"""Infoseek (Chen et al. 2023): visual information-seeking questions, AVIS's main benchmark.

Official files, linked from the release page github.com/open-vision-language/infoseek
(README) and fetched by ``download_infoseek_jsonl.sh`` of its evaluation code
(edchengg/infoseek_eval): ``infoseek_val.jsonl`` (also ``_train``, ``_test``, ``_human``)
and, for scoring, ``infoseek_val_qtype.jsonl``. One JSON object per line::

    {"data_id": "infoseek_val_00000001", "image_id": "oven_01963180",
     "question": "Which place is this animal endemic to?",
     "answer": ["People's Republic of China"],
     "answer_eval": ["People's Republic of China", "China", "PRC", ...],
     "data_split": "val_unseen_entity"}

and the qtype file one ``{"data_id", "question_type"}`` per line, the type being 'String',
'Numerical' or 'Time'. A Numerical question's ``answer_eval`` is
``[{"wikidata": 1.0, "range": [0.9, 1.1]}]``. ``answer_eval`` is what the official scorer
compares (the answer and its accepted aliases); ``answer`` is only shown. The test split has no
``answer_eval`` and cannot be scored: a record without it (or with an empty one) is an error
naming the file and the line.

* Question type: from the qtype file when there is one (option ``qtype_file``, relative to the
  annotation file's folder; default ``<name>_qtype.jsonl`` beside ``<name>.jsonl``, used when it
  exists), else the record's own ``question_type``; a record with neither is an error.
  The scorer wins over the record as the official script does (it overwrites the record's
  type with the qtype file's).
* Split: ``data_split`` ending with 'unseen_question' is the unseen-question split, anything
  else the unseen-entity split (the official script's rule). The sample's question type is
  'unseen_question' or 'unseen_entity', so a report shows the two apart; the option ``unseen``
  ('question', 'entity', 'all' = default) keeps one of them (one suite entry per split).
  ``split`` is not used: each official file holds one split.
* ``meta``: ``question_type`` (String/Numerical/Time), ``answer_eval`` prepared as the
  official script compares it (:func:`hammr.eval.metrics.infoseek.prepare_answer_eval`: a
  Numerical question's is its range, two numbers as strings), ``data_split``, ``image_id``,
  ``answer`` and ``line``; Numerical questions also ``range`` (low, high). ``answers`` is
  ``answer`` followed by the other ``answer_eval`` forms (for a Numerical question, ``answer``
  alone, or the range when there is no ``answer``).
* Images: Infoseek's images are OVEN's, named by ``image_id``. OVEN's ``merge_oven_images.py``
  (edchengg/oven_eval, ``image_downloads/``) lays them out as
  ``oven_images/<first two digits of the id>/<image_id><original extension>``; the option
  ``image_template`` (default ``'{shard}/{image_id}.jpg'``; placeholders ``{image_id}`` and
  ``{shard}``, the first two digits after the last '_') names the file under ``images`` (or
  under its ``oven_images/`` folder when it has one). When that file does not exist, the same
  name with .jpeg, .JPEG, .JPG, .png or .PNG is used if one exists.
* Image mapping: the Infoseek evaluation code (edchengg/infoseek_eval, ``run_blip2_infoseek.py``
  and ``run_training_lavis.py``, commit c8ef0234d1a1d61cb5e6e2f38f26c2d701b09985) finds each
  image through ``id2image.jsonl``, one ``{"image_id": ..., "image_path": ...}`` per line; OVEN's
  release (edchengg/oven_eval, ``image_downloads/README.md``, read by ``merge_oven_images.py``)
  ships the same mapping as ``ovenid2impath.csv``, ``image_id,path`` per line. The option
  ``id2image`` names such a file (``.jsonl`` or ``.csv``; relative to the annotation file's
  folder); by default ``id2image.jsonl`` beside the annotation file is read when it exists.
  With a mapping every sample's image is its mapped path, relative to the mapping file's folder
  (as the official scripts, run beside it, read it) unless absolute; ``image_template`` is then
  not used, and an ``image_id`` the mapping lacks is an error naming the line. Mapped images must
  lie inside the images folder or the annotation file's folder, as every adapter's do.

Not verified against real data (no Infoseek file was available here): the keys are those of the
release README's example record and of the official scorer (``infoseek_eval.py``, commit
c8ef0234d1a1d61cb5e6e2f38f26c2d701b09985), which also documents the Numerical ``answer_eval``
layout; the fixture is written by hand in that schema. The ``data_split`` values
('val_unseen_question', ...) are assumed; only their ending matters. The human split
(``infoseek_human.jsonl``, AVIS's Table 5) is assumed to share the schema; whether its public
file carries ``answer_eval`` is not known here (one without is refused as the test split is).
The mapping files' layouts are those the official scripts read; no real mapping was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    DatasetError,
    bad_record,
    field,
    image_root,
    option_path,
    question_field,
    read_jsonl,
    require_file,
    subdir_if_present,
    text_field,
    texts_value,
)
from hammr.eval.metrics.infoseek import prepare_answer_eval, split_of
from hammr.eval.types import Sample
from hammr.input_file import read_input_text

NAME = "infoseek"
EXPECTS = (
    "Infoseek JSON Lines (e.g. infoseek_val.jsonl): {data_id, image_id, question, answer, "
    "answer_eval, data_split} per line, question types in infoseek_val_qtype.jsonl beside it; "
    "images by id2image.jsonl beside it, else <images>/<image_template> (default "
    "'{shard}/{image_id}.jpg')"
)
QTYPE_EXPECTS = "Infoseek question types (e.g. infoseek_val_qtype.jsonl): {data_id, question_type}"
DEFAULT_TEMPLATE = "{shard}/{image_id}.jpg"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".JPEG", ".JPG", ".png", ".PNG")
UNSEEN = {"question": "unseen_question", "entity": "unseen_entity", "all": ""}


def default_qtype_file(path: Path) -> Path:
    """``<name>_qtype.jsonl`` beside ``<name>.jsonl``."""
    return path.with_name(f"{path.stem}_qtype.jsonl")


def read_qtypes(path: Path) -> dict[str, str]:
    """data_id -> question_type of a qtype file."""
    out: dict[str, str] = {}
    for line, record in read_jsonl(path, NAME, QTYPE_EXPECTS):
        where = f"line {line}"
        data_id = text_field(record, "data_id", NAME, path, where, QTYPE_EXPECTS)
        kind = field(record, "question_type", NAME, path, where, QTYPE_EXPECTS)
        if not isinstance(kind, str):
            raise bad_record(NAME, path, where, "'question_type' is not a string", QTYPE_EXPECTS)
        out[data_id] = kind
    return out


ID2IMAGE_FILE = "id2image.jsonl"
"""The mapping file the official evaluation code reads, looked for beside the annotations."""
ID2IMAGE_EXPECTS = (
    "Infoseek image mapping: id2image.jsonl ({image_id, image_path} per line) or OVEN's "
    "ovenid2impath.csv (image_id,path per line)"
)


def read_id2image(path: Path) -> dict[str, Path]:
    """image_id -> image path of a mapping file (see the module docstring), relative paths
    resolved against the file's folder."""
    out: dict[str, str] = {}
    if path.suffix.lower() == ".csv":
        require_file(path, NAME, ID2IMAGE_EXPECTS)
        try:
            lines = read_input_text(path, encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise DatasetError(
                f"{NAME}: cannot read {path} ({e}); it expects {ID2IMAGE_EXPECTS}"
            ) from None
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            image_id, sep, where = line.strip().partition(",")
            if not sep or not image_id.strip() or not where.strip():
                raise bad_record(NAME, path, f"line {n}", "not 'image_id,path'", ID2IMAGE_EXPECTS)
            out[image_id.strip()] = where.strip()
    else:
        for n, record in read_jsonl(path, NAME, ID2IMAGE_EXPECTS):
            where = f"line {n}"
            image_id = text_field(record, "image_id", NAME, path, where, ID2IMAGE_EXPECTS)
            out[image_id] = text_field(record, "image_path", NAME, path, where, ID2IMAGE_EXPECTS)
    base = path.parent
    return {k: option_path(v, base) for k, v in out.items()}


def image_path(root: Path, template: str, image_id: str) -> Path:
    """The image of ``image_id`` under ``root`` by ``template``, or the same name with another
    image extension when only that one exists."""
    try:
        rel = template.format(image_id=image_id, shard=image_id.rsplit("_", 1)[-1][:2])
    except (KeyError, IndexError, ValueError) as e:
        raise DatasetError(f"{NAME}: bad image_template {template!r} ({e})") from e
    candidate = root / rel
    if candidate.exists() or not candidate.suffix:
        return candidate
    for suffix in IMAGE_SUFFIXES:
        other = candidate.with_suffix(suffix)
        if other.exists():
            return other
    return candidate


def _sample(
    record: dict[str, Any],
    line: int,
    path: Path,
    root: Path,
    template: str,
    question_type: str,
    id2image: tuple[Path, dict[str, Path]] | None = None,
) -> Sample:
    where = f"line {line}"
    data_id = text_field(record, "data_id", NAME, path, where, EXPECTS)
    raw_eval = record.get("answer_eval")
    if not raw_eval:
        raise bad_record(
            NAME,
            path,
            where,
            "no answers ('answer_eval' is missing or empty; a split released without answers, "
            "such as the test split, cannot be scored: use infoseek_val.jsonl)",
            EXPECTS,
        )
    numerical = question_type.lower() == "numerical"
    if not numerical and not (
        isinstance(raw_eval, list) and all(isinstance(a, str) for a in raw_eval)
    ):
        raise bad_record(NAME, path, where, "'answer_eval' is not a list of strings", EXPECTS)
    try:
        answer_eval = prepare_answer_eval(question_type, raw_eval)
    except ValueError as e:
        raise bad_record(NAME, path, where, str(e), EXPECTS) from e
    answer = record.get("answer") or []
    answer = answer if isinstance(answer, list) else [answer]
    meta: dict[str, Any] = {
        "question_type": question_type,
        "answer_eval": answer_eval,
        "answer": list(texts_value(answer, "answer", NAME, path, where, EXPECTS)),
        "line": line,
    }
    if numerical:
        low, high = (float(a) for a in answer_eval)
        meta["range"] = (low, high)
        answers = tuple(meta["answer"]) or (f"{answer_eval[0]} - {answer_eval[1]}",)
    else:
        answers = tuple(dict.fromkeys([*meta["answer"], *(a.strip() for a in answer_eval)]))
    data_split = text_field(record, "data_split", NAME, path, where, EXPECTS, numbers=False)
    image_id = text_field(record, "image_id", NAME, path, where, EXPECTS)
    meta.update(data_split=str(data_split), image_id=image_id)
    if id2image is None:
        image = image_path(root, template, image_id)
    else:
        mapping_file, mapping = id2image
        if image_id not in mapping:
            problem = f"image_id {image_id!r} is not in the image mapping {mapping_file}"
            raise bad_record(NAME, path, where, problem, EXPECTS)
        image = mapping[image_id]
    return Sample(
        id=data_id,
        dataset=NAME,
        question=question_field(record, "question", NAME, path, where, EXPECTS),
        answers=answers,
        images={"image": image},
        question_type=split_of(str(data_split)),
        meta=meta,
    )


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    unseen: str = "all",
    qtype_file: str = "",
    image_template: str = DEFAULT_TEMPLATE,
    id2image: str = "",
) -> list[Sample]:
    """``split`` is not used (each official file holds one split); see the module docstring
    for the options."""
    if unseen not in UNSEEN:
        raise DatasetError(
            f"{NAME}: option 'unseen' must be 'question', 'entity' or 'all', not {unseen!r}"
        )
    if not isinstance(image_template, str):
        raise DatasetError(f"{NAME}: option 'image_template' must be a string")
    require_file(path, NAME, EXPECTS)
    if qtype_file:
        qtype_path = option_path(qtype_file, path.parent)
        require_file(qtype_path, NAME, QTYPE_EXPECTS)
    else:
        qtype_path = default_qtype_file(path)
    qtypes = read_qtypes(qtype_path) if qtype_path.is_file() else None
    if not isinstance(id2image, str):
        raise DatasetError(f"{NAME}: option 'id2image' must be a string (a file name)")
    mapping_path = option_path(id2image or ID2IMAGE_FILE, path.parent)
    mapping = None
    if id2image or mapping_path.is_file():
        mapping = (mapping_path, read_id2image(mapping_path))
    root = subdir_if_present(image_root(path, images), "oven_images")
    samples = []
    for line, record in read_jsonl(path, NAME, EXPECTS):
        where = f"line {line}"
        data_split = text_field(record, "data_split", NAME, path, where, EXPECTS, numbers=False)
        if UNSEEN[unseen] and split_of(data_split) != UNSEEN[unseen]:
            continue
        data_id = text_field(record, "data_id", NAME, path, where, EXPECTS)
        if qtypes is not None:
            if data_id not in qtypes:
                raise bad_record(
                    NAME, path, where, f"data_id {data_id!r} is not in {qtype_path}", EXPECTS
                )
            question_type = qtypes[data_id]
        elif isinstance(record.get("question_type"), str):
            question_type = record["question_type"]
        else:
            raise bad_record(
                NAME,
                path,
                where,
                f"no question type: {qtype_path} does not exist and the record has no "
                "'question_type' (set the option qtype_file)",
                EXPECTS,
            )
        samples.append(_sample(record, line, path, root, image_template, question_type, mapping))
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="unseen_entity",
    schema="assumed: the release README's example record and the keys the official scorer "
    "infoseek_eval.py reads (no real file available here)",
)
