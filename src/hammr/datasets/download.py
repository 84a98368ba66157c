"""Fetching a dataset's files over HTTP: resumable, checked, polite.

Why each piece is there:

* **Resumable.** A file comes down into ``<name>.part`` beside where it goes, and a later call
  asks for the rest with an HTTP ``Range`` (with ``If-Range`` on the validator the server gave,
  so a file changed in between is fetched again from its start rather than spliced). A
  download killed with -9 at 9 of 10 GB costs 1 GB next time, not 10.
* **Checked.** Only a complete file is put in place (renamed from its part file): its size is
  the one the server announced, and its checksum is the publisher's where the catalogue has
  one, else the one recorded at its first download (the data folder's lock file). A mismatch
  is kept aside under ``.hammr-downloads/rejected/`` and never used.
* **Honest about what came.** A server that answers an HTML page where a data file was asked
  for (a login wall, an error page served with 200) is an error, not a file; so are a 404, a
  redirect loop, and a transfer that stalls past ``timeout_s`` or keeps failing after
  ``retries`` tries (each waiting twice as long as the one before, or what ``Retry-After``
  says).
* **Polite.** One shared connection pool of ``connections``, a User-Agent naming hammr.

``mirror`` maps every URL ``SCHEME://HOST/PATH?QUERY`` to ``MIRROR/HOST/PATH?QUERY``: a lab's
local copy of the public datasets, and the tests' server on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from hammr import __version__
from hammr.input_file import open_input, read_input_text
from hammr.output_file import OutputError, open_part, write_output

USER_AGENT = f"hammr/{__version__} (dataset download; python-httpx)"
CHUNK = 1 << 20
MAX_REDIRECTS = 10
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
HTML_TYPES = ("text/html", "application/xhtml+xml")


class DownloadError(Exception):
    """A file that could not be fetched; the message is one line naming the URL and why."""


@dataclass(frozen=True)
class Fetched:
    path: Path
    size: int
    sha256: str
    md5: str
    transferred: int
    """Bytes this call received (0 when the file was complete already)."""


Progress = Callable[[int, int | None], None]
"""Called with (bytes so far, total bytes or None) as a file comes down."""


def mirrored(url: str, mirror: str | None) -> str:
    """``url`` as fetched through ``mirror`` (see the module docstring)."""
    if not mirror:
        return url
    parts = urlsplit(url)
    query = f"?{parts.query}" if parts.query else ""
    return f"{mirror.rstrip('/')}/{parts.netloc}{parts.path}{query}"


def file_digests(path: Path) -> tuple[str, str, int]:
    """(sha256, md5, size) of a file, read in chunks."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with open_input(path, binary=True) as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), md5.hexdigest(), size


MAX_RETRY_AFTER_S = 120.0
"""The longest a server's Retry-After is honoured: past it, the retry comes sooner."""


def _retry_after(response: httpx.Response) -> float | None:
    """The server's Retry-After (seconds or an HTTP date), at most MAX_RETRY_AFTER_S; None
    when absent or unreadable."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(max(0.0, when.timestamp() - time.time()), MAX_RETRY_AFTER_S)


def _total_from(response: httpx.Response, offset: int) -> int | None:
    """The whole file's size, from Content-Range (206, 416) or Content-Length (200)."""
    content_range = response.headers.get("content-range", "")
    if "/" in content_range:
        total = content_range.rsplit("/", 1)[1].strip()
        return int(total) if total.isdigit() else None
    length = response.headers.get("content-length", "")
    return offset + int(length) if length.isdigit() else None


def _range_start(response: httpx.Response) -> int | None:
    value = response.headers.get("content-range", "")
    if not value.startswith("bytes ") or "-" not in value:
        return None
    start = value[len("bytes ") :].split("-", 1)[0].strip()
    return int(start) if start.isdigit() else None


class _Restart(Exception):
    """The part file cannot be continued: fetch from the start."""


class _Retry(Exception):
    def __init__(self, why: str, wait: float | None = None) -> None:
        super().__init__(why)
        self.wait = wait


