"""``hammr memory``: build, inspect and search memory files made from stored runs."""

from __future__ import annotations

import click


@click.group()
def memory() -> None:
    """Memory from past runs: MuSEAgent's experience bank (and the Reflexion and ExpeL
    baselines' memories)."""


__all__ = ["memory"]
