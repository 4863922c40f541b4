"""A PodsReady recovery timeout evicts a TAS workload whatever its unhealthy node.

Kueue's tas_test.go 'should evict admitted workload with UnhealthyNodes when PodsReady recovery timeout is
exceeded' waits for the Evicted condition, reason PodsReadyTimeout; the scenario's end state cannot show it
(the workload is admitted again after its 1s backoff), so this reads the eviction off the run's log.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario

SCENARIO = Path(__file__).parents[1] / "scenarios/tas/unhealthy-node-workload-evicted-by-recovery-timeout.yaml"


def test_the_node_failure_comes_first_then_the_recovery_timeout_evicts() -> None:
    events = [event for _, event in run_scenario(load_scenario(SCENARIO)).log]
    placements = [e for e in events if isinstance(e, types.TopologyAssigned) and e.workload.key == "default/wl1"]
    evictions = [e for e in events if isinstance(e, types.EvictionRequested) and e.workload.key == "default/wl1"]
    assert [e.reason for e in evictions] == ["PodsReadyTimeout"]
    # the pod on the failed x1 was placed again (on x2) before the eviction
    replaced = events.index(placements[1])
    assert replaced < events.index(evictions[0])
