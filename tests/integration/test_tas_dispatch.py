"""The dispatcher's side of Topology-Aware Scheduling against the emulated API server (SEMANTICS-ADVANCED A.12).

A TopologyAssigned decision (committed with the QuotaReserved, before WorkloadAdmitted) is
written into the Workload's ``status.admission.podSetAssignments[].topologyAssignment``;
the started Job's pod template gets the ``kueue.x-k8s.io/topology`` gate, the pod set label
and the workload annotation; the pods the Job controller then creates (played here by
:func:`create_job_pods`) are ungated one by one with their domain's nodeSelector, by rank
for an Indexed Job and greedily otherwise, respecting pods already placed; an eviction
takes the gate out of the template again.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import msgspec
import pytest

from kueue_es.events import models, tas, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher import core
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    NOW_MS,
    commit,
    dispatcher_with_consumer,
    eviction,
    job,
    running,
    set_up_queues,
    wait_for,
    watch_all,
)

pytestmark = pytest.mark.timeout(60)

HOST = tas.HOSTNAME_LABEL
RACK = "cloud.example.com/rack"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def tas_job(name: str, *, pods: int, indexed: bool) -> dict[str, Any]:
    """A queued Job of ``pods`` pods asking for one rack (``podset-required-topology``)."""
    manifest = job(name, parallelism=pods, completions=pods, cpu="500m")
    manifest["spec"]["template"]["metadata"] = {"annotations": {tas.REQUIRED_ANNOTATION: RACK}}
    if indexed:
        manifest["spec"]["completionMode"] = "Indexed"
    return manifest


async def create_job_pods(api: Any, name: str, indexes: list[int], *, indexed: bool) -> None:
    """Create pods of Job ``name`` as the Job controller does: the template's labels, annotations and
    scheduling gates, plus the completion index label of an Indexed Job; ``indexes`` in creation order.
    Pods of an Indexed Job are named ``<job>-<9 - index>``, so name order is not index order."""
    stored = await kube.get_object(api, JOBS, namespace="default", name=name)
    template = stored["spec"]["template"]
    for index in indexes:
        labels = dict(template.get("metadata", {}).get("labels") or {})
        if indexed:
            labels[INDEX_LABEL] = str(index)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                # an Indexed Job's pod names do not sort by index (they carry a random suffix in Kubernetes)
                "name": f"{name}-{9 - index}" if indexed else f"{name}-{index}",
                "namespace": "default",
                "labels": labels,
                "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": stored["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": msgspec.json.decode(msgspec.json.encode(template["spec"])),
        }
        await kube.create_object(api, resources.PODS, namespace="default", body=body)


async def pods_of(api: Any, name: str) -> dict[str, dict[str, Any]]:
    items, _ = await kube.list_objects(api, resources.PODS, namespace="default")
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(f"{name}-")}


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == core.TOPOLOGY_GATE for g in pod["spec"].get("schedulingGates") or [])


async def wait_until_async(condition, *, what: str, timeout: float = 10.0) -> None:
    """Poll an async ``condition`` until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def admit_with_topology(bus: MemoryBus, ref: types.WorkloadRef, assignment: tas.Assignment, count: int):
    """Commit QuotaReserved + TopologyAssigned + WorkloadAdmitted for pod set ``main``, as the admitter does."""
    reserved = types.QuotaReserved(
        workload=ref,
        cluster_queue="cluster-queue",
        pod_set_assignments=[
            types.PodSetAssignment(
                name="main", flavors={"cpu": "spot", "memory": "spot"}, resource_usage={"cpu": 500 * count}, count=count
            )
        ],
        at_ms=NOW_MS,
    )
    assigned = types.TopologyAssigned(
        workload=ref, cluster_queue="cluster-queue", assignments={"main": tas.encode(assignment)}, at_ms=NOW_MS
    )
    admitted = types.admitted(reserved, at_ms=NOW_MS)
    return await commit(bus, reserved, assigned, admitted)


def assignment(*domains: tuple[str, int]) -> tas.Assignment:
    return tas.Assignment(
        levels=(HOST,), domains=tuple(tas.DomainAssignment(values=(host,), count=n) for host, n in domains)
    )


def watcher_and_ungating_dispatcher(api, bus: MemoryBus, dispatcher, consumer) -> list:
    """The coroutines of a watcher and a dispatcher that folds, consumes, watches pods and ungates."""
    return [
        *watch_all(Watcher(bus=bus, api=api)),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        dispatcher.watch_pods(),
        dispatcher.ungate_forever(retry_seconds=0.1),
    ]


