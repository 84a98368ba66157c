"""The SQLite knowledge base: lookups, both dump builders, resumable builds, `hammr kb`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hammr.backends.kb import build as build_mod
from hammr.backends.kb.build import KBBuildError, build_kb, detect_format, iter_evqa
from hammr.backends.kb.kb_cli import kb
from hammr.backends.kb.sqlite_kb import KBError, SqliteKB, bundled_kb_path, from_config
from hammr.backends.registry import BackendUnavailable

FIXTURES = Path(__file__).parent / "fixtures" / "kb"
EVQA = FIXTURES / "evqa_kb_sample.json"
JSONL = FIXTURES / "articles_sample.jsonl"


def dump_db(path: Path) -> dict[str, Any]:
    """Everything a build writes, for comparing two builds."""
    con = sqlite3.connect(path)
    try:
        out = {
            "articles": con.execute("SELECT * FROM articles ORDER BY id").fetchall(),
            "aliases": con.execute(
                "SELECT * FROM aliases ORDER BY alias_key, article_id"
            ).fetchall(),
            "fts": con.execute(
                "SELECT rowid, title, text FROM articles_fts ORDER BY rowid"
            ).fetchall(),
            "meta": dict(con.execute("SELECT key, value FROM meta").fetchall()),
        }
        con.execute("INSERT INTO articles_fts(articles_fts) VALUES ('integrity-check')")
    finally:
        con.close()
    return out


@pytest.fixture
def jsonl_kb(tmp_path: Path) -> SqliteKB:
    build_kb(JSONL, tmp_path / "j.sqlite")
    return SqliteKB(tmp_path / "j.sqlite")


@pytest.fixture
def evqa_kb(tmp_path: Path) -> SqliteKB:
    build_kb(EVQA, tmp_path / "e.sqlite")
    return SqliteKB(tmp_path / "e.sqlite")


# -- lookups ---------------------------------------------------------------------------------


async def test_exact_title_is_case_insensitive_and_reads_underscores(jsonl_kb: SqliteKB) -> None:
    for title in ("Copper kettle", "copper KETTLE", "Copper_kettle", "  copper   kettle "):
        page = await jsonl_kb.article(title)
        assert page is not None and page.title == "Copper kettle"
    page = await jsonl_kb.article("CRÈME BRÛLÉE")
    assert page is not None and page.title == "Crème brûlée"
    assert page.url is None
    kettle = await jsonl_kb.article("Copper kettle")
    assert kettle is not None
    assert kettle.url == "https://example.invalid/Copper_kettle"
    assert kettle.text.startswith("A copper kettle is")


async def test_alias_then_full_text(jsonl_kb: SqliteKB) -> None:
    heron = await jsonl_kb.article("grey heron")
    assert heron is not None and heron.title == "Gray heron"
    latin = await jsonl_kb.article("Ardea cinerea")
    assert latin is not None and latin.title == "Gray heron"
    # No title or alias: the best hit with every word in the title...
    tower = await jsonl_kb.article("tower heron")
    assert tower is not None and tower.title == "Heron Tower"
    named = await jsonl_kb.article("heron developer")  # ...then anywhere
    assert named is not None and named.title == "Heron Tower"
    cable = await jsonl_kb.article("counterbalanced cars")
    assert cable is not None and cable.title == "Funicular"
    assert await jsonl_kb.article("no such thing anywhere") is None
    assert await jsonl_kb.article("   ") is None
    assert await jsonl_kb.article('"AND OR (') is None  # FTS syntax is quoted away


async def test_search_ranks_with_bm25_title_first(jsonl_kb: SqliteKB) -> None:
    hits = await jsonl_kb.search("heron", k=5)
    assert {h.title for h in hits} == {"Gray heron", "Heron Tower"}
    assert (await jsonl_kb.search("wading bird heron"))[0].title == "Gray heron"
    assert len(await jsonl_kb.search("heron", k=1)) == 1
    assert await jsonl_kb.search("zzzz qqqq") == []
    assert await jsonl_kb.search("") == []
    # porter stemming: "railways" finds "railway"
    assert [h.title for h in await jsonl_kb.search("railways")] == ["Funicular"]
    assert len(jsonl_kb) == 5


# -- builders --------------------------------------------------------------------------------


async def test_evqa_builder_uses_the_official_schema(evqa_kb: SqliteKB) -> None:
    raw = json.loads(EVQA.read_text(encoding="utf-8"))
    assert len(evqa_kb) == len(raw)
    page = await evqa_kb.article("Bärenkopf Lighthouse")
    assert page is not None
    assert page.url == "http://en.wikipedia.org/wiki/Bärenkopf_Lighthouse"
    # the lead first, then each section under its title, separated by blank lines
    assert page.text.split("\n\n") == [
        "The Bärenkopf Lighthouse is a fictional lighthouse on a rocky headland, used as a "
        "test fixture.",
        "History\nIt was first lit in 1871 and was automated in 1989; its keepers' cottage is "
        "now a café.",
        "Design\nThe tower is 27 metres tall, built of red granite, and shows a white flash "
        "every ten seconds.",
    ]
    hits = await evqa_kb.search("granite lighthouse flash")
    assert hits[0].title == "Bärenkopf Lighthouse"
    newt = await evqa_kb.article("spotted marsh newt")
    assert newt is not None and "hibernates" in newt.text
    assert evqa_kb.meta["format"] == "evqa"


def test_format_detection(tmp_path: Path) -> None:
    assert detect_format(EVQA) == "evqa"
    assert detect_format(JSONL) == "jsonl"
    other = tmp_path / "dump.json"
    other.write_text(JSONL.read_text(encoding="utf-8"), encoding="utf-8")
    assert detect_format(other) == "jsonl"  # first line is a {title, text} object


def test_evqa_reader_streams_in_small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries split across reads (and multi-byte characters split across reads) parse the
    same as json.load, and the offsets point just past each entry."""
    monkeypatch.setattr(build_mod, "CHUNK", 7)
    raw = json.loads(EVQA.read_text(encoding="utf-8"))
    data = EVQA.read_bytes()
    with EVQA.open("rb") as f:
        got = list(iter_evqa(f))
    assert [r.key for r, _ in got] == list(raw)
    assert [r.title for r, _ in got] == [v["title"] for v in raw.values()]
    for _, end in got:
        assert data[:end].rstrip().endswith(b"}")
    # resuming from any yielded offset gives the rest
    with EVQA.open("rb") as f:
        rest = list(iter_evqa(f, got[1][1]))
    assert [r.key for r, _ in rest] == list(raw)[2:]


