"""``hammr explain``: grounded explanations of stored runs, scored against MEVQA's references.

Every stored sample with a trace gets an explanation: a MulProg run's own (the trace's
``EXPLAIN`` step), else one built from the trace (every step whose output holds boxes is an
object it may name; :mod:`hammr.programs.explain`), by the template or, with ``--llm``, by the
configured LLM (the template when the LLM's text cannot be grounded).

With ``--suite``/``--data-dir`` naming a suite whose samples carry a reference explanation
(``meta["reference"]``, the ``mevqa`` adapter), the explanations of the run's samples that
have one are scored as the MEAgent paper scores them: detection (its Eq. 2), REX grounding
(its Eq. 1) and the language metrics (BLEU-1..4, METEOR, ROUGE-L, CIDEr, SPICE). Samples are
matched by (dataset, sample id) as the store keys them (:func:`hammr.eval.runner.sample_key`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any, Literal

import click

from hammr.cli_common import config_option, fail, open_store, store_option, warn_unfinished
from hammr.output_file import OutputError, output_target, write_output
from hammr.terminal_text import echo, safe_console, safe_markup, safe_text

if TYPE_CHECKING:
    from hammr.backends.llm.base import LLM
    from hammr.eval.metrics.explanation import ExplanationScores, GroundedExplanation
    from hammr.eval.types import RunRecord
    from hammr.trace import Trace

EPILOG_EXPLAIN = """\
\b
Examples:
  hammr explain mevqa-mulprog-2026-11-22 --suite mevqa --data-dir ~/data
  hammr explain generic-vqa-hammr-2026-11-22 --out explanations.jsonl
  hammr explain RUN --llm --suite mevqa --data-dir DIR --eq2-padding --no-language

\b
Sources: 'run' (a MulProg run's own EXPLAIN step), 'template' (built from the trace's boxes),
'llm' (--llm: the configured LLM, grounded on the trace's boxes), 'template (llm fallback)'
(the LLM's text named no grounded object, or the LLM failed).
Scores (x100, as the official scripts print them) are computed over the run's samples that
have a reference: detection is the MEAgent paper's Eq. 2 as its official code computes it
(--official-padding, the default) or as the paper writes it (--eq2-padding); grounding is
REX's; language metrics need Java and pycocoevalcap (pip install 'hammr[explain]').
Answer accuracy of MEVQA samples is recomputed from the stored answers: 'answer accuracy' as
the official evaluation.py compares them (exact string equality), 'answer accuracy
(normalised)' with hammr's exact match (case, punctuation, articles, number words); other
runs show their stored score (`hammr report`).
"""

Source = Literal["run", "template", "llm", "template (llm fallback)"]
EXPLAIN_TOOL = "EXPLAIN"
MEVQA_DATASET = "mevqa"
"""The adapter whose samples get the official and the normalised answer accuracy."""
LANGUAGE_ROWS = (
    ("Bleu_1", "BLEU-1"),
    ("Bleu_2", "BLEU-2"),
    ("Bleu_3", "BLEU-3"),
    ("Bleu_4", "BLEU-4"),
    ("METEOR", "METEOR"),
    ("ROUGE_L", "ROUGE-L"),
    ("CIDEr", "CIDEr"),
    ("SPICE", "SPICE"),
)


# --- explanations of stored samples -----------------------------------------------------------


def stored_explanation(trace: Trace) -> GroundedExplanation | None:
    """The explanation a run wrote itself: the output of the trace's last ``EXPLAIN`` step
    (``{"text": ..., "boxes": [{"name": ..., "boxes": [{"$box": [x, y, w, h]}, ...]}]}``, as
    :func:`hammr.programs.system.explanation_output` writes it); None when there is none."""
    from hammr.eval.metrics.explanation import BoxRef, GroundedExplanation
    from hammr.programs.explain import decoded_boxes

    for step in reversed(trace.steps):
        if step.tool != EXPLAIN_TOOL:
            continue
        out = step.output
        if not isinstance(out, dict) or not isinstance(out.get("text"), str):
            return None
        refs = [
            BoxRef(str(r.get("name", "")), tuple(decoded_boxes(r.get("boxes"))))
            for r in out.get("boxes") or ()
            if isinstance(r, dict)
        ]
        return GroundedExplanation(out["text"], refs)
    return None


def root_image_size(trace: Trace) -> tuple[int, int] | None:
    """(width, height) of the run's first input image, as the trace records it."""
    for value in trace.inputs.values():
        if isinstance(value, dict) and "$image" in value:
            size = value.get("size")
            if isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) for v in size):
                return (size[0], size[1])
    return None


@dataclass
class Explained:
    """One stored sample and its explanation (None when the sample has no trace)."""

    record: RunRecord
    explanation: GroundedExplanation | None
    source: Source | None
    fallback_reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.record.dataset, self.record.sample_id)


