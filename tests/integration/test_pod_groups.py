"""Plain pod groups on the emulated API server, through the watcher, the admitter and the dispatcher.

Kueue's pod group reconciler (pkg/controller/jobs/pod/pod_controller.go): active pods beyond the group's
``pod-group-total-count`` are deleted, the newest gated ones first (removeExcessPods, sortActivePods), each
with a Normal ``ExcessPodDeleted`` Event, so no pod runs outside the workload's quota; a group named by the
annotation instead of the label (WorkloadIdentifierAnnotations, read first) gets its late pods started too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import manifests, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import pods as pod_integration
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import DeciderLoop
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.kubelet import SIM_DURATION_ANNOTATION, SimulatedKubelet
from tests.integration.harness import (
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    events_of,
    running,
    set_up_queues,
    until_steady,
    wait_for,
)
from tests.kube import examples

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]


def member(name: str, group: str, *, total: int, by_annotation: bool = False, cpu: str = "1") -> dict[str, Any]:
    """A pod of pod group ``group`` (label, or annotation with ``by_annotation``) of ``total`` pods."""
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
    annotations = {"kueue.x-k8s.io/pod-group-total-count": str(total)} if group else {}
    if group:
        (annotations if by_annotation else labels)["kueue.x-k8s.io/pod-group-name"] = group
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
            "restartPolicy": "Never",
        },
    }


async def pods_until(api: Any, check: Callable[[dict[str, dict[str, Any]]], bool]) -> dict[str, dict[str, Any]]:
    """Poll the pods of ``default`` (by name, those not being deleted) until ``check`` holds."""
    async with asyncio.timeout(20):
        while True:
            listed, _ = await kube.list_objects(api, resources.PODS, namespace="default")
            pods = {p["metadata"]["name"]: p for p in listed if not p["metadata"].get("deletionTimestamp")}
            if check(pods):
                return pods
            await asyncio.sleep(0.05)


def ungated(pods: dict[str, dict[str, Any]]) -> set[str]:
    return {name for name, pod in pods.items() if not pod_integration.is_gated(pod)}


async def excess_events(api: Any) -> list[str]:
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return sorted(
        e["involvedObject"]["name"]
        for e in listed
        if (e["reason"], e["message"], e["involvedObject"]["kind"]) == ("ExcessPodDeleted", "Excess pod deleted", "Pod")
    )


async def running_group(api: Any, bus: MemoryBus, group: str, names: tuple[str, ...]) -> types.WorkloadAdmitted:
    """The quick-start queues (9 CPU) and pod group ``group`` of ``names`` (1 CPU each), admitted and ungated."""
    await set_up_queues(api, cpu=9)
    for name in names:
        await kube.apply_manifest(api, member(name, group, total=len(names)))
    [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
    await pods_until(api, lambda pods: ungated(pods) == set(names))
    return admitted


def services(bus: MemoryBus, api: Any, dispatcher: Any, consumer: Any, *, pod_watches: bool = True) -> list[Any]:
    """The watcher, the admitter and the dispatcher (with its pod watches, unless ``pod_watches`` is false)."""
    return [
        Watcher(bus=bus, api=api).run(),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        *([dispatcher.watch_pods()] if pod_watches else []),
        dispatcher.ungate_forever(),
    ]


async def test_pods_beyond_the_groups_count_are_deleted_not_started(api, bus: MemoryBus) -> None:
    """Three pods of a group of two created at once, then a fourth after admission: two run, the others are
    deleted with Kueue's Event. Before, all four were ungated: 4 CPU ran on a 2 CPU reservation."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        for name in ("g-a", "g-b", "g-c"):
            await kube.apply_manifest(api, member(name, "g", total=2))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        first = await pods_until(api, lambda pods: len(pods) == 2 and ungated(pods) == set(pods))
        await kube.apply_manifest(api, member("g-d", "g", total=2))
        after = await pods_until(api, lambda pods: "g-d" not in pods and len(ungated(pods)) == 2)
        await asyncio.sleep(0.5)
        events = await excess_events(api)
    assert admitted.pod_set_assignments[0].count == 2  # the quota of two pods, and two run
    assert len(first) == 2 and set(after) == set(first)  # the late fourth went, the two running stayed
    assert len(events) == 2 and "g-d" in events  # one of the three at creation, and the late one


