"""The dataset catalogue (hammr.datasets): it covers every entry of every bundled non-demo
suite with the paths those entries read, names only entries that exist, holds well-formed
URLs, sizes and checksums, agrees with the experiments, matches docs/data.md's table, and
refuses a malformed catalogue naming the dataset and the field."""

from __future__ import annotations

import re
from dataclasses import replace
from importlib import resources
from pathlib import Path, PurePosixPath

import pytest

from conftest import ROOT
from hammr.datasets.catalogue import (
    PAPERS,
    Catalogue,
    CatalogueError,
    Dataset,
)
from hammr.datasets.catalogue_file import load_catalogue
from hammr.datasets.table import (
    BEGIN,
    END,
    experiments_by_dataset,
    page_table,
    render_disk_table,
    render_table,
    replace_table,
)
from hammr.eval.suites import Suite, available_suites, load_suite
from hammr.experiments import bundled_names, load_experiment

DEMO_SUITES = {"demo", "muse-demo", "mevqa-demo"}
"""Suites that read the bundled examples/demo and need no download."""

CATALOGUE = load_catalogue()


def data_suites() -> list[Suite]:
    return [load_suite(name) for name in available_suites() if name not in DEMO_SUITES]


def under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it ('.' holds everything)."""
    return folder == "." or path == folder or path.startswith(folder.rstrip("/") + "/")


def questions() -> list[Dataset]:
    return [d for d in CATALOGUE.datasets if d.kind == "questions"]


def test_the_catalogue_is_package_data() -> None:
    file = resources.files("hammr.datasets").joinpath("catalogue.toml")
    assert file.is_file()
    assert load_catalogue(file.read_text(encoding="utf-8")) == CATALOGUE


# -- (a), (b): the catalogue against the suites ------------------------------------------------


def test_the_demo_suites_read_only_the_bundled_examples() -> None:
    for name in DEMO_SUITES:
        suite = load_suite(name)
        assert suite.entries, name
    assert set(available_suites()) >= DEMO_SUITES
    assert data_suites(), "no suite needs data: the catalogue would be empty"


def test_every_entry_of_every_data_suite_is_covered_by_exactly_one_dataset() -> None:
    problems = []
    for suite in data_suites():
        for entry in suite.entries:
            key = f"{suite.name}/{entry.name}"
            owners = [d.name for d in CATALOGUE.datasets if key in d.entries]
            if len(owners) != 1:
                problems.append(f"{key}: listed by {owners or 'no dataset'}")
            else:
                assert CATALOGUE.for_entry(suite.name, entry.name).name == owners[0]
    assert not problems, "\n".join(problems)


def test_each_layout_equals_the_paths_its_entries_read() -> None:
    suites = {s.name: s for s in data_suites()}
    for d in questions():
        files, images = set(), set()
        for key in d.entries:
            suite, _, name = key.partition("/")
            entry = suites[suite].entry(name)
            files.add(entry.file)
            if entry.images is not None:
                images.add(entry.images)
        assert set(d.layout.files) == files, d.name
        assert set(d.layout.images) == images, d.name


def test_every_catalogue_entry_names_a_suite_entry_that_exists() -> None:
    known = {f"{s.name}/{e.name}" for s in data_suites() for e in s.entries}
    listed = [e for d in CATALOGUE.datasets for e in d.entries]
    assert set(listed) <= known, sorted(set(listed) - known)
    assert len(listed) == len(set(listed))


def test_image_lists_the_entries_name_are_laid_out_beside_their_files() -> None:
    suites = {s.name: s for s in data_suites()}
    for d in questions():
        for key in d.entries:
            suite, _, name = key.partition("/")
            entry = suites[suite].entry(name)
            image_list = entry.options.get("image_list")
            if image_list:
                path = str(PurePosixPath(entry.file).parent / image_list)
                assert path in d.layout.extra, (d.name, path)


def test_every_image_folder_of_a_questions_dataset_is_filled_by_something() -> None:
    """Each image path an entry reads comes from the dataset's own sources, an images
    dataset it names, a link, a folder the adapter writes, or per-image URLs."""
    for d in questions():
        fillers = [s.target for s in d.sources] + [m.to for s in d.sources for m in s.members]
        fillers += [p for name in d.images_from for p in CATALOGUE.get(name).layout.images]
        fillers += [link.path for link in d.layout.links] + list(d.layout.generated)
        fillers += [p.local.split("{")[0].rstrip("/") for p in d.per_image_url]
        for folder in d.layout.images:
            assert any(under(f, folder) for f in fillers), (d.name, folder)


def test_links_point_into_the_images_datasets_named() -> None:
    for d in CATALOGUE.datasets:
        folders = [p for name in d.images_from for p in CATALOGUE.get(name).layout.images]
        for link in d.layout.links:
            if not link.optional:
                assert any(under(link.target, f) for f in folders), (d.name, link)


def test_every_images_dataset_is_read_by_some_questions_dataset() -> None:
    read = {name for d in questions() for name in d.images_from}
    images = {d.name for d in CATALOGUE.datasets if d.kind == "images"}
    assert images == read


def test_every_source_lands_inside_its_dataset_layout() -> None:
    for d in CATALOGUE.datasets:
        layout = [
            *d.layout.files,
            *d.layout.images,
            *d.layout.extra,
            *d.layout.generated,
        ]
        for s in d.sources:
            places = [m.to for m in s.members] or [s.target]
            for place in places:
                assert any(under(place, p) for p in layout), (d.name, s.name, place)


def test_per_image_url_files_come_from_their_sources() -> None:
    for d in CATALOGUE.datasets:
        for p in d.per_image_url:
            source = d.source(p.source)
            places = [m.to for m in source.members] or [source.target]
            assert any(under(p.file, place) for place in places), (d.name, p)
            assert re.fullmatch(r"[^{}]*(\{\w+(:[^{}]*)?\}[^{}]*)+", p.local), p.local


# -- (c): URLs, sizes, checksums ---------------------------------------------------------------


def all_urls(d: Dataset) -> list[tuple[str, str]]:
    """(url, reason it may be http) of every URL in the dataset."""
    urls = [(d.homepage, ""), (d.terms_url, "")]
    for s in d.sources:
        urls += [(u, s.http_reason) for u in s.urls()]
        if s.checksum_url:
            urls.append((s.checksum_url.replace("{part}", "000"), ""))
    urls += [(p.url_template, p.http_reason) for p in d.per_image_url if p.url_template]
    return urls


def test_urls_are_https_or_say_why_not() -> None:
    for d in CATALOGUE.datasets:
        for url, http_reason in all_urls(d):
            # http only where the publisher links nothing else (COCO's images host); the
            # reason is in the catalogue next to the URL
            assert url.startswith("https://") or (url.startswith("http://") and http_reason), (
                d.name,
                url,
            )
            bare = re.sub(r"\{\w+(:\w+)?\}", "", url)  # a template's placeholders
            assert not re.search(r"[\s{}]", bare), url


def test_numbered_series_expand_to_every_part() -> None:
    series = [s for d in CATALOGUE.datasets for s in d.sources if s.parts]
    assert series, "the catalogue has no numbered series (Google Landmarks' 500 archives)"
    for s in series:
        urls = s.urls()
        assert len(urls) == s.parts and len(set(urls)) == s.parts
        assert all("{part}" not in u for u in urls)
    gld = CATALOGUE.get("google_landmarks_v2").source("train_archives").urls()
    assert gld[0].endswith("images_000.tar") and gld[-1].endswith("images_499.tar")


def test_sizes_are_positive_integers_and_checksums_hex_of_their_length() -> None:
    sizes = checksums = 0
    for d in CATALOGUE.datasets:
        for s in d.sources:
            if s.size is not None:
                assert isinstance(s.size, int) and not isinstance(s.size, bool) and s.size > 0
                sizes += 1
            if s.sha256:
                assert re.fullmatch(r"[0-9a-f]{64}", s.sha256), (d.name, s.name)
            if s.md5:
                assert re.fullmatch(r"[0-9a-f]{32}", s.md5), (d.name, s.name)
            checksums += s.checksum is not None
        if d.hf is not None:
            for digest in d.hf.file_sha256.values():
                assert re.fullmatch(r"[0-9a-f]{64}", digest), d.name
    assert sizes and checksums


def test_what_was_not_confirmed_is_said() -> None:
    """A source with neither an exact nor a stated size, a licence line that names none, or
    a hub copy without its columns leaves a todo saying what is missing."""
    for d in CATALOGUE.datasets:
        unsized = [s for s in d.sources if s.access == "open" and not s.size and not s.size_approx]
        if unsized and not d.size_approx:
            assert any("size" in t for t in d.todo), (d.name, [s.name for s in unsized])
        if d.hf is not None and not d.hf.publisher and not d.hf.answers and d.kind == "questions":
            assert d.todo, d.name


def test_publishers_own_hub_releases_are_marked() -> None:
    for name in ("vstar", "hrbench", "mme_realworld_lite", "zoombench"):
        hub = CATALOGUE.get(name).hf
        assert hub is not None and hub.publisher, name
    for d in CATALOGUE.datasets:
        if d.hf is not None:
            assert d.hf.differs and "/" in d.hf.repo


def test_whole_archive_only_datasets_say_their_size_or_why_not() -> None:
    for d in CATALOGUE.datasets:
        if d.whole_archive_only:
            assert d.exact_size() or d.size_approx or any("size" in t for t in d.todo), d.name


# -- papers and experiments --------------------------------------------------------------------


def test_papers_agree_with_the_experiments_that_read_each_dataset() -> None:
    read_by: dict[str, set[str]] = {d.name: set() for d in CATALOGUE.datasets}
    for name in bundled_names():
        paper = load_experiment(name).paper
        assert paper in PAPERS, (name, paper)
        for d in CATALOGUE.for_experiment(name):
            read_by[d.name].add(paper)
    for d in CATALOGUE.datasets:
        assert set(d.papers) == read_by[d.name], d.name


def test_hammr_table3_reads_the_generic_vqa_datasets_and_their_images() -> None:
    names = [d.name for d in CATALOGUE.for_experiment("hammr-table3")]
    for question_set in ("pointqa", "encvqa", "nlvr2", "gqa", "tallyqa", "textvqa"):
        assert question_set in names
        for images in CATALOGUE.get(question_set).images_from:
            assert images in names
    assert {"visual_genome", "inaturalist_2021", "google_landmarks_v2", "gqa_images"} <= set(names)
    assert not {"okvqa", "infoseek", "vstar", "mevqa"} & set(names)
    assert names == [n for n in CATALOGUE.names() if n in names], "catalogue order"


def test_an_experiment_reading_some_entries_gets_only_their_datasets() -> None:
    avis = {d.name for d in CATALOGUE.for_experiment("avis-table3")}
    assert avis == {"infoseek", "oven_images", "okvqa", "coco_val2014"}
    mulprog = {d.name for d in CATALOGUE.for_experiment("mulprog-explanations")}
    assert mulprog == {"mevqa", "gqa_images"}


def test_unknown_names_are_catalogue_errors() -> None:
    with pytest.raises(CatalogueError, match="no catalogue dataset lists"):
        CATALOGUE.for_entry("generic-vqa", "nope")
    with pytest.raises(CatalogueError, match="no dataset 'nope'"):
        CATALOGUE.get("nope")


# -- (d): docs/data.md -------------------------------------------------------------------------


def test_docs_table_is_the_rendered_catalogue() -> None:
    page = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")
    assert BEGIN in page and END in page
    expected = render_table(CATALOGUE, experiments_by_dataset(CATALOGUE))
    assert page_table(page) == expected, (
        "docs/data.md's table differs from the catalogue: run "
        "`python -m hammr.datasets.table docs/data.md`"
    )
    for d in CATALOGUE.datasets:
        assert f"`{d.name}`" in page


def test_the_table_is_replaced_between_the_markers_only() -> None:
    page = f"intro\n{BEGIN}\nold\n{END}\noutro\n"
    assert replace_table(page, "| new |\n") == f"intro\n{BEGIN}\n| new |\n{END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        page_table("no markers here")


def test_a_table_row_escapes_pipes() -> None:
    one = replace(CATALOGUE.get("gqa"), summary="questions | answers")
    table = render_table(Catalogue((one,)), {"gqa": ("hammr-table2", "mulprog-fig11")})
    assert table.count("\n") == 3
    assert "questions \\| answers" in table and "hammr: table2; mulprog-fig11" in table


# -- (f): a malformed catalogue ----------------------------------------------------------------

GOOD = """
version = 1

