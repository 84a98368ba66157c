"""MuSEAgent (Wang et al. 2026) and the baselines of its Table 2 as systems on hammr's runtime:
``cot`` (the model answers directly, reasoning step by step), ``react`` (the tool agent),
``reflexion`` and ``expel`` (trajectory-level memories), ``muse`` (the same agent searching an
experience bank, :mod:`hammr.memory`). All share one agent: :func:`hammr.muse.agent.react_agent`.
"""
