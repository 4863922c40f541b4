"""A decider started again folds the log from the start, so the TAS usage of workloads admitted before
holds at once (Kueue PR #5276, "Fix initialization of TAS cache on reboot": after a restart Kueue's TAS
cache could miss the usage of admitted workloads and admit another onto their nodes;
test/integration/singlecluster/tas/tas_test.go 'should respect TAS usage by admitted workloads after
reboot; second workload created before reboot')."""

from __future__ import annotations

from kueue_es.events import manifests, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.runtime import fold_message

NODES = "\n".join(
    f"- {{apiVersion: v1, kind: Node, metadata: {{name: {x}, labels: {{tas-node: 'true', cloud.com/topology-block: b1,"
    f" cloud.com/topology-rack: {r}, kubernetes.io/hostname: {x}}}}}, status: {{allocatable: {{cpu: '1', pods: '10'}},"
    f" conditions: [{{type: Ready, status: 'True'}}]}}}}"
    for x, r in (("x1", "r1"), ("x2", "r1"), ("x3", "r2"), ("x4", "r2"))
)
SCENARIO = f"""
name: tas-usage-after-restart
source: kueue test/integration/singlecluster/tas/tas_test.go
objects:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Topology
  metadata: {{name: default}}
  spec: {{levels: [{{nodeLabel: cloud.com/topology-block}}, {{nodeLabel: cloud.com/topology-rack}}, {{nodeLabel: kubernetes.io/hostname}}]}}
- {{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {{name: tas}}, spec: {{nodeLabels: {{tas-node: 'true'}}, topologyName: default}}}}
{NODES}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {{name: cq}}
  spec: {{namespaceSelector: {{}}, resourceGroups: [{{coveredResources: [cpu], flavors: [{{name: tas, resources: [{{name: cpu, nominalQuota: 10}}]}}]}}]}}
- {{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {{name: lq, namespace: default}}, spec: {{clusterQueue: cq}}}}
pending:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {{name: wl1, namespace: default, uid: wl1, creationTimestamp: '2026-01-01T00:00:00Z'}}
  spec:
    queueName: lq
    podSets: [{{name: main, count: 4, topologyRequest: {{preferred: cloud.com/topology-block}},
      template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}}}}}]
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {{name: wl2, namespace: default, uid: wl2, creationTimestamp: '2026-01-01T00:00:01Z'}}
  spec:
    queueName: lq
    podSets: [{{name: main, count: 1, topologyRequest: {{required: cloud.com/topology-rack}},
      template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}}}}}]
"""


WL3 = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "wl3", "namespace": "default", "uid": "wl3", "creationTimestamp": "2026-01-01T01:00:00Z"},
    "spec": {
        "queueName": "lq",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "topologyRequest": {"preferred": "cloud.com/topology-rack"},
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
            }
        ],
    },
}


def test_a_refolded_admitter_keeps_the_nodes_of_admitted_workloads() -> None:
    run = core_engine.run_scenario(parse_scenario(SCENARIO))
    assert run.state.workloads["default/wl1"].admitted and not run.state.workloads["default/wl2"].reservation
    restarted = ClusterState()  # what an admitter started now folds: the whole log, from the start
    for message in run.messages:
        fold_message(restarted, message)
    seq, now = len(run.messages), 10**13

    def cycles(count: int) -> list[str]:
        nonlocal seq, now
        reserved: list[str] = []
        for _ in range(count):
            now += 1_000
            outputs = admitter.decide(restarted, now_ms=now)
            reserved += [o.workload.key for o in outputs if isinstance(o, types.QuotaReserved)]
            for output in outputs:
                seq += 1
                apply(restarted, output, seq=seq)
        return reserved

    # wl3, new after the restart, is tried at once: wl1 holds every node, so it does not fit either
    seq += 1
    apply(restarted, types.WorkloadObserved(workload=manifests.parse_object(WL3)), seq=seq)  # type: ignore[arg-type]
    assert cycles(3) == []
    assert 'excluded: resource "cpu": 4' in restarted.workloads["default/wl3"].pending_message
    seq += 1
    apply(restarted, types.WorkloadFinished(workload=restarted.workloads["default/wl1"].ref, at_ms=now), seq=seq)
    assert sorted(cycles(3)) == ["default/wl2", "default/wl3"]
