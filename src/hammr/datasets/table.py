"""The catalogue as a Markdown table, the one docs/data.md shows between its markers
(tests/test_data_catalogue.py checks that the page holds exactly this table).

Rewrite the page's table after editing the catalogue with::

    python -m hammr.datasets.table docs/data.md
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from hammr.datasets.catalogue import Catalogue, Dataset
from hammr.datasets.catalogue_file import load_catalogue
from hammr.datasets.sources import human_size

__all__ = [
    "BEGIN",
    "DISK_BEGIN",
    "DISK_END",
    "END",
    "disk_needs",
    "experiments_by_dataset",
    "page_table",
    "render_disk_table",
    "render_table",
    "replace_table",
]

BEGIN = "<!-- data-catalogue: generated from src/hammr/datasets/catalogue.toml -->"
END = "<!-- /data-catalogue -->"
DISK_BEGIN = "<!-- data-disk: generated from the catalogue and the bundled experiments -->"
DISK_END = "<!-- /data-disk -->"


def experiments_by_dataset(catalogue: Catalogue) -> dict[str, tuple[str, ...]]:
    """Per dataset name, the bundled experiments whose runs read it (sorted)."""
    from hammr.experiments import bundled_names

    found: dict[str, list[str]] = {name: [] for name in catalogue.names()}
    for experiment in bundled_names():
        for dataset in catalogue.for_experiment(experiment):
            found[dataset.name].append(experiment)
    return {name: tuple(sorted(names)) for name, names in found.items()}


def _size(d: Dataset) -> str:
    exact = d.exact_size()
    if exact is not None:
        return human_size(exact)
    return d.size_approx or "not known"


def _used_by(d: Dataset, experiments: Sequence[str]) -> str:
    """'hammr: table2, table3' per paper (an experiment's name less its paper's prefix)."""
    if not experiments:
        return ", ".join(d.papers)
    by_paper: dict[str, list[str]] = {}
    for name in experiments:
        paper = next((p for p in d.papers if name.startswith(f"{p}-")), "")
        by_paper.setdefault(paper, []).append(name.removeprefix(f"{paper}-") if paper else name)
    return "; ".join(
        f"{paper}: {', '.join(names)}" if paper else ", ".join(names)
        for paper, names in by_paper.items()
    )


def _kinds(d: Dataset) -> str:
    kinds = []
    if d.per_image_url:
        kinds.append("per-image URLs")
    if d.whole_archive_only:
        kinds.append("whole archive only")
    if any(s.access == "form" for s in d.sources):
        kinds.append("request form")
    if d.hf is not None:
        kinds.append("on the hub (publisher's own)" if d.hf.publisher else "hub copy")
    return ", ".join(kinds) or "direct files"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(catalogue: Catalogue, experiments: Mapping[str, Sequence[str]]) -> str:
    """The Markdown table: name, what it is, size, papers and experiments, kind of source."""
    lines = [
        "| Dataset | What it is | Size | Papers: experiments | Sources |",
        "| --- | --- | --- | --- | --- |",
    ]
    for d in catalogue.datasets:
        cells = [
            f"`{d.name}`: {d.title}",
            d.summary,
            _size(d),
            _used_by(d, experiments.get(d.name, ())),
            _kinds(d),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def disk_needs(catalogue: Catalogue, experiment: str) -> tuple[int, int, int, int]:
    """(bytes of everything, bytes with the experiment's own --limit, images fetched one by
    one with that limit (negative: one per sample, the experiment drawing every sample),
    sources whose size is not known) for ``experiment``: what
    ``hammr data get`` fetches without a draw, and with one. Sizes as the catalogue states
    them; an image fetched by URL is counted, not sized."""
    from hammr.datasets.draw import wants_of_experiment
    from hammr.datasets.sources import FILE_KINDS, is_part, source_bytes
    from hammr.experiments import load_experiment

    limit = load_experiment(experiment).data.limit
    datasets = catalogue.for_experiment(experiment)
    whole = drawn = unknown = 0
    # images by URL, unless the source of their URLs is a hub repository fetched whole
    by_url = {
        d.name
        for d in datasets
        if any(d.source(p.source).kind != "hub_repo" for p in d.per_image_url)
    }
    for d in datasets:
        for s in d.sources:
            if s.access != "open" or s.kind == "hub_repo":
                continue
            size = source_bytes(s) or 0
            unknown += size == 0
            count = s.parts or 1
            whole += size * count
            needed_in_draw = s.kind in FILE_KINDS or is_part(d, s)
            if s.kind == "images_archive" and d.name not in by_url:
                needed_in_draw = True
            if s.kind == "url_list":
                needed_in_draw = any(
                    p.source == s.name and not p.name_pattern for p in d.per_image_url
                )
            drawn += size * count if needed_in_draw else 0
    images = 0
    for want in wants_of_experiment(experiment):
        d = catalogue.for_entry(want.suite.name, want.entry)
        readers = {d.name, *d.images_from}
        if readers & by_url:
            per_sample = 2 if d.name == "nlvr2" else 1
            images += (limit or 0) * per_sample or -1
    return whole, drawn, images, unknown


def render_disk_table(catalogue: Catalogue) -> str:
    """Per bundled experiment: the disk everything takes, and what its own --limit takes."""
    from hammr.experiments import bundled_names, load_experiment

    lines = [
        "| Experiment | Everything | With the experiment's draw | Images fetched one by one |",
        "| --- | --- | --- | --- |",
    ]
    for name in bundled_names():
        if not catalogue.for_experiment(name):
            continue
        whole, drawn, images, unknown = disk_needs(catalogue, name)
        more = f" + {unknown} of unknown size" if unknown else ""
        limit = load_experiment(name).data.limit
        drawn_text = f"{human_size(drawn)}{more}"
        if images < 0:
            count = "one per question (it asks every question)"
        else:
            count = f"about {images:,}" if images else "-"
        cells = [
            f"`{name}`",
            f"{human_size(whole)}{more}",
            f"{drawn_text} (--limit {limit})" if limit else f"{drawn_text} (every question)",
            count,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def page_table(page: str, begin: str = BEGIN, end_marker: str = END) -> str:
    """The text between the markers of ``page`` (ValueError when they are missing)."""
    start, end = page.find(begin), page.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"the page lacks the markers {begin} ... {end_marker}")
    return page[start + len(begin) : end].strip("\n") + "\n"


def replace_table(page: str, table: str, begin: str = BEGIN, end_marker: str = END) -> str:
    """``page`` with ``table`` between its markers."""
    page_table(page, begin, end_marker)  # the markers are there
    start, end = page.find(begin) + len(begin), page.find(end_marker)
    return page[:start] + "\n" + table + page[end:]


def main(argv: Sequence[str]) -> int:
    from hammr.input_file import read_input_text
    from hammr.output_file import write_output
    from hammr.terminal_text import echo

    if len(argv) != 1:
        echo("usage: python -m hammr.datasets.table docs/data.md", err=True)
        return 2
    catalogue = load_catalogue()
    page = read_input_text(argv[0])
    page = replace_table(page, render_table(catalogue, experiments_by_dataset(catalogue)))
    page = replace_table(page, render_disk_table(catalogue), DISK_BEGIN, DISK_END)
    write_output(argv[0], page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
