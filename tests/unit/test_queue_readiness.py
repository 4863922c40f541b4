"""The ``Active`` condition and fair-sharing status of queues and Cohorts (scheduling/readiness.py, status.py).

Pure: facts folded into the dispatcher's view, then the condition Kueue writes compared with
Kueue's reasons and messages (clusterqueue.go inactiveReason, localqueue_controller.go
Reconcile), the Cohort cycle (a kueue-es addition), the weighted share and which queues a
fact marks for a status write.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import jobs
from kueue_es.scheduling import readiness
from kueue_es.services.dispatcher import core, status
from kueue_es.services.watcher import convert
from tests.integration.harness import cluster_queue, flavor, job, local_queue

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def fold(*manifests_or_events: dict[str, Any] | types.Event) -> core.DispatchState:
    """A view with each manifest's fact (or each event) folded in order."""
    view = core.DispatchState()
    for seq, item in enumerate(manifests_or_events, start=1):
        event = convert.kueue_fact(item) if isinstance(item, dict) else item
        core.fold(view, event, seq=seq)
    return view


def cohort(name: str, parent: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": {"parentName": parent} if parent else {},
    }


def admission_check(name: str, *, active: bool) -> dict[str, Any]:
    condition = {"type": "Active", "status": "True" if active else "False", "reason": "R", "message": "m"}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/check"},
        "status": {"conditions": [condition]},
    }


def with_checks(cq: dict[str, Any], *names: str) -> dict[str, Any]:
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in names]}
    return cq


def cq_active(view: core.DispatchState, name: str = "cluster-queue") -> readiness.Active:
    return readiness.cluster_queue_active(view.cluster.cluster_queues[name], state=view.cluster)


def test_a_cluster_queue_with_everything_it_names_is_ready() -> None:
    view = fold(flavor("default-flavor"), cluster_queue("cluster-queue"), local_queue("user-queue", "cluster-queue"))
    assert cq_active(view) == readiness.Active(True, "Ready", "Can admit new workloads")
    lq = view.cluster.local_queues[("default", "user-queue")]
    assert readiness.local_queue_active(lq, state=view.cluster) == readiness.Active(
        True, "Ready", "Can submit new workloads to localQueue"
    )


def test_a_missing_flavor_is_flavor_not_found_with_kueues_message() -> None:
    view = fold(cluster_queue("cluster-queue", flavor_name="gpu"), local_queue("user-queue", "cluster-queue"))
    assert cq_active(view) == readiness.Active(
        False, "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): gpu."
    )
    lq = view.cluster.local_queues[("default", "user-queue")]
    assert readiness.local_queue_active(lq, state=view.cluster) == readiness.Active(
        False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
    )


def test_every_cause_is_in_the_message_and_the_first_is_the_reason() -> None:
    """Stopped, a missing flavor, a missing check and an inactive one: reason Stopped, all four listed in
    Kueue's order, checks sorted."""
    cq = with_checks(cluster_queue("cluster-queue", flavor_name="gpu"), "zeta", "beta", "alpha")
    cq["spec"]["stopPolicy"] = "Hold"
    view = fold(cq, admission_check("alpha", active=False))
    assert cq_active(view) == readiness.Active(
        False,
        "Stopped",
        "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gpu, "
        "references missing AdmissionCheck(s): beta,zeta, references inactive AdmissionCheck(s): alpha.",
    )


@pytest.mark.parametrize(
    ("checks", "reason", "message"),
    [
        ([], "AdmissionCheckNotFound", "Can't admit new workloads: references missing AdmissionCheck(s): check."),
        (
            [admission_check("check", active=False)],
            "AdmissionCheckInactive",
            "Can't admit new workloads: references inactive AdmissionCheck(s): check.",
        ),
        ([admission_check("check", active=True)], "Ready", "Can admit new workloads"),
    ],
)
def test_admission_checks(checks: list[dict[str, Any]], reason: str, message: str) -> None:
    view = fold(flavor("default-flavor"), with_checks(cluster_queue("cluster-queue"), "check"), *checks)
    assert cq_active(view) == readiness.Active(reason == "Ready", reason, message)


