"""Language metrics of explanations: BLEU-1..4, METEOR, ROUGE-L, CIDEr and SPICE, computed by
the ``pycocoevalcap`` package (``pip install 'hammr[explain]'``) the way the MEAgent authors'
``coco_eval`` uses it (github.com/LivXue/FS-MEVQA at commit
c7edea2a264e025b4ab6bfcaabb932bdc95943bb, ``metrics/language_metrics.py``): every text goes
through the PTB tokenizer (``PTBTokenizer().tokenize({id: [{'caption': text}]})``), then
``Bleu(4)``, ``Meteor()``, ``Rouge()``, ``Cider()`` and ``Spice()`` each score the tokenized
references against the tokenized predictions with ``compute_score(gts, res)``.

``[BOX]`` is kept as the official code keeps it: the explanation text goes to the tokenizer as
it is, and the PTB tokenizer writes ``[BOX]`` as the three tokens ``-lsb- box -rsb-`` (its
punctuation filter drops '.', ',' and the like, not brackets). So a ``[BOX]`` in the right place
counts as three matching tokens, which is how the paper's scores were computed.

Values are pycocoevalcap's own (BLEU, METEOR, ROUGE-L, SPICE in 0..1, CIDEr in 0..10); the
official script prints them x100 (:meth:`LanguageScores.percent`).

Java: the tokenizer, METEOR and SPICE are Java programs; without ``java`` on PATH every metric
raises :class:`JavaMissingError` (Debian: ``apt-get install -y default-jre-headless``).

SPICE: pycocoevalcap downloads Stanford CoreNLP 3.6.0 the first time ``Spice()`` is built.
That download is never started here: SPICE runs only when both CoreNLP jars are already in
pycocoevalcap's ``spice/lib`` folder, or in a folder named by ``corenlp_dir`` /
``$HAMMR_CORENLP_DIR`` (they are then linked into ``spice/lib``). Otherwise, or when the SPICE
jar fails (SPICE 1.0 needs Java 8; newer Java stops it with InaccessibleObjectException), SPICE
is reported in :attr:`LanguageScores.unavailable` with the reason, never as a number.

Console noise: the tokenizer's jar reports "PTBTokenizer tokenized N tokens ..." on the stderr
it inherits, and SPICE's jar writes its progress to the stdout and stderr it inherits. Those
runs go through :func:`java_quiet`, which points file descriptors 1 and 2 at a temporary file
while the jar starts and runs, so none of it reaches the user's terminal (``hammr explain``,
``hammr experiment report``); when the call fails, what the jar wrote goes to stderr after all.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hammr.terminal_text import echo

LANGUAGE_METRICS: tuple[str, ...] = ("BLEU", "METEOR", "ROUGE_L", "CIDEr", "SPICE")
"""Metric names :func:`language_scores` takes; BLEU gives Bleu_1 .. Bleu_4."""
CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
"""What SPICE needs in ``spice/lib`` (from stanford-corenlp-full-2015-12-09.zip)."""
CORENLP_ENV = "HAMMR_CORENLP_DIR"
JAVA_HINT = "install Java (Debian/Ubuntu: apt-get install -y default-jre-headless)"
PACKAGE_HINT = "install pycocoevalcap: pip install 'hammr[explain]'"


class LanguageMetricError(RuntimeError):
    """A language metric cannot run here (no pycocoevalcap, no Java)."""


class JavaMissingError(LanguageMetricError):
    """No ``java`` on PATH: the PTB tokenizer, METEOR and SPICE cannot run."""


@dataclass(frozen=True)
class LanguageScores:
    """Corpus scores by pycocoevalcap name (Bleu_1..Bleu_4, METEOR, ROUGE_L, CIDEr, SPICE),
    and the metrics that could not run with the reason for each."""

    values: dict[str, float]
    unavailable: dict[str, str] = field(default_factory=dict)

    def percent(self) -> dict[str, float]:
        """The values x100, as the official ``coco_eval`` reports them."""
        return {k: v * 100 for k, v in self.values.items()}


def package_dir() -> Path | None:
    """Where pycocoevalcap is installed, or None."""
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def corenlp_folder(corenlp_dir: str | Path | None = None) -> Path | None:
    """``corenlp_dir`` (else ``$HAMMR_CORENLP_DIR``) when it holds both CoreNLP jars."""
    chosen = corenlp_dir if corenlp_dir is not None else os.environ.get(CORENLP_ENV)
    if not chosen:
        return None
    folder = Path(chosen).expanduser()
    return folder if all((folder / jar).is_file() for jar in CORENLP_JARS) else None


def spice_unavailable(corenlp_dir: str | Path | None = None) -> str | None:
    """None when SPICE can run offline here, else one line saying why not and what to do.
    Looks at files only; starts nothing and downloads nothing."""
    if shutil.which("java") is None:
        return f"SPICE needs Java: {JAVA_HINT}"
    root = package_dir()
    if root is None:
        return f"SPICE needs pycocoevalcap: {PACKAGE_HINT}"
    lib = root / "spice" / "lib"
    if all((lib / jar).is_file() for jar in CORENLP_JARS):
        return None
    if corenlp_folder(corenlp_dir) is not None:
        return None
    return (
        f"SPICE needs Stanford CoreNLP 3.6.0, which pycocoevalcap would download: put "
        f"{' and '.join(CORENLP_JARS)} (from stanford-corenlp-full-2015-12-09.zip) in {lib}, "
        f"or in a folder named by ${CORENLP_ENV}"
    )


def link_corenlp(source: Path, lib: Path) -> None:
    """Make the CoreNLP jars of ``source`` visible in ``spice/lib`` (a link, else a copy): the
    SPICE jar finds them only there."""
    for jar in CORENLP_JARS:
        target = lib / jar
        if target.is_file():
            continue
        try:
            target.symlink_to((source / jar).resolve())
        except OSError:
            shutil.copyfile(source / jar, target)


def require_java() -> None:
    if shutil.which("java") is None:
        raise JavaMissingError(
            "the language metrics run Java (the PTB tokenizer, METEOR, SPICE) and no `java` "
            f"is on PATH: {JAVA_HINT}"
        )


_quiet_lock = threading.Lock()


@contextlib.contextmanager
def java_quiet(*, echo_on_error: bool = True) -> Iterator[list[str]]:
    """Point file descriptors 1 and 2 at a temporary file for the block (a child process
    started inside inherits them), then restore them; yields a list that gets what was
    written. When the block raises, that text is written to stderr before the exception goes
    on (``echo_on_error``; off where the caller reports it itself), so a real error stays
    visible. Process-wide (file descriptors are), hence the lock; where a descriptor cannot
    be duplicated (closed), the block runs without capture."""
    captured: list[str] = []
    with _quiet_lock, tempfile.TemporaryFile() as tmp:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        saved: dict[int, int] = {}
        failed = True
        try:
            for fd in (1, 2):
                try:
                    saved[fd] = os.dup(fd)
                except OSError:
                    continue
                os.dup2(tmp.fileno(), fd)
            yield captured
            failed = False
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            tmp.seek(0)
            captured.append(tmp.read().decode("utf-8", "replace"))
            if failed and echo_on_error and captured[0].strip():
                with contextlib.suppress(Exception):
                    echo(captured[0], err=True, nl=False)


def tokenized(captions: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """PTB-tokenized captions by id (every id kept, in order); the jar's console report is
    kept off the terminal (:func:`java_quiet`)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    with java_quiet():
        out: dict[str, list[str]] = PTBTokenizer().tokenize(
            {k: [{"caption": c} for c in v] for k, v in captions.items()}
        )
    return {k: list(out.get(k, [""] * len(v))) for k, v in captions.items()}