def answer_of(record: RunRecord) -> str:
    if record.prediction is not None:
        return record.prediction
    trace = record.trace
    return trace.answer if trace is not None and trace.answer else "unknown"


async def explain_records(records: Sequence[RunRecord], llm: LLM | None) -> list[Explained]:
    """An explanation per record: the run's own, else the LLM's (when ``llm`` is given),
    else the template's."""
    from hammr.backends.llm.base import LLMError
    from hammr.programs.explain import ExplanationError, llm_explanation, template_explanation

    out: list[Explained] = []
    for rec in records:
        trace = rec.trace
        if trace is None:
            out.append(Explained(rec, None, None))
            continue
        own = stored_explanation(trace)
        if own is not None:
            out.append(Explained(rec, own, "run"))
            continue
        answer = answer_of(rec)
        if llm is None:
            out.append(Explained(rec, template_explanation(trace, answer), "template"))
            continue
        try:
            written = await llm_explanation(trace, rec.question, answer, llm)
        except (ExplanationError, LLMError) as e:
            fallback = template_explanation(trace, answer)
            out.append(Explained(rec, fallback, "template (llm fallback)", str(e)))
        else:
            out.append(Explained(rec, written, "llm"))
    return out


async def explain_with_llm(records: Sequence[RunRecord], llm: LLM | None) -> list[Explained]:
    try:
        return await explain_records(records, llm)
    finally:
        closer = getattr(llm, "aclose", None)
        if closer is not None:
            await closer()


# --- references and scores ----------------------------------------------------------------------


def suite_references(
    suite_name: str, data_dir: Path
) -> tuple[str, dict[tuple[str, str], GroundedExplanation]]:
    """(the suite's name, (dataset, sample id) -> reference explanation) for the suite's
    samples that carry one; :class:`~hammr.eval.suites.SuiteError` when it cannot load."""
    from hammr.eval.metrics.explanation import GroundedExplanation
    from hammr.eval.runner import sample_key
    from hammr.eval.suites import load_suite

    suite = load_suite(suite_name)
    refs: dict[tuple[str, str], GroundedExplanation] = {}
    for entry, sample in suite.samples(data_dir):
        ref = sample.meta.get("reference")
        if isinstance(ref, GroundedExplanation):
            refs[sample_key(entry, sample)] = ref
    return suite.name, refs


@dataclass
class RunScores:
    scored: int
    detection: float | None = None
    grounding: float | None = None
    language: dict[str, float] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    language_error: str = ""
    """Why no language metric could run (no Java, no pycocoevalcap); '' when they ran."""


def score_run(
    explained: Sequence[Explained],
    references: Mapping[tuple[str, str], GroundedExplanation],
    *,
    official_padding: bool,
    language: bool,
) -> RunScores:
    """Scores of one run's explanations against ``references`` (the samples that have one;
    a sample stored without a trace counts as an empty explanation); sets each
    :attr:`Explained.scores`. Language metrics that cannot run go to ``unavailable``."""
    from hammr.eval.metrics.explanation import (
        EMPTY,
        LANGUAGE_METRICS,
        LanguageMetricError,
        detection_score,
        grounding_score,
        score_explanations,
    )

    matched = [e for e in explained if e.key in references]
    if not matched:
        return RunScores(0)
    refs = {f"{e.key[0]}/{e.key[1]}": references[e.key] for e in matched}
    preds = {f"{e.key[0]}/{e.key[1]}": e.explanation or EMPTY for e in matched}
    sizes: dict[str, tuple[int, int]] = {}
    for e in matched:
        size = root_image_size(e.record.trace) if e.record.trace is not None else None
        if size is not None:
            sizes[f"{e.key[0]}/{e.key[1]}"] = size
    for e in matched:
        k = f"{e.key[0]}/{e.key[1]}"
        e.scores = {
            "detection": detection_score(refs[k], preds[k], official_padding=official_padding),
            "grounding": grounding_score(refs[k], preds[k], image_size=sizes.get(k)),
        }
    visual = score_explanations(refs, preds, official_padding=official_padding, image_sizes=sizes)
    result = RunScores(len(matched), visual.detection, visual.grounding)
    if not language:
        return result
    corpus: ExplanationScores
    try:
        corpus = score_explanations(
            refs,
            preds,
            language=LANGUAGE_METRICS,
            official_padding=official_padding,
            image_sizes=sizes,
        )
    except LanguageMetricError as e:
        result.unavailable = {key: str(e) for key, _ in LANGUAGE_ROWS}
        result.language_error = str(e)
        return result
    if corpus.language is not None:
        result.language = dict(corpus.language.values)
        result.unavailable = dict(corpus.language.unavailable)
    return result


