"""A Pod or a pod group naming a prebuilt Workload (``kueue.x-k8s.io/prebuilt-workload-name``) runs on it.

Watcher, admitter and dispatcher (with its pod watches) in one process on one MemoryBus and one emulated API
server with Kueue's pod webhook (a queue-labelled pod is created gated). As Kueue's pod reconciler does
(pkg/controller/jobs/pod/pod_controller.go, jobframework/reconciler.go ensureOneWorkload): no Workload is made
for the pods; a single pod becomes its Workload's controller owner (``kueue.x-k8s.io/job-uid`` label), a pod
group's pods each an owner; the pods are ungated when it is admitted, also when it was admitted before they
came; their finish is the Workload's; a Workload that does not match them is finished ``OutOfSync`` and they
stay gated. Before, the Workload was admitted on its own and the pods got one of their own beside it: twice
the quota, and a group's Workload overwritten by the group's.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import pods as pod_integration
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    dispatcher_with_consumer,
    events_of,
    pod_services,
    running,
    set_up_queues,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
CONTAINERS = [
    {
        "name": "c",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1"}},
        # what kube-apiserver defaults in the pod's container: a prebuilt Workload (a custom resource, so not
        # defaulted) must carry it too to be equivalent to the pod (Kueue compares containers exactly)
        "imagePullPolicy": "Always",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
]


def pod(name: str, workload: str, *, group: str = "", total: int = 0) -> dict[str, Any]:
    """A queue-labelled pod (1 CPU) naming prebuilt Workload ``workload``; of pod group ``group`` of ``total``."""
    labels = {"kueue.x-k8s.io/queue-name": "user-queue", PREBUILT_LABEL: workload}
    annotations = {}
    if group:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {"containers": copy.deepcopy(CONTAINERS), "restartPolicy": "Never"},
    }


ROLE = pod_integration.role_hash({**pod("any", "any"), "spec": {**pod("any", "any")["spec"], "priority": 0}})
"""The role (pod set name) of every pod of these groups: Kueue's hash of their shape, as the pod webhook sees it
(after the API server's Priority admission gave it ``priority: 0``)."""


def prebuilt_workload(name: str, *, pod_set: str = "main", count: int = 1, cpu: str = "1") -> dict[str, Any]:
    """The Workload a user writes for the pods: the queue, and one pod set of ``count`` pods like them."""
    containers = copy.deepcopy(CONTAINERS)
    containers[0]["resources"]["requests"]["cpu"] = cpu
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": pod_set,
                    "count": count,
                    "template": {"spec": {"containers": containers, "restartPolicy": "Never"}},
                }
            ],
        },
    }


def services(bus: MemoryBus, api: Any, dispatcher: Any, consumer: Any) -> list[Any]:
    return pod_services(bus, api, dispatcher, consumer)