def meteor_score(gts: dict[str, list[str]], res: dict[str, list[str]]) -> float:
    from pycocoevalcap.meteor.meteor import Meteor

    meteor = Meteor()
    try:
        score, _ = meteor.compute_score(gts, res)
    finally:
        # Meteor.__del__ waits on this lock; a failed compute_score leaves it held.
        if meteor.lock.locked():
            meteor.lock.release()
    return float(score)


def spice_score(
    gts: dict[str, list[str]], res: dict[str, list[str]], corenlp_dir: str | Path | None
) -> tuple[float | None, str | None]:
    """(score, None), or (None, why it could not run)."""
    reason = spice_unavailable(corenlp_dir)
    if reason is not None:
        return None, reason
    root = package_dir()
    source = corenlp_folder(corenlp_dir)
    if root is not None and source is not None:
        link_corenlp(source, root / "spice" / "lib")
    from pycocoevalcap.spice.spice import Spice

    captured: list[str] = []
    try:
        with java_quiet(echo_on_error=False) as captured:
            score, _ = Spice().compute_score(gts, res)
    except (subprocess.CalledProcessError, OSError, ValueError) as e:
        said = [ln.strip() for ln in "".join(captured).splitlines() if ln.strip()]
        last = f"; its last line: {said[-1]}" if said else ""
        return None, (
            f"SPICE's jar failed ({e}{last}); SPICE 1.0 needs Java 8 (newer Java stops it "
            "with InaccessibleObjectException)"
        )
    return float(score), None


