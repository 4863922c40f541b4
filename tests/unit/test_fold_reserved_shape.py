"""The fold keeps the pod sets a workload holds quota for (cluster._keep_reserved_pod_sets).

Kueue's Workload webhook refuses a change of ``spec.podSets`` while QuotaReserved is True
(workload_webhook.go, SEMANTICS §1.6): the quota a ClusterQueue holds is always for the shape the
workload was admitted with. A job whose shape changes meanwhile gets a new Workload instead
(jobframework/reconciler.go ensureOneWorkload; tests/integration/test_job_events.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload

REF = types.WorkloadRef(namespace="default", name="w", uid="job-uid")


def _observed(count: int) -> types.WorkloadObserved:
    """Workload ``default/w`` of ``count`` pods of 1 CPU, owned by Job ``j``."""
    fact = kueue_fact(workload("w", count=count, cpu="1"))
    assert isinstance(fact, types.WorkloadObserved)
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="job-uid")
    meta = msgspec.structs.replace(fact.workload.metadata, uid="job-uid")
    return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, metadata=meta, owner=owner))


def _reserved(count: int) -> types.QuotaReserved:
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000 * count}, count=count)  # fmt: skip
    return types.QuotaReserved(workload=REF, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1)


def _state(*events: Any) -> ClusterState:
    state = ClusterState()
    setup = [flavor("rf"), cluster_queue("cq", flavors={"rf": {"cpu": 4}}), local_queue("lq", "cq")]
    for seq, event in enumerate([*(kueue_fact(m) for m in setup), *events], start=1):
        apply(state, event, seq=seq)
    return state


def test_a_workload_holding_quota_keeps_the_pod_sets_it_reserved_for() -> None:
    state = _state(_observed(2), _reserved(2), _observed(1))
    held = state.workloads["default/w"]
    assert held.reservation is not None
    assert [(ps.name, ps.count) for ps in held.workload.spec.pod_sets] == [("main", 2)]


def test_other_changes_of_a_workload_holding_quota_are_kept() -> None:
    """Only the pod sets are held: a priority change reaches the workload (UpdateWorkloadPriority)."""
    changed = _observed(1)
    changed = types.WorkloadObserved(
        workload=msgspec.structs.replace(
            changed.workload, spec=msgspec.structs.replace(changed.workload.spec, priority=7)
        )
    )
    state = _state(_observed(2), _reserved(2), changed)
    spec = state.workloads["default/w"].workload.spec
    assert (spec.priority, [ps.count for ps in spec.pod_sets]) == (7, [2])


def _moved(to: str) -> types.WorkloadObserved:
    """``default/w`` of 2 pods with ``spec.queueName`` ``to``."""
    fact = _observed(2)
    spec = msgspec.structs.replace(fact.workload.spec, queue_name=to)
    return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, spec=spec))


def test_a_workload_holding_quota_keeps_its_local_queue() -> None:
    """The Workload CRD refuses a change of ``spec.queueName`` while QuotaReserved is True (Kueue PR #12594)."""
    state = _state(_moved("lq"), _reserved(2), _moved("other"))
    assert state.workloads["default/w"].workload.spec.queue_name == "lq"


def test_a_workload_without_quota_moves_to_the_new_local_queue() -> None:
    state = _state(_moved("lq"), _moved("other"))
    assert state.workloads["default/w"].workload.spec.queue_name == "other"


def test_a_workload_without_quota_takes_the_new_pod_sets() -> None:
    state = _state(_observed(2), _observed(1))
    assert [ps.count for ps in state.workloads["default/w"].workload.spec.pod_sets] == [1]


def test_a_deleted_workload_still_holding_quota_takes_its_jobs_new_one() -> None:
    """Deleted as not matching its job, the new one observed before the quota is released: that one is folded
    with its own pod sets once the quota is back (cluster._recreate)."""
    deleted = types.ObjectDeleted(kind="Workload", namespace="default", name="w", uid="job-uid")
    state = _state(_observed(2), _reserved(2), deleted, _observed(1))
    assert [ps.count for ps in state.workloads["default/w"].workload.spec.pod_sets] == [1]