@pytest.mark.parametrize("dump", [EVQA, JSONL], ids=["evqa", "jsonl"])
@pytest.mark.parametrize("batch_size", [1, 2, 500])
def test_resumed_build_equals_uninterrupted_build(
    tmp_path: Path, dump: Path, batch_size: int
) -> None:
    whole = tmp_path / "whole.sqlite"
    stats = build_kb(dump, whole, batch_size=batch_size)
    assert stats.complete and not stats.resumed

    parts = tmp_path / "parts.sqlite"
    first = build_kb(dump, parts, batch_size=batch_size, limit=2)
    assert not first.complete and first.records == 2
    with pytest.raises(KBError, match="not finished building"):
        SqliteKB(parts)
    second = build_kb(dump, parts, batch_size=batch_size, limit=1)
    assert second.resumed and second.added == 1 and second.records == 3
    last = build_kb(dump, parts, batch_size=batch_size)
    assert last.complete
    assert dump_db(parts) == dump_db(whole)
    again = build_kb(dump, parts)  # finished: nothing to do
    assert again.complete and again.added == 0
    assert dump_db(parts) == dump_db(whole)


def test_limit_on_the_last_record_completes_the_build(tmp_path: Path) -> None:
    stats = build_kb(JSONL, tmp_path / "kb.sqlite", limit=5)
    assert stats.complete and stats.articles == 5


