"""A ResourceFlavor, AdmissionCheck or Topology deleted while in use stays until nothing names it.

Kueue puts its ``kueue.x-k8s.io/resource-in-use`` finalizer on every ResourceFlavor (webhook, and the
controller as a fallback), AdmissionCheck and Topology. Marked for deletion, the object stays in Kueue's
cache as it was, so the ClusterQueues naming it stay active and go on admitting with it; the controller
takes the finalizer off only once no ClusterQueue names the flavor or the check
(resourceflavor_controller.go, admissioncheck_controller.go), or no ResourceFlavor the Topology (tas
topology_controller.go). Before, kueue-es let such an object go at once: ``kubectl delete resourceflavor``
made every ClusterQueue naming it inactive (FlavorNotFound) with its workloads running.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.integration.harness import cluster_queue, events_of, flavor, job, wait_for
from tests.integration.test_workload_objects import (
    FINALIZER,
    _kueue,
    conditions,
    eventually,
    gone,
    has_kueue_finalizer,
    set_up,
)

pytestmark = pytest.mark.timeout(30)


async def _held_then_deleted(api, ref: resources.ResourceRef, name: str) -> dict[str, Any]:
    """Wait for Kueue's finalizer on ``name``, delete it, and return it as the server has it then."""
    await eventually(api, ref, name=name, check=has_kueue_finalizer)
    await kube.delete_object(api, ref, name=name)
    return await eventually(api, ref, name=name, check=lambda o: bool(o["metadata"].get("deletionTimestamp")))


async def _still_there(api, ref: resources.ResourceRef, name: str, bus: MemoryBus) -> dict[str, Any]:
    """The object after the services had their turn at it: a later fact is folded, so they saw the deletion."""
    await kube.apply_manifest(api, flavor("marker"))
    await wait_for(bus, types.ResourceFlavorObserved, flavor__metadata__name="marker")
    await eventually(api, resources.RESOURCE_FLAVORS, name="marker", check=has_kueue_finalizer)
    return await kube.get_object(api, ref, name=name)


async def test_a_flavor_deleted_while_a_cluster_queue_names_it_stays_and_admits_until_unnamed(
    api, bus: MemoryBus
) -> None:
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await _held_then_deleted(api, resources.RESOURCE_FLAVORS, "default-flavor")
        terminating = await _still_there(api, resources.RESOURCE_FLAVORS, "default-flavor", bus)
        # the ClusterQueue stays active, and the flavor is used for a new Job
        await kube.apply_manifest(api, job("after", parallelism=2))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        queue = await eventually(
            api, resources.CLUSTER_QUEUES, name="cluster-queue", check=lambda o: "Active" in conditions(o)
        )
        # the ClusterQueue names another flavor now: nothing names default-flavor, it goes
        await kube.apply_manifest(api, flavor("spot"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", flavor_name="spot", cpu=3))
        await gone(api, resources.RESOURCE_FLAVORS, name="default-flavor")
        deleted = [e for e in await events_of(bus, types.ObjectDeleted) if e.kind == "ResourceFlavor"]

    assert terminating["metadata"]["finalizers"] == [FINALIZER]
    assert terminating["metadata"].get("deletionTimestamp")
    assert [a.flavors for a in admitted.pod_set_assignments] == [{"cpu": "default-flavor", "memory": "default-flavor"}]
    assert conditions(queue)["Active"]["status"] == "True"
    assert [d.name for d in deleted] == ["default-flavor"]


async def test_a_flavor_no_cluster_queue_names_goes_at_once(api, bus: MemoryBus) -> None:
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, flavor("unused"))
        await eventually(api, resources.RESOURCE_FLAVORS, name="unused", check=has_kueue_finalizer)
        await kube.delete_object(api, resources.RESOURCE_FLAVORS, name="unused")
        await gone(api, resources.RESOURCE_FLAVORS, name="unused")
        flavor_held = await kube.get_object(api, resources.RESOURCE_FLAVORS, name="default-flavor")

    assert flavor_held["metadata"]["finalizers"] == [FINALIZER]


def _admission_check(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/check"},
    }


def _with_check(queue: dict[str, Any], check: str) -> dict[str, Any]:
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return queue


async def test_an_admission_check_deleted_while_a_cluster_queue_names_it_stays_until_unnamed(
    api, bus: MemoryBus
) -> None:
    async with _kueue(api, bus, watch=("AdmissionCheck",)):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, _admission_check("check"))
        await kube.apply_manifest(api, _with_check(cluster_queue("cluster-queue", cpu=3), "check"))
        await _held_then_deleted(api, resources.ADMISSION_CHECKS, "check")
        terminating = await _still_there(api, resources.ADMISSION_CHECKS, "check", bus)
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=3))  # the check no longer named
        await gone(api, resources.ADMISSION_CHECKS, name="check")

    assert terminating["metadata"]["finalizers"] == [FINALIZER]


