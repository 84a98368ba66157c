"""Probe every hammr command with bad input, as a new user and a hostile one would, and print
the catalogue: which cases hammr handles cleanly and which it does not.

    .venv/bin/python scripts/probe_bad_inputs.py [--work DIR] [--only SUBSTRING] [--jobs N]

A case is *clean* when its command

- never prints a Python traceback;
- for a refusal (``refuse``): exits 2 with one error line (``hammr: error: ...``, or click's
  ``Error: ...`` for a malformed command line);
- for an accepted input (``ok``): exits 0;
- leaves every file it was only asked to read byte for byte as it was (``unchanged``), leaves
  no file where it was told to create none (``absent``), and leaves no temporary file behind;
- prints no terminal control character a model or a file wrote (``no_escapes``).

The fixtures (a run store with a small run, a saved trace, an experience bank) are made once
with the embedded model into ``--work`` (default ``.probe``) and reused by later probes;
making the bank takes minutes on a busy machine. Nothing here downloads anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
HAMMR = str(ROOT / ".venv" / "bin" / "hammr")
DEMO = ROOT / "examples" / "demo"
PLATE = ROOT / "examples" / "plate.png"
ESC = "\x1b"

Expect = Literal["refuse", "ok"]


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    """After ``hammr``; ``{w}`` is the case's own folder, ``{f}`` the shared fixtures."""
    expect: Expect
    setup: Callable[[Path], None] | None = None
    unchanged: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    no_escapes: bool = False
    kept_kind: tuple[str, ...] = ()
    """Paths that must keep their kind (a device, a FIFO): written in place, never replaced."""
    stdin: str | None = None
    timeout: float = 300.0


@dataclass
class Outcome:
    case: Case
    rc: int
    clean: bool
    why: list[str] = field(default_factory=list)
    seconds: float = 0.0


def write(rel: str, data: bytes | str) -> Callable[[Path], None]:
    def make(w: Path) -> None:
        path = w / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)

    return make


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def make(w: Path) -> None:
        for step in steps:
            step(w)

    return make


def fifo(rel: str) -> Callable[[Path], None]:
    """A named pipe with a reader that drains it (a FIFO nobody reads blocks its writer)."""

    def make(w: Path) -> None:
        os.mkfifo(w / rel)

        def drain() -> None:
            with open(w / rel, "rb") as f:
                while f.read(65536):
                    pass

        threading.Thread(target=drain, daemon=True).start()

    return make


def folder(rel: str) -> Callable[[Path], None]:
    return lambda w: (w / rel).mkdir(parents=True, exist_ok=True)


def fixtures_of(w: Path) -> Path:
    """The shared fixtures beside a case's folder (``WORK/cases/NNN`` -> ``WORK/fixtures``)."""
    return w.parent.parent / "fixtures"


def copy(src: str, rel: str) -> Callable[[Path], None]:
    """Copy a fixture (``{f}/...``) into the case's folder."""

    def make(w: Path) -> None:
        source = Path(src.format(f=fixtures_of(w)))
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, w / rel)
        else:
            shutil.copy(source, w / rel)

    return make


