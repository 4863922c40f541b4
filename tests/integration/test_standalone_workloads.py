"""Workload objects a user creates: admitted as they are, the user playing the job's part on the object.

Watcher, admitter and dispatcher in one process on one MemoryBus and one emulated API
server. A standalone Workload (no owner reference) is reported by the watcher,
admitted, and gets Kueue's status from the dispatcher while its spec and metadata stay
the user's; the user's ``Finished`` condition releases the quota; after an eviction,
the user's ``QuotaReserved=False`` completes it (WorkloadStopped, as Kueue's test util
FinishEvictionForWorkloads does); deleting the object deletes the workload.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources
from kueue_es.services.watcher.kinds import LIMIT_RANGES, RUNTIME_CLASSES
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator, serve_emulator
from tests.integration.harness import (
    admitter,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    running,
    set_up_queues,
    until_steady,
    wait_for,
    watch_with_workloads,
)

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def emu() -> AsyncIterator[ClusterEmulator]:
    """The emulator serving LimitRanges and RuntimeClasses too (a Workload made by hand is counted with them)."""
    async with serve_emulator(bookmark_interval=0.2, extra_resources=(LIMIT_RANGES, RUNTIME_CLASSES)) as served:
        yield served


def standalone(name: str, *, cpu: str = "1", count: int = 2) -> dict[str, Any]:
    """A Workload object as a user writes it: queueName and one pod set, no owner."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
                }
            ],
        },
    }


async def condition_of(api: Any, name: str, kind: str, *, status: str = "True") -> dict[str, Any]:
    """Poll the Workload until its condition ``kind`` has ``status``; returns the object."""
    async with asyncio.timeout(10):
        while True:
            obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
            found = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
            if (found.get(kind) or {}).get("status") == status:
                return obj
            await asyncio.sleep(0.02)


async def set_condition(api: Any, name: str, condition: dict[str, Any]) -> None:
    """Write one condition into the Workload's status as its user (PUT with resourceVersion)."""
    obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
    status = dict(obj.get("status") or {})
    others = [c for c in status.get("conditions") or [] if c["type"] != condition["type"]]
    now = "2026-12-01T00:00:00Z"
    status["conditions"] = [*others, {"message": "", "lastTransitionTime": now, **condition}]
    await kube.replace_object(
        api, resources.WORKLOADS, namespace="default", name=name, body={**obj, "status": status}, subresource="status"
    )


async def _events_on(api: Any, name: str) -> list[tuple[str, str, str]]:
    """(reason, message, involvedObject.uid) of the Events on Workload ``default/name``, sorted."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return sorted(
        (e["reason"], e["message"], e["involvedObject"].get("uid", ""))
        for e in listed
        if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == "Workload"
    )


async def test_a_standalone_workload_is_admitted_and_keeps_its_spec(api, bus: MemoryBus) -> None:
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        created = await kube.apply_manifest(api, standalone("wl-a"))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        obj = await condition_of(api, "wl-a", "Admitted")
        on_workload = await until_steady(lambda: _events_on(api, "wl-a"), what="the Workload's Events")
    # Kueue's scheduler records QuotaReserved and Admitted on every Workload it admits, owned or not
    assert [reason for reason, _, _ in on_workload] == ["Admitted", "QuotaReserved"], on_workload
    assert {uid for _, _, uid in on_workload} == {created["metadata"]["uid"]}
    [observed] = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.metadata.name == "wl-a"]
    assert observed.workload.owner is None
    assert observed.workload.metadata.uid == created["metadata"]["uid"]
    assert admitted.workload.key == "default/wl-a"
    assert obj["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert obj["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    assert obj["spec"] == created["spec"]
    assert "ownerReferences" not in obj["metadata"]


async def test_the_users_finished_condition_releases_the_quota(api, bus: MemoryBus) -> None:
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        await kube.apply_manifest(api, standalone("wl-a", count=3))
        await kube.apply_manifest(api, standalone("wl-b", count=2))
        await condition_of(api, "wl-a", "Admitted")
        await set_condition(api, "wl-a", {"type": "Finished", "status": "True", "reason": "Succeeded"})
        [finished] = await wait_for(bus, types.WorkloadFinished)
        await wait_for(bus, types.QuotaReleased)
        await condition_of(api, "wl-b", "Admitted")  # the freed quota admits the next one
    assert finished.workload.key == "default/wl-a" and finished.succeeded


async def test_the_user_completes_an_eviction_and_deletes_the_workload(api, bus: MemoryBus) -> None:
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        await kube.apply_manifest(api, standalone("wl-a"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        meta = observed.workload.metadata
        ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        assignment = types.PodSetAssignment(name="main", flavors={"cpu": "spot"}, resource_usage={"cpu": 2000}, count=2)
        reserved = types.QuotaReserved(
            workload=ref, cluster_queue="cluster-queue", pod_set_assignments=[assignment], at_ms=1
        )
        await commit(bus, reserved, types.admitted(reserved, at_ms=1))
        await condition_of(api, "wl-a", "Admitted")
        await commit(bus, eviction(ref))
        await condition_of(api, "wl-a", "Evicted")
        assert await events_of(bus, types.WorkloadStopped) == []  # evicted, but its "job" has not stopped yet
        await set_condition(api, "wl-a", {"type": "QuotaReserved", "status": "False", "reason": "Pending"})
        [stopped] = await wait_for(bus, types.WorkloadStopped)
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="wl-a")
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload")
    assert stopped.workload == ref and stopped.reason == "Preempted"
    assert (deleted.namespace, deleted.name, deleted.uid) == ("default", "wl-a", ref.uid)


async def test_the_users_reclaimable_pods_free_quota_for_the_next(api, bus: MemoryBus) -> None:
    """A custom integration's Dynamic Reclaim: the user writes ``status.reclaimablePods`` on its Workload,
    the watcher reports it, the quota of those pods is freed and the next workload admitted."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        await kube.apply_manifest(api, standalone("wl-a", count=3))
        await condition_of(api, "wl-a", "Admitted")
        await kube.apply_manifest(api, standalone("wl-b", count=2))
        await condition_of(api, "wl-b", "QuotaReserved", status="False")
        obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="wl-a")
        status = {**obj["status"], "reclaimablePods": [{"name": "main", "count": 2}]}
        await kube.replace_object(
            api,
            resources.WORKLOADS,
            namespace="default",
            name="wl-a",
            body={**obj, "status": status},
            subresource="status",
        )
        await condition_of(api, "wl-b", "Admitted")
    [reported] = await events_of(bus, types.WorkloadReclaimablePods)
    assert reported.workload.key == "default/wl-a" and reported.counts() == {"main": 2}