def test_a_tas_flavor_without_its_topology_is_topology_not_found() -> None:
    tas = flavor("default-flavor")
    tas["spec"]["topologyName"] = "default"
    view = fold(tas, cluster_queue("cluster-queue"))
    assert cq_active(view) == readiness.Active(
        False,
        "TopologyNotFound",
        'Can\'t admit new workloads: there is no Topology "default" for TAS flavor "default-flavor".',
    )


def test_with_the_tas_gate_off_a_flavor_naming_a_missing_topology_is_no_tas_flavor() -> None:
    """Kueue's cache takes no flavor as a TAS flavor with the gate TopologyAwareScheduling off (cache.go
    handleTASFlavor), so its ClusterQueue is active: the deciders admit on quota alone then (docs/tas.md)."""
    tas = flavor("default-flavor")
    tas["spec"]["topologyName"] = "default"
    gate_off = types.ConfigurationObserved(
        configuration=models.Configuration(feature_gates={"TopologyAwareScheduling": False})
    )
    view = fold(gate_off, tas, cluster_queue("cluster-queue"))
    assert cq_active(view) == readiness.Active(True, "Ready", "Can admit new workloads")


def test_local_queue_stopped_or_without_its_cluster_queue() -> None:
    stopped = local_queue("stopped", "cluster-queue")
    stopped["spec"]["stopPolicy"] = "HoldAndDrain"
    view = fold(flavor("default-flavor"), cluster_queue("cluster-queue"), stopped, local_queue("orphan", "nowhere"))
    state = view.cluster
    assert readiness.local_queue_active(state.local_queues[("default", "stopped")], state=state) == readiness.Active(
        False, "Stopped", "LocalQueue is stopped"
    )
    assert readiness.local_queue_active(state.local_queues[("default", "orphan")], state=state) == readiness.Active(
        False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
    )


@pytest.mark.parametrize(
    ("cohorts", "name", "cycle"),
    [
        ([cohort("a", "a")], "a", ["a", "a"]),
        ([cohort("a", "b"), cohort("b", "a")], "a", ["a", "b", "a"]),
        ([cohort("a", "a"), cohort("c", "a")], "c", ["c", "a", "a"]),
        ([cohort("a", "root"), cohort("root")], "a", []),
        ([cohort("a", "implicit")], "a", []),
    ],
)
def test_cohort_cycles(cohorts: list[dict[str, Any]], name: str, cycle: list[str]) -> None:
    view = fold(*cohorts)
    assert readiness.cohort_cycle(name, view.cluster.cohorts) == cycle
    active = readiness.cohort_active(name, state=view.cluster)
    if cycle:
        assert active == readiness.Active(
            False, "CohortHasCycle", f"Can't admit new workloads: the cohort has a cycle: {' -> '.join(cycle)}."
        )
    else:
        assert active == readiness.Active(True, "Ready", "Can admit new workloads")


def test_the_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    """meta.SetStatusCondition: lastTransitionTime changes only with the status; observedGeneration given."""
    ready = readiness.Active(True, "Ready", "Can admit new workloads")
    first = readiness.condition(ready, previous=None, generation=2, now_ms=T0)
    assert first == {
        "type": "Active",
        "status": "True",
        "reason": "Ready",
        "message": "Can admit new workloads",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 2,
    }
    assert readiness.condition(ready, previous=first, generation=2, now_ms=T0 + 60_000) == first
    stopped = readiness.Active(False, "Stopped", "Can't admit new workloads: is stopped.")
    later = readiness.condition(stopped, previous=first, generation=3, now_ms=T0 + 60_000)
    assert later["lastTransitionTime"] == manifests.format_time_ms(T0 + 60_000) and later["observedGeneration"] == 3


