"""The demo's timeline line for a Kueue object: applied, or deleted and held by Kueue's finalizer."""

from __future__ import annotations

from kueue_es import timeline
from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply
from tests.builders import cluster_queue, parse, workload


def test_a_cluster_queue_applied_then_deleted_while_in_use() -> None:
    doc = cluster_queue("cq", flavors={"f": {"cpu": 4}})
    applied = types.ClusterQueueObserved(cluster_queue=parse(doc))
    assert timeline.describe(applied, ClusterState()) == ("applied", "ClusterQueue cq")
    doc["metadata"]["annotations"] = {models.TERMINATING_ANNOTATION: "2026-12-06T18:00:00Z"}
    deleting = types.ClusterQueueObserved(cluster_queue=parse(doc))
    assert timeline.describe(deleting, ClusterState()) == (
        "deleting",
        "ClusterQueue cq (held by its finalizer while in use)",
    )


def _reservation(name: str, cpu: int, state: ClusterState) -> types.QuotaReserved:
    wl = state.workloads[f"default/{name}"].workload
    ref = types.WorkloadRef(namespace="default", name=name, uid=wl.metadata.uid)
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": cpu}, count=1)
    return types.QuotaReserved(workload=ref, cluster_queue="cq-a", pod_set_assignments=[assignment], at_ms=1)


def test_an_admission_above_nominal_quota_says_what_it_borrows_from_the_cohort() -> None:
    """cq-a (2 CPU) and cq-b (2 CPU) in cohort team: a 2-CPU admission into cq-a borrows nothing, a 1-CPU one
    after it borrows 1 CPU (the ClusterQueue's ``borrowed`` grows by that); without a cohort nothing is said."""
    state = ClusterState()
    seq = iter(range(1, 100))
    for name in ("cq-a", "cq-b"):
        doc = cluster_queue(name, flavors={"f": {"cpu": 2}})
        doc["spec"]["cohortName"] = "team"
        apply(state, types.ClusterQueueObserved(cluster_queue=parse(doc)), seq=next(seq))
    for name in ("first", "second"):
        apply(state, types.WorkloadObserved(workload=parse(workload(name, cpu="1"))), seq=next(seq))

    first = _reservation("first", 2000, state)
    assert timeline.describe(first, state) == ("admitted", "default/first in ClusterQueue cq-a, flavor f (cpu 2)")
    apply(state, first, seq=next(seq))
    second = _reservation("second", 1000, state)
    assert timeline.describe(second, state) == (
        "admitted",
        "default/second in ClusterQueue cq-a, flavor f (cpu 1), borrowing cpu 1 from cohort team",
    )

    alone = ClusterState()
    apply(
        alone, types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq-a", flavors={"f": {"cpu": 2}}))), seq=1
    )
    apply(alone, types.WorkloadObserved(workload=parse(workload("second", cpu="1"))), seq=2)
    apply(alone, types.WorkloadObserved(workload=parse(workload("first", cpu="1"))), seq=3)
    apply(alone, _reservation("first", 2000, alone), seq=4)
    assert "borrowing" not in timeline.describe(_reservation("second", 1000, alone), alone)[1]