async def test_a_succeeded_member_counts_so_a_late_pod_beyond_the_count_is_deleted(api, bus: MemoryBus) -> None:
    """A pod created for a running group of two whose first member already succeeded: Kueue counts the Succeeded
    pod among the group's active ones (partitionPods: isPodRunnableOrSucceeded), so the new one is beyond the
    count and deleted with the ``ExcessPodDeleted`` Event, not started (FindMatchingWorkloads, removeExcessPods).
    Before, a Succeeded pod did not count and the late pod was started: three pods on a reservation of two."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await running_group(api, bus, "part", ("x-a", "x-b"))
        await succeed(api, "x-a")
        await asyncio.sleep(0.3)
        await kube.apply_manifest(api, member("x-c", "part", total=2))
        async with asyncio.timeout(10):
            while "x-c" not in await excess_events(api):
                await asyncio.sleep(0.05)
        pods = await pods_until(api, lambda pods: "x-c" not in pods)
    assert set(pods) == {"x-a", "x-b"}
    assert pods["x-a"]["status"]["phase"] == "Succeeded"


async def test_a_group_named_by_annotation_gets_its_replacement_started(api, bus: MemoryBus) -> None:
    """A group whose name is an annotation (no label): a failed member's replacement, created gated after
    admission, is started. Before, the dispatcher watched only pods with the label and it stayed gated."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        for name in ("a-1", "a-2"):
            await kube.apply_manifest(api, member(name, "ann", total=2, by_annotation=True))
        await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        await pods_until(api, lambda pods: ungated(pods) == {"a-1", "a-2"})
        await kube.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name="a-1",
            patch={"status": {"phase": "Failed"}},
            subresource="status",
        )
        await kube.apply_manifest(api, member("a-3", "ann", total=2, by_annotation=True))
        pods = await pods_until(api, lambda pods: "a-3" in ungated(pods))
        workload = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="ann")
    assert pods["a-3"]["spec"].get("nodeSelector") == {"instance-type": "spot"}
    # no member carries the label: the namespace's pods were read for the template, a member's spec
    [pod_set] = workload["spec"]["podSets"]
    assert [c["image"] for c in pod_set["template"]["spec"]["containers"]] == ["busybox"]


async def workload_gone(api: Any, name: str) -> None:
    async with asyncio.timeout(20):
        while True:
            try:
                await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
            except kube.errors.NotFoundError:
                return
            await asyncio.sleep(0.05)


async def test_deleting_a_running_groups_workload_deletes_its_pods(api, bus: MemoryBus) -> None:
    """``kubectl delete workload GROUP`` of a running pod group: its pods are deleted (Kueue's reconciler stops
    the job of a Workload being deleted; Pod.Stop deletes the pods), its quota is released, the Workload,
    held by Kueue's finalizer meanwhile, goes, and no new one is made. Before, the object went at once, the
    pods ran on holding the quota, and the Workload came back later."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "grp", ("d-a", "d-b"))
        held = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="grp")
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="grp")
        await pods_until(api, lambda pods: not pods)
        await workload_gone(api, "grp")
        [released] = await wait_for(bus, types.QuotaReleased, workload=admitted.workload, timeout=10)
        await asyncio.sleep(0.5)
        observed = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.metadata.name == "grp"]
    assert "kueue.x-k8s.io/resource-in-use" in held["metadata"]["finalizers"]
    assert released.reason == "Deleted"
    assert len(observed) == 1  # not made again


async def test_deleting_a_pending_pods_workload_deletes_the_pod(api, bus: MemoryBus) -> None:
    """``kubectl delete workload pod-...`` of a single pod still gated (its queue full): the pod is deleted, as
    Kueue's Pod.Stop deletes gated pods too; before, it stayed gated and got a new Workload."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=1)
        await kube.apply_manifest(api, member("big", "", total=1, cpu="2"))
        [pending] = await wait_for(bus, types.WorkloadObserved, timeout=10)
        name = pending.workload.metadata.name
        await workload_exists(api, name)
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=name)
        await pods_until(api, lambda pods: "big" not in pods)
        await workload_gone(api, name)
        await asyncio.sleep(0.5)
        observed = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.metadata.name == name]
    assert len(observed) == 1


async def workload_exists(api: Any, name: str) -> None:
    async with asyncio.timeout(20):
        while True:
            try:
                await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
                return
            except kube.errors.NotFoundError:
                await asyncio.sleep(0.05)


async def test_a_pod_ungated_by_hand_before_admission_is_deleted(api, bus: MemoryBus) -> None:
    """``kubectl patch pod P --type json -p '[{"op":"remove","path":"/spec/schedulingGates"}]'`` on a pod whose
    workload waits for quota: Kueue's reconciler stops it (Pod.Stop, NotAdmitted: the pod is deleted, with the
    Stopped Event "Not admitted by cluster queue"). Before, it ran with no quota (12 CPU in a 9 CPU queue)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=1)
        await kube.apply_manifest(api, member("sneaky", "", total=1, cpu="2"))
        [pending] = await wait_for(bus, types.WorkloadObserved, timeout=10)
        await wait_for(bus, types.WorkloadInadmissible, workload__name=pending.workload.metadata.name, timeout=10)
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="sneaky", patch={"spec": {"schedulingGates": None}}
        )
        await kube.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name="sneaky",
            patch={"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            subresource="status",
        )
        await pods_until(api, lambda pods: "sneaky" not in pods)
        await asyncio.sleep(0.5)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    stopped = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == "sneaky"]
    assert ("Stopped", "Not admitted by cluster queue") in stopped
    assert not await events_of(bus, types.WorkloadAdmitted)


async def test_a_groups_workload_collected_after_its_owner_pod_went_deletes_no_pod(api, bus: MemoryBus) -> None:
    """On a real cluster the garbage collector deletes a group's Workload once the pods it names as owners are
    gone. That deletion is not a user's ``kubectl delete workload``: the group's remaining pods are left
    running (only a deletion while a named owner pod remains deletes them). The dispatcher runs without its
    pod watches here, so the Workload names only the group's first pod (a replacement pod not yet named is
    the case on a real cluster)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer, pod_watches=False)):
        await running_group(api, bus, "col", ("c-a", "c-b"))
        held = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="col")
        owners = {ref["name"] for ref in held["metadata"]["ownerReferences"]}
        for name in owners:  # the owners go; then the collector deletes the Workload
            await kube.delete_object(api, resources.PODS, namespace="default", name=name)
            # gone for good: without the dispatcher's pod watches nothing takes Kueue's pod finalizer off
            await kube.patch_object(
                api, resources.PODS, namespace="default", name=name, patch={"metadata": {"finalizers": None}}
            )
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="col")
        await asyncio.sleep(1.0)
        left = await pods_until(api, lambda pods: True)
    assert set(left) == {"c-a", "c-b"} - owners and left  # the pod no owner reference names still runs