async def test_with_the_reclaimable_pods_gate_off_they_free_nothing(api, bus: MemoryBus) -> None:
    """Kueue's 'Should not admit workloads when resources are dynamically reclaimed and the reclaimablePods
    feature gate is off' (test/integration/singlecluster/scheduler/scheduler_test.go): with the gate
    ReclaimablePods off the Workload's ``status.reclaimablePods`` count for nothing (pkg/workload/workload.go
    podSetsCountsAfterReclaim), so the watcher reports none and the next workload keeps waiting."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api, feature_gates="ReclaimablePods=false")),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        await kube.apply_manifest(api, standalone("wl-a", count=3))
        await condition_of(api, "wl-a", "Admitted")
        await kube.apply_manifest(api, standalone("wl-b", count=1))
        await condition_of(api, "wl-b", "QuotaReserved", status="False")
        obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="wl-a")
        status = {**obj["status"], "reclaimablePods": [{"name": "main", "count": 1}]}
        await kube.replace_object(
            api,
            resources.WORKLOADS,
            namespace="default",
            name="wl-a",
            body={**obj, "status": status},
            subresource="status",
        )
        # the watcher takes Workload changes in order: once wl-c is seen, so was wl-a's status
        await kube.apply_manifest(api, standalone("wl-c", count=1))
        await condition_of(api, "wl-c", "QuotaReserved", status="False")
        await condition_of(api, "wl-b", "QuotaReserved", status="False")
    assert await events_of(bus, types.WorkloadReclaimablePods) == []


LIMIT_RANGE = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {"name": "alpha", "namespace": "default"},
    "spec": {"limits": [{"type": "Container", "max": {"cpu": "300m"}}]},
}


async def test_a_workload_outside_its_limit_range_waits_until_the_limit_range_goes(api, bus: MemoryBus) -> None:
    """Kueue's TestSchedule 'container does not satisfy limitRange constraints', then the LimitRange deleted:
    Kueue's scheduler checks every workload it nominates against its namespace's LimitRanges
    (ValidateAdmissibility), a hand-made one too, and requeues the pending ones when a LimitRange changes."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(
        *watch_with_workloads(watcher),
        watcher.watch("LimitRange"),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        await kube.create_object(api, LIMIT_RANGES, namespace="default", body=LIMIT_RANGE)
        await kube.apply_manifest(api, standalone("wl-a", cpu="500m", count=1))
        obj = await condition_of(api, "wl-a", "QuotaReserved", status="False")
        [pending] = [c for c in obj["status"]["conditions"] if c["type"] == "QuotaReserved"]
        assert await events_of(bus, types.WorkloadAdmitted) == []
        await kube.delete_object(api, LIMIT_RANGES, namespace="default", name="alpha")
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
    assert pending["reason"] == "Misconfigured"
    assert pending["message"] == (
        "resources didn't satisfy LimitRange constraints: "
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not be above the limitRange max'
    )
    assert admitted.workload.key == "default/wl-a"


