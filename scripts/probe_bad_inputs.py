"""Probe every hammr command with bad input, as a new user and a hostile one would, and print
the catalogue: which cases hammr handles cleanly and which it does not.

    .venv/bin/python scripts/probe_bad_inputs.py [--work DIR] [--only SUBSTRING] [--jobs N]
        [--category CATEGORY] [--command COMMAND] [--coverage]

A case is *clean* when its command

- never prints a Python traceback (nor Python's "Exception ignored ..." of an unflushed stdout);
- for a refusal (``refuse``): exits 2 with one error line (``hammr: error: ...``, or click's
  ``Error: ...`` for a malformed command line);
- for a failure that is not bad input (``fail``: its stdout is a full disk, ``kb article``
  finds no article): exits non-zero with one error line;
- for an accepted input (``ok``): exits 0;
- for a server (``serves``): is still serving, its URL printed, when the case's time is up;
- leaves every file it was only asked to read byte for byte as it was (``unchanged``), leaves
  no file where it was told to create none (``absent``), and leaves no temporary file behind;
- prints, on stdout and stderr, no terminal control character (C0 but newline, tab and
  carriage return; DEL; C1) and no bidirectional control that a model or a file wrote, no
  escape sequence half stripped, and shows rich markup it was given rather than obeying it
  (``no_escapes``).

Every leaf command of ``hammr --help`` has at least one case in each category of
:data:`CATEGORIES`: a missing file, a folder, a FIFO, a zero-byte file, a full disk (an output
file or its stdout on ``/dev/full``), a read-only folder (the command run where the kernel
refuses the write: as an unprivileged user, or as root without the capabilities that ignore
permissions) and hostile text (terminal escapes, an OSC 8 link, C1, a bidirectional override,
rich markup). A category that cannot apply to a command is declared, with the reason, in
:data:`NOT_APPLICABLE`. ``tests/test_probe_coverage.py`` checks this without running anything,
so a new command without its cases fails the tests; ``--coverage`` prints the same table. After
a run, the probe prints command x category: clean/total.

The fixtures (a run store with a small run, an AVIS run, a saved trace, an experience bank) are
made once with the embedded model into ``--work`` (default ``.probe``) and reused by later
probes; making them takes a minute or more on a busy machine. Nothing here downloads anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
HAMMR = str(ROOT / ".venv" / "bin" / "hammr")
DEMO = ROOT / "examples" / "demo"
PLATE = ROOT / "examples" / "plate.png"

Expect = Literal["refuse", "ok", "fail", "serves"]
Category = Literal["missing", "folder", "fifo", "zero-byte", "full-disk", "read-only", "hostile"]
CATEGORIES: tuple[Category, ...] = (
    "missing",
    "folder",
    "fifo",
    "zero-byte",
    "full-disk",
    "read-only",
    "hostile",
)
"""What every leaf command must be probed with (or declare in :data:`NOT_APPLICABLE`)."""


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
    category: Category | None = None
    """The category the case stands for; None: :func:`category_of` derives it."""
    stdout_to: str | None = None
    """Send the command's stdout to this path (``/dev/full``: a full disk) instead of a pipe."""
    read_only: tuple[str, ...] = ()
    """Folders made read-only (0o555, their files 0o444) for the case; the command then runs
    where the kernel refuses writes into them (see :func:`confined_prefix`)."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment (``{w}``, ``{f}`` filled)."""
    cwd: str = "{w}"


@dataclass
class Outcome:
    case: Case
    rc: int
    clean: bool
    why: list[str] = field(default_factory=list)
    seconds: float = 0.0
    said: str = ""
    """The command's last line on stderr (its error line, when it wrote one)."""


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


def pipe(rel: str) -> Callable[[Path], None]:
    """A named pipe nobody writes to or reads from: a command that opens it instead of refusing
    it hangs there (and the case says it did not end)."""
    return lambda w: os.mkfifo(w / rel)


