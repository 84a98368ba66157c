"""Hugging Face hub datasets: the parquet files of a hub dataset repository, read from a local
snapshot of it (``hammr data get --hub``, :func:`hammr.datasets.hub.fetch_hub`, or
``huggingface_hub.snapshot_download`` by hand).

Why: many benchmarks are easiest to get, or only published, as a hub repository of parquet
files with the images inside as bytes (lmms-lab's copies of GQA and OK-VQA, the hub's
conversion of TextVQA, Mantis-Eval's NLVR2). This adapter reads such a copy as it is, so a
suite entry can name it without a conversion step; the catalogue's ``[dataset.hf]`` says how
each copy differs from the official file.

Official files: the parquet files the repository holds (its publisher's, or the hub's own
``refs/convert/parquet`` conversion). The entry's ``file`` is the snapshot folder or one
``.parquet`` file. In a folder, the files of one config and split are read, found by the hub's
layout conventions (:func:`parquet_layout`):

* ``data/<split>-00000-of-00001*.parquet``: the default config as ``datasets``' ``push_to_hub``
  writes it (``data/<split>.parquet``, ``<split>-*.parquet`` and ``<split>.parquet`` at the
  top count as the default config too);
* ``<config>/<split>-00000-of-00001*.parquet``: another config, pushed the same way;
* ``<config>/<split>/0000.parquet``: the ``refs/convert/parquet`` branch (a split the hub
  converted only in part is in ``<config>/partial-<split>/``: name that split).

Hidden folders (``.cache``, the image cache) are not read. ``config`` (an option) picks the
config: by default the ``default`` one, or the only one. The entry's ``split`` picks the split:
by default the only one. Files of a split are read in name order (shard order).

Options name the columns:

* ``question`` (default "question");
* ``answers`` (default "answers"): a string, a number, or a list of them (VQAv2-style items
  ``{answer: ...}`` too); a list of column names pools their answers in order;
* ``image`` (default "image"): a struct ``{bytes, path}`` as ``datasets`` writes an Image
  feature, raw bytes, a path relative to the snapshot folder (the parquet file's folder for a
  single file), or a list of these for several images (variables image, image2, ...);
* ``id`` (default "": the row's position among the split's rows, from 0);
* ``choices`` (default ""): a column holding a list of options makes the question multiple
  choice; its answer (an option's text, its letter, or a 0-based index) becomes the letter.

Images are written once into a cache folder, ``images`` (default ``<snapshot>/.hammr-images``),
through hammr.output_file, as HR-Bench's base64 images are; later loads find them there. A file
is named by the SHA-256 of its bytes (``<32 hex>.<jpg|png|...>``, the bytes as stored): an
image several questions share is written once, and a newer revision of the snapshot never
reuses a stale file. Question type: 'multiple_choice' with ``choices``, else ''. ``meta``
keeps the parquet file (relative to the snapshot) and the row in it.

Partly verified: the layout follows the hub's documented conventions (``push_to_hub``'s
``data/`` shards, the parquet-conversion branch) and the Image struct ``datasets``' own; both
were read back from parquet files written in the tests with pyarrow the way ``datasets``
writes them, and fetched through huggingface_hub from a fake hub; no real hub copy was read
here.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hammr.eval.datasets._common import (
    LETTERS,
    Adapter,
    DatasetError,
    MissingFileError,
    answer_letter,
    bad_record,
    kind_of,
    question_text,
    require_file,
    text_value,
    texts_value,
    unreadable,
)
from hammr.eval.types import Sample
from hammr.input_file import open_input
from hammr.output_file import OutputError, write_output

__all__ = [
    "ADAPTER",
    "CACHE_FOLDER",
    "DEFAULT_CONFIG",
    "INSTALL",
    "layout_patterns",
    "load",
    "parquet_layout",
    "select_parquet",
]

NAME = "hub_parquet"
EXPECTS = (
    "a local snapshot of a Hugging Face hub dataset: a folder of parquet files "
    "(data/<split>-*.parquet, <config>/<split>-*.parquet or <config>/<split>/*.parquet) or one "
    ".parquet file, with the columns the options question, answers and image name"
)
INSTALL = 'pip install "hammr[data]"'
CACHE_FOLDER = ".hammr-images"
"""The image cache's folder under the snapshot (hidden: never read as data)."""
DEFAULT_CONFIG = "default"
BATCH_ROWS = 64
"""Rows decoded at a time: a batch's images are in memory together, not the whole file's."""

