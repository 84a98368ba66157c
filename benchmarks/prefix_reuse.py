"""(n) Prefix reuse, measured on a real llama.cpp server: per system, prompt tokens per
question, LLM calls, and the share of every later step's prompt the server took from its
prefix (KV) cache.

    .venv/bin/python benchmarks/prefix_reuse.py                 # every system, 1 question
    .venv/bin/python benchmarks/prefix_reuse.py --systems react,avis --questions 2
    .venv/bin/python benchmarks/prefix_reuse.py --no-memory     # skip muse, reflexion, expel
    .venv/bin/python benchmarks/prefix_reuse.py --json          # the figures as JSON

llama.cpp's own HTTP server (:class:`~hammr.backends.llm.local_server.LocalLlamaServer`, the
shipped SmolLM2-135M GGUF) runs on 127.0.0.1 with ONE slot and the project's default
threads for a local server (``--threads`` sets others), so its cache holds what one
conversation sent before (plus llama.cpp's host-memory prompt cache, which restores a prompt
saved when another conversation took the slot). hammr is pointed at it as a user would
(``[llm] backend = "openai"``, ``server = "llamacpp"``, a written hammr.toml, no response
cache) through a small recording proxy that forwards every request unchanged and keeps the
request (its messages) and the server's reply (``usage.prompt_tokens`` and
``timings.cache_n``, the prompt tokens taken from the cache) of every model call.

A *conversation* is the calls of one question whose prompts open the same way (the first
line of the first message, and of the second where there is one): one ReAct agent's run
(system prompt + "Question: ..."), the MulProg planner writing a program line by line, the
AVIS planner at one query, AVIS's reasoner... A child agent (HAMMR's dispatcher hands over to
a specialist) is a conversation of its own, so its first call is a *first* call. For every
*later* call the share is ``cached_prompt_tokens / prompt_tokens``; per system the table
gives its minimum and median. Target: at least 90% on every later call of every system that
loops. Per conversation, a second table tells new content from a broken prefix: the share
of the *previous* call's prompt the server reused (near 100% when only new turns were
added), whether each later prompt *extends* the previous one as text (the earlier prompt is
a prefix of it) and, where not, where the two first differ, which names what broke the
prefix (a prompt rebuilt per step, a reordered message, an earlier turn edited).

muse, reflexion and expel read a memory file: it is made first with the commands a user
would run (a 2-question exploration by ``react`` on the ``muse-demo`` suite, then ``hammr
memory build / reflect / insights``; ExpeL's with ``--correct-at 0``, as it learns from
successes and the tiny model has none), on the same server; a step that fails skips its
system with the reason. The model is tiny and slow on a loaded CPU, so the default run is
small (one question per system, 4 steps per agent): about 16 minutes on 2 busy cores, half
of it making the memories (``--no-memory``: about 9).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hammr.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo"
TARGET = 0.9
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("examples/plate.png", "What is the licence plate number?"),
    ("examples/demo/menu.png", "How much does a cappuccino cost?"),
    ("examples/demo/astronaut.jpg", "In which year was this astronaut born?"),
)
"""The bundled questions, asked in this order (``--questions N`` takes the first N)."""
MEMORY_SYSTEMS = ("muse", "reflexion", "expel")
"""Systems that need a memory file, made first (see the module docstring)."""
EXPLORE_QUESTIONS = 2
EXPLORE_STEPS = 3
"""The exploration that the memories are made from (its quality does not matter here: the
memory only has to exist; every model reply that makes it is asked for once)."""

COLUMNS = [
    "system",
    "questions",
    "answered",
    "LLM calls / question",
    "prompt tokens / question",
    "evaluated / question",
    "later calls",
    "from cache: min",
    "from cache: median",
    "target met",
]
CONVERSATION_COLUMNS = [
    "system",
    "conversation (its prompt's opening)",
    "calls",
    "later calls",
    "from cache: min",
    "from cache: median",
    "previous prompt reused: min",
    "extends the previous prompt",
    "where a later prompt first differs",
]


# -- what the server was asked and answered -----------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One model call of one question, as the server saw it."""

    system: str
    question: int
    conversation: str
    """The conversation's key: the opening line of the prompt's first message (and second)."""
    prompt: str | None
    """The request's messages as text (:func:`render_prompt`), to compare calls by (None
    when the call comes from a trace, which does not keep prompts)."""
    prompt_tokens: int
    cached_tokens: int | None
    """Of ``prompt_tokens``, those the server took from its cache (None: it did not say)."""