def language_scores(
    references: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    metrics: Sequence[str] = LANGUAGE_METRICS,
    *,
    corenlp_dir: str | Path | None = None,
) -> LanguageScores:
    """pycocoevalcap's corpus scores of ``predictions`` (id -> text) against ``references``
    (id -> one or more texts), for ``metrics`` among :data:`LANGUAGE_METRICS`.

    The ids of both must agree (the official ``coco_eval`` asserts it). Raises
    :class:`JavaMissingError` without Java and :class:`LanguageMetricError` without
    pycocoevalcap; SPICE that cannot run is listed in ``unavailable`` (see the module notes).
    """
    unknown = [m for m in metrics if m not in LANGUAGE_METRICS]
    if unknown:
        raise ValueError(f"unknown language metric(s) {unknown}; known: {LANGUAGE_METRICS}")
    if set(references) != set(predictions):
        only_ref = sorted(set(references) - set(predictions))[:5]
        only_pred = sorted(set(predictions) - set(references))[:5]
        raise ValueError(
            f"references and predictions have different ids (only in references: {only_ref}, "
            f"only in predictions: {only_pred})"
        )
    if not references:
        raise ValueError("no explanations to score")
    empty = [k for k, v in references.items() if len(v) == 0]
    if empty:
        raise ValueError(f"ids with no reference text: {sorted(empty)[:5]}")
    require_java()
    if package_dir() is None:
        raise LanguageMetricError(f"the language metrics need pycocoevalcap: {PACKAGE_HINT}")

    ids = list(references)
    gts = tokenized({k: list(references[k]) for k in ids})
    res = tokenized({k: [predictions[k]] for k in ids})

    values: dict[str, float] = {}
    unavailable: dict[str, str] = {}
    if "BLEU" in metrics:
        from pycocoevalcap.bleu.bleu import Bleu

        bleu: Any
        bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
        for n, value in enumerate(bleu, start=1):
            values[f"Bleu_{n}"] = float(value)
    if "METEOR" in metrics:
        values["METEOR"] = meteor_score(gts, res)
    if "ROUGE_L" in metrics:
        from pycocoevalcap.rouge.rouge import Rouge

        values["ROUGE_L"] = float(Rouge().compute_score(gts, res)[0])
    if "CIDEr" in metrics:
        from pycocoevalcap.cider.cider import Cider

        values["CIDEr"] = float(Cider().compute_score(gts, res)[0])
    if "SPICE" in metrics:
        spice, reason = spice_score(gts, res, corenlp_dir)
        if spice is not None:
            values["SPICE"] = spice
        else:
            unavailable["SPICE"] = reason or "SPICE could not run"
    return LanguageScores(values, unavailable)
