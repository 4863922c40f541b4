"""A ClusterQueue deleted while it holds quota stays, Terminating, until the last workload in it ends.

Kueue puts its ``kueue.x-k8s.io/resource-in-use`` finalizer on every ClusterQueue (webhook, and the
controller as a fallback); once the ClusterQueue is marked for deletion its cache terminates it (nothing
more is admitted, its Active condition is False ``Terminating``) and the controller removes the finalizer
only when no workload reserves quota in it (clusterqueue_controller.go). Before, kueue-es let the object go
at once while its workloads ran on.
"""

from __future__ import annotations

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.integration.harness import events_of, job, wait_for
from tests.integration.test_workload_objects import _complete, _kueue, _started, conditions, eventually, gone, set_up

pytestmark = pytest.mark.timeout(30)

FINALIZER = "kueue.x-k8s.io/resource-in-use"


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
            check=lambda o: FINALIZER in (o["metadata"].get("finalizers") or []),
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
    assert waiting.reason == "Misconfigured"
    assert [a.workload for a in admissions] == [runs]  # nothing admitted into it once deleted


async def test_an_empty_cluster_queue_deleted_goes_at_once(api, bus: MemoryBus) -> None:
    """No workload holds quota in it: the finalizer is taken off at once and the object is gone."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=lambda o: FINALIZER in (o["metadata"].get("finalizers") or []),
        )
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        await gone(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        deleted = [e for e in await events_of(bus, types.ObjectDeleted) if e.kind == "ClusterQueue"]

    assert [d.name for d in deleted] == ["cluster-queue"]
