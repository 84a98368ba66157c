"""``hammr data get``: a data folder filled from the catalogue's official sources.

In three phases, so that a table's 1,000 questions per entry cost about 1,000 images rather
than the archives that hold a million:

1. **Files**: each dataset's question, annotation and index files (unpacked where they come
   in an archive), and the links its layout needs.
2. **The draw**: with ``--experiment`` or ``--limit``, the samples the runs will evaluate
   (:mod:`hammr.datasets.draw`, the same seeded draw), and which of their images are missing.
3. **Images**: each missing image from the URL its dataset publishes for it, fetched
   concurrently; what has no URL from a file of an archive already unpacked that an index
   names; and only what is left from whole archives, which are listed with their size
   before anything starts and need ``--yes`` when large. Without a draw, the whole dataset
   (archives included) is fetched.

A source fetched and unpacked before is not asked for again (the data folder's lock file
says so, :mod:`hammr.datasets.record`); a source given only after a request form is listed
with where its files go. One ``get`` at a time per data folder.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import httpx

from hammr.datasets.catalogue import Catalogue, Dataset, Source
from hammr.datasets.download import Downloader, DownloadError, mirrored
from hammr.datasets.draw import EntryDraw, Want, draw
from hammr.datasets.images import (
    ImageJob,
    ImageSourceError,
    link_from_index,
    relative_in,
    spec_root,
    url_jobs,
)
from hammr.datasets.record import DataRecord
from hammr.datasets.sources import FILE_KINDS, human_size, is_part, source_bytes, split_parts

DOWNLOADS = ".hammr-downloads"
"""Archives while they come down and until they are unpacked, under the data folder."""
BIG = 1_000_000_000
"""A download at least this large (exact or as the catalogue states it) needs --yes."""

Note = Callable[[str], None]


@dataclass(frozen=True)
class GetOptions:
    data_dir: Path
    datasets: tuple[Dataset, ...]
    wants: tuple[Want, ...] = ()
    drawing: bool = False
    limit: int | None = None
    seed: int = 0
    mirror: str | None = None
    hub_endpoint: str | None = None
    yes: bool = False
    dry_run: bool = False
    keep_archives: bool = False
    hub: bool = False
    connections: int = 4
    timeout_s: float = 60.0
    retries: int = 4
    retry_wait_s: float = 2.0
    progress: bool = False


@dataclass
class GetOutcome:
    transferred: int = 0
    fetched: list[str] = field(default_factory=list)
    skipped_big: list[str] = field(default_factory=list)
    by_request: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    draws: list[EntryDraw] = field(default_factory=list)
    images_fetched: int = 0

    @property
    def complete(self) -> bool:
        if self.failures or self.skipped_big:
            return False
        return all(d.status == "drawn" and d.whole() == len(d.samples) for d in self.draws)


class Getter:
    """One ``hammr data get`` (see the module docstring); ``run`` returns its outcome."""

    def __init__(self, catalogue: Catalogue, options: GetOptions, note: Note) -> None:
        self.catalogue = catalogue
        self.o = options
        self.note = note
        self.data_dir = options.data_dir
        self.downloads = self.data_dir / DOWNLOADS
        self.record = DataRecord(self.data_dir)
        self.out = GetOutcome()
        self.downloader = Downloader(
            mirror=options.mirror,
            timeout_s=options.timeout_s,
            retries=options.retries,
            retry_wait_s=options.retry_wait_s,
            connections=options.connections,
        )

    # -- the plan ----------------------------------------------------------------------------

    def run(self) -> GetOutcome:
        try:
            self._run()
        finally:
            self.downloader.close()
            self.record.save()
            self.out.transferred = self.downloader.transferred
        return self.out

    def _run(self) -> None:
        if self.o.hub:
            for d in self.o.datasets:
                self._hub_copy(d)
            return
        for d in self.o.datasets:  # phase 1: the files
            for s in d.sources:
                if s.access == "open" and s.kind in FILE_KINDS and not is_part(d, s):
                    self._source(d, s)
                elif s.kind == "hub_repo":
                    self._hub_repo(d, s)
            self._links(d)
        if not self.o.drawing:  # the whole dataset
            for d in self.o.datasets:
                for s in d.sources:
                    whole = s.access == "open" and s.kind not in (*FILE_KINDS, "hub_repo")
                    if whole and not is_part(d, s):
                        self._source(d, s)
            self._forms()
            return
        self.out.draws = self._draw()
        wanted = self._wanted()
        if wanted:
            self._images(wanted)
        self.out.draws = self._draw()
        self._forms()

    def _forms(self) -> None:
        """The sources given only after a request form, for the datasets still incomplete."""
        incomplete = {
            f"{d.suite}/{d.entry}"
            for d in self.out.draws
            if d.status != "drawn" or d.whole() != len(d.samples)
        }
        for d in self.o.datasets:
            readers = set(d.entries) | {
                e for q in self.o.datasets if d.name in q.images_from for e in q.entries
            }
            if self.o.drawing and not readers & incomplete:
                continue
            for s in d.sources:
                if s.access == "form":
                    self.out.by_request.append(
                        f"{d.name}: {s.note or s.name}: ask at {s.url}; the files go in "
                        f"{self.data_dir / s.target}"
                    )

    def _draw(self) -> list[EntryDraw]:
        return draw(self.o.wants, self.data_dir, limit=self.o.limit, seed=self.o.seed)

    def _wanted(self) -> dict[str, str]:
        """Missing drawn images: path relative to the data folder -> file name."""
        out: dict[str, str] = {}
        for d in self.out.draws:
            for p in d.missing_images():
                rel = relative_in(p, self.data_dir)
                if rel is not None:
                    out[rel] = PurePosixPath(rel).name
        return out

    # -- images ------------------------------------------------------------------------------

    def _images(self, wanted: dict[str, str]) -> None:
        specs = [(d, p) for d in self.o.datasets for p in d.per_image_url]
        for d, p in specs:  # the URL lists the drawn images need
            if not p.name_pattern and not (self.data_dir / p.file).exists():
                roots = spec_root(p.local, d)
                if any(r.startswith(roots + "/") for r in wanted):
                    self._source(d, d.source(p.source))
        try:
            jobs = url_jobs(specs, wanted, self.data_dir)
        except ImageSourceError as e:  # an unreadable list: the archives may still serve
            self.out.failures.append(str(e))
            jobs = []
        self._fetch_images(jobs)
        have = {rel for j in jobs if (self.data_dir / j.local).exists() for rel in j.covers}
        left = {rel: n for rel, n in wanted.items() if rel not in have}
        by_owner: dict[str, dict[str, str]] = {}
        for rel, name in left.items():
            owner = self._owner(rel)
            if owner is not None:
                by_owner.setdefault(owner.name, {})[rel] = name
        for d in self.o.datasets:
            if d.name in by_owner:
                self._from_archives(d, by_owner[d.name])

    def _owner(self, rel: str) -> Dataset | None:
        """The dataset whose image folder holds ``rel`` most closely (an images dataset
        before a questions dataset naming the same folder)."""
        best: tuple[int, bool] | None = None
        owner = None
        for d in self.o.datasets:
            roots = [*d.layout.images, *(spec_root(x.local, d) for x in d.image_index)]
            for root in roots:
                if rel.startswith(root + "/"):
                    rank = (len(root), d.kind == "images")
                    if best is None or rank > best:
                        best, owner = rank, d
        return owner

    def _from_archives(self, d: Dataset, mine: dict[str, str]) -> None:
        """Images missing under ``d``'s folders: linked from an index to a file of an
        unpacked archive, else from ``d``'s whole archives (the final draw says what is still
        missing)."""
        linked = self._index_links(d, mine)
        still = {rel: n for rel, n in mine.items() if rel not in linked}
        archives = [s for s in d.sources if s.kind == "images_archive" and s.access == "open"]
        if still and archives:
            sizes = [source_bytes(s) for s in archives]
            total = sum(size * (s.parts or 1) for s, size in zip(archives, sizes, strict=True)
                        if size)  # fmt: skip
            said = f"about {human_size(total)}" if total else "of a size no page gave"
            self.note(
                f"{d.name}: {len(still)} drawn images come only in whole archives ({said}"
                + (", no URL per image is published)" if not d.per_image_url else ")")
            )
            for s in archives:
                self._source(d, s)
            self._index_links(d, still)

    def _index_links(self, d: Dataset, wanted: dict[str, str]) -> set[str]:
        if not d.image_index or self.o.dry_run:
            return set()
        return link_from_index([(d, x) for x in d.image_index], wanted, self.data_dir)

    def _fetch_images(self, jobs: Sequence[ImageJob]) -> None:
        todo = [j for j in jobs if not (self.data_dir / j.local).exists()]
        if not todo:
            return
        if self.o.dry_run:
            self.note(f"would fetch {len(todo)} images, one URL each")
            return
        failures: list[str] = []
        with self._bar("images", len(todo)) as advance:

            def one(job: ImageJob) -> bool:
                try:
                    got = self.downloader.fetch(
                        job.url,
                        self.data_dir / job.local,
                        checksum=self._recorded(job.url),
                        rejected=self.downloads / "rejected",
                    )
                except DownloadError as e:
                    failures.append(str(e))
                    return False
                finally:
                    advance()
                self.record.put(job.url, job.local, got.size, got.sha256, got.md5)
                return True

            with ThreadPoolExecutor(max_workers=max(1, self.o.connections)) as pool:
                # counted here, in one thread: the workers only say whether theirs came
                self.out.images_fetched += sum(pool.map(one, todo))
        if failures:
            self.out.failures.append(
                f"{len(failures)} of {len(todo)} images could not be fetched; the first: "
                f"{failures[0]}"
            )

    # -- sources -----------------------------------------------------------------------------

    def _recorded(self, url: str) -> tuple[str, str] | None:
        sha = self.record.recorded_sha256(url)
        return ("sha256", sha) if sha else None

    def _source(self, d: Dataset, s: Source) -> None:
        for i, url in enumerate(s.urls()):
            self._one_url(d, s, url, i)

    def _done_before(self, url: str, unpacked: bool) -> bool:
        """Whether ``url`` was fetched (and, for an archive, unpacked) and what it gave is
        still there."""
        entry = self.record.get(url)
        if entry is None:
            return False
        outputs = entry.get("unpacked")
        if unpacked or isinstance(outputs, list):
            return isinstance(outputs, list) and all(
                (self.data_dir / str(p)).exists() for p in outputs
            )
        path = entry.get("path")
        return (
            isinstance(path, str)
            and (self.data_dir / path).is_file()
            and ((self.data_dir / path).stat().st_size == entry.get("size"))
        )

    def _one_url(self, d: Dataset, s: Source, url: str, part: int) -> None:
        label = f"{d.name}/{s.name}" + (f" part {part}" if s.parts else "")
        if self._done_before(url, unpacked=bool(s.unpack)):
            return
        dest = self._dest(s, url)
        if not s.unpack and dest.exists() and self.record.get(url) is None:
            return  # put there by hand: kept as it is
        size = source_bytes(s)
        if size is not None and size >= BIG and not self.o.yes:
            self.out.skipped_big.append(
                f"{label}: {s.size_approx or f'{size:,} bytes'} ({url}); add --yes to fetch it"
            )
            return
        if self.o.dry_run:
            what = f", {s.size_approx or f'{size:,} bytes'}" if size else ""
            self.note(f"would fetch {label}{what}: {url}")
            return

        parts = split_parts(d, s)
        try:
            fetched_parts = [self._download(p, p.url, self._dest(p, p.url), label) for p in parts]
            got = self._download(s, url, dest, label)
        except DownloadError as e:
            self.out.failures.append(f"{label}: {e}")
            return
        self.out.fetched.append(label)
        if not s.unpack:
            return
        from hammr.datasets.unpack import UnpackError, unpack

        try:
            done = unpack(got, s.unpack, self.data_dir, target=s.target, members=s.members,
                          parts=fetched_parts)  # fmt: skip
        except UnpackError as e:
            self.out.failures.append(f"{label}: {e}; it is fetched again on the next run")
            pairs = [(got, url), *((f, p.url) for f, p in zip(fetched_parts, parts, strict=True))]
            for path, source in pairs:
                self.record.forget(source)
                with contextlib.suppress(OSError):
                    path.unlink()
            return
        outputs = [m.to for m in s.members] or [s.target]
        self.record.mark_unpacked(url, outputs)
        for p in parts:
            self.record.mark_unpacked(p.url, outputs)
        self.record.save()
        n = len(done.written) + len(done.kept)
        self.note(f"{label}: unpacked {n} file{'' if n == 1 else 's'}")
        if not self.o.keep_archives:
            for path in (*fetched_parts, got):
                with contextlib.suppress(OSError):
                    path.unlink()

    def _dest(self, s: Source, url: str) -> Path:
        """Where the file of ``url`` is saved: its target, or the downloads folder when it is
        unpacked (or a part of a split archive)."""
        target = self.data_dir / s.target
        if s.unpack or not PurePosixPath(s.target).suffix:
            parts = urlsplit(url)
            name = PurePosixPath(parts.path).name or "download"
            return self.downloads / parts.netloc / PurePosixPath(parts.path).parent.name / name
        return target

    def _download(self, s: Source, url: str, dest: Path, label: str) -> Path:
        if self._done_before(url, unpacked=False) and dest.exists():
            return dest  # a part of a split archive fetched before
        expected = s.checksum or self._publisher_checksum(s, url) or self._recorded(url)
        with self._bar(label, source_bytes(s), bytes_=True) as advance_to:
            got = self.downloader.fetch(
                url,
                dest,
                checksum=expected,
                size=s.size if s.parts is None else None,
                rejected=self.downloads / "rejected",
                progress=lambda done, total: advance_to(done, total),
            )
        self.record.put(url, _rel(dest, self.data_dir), got.size, got.sha256, got.md5)
        self.record.save()
        return dest

    def _publisher_checksum(self, s: Source, url: str) -> tuple[str, str] | None:
        if not s.checksum_url:
            return None
        checksum_url = s.checksum_url
        if s.parts is not None:
            part = url.rsplit("_", 1)[-1].split(".", 1)[0]
            checksum_url = checksum_url.replace("{part}", part)
        try:
            r = self.downloader.client.get(mirrored(checksum_url, self.o.mirror))
        except httpx.HTTPError:  # the checksum list is a help; the download still gets recorded
            return None
        found = re.search(r"\b([0-9a-f]{32})\b", r.text) if r.status_code == 200 else None
        return ("md5", found.group(1)) if found else None

    def _hub_repo(self, d: Dataset, s: Source) -> None:
        if d.hf is None:
            self.out.failures.append(f"{d.name}/{s.name}: no hub repository in the catalogue")
            return
        dest = self.data_dir / s.target
        if self.o.dry_run:
            self.note(f"would fetch the hub repository {d.hf.repo} into {dest}")
            return
        try:
            from hammr.datasets.hub import HubError, fetch_hub
        except ImportError as e:  # pragma: no cover - the module is ours; its extra may not be
            self.out.failures.append(f"{d.name}: {e}")
            return
        try:
            fetch_hub(
                d.hf, dest, endpoint=self.o.hub_endpoint, allow_patterns=["*"],
                progress=self.o.progress,
            )  # fmt: skip
        except HubError as e:
            self.out.failures.append(f"{d.name}/{s.name}: {e}")
            return
        self.out.fetched.append(f"{d.name}/{s.name}")
        absent = [f for f in d.layout.files if not (self.data_dir / f).exists()]
        if absent:  # a repository the suite reads only after a conversion
            self.out.failures.append(
                f"{d.name}: the hub repository holds no {absent[0]}"
                + (f" ({s.note})" if s.note else "")
                + (f"; {d.notes[0]}" if d.notes else "")
            )

    def _hub_copy(self, d: Dataset) -> None:
        """The dataset's Hugging Face copy into ``hub/<repo>``, and the suite entry that reads
        it (the paper tables keep reading the official files)."""
        if d.hf is None:
            if d.kind == "questions":
                self.out.failures.append(f"{d.name}: the catalogue knows no hub copy of it")
            return
        dest = self.data_dir / "hub" / d.hf.repo
        if self.o.dry_run:
            self.note(f"would fetch the hub copy {d.hf.repo} into {dest}")
            return
        from hammr.datasets.hub import HubError, fetch_hub

        try:
            fetch_hub(d.hf, dest, endpoint=self.o.hub_endpoint, progress=self.o.progress)
        except HubError as e:
            self.out.failures.append(f"{d.name}: {e}")
            return
        self.out.fetched.append(f"{d.name} (hub copy {d.hf.repo})")
        options = {
            k: v
            for k, v in (
                ("config", d.hf.config), ("question", d.hf.question),
                ("answers", d.hf.answers), ("image", d.hf.image),
            )
            if v
        }  # fmt: skip
        table = ", ".join(f'{k} = "{v}"' for k, v in options.items())
        self.note(f"{d.name}: the hub copy differs from the official file: {d.hf.differs}")
        self.note(
            f'{d.name}: a suite entry reads it as: dataset = "hub_parquet", '
            f'file = "hub/{d.hf.repo}"'
            + (f', split = "{d.hf.split}"' if d.hf.split else "")
            + (f", options = {{ {table} }}" if table else "")
        )

    def _links(self, d: Dataset) -> None:
        for link in d.layout.links:
            path = self.data_dir / link.path
            target = self.data_dir / link.target
            if path.exists() or path.is_symlink():
                continue
            if link.optional and not target.exists():
                continue
            if self.o.dry_run:
                self.note(f"would link {link.path} -> {link.target}")
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            # the folder it points at is made now, so that an adapter looking through the link
            # before the images come names them where they will be
            target.mkdir(parents=True, exist_ok=True)
            path.symlink_to(os.path.relpath(target, path.parent), target_is_directory=True)

    # -- progress ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _bar(
        self, label: str, total: int | None, *, bytes_: bool = False
    ) -> Iterator[Callable[..., None]]:
        if not self.o.progress:
            if bytes_:
                yield lambda done, total: None
            else:
                yield lambda: None
            return
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        from hammr.terminal_text import safe_console, safe_markup

        columns = (DownloadColumn(), TransferSpeedColumn()) if bytes_ else (MofNCompleteColumn(),)
        bar = Progress(
            TextColumn(safe_markup(label)),
            BarColumn(),
            *columns,
            TimeRemainingColumn(),
            console=safe_console(stderr=True),
            transient=False,
        )
        with bar:
            task = bar.add_task(label, total=total)
            if bytes_:
                yield lambda done, whole: bar.update(task, completed=done, total=whole or total)
            else:
                yield lambda: bar.advance(task)


def _rel(path: Path, data_dir: Path) -> str:
    try:
        return path.relative_to(data_dir).as_posix()
    except ValueError:
        return str(path)


__all__ = ["BIG", "DOWNLOADS", "GetOptions", "GetOutcome", "Getter"]
