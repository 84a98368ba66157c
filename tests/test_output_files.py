"""Writing to a path the user gave (issue 21, items 1 and 2): a write failure is one line and
exit 2 with no partial file left; a regular file is replaced whole; a device or a FIFO is
written in place, never replaced by a regular file; a folder, a socket is refused.

A full disk is played by /dev/full (ENOSPC on every write) and, for a regular file, by a
file-size limit (RLIMIT_FSIZE: the write fails with EFBIG past it). Device nodes are made in
the test's folder (``mknod``, as root) rather than written over in /dev, so that a regression
replaces a copy, not the machine's /dev/null or /dev/full."""

from __future__ import annotations

import json
import os
import resource
import socket
import stat
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from hammr.cli import main
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord
from hammr.output_file import OutputError, open_output, write_output
from hammr.trace import Step, Trace
from hammr.values import Image

HAMMR = Path(sys.executable).parent / "hammr"
CSV_HEADER = "run,dataset,sample_id,"


def invoke(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, args, env={"HAMMR_CONFIG": ""})
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r.exit_code, r.stdout, r.stderr


def one_error_line(code: int, stderr: str) -> str:
    assert code == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hammr: error: "), stderr
    return lines[0]


def run_store(path: Path) -> Path:
    """One run 'r' of two wrong answers whose traces `hammr explain` can explain."""
    with RunStore(path) as store:
        store.open_run("r", "generic-vqa", "naive")
        for sid in ("s0", "s1"):
            trace = Trace(
                agent="NaiveGenericAgent",
                question="q",
                steps=[Step(index=0, finish="b")],
                answer="b",
                status="finished",
            )
            store.add(
                RunRecord("r", sid, "gqa", "spatial_reasoning", "q", ("a",), "b", 0.0, trace=trace)
            )
    return path


def device_copy(folder: Path, name: str, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (7) in ``folder``."""
    path = folder / name
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        with path.open("rb"):  # a nodev mount refuses to open it
            pass
    except OSError as e:
        pytest.skip(f"cannot make a device node here ({e.strerror})")
    return path


def read_fifo_in_background(path: Path) -> tuple[threading.Thread, list[str]]:
    got: list[str] = []

    def read() -> None:
        with path.open(encoding="utf-8") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, got


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# -- the module -------------------------------------------------------------------------------


def test_a_regular_file_is_replaced_whole_keeping_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("old")
    path.chmod(0o640)
    write_output(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    with pytest.raises(ValueError), open_output(path) as f:
        f.write("half of it")
        raise ValueError("the writer failed")
    assert path.read_text() == "new"
    assert leftovers(tmp_path, {"out.txt"}) == []


def test_a_link_to_a_regular_file_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_output(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_folder_and_a_socket_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="is a folder; name the CSV file to write"):
        write_output(tmp_path, "x", what="the CSV file")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(OutputError, match="it is a socket"):
            write_output(sock_path, "x")
        assert stat.S_ISSOCK(sock_path.stat().st_mode)
    assert leftovers(tmp_path, {"s.sock"}) == []


def test_a_trace_saved_to_a_fifo_is_streamed_without_images(tmp_path: Path) -> None:
    img = Image(PILImage.new("RGB", (8, 8)))
    trace = Trace(agent="A", question="q", steps=[Step(index=0, finish="x")], answer="x")
    trace.images[img.content_hash()] = img
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    reader, got = read_fifo_in_background(fifo)
    trace.save(fifo)
    reader.join(timeout=60)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and Trace.from_dict(json.loads(got[0])).answer == "x"
    assert leftovers(tmp_path, {"trace.fifo"}) == []  # no images/ beside a stream


# -- explain --out ----------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_explain_out_dev_full_is_one_line_and_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    store = run_store(tmp_path / "runs.sqlite")
    code, _, err = invoke(["explain", "r", "--store", str(store), "--out", "/dev/full"])
    line = one_error_line(code, err)
    assert line == "hammr: error: cannot write /dev/full: No space left on device"
    assert stat.S_ISCHR(Path("/dev/full").stat().st_mode)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader, got = read_fifo_in_background(fifo)
    code, _, err = invoke(["explain", "r", "--store", str(store), "--out", str(fifo)])
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and len(got[0].splitlines()) == 2


# -- errors --export --------------------------------------------------------------------------


def test_errors_export_to_a_device_writes_in_place(tmp_path: Path) -> None:
    store = run_store(tmp_path / "runs.sqlite")
    null = device_copy(tmp_path, "null", 3)
    code, _, err = invoke(["errors", "r", "--store", str(store), "--export", str(null)])
    assert code == 0, err
    assert stat.S_ISCHR(null.stat().st_mode), "the device node was replaced by a file"
    full = device_copy(tmp_path, "full", 7)
    code, _, err = invoke(["errors", "r", "--store", str(store), "--export", str(full)])
    line = one_error_line(code, err)
    assert line == f"hammr: error: cannot write {full}: No space left on device"
    assert stat.S_ISCHR(full.stat().st_mode), "the device node was replaced by a file"
    assert leftovers(tmp_path, {"runs.sqlite", "null", "full"}) == []


def test_errors_export_to_a_fifo_writes_in_place(tmp_path: Path) -> None:
    store = run_store(tmp_path / "runs.sqlite")
    fifo = tmp_path / "wrong.csv"
    os.mkfifo(fifo)
    reader, got = read_fifo_in_background(fifo)
    code, _, err = invoke(["errors", "r", "--store", str(store), "--export", str(fifo)])
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode), "the FIFO was replaced by a file"
    assert got and got[0].startswith(CSV_HEADER)
    assert leftovers(tmp_path, {"runs.sqlite", "wrong.csv"}) == []


# -- report --html on a full disk -------------------------------------------------------------


def limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))


def test_report_html_on_a_full_disk_leaves_no_partial_file(tmp_path: Path) -> None:
    import subprocess

    store = run_store(tmp_path / "runs.sqlite")
    page = tmp_path / "report.html"
    args = [str(HAMMR), "report", "r", "--store", str(store), "--html", str(page)]
    ok = subprocess.run(args, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    size = page.stat().st_size
    assert size > 50_000  # so that the limit below cuts it
    page.write_text("the old report")
    # the page is bigger than the files this process may write: the write fails midway
    r = subprocess.run(
        args, capture_output=True, text=True, check=False, preexec_fn=limit_file_size
    )
    line = one_error_line(r.returncode, r.stderr)
    assert line == f"hammr: error: cannot write {page}: File too large"
    assert page.read_text() == "the old report"
    assert leftovers(tmp_path, {"runs.sqlite", "report.html"}) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize(
    "argv",
    [
        ["agents"],
        ["experiment", "list"],
        ["experiment", "show", "hammr-table3"],  # printed through rich
        ["config", "show"],
    ],
)
def test_standard_output_on_a_full_disk_is_one_line_not_a_traceback(argv: list[str]) -> None:
    """`hammr ... > /dev/full`: whichever command was printing, and whether through click or
    rich, the command ends with one error line and exit 2."""
    import subprocess

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [str(HAMMR), *argv], stdout=full, stderr=subprocess.PIPE, text=True, timeout=600
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert lines[-1] == "hammr: error: cannot write to standard output: No space left on device"
    assert sum(ln.startswith("hammr: error:") for ln in lines) == 1