@dataclass(frozen=True)
class LaterCall:
    """A call after the first of its conversation, beside the conversation's previous call."""

    call: Call
    share: float | None
    """``cached_tokens / prompt_tokens`` (None when the server did not say)."""
    extends: bool | None
    """The previous call's prompt is a prefix of this one (the conversation only appended;
    None when the prompts are not known)."""
    kept: float | None
    """The fraction of this prompt's text that repeats the previous prompt from its start."""
    differs: str
    """Where this prompt first differs from the previous one ('' when it extends it)."""
    reused: float | None = None
    """``cached_tokens`` over the previous call's ``prompt_tokens`` (at most 1): near 1 when
    the server kept all of the previous prompt, so a lower :attr:`share` is new content (an
    observation, a repair's errors), not a broken prefix."""


def _text_of(content: Any) -> str:
    """A message's content as text (an image part stands as ``<image>``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append("<image>")
        return "".join(parts)
    return "" if content is None else str(content)


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render_prompt(request: Mapping[str, Any]) -> str:
    """The request's prompt as one text: its chat messages in order (``<|role|>`` before
    each), or a completion request's prompt."""
    messages = request.get("messages")
    if isinstance(messages, list):
        return "".join(
            f"<|{m.get('role', '?')}|>\n{_text_of(m.get('content'))}\n"
            for m in messages
            if isinstance(m, dict)
        )
    return str(request.get("prompt", ""))


def conversation_key(request: Mapping[str, Any]) -> str:
    """Which conversation a request belongs to: the first line of its first message, and of
    its second where there is one (an agent's task message: "Question: ...")."""
    messages = request.get("messages")
    if isinstance(messages, list) and messages:
        heads = [
            _first_line(_text_of(m.get("content"))) for m in messages[:2] if isinstance(m, dict)
        ]
        return " / ".join(h for h in heads if h)
    return _first_line(str(request.get("prompt", "")))


def call_of(
    system: str, question: int, request: Mapping[str, Any], reply: Mapping[str, Any]
) -> Call | None:
    """The call a request and the server's JSON reply make (None: not a completion reply)."""
    usage = reply.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    cached: int | None = None
    details = usage.get("prompt_tokens_details")
    timings = reply.get("timings")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        cached = details["cached_tokens"]
    elif isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        cached = timings["cache_n"]
    return Call(
        system,
        question,
        conversation_key(request),
        render_prompt(request),
        int(usage["prompt_tokens"]),
        cached,
    )


def _snippet(text: str, at: int, width: int = 36) -> str:
    piece = text[at : at + width].replace("\n", "⏎")
    return repr(piece + ("…" if len(text) > at + width else ""))


def difference(previous: str, prompt: str) -> tuple[bool, float, str]:
    """(``prompt`` extends ``previous``, the fraction of ``prompt`` that repeats
    ``previous`` from its start, where they first differ: the message (for chat prompts) or
    line, and a few characters of each)."""
    n = 0
    limit = min(len(previous), len(prompt))
    while n < limit and previous[n] == prompt[n]:
        n += 1
    kept = n / len(prompt) if prompt else 1.0
    if n >= len(previous) - 1:
        # all of it, or all but the newline that ends its last message: the last message
        # grew (a program line appended to it), which is still appending
        return True, kept, ""
    head = prompt[:n]
    start = head.rfind("\n") + 1  # show the lines that differ from their start
    turns = head.count("<|")
    if turns and prompt.startswith("<|"):
        role = head[head.rfind("<|") + 2 :].split("|>", 1)[0]
        where = f"message {turns} ({role})"
    else:
        where = f"line {head.count(chr(10)) + 1}"
    return False, kept, f"{where}: {_snippet(previous, start)} became {_snippet(prompt, start)}"