async def test_a_groups_workload_names_every_pod_as_owner(api, bus: MemoryBus, monkeypatch: Any) -> None:
    """Kueue makes every pod of a group an owner of its Workload (not the controller), and adds a pod that joins
    (EnsureWorkloadOwnedByAllMembers), so the garbage collector keeps the Workload while any pod remains."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    listed: list[str | None] = []  # the label selector of each pod listing for the Workloads' templates
    lister = type(dispatcher.workloads.stored.api)
    list_objects = lister.list_objects

    async def recorded(self: Any, ref: Any, **kw: Any) -> Any:
        if ref == resources.PODS and sys._getframe(1).f_code.co_name == "_group_templates":
            listed.append(kw.get("label_selector"))
        return await list_objects(self, ref, **kw)

    monkeypatch.setattr(lister, "list_objects", recorded)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        for name in ("o-a", "o-b"):
            await kube.apply_manifest(api, member(name, "own", total=2))
        await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        pods = await pods_until(api, lambda pods: ungated(pods) == {"o-a", "o-b"})
        uids = {name: pod["metadata"]["uid"] for name, pod in pods.items()}

        def owned_by_both(obj: dict[str, Any]) -> bool:
            return {ref["uid"] for ref in obj["metadata"].get("ownerReferences", [])} == set(uids.values())

        async with asyncio.timeout(10):
            while not owned_by_both(
                workload := await kube.get_object(api, resources.WORKLOADS, namespace="default", name="own")
            ):
                await asyncio.sleep(0.05)
    refs = sorted(workload["metadata"]["ownerReferences"], key=lambda r: r["name"])
    assert refs == [{"apiVersion": "v1", "kind": "Pod", "name": n, "uid": uids[n]} for n in ("o-a", "o-b")]
    # its pod set's template is a member's spec (pod_controller.go constructPodSet), not one built from the log
    [pod_set] = workload["spec"]["podSets"]
    [container] = pod_set["template"]["spec"]["containers"]
    assert (container["name"], container["image"], pod_set["template"]["spec"]["restartPolicy"]) == (
        "c",
        "busybox",
        "Never",
    )
    # read from the pods labelled with the group's name, not the whole namespace
    assert listed and set(listed) == {"kueue.x-k8s.io/pod-group-name=own"}


async def test_a_groups_pod_being_deleted_stays_an_owner_of_its_workload(api, bus: MemoryBus) -> None:
    """A running group's pod fails and is deleted while a finalizer still holds it, and a replacement pod joins:
    Kueue only adds owner references to the group's Workload (pod_controller.go EnsureWorkloadOwnedByAllMembers),
    so the replacement is added and the failed pod, which still exists, stays an owner; once it is gone the
    garbage collector takes its reference off. Before (found by a new user's trial), the Workload written for the
    replacement named the pods not being deleted only, dropping the failed one."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await running_group(api, bus, "held", ("h-a", "h-b"))

        async def owners() -> set[str]:
            obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="held")
            return {ref["name"] for ref in obj["metadata"].get("ownerReferences", [])}

        async with asyncio.timeout(10):
            while await owners() != {"h-a", "h-b"}:
                await asyncio.sleep(0.05)
        pod = await kube.get_object(api, resources.PODS, namespace="default", name="h-b")
        hold = {"metadata": {"finalizers": [*pod["metadata"].get("finalizers", []), "example.com/hold"]}}
        await kube.patch_object(api, resources.PODS, namespace="default", name="h-b", patch=hold)
        failed = {"status": {"phase": "Failed"}}
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="h-b", patch=failed, subresource="status"
        )
        await kube.delete_object(api, resources.PODS, namespace="default", name="h-b")
        await kube.apply_manifest(api, member("h-c", "held", total=2))
        async with asyncio.timeout(10):
            while "h-c" not in await owners():
                await asyncio.sleep(0.05)
        while_held = await until_steady(owners, what="the Workload's owners while h-b is held")
        held_pod = await kube.get_object(api, resources.PODS, namespace="default", name="h-b")
        # the hold let go: h-b is gone, and the garbage collector's part (here the dispatcher's next write) drops it
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="h-b", patch={"metadata": {"finalizers": None}}
        )
        async with asyncio.timeout(10):
            while "h-b" in await owners():
                await asyncio.sleep(0.05)
        after = await owners()
    assert held_pod["metadata"].get("deletionTimestamp")
    assert while_held == {"h-a", "h-b", "h-c"}
    assert after == {"h-a", "h-c"}


async def succeed(api: Any, name: str) -> None:
    """Pod ``default/name`` Succeeded, as its kubelet reports it."""
    await kube.patch_object(
        api,
        resources.PODS,
        namespace="default",
        name=name,
        patch={"status": {"phase": "Succeeded"}},
        subresource="status",
    )