# --- output ---------------------------------------------------------------------------------------


def jsonl_row(e: Explained) -> dict[str, Any]:
    """One line of --out: the sample, its explanation and boxes (xyxy, as MEVQA writes them)."""
    from hammr.eval.metrics.explanation import xyxy

    exp = e.explanation
    row: dict[str, Any] = {
        "run": e.record.run,
        "dataset": e.record.dataset,
        "sample_id": e.record.sample_id,
        "question": e.record.question,
        "answer": e.record.prediction,
        "source": e.source,
        "explanation": exp.text if exp is not None else None,
        "boxes": [
            {"name": r.name, "boxes": [list(xyxy(b)) for b in r.boxes]}
            for r in (exp.boxes if exp is not None else ())
        ],
    }
    if e.fallback_reason:
        row["fallback_reason"] = e.fallback_reason
    if e.scores:
        row["scores"] = dict(e.scores)
    return row


def answer_accuracies(explained: Sequence[Explained]) -> tuple[float | None, float | None]:
    """(official, normalised) answer accuracy over the MEVQA samples (dataset ``mevqa``) of
    ``explained``, 0..1, recomputed from each stored prediction and answer: official is
    FS-MEVQA's ``evaluation.py`` (exact string equality), normalised hammr's exact match
    (:mod:`hammr.eval.metrics.mevqa`). (None, None) when there is no MEVQA sample: the table
    then shows the run's stored score."""
    from hammr.eval.metrics.mevqa import (
        accuracy,
        normalised_answer_correct,
        official_answer_correct,
    )

    pairs = [
        (e.record.prediction, e.record.answers[0])
        for e in explained
        if e.record.dataset == MEVQA_DATASET and e.record.answers
    ]
    if not pairs:
        return None, None
    return (
        accuracy(official_answer_correct(p, a) for p, a in pairs),
        accuracy(normalised_answer_correct(p, a) for p, a in pairs),
    )


def padding_label(official_padding: bool) -> str:
    return "official padding" if official_padding else "the paper's Eq. 2 padding"


def print_table(
    run: str,
    explained: Sequence[Explained],
    scores: RunScores | None,
    *,
    official_padding: bool,
) -> None:
    from rich.table import Table

    done = [e for e in explained if e.explanation is not None]
    count = {s: sum(1 for e in done if e.source == s) for s in ("run", "llm")}
    fallbacks = sum(1 for e in done if e.source == "template (llm fallback)")
    built = len(done) - count["run"]
    title = f"run {safe_markup(run)}"  # a stored name: text, not markup
    table = Table(title=title, title_justify="left", show_header=False, box=None)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("samples explained", str(len(done)))
    if len(done) < len(explained):
        table.add_row("stored without a trace", str(len(explained) - len(done)))
    table.add_row("  from the run (EXPLAIN)", str(count["run"]))
    table.add_row("  built from traces", str(built))
    table.add_row("    by the LLM", str(count["llm"]))
    table.add_row("    LLM fallbacks to the template", str(fallbacks))
    official, normalised = answer_accuracies(explained)
    if official is not None and normalised is not None:
        table.add_row("answer accuracy", f"{100 * official:.1f}")
        table.add_row("answer accuracy (normalised)", f"{100 * normalised:.1f}")
    elif explained:
        accuracy = fmean(e.record.score for e in explained)
        table.add_row("answer accuracy (the run's score)", f"{100 * accuracy:.1f}")
    if scores is not None and scores.scored:
        table.add_row("samples scored (with a reference)", str(scores.scored))
        assert scores.detection is not None and scores.grounding is not None
        table.add_row(
            f"detection (Eq. 2, {padding_label(official_padding)})",
            f"{100 * scores.detection:.1f}",
        )
        table.add_row("grounding (REX)", f"{100 * scores.grounding:.1f}")
        for key, label in LANGUAGE_ROWS:
            if key in scores.language:
                table.add_row(label, f"{100 * scores.language[key]:.1f}")
            elif key in scores.unavailable:
                table.add_row(label, "unavailable")
    safe_console(highlight=False).print(table)


# --- the command ----------------------------------------------------------------------------------


