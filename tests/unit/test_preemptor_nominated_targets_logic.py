"""Preemptor logic 22, with 21 kept for replay: a nomination the admitter decided in its cycle's context.

qv borrows the whole cohort (v1 and v2, 2 CPU each); qa and qb lend it their 2 CPU each and reclaim
(reclaimWithinCohort Any). a (qa) is nominated with v2, the most recently reserved, and v2's eviction goes
out. Before v2 stops, b (qb) arrives. The admitter's next cycle takes a first (older): its targets, v2, are
all being evicted, so it only books its quota, and b, whose search finds v2 too (evicted first), is searched
again without it and nominated with v1, as Kueue's cycle does (scheduler.go ``updateAssignmentIfNeeded``:
a's targets in ``preemptedWorkloads``). Answered alone, b's search finds v2 again: logic 21 answered with it,
evicted nothing, and the admitter nominated b again every cycle until v2 stopped (docs/benchmarks.md,
"Kueue's rules in virtual time"). Logic 22 answers with v1.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

SCENARIO = """
name: nominated-targets
description: the setup of tests/unit/test_preemptor_nominated_targets_logic.py
objects:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: qa}
    spec:
      cohortName: co
      namespaceSelector: {}
      preemption: {reclaimWithinCohort: Any}
      resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: qb}
    spec:
      cohortName: co
      namespaceSelector: {}
      preemption: {reclaimWithinCohort: Any}
      resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: qv}
    spec:
      cohortName: co
      namespaceSelector: {}
      resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 0}]}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lqa, namespace: default}, spec: {clusterQueue: qa}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lqb, namespace: default}, spec: {clusterQueue: qb}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lqv, namespace: default}, spec: {clusterQueue: qv}}
admitted:
  - workload:
      apiVersion: kueue.x-k8s.io/v1beta2
      kind: Workload
      metadata: {name: v1, namespace: default, uid: v1, creationTimestamp: "2026-01-01T00:00:01Z"}
      spec: {queueName: lqv, podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}}]}
      status: {conditions: [{type: QuotaReserved, status: "True", lastTransitionTime: "2026-01-01T00:01:00Z"}]}
    admission: {clusterQueue: qv, podSetAssignments: [{name: main, flavors: {cpu: default}, count: 1}]}
  - workload:
      apiVersion: kueue.x-k8s.io/v1beta2
      kind: Workload
      metadata: {name: v2, namespace: default, uid: v2, creationTimestamp: "2026-01-01T00:00:02Z"}
      spec: {queueName: lqv, podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}}]}
      status: {conditions: [{type: QuotaReserved, status: "True", lastTransitionTime: "2026-01-01T00:01:10Z"}]}
    admission: {clusterQueue: qv, podSetAssignments: [{name: main, flavors: {cpu: default}, count: 1}]}
pending:
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: Workload
    metadata: {name: a, namespace: default, uid: a, creationTimestamp: "2026-01-01T00:02:00Z"}
    spec: {queueName: lqa, podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}}]}
run: {cycles: 1}
expect:
  preempted: [default/v2]
"""


class _Log:
    """A state and the log position of its last fold."""

    def __init__(self, state: ClusterState, seq: int) -> None:
        self.state, self.seq = state, seq

    def fold(self, outputs: list[types.Output] | list[types.Decision] | list[types.Fact]) -> None:
        """Fold as a batch is folded: its outputs in order, then its pending outcomes."""
        for event in outputs:
            if not isinstance(event, types.PendingOutcome):
                self.seq += 1
                apply(self.state, event, seq=self.seq)
        for event in outputs:
            if isinstance(event, types.PendingOutcome):
                apply(self.state, event, seq=self.seq)


def _nominations(outputs: list[types.Output]) -> dict[str, list[str]]:
    return {
        o.workload.name: [t.workload.name for t in o.targets]
        for o in outputs
        if isinstance(o, types.PreemptionRequired)
    }


def _evicted(outputs: list[types.Decision]) -> list[str]:
    return [o.workload.name for o in outputs if isinstance(o, types.EvictionRequested)]


def _with_b_nominated(tmp_path: Path) -> tuple[_Log, int]:
    path = tmp_path / "nominated-targets.yaml"
    path.write_text(SCENARIO)
    state, now, _ = before_first_record(path, admitter.ROLE)
    log = _Log(state, state.last_seq)
    first = admitter.decide(log.state, now_ms=now)
    assert _nominations(first) == {"a": ["v2"]}
    log.fold(first)
    answer = preemptor.decide(log.state, now_ms=now + 1)
    assert _evicted(answer) == ["v2"]
    log.fold(answer)
    a = log.state.workloads["default/a"].workload
    b = msgspec.structs.replace(
        a,
        metadata=msgspec.structs.replace(a.metadata, name="b", uid="b", creation_timestamp_ms=now + 2),
        spec=msgspec.structs.replace(a.spec, queue_name="lqb"),
    )
    log.fold([types.WorkloadObserved(workload=b)])
    second = admitter.decide(log.state, now_ms=now + 3)
    assert _nominations(second) == {"b": ["v1"]}  # a's targets are all being evicted: a is not nominated again
    log.fold(second)
    return log, now + 4


def test_logic_22_answers_with_the_victim_the_admitters_cycle_chose(tmp_path: Path) -> None:
    log, now = _with_b_nominated(tmp_path)
    answer = preemptor.decide(log.state, now_ms=now)
    assert _evicted(answer) == ["v1"]
    issued = [o for o in answer if isinstance(o, types.PreemptionIssued)]
    assert [[t.workload.name for t in o.targets] for o in issued] == [["v1"]]
    log.fold(answer)
    # the nomination is answered and its victims are all being evicted: the admitter waits
    assert _nominations(admitter.decide(log.state, now_ms=now + 1)) == {}


def test_logic_21_answered_with_the_evicted_victim_and_b_came_back(tmp_path: Path) -> None:
    log, now = _with_b_nominated(tmp_path)
    answer = preemptor.decide_as(21)(log.state, now_ms=now)
    assert _evicted(answer) == []
    issued = [o for o in answer if isinstance(o, types.PreemptionIssued)]
    assert [[t.workload.name for t in o.targets] for o in issued] == [["v2"]]
    log.fold(answer)
    assert _nominations(admitter.decide(log.state, now_ms=now + 1)) == {"b": ["v1"]}
    assert preemptor.LOGIC_VERSION >= 22 and 21 in preemptor.EARLIER_LOGIC_VERSIONS