async def test_a_group_finishes_though_a_succeeded_member_was_deleted(api, bus: MemoryBus) -> None:
    """A member succeeds and is deleted (by hand, or the pod garbage collector), then the other succeeds: the
    group finishes "Pods succeeded: 2/2." and its quota is released, as in Kueue, whose pod finalizer keeps a
    succeeded member until its group finishes. Before, the group waited for ever, holding its quota."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)

    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "fin", ("f-a", "f-b"))
        await succeed(api, "f-a")
        await kube.delete_object(api, resources.PODS, namespace="default", name="f-a")
        await pods_until(api, lambda pods: "f-a" not in pods)
        await succeed(api, "f-b")
        [finished] = await wait_for(bus, types.WorkloadFinished, workload=admitted.workload, timeout=10)
        released = await wait_for(bus, types.QuotaReleased, workload=admitted.workload, timeout=10)
    assert (finished.succeeded, finished.message) == (True, "Pods succeeded: 2/2.")
    assert [r.reason for r in released] == ["Finished"]


async def test_deleting_a_finished_groups_workload_leaves_its_pods(api, bus: MemoryBus) -> None:
    """``kubectl delete workload GROUP`` of a finished pod group (as the retention policies' afterFinished
    deletes it): its Workload goes and its succeeded pods stay, as Kueue's reconciler finalizes the job of a
    finished Workload before it looks at the Workload's deletion (reconciler.go). Before, the dispatcher
    deleted them as it deletes a running group's."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "done", ("s-a", "s-b"))
        for name in ("s-a", "s-b"):
            await succeed(api, name)
        await wait_for(bus, types.WorkloadFinished, workload=admitted.workload, timeout=10)
        await wait_for(bus, types.QuotaReleased, workload=admitted.workload, timeout=10)
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="done")
        await workload_gone(api, "done")
        await wait_for(bus, types.ObjectDeleted, kind="Workload", timeout=10)
        await asyncio.sleep(1.0)
        pods = await pods_until(api, lambda pods: True)
    assert set(pods) == {"s-a", "s-b"}
    assert all(pod["status"]["phase"] == "Succeeded" for pod in pods.values())


