"""Admitter logic 52, with 51 kept for replay.

The quota a cycle gives back first (a finished or deleted workload's) requeues the workloads parked in that
ClusterQueue's cohort tree for the same cycle, as Kueue's workload controller requeues a tree's inadmissible
workloads while the workload leaves its cache, before the next scheduling cycle (workload_controller.go
QueueAssociatedInadmissibleWorkloadsAfter). Logic 51 left them parked until the release's record was folded,
so a workload that happened to be ready took the quota whatever the queue order said: CI's run of Kueue's
sequential e2e case "should prioritize LocalQueues with lower usage" admitted lq-a's third job instead of
lq-b's.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_record

SCENARIO = Path(__file__).parents[1] / "scenarios" / "afs" / "release-requeues-parked-before-the-next-admission.yaml"


def _admitted(outputs: list[types.Output]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.WorkloadAdmitted))


def test_admitter_52_requeues_on_the_release_it_decides_and_51_did_not() -> None:
    # the second cycle: a1 finished, b1 parked by the first cycle, a3 never tried
    state, now_ms, partition = before_record(SCENARIO, admitter.ROLE, 1)
    released = [o for o in admitter.decide(state, now_ms=now_ms, partition=partition) if o.workload.key == "default/a1"]
    assert [type(o).__name__ for o in released] == ["FinishedRelease"]
    assert _admitted(admitter.decide(state, now_ms=now_ms, partition=partition)) == ["default/b1"]
    assert _admitted(admitter.decide_as(51)(state, now_ms=now_ms, partition=partition)) == ["default/a3"]
    # deciding again on the same state decides the same (the requeue is the cycle's, not the state's)
    assert _admitted(admitter.decide(state, now_ms=now_ms, partition=partition)) == ["default/b1"]
    assert admitter.LOGIC_VERSION >= 52 and 51 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_cycle_that_releases_nothing_leaves_parked_workloads_parked() -> None:
    # the first cycle: b1 is tried and parked; a3 waits untried, and nothing is released
    state, now_ms, partition = before_record(SCENARIO, admitter.ROLE, 0)
    outputs = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _admitted(outputs) == []
    parked = [o.workload.key for o in outputs if isinstance(o, types.WorkloadInadmissible | types.PendingOutcome)]
    assert parked == ["default/b1"]
