"""Dynamic reclaim (Kueue's status.reclaimablePods): the jobs' counts, the fold, the admitter, the status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from kueue_es.events import models, types
from kueue_es.jobframework import jobs, jobsets, pods
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scenarios.specs import ApplyEvent, ScenarioObject
from kueue_es.services.dispatcher import status
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import Log, cluster_queue, flavor, local_queue, reservations, workload


def quick_start() -> Log:
    log = Log()
    log.apply_manifests(
        flavor("default-flavor"),
        cluster_queue("cq", flavors={"default-flavor": {"cpu": 9, "memory": "36Gi"}}),
        local_queue("lq", "cq"),
    )
    return log


def reclaim(name: str, **counts: int) -> types.WorkloadReclaimablePods:
    return types.WorkloadReclaimablePods(
        workload=types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}"),
        reclaimable_pods=[types.ReclaimablePod(name=n, count=c) for n, c in sorted(counts.items())],
        at_ms=5,
    )


def reserved(decisions: list[types.Decision]) -> dict[str, types.QuotaReserved]:
    return {d.workload.name: d for d in reservations(decisions)}


def cpu(log: Log) -> int:
    return log.state.usage["cq"]["default-flavor"]["cpu"]


def test_reclaimed_pods_free_quota_and_the_next_workload_is_admitted() -> None:
    """Six 1-CPU pods hold 6 of 9 CPU; a second six-pod workload waits; three pods done free 3 CPU,
    and the second is admitted while the first still runs (Kueue's Dynamic Reclaim)."""
    log = quick_start()
    log.apply_manifests(workload("first", count=6, created=1, cpu="1"), workload("second", count=6, created=2, cpu="1"))
    assert list(reserved(log.settle(1000))) == ["first"]
    assert cpu(log) == 6000
    log.add(reclaim("first", main=3))
    assert cpu(log) == 3000  # at once, before any decision
    first = log.state.workloads["default/first"]
    assert first.reservation is not None and first.reservation.pod_set_assignments[0].count == 6  # the admission stays
    assert first.held is not None and first.held.pod_set_assignments[0].count == 3
    assert first.held.pod_set_assignments[0].resource_usage["cpu"] == 3000
    assert list(reserved(log.settle(2000))) == ["second"]
    assert cpu(log) == 9000
    log.finish("default/first")
    released = log.settle(3000)
    assert [type(d).__name__ for d in released] == ["FinishedRelease"]  # carried in the record (logic 15)
    assert cpu(log) == 6000  # the release gives back what was held, not the whole admission


def test_counts_never_go_down_while_holding_quota_and_are_cut_to_the_pod_set() -> None:
    """Kueue's Workload webhook refuses a lower or dropped count while the workload holds quota, and one
    naming a pod set it does not have; the reconciler cuts a count to the pod set's size."""
    log = quick_start()
    log.apply_manifests(workload("w", count=4, created=1, cpu="1"))
    log.settle(1000)
    log.add(reclaim("w", main=2))
    assert log.state.workloads["default/w"].reclaimable == {"main": 2}
    for refused in (reclaim("w", main=1), reclaim("w"), reclaim("w", main=3, other=1)):
        log.add(refused)
        assert log.state.workloads["default/w"].reclaimable == {"main": 2}, refused
        assert cpu(log) == 2000
    log.add(reclaim("w", main=9))
    assert log.state.workloads["default/w"].reclaimable == {"main": 4}
    assert cpu(log) == 0


def test_a_pending_workload_asks_for_the_pods_not_yet_done() -> None:
    """Without quota the counts may go either way, and the workload asks for count - reclaimable pods
    (podSetsCountsAfterReclaim); admitted so, nothing more is scaled down."""
    log = quick_start()
    log.apply_manifests(workload("big", count=8, created=1, cpu="1"), workload("w", count=6, created=2, cpu="1"))
    log.settle(1000)
    assert cpu(log) == 8000
    log.add(reclaim("w", main=5), reclaim("w", main=4))
    assert log.state.workloads["default/w"].reclaimable == {"main": 4}
    got = reserved(log.settle(2000))
    assert list(got) == []  # two pods of 1 CPU; one CPU free
    log.add(reclaim("w", main=5))
    got = reserved(log.settle(3000))
    assert got["w"].pod_set_assignments[0].count == 1
    assert got["w"].pod_set_assignments[0].resource_usage["cpu"] == 1000
    assert cpu(log) == 9000


def test_the_fold_is_idempotent_and_replays_exactly() -> None:
    """Folding the same log twice, or a fact twice, gives the same ledger."""
    log = quick_start()
    log.apply_manifests(workload("a", count=6, created=1, cpu="1"), workload("b", count=6, created=2, cpu="1"))
    log.settle(1000)
    log.add(reclaim("a", main=3), reclaim("a", main=3))
    log.settle(2000)
    again = ClusterState()
    for seq, event in enumerate(log.events, start=1):
        apply(again, event, seq=seq)
    assert again.usage == log.state.usage == {"cq": {"default-flavor": {"cpu": 9000}}}
    assert again.workloads["default/a"].held == log.state.workloads["default/a"].held


def test_the_workload_status_and_the_queue_usage_show_it() -> None:
    """The dispatcher writes status.reclaimablePods and the ClusterQueue's usage after reclaim."""
    log = quick_start()
    log.apply_manifests(workload("a", count=6, created=1, cpu="1"))
    log.settle(1000)
    event = reclaim("a", main=2)
    log.add(event)
    records: dict[str, status.WorkloadRecord] = {}
    before = status.Before.of(log.state.workloads["default/a"])
    assert status.fold_record(records, event, key="default/a", before=before, state=log.state)
    assert status.workload_status(records["default/a"], generation=1)["reclaimablePods"] == [
        {"name": "main", "count": 2}
    ]
    usage = status.cluster_queue_status(log.state, "cq")["flavorsUsage"][0]["resources"]
    assert {r["name"]: r["total"] for r in usage}["cpu"] == "4"


def job(**fields: Any) -> dict[str, Any]:
    spec = {k: v for k, v in fields.items() if k in ("parallelism", "completions", "completionMode")}
    state = {k: v for k, v in fields.items() if k not in spec}
    return {"spec": spec, "status": state}


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        ({"parallelism": 3, "completions": 6, "succeeded": 2}, {}),  # four left fill three slots
        ({"parallelism": 3, "completions": 6, "succeeded": 4}, {"main": 1}),
        ({"parallelism": 3, "completions": 6, "succeeded": 6}, {"main": 3}),
        ({"parallelism": 3, "succeeded": 1}, {"main": 1}),  # completions default to parallelism
        ({"parallelism": 1, "completions": 5, "succeeded": 4}, {}),  # a single pod has nothing to reclaim
        ({"parallelism": 4, "completions": 4}, {}),
        (
            {
                "parallelism": 3,
                "completions": 5,
                "completionMode": "Indexed",
                "completedIndexes": "0-2,4",
                "succeeded": 9,
            },
            {"main": 2},
        ),
        (
            {
                "parallelism": 3,
                "completions": 4,
                "completionMode": "Indexed",
                "completedIndexes": "1-2",
                "failedIndexes": "2,7",
            },
            {"main": 1},  # 1 and 2 once, 7 beyond completions
        ),
    ],
)
def test_job_reclaimable_pods(fields: dict[str, Any], want: dict[str, int]) -> None:
    """Kueue job_controller.go ReclaimablePods: parallelism - remaining once fewer than parallelism remain."""
    assert jobs.reclaimable_pods(job(**fields)) == want