async def test_a_single_pod_and_a_group_run_to_the_end_on_the_simulated_cluster(api, bus: MemoryBus) -> None:
    """Kueue's sample single pod and a pod group of two, on the demo's simulated controllers and kubelet: once
    admitted and ungated they run and succeed, and their workloads finish with Kueue's messages (pod_controller.go
    Finished): the single pod's status.message, empty, and "Pods succeeded: 2/2." for the group. Before, the
    kubelet never finished a plain pod, and a single pod's workload said "Pod succeeded"."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=0, watch_options={"backoff_seconds": 0.05})
    simulated = [kubelet.run(), SimulatedControllers(api).run()]
    async with running(*services(bus, api, dispatcher, consumer), *simulated):
        await set_up_queues(api, cpu=9)
        single = member("solo", "", total=1)
        single["metadata"]["annotations"][SIM_DURATION_ANNOTATION] = "0"
        single["spec"]["restartPolicy"] = "OnFailure"
        await kube.apply_manifest(api, single)
        for name in ("g-1", "g-2"):
            await kube.apply_manifest(api, member(name, "grp", total=2))
        finished = await wait_for(bus, types.WorkloadFinished, count=2, timeout=20)
        done = await pods_until(api, lambda pods: all(p["status"].get("phase") == "Succeeded" for p in pods.values()))
    by_name = {f.workload.name: f for f in finished}
    assert set(done) == {"solo", "g-1", "g-2"}
    solo = next(f for name, f in by_name.items() if name.startswith("pod-solo-"))
    assert (solo.succeeded, solo.reason, solo.message) == (True, "Succeeded", "")
    assert (by_name["grp"].succeeded, by_name["grp"].reason, by_name["grp"].message) == (
        True,
        "Succeeded",
        "Pods succeeded: 2/2.",
    )


async def all_pods(api: Any) -> dict[str, dict[str, Any]]:
    """Every pod of ``default`` by name, those being deleted too."""
    listed, _ = await kube.list_objects(api, resources.PODS, namespace="default")
    return {p["metadata"]["name"]: p for p in listed}


async def replacement_condition(api: Any, name: str, status: str) -> dict[str, Any]:
    """Poll Workload ``default/name`` until its WaitingForReplacementPods condition has ``status``; returns it."""
    async with asyncio.timeout(10):
        while True:
            with contextlib.suppress(kube.errors.NotFoundError):
                wl = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
                for condition in (wl.get("status") or {}).get("conditions") or []:
                    if condition["type"] == "WaitingForReplacementPods" and condition["status"] == status:
                        return dict(condition)
            await asyncio.sleep(0.05)


async def test_deleted_pending_pods_lose_kueues_finalizer_when_kueue_lets_them_go(api, bus: MemoryBus) -> None:
    """Kueue's pod webhook puts its ``kueue.x-k8s.io/managed`` finalizer and the ``kueue.x-k8s.io/role-hash``
    annotation on a managed pod (pod_webhook.go Default). Deleted, a pending single pod goes at once (Load); the
    pods of a pending group that has a Workload stay, Terminating, as Kueue finalizes a member only once it is
    replaced (FindMatchingWorkloads), and the Workload says WaitingForReplacementPods; ``kubectl delete workload``
    then lets them go (Stop, Finalize). Before, the group's pods went at once."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=1)  # the group (2 CPU) and the lone pod (2 CPU) stay pending
        for name in ("d-a", "d-b"):
            await kube.apply_manifest(api, member(name, "del", total=2))
        await kube.apply_manifest(api, member("lone", "", total=1, cpu="2"))
        created = await all_pods(api)
        await wait_for(bus, types.WorkloadObserved, count=2, timeout=10)  # the group's and the lone pod's
        await workload_exists(api, "del")
        for name in created:
            await kube.delete_object(api, resources.PODS, namespace="default", name=name)
        async with asyncio.timeout(10):
            while "lone" in (left := await all_pods(api)):
                await asyncio.sleep(0.05)
        waiting = await replacement_condition(api, "del", "True")
        await asyncio.sleep(0.5)
        kept = await all_pods(api)
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="del")
        async with asyncio.timeout(10):
            while left := await all_pods(api):
                await asyncio.sleep(0.05)
        await workload_gone(api, "del")
    assert sorted(created) == ["d-a", "d-b", "lone"]
    for pod in created.values():
        assert pod["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
        assert pod["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == pod_integration.role_hash(
            {"spec": pod["spec"]}
        )
    assert sorted(kept) == ["d-a", "d-b"]
    assert all(p["metadata"]["deletionTimestamp"] and p["metadata"]["finalizers"] for p in kept.values())
    assert (waiting["reason"], waiting["message"]) == ("PodsFailed", "Some Failed pods need replacement")
    assert left == {}


async def test_a_deleted_member_waits_for_its_replacement(api, bus: MemoryBus) -> None:
    """A member of a running pod group deleted (``kubectl delete pod``): as in Kueue, its Workload stays admitted
    (no eviction) and gets WaitingForReplacementPods True ``PodsFailed`` "Some Failed pods need replacement",
    and the pod keeps Kueue's finalizer (Terminating) so the group stays countable. A replacement created
    (gated by the webhook) is started, the deleted member is let go, and the condition turns False
    ``PodsReady`` "No pods need replacement" (pod_controller.go waitingForReplacementPodsCondition,
    FindMatchingWorkloads' finalizePods). Before, the pod went at once and the Workload had no such condition."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "rep", ("r-a", "r-b"))
        await kube.delete_object(api, resources.PODS, namespace="default", name="r-a")
        waiting = await replacement_condition(api, "rep", "True")
        held = (await all_pods(api))["r-a"]
        await kube.apply_manifest(api, member("r-c", "rep", total=2))
        started = await pods_until(api, lambda pods: "r-c" in ungated(pods))
        replaced = await replacement_condition(api, "rep", "False")
        async with asyncio.timeout(10):
            while "r-a" in await all_pods(api):
                await asyncio.sleep(0.05)
        released = [e for e in await events_of(bus, types.QuotaReleased) if e.workload == admitted.workload]
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert (waiting["reason"], waiting["message"]) == ("PodsFailed", "Some Failed pods need replacement")
    assert (replaced["reason"], replaced["message"]) == ("PodsReady", "No pods need replacement")
    assert set(started) == {"r-b", "r-c"}
    assert released == []  # never evicted: the group kept its quota


async def test_a_preempted_groups_replacement_condition_copies_its_eviction(api, bus: MemoryBus) -> None:
    """A running pod group preempted by a pod of a higher PriorityClass: its pods are stopped, and its
    WaitingForReplacementPods condition copies the Evicted condition's reason and message verbatim
    (pod_controller.go), the preemptor named by its Workload object's UID. Before, the condition's message named the
    preemptor's pod UID twice (the log's UID, not the object's)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    preemptor = DeciderLoop(bus=bus, decider=deciders.PREEMPTOR, wakeup=0.05)
    async with running(*services(bus, api, dispatcher, consumer), preemptor.run()):
        await set_up_queues(api, cpu=2)
        queue = cluster_queue("cluster-queue", flavor_name="spot", cpu=2)
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await kube.apply_manifest(api, queue)
        high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}}
        await kube.apply_manifest(api, {**high, "value": 1000})
        for name in ("v-a", "v-b"):
            await kube.apply_manifest(api, member(name, "victim", total=2))
        await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        await pods_until(api, lambda pods: ungated(pods) == {"v-a", "v-b"})
        preemptor = member("boss", "", total=1, cpu="2")
        preemptor["spec"]["priorityClassName"] = "high"
        await kube.apply_manifest(api, preemptor)
        waiting = await replacement_condition(api, "victim", "True")
        pod_uid = (await all_pods(api))["boss"]["metadata"]["uid"]
        victim = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="victim")
        async with asyncio.timeout(10):
            while not (boss := await workload_of_pod(api, "boss")):
                await asyncio.sleep(0.05)
    evicted = next(c for c in victim["status"]["conditions"] if c["type"] == "Evicted")
    assert (waiting["reason"], waiting["message"]) == (evicted["reason"], evicted["message"])
    assert f"(UID: {boss['metadata']['uid']}, JobUID: {pod_uid})" in waiting["message"]
    assert boss["metadata"]["uid"] != pod_uid


