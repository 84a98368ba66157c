"""What every dataset adapter shares: the adapter record, the errors, and file readers whose
errors name the file and what the adapter expected to find in it."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hammr.eval.types import Sample
from hammr.input_file import InputError, check_input, open_input
from hammr.text_limits import MAX_QUESTION_CHARS

Loader = Callable[..., list[Sample]]
"""An adapter's loader: ``load(path, *, images, split, **options) -> list[Sample]``. Its
keyword-only parameters other than ``images`` and ``split`` are the adapter's options."""


@dataclass(frozen=True)
class Adapter:
    """One dataset format: how to turn its official annotation file into samples."""

    name: str
    load: Loader
    expects: str
    """The official file and its schema, in one line; error messages quote it."""
    question_type: str
    """The question type its samples get (before a suite entry overrides it)."""
    schema: str
    """How far the schema was checked: 'verified: ...', 'partly verified: ...' or 'assumed: ...'."""


class DatasetError(ValueError):
    """A dataset file is missing, unreadable, or not in the schema its adapter expects."""


class MissingFileError(DatasetError, FileNotFoundError):
    """The annotation file (or a file it needs) does not exist."""


@dataclass(frozen=True)
class MissingImage:
    sample_id: str
    variable: str
    """The input variable ('image', 'image2')."""
    path: Path


class MissingImagesError(DatasetError):
    """Samples whose image files do not exist (``load_dataset(..., check_images=True)``)."""

    def __init__(self, message: str, missing: list[MissingImage]) -> None:
        super().__init__(message)
        self.missing = missing


class UnsafePathError(DatasetError):
    """An annotation names an image outside the data folders (``../../etc/passwd``, or an
    absolute path elsewhere)."""


def within(folder: Path, target: Path) -> bool:
    """Whether ``target`` lies inside ``folder``.

    Lexically: the target's path starts with the folder's and has no '..' after it. Symbolic
    links below the folder are then followed wherever they point: the suites tell users to link
    the large image folders (Visual Genome, COCO) into the data folder, and a link there is the
    user's doing, not the annotation file's. A target that fails the lexical test is still
    inside when its resolved path lies in the folder's resolved path ('../gqa/images/1.jpg'
    written from inside gqa/images).
    """
    base = folder.absolute().parts
    full = target.absolute().parts
    if full[: len(base)] == base and ".." not in full[len(base) :]:
        return True
    try:
        return target.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


def require_inside(folders: Sequence[Path], target: Path, adapter: str, where: str) -> Path:
    """``target`` when it lies inside one of ``folders`` (see :func:`within`), else
    :class:`UnsafePathError` naming ``where`` (the file and the sample or record)."""
    if any(within(folder, target) for folder in folders):
        return target
    shown = " or ".join(str(f) for f in folders)
    raise UnsafePathError(
        f"{adapter}: {where}: the image path {str(target)!r} leads outside the data folder "
        f"({shown}); images must lie inside the images folder or the annotation file's folder"
    )


def require_file(path: Path, adapter: str, expects: str) -> Path:
    try:
        check_input(path)
    except FileNotFoundError:
        raise MissingFileError(f"{adapter}: {path} does not exist; it expects {expects}") from None
    except InputError as e:  # a folder, a FIFO, a device: said as what it is
        raise DatasetError(f"{adapter}: {path}: {e.strerror}; it expects {expects}") from None
    except OSError as e:
        raise unreadable(adapter, path, e, expects) from None
    return path


def require_dir(path: Path, adapter: str, expects: str) -> Path:
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise MissingFileError(f"{adapter}: {path} {what}; it expects {expects}")
    return path


ENCODING = "utf-8-sig"
"""Dataset files are read as UTF-8; a byte-order mark at the start (some Windows editors
write one) is accepted and dropped."""