def later_calls(calls: Iterable[Call]) -> list[LaterCall]:
    """Every call after the first of its conversation (per system and question), in order."""
    last: dict[tuple[str, int, str], Call] = {}
    out: list[LaterCall] = []
    for c in calls:
        key = (c.system, c.question, c.conversation)
        previous = last.get(key)
        last[key] = c
        if previous is None:
            continue
        cached = c.cached_tokens
        share = cached / c.prompt_tokens if cached is not None and c.prompt_tokens > 0 else None
        reused = (
            min(1.0, c.cached_tokens / previous.prompt_tokens)
            if c.cached_tokens is not None and previous.prompt_tokens > 0
            else None
        )
        if previous.prompt is None or c.prompt is None:
            out.append(LaterCall(c, share, None, None, "", reused))
            continue
        extends, kept, differs = difference(previous.prompt, c.prompt)
        out.append(LaterCall(c, share, extends, kept, differs, reused))
    return out


# -- tables -------------------------------------------------------------------------------------


@dataclass
class SystemRun:
    """What running one system on the questions gave (or why it was not run)."""

    system: str
    questions: int = 0
    answered: int = 0
    wall_s: float = 0.0
    skipped: str | None = None
    problems: list[str] = field(default_factory=list)
    """Per question without an answer: the run's status and error."""
    traced: list[Call] = field(default_factory=list)
    """The calls its traces record (:func:`trace_calls`), to check them against the server's."""


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _count_extending(items: Sequence[LaterCall]) -> int | None:
    """How many later calls extend the previous prompt (None when no prompt is known)."""
    known = [lc.extends for lc in items if lc.extends is not None]
    return sum(known) if known else None


def system_figures(run: SystemRun, calls: Sequence[Call]) -> dict[str, Any]:
    """One system's figures (the table's row, as data)."""
    mine = [c for c in calls if c.system == run.system]
    later = later_calls(mine)
    shares = [lc.share for lc in later if lc.share is not None]
    n = max(1, run.questions)
    prompt = sum(c.prompt_tokens for c in mine)
    cached = sum(c.cached_tokens or 0 for c in mine)
    return {
        "system": run.system,
        "skipped": run.skipped,
        "questions": run.questions,
        "answered": run.answered,
        "wall_s": round(run.wall_s, 1),
        "llm_calls": len(mine),
        "llm_calls_per_question": len(mine) / n,
        "prompt_tokens_per_question": prompt / n,
        "evaluated_tokens_per_question": (prompt - cached) / n,
        "later_calls": len(later),
        "later_share_min": min(shares) if shares else None,
        "later_share_median": statistics.median(shares) if shares else None,
        "later_extending": _count_extending(later),
        "target_met": (min(shares) >= TARGET) if shares else None,
        "problems": list(run.problems),
        "from_traces": _trace_figures(run.traced),
    }