class Downloader:
    """One connection pool for a ``hammr data get``; thread-safe (images are fetched by
    several threads at once)."""

    def __init__(
        self,
        *,
        mirror: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 4,
        retry_wait_s: float = 2.0,
        connections: int = 4,
    ) -> None:
        self.mirror = mirror
        self.retries = retries
        self.retry_wait_s = retry_wait_s
        self.transferred = 0
        self._count = threading.Lock()
        self.client = httpx.Client(
            # the bytes as stored: a compressed transfer would not resume by byte ranges
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0)),
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Downloader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def fetch(
        self,
        url: str,
        dest: Path,
        *,
        checksum: tuple[str, str] | None = None,
        size: int | None = None,
        rejected: Path | None = None,
        progress: Progress | None = None,
        html_ok: bool = False,
    ) -> Fetched:
        """``url`` into ``dest`` (see the module docstring); ``checksum`` is (sha256 | md5,
        hex) the file must have, ``size`` its length where known, ``rejected`` the folder a
        mismatching file is moved to. DownloadError (one line) when it cannot be had."""
        part = dest.with_name(dest.name + ".part")
        meta = dest.with_name(dest.name + ".part.json")
        where = mirrored(url, self.mirror)
        received = 0
        attempt = 0
        while True:
            try:
                received += self._transfer(where, url, part, meta, size, progress, html_ok)
                break
            except _Restart:
                _remove(part, meta)
                continue
            except _Retry as r:
                attempt += 1
                if attempt > self.retries:
                    raise DownloadError(f"{url}: {r} (gave up after {attempt} tries)") from None
                time.sleep(r.wait if r.wait is not None else self.retry_wait_s * 2 ** (attempt - 1))
        sha, md5, got = file_digests(part)
        if size is not None and got != size:
            _remove(part, meta)
            raise DownloadError(f"{url}: {got} bytes came, the catalogue says {size}")
        if checksum is not None:
            algorithm, expected = checksum
            actual = sha if algorithm == "sha256" else md5
            if actual != expected:
                aside = _keep_aside(part, rejected or dest.parent, dest.name, actual)
                meta.unlink(missing_ok=True)
                raise DownloadError(
                    f"{url}: {algorithm} {actual} is not the expected {expected}; "
                    f"the file is kept aside at {aside} and not used"
                )
        try:
            os.replace(part, dest)
        except OSError as e:
            raise DownloadError(f"{url}: cannot put it at {dest}: {e.strerror or e}") from None
        meta.unlink(missing_ok=True)
        return Fetched(dest, got, sha, md5, received)

    def _transfer(
        self,
        where: str,
        url: str,
        part: Path,
        meta: Path,
        size: int | None,
        progress: Progress | None,
        html_ok: bool,
    ) -> int:
        """One request: append what comes to ``part``; the bytes received."""
        offset = part.stat().st_size if part.is_file() else 0
        headers: dict[str, str] = {}
        validator = _read_validator(meta, url) if offset else ""
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if validator:
                headers["If-Range"] = validator
        received = 0
        try:
            with self.client.stream("GET", where, headers=headers) as r:
                status = r.status_code
                if status == 416 and offset:
                    total = _total_from(r, 0)
                    if total == offset:
                        return 0  # the part file is the whole file already
                    raise _Restart()
                if status in RETRY_STATUS:
                    raise _Retry(f"the server answered {status}", _retry_after(r))
                if status >= 400:
                    raise DownloadError(f"{url}: the server answered {status} {r.reason_phrase}")
                kind = r.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind in HTML_TYPES and not html_ok:
                    raise DownloadError(
                        f"{url}: the server answered an HTML page, not the file (an error or "
                        "login page?); open the URL in a browser to see it"
                    )
                restart = True
                if status == 206:
                    if _range_start(r) != offset:
                        raise _Restart()
                    restart = False
                total = _total_from(r, offset if not restart else 0)
                if size is not None and total is not None and total != size:
                    raise DownloadError(
                        f"{url}: the server offers {total} bytes, the catalogue says {size}"
                    )
                coming = None if total is None else total - (0 if restart else offset)
                free = _free_bytes(part.parent)
                if coming is not None and free is not None and coming > free:
                    raise DownloadError(
                        f"{url}: {coming:,} bytes to come, {free:,} free in {part.parent}"
                    )
                validator = r.headers.get("etag") or r.headers.get("last-modified") or ""
                _write_validator(meta, url, validator)
                done = 0 if restart else offset
                with open_part(part, restart=restart) as f:
                    for chunk in r.iter_raw():
                        f.write(chunk)
                        received += len(chunk)
                        done += len(chunk)
                        with self._count:
                            self.transferred += len(chunk)
                        if progress is not None:
                            progress(done, total)
                if total is not None and done < total:
                    raise _Retry(f"the transfer ended at {done} of {total} bytes")
                return received
        except httpx.TooManyRedirects:
            raise DownloadError(
                f"{url}: more than {MAX_REDIRECTS} redirects (a redirect loop?)"
            ) from None
        except httpx.TimeoutException:
            raise _Retry("the server stopped sending (timed out)") from None
        except (httpx.TransportError, httpx.StreamError) as e:
            raise _Retry(f"the connection failed ({type(e).__name__}: {e})") from None
        except OutputError as e:
            raise DownloadError(f"{url}: {e}") from None


def _free_bytes(folder: Path) -> int | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _read_validator(meta: Path, url: str) -> str:
    try:
        data = json.loads(read_input_text(meta))
    except (OSError, ValueError):
        return ""
    if not isinstance(data, dict) or data.get("url") != url:
        return ""
    value = data.get("validator")
    return value if isinstance(value, str) else ""


def _write_validator(meta: Path, url: str, validator: str) -> None:
    with contextlib.suppress(OutputError):  # a lost validator costs a restart, nothing more
        write_output(meta, json.dumps({"url": url, "validator": validator}))


def _remove(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()


def _keep_aside(part: Path, folder: Path, name: str, digest: str) -> Path:
    aside = folder / f"{name}.{digest[:12]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.replace(part, aside)
    except OSError:
        _remove(part)
        return part
    return aside


__all__ = ["USER_AGENT", "DownloadError", "Downloader", "Fetched", "file_digests", "mirrored"]
