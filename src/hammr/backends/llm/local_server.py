"""llama.cpp's own OpenAI-compatible HTTP server on 127.0.0.1, in a process of its own.

``xllamacpp`` (a dependency of hammr) carries llama.cpp's C++ server: built from
``CommonParams`` with a host and port, ``xllamacpp.Server`` listens until its process ends.
:class:`LocalLlamaServer` starts that server in a child process (``python -m
hammr.backends.llm.local_server ...``) from a GGUF file, the shipped SmolLM2 by default, and
stops it by PID. Tests use it to meet a real server rather than a scripted fake, and the
prefix-reuse benchmark to measure what llama.cpp takes from its KV cache::

    with LocalLlamaServer(n_parallel=2) as server:
        llm = OpenAICompatLLM(server.base_url, "smollm2", api_key_env=None, server="llamacpp")

What it serves: ``/v1/models``, ``/health``, ``/v1/chat/completions`` and ``/v1/completions``
(the ``grammar`` field and ``response_format`` json_schema are enforced; a grammar llama.cpp
cannot parse is HTTP 400; replies carry ``timings`` with ``cache_n``, the prompt tokens taken
from the cache), or, with ``embedding=True`` (mean pooling, one KV cache for all slots: see
:func:`main`), ``/v1/embeddings``.

``n_parallel`` slots serve that many requests at once; llama.cpp divides ``n_ctx`` among
them, so the context is ``per_slot_ctx * n_parallel`` (llama.cpp caps it at the length the
model was trained on, SmolLM2's 8,192, which then shrinks every slot). The process costs
~200 MB with SmolLM2 and loads in about a second on a quiet machine;
:meth:`LocalLlamaServer.start` waits up to ``startup_timeout_s`` for ``/v1/models`` to
answer. The child also ends itself when the process that started it is gone, so a killed
test run leaves no server behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from hammr.backends.llm.base import LLMError, gguf_problem

READY_PREFIX = "listening "
STDERR_TAIL_CHARS = 2000


class LocalServerError(LLMError):
    """The local llama.cpp server did not start (the message carries its stderr's tail)."""


class LocalLlamaServer:
    """llama.cpp's HTTP server for one GGUF model, in a child process on 127.0.0.1.

    - ``model_path``: the GGUF file; None for the shipped SmolLM2-135M-Instruct
      (:func:`hammr.backends.llm.embedded.default_model_path`).
    - ``n_parallel``: slots, i.e. requests worked on at once; ``per_slot_ctx``: each slot's
      context in tokens (the server's ``n_ctx`` is their product).
    - ``embedding``: serve ``/v1/embeddings`` with mean pooling instead of generating text.
    - ``n_threads``: CPU threads for generation and prompt evaluation; 1 by default, as
      the embedded model's (llama.cpp's threads meet, spinning, after every operation, so
      more threads than idle cores slow every reply a hundredfold); None: llama.cpp's
      choice, its count of physical cores.
    - ``port``: 0 lets the server take a free port (read it from :attr:`port` once started).
    - ``alias``: the model name ``/v1/models`` reports (None: the file's path).
    - ``startup_timeout_s``: how long :meth:`start` waits for the server to answer.
    - ``verbose``: llama.cpp's info log (in :attr:`log_path`) instead of errors only.

    :meth:`start` (or ``with``) starts it; :meth:`stop` ends it (SIGTERM, then SIGKILL) and
    waits; :meth:`kill` ends it at once with SIGKILL, as a crash would (for fault tests).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_parallel: int = 2,
        per_slot_ctx: int = 4096,
        embedding: bool = False,
        n_threads: int | None = 1,
        port: int = 0,
        alias: str | None = None,
        startup_timeout_s: float = 120.0,
        verbose: bool = False,
    ) -> None:
        if n_parallel < 1:
            raise ValueError(f"n_parallel must be at least 1, got {n_parallel}")
        if per_slot_ctx < 64:
            raise ValueError(f"per_slot_ctx must be at least 64 tokens, got {per_slot_ctx}")
        if n_threads is not None and n_threads < 1:
            raise ValueError(f"n_threads must be at least 1 (or None), got {n_threads}")
        if not 0 <= port < 65536:
            raise ValueError(f"port must be 0 (a free one) or a TCP port, got {port}")
        if startup_timeout_s <= 0:
            raise ValueError(f"startup_timeout_s must be above 0, got {startup_timeout_s}")
        self._model_path = Path(model_path) if model_path is not None else None
        self.n_parallel = n_parallel
        self.per_slot_ctx = per_slot_ctx
        self.embedding = embedding
        self.n_threads = n_threads
        self.alias = alias
        self.startup_timeout_s = float(startup_timeout_s)
        self.verbose = verbose
        self._port = port
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._url: str | None = None

    # -- what it is ---------------------------------------------------------------------------

    @property
    def model_path(self) -> Path:
        if self._model_path is None:
            from hammr.backends.llm.embedded import default_model_path

            self._model_path = default_model_path()
        return self._model_path

    @property
    def n_ctx(self) -> int:
        """The server's whole context: ``per_slot_ctx * n_parallel``."""
        return self.per_slot_ctx * self.n_parallel

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the server's root (``/health`` lives there)."""
        if self._url is None:
            raise LocalServerError("the local llama.cpp server is not started; call start()")
        return self._url

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what an OpenAI client is pointed at."""
        return self.url + "/v1"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int | None:
        """The server process's id while it was started (None before :meth:`start`)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """The file that gets the server's stdout and stderr (None before :meth:`start`)."""
        return Path(self._workdir.name) / "server.log" if self._workdir is not None else None

    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def slots(self, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """llama.cpp's ``/slots``: one dict per slot, with ``is_processing`` and, while it
        generates, ``next_token[0]["n_decoded"]`` (the tokens it has written so far)."""
        with urllib.request.urlopen(self.url + "/slots", timeout=timeout_s) as resp:
            data = json.loads(resp.read())
        if not isinstance(data, list):
            raise LocalServerError(f"{self.url}/slots sent {str(data)[:200]!r}, not a list")
        return [s for s in data if isinstance(s, dict)]

    def decoding(self) -> int:
        """How many slots are writing a reply now (have decoded at least one token)."""
        count = 0
        for slot in self.slots():
            tokens = slot.get("next_token")
            first = tokens[0] if isinstance(tokens, list) and tokens else {}
            if slot.get("is_processing") and isinstance(first, dict):
                decoded = first.get("n_decoded", 0)
                count += isinstance(decoded, int) and decoded > 0
        return count

    def __repr__(self) -> str:
        where = self._url or "not started"
        kind = "embedding" if self.embedding else f"{self.n_parallel} slots"
        return f"LocalLlamaServer({where}, {kind}, pid={self.pid})"

    # -- starting -----------------------------------------------------------------------------

    def command(self, ready_file: Path) -> list[str]:
        """The child's command line (it writes its address to ``ready_file`` once listening)."""
        cmd = [
            sys.executable,
            "-m",
            "hammr.backends.llm.local_server",
            "--model",
            str(self.model_path),
            "--port",
            str(self._port),
            "--n-parallel",
            str(self.n_parallel),
            "--per-slot-ctx",
            str(self.per_slot_ctx),
            "--ready-file",
            str(ready_file),
            "--parent-pid",
            str(os.getpid()),
        ]
        cmd += ["--threads", str(self.n_threads or 0)]
        if self.embedding:
            cmd.append("--embedding")
        if self.alias:
            cmd += ["--alias", self.alias]
        if self.verbose:
            cmd.append("--verbose")
        return cmd

    def start(self) -> Self:
        """Start the server and wait until ``/v1/models`` answers; raises
        :class:`LocalServerError` (with the tail of the server's stderr) if the process ends
        or does not answer within ``startup_timeout_s``."""
        if self.running():
            return self
        path = self.model_path
        problem = gguf_problem(path)
        if problem is not None:
            raise LocalServerError(problem)
        self._workdir = tempfile.TemporaryDirectory(prefix="hammr-llama-server-")
        ready = Path(self._workdir.name) / "address"
        log_path = self.log_path
        assert log_path is not None
        with log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                self.command(ready),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches the parent only
            )
        deadline = time.monotonic() + self.startup_timeout_s
        try:
            self._url = self._wait_for_address(ready, deadline)
            self._wait_until_serving(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _failed(self, what: str) -> LocalServerError:
        return LocalServerError(
            f"the local llama.cpp server for {self.model_path.name} {what}"
            f"{_tail_note(self.log_path)}"
        )

    def _wait_for_address(self, ready: Path, deadline: float) -> str:
        while True:
            if ready.is_file():
                text = ready.read_text().strip()
                if text:
                    return text.rstrip("/")
            self._check_alive()
            if time.monotonic() > deadline:
                raise self._failed(f"did not start within {self.startup_timeout_s:g} s")
            time.sleep(0.05)

    def _wait_until_serving(self, deadline: float) -> None:
        models = self.base_url + "/models"
        while True:
            self._check_alive()
            try:
                with urllib.request.urlopen(models, timeout=5) as resp:
                    if resp.status == 200:
                        json.loads(resp.read())
                        return
            except (OSError, ValueError):
                pass  # still loading (503), or not listening yet
            if time.monotonic() > deadline:
                raise self._failed(
                    f"at {self.url} did not answer {models} within {self.startup_timeout_s:g} s"
                )
            time.sleep(0.1)

    def _check_alive(self) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            raise self._failed(f"exited with status {code} while starting")

    # -- stopping -----------------------------------------------------------------------------

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the server (SIGTERM, then SIGKILL after ``timeout_s``) and wait for it; does
        nothing when it is not running. Its log is removed."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            workdir.cleanup()

    def kill(self) -> None:
        """End the server at once with SIGKILL, as a crash would (connections in flight are
        cut mid-reply), and wait for it; :attr:`base_url` stays what it was."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(timeout_s=2.0)


def _tail_note(log_path: Path | None) -> str:
    """'; its output ended: ...' with the last lines the server wrote, or ''."""
    if log_path is None or not log_path.is_file():
        return ""
    text = log_path.read_bytes()[-STDERR_TAIL_CHARS:].decode("utf-8", "replace").strip()
    return f"; its output ended:\n{text}" if text else "; it wrote nothing"


# --------------------------------------------------------------------------- the child


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m hammr.backends.llm.local_server",
        description="Serve a GGUF model with llama.cpp's HTTP server on 127.0.0.1 until killed.",
    )
    p.add_argument(
        "--model", default=None, help="the GGUF file (default: the shipped SmolLM2-135M)"
    )
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--n-parallel", type=int, default=2, help="slots (requests at once)")
    p.add_argument("--per-slot-ctx", type=int, default=4096, help="context per slot, tokens")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads (default: 1, as the embedded model: more threads than idle cores "
        "slow every reply; 0: llama.cpp's choice, its count of physical cores)",
    )
    p.add_argument("--embedding", action="store_true", help="serve /v1/embeddings (mean)")
    p.add_argument("--alias", default=None, help="the model name /v1/models reports")
    p.add_argument("--ready-file", default=None, help="write the address here once listening")
    p.add_argument("--parent-pid", type=int, default=None, help="end when this process ends")
    p.add_argument("--verbose", action="store_true", help="llama.cpp's info log")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve until killed (or until ``--parent-pid`` is gone)."""
    args = _parse_args(argv)
    import xllamacpp

    if args.model is None:
        from hammr.backends.llm.embedded import default_model_path

        try:
            args.model = str(default_model_path())
        except LLMError as e:
            print(f"no --model given and {e}", file=sys.stderr)
            return 1
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.n_parallel
    params.n_ctx = args.per_slot_ctx * args.n_parallel
    params.warmup = False
    params.cache_prompt = True
    if args.threads > 0:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    # No busy-wait between ops: on a shared CPU polling threads slow each other down.
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    if args.embedding:
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        # One KV cache for all slots: with one per slot, a request of several inputs gets a
        # wrong row for its second input (xllamacpp 2026.10, n_parallel >= 2: cosine 0.80
        # with the same text embedded alone; 1.0 with a unified cache).
        params.kv_unified = True
    if args.alias:
        params.model_alias = {args.alias}
    if not args.verbose:
        params.verbosity = 0  # llama.cpp's errors only
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as e:
        print(
            f"llama.cpp could not serve {args.model} (n_ctx={params.n_ctx}, "
            f"n_parallel={args.n_parallel}): {e}",
            file=sys.stderr,
        )
        return 1
    address = str(server.listening_address).rstrip("/")
    if args.ready_file:
        tmp = Path(args.ready_file + ".tmp")
        tmp.write_text(address)
        tmp.replace(args.ready_file)
    print(f"{READY_PREFIX}{address}", flush=True)
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if args.parent_pid is not None and not _alive(args.parent_pid, parent):
            return 0


def _alive(pid: int, parent: int) -> bool:
    """Whether process ``pid`` still runs (and, were it our parent, still is)."""
    if parent == pid and os.getppid() != parent:
        return False  # re-parented: the process that started us is gone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    sys.exit(main())
