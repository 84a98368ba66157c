"""HR-Bench (Wang et al. 2025, "Divide, Conquer and Combine"): multiple-choice questions on 4K
and 8K images (MuSEAgent uses the 8K part).

Official files: ``hr_bench_8k.tsv`` / ``hr_bench_4k.tsv`` (the VLMEvalKit-style TSV; the Hugging
Face release ``DreamMr/HR-Bench`` also has the same table as parquet, which this adapter does
not read: convert it once with ``pandas.read_parquet(p).to_csv(t, sep='\\t', index=False)``).
Columns: ``index, question, A, B, C, D, answer (letter), category, cycle_category, image`` where
``image`` is the base64-encoded image file. Following VLMEvalKit, an ``image`` cell that is just
another row's ``index`` reuses that row's image.

The images are decoded once into a cache folder, ``images`` (default: ``<file stem>_images``
next to the TSV), as ``<index>.<jpg|png|...>`` with the bytes as stored (no re-encoding); files
already there are not decoded again (so give each TSV its own cache folder). Choices are the
non-empty option columns A, B, C, ... in order; ``answers == (letter,)``; question type
'multiple_choice'; ``meta`` keeps category (single / cross instance) and cycle_category.
Sample id: ``index``.

Partly verified, no real file read: the column names and their meaning are those read by the
lmms-eval HR-Bench task and by a public HR-Bench loader (``answer`` names the correct column);
the index-reference convention is VLMEvalKit's. Schema assumed from those loaders otherwise.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from hammr.eval.datasets._common import (
    LETTERS,
    Adapter,
    DatasetError,
    answer_letter,
    bad_record,
    question_text,
    read_delimited,
    require_file,
    require_inside,
    text,
)
from hammr.eval.types import Sample
from hammr.output_file import OutputError, write_output

NAME = "hrbench"
EXPECTS = (
    "HR-Bench TSV (e.g. hr_bench_8k.tsv) with columns index, question, A, B, C, D, answer, "
    "category, cycle_category, image (base64)"
)
REQUIRED = ("index", "question", "A", "B", "answer", "image")
_MAGIC = (
    (b"\xff\xd8\xff", ".jpg"),
    (b"\x89PNG\r\n\x1a\n", ".png"),
    (b"GIF8", ".gif"),
    (b"BM", ".bmp"),
)
_REFERENCE_MAX = 64
"""VLMEvalKit: an image cell this short is a reference to another row's index."""


def _suffix(data: bytes) -> str:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return next((s for magic, s in _MAGIC if data.startswith(magic)), ".img")


def _write(cache: Path, stem: str, encoded: str, existing: dict[str, Path], source: Path) -> Path:
    if stem in existing:
        return existing[stem]
    try:
        data = base64.b64decode(encoded, validate=False)
    except (binascii.Error, ValueError) as e:
        raise DatasetError(f"{NAME}: row {stem}: 'image' is not base64 ({e})") from e
    where = f"{source}, index {stem!r}"
    target = require_inside([cache], cache / f"{stem}{_suffix(data)}", NAME, where)
    try:
        write_output(target, data)
    except OutputError as e:
        raise DatasetError(f"{NAME}: cannot write the decoded image {target}: {e.reason}") from None
    existing[stem] = target
    return target


def load(path: Path, *, images: Path | None = None, split: str | None = None) -> list[Sample]:
    """``images`` is the cache folder the decoded images go to. ``split`` is not used."""
    require_file(path, NAME, EXPECTS)
    cache = images if images is not None else path.parent / f"{path.stem}_images"
    rows = read_delimited(path, NAME, EXPECTS, delimiter="\t", required=REQUIRED)
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatasetError(f"{NAME}: cannot create the image cache {cache} ({e})") from e
    existing = {p.stem: p for p in cache.iterdir() if p.is_file() and not p.name.startswith(".")}
    pending: list[tuple[int, str, dict[str, str]]] = []
    by_index: dict[str, Path] = {}
    for row_no, row in rows:
        index = text(row["index"])
        if not index:
            raise bad_record(NAME, path, f"data row {row_no}", "empty 'index'", EXPECTS)
        cell = (row["image"] or "").strip()
        if len(cell) > _REFERENCE_MAX:
            by_index[index] = _write(cache, index, cell, existing, path)
        # keep the row without its (large) image cell
        pending.append((row_no, cell if len(cell) <= _REFERENCE_MAX else "", dict(row, image="")))
    samples = []
    for row_no, reference, row in pending:
        where = f"data row {row_no}"
        index = text(row["index"])
        if reference:
            if reference not in by_index:
                raise bad_record(
                    NAME, path, where, f"'image' refers to index {reference!r}, absent", EXPECTS
                )
            image = by_index[reference]
        elif index in by_index:
            image = by_index[index]
        else:
            raise bad_record(NAME, path, where, "empty 'image'", EXPECTS)
        choices = []
        for column in LETTERS:
            value = (row.get(column) or "").strip()
            if column not in row or not value:
                break
            choices.append(value)
        letter = answer_letter(row["answer"], len(choices))
        if letter is None:
            raise bad_record(
                NAME, path, where, f"answer {row['answer']!r} is not an option", EXPECTS
            )
        samples.append(
            Sample(
                id=index,
                dataset=NAME,
                question=question_text(
                    row["question"] or "", "question", NAME, path, where, EXPECTS
                ),
                answers=(letter,),
                images={"image": image},
                question_type="multiple_choice",
                choices=tuple(choices),
                meta={
                    "category": row.get("category") or "",
                    "cycle_category": row.get("cycle_category") or "",
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="multiple_choice",
    schema="partly verified: columns as read by lmms-eval's HR-Bench task; schema assumed from "
    "those loaders (no real file read)",
)