def test_ended_indexes_skips_malformed_intervals() -> None:
    assert jobs.ended_indexes("0-1,x,5-3,4", "", completions=10) == 3


def test_jobset_reclaimable_pods() -> None:
    """Kueue jobset_controller.go ReclaimablePods: succeeded Jobs x pods per Job, per replicated job."""
    jobset = {
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1}}},
                {"name": "workers", "replicas": 3, "template": {"spec": {"parallelism": 4, "completions": 2}}},
                {"name": "other", "replicas": 2},
            ]
        },
        "status": {
            "replicatedJobsStatus": [
                {"name": "driver", "succeeded": 0},
                {"name": "workers", "succeeded": 2},
                {"name": "other", "succeeded": 3},  # more than its replicas: not counted
            ]
        },
    }
    assert jobsets.reclaimable_pods(jobset) == {"workers": 4}
    assert jobsets.reclaimable_pods({"spec": jobset["spec"]}) == {}


def test_pod_group_reclaimable_pods() -> None:
    """Kueue pod_controller.go ReclaimablePods: the Succeeded pods of a (non-serving) group, per role."""

    def pod(name: str, phase: str, cpu: str = "1", serving: bool = False) -> dict[str, Any]:
        annotations = {pods.SERVING_ANNOTATION: "true"} if serving else {}
        return {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase},
        }

    members = [pod("a", "Succeeded"), pod("b", "Succeeded"), pod("c", "Running"), pod("d", "Succeeded", cpu="2")]
    one, two = pods.role_hash(members[0]), pods.role_hash(members[3])
    assert pods.group_reclaimable_pods(members) == {one: 2, two: 1}
    assert pods.group_reclaimable_pods([pod("a", "Succeeded", serving=True)]) == {}
    assert pods.group_reclaimable_pods([pod("a", "Failed")]) == {}