async def object_where(api: Any, ref: Any, name: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll object ``default/name`` until ``check(object)`` holds (20 s)."""
    async with asyncio.timeout(20):
        while True:
            try:
                current = await kube.get_object(api, ref, namespace="default", name=name)
            except kube.errors.NotFoundError:
                current = None
            if current is not None and check(current):
                return current
            await asyncio.sleep(0.02)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def admitted(obj: dict[str, Any]) -> bool:
    return condition(obj, "Admitted").get("status") == "True"


def ungated(obj: dict[str, Any]) -> bool:
    return not pod_integration.is_gated(obj)


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {ref["uid"]: ref for ref in obj["metadata"].get("ownerReferences") or []}


async def succeed(api: Any, name: str, *, message: str = "") -> None:
    """Pod ``default/name`` Succeeded, as its kubelet reports it."""
    status = {"phase": "Succeeded", **({"message": message} if message else {})}
    await kube.patch_object(
        api, resources.PODS, namespace="default", name=name, patch={"status": status}, subresource="status"
    )


async def pod_events(api: Any, name: str, reason: str) -> list[dict[str, Any]]:
    """The Events ``reason`` about pod ``default/name``."""
    items, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


async def workload_names(bus: MemoryBus) -> set[str]:
    return {e.workload.metadata.name for e in await events_of(bus, types.WorkloadObserved)}


async def test_a_pod_runs_on_a_workload_admitted_before_it(api, bus: MemoryBus) -> None:
    """The Workload first, admitted on its own; then the pod naming it: it gets no Workload of its own, becomes the
    Workload's controller owner and is ungated at once with the admission's flavor (reconciler step 7, Run)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        created = await kube.apply_manifest(api, prebuilt_workload("wl-a"))
        await object_where(api, resources.WORKLOADS, "wl-a", admitted)
        pod_obj = await kube.apply_manifest(api, pod("pod-a", "wl-a"))
        started = await object_where(api, resources.PODS, "pod-a", ungated)
        uid = pod_obj["metadata"]["uid"]
        wl = await object_where(api, resources.WORKLOADS, "wl-a", lambda o: uid in owners(o))
        async with asyncio.timeout(10):  # recorded once the ungating write landed
            while not (started_events := await pod_events(api, "pod-a", "Started")):
                await asyncio.sleep(0.02)
    assert await workload_names(bus) == {"wl-a"}  # none made for the pod
    assert [e["message"] for e in started_events] == [
        "Admitted by clusterQueue cluster-queue"
    ]  # Pod.Run's, as after an admission
    assert len(await events_of(bus, types.WorkloadAdmitted)) == 1
    assert started["spec"]["nodeSelector"] == {"instance-type": "spot"}
    assert started["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "wl-a"
    assert owners(wl)[uid] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "pod-a",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
    assert wl["spec"]["podSets"] == created["spec"]["podSets"]  # the user's, not rewritten from the pod
    assert "finalizers" not in wl["metadata"]


async def test_a_pod_waits_for_its_workload_and_its_finish_is_the_workloads(api, bus: MemoryBus) -> None:
    """The pod first: it stays gated and nothing is queued for it; the Workload made later (its pod set named as
    its user likes) is adopted, admitted and the pod ungated; the pod's success finishes the Workload with the
    pod's message (Finished)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        pod_obj = await kube.apply_manifest(api, pod("pod-b", "wl-b"))
        await asyncio.sleep(0.5)
        assert await events_of(bus, types.WorkloadObserved) == []
        assert pod_integration.is_gated(await kube.get_object(api, resources.PODS, namespace="default", name="pod-b"))
        created = await kube.apply_manifest(api, prebuilt_workload("wl-b", pod_set="worker"))
        await object_where(api, resources.PODS, "pod-b", ungated)
        await succeed(api, "pod-b", message="done")
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=10)
        wl = await object_where(api, resources.WORKLOADS, "wl-b", lambda o: condition(o, "Finished") != {})
    [observed] = await events_of(bus, types.WorkloadObserved)
    assert observed.workload.owner is not None and observed.workload.owner.uid == pod_obj["metadata"]["uid"]
    assert finished.workload.uid == created["metadata"]["uid"] == observed.workload.metadata.uid
    assert (finished.succeeded, finished.reason, finished.message) == (True, "Succeeded", "done")
    assert condition(wl, "Finished")["reason"] == "Succeeded"


async def test_a_workload_unlike_its_pod_is_finished_out_of_sync(api, bus: MemoryBus) -> None:
    """A Workload asking 2 CPU named by a pod of 1: it is finished OutOfSync (Kueue's message), its quota given
    back, and the pod stays gated."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-c", cpu="2"))
        await object_where(api, resources.WORKLOADS, "wl-c", admitted)
        await kube.apply_manifest(api, pod("pod-c", "wl-c"))
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=10)
        await wait_for(bus, types.QuotaReleased, timeout=10)
        await asyncio.sleep(0.5)
        still = await kube.get_object(api, resources.PODS, namespace="default", name="pod-c")
    assert (finished.reason, finished.message) == (
        "OutOfSync",
        "The prebuilt workload is out of sync with its user job",
    )
    assert pod_integration.is_gated(still)
    assert await workload_names(bus) == {"wl-c"}


async def test_a_pod_group_runs_on_its_workload_and_finishes_it(api, bus: MemoryBus) -> None:
    """Two pods of group ``wl-g`` naming Workload ``wl-g`` (one pod set named by their role, of 2): each pod an
    owner of it, not the controller, no job-uid label, nothing else written on it; both ungated once it is
    admitted; both succeeded finish it, "Pods succeeded: 2/2."."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        created = await kube.apply_manifest(api, prebuilt_workload("wl-g", pod_set=ROLE, count=2))
        uids = set()
        for name in ("g-a", "g-b"):
            uids.add((await kube.apply_manifest(api, pod(name, "wl-g", group="wl-g", total=2)))["metadata"]["uid"])
        for name in ("g-a", "g-b"):
            await object_where(api, resources.PODS, name, ungated)
        wl = await object_where(api, resources.WORKLOADS, "wl-g", lambda o: set(owners(o)) == uids)
        for name in ("g-a", "g-b"):
            await succeed(api, name)
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=10)
    assert await workload_names(bus) == {"wl-g"}
    assert len(await events_of(bus, types.WorkloadAdmitted)) == 1
    assert all("controller" not in ref for ref in owners(wl).values())
    assert "labels" not in wl["metadata"] and "finalizers" not in wl["metadata"]
    assert "kueue.x-k8s.io/is-group-workload" not in (wl["metadata"].get("annotations") or {})
    assert wl["spec"]["podSets"] == created["spec"]["podSets"]
    assert (finished.succeeded, finished.message) == (True, "Pods succeeded: 2/2.")
    assert finished.workload.uid == created["metadata"]["uid"]


async def test_a_pod_group_larger_than_its_workload_stays_gated(api, bus: MemoryBus) -> None:
    """A Workload of one pod named by a group of two (its queue has no room yet): once both pods are there the
    group's role count is more than its pod set holds, so it is finished OutOfSync; neither pod runs nor is
    deleted."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=0)
        await kube.apply_manifest(api, prebuilt_workload("wl-h", pod_set=ROLE, count=1))
        for name in ("h-a", "h-b"):
            await kube.apply_manifest(api, pod(name, "wl-h", group="wl-h", total=2))
        finished = await wait_for(bus, types.WorkloadFinished, timeout=10)
        await asyncio.sleep(0.5)
        listed, _ = await kube.list_objects(api, resources.PODS, namespace="default")
    assert [f.reason for f in finished] == ["OutOfSync"]
    assert len(listed) == 2 and all(pod_integration.is_gated(p) for p in listed)
    assert await workload_names(bus) == {"wl-h"}
    assert await events_of(bus, types.WorkloadAdmitted) == []


