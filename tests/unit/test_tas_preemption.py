"""TAS in the preemptor's recomputation of a nomination (SEMANTICS-ADVANCED A.11).

Kueue's workloadFits (pkg/scheduler/preemption/preemption.go) requires the preemptor's TAS
pod sets to be placeable with the victims removed; the preemptor service re-checks a
nomination (and recomputes its targets) on the current log with the same test.

The cluster is the one of tests/scenarios/tas/preemption-fair-sharing-victims-free-the-rack.yaml
(fair sharing; racks r1 = x1 and r2 = x2, 4 CPU each): cq-b borrows with b1 (priority 1) and
b2 on x1 and b3 on x2. a1 (4 one-CPU pods, rack required, cq-a) is nominated: b1 alone frees
quota but no rack, b3 frees r2.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.services.preemptor import core as preemptor

SCENARIO = Path(__file__).parents[1] / "scenarios/tas/preemption-fair-sharing-victims-free-the-rack.yaml"


def _settled() -> tuple[ClusterState, int]:
    """b1..b3 admitted; a1 known but in a LocalQueue that does not exist (never admitted)."""
    doc = yaml.safe_load(SCENARIO.read_text())
    a1 = doc["events"][0]["apply"]
    a1["spec"]["queueName"] = "lq-missing"
    doc["pending"].append(a1)
    doc["events"] = []
    del doc["expect"]
    run = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc)))
    state = run.state
    assert {k for k, wl in state.workloads.items() if wl.admitted} == {"default/b1", "default/b2", "default/b3"}
    return state, len(run.messages)


def _nominate(state: ClusterState, seq: int, victims: list[str]) -> None:
    a1 = state.workloads["default/a1"]
    refs = {key: state.workloads[key].ref for key in victims if key in state.workloads}
    nomination = types.PreemptionRequired(
        workload=a1.ref,
        cluster_queue="cq-a",
        pod_set_assignments=[
            types.PodSetAssignment(name="main", flavors={"cpu": "tas-default"}, resource_usage={"cpu": 4000}, count=4)
        ],
        targets=[
            types.PreemptionTarget(
                workload=refs.get(key) or types.WorkloadRef(namespace="default", name=key.split("/")[1], uid="gone"),
                cluster_queue="cq-b",
                reason="InCohortReclamation",
            )
            for key in victims
        ],
        message="",
        at_ms=0,
    )
    apply(state, nomination, seq=seq + 1)


def _evicted(decisions: list[types.Decision]) -> list[str]:
    issued = [d for d in decisions if isinstance(d, types.PreemptionIssued)]
    assert len(issued) == 1
    evicted = [d.workload.key for d in decisions if isinstance(d, types.EvictionRequested)]
    assert [t.workload.key for t in issued[0].targets] == evicted
    return evicted


def test_nominated_victim_that_frees_no_rack_is_recomputed() -> None:
    """b1 still holds quota and evicting it makes the quota fit, but no rack is then free for
    a1: the nomination is not current, and the recomputation picks b3 (fair sharing, with the
    placement in the fit test and the fill-back)."""
    state, seq = _settled()
    _nominate(state, seq, ["default/b1"])
    assert _evicted(preemptor.decide(state, now_ms=10**13)) == ["default/b3"]


def test_stale_nomination_recomputes_with_the_placement() -> None:
    """A target gone from the log forces the recomputation; its victims free r2."""
    state, seq = _settled()
    _nominate(state, seq, ["default/gone"])
    assert _evicted(preemptor.decide(state, now_ms=10**13)) == ["default/b3"]


def test_nominated_victims_that_free_the_rack_are_kept() -> None:
    """b3 frees r2: the nomination is still current and is answered as it stands."""
    state, seq = _settled()
    _nominate(state, seq, ["default/b3"])
    assert _evicted(preemptor.decide(state, now_ms=10**13)) == ["default/b3"]