async def test_indexed_job_is_started_gated_and_its_pods_ungated_by_rank(api, bus: MemoryBus) -> None:
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    ta = assignment(("node-a", 2), ("node-b", 1), ("node-c", 1))
    async with running(*watcher_and_ungating_dispatcher(api, bus, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, tas_job("ranked", pods=4, indexed=True))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        wl = observed.workload
        assert wl.spec.pod_sets[0].topology_request is not None
        ref = types.WorkloadRef(namespace="default", name=wl.metadata.name, uid=wl.metadata.uid)
        await admit_with_topology(bus, ref, ta, count=4)
        [applied] = await wait_for(bus, types.DispatchApplied)
        assert applied.action == "StartJob"

        started = await kube.get_object(api, JOBS, namespace="default", name="ranked")
        workload = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=wl.metadata.name)

        # the Job controller creates the pods, the highest index first
        await create_job_pods(api, "ranked", [3, 2, 1, 0], indexed=True)

        async def all_ungated() -> bool:
            return not any(gated(p) for p in (await pods_of(api, "ranked")).values())

        await wait_until_async(all_ungated, what="every pod ungated")
        pods = await pods_of(api, "ranked")

        await commit(bus, eviction(ref))
        await wait_for(bus, types.DispatchApplied, action="Evict")
        stopped = await kube.get_object(api, JOBS, namespace="default", name="ranked")

    template = started["spec"]["template"]
    assert started["spec"]["suspend"] is False
    assert template["spec"]["schedulingGates"] == [{"name": core.TOPOLOGY_GATE}]
    assert template["metadata"]["labels"][core.PODSET_LABEL] == "main"
    assert template["metadata"]["annotations"][core.WORKLOAD_ANNOTATION] == wl.metadata.name
    assert template["metadata"]["annotations"][tas.REQUIRED_ANNOTATION] == RACK  # its own, kept
    assert template["spec"]["nodeSelector"] == {"instance-type": "spot"}  # the flavor's; hosts come per pod

    [psa] = workload["status"]["admission"]["podSetAssignments"]
    assert psa["topologyAssignment"] == msgspec.to_builtins(tas.encode(ta))
    assert tas.decode(msgspec.convert(psa["topologyAssignment"], models.TopologyAssignment)) == ta
    assert workload["spec"]["podSets"][0]["topologyRequest"]["required"] == RACK
    assert workload["spec"]["podSets"][0]["topologyRequest"]["podIndexLabel"] == INDEX_LABEL

    hosts = {pod["metadata"]["labels"][INDEX_LABEL]: pod["spec"]["nodeSelector"][HOST] for pod in pods.values()}
    assert hosts == {"0": "node-a", "1": "node-a", "2": "node-b", "3": "node-c"}  # by rank, not by name
    assert all(p["spec"]["nodeSelector"]["instance-type"] == "spot" for p in pods.values())
    assert dispatcher.ungated == 4

    stopped_template = stopped["spec"]["template"]
    assert stopped["spec"]["suspend"] is True
    assert not stopped_template["spec"].get("schedulingGates")
    assert core.PODSET_LABEL not in (stopped_template.get("metadata", {}).get("labels") or {})


async def test_a_job_saying_unconstrained_false_starts_under_implied_tas(api, bus: MemoryBus) -> None:
    """``podset-unconstrained-topology: "false"`` asks for no topology, yet Kueue keeps it in the request
    (jobframework/tas.go Build), so its PodSetUpdate adds no ``"true"`` of its own (podset.go FromAssignment):
    placed by a TAS flavor, the Job starts with its own annotation (it failed FailedToStart on the conflict)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    manifest = tas_job("not-unconstrained", pods=2, indexed=True)
    manifest["spec"]["template"]["metadata"] = {"annotations": {tas.UNCONSTRAINED_ANNOTATION: "false"}}
    async with running(*watcher_and_ungating_dispatcher(api, bus, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, manifest)
        [observed] = await wait_for(bus, types.WorkloadObserved)
        wl = observed.workload
        ref = types.WorkloadRef(namespace="default", name=wl.metadata.name, uid=wl.metadata.uid)
        await admit_with_topology(bus, ref, assignment(("node-a", 2)), count=2)
        [applied] = await wait_for(bus, types.DispatchApplied)
        started = await kube.get_object(api, JOBS, namespace="default", name="not-unconstrained")
        workload = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=wl.metadata.name)

    request = wl.spec.pod_sets[0].topology_request
    assert request == models.PodSetTopologyRequest(unconstrained=False, pod_index_label=INDEX_LABEL)
    assert not tas.requests_tas(request)
    assert applied.action == "StartJob" and started["spec"]["suspend"] is False
    assert started["spec"]["template"]["metadata"]["annotations"][tas.UNCONSTRAINED_ANNOTATION] == "false"
    assert started["spec"]["template"]["spec"]["schedulingGates"] == [{"name": core.TOPOLOGY_GATE}]
    assert workload["spec"]["podSets"][0]["topologyRequest"]["unconstrained"] is False


async def test_unindexed_pods_fill_domains_greedily_around_pods_already_placed(api, bus: MemoryBus) -> None:
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    ta = assignment(("node-a", 2), ("node-b", 3))
    async with running(*watcher_and_ungating_dispatcher(api, bus, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, tas_job("greedy", pods=5, indexed=False))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        wl = observed.workload
        ref = types.WorkloadRef(namespace="default", name=wl.metadata.name, uid=wl.metadata.uid)
        await admit_with_topology(bus, ref, ta, count=5)
        await wait_for(bus, types.DispatchApplied)

        await create_job_pods(api, "greedy", [0, 1, 2], indexed=False)

        async def ungated(n: int) -> bool:
            pods = (await pods_of(api, "greedy")).values()
            return sum(not gated(p) for p in pods) == n

        await wait_until_async(lambda: ungated(3), what="three pods ungated")
        first = await pods_of(api, "greedy")
        # a pod on node-b fails and is deleted; the Job controller replaces it and adds the last two
        lost = next(n for n, p in sorted(first.items()) if p["spec"]["nodeSelector"][HOST] == "node-b")
        await kube.delete_object(api, resources.PODS, namespace="default", name=lost)
        await create_job_pods(api, "greedy", [3, 4, 5], indexed=False)
        await wait_until_async(lambda: ungated(5), what="five pods ungated")
        pods = await pods_of(api, "greedy")

    assert [n for n, p in sorted(first.items())] == ["greedy-0", "greedy-1", "greedy-2"]
    assert {n: p["spec"]["nodeSelector"][HOST] for n, p in first.items()} == {
        "greedy-0": "node-a",
        "greedy-1": "node-a",
        "greedy-2": "node-b",
    }
    per_node = collections.Counter(p["spec"]["nodeSelector"][HOST] for p in pods.values() if not gated(p))
    assert per_node == {"node-a": 2, "node-b": 3}  # the assignment's counts, with the replacement on node-b
    assert len(pods) == 5
