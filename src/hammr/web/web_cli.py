"""``hammr view``: the trace and results viewer over the run store (or over one trace file).

Registered by :mod:`hammr.cli`; the pieces it shares with the other commands come from
:mod:`hammr.cli_common`.
"""

from __future__ import annotations

import tempfile
import webbrowser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from hammr.cli_common import fail, open_store, serve_until_stopped, store_option
from hammr.terminal_text import echo

EPILOG_VIEW = """\b
Examples:
  hammr view                                  # every run in the store
  hammr view generic-vqa-hammr-2025-01-31     # open at one run
  hammr view out/trace.json --open            # one trace from `hammr ask --trace`
  hammr view --port 8765 --host 0.0.0.0       # reachable from other machines (careful)

\b
Serves only what is in the run store (and the viewer's own page) on 127.0.0.1 by default;
--port 0 (the default) picks a free port. Stop with Ctrl-C.
"""

TRACE_DATASET = "trace"


def trace_run_name(path: Path) -> str:
    return path.stem or "trace"


def store_from_trace(trace_path: Path, store_path: Path) -> tuple[Any, str]:
    """A run store at ``store_path`` holding the trace file (and the images beside it,
    in ``images/``) as a one-sample run named after the file; returns (store, run name)."""
    from hammr.eval.store import RunStore
    from hammr.eval.types import RunRecord
    from hammr.trace import Trace

    trace = Trace.load(trace_path)
    name = trace_run_name(trace_path)
    store = RunStore(store_path)
    store.open_run(name, suite=TRACE_DATASET, system=trace.agent, config={"trace": str(trace_path)})
    store.add(
        RunRecord(
            run=name,
            sample_id=name,
            dataset=TRACE_DATASET,
            question_type="",
            question=trace.question,
            answers=(),
            prediction=trace.answer,
            score=0.0,
            judge="",
            status=trace.status,
            error=trace.error,
            trace=trace,
            latency_s=trace.latency_s,
            prompt_tokens=trace.prompt_tokens,
            completion_tokens=trace.completion_tokens,
            llm_calls=trace.llm_calls,
        )
    )
    return store, name


def run_url(base: str, run: str | None) -> str:
    return base if run is None else f"{base}#/run/{quote(run, safe='')}"


def serve(store: Any, *, host: str, port: int, run: str | None, open_browser: bool) -> None:
    """Serve ``store`` until Ctrl-C."""
    from hammr.web.server import ViewerServer, is_loopback

    if not is_loopback(host):
        echo(
            f"hammr: warning: serving on {host}, not a loopback address: anyone who can reach "
            "this machine can read every run in the store",
            err=True,
        )
    try:
        server = ViewerServer(store, host, port)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e}")
    url = run_url(server.url, run)
    echo(f"hammr view: serving {store.path} at {url}  (Ctrl-C to stop)", err=True)
    echo(url)
    if open_browser:
        webbrowser.open(url)
    try:
        serve_until_stopped(server)
    finally:
        server.server_close()
    echo("stopped", err=True)


@click.command("view", epilog=EPILOG_VIEW)
@click.argument("target", required=False)
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: a free one; the URL is printed).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the URL in a web browser.")
def view_cmd(
    target: str | None, store_path: Path | None, host: str, port: int, open_browser: bool
) -> None:
    """Browse runs, compare two, filter samples and read one sample's trace in a browser.

    TARGET is a run's name (open at that run) or a trace file written by `hammr ask --trace`
    (viewed alone, from a temporary store); without it, every run in the store.
    """
    from hammr.eval.store import StoreError

    if target is not None and target.endswith(".json") and Path(target).is_file():
        with tempfile.TemporaryDirectory(prefix="hammr-view-") as tmp:
            try:
                store, name = store_from_trace(Path(target), Path(tmp) / "trace.sqlite")
            except (ValueError, OSError, TypeError, StoreError) as e:
                fail(f"cannot read trace {target}: {e}")
            try:
                serve(store, host=host, port=port, run=name, open_browser=open_browser)
            finally:
                store.close()
        return
    store = open_store(store_path, create=False)
    if store is None:
        from hammr.eval.store import default_store_path

        where = store_path or default_store_path()
        if target is not None and target.endswith(".json"):
            fail(f"trace file not found: {target}")
        fail(f"no runs in {where} (start one with `hammr eval`)")
    try:
        if target is not None and store.run_info(target) is None:
            if target.endswith(".json"):
                fail(f"trace file not found: {target}")
            fail(store.unknown_run_message(target))
        serve(store, host=host, port=port, run=target, open_browser=open_browser)
    finally:
        store.close()


__all__ = ["store_from_trace", "view_cmd"]