async def workload_of_pod(api: Any, pod: str) -> dict[str, Any] | None:
    """The Workload object of single pod ``pod`` of ``default``, None while there is none."""
    listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
    owned = [w for w in listed if any(r.get("name") == pod for r in w["metadata"].get("ownerReferences") or [])]
    return owned[0] if owned else None


async def test_a_finished_single_pod_loses_kueues_finalizer(api, bus: MemoryBus) -> None:
    """A single pod that succeeded is let go (Kueue: Finished, then finalizeJob), and a group's pods once the group
    finished, so a later deletion removes them at once; the pods of a running group keep it."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await running_group(api, bus, "fz", ("z-a", "z-b"))
        await kube.apply_manifest(api, member("solo", "", total=1))
        await pods_until(api, lambda pods: "solo" in ungated(pods))
        await succeed(api, "solo")
        await succeed(api, "z-a")
        async with asyncio.timeout(10):
            while (await all_pods(api))["solo"]["metadata"].get("finalizers"):
                await asyncio.sleep(0.05)
        running_member = (await all_pods(api))["z-a"]
        await succeed(api, "z-b")
        async with asyncio.timeout(10):
            while any(p["metadata"].get("finalizers") for p in (await all_pods(api)).values()):
                await asyncio.sleep(0.05)
    assert running_member["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]


async def test_a_single_pod_that_succeeded_keeps_pods_ready_true(api, bus: MemoryBus) -> None:
    """A single pod runs, ready, then succeeds (phase Succeeded, Ready False with reason PodCompleted, as its
    kubelet writes it in one update): its workload finishes and keeps PodsReady True ``Started``, as in Kueue,
    whose job reconciler returns once the job has finished (reconciler.go step 3) before it writes PodsReady
    (step 5). Before, the watcher reported the not-ready pod first and the Workload showed PodsReady False
    ``WaitForRecovery`` "At least one pod has failed, waiting for recovery" (found walking Kueue's "Run Plain
    Pods" page with kubectl)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        await kube.apply_manifest(api, member("solo", "", total=1))
        await pods_until(api, lambda pods: "solo" in ungated(pods))
        ready = {"type": "Ready", "status": "True"}
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="solo",
            patch={"status": {"phase": "Running", "conditions": [ready]}}, subresource="status",
        )  # fmt: skip
        await wait_for(bus, types.WorkloadPodsReady, ready=True, timeout=10)
        completed = {"type": "Ready", "status": "False", "reason": "PodCompleted"}
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="solo",
            patch={"status": {"phase": "Succeeded", "conditions": [completed]}}, subresource="status",
        )  # fmt: skip
        name = (await wait_for(bus, types.WorkloadFinished, timeout=10))[0].workload.name
        async with asyncio.timeout(10):
            while True:
                wl = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
                conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
                if "Finished" in conditions:
                    break
                await asyncio.sleep(0.05)
        reports = [(r.ready, r.reason) for r in await events_of(bus, types.WorkloadPodsReady)]
    assert ("Finished", "True") == (conditions["Finished"]["type"], conditions["Finished"]["status"])
    assert (conditions["PodsReady"]["status"], conditions["PodsReady"]["reason"]) == ("True", "Started")
    assert (False, "WaitForRecovery") not in reports


async def test_a_groups_compose_errors_kueue_only_logs_record_no_event(api, bus: MemoryBus) -> None:
    """A user's trial: a pod group whose pods name different queues got a Warning ``ErrWorkloadCompose`` "Pod gq-1
    is invalid: ... has different queue names: user-queue!=plq". Kueue's pod reconciler returns that as an
    UnretryableError, which its job reconciler only logs (pod_controller.go validatePodGroupMetadata, reconciler.go
    handleJobWithNoWorkload); so are different total counts. Its only Event while composing a group's Workload is
    "'G' group has fewer runnable pods than expected" (and WorkloadNameConflict): that one is still recorded, and
    written after the others, so that it is there says the dispatcher has looked at them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        other = member("gq-1", "gq", total=2)
        other["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "plq"
        for pod in (member("gq-0", "gq", total=2), other, member("gt-0", "gt", total=2), member("gt-1", "gt", total=3)):
            await kube.apply_manifest(api, pod)
        rejected = await wait_for(bus, types.ObjectRejected, count=2, timeout=10)
        await kube.apply_manifest(api, member("short-0", "short", total=2))
        async with asyncio.timeout(10):
            while not any(e["reason"] == "ErrWorkloadCompose" for e in await group_warnings(api)):
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        warnings = await group_warnings(api)
    problems = sorted(r.problem for r in rejected)
    assert problems == [
        "pods 'gq-0' and 'gq-1' has different queue names: user-queue!=plq",
        "pods 'gt-0' and 'gt-1' has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3",
    ]
    assert [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in warnings] == [
        ("short-0", "ErrWorkloadCompose", "'short' group has fewer runnable pods than expected")
    ]


async def group_warnings(api: Any) -> list[dict[str, Any]]:
    """The Warning Events about pods in ``default``."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e for e in listed if e["type"] == "Warning" and e["involvedObject"]["kind"] == "Pod"]


