"""Which running children of managed jobs the dispatcher suspends (services/dispatcher/core.py child_to_suspend).

Kueue's job reconciler (jobframework/reconciler.go shouldSuspendChildJob) suspends a child that runs while its
ancestor's latest not-finished Workload is missing or not admitted; for an elastic ancestor (workload slices)
only when that Workload is evicted.
"""

from __future__ import annotations

import pytest

from kueue_es.events import models, slices, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.dispatcher import core

JOBSET = models.OwnerReference(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js", uid="js-1")
REF = types.WorkloadRef(namespace="ns", name="jobset-js-abcde", uid="w1")
CHILD = types.ChildJobObserved(
    api_version="batch/v1", kind="Job", namespace="ns", name="js-w-0", uid="c1", ancestor=JOBSET, at_ms=1
)
RESERVED = types.QuotaReserved(
    workload=REF,
    cluster_queue="cq",
    pod_set_assignments=[
        types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1}, count=1)
    ],
    at_ms=1,
)


def state(*events: types.Event, elastic: bool = False, owner: models.OwnerReference = JOBSET) -> ClusterState:
    """The fold of the JobSet's WorkloadObserved, then ``events``."""
    annotations = {slices.ELASTIC_JOB_ANNOTATION: "true"} if elastic else {}
    workload = models.Workload(
        metadata=models.ObjectMeta(name=REF.name, namespace="ns", uid=REF.uid, annotations=annotations),
        spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1})]),
        owner=owner,
    )
    folded = ClusterState()
    for seq, event in enumerate([types.WorkloadObserved(workload=workload), *events], start=1):
        apply(folded, event, seq=seq)
    return folded


ADMITTED = types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=2)
EVICTED = types.EvictionRequested(workload=REF, cluster_queue="cq", reason="Preempted", message="m", at_ms=3)


@pytest.mark.parametrize(
    ("events", "suspend"),
    [
        ((), True),  # pending
        ((RESERVED,), True),  # quota reserved, checks not Ready: not admitted
        ((RESERVED, ADMITTED), False),
        ((RESERVED, ADMITTED, EVICTED), False),  # still admitted while being stopped (workload.IsAdmitted)
        ((types.WorkloadFinished(workload=REF, at_ms=4),), True),  # no not-finished workload
    ],
    ids=["pending", "reserved", "admitted", "evicted", "finished"],
)
def test_a_child_is_suspended_unless_its_ancestors_workload_is_admitted(
    events: tuple[types.Event, ...], suspend: bool
) -> None:
    assert core.child_to_suspend(state(*events), CHILD) is suspend


def test_a_child_of_an_ancestor_with_no_workload_is_suspended() -> None:
    """Another owner's workload (another UID) is not the ancestor's."""
    other = models.OwnerReference(api_version=JOBSET.api_version, kind="JobSet", name="js", uid="other")
    assert core.child_to_suspend(state(RESERVED, ADMITTED, owner=other), CHILD) is True
    assert core.ancestor_workload(state(owner=other), "ns", JOBSET) is None


@pytest.mark.parametrize(
    ("events", "suspend"), [((), False), ((RESERVED, ADMITTED), False), ((RESERVED, ADMITTED, EVICTED), True)]
)
def test_a_child_of_an_elastic_ancestor_is_suspended_only_when_evicted(
    events: tuple[types.Event, ...], suspend: bool
) -> None:
    assert core.child_to_suspend(state(*events, elastic=True), CHILD) is suspend
