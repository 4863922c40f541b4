"""TAS placer logic 10, with 9 kept for replay.

Kueue's TAS node controller (pkg/controller/tas/node_controller.go) looks at a node's workloads when
the node is created or deleted, or changes Ready or taints, never on a ResourceFlavor update. Placer
logic 9 checked every admitted workload's nodes each cycle against its flavor's current tolerations,
so removing a flavor's toleration evicted the workload it had admitted on a tainted node; 10 counts a
taint only when the node changed after the workload's topology was assigned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.tas_placer import core as placer

REMOVED = Path(__file__).parents[1] / "scenarios/tas/flavor-toleration-removed-keeps-admitted-workload.yaml"
WL1 = "default/wl1"


def _final_state() -> tuple[ClusterState, int]:
    """The state folded from the scenario's whole log (logic 10: wl1 still admitted on x1), and the last sequence."""
    run = run_scenario(load_scenario(REMOVED))
    state = ClusterState()
    for seq, event in run.log:
        apply(state, event, seq=seq)
    return state, run.log[-1][0]


def test_placer_10_keeps_the_workload_and_9_evicts_it() -> None:
    state, _ = _final_state()
    assert state.workloads[WL1].admitted and state.workloads[WL1].topology
    assert placer.decide(state, now_ms=0) == []
    [evicted] = placer.decide_as(9)(state, now_ms=0)
    assert isinstance(evicted, types.EvictionRequested) and evicted.workload.key == WL1
    assert placer.LOGIC_VERSION >= 10 and 9 in placer.EARLIER_LOGIC_VERSIONS
    assert (placer.ROLE, 9) in deciders.EARLIER


def test_a_taint_changed_after_the_assignment_still_fails_the_node() -> None:
    """The same state, x1 given a second untolerated taint: the node changed, so logic 10 acts too."""
    state, last = _final_state()
    x1 = state.topology.nodes["x1"]
    extra = models.Taint(key="example.com/maintenance", value="", effect="NoSchedule")
    retainted = models.Node(
        metadata=x1.metadata, spec=models.NodeSpec(taints=[*x1.spec.taints, extra]), status=x1.status
    )
    apply(state, types.NodeObserved(node=retainted), seq=last + 1)
    [evicted] = placer.decide(state, now_ms=0)
    assert isinstance(evicted, types.EvictionRequested) and evicted.workload.key == WL1


def test_a_log_recorded_by_placer_9_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logic 9 evicted wl1 once the toleration was gone; replay re-runs it as 9 decided."""
    old = {**deciders.BY_ROLE, placer.ROLE: deciders.EARLIER[(placer.ROLE, 9)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(REMOVED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == placer.ROLE]
    assert records and {r.logic_version for r in records} == {9}
    assert any(isinstance(e, types.EvictionRequested) and e.workload.key == WL1 for _, e in run.log)
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