async def test_a_groups_workload_conditions_are_never_older_than_the_workload(api, bus: MemoryBus) -> None:
    """Kueue's pod-group sample (kueue-pod-group.yaml, as it is), admitted before the dispatcher made its Workload
    object (the watcher's fact is what the admitter decides from; here the dispatcher comes a second late). In
    Kueue the Workload exists before the scheduler admits it, so no condition's lastTransitionTime (nor an
    admission check's) is before its ``metadata.creationTimestamp``, nor is an Event about it. Found by a user's
    trial: created 12:44:43Z, QuotaReserved and Admitted at 12:44:42Z, the decision's time."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(Watcher(bus=bus, api=api).run(), admitter(bus).run()):
        await set_up_queues(api, cpu=9)
        for doc in examples.load("pods-kueue/kueue-pod-group.yaml"):
            await kube.apply_manifest(api, {**doc, "metadata": {**doc["metadata"], "namespace": "default"}})
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        await asyncio.sleep(1.2)  # the dispatcher lags a second behind the decision
        started = [
            dispatcher.fold_forever(),
            dispatcher.consume(consumer),
            dispatcher.watch_pods(),
            dispatcher.ungate_forever(),
        ]
        async with running(*started):
            await pods_until(api, lambda pods: len(ungated(pods)) == 2)

            async def group_workload() -> dict[str, Any] | None:
                listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
                return next((w for w in listed if w["metadata"]["name"] == "sample-group"), None)

            workload = await until_steady(group_workload, what="the group's Workload")
            listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    assert workload is not None
    created = workload["metadata"]["creationTimestamp"]
    assert manifests.parse_time_ms(created) > admitted.at_ms  # made after the decision: the case at hand
    times = {c["type"]: c["lastTransitionTime"] for c in workload["status"]["conditions"]}
    assert {"QuotaReserved", "Admitted"} <= set(times)
    assert all(manifests.parse_time_ms(t) >= manifests.parse_time_ms(created) for t in times.values()), (created, times)
    about = [e for e in listed if e["involvedObject"]["kind"] == "Workload"]
    assert {e["reason"] for e in about} >= {"QuotaReserved", "Admitted"}
    for event in about:
        for field in ("eventTime", "firstTimestamp", "lastTimestamp"):
            assert manifests.parse_time_ms(event[field]) >= manifests.parse_time_ms(created), (created, event)


async def conditions_until(api: Any, name: str, check: Callable[[dict[str, dict[str, Any]]], bool]) -> dict[str, Any]:
    """Poll Workload ``default/name`` until its conditions (by type) satisfy ``check``; returns them."""
    conditions: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(10):
            while True:
                wl = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
                conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
                if check(conditions):
                    break
                await asyncio.sleep(0.05)
    return conditions


def _state(conditions: dict[str, dict[str, Any]], kind: str) -> tuple[str, str]:
    condition = conditions.get(kind) or {}
    return condition.get("status", ""), condition.get("reason", "")


async def test_a_deactivated_groups_pods_ready_waits_for_start(api, bus: MemoryBus) -> None:
    """A pod group that ran ready, then deactivated (spec.active false): once its pods stopped and its quota went,
    the Workload shows PodsReady False ``WaitForStart`` "Not all pods are ready or succeeded", as Kueue's
    generatePodsReadyCondition writes for a workload not admitted; activated again and admitted, its new pods
    not ready yet keep ``WaitForStart`` and, once ready, turn True ``Started``. Before, it kept PodsReady False
    ``WaitForRecovery`` next to Admitted False, also after the new admission (found on the demo)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    ready = {"type": "Ready", "status": "True"}
    async with running(*services(bus, api, dispatcher, consumer)):
        await running_group(api, bus, "dg", ("d-a", "d-b"))
        for name in ("d-a", "d-b"):
            await kube.patch_object(
                api, resources.PODS, namespace="default", name=name,
                patch={"status": {"phase": "Running", "conditions": [ready]}}, subresource="status",
            )  # fmt: skip
        started = await conditions_until(api, "dg", lambda c: _state(c, "PodsReady") == ("True", "Started"))
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name="dg", patch={"spec": {"active": False}}
        )
        await wait_for(bus, types.QuotaReleased, timeout=10)
        stopped = await conditions_until(
            api,
            "dg",
            lambda c: _state(c, "Admitted")[0] == "False" and _state(c, "PodsReady") == ("False", "WaitForStart"),
        )
        for name in ("d-c", "d-d"):  # the group's replacements (its stopped pods are still being deleted)
            await kube.apply_manifest(api, member(name, "dg", total=2))
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name="dg", patch={"spec": {"active": True}}
        )
        await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10)
        await pods_until(api, lambda pods: ungated(pods) == {"d-c", "d-d"})
        readmitted = await conditions_until(api, "dg", lambda c: _state(c, "Admitted")[0] == "True")
        for name in ("d-c", "d-d"):
            await kube.patch_object(
                api, resources.PODS, namespace="default", name=name,
                patch={"status": {"phase": "Running", "conditions": [ready]}}, subresource="status",
            )  # fmt: skip
        again = await conditions_until(api, "dg", lambda c: _state(c, "PodsReady") == ("True", "Started"))
    assert _state(started, "PodsReady") == ("True", "Started")
    assert _state(stopped, "Admitted")[0] == "False"
    assert _state(stopped, "PodsReady") == ("False", "WaitForStart")
    assert stopped["PodsReady"]["message"] == "Not all pods are ready or succeeded"
    assert _state(readmitted, "PodsReady") == ("False", "WaitForStart")
    assert _state(again, "PodsReady") == ("True", "Started")