def _first_bad_line(path: Path) -> tuple[int, int, int] | None:
    """(line, column, byte) of the first byte of ``path`` that is not UTF-8, or None.

    Line by line: a newline byte never occurs inside a UTF-8 sequence, so each line decodes
    on its own, and only the error path pays for this second read."""
    try:
        with open_input(path, binary=True) as f:
            for n, raw in enumerate(f, start=1):
                try:
                    raw.decode(ENCODING if n == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    bom = 3 if n == 1 and raw.startswith(b"\xef\xbb\xbf") else 0
                    return n, e.start - bom + 1, raw[e.start]
    except OSError:
        return None
    return None


def not_utf8(adapter: str, path: Path, expects: str) -> DatasetError:
    """The error for a dataset file that is not UTF-8 text, naming the line (and column) of
    its first bad byte and what the file seems to be."""
    try:
        with open_input(path, binary=True) as f:
            head = f.read(4)
    except OSError:
        head = b""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        guess = "it is UTF-16 (it starts with a UTF-16 byte-order mark)"
    else:
        guess = "Latin-1, Windows-1252 or another 8-bit encoding?"
    found = _first_bad_line(path)
    at = f" line {found[0]} (column {found[1]}, byte 0x{found[2]:02x})" if found is not None else ""
    return DatasetError(
        f"{adapter}: {path}{at} is not UTF-8 text ({guess}); save it as UTF-8; it expects {expects}"
    )


def unreadable(adapter: str, path: Path, e: OSError, expects: str) -> DatasetError:
    return DatasetError(
        f"{adapter}: {path} cannot be read ({e.strerror or e}); it expects {expects}"
    )


def read_json(path: Path, adapter: str, expects: str) -> Any:
    require_file(path, adapter, expects)
    try:
        with open_input(path, encoding=ENCODING) as f:
            return json.load(f)
    except UnicodeDecodeError:
        raise not_utf8(adapter, path, expects) from None
    except json.JSONDecodeError as e:
        raise DatasetError(
            f"{adapter}: {path} is not valid JSON ({e}); it expects {expects}"
        ) from e
    except OSError as e:
        raise unreadable(adapter, path, e, expects) from None


def read_json_records(
    path: Path, adapter: str, expects: str
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(position, 'record <position>', record) for a JSON file that is a list of objects. The
    file is read and its top level checked at once; each record is checked as it is reached."""
    data = read_json(path, adapter, expects)
    if not isinstance(data, list):
        raise bad_record(adapter, path, "top level", "not a JSON list", expects)
    return _json_objects(data, path, adapter, expects)


def _json_objects(
    data: list[Any], path: Path, adapter: str, expects: str
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for i, record in enumerate(data):
        where = f"record {i}"
        if not isinstance(record, dict):
            raise bad_record(adapter, path, where, "not a JSON object", expects)
        yield i, where, record


def read_jsonl(path: Path, adapter: str, expects: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) for each non-blank line; every line must be a JSON object."""
    require_file(path, adapter, expects)
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        with open_input(path, encoding=ENCODING) as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DatasetError(
                        f"{adapter}: {path} line {n} is not valid JSON ({e}); it expects {expects}"
                    ) from e
                if not isinstance(record, dict):
                    raise DatasetError(
                        f"{adapter}: {path} line {n} is not a JSON object; it expects {expects}"
                    )
                rows.append((n, record))
    except UnicodeDecodeError:
        raise not_utf8(adapter, path, expects) from None
    except OSError as e:
        raise unreadable(adapter, path, e, expects) from None
    return rows


def read_delimited(
    path: Path, adapter: str, expects: str, *, delimiter: str, required: tuple[str, ...]
) -> Iterator[tuple[int, dict[str, str]]]:
    """(data row number from 0, row) for a CSV/TSV file with a header that has ``required``."""
    require_file(path, adapter, expects)
    previous = csv.field_size_limit()
    # HR-Bench's base64 images make single fields of many megabytes.
    csv.field_size_limit(2**31 - 1)
    try:
        with open_input(path, encoding=ENCODING, newline="") as f:
            reader = csv.DictReader(f, delimiter=delimiter)
            header = reader.fieldnames or []
            lacking = [c for c in required if c not in header]
            if lacking:
                raise DatasetError(
                    f"{adapter}: {path} lacks the column(s) {', '.join(lacking)} "
                    f"(header: {', '.join(header) or 'none'}); it expects {expects}"
                )
            yield from enumerate(reader)
    except UnicodeDecodeError:
        raise not_utf8(adapter, path, expects) from None
    except csv.Error as e:
        raise DatasetError(
            f"{adapter}: {path} could not be read ({e}); it expects {expects}"
        ) from e
    except OSError as e:
        raise unreadable(adapter, path, e, expects) from None
    finally:
        csv.field_size_limit(previous)


def bad_record(adapter: str, path: Path, where: str, problem: str, expects: str) -> DatasetError:
    return DatasetError(f"{adapter}: {path}, {where}: {problem}; it expects {expects}")


def field(
    record: Mapping[str, Any], key: str, adapter: str, path: Path, where: str, expects: str
) -> Any:
    """``record[key]``, or an error naming the file, the record and the missing key."""
    if key not in record:
        raise bad_record(adapter, path, where, f"no '{key}'", expects)
    return record[key]


def kind_of(value: Any) -> str:
    """What a JSON value is, in words ('a list', 'an object', ...), for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def text_value(
    value: Any,
    name: str,
    adapter: str,
    path: Path,
    where: str,
    expects: str,
    *,
    numbers: bool = True,
) -> str:
    """``value`` (the record's ``name``) as text (:func:`text`): a JSON string, or a number
    or boolean when ``numbers``. A list, an object or null is refused naming the file, the
    record and the key: :func:`text` would turn it into its Python repr ("['a', 'b']"),
    which would then be asked or scored as if the file had said it."""
    if isinstance(value, str) or (numbers and isinstance(value, int | float)):
        return text(value)
    wanted = "text or a number" if numbers else "text"
    raise bad_record(adapter, path, where, f"'{name}' is {kind_of(value)}, not {wanted}", expects)


def text_field(
    record: Mapping[str, Any],
    key: str,
    adapter: str,
    path: Path,
    where: str,
    expects: str,
    *,
    numbers: bool = True,
) -> str:
    """``record[key]`` as text (:func:`text_value`), or an error naming the missing key."""
    value = field(record, key, adapter, path, where, expects)
    return text_value(value, key, adapter, path, where, expects, numbers=numbers)


def texts_value(
    value: Any, name: str, adapter: str, path: Path, where: str, expects: str
) -> tuple[str, ...]:
    """One text, or each text of a list (every item a string or a number; see
    :func:`text_value`). An empty list gives an empty tuple: the caller says whether one is
    allowed."""
    if isinstance(value, list):
        return tuple(
            text_value(v, f"{name}[{i}]", adapter, path, where, expects)
            for i, v in enumerate(value)
        )
    return (text_value(value, name, adapter, path, where, expects),)


def question_text(value: Any, name: str, adapter: str, path: Path, where: str, expects: str) -> str:
    """A question: a string, not blank, at most :data:`~hammr.text_limits.MAX_QUESTION_CHARS`
    characters (what ``hammr ask`` accepts); anything else is refused naming the file and the
    record, before any sample is asked."""
    question = text_value(value, name, adapter, path, where, expects, numbers=False)
    if not question:
        raise bad_record(adapter, path, where, f"'{name}' is empty", expects)
    if len(question) > MAX_QUESTION_CHARS:
        problem = (
            f"'{name}' is {len(question):,} characters long, above hammr's limit of "
            f"{MAX_QUESTION_CHARS:,} for a question"
        )
        raise bad_record(adapter, path, where, problem, expects)
    return question


def question_field(
    record: Mapping[str, Any], key: str, adapter: str, path: Path, where: str, expects: str
) -> str:
    """``record[key]`` as a question (:func:`question_text`)."""
    value = field(record, key, adapter, path, where, expects)
    return question_text(value, key, adapter, path, where, expects)


def path_value(value: Any, name: str, adapter: str, path: Path, where: str, expects: str) -> str:
    """An image path written in a record: a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        what = "empty" if isinstance(value, str) else kind_of(value)
        raise bad_record(
            adapter, path, where, f"'{name}' is {what}, not the path of an image", expects
        )
    return value


def path_field(
    record: Mapping[str, Any], key: str, adapter: str, path: Path, where: str, expects: str
) -> str:
    """``record[key]`` as an image path (:func:`path_value`)."""
    value = field(record, key, adapter, path, where, expects)
    return path_value(value, key, adapter, path, where, expects)


def present(record: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The entries of ``record`` under those of ``keys`` it has, in the order of ``keys``."""
    return {key: record[key] for key in keys if key in record}


def text(value: Any) -> str:
    """A JSON scalar as answer text: numbers without a trailing '.0', strings stripped."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def image_root(path: Path, images: Path | None) -> Path:
    """Where an adapter looks for images: ``images`` when given, else the file's folder."""
    return images if images is not None else path.parent


def subdir_if_present(root: Path, name: str) -> Path:
    """``root/name`` when that folder exists, else ``root`` (official archives unpack into a
    named folder; users often point at that folder directly)."""
    candidate = root / name
    return candidate if candidate.is_dir() else root


def option_path(value: str | Path, base: Path) -> Path:
    """An option naming a file: absolute as given, relative to ``base`` otherwise."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_OPTION_LINE = re.compile(r"^\s*\(?([A-Z])[).:]\s+(.*\S)\s*$")


def split_options(prompt: str) -> tuple[str, tuple[str, ...]] | None:
    """A prompt that lists lettered options on their own lines ('(A) red', 'A. red', 'A) red')
    -> (the text before the options, the option texts in order), or None when it lists none.
    Lines after the options (an answer instruction) are dropped; letters must run A, B, C, ..."""
    lines = prompt.splitlines()
    start = next((i for i, line in enumerate(lines) if _OPTION_LINE.match(line)), None)
    if start is None:
        return None
    choices: list[str] = []
    for line in lines[start:]:
        m = _OPTION_LINE.match(line)
        if m is None or m.group(1) != LETTERS[len(choices)]:
            break
        choices.append(m.group(2))
    if len(choices) < 2:
        return None
    return "\n".join(lines[:start]).strip(), tuple(choices)


def answer_letter(value: Any, n_choices: int) -> str | None:
    """'B', ' b ', '(B)' -> 'B' when B is one of the first ``n_choices`` letters, else None."""
    letter = str(value).strip().strip("().").strip().upper()
    if len(letter) == 1 and letter in LETTERS[:n_choices]:
        return letter
    return None