async def test_workloads_kueues_webhook_refuses_never_stop_the_services(
    api, bus: MemoryBus, emu: ClusterEmulator
) -> None:
    """On a cluster without Kueue's Workload webhook (vworkload.kb.io) the API stores what it refuses: a pod set
    asking for Kueue's own ``pods`` resource, two pod sets with minCount, a negative request. The watcher reads
    each as Kueue's controllers would (no error of its own), and the services go on: a valid Workload created
    after them is admitted. With the webhook (the emulator's default) each is refused at creation."""
    bad = standalone("wl-pods")
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    two = standalone("wl-two")
    two["spec"]["podSets"] = [
        {**two["spec"]["podSets"][0], "name": name, "count": 2, "minCount": 1} for name in ("a", "b")
    ]
    negative = standalone("wl-negative", cpu="-1")
    for obj in (bad, two, negative):
        with pytest.raises(errors.ApiError, match="vworkload.kb.io") as refused:
            await kube.apply_manifest(api, obj)
        assert refused.value.status == 403
    emu.kueue_validation = False
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        for obj in (bad, two, negative):
            await kube.apply_manifest(api, obj)
        async with asyncio.timeout(20):
            while {"wl-pods", "wl-two", "wl-negative"} - {
                e.workload.metadata.name for e in await events_of(bus, types.WorkloadObserved)
            }:
                await asyncio.sleep(0.05)
        await kube.apply_manifest(api, standalone("wl-valid", count=1))
        await condition_of(api, "wl-valid", "Admitted")


async def test_a_changed_runtime_class_overhead_counts_for_the_pending_workload(api, bus: MemoryBus) -> None:
    """workload_controller_test.go 'RuntimeClass is defined and change' / 'Should sync the resource requests with
    the new overhead': cluster-queue has 5 CPU and RuntimeClass kata an overhead of 2 CPU. one (1 CPU + 2) is
    admitted; two (3 CPU too) waits. The overhead becomes 1 CPU: two now counts 2 CPU and is admitted; one keeps
    the 3 CPU it was admitted with."""
    kata = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
            "handler": "bar-handler", "overhead": {"podFixed": {"cpu": "2"}}}  # fmt: skip
    await kube.create_object(api, RUNTIME_CLASSES, body=kata)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(
        *watch_with_workloads(watcher),
        watcher.watch("RuntimeClass"),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=5)
        for name in ("one", "two"):
            manifest = standalone(name, cpu="1", count=1)
            manifest["spec"]["podSets"][0]["template"]["spec"]["runtimeClassName"] = "kata"
            await kube.apply_manifest(api, manifest)
            if name == "one":
                [first] = await wait_for(bus, types.WorkloadAdmitted)
        await condition_of(api, "two", "QuotaReserved", status="False")
        assert [a.workload.name for a in await events_of(bus, types.WorkloadAdmitted)] == ["one"]
        kata["overhead"]["podFixed"]["cpu"] = "1"
        await kube.patch_object(api, RUNTIME_CLASSES, name="kata", patch=kata)
        [_, second] = await wait_for(bus, types.WorkloadAdmitted, count=2)
    assert first.pod_set_assignments[0].resource_usage == {"cpu": 3000}
    assert second.workload.name == "two"
    assert second.pod_set_assignments[0].resource_usage == {"cpu": 2000}


async def test_a_standalone_workload_deactivated_by_hand_is_evicted_with_its_new_generation(
    api, bus: MemoryBus
) -> None:
    """An admitted Workload made by hand, set inactive (``kubectl patch kwl X --type=merge -p
    '{"spec":{"active":false}}'``, metadata.generation 2): its Evicted ``Deactivated`` condition carries 2, as
    Kueue's workload controller stamps the object's generation when it evicts. Before, the dispatcher took the
    1 of its own last write's answer, though the log had the object at 2."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up_queues(api, cpu=3)
        await kube.apply_manifest(api, standalone("wl-a"))
        await condition_of(api, "wl-a", "Admitted")
        patch = {"spec": {"active": False}}
        await kube.patch_object(api, resources.WORKLOADS, namespace="default", name="wl-a", patch=patch)
        obj = await condition_of(api, "wl-a", "Evicted")
    evicted = {c["type"]: c for c in obj["status"]["conditions"]}["Evicted"]
    assert (obj["metadata"]["generation"], evicted["reason"]) == (2, "Deactivated")
    assert evicted["observedGeneration"] == 2
