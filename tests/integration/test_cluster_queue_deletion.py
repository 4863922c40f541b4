"""A ClusterQueue deleted while it holds quota stays, Terminating, until the last workload in it ends.

Kueue puts its ``kueue.x-k8s.io/resource-in-use`` finalizer on every ClusterQueue (webhook, and the
controller as a fallback); once the ClusterQueue is marked for deletion its cache terminates it (nothing
more is admitted, its Active condition is False ``Terminating``, its usage stays in its cohort) and the controller removes the finalizer
only when no workload reserves quota in it (clusterqueue_controller.go). Before, kueue-es let the object go
at once while its workloads ran on.
"""

from __future__ import annotations

import asyncio

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.integration.harness import cluster_queue, events_of, flavor, job, local_queue, wait_for
from tests.integration.test_workload_objects import (
    FINALIZER,
    _complete,
    _kueue,
    _started,
    conditions,
    eventually,
    gone,
    has_kueue_finalizer,
    set_up,
)

pytestmark = pytest.mark.timeout(30)


async def test_a_cluster_queue_deleted_while_in_use_terminates_until_its_last_workload_ends(
    api, bus: MemoryBus
) -> None:
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        runs = await _started(api, bus, "runs", parallelism=2)
        held = await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=has_kueue_finalizer,
        )
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        terminating = await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=lambda o: conditions(o).get("Active", {}).get("reason") == "Terminating",
        )
        await kube.apply_manifest(api, job("late", parallelism=1))
        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        # the running Job ends: the ClusterQueue is empty, its finalizer goes and so does the object
        await _complete(api, "runs", succeeded=2)
        await wait_for(bus, types.WorkloadFinished)
        await gone(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        admissions = await events_of(bus, types.WorkloadAdmitted)

    assert held["metadata"]["finalizers"] == [FINALIZER]
    assert terminating["metadata"].get("deletionTimestamp")
    active = conditions(terminating)["Active"]
    assert (active["status"], active["message"]) == ("False", "Can't admit new workloads; clusterQueue is terminating")
    assert waiting.workload.name.startswith("job-late-")
    # as Kueue's workload controller says it of a workload whose ClusterQueue is not active (getQueueBlocker)
    assert (waiting.reason, waiting.message) == ("Suspended", "ClusterQueue cluster-queue is inactive")
    assert [a.workload for a in admissions] == [runs]  # nothing admitted into it once deleted


async def test_an_empty_cluster_queue_deleted_goes_at_once(api, bus: MemoryBus) -> None:
    """No workload holds quota in it: the finalizer is taken off at once and the object is gone."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=has_kueue_finalizer,
        )
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        await gone(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        deleted = [e for e in await events_of(bus, types.ObjectDeleted) if e.kind == "ClusterQueue"]

    assert [d.name for d in deleted] == ["cluster-queue"]


def _in_cohort(name: str, cpu: int) -> dict:
    """ClusterQueue ``name`` in cohort ``co`` with ``cpu`` CPUs of default-flavor, borrowing allowed."""
    queue = cluster_queue(name, cpu=cpu)
    queue["spec"]["cohortName"] = "co"
    return queue


async def test_a_terminating_cluster_queue_keeps_its_borrowed_usage_in_its_cohort(api, bus: MemoryBus) -> None:
    """cq-a (2 CPUs) and cq-b (4) share cohort co; a 4-CPU Job in cq-a borrows 2 of cq-b's. cq-a deleted while
    it runs: in Kueue its usage stays in the cohort until it is gone (TerminateClusterQueue only marks it), so a
    3-CPU Job in cq-b waits (2 free), and is admitted once cq-a's Job ends. Found by a fresh-user check: a
    ClusterQueue read as deleted at once dropped its usage, and the cohort ran 7 CPUs on 6."""
    async with _kueue(api, bus):
        await kube.apply_manifest(api, flavor("default-flavor"))
        for name, cpu in (("cq-a", 2), ("cq-b", 4)):
            await kube.apply_manifest(api, _in_cohort(name, cpu))
            await kube.apply_manifest(api, local_queue(name, name))
        await kube.apply_manifest(api, job("borrower", queue="cq-a", parallelism=4))
        [borrowing] = await wait_for(bus, types.WorkloadAdmitted)
        await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cq-a",
            check=has_kueue_finalizer,
        )
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cq-a")
        await wait_for(bus, types.ClusterQueueObserved, cluster_queue__metadata__name="cq-a", count=2)
        await kube.apply_manifest(api, job("later", queue="cq-b", parallelism=3))
        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        await asyncio.sleep(0.5)
        while_terminating = await events_of(bus, types.WorkloadAdmitted)
        await _complete(api, "borrower", succeeded=4)
        await gone(api, resources.CLUSTER_QUEUES, name="cq-a")
        admitted = await wait_for(bus, types.WorkloadAdmitted, count=2)

    assert [a.workload for a in while_terminating] == [borrowing.workload]
    assert waiting.workload.name.startswith("job-later-") and waiting.reason == "WaitingForQuota"
    assert admitted[1].workload == waiting.workload and admitted[1].cluster_queue == "cq-b"


ACTIVE = {
    "type": "Active",
    "status": "True",
    "reason": "ByTest",
    "message": "by test",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
"""The Active condition Kueue's SetAdmissionCheckActive writes for the check's controller."""


def _checked(queue: dict) -> dict:
    """``queue`` with admission check ``check`` (example.com/check, made Active by the test)."""
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "check"}]}
    return queue


async def test_a_cluster_queue_whose_workloads_only_reserve_goes_at_once(api, bus: MemoryBus) -> None:
    """Kueue's clusterqueue_controller_test.go "Should delete the cluster without waiting for reserving only
    workloads to finish": a workload holding quota but not admitted (its check Pending) loses its reservation
    once the ClusterQueue is terminating (workload_controller.go reconcileOnClusterQueueActiveState), so the
    finalizer comes off and the ClusterQueue goes. Before admitter logic 42 the reservation stayed and the
    ClusterQueue stayed Terminating until the Job ended."""
    async with _kueue(api, bus, watch=("AdmissionCheck",)):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(
            api,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": "check"},
                "spec": {"controllerName": "example.com/check"},
            },
        )
        await kube.patch_object(
            api,
            resources.ADMISSION_CHECKS,
            name="check",
            patch={"status": {"conditions": [ACTIVE]}},
            subresource="status",
        )
        await kube.apply_manifest(api, _checked(cluster_queue("cluster-queue", cpu=3)))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("reserving", parallelism=1))
        [reserved] = await wait_for(bus, types.QuotaReserved)
        await eventually(api, resources.CLUSTER_QUEUES, name="cluster-queue", check=has_kueue_finalizer)
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        await gone(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        [released] = await wait_for(bus, types.QuotaReleased)
        workload = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=reserved.workload.name,
            check=lambda o: conditions(o).get("QuotaReserved", {}).get("status") == "False",
        )

    # the QuotaReserved message is the release's, then the pending one of a workload whose ClusterQueue is
    # inactive or missing (tests/integration/test_kueue_status.py has the release's)
    assert (released.workload, released.reason) == (reserved.workload, "ClusterQueueTerminating")
    assert "admission" not in workload.get("status", {})


async def test_a_cluster_queue_deleted_by_force_leaves_its_local_queue_without_one(api, bus: MemoryBus) -> None:
    """Kueue's localqueue_controller_test.go "Should update status when ClusterQueue are forcefully deleted": a
    ClusterQueue deleted while a Job runs in it, its finalizer taken off by hand, is gone; its LocalQueue turns
    Active=False ``ClusterQueueDoesNotExist`` "Can't submit new workloads to clusterQueue" with no counts and no
    flavor usage left in its status, although the Job still held quota when its ClusterQueue went (Kueue PR
    #13708, "fix stale LocalQueue status usage after ClusterQueue deletion": localqueue_controller_test.go "cluster
    queue deleted while its scheduler cache entry is still present"). Same as Kueue."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await _started(api, bus, "runs", parallelism=2)
        await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=lambda o: (o.get("status") or {}).get("admittedWorkloads") == 1,
        )
        await eventually(api, resources.CLUSTER_QUEUES, name="cluster-queue", check=has_kueue_finalizer)
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=lambda o: bool(o["metadata"].get("deletionTimestamp")),
        )
        await kube.patch_object(
            api, resources.CLUSTER_QUEUES, name="cluster-queue", patch={"metadata": {"finalizers": None}}
        )
        await gone(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        lq = await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=lambda o: conditions(o).get("Active", {}).get("reason") == "ClusterQueueDoesNotExist",
        )

    active = conditions(lq)["Active"]
    assert (active["status"], active["message"]) == ("False", "Can't submit new workloads to clusterQueue")
    status = lq["status"]
    assert "flavorsReservation" not in status and "flavorsUsage" not in status
    assert (status.get("pendingWorkloads"), status.get("reservingWorkloads"), status.get("admittedWorkloads")) == (
        0,
        0,
        0,
    )