async def reservations(bus: MemoryBus, ref: types.WorkloadRef) -> int:
    """How many times the log reserved quota for workload ``ref`` (a QuotaReserved, or an admission alone)."""
    reserved = [e for e in await events_of(bus, types.QuotaReserved) if e.workload == ref]
    admitted = [e for e in await events_of(bus, types.WorkloadAdmitted) if e.workload == ref]
    return max(len(reserved), len(admitted))


async def queues_status(api: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``status`` of ClusterQueue cluster-queue and of LocalQueue default/user-queue."""
    cq = await kube.get_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
    lq = await kube.get_object(api, resources.LOCAL_QUEUES, namespace="default", name="user-queue")
    return cq.get("status") or {}, lq.get("status") or {}


async def test_a_reactivated_group_without_pods_waits_for_its_replacements(api, bus: MemoryBus) -> None:
    """Kueue #12656 (PR #12768): a running group deactivated by hand (``spec.active: false``) is evicted, its pods
    stopped and kept (Failed, Terminating) with WaitingForReplacementPods True; set active again it is not queued
    (Kueue's IsAdmissible refuses a Workload with that condition True): no quota reserved, none counted in the
    ClusterQueue, none pending in the LocalQueue. Replacement pods make it admissible: it is admitted again and
    they are started. Before, it was admitted again at once with no pods and held 2 CPU (admitter logic 56)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "g5", ("g5-a", "g5-b"))
        wl_api = {"namespace": "default", "name": "g5"}
        await kube.patch_object(api, resources.WORKLOADS, **wl_api, patch={"spec": {"active": False}})
        await wait_for(bus, types.QuotaReleased, workload=admitted.workload, timeout=10)
        waiting = await replacement_condition(api, "g5", "True")
        await asyncio.sleep(0.5)
        await kube.patch_object(api, resources.WORKLOADS, **wl_api, patch={"spec": {"active": True}})
        await asyncio.sleep(1.5)
        reserved_while_waiting = await reservations(bus, admitted.workload)
        held = await kube.get_object(api, resources.WORKLOADS, **wl_api)
        cq_status, lq_status = await queues_status(api)
        for name in ("g5-c", "g5-d"):
            await kube.apply_manifest(api, member(name, "g5", total=2))
        started = await pods_until(api, lambda pods: {"g5-c", "g5-d"} <= ungated(pods))
        replaced = await replacement_condition(api, "g5", "False")
        reserved_after = await reservations(bus, admitted.workload)
    assert waiting["status"] == "True"
    assert reserved_while_waiting == 1  # only the first admission
    conditions = {c["type"]: c for c in held["status"]["conditions"]}
    assert conditions["QuotaReserved"]["status"] == "False"
    assert "Admitted" not in conditions or conditions["Admitted"]["status"] == "False"
    assert not held["status"].get("admission")
    assert cq_status.get("reservingWorkloads", 0) == 0 and cq_status.get("pendingWorkloads", 0) == 0
    assert lq_status.get("pendingWorkloads", 0) == 0
    assert reserved_after == 2
    assert {"g5-c", "g5-d"} <= set(started)
    assert (replaced["reason"], replaced["message"]) == ("PodsReady", "No pods need replacement")


async def test_a_preempted_group_is_not_admitted_again_without_pods(api, bus: MemoryBus) -> None:
    """Kueue #12656: a running group (2 x 1 CPU) preempted by a pod of a higher PriorityClass (2 CPU) in a 2 CPU
    ClusterQueue; once the preemptor finishes, the group, its pods stopped and not replaced, is not admitted again
    (WaitingForReplacementPods True: Kueue's IsAdmissible). Before, it was admitted with no pods and held the
    ClusterQueue's 2 CPU until the waitForPodsReady timeout."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    preemptor_loop = DeciderLoop(bus=bus, decider=deciders.PREEMPTOR, wakeup=0.05)
    async with running(*services(bus, api, dispatcher, consumer), preemptor_loop.run()):
        await set_up_queues(api, cpu=2)
        queue = cluster_queue("cluster-queue", flavor_name="spot", cpu=2)
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await kube.apply_manifest(api, queue)
        high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}}
        await kube.apply_manifest(api, {**high, "value": 1000})
        for name in ("g9-a", "g9-b"):
            await kube.apply_manifest(api, member(name, "g9", total=2))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        await pods_until(api, lambda pods: ungated(pods) == {"g9-a", "g9-b"})
        boss = member("boss", "", total=1, cpu="2")
        boss["spec"]["priorityClassName"] = "high"
        await kube.apply_manifest(api, boss)
        await wait_for(bus, types.QuotaReleased, workload=admitted.workload, timeout=10)
        await replacement_condition(api, "g9", "True")
        await pods_until(api, lambda pods: "boss" in ungated(pods))
        await succeed(api, "boss")
        await wait_for(bus, types.WorkloadFinished, timeout=10)
        await asyncio.sleep(1.5)
        reserved = await reservations(bus, admitted.workload)
        cq_status, _ = await queues_status(api)
    assert reserved == 1  # only the first admission
    assert cq_status.get("reservingWorkloads", 0) == 0
