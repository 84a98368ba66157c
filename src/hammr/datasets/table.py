"""The catalogue as a Markdown table, the one docs/data.md shows between its markers
(tests/test_data_catalogue.py checks that the page holds exactly this table).

Rewrite the page's table after editing the catalogue with::

    python -m hammr.datasets.table docs/data.md
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from hammr.datasets.catalogue import Catalogue, Dataset, load_catalogue

__all__ = [
    "BEGIN",
    "END",
    "experiments_by_dataset",
    "page_table",
    "render_table",
    "replace_table",
]

BEGIN = "<!-- data-catalogue: generated from src/hammr/datasets/catalogue.toml -->"
END = "<!-- /data-catalogue -->"


def experiments_by_dataset(catalogue: Catalogue) -> dict[str, tuple[str, ...]]:
    """Per dataset name, the bundled experiments whose runs read it (sorted)."""
    from hammr.experiments import bundled_names

    found: dict[str, list[str]] = {name: [] for name in catalogue.names()}
    for experiment in bundled_names():
        for dataset in catalogue.for_experiment(experiment):
            found[dataset.name].append(experiment)
    return {name: tuple(sorted(names)) for name, names in found.items()}


def human_size(size: int) -> str:
    """Bytes as a person reads them (decimal units, as publishers state sizes)."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


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


def page_table(page: str) -> str:
    """The text between the markers of ``page`` (ValueError when they are missing)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page lacks the markers {BEGIN} ... {END}")
    return page[start + len(BEGIN) : end].strip("\n") + "\n"


def replace_table(page: str, table: str) -> str:
    """``page`` with ``table`` between its markers."""
    page_table(page)  # the markers are there
    start, end = page.find(BEGIN) + len(BEGIN), page.find(END)
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
    write_output(
        argv[0], replace_table(page, render_table(catalogue, experiments_by_dataset(catalogue)))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
