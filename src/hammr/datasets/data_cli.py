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
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hammr.cli_common import fail
from hammr.terminal_text import echo, safe_line

if TYPE_CHECKING:
    from hammr.datasets.catalogue import Catalogue, Dataset
    from hammr.datasets.draw import Want
    from hammr.datasets.get import GetOutcome

EPILOG = """\b
Examples:
  hammr data list
  hammr data list --data-dir ~/data/vqa
  hammr data show encvqa
  hammr data get --data-dir ~/data/vqa --experiment hammr-table3 --limit 100 --dry-run
  hammr data get --data-dir ~/data/vqa --experiment hammr-table3 --limit 100 --yes
  hammr data get okvqa infoseek --data-dir ~/data/vqa --limit 50
  hammr data check --data-dir ~/data/vqa --experiment hammr-table3 --limit 100
"""


CATALOGUE_KEY = "hammr.data.catalogue"


@click.group("data", epilog=EPILOG)
@click.option(
    "--catalogue",
    "catalogue_file",
    envvar="HAMMR_DATA_CATALOGUE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A catalogue file of one's own (the bundled catalogue.toml's format: e.g. a lab's "
    "copy with its own checksums or datasets) instead of the bundled one. "
    "[env: HAMMR_DATA_CATALOGUE]",
)
@click.pass_context
def data(ctx: click.Context, catalogue_file: Path | None) -> None:
    """The datasets the papers' tables read: where each comes from, and what a data folder
    holds of them."""
    ctx.meta[CATALOGUE_KEY] = catalogue_file


def _catalogue() -> Catalogue:
    from hammr.datasets.catalogue import CatalogueError
    from hammr.datasets.catalogue_file import load_catalogue
    from hammr.input_file import read_input_text

    path = click.get_current_context().meta.get(CATALOGUE_KEY)
    if path is None:
        try:
            return load_catalogue()
        except CatalogueError as e:
            fail(f"the bundled dataset catalogue is broken: {e}")
    try:
        text = read_input_text(path)
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--catalogue {path}: cannot be read ({e})")
    try:
        return load_catalogue(text)
    except CatalogueError as e:
        fail(f"--catalogue {path}: {e}")


def _data_dir(path: Path | None) -> Path | None:
    if path is None:
        return None
    where = path.expanduser()
    if not where.is_dir():
        fail(f"--data-dir {path}: no such folder")
    return where


def _non_empty(folder: Path) -> bool:
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:
        return False


def presence(d: Dataset, data_dir: Path) -> str:
    """Whether ``data_dir`` holds the dataset's layout: present, partial or missing."""
    paths = [*d.layout.files, *d.layout.images]
    # an empty folder (one a link of the layout made ready) holds nothing yet
    found = [p for p in paths if (data_dir / p).is_file() or _non_empty(data_dir / p)]
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
    from hammr.datasets.sources import human_size
    from hammr.datasets.table import experiments_by_dataset

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


def _wants_for_check(experiment: str | None, demo: bool) -> list[Want]:
    """What a run of ``experiment`` reads (every bundled non-demo suite when None)."""
    from hammr.datasets.draw import wants_of_experiment, wants_of_suites
    from hammr.eval.suites import available_suites, load_suite
    from hammr.experiments import ExperimentError

    if experiment is None:
        return wants_of_suites([load_suite(n) for n in available_suites() if "demo" not in n])
    try:
        return wants_of_experiment(experiment, demo=demo)
    except ExperimentError as err:
        fail(str(err))


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
    from hammr.datasets.draw import draw
    from hammr.datasets.hints import get_command
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
    results = draw(_wants_for_check(experiment, demo), where, limit=limit, seed=seed)
    gaps: list[tuple[str, str]] = []
    for r in results:
        if r.status == "unreadable":  # a file there that no run could read: an error
            echo(safe_line(f"hammr: error: {r.suite}/{r.entry}: {r.detail}"), err=True)
            continue
        if r.status == "missing":
            status, detail = "missing", r.detail
        else:
            whole = r.whole()
            status = "present" if whole == len(r.samples) else "partial"
            detail = (
                f"{len(r.samples)} samples"
                if status == "present"
                else f"{whole} of {len(r.samples)} drawn samples have their images"
            )
        if status != "present":
            gaps.append((r.suite, r.entry))
        echo(safe_line(f"{status:8} {r.suite}/{r.entry}: {detail}"))
    names = {d.name for g in gaps if (d := catalogue.find_entry(*g)) is not None}
    for d in catalogue.with_images([catalogue.get(name) for name in sorted(names)]):
        if presence(d, where) == "present":
            continue
        echo(safe_line(f"{d.name}: the official sources (`hammr data show {d.name}`):"))
        for source in d.sources:
            echo(safe_line(f"  {source.url} -> {where / source.target}"))
    missing = sum(1 for r in results if r.status != "drawn" or r.whole() != len(r.samples))
    echo(f"{len(results) - missing} of {len(results)} entries present in {where}")
    if gaps and not demo:
        command = get_command(gaps, where, experiment=experiment, limit=limit)
        if command is not None:
            echo(safe_line(f"to fetch what is missing: {command}"))
    raise SystemExit(1 if missing else 0)