def _topology(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
    }


async def test_a_topology_deleted_while_a_flavor_names_it_stays_until_the_flavor_is_gone(api, bus: MemoryBus) -> None:
    async with _kueue(api, bus, watch=("Topology",)):
        await kube.apply_manifest(api, _topology("default"))
        tas_flavor = flavor("tas-flavor", node_labels={"example.com/pool": "tas"})
        tas_flavor["spec"]["topologyName"] = "default"
        await kube.apply_manifest(api, tas_flavor)
        await _held_then_deleted(api, resources.TOPOLOGIES, "default")
        terminating = await _still_there(api, resources.TOPOLOGIES, "default", bus)
        # no ClusterQueue names the flavor: it goes once deleted, and then nothing names the Topology
        await eventually(api, resources.RESOURCE_FLAVORS, name="tas-flavor", check=has_kueue_finalizer)
        await kube.delete_object(api, resources.RESOURCE_FLAVORS, name="tas-flavor")
        await gone(api, resources.RESOURCE_FLAVORS, name="tas-flavor")
        await gone(api, resources.TOPOLOGIES, name="default")

    assert terminating["metadata"]["finalizers"] == [FINALIZER]


@pytest.mark.parametrize("kind", ["ResourceFlavor", "AdmissionCheck"])
async def test_a_flavor_or_check_deleted_while_named_goes_once_its_cluster_queue_is_deleted(
    api, bus: MemoryBus, kind: str
) -> None:
    """Kueue's resourceflavor_controller_test.go and admissioncheck_controller_test.go "Should delete the
    resourceFlavor|admissionCheck when the corresponding clusterQueue is deleted": held by its finalizer while
    the ClusterQueue names it, a change of the ClusterQueue's cohort leaves it held, and it goes once the
    (empty) ClusterQueue is deleted."""
    ref = resources.RESOURCE_FLAVORS if kind == "ResourceFlavor" else resources.ADMISSION_CHECKS
    name = "default-flavor" if kind == "ResourceFlavor" else "check"
    async with _kueue(api, bus, watch=("AdmissionCheck",)):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, _admission_check("check"))
        await kube.apply_manifest(api, _with_check(cluster_queue("cluster-queue", cpu=3), "check"))
        await _held_then_deleted(api, ref, name)
        in_cohort = _with_check(cluster_queue("cluster-queue", cpu=3), "check")
        in_cohort["spec"]["cohortName"] = "foo-cohort"
        await kube.apply_manifest(api, in_cohort)
        await wait_for(bus, types.ClusterQueueObserved, cluster_queue__spec__cohort_name="foo-cohort")
        still = await _still_there(api, ref, name, bus)
        await eventually(api, resources.CLUSTER_QUEUES, name="cluster-queue", check=has_kueue_finalizer)
        await kube.delete_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        await gone(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        await gone(api, ref, name=name)

    assert still["metadata"]["finalizers"] == [FINALIZER] and still["metadata"].get("deletionTimestamp")


async def test_objects_finalized_at_creation_still_go_once_unused(bus: MemoryBus) -> None:
    """With Kueue's mclusterqueue.kb.io and mresourceflavor.kb.io played (``resource_in_use_finalizer``, as in
    ``demo``), a ClusterQueue and a ResourceFlavor carry the finalizer from their creation, before the services
    ever saw them; deleted while nothing uses them, the dispatcher still takes it off and they go, as Kueue's
    clusterqueue and resourceflavor controllers let them."""
    from kueue_es.sim.emulator import serve_emulator

    async with serve_emulator(bookmark_interval=0.2, resource_in_use_finalizer=True) as emu:
        api = await kube.make_api_client(server=emu.url)
        try:
            async with _kueue(api, bus):
                await set_up(api, cpu=3)
                created = [
                    await kube.apply_manifest(api, flavor("unused")),
                    await kube.apply_manifest(api, cluster_queue("idle", flavor_name="unused", cpu=1)),
                ]
                await kube.delete_object(api, resources.CLUSTER_QUEUES, name="idle")
                await gone(api, resources.CLUSTER_QUEUES, name="idle")
                await kube.delete_object(api, resources.RESOURCE_FLAVORS, name="unused")
                await gone(api, resources.RESOURCE_FLAVORS, name="unused")
        finally:
            await api.close()
    assert [c["metadata"]["finalizers"] for c in created] == [[FINALIZER], [FINALIZER]]