def test_a_started_pod_of_a_group_is_reclaimed_from_its_own_pod_set() -> None:
    """A start merges the flavor's node selector and tolerations into each pod's spec, which is part of the role
    hash's shape; a succeeded started pod still counts for the pod set it was started in (its
    ``kueue.x-k8s.io/podset`` label), as Kueue's role-hash annotation, written at creation, keeps it there.
    Before, it counted for a pod set the workload does not have."""
    gated = {
        "metadata": {"name": "a", "labels": {}, "annotations": {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }
    role = pods.role_hash(gated)
    started = {
        "metadata": {"name": "a", "labels": {"kueue.x-k8s.io/podset": role}, "annotations": {}},
        "spec": {**gated["spec"], "nodeSelector": {"instance-type": "spot"}, "tolerations": [{"key": "spot"}]},
        "status": {"phase": "Succeeded"},
    }
    assert pods.group_reclaimable_pods([started]) == {role: 1}


DYNAMIC_RECLAIM = """
name: dynamic-reclaim-with-preemption
source: "kueue test/integration/singlecluster/scheduler/scheduler_test.go 'Scheduling workloads on clusterQueues' / 'Should admit workloads when resources are dynamically reclaimed'"
objects:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: on-demand}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: preemption-cq}
    spec:
      namespaceSelector: {}
      preemption: {withinClusterQueue: LowerPriority}
      resourceGroups: [{coveredResources: [cpu], flavors: [{name: on-demand, resources: [{name: cpu, nominalQuota: 3}]}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: preemption-queue, namespace: default}, spec: {clusterQueue: preemption-cq}}
pending:
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: Workload
    metadata: {name: first-wl, namespace: default, uid: uid-first-wl, creationTimestamp: "2026-01-01T00:00:00Z"}
    spec:
      queueName: preemption-queue
      podSets:
        - {name: first, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
        - {name: second, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
        - {name: third, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
"""


def test_dynamic_reclaim_with_preemption_resumes_the_preempted(tmp_path: Path) -> None:
    """Kueue's 'Should admit workloads when resources are dynamically reclaimed': first-wl (three 1-CPU pod sets)
    fills preemption-cq (3 CPU) and gives back one pod; second-wl (priority 100, the same shape) still needs a CPU
    more and preempts it. first-wl keeps its reclaimable pod, so it asks for 2 CPU; once second-wl gives back two
    pods, first-wl is admitted again beside it."""
    path = tmp_path / "dynamic-reclaim.yaml"
    path.write_text(DYNAMIC_RECLAIM)
    scenario = load_scenario(path)
    manifest = yaml.safe_load(DYNAMIC_RECLAIM)["pending"][0]
    manifest["metadata"] = {**manifest["metadata"], "name": "second-wl", "uid": "uid-second-wl"}
    manifest["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z"
    manifest["spec"]["priority"] = 100

    def reclaim_event(name: str, **counts: int) -> ApplyEvent:
        ref = types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}")
        pods = [types.ReclaimablePod(name=n, count=c) for n, c in sorted(counts.items())]
        fact = types.WorkloadReclaimablePods(workload=ref, reclaimable_pods=pods, at_ms=0)
        return ApplyEvent(object=ScenarioObject(manifest={"kind": "WorkloadReclaimablePods"}, fact=fact))

    events = (
        reclaim_event("first-wl", third=1),
        ApplyEvent(object=ScenarioObject(manifest=manifest, fact=kueue_fact(manifest))),
        reclaim_event("second-wl", first=1, second=1),
    )
    run = run_scenario(msgspec.structs.replace(scenario, events=events))
    outcome = run.outcome()
    assert set(outcome.admitted) >= {"default/first-wl", "default/second-wl"}
    assert list(outcome.preempted) == ["default/first-wl"]
    first = run.state.workloads["default/first-wl"]
    assert first.reservation is not None
    assert [(psa.name, psa.count) for psa in first.reservation.pod_set_assignments] == [
        ("first", 1),
        ("second", 1),
        ("third", 0),
    ]
    assert run.state.usage["preemption-cq"]["on-demand"]["cpu"] == 3000


def _elastic(name: str, *, count: int, cpu: str) -> dict[str, Any]:
    manifest = workload(name, count=count, created=1, cpu=cpu)
    manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    return manifest


@pytest.mark.parametrize(
    ("scaled", "want_held"),
    [
        # non-indexed: parallelism 20 -> 10, completions 20, 15 succeeded: 5 still run (5 reclaimable)
        (jobs.reclaimable_pods(job(parallelism=10, completions=20, succeeded=15)), 500),
        # indexed: 20 -> 10, completedIndexes pruned to 5-9 while status.succeeded is still 15
        (
            jobs.reclaimable_pods(
                job(parallelism=10, completions=10, completionMode="Indexed", completedIndexes="5-9", succeeded=15)
            ),
            500,
        ),
    ],
)
def test_an_elastic_scale_down_lowers_the_reclaimable_count_and_keeps_the_running_pods_quota(
    scaled: dict[str, int], want_held: int
) -> None:
    """Kueue PRs #12766, #13044, #13178 (job_controller_test.go "Should not over-reserve quota for a non-indexed
    Job after a scale-down", "Should derive reclaimable pods from completedIndexes while status.Succeeded is stale
    after scale-down"): an elastic Job of 20 pods x 100m with 15 done holds 500m; scaled down to 10 pods, its job
    reports 5 reclaimable, fewer than the 15 before. The Workload webhook lets a scaled-down pod set's count go
    down (scaledDownPodSetNames), so the 5 pods still running keep their 500m instead of the slice holding none."""
    log = quick_start()
    log.add(
        types.ConfigurationObserved(
            configuration=models.Configuration(feature_gates={"ElasticJobsViaWorkloadSlices": True})
        )
    )
    log.apply_manifests(_elastic("e", count=20, cpu="100m"))
    log.settle(1000)
    assert scaled == {"main": 5}
    log.add(reclaim("e", main=15))
    assert cpu(log) == 500
    log.apply_manifests(_elastic("e", count=10, cpu="100m"))
    log.add(reclaim("e", **scaled))
    assert log.state.workloads["default/e"].reclaimable == {"main": 5}
    assert cpu(log) == want_held