@pytest.mark.parametrize("dump", [EVQA, JSONL], ids=["evqa", "jsonl"])
def test_killed_build_resumes_to_the_same_file(
    tmp_path: Path, dump: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "whole.sqlite"
    build_kb(dump, whole, batch_size=2)

    calls = {"n": 0}
    real_insert = build_mod._insert

    def dying_insert(con: sqlite3.Connection, batch: list[build_mod.Record]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            real_insert(con, batch[:1])  # half-written batch, then the process "dies"
            raise KeyboardInterrupt
        real_insert(con, batch)

    monkeypatch.setattr(build_mod, "_insert", dying_insert)
    broken = tmp_path / "broken.sqlite"
    with pytest.raises(KeyboardInterrupt):
        build_kb(dump, broken, batch_size=2)
    monkeypatch.setattr(build_mod, "_insert", real_insert)
    # the interrupted transaction was rolled back: only the first batch is in
    con = sqlite3.connect(broken)
    assert con.execute("SELECT count(*) FROM articles").fetchone() == (2,)
    con.close()
    assert build_kb(dump, broken, batch_size=2).resumed
    assert dump_db(broken) == dump_db(whole)


def test_progress_bar_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_kb(JSONL, tmp_path / "a.sqlite", progress=True)
    err = capsys.readouterr().err
    assert "building" in err and "records" in err
    build_kb(JSONL, tmp_path / "b.sqlite")  # stderr is not a terminal under pytest: no bar
    assert capsys.readouterr().err == ""


def test_duplicate_keys_keep_the_first(tmp_path: Path) -> None:
    dump = tmp_path / "dup.jsonl"
    rows = [{"title": "A", "text": "first"}, {"title": "A", "text": "second"}]
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_kb(dump, tmp_path / "kb.sqlite")
    base = SqliteKB(tmp_path / "kb.sqlite")
    assert len(base) == 1
    page = base.article_sync("a")
    assert page is not None and page.text == "first"


# -- errors ----------------------------------------------------------------------------------


def test_corrupt_and_missing_dumps_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(KBBuildError, match="dump not found"):
        build_kb(tmp_path / "nope.json", tmp_path / "kb.sqlite")
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(EVQA.read_bytes()[:1500])
    with pytest.raises(KBBuildError, match="corrupt or truncated JSON"):
        build_kb(truncated, tmp_path / "t.sqlite", fmt="evqa")
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2, 3]")
    with pytest.raises(KBBuildError, match="expected a JSON object"):
        build_kb(not_object, tmp_path / "l.sqlite", fmt="evqa")
    wrong_entry = tmp_path / "wrong.json"
    wrong_entry.write_text('{"http://x": {"name": "no title here"}}')
    with pytest.raises(KBBuildError, match="lacks a title"):
        build_kb(wrong_entry, tmp_path / "w.sqlite", fmt="evqa")
    bad_line = tmp_path / "bad.jsonl"
    bad_line.write_text('{"title": "A", "text": "ok"}\n{"title": "B", "text": \n')
    with pytest.raises(KBBuildError, match="line 2: not valid JSON"):
        build_kb(bad_line, tmp_path / "b.sqlite")
    no_text = tmp_path / "notext.jsonl"
    no_text.write_text('{"title": "A"}\n')
    with pytest.raises(KBBuildError, match="line 1: 'title' and 'text' must be strings"):
        build_kb(no_text, tmp_path / "n.sqlite")
    zipped = tmp_path / "encyclopedic_kb_wiki.zip"
    zipped.write_bytes(b"PK\x03\x04")
    with pytest.raises(KBBuildError, match="unpack it first"):
        build_kb(zipped, tmp_path / "z.sqlite")
    not_utf8 = tmp_path / "latin1.json"
    not_utf8.write_bytes('{"k": {"title": "caf\u00e9"}}'.encode("latin-1"))
    with pytest.raises(KBBuildError, match="not UTF-8"):
        build_kb(not_utf8, tmp_path / "u.sqlite", fmt="evqa")


def test_out_from_another_dump_or_not_a_kb(tmp_path: Path) -> None:
    out = tmp_path / "kb.sqlite"
    build_kb(JSONL, out, limit=1)
    with pytest.raises(KBBuildError, match="built from another dump"):
        build_kb(EVQA, out)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(KBBuildError, match="not a hammr knowledge base"):
        build_kb(JSONL, junk)
    with pytest.raises(KBError, match="not a hammr knowledge base"):
        SqliteKB(junk)
    with pytest.raises(KBError, match="hammr kb build"):
        SqliteKB(tmp_path / "missing.sqlite")


# -- the bundled KB and the factory ----------------------------------------------------------


def test_bundled_kb_is_built_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = bundled_kb_path()
    assert path == tmp_path / "hammr" / "kb" / "mini_wiki.sqlite"
    stamp = path.stat().st_mtime_ns
    assert bundled_kb_path() == path and path.stat().st_mtime_ns == stamp  # reused
    base = from_config({})
    assert len(base) >= 25
    assert base.article_sync("La Tour Eiffel") is not None
    # a stale cache (another version of the bundled JSONL) is rebuilt
    con = sqlite3.connect(path)
    with con:
        con.execute("UPDATE meta SET value = 'old' WHERE key = 'source_sha256'")
    con.close()
    bundled_kb_path()
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='source_sha256'").fetchone() != ("old",)
    con.close()
    assert [p.name for p in path.parent.iterdir()] == ["mini_wiki.sqlite"]


def test_from_config_with_a_path(tmp_path: Path) -> None:
    build_kb(JSONL, tmp_path / "kb.sqlite")
    assert len(from_config({"path": str(tmp_path / "kb.sqlite")})) == 5
    with pytest.raises(BackendUnavailable, match="hammr kb build"):
        from_config({"path": str(tmp_path / "missing.sqlite")})
    with pytest.raises(ValueError, match=r"unknown setting tools\.kb\.bogus"):
        from_config({"bogus": 1})


# -- `hammr kb` ------------------------------------------------------------------------------


def test_kb_cli_build_search_article(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "kb.sqlite"
    r = runner.invoke(kb, ["build", str(EVQA), "--out", str(out), "--limit", "2"])
    assert r.exit_code == 0, r.output
    assert "stopped after 2 records" in r.output
    r = runner.invoke(kb, ["build", str(EVQA), "--out", str(out), "--format", "evqa"])
    assert r.exit_code == 0, r.output
    assert "done, 5 articles (evqa)" in r.output
    r = runner.invoke(kb, ["build", str(EVQA), "--out", str(out)])
    assert "already built (5 articles)" in r.output
    r = runner.invoke(kb, ["search", str(out), "tram line 7"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("1. Kestrel K4 tram <http://en.wikipedia.org/wiki/Kestrel_K4_tram>")
    r = runner.invoke(kb, ["search", str(out), "qqqqzzzz"])
    assert r.exit_code == 0 and "no results" in r.output
    r = runner.invoke(kb, ["article", str(out), "ørnefjell"])
    assert r.exit_code == 0 and "eagle mountain" in r.output
    r = runner.invoke(kb, ["article", str(out), "Atlantis"])
    assert r.exit_code == 1 and "no article found for 'Atlantis'" in r.output


def damage(path: Path) -> None:
    """Overwrite every page of a built KB from its articles table on, leaving the header and
    the meta table readable (so the file opens and the damage shows at the first query)."""
    con = sqlite3.connect(path)
    (page_size,) = con.execute("PRAGMA page_size").fetchone()
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'articles'").fetchone()
    con.close()
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * (size - (root - 1) * page_size))


def error_line(r: Any, code: int = 2) -> str:
    """The message of a command that failed the way every hammr command fails: one line
    ``hammr: error: ...`` on stderr, nothing on stdout, the exit status, no exception."""
    assert r.exit_code == code, r.output
    assert isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hammr: error: "), r.stderr
    return str(lines[0].removeprefix("hammr: error: "))


def test_kb_cli_build_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()

    def build(dump: Path, out: Path, *more: str) -> Any:
        return runner.invoke(kb, ["build", str(dump), "--out", str(out), *more])

    out = tmp_path / "o.sqlite"
    assert error_line(build(tmp_path / "nope.json", out)) == (
        f"dump not found: {tmp_path / 'nope.json'}"
    )
    assert (
        error_line(build(tmp_path, out)) == f"the dump {tmp_path} is a folder, not a regular file"
    )
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert error_line(build(empty, out)) == f"dump is empty: {empty}"
    bad = tmp_path / "bad.json"
    bad.write_text('{"http://x": {"title": "T", "section_titles": [')
    assert "corrupt or truncated JSON" in error_line(build(bad, out))
    # the output's folder cannot be made: a file is in the way
    (tmp_path / "afile").write_text("x")
    msg = error_line(build(JSONL, tmp_path / "afile" / "kb.sqlite"))
    assert msg.startswith(f"cannot create the folder {tmp_path / 'afile'}: ")
    # the output is someone else's SQLite database: left alone
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    assert "is a SQLite database but not a hammr knowledge base" in error_line(build(JSONL, other))
    assert sqlite3.connect(other).execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'"
    ).fetchall() == [("t",)]
    # a damaged knowledge base
    damaged = tmp_path / "damaged.sqlite"
    build_kb(JSONL, damaged)
    damage(damaged)
    assert "is damaged" in error_line(build(JSONL, damaged))

    # an unreadable dump (chmod does not stop root, so the read fails by hand)
    def unreadable(path: Path) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(build_mod, "detect_format", unreadable)
    assert error_line(build(JSONL, tmp_path / "u.sqlite")) == (
        f"cannot read the dump {JSONL}: Permission denied"
    )
    # usage errors stay click's (exit 2, no traceback)
    for r in (
        build(JSONL, tmp_path / "x", "--format", "xml"),
        build(JSONL, tmp_path),  # --out is a directory
        build(JSONL, out, "--batch-size", "0"),
    ):
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
        assert "Traceback" not in r.output and r.stderr.count("Error: ") == 1


def test_kb_cli_search_and_article_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    good = tmp_path / "kb.sqlite"
    build_kb(JSONL, good)
    missing = tmp_path / "missing.sqlite"
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    plain = tmp_path / "plain.sqlite"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.close()
    unfinished = tmp_path / "unfinished.sqlite"
    build_kb(JSONL, unfinished, limit=1)
    damaged = tmp_path / "damaged.sqlite"
    build_kb(JSONL, damaged)
    damage(damaged)
    expected = {
        missing: "no knowledge base at",
        junk: "not a hammr knowledge base",
        plain: "not a hammr knowledge base",
        unfinished: "not finished building",
        damaged: "it may be damaged",
    }
    for path, message in expected.items():
        for cmd in (["search", str(path), "heron"], ["article", str(path), "Heron Tower"]):
            assert message in error_line(runner.invoke(kb, cmd)), (cmd, message)
    search = lambda *args: runner.invoke(kb, ["search", str(good), *args])  # noqa: E731
    assert error_line(search("")) == "the query is empty"
    assert error_line(search("  ?! ")) == "the query has no words to search for"
    for k in ("0", "-3", "many"):
        r = search("heron", "-k", k)
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit), k
        assert "Traceback" not in r.output and "Invalid value for '-k'" in r.stderr
    # more hits than SQLite's integers hold: all there are, no overflow
    r = search("heron", "-k", str(10**30))
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 2 * len(SqliteKB(good).search_sync("heron", 100)) > 0
    article = lambda title: runner.invoke(kb, ["article", str(good), title])  # noqa: E731
    assert error_line(article(" ")) == "the title is empty"
    assert error_line(article("Atlantis"), code=1) == "no article found for 'Atlantis'"
    # 'bundled' whose cache cannot be written
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "afile"))
    msg = error_line(runner.invoke(kb, ["article", "bundled", "Eiffel Tower"]))
    assert msg.startswith("cannot build the bundled knowledge base into ")


def test_kb_cli_search_help_explains_k() -> None:
    r = CliRunner().invoke(kb, ["search", "--help"])
    assert r.exit_code == 0
    (line,) = [ln for ln in r.output.splitlines() if ln.strip().startswith("-k")]
    assert "How many articles" in line


def test_damaged_kb_raises_kb_errors(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    build_kb(JSONL, path)
    damage(path)
    base = SqliteKB(path)  # the meta table is intact, so it opens
    try:
        with pytest.raises(KBError, match="may be damaged"):
            base.search_sync("heron")
        with pytest.raises(KBError, match="may be damaged"):
            base.article_sync("Heron Tower")
        with pytest.raises(KBError, match="may be damaged"):
            len(base)
    finally:
        base.close()
