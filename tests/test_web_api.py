"""The viewer's back end: every JSON endpoint over a real store, served by the real server
on a free port; run and sample names with '/' and other odd characters open (one encoded
path segment each) while path traversal gets 404; the server's headers, HEAD, 405, Host
check, IPv6, idle and half-open connections (no thread each, closed at a deadline), its
connection limit and bounded pool, and `hammr view` stopping on SIGINT; `hammr view
TRACE.json`'s temporary store; `hammr report --html`'s single file; the store migration
that adds the indexed agent / error-kind columns."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from hammr.cli import main
from hammr.eval.store import RunStore, trace_facets
from hammr.eval.types import RunRecord
from hammr.trace import Step, StepUsage, Trace, encode_value
from hammr.values import Box, Image
from hammr.web.server import ViewerServer
from hammr.web.static_report import DATA_ID, render_html, report_data
from hammr.web.web_cli import store_from_trace
from patience import HANG_S, wait_until


def traced(
    question: str, *, colour: tuple[int, int, int] = (10, 200, 10), fail: bool = False
) -> Trace:
    """Dispatcher -> CountingAgent (a child trace) with an image, a crop and detected boxes."""
    root = Image(PILImage.new("RGB", (40, 30), colour))
    crop = Image(root.pixels.crop((5, 5, 15, 25)), parent=root, crop_box=Box(5, 5, 10, 20))
    t = Trace(agent="QuestionDispatcherAgent", question=question, model="m", answer="2")
    t.status = "finished"
    t.inputs = {"image": encode_value(root, t.images)}
    child = Trace(agent="CountingAgent", question=question, answer="2", status="finished")
    child.steps.append(
        Step(
            index=0,
            thought="find the cars",
            action="boxes = DetectObjects(image, 'car')",
            tool="DetectObjects",
            arguments={"image": encode_value(root, child.images), "label": "car"},
            output_var="boxes",
            output=[
                encode_value(Box(1, 2, 10, 8, label="car", score=0.9), child.images),
                encode_value(Box(20, 5, 8, 8, label="car", score=0.7), child.images),
            ],
            observation="2 boxes",
            usage=StepUsage(100, 9),
        )
    )
    child.steps.append(
        Step(
            index=1,
            action="c = CropImage(image, boxes[0])",
            tool="CropImage",
            arguments={"image": encode_value(root, child.images)},
            output_var="c",
            output=encode_value(crop, child.images),
            usage=StepUsage(80, 5),
            error_kind="bad_arguments" if fail else None,
            error="bad box" if fail else None,
        )
    )
    child.steps.append(Step(index=2, finish="2", usage=StepUsage(120, 4)))
    t.steps.append(
        Step(
            index=0,
            action="a = CountingAgent(question, image)",
            tool="CountingAgent",
            child=child,
            output="2",
            usage=StepUsage(50, 3),
        )
    )
    if fail:
        t.steps.append(Step(index=1, raw="oops", error_kind="syntax", error="no action"))
    t.steps.append(Step(index=2 if fail else 1, finish="2", usage=StepUsage(50, 2)))
    return t


def rec(run: str, sid: str, score: float, **kw: object) -> RunRecord:
    base: dict[str, object] = {
        "run": run,
        "sample_id": sid,
        "dataset": "tallyqa",
        "question_type": "complex_counting",
        "question": f"how many cars {sid}?",
        "answers": ("2",),
        "prediction": "2" if score else "3",
        "score": score,
        "judge": "exact",
        "latency_s": 1.5,
        "prompt_tokens": 300,
        "completion_tokens": 20,
        "llm_calls": 4,
    }
    base.update(kw)
    return RunRecord(**base)  # type: ignore[arg-type]


def fill(store: RunStore) -> None:
    store.open_run("run-a", "generic-vqa", "hammr")
    store.open_run("run b/ü", "generic-vqa", "naive")
    for i in range(30):
        fail = i % 3 == 0
        store.add(rec("run-a", f"s{i:02d}", 0.0 if fail else 1.0, trace=traced(f"q{i}", fail=fail)))
    for i in range(5):
        store.add(
            rec(
                "run-a",
                f"g{i}",
                1.0,
                dataset="gqa",
                question_type="spatial_reasoning",
                trace=Trace(agent="NaiveAgent", question="left?", answer="left"),
            )
        )
    # run b: the same tally samples, half with another score, plus one of its own
    for i in range(0, 30, 2):
        store.add(rec("run b/ü", f"s{i:02d}", 1.0, trace=None, status="finished"))
    store.add(rec("run b/ü", "only-b", 1.0, trace=None, status="timeout"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, RunStore]]:
    path = tmp_path_factory.mktemp("web") / "runs.sqlite"
    store = RunStore(path)
    fill(store)
    server = ViewerServer(store, "127.0.0.1", 0)
    server.start_in_thread()
    with httpx.Client(base_url=server.url.rstrip("/"), timeout=10) as client:
        yield client, store
    server.stop()
    store.close()


def test_runs(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    r = client.get("/api/runs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    runs = {x["name"]: x for x in r.json()["runs"]}
    a = runs["run-a"]
    assert (a["suite"], a["system"], a["done"], a["failed"]) == ("generic-vqa", "hammr", 35, 0)
    assert a["mean"] == pytest.approx(25 / 35)
    rows = {(x["question_type"], x["dataset"]): x for x in a["rows"]}
    tally = rows[("complex_counting", "tallyqa")]
    assert tally["n"] == 30 and tally["mean"] == pytest.approx(20 / 30)
    assert tally["low"] <= tally["mean"] <= tally["high"]
    assert set(a["macro"]) == {"mean", "low", "high"}
    assert a["macro"]["mean"] == pytest.approx((20 / 30 + 1) / 2)
    assert runs["run b/ü"]["failed"] == 1 and a["created"]


def test_run_names(served: tuple[httpx.Client, RunStore]) -> None:
    """The cheap list the viewer checks a memory hit's source run against."""
    client, store = served
    r = client.get("/api/run-names")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json() == {"runs": ["run-a", "run b/ü"]}
    assert r.json()["runs"] == store.run_names()
    assert client.get("/api/run-names/x").status_code == 404