[[dataset]]
name = "things"
kind = "questions"
title = "Things"
summary = "questions about things"
papers = ["hammr"]
homepage = "https://example.org"
terms = "CC BY 4.0"
terms_url = "https://example.org/terms"
entries = ["generic-vqa/gqa"]
images_from = ["pictures"]

[dataset.layout]
files = ["things/q.json"]
images = ["things/images"]

[[dataset.source]]
name = "questions"
kind = "questions"
url = "https://example.org/q.json"
size = 10
sha256 = "SHA"
target = "things/q.json"

[[dataset]]
name = "pictures"
kind = "images"
title = "Pictures"
summary = "pictures"
papers = ["hammr"]
homepage = "https://example.org"
terms = "CC BY 4.0"
terms_url = "https://example.org/terms"

[dataset.layout]
images = ["things/images"]

[[dataset.source]]
name = "archive"
kind = "images_archive"
url = "https://example.org/images.zip"
md5 = "MD5"
target = "things"
unpack = "zip"
members = [{ from = "images/", to = "things/images/" }]
""".replace("SHA", "a" * 64).replace("MD5", "b" * 32)


def test_a_good_small_catalogue_loads() -> None:
    catalogue = load_catalogue(GOOD)
    things = catalogue.get("things")
    assert things.sources[0].checksum == ("sha256", "a" * 64)
    assert things.exact_size() == 10
    assert catalogue.get("pictures").sources[0].members[0].to == "things/images"
    assert [d.name for d in catalogue.for_entries([("generic-vqa", "gqa")])] == [
        "things",
        "pictures",
    ]


@pytest.mark.parametrize(
    ("old", "new", "dataset", "field"),
    [
        ("size = 10", "size = -3", "things", "source[questions].size"),
        ("size = 10", 'size = "10 MB"', "things", "source[questions].size"),
        ("a" * 64, "a" * 63, "things", "source[questions].sha256"),
        ("b" * 32, "B" * 32, "pictures", "source[archive].md5"),
        (
            "https://example.org/q.json",
            "http://example.org/q.json",
            "things",
            "source[questions].url",
        ),
        (
            "https://example.org/q.json",
            "ftp://example.org/q.json",
            "things",
            "source[questions].url",
        ),
        ('homepage = "https://example.org"', 'homepage = "example.org"', "things", "homepage"),
        ('kind = "questions"\ntitle', 'kind = "answers"\ntitle', "things", "kind"),
        ('papers = ["hammr"]', 'papers = ["hamr"]', "things", "papers"),
        ('title = "Things"\n', "", "things", "title"),
        ('summary = "questions about things"', 'sumary = "x"', "things", "sumary"),
        ('entries = ["generic-vqa/gqa"]', 'entries = ["gqa"]', "things", "entries"),
        ('images_from = ["pictures"]', 'images_from = ["paintings"]', "things", "images_from"),
        ('files = ["things/q.json"]', 'files = ["../q.json"]', "things", "layout.files"),
        (
            'target = "things/q.json"',
            'target = "/etc/q.json"',
            "things",
            "source[questions].target",
        ),
        ('unpack = "zip"\n', 'unpack = "rar"\n', "pictures", "source[archive].unpack"),
        ('unpack = "zip"\n', "", "pictures", "source[archive].members"),
        ('to = "things/images/"', 'to = "../images"', "pictures", "source[archive].members[0].to"),
        (
            '[[dataset.source]]\nname = "archive"',
            '[[dataset.sourc]]\nname = "archive"',
            "pictures",
            "sourc",
        ),
    ],
)
def test_a_malformed_catalogue_names_the_dataset_and_the_field(
    old: str, new: str, dataset: str, field: str
) -> None:
    assert old in GOOD
    with pytest.raises(CatalogueError) as caught:
        load_catalogue(GOOD.replace(old, new, 1))
    message = str(caught.value)
    assert f"dataset {dataset!r}" in message and f"field {field!r}" in message, message


def test_two_datasets_listing_one_entry_are_refused() -> None:
    text = GOOD.replace(
        'summary = "pictures"', 'summary = "pictures"\nentries = ["generic-vqa/gqa"]'
    )
    text = text.replace(
        'name = "pictures"\nkind = "images"', 'name = "pictures"\nkind = "questions"'
    )
    with pytest.raises(CatalogueError, match="'entries'"):
        load_catalogue(text)


def test_not_toml_and_wrong_versions_are_refused() -> None:
    with pytest.raises(CatalogueError, match="not valid TOML"):
        load_catalogue("version = = 1")
    with pytest.raises(CatalogueError, match="version 2"):
        load_catalogue(GOOD.replace("version = 1", "version = 2"))
    with pytest.raises(CatalogueError, match="no \\[\\[dataset\\]\\]"):
        load_catalogue("version = 1")


def test_the_docs_page_holds_the_disk_table_of_the_catalogue() -> None:
    from hammr.datasets.table import DISK_BEGIN, DISK_END

    page = (Path(__file__).resolve().parents[1] / "docs" / "data.md").read_text()
    expected = render_disk_table(CATALOGUE)
    assert page_table(page, DISK_BEGIN, DISK_END) == expected, (
        "docs/data.md's disk table differs: run python -m hammr.datasets.table docs/data.md"
    )
    # every bundled experiment with real data has its row
    assert "| `hammr-table3` |" in expected and "| `avis-table3` |" in expected