async def test_a_pod_joining_a_running_group_beyond_its_workload_stops_it(api, bus: MemoryBus) -> None:
    """A group's first pod runs on its admitted Workload of one pod; a second pod joins: the Workload no longer
    matches the group and is finished OutOfSync, the running pod is stopped ("missing workload") and the new
    one is neither started nor deleted (Kueue's prebuilt path checks the match before it starts any pod, and
    deletes no excess pod)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-j", pod_set=ROLE, count=1))
        await kube.apply_manifest(api, pod("j-a", "wl-j", group="wl-j", total=2))
        await object_where(api, resources.PODS, "j-a", ungated)
        await kube.apply_manifest(api, pod("j-b", "wl-j", group="wl-j", total=2))
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=10)
        async with asyncio.timeout(20):
            while (names := {p["metadata"]["name"] for p in (await kube.list_objects(api, resources.PODS))[0]}) != {
                "j-b"
            }:
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        left = await kube.get_object(api, resources.PODS, namespace="default", name="j-b")
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    assert finished.reason == "OutOfSync" and names == {"j-b"}
    assert pod_integration.is_gated(left)
    events = {(e["involvedObject"]["name"], e["reason"], e["message"]) for e in listed}
    assert ("j-a", "Stopped", "missing workload") in events
    assert not any(name == "j-b" and reason == "ExcessPodDeleted" for name, reason, _ in events)


async def test_deleting_a_running_pods_workload_stops_the_pod(api, bus: MemoryBus) -> None:
    """``kubectl delete workload`` of a running pod's prebuilt Workload (no finalizer of Kueue's on it): the pod,
    left with no Workload, is stopped: deleted with the Stopped Event "missing workload" (handleJobWithNoWorkload,
    Pod.Stop); its quota is released."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-d"))
        await kube.apply_manifest(api, pod("pod-d", "wl-d"))
        await object_where(api, resources.PODS, "pod-d", ungated)
        await kube.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name="pod-d",
            patch={"status": {"phase": "Running"}},
            subresource="status",
        )
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="wl-d")
        [released] = await wait_for(bus, types.QuotaReleased, timeout=10)
        async with asyncio.timeout(20):
            while True:
                try:
                    await kube.get_object(api, resources.PODS, namespace="default", name="pod-d")
                except kube.errors.NotFoundError:
                    break
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    assert released.reason == "Deleted"
    stopped = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == "pod-d"]
    assert ("Stopped", "missing workload") in stopped


async def test_a_restarted_watcher_keeps_the_adopted_workloads(api, bus: MemoryBus) -> None:
    """A watcher started again over the log (pods listed before Workloads) neither deletes the Workloads a running
    pod and a running pod group adopted, nor publishes them anew, nor makes them ones of their own."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-r", pod_set=ROLE, count=2))
        await kube.apply_manifest(api, prebuilt_workload("wl-s"))
        for name in ("r-a", "r-b"):
            await kube.apply_manifest(api, pod(name, "wl-r", group="wl-r", total=2))
        await kube.apply_manifest(api, pod("s-a", "wl-s"))
        for name in ("r-a", "r-b", "s-a"):
            await object_where(api, resources.PODS, name, ungated)
    observed = await events_of(bus, types.WorkloadObserved)
    watcher = Watcher(bus=bus, api=api)
    await watcher.learn_from_log()
    async with running(watcher.run()):
        await asyncio.sleep(1.0)
    assert await events_of(bus, types.ObjectDeleted) == []
    assert await events_of(bus, types.WorkloadObserved) == observed
