"""ZoomBench (Wei et al. 2026, "Zooming without Zooming"): 845 fine-grained perception
questions, multiple-choice and open (MuSEAgent uses the 621 multiple-choice ones).

The official release is the Hugging Face dataset ``inclusionAI/ZoomBench`` (parquet: ``image``,
``crop_image``, ``prompt``, ``answer``). This adapter reads the JSON that the authors' own
conversion script writes from it (github.com/inclusionAI/Zooming-without-Zooming,
``utils/convert_benchmark.py``, output ``ZoomBench/zoombench.json`` with images in
``ZoomBench/images/``): a JSON list of ``{"images": [path], "crop_images": [path], "query":
prompt, "response": answer}``. A multiple-choice prompt lists its options on their own lines,
e.g. "How many table lamps are in the image? Select from the following choices.\\n(A) 0\\n(B) 2
\\n(C) 1\\n(D) 3" with response "C" (the example in the authors' README).

The question is the prompt before the options, with a trailing "Select from the following
choices." removed; choices are the option texts; ``answers == (letter,)``; question type
'multiple_choice'. Open questions (no options) are skipped unless ``include_open`` is True, then
``answers == (response,)`` and no choices. ``meta['crop_image']`` is the zoomed-in view when
there is one. Sample id: the record's position in the file (the converter numbers the images
``image_<position>.png`` the same way).

Image paths in the file are as the converter wrote them (relative to where it ran, e.g.
'../ZoomBench/images/image_0.png'); an absolute path is used as is, a relative one is looked up
under ``images`` (default: the file's folder) as written, then as ``images/<file name>``, then
as ``<file name>``; the first that exists wins, among those inside ``images`` (a path that
leads outside it is refused by ``load_dataset``).

Schema assumed from the authors' conversion script and README (no ZoomBench file was
available here); the parquet release is not read.
"""

from __future__ import annotations

import re
from pathlib import Path

from hammr.eval.datasets._common import (
    Adapter,
    answer_letter,
    bad_record,
    field,
    image_root,
    path_value,
    question_text,
    read_json_records,
    split_options,
    text_field,
    text_value,
    within,
)
from hammr.eval.types import Sample

NAME = "zoombench"
EXPECTS = (
    "ZoomBench JSON as written by the authors' utils/convert_benchmark.py (zoombench.json): "
    "[{images: [path], crop_images: [path], query, response}]"
)
_INSTRUCTION = re.compile(r"\s*Select from the following choices\.?\s*$", re.IGNORECASE)


def resolve(root: Path, written: str) -> Path:
    p = Path(written)
    if p.is_absolute():
        return p
    candidates = [root / p, root / "images" / p.name, root / p.name]
    inside = [c for c in candidates if within(root, c)]
    if not inside:
        return root / p  # load_dataset refuses it, naming the sample
    return next((c for c in inside if c.exists()), inside[0])


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    include_open: bool = False,
) -> list[Sample]:
    """``split`` is not used."""
    root = image_root(path, images)
    samples = []
    for i, where, record in read_json_records(path, NAME, EXPECTS):
        prompt = text_field(record, "query", NAME, path, where, EXPECTS, numbers=False)
        response = field(record, "response", NAME, path, where, EXPECTS)
        paths = field(record, "images", NAME, path, where, EXPECTS)
        if not isinstance(paths, list) or not paths:
            raise bad_record(NAME, path, where, "'images' is not a non-empty list", EXPECTS)
        first = path_value(paths[0], "images[0]", NAME, path, where, EXPECTS)
        parsed = split_options(prompt)
        choices: tuple[str, ...] = ()
        if parsed is None:
            if not include_open:
                continue
            question = prompt.strip()
            answers = (text_value(response, "response", NAME, path, where, EXPECTS),)
        else:
            question, choices = parsed
            question = _INSTRUCTION.sub("", question).strip()
            letter = answer_letter(response, len(choices))
            if letter is None:
                raise bad_record(
                    NAME, path, where, f"response {response!r} is not an option", EXPECTS
                )
            answers = (letter,)
        question = question_text(question, "query", NAME, path, where, EXPECTS)
        crops = record.get("crop_images") or []
        meta = {"prompt": prompt}
        if crops:
            crop = path_value(crops[0], "crop_images[0]", NAME, path, where, EXPECTS)
            meta["crop_image"] = str(resolve(root, crop))
        samples.append(
            Sample(
                id=str(i),
                dataset=NAME,
                question=question,
                answers=answers,
                images={"image": resolve(root, first)},
                question_type="multiple_choice" if choices else "open",
                choices=choices,
                meta=meta,
            )
        )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="multiple_choice",
    schema="assumed: schema assumed from the authors' convert_benchmark.py and README "
    "(no real file read)",
)