_SHARD = re.compile(r"^(?P<split>.+?)-\d{5}-of-\d{5}(?:-.*)?$")
_MAGIC = (
    (b"\xff\xd8\xff", ".jpg"),
    (b"\x89PNG\r\n\x1a\n", ".png"),
    (b"GIF8", ".gif"),
    (b"BM", ".bmp"),
    (b"II*\x00", ".tif"),
    (b"MM\x00*", ".tif"),
)
_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff"}


# --- the hub's parquet layout -------------------------------------------------------------------


def _split_of(stem: str) -> str:
    """'test-00000-of-00002' (and push_to_hub's older '...-<hash>' names) -> 'test'."""
    m = _SHARD.match(stem)
    return m["split"] if m else stem


def _place(parts: tuple[str, ...]) -> tuple[str, str] | None:
    """(config, split) of a parquet file at ``parts`` under the snapshot, None when it is in
    no place of the layout."""
    stem = parts[-1].removesuffix(".parquet")
    if len(parts) == 1:
        return DEFAULT_CONFIG, _split_of(stem)
    config = DEFAULT_CONFIG if parts[0] == "data" else parts[0]
    if len(parts) == 2:
        return config, _split_of(stem)
    if len(parts) == 3:
        return config, parts[1]
    return None


def parquet_layout(folder: Path) -> dict[tuple[str, str], list[Path]]:
    """(config, split) -> that split's parquet files under ``folder``, in name order, by the
    hub's layout conventions (the module docstring); hidden folders are skipped."""
    found: dict[tuple[str, str], list[Path]] = {}
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = Path(top).relative_to(folder).parts
        for name in sorted(names):
            if not name.endswith(".parquet") or name.startswith("."):
                continue
            key = _place((*rel, name))
            if key is not None:
                found.setdefault(key, []).append(Path(top) / name)
    return found


def _listing(layout: dict[tuple[str, str], list[Path]]) -> str:
    return ", ".join(f"{c}/{s}" for c, s in sorted(layout)) or "no parquet file"


def select_parquet(folder: Path, config: str = "", split: str = "") -> list[Path]:
    """The parquet files of ``config``/``split`` in the snapshot ``folder`` (see the module
    docstring for the defaults); DatasetError naming what the folder holds when there are
    none, or when the choice is not clear."""
    layout = parquet_layout(folder)
    where = f"{NAME}: {folder}"
    if not layout:
        raise DatasetError(
            f"{where} holds no parquet file in the hub's layout; it expects {EXPECTS}"
        )
    configs = sorted({c for c, _ in layout})
    if config:
        if config not in configs:
            raise DatasetError(
                f"{where} has no config {config!r}; it has {_listing(layout)} (config/split)"
            )
        chosen = config
    elif DEFAULT_CONFIG in configs or len(configs) == 1:
        chosen = DEFAULT_CONFIG if DEFAULT_CONFIG in configs else configs[0]
    else:
        raise DatasetError(
            f"{where} holds several configs ({', '.join(configs)}); name one with the option "
            f"config (it has {_listing(layout)})"
        )
    splits = sorted(s for c, s in layout if c == chosen)
    if split:
        if split not in splits:
            raise DatasetError(
                f"{where} has no split {split!r} in config {chosen!r}; it has {_listing(layout)} "
                "(config/split)"
            )
        return layout[(chosen, split)]
    if len(splits) == 1:
        return layout[(chosen, splits[0])]
    raise DatasetError(
        f"{where} holds several splits of config {chosen!r} ({', '.join(splits)}); name one with "
        "the entry's split"
    )


def layout_patterns(config: str, split: str) -> list[str] | None:
    """Repository paths (fnmatch patterns, as ``snapshot_download``'s ``allow_patterns``) that
    hold ``config``/``split`` in the layout :func:`select_parquet` reads; None for the whole
    repository (neither given). ``*`` crosses '/', so a pattern may take a few files more than
    the split's (never fewer, except top-level files of a default config with no split)."""
    if not config and not split:
        return None
    if config and config != DEFAULT_CONFIG:
        if not split:
            return [f"{config}/*.parquet"]
        return [f"{config}/{split}-*.parquet", f"{config}/{split}.parquet", f"{config}/{split}/*"]
    s = split or "*"
    default = [
        f"data/{s}-*.parquet",
        f"data/{s}.parquet",
        f"data/{s}/*.parquet",
        f"{DEFAULT_CONFIG}/{s}-*.parquet",
        f"{DEFAULT_CONFIG}/{s}/*.parquet",
    ]
    if split:
        default += [f"{split}-*.parquet", f"{split}.parquet"]
    if not config and split:  # the only config, whatever its name
        default += [f"*/{split}-*.parquet", f"*/{split}.parquet", f"*/{split}/*.parquet"]
    return default


