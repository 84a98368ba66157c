"""AVIS (Hu et al. 2023): an LLM planner limited by a transition graph, a reasoner and
backtracking, as a system on hammr's runtime (``--system avis`` and the graph-free baseline
``--system avis-autonomous``).

How an AVIS run reads in the one :class:`hammr.trace.Trace` (agent ``"AVIS"``):

* step 0, ``tool="DECOMPOSE"``: one model call; ``output = {"visual": ..., "knowledge": ...}``
  (the knowledge sub-question holds ``#`` where the visual answer goes).
* step 1, ``tool="CONTEXT"``, ``router="code"`` (no model call): the image's visual context;
  ``output = {"objects": [{"id", "region", "box", "image", "caption", "entities", "text"}],
  "missing": [capability, ...]}``, ``observation`` the context as the planner reads it.
* then one step per action, each with ``state`` set (``START`` or the action whose state
  it is), ``candidates`` (graph[state] minus the actions tried there, and minus object_select
  once every object has been selected), ``tool`` = the
  action's name (``object_select``, ``vqa``, ``web_search``, ...), ``arguments =
  {"query": ...}`` (and ``"object"`` for object_select), ``output`` the action's encoded
  value, ``observation`` what the reasoner read, ``verdict`` (``not_informative`` /
  ``informative`` / ``answerable``), ``extracted`` (the answer the reasoner drew, if any),
  ``reasoner`` (its text), ``backtrack`` and ``calls`` (model calls in the step);
  ``finish`` on the step that ends the run.
* when every path is exhausted or the budget is spent: a last ``tool="ANSWER"`` step,
  ``forced=True``, answering from the best evidence gathered.

Modules: ``graph`` (the transition graph as TOML data), ``image_index`` (local image search),
``context`` (visual context), ``prompts`` / ``planner`` / ``reasoner`` / ``actions``,
``system`` (the System), ``analyses`` (the paper's figures from stored runs, the induced
graph).
"""
