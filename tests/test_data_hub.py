"""Hugging Face hub copies of datasets: fetched by :func:`hammr.datasets.hub.fetch_hub` from a
fake hub on 127.0.0.1, read by the ``hub_parquet`` adapter through a suite entry.

The fake hub serves what the installed huggingface_hub's ``snapshot_download`` asks of a
dataset repository (read from its source, 2.4.0): the repository's information
(``GET /api/datasets/{repo}[/revision/{rev}]``: ``sha`` and ``siblings``), its file list
(``GET /api/datasets/{repo}/tree/{rev}?recursive=...``: ``type``, ``path``, ``size``,
``oid``), and each file's metadata and bytes (``HEAD``/``GET /datasets/{repo}/resolve/{rev}/
{path}``, answered with ``X-Repo-Commit``, ``ETag`` and ``Content-Length``; ``Range`` for a
resumed download). Errors carry the hub's ``X-Error-Code`` (RepoNotFound, RevisionNotFound,
GatedRepo), from which huggingface_hub chooses its exceptions. Every request is recorded, so a
test can say which files were transferred.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

pa = pytest.importorskip(
    "pyarrow", reason='pyarrow is not installed: pip install "hammr[data]" (or [dev])'
)
import pyarrow.parquet as pq  # noqa: E402
from PIL import Image  # noqa: E402

from fake_http_server import LocalServer, QuietHandler  # noqa: E402
from hammr.datasets.catalogue import HubCopy  # noqa: E402
from hammr.datasets.hub import (  # noqa: E402
    HubError,
    fetch_hub,
    hub_allow_patterns,
    hub_parquet_files,
)
from hammr.eval.datasets import DatasetError, load_dataset  # noqa: E402
from hammr.eval.suites import SuiteError, load_suite  # noqa: E402

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""How ``datasets`` stores an Image feature in parquet."""
REPO = "acme/tiny-vqa"
CONVERT = "refs/convert/parquet"