def png_claiming(width: int, height: int) -> bytes:
    """A PNG header that claims a huge size and holds almost no data (a decompression bomb's
    shape): Pillow must refuse it without allocating the pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def rotated_jpeg() -> bytes:
    """A 60x20 JPEG stored sideways with EXIF orientation 6 (viewers show it 20x60... upright)."""
    import io

    from PIL import Image

    img = Image.new("RGB", (60, 20), "red")
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=exif)
    return buf.getvalue()


def jsonl_rows(*rows: object) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def demo_row(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": "q1",
        "image": "plate.png",
        "question": "What is written?",
        "answer": "abc",
        "type": "ocr_reasoning",
    }
    row.update(changes)
    return row


def suite(file: str = "q.jsonl") -> str:
    return (
        'name = "probe"\n[[entry]]\nname = "probe_q"\nquestion_type = "ocr_reasoning"\n'
        f'dataset = "jsonl"\nmetric = "exact_match"\nfile = "{file}"\n'
    )


def data_dir(rows: str | bytes) -> Callable[[Path], None]:
    """A data folder ``d`` with the plate image, ``q.jsonl`` and a suite file ``s.toml``."""
    return both(
        copy(str(PLATE), "d/plate.png"),
        write("d/q.jsonl", rows),
        write("s.toml", suite()),
    )


def escape_trace(w: Path) -> None:
    """A saved trace whose model text carries terminal escapes (title, clear screen)."""
    src = fixtures_of(w) / "trace"
    shutil.copytree(src, w / "t")
    doc = json.loads((w / "t" / "trace.json").read_text())
    doc["steps"][0]["thought"] = "look \x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m"
    doc["answer"] = "\x1b[2Jcleared"
    (w / "t" / "trace.json").write_text(json.dumps(doc))


def hostile_trace(image_dir: str | None = None, ref: str | None = None) -> Callable[[Path], None]:
    def make(w: Path) -> None:
        src = fixtures_of(w) / "trace"
        shutil.copytree(src, w / "t")
        doc = json.loads((w / "t" / "trace.json").read_text())
        if image_dir is not None:
            doc["image_dir"] = image_dir
        if ref is not None:
            doc["inputs"]["image"]["$image"] = ref
        (w / "t" / "trace.json").write_text(json.dumps(doc))

    return make


def symlink_trace(w: Path) -> None:
    src = fixtures_of(w) / "trace"
    shutil.copytree(src, w / "t")
    doc = json.loads((w / "t" / "trace.json").read_text())
    (w / "t" / "images" / "evil.png").symlink_to("/etc/passwd")
    doc["inputs"]["image"]["$image"] = "evil"
    (w / "t" / "trace.json").write_text(json.dumps(doc))


def toml_config(text: str, rel: str = "h.toml") -> Callable[[Path], None]:
    return write(rel, text)


STORE = ("--store", "{f}/s.sqlite")
RUN = "r1"
DOWN = '[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\nretries = 0\n'


def catalogue() -> list[Case]:
    # fmt: off
    c: list[Case] = []
    add = c.append
    img = str(PLATE)
    # --- ask -------------------------------------------------------------------------------
    add(Case("ask: image missing", ("ask", "{w}/none.png", "q?"), "refuse"))
    add(Case("ask: image is a folder", ("ask", "{w}", "q?"), "refuse"))
    add(Case("ask: corrupt image", ("ask", "{w}/x.png", "q?"), "refuse", write("x.png", b"\x89PNG garbage" * 10)))
    add(Case("ask: zero-byte image", ("ask", "{w}/x.jpg", "q?"), "refuse", write("x.jpg", b"")))
    add(Case("ask: text named .jpg", ("ask", "{w}/x.jpg", "q?"), "refuse", write("x.jpg", "hello")))
    add(Case("ask: decompression bomb", ("ask", "{w}/x.png", "q?"), "refuse", write("x.png", png_claiming(100000, 100000))))
    add(Case("ask: empty question", ("ask", img, ""), "refuse"))
    add(Case("ask: blank question", ("ask", img, "   \n "), "refuse"))
    add(Case("ask: 100k-character question", ("ask", img, "why " * 25000), "refuse"))
    add(Case("ask: --point not numbers", ("ask", img, "q?", "--point", "a,b"), "refuse"))
    add(Case("ask: --point outside", ("ask", img, "q?", "--point", "1e9,1e9"), "refuse"))
    add(Case("ask: --point negative", ("ask", img, "q?", "--point", "-5,3"), "refuse"))
    add(Case("ask: --point nan", ("ask", img, "q?", "--point", "nan,nan"), "refuse"))
    add(Case("ask: --image2 missing", ("ask", img, "q?", "--image2", "{w}/none.png"), "refuse"))
    add(Case("ask: unknown system", ("ask", img, "q?", "--system", "gpt5"), "refuse"))
    add(Case("ask: --max-steps 0", ("ask", img, "q?", "--max-steps", "0"), "refuse"))
    add(Case("ask: --config missing", ("ask", img, "q?", "--config", "{w}/none.toml"), "refuse"))
    add(Case("ask: --config not TOML", ("ask", img, "q?", "--config", "{w}/h.toml"), "refuse", toml_config("[llm\nx=")))
    add(Case("ask: --config unknown key", ("ask", img, "q?", "--config", "{w}/h.toml"), "refuse", toml_config("[agent]\nmax_stepz = 3\n")))
    add(Case("ask: --config wrong type", ("ask", img, "q?", "--config", "{w}/h.toml"), "refuse", toml_config('[agent]\nmax_steps = "many"\n')))
    add(Case("ask: --config with BOM", ("ask", img, "q?", "--system", "cot", "--config", "{w}/h.toml"), "ok", toml_config("\ufeff[agent]\nmax_steps = 3\n")))
    add(Case("ask: --config is a folder", ("ask", img, "q?", "--config", "{w}"), "refuse"))
    add(Case("ask: LLM server down", ("ask", img, "q?", "--system", "cot", "--config", "{w}/h.toml", "--no-cache"), "refuse", toml_config(DOWN)))
    for system in ("reflexion", "expel", "muse"):
        add(Case(f"ask: zero-byte --memory for {system}", ("ask", img, "q?", "--system", system, "--memory", "{w}/m.db"), "refuse", write("m.db", b""), unchanged=("{w}/m.db",)))
    add(Case("ask: random-bytes --memory", ("ask", img, "q?", "--system", "expel", "--memory", "{w}/m.db"), "refuse", write("m.db", os.urandom(3000)), unchanged=("{w}/m.db",)))
    add(Case("ask: run store as --memory", ("ask", img, "q?", "--system", "muse", "--memory", "{w}/s.sqlite"), "refuse", copy("{f}/s.sqlite", "s.sqlite"), unchanged=("{w}/s.sqlite",)))
    add(Case("ask: --memory missing", ("ask", img, "q?", "--system", "reflexion", "--memory", "{w}/none.db"), "refuse", absent=("{w}/none.db",)))
    add(Case("ask: --trace to /dev/full", ("ask", img, "q?", "--system", "cot", "--trace", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("ask: --trace is a folder", ("ask", img, "q?", "--system", "cot", "--trace", "{w}"), "refuse"))
    add(Case("ask: EXIF-rotated image", ("ask", "{w}/r.jpg", "q?", "--system", "cot"), "ok", write("r.jpg", rotated_jpeg())))
    # --- route -----------------------------------------------------------------------------
    add(Case("route: empty question", ("route", ""), "refuse"))
    add(Case("route: blank question", ("route", "  "), "refuse"))
    add(Case("route: 100k-character question", ("route", "why " * 25000), "refuse"))
    add(Case("route: --router llm, server down", ("route", "How many coins?", "--router", "llm", "--config", "{w}/h.toml"), "refuse", toml_config(DOWN)))
    add(Case("route: --image missing", ("route", "q?", "--image", "{w}/none.png"), "refuse"))
    add(Case("route: --point bad", ("route", "q?", "--point", "1,2,3"), "refuse"))
    add(Case("route: unknown router", ("route", "q?", "--router", "oracle"), "refuse"))
    # --- replay ----------------------------------------------------------------------------
    add(Case("replay: missing file", ("replay", "{w}/none.json"), "refuse"))
    add(Case("replay: not JSON", ("replay", "{w}/t.json"), "refuse", write("t.json", "not json")))
    add(Case("replay: empty file", ("replay", "{w}/t.json"), "refuse", write("t.json", "")))
    add(Case("replay: JSON list", ("replay", "{w}/t.json"), "refuse", write("t.json", "[1, 2]")))
    add(Case("replay: wrong format tag", ("replay", "{w}/t.json"), "refuse", write("t.json", '{"format": "other/9"}')))
    add(Case("replay: UTF-16 file", ("replay", "{w}/t.json"), "refuse", write("t.json", '{"format": 1}'.encode("utf-16"))))
    add(Case("replay: image ref ../../etc/passwd", ("replay", "{w}/t/trace.json"), "refuse", hostile_trace(ref="../../../../etc/passwd")))
    add(Case("replay: image_dir /etc", ("replay", "{w}/t/trace.json"), "refuse", hostile_trace(image_dir="/etc")))
    add(Case("replay: image_dir ../..", ("replay", "{w}/t/trace.json"), "refuse", hostile_trace(image_dir="../../..")))
    add(Case("replay: image symlinked out", ("replay", "{w}/t/trace.json"), "refuse", symlink_trace))
    add(Case("replay: terminal escapes in model text", ("replay", "{w}/t/trace.json"), "ok", escape_trace, no_escapes=True))
    add(Case("replay: the fixture trace", ("replay", "{f}/trace/trace.json"), "ok", unchanged=("{f}/trace/trace.json",)))
    # --- runs ------------------------------------------------------------------------------
    add(Case("runs: zero-byte --store", ("runs", "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("runs: random-bytes --store", ("runs", "--store", "{w}/s.db"), "refuse", write("s.db", os.urandom(5000)), unchanged=("{w}/s.db",)))
    add(Case("runs: --store is a folder", ("runs", "--store", "{w}"), "refuse"))
    add(Case("runs: a bank as --store", ("runs", "--store", "{w}/b.db"), "refuse", copy("{f}/bank.db", "b.db"), unchanged=("{w}/b.db",)))
    add(Case("runs: missing --store", ("runs", "--store", "{w}/none.db"), "ok", absent=("{w}/none.db",)))
    add(Case("runs: the fixture store", ("runs", *STORE), "ok", unchanged=("{f}/s.sqlite",)))
    # --- report ----------------------------------------------------------------------------
    add(Case("report: unknown run", ("report", "nope", *STORE), "refuse"))
    add(Case("report: --out /dev/full", ("report", RUN, *STORE, "--out", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("report: --out a folder", ("report", RUN, *STORE, "--out", "{w}"), "refuse"))
    add(Case("report: --out /dev/null", ("report", RUN, *STORE, "--out", "/dev/null"), "ok", kept_kind=("/dev/null",)))
    add(Case("report: --out a FIFO", ("report", RUN, *STORE, "--out", "{w}/p"), "ok", fifo("p"), kept_kind=("{w}/p",)))
    add(Case("report: --out in a missing folder (made)", ("report", RUN, *STORE, "--out", "{w}/no/such/r.md"), "ok"))
    add(Case("report: --html /dev/full", ("report", RUN, *STORE, "--html", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("report: --html a folder", ("report", RUN, *STORE, "--html", "{w}"), "refuse"))
    add(Case("report: --scaling is a file", ("report", RUN, *STORE, "--scaling", "{w}/x"), "refuse", write("x", "keep"), unchanged=("{w}/x",)))
    add(Case("report: --samples 0", ("report", RUN, *STORE, "--samples", "0"), "refuse"))
    add(Case("report: --ablation without --scaling", ("report", RUN, *STORE, "--ablation", "memory.k"), "refuse"))
    add(Case("report: zero-byte --store", ("report", RUN, "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("report: the fixture run", ("report", RUN, *STORE), "ok", unchanged=("{f}/s.sqlite",)))
    # --- errors ----------------------------------------------------------------------------
    add(Case("errors: unknown run", ("errors", "nope", *STORE), "refuse"))
    add(Case("errors: --export /dev/full", ("errors", RUN, *STORE, "--export", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("errors: --export a FIFO", ("errors", RUN, *STORE, "--export", "{w}/p"), "ok", fifo("p"), kept_kind=("{w}/p",)))
    add(Case("errors: --export a folder", ("errors", RUN, *STORE, "--export", "{w}"), "refuse"))
    add(Case("errors: --labels missing", ("errors", RUN, *STORE, "--labels", "{w}/none.csv"), "refuse"))
    add(Case("errors: --labels garbage", ("errors", RUN, *STORE, "--labels", "{w}/l.csv"), "refuse", write("l.csv", "a,b\n\x00\x01,\n")))
    add(Case("errors: --labels latin-1", ("errors", RUN, *STORE, "--labels", "{w}/l.csv"), "refuse", write("l.csv", "run,sample,caf\xe9\n".encode("latin-1"))))
    add(Case("errors: --per-type 0", ("errors", RUN, *STORE, "--export", "{w}/e.csv", "--per-type", "0"), "refuse", absent=("{w}/e.csv",)))
    # --- explain ---------------------------------------------------------------------------
    add(Case("explain: --out /dev/full", ("explain", RUN, *STORE, "--out", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("explain: --out a FIFO", ("explain", RUN, *STORE, "--out", "{w}/p"), "ok", fifo("p"), kept_kind=("{w}/p",)))
    add(Case("explain: --out a folder", ("explain", RUN, *STORE, "--out", "{w}"), "refuse"))
    add(Case("explain: --out in a missing folder (made)", ("explain", RUN, *STORE, "--out", "{w}/no/e.jsonl"), "ok"))
    add(Case("explain: unknown run", ("explain", "nope", *STORE), "refuse"))
    add(Case("explain: unknown --suite", ("explain", RUN, *STORE, "--suite", "nope", "--data-dir", "{w}"), "refuse"))
    add(Case("explain: mevqa, empty data folder", ("explain", RUN, *STORE, "--suite", "mevqa", "--data-dir", "{w}"), "refuse"))
    # --- eval ------------------------------------------------------------------------------
    ev = ("eval", "--suite", "{w}/s.toml", "--data-dir", "{w}/d", "--system", "cot", "--store", "{w}/st.db")
    add(Case("eval: unknown suite", ("eval", "--suite", "nope", "--data-dir", "{w}", "--system", "cot", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("eval: --data-dir missing", ("eval", "--suite", "demo", "--data-dir", "{w}/none", "--system", "cot"), "refuse"))
    add(Case("eval: data folder without the suite's files", ("eval", "--suite", "demo", "--data-dir", "{w}", "--system", "cot", "--store", "{w}/st.db"), "refuse"))
    add(Case("eval: question is a list", ev, "refuse", data_dir(jsonl_rows(demo_row(question=["a", "b"])))))
    add(Case("eval: answer is a dict", ev, "refuse", data_dir(jsonl_rows(demo_row(answer={"a": 1})))))
    add(Case("eval: image is a number", ev, "refuse", data_dir(jsonl_rows(demo_row(image=7)))))
    add(Case("eval: row is a list", ev, "refuse", data_dir(jsonl_rows([1, 2]))))
    add(Case("eval: JSONL in latin-1", ev, "refuse", data_dir(jsonl_rows(demo_row(question="caf\xe9?")).encode("latin-1"))))
    add(Case("eval: JSONL in UTF-16", ev, "refuse", data_dir(jsonl_rows(demo_row()).encode("utf-16"))))
    add(Case("eval: JSONL with a BOM", (*ev, "--max-steps", "1"), "ok", data_dir(("\ufeff" + jsonl_rows(demo_row())).encode())))
    add(Case("eval: broken JSON line", ev, "refuse", data_dir(jsonl_rows(demo_row()) + "{oops\n")))
    add(Case("eval: empty JSONL", ev, "refuse", data_dir("")))
    add(Case("eval: 100k-character question", ev, "refuse", data_dir(jsonl_rows(demo_row(question="why " * 25000)))))
    add(Case("eval: --judge bem without checkpoint", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--limit", "1", "--judge", "bem", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("eval: --bem-checkpoint missing", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--judge", "bem", "--bem-checkpoint", "{w}/none", "--store", "{w}/st.db"), "refuse"))
    add(Case("eval: zero-byte --store", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--limit", "1", "--store", "{w}/st.db"), "refuse", write("st.db", b""), unchanged=("{w}/st.db",)))
    add(Case("eval: --store is a folder", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--store", "{w}"), "refuse"))
    add(Case("eval: a bank as --store", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--store", "{w}/b.db"), "refuse", copy("{f}/bank.db", "b.db"), unchanged=("{w}/b.db",)))
    add(Case("eval: zero-byte --memory for expel", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "expel", "--memory", "{w}/m.db", "--limit", "1", "--store", "{w}/st.db"), "refuse", write("m.db", b""), unchanged=("{w}/m.db",)))
    add(Case("eval: zero-byte --memory for reflexion", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "reflexion", "--memory", "{w}/m.db", "--limit", "1", "--store", "{w}/st.db"), "refuse", write("m.db", b""), unchanged=("{w}/m.db",)))
    add(Case("eval: --ray-address bogus", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--limit", "1", "--executor", "ray", "--ray-address", "ray://127.0.0.1:9", "--store", "{w}/st.db"), "refuse"))
    add(Case("eval: --ray-address without ray", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--ray-address", "auto", "--store", "{w}/st.db"), "refuse"))
    add(Case("eval: suite file not TOML", ("eval", "--suite", "{w}/s.toml", "--data-dir", "{w}", "--system", "cot"), "refuse", write("s.toml", "[[entry]\n")))
    add(Case("eval: suite entry with unknown metric", ("eval", "--suite", "{w}/s.toml", "--data-dir", "{w}/d", "--system", "cot"), "refuse", both(data_dir(jsonl_rows(demo_row())), write("s.toml", suite().replace("exact_match", "bleu9")))))
    add(Case("eval: suite file with BOM", (*ev, "--max-steps", "1"), "ok", both(data_dir(jsonl_rows(demo_row())), write("s.toml", "\ufeff" + suite()))))
    add(Case("eval: --limit 0", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--limit", "0"), "refuse"))
    add(Case("eval: --retry-failed on an unknown run", ("eval", "--suite", "demo", "--data-dir", str(DEMO), "--system", "cot", "--name", "nope", "--retry-failed", "--store", "{w}/st.db"), "refuse"))
    add(Case("eval: missing image (stored as failed)", (*ev, "--max-steps", "1"), "ok", data_dir(jsonl_rows(demo_row(image="none.png")))))
    # --- memory ----------------------------------------------------------------------------
    add(Case("memory show: zero-byte file", ("memory", "show", "{w}/b.db"), "refuse", write("b.db", b""), unchanged=("{w}/b.db",)))
    add(Case("memory show: missing file", ("memory", "show", "{w}/none.db"), "refuse", absent=("{w}/none.db",)))
    add(Case("memory show: the run store", ("memory", "show", "{w}/s.sqlite"), "refuse", copy("{f}/s.sqlite", "s.sqlite"), unchanged=("{w}/s.sqlite",)))
    add(Case("memory show: the fixture bank", ("memory", "show", "{f}/bank.db"), "ok", unchanged=("{f}/bank.db",)))
    add(Case("memory search: empty question", ("memory", "search", "{f}/bank.db", ""), "refuse", unchanged=("{f}/bank.db",)))
    add(Case("memory search: 100k-character question", ("memory", "search", "{f}/bank.db", "why " * 25000), "refuse"))
    add(Case("memory search: missing bank", ("memory", "search", "{w}/none.db", "q?"), "refuse", absent=("{w}/none.db",)))
    add(Case("memory search: zero-byte bank", ("memory", "search", "{w}/b.db", "q?"), "refuse", write("b.db", b""), unchanged=("{w}/b.db",)))
    add(Case("memory build: unknown run", ("memory", "build", "nope", "-o", "{w}/b.db", *STORE), "refuse", absent=("{w}/b.db",)))
    add(Case("memory build: -o a zero-byte file", ("memory", "build", RUN, "-o", "{w}/b.db", *STORE), "refuse", write("b.db", b""), unchanged=("{w}/b.db",)))
    add(Case("memory build: -o the run store", ("memory", "build", RUN, "-o", "{w}/s.sqlite", "--store", "{w}/s.sqlite"), "refuse", copy("{f}/s.sqlite", "s.sqlite"), unchanged=("{w}/s.sqlite",)))
    add(Case("memory build: -o a folder", ("memory", "build", RUN, "-o", "{w}", *STORE), "refuse"))
    add(Case("memory reflect: unknown run", ("memory", "reflect", "nope", "-o", "{w}/r.db", *STORE), "refuse", absent=("{w}/r.db",)))
    add(Case("memory reflect: LLM down", ("memory", "reflect", RUN, "-o", "{w}/r.db", *STORE, "--config", "{w}/h.toml"), "refuse", toml_config(DOWN), absent=("{w}/r.db",)))
    add(Case("memory insights: unknown run", ("memory", "insights", "nope", "-o", "{w}/e.db", *STORE), "refuse", absent=("{w}/e.db",)))
    add(Case("memory insights: LLM down", ("memory", "insights", RUN, "-o", "{w}/e.db", *STORE, "--config", "{w}/h.toml"), "refuse", toml_config(DOWN), absent=("{w}/e.db",)))
    # --- kb --------------------------------------------------------------------------------
    add(Case("kb search: missing KB", ("kb", "search", "{w}/none.db", "rocket"), "refuse", absent=("{w}/none.db",)))
    add(Case("kb search: zero-byte KB", ("kb", "search", "{w}/k.db", "rocket"), "refuse", write("k.db", b""), unchanged=("{w}/k.db",)))
    add(Case("kb search: empty query", ("kb", "search", "bundled", ""), "refuse"))
    add(Case("kb search: FTS syntax", ("kb", "search", "bundled", 'AND OR "('), "ok"))
    add(Case("kb article: unknown title", ("kb", "article", "Nothing Such Zzz"), "refuse"))
    add(Case("kb build: missing dump", ("kb", "build", "{w}/none.xml", "{w}/k.db"), "refuse", absent=("{w}/k.db",)))
    add(Case("kb build: garbage dump", ("kb", "build", "{w}/d.xml", "{w}/k.db"), "refuse", write("d.xml", os.urandom(2000)), absent=("{w}/k.db",)))
    # --- avis ------------------------------------------------------------------------------
    add(Case("avis graph: missing file", ("avis", "graph", "{w}/none.toml"), "refuse"))
    add(Case("avis graph: not TOML", ("avis", "graph", "{w}/g.toml"), "refuse", write("g.toml", "[[edge\n")))
    add(Case("avis graph: bundled graph with a BOM", ("avis", "graph", "{w}/g.toml"), "ok", lambda w: (w / "g.toml").write_bytes(b"\xef\xbb\xbf" + (ROOT / "src" / "hammr" / "avis" / "default_graph.toml").read_bytes())))
    add(Case("avis induce: unknown run", ("avis", "induce", "nope", *STORE, "-o", "{w}/g.toml"), "refuse", absent=("{w}/g.toml",)))
    add(Case("avis induce: a run of another system", ("avis", "induce", RUN, *STORE, "-o", "{w}/g.toml"), "refuse", absent=("{w}/g.toml",)))
    add(Case("avis induce: -o /dev/full", ("avis", "induce", RUN, *STORE, "-o", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("avis analyze: unknown run", ("avis", "analyze", "nope", *STORE), "refuse"))
    # --- tools, config, systems ------------------------------------------------------------
    add(Case("tools: KB path missing (says so)", ("tools", "--config", "{w}/h.toml"), "ok", toml_config('[tools.kb]\nbackend = "sqlite"\npath = "/nonexistent/kb.db"\n')))
    add(Case("tools: tesseract cmd missing", ("tools", "--config", "{w}/h.toml"), "ok", toml_config('[tools.ocr]\nbackend = "tesseract"\ncmd = "/nonexistent/tesseract"\n')))
    add(Case("tools: OCR lang klingon", ("tools", "--config", "{w}/h.toml"), "ok", toml_config('[tools.ocr]\nbackend = "tesseract"\nlang = "klingon"\n')))
    add(Case("config show: BOM", ("config", "show", "--config", "{w}/h.toml"), "ok", toml_config("\ufeff[agent]\nmax_steps = 3\n")))
    add(Case("config show: not TOML", ("config", "show", "--config", "{w}/h.toml"), "refuse", toml_config("= = =")))
    add(Case("config show: UTF-16", ("config", "show", "--config", "{w}/h.toml"), "refuse", write("h.toml", "[agent]\nmax_steps = 3\n".encode("utf-16"))))
    add(Case("systems: zero-byte --memory", ("systems", "--memory", "{w}/m.db"), "ok", write("m.db", b""), unchanged=("{w}/m.db",)))
    add(Case("agents: unknown --setting", ("agents", "--setting", "magic"), "refuse"))
    add(Case("view: zero-byte --store (refused before serving)", ("view", "--store", "{w}/s.db", "--port", "0"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",), timeout=30))
    add(Case("view: port out of range", ("view", "--port", "99999"), "refuse"))
    # --- experiment ------------------------------------------------------------------------
    ex = (ROOT / "src" / "hammr" / "experiments" / "bundled" / "avis-table3.toml").read_text()
    show = ("experiment", "show", "{w}/avis-table3.toml")
    add(Case("experiment list", ("experiment", "list"), "ok"))
    add(Case("experiment show: unknown name", ("experiment", "show", "nope"), "refuse"))
    add(Case("experiment show: file missing", ("experiment", "show", "{w}/none.toml"), "refuse"))
    add(Case("experiment show: a folder", ("experiment", "show", "{w}"), "refuse"))
    add(Case("experiment show: not TOML", show, "refuse", write("avis-table3.toml", "[[run]\n")))
    add(Case("experiment show: UTF-16", show, "refuse", write("avis-table3.toml", ex.encode("utf-16"))))
    add(Case("experiment show: latin-1", show, "refuse", write("avis-table3.toml", ex.replace("AVIS with", "AVIS \xe9 with").encode("latin-1"))))
    add(Case("experiment show: with a BOM", show, "ok", write("avis-table3.toml", "\ufeff" + ex)))
    add(Case("experiment show: unknown system", show, "refuse", write("avis-table3.toml", ex.replace('system = "avis"', 'system = "gpt5"'))))
    add(Case("experiment show: unknown setting", show, "refuse", write("avis-table3.toml", ex.replace('"avis.autonomous_examples"', '"avis.nonsense"'))))
    add(Case("experiment show: name with a path", show, "refuse", write("avis-table3.toml", ex.replace('name = "avis-table3"', 'name = "../../evil"'))))
    add(Case("experiment show: run name with a path", show, "refuse", write("avis-table3.toml", ex.replace('name = "autonomous"', 'name = "../x"').replace('run = "autonomous"', 'run = "../x"'))))
    add(Case("experiment show: escapes in the title", show, "ok", write("avis-table3.toml", ex.replace('title = "AVIS with', 'title = "\\u001b]0;pwned\\u0007\\u001b[2JAVIS with')), no_escapes=True))
    add(Case("experiment show: zero-byte --store", ("experiment", "show", "avis-table3", "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("experiment show: the fixture store", ("experiment", "show", "avis-table3", *STORE), "ok", unchanged=("{f}/s.sqlite",)))
    add(Case("experiment run: unknown name", ("experiment", "run", "nope", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: --limit 0", ("experiment", "run", "avis-table3", "--demo", "--limit", "0", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: --data-dir missing", ("experiment", "run", "avis-table3", "--data-dir", "{w}/none", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: zero-byte --store", ("experiment", "run", "avis-table3", "--demo", "--limit", "1", "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("experiment run: a bank as --store", ("experiment", "run", "avis-table3", "--demo", "--limit", "1", "--store", "{w}/b.db"), "refuse", copy("{f}/bank.db", "b.db"), unchanged=("{w}/b.db",)))
    add(Case("experiment run: --store is a folder", ("experiment", "run", "avis-table3", "--demo", "--limit", "1", "--store", "{w}"), "refuse"))
    add(Case("experiment run: --prefix with a path", ("experiment", "run", "avis-table3", "--demo", "--limit", "1", "--prefix", "../../x/", "--store", "{w}/d/st.db"), "refuse", absent=("{w}/d/st.db", "{w}/x")))
    add(Case("experiment run: --judge bem without checkpoint", ("experiment", "run", "avis-table3", "--demo", "--limit", "1", "--judge", "bem", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: LLM server down", ("experiment", "run", "avis-table3", "--demo", "--limit", "1", "--config", "{w}/h.toml", "--store", "{w}/st.db"), "refuse", toml_config(DOWN)))
    rep = ("experiment", "report", "avis-table3", *STORE)
    add(Case("experiment report: unknown name", ("experiment", "report", "nope", *STORE), "refuse"))
    add(Case("experiment report: nothing run yet", rep, "ok", unchanged=("{f}/s.sqlite",)))
    add(Case("experiment report: missing --store (nothing run)", ("experiment", "report", "avis-table3", "--store", "{w}/none.db"), "ok", absent=("{w}/none.db",)))
    add(Case("experiment report: zero-byte --store", ("experiment", "report", "avis-table3", "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("experiment report: --csv /dev/full", (*rep, "--csv", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("experiment report: --csv a folder", (*rep, "--csv", "{w}"), "refuse"))
    add(Case("experiment report: --csv a FIFO", (*rep, "--csv", "{w}/p"), "ok", fifo("p"), kept_kind=("{w}/p",)))
    add(Case("experiment report: --html /dev/full", (*rep, "--html", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("experiment report: --html in a missing folder (made)", (*rep, "--html", "{w}/no/r.html"), "ok"))
    add(Case("experiment report: --labels missing", ("experiment", "report", "mulprog-explanations", *STORE, "--labels", "r1={w}/none.csv"), "refuse"))
    add(Case("experiment report: --labels not RUN=FILE", (*rep, "--labels", "nonsense"), "refuse"))
    add(Case("experiment report: --samples 0", (*rep, "--samples", "0"), "refuse"))
    # --- the baselines of issue 19 ---------------------------------------------------------
    add(Case("ask: hammr-oracle, unknown --question-type", ("ask", img, "q?", "--system", "hammr-oracle", "--question-type", "nope"), "refuse"))
    add(Case("ask: hammr-oracle without --question-type", ("ask", img, "q?", "--system", "hammr-oracle"), "refuse"))
    add(Case("ask: vlm without a VQA backend", ("ask", img, "q?", "--system", "vlm"), "refuse"))
    add(Case("ask: llm-only, LLM server down", ("ask", img, "q?", "--system", "llm-only", "--config", "{w}/h.toml", "--no-cache"), "refuse", toml_config(DOWN)))
    # fmt: on
    return c


def make_fixtures(where: Path) -> None:
    """A run store with run r1 (two cot answers on muse-demo), a trace and a bank, made once."""
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HAMMR_CONFIG": ""}
    steps: list[tuple[Path, list[str]]] = [
        (
            where / "s.sqlite",
            [
                "eval", "--suite", "muse-demo", "--data-dir", str(DEMO), "--system", "cot",
                "--limit", "2", "--name", RUN, "--store", str(where / "s.sqlite"),
            ],
        ),
        (
            where / "trace" / "trace.json",
            ["ask", str(PLATE), "What is written?", "--system", "cot", "--trace", str(where / "trace" / "trace.json")],
        ),
        (
            where / "bank.db",
            ["memory", "build", RUN, "-o", str(where / "bank.db"), "--store", str(where / "s.sqlite")],
        ),
    ]  # fmt: skip
    for made, argv in steps:
        if made.exists():
            continue
        print(f"making fixture {made.name}: hammr {' '.join(argv[:3])} ...", file=sys.stderr)
        subprocess.run([HAMMR, *argv], check=True, env=env, capture_output=True, timeout=3600)


def digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def temporaries(w: Path) -> list[str]:
    return sorted(str(p.relative_to(w)) for p in w.rglob("*") if ".tmp" in p.name)


def run_case(case: Case, index: int, work: Path) -> Outcome:
    w = work / "cases" / f"{index:03d}"
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    fixtures = work / "fixtures"

    def fill(s: str) -> str:
        return s.format(w=w, f=fixtures)

    if case.setup is not None:
        try:
            case.setup(w)
        except Exception as e:  # a broken case, not a finding about hammr
            return Outcome(case, -2, False, [f"the probe could not set the case up: {e!r}"])
    before = {p: digest(Path(fill(p))) for p in case.unchanged}
    kinds = {fill(p): stat.S_IFMT(os.stat(fill(p)).st_mode) for p in case.kept_kind}
    env = {**os.environ, "HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(w / "cache"), "TERM": "xterm"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [HAMMR, *(fill(a) for a in case.argv)],
            input=case.stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=case.timeout,
            env=env,
            cwd=w,
        )
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        rc = -1
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
    seconds = time.monotonic() - started
    why: list[str] = []
    if rc == -1:
        why.append(f"did not end within {case.timeout:g} s")
    if "Traceback (most recent call last)" in out + err:
        why.append("traceback")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("hammr: error:", "Error:"))]
    if case.expect == "refuse":
        if rc != 2:
            why.append(f"exit {rc}, not 2")
        if len(errors) != 1:
            why.append(f"{len(errors)} error lines")
    elif rc != 0:
        last = lines[-1][:160] if lines else ""
        why.append(f"exit {rc}, not 0: {last}")
    for p, was in before.items():
        if digest(Path(fill(p))) != was:
            why.append(f"changed {fill(p)}")
    for p in case.absent:
        if Path(fill(p)).exists():
            why.append(f"left {fill(p)}")
    for p, kind in kinds.items():
        if stat.S_IFMT(os.stat(p).st_mode) != kind:
            why.append(f"replaced {p} (a device or FIFO) by another kind of file")
    if case.no_escapes and (ESC in out or "\x07" in out):
        why.append("terminal escapes reached stdout")
    if temporaries(w):
        why.append(f"left temporary files {temporaries(w)}")
    if why and errors:
        why.append(f"said: {errors[0][:160]}")
    return Outcome(case, rc, not why, why, seconds)


def restore_devices() -> None:
    """A probe that replaced /dev/full or /dev/null must not leave the machine broken."""
    for name, minor in (("/dev/null", 3), ("/dev/full", 7)):
        if not stat.S_ISCHR(os.stat(name).st_mode):
            os.remove(name)
            os.mknod(name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            os.chmod(name, 0o666)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / ".probe")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="Run only cases whose name holds this (repeatable).",
    )
    parser.add_argument(
        "--skip", action="append", default=[], help="Leave out cases whose name holds this."
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="Also write the outcomes here.")
    args = parser.parse_args()
    restore_devices()
    make_fixtures(args.work / "fixtures")
    cases = [
        c
        for c in catalogue()
        if (not args.only or any(o in c.name for o in args.only))
        and not any(o in c.name for o in args.skip)
    ]
    outcomes: list[Outcome] = []
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_case, c, i, args.work) for i, c in enumerate(cases)]
            for f in futures:
                o = f.result()
                outcomes.append(o)
                mark = "clean" if o.clean else "NOT CLEAN"
                print(
                    f"{mark:9}  {o.case.name}  ({o.seconds:.1f} s)"
                    + "".join(f"\n           - {w}" for w in o.why),
                    flush=True,
                )
    finally:
        restore_devices()
    clean = sum(o.clean for o in outcomes)
    print(f"\n{clean} of {len(outcomes)} cases clean")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                [
                    {"case": o.case.name, "clean": o.clean, "rc": o.rc, "why": o.why}
                    for o in outcomes
                ],
                indent=1,
            )
        )
    return 0 if clean == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
