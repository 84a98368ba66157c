"""NLVR2 (Suhr et al. 2019): HAMMR's *two-image* questions (is the statement true of the pair?).

Official files: ``nlvr2/data/test1.json`` (also ``dev.json``, ``train.json``) of
github.com/lil-lab/nlvr; despite the name, JSON Lines: one example per line with ``identifier,
sentence, label ('True'|'False'), left_url, right_url, synset, query, writer, validation,
extra_validations`` (train lines also have ``directory``).

Images: the official image release names a pair's images after its identifier without the last
'-N' (which numbers the sentences written for that pair): identifier 'test1-0-1-0' ->
``test1-0-1-img0.png`` (left, variable 'image') and ``test1-0-1-img1.png`` (right, 'image2'),
in ``<images>/<split>/`` for dev and test1 and ``<images>/train/<directory>/`` for train; when
``<images>/<split>`` does not exist, directly in ``<images>``. The split is ``split`` when given,
else the identifier's first part. ``answers == ('true',)`` or ``('false',)``.

Verified against real data: /work/shared/data/nlvr2 holds the first 300 lines of the official
test1.json; the tests load it. The image naming follows the NLVR2 README's convention (the
images themselves are not distributed in the repository).
"""

from __future__ import annotations

from pathlib import Path

from hammr.eval.datasets._common import (
    Adapter,
    bad_record,
    image_root,
    question_field,
    read_jsonl,
    subdir_if_present,
    text_field,
    text_value,
)
from hammr.eval.types import Sample

NAME = "nlvr2"
EXPECTS = (
    "NLVR2 JSON Lines (e.g. test1.json): one {identifier, sentence, label 'True'|'False', "
    "left_url, right_url, ...} per line, images <images>/<split>/<pair>-img0.png and -img1.png"
)


def pair_name(identifier: str) -> str:
    """'test1-0-1-0' -> 'test1-0-1': the image pair's name (the identifier minus its sentence
    number)."""
    head, sep, last = identifier.rpartition("-")
    if not sep or not head or not last.isdigit():
        raise ValueError(f"not an NLVR2 identifier: {identifier!r}")
    return head


def load(path: Path, *, images: Path | None = None, split: str | None = None) -> list[Sample]:
    root = image_root(path, images)
    samples = []
    for line, record in read_jsonl(path, NAME, EXPECTS):
        where = f"line {line}"
        identifier = text_field(record, "identifier", NAME, path, where, EXPECTS)
        try:
            pair = pair_name(identifier)
        except ValueError as e:
            raise bad_record(NAME, path, where, str(e), EXPECTS) from e
        label = text_field(record, "label", NAME, path, where, EXPECTS).lower()
        if label not in {"true", "false"}:
            raise bad_record(NAME, path, where, f"label {label!r} is not True/False", EXPECTS)
        this_split = split or identifier.split("-", 1)[0]
        folder = subdir_if_present(root, this_split)
        if this_split == "train" and record.get("directory") is not None:
            folder = folder / text_value(
                record["directory"], "directory", NAME, path, where, EXPECTS
            )
        samples.append(
            Sample(
                id=identifier,
                dataset=NAME,
                question=question_field(record, "sentence", NAME, path, where, EXPECTS),
                answers=(label,),
                images={
                    "image": folder / f"{pair}-img0.png",
                    "image2": folder / f"{pair}-img1.png",
                },
                question_type="two_image",
                meta={
                    "identifier": identifier,
                    "split": this_split,
                    "synset": record.get("synset", ""),
                    "query": record.get("query", ""),
                    "left_url": record.get("left_url", ""),
                    "right_url": record.get("right_url", ""),
                },
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="two_image",
    schema="verified: first 300 lines of the official test1.json",
)
