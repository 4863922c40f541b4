"""A Workload evicted and admitted again between two of the dispatcher's writes gets its new admission.

Found by a new user's trial: a partially admitted Workload preempted and admitted again with 8 pods within
milliseconds was written in one status update; Kueue's Workload webhook lets ``status.admission`` be set or
cleared, never changed (workload_webhook.go validateAdmissionUpdate), so the write was refused and the object
kept showing 9 pods admitted while its Job ran 8. The dispatcher now clears the admission first
(object_sync.admission_cleared_first), as Kueue's own eviction does before its next cycle admits.
"""

from __future__ import annotations

from typing import Any

from kueue_es.jobframework import workload_webhook
from kueue_es.services.dispatcher import object_sync

T0, T1 = "2026-12-07T10:00:00Z", "2026-12-07T10:00:01Z"


def admission(count: int, flavor: str = "default") -> dict[str, Any]:
    return {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "count": count, "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": str(count)}}
        ],
    }


def condition(kind: str, reason: str, at: str, status: str = "True", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def obj(workload_status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": 9, "minCount": 2, "template": {"spec": {"containers": []}}}],
        },
        "status": workload_status,
    }


def refused(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    return [str(e) for e in workload_webhook.validate(obj(new), old=obj(old), gates={})]


def test_an_admission_changed_in_one_fold_is_cleared_first_and_both_writes_pass() -> None:
    stored = {
        "admission": admission(9),
        "conditions": [condition("QuotaReserved", "QuotaReserved", T0), condition("Admitted", "Admitted", T0)],
    }
    preempted = "Preempted to accommodate a workload"
    wanted = {
        "admission": admission(8),
        "conditions": [
            condition("QuotaReserved", "QuotaReserved", T1),
            condition("Admitted", "Admitted", T1),
            condition("Evicted", "Preempted", T1, status="False", message=preempted),
            condition("Preempted", "InClusterQueue", T1, status="False", message=preempted),
        ],
    }
    assert any(e.startswith("status.admission") for e in refused(wanted, stored))  # at once: refused

    first = object_sync.admission_cleared_first(stored, wanted, gates={})
    assert first is not None and "admission" not in first
    kinds = {c["type"]: (c["status"], c["reason"]) for c in first["conditions"]}
    assert kinds["QuotaReserved"] == ("False", "Pending") and kinds["Admitted"] == ("False", "Pending")
    assert refused(first, stored) == [] and refused(wanted, first) == []
    assert object_sync.admission_cleared_first(first, wanted, gates={}) is None  # then written as it is


def test_an_admission_set_cleared_or_given_its_topology_is_written_at_once() -> None:
    wanted = {"admission": admission(8), "conditions": [condition("QuotaReserved", "QuotaReserved", T1)]}
    assert object_sync.admission_cleared_first({}, wanted, gates={}) is None
    assert object_sync.admission_cleared_first({"admission": admission(8)}, wanted, gates={}) is None
    assert object_sync.admission_cleared_first({"admission": admission(8)}, {"conditions": []}, gates={}) is None
    placed = admission(8)
    placed["podSetAssignments"][0]["topologyAssignment"] = {"levels": ["kubernetes.io/hostname"], "slices": []}
    assert object_sync.admission_cleared_first(wanted, {**wanted, "admission": placed}, gates={}) is None
    # another flavor is another admission
    other = {**wanted, "admission": admission(8, flavor="spot")}
    evicted = condition("Evicted", "Preempted", T1, message="preempted")
    first = object_sync.admission_cleared_first(
        wanted, {**other, "conditions": [*other["conditions"], evicted]}, gates={}
    )
    assert first is not None
    assert [(c["status"], c["reason"]) for c in first["conditions"] if c["type"] == "QuotaReserved"] == [
        ("False", "Preempted")
    ]
