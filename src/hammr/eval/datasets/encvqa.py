"""Encyclopedic-VQA (Mensink et al. 2023): HAMMR's *single hop* and *two hop* questions.

Official file: ``test.csv`` (also ``val.csv``, ``train.csv``) from
storage.googleapis.com/encyclopedic-vqa, documented in
github.com/google-research/google-research/tree/master/encyclopedic_vqa (README and
``evaluation_utils.py``). One row per textual question, columns ``question, answer,
dataset_image_ids, dataset_name, dataset_category_id, question_type, wikipedia_url,
wikipedia_title, evidence, evidence_section_id, evidence_section_title, encyclopedic_vqa_split,
question_original, wikipedia_url_used_in_train``.

* ``question_type`` is one of templated, automatic, multi_answer (single hop) or 2_hop (two hop).
  The option ``hops`` picks 'single', 'two' or 'all' (default); the sample's question type is
  'single_hop' or 'two_hop' and ``meta['question_type']`` keeps the CSV's value (the official
  scorer needs it).
* ``answer``: alternatives from different annotators are separated by '|' and become
  ``Sample.answers``; a multi_answer question's answer is a list joined by '&&', which is kept
  inside each alternative exactly as the official scorer expects it (it splits on '&&' itself).
  ``meta['answer_lists']`` has each alternative already split on '&&'.
* ``dataset_image_ids`` holds up to 5 image ids separated by '|'. Each (question, image) pair is
  one VQA triplet, the dataset's unit; the option ``images_per_question`` = 'all' (default) makes
  one sample per image, 'first' one sample per question with its first image. Sample ids are
  ``<row>-<image_id>`` (row = 0-based data row of the CSV).
* Images come from iNaturalist 2021 (``dataset_name`` 'inaturalist') and Google Landmarks v2
  ('landmarks'), neither of which is laid out by image id alone, so the path is a template under
  ``images``: option ``image_template``, default ``'{dataset_name}/{image_id}.jpg'``, or a table
  ``{dataset_name: template}`` (key '*' for the rest). Placeholders: ``{dataset_name}``,
  ``{image_id}``, ``{category_id}`` (dataset_category_id) and ``{id0}``, ``{id1}``, ``{id2}``
  (the id's first three characters, for GLDv2's ``train/a/b/c/abc....jpg`` layout).
* ``split`` keeps the rows whose ``encyclopedic_vqa_split`` equals it (all rows when None).

Not verified against real data (no Encyclopedic-VQA file was available here): the columns and
separators are those of the official README and scorer, written into the fixture by hand. The
dataset_name values 'inaturalist' and 'landmarks' are as documented to the project; a row with
another value still loads (its template falls back to '*').
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    DatasetError,
    bad_record,
    image_root,
    question_text,
    read_delimited,
)
from hammr.eval.types import Sample

NAME = "encvqa"
EXPECTS = (
    "Encyclopedic-VQA CSV (e.g. test.csv) with columns question, answer, dataset_image_ids, "
    "question_type, dataset_name, wikipedia_url, wikipedia_title, ...; images under <images> by "
    "the image_template option (default '{dataset_name}/{image_id}.jpg')"
)
REQUIRED = ("question", "answer", "dataset_image_ids", "question_type", "dataset_name")
SINGLE_HOP = frozenset({"templated", "automatic", "multi_answer"})
TWO_HOP = frozenset({"2_hop"})
DEFAULT_TEMPLATE = "{dataset_name}/{image_id}.jpg"


def _template_for(image_template: str | Mapping[str, str], dataset_name: str) -> str:
    if isinstance(image_template, str):
        return image_template
    if dataset_name in image_template:
        return image_template[dataset_name]
    if "*" in image_template:
        return image_template["*"]
    raise DatasetError(
        f"{NAME}: image_template has no entry for dataset_name {dataset_name!r} and no '*' entry"
    )


def image_path(
    root: Path, template: str, dataset_name: str, image_id: str, category_id: str = ""
) -> Path:
    try:
        rel = template.format(
            dataset_name=dataset_name,
            image_id=image_id,
            category_id=category_id,
            id0=image_id[:1],
            id1=image_id[1:2],
            id2=image_id[2:3],
        )
    except (KeyError, IndexError, ValueError) as e:
        raise DatasetError(f"{NAME}: bad image_template {template!r} ({e})") from e
    return root / rel


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    hops: str = "all",
    images_per_question: str = "all",
    image_template: str | Mapping[str, str] = DEFAULT_TEMPLATE,
) -> list[Sample]:
    kinds = {"single": SINGLE_HOP, "two": TWO_HOP, "all": SINGLE_HOP | TWO_HOP}
    if hops not in kinds:
        raise DatasetError(f"{NAME}: option 'hops' must be 'single', 'two' or 'all', not {hops!r}")
    if images_per_question not in {"all", "first"}:
        raise DatasetError(
            f"{NAME}: option 'images_per_question' must be 'all' or 'first', "
            f"not {images_per_question!r}"
        )
    if not isinstance(image_template, str | Mapping):
        raise DatasetError(f"{NAME}: option 'image_template' must be a string or a table")
    wanted = kinds[hops]
    root = image_root(path, images)
    samples = []
    for row_no, row in read_delimited(path, NAME, EXPECTS, delimiter=",", required=REQUIRED):
        where = f"data row {row_no}"
        if split is not None and row.get("encyclopedic_vqa_split", split) != split:
            continue
        kind = (row["question_type"] or "").strip()
        if kind not in SINGLE_HOP | TWO_HOP:
            raise bad_record(NAME, path, where, f"unknown question_type {kind!r}", EXPECTS)
        if kind not in wanted:
            continue
        question = question_text(row["question"] or "", "question", NAME, path, where, EXPECTS)
        alternatives = tuple(a.strip() for a in (row["answer"] or "").split("|") if a.strip())
        if not alternatives:
            raise bad_record(NAME, path, where, "empty 'answer'", EXPECTS)
        image_ids = [i.strip() for i in (row["dataset_image_ids"] or "").split("|") if i.strip()]
        if not image_ids:
            raise bad_record(NAME, path, where, "empty 'dataset_image_ids'", EXPECTS)
        if images_per_question == "first":
            image_ids = image_ids[:1]
        dataset_name = (row["dataset_name"] or "").strip()
        template = _template_for(image_template, dataset_name)
        meta: dict[str, Any] = {
            "question_type": kind,
            "wikipedia_title": row.get("wikipedia_title") or "",
            "wikipedia_url": row.get("wikipedia_url") or "",
            "dataset_name": dataset_name,
            "row": row_no,
            "answer_lists": tuple(
                tuple(p.strip() for p in a.split("&&") if p.strip()) for a in alternatives
            ),
        }
        if row.get("evidence"):
            meta["evidence"] = row["evidence"]
        category_id = (row.get("dataset_category_id") or "").strip()
        for image_id in image_ids:
            samples.append(
                Sample(
                    id=f"{row_no}-{image_id}",
                    dataset=NAME,
                    question=question,
                    answers=alternatives,
                    images={
                        "image": image_path(root, template, dataset_name, image_id, category_id)
                    },
                    question_type="two_hop" if kind in TWO_HOP else "single_hop",
                    meta={**meta, "image_id": image_id},
                )
            )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="single_hop",
    schema="assumed: columns and separators of the official README and evaluation_utils.py "
    "(no real CSV available here)",
)
