"""preemption_test.go 'Should issue preemption exactly once for each preempted workload', on the core engine's log.

Eight 500m workloads fill a 4-CPU ClusterQueue; a 4-CPU workload of higher priority preempts all eight, and once it
finishes and they are back, a second one preempts them again. Kueue's test checks the eight are evicted each
time and that the preemptions are issued once (its Events collapse into one series); here the log shows one
EvictionRequested per victim per preemptor, each naming that preemptor. The dispatcher folds the eight
PreemptedWorkload Events on each preemptor into one series, as Kueue's recorder does
(tests/unit/test_event_series.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from kueue_es.events import types
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario

SCENARIO = Path(__file__).parents[1] / "scenarios" / "preemption" / "preemption-issued-once-per-victim.yaml"


def test_each_victim_is_evicted_once_per_preemptor() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    evictions = [e for _, e in run.log if isinstance(e, types.EvictionRequested)]
    assert all(e.reason == "Preempted" for e in evictions)
    by_victim = Counter(e.workload.name for e in evictions)
    assert by_victim == Counter({f"low-priority-wl-{i}": 2 for i in range(1, 9)})
    assert Counter(e.preemptor.name for e in evictions if e.preemptor is not None) == Counter(
        {"first-high-prio": 8, "second-high-prio": 8}
    )
    assert run.state.workloads["default/second-high-prio"].admitted
