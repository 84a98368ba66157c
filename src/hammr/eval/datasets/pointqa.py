"""PointQA (Mani, Yoo, Hinthorn & Russakovsky 2020, "Point and Ask"): Local-QA and LookTwice-QA,
HAMMR's *local pointing* and *look twice* questions. Images are Visual Genome images,
``<images>/<image_id>.jpg`` (or in the ``VG_100K/`` / ``VG_100K_2/`` folders of the Visual Genome
download under ``images``); points are pixel coordinates in that image.

Official files (github.com/princetonvisualai/pointingqa, ``Datasets/``):
``LocalQA/localqa_dataset.json`` and ``LookTwiceQA/looktwiceqa_dataset.json``, plus split files
that list image ids (``LocalQA/localqa_testfinal_imgs.json``,
``LookTwiceQA/looktwiceqa_test_imgs.json``: JSON lists of id strings); the option
``image_list`` (a path, relative to the annotation file's folder unless absolute) keeps only
the questions on those images.

What was verified and what is assumed:

* Verified against real data: the record structure of the same release's Verbal/Spatial set
  (``VerbalSpatial/spatial_dataset.json``, excerpt in /work/shared/data/pointqa_verbalspatial):
  ``{"<image_id>": [{"question", "answer", "point": {"x", "y", "ans"}, "id"}]}``, where ``id``
  is the image id again (not a question id). The tests load that excerpt. The split files'
  format (a JSON list of image-id strings) was read in the repository.
* Assumed: that localqa_dataset.json and looktwiceqa_dataset.json (over 4 MiB, absent from every
  source available here) use the same structure. What the repository's generation scripts
  write was followed as well, so these variants load too:
  LookTwice records ``{id, img_question, pt_question, ans, qtype, point{x,y,ans}, bbox{x,y,w,h,..},
  obj_type}`` (``dataset-code/looktwiceqa/create_looktwice_initial.py``; the pointing question
  ``pt_question``, e.g. "How many of these are there?", is asked) and Local-QA records
  ``{id, question, all_ans, points: [{x, y, ans}, ...]}`` (``dataset-code/localqa/``), where each
  point becomes its own sample whose answer is that point's ``ans``. A JSON list of such records
  (image id in ``image_id`` or ``id``) is accepted too, and a ``bbox`` ({x, y, w, h} or
  [x, y, w, h]) stands for its centre when a record has no point.

Sample ids are ``<image_id>-<n>`` (n-th question of that image in file order; ``-p<k>`` appended
for the k-th point of a multi-point record) unless a record carries ``question_id``/``qid``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    Adapter,
    DatasetError,
    bad_record,
    image_root,
    option_path,
    present,
    question_text,
    read_json,
    text,
    text_value,
    texts_value,
)
from hammr.eval.types import Sample

LOCAL = "pointqa_local"
LOOK_TWICE = "pointqa_looktwice"
VG_FOLDERS = ("VG_100K", "VG_100K_2")
EXPECTS = (
    "Point-and-Ask JSON (localqa_dataset.json / looktwiceqa_dataset.json): {image_id: [{question, "
    "answer, point: {x, y, ans}, id}]} or a list of such records with image_id, "
    "images <images>/<image_id>.jpg"
)


def _records(data: Any, path: Path, name: str) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    """(image id, index of the record among that image's records, record)."""
    if isinstance(data, dict):
        for image_id, value in data.items():
            records = value if isinstance(value, list) else [value]
            for n, record in enumerate(records):
                if not isinstance(record, dict):
                    raise bad_record(name, path, f"image {image_id}", "not a record", EXPECTS)
                yield str(image_id), n, record
    elif isinstance(data, list):
        seen: dict[str, int] = {}
        for i, record in enumerate(data):
            if not isinstance(record, dict):
                raise bad_record(name, path, f"record {i}", "not a JSON object", EXPECTS)
            image_id = record.get("image_id", record.get("id"))
            if image_id is None:
                raise bad_record(name, path, f"record {i}", "no 'image_id' (or 'id')", EXPECTS)
            key = text_value(image_id, "image_id", name, path, f"record {i}", EXPECTS)
            n = seen.get(key, 0)
            seen[key] = n + 1
            yield key, n, record
    else:
        raise bad_record(name, path, "top level", "neither a JSON object nor a list", EXPECTS)


def _numbers(values: list[Any]) -> list[float] | None:
    """``values`` as floats, or None when one is not a number (a list, an object, null,
    text that is not a number): the record is then refused as having no point."""
    try:
        out = [float(v) for v in values if not isinstance(v, bool)]
    except (TypeError, ValueError):
        return None
    return out if len(out) == len(values) and all(map(math.isfinite, out)) else None


def _xy(value: Any) -> tuple[float, float] | None:
    if isinstance(value, Mapping) and "x" in value and "y" in value:
        xy = _numbers([value["x"], value["y"]])
    elif isinstance(value, list | tuple) and len(value) >= 2:
        xy = _numbers([value[0], value[1]])
    else:
        return None
    return (xy[0], xy[1]) if xy is not None else None


def _box_centre(value: Any) -> tuple[float, float] | None:
    if isinstance(value, Mapping) and all(k in value for k in ("x", "y", "w", "h")):
        box = _numbers([value["x"], value["y"], value["w"], value["h"]])
    elif isinstance(value, list | tuple) and len(value) == 4:
        box = _numbers(list(value))
    else:
        return None
    if box is None:
        return None
    x, y, w, h = box
    return x + w / 2, y + h / 2


def _points(record: Mapping[str, Any]) -> list[tuple[tuple[float, float], Any]] | None:
    """[(point, that point's own answer or None)], or None when the record has no point."""
    if isinstance(record.get("points"), list) and record["points"]:
        out = []
        for p in record["points"]:
            xy = _xy(p)
            if xy is None:
                return None
            out.append((xy, p.get("ans") if isinstance(p, Mapping) else None))
        return out
    point = record.get("point")
    if point is not None:
        xy = _xy(point)
        if xy is None:
            return None
        return [(xy, point.get("ans") if isinstance(point, Mapping) else None)]
    centre = _box_centre(record.get("bbox"))
    return [(centre, None)] if centre is not None else None


def vg_image(root: Path, image_id: str) -> Path:
    """``<root>/<id>.jpg``, else the Visual Genome download's ``VG_100K/`` or ``VG_100K_2/``
    folder under ``root`` when the image is there."""
    candidates = [root / f"{image_id}.jpg", *(root / d / f"{image_id}.jpg" for d in VG_FOLDERS)]
    return next((c for c in candidates if c.exists()), candidates[0])


def _load(
    path: Path,
    images: Path | None,
    image_list: str | Path | None,
    name: str,
    question_type: str,
    question_keys: tuple[str, ...],
) -> list[Sample]:
    data = read_json(path, name, EXPECTS)
    keep: set[str] | None = None
    if image_list is not None:
        list_path = option_path(image_list, path.parent)
        ids = read_json(list_path, name, "a JSON list of image ids (the split's *_imgs.json)")
        if not isinstance(ids, list):
            raise DatasetError(f"{name}: {list_path} is not a JSON list of image ids")
        keep = {text(i) for i in ids}
    root = image_root(path, images)
    samples = []
    for image_id, n, record in _records(data, path, name):
        if keep is not None and image_id not in keep:
            continue
        where = f"image {image_id}, question {n}"
        key = next((k for k in question_keys if record.get(k)), None)
        if key is None:
            raise bad_record(name, path, where, f"no {' or '.join(question_keys)}", EXPECTS)
        question = question_text(record[key], key, name, path, where, EXPECTS)
        points = _points(record)
        if points is None:
            raise bad_record(name, path, where, "no 'point', 'points' or 'bbox'", EXPECTS)
        record_answer = record.get("answer", record.get("ans"))
        own_id = record.get("question_id", record.get("qid"))
        for k, (xy, point_answer) in enumerate(points):
            answer = point_answer if len(points) > 1 and point_answer is not None else None
            if answer is None:
                answer = record_answer if record_answer is not None else point_answer
            if answer is None:
                raise bad_record(name, path, where, "no 'answer' (or 'ans')", EXPECTS)
            sample_id = (
                text_value(own_id, "question_id", name, path, where, EXPECTS)
                if own_id is not None
                else f"{image_id}-{n}"
            )
            if len(points) > 1:
                sample_id += f"-p{k}"
            meta = {
                "image_id": image_id,
                **present(record, ("img_question", "obj_type", "qtype", "all_ans")),
            }
            samples.append(
                Sample(
                    id=sample_id,
                    dataset=name,
                    question=question,
                    answers=texts_value(answer, "answer", name, path, where, EXPECTS),
                    images={"image": vg_image(root, image_id)},
                    question_type=question_type,
                    point=xy,
                    meta=meta,
                )
            )
    return samples


def load_local(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    image_list: str | Path | None = None,
) -> list[Sample]:
    """Local-QA: a question about the object at the point. ``split`` is not used (pass the
    split's image list as ``image_list``)."""
    return _load(path, images, image_list, LOCAL, "local_pointing", ("question", "pt_question"))


def load_looktwice(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    image_list: str | Path | None = None,
) -> list[Sample]:
    """LookTwice-QA: identify the object at the point, then answer about the whole image (how
    many of these are there?). The pointing form of the question (``pt_question``) is asked
    when a record has both forms."""
    return _load(path, images, image_list, LOOK_TWICE, "look_twice", ("pt_question", "question"))


SCHEMA = (
    "partly verified: record structure of the real Point-and-Ask spatial set; "
    "assumed: that the Local-QA/LookTwice files share it (see module docstring)"
)
ADAPTERS = (
    Adapter(LOCAL, load_local, EXPECTS, "local_pointing", SCHEMA),
    Adapter(LOOK_TWICE, load_looktwice, EXPECTS, "look_twice", SCHEMA),
)
