"""Experiments as data: a paper's table or figure as one file, run and reported by
``hammr experiment``.

* :mod:`hammr.experiments.spec`: the file format and its own checks;
* :mod:`hammr.experiments.validate`: what a file names, checked against hammr (systems,
  suites, settings, cells);
* :mod:`hammr.experiments.runner`: runs what is not yet finished into the run store;
* :mod:`hammr.experiments.report`: the paper's table with ours beside it.

The bundled experiments (one per table or figure of the four papers) are TOML files in
``bundled/``; :func:`load_experiment` takes a bundled name or a path.
"""

from __future__ import annotations

from pathlib import Path

from hammr.experiments.spec import Experiment, ExperimentError, read_experiment

BUNDLED_DIR = Path(__file__).parent / "bundled"


def bundled_names() -> list[str]:
    """The bundled experiments' names, sorted."""
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.toml"))


def load_experiment(name_or_path: str | Path) -> Experiment:
    """A bundled experiment by name, or the experiment file at a path (ExperimentError, one
    line, for an unknown name or a bad file)."""
    text = str(name_or_path)
    if text in bundled_names():
        return read_experiment(BUNDLED_DIR / f"{text}.toml")
    path = Path(text)
    if path.suffix == ".toml" or path.exists():
        return read_experiment(path)
    known = ", ".join(bundled_names()) or "(none)"
    raise ExperimentError(f"no experiment {text!r}: give a bundled name ({known}) or a file path")


__all__ = ["BUNDLED_DIR", "Experiment", "ExperimentError", "bundled_names", "load_experiment"]
