"""``hammr data list | show | check``: the datasets the bundled suites read
(:mod:`hammr.datasets.catalogue`), and what of them a data folder holds.

``check`` looks at a data folder the way ``hammr experiment run`` reads it: per suite entry,
its question file, and for the samples a run would draw (the same seeded draw) whether their
images are there. An entry is *present* (file and every drawn image), *partial* (the file,
some images missing), or *missing* (no file); for what is missing it names the official
sources and where each goes under the folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hammr.cli_common import fail
from hammr.terminal_text import echo, safe_line

if TYPE_CHECKING:
    from hammr.datasets.catalogue import Catalogue, Dataset
    from hammr.eval.suites import Suite, SuiteEntry

EPILOG = """\b
Examples:
  hammr data list
  hammr data list --data-dir ~/data/vqa
  hammr data show encvqa
  hammr data check --data-dir ~/data/vqa --experiment hammr-table3 --limit 100
"""


@click.group("data", epilog=EPILOG)
def data() -> None:
    """The datasets the papers' tables read: where each comes from, and what a data folder
    holds of them."""


def _catalogue() -> Catalogue:
    from hammr.datasets.catalogue import CatalogueError, load_catalogue

    try:
        return load_catalogue()
    except CatalogueError as e:
        fail(f"the bundled dataset catalogue is broken: {e}")


def _data_dir(path: Path | None) -> Path | None:
    if path is None:
        return None
    where = path.expanduser()
    if not where.is_dir():
        fail(f"--data-dir {path}: no such folder")
    return where


def presence(d: Dataset, data_dir: Path) -> str:
    """Whether ``data_dir`` holds the dataset's layout: present, partial or missing."""
    paths = [*d.layout.files, *d.layout.images]
    found = [p for p in paths if (data_dir / p).exists()]
    if not paths or len(found) == len(paths):
        return "present"
    return "partial" if found else "missing"


