"""``kueue-es what-if`` and ``kueue-es diff``: questions only a log can answer.

- :mod:`.source`: open a log (a running system, a stopped store, a JSON-lines file) and read it;
- :mod:`.changes`: the CHANGES file of ``what-if`` (Kueue manifests and priority overrides);
- :mod:`.history`: the recorded history a simulation replays (exogenous facts, run times);
- :mod:`.simulate`: the history through the real deciders with a simulated job side and clock;
- :mod:`.report`: per-workload differences and Kueue's perf-style summary, as rich tables;
- :mod:`.diff`: where two logs' decisions first diverge, and why.
"""