def test_samples_paging_and_fields(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    first = client.get("/api/runs/run-a/samples", params={"limit": 10}).json()
    assert (first["total"], first["offset"], first["limit"]) == (35, 0, 10)
    assert [x["sample_id"] for x in first["items"]] == [f"s{i:02d}" for i in range(10)]
    item = first["items"][0]
    assert set(item) == {
        "dataset", "sample_id", "question_type", "question", "answers", "prediction", "score",
        "status", "agent", "error_kinds", "latency_s", "prompt_tokens", "llm_calls",
    }  # fmt: skip
    assert item["agent"] == "CountingAgent" and item["answers"] == ["2"]
    assert item["error_kinds"] == ["bad_arguments", "syntax"]
    assert first["items"][1]["error_kinds"] == []
    last = client.get("/api/runs/run-a/samples?offset=30&limit=10").json()
    assert [x["sample_id"] for x in last["items"]] == [f"g{i}" for i in range(5)]
    assert last["items"][0]["agent"] == "NaiveAgent"  # no dispatcher: the top agent
    beyond = client.get("/api/runs/run-a/samples?offset=99").json()
    assert beyond["total"] == 35 and beyond["items"] == []
    assert client.get("/api/runs/run-a/samples?limit=100000").json()["limit"] == 500
    for bad in ("offset=-1", "limit=x", "correct=maybe"):
        r = client.get(f"/api/runs/run-a/samples?{bad}")
        assert r.status_code == 400 and "error" in r.json()
    # a run name with a slash and non-ASCII letters: one URL-encoded segment
    b = client.get("/api/runs/run%20b%2F%C3%BC/samples", params={"limit": 100})
    assert b.status_code == 200
    assert b.json()["total"] == 16 and b.json()["items"][-1]["sample_id"] == "only-b"
    assert client.get("/api/runs/run%20b/%C3%BC/samples").status_code == 404  # two segments


def test_sample_filters(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served

    def ids(**params: str) -> tuple[int, list[str]]:
        body = client.get("/api/runs/run-a/samples", params={"limit": 100, **params}).json()
        return body["total"], [x["sample_id"] for x in body["items"]]

    wrong = [f"s{i:02d}" for i in range(0, 30, 3)]
    assert ids(correct="false") == (10, wrong)
    assert ids(correct="true")[0] == 25
    assert ids(dataset="gqa") == (5, [f"g{i}" for i in range(5)])
    assert ids(question_type="complex_counting")[0] == 30
    assert ids(agent="CountingAgent")[0] == 30
    assert ids(agent="NaiveAgent")[0] == 5
    assert ids(agent="Nobody") == (0, [])
    assert ids(error_kind="syntax") == (10, wrong)
    assert ids(error_kind="bad_arguments") == (10, wrong)
    assert ids(error_kind="bad")[0] == 0  # a kind, not a substring
    assert ids(error_kind="bad%")[0] == 0  # LIKE wildcards are literal
    assert ids(error_kind="syntax", correct="true")[0] == 0
    assert ids(dataset="tallyqa", correct="true", agent="CountingAgent")[0] == 20
    assert ids(offset="5", limit="3", correct="false")[1] == wrong[5:8]


def test_sample_detail(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    r = client.get("/api/runs/run-a/samples/tallyqa/s03")
    assert r.status_code == 200
    d = r.json()
    assert d["score"] == 0.0 and d["judge"] == "exact" and d["completion_tokens"] == 20
    assert d["prediction"] == "3" and d["answers"] == ["2"] and d["error"] is None
    trace = d["trace"]
    assert trace["agent"] == "QuestionDispatcherAgent"
    child = trace["steps"][0]["child"]
    assert child["agent"] == "CountingAgent" and child["steps"][0]["thought"] == "find the cars"
    boxes = child["steps"][0]["output"]
    assert boxes[0] == {"$box": [1, 2, 10, 8], "label": "car", "score": 0.9}
    assert child["steps"][1]["output"]["region"] == [5, 5, 10, 20]
    assert Trace.from_dict(trace).to_dict() == trace
    assert client.get("/api/runs/run-a/samples/gqa/s03").status_code == 404
    assert client.get("/api/runs/nope/samples/tallyqa/s03").status_code == 404
    none = client.get("/api/runs/run-a/samples/tallyqa/s01").json()
    assert none["trace"]["steps"][0]["child"]["agent"] == "CountingAgent"


def test_images(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    trace = client.get("/api/runs/run-a/samples/tallyqa/s00").json()["trace"]
    h = trace["inputs"]["image"]["$image"]
    r = client.get(f"/api/images/{h}")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG")
    crop = trace["steps"][0]["child"]["steps"][1]["output"]["$image"]
    assert client.get(f"/api/images/{crop}").content.startswith(b"\x89PNG")
    assert client.get("/api/images/" + "0" * 16).status_code == 404
    assert client.get("/api/images/" + h.upper()).status_code == 404
    assert client.get("/api/images/abc").status_code == 404


def test_compare(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    # a run name with a slash, encoded as %2F in its one segment
    other = client.get("/api/compare/run-a/run%20b%2F%C3%BC?only=all&limit=100").json()
    assert other["total"] == 36
    only_b = next(x for x in other["items"] if x["sample_id"] == "only-b")
    assert only_b["a"] is None and only_b["b"]["status"] == "timeout"
    # compare run-a with itself: nothing differs
    same = client.get("/api/compare/run-a/run-a").json()
    assert same["total"] == 0 and same["items"] == []
    everything = client.get("/api/compare/run-a/run-a?only=all&limit=5").json()
    assert everything["total"] == 35 and len(everything["items"]) == 5
    first = everything["items"][0]
    assert first["dataset"] == "gqa" and first["a"] == first["b"]
    assert set(first["a"]) == {"prediction", "score", "status"}
    assert client.get("/api/compare/run-a/none").status_code == 404
    assert client.get("/api/compare/run-a/run-a?only=some").status_code == 400


def test_compare_two_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    store.open_run("run-b", "generic-vqa", "naive")
    for i in range(0, 30, 2):
        store.add(rec("run-b", f"s{i:02d}", 1.0))
    store.add(rec("run-b", "only-b", 1.0, status="timeout"))
    server = ViewerServer(store)
    server.start_in_thread()
    try:
        with httpx.Client(base_url=server.url.rstrip("/")) as client:
            body = client.get("/api/compare/run-a/run-b?limit=100").json()
            items = {(x["dataset"], x["sample_id"]): x for x in body["items"]}
            # differ: a only (odd s.., g..), b only (only-b), both but other score (s00, s06, ...)
            odd = {("tallyqa", f"s{i:02d}") for i in range(1, 30, 2)}
            gqa = {("gqa", f"g{i}") for i in range(5)}
            changed = {("tallyqa", f"s{i:02d}") for i in range(0, 30, 6)}
            assert set(items) == odd | gqa | changed | {("tallyqa", "only-b")}
            assert body["total"] == len(items)
            assert items[("tallyqa", "only-b")]["a"] is None
            assert items[("tallyqa", "only-b")]["b"]["status"] == "timeout"
            assert items[("tallyqa", "s01")]["b"] is None
            assert items[("tallyqa", "s00")]["a"]["score"] == 0.0
            assert items[("tallyqa", "s00")]["b"]["score"] == 1.0
            keys = [(x["dataset"], x["sample_id"]) for x in body["items"]]
            assert keys == sorted(keys)
            all_ = client.get("/api/compare/run-a/run-b?only=all&offset=30&limit=100").json()
            assert all_["total"] == 36 and len(all_["items"]) == 6
    finally:
        server.stop()
        store.close()


def test_static_files_and_index(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    index = client.get("/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    static = Path(__file__).parents[1] / "src" / "hammr" / "web" / "static"
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        r = client.get(f"/static/{name}")
        if (static / name).exists():
            assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
            assert r.content == (static / name).read_bytes()
        else:
            assert r.status_code == 404
    assert client.get("/static/index.html").status_code == 404
    assert client.get("/static/other.js").status_code == 404


def raw_get(client: httpx.Client, target: str, method: str = "GET") -> tuple[int, bytes]:
    """Send the request target exactly as written (httpx would normalise '..')."""
    url = client.base_url
    conn = http.client.HTTPConnection(url.host, url.port, timeout=10)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "target",
    [
        "/static/../store.sqlite",
        "/static/..%2fstore.sqlite",
        "/static/%2e%2e/runs.sqlite",
        "/api/images/../../etc/passwd",
        "/api/images/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/api/runs/x/samples/a/..%2f..%2fb",
        "/api/runs/run-a/samples/tallyqa/..%2f..%2fb",
        "/api/runs/..%2frun-a/samples",
        "/api/runs/run-a/samples/tallyqa/s00%00",
        "/api/runs/run-a%00/samples",
        "/api/runs/run-a/samples/tallyqa/" + "x" * 5000,
        "/api/runs/run-a/samples/tallyqa/" + "%41" * 600,
        "/api/runs/run-a/samples/tallyqa/s00%5c..%5c",
        "/api/runs/run-a/samples/tallyqa/%ff%fe",
        "/api/runs/run-a/samples/tallyqa/.",
        "/api/runs/run-a/samples//s00",
        "/api/runs/run-a/samples/tallyqa/s00/extra",
        "/api/images/%2fetc%2fpasswd",
        "/etc/passwd",
        "/runs.sqlite",
        "/static/",
        "/static/app.js/..",
        "/api",
        "/api/nothing",
        "http://127.0.0.1/etc/passwd",
        "/api/images/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0",
        # aimed at the encoded slash allowed inside run and sample names
        "/api/runs/..%2F..%2Fetc%2Fpasswd/samples",
        "/api/runs/run-a/samples/..%2F..%2Fetc/passwd",
        "/api/runs/run-a/samples/tallyqa/..%2F..%2Fetc%2Fpasswd",
        "/api/runs/run-a/samples/tallyqa/s00%2F..%2F..%2Fetc%2Fpasswd",
        "/api/runs/%2e%2e%2F%2e%2e%2Fetc%2Fpasswd/samples",
        "/api/runs/%2e%2e/samples",
        "/api/runs/run-a/samples/%2e/s00",
        "/api/runs/run-a%2F%2e%2e/samples",
        "/api/runs/run-a%2F.%2Fx/samples",
        "/api/runs/%2Fetc%2Fpasswd/samples",
        "/api/runs/run-a%2F/samples",
        "/api/runs/run-a%2F%2Fx/samples",
        "/api/runs/run-a%5C..%5C..%5Cetc/samples",
        "/api/runs/run-a%2F%00/samples",
        "/api/runs/..%252F..%252Fetc%252Fpasswd/samples",
        "/api/runs/run-a/samples/tallyqa/..%252F..%252Fs00",
        "/api/runs/run-a%252Fx/samples",
        "/api/compare/run-a/..%2Frun-a",
        "/api/compare/..%2F..%2Fetc%2Fpasswd/run-a",
        "/api/images/..%2F..%2Fetc%2Fpasswd",
        "/api/images/0123456789abcdef%2F..",
        "/static/..%2Fapi.py",
        "/static/%2e%2e%2fapi.py",
        "/static/%2e%2e%2f__init__.py",
        "/static/%252e%252e%252fapi.py",
        "/static/..%5capi.py",
        "/static%2Fapp.js",
        "/api%2Fruns",
        "/api/runs%2F..%2Fruns",
    ],
)
def test_traversal_and_odd_ids_get_404(served: tuple[httpx.Client, RunStore], target: str) -> None:
    client, _ = served
    status, body = raw_get(client, target)
    assert status == 404, target
    assert "error" in json.loads(body)
    assert b"root:" not in body and b"import" not in body  # no /etc/passwd, no source file


def test_odd_but_harmless_ids_are_plain_lookups(served: tuple[httpx.Client, RunStore]) -> None:
    client, store = served
    store.open_run("odd run", "s", "x")
    store.add(rec("odd run", "id with spaces & ?#%", 1.0, dataset="d ü"))
    r = client.get(
        "/api/runs/odd%20run/samples/" + quote("d ü", safe="") + "/"
        + quote("id with spaces & ?#%", safe="")
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["sample_id"] == "id with spaces & ?#%"
    listed = client.get("/api/runs/odd%20run/samples").json()
    assert listed["items"][0]["dataset"] == "d ü"
    # SQL-looking ids are parameters, nothing more
    assert client.get("/api/runs/run-a'%20OR%201=1--/samples").status_code == 404


ODD_NAMES = [
    ("exp/try1", "vstar", "val/0001"),  # V* Bench ids are <category>/<name>
    ("a/b/c", "direct_attributes", "sa_1/2/3"),
    ("run with spaces", "d ü", "id with spaces"),
    ("100% sure", "data%set", "%41%2F"),  # a literal '%': decoded once, never twice
    ("hash#tag", "q?x=1", "x&y=2#frag"),
    ("日本語/ラン", "données", "échantillon/ß"),
    ("a%2Fb", "plain", "plain"),  # a literal %2F in a name
]


@pytest.fixture(scope="module")
def odd_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[httpx.Client, RunStore]]:
    store = RunStore(tmp_path_factory.mktemp("odd") / "runs.sqlite")
    for run, dataset, sid in ODD_NAMES:
        store.open_run(run, "odd", "hammr")
        store.add(rec(run, sid, 1.0, dataset=dataset, question=f"q of {run}|{sid}"))
        store.add(rec(run, "other", 0.0, dataset=dataset))
    server = ViewerServer(store)
    server.start_in_thread()
    with httpx.Client(base_url=server.url.rstrip("/"), timeout=10) as client:
        yield client, store
    server.stop()
    store.close()


def seg(name: str) -> str:
    """A name as ONE path segment, as the front end sends it (encodeURIComponent)."""
    return quote(name, safe="")


@pytest.mark.parametrize(("run", "dataset", "sid"), ODD_NAMES)
def test_names_with_slashes_and_odd_characters_open(
    odd_store: tuple[httpx.Client, RunStore], run: str, dataset: str, sid: str
) -> None:
    client, _ = odd_store
    names = [x["name"] for x in client.get("/api/runs").json()["runs"]]
    assert run in names
    listed = client.get(f"/api/runs/{seg(run)}/samples")
    assert listed.status_code == 200, run
    assert {(x["dataset"], x["sample_id"]) for x in listed.json()["items"]} == {
        (dataset, sid),
        (dataset, "other"),
    }
    # the filter takes the dataset from the query string
    filtered = client.get(f"/api/runs/{seg(run)}/samples", params={"dataset": dataset})
    assert filtered.json()["total"] == 2
    detail = client.get(f"/api/runs/{seg(run)}/samples/{seg(dataset)}/{seg(sid)}")
    assert detail.status_code == 200, (run, sid)
    d = detail.json()
    assert (d["dataset"], d["sample_id"], d["question"]) == (dataset, sid, f"q of {run}|{sid}")
    both = client.get(f"/api/compare/{seg(run)}/{seg(run)}", params={"only": "all"}).json()
    assert both["total"] == 2
    # the same name sent unencoded is other segments: nothing
    if "/" in sid:
        assert client.get(f"/api/runs/{seg(run)}/samples/{seg(dataset)}/{sid}").status_code == 404


def test_encoded_names_decode_exactly_once(odd_store: tuple[httpx.Client, RunStore]) -> None:
    client, _ = odd_store
    # "a%2Fb" is a run of its own; "a/b" is not a run: each resolves only to itself
    assert client.get("/api/runs/a%252Fb/samples").json()["total"] == 2
    assert client.get("/api/runs/a%2Fb/samples").status_code == 404
    # double-encoding the slash of exp/try1 names the literal run "exp%2Ftry1": none
    r = client.get("/api/runs/exp%252Ftry1/samples")
    assert r.status_code == 404 and "exp%2Ftry1" in r.json()["error"]
    ok = client.get("/api/runs/100%25%20sure/samples/data%25set/%2541%252F")
    assert ok.status_code == 200 and ok.json()["sample_id"] == "%41%2F"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_get_405(served: tuple[httpx.Client, RunStore], method: str) -> None:
    client, _ = served
    r = client.request(method, "/api/runs")
    assert r.status_code == 405 and "GET" in r.headers["allow"]


def test_foreign_host_header_is_refused(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    assert client.get("/api/runs", headers={"Host": "evil.example"}).status_code == 403
    assert client.get("/api/runs", headers={"Host": "localhost:1"}).status_code == 200


def test_view_trace_file_builds_a_one_sample_store(tmp_path: Path) -> None:
    trace = traced("how many cars?", fail=True)
    trace_path = trace.save(tmp_path / "out" / "my-trace.json")
    store, name = store_from_trace(trace_path, tmp_path / "tmp.sqlite")
    try:
        assert name == "my-trace" and store.run_names() == ["my-trace"]
        total, items = store.list_page(name)
        assert total == 1 and items[0]["agent"] == "CountingAgent"
        assert items[0]["error_kinds"] == ["bad_arguments", "syntax"]
        got = store.get(name, items[0]["dataset"], items[0]["sample_id"])
        assert got.trace is not None and got.trace.to_dict() == trace.to_dict()
        assert set(got.trace.all_images()) == set(trace.all_images())
        server = ViewerServer(store)
        server.start_in_thread()
        try:
            with httpx.Client(base_url=server.url.rstrip("/")) as client:
                one = client.get(f"/api/runs/{name}/samples").json()["items"][0]
                d = client.get(f"/api/runs/{name}/samples/{one['dataset']}/{one['sample_id']}")
                h = d.json()["trace"]["inputs"]["image"]["$image"]
                assert client.get(f"/api/images/{h}").status_code == 200
        finally:
            server.stop()
    finally:
        store.close()


def test_view_command_errors(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    store.close()
    runner = CliRunner()
    r = runner.invoke(main, ["view", "missing-run", "--store", str(tmp_path / "runs.sqlite")])
    assert r.exit_code == 2 and "no run named 'missing-run'" in r.output
    r = runner.invoke(main, ["view", "x.json", "--store", str(tmp_path / "none.sqlite")])
    assert r.exit_code == 2 and "trace file not found" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = runner.invoke(main, ["view", str(bad)])
    assert r.exit_code == 2 and "cannot read trace" in r.output


def test_report_html_is_one_self_contained_file(tmp_path: Path) -> None:
    store_path = tmp_path / "runs.sqlite"
    store = RunStore(store_path)
    fill(store)
    store.close()
    out = tmp_path / "report" / "run-a.html"
    r = CliRunner().invoke(
        main, ["report", "run-a", "--html", str(out), "--store", str(store_path), "--samples", "50"]
    )
    assert r.exit_code == 0, r.output
    text = out.read_text()
    m = re.search(
        rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>', text, re.DOTALL
    )
    assert m is not None
    data = json.loads(m.group(1))
    assert [x["name"] for x in data["runs"]] == ["run-a"]
    items = data["samples"]["run-a"]
    assert len(items) == 35
    s00 = next(x for x in items if x["sample_id"] == "s00")
    assert s00["agent"] == "CountingAgent" and s00["judge"] == "exact"
    assert s00["trace"]["steps"][0]["child"]["agent"] == "CountingAgent"
    h = s00["trace"]["inputs"]["image"]["$image"]
    assert data["images"][h].startswith("data:image/png;base64,iVBOR")
    assert f'"{h}":"data:image/png;base64,' in text
    # nothing is loaded from elsewhere: no src/href/url() to a file or the network
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|static/|/static)""", text, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", text, re.I)
    assert not re.search(r"<(link|script)\b[^>]*\b(href|src)=", text, re.I)
    # unknown run
    r = CliRunner().invoke(
        main, ["report", "nope", "--html", str(tmp_path / "x.html"), "--store", str(store_path)]
    )
    assert r.exit_code == 2 and "no run named 'nope'" in r.output


def test_report_data_cannot_break_out_of_its_script_block(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    store.open_run("r", "s", "x")
    store.add(rec("r", "1", 1.0, question="</script><script>alert(1)</script><!--"))
    html = render_html(report_data(store, ["r"], ci_samples=10))
    store.close()
    assert "alert(1)</script>" not in html and "<!--" not in html.split(DATA_ID)[1]
    block = html.split(f'id="{DATA_ID}">')[1].split("</script>")[0]
    assert json.loads(block)["samples"]["r"][0]["question"].startswith("</script>")


def test_old_store_gets_the_new_columns_backfilled(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    store = RunStore(path)
    fill(store)
    store.close()
    # make it look like a store from before the agent / error_kinds columns
    db = sqlite3.connect(path)
    db.executescript(
        "DROP INDEX samples_by_agent; DROP INDEX samples_by_error_kinds;"
        "ALTER TABLE samples DROP COLUMN agent; ALTER TABLE samples DROP COLUMN error_kinds;"
        "PRAGMA user_version=1;"
    )
    db.commit()
    db.close()
    import hammr.eval.store as store_mod

    old_batch = store_mod.BACKFILL_BATCH
    store_mod.BACKFILL_BATCH = 7  # several batches
    try:
        store = RunStore(path)
    finally:
        store_mod.BACKFILL_BATCH = old_batch
    try:
        assert store.count("run-a", {"agent": "CountingAgent"}) == 30
        assert store.count("run-a", {"error_kind": "syntax"}) == 10
        assert store.count("run b/ü", {"agent": ""}) == 16
        indexes = {r[1] for r in sqlite3.connect(path).execute("PRAGMA index_list(samples)")}
        assert {"samples_by_agent", "samples_by_error_kinds"} <= indexes
    finally:
        store.close()


def test_trace_facets() -> None:
    assert trace_facets(None) == ("", "")
    t = traced("q", fail=True).to_dict()
    assert trace_facets(t) == ("CountingAgent", ",bad_arguments,syntax,")
    assert trace_facets({"agent": "Solo", "steps": []}) == ("Solo", "")


# -- the server: headers, HEAD, idle and half-open connections, limits, the command ----------


def test_security_headers_and_head(served: tuple[httpx.Client, RunStore]) -> None:
    client, _ = served
    get = client.get("/api/runs")
    for r in (get, client.get("/api/nothing"), client.post("/api/runs")):
        assert r.headers["x-content-type-options"] == "nosniff", r.url
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["x-frame-options"] == "DENY"
    head = client.head("/api/runs")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(get.content))
    assert head.headers["content-type"] == get.headers["content-type"]
    assert client.head("/api/runs", headers={"Host": "evil.example"}).status_code == 403
    assert client.head("/api/nothing").status_code == 404


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_keep_alive_answers_are_not_held_back(served: tuple[httpx.Client, RunStore]) -> None:
    """Headers and body are two writes: without TCP_NODELAY each answer on a kept-alive
    connection waits ~40 ms for the client's delayed ACK. The server runs in this process,
    so its end of the connection is one of our sockets: the option is read there (timing the
    answers would measure the machine's load as much as the option)."""
    client, _ = served
    assert client.get("/api/runs/run-a/samples/tallyqa/s03").status_code == 200
    port = httpx.URL(str(client.base_url)).port
    accepted = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            dup = os.dup(int(fd))
        except OSError:  # closed since it was listed
            continue
        try:
            sock = socket.socket(fileno=dup)
        except OSError:  # not a socket
            os.close(dup)
            continue
        with sock:
            try:
                if sock.type != socket.SOCK_STREAM or sock.getsockname()[1] != port:
                    continue
                sock.getpeername()  # accepted from a client, not the listening socket
            except (OSError, IndexError, TypeError):
                continue
            accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    assert accepted and all(accepted), accepted


def thread_counts() -> tuple[int, int]:
    """(Python threads, OS threads) of this process."""
    return threading.active_count(), len(os.listdir("/proc/self/task"))


def read_response(sock: socket.socket) -> http.client.HTTPResponse:
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    resp.read()
    return resp


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock`` (EOF or reset), None if it stayed open."""
    t0 = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - t0


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_idle_connections_cost_no_threads_and_do_not_block(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    base_py, base_os = thread_counts()
    server = ViewerServer(store)
    server.start_in_thread()
    host, port = server.server_address[:2]
    idle: list[socket.socket] = []
    try:
        for i in range(300):
            s = socket.create_connection((host, port), timeout=5)
            if i % 3 == 1:
                s.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            elif i % 3 == 2:
                s.sendall(b"GE")
            idle.append(s)
        time.sleep(0.2)  # let the server accept them all
        with httpx.Client(base_url=server.url.rstrip("/"), timeout=5) as client:
            t0 = time.perf_counter()
            r = client.get("/api/runs")
            first = time.perf_counter() - t0
            assert r.status_code == 200 and len(r.json()["runs"]) == 2
            t0 = time.perf_counter()
            assert client.get("/").status_code == 200
            page = time.perf_counter() - t0
        py, os_threads = thread_counts()
        print(
            f"300 idle connections: threads {base_py}->{py} (python), {base_os}->{os_threads} "
            f"(os); GET /api/runs {first * 1000:.1f} ms, GET / {page * 1000:.1f} ms"
        )
        # answered while every idle connection is still open (not after some were closed)
        assert py <= base_py + 20 and os_threads <= base_os + 20
        # every idle connection is still open (not refused, not reset): they were accepted
        assert closed_within(idle[0], 0.05) is None
    finally:
        for s in idle:
            s.close()
        server.stop()
        store.close()


def test_incomplete_requests_are_closed_at_the_deadline(tmp_path: Path) -> None:
    """A 1 s deadline beside a keep-alive of 60 s: what closes a connection within 30 s is
    the deadline, however late a busy machine gets to it. Lower bounds (it waited for the
    deadline) hold on any machine; no upper bound is about speed."""
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    server = ViewerServer(store, request_timeout=1.0, keep_alive=60)
    server.start_in_thread()
    addr = server.server_address[:2]
    request = b"GET /api/runs/run-a/samples?limit=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    socks: list[socket.socket] = []
    try:
        t0 = time.monotonic()
        silent = socket.create_connection(addr, timeout=30)
        partial = socket.create_connection(addr, timeout=30)
        partial.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks += [silent, partial]
        assert closed_within(silent, 30) is not None
        assert closed_within(partial, 30) is not None
        assert time.monotonic() - t0 > 0.9  # each was given its second

        # trickling a header a byte at a time does not extend the deadline: the connection
        # is closed while the header is still coming (it would take 50 s)
        trickle = socket.create_connection(addr, timeout=30)
        socks.append(trickle)
        closed = False
        for b in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 1000:
            try:
                trickle.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.05)
            if closed_within(trickle, 0.001) is not None:
                closed = True
                break
        assert closed, "the trickled header was let through"

        # a busy keep-alive connection lives past the deadline (each answer re-arms it) ...
        busy = socket.create_connection(addr, timeout=30)
        socks.append(busy)
        t0 = time.monotonic()
        for i in range(8):
            if i:
                time.sleep(0.2)
            busy.sendall(request)
            assert read_response(busy).status == 200
        assert time.monotonic() - t0 > 1.4  # past request_timeout, on the same socket
        # ... and once quiet it is closed by the deadline, long before keep-alive's 60 s
        assert closed_within(busy, 30) is not None
    finally:
        for s in socks:
            s.close()
        server.stop()
        store.close()


def test_connection_limit_answers_503(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    server = ViewerServer(store, max_connections=10)
    server.start_in_thread()
    idle = [socket.create_connection(server.server_address[:2], timeout=5) for _ in range(12)]
    try:
        # the server takes in the idle connections in its own time: wait for the state
        with httpx.Client(base_url=server.url.rstrip("/"), timeout=HANG_S) as client:
            wait_until(lambda: client.get("/api/runs").status_code == 503, "a 503")
            for s in idle:
                s.close()
            wait_until(lambda: client.get("/api/runs").status_code == 200, "a 200 again")
    finally:
        for s in idle:
            s.close()
        server.stop()
        store.close()


def test_concurrent_requests_use_a_bounded_pool(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    base_py, _ = thread_counts()
    server = ViewerServer(store, workers=3)
    server.start_in_thread()
    prefix = f"hammr-view-{server.server_address[1]}_"  # this server's pool threads
    seen: list[int] = []
    statuses: list[int] = []

    def client_thread() -> None:
        with httpx.Client(base_url=server.url.rstrip("/"), timeout=HANG_S) as c:
            for i in range(5):
                statuses.append(c.get(f"/api/runs/run-a/samples?offset={i}").status_code)

    try:
        clients = [threading.Thread(target=client_thread) for _ in range(20)]
        for t in clients:
            t.start()
        for _ in range(20):
            names = [t.name for t in threading.enumerate()]
            seen.append(sum(n.startswith(prefix) for n in names))
            time.sleep(0.01)
        for t in clients:
            t.join(timeout=HANG_S)
        assert statuses == [200] * 100
        assert max(seen) <= 3
        workers = [t for t in threading.enumerate() if t.name.startswith(prefix)]
        assert 1 <= len(workers) <= 3
    finally:
        server.stop()
        store.close()
    assert threading.active_count() <= base_py + 3  # the loop thread is gone after stop


def test_ipv6_loopback(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    store = RunStore(tmp_path / "runs.sqlite")
    fill(store)
    try:
        server = ViewerServer(store, "::1", 0)
    except OSError as e:
        store.close()
        pytest.skip(f"cannot bind ::1: {e}")
    server.start_in_thread()
    try:
        assert server.url.startswith("http://[::1]:") and server.url.endswith("/")
        assert server.server_address[1] != 0
        with httpx.Client(base_url=server.url.rstrip("/"), timeout=5) as client:
            assert client.get("/api/runs").status_code == 200
            assert client.get("/api/runs", headers={"Host": "evil.example"}).status_code == 403
    finally:
        server.stop()
        store.close()


def test_view_command_serves_and_stops_on_sigint(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    store_path = tmp_path / "runs.sqlite"
    store = RunStore(store_path)
    fill(store)
    store.close()
    env = {**os.environ, "HAMMR_CONFIG": ""}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from hammr.cli import main; main()", "view", "run b/ü",
         "--store", str(store_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/#/run/run%20b%2F%C3%BC", url), url
        base = url.split("#")[0].rstrip("/")
        r = httpx.get(base + "/api/runs/run%20b%2F%C3%BC/samples", timeout=HANG_S)
        assert r.status_code == 200 and r.json()["total"] == 16
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err, err
    with pytest.raises(httpx.ConnectError):
        httpx.get(base + "/api/runs", timeout=2)


def test_a_mulprog_sample_is_data_and_the_viewer_sets_no_markup(tmp_path: Path) -> None:
    """A MulProg run (scripted LLM and vision) whose object is named like HTML: the detail
    endpoint returns the trace as JSON with the program lines and the explanation's boxes,
    the static report holds the name only escaped inside its data block, and app.js has no
    way to turn a string into markup."""
    from mulprog_web_support import DATASET, EVIL, RUN, store_mulprog_run

    store = RunStore(tmp_path / "runs.sqlite")
    traces = store_mulprog_run(store)
    server = ViewerServer(store, "127.0.0.1", 0)
    server.start_in_thread()
    try:
        with httpx.Client(base_url=server.url.rstrip("/"), timeout=10) as client:
            r = client.get(f"/api/runs/{RUN}/samples/{DATASET}/evil")
            listed = client.get(f"/api/runs/{RUN}/samples").json()
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/json")
        trace = r.json()["trace"]
        assert trace == json.loads(json.dumps(traces["evil"].to_dict()))
        assert [s["tool"] for s in trace["steps"]] == ["PLAN", "LOC", "COUNT", "RESULT", "EXPLAIN"]
        assert [s["line"] for s in trace["steps"]] == [None, 0, 1, 2, None]
        assert EVIL in trace["steps"][1]["action"]
        (ref,) = trace["steps"][-1]["output"]["boxes"]
        assert (
            ref["name"] == EVIL
            and ref["boxes"][0]["$box"] == trace["steps"][1]["output"][0]["$box"]
        )
        assert {it["agent"] for it in listed["items"]} == {"MulProg"}
        html = render_html(report_data(store, [RUN], ci_samples=10))
    finally:
        server.stop()
        store.close()
    assert EVIL not in html and "<img" not in html
    block = html.split(f'id="{DATA_ID}">')[1].split("</script>")[0]
    evil = next(x for x in json.loads(block)["samples"][RUN] if x["sample_id"] == "evil")
    assert evil["trace"]["steps"][-1]["output"]["boxes"][0]["name"] == EVIL
    js = (Path(__file__).parents[1] / "src" / "hammr" / "web" / "static" / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "srcdoc", "createContextualFragment", "DOMParser"):  # fmt: skip
        assert sink not in js, sink


# -- what the sample page needs about the question -------------------------------------------


def test_runs_say_whether_they_have_ground_truth(
    served: tuple[httpx.Client, RunStore], tmp_path: Path
) -> None:
    """A run with answers has ground truth; a `hammr view TRACE.json` run (from `hammr ask`)
    has none, so its stored scores of 0 are not a result."""
    client, _ = served
    runs = {x["name"]: x for x in client.get("/api/runs").json()["runs"]}
    assert runs["run-a"]["ground_truth"] is True and runs["run b/ü"]["ground_truth"] is True
    trace_path = traced("how many cars?").save(tmp_path / "asked.json")
    store, name = store_from_trace(trace_path, tmp_path / "tmp.sqlite")
    try:
        from hammr.web.api import Api

        entry = Api(store, ci_samples=10).run_entry(name)
        assert entry["ground_truth"] is False
        assert report_data(store, [name], ci_samples=10)["runs"][0]["ground_truth"] is False
    finally:
        store.close()


def test_sample_detail_lists_multiple_choice_options(tmp_path: Path) -> None:
    """The options come from the question the system was asked (the runner appends them to
    the trace's question); the chosen and the correct letter are read as the metric reads
    them."""
    from hammr.eval.metrics.choice import lettered_options
    from hammr.eval.runner import question_text
    from hammr.eval.types import Sample
    from hammr.web.api import Api, choice_view

    sample = Sample("m1", "mc", "Colour?", ("C",), {}, choices=("blue", "red", "green"))
    asked = question_text(sample)
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        store.open_run("mc", "muse-demo", "naive")
        for sid, said in (("m1", "The answer is (B)"), ("m2", "green"), ("m3", "no idea")):
            trace = Trace(agent="NaiveAgent", question=asked, answer=said, status="finished")
            store.add(rec("mc", sid, 0.0, question="Colour?", answers=("C",), prediction=said,
                          trace=trace))  # fmt: skip
        store.add(rec("mc", "open", 1.0, trace=traced("how many cars?")))
        api = Api(store, ci_samples=10)
        got = {sid: json.loads(api.handle(f"/api/runs/mc/samples/tallyqa/{sid}").body)
               for sid in ("m1", "m2", "m3", "open")}  # fmt: skip
    finally:
        store.close()
    assert got["m1"]["options"] == [
        {"letter": "A", "text": "blue"},
        {"letter": "B", "text": "red"},
        {"letter": "C", "text": "green"},
    ]
    assert (got["m1"]["chosen_option"], got["m1"]["correct_option"]) == ("B", "C")
    assert (got["m2"]["chosen_option"], got["m2"]["correct_option"]) == ("C", "C")  # by text
    assert (got["m3"]["chosen_option"], got["m3"]["correct_option"]) == (None, "C")
    assert got["open"]["options"] == [] and got["open"]["correct_option"] is None
    # typed into the question itself (`hammr ask`), no ground truth: nothing is correct
    typed = choice_view(None, "Which?\n(A) cat\n(B) dog", [], "B")
    assert [o["text"] for o in typed["options"]] == ["cat", "dog"]
    assert (typed["chosen_option"], typed["correct_option"]) == ("B", None)
    # letters must run A, B, ...; one option is no list
    assert lettered_options("Q\nA. one\nC. three") == []
    assert lettered_options("Q\nA. one") == []
    assert lettered_options("Q\nB. two\nC. three") == []
