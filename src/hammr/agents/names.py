"""The names of HAMMR's two systems (``--system hammr``, ``--system naive``), apart from
:mod:`hammr.agents.system`, which builds them: listing the systems does not import the agent
runtime."""

from __future__ import annotations

HAMMR = "hammr"
"""The dispatcher and its specialists (the paper's method)."""
NAIVE = "naive"
"""One flat ReAct agent holding every specialist's tools and examples (the paper's baseline)."""