def png(color: tuple[int, int, int], size: tuple[int, int] = (4, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


RED, GREEN, BLUE = png((255, 0, 0)), png((0, 255, 0)), png((0, 0, 255))


def parquet(columns: dict[str, Any], schema: dict[str, Any] | None = None) -> bytes:
    arrays = {
        name: pa.array(values, type=(schema or {}).get(name)) for name, values in columns.items()
    }
    buffer = io.BytesIO()
    pq.write_table(pa.table(arrays), buffer)
    return buffer.getvalue()


def vqa_rows(questions: list[str], answers: list[Any], images: list[bytes]) -> bytes:
    return parquet(
        {
            "qid": [f"{q.split()[0].lower()}-{i}" for i, q in enumerate(questions)],
            "question": questions,
            "answers": answers,
            "image": [{"bytes": b, "path": f"img{i}.png"} for i, b in enumerate(images)],
        },
        {"answers": pa.list_(pa.string()), "image": IMAGE},
    )


def tiny_repo() -> dict[str, bytes]:
    """A dataset repository as ``push_to_hub`` lays it out: two shards of the test split (the
    second one's image is the first row's again), a train split, a card."""
    return {
        ".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"---\nconfigs: [default]\n---\n# tiny\n",
        "data/test-00000-of-00002.parquet": vqa_rows(
            ["What color is it?", "Is it green?"],
            [["red", "red", "crimson"], ["yes"]],
            [RED, GREEN],
        ),
        "data/test-00001-of-00002.parquet": vqa_rows(["And this one?"], [["red"]], [RED]),
        "data/train-00000-of-00001.parquet": vqa_rows(["Which color?"], [["blue"]], [BLUE]),
    }


def converted_repo() -> dict[str, bytes]:
    """The ``refs/convert/parquet`` branch of the same repository: ``<config>/<split>/NNNN``."""
    return {
        "default/test/0000.parquet": vqa_rows(["What color is it?"], [["red"]], [RED]),
        "default/train/0000.parquet": vqa_rows(["Which color?"], [["blue"]], [BLUE]),
    }


def oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """The part of the hub's HTTP API snapshot_download uses, for dataset repositories."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, dict[str, bytes]]] = {}
        """repo -> revision -> path -> bytes."""
        self.gated: set[str] = set()
        self.fail_get: set[str] = set()
        """Files whose GET answers 500."""
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        hub = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                hub.answer(self, "GET")

            def do_HEAD(self) -> None:
                hub.answer(self, "HEAD")

        self.server = LocalServer(Handler, request_queue_size=32)
        self.endpoint = f"http://127.0.0.1:{self.server.port}"

    def close(self) -> None:
        self.server.close()

    @staticmethod
    def commit(files: dict[str, bytes]) -> str:
        digest = hashlib.sha1()
        for name in sorted(files):
            digest.update(f"{name}\0{oid(files[name])}\n".encode())
        return digest.hexdigest()

    def transfers(self) -> list[tuple[str, str]]:
        """(method, file) of every HEAD and GET of a file."""
        return [
            (method, unquote(path.split("/resolve/", 1)[1].split("/", 1)[1]))
            for method, path in self.requests
            if "/resolve/" in path
        ]

    def _revision(self, repo: str, rev: str) -> tuple[str, dict[str, bytes]] | None:
        for files in self.repos[repo].values():
            if rev == self.commit(files):
                return rev, files
        files = self.repos[repo].get(rev)
        return (self.commit(files), files) if files is not None else None

    def answer(self, h: QuietHandler, method: str) -> None:
        raw = urlsplit(h.path).path
        with self.lock:
            self.requests.append((method, raw))
        parts = raw.strip("/").split("/")
        if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
            self._api(h, "/".join(parts[2:4]), parts[4:])
        elif parts[0] == "datasets" and len(parts) >= 6 and parts[3] == "resolve":
            self._resolve(h, method, "/".join(parts[1:3]), unquote(parts[4]), parts[5:])
        else:
            h.send_json(404, {"error": "no such route"})

    def _missing_repo(self, h: QuietHandler) -> None:
        h.send_json(
            404,
            {"error": "Repository not found"},
            {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
        )

    def _api(self, h: QuietHandler, repo: str, rest: list[str]) -> None:
        if repo not in self.repos:
            return self._missing_repo(h)
        rev = unquote(rest[1]) if len(rest) >= 2 else "main"
        found = self._revision(repo, rev)
        if found is None:
            return h.send_json(
                404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
            )
        sha, files = found
        if not rest or rest[0] == "revision":
            info = {
                "id": repo,
                "sha": sha,
                "private": False,
                "gated": "manual" if repo in self.gated else False,
                "siblings": [{"rfilename": name} for name in sorted(files)],
            }
            return h.send_json(200, info)
        if rest[0] == "tree":
            folders = sorted({str(Path(n).parent) for n in files} - {"."})
            tree: list[dict[str, Any]] = [
                {"type": "directory", "oid": "0" * 40, "path": f} for f in folders
            ]
            tree += [
                {"type": "file", "oid": oid(data), "size": len(data), "path": name}
                for name, data in sorted(files.items())
            ]
            return h.send_json(200, json.dumps(tree).encode())
        return h.send_json(404, {"error": "no such route"})

    def _resolve(self, h: QuietHandler, method: str, repo: str, rev: str, path: list[str]) -> None:
        if repo not in self.repos:
            return self._missing_repo(h)
        if repo in self.gated:
            message = f"Access to dataset {repo} is restricted. You must be authenticated."
            return h.send_json(
                401, {"error": message}, {"X-Error-Code": "GatedRepo", "X-Error-Message": message}
            )
        found = self._revision(repo, rev)
        name = unquote("/".join(path))
        if found is None or name not in found[1]:
            return h.send_json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        sha, files = found
        data = files[name]
        if method == "GET" and name in self.fail_get:
            return h.send_json(500, {"error": "Internal Error"})
        start = 0
        ranged = h.headers.get("Range", "")
        if method == "GET" and ranged.startswith("bytes=") and ranged.endswith("-"):
            start = int(ranged[len("bytes=") : -1])
        body = data[start:]
        h.send_response(206 if start else 200)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("ETag", f'"{oid(data)}"')
        h.send_header("X-Repo-Commit", sha)
        h.send_header("Accept-Ranges", "bytes")
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if method == "GET":
            h.wfile.write(body)
        return None


@pytest.fixture(autouse=True)
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake hub is on 127.0.0.1, yet other test modules put huggingface_hub offline for
    the whole session (HF_HUB_OFFLINE=1, read once when huggingface_hub is imported): undo
    it for these tests."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    fake = FakeHub()
    fake.repos[REPO] = {"main": tiny_repo(), CONVERT: converted_repo()}
    try:
        yield fake
    finally:
        fake.close()


def copy(**fields: Any) -> HubCopy:
    defaults: dict[str, Any] = {
        "repo": REPO,
        "differs": "a test copy",
        "publisher": True,
        "split": "test",
    }
    return HubCopy(**{**defaults, **fields})


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and text.strip() == text, text
    return text


SUITE = """
name = "hub-test"

[[entry]]
name = "tiny"
dataset = "hub_parquet"
metric = "vqa_accuracy"
file = "tiny"
split = "test"
options = { id = "qid", question = "question", answers = "answers", image = "image" }
"""


# --- fetch, then read through a suite entry -----------------------------------------------------


def test_fetch_then_read_through_a_suite_entry(hub: FakeHub, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    dest = fetch_hub(copy(), data_dir / "tiny", endpoint=hub.endpoint, progress=False)
    assert dest == data_dir / "tiny"
    # only the test split's shards: not the train split, not the card
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    got = [p for p in got if not p.startswith(".cache/")]
    assert got == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]
    assert sorted(f for m, f in hub.transfers() if m == "GET") == got
    assert (dest / got[0]).read_bytes() == tiny_repo()[got[0]]
    assert hub_parquet_files(copy(), dest) == [dest / g for g in got]

    suite_file = tmp_path / "hub.toml"
    suite_file.write_text(SUITE)
    pairs = load_suite(suite_file).samples(data_dir, check_images=True)
    samples = [s for _, s in pairs]
    assert [s.id for s in samples] == ["what-0", "is-1", "and-0"]
    assert [s.question for s in samples] == ["What color is it?", "Is it green?", "And this one?"]
    assert [s.answers for s in samples] == [("red", "red", "crimson"), ("yes",), ("red",)]
    assert all(s.dataset == "hub_parquet" and s.question_type == "" for s in samples)
    assert samples[2].meta == {"parquet": "data/test-00001-of-00002.parquet", "row": 0}
    colors = []
    for s in samples:
        path = s.images["image"]
        assert path.parent == dest / ".hammr-images" and path.suffix == ".png"
        with Image.open(path) as im:
            assert im.size == (4, 3)
            colors.append(im.convert("RGB").getpixel((0, 0)))
    assert colors == [(255, 0, 0), (0, 255, 0), (255, 0, 0)]
    # the image two questions share is one file; a second load writes nothing
    assert samples[0].images == samples[2].images
    cached = {p: p.stat().st_mtime_ns for p in (dest / ".hammr-images").iterdir()}
    assert len(cached) == 2
    again = [s for _, s in load_suite(suite_file).samples(data_dir)]
    assert again == samples
    assert {p: p.stat().st_mtime_ns for p in (dest / ".hammr-images").iterdir()} == cached


def test_a_second_fetch_transfers_no_file(hub: FakeHub, tmp_path: Path) -> None:
    dest = tmp_path / "tiny"
    fetch_hub(copy(), dest, endpoint=hub.endpoint, progress=False)
    first = hub.transfers()
    assert sorted(first) == [
        ("GET", "data/test-00000-of-00002.parquet"),
        ("GET", "data/test-00001-of-00002.parquet"),
        ("HEAD", "data/test-00000-of-00002.parquet"),
        ("HEAD", "data/test-00001-of-00002.parquet"),
    ]
    hub.requests.clear()
    assert fetch_hub(copy(), dest, endpoint=hub.endpoint, progress=False) == dest
    # one question (which commit is the default branch at?), no file asked for, not even its
    # metadata
    assert hub.requests == [("GET", f"/api/datasets/{REPO}")]


def test_an_interrupted_fetch_fetches_only_the_missing_file_again(
    hub: FakeHub, tmp_path: Path
) -> None:
    dest = tmp_path / "tiny"
    hub.fail_get.add("data/test-00001-of-00002.parquet")
    with pytest.raises(HubError) as info:
        fetch_hub(copy(), dest, endpoint=hub.endpoint, progress=False)
    assert "answered HTTP 500" in one_line(info.value)
    assert "what is complete is kept" in str(info.value)
    assert (dest / "data/test-00000-of-00002.parquet").is_file()
    assert not (dest / "data/test-00001-of-00002.parquet").exists()
    hub.fail_get.clear()
    hub.requests.clear()
    fetch_hub(copy(), dest, endpoint=hub.endpoint, progress=False)
    assert [f for m, f in hub.transfers() if m == "GET"] == ["data/test-00001-of-00002.parquet"]
    assert (dest / "data/test-00001-of-00002.parquet").is_file()


def test_the_parquet_conversion_branch(hub: FakeHub, tmp_path: Path) -> None:
    """A revision with '/' in it (quoted in the URL) and the ``<config>/<split>/NNNN`` layout."""
    converted = copy(revision=CONVERT, config="default")
    dest = fetch_hub(converted, tmp_path / "conv", endpoint=hub.endpoint, progress=False)
    assert hub_parquet_files(converted, dest) == [dest / "default/test/0000.parquet"]
    assert not (dest / "default/train").exists()
    [sample] = load_dataset("hub_parquet", dest, split="test", config="default")
    assert sample.question == "What color is it?" and sample.id == "0"


def test_the_default_patterns_follow_the_layout() -> None:
    assert hub_allow_patterns(copy(split="", files=("a.parquet",))) == ["a.parquet"]
    assert hub_allow_patterns(copy(split="")) is None
    assert hub_allow_patterns(copy(config="cfg", split="")) == ["cfg/*.parquet"]
    patterns = hub_allow_patterns(copy(config="q", image_config="img", split="testdev")) or []
    assert "q/testdev-*.parquet" in patterns and "img/testdev/*" in patterns


# --- errors: one line each ----------------------------------------------------------------------


def test_a_repository_that_is_not_there(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(HubError) as info:
        fetch_hub(copy(repo="acme/nothing"), tmp_path / "x", endpoint=hub.endpoint, progress=False)
    line = one_line(info.value)
    assert f"{hub.endpoint} has no dataset repository acme/nothing (HTTP 404)" in line
    assert "HF_TOKEN" in line


def test_a_revision_that_is_not_there(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(HubError) as info:
        fetch_hub(copy(revision="v9"), tmp_path / "x", endpoint=hub.endpoint, progress=False)
    assert f"the dataset {REPO} on {hub.endpoint} has no revision 'v9'" == one_line(info.value)


def test_a_gated_repository_says_to_log_in(hub: FakeHub, tmp_path: Path) -> None:
    hub.gated.add(REPO)
    with pytest.raises(HubError) as info:
        fetch_hub(copy(), tmp_path / "x", endpoint=hub.endpoint, progress=False)
    line = one_line(info.value)
    assert "is gated" in line and "hf auth login" in line and "huggingface-cli login" in line
    assert "HF_TOKEN" in line


def test_no_network_is_an_error_even_with_files_in_the_folder(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dest = tmp_path / "tiny"
    (dest / "data").mkdir(parents=True)
    (dest / "data" / "test-00000-of-00002.parquet").write_bytes(b"half")
    with pytest.raises(HubError) as info:
        fetch_hub(copy(), dest, endpoint=f"http://127.0.0.1:{port}", progress=False)
    line = one_line(info.value)
    assert f"cannot reach http://127.0.0.1:{port}" in line and "ConnectError" in line


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.ENOSPC, "no space left on the disk of"),
        (errno.EROFS, "choose a writable folder"),
        (errno.EACCES, "choose a writable folder"),
    ],
)
def test_a_full_or_read_only_disk(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, expected: str
) -> None:
    """The write fails inside huggingface_hub (as root, a chmod would not stop it)."""
    import huggingface_hub

    def failing(**kwargs: Any) -> str:
        raise OSError(code, "simulated")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", failing)
    with pytest.raises(HubError) as info:
        fetch_hub(copy(), tmp_path / "x", endpoint=hub.endpoint, progress=False)
    assert expected in one_line(info.value) and str(tmp_path / "x") in str(info.value)


def test_patterns_that_match_no_file(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(HubError, match=r"no file of the dataset acme/tiny-vqa .* matches x/\*"):
        fetch_hub(copy(), tmp_path / "x", endpoint=hub.endpoint, allow_patterns=["x/*"])


def test_a_missing_column_names_the_file_the_column_and_the_columns(tmp_path: Path) -> None:
    f = tmp_path / "test.parquet"
    f.write_bytes(
        parquet(
            {"question": ["Q?"], "answer": ["a"], "image": [{"bytes": RED, "path": None}]},
            {"image": IMAGE},
        )
    )
    with pytest.raises(DatasetError) as info:
        load_dataset("hub_parquet", f)
    assert one_line(info.value) == (
        f"hub_parquet: {f} has no column 'answers' (the option answers); "
        "its columns: question, answer, image"
    )
    [sample] = load_dataset("hub_parquet", f, answers="answer")
    assert sample.answers == ("a",) and sample.images["image"].suffix == ".png"


def test_a_suite_entry_names_the_entry_and_the_column(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "test.parquet").write_bytes(parquet({"q": ["Q?"]}))
    suite_file = tmp_path / "s.toml"
    suite_file.write_text(SUITE)
    with pytest.raises(SuiteError) as info:
        load_suite(suite_file).samples(tmp_path)
    line = one_line(info.value)
    assert "entry 'tiny'" in line and "no column 'question'" in line and "its columns: q" in line


def test_without_pyarrow_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "test.parquet"
    f.write_bytes(parquet({"question": ["Q?"]}))
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DatasetError) as info:
        load_dataset("hub_parquet", f)
    assert one_line(info.value) == (
        "hub_parquet: reading a hub dataset's parquet files needs pyarrow: "
        'pip install "hammr[data]"'
    )


def test_not_parquet_and_no_parquet(tmp_path: Path) -> None:
    f = tmp_path / "test.parquet"
    f.write_bytes(b"not a parquet file")
    with pytest.raises(DatasetError, match="is not a parquet file that can be read"):
        load_dataset("hub_parquet", f)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match="holds no parquet file in the hub's layout"):
        load_dataset("hub_parquet", empty)


# --- the layout and the columns ------------------------------------------------------------------


def test_configs_and_splits_are_chosen_or_listed(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    row = vqa_rows(["Q?"], [["a"]], [RED])
    for name in ("a/test-00000-of-00001.parquet", "b/test/0000.parquet", "b/val/0000.parquet"):
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).write_bytes(row)
    (snap / ".cache" / "x").mkdir(parents=True)
    (snap / ".cache" / "x" / "test.parquet").write_bytes(b"ignored")
    with pytest.raises(DatasetError, match=r"holds several configs \(a, b\); name one"):
        load_dataset("hub_parquet", snap)
    with pytest.raises(DatasetError, match=r"several splits of config 'b' \(test, val\)"):
        load_dataset("hub_parquet", snap, config="b")
    with pytest.raises(DatasetError, match=r"no config 'c'; it has a/test, b/test, b/val"):
        load_dataset("hub_parquet", snap, config="c")
    with pytest.raises(DatasetError, match=r"no split 'dev' in config 'a'"):
        load_dataset("hub_parquet", snap, config="a", split="dev")
    [sample] = load_dataset("hub_parquet", snap, config="b", split="val")
    assert sample.meta == {"parquet": "b/val/0000.parquet", "row": 0}
    assert len(load_dataset("hub_parquet", snap, config="a")) == 1


def test_multiple_choice_several_images_and_plain_bytes(tmp_path: Path) -> None:
    f = tmp_path / "mc.parquet"
    binaries = {"images": pa.list_(pa.binary())}
    f.write_bytes(
        parquet(
            {
                "question": ["Which is red?", "Which is left?", "Same?"],
                "options": [["the left", "the right"], ["red", "green", "blue"], ["yes", "no"]],
                "answer": ["the left", "green", "B"],
                "images": [[RED, GREEN], [BLUE], [GREEN, GREEN]],
            },
            binaries,
        )
    )
    mc = {"answers": "answer", "image": "images", "choices": "options"}
    samples = load_dataset("hub_parquet", f, **mc)
    assert [s.answers for s in samples] == [("A",), ("B",), ("B",)]
    assert samples[1].choices == ("red", "green", "blue")
    assert all(s.question_type == "multiple_choice" for s in samples)
    assert set(samples[0].images) == {"image", "image2"} and set(samples[1].images) == {"image"}
    assert samples[2].images["image"] == samples[2].images["image2"]
    with Image.open(samples[0].images["image2"]) as im:
        assert im.convert("RGB").getpixel((0, 0)) == (0, 255, 0)
    # a 0-based index (ScienceQA's, A-OKVQA's)
    row = {"question": ["Q?"], "options": [["x", "y"]], "images": [[RED]]}
    f.write_bytes(parquet({**row, "answer": [1]}, binaries))
    assert load_dataset("hub_parquet", f, **mc)[0].answers == ("B",)
    f.write_bytes(parquet({**row, "answer": [5]}, binaries))
    with pytest.raises(DatasetError, match=r"row 0: 'answer' 5 is none of the 2 choices"):
        load_dataset("hub_parquet", f, **mc)


def test_image_paths_stay_inside_the_snapshot(tmp_path: Path) -> None:
    f = tmp_path / "p.parquet"
    f.write_bytes(parquet({"question": ["Q?"], "answers": ["a"], "image": ["pics/1.jpg"]}))
    [sample] = load_dataset("hub_parquet", f)
    assert sample.images["image"] == tmp_path / "pics" / "1.jpg"
    f.write_bytes(parquet({"question": ["Q?"], "answers": ["a"], "image": ["../../etc/passwd"]}))
    with pytest.raises(DatasetError, match="leads outside the data folder"):
        load_dataset("hub_parquet", f)


def test_without_an_endpoint_hf_endpoint_is_used(hub: FakeHub, tmp_path: Path) -> None:
    # huggingface_hub reads HF_ENDPOINT once, at import: a process of its own, as a user runs
    code = (
        "import sys; from pathlib import Path; from hammr.datasets.catalogue import HubCopy; "
        "from hammr.datasets.hub import fetch_hub; "
        "fetch_hub(HubCopy(repo='acme/tiny-vqa', differs='x', publisher=True, split='test'), "
        "Path(sys.argv[1]), progress=False)"
    )
    env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_TELEMETRY": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "d").rglob("*.parquet"))


def test_data_get_fetches_a_hub_repository_source_and_its_entry_reads_it(
    hub: FakeHub, tmp_path: Path
) -> None:
    """V*'s release is a hub repository (kind hub_repo): `hammr data get vstar` takes it
    through huggingface_hub, and the suite entry then reads every drawn sample's image."""
    from click.testing import CliRunner

    from data_site import build_site, fixture_catalogue_text
    from hammr.cli import main as cli

    site = build_site(tmp_path / "site")
    repo = "craigwu/vstar_bench"
    base = site.root / "huggingface.co" / "datasets" / repo / "resolve" / "main"
    hub.repos[repo] = {"main": {p: (base / p).read_bytes() for p in site.hub_files["vstar"]}}
    catalogue = tmp_path / "catalogue.toml"
    catalogue.write_text(fixture_catalogue_text(site))
    data = tmp_path / "data"
    args = ["data", "--catalogue", str(catalogue), "get", "vstar", "--data-dir", str(data),
            "--hub-endpoint", hub.endpoint, "--limit", "2", "--no-progress"]  # fmt: skip
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert "present  muse-mc/vstar: 2 of 2 drawn samples have their images" in r.stdout
    files = [path for method, path in hub.requests if method == "GET" and "/resolve/" in path]
    assert len(files) == len(site.hub_files["vstar"])  # the whole repository, once each
    hub.requests.clear()
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert not [p for m, p in hub.requests if m == "GET" and "/resolve/" in p]
