"""The viewer's JSON API as a pure function of a request path: no sockets, no file system.

Every answer comes from the run store; the only files read are the three whitelisted
static files of :mod:`hammr.web` (``index.html``, ``app.js``, ``style.css``), by fixed
name. The path is split at its literal slashes and each segment URL-decoded once; the
decoded segments are compared with fixed names or used as SQL parameters, never to build a
path. A run, dataset or sample name may hold a slash, sent encoded (``%2F``) inside its one
segment (``exp/try1``, V* Bench's ``category/name`` ids); a segment that is empty, has a
``.``, ``..`` or empty part between its slashes, holds a backslash or a control character,
or is absurdly long gets 404.

Endpoints (the front end codes against exactly these)::

    GET /api/runs
    GET /api/run-names            (names only, cheap: which runs a link may point at)
    GET /api/runs/{run}/samples?offset&limit&dataset&question_type&correct&error_kind&agent
    GET /api/runs/{run}/samples/{dataset}/{sample_id}
    GET /api/compare/{runA}/{runB}?offset&limit&only=differ|all
    GET /api/images/{hash}
    GET /  GET /static/{app.js|style.css}
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote

from hammr.eval.store import FAILED_STATUSES, RunStore, StoreError

STATIC_FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
PLACEHOLDER_INDEX = (
    "<!doctype html><meta charset=utf-8><title>hammr</title>"
    "<p>hammr viewer: the front end (index.html) is not installed; the JSON API is at /api/runs."
    "</p>\n"
)
HASH_RE = re.compile(r"^[0-9a-f]{8,64}$")
MAX_SEGMENT = 512
MAX_PATH = 4096
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
CI_SAMPLES = 1000
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def json_response(data: Any, status: int = 200) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(status, body)


def not_found(what: str = "not found") -> Response:
    return json_response({"error": what}, 404)


def bad_request(what: str) -> Response:
    return json_response({"error": what}, 400)


def read_static(name: str) -> bytes | None:
    """One of the whitelisted static files of the viewer, None when it is not installed."""
    if name not in STATIC_FILES:
        return None
    try:
        return (resources.files("hammr.web") / "static" / name).read_bytes()
    except (FileNotFoundError, NotADirectoryError, OSError):
        return None


def _segments(raw_path: str) -> list[str] | None:
    """The decoded segments of a request path (query removed), None when any is unsafe."""
    if len(raw_path) > MAX_PATH or not raw_path.startswith("/"):
        return None
    parts = raw_path[1:].split("/")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # one trailing slash is tolerated
    out: list[str] = []
    for part in parts:
        try:
            seg = unquote(part, errors="strict")
        except UnicodeDecodeError:
            return None
        if len(seg) > MAX_SEGMENT or _BAD_CHARS.search(seg):
            return None
        if part and any(p in ("", ".", "..") for p in seg.split("/")):
            return None
        if part == "" and len(parts) > 1:
            return None
        out.append(seg)
    return out


def _int_param(query: Mapping[str, list[str]], name: str, default: int, high: int) -> int:
    values = query.get(name)
    if not values or values[-1] == "":
        return default
    try:
        n = int(values[-1])
    except ValueError:
        raise ValueError(f"{name} must be a whole number") from None
    if n < 0:
        raise ValueError(f"{name} must not be negative")
    return min(n, high)


def _str_param(query: Mapping[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values and values[-1] != "" else None


class Api:
    """Answers GET requests over one run store (thread-safe: the store has its own lock)."""

    def __init__(self, store: RunStore, *, ci_samples: int = CI_SAMPLES) -> None:
        self.store = store
        self.ci_samples = ci_samples
        self._runs_cache: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._cache_lock = threading.Lock()

    # -- routing ---------------------------------------------------------------------------

    def handle(self, target: str) -> Response:
        """The response to ``GET target`` (a request target: path and optional query)."""
        path, _, qs = target.partition("?")
        path = path.partition("#")[0]
        segs = _segments(path)
        if segs is None:
            return not_found()
        try:
            query = parse_qs(qs, keep_blank_values=True, max_num_fields=50)
        except ValueError:
            return bad_request("bad query string")
        try:
            return self._route(segs, query)
        except ValueError as e:  # bad parameters (StoreError is one)
            return bad_request(str(e))

    def _route(self, segs: list[str], query: Mapping[str, list[str]]) -> Response:
        if segs in ([""], ["index.html"]):
            return self._static("index.html")
        if len(segs) == 2 and segs[0] == "static" and segs[1] in ("app.js", "style.css"):
            return self._static(segs[1])
        if not segs or segs[0] != "api":
            return not_found()
        rest = segs[1:]
        if rest == ["runs"]:
            return json_response({"runs": self.runs()})
        if rest == ["run-names"]:
            return json_response({"runs": list(self.store.run_names())})
        if len(rest) == 3 and rest[0] == "runs" and rest[2] == "samples":
            return self._samples(rest[1], query)
        if len(rest) == 5 and rest[0] == "runs" and rest[2] == "samples":
            return self._sample(rest[1], rest[3], rest[4])
        if len(rest) == 3 and rest[0] == "compare":
            return self._compare(rest[1], rest[2], query)
        if len(rest) == 2 and rest[0] == "images":
            return self._image(rest[1])
        return not_found()

    # -- endpoints -------------------------------------------------------------------------

    def _static(self, name: str) -> Response:
        body = read_static(name)
        if body is None:
            if name == "index.html":
                return Response(200, PLACEHOLDER_INDEX.encode(), STATIC_FILES[name])
            return not_found()
        return Response(200, body, STATIC_FILES[name], {"Cache-Control": "no-cache"})

    def runs(self) -> list[dict[str, Any]]:
        return [self.run_entry(name) for name in self.store.run_names()]

    def run_entry(self, name: str) -> dict[str, Any]:
        """One run's scores: per (question type, dataset) and the macro average, each with
        its 95% bootstrap interval, and ``verdict``: None, or why the run's numbers are not
        results (:mod:`hammr.eval.run_health`: ``text``, ``advice``, ``cause``), when the
        front end shows FAILED in its cells (cached until the run's samples change)."""
        from hammr.eval.report import build_report

        summary = self.store.summary(name)
        key = (summary.done, summary.mean, tuple(sorted(summary.statuses.items())))
        with self._cache_lock:
            cached = self._runs_cache.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        report = build_report(self.store, [name], samples=self.ci_samples)
        rows = []
        for row in report.rows:
            cell = row.cells[0]
            if cell is None:
                continue
            rows.append(
                {
                    "question_type": row.question_type,
                    "dataset": row.dataset,
                    "n": cell.n,
                    "mean": cell.mean,
                    "low": cell.low,
                    "high": cell.high,
                }
            )
        macro_cell = report.macro[0]
        macro = (
            {"mean": macro_cell.mean, "low": macro_cell.low, "high": macro_cell.high}
            if macro_cell is not None
            else {"mean": None, "low": None, "high": None}
        )
        info = summary.info
        verdict = report.verdicts[0] if report.verdicts else None
        entry = {
            "name": info.name,
            "suite": info.suite,
            "system": info.system,
            "created": info.created,
            "done": summary.done,
            "mean": summary.mean,
            "failed": sum(summary.statuses.get(k, 0) for k in FAILED_STATUSES),
            "rows": rows,
            "macro": macro,
            "ground_truth": self.store.has_ground_truth(name),
            # why its numbers are not results (hammr.eval.run_health); the front end shows
            # FAILED in its cells instead of the failures' zeros
            "verdict": None
            if verdict is None
            else {"text": verdict.text, "advice": verdict.advice, "cause": verdict.cause.key},
        }
        with self._cache_lock:
            self._runs_cache[name] = (key, entry)
        return entry

    def _known(self, run: str) -> bool:
        return self.store.run_info(run) is not None

    def _samples(self, run: str, query: Mapping[str, list[str]]) -> Response:
        if not self._known(run):
            return not_found(f"no run named {run!r}")
        offset = _int_param(query, "offset", 0, 10**9)
        limit = _int_param(query, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        total, items = self.store.list_page(run, offset, limit, filters_from(query))
        return json_response({"total": total, "offset": offset, "limit": limit, "items": items})

    def _sample(self, run: str, dataset: str, sample_id: str) -> Response:
        try:
            rec = self.store.get(run, dataset, sample_id, images=False)
        except StoreError:
            return not_found(f"run {run!r} has no sample {dataset}/{sample_id}")
        return json_response(record_dict(rec))

    def _compare(self, run_a: str, run_b: str, query: Mapping[str, list[str]]) -> Response:
        for run in (run_a, run_b):
            if not self._known(run):
                return not_found(f"no run named {run!r}")
        only = _str_param(query, "only") or "differ"
        if only not in ("differ", "all"):
            raise ValueError("only must be 'differ' or 'all'")
        offset = _int_param(query, "offset", 0, 10**9)
        limit = _int_param(query, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        total, items = self.store.compare_page(
            run_a, run_b, offset, limit, only_differ=only == "differ"
        )
        return json_response({"total": total, "offset": offset, "limit": limit, "items": items})

    def _image(self, hash_: str) -> Response:
        if not HASH_RE.match(hash_):
            return not_found()
        png = self.store.image_png(hash_)
        if png is None:
            return not_found("no such image")
        return Response(
            200, png, "image/png", {"Cache-Control": "public, max-age=31536000, immutable"}
        )


def filters_from(query: Mapping[str, list[str]]) -> dict[str, Any]:
    """The store filters of a samples request's query string."""
    filters: dict[str, Any] = {}
    for name in ("dataset", "question_type", "agent", "status"):
        value = _str_param(query, name)
        if value is not None:
            filters[name] = value
    kind = _str_param(query, "error_kind")
    if kind is not None:
        filters["error_kind"] = kind
    correct = _str_param(query, "correct")
    if correct is not None:
        if correct.lower() not in ("true", "false", "1", "0"):
            raise ValueError("correct must be true or false")
        filters["correct"] = correct.lower() in ("true", "1")
    return filters


def record_dict(rec: Any) -> dict[str, Any]:
    """One stored sample as the detail endpoint returns it.

    ``options`` lists a multiple-choice question's options (``{"letter", "text"}``, empty for
    an open question), ``chosen_option`` the letter the prediction chooses and
    ``correct_option`` the correct letter (each None where unknown): see :func:`choice_view`.
    """
    trace = rec.trace
    asked = trace.question if trace is not None else None
    return {
        "dataset": rec.dataset,
        "sample_id": rec.sample_id,
        "question_type": rec.question_type,
        "question": rec.question,
        "answers": list(rec.answers),
        "prediction": rec.prediction,
        "score": rec.score,
        "judge": rec.judge,
        "status": rec.status,
        "error": rec.error,
        "latency_s": rec.latency_s,
        "prompt_tokens": rec.prompt_tokens,
        "completion_tokens": rec.completion_tokens,
        "llm_calls": rec.llm_calls,
        **choice_view(asked, rec.question, rec.answers, rec.prediction),
        "trace": trace.to_dict() if trace is not None else None,
    }


def choice_view(
    asked: str | None, question: str, answers: Any, prediction: str | None
) -> dict[str, Any]:
    """The options of a multiple-choice sample, read from the question its system was asked
    (the trace's, where the runner appended them) or else the stored question; the letter
    the prediction chooses and the correct one, read as the multiple-choice metric reads
    them (:mod:`hammr.eval.metrics.choice`), each None when there is none."""
    from hammr.eval.metrics.choice import lettered_options

    texts = lettered_options(asked or "") or lettered_options(question or "")
    if not texts:
        return {"options": [], "chosen_option": None, "correct_option": None}
    from hammr.eval.metrics.choice import correct_letter, extract_choice
    from hammr.eval.types import Sample

    letters = [chr(ord("A") + i) for i in range(len(texts))]
    chosen = extract_choice(prediction, texts).letter if prediction else None
    correct = None
    truth = tuple(str(a) for a in answers or ())
    if truth:
        sample = Sample("", "", question, truth, {}, choices=tuple(texts))
        try:
            correct = correct_letter(sample)
        except ValueError:  # the answer is neither a letter nor an option's text
            correct = None
    return {
        "options": [{"letter": x, "text": t} for x, t in zip(letters, texts, strict=True)],
        "chosen_option": chosen,
        "correct_option": correct,
    }