@pytest.mark.parametrize(("value", "written"), [(0.0, 0), (0.2, 1), (500.0, 500), (math.inf, 2**63 - 1)])
def test_weighted_share_as_kueue_writes_it(value: float, written: int) -> None:
    assert readiness.weighted_share(value) == written


def fair_sharing_on() -> types.ConfigurationObserved:
    return types.ConfigurationObserved(configuration=models.Configuration(fair_sharing=models.FairSharingConfig()))


def test_weighted_share_with_fair_sharing_on() -> None:
    """Two ClusterQueues of 4 CPU in cohort team; a workload of 6 CPU in one borrows 2 of the 8 the cohort
    could lend: 250 per mille; the other and the root Cohort show 0. Off, no fairSharing at all."""
    a, b = cluster_queue("a", cpu=4), cluster_queue("b", cpu=4)
    for cq in (a, b):
        cq["spec"]["cohortName"] = "team"
    manifest = job("wide", queue="queue-a", parallelism=6)
    manifest["metadata"] |= {"uid": "uid-wide", "creationTimestamp": "2026-01-01T00:00:00Z"}
    observed = jobs.job_facts(manifest)
    assert isinstance(observed, types.WorkloadObserved)
    meta = observed.workload.metadata
    ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
    assignment = types.PodSetAssignment(
        name="main",
        flavors={"cpu": "default-flavor", "memory": "default-flavor"},
        resource_usage={"cpu": 6000, "memory": 6 * 200 * 2**20},
        count=6,
    )
    reserved = types.QuotaReserved(workload=ref, cluster_queue="a", pod_set_assignments=[assignment], at_ms=T0)
    view = fold(flavor("default-flavor"), cohort("team"), a, b, local_queue("queue-a", "a"), observed, reserved)
    assert "fairSharing" not in status.cluster_queue_status(view.cluster, "a")
    assert status.cohort_status(view.cluster, "team") == {}
    view.take_dirty_queues()
    core.fold(view, fair_sharing_on(), seq=10)
    assert ("Cohort", "", "team") in view.take_dirty_queues()  # the Configuration rewrites every status
    assert status.cluster_queue_status(view.cluster, "a")["fairSharing"] == {"weightedShare": 250}
    assert status.cluster_queue_status(view.cluster, "b")["fairSharing"] == {"weightedShare": 0}
    assert status.cohort_status(view.cluster, "team") == {"fairSharing": {"weightedShare": 0}}


def test_facts_mark_the_queues_whose_condition_they_change() -> None:
    """A flavor, admission check or Topology marks the ClusterQueues naming it and their LocalQueues, and
    itself (its ``resource-in-use`` finalizer); a Cohort every Cohort; nothing else is marked."""
    other = cluster_queue("other", flavor_name="other-flavor")
    view = fold(
        with_checks(cluster_queue("cluster-queue"), "check"),
        other,
        local_queue("user-queue", "cluster-queue"),
        cohort("a"),
    )
    view.take_dirty_queues()
    core.fold(view, convert.kueue_fact(flavor("default-flavor")), seq=10)
    assert view.take_dirty_queues() == [
        ("ClusterQueue", "", "cluster-queue"),
        ("LocalQueue", "default", "user-queue"),
        ("ResourceFlavor", "", "default-flavor"),
    ]
    core.fold(view, types.ObjectDeleted(kind="ResourceFlavor", name="other-flavor"), seq=11)
    assert view.take_dirty_queues() == [("ClusterQueue", "", "other"), ("ResourceFlavor", "", "other-flavor")]
    core.fold(view, convert.kueue_fact(admission_check("check", active=True)), seq=12)
    assert view.take_dirty_queues() == [
        ("ClusterQueue", "", "cluster-queue"),
        ("LocalQueue", "default", "user-queue"),
        ("AdmissionCheck", "", "check"),
    ]
    core.fold(view, convert.kueue_fact(cohort("b", "b")), seq=13)
    assert view.take_dirty_queues() == [("Cohort", "", "a"), ("Cohort", "", "b")]