def _trace_figures(calls: Sequence[Call]) -> dict[str, Any]:
    """What the traces say of the same later calls (steps of one call only)."""
    later = later_calls(calls)
    shares = [lc.share for lc in later if lc.share is not None]
    return {
        "llm_calls": len(calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "later_calls": len(later),
        "later_calls_with_cache_figure": len(shares),
        "later_share_min": min(shares) if shares else None,
        "later_share_median": statistics.median(shares) if shares else None,
    }


def system_row(figures: Mapping[str, Any]) -> tuple[str, ...]:
    """A row of :data:`COLUMNS`."""
    if figures["skipped"]:  # why is said under the table
        return (figures["system"], "0", "skipped", *("–",) * (len(COLUMNS) - 3))
    met = figures["target_met"]
    return (
        figures["system"],
        str(figures["questions"]),
        f"{figures['answered']}/{figures['questions']}",
        f"{figures['llm_calls_per_question']:.1f}",
        f"{figures['prompt_tokens_per_question']:,.0f}",
        f"{figures['evaluated_tokens_per_question']:,.0f}",
        str(figures["later_calls"]),
        _pct(figures["later_share_min"]),
        _pct(figures["later_share_median"]),
        "–" if met is None else ("yes" if met else "no"),
    )


def conversation_figures(calls: Sequence[Call]) -> list[dict[str, Any]]:
    """Per system and conversation (over all questions): calls, later calls, their shares,
    how many extend the previous prompt, and where the first one that does not differs."""
    later = later_calls(calls)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    items: dict[tuple[str, str], list[LaterCall]] = {}
    for c in calls:
        g = groups.setdefault(
            (c.system, c.conversation),
            {"system": c.system, "conversation": c.conversation, "calls": 0},
        )
        g["calls"] += 1
    for lc in later:
        items.setdefault((lc.call.system, lc.call.conversation), []).append(lc)
    out = []
    for key, g in groups.items():
        mine = items.get(key, [])
        shares = [lc.share for lc in mine if lc.share is not None]
        breaks = [lc for lc in mine if lc.extends is False]
        kept = [lc.kept for lc in mine if lc.kept is not None]
        reused = [lc.reused for lc in mine if lc.reused is not None]
        out.append(
            {
                **g,
                "later_calls": len(mine),
                "share_min": min(shares) if shares else None,
                "share_median": statistics.median(shares) if shares else None,
                "extending": _count_extending(mine),
                "kept_min": min(kept) if kept else None,
                "reused_min": min(reused) if reused else None,
                "first_difference": breaks[0].differs if breaks else "",
            }
        )
    return out


def _cell(text: str, limit: int) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def conversation_row(g: Mapping[str, Any]) -> tuple[str, ...]:
    """A row of :data:`CONVERSATION_COLUMNS`."""
    later, extending = g["later_calls"], g["extending"]
    return (
        g["system"],
        _cell(g["conversation"], 60),
        str(g["calls"]),
        str(later),
        _pct(g["share_min"]),
        _pct(g["share_median"]),
        _pct(g["reused_min"]),
        "–" if not later or extending is None else f"{extending}/{later}",
        _cell(g["first_difference"] or "", 120),
    )


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
    left: Iterable[int] = (0,),
) -> str:
    """A markdown table: the ``left`` columns (text) left-aligned, the others (figures)
    right-aligned, padded to line up; then ``notes`` as a list."""
    lefts = set(left)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.ljust(widths[i]) if i in lefts else c.rjust(widths[i]) for i, c in enumerate(cells)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        ":" + "-" * (w + 1) if i in lefts else "-" * (w + 1) + ":" for i, w in enumerate(widths)
    )
    out = [line(head), rule + "|", *(line(r) for r in rows)]
    if notes:
        out += ["", *(f"- {n}" for n in notes)]
    return "\n".join(out) + "\n"


def markdown(
    figures: Sequence[Mapping[str, Any]], conversations: Sequence[Mapping[str, Any]]
) -> str:
    """The two tables, per system and per conversation (those with later calls), in
    markdown."""
    notes = [
        "from cache: cached_prompt_tokens / prompt_tokens of every call after the first of "
        "its conversation (llama.cpp's timings.cache_n; one server slot); target: at least "
        f"{100 * TARGET:.0f}% for every system that loops",
        "evaluated: the prompt tokens the server computed (not taken from its cache); a first "
        "call may find its system prompt cached by an earlier system's run (llama.cpp keeps "
        "prompts in host memory), so this column depends on the order systems ran in",
    ]
    problems = [
        f"{f['system']}: skipped: {f['skipped']}"
        if f["skipped"]
        else "; ".join(f"{f['system']}: {_cell(p, 240)}" for p in f["problems"])
        for f in figures
        if f["skipped"] or f["problems"]
    ]
    systems = table(COLUMNS, [system_row(f) for f in figures], [*notes, *problems])
    loops = [g for g in conversations if g["later_calls"]]
    if not loops:
        return systems
    per_conversation = table(
        CONVERSATION_COLUMNS, [conversation_row(g) for g in loops], left=(0, 1, 8)
    )
    return f"{systems}\n{per_conversation}"


# -- the same figures from traces -------------------------------------------------------------