# --- reading ------------------------------------------------------------------------------------


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise DatasetError(
            f"{NAME}: reading a hub dataset's parquet files needs pyarrow: {INSTALL}"
        ) from None
    return pyarrow, pyarrow.parquet


def _brief(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__


def _rows(
    pa: Any, pq: Any, file: Path, columns: dict[str, str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row in the file, the row's values of ``columns``' column names) for the parquet file
    ``file``, read through hammr.input_file; ``columns`` maps each column to the option that
    names it (for the error naming a missing one)."""
    try:
        with open_input(file, binary=True) as f:
            try:
                reader = pq.ParquetFile(f)
            except (pa.ArrowException, OSError) as e:
                raise DatasetError(
                    f"{NAME}: {file} is not a parquet file that can be read ({_brief(e)}); "
                    f"it expects {EXPECTS}"
                ) from None
            names = list(reader.schema_arrow.names)
            for column, option in columns.items():
                if column not in names:
                    raise DatasetError(
                        f"{NAME}: {file} has no column {column!r} (the option {option}); "
                        f"its columns: {', '.join(names) or 'none'}"
                    )
            n = 0
            try:
                for batch in reader.iter_batches(batch_size=BATCH_ROWS, columns=list(columns)):
                    for row in batch.to_pylist():
                        yield n, row
                        n += 1
            except (pa.ArrowException, OSError) as e:
                raise DatasetError(
                    f"{NAME}: {file} could not be read past row {n} ({_brief(e)})"
                ) from None
    except OSError as e:
        raise unreadable(NAME, file, e, EXPECTS) from None


def _suffix(data: bytes, name: str | None) -> str:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    for magic, suffix in _MAGIC:
        if data.startswith(magic):
            return suffix
    given = Path(name).suffix.lower() if name else ""
    return given if given in _SUFFIXES else ".img"


class _Images:
    """Turns an image cell into a path: bytes into a file of the cache (written once), a path
    into a path under the snapshot."""

    def __init__(self, cache: Path, root: Path) -> None:
        self.cache = cache
        self.root = root
        self.present = {p.name for p in cache.iterdir()} if cache.is_dir() else set()

    def stored(self, data: bytes, name: str | None) -> Path:
        target = self.cache / f"{hashlib.sha256(data).hexdigest()[:32]}{_suffix(data, name)}"
        if target.name not in self.present:
            try:
                write_output(target, data)
            except OutputError as e:
                raise DatasetError(
                    f"{NAME}: cannot write the image cache file {target}: {e.reason}"
                ) from None
            self.present.add(target.name)
        return target

    def one(self, value: Any, column: str, file: Path, where: str) -> Path:
        if isinstance(value, dict):
            data, name = value.get("bytes"), value.get("path")
            if isinstance(data, bytes | bytearray | memoryview) and len(data):
                return self.stored(bytes(data), name if isinstance(name, str) else None)
            if isinstance(name, str) and name.strip():
                return self.root / name
            problem = f"'{column}' has neither bytes nor a path"
            raise bad_record(NAME, file, where, problem, EXPECTS)
        if isinstance(value, bytes | bytearray | memoryview) and len(value):
            return self.stored(bytes(value), None)
        if isinstance(value, str) and value.strip():
            return self.root / value
        what = "empty" if isinstance(value, str | bytes) else kind_of(value)
        raise bad_record(NAME, file, where, f"'{column}' is {what}, not an image", EXPECTS)

    def variables(self, value: Any, column: str, file: Path, where: str) -> dict[str, Path]:
        items = value if isinstance(value, list) else [value]
        if not items:
            raise bad_record(NAME, file, where, f"'{column}' is an empty list of images", EXPECTS)
        return {
            "image" if i == 0 else f"image{i + 1}": self.one(item, column, file, where)
            for i, item in enumerate(items)
        }


def _answers(value: Any, column: str, file: Path, where: str) -> tuple[str, ...]:
    if isinstance(value, list):  # VQAv2's [{answer, answer_confidence, answer_id}, ...]
        value = [v["answer"] if isinstance(v, dict) and "answer" in v else v for v in value]
    return texts_value(value, column, NAME, file, where, EXPECTS)


def _letter(value: Any, choices: tuple[str, ...], column: str, file: Path, where: str) -> str:
    """The letter of the answer ``value``: an option's text, a letter, or a 0-based index."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(choices):
            return LETTERS[value]
    elif isinstance(value, str):
        text = value.strip()
        if text in choices:
            return LETTERS[choices.index(text)]
        letter = answer_letter(text, len(choices))
        if letter is not None:
            return letter
    problem = (
        f"'{column}' {value!r} is none of the {len(choices)} choices (by text, letter or "
        "0-based index)"
    )
    raise bad_record(NAME, file, where, problem, EXPECTS)


def _column_option(value: Any, option: str, *, optional: bool = False) -> str:
    if isinstance(value, str) and (value or optional):
        return value
    raise DatasetError(f"{NAME}: the option {option} is a column name (text), not {value!r}")


def load(
    path: Path,
    *,
    images: Path | None = None,
    split: str | None = None,
    question: str = "question",
    answers: str | Sequence[str] = "answers",
    image: str = "image",
    id: str = "",
    choices: str = "",
    config: str = "",
) -> list[Sample]:
    """``path``: the snapshot folder or one parquet file. ``images``: the image cache folder
    (default ``<snapshot>/.hammr-images``). ``split`` and ``config``: which files of a folder
    (ignored for one file). The column options are described in the module docstring."""
    question = _column_option(question, "question")
    image = _column_option(image, "image")
    id_column = _column_option(id, "id", optional=True)
    choices = _column_option(choices, "choices", optional=True)
    config = _column_option(config, "config", optional=True)
    answer_columns = (
        [_column_option(answers, "answers")]
        if isinstance(answers, str)
        else [_column_option(a, "answers") for a in answers]
    )
    if not answer_columns:
        raise DatasetError(f"{NAME}: the option answers names no column")
    if path.is_dir():
        files = select_parquet(path, config, split or "")
        root = path
    elif not os.path.lexists(path):
        raise MissingFileError(f"{NAME}: {path} does not exist; it expects {EXPECTS}")
    else:
        files = [require_file(path, NAME, EXPECTS)]
        root = path.parent
    pa, pq = _pyarrow()
    columns: dict[str, str] = {question: "question"}
    for a in answer_columns:
        columns.setdefault(a, "answers")
    columns.setdefault(image, "image")
    if id_column:
        columns.setdefault(id_column, "id")
    if choices:
        columns.setdefault(choices, "choices")
    store = _Images(images if images is not None else root / CACHE_FOLDER, root)
    samples: list[Sample] = []
    for file in files:
        shown = file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name
        for n, row in _rows(pa, pq, file, columns):
            where = f"row {n}"
            found = tuple(a for c in answer_columns for a in _answers(row[c], c, file, where))
            if not found:
                raise bad_record(NAME, file, where, f"'{answer_columns[0]}' is empty", EXPECTS)
            options: tuple[str, ...] = ()
            if choices:
                if not isinstance(row[choices], list):
                    problem = f"'{choices}' is {kind_of(row[choices])}, not a list of options"
                    raise bad_record(NAME, file, where, problem, EXPECTS)
                options = texts_value(row[choices], choices, NAME, file, where, EXPECTS)
                if not 1 < len(options) <= len(LETTERS):
                    problem = f"'{choices}' has {len(options)} options, not 2 to {len(LETTERS)}"
                    raise bad_record(NAME, file, where, problem, EXPECTS)
                found = (_letter(row[answer_columns[0]], options, answer_columns[0], file, where),)
            sample_id = (
                text_value(row[id_column], id_column, NAME, file, where, EXPECTS)
                if id_column
                else str(len(samples))
            )
            samples.append(
                Sample(
                    id=sample_id,
                    dataset=NAME,
                    question=question_text(row[question], question, NAME, file, where, EXPECTS),
                    answers=found,
                    images=store.variables(row[image], image, file, where),
                    question_type="multiple_choice" if choices else "",
                    choices=options,
                    meta={"parquet": shown, "row": n},
                )
            )
    return samples


ADAPTER = Adapter(
    name=NAME,
    load=load,
    expects=EXPECTS,
    question_type="",
    schema="partly verified: the hub's parquet layout and datasets' Image struct, read back "
    "from files written in the tests the way datasets writes them (no real hub copy read)",
)
