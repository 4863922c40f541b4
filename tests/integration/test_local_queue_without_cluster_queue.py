"""A LocalQueue that names no ClusterQueue, as Kueue allows (localqueue_types.go: ``spec.clusterQueue`` is
``+optional``, immutable by the CEL rule ``self == oldSelf`` once set).

Kueue's LocalQueue reconciler looks up a ClusterQueue of name "", finds none and sets Active=False
``ClusterQueueDoesNotExist`` "Can't submit new workloads to clusterQueue" (localqueue_controller.go Reconcile); the
queue manager keeps its workloads in the LocalQueue, counted as pending, but in no ClusterQueue
(manager.go AddOrUpdateWorkloadWithoutLock), and the workload controller says "ClusterQueue  doesn't exist" (the
name is empty: workload_controller.go getQueueBlocker). A transition rule runs only when the old object has the
field, so the first update that names a ClusterQueue is allowed; the manager moves the workloads there
(UpdateLocalQueue) and they are admitted. A second name is refused: "field is immutable".
"""

from __future__ import annotations

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources
from tests.integration.harness import JOBS, cluster_queue, flavor, job, wait_for
from tests.integration.test_workload_objects import _kueue, conditions, eventually

pytestmark = pytest.mark.timeout(30)

NO_CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "user-queue", "namespace": "default"},
    "spec": {},
}


def _active(obj: dict) -> tuple[str, str, str]:
    found = conditions(obj).get("Active", {})
    return found.get("status", ""), found.get("reason", ""), found.get("message", "")


async def test_a_local_queue_without_a_cluster_queue_holds_its_jobs_until_it_names_one(api, bus: MemoryBus) -> None:
    """The queue is inactive ``ClusterQueueDoesNotExist``; its Job's workload pends with Kueue's message and is
    counted in the queue's pendingWorkloads; naming the ClusterQueue admits and starts it; naming another is
    refused."""
    async with _kueue(api, bus):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue"))
        created = await kube.apply_manifest(api, NO_CLUSTER_QUEUE)
        assert "clusterQueue" not in created["spec"]
        lq = await eventually(
            api, resources.LOCAL_QUEUES, namespace="default", name="user-queue", check=lambda o: bool(_active(o)[0])
        )
        assert _active(lq) == ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")

        await kube.apply_manifest(api, job("waits"))
        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        assert waiting.message == "ClusterQueue  doesn't exist"
        workload = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=waiting.workload.name,
            check=lambda o: "QuotaReserved" in conditions(o),
        )
        reserved = conditions(workload)["QuotaReserved"]
        assert (reserved["status"], reserved["message"]) == ("False", "ClusterQueue  doesn't exist")
        await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=lambda o: (o.get("status") or {}).get("pendingWorkloads") == 1,
        )

        # from no ClusterQueue to one: the CEL rule does not run (no old value), the workload moves and is admitted
        await kube.patch_object(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            patch={"spec": {"clusterQueue": "cluster-queue"}},
        )
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        assert admitted.workload == waiting.workload
        await eventually(api, JOBS, namespace="default", name="waits", check=lambda o: o["spec"]["suspend"] is False)
        lq = await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=lambda o: _active(o)[0] == "True",
        )
        assert _active(lq) == ("True", "Ready", "Can submit new workloads to localQueue")

        with pytest.raises(errors.ApiError, match="field is immutable"):
            await kube.patch_object(
                api,
                resources.LOCAL_QUEUES,
                namespace="default",
                name="user-queue",
                patch={"spec": {"clusterQueue": "other-queue"}},
            )