HOSTILE = (
    "\x1b]0;pwned\x07"  # set the window title
    "\x1b[2J"  # clear the screen
    "\x1b]8;;http://x\x1b\\click\x1b]8;;\x1b\\"  # an OSC 8 hyperlink
    "\x9b31m"  # a C1 CSI: red
    "\u202e"  # right-to-left override
    "HOSTILE[link=http://x]y[/link]"  # rich markup
)
"""Text a hostile file, model or user writes: a terminal must show none of it as control."""
MARKUP = "HOSTILE[link="
"""What of :data:`HOSTILE` a command that shows its markup shows (one that obeys it shows
``HOSTILEy``; a path keeps it, though it folds ``//`` to ``/``)."""
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""What a terminal obeys rather than shows: C0 but tab, newline and carriage return; DEL;
C1; the bidirectional controls."""
_HALF_STRIPPED = re.compile(
    r"(?<!\x1b)(?<!\\x1b)(?<!\\u001b)(?<!\\033)(?<!\^\[)(?:\]0;pwned|\]8;;http)"
)
"""An OSC sequence of :data:`HOSTILE` whose ESC was dropped and its text left (not one shown
escaped, as ``\\x1b]0;...`` in a repr, which a terminal shows as it is)."""


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def terminal_problems(text: str, where: str) -> list[str]:
    """What in ``text`` (a command's stdout or stderr) a terminal would obey rather than show."""
    why: list[str] = []
    found = sorted(set(_UNSAFE.findall(text)))
    if found:
        why.append(f"terminal control characters reached {where}: {', '.join(map(ascii, found))}")
    if _HALF_STRIPPED.search(text):
        why.append(
            f"an escape sequence reached {where} half stripped (its ESC gone, its text left)"
        )
    if "HOSTILE" in text and MARKUP not in text:
        why.append(
            f"markup reached {where} obeyed (or mangled), not shown: no {MARKUP!r} after HOSTILE"
        )
    return why


def hostile_store(rel: str = "s.sqlite") -> Callable[[Path], None]:
    """The fixture store with hostile text in run r1's questions, answers and errors, and a run
    named with it."""

    def make(w: Path) -> None:
        import sqlite3

        copy("{f}/s.sqlite", rel)(w)
        con = sqlite3.connect(w / rel)
        with con:
            con.execute(
                "UPDATE samples SET question = ?, prediction = ?, error = ? WHERE run = ?",
                (f"What {HOSTILE}?", f"answer {HOSTILE}", f"error {HOSTILE}", RUN),
            )
            con.execute(
                "INSERT INTO runs SELECT ?, suite, system, config, created, settings FROM runs"
                " WHERE name = ?",
                (f"run{HOSTILE}", RUN),
            )
        con.close()

    return make


def hostile_bank(rel: str = "b.db") -> Callable[[Path], None]:
    """The fixture experience bank with hostile text in every experience's texts."""

    def make(w: Path) -> None:
        import sqlite3

        copy("{f}/bank.db", rel)(w)
        con = sqlite3.connect(w / rel)
        with con:
            con.execute(
                "UPDATE experiences SET question = ?, guidance = ?, observation = ?, prediction = ?",
                (f"What {HOSTILE}?", f"guidance {HOSTILE}", f"seen {HOSTILE}", f"said {HOSTILE}"),
            )
        con.close()

    return make


def kb_rows(*records: dict[str, object], rel: str = "d.jsonl") -> Callable[[Path], None]:
    return write(rel, jsonl_rows(*records))


HOSTILE_ARTICLE = {
    "title": "Hostile",
    "text": f"Hostile article {HOSTILE}",
    "url": f"http://x/{HOSTILE}",
}


def built_kb(rel: str, *records: dict[str, object]) -> Callable[[Path], None]:
    """A knowledge base built by ``hammr kb build`` from ``records`` (the bundled ones if
    none)."""

    def make(w: Path) -> None:
        from importlib import resources

        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        if records:
            (w / "kb-src.jsonl").write_text(jsonl_rows(*records))
            src = w / "kb-src.jsonl"
        else:
            src = Path(str(resources.files("hammr") / "data" / "kb" / "mini_wiki.jsonl"))
        env = {**os.environ, "HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(w / "cache")}
        subprocess.run(
            [HAMMR, "kb", "build", str(src), "--out", str(w / rel), "--format", "jsonl"],
            check=True,
            capture_output=True,
            env=env,
            timeout=600,
        )
        (w / "kb-src.jsonl").unlink(missing_ok=True)

    return make


def hostile_trace_text(w: Path) -> None:
    """A saved trace whose question, model text and answer carry :data:`HOSTILE`."""
    shutil.copytree(fixtures_of(w) / "trace", w / "t")
    doc = json.loads((w / "t" / "trace.json").read_text())
    doc["steps"][0]["thought"] = f"look {HOSTILE}"
    doc["answer"] = f"answer {HOSTILE}"
    (w / "t" / "trace.json").write_text(json.dumps(doc))


def config_file_cases(argv: tuple[str, ...], zero_byte: Expect = "ok") -> list[Case]:
    """A missing, a folder, a FIFO and a zero-byte ``--config`` for a command that reads no
    other file (an empty TOML file is every default: ``ok``)."""
    name = " ".join(a for a in argv if not a.startswith("{"))
    conf = (*argv, "--config")
    return [
        Case(f"{name}: --config missing", (*conf, "{w}/none.toml"), "refuse", absent=("{w}/none.toml",)),
        Case(f"{name}: --config is a folder", (*conf, "{w}"), "refuse"),
        Case(f"{name}: --config a FIFO", (*conf, "{w}/h.toml"), "refuse", pipe("h.toml"), kept_kind=("{w}/h.toml",), timeout=60),
        Case(f"{name}: --config zero-byte", (*conf, "{w}/h.toml"), zero_byte, write("h.toml", b""), unchanged=("{w}/h.toml",)),
    ]  # fmt: skip


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
    add(Case("eval: missing image (stored, the run FAILED with the cause)", (*ev, "--max-steps", "1"), "fail", data_dir(jsonl_rows(demo_row(image="none.png")))))
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
    add(Case("kb article: unknown title (exit 1, as documented)", ("kb", "article", "bundled", "Nothing Such Zzz"), "fail"))
    add(Case("kb build: missing dump", ("kb", "build", "{w}/none.xml", "{w}/k.db"), "refuse", absent=("{w}/k.db",)))
    add(Case("kb build: garbage dump", ("kb", "build", "{w}/d.xml", "{w}/k.db"), "refuse", write("d.xml", os.urandom(2000)), absent=("{w}/k.db",)))
    # --- avis ------------------------------------------------------------------------------
    add(Case("avis graph: missing file", ("avis", "graph", "{w}/none.toml"), "refuse"))
    add(Case("avis graph: not TOML", ("avis", "graph", "{w}/g.toml"), "refuse", write("g.toml", "[[edge\n")))
    add(Case("avis graph: bundled graph with a BOM", ("avis", "graph", "{w}/g.toml"), "ok", lambda w: (w / "g.toml").write_bytes(b"\xef\xbb\xbf" + (ROOT / "src" / "hammr" / "avis" / "default_graph.toml").read_bytes())))
    add(Case("avis induce: unknown run", ("avis", "induce", "nope", *STORE, "-o", "{w}/g.toml"), "refuse", absent=("{w}/g.toml",)))
    add(Case("avis induce: a run of another system", ("avis", "induce", RUN, *STORE, "-o", "{w}/g.toml"), "refuse", absent=("{w}/g.toml",)))
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
    add(Case("experiment run: --limit 0", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "0", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: --data-dir missing", ("experiment", "run", "avis-table3", "--data-dir", "{w}/none", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: zero-byte --store", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("experiment run: a bank as --store", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "{w}/b.db"), "refuse", copy("{f}/bank.db", "b.db"), unchanged=("{w}/b.db",)))
    add(Case("experiment run: --store is a folder", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "{w}"), "refuse"))
    add(Case("experiment show: --data-dir a file", ("experiment", "show", "avis-table3", "--data-dir", "{w}/d"), "refuse", write("d", "x")))
    add(Case("experiment show: --data-dir missing (the limit bounds it)", ("experiment", "show", "hammr-table3", "--data-dir", "{w}/none", "--limit", "5", "--store", "{w}/st.db"), "ok", absent=("{w}/st.db", "{w}/none")))
    add(Case("experiment show: --data-dir with hostile file names", ("experiment", "show", "muse-table2", "--data-dir", "{w}/d", "--store", "{w}/st.db"), "ok", write(f"d/{HOSTILE[:20].replace('/', '_')}.jsonl", "{}"), no_escapes=True, absent=("{w}/st.db",)))
    # --- hammr data
    add(Case("data list", ("data", "list"), "ok"))
    add(Case("data list: --data-dir missing", ("data", "list", "--data-dir", "{w}/none"), "refuse", absent=("{w}/none",)))
    add(Case("data list: --data-dir a file", ("data", "list", "--data-dir", "{w}/d"), "refuse", write("d", "x")))
    add(Case("data show: hostile name", ("data", "show", HOSTILE), "refuse", no_escapes=True))
    add(Case("data check: --data-dir missing", ("data", "check", "--data-dir", "{w}/none"), "refuse", absent=("{w}/none",)))
    add(Case("data check: a FIFO for a question file", ("data", "check", "--data-dir", "{w}", "--experiment", "avis-table3"), "fail", both(folder("okvqa"), pipe("okvqa/OpenEnded_mscoco_val2014_questions.json")), kept_kind=("{w}/okvqa/OpenEnded_mscoco_val2014_questions.json",), timeout=60))
    add(Case("data check: zero-byte question file", ("data", "check", "--data-dir", "{w}", "--experiment", "avis-table3"), "fail", write("okvqa/OpenEnded_mscoco_val2014_questions.json", b"")))
    add(Case("data list: --data-dir a FIFO", ("data", "list", "--data-dir", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("data list: zero-byte question file (there: partial)", ("data", "list", "--data-dir", "{w}"), "ok", write("gqa/testdev_balanced_questions.json", b""), unchanged=("{w}/gqa/testdev_balanced_questions.json",)))
    add(Case("data list: a read-only data folder", ("data", "list", "--data-dir", "{w}/ro"), "ok", write("ro/gqa/testdev_balanced_questions.json", "{}"), read_only=("{w}/ro",)))
    add(Case("data list: hostile file names in the folder", ("data", "list", "--data-dir", "{w}"), "ok", write(f"{HOSTILE[:20].replace('/', '_')}.json", "{}"), no_escapes=True))
    add(Case("data check: --data-dir a FIFO", ("data", "check", "--data-dir", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("data check: a question file that is a folder", ("data", "check", "--data-dir", "{w}", "--experiment", "avis-table3"), "fail", folder("okvqa/OpenEnded_mscoco_val2014_questions.json")))
    add(Case("data check: a read-only data folder (it only reads)", ("data", "check", "--data-dir", "{w}/ro", "--experiment", "hammr-table3", "--demo"), "ok", copy(str(DEMO), "ro"), read_only=("{w}/ro",)))
    add(Case("data check: hostile file in the folder", ("data", "check", "--data-dir", "{w}", "--experiment", "avis-table3"), "fail", write("okvqa/OpenEnded_mscoco_val2014_questions.json", HOSTILE), no_escapes=True))
    OFF = ("--mirror", "http://127.0.0.1:9", "--retries", "0", "--timeout", "2")
    add(Case("data get: $HAMMR_DATA_CATALOGUE missing", ("data", "get", "encvqa", "--data-dir", "{w}/d", *OFF), "refuse", absent=("{w}/none.toml", "{w}/d"), category="missing", env=(("HAMMR_DATA_CATALOGUE", "{w}/none.toml"),)))
    add(Case("data get: --data-dir a file", ("data", "get", "encvqa", "--data-dir", "{w}/d", *OFF), "refuse", write("d", "x"), unchanged=("{w}/d",), category="folder"))
    add(Case("data get: $HAMMR_DATA_CATALOGUE a folder", ("data", "get", "encvqa", "--data-dir", "{w}/d", *OFF), "refuse", folder("c"), category="folder", env=(("HAMMR_DATA_CATALOGUE", "{w}/c"),)))
    add(Case("data get: $HAMMR_DATA_CATALOGUE a FIFO", ("data", "get", "encvqa", "--data-dir", "{w}/d", *OFF), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60, env=(("HAMMR_DATA_CATALOGUE", "{w}/p"),)))
    add(Case("data get: the lock file a FIFO", ("data", "get", "encvqa", "--data-dir", "{w}", *OFF), "refuse", pipe("hammr-data.lock"), kept_kind=("{w}/hammr-data.lock",), timeout=60))
    add(Case("data get: zero-byte lock file", ("data", "get", "encvqa", "--data-dir", "{w}", *OFF), "refuse", write("hammr-data.lock", b""), unchanged=("{w}/hammr-data.lock",)))
    add(Case("data get: zero-byte $HAMMR_DATA_CATALOGUE", ("data", "get", "encvqa", "--data-dir", "{w}/d", *OFF), "refuse", write("c.toml", b""), env=(("HAMMR_DATA_CATALOGUE", "{w}/c.toml"),)))
    add(Case("data get: stdout on /dev/full", ("data", "get", "encvqa", "--data-dir", "{w}/d", "--dry-run", *OFF), "refuse", stdout_to="/dev/full", category="full-disk"))
    add(Case("data get: a read-only data folder", ("data", "get", "encvqa", "--data-dir", "{w}/ro", *OFF), "refuse", write("ro/x", "x"), read_only=("{w}/ro",)))
    add(Case("data get: hostile dataset name", ("data", "get", HOSTILE, "--data-dir", "{w}/d", *OFF), "refuse", no_escapes=True, absent=("{w}/d",)))
    add(Case("data get: server down (a line per source, one error line, exit 1)", ("data", "get", "encvqa", "--data-dir", "{w}/d", *OFF), "fail"))
    # --- avis.prompt_file (read by the AVIS systems under avis.prompts = "paper")
    pf = (("HAMMR_AVIS__PROMPTS", "paper"), ("HAMMR_AVIS__PROMPT_FILE", "{w}/p.toml"))
    ask_avis = ("ask", str(PLATE), "what is written here?", "--system", "avis")
    add(Case("avis.prompt_file: missing", ask_avis, "refuse", env=pf))
    add(Case("avis.prompt_file: a folder", ask_avis, "refuse", folder("p.toml"), env=pf))
    add(Case("avis.prompt_file: a FIFO", ask_avis, "refuse", pipe("p.toml"), env=pf, kept_kind=("{w}/p.toml",), timeout=60))
    add(Case("avis.prompt_file: UTF-16", ask_avis, "refuse", write("p.toml", "reason_visual = 'x'\n".encode("utf-16")), env=pf))
    add(Case("avis.prompt_file: unknown key", ask_avis, "refuse", write("p.toml", "planner = 'x'\n"), env=pf))
    add(Case("avis.prompt_file: zero-byte (our texts)", ask_avis, "ok", write("p.toml", b""), env=pf, unchanged=("{w}/p.toml",)))
    add(Case("avis.prompt_file: hostile text", ask_avis, "ok", write("p.toml", f"reason_visual = {toml_string(HOSTILE)}\n"), env=pf, no_escapes=True))
    add(Case("experiment run: --prefix with a path", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--prefix", "../../x/", "--store", "{w}/d/st.db"), "refuse", absent=("{w}/d/st.db", "{w}/x")))
    add(Case("experiment run: --judge bem without checkpoint", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--judge", "bem", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: LLM server down", ("experiment", "run", "avis-table3", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--config", "{w}/h.toml", "--store", "{w}/st.db"), "refuse", toml_config(DOWN)))
    rep = ("experiment", "report", "avis-table3", *STORE)
    add(Case("experiment report: unknown name", ("experiment", "report", "nope", *STORE), "refuse"))
    add(Case("experiment report: nothing run yet", rep, "ok", unchanged=("{f}/s.sqlite",)))
    add(Case("experiment report: missing --store (nothing run)", ("experiment", "report", "avis-table3", "--store", "{w}/none.db"), "refuse", absent=("{w}/none.db",)))
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
    # --- issue 26: every command x every category (see CATEGORIES and NOT_APPLICABLE) ------
    graph = str(ROOT / "src" / "hammr" / "avis" / "default_graph.toml")
    ASTORE = ("--store", "{f}/avis.sqlite")
    demo1 = ("eval", "--suite", "muse-demo", "--data-dir", str(DEMO), "--system", "cot", "--limit", "1")
    ro = ("{w}/ro",)
    here_ro = (("HOME", "{w}/ro"), ("XDG_CACHE_HOME", "{w}/ro/cache"))
    # a full disk: every command's stdout on /dev/full (an output it cannot help failing)
    for argv in (
        ("agents",),
        ("ask", img, "What is written?", "--system", "cot"),
        ("avis", "analyze", "a1", *ASTORE, "-o", "{w}/an"),
        ("avis", "graph", graph),
        ("avis", "induce", "a1", *ASTORE, "--min-score", "0", "-o", "{w}/g.toml"),
        ("config", "show"),
        ("data", "list"),
        ("data", "show", "gqa"),
        ("data", "check", "--data-dir", str(DEMO), "--experiment", "hammr-table3", "--demo"),
        ("errors", RUN, *STORE),
        (*demo1, "--store", "{w}/st.db"),
        ("experiment", "list"),
        ("experiment", "report", "avis-table3", *STORE),
        ("experiment", "run", "avis-figs6-13", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "{w}/st.db"),
        ("experiment", "show", "avis-table3"),
        ("explain", RUN, *STORE),
        ("kb", "article", "bundled", "SpaceX"),
        ("kb", "build", "{w}/d.jsonl", "--out", "{w}/k.db"),
        ("kb", "search", "bundled", "rocket"),
        ("memory", "build", RUN, "-o", "{w}/b.db", *STORE, "--no-annotate", "--no-embed"),
        ("memory", "insights", RUN, "-o", "{w}/e.db", *STORE),
        ("memory", "reflect", RUN, "-o", "{w}/r.db", *STORE),
        ("memory", "search", "{f}/bank.db", "What is written?"),
        ("memory", "show", "{f}/bank.db"),
        ("replay", "{f}/trace/trace.json"),
        ("report", RUN, *STORE),
        ("route", "How many coins?"),
        ("runs", *STORE),
        ("systems",),
        ("tools",),
        ("view", *STORE),
    ):
        words = " ".join(argv[:2]) if argv[0] in ("avis", "config", "data", "experiment", "kb", "memory") else argv[0]
        setup = kb_rows({"title": "Plain", "text": "plain", "url": "http://x"}) if argv[:2] == ("kb", "build") else None
        add(Case(f"{words}: stdout on a full disk", argv, "fail", setup, stdout_to="/dev/full", timeout=60 if argv[0] == "view" else 300))
    # --- agents
    c.extend(config_file_cases(("agents",)))
    add(Case("agents: in a read-only folder", ("agents", "--config", "{w}/ro/h.toml"), "ok", write("ro/h.toml", "[agent]\nmax_steps = 3\n"), read_only=ro, cwd="{w}/ro"))
    add(Case("agents: hostile key in --config", ("agents", "--config", "{w}/h.toml"), "refuse", write("h.toml", f"{toml_string(HOSTILE)} = 1\n"), no_escapes=True))
    add(Case("agents: hostile --setting", ("agents", "--setting", HOSTILE), "refuse", no_escapes=True))
    # --- ask
    add(Case("ask: image is a FIFO", ("ask", "{w}/p.png", "q?"), "refuse", pipe("p.png"), kept_kind=("{w}/p.png",), timeout=60))
    add(Case("ask: --trace in a read-only folder", ("ask", img, "What is written?", "--system", "cot", "--trace", "{w}/ro/t.json"), "refuse", folder("ro"), absent=("{w}/ro/t.json",), read_only=ro))
    add(Case("ask: hostile question, --show", ("ask", img, f"What is {HOSTILE}?", "--system", "cot", "--show"), "ok", no_escapes=True))
    add(Case("ask: hostile image path (missing)", ("ask", f"{{w}}/{HOSTILE}.png", "q?"), "refuse", no_escapes=True))
    # --- avis analyze
    an = ("avis", "analyze", "a1", "-o", "{w}/an")
    add(Case("avis analyze: missing --store", (*an, "--store", "{w}/none.db"), "refuse", absent=("{w}/none.db", "{w}/an")))
    add(Case("avis analyze: --store is a folder", (*an, "--store", "{w}"), "refuse", absent=("{w}/an",)))
    add(Case("avis analyze: -o is a file (wants a directory)", ("avis", "analyze", "a1", *ASTORE, "-o", "{w}/x"), "refuse", write("x", "keep"), unchanged=("{w}/x",)))
    add(Case("avis analyze: --store a FIFO", (*an, "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("avis analyze: zero-byte --store", (*an, "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("avis analyze: -o in a read-only folder", ("avis", "analyze", "a1", "--store", "{w}/a.sqlite", "-o", "{w}/ro/an"), "refuse", both(copy("{f}/avis.sqlite", "a.sqlite"), folder("ro")), absent=("{w}/ro/an",), read_only=ro))
    add(Case("avis analyze: hostile run name", ("avis", "analyze", f"a1{HOSTILE}", *ASTORE, "-o", "{w}/an"), "refuse", no_escapes=True, absent=("{w}/an",)))
    # --- avis graph
    add(Case("avis graph: a folder", ("avis", "graph", "{w}"), "refuse"))
    add(Case("avis graph: a FIFO", ("avis", "graph", "{w}/g.toml"), "refuse", pipe("g.toml"), kept_kind=("{w}/g.toml",), timeout=60))
    add(Case("avis graph: zero-byte file", ("avis", "graph", "{w}/g.toml"), "refuse", write("g.toml", b"")))
    add(Case("avis graph: in a read-only folder", ("avis", "graph", "{w}/ro/g.toml"), "ok", copy(graph, "ro/g.toml"), read_only=ro, cwd="{w}/ro"))
    add(Case("avis graph: hostile description", ("avis", "graph", "{w}/g.toml"), "ok", write("g.toml", Path(graph).read_text().replace('description = "visual', f"description = {toml_string(HOSTILE)[:-1]} visual")), no_escapes=True))
    add(Case("avis graph: hostile action name", ("avis", "graph", "{w}/g.toml"), "refuse", write("g.toml", f"[edges]\nSTART = [{toml_string(HOSTILE)}]\n"), no_escapes=True))
    # --- avis induce
    ind = ("avis", "induce", "a1", "--min-score", "0")
    add(Case("avis induce: -o /dev/full (an AVIS run)", (*ind, *ASTORE, "-o", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("avis induce: missing --store", (*ind, "--store", "{w}/none.db", "-o", "{w}/g.toml"), "refuse", absent=("{w}/none.db", "{w}/g.toml")))
    add(Case("avis induce: --graph missing", (*ind, *ASTORE, "--graph", "{w}/none.toml", "-o", "{w}/g.toml"), "refuse", absent=("{w}/g.toml",)))
    add(Case("avis induce: -o a folder", (*ind, *ASTORE, "-o", "{w}"), "refuse"))
    add(Case("avis induce: --store a FIFO", (*ind, "--store", "{w}/p", "-o", "{w}/g.toml"), "refuse", pipe("p"), kept_kind=("{w}/p",), absent=("{w}/g.toml",), timeout=60))
    add(Case("avis induce: -o a FIFO", (*ind, *ASTORE, "-o", "{w}/p"), "ok", fifo("p"), kept_kind=("{w}/p",)))
    add(Case("avis induce: zero-byte --store", (*ind, "--store", "{w}/s.db", "-o", "{w}/g.toml"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",), absent=("{w}/g.toml",)))
    add(Case("avis induce: -o in a read-only folder", (*ind, "--store", "{w}/a.sqlite", "-o", "{w}/ro/g.toml"), "refuse", both(copy("{f}/avis.sqlite", "a.sqlite"), folder("ro")), absent=("{w}/ro/g.toml",), read_only=ro))
    add(Case("avis induce: hostile run name", ("avis", "induce", f"a1{HOSTILE}", *ASTORE, "-o", "{w}/g.toml"), "refuse", no_escapes=True, absent=("{w}/g.toml",)))
    # --- config show
    c.extend(config_file_cases(("config", "show")))
    add(Case("config show: in a read-only folder", ("config", "show", "--config", "{w}/ro/h.toml"), "ok", write("ro/h.toml", "[agent]\nmax_steps = 3\n"), read_only=ro, cwd="{w}/ro"))
    add(Case("config show: hostile value", ("config", "show", "--config", "{w}/h.toml"), "ok", write("h.toml", f"[llm]\nmodel = {toml_string(HOSTILE)}\n"), no_escapes=True))
    add(Case("config show: hostile key", ("config", "show", "--config", "{w}/h.toml"), "refuse", write("h.toml", f"[agent]\n{toml_string(HOSTILE)} = 3\n"), no_escapes=True))
    # --- errors
    add(Case("errors: --labels a FIFO", ("errors", RUN, *STORE, "--labels", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("errors: zero-byte --store", ("errors", RUN, "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("errors: zero-byte --labels", ("errors", RUN, *STORE, "--labels", "{w}/l.csv"), "refuse", write("l.csv", b""), unchanged=("{w}/l.csv",)))
    add(Case("errors: --export in a read-only folder", ("errors", RUN, "--store", "{w}/s.sqlite", "--export", "{w}/ro/e.csv"), "refuse", both(copy("{f}/s.sqlite", "s.sqlite"), folder("ro")), absent=("{w}/ro/e.csv",), read_only=ro))
    add(Case("errors: hostile questions and answers in the store", ("errors", RUN, "--store", "{w}/s.sqlite"), "ok", hostile_store(), no_escapes=True))
    add(Case("errors: hostile run name", ("errors", f"r1{HOSTILE}", *STORE), "refuse", no_escapes=True))
    # --- eval
    add(Case("eval: --store a FIFO", (*demo1, "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("eval: the JSONL is a FIFO", (*ev, "--max-steps", "1"), "refuse", both(copy(str(PLATE), "d/plate.png"), pipe("d/q.jsonl"), write("s.toml", suite())), kept_kind=("{w}/d/q.jsonl",), timeout=60))
    add(Case("eval: --store in a read-only folder", (*demo1, "--store", "{w}/ro/st.db"), "refuse", folder("ro"), absent=("{w}/ro/st.db",), read_only=ro))
    add(Case("eval: --store /dev/full", (*demo1, "--store", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("eval: hostile question in the JSONL", (*ev, "--max-steps", "1"), "ok", data_dir(jsonl_rows(demo_row(question=f"What is {HOSTILE}?"))), no_escapes=True))
    add(Case("eval: hostile --name", (*demo1, "--name", f"run{HOSTILE}", "--store", "{w}/st.db"), "ok", no_escapes=True))
    # --- experiment list (reads no file: see NOT_APPLICABLE)
    add(Case("experiment list: in a read-only folder (home and cache too)", ("experiment", "list"), "ok", folder("ro"), read_only=ro, env=here_ro, cwd="{w}/ro"))
    # --- experiment report
    add(Case("experiment report: --store a FIFO", ("experiment", "report", "avis-table3", "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("experiment report: --csv in a read-only folder", ("experiment", "report", "avis-table3", "--store", "{w}/s.sqlite", "--csv", "{w}/ro/t.csv"), "refuse", both(copy("{f}/s.sqlite", "s.sqlite"), folder("ro")), absent=("{w}/ro/t.csv",), read_only=ro))
    add(Case("experiment report: the store in a read-only folder", ("experiment", "report", "avis-table3", "--store", "{w}/ro/s.sqlite"), "ok", copy("{f}/s.sqlite", "ro/s.sqlite"), read_only=ro, cwd="{w}/ro"))
    add(Case("experiment report: hostile title", ("experiment", "report", "{w}/avis-table3.toml", *STORE), "ok", write("avis-table3.toml", ex.replace('title = "AVIS with', f"title = {toml_string(HOSTILE)[:-1]} AVIS with")), no_escapes=True))
    # --- experiment run
    add(Case("experiment run: file missing", ("experiment", "run", "{w}/none.toml", "--store", "{w}/st.db"), "refuse", absent=("{w}/st.db",)))
    add(Case("experiment run: --store a FIFO", ("experiment", "run", "avis-figs6-13", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("experiment run: --store /dev/full", ("experiment", "run", "avis-figs6-13", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "/dev/full"), "refuse", kept_kind=("/dev/full",)))
    add(Case("experiment run: --store in a read-only folder", ("experiment", "run", "avis-figs6-13", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--store", "{w}/ro/st.db"), "refuse", folder("ro"), absent=("{w}/ro/st.db",), read_only=ro))
    add(Case("experiment run: hostile --prefix", ("experiment", "run", "avis-figs6-13", "--demo", "--data-dir", str(DEMO), "--limit", "1", "--prefix", HOSTILE, "--store", "{w}/st.db"), "refuse", no_escapes=True, absent=("{w}/st.db",)))
    # --- experiment show
    add(Case("experiment show: a FIFO", ("experiment", "show", "{w}/x.toml"), "refuse", pipe("x.toml"), kept_kind=("{w}/x.toml",), timeout=60))
    add(Case("experiment show: zero-byte file", ("experiment", "show", "{w}/x.toml"), "refuse", write("x.toml", b"")))
    add(Case("experiment show: in a read-only folder, with its store", ("experiment", "show", "{w}/ro/avis-table3.toml", "--store", "{w}/ro/s.sqlite"), "ok", both(write("ro/avis-table3.toml", ex), copy("{f}/s.sqlite", "ro/s.sqlite")), read_only=ro, cwd="{w}/ro"))
    add(Case("experiment show: hostile title (OSC 8, C1, bidi, markup)", show, "ok", write("avis-table3.toml", ex.replace('title = "AVIS with', f"title = {toml_string(HOSTILE)[:-1]} AVIS with")), no_escapes=True))
    # --- explain
    add(Case("explain: missing --store", ("explain", RUN, "--store", "{w}/none.db"), "refuse", absent=("{w}/none.db",)))
    add(Case("explain: --store a FIFO", ("explain", RUN, "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("explain: zero-byte --store", ("explain", RUN, "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",)))
    add(Case("explain: --out in a read-only folder", ("explain", RUN, "--store", "{w}/s.sqlite", "--out", "{w}/ro/e.jsonl"), "refuse", both(copy("{f}/s.sqlite", "s.sqlite"), folder("ro")), absent=("{w}/ro/e.jsonl",), read_only=ro))
    add(Case("explain: hostile questions and answers in the store", ("explain", RUN, "--store", "{w}/s.sqlite"), "ok", hostile_store(), no_escapes=True))
    # --- kb article
    add(Case("kb article: missing KB", ("kb", "article", "{w}/none.db", "SpaceX"), "refuse", absent=("{w}/none.db",)))
    add(Case("kb article: KB is a folder", ("kb", "article", "{w}", "SpaceX"), "refuse"))
    add(Case("kb article: KB is a FIFO", ("kb", "article", "{w}/k.db", "SpaceX"), "refuse", pipe("k.db"), kept_kind=("{w}/k.db",), timeout=60))
    add(Case("kb article: zero-byte KB", ("kb", "article", "{w}/k.db", "SpaceX"), "refuse", write("k.db", b""), unchanged=("{w}/k.db",)))
    add(Case("kb article: KB in a read-only folder", ("kb", "article", "{w}/ro/k.db", "SpaceX"), "ok", built_kb("ro/k.db"), read_only=ro, cwd="{w}/ro"))
    add(Case("kb article: hostile article", ("kb", "article", "{w}/k.db", "Hostile"), "ok", built_kb("k.db", HOSTILE_ARTICLE), no_escapes=True))
    add(Case("kb article: hostile title asked (exit 1: not found)", ("kb", "article", "bundled", HOSTILE), "fail", no_escapes=True))
    # --- kb build
    add(Case("kb build: dump is a folder", ("kb", "build", "{w}", "--out", "{w}/k.db"), "refuse", absent=("{w}/k.db",)))
    add(Case("kb build: --out a folder", ("kb", "build", "{w}/d.jsonl", "--out", "{w}"), "refuse", kb_rows({"title": "A", "text": "a"})))
    add(Case("kb build: dump is a FIFO", ("kb", "build", "{w}/d.jsonl", "--out", "{w}/k.db"), "refuse", pipe("d.jsonl"), kept_kind=("{w}/d.jsonl",), absent=("{w}/k.db",), timeout=60))
    add(Case("kb build: zero-byte dump", ("kb", "build", "{w}/d.jsonl", "--out", "{w}/k.db"), "refuse", write("d.jsonl", b""), absent=("{w}/k.db",)))
    add(Case("kb build: --out /dev/full", ("kb", "build", "{w}/d.jsonl", "--out", "/dev/full"), "refuse", kb_rows({"title": "A", "text": "a"}), kept_kind=("/dev/full",)))
    add(Case("kb build: --out in a read-only folder", ("kb", "build", "{w}/d.jsonl", "--out", "{w}/ro/k.db"), "refuse", both(kb_rows({"title": "A", "text": "a"}), folder("ro")), absent=("{w}/ro/k.db",), read_only=ro))
    add(Case("kb build: hostile records", ("kb", "build", "{w}/d.jsonl", "--out", "{w}/k.db"), "ok", kb_rows(HOSTILE_ARTICLE, {"title": HOSTILE, "text": HOSTILE}), no_escapes=True))
    # --- kb search
    add(Case("kb search: KB is a folder", ("kb", "search", "{w}", "rocket"), "refuse"))
    add(Case("kb search: KB is a FIFO", ("kb", "search", "{w}/k.db", "rocket"), "refuse", pipe("k.db"), kept_kind=("{w}/k.db",), timeout=60))
    add(Case("kb search: KB in a read-only folder", ("kb", "search", "{w}/ro/k.db", "rocket"), "ok", built_kb("ro/k.db"), read_only=ro, cwd="{w}/ro"))
    add(Case("kb search: bundled KB, cache in a read-only folder", ("kb", "search", "bundled", "rocket"), "refuse", folder("ro"), read_only=ro, env=here_ro, cwd="{w}/ro"))
    add(Case("kb search: hostile article", ("kb", "search", "{w}/k.db", "hostile"), "ok", built_kb("k.db", HOSTILE_ARTICLE), no_escapes=True))
    add(Case("kb search: hostile query", ("kb", "search", "bundled", HOSTILE), "ok", no_escapes=True))
    # --- memory build
    mb = ("memory", "build", RUN, "--no-annotate", "--no-embed")
    add(Case("memory build: missing --store", (*mb, "-o", "{w}/b.db", "--store", "{w}/none.db"), "refuse", absent=("{w}/b.db", "{w}/none.db")))
    add(Case("memory build: --annotations missing", ("memory", "build", RUN, "-o", "{w}/b.db", *STORE, "--annotations", "{w}/none.jsonl"), "refuse", absent=("{w}/b.db",)))
    add(Case("memory build: -o a FIFO", (*mb, "-o", "{w}/p", *STORE), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("memory build: --annotations a FIFO", ("memory", "build", RUN, "-o", "{w}/b.db", *STORE, "--annotations", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), absent=("{w}/b.db",), timeout=60))
    add(Case("memory build: -o /dev/full", (*mb, "-o", "/dev/full", *STORE), "refuse", kept_kind=("/dev/full",)))
    add(Case("memory build: -o in a read-only folder", (*mb, "-o", "{w}/ro/b.db", "--store", "{w}/s.sqlite"), "refuse", both(copy("{f}/s.sqlite", "s.sqlite"), folder("ro")), absent=("{w}/ro/b.db",), read_only=ro))
    add(Case("memory build: hostile run name", ("memory", "build", f"r1{HOSTILE}", "-o", "{w}/b.db", *STORE), "refuse", no_escapes=True, absent=("{w}/b.db",)))
    # --- memory insights and memory reflect (the same options)
    for sub, out in (("insights", "e.db"), ("reflect", "r.db")):
        mi = ("memory", sub, RUN)
        add(Case(f"memory {sub}: missing --store", (*mi, "-o", f"{{w}}/{out}", "--store", "{w}/none.db"), "refuse", absent=(f"{{w}}/{out}", "{w}/none.db")))
        add(Case(f"memory {sub}: --llm-config missing", (*mi, "-o", f"{{w}}/{out}", *STORE, "--llm-config", "{w}/none.toml"), "refuse", absent=(f"{{w}}/{out}",)))
        add(Case(f"memory {sub}: -o a folder", (*mi, "-o", "{w}", *STORE), "refuse"))
        add(Case(f"memory {sub}: -o a FIFO", (*mi, "-o", "{w}/p", *STORE), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
        add(Case(f"memory {sub}: -o a zero-byte file", (*mi, "-o", f"{{w}}/{out}", *STORE), "refuse", write(out, b""), unchanged=(f"{{w}}/{out}",)))
        add(Case(f"memory {sub}: -o /dev/full", (*mi, "-o", "/dev/full", *STORE), "refuse", kept_kind=("/dev/full",)))
        add(Case(f"memory {sub}: -o in a read-only folder", (*mi, "-o", f"{{w}}/ro/{out}", "--store", "{w}/s.sqlite"), "refuse", both(copy("{f}/s.sqlite", "s.sqlite"), folder("ro")), absent=(f"{{w}}/ro/{out}",), read_only=ro))
        add(Case(f"memory {sub}: hostile questions and answers in the store", (*mi, "-o", f"{{w}}/{out}", "--store", "{w}/s.sqlite"), "ok", hostile_store(), no_escapes=True))
    # --- memory search
    add(Case("memory search: bank is a folder", ("memory", "search", "{w}", "q?"), "refuse"))
    add(Case("memory search: bank is a FIFO", ("memory", "search", "{w}/b.db", "q?"), "refuse", pipe("b.db"), kept_kind=("{w}/b.db",), timeout=60))
    add(Case("memory search: bank in a read-only folder", ("memory", "search", "{w}/ro/b.db", "What is written?"), "ok", copy("{f}/bank.db", "ro/b.db"), read_only=ro, cwd="{w}/ro"))
    add(Case("memory search: hostile bank", ("memory", "search", "{w}/b.db", "What is written?"), "ok", hostile_bank(), no_escapes=True))
    add(Case("memory search: hostile question", ("memory", "search", "{f}/bank.db", f"What is {HOSTILE}?"), "ok", no_escapes=True))
    # --- memory show
    add(Case("memory show: a folder", ("memory", "show", "{w}"), "refuse"))
    add(Case("memory show: a FIFO", ("memory", "show", "{w}/b.db"), "refuse", pipe("b.db"), kept_kind=("{w}/b.db",), timeout=60))
    add(Case("memory show: bank in a read-only folder", ("memory", "show", "{w}/ro/b.db"), "ok", copy("{f}/bank.db", "ro/b.db"), read_only=ro, cwd="{w}/ro"))
    add(Case("memory show: hostile bank", ("memory", "show", "{w}/b.db"), "ok", hostile_bank(), no_escapes=True))
    # --- replay
    add(Case("replay: a folder", ("replay", "{w}"), "refuse"))
    add(Case("replay: a FIFO", ("replay", "{w}/t.json"), "refuse", pipe("t.json"), kept_kind=("{w}/t.json",), timeout=60))
    add(Case("replay: trace in a read-only folder", ("replay", "{w}/ro/t/trace.json"), "ok", copy("{f}/trace", "ro/t"), read_only=ro, cwd="{w}/ro"))
    add(Case("replay: hostile text (OSC 8, C1, bidi, markup)", ("replay", "{w}/t/trace.json"), "ok", hostile_trace_text, no_escapes=True))
    # --- report
    add(Case("report: missing --store", ("report", RUN, "--store", "{w}/none.db"), "refuse", absent=("{w}/none.db",)))
    add(Case("report: --store a FIFO", ("report", RUN, "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("report: --out in a read-only folder", ("report", RUN, "--store", "{w}/s.sqlite", "--out", "{w}/ro/r.md"), "refuse", both(copy("{f}/s.sqlite", "s.sqlite"), folder("ro")), absent=("{w}/ro/r.md",), read_only=ro))
    add(Case("report: the store in a read-only folder", ("report", RUN, "--store", "{w}/ro/s.sqlite"), "ok", copy("{f}/s.sqlite", "ro/s.sqlite"), read_only=ro, cwd="{w}/ro"))
    add(Case("report: hostile store", ("report", RUN, "--store", "{w}/s.sqlite"), "ok", hostile_store(), no_escapes=True))
    add(Case("report: hostile run name", ("report", f"r1{HOSTILE}", *STORE), "refuse", no_escapes=True))
    # --- route
    add(Case("route: --image is a folder", ("route", "q?", "--image", "{w}"), "refuse"))
    add(Case("route: --image a FIFO", ("route", "q?", "--image", "{w}/p.png"), "refuse", pipe("p.png"), kept_kind=("{w}/p.png",), timeout=60))
    add(Case("route: zero-byte --image", ("route", "q?", "--image", "{w}/x.png"), "refuse", write("x.png", b"")))
    add(Case("route: --image in a read-only folder", ("route", "What is written?", "--image", "{w}/ro/plate.png"), "ok", copy(img, "ro/plate.png"), read_only=ro, cwd="{w}/ro"))
    add(Case("route: hostile question", ("route", f"What is {HOSTILE}?"), "ok", no_escapes=True))
    # --- runs
    add(Case("runs: --store a FIFO", ("runs", "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("runs: the store in a read-only folder", ("runs", "--store", "{w}/ro/s.sqlite"), "ok", copy("{f}/s.sqlite", "ro/s.sqlite"), read_only=ro, cwd="{w}/ro"))
    add(Case("runs: hostile run name in the store", ("runs", "--store", "{w}/s.sqlite"), "ok", hostile_store(), no_escapes=True))
    # --- systems
    c.extend(config_file_cases(("systems",)))
    add(Case("systems: --memory a FIFO", ("systems", "--memory", "{w}/p"), "ok", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("systems: --memory in a read-only folder", ("systems", "--memory", "{w}/ro/b.db"), "ok", copy("{f}/bank.db", "ro/b.db"), read_only=ro, cwd="{w}/ro"))
    add(Case("systems: hostile name", ("systems", HOSTILE), "refuse", no_escapes=True))
    add(Case("systems: hostile model name in --config", ("systems", "--config", "{w}/h.toml"), "ok", write("h.toml", f'[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = {toml_string(HOSTILE)}\n'), no_escapes=True))
    # --- tools
    c.extend(config_file_cases(("tools",)))
    add(Case("tools: in a read-only folder", ("tools", "--config", "{w}/ro/h.toml"), "ok", write("ro/h.toml", "[agent]\nmax_steps = 3\n"), read_only=ro, cwd="{w}/ro"))
    add(Case("tools: hostile KB path in --config", ("tools", "--config", "{w}/h.toml"), "ok", write("h.toml", f'[tools.kb]\nbackend = "sqlite"\npath = {toml_string("/nonexistent/" + HOSTILE)}\n'), no_escapes=True))
    # --- view (a success never ends: "serves")
    add(Case("view: missing --store", ("view", "--store", "{w}/none.db"), "refuse", absent=("{w}/none.db",), timeout=30))
    add(Case("view: --store is a folder", ("view", "--store", "{w}"), "refuse", timeout=30))
    add(Case("view: --store a FIFO", ("view", "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=30))
    add(Case("view: the store in a read-only folder", ("view", "--store", "{w}/ro/s.sqlite"), "serves", copy("{f}/s.sqlite", "ro/s.sqlite"), read_only=ro, cwd="{w}/ro", timeout=20))
    add(Case("view: hostile run name", ("view", f"r1{HOSTILE}", *STORE), "refuse", no_escapes=True, timeout=30))
    add(Case("view: unknown run, hostile run names in the store", ("view", "nope", "--store", "{w}/s.sqlite"), "refuse", hostile_store(), no_escapes=True, timeout=30))
    # --- mcp (begin) -- stdio by default: each case gives its stdin, so that it ends; --http "serves"
    mcp_init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}) + "\n"
    mcp_conf = ("mcp", "--no-systems", "--config")
    add(Case("mcp: --config missing", (*mcp_conf, "{w}/none.toml"), "refuse", absent=("{w}/none.toml",), stdin="", timeout=60))
    add(Case("mcp --http: --config missing", ("mcp", "--http", "--port", "0", "--config", "{w}/none.toml"), "refuse", absent=("{w}/none.toml",), timeout=60))
    add(Case("mcp: --config is a folder", (*mcp_conf, "{w}"), "refuse", stdin="", timeout=60))
    add(Case("mcp: --config a FIFO", (*mcp_conf, "{w}/h.toml"), "refuse", pipe("h.toml"), kept_kind=("{w}/h.toml",), stdin="", timeout=60))
    add(Case("mcp: --config zero-byte (stdio, its stdin closed at once)", (*mcp_conf, "{w}/h.toml"), "ok", write("h.toml", b""), unchanged=("{w}/h.toml",), stdin="", timeout=120))
    add(Case("mcp: stdout on a full disk (an initialize request to answer)", ("mcp", "--no-systems"), "fail", stdin=mcp_init, stdout_to="/dev/full", timeout=120))
    add(Case("mcp --http: stdout (its URL) on a full disk", ("mcp", "--http", "--port", "0"), "fail", stdout_to="/dev/full", timeout=60))
    add(Case("mcp: in a read-only folder, the LLM cache there too (refused, as ask does)", ("mcp",), "refuse", folder("ro/cache"), read_only=ro, env=here_ro, cwd="{w}/ro", stdin=mcp_init, timeout=120))
    add(Case("mcp: in a read-only folder, HOME and cache there too, --no-cache", ("mcp", "--no-cache"), "ok", folder("ro/cache"), read_only=ro, env=here_ro, cwd="{w}/ro", stdin=mcp_init, timeout=120))
    add(Case("mcp --http: in a read-only folder", ("mcp", "--http", "--port", "0"), "serves", folder("ro"), read_only=ro, cwd="{w}/ro", timeout=20))
    add(Case("mcp: hostile key in --config", (*mcp_conf, "{w}/h.toml"), "refuse", write("h.toml", f"{toml_string(HOSTILE)} = 1\n"), no_escapes=True, stdin="", timeout=60))
    add(Case("mcp: hostile model name and KB path in --config", ("mcp", "--config", "{w}/h.toml"), "ok", write("h.toml", f'[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = {toml_string(HOSTILE)}\n[tools.kb]\nbackend = "sqlite"\npath = {toml_string("/nonexistent/" + HOSTILE)}\n'), no_escapes=True, stdin=mcp_init, timeout=120))
    add(Case("mcp --http: hostile --host, no API key", ("mcp", "--http", "--host", HOSTILE), "refuse", no_escapes=True, timeout=60))
    add(Case("mcp --http: 0.0.0.0 with an empty HAMMR_API_KEY", ("mcp", "--http", "--host", "0.0.0.0"), "refuse", env=(("HAMMR_API_KEY", " "),), timeout=60))
    add(Case("mcp --http: port out of range", ("mcp", "--http", "--port", "99999"), "refuse", timeout=60))
    add(Case("mcp: --port without --http", ("mcp", "--port", "9"), "refuse", stdin="", timeout=60))
    add(Case("mcp: --timeout-s 0", ("mcp", "--timeout-s", "0"), "refuse", stdin="", timeout=60))
    # --- mcp (end)
    # --- serve (begin) -- a success never ends: "serves"
    sv = ("serve", "--port", "0", "--system", "cot")
    add(Case("serve: --config missing", (*sv, "--config", "{w}/none.toml"), "refuse", absent=("{w}/none.toml",), timeout=60))
    add(Case("serve: --config is a folder", (*sv, "--config", "{w}"), "refuse", timeout=60))
    add(Case("serve: --config a FIFO", (*sv, "--config", "{w}/h.toml"), "refuse", pipe("h.toml"), kept_kind=("{w}/h.toml",), timeout=60))
    add(Case("serve: --config zero-byte", (*sv, "--config", "{w}/h.toml", "--store", "{w}/s.sqlite"), "serves", write("h.toml", b""), unchanged=("{w}/h.toml",), timeout=30))
    add(Case("serve: --store is a folder", (*sv, "--store", "{w}"), "refuse", timeout=60))
    add(Case("serve: --store a FIFO", (*sv, "--store", "{w}/p"), "refuse", pipe("p"), kept_kind=("{w}/p",), timeout=60))
    add(Case("serve: zero-byte --store", (*sv, "--store", "{w}/s.db"), "refuse", write("s.db", b""), unchanged=("{w}/s.db",), timeout=60))
    add(Case("serve: --store not a store", (*sv, "--store", "{w}/s.db"), "refuse", write("s.db", "not sqlite\n"), unchanged=("{w}/s.db",), timeout=60))
    add(Case("serve: stdout (its URL) on a full disk", (*sv, "--store", "{w}/s.sqlite"), "fail", stdout_to="/dev/full", timeout=60))
    add(Case("serve: --store in a read-only folder", (*sv, "--store", "{w}/ro/s.sqlite"), "refuse", folder("ro"), absent=("{w}/ro/s.sqlite",), read_only=ro, timeout=60))
    add(Case("serve: in a read-only folder, the store elsewhere", (*sv, "--store", "{w}/s.sqlite"), "serves", folder("ro"), read_only=ro, cwd="{w}/ro", timeout=30))
    add(Case("serve: hostile --system", ("serve", "--port", "0", "--system", HOSTILE), "refuse", no_escapes=True, timeout=60))
    add(Case("serve: hostile --host, no API key", ("serve", "--port", "0", "--host", HOSTILE), "refuse", no_escapes=True, timeout=60))
    add(Case("serve: hostile session --name", (*sv, "--name", HOSTILE, "--store", "{w}/s.sqlite"), "serves", no_escapes=True, timeout=30))
    add(Case("serve: hostile model name in --config", (*sv, "--config", "{w}/h.toml", "--store", "{w}/s.sqlite"), "serves", write("h.toml", f'[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = {toml_string(HOSTILE)}\n'), no_escapes=True, timeout=30))
    add(Case("serve: 0.0.0.0 with an empty HAMMR_API_KEY", ("serve", "--port", "0", "--host", "0.0.0.0"), "refuse", env=(("HAMMR_API_KEY", " "),), timeout=60))
    add(Case("serve: port out of range", ("serve", "--port", "99999"), "refuse", timeout=60))
    add(Case("serve: --concurrency 0", ("serve", "--concurrency", "0"), "refuse", timeout=60))
    # --- serve (end)
    # fmt: on
    return [replace(case, category=category_of(case)) for case in c]


_A_FOLDER = re.compile(r"\ba folder\b")


def category_of(case: Case) -> Category | None:
    """The case's category: its own, else what it does (``no_escapes``: hostile text;
    ``read_only``: a read-only folder; ``/dev/full``: a full disk), else what its name says
    (``FIFO``; ``zero-byte``, ``empty file`` or ``empty JSONL``; ``missing`` but not a missing folder the
    command makes; ``a folder``)."""
    if case.category is not None:
        return case.category
    if case.no_escapes:
        return "hostile"
    if case.read_only:
        return "read-only"
    if case.stdout_to == "/dev/full" or "/dev/full" in case.argv:
        return "full-disk"
    name = case.name.split(":", 1)[-1]
    if "FIFO" in name:
        return "fifo"
    if "zero-byte" in name or "empty file" in name or "empty JSONL" in name:
        return "zero-byte"
    if "missing" in name and "(made)" not in name:
        return "missing"
    if _A_FOLDER.search(name):
        return "folder"
    return None


NOT_APPLICABLE: dict[tuple[str, Category], str] = {
    ("data list", "folder"): "--data-dir is a folder by design (a file there is refused: probed)",
    ("data show", "missing"): "reads no file: NAME is looked up in the bundled catalogue (an "
    "unknown name is refused: probed)",
    ("data show", "folder"): "reads no file, only the bundled catalogue",
    ("data show", "fifo"): "reads no file, only the bundled catalogue",
    ("data show", "zero-byte"): "reads no file, only the bundled catalogue",
    ("data show", "read-only"): "reads no file and writes none",
    ("experiment list", "missing"): "takes no argument and no option, not even --config",
    ("experiment list", "folder"): "takes no argument and no option, not even --config",
    ("experiment list", "fifo"): "takes no argument and no option, not even --config",
    ("experiment list", "zero-byte"): "takes no argument and no option, not even --config",
    ("experiment list", "hostile"): "reads nothing a user or a model wrote, only the bundled "
    "experiments (a hostile experiment file is probed through experiment show and report)",
}
"""(command, category) pairs that cannot apply, each with the reason."""


def leaf_commands() -> list[str]:
    """Every leaf command of ``hammr --help``, as typed (``ask``, ``experiment run``)."""
    import click

    from hammr.cli import main as hammr

    found: list[str] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, (*path, name))
        else:
            found.append(" ".join(path))

    walk(hammr, ())
    return found


def command_of(case: Case, commands: Iterable[str]) -> str | None:
    """The leaf command a case runs (``experiment run`` for ``experiment run X ...``)."""
    known = set(commands)
    for n in (2, 1):
        words = " ".join(case.argv[:n])
        if words in known:
            return words
    return None


def coverage(
    commands: Iterable[str], cases: Iterable[Case] | None = None
) -> dict[tuple[str, Category], list[Case]]:
    """The cases of each (command, category)."""
    commands = list(commands)
    cells: dict[tuple[str, Category], list[Case]] = {
        (cmd, cat): [] for cmd in commands for cat in CATEGORIES
    }
    for case in catalogue() if cases is None else cases:
        cmd, cat = command_of(case, commands), category_of(case)
        if cmd is not None and cat is not None:
            cells[cmd, cat].append(case)
    return cells


def coverage_problems(
    commands: Iterable[str],
    cases: Iterable[Case] | None = None,
    not_applicable: dict[tuple[str, Category], str] | None = None,
) -> list[str]:
    """Why the catalogue does not cover ``commands`` (empty when it does): a (command,
    category) with neither a case nor a reason in :data:`NOT_APPLICABLE`, a reason for a
    command or category that does not exist or for a cell that has cases, a case that runs no
    known command."""
    commands = list(commands)
    cases = catalogue() if cases is None else list(cases)
    na = NOT_APPLICABLE if not_applicable is None else not_applicable
    cells = coverage(commands, cases)
    problems: list[str] = []
    for (cmd, cat), found in cells.items():
        if not found and not na.get((cmd, cat), "").strip():
            problems.append(f"{cmd} x {cat}: no case, and not declared in NOT_APPLICABLE")
        if found and (cmd, cat) in na:
            problems.append(f"{cmd} x {cat}: declared not applicable, yet {len(found)} case(s)")
    for cmd, cat in na:
        if cmd not in commands:
            problems.append(f"NOT_APPLICABLE names {cmd!r}, not a command of hammr --help")
        if cat not in CATEGORIES:
            problems.append(f"NOT_APPLICABLE names {cat!r}, not a category")
    for case in cases:
        if command_of(case, commands) is None:
            problems.append(f"case {case.name!r} runs no command of hammr --help: {case.argv[:2]}")
    return problems


def table(commands: list[str], cells: dict[tuple[str, Category], tuple[int, int] | int]) -> str:
    """command x category, each cell ``clean/total`` (or a count), ``n/a`` where declared."""
    head = ["command", *CATEGORIES]

    def cell(cmd: str, cat: Category) -> str:
        value = cells.get((cmd, cat))
        if (cmd, cat) in NOT_APPLICABLE:
            return "n/a"
        if value is None or value == (0, 0):
            return "-"
        return f"{value[0]}/{value[1]}" if isinstance(value, tuple) else str(value)

    rows = [head, *([cmd, *(cell(cmd, cat) for cat in CATEGORIES)] for cmd in commands)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def make_fixtures(where: Path) -> None:
    """A run store with run r1 (two cot answers on muse-demo), a trace, a bank and a store with
    AVIS run a1 (two answers on muse-demo), made once."""
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
        (
            where / "avis.sqlite",
            [
                "eval", "--suite", "muse-demo", "--data-dir", str(DEMO), "--system", "avis",
                "--limit", "2", "--name", "a1", "--store", str(where / "avis.sqlite"),
            ],
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


_CONFINED: list[str] | None = None


def confined_prefix() -> list[str]:
    """How a read-only case runs its command so that the kernel refuses a write into a folder
    of mode 0o555: as is for a user who is not root; as root, as user nobody when that user
    runs this very Python, else (when nobody cannot reach the interpreter, e.g. one under
    /root) as root without the capabilities that ignore permissions (dac_override,
    dac_read_search, fowner): the same interpreter, under the same permission checks."""
    global _CONFINED
    if _CONFINED is None:
        if os.geteuid() != 0:
            _CONFINED = []
        else:
            nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            python = str(ROOT / ".venv" / "bin" / "python")
            try:
                seen = subprocess.run(
                    [*nobody, python, "-c", "import sys; print(sys.version, sys.base_prefix)"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    cwd="/",
                )
                same = (
                    seen.returncode == 0
                    and seen.stdout.strip() == f"{sys.version} {sys.base_prefix}"
                )
            except OSError:
                same = False
            _CONFINED = nobody if same else [
                "setpriv", "--inh-caps=-all",
                "--bounding-set=-dac_override,-dac_read_search,-fowner",
            ]  # fmt: skip
    return _CONFINED


def make_read_only(w: Path, folders: list[Path]) -> None:
    """Everything in the case's folder writable by anyone but ``folders`` (0o555, their files
    0o444), so that only those refuse the command's writes."""
    for p in [w, *w.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o777 if p.is_dir() else 0o666)
    for ro in folders:
        ro.mkdir(parents=True, exist_ok=True)
        for p in ro.rglob("*"):
            if not p.is_symlink():
                os.chmod(p, 0o555 if p.is_dir() else 0o444)
        os.chmod(ro, 0o555)


def remove(w: Path) -> None:
    """Remove a case's folder, read-only ones included (for a user who is not root)."""
    if w.exists():
        for p in [w, *w.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o777)
    shutil.rmtree(w, ignore_errors=True)


def run_case(case: Case, index: int, work: Path) -> Outcome:
    w = work / "cases" / f"{index:03d}"
    remove(w)
    w.mkdir(parents=True)
    fixtures = work / "fixtures"

    def fill(s: str) -> str:
        return s.format(w=w, f=fixtures)

    if case.setup is not None:
        try:
            case.setup(w)
        except Exception as e:  # a broken case, not a finding about hammr
            return Outcome(case, -2, False, [f"the probe could not set the case up: {e!r}"])
    prefix: list[str] = []
    env = {**os.environ, "HAMMR_CONFIG": "", "XDG_CACHE_HOME": str(w / "cache"), "TERM": "xterm"}
    if case.read_only:
        make_read_only(w, [Path(fill(p)) for p in case.read_only])
        prefix = confined_prefix()
        env["HOME"] = str(w)
    if case.no_escapes:
        env["COLUMNS"] = "300"  # a table cell holds the hostile text whole
    env.update({k: fill(v) for k, v in case.env})
    before = {p: digest(Path(fill(p))) for p in case.unchanged}
    kinds = {fill(p): stat.S_IFMT(os.stat(fill(p)).st_mode) for p in case.kept_kind}
    sink = open(fill(case.stdout_to), "wb") if case.stdout_to is not None else None  # noqa: SIM115
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*prefix, HAMMR, *(fill(a) for a in case.argv)],
            input=case.stdin,
            stdout=subprocess.PIPE if sink is None else sink,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            timeout=case.timeout,
            env=env,
            cwd=fill(case.cwd),
        )
        rc, out, err = done.returncode, done.stdout or "", done.stderr or ""
    except subprocess.TimeoutExpired as e:
        rc = -1
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
    finally:
        if sink is not None:
            sink.close()
    seconds = time.monotonic() - started
    why: list[str] = []
    if rc == -1 and case.expect != "serves":
        why.append(f"did not end within {case.timeout:g} s")
    if "Traceback (most recent call last)" in out + err:
        why.append("traceback")
    if "Exception ignored" in err:
        why.append("Python's 'Exception ignored ...' on stderr (an error at exit, unhandled)")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("hammr: error:", "Error:"))]
    last = lines[-1][:160] if lines else ""
    if case.expect == "refuse":
        if rc != 2:
            why.append(f"exit {rc}, not 2")
        if len(errors) != 1:
            why.append(f"{len(errors)} error lines")
    elif case.expect == "fail":
        if rc in (0, -1):
            why.append(f"exit {rc}, not a failure" + (f": {last}" if last else ""))
        if len(errors) != 1:
            why.append(
                f"{len(errors)} error lines" + (f" (last: {last})" if last and not errors else "")
            )
    elif case.expect == "serves":
        if rc != -1:
            why.append(f"exit {rc} instead of serving" + (f": {last}" if last else ""))
        elif "http://" not in out:
            why.append("served without printing its URL")
    elif rc != 0:
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
    if case.no_escapes:
        why += terminal_problems(out, "stdout") + terminal_problems(err, "stderr")
    if temporaries(w):
        why.append(f"left temporary files {temporaries(w)}")
    if why and errors:
        why.append(f"said: {errors[0][:160]}")
    return Outcome(case, rc, not why, why, seconds, shown(errors[-1] if errors else last))


def restore_devices() -> None:
    """A probe that replaced /dev/full or /dev/null must not leave the machine broken."""
    for name, minor in (("/dev/null", 3), ("/dev/full", 7)):
        if not stat.S_ISCHR(os.stat(name).st_mode):
            os.remove(name)
            os.mknod(name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            os.chmod(name, 0o666)


def shown(text: str) -> str:
    """``text`` with its control characters written as escapes, for the probe's own output."""
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


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
    parser.add_argument(
        "--category",
        action="append",
        default=[],
        choices=CATEGORIES,
        help="Run only cases of this category (repeatable).",
    )
    parser.add_argument(
        "--command",
        action="append",
        default=[],
        help="Run only cases of this command, as typed: 'ask', 'experiment run' (repeatable).",
    )
    parser.add_argument(
        "--coverage",
        action="store_true",
        help="Run nothing: print how many cases each command x category has, and what is "
        "missing (exit 1 if anything is).",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="Also write the outcomes here.")
    args = parser.parse_args()
    commands = leaf_commands()
    if args.coverage:
        counts = {k: len(v) for k, v in coverage(commands).items()}
        print(table(commands, dict(counts)))
        problems = coverage_problems(commands)
        print("".join(f"\n{p}" for p in problems) or "\nevery command has every category")
        return 1 if problems else 0
    unknown = [c for c in args.command if c not in commands]
    if unknown:
        parser.error(f"not a command of hammr --help: {', '.join(unknown)}")
    restore_devices()
    make_fixtures(args.work / "fixtures")
    cases = [
        c
        for c in catalogue()
        if (not args.only or any(o in c.name for o in args.only))
        and not any(o in c.name for o in args.skip)
        and (not args.category or c.category in args.category)
        and (not args.command or command_of(c, commands) in args.command)
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
                    shown(
                        f"{mark:9}  {o.case.name}  ({o.seconds:.1f} s)"
                        + "".join(f"\n           - {w}" for w in o.why)
                    ),
                    flush=True,
                )
    finally:
        restore_devices()
    clean = sum(o.clean for o in outcomes)
    cells: dict[tuple[str, Category], tuple[int, int]] = {}
    for o in outcomes:
        cmd = command_of(o.case, commands)
        if cmd is not None and o.case.category is not None:
            was = cells.get((cmd, o.case.category), (0, 0))
            cells[cmd, o.case.category] = (was[0] + o.clean, was[1] + 1)
    print("\ncommand x category, clean/total (-: none run, n/a: does not apply):\n")
    print(table(sorted({cmd for cmd, _ in cells}) or commands, dict(cells)))
    print(f"\n{clean} of {len(outcomes)} cases clean")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "case": o.case.name,
                        "command": command_of(o.case, commands),
                        "category": o.case.category,
                        "clean": o.clean,
                        "rc": o.rc,
                        "why": o.why,
                        "said": o.said,
                        "argv": list(o.case.argv),
                        "stdout_to": o.case.stdout_to,
                        "read_only": list(o.case.read_only),
                    }
                    for o in outcomes
                ],
                indent=1,
            )
        )
    return 0 if clean == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