@data.command("get", epilog=EPILOG)
@click.argument("names", nargs=-1)
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The data folder to fill (made when missing), as `hammr experiment run --data-dir` "
    "reads it.",
)
@click.option(
    "--experiment",
    "experiment",
    help="The datasets its runs read, and only the images of the samples they will draw.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="Samples per entry, drawn as `run --limit` draws them: only their images are fetched "
    "(default with --experiment: its [data] limit; without either, everything).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="As `run --seed`.")
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Fetch downloads of 1 GB or more (listed with their size otherwise, and left out).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be fetched; fetch nothing.")
@click.option(
    "--mirror",
    metavar="URL",
    help="Fetch every URL from this mirror instead, as URL/HOST/PATH (a lab's local copy).",
)
@click.option(
    "--hub-endpoint",
    metavar="URL",
    help="The Hugging Face hub to fetch hub repositories from (default: $HF_ENDPOINT, else "
    "huggingface.co).",
)
@click.option(
    "--connections", default=4, show_default=True, type=click.IntRange(1, 32),
    help="Downloads at once (images are fetched concurrently).",
)  # fmt: skip
@click.option(
    "--timeout", "timeout_s", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
    help="Seconds a server may stay silent before the transfer is retried.",
)  # fmt: skip
@click.option("--retries", default=4, show_default=True, type=click.IntRange(0, 20),
              help="Tries after the first, each waiting twice as long.")  # fmt: skip
@click.option(
    "--retry-wait", "retry_wait_s", default=2.0, show_default=True,
    type=click.FloatRange(min=0.0), help="Seconds before the first retry.",
)  # fmt: skip
@click.option("--keep-archives", is_flag=True, help="Keep archives once unpacked.")
@click.option(
    "--hub", is_flag=True, help="The Hugging Face copy instead (into DIR/hub/OWNER/NAME; needs "
    'pip install "hammr[data]"), and the suite entry that reads it; the paper tables read the '
    "official files.",
)  # fmt: skip
@click.option(
    "--progress/--no-progress", default=None, help="Progress bars (default: on a terminal)."
)
def get_cmd(
    names: tuple[str, ...],
    data_dir: Path,
    experiment: str | None,
    limit: int | None,
    seed: int,
    yes: bool,
    dry_run: bool,
    mirror: str | None,
    hub_endpoint: str | None,
    connections: int,
    timeout_s: float,
    retries: int,
    retry_wait_s: float,
    keep_archives: bool,
    hub: bool,
    progress: bool | None,
) -> None:
    """Fetch datasets into a data folder from their official sources: resumable, checked,
    unpacked where the suites read them. With --experiment or --limit, only the images of
    the samples the runs will draw, each from the URL its dataset publishes for it; what
    comes only as a whole archive is listed with its size first. Exit status 0 when every
    entry asked for is complete, 1 otherwise; run it again to finish."""
    import os
    import socket
    import sys

    from hammr.datasets.draw import wants_of_experiment
    from hammr.datasets.get import GetOptions, Getter
    from hammr.datasets.record import RecordError
    from hammr.experiments import ExperimentError, load_experiment
    from hammr.output_file import LockHeld, OutputError, exclusive_lock

    catalogue = _catalogue()
    if not names and experiment is None:
        fail("name the datasets to fetch, or give --experiment (`hammr data list` lists them)")
    unknown = [n for n in names if n not in catalogue.names()]
    if unknown:
        fail(f"no dataset {unknown[0]!r}; datasets: {', '.join(catalogue.names())}")
    picked = [catalogue.get(n) for n in names]
    wants = []
    if experiment is not None:
        try:
            e = load_experiment(experiment)
            wants = wants_of_experiment(experiment)
            of_experiment = catalogue.for_experiment(experiment)
        except ExperimentError as err:
            fail(str(err))
        limit = limit if limit is not None else e.data.limit
        if not picked:
            picked = list(of_experiment)
        wants = [w for w in wants if catalogue.find_entry(w.suite.name, w.entry) in picked]
    elif limit is not None:
        # an images dataset is drawn from through the question sets that read it
        readers = [q for d in picked for q in catalogue.datasets if d.name in q.images_from]
        for q in readers:
            if q not in picked:
                echo(safe_line(f"{q.name}: read for its drawn samples' images"))
                picked.append(q)
        wants = _wants_of_datasets(picked)
    datasets = catalogue.with_images(picked)
    where = data_dir.expanduser()
    if where.exists() and not where.is_dir():
        fail(f"--data-dir {data_dir}: not a folder")
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"--data-dir {data_dir}: cannot make it ({err.strerror or err})")
    options = GetOptions(
        data_dir=where,
        datasets=datasets,
        wants=tuple(wants),
        drawing=experiment is not None or limit is not None,
        limit=limit,
        seed=seed,
        mirror=mirror,
        hub_endpoint=hub_endpoint,
        yes=yes,
        dry_run=dry_run,
        keep_archives=keep_archives,
        hub=hub,
        connections=connections,
        timeout_s=timeout_s,
        retries=retries,
        retry_wait_s=retry_wait_s,
        progress=sys.stderr.isatty() if progress is None else progress,
    )
    holder = f"hammr data get, pid {os.getpid()} on {socket.gethostname()}"
    try:
        with exclusive_lock(where / ".hammr-data-get.lock", holder):
            try:
                getter = Getter(catalogue, options, lambda line: echo(safe_line(line)))
            except RecordError as err:
                fail(str(err))
            outcome = getter.run()
    except LockHeld as err:
        fail(
            f"another `hammr data get` is filling {where} ({err.holder}); run this again "
            "when it has ended"
        )
    except OutputError as err:
        fail(f"--data-dir {data_dir}: {err.reason}")
    _report_get(outcome, where, dry_run)