@data.command("list")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also say which datasets this folder holds.",
)
def list_cmd(data_dir: Path | None) -> None:
    """Every dataset, its size, the experiments that read it, and (with --data-dir) whether
    the folder holds it."""
    from hammr.datasets.table import experiments_by_dataset, human_size

    catalogue = _catalogue()
    where = _data_dir(data_dir)
    used = experiments_by_dataset(catalogue)
    rows: list[tuple[str, ...]] = []
    for d in catalogue.datasets:
        exact = d.exact_size()
        size = human_size(exact) if exact is not None else (d.size_approx or "?").split(" (")[0]
        row = [d.name, d.kind, size, ", ".join(used.get(d.name, ())) or "-"]
        if where is not None:
            row.append(presence(d, where))
        rows.append(tuple(row))
    head = ("dataset", "kind", "size", "experiments", *(("in " + str(where),) if where else ()))
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    for r in (head, *rows):
        echo(safe_line("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()))


@data.command("show")
@click.argument("name")
def show_cmd(name: str) -> None:
    """One dataset: what it is, its terms, its official sources and where each goes under
    --data-dir, a URL per image where it publishes one, a Hugging Face copy, and what is
    not confirmed."""
    from hammr.datasets.catalogue import CatalogueError

    catalogue = _catalogue()
    try:
        d = catalogue.get(name)
    except CatalogueError:
        fail(f"no dataset {name!r}; datasets: {', '.join(catalogue.names())}")
    out = [f"{d.name}: {d.title} ({d.kind})", f"  {d.summary}", f"  papers: {', '.join(d.papers)}"]
    out += [f"  homepage: {d.homepage}", f"  terms: {d.terms} ({d.terms_url})"]
    if d.entries:
        out.append(f"  suite entries: {', '.join(d.entries)}")
    if d.images_from:
        out.append(f"  images from: {', '.join(d.images_from)}")
    layout = [*d.layout.files, *d.layout.images, *d.layout.extra]
    out.append(f"  under --data-dir: {', '.join(layout) or '-'}")
    out.append("  sources:")
    for s in d.sources:
        size = f", {s.size:,} bytes" if s.size else (f", {s.size_approx}" if s.size_approx else "")
        check = s.checksum
        summed = f", {check[0]} {check[1]}" if check else ""
        unpack = f", unpacked ({s.unpack})" if s.unpack else ""
        access = ", after a request form" if s.access == "form" else ""
        out.append(f"    {s.name} ({s.kind}{size}{summed}{unpack}{access}) -> {s.target}")
        out.append(f"      {s.url}")
    for p in d.per_image_url:
        out.append(f"  a URL per image: {p.file}, field {p.field!r} -> {p.local}")
    if d.whole_archive_only:
        out.append("  images: only as whole archives")
    if d.hf is not None:
        out.append(f"  Hugging Face copy: {d.hf.repo} ({d.hf.differs})")
    out += [f"  note: {n}" for n in d.notes]
    out += [f"  not confirmed: {t}" for t in d.todo]
    for line in out:
        echo(safe_line(line))


@dataclass(frozen=True)
class EntryCheck:
    suite: str
    entry: str
    status: str
    """present | partial | missing | unreadable"""
    detail: str
    dataset: str | None


def check_entry(suite: Suite, entry: SuiteEntry, data_dir: Path, limit: int | None,
                seed: int, catalogue: Catalogue) -> EntryCheck:  # fmt: skip
    """One entry as a run would read it from ``data_dir`` (see the module docstring)."""
    from hammr.datasets.catalogue import CatalogueError

    try:
        dataset: str | None = catalogue.for_entry(suite.name, entry.name).name
    except CatalogueError:
        dataset = None
    path = entry.file_path(data_dir)
    if not path.exists():
        return EntryCheck(suite.name, entry.name, "missing", f"no {path}", dataset)
    try:
        drawn = suite.select((entry.name,)).samples(data_dir, limit=limit, seed=seed)
    except (ValueError, OSError) as e:
        return EntryCheck(suite.name, entry.name, "unreadable", f"cannot read it: {e}", dataset)
    whole = sum(1 for _, s in drawn if all(p.exists() for p in s.images.values()))
    if whole == len(drawn):
        return EntryCheck(suite.name, entry.name, "present", f"{len(drawn)} samples", dataset)
    have = f"{whole} of {len(drawn)} drawn samples have their images"
    return EntryCheck(suite.name, entry.name, "partial", have, dataset)


def _suites_of(experiment: str | None, demo: bool) -> list[tuple[Suite, Sequence[str]]]:
    """(suite, entries) a run of ``experiment`` reads (every bundled non-demo suite when
    None)."""
    from hammr.eval.suites import available_suites, load_suite
    from hammr.experiments import ExperimentError, load_experiment

    if experiment is None:
        names = [n for n in available_suites() if "demo" not in n]
        return [(load_suite(n), ()) for n in names]
    try:
        e = load_experiment(experiment)
    except ExperimentError as err:
        fail(str(err))
    seen: dict[str, set[str]] = {}
    for run in e.runs:
        suite = e.data.demo_suite if demo and e.data.demo_suite else run.suite
        wanted = set(run.entries) if run.entries and not demo else {"*"}
        seen.setdefault(suite, set()).update(wanted)
    out: list[tuple[Suite, Sequence[str]]] = []
    for name, entries in seen.items():
        out.append((load_suite(name), () if "*" in entries else tuple(sorted(entries))))
    return out


@data.command("check", epilog=EPILOG)
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The data folder, as `hammr experiment run --data-dir` reads it.",
)
@click.option("--experiment", "experiment", help="Only the suite entries its runs read.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="Samples per entry, drawn as `run --limit` draws them (default: the experiment's "
    "[data] limit; without --experiment, all).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="As `run --seed`.")
@click.option("--demo", is_flag=True, help="The experiment's demo suite instead.")
def check_cmd(
    data_dir: Path, experiment: str | None, limit: int | None, seed: int, demo: bool
) -> None:
    """Per suite entry: present, partial (how many of the drawn samples' images are there)
    or missing, and for what is missing, the official sources and where each goes; a file
    there that cannot be read is an error line. Exit status 0 when every entry is present,
    1 otherwise."""
    from hammr.experiments import ExperimentError, load_experiment

    where = _data_dir(data_dir)
    assert where is not None
    catalogue = _catalogue()
    if limit is None and experiment is not None:
        try:
            e = load_experiment(experiment)
        except ExperimentError as err:
            fail(str(err))
        limit = e.data.demo_questions if demo else e.data.limit
    results: list[EntryCheck] = []
    for suite, entries in _suites_of(experiment, demo):
        for entry in suite.entries:
            if entries and entry.name not in entries:
                continue
            results.append(check_entry(suite, entry, where, limit, seed, catalogue))
    for r in results:
        if r.status == "unreadable":  # a file there that no run could read: an error
            echo(safe_line(f"hammr: error: {r.suite}/{r.entry}: {r.detail}"), err=True)
            continue
        echo(safe_line(f"{r.status:8} {r.suite}/{r.entry}: {r.detail}"))
    gaps = sorted({r.dataset for r in results if r.status != "present" and r.dataset})
    for d in catalogue.with_images([catalogue.get(name) for name in gaps]):
        if presence(d, where) == "present":
            continue
        echo(safe_line(f"{d.name}: the official sources (`hammr data show {d.name}`):"))
        for s in d.sources:
            echo(safe_line(f"  {s.url} -> {where / s.target}"))
    missing = sum(1 for r in results if r.status != "present")
    echo(f"{len(results) - missing} of {len(results)} entries present in {where}")
    raise SystemExit(1 if missing else 0)


__all__ = ["EntryCheck", "check_entry", "data", "presence"]
