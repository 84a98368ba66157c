"""`hammr report RUN --html FILE`: the viewer as one self-contained file that opens from disk.

The viewer's ``index.html`` with ``style.css`` and ``app.js`` inlined, and the run's data in
``<script type="application/json" id="hammr-data">``::

    {"runs": [run entry as GET /api/runs gives it],
     "samples": {run: [list item (GET .../samples) merged with the full record
                       (GET .../samples/{dataset}/{id}, trace included)]},
     "images": {hash: "data:image/png;base64,..."}}

The front end uses this block instead of fetching when it is present. Nothing in the file
refers to another file or to the network.

When runs hold AVIS traces, an "AVIS analyses" section (:func:`avis_section`: per run the
charts of :mod:`hammr.avis.charts` inlined as data: URIs, and their counts) follows the
viewer's ``<main>``, drawn here on the server side, so that runs under different transition
graphs can be compared in one file.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hammr.eval.store import RunStore, StoreError
from hammr.trace import Trace, image_refs
from hammr.web.api import Api, read_static, record_dict

DATA_ID = "hammr-data"
PAGE = 500

_FALLBACK_INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hammr report</title>
<link rel="stylesheet" href="static/style.css"></head>
<body><div id="app"><noscript>This report needs JavaScript.</noscript></div>
<script src="static/app.js"></script></body></html>
"""


def report_data(store: RunStore, runs: Sequence[str], *, ci_samples: int = 1000) -> dict[str, Any]:
    """The embedded data of a static report of ``runs`` (every sample, traces included)."""
    api = Api(store, ci_samples=ci_samples)
    entries = []
    samples: dict[str, list[dict[str, Any]]] = {}
    hashes: set[str] = set()
    for run in runs:
        if store.run_info(run) is None:
            raise StoreError(store.unknown_run_message(run))
        entries.append(api.run_entry(run))
        items: list[dict[str, Any]] = []
        offset = 0
        while True:
            _, page = store.list_page(run, offset, PAGE)
            records = {
                (r.dataset, r.sample_id): r
                for r in store.records(run, offset, PAGE, traces=True, images=False)
            }
            for item in page:
                rec = records.get((item["dataset"], item["sample_id"]))
                if rec is None:  # changed underneath: fetch it alone
                    rec = store.get(run, item["dataset"], item["sample_id"], images=False)
                full = {**item, **record_dict(rec)}
                hashes.update(image_refs(full["trace"]))
                items.append(full)
            if len(page) < PAGE:
                break
            offset += PAGE
        samples[run] = items
    images: dict[str, str] = {}
    for h in sorted(hashes):
        png = store.image_png(h)
        if png is not None:
            images[h] = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return {"runs": entries, "samples": samples, "images": images}


def _script_safe(text: str) -> str:
    """Text that cannot end or confuse the <script> element it is inlined in."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE).replace("<!--", "<\\!--")


def _json_for_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # In JSON, '\u003c' is '<': the block cannot close early or open a comment.
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _static_text(name: str) -> str | None:
    body = read_static(name)
    return body.decode("utf-8") if body is not None else None


def avis_section(data: dict[str, Any]) -> str:
    """The "AVIS analyses" block of a report's ``data``: per run that holds AVIS traces, its
    charts and counts (every sample, successful or not); ``""`` when no run holds any."""
    from hammr.avis.analyses import analyze_scored, is_avis_document

    found: list[tuple[str, list[tuple[Trace | None, float | None]]]] = []
    for run, items in data.get("samples", {}).items():
        pairs: list[tuple[Trace | None, float | None]] = []
        for item in items:
            doc = item.get("trace")
            trace = Trace.from_dict(doc) if is_avis_document(doc) else None
            # a sample without ground truth (a `hammr ask` trace) is neither right nor wrong
            pairs.append((trace, item.get("score") if item.get("answers") else None))
        if any(t is not None for t, _ in pairs):
            found.append((run, pairs))
    if not found:
        return ""
    from hammr.avis.charts import CSS, chart_pngs, comparison_html, section_html

    parts = [
        '<section id="avis-analyses" class="app">',
        f"<style>{CSS}</style>",
        f'<details open class="avis-analysis"><summary><strong>AVIS analyses</strong> '
        f"({len(found)} run{'s' if len(found) > 1 else ''} with AVIS traces)</summary>",
    ]
    analyses = [analyze_scored(pairs, label=run) for run, pairs in found]
    if len(analyses) > 1:
        parts.append(comparison_html(analyses))
    parts += [section_html(a, chart_pngs(a)) for a in analyses]
    parts += ["</details>", "</section>"]
    return "\n".join(parts)


def render_html(data: dict[str, Any], *, title: str | None = None) -> str:
    """The single-file viewer holding ``data`` (with :func:`avis_section` after its
    ``<main>`` when the runs hold AVIS traces)."""
    page = _static_text("index.html") or _FALLBACK_INDEX
    avis = avis_section(data)
    if avis:
        at = page.lower().find("</main>")
        if at >= 0:
            at += len("</main>")
            page = page[:at] + "\n" + avis + page[at:]
        else:
            page = _insert_before(page, "</body>", avis)
    css = _static_text("style.css") or ""
    js = _static_text("app.js") or ""
    data_block = f'<script type="application/json" id="{DATA_ID}">{_json_for_script(data)}</script>'
    safe_css = re.sub(r"</(style)", r"<\\/\1", css, flags=re.IGNORECASE)
    style_block = f"<style>\n{safe_css}\n</style>"
    app_block = f"<script>\n{_script_safe(js)}\n</script>"

    link_re = re.compile(r"<link\b[^>]*\bhref=[\"']?[^\"'>]*style\.css[^>]*>", re.IGNORECASE)
    page, n_css = link_re.subn(lambda _: style_block, page, count=1)
    page = link_re.sub("", page)
    script_re = re.compile(
        r"<script\b[^>]*\bsrc=[\"']?[^\"'>]*app\.js[^>]*>\s*</script>", re.IGNORECASE
    )
    page, n_js = script_re.subn(lambda _: data_block + "\n" + app_block, page, count=1)
    page = script_re.sub("", page)
    if not n_css:
        page = _insert_before(page, "</head>", style_block)
    if not n_js:
        page = _insert_before(page, "</body>", data_block + "\n" + app_block)
    if title:
        page = re.sub(
            r"<title>.*?</title>",
            lambda _: f"<title>{_html_escape(title)}</title>",
            page,
            count=1,
            flags=re.IGNORECASE | re.DOTALL,
        )
    return page


def _html_escape(text: str) -> str:
    import html

    return html.escape(text)


def _insert_before(page: str, tag: str, block: str) -> str:
    at = page.lower().rfind(tag)
    return page + block if at < 0 else page[:at] + block + "\n" + page[at:]


def write_report(store: RunStore, runs: Iterable[str], out: Any, *, ci_samples: int = 1000) -> int:
    """Write the static report of ``runs`` to the path ``out``; returns its size in bytes.
    OutputError (one line) when ``out`` cannot be written (see :mod:`hammr.output_file`)."""
    from hammr.output_file import output_target, write_output

    output_target(Path(out), "the HTML file")  # refused before the work
    names = list(runs)
    data = report_data(store, names, ci_samples=ci_samples)
    text = render_html(data, title=f"hammr · {', '.join(names)}")
    raw = text.encode("utf-8")
    write_output(out, raw, what="the HTML file")
    return len(raw)