def _wants_of_datasets(picked: Sequence[Dataset]) -> list[Want]:
    from hammr.datasets.draw import Want
    from hammr.eval.suites import load_suite

    out: list[Want] = []
    for d in picked:
        for ref in d.entries:
            suite, entry = ref.split("/", 1)
            out.append(Want(load_suite(suite), entry))
    return out


def _report_get(outcome: GetOutcome, where: Path, dry_run: bool) -> None:
    from hammr.datasets.sources import human_size

    for line in outcome.by_request:
        echo(safe_line(f"by request form: {line}"))
    for line in outcome.skipped_big:
        echo(safe_line(f"left out (large): {line}"))
    for line in outcome.failures:
        echo(safe_line(f"failed: {line}"))
    for d in outcome.draws:
        if d.status == "drawn":
            whole = d.whole()
            state = "present" if whole == len(d.samples) else "partial"
            detail = f"{whole} of {len(d.samples)} drawn samples have their images"
        else:
            state, detail = d.status, d.detail
        echo(safe_line(f"{state:8} {d.suite}/{d.entry}: {detail}"))
    if dry_run:
        echo("dry run: nothing was fetched")
        raise SystemExit(0)
    echo(
        safe_line(
            f"fetched {len(outcome.fetched)} files and {outcome.images_fetched} images "
            f"({human_size(outcome.transferred)}) into {where}"
        )
    )
    if outcome.complete:
        echo("complete")
        raise SystemExit(0)
    echo("not complete: fix what the lines above say and run the same command again")
    if outcome.failures:
        first = outcome.failures[0]
        more = f" (and {len(outcome.failures) - 1} more above)" if len(outcome.failures) > 1 else ""
        echo(safe_line(f"hammr: error: {first}{more}"), err=True)
    raise SystemExit(1)


__all__ = ["data", "presence"]
