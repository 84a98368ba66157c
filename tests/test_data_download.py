"""hammr.datasets.download against a real HTTP server on 127.0.0.1 (tests/fixture_http.py):
resumed ranges, checksums, and the ways a publisher's server fails."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fixture_http import FixtureServer
from hammr.datasets.download import MAX_REDIRECTS, Downloader, DownloadError, mirrored
from hammr.output_file import LockHeld, OutputError, exclusive_lock

BODY = bytes(range(256)) * 4096  # 1 MiB, every byte position distinguishable


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "example.org" / "d").mkdir(parents=True)
    (root / "example.org" / "d" / "big.bin").write_bytes(BODY)
    (root / "example.org" / "d" / "small.json").write_text('{"a": 1}')
    return root


def fast(server: FixtureServer, **kw: float) -> Downloader:
    options = {"timeout_s": 2.0, "retries": 2, "retry_wait_s": 0.01, **kw}
    return Downloader(mirror=server.url, **options)  # type: ignore[arg-type]


URL = "https://example.org/d/big.bin"


def test_mirrored_keeps_host_path_and_query() -> None:
    assert mirrored("https://a.org/x/y.zip?raw=true", "http://127.0.0.1:9") == (
        "http://127.0.0.1:9/a.org/x/y.zip?raw=true"
    )
    assert mirrored("https://a.org/x", None) == "https://a.org/x"


def test_a_download_is_whole_and_its_digests_are_the_file_s(site: Path, tmp_path: Path) -> None:
    with FixtureServer(site) as server, fast(server) as d:
        got = d.fetch(URL, tmp_path / "out" / "big.bin", size=len(BODY))
    assert (tmp_path / "out" / "big.bin").read_bytes() == BODY
    assert got.sha256 == hashlib.sha256(BODY).hexdigest()
    assert got.md5 == hashlib.md5(BODY).hexdigest()
    assert got.transferred == len(BODY)
    assert not list((tmp_path / "out").glob("*.part*"))


def test_a_cut_transfer_resumes_with_a_range_for_the_rest(site: Path, tmp_path: Path) -> None:
    with FixtureServer(site) as server, fast(server) as d:
        server.fault("example.org/d/big.bin", "truncate", after=300_000, times=1)
        got = d.fetch(URL, tmp_path / "big.bin")
        ranges = [r.range for r in server.requests]
        sent = server.bytes_sent("example.org/d/big.bin")
    assert (tmp_path / "big.bin").read_bytes() == BODY
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes=")
    start = int(ranges[1].split("=")[1].split("-")[0])
    assert start > 0
    assert sent == len(BODY)  # nothing asked twice
    assert got.sha256 == hashlib.sha256(BODY).hexdigest()


def test_a_part_file_left_by_a_killed_run_is_continued(site: Path, tmp_path: Path) -> None:
    dest = tmp_path / "big.bin"
    (tmp_path / "big.bin.part").write_bytes(BODY[:400_000])
    with FixtureServer(site) as server, fast(server) as d:
        got = d.fetch(URL, dest)
        assert server.bytes_sent("example.org/d/big.bin") == len(BODY) - 400_000
        assert server.requests[0].range == "bytes=400000-"
    assert dest.read_bytes() == BODY and got.transferred == len(BODY) - 400_000


def test_a_file_changed_on_the_server_is_fetched_again_from_its_start(
    site: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "big.bin"
    (tmp_path / "big.bin.part").write_bytes(b"x" * 1000)
    (tmp_path / "big.bin.part.json").write_text(json.dumps({"url": URL, "validator": '"old"'}))
    with FixtureServer(site) as server, fast(server) as d:
        d.fetch(URL, dest)
        assert server.requests[0].status == 200  # If-Range did not match: the whole file
    assert dest.read_bytes() == BODY


def test_a_checksum_mismatch_is_kept_aside_and_not_used(site: Path, tmp_path: Path) -> None:
    dest = tmp_path / "data" / "big.bin"
    rejected = tmp_path / "data" / ".rejected"
    with FixtureServer(site) as server, fast(server) as d, pytest.raises(DownloadError) as e:
        d.fetch(URL, dest, checksum=("sha256", "0" * 64), rejected=rejected)
    message = str(e.value)
    assert "\n" not in message and "kept aside" in message and "not used" in message
    assert not dest.exists() and not list(dest.parent.glob("big.bin.part*"))
    (aside,) = rejected.iterdir()
    assert aside.read_bytes() == BODY


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("404", "answered 404"),
        ("500", "answered 500"),
        ("redirect_loop", "redirect loop"),
        ("html", "HTML page"),
    ],
)
def test_a_failing_server_is_one_line_and_leaves_no_file(
    site: Path, tmp_path: Path, fault: str, words: str
) -> None:
    dest = tmp_path / "big.bin"
    with FixtureServer(site) as server, fast(server) as d:
        server.fault("example.org/d/big.bin", fault)
        with pytest.raises(DownloadError) as e:
            d.fetch(URL, dest)
        tries = server.count("example.org/d/big.bin")
    assert words in str(e.value) and "\n" not in str(e.value)
    assert not dest.exists()
    # only a server error is worth a retry; a loop is followed as far as the limit
    assert tries == {"500": 3, "redirect_loop": MAX_REDIRECTS + 1}.get(fault, 1)


def test_a_stalled_transfer_times_out_and_a_rerun_finishes_it(site: Path, tmp_path: Path) -> None:
    dest = tmp_path / "big.bin"
    with FixtureServer(site) as server:
        server.fault("example.org/d/big.bin", "stall", after=200_000)
        with fast(server, timeout_s=0.5, retries=1) as d, pytest.raises(DownloadError) as e:
            d.fetch(URL, dest)
        assert "timed out" in str(e.value)
        part = tmp_path / "big.bin.part"
        # each of the 2 tries resumed where the one before stalled; what came is kept
        assert part.stat().st_size == 400_000
        server.clear_faults()
        with fast(server) as d:
            got = d.fetch(URL, dest)
    assert dest.read_bytes() == BODY and got.transferred == len(BODY) - 400_000


def test_a_server_that_is_down_is_one_line(tmp_path: Path) -> None:
    down = Downloader(mirror="http://127.0.0.1:9", timeout_s=1, retries=1, retry_wait_s=0)
    with down as d, pytest.raises(DownloadError) as e:
        d.fetch(URL, tmp_path / "x")
    assert "connection failed" in str(e.value) and "\n" not in str(e.value)


def test_a_read_only_folder_is_one_line(site: Path, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with FixtureServer(site) as server, fast(server) as d, pytest.raises(DownloadError):
            d.fetch(URL, folder / "big.bin")
    finally:
        folder.chmod(0o755)


def test_the_folder_lock_is_held_by_one_process_and_let_go(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    entered = threading.Event()
    with exclusive_lock(lock, "first"):
        entered.set()
        with pytest.raises(LockHeld) as e, exclusive_lock(lock, "second"):
            pass
        assert e.value.holder == "first"
    with exclusive_lock(lock, "third"):
        pass


def test_a_full_disk_is_one_line_and_keeps_what_came(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hammr.datasets.download as download

    real = download.open_part
    writes = {"n": 0}

    class Full:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def write(self, chunk: bytes) -> int:
            writes["n"] += 1
            if writes["n"] > 2:
                raise OutputError(tmp_path / "big.bin.part", "No space left on device")
            return self.inner.write(chunk)  # type: ignore[attr-defined, no-any-return]

    @contextmanager
    def full_part(path: Path, *, restart: bool = False) -> Iterator[Full]:
        with real(path, restart=restart) as f:
            yield Full(f)

    monkeypatch.setattr(download, "open_part", full_part)
    with FixtureServer(site) as server, fast(server) as d, pytest.raises(DownloadError) as e:
        d.fetch(URL, tmp_path / "big.bin")
    assert "No space left on device" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "big.bin").exists()
    kept = (tmp_path / "big.bin.part").stat().st_size
    assert 0 < kept < len(BODY)  # what came before the disk filled is kept for the next run
    monkeypatch.setattr(download, "open_part", real)
    with FixtureServer(site) as server, fast(server) as d:
        got = d.fetch(URL, tmp_path / "big.bin")
    assert (tmp_path / "big.bin").read_bytes() == BODY and got.transferred == len(BODY) - kept


def test_a_file_larger_than_the_free_disk_is_refused_before_it_comes(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hammr.datasets.download as download

    monkeypatch.setattr(download, "_free_bytes", lambda folder: 1000)
    with FixtureServer(site) as server, fast(server) as d, pytest.raises(DownloadError) as e:
        d.fetch(URL, tmp_path / "big.bin")
    assert f"{len(BODY):,} bytes to come, 1,000 free" in str(e.value)
    part = tmp_path / "big.bin.part"
    assert not (tmp_path / "big.bin").exists()
    assert not part.exists() or part.stat().st_size == 0  # refused before a byte was written