@click.command("explain", epilog=EPILOG_EXPLAIN)
@click.argument("runs", nargs=-1, required=True)
@store_option
@config_option
@click.option(
    "--suite",
    "suite_name",
    help="A suite whose samples carry reference explanations (e.g. mevqa): score against them.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --suite: the folder holding its dataset files.",
)
@click.option(
    "--llm/--template",
    "use_llm",
    default=False,
    help="For runs without their own explanation: ask the configured LLM (grounded on the "
    "trace's boxes; the template when that fails), or write the template's (default).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    help="Write one JSON line per sample: run, dataset, sample_id, question, answer, source, "
    "explanation, boxes (per [BOX]: name and [x1, y1, x2, y2] boxes), scores when scored.",
)
@click.option(
    "--official-padding/--eq2-padding",
    default=True,
    help="Detection score: pad as the official code does (default) or as the paper's Eq. 2 "
    "writes it (they differ when a reference names two or more objects).",
)
@click.option(
    "--language/--no-language",
    default=True,
    help="Compute the language metrics (they need Java); --no-language scores only boxes.",
)
def explain_cmd(
    runs: tuple[str, ...],
    store_path: Path | None,
    config_path: Path | None,
    suite_name: str | None,
    data_dir: Path | None,
    use_llm: bool,
    out_path: Path | None,
    official_padding: bool,
    language: bool,
) -> None:
    """Grounded explanations of stored runs ([BOX] tokens linked to the boxes the run found),
    scored against a suite's reference explanations when one is given (MEVQA)."""
    from hammr.backends.llm.base import run_sync
    from hammr.eval.store import StoreError, default_store_path
    from hammr.eval.suites import SuiteError

    if (suite_name is None) != (data_dir is None):
        fail("--suite and --data-dir go together: the suite's references are read from the folder")
    store = open_store(store_path, create=False)
    if store is None:
        where = store_path or default_store_path()
        fail(f"no run named {runs[0]!r}: there is no run store at {where} yet")
    try:
        by_run: dict[str, list[RunRecord]] = {}
        names = store.run_names()
        for run in runs:
            if run not in names:
                fail(f"no run named {run!r}; `hammr runs` lists them")
            by_run[run] = store.records(run, limit=None)
        warn_unfinished(store, runs, store_path)
    except StoreError as e:
        fail(str(e))
    finally:
        store.close()

    references: dict[tuple[str, str], GroundedExplanation] = {}
    label = ""
    if suite_name is not None and data_dir is not None:
        try:
            label, references = suite_references(suite_name, data_dir)
        except SuiteError as e:
            fail(str(e))
        if not references:
            fail(
                f"suite {label!r} has no reference explanations to score against (only the "
                "mevqa adapter's samples carry them); leave out --suite to only explain"
            )

    llm = None
    needs_llm = use_llm and any(
        r.trace is not None and stored_explanation(r.trace) is None
        for recs in by_run.values()
        for r in recs
    )
    if needs_llm:
        from hammr.config import ConfigError, load_config
        from hammr.factory import build_llm

        try:
            llm = build_llm(load_config(config_path))
        except ConfigError as e:
            fail(str(e))

    rows: list[str] | None = None
    if out_path is not None:
        try:  # refused before the work; written once it is done
            output_target(out_path, "the .jsonl file")
        except OutputError as e:
            fail(str(e))
        rows = []

    flat = [r for recs in by_run.values() for r in recs]
    explained_all = run_sync(explain_with_llm(flat, llm))
    for run in runs:
        explained = [e for e in explained_all if e.record.run == run]
        scores = None
        if references:
            scores = score_run(
                explained, references, official_padding=official_padding, language=language
            )
        print_table(run, explained, scores, official_padding=official_padding)
        if not references:
            echo(
                "nothing scored: no --suite/--data-dir with reference explanations was "
                "given (MEVQA's carry them)"
            )
        elif scores is not None and not scores.scored:
            echo(
                f"nothing scored: none of the run's {len(explained)} samples has a "
                f"reference in suite {label!r} (matched by dataset and sample id)"
            )
        elif scores is not None:
            if scores.language_error:
                echo(
                    "hammr: warning: language metrics unavailable (detection and grounding "
                    f"are shown): {scores.language_error}",
                    err=True,
                )
            reasons = sorted(set(scores.unavailable.values()) - {scores.language_error})
            for reason in reasons:
                which = [m for m, r in scores.unavailable.items() if r == reason]
                echo(f"unavailable: {', '.join(which)}: {reason}")
            if not language:
                echo("language metrics not computed (--no-language)")
        fell_back = [x for x in explained if x.fallback_reason]
        if fell_back:
            first = safe_text(str(fell_back[0].fallback_reason))  # may quote the model
            echo(
                f"hammr: warning: {len(fell_back)} LLM explanation(s) replaced by the "
                f"template; first: {first}",
                err=True,
            )
        if rows is not None:
            rows += [
                json.dumps(jsonl_row(x), ensure_ascii=False) + "\n"
                for x in explained
                if x.explanation is not None
            ]
    if out_path is not None and rows is not None:
        try:
            write_output(out_path, "".join(rows), what="the .jsonl file")
        except OutputError as e:
            fail(str(e))
        echo(f"wrote {out_path}", err=True)


__all__ = ["explain_cmd", "explain_records", "score_run", "stored_explanation"]