def trace_calls(system: str, question: int, trace: Trace) -> list[Call]:
    """The model calls a trace records, in the order they were made, as :class:`Call` s
    (without prompts): one per step that made exactly one call, with the step's usage; each
    agent's run (the trace, and every child trace) is a conversation of its own. A step that
    made several calls (AVIS: planner and reasoner) sums their usage, so it is left out, as is
    one whose call got no reply (no prompt tokens) or was replayed from hammr's cache. The
    same holds for the calls a step's tool made (``tool_usage``, never mixed with the step's
    own): one such call is a conversation of its own (a first call, so no share)."""
    out: list[Call] = []

    def walk(t: Trace, path: str) -> None:
        for step in t.steps:
            calls = step.calls
            if calls is None:
                calls = int(step.router is None and step.line is None)
            if calls == 1 and not step.cached and step.usage.prompt_tokens > 0:
                u = step.usage
                out.append(
                    Call(system, question, path, None, u.prompt_tokens, u.cached_prompt_tokens)
                )
            tu = step.tool_usage
            if step.tool_calls == 1 and not step.tool_cached_calls and tu.prompt_tokens > 0:
                where = f"{path} > {step.tool or 'advisor'} (step {step.index + 1})"
                out.append(
                    Call(system, question, where, None, tu.prompt_tokens, tu.cached_prompt_tokens)
                )
            if step.child is not None:
                walk(step.child, f"{path} > {step.child.agent} (step {step.index + 1})")

    walk(trace, trace.agent)
    return out


# -- the recording proxy ------------------------------------------------------------------------


@dataclass
class Exchange:
    label: tuple[str, int] | None
    request: dict[str, Any]
    reply: dict[str, Any] | None
    status: int


class RecordingProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (``http://127.0.0.1:PORT``): every
    request is forwarded unchanged, and every JSON POST is kept with the server's reply under
    the current :attr:`label` ((system, question index), or None for set-up work)."""

    def __init__(self, upstream: str, timeout_s: float = 1800.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.host, self.port_up = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.timeout_s = timeout_s
        self.label: tuple[str, int] | None = None
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                label = proxy.label
                conn = http.client.HTTPConnection(
                    proxy.host, proxy.port_up, timeout=proxy.timeout_s
                )
                try:
                    headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                    conn.request(method, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data, status = resp.read(), resp.status
                    kind = resp.getheader("Content-Type", "application/json")
                finally:
                    conn.close()
                if method == "POST" and body:
                    proxy._keep(label, body, data, status)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def _keep(self, label: tuple[str, int] | None, body: bytes, data: bytes, status: int) -> None:
        try:
            request = json.loads(body)
            reply = json.loads(data) if status == 200 else None
        except ValueError:
            return
        if isinstance(request, dict):
            with self._lock:
                self.exchanges.append(Exchange(label, request, reply, status))

    def calls(self) -> list[Call]:
        """The labelled completions, in the order the server answered them."""
        out = []
        with self._lock:
            exchanges = list(self.exchanges)
        for e in exchanges:
            if e.label is None or e.reply is None:
                continue
            c = call_of(e.label[0], e.label[1], e.request, e.reply)
            if c is not None:
                out.append(c)
        return out

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- running the systems ------------------------------------------------------------------------


def write_config(folder: Path, base_url: str, max_steps: int) -> Path:
    """A hammr.toml pointing at the served model (no response cache: every call is made)."""
    path = folder / "hammr.toml"
    path.write_text(
        "[llm]\n"
        'backend = "openai"\n'
        'server = "llamacpp"\n'
        f'base_url = "{base_url}"\n'
        'model = "smollm2"\n'
        'api_key_env = ""\n'
        "cache = false\n"
        "timeout_s = 1800\n"
        "max_retries = 1\n\n"
        "[agent]\n"
        f"max_steps = {max_steps}\n\n"
        "[avis]\n"
        f'image_index = "{DEMO / "image_index.jsonl"}"\n'
        f"max_steps = {max_steps}\n"
    )
    return path


def _hammr_cli() -> list[str]:
    """The ``hammr`` command of this Python (the venv's script where there is one)."""
    script = Path(sys.executable).parent / "hammr"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from hammr.cli import main; main()"]


def make_memories(folder: Path, config: Path, log: Any) -> dict[str, Path | str]:
    """The memory file of each of :data:`MEMORY_SYSTEMS` (its path), or why there is none:
    a small exploration by ``react``, then ``hammr memory build / reflect / insights``."""
    store = folder / "runs.sqlite"
    common = ["--store", str(store), "--config", str(config)]

    def q(path: Path) -> str:
        return shlex.quote(str(path))

    explore = (
        f"eval --suite muse-demo --data-dir {q(DEMO)} --system react --split exploration "
        f"--name explore --limit {EXPLORE_QUESTIONS} --max-steps {EXPLORE_STEPS} "
        "--concurrency 1 --judge none --no-cache"
    )
    steps: list[tuple[str | None, str, Path | None]] = [
        (None, explore, None),
        (
            "muse",
            f"memory build explore -o {q(folder / 'bank.db')} --include-failed --concurrency 1 "
            "--max-attempts 1 --no-cache",
            folder / "bank.db",
        ),
        (
            "reflexion",
            f"memory reflect explore -o {q(folder / 'reflexion.db')} --concurrency 1 --attempts 1",
            folder / "reflexion.db",
        ),
        (
            "expel",
            # every sample counts as a success: ExpeL learns from successes, which a 135M model
            # seldom has; what its memory says does not matter here, only that prompts carry it
            f"memory insights explore -o {q(folder / 'expel.db')} --attempts 1 --correct-at 0",
            folder / "expel.db",
        ),
    ]
    out: dict[str, Path | str] = {}
    env = {**os.environ, "HAMMR_CONFIG": str(config)}
    for system, command, made in steps:
        log(f"  $ hammr {command.replace(str(folder) + '/', '')}")
        args = [*shlex.split(command), *common]
        t0 = time.perf_counter()
        done = subprocess.run(
            [*_hammr_cli(), *args], capture_output=True, text=True, env=env, cwd=ROOT
        )
        log(f"    exit {done.returncode} after {time.perf_counter() - t0:.0f} s")
        if done.returncode != 0:
            lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if "error" in ln.lower()]
            said = (errors or lines or [f"exit status {done.returncode}"])[-1]
            why = f"`hammr {args[0]} {args[1]}` failed: {said}"
            if system is None:
                return dict.fromkeys(MEMORY_SYSTEMS, why)
            out[system] = why
        elif system is not None and made is not None:
            out[system] = made
    return out


async def ask(cfg: Any, name: str, image: Path, question: str, max_steps: int) -> Any:
    """The system's result for one question, as ``hammr ask`` gets it."""
    from hammr.factory import build_llm
    from hammr.systems import build_system
    from hammr.tools.base import ToolContext
    from hammr.values import Image

    system, backends = build_system(cfg, name, max_steps)
    prepare = getattr(system, "prepare", None)
    if prepare is not None:
        await prepare()
    llm = build_llm(cfg, cache=False)
    try:
        return await system.run(
            question, {"image": Image.open(image)}, ctx=ToolContext(backends=backends, llm=llm)
        )
    finally:
        close = getattr(llm, "aclose", None)
        if close is not None:
            await close()


def run_system(
    proxy: RecordingProxy, cfg: Any, name: str, questions: int, max_steps: int, log: Any
) -> SystemRun:
    run = SystemRun(name)
    t0 = time.perf_counter()
    for i, (image, question) in enumerate(QUESTIONS[:questions]):
        proxy.label = (name, i)
        try:
            result = asyncio.run(ask(cfg, name, ROOT / image, question, max_steps))
        except Exception as e:  # a system that cannot be built or run here: say why
            run.problems.append(f"q{i + 1}: {type(e).__name__}: {e}")
            if run.questions == 0 and not run.answered:
                run.skipped = f"{type(e).__name__}: {e}"
            continue
        finally:
            proxy.label = None
        run.skipped = None
        run.questions += 1
        trace = result.trace
        run.traced += trace_calls(name, i, trace)
        if result.answer is not None:
            run.answered += 1
        else:
            run.problems.append(f"q{i + 1}: no answer ({trace.status}: {trace.error})")
        log(f"  {name} q{i + 1}: {result.answer!r} ({trace.status}, {len(trace.steps)} steps)")
    run.wall_s = time.perf_counter() - t0
    return run


def measure(
    systems: Sequence[str],
    questions: int = 1,
    max_steps: int = 4,
    memory: bool = True,
    threads: int | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Start the server and the proxy, run every system, return the figures (as JSON data)."""
    from hammr.backends.llm.local_server import LocalLlamaServer
    from hammr.config import load_config

    started = time.perf_counter()
    # threads None: LocalLlamaServer's own default (the project's, as for the embedded model);
    # 0: llama.cpp's choice (one per physical core)
    server = (
        LocalLlamaServer(n_parallel=1, per_slot_ctx=8192)
        if threads is None
        else LocalLlamaServer(n_parallel=1, per_slot_ctx=8192, n_threads=threads or None)
    )
    with server, tempfile.TemporaryDirectory(prefix="hammr-prefix-") as tmp:
        folder = Path(tmp)
        proxy = RecordingProxy(server.url)
        try:
            config = write_config(folder, proxy.url + "/v1", max_steps)
            log(
                f"llama.cpp server at {server.url} (1 slot, threads: "
                f"{server.n_threads or 'llama.cpp default'}), recorded through {proxy.url}"
            )
            memories: dict[str, Path | str] = {}
            wanted = [s for s in systems if s in MEMORY_SYSTEMS]
            if wanted and memory:
                log("making the memory files:")
                memories = make_memories(folder, config, log)
            elif wanted:
                memories = dict.fromkeys(wanted, "--no-memory")
            runs: list[SystemRun] = []
            for name in systems:
                env: dict[str, str] = {}
                if name in MEMORY_SYSTEMS:
                    made = memories.get(name, "no memory file")
                    if not isinstance(made, Path):
                        runs.append(SystemRun(name, skipped=f"no memory file ({made})"))
                        log(f"  {name}: skipped, no memory file ({made})")
                        continue
                    env["HAMMR_MEMORY__PATH"] = str(made)
                cfg = load_config(config, env=env)
                runs.append(run_system(proxy, cfg, name, questions, max_steps, log))
            calls = proxy.calls()
        finally:
            proxy.close()
    figures = [system_figures(r, calls) for r in runs]
    conversations = conversation_figures(calls)
    later = {id(lc.call): lc for lc in later_calls(calls)}
    return {
        "server": {"model": "SmolLM2-135M-Instruct (GGUF)", "slots": 1, "per_slot_ctx": 8192},
        "questions": [{"image": image, "question": q} for image, q in QUESTIONS[:questions]],
        "max_steps": max_steps,
        "wall_s": round(time.perf_counter() - started, 1),
        "systems": figures,
        "conversations": conversations,
        "calls": [
            {
                **{k: v for k, v in asdict(c).items() if k != "prompt"},
                "later": id(c) in later,
                "share": later[id(c)].share if id(c) in later else None,
                "reused": later[id(c)].reused if id(c) in later else None,
                "extends": later[id(c)].extends if id(c) in later else None,
                "differs": later[id(c)].differs if id(c) in later else None,
            }
            for c in calls
        ],
    }


def run() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The default run's rows, per system and per conversation that loops (for
    benchmarks/run.py)."""
    from hammr.systems import registered_systems

    data = measure(registered_systems(), log=lambda _m: None)
    loops = [g for g in data["conversations"] if g["later_calls"]]
    return [system_row(f) for f in data["systems"]], [conversation_row(g) for g in loops]


def default_threads() -> int | None:
    """The threads a local llama.cpp server gets unless told otherwise: the project's default
    (:class:`~hammr.backends.llm.local_server.LocalLlamaServer`'s ``n_threads``, as the
    embedded model's), read from it rather than repeated here."""
    import inspect

    from hammr.backends.llm.local_server import LocalLlamaServer

    default: int | None = inspect.signature(LocalLlamaServer).parameters["n_threads"].default
    return default


def main(argv: Sequence[str] | None = None) -> int:
    from hammr.systems import registered_systems

    known = registered_systems()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    p.add_argument("--systems", default=",".join(known), help="comma-separated (default: all)")
    p.add_argument("--questions", type=int, default=1, choices=range(1, len(QUESTIONS) + 1),
                   help="bundled questions per system (default 1)")  # fmt: skip
    p.add_argument("--max-steps", type=int, default=4, help="step limit per agent (default 4)")
    p.add_argument("--no-memory", action="store_true", help="skip muse, reflexion and expel")
    p.add_argument("--threads", type=int, default=None,
                   help=f"the server's CPU threads (default: {default_threads()}, the "
                   "project's default for a local llama.cpp server; 0: one per core)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in known]
    if unknown:
        p.error(f"unknown system(s): {', '.join(unknown)}; known: {', '.join(known)}")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    data = measure(systems, args.questions, args.max_steps, not args.no_memory, args.threads, log)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(markdown(data["systems"], data["conversations"]))
        print(f"({data['wall_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
