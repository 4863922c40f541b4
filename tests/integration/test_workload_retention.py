"""Kueue's ``objectRetentionPolicies.workloads`` carried out by the dispatcher against the emulated API server.

Watcher, admitter and dispatcher in one process on one MemoryBus; the Configuration comes as the watcher
publishes it (a ConfigurationObserved). With ``afterFinished`` a finished Workload object is deleted once that
long has passed since it finished (the Job stays, no new Workload is made for it); with
``afterDeactivatedByKueue`` the Job of a Workload Kueue deactivated (here: its maximum execution time) is
deleted with propagation Background and its Workload goes with it, while one deactivated by hand stays. Each
deletion is on the log once (ObjectDeleted of the workload), so a restarted dispatcher makes nothing anew, and
one that was down when a period ended deletes what is due once it has caught up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import models, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.replay import check_log
from kueue_es.services.dispatcher.kube_api import KubeApi, RawObject, kube_api
from kueue_es.services.dispatcher.service import Dispatcher, bind_decisions
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import wall_clock_ms
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    RecordingConsumer,
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    events_of,
    flavor,
    job,
    local_queue,
    log_entries,
    pod_services,
    running,
    set_up_queues,
    wait_for,
    wait_until,
    watch_with_workloads,
)
from tests.integration.test_prebuilt_workloads import prebuilt_job, prebuilt_workload
from tests.integration.test_standalone_workloads import set_condition, standalone

pytestmark = pytest.mark.timeout(40)


class DeleteLog:
    """The dispatcher's API, with every DELETE it sends kept (kind, namespace, name, DeleteOptions)."""

    def __init__(self, api: Any) -> None:
        self.inner: KubeApi = kube_api(api)
        self.deletes: list[tuple[str, str | None, str, RawObject | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def delete_object(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str, options: RawObject | None = None
    ) -> RawObject:
        self.deletes.append((ref.kind, namespace, name, options))
        return await self.inner.delete_object(ref, namespace=namespace, name=name, options=options)


async def configure(bus: MemoryBus, *, version: str = "1", **durations: str) -> None:
    """The Configuration the watcher would publish for a file with ``objectRetentionPolicies.workloads``."""
    policy = models.WorkloadRetentionPolicy(**durations)
    configuration = models.Configuration(object_retention_policies=models.ObjectRetentionPolicies(workloads=policy))
    await bus.publish(subjects.fact_message(types.ConfigurationObserved(configuration=configuration), version=version))


async def set_up(api: Any) -> None:
    await kube.apply_manifest(api, flavor("default-flavor"))
    await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=3))
    await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))


async def get_or_none(api: Any, ref: resources.ResourceRef, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get_object(api, ref, namespace="default", name=name)
    except kube.errors.NotFoundError:
        return None


async def eventually(api: Any, ref: resources.ResourceRef, name: str, check: Callable[[dict], bool]) -> dict:
    """Poll an object every 20 ms until ``check(obj)`` holds (an absent object does not)."""
    async with asyncio.timeout(15):
        while True:
            obj = await get_or_none(api, ref, name)
            if obj is not None and check(obj):
                return obj
            await asyncio.sleep(0.02)


async def gone(api: Any, ref: resources.ResourceRef, name: str, *, timeout: float = 15.0) -> int:
    """Poll until the object no longer exists; the wall clock then (ms)."""
    async with asyncio.timeout(timeout):
        while await get_or_none(api, ref, name) is not None:
            await asyncio.sleep(0.02)
    return wall_clock_ms()


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def admitted(api: Any, bus: MemoryBus, name: str, **labels: str) -> types.WorkloadRef:
    """Job ``name`` (1 pod, ``labels`` added) created and admitted; its workload."""
    manifest = job(name)
    manifest["metadata"]["labels"].update(labels)
    await kube.apply_manifest(api, manifest)
    found: list[types.WorkloadRef] = []

    async def admission() -> bool:
        found[:] = [
            e.workload
            for e in await events_of(bus, types.WorkloadAdmitted)
            if e.workload.name.startswith(f"job-{name}-")
        ]
        return bool(found)

    async with asyncio.timeout(15):
        while not await admission():
            await asyncio.sleep(0.02)
    return found[0]


async def started(api: Any, bus: MemoryBus, name: str, **labels: str) -> types.WorkloadRef:
    """Job ``name`` (1 pod, ``labels`` added) created, admitted and unsuspended; its workload."""
    manifest = job(name)
    manifest["metadata"]["labels"].update(labels)
    await kube.apply_manifest(api, manifest)
    await eventually(api, JOBS, name, lambda o: o["spec"]["suspend"] is False)
    [admitted] = [e for e in await events_of(bus, types.WorkloadAdmitted) if e.workload.name.startswith(f"job-{name}-")]
    return admitted.workload


async def complete(api: Any, name: str) -> None:
    """Job ``name`` completes (its Complete condition, as the Job controller writes it)."""
    await kube.patch_object(
        api,
        JOBS,
        namespace="default",
        name=name,
        patch={"status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}},
        subresource="status",
    )


@contextlib.asynccontextmanager
async def dispatching(bus: MemoryBus, api: Any, *, durable: str = "dispatcher") -> AsyncIterator[Dispatcher]:
    """A dispatcher (folding and consuming) for the block."""
    dispatcher = Dispatcher(bus=bus, api=api)
    consumer = RecordingConsumer(await bind_decisions(bus, name=durable))
    async with running(dispatcher.fold_forever(), dispatcher.consume(consumer)):
        yield dispatcher


@contextlib.asynccontextmanager
async def kueue(api: Any, bus: MemoryBus, dispatcher_api: Any = None) -> AsyncIterator[Dispatcher]:
    """The watcher (Workload objects too), an admitter and a dispatcher (through ``dispatcher_api``)."""
    async with (
        running(*watch_with_workloads(Watcher(bus=bus, api=api)), admitter(bus).run()),
        dispatching(bus, dispatcher_api or api) as dispatcher,
    ):
        yield dispatcher


def finished_since(dispatcher: Dispatcher, ref: types.WorkloadRef) -> int:
    """The Finished condition's lastTransitionTime (ms) as the dispatcher writes it."""
    return dispatcher.view.records[ref.key].conditions["Finished"].since_ms


async def test_a_finished_workload_is_deleted_once_after_finished_has_passed(api, bus: MemoryBus) -> None:
    """Kueue's workload controller: a Finished Workload is deleted once ``afterFinished`` has passed since its
    Finished condition's lastTransitionTime, its finalizer off first; the Job stays and gets no new Workload.
    Kueue's Normal ``Deleted`` Event is on the Workload; the deletion is on the log once (the dispatcher's
    ObjectDeleted and the watcher's sighting share a Msg-Id), and every decision still replays. Before, the
    setting was read and ignored: the Workload stayed."""
    deletes = DeleteLog(api)
    async with kueue(api, bus, dispatcher_api=deletes) as dispatcher:
        await configure(bus, after_finished="2s")
        await set_up(api)
        ref = await started(api, bus, "done")
        await complete(api, "done")
        finished = await eventually(api, resources.WORKLOADS, ref.name, lambda o: "Finished" in conditions(o))
        since = finished_since(dispatcher, ref)
        gone_at = await gone(api, resources.WORKLOADS, ref.name)
        await wait_until(lambda: dispatcher.retention.deleted == 1, what="the deletion recorded")
        await asyncio.sleep(1.0)  # the watcher's sighting, and anything that would make it anew
        still_gone = await get_or_none(api, resources.WORKLOADS, ref.name) is None
        job_now = await kube.get_object(api, JOBS, namespace="default", name="done")
        events, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    report = check_log([m for m, _ in await log_entries(bus)], deciders.BY_ROLE)

    assert gone_at >= since + 2000
    assert still_gone
    assert conditions(job_now)["Complete"]["status"] == "True"
    [deleted] = await events_of(bus, types.ObjectDeleted, kind="Workload")
    assert (deleted.name, deleted.uid) == (ref.name, ref.uid)
    assert isinstance(deleted.at_ms, int) and since + 2000 <= deleted.at_ms <= gone_at + 1000  # when, for explain
    assert len(await events_of(bus, types.WorkloadObserved)) == 1
    assert len(await events_of(bus, types.WorkloadFinished)) == 1
    object_uid = finished["metadata"]["uid"]
    assert deletes.deletes == [("Workload", "default", ref.name, {"preconditions": {"uid": object_uid}})]
    on_workload = [
        (e["reason"], e["message"], e["involvedObject"].get("uid")) for e in events if e["reason"] == "Deleted"
    ]
    assert on_workload == [("Deleted", "Deleted finished workload due to elapsed retention", object_uid)]
    assert dispatcher.retention.deleted == 1
    assert not report.mismatches and report.matched == report.decisions > 0


async def test_an_orphaned_workload_is_deleted_once_after_finished_has_passed(api, bus: MemoryBus) -> None:
    """Kueue PR #11721 (Fix ObjectRetentionPolicy for orphaned Workloads; job_controller_test.go "should delete
    orphaned Workload after finishing if the Job is deleted with PropagationPolicy=DeletePropagationOrphan"): the
    owner reference taken off an admitted Job's Workload, then the Job deleted with orphan propagation. Kueue
    finishes the Workload OwnerNotFound and, ``afterFinished`` set, deletes it once that has passed, as any
    finished Workload (before the fix its reconcile stopped at the orphan and the Workload stayed)."""
    async with kueue(api, bus) as dispatcher:
        await configure(bus, after_finished="1s")
        await set_up(api)
        ref = await started(api, bus, "orphan")
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=ref.name, patch={"metadata": {"ownerReferences": None}}
        )
        await kube.delete_object(api, JOBS, namespace="default", name="orphan", options={"propagationPolicy": "Orphan"})
        finished = await eventually(api, resources.WORKLOADS, ref.name, lambda o: "Finished" in conditions(o))
        since = finished_since(dispatcher, ref)
        gone_at = await gone(api, resources.WORKLOADS, ref.name)
        await wait_until(lambda: dispatcher.retention.deleted == 1, what="the deletion recorded")

    assert conditions(finished)["Finished"]["reason"] == "OwnerNotFound"
    assert gone_at >= since + 1000
    [deleted] = await events_of(bus, types.ObjectDeleted, kind="Workload")
    assert (deleted.name, deleted.uid) == (ref.name, ref.uid)


async def test_without_after_finished_a_finished_workload_stays_until_the_file_sets_it(api, bus: MemoryBus) -> None:
    """Only ``afterDeactivatedByKueue`` set (``0s``): a finished Workload is no business of it and stays, as
    without any retention policy (Kueue's default). The file changed to ``afterFinished: 0s`` (the watcher's
    next ConfigurationObserved; Kueue would need a restart): it is deleted at once."""
    async with kueue(api, bus) as dispatcher:
        await configure(bus, after_deactivated_by_kueue="0s")
        await set_up(api)
        ref = await started(api, bus, "kept")
        await complete(api, "kept")
        await eventually(api, resources.WORKLOADS, ref.name, lambda o: "Finished" in conditions(o))
        await asyncio.sleep(1.5)
        kept = await get_or_none(api, resources.WORKLOADS, ref.name)
        deleted_before = await events_of(bus, types.ObjectDeleted)
        await configure(bus, after_finished="0s", version="2")
        configured_at = wall_clock_ms()
        gone_at = await gone(api, resources.WORKLOADS, ref.name)

    assert kept is not None and conditions(kept)["Finished"]["status"] == "True"
    assert deleted_before == []
    assert gone_at - configured_at < 3000
    assert dispatcher.retention.deleted == 1


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_a_job_deactivated_by_kueue_is_deleted_with_background_propagation(api, bus: MemoryBus) -> None:
    """Kueue's job reconciler: the Job of a Workload Kueue deactivated (here past its maximum execution time:
    Evicted ``DeactivatedDueToMaximumExecutionTimeExceeded``) is deleted with propagation Background once
    ``afterDeactivatedByKueue`` has passed since its eviction, with Kueue's ``Deleted`` Event on it; the Workload
    goes with it (its quota given back, no new one made). A Workload deactivated by hand (spec.active false,
    Evicted ``Deactivated``) is not Kueue's doing and stays, its Job too."""
    deletes = DeleteLog(api)
    async with kueue(api, bus, dispatcher_api=deletes) as dispatcher:
        await configure(bus, after_deactivated_by_kueue="1s")
        await set_up(api)
        by_hand = await started(api, bus, "by-hand")
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=by_hand.name, patch={"spec": {"active": False}}
        )
        # admitted is enough: its second of execution counts from the admission, and on a loaded machine it may be
        # deactivated (and its Job deleted) before its start is written (CI: the Job gone while waiting for it)
        limited = await admitted(api, bus, "limited", **{"kueue.x-k8s.io/max-exec-time-seconds": "1"})
        evicted = await eventually(
            api,
            resources.WORKLOADS,
            limited.name,
            lambda o: conditions(o).get("Evicted", {}).get("reason") == "DeactivatedDueToMaximumExecutionTimeExceeded",
        )
        job_gone_at = await gone(api, JOBS, "limited")
        await gone(api, resources.WORKLOADS, limited.name)
        await wait_until(lambda: limited.key not in dispatcher.state.workloads, what="the workload forgotten")
        await asyncio.sleep(1.0)
        by_hand_job = await get_or_none(api, JOBS, "by-hand")
        by_hand_object = await get_or_none(api, resources.WORKLOADS, by_hand.name)
        events, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        evicted_since = dispatcher.view.records[by_hand.key].conditions["Evicted"].since_ms

    deactivated_at = next(e.at_ms for e in await events_of(bus, types.EvictionRequested) if e.workload == limited)
    assert job_gone_at >= deactivated_at + 1000
    assert conditions(evicted)["Evicted"]["status"] == "True"
    job_deletes = [d for d in deletes.deletes if d[0] == "Job"]
    assert job_deletes == [
        ("Job", "default", "limited", {"propagationPolicy": "Background", "preconditions": {"uid": limited.uid}})
    ]
    released = [e.reason for e in await events_of(bus, types.QuotaReleased) if e.workload == limited]
    assert released == ["Deactivated"] or released[-1] == "Deleted"
    about_limited = [
        (type(e).__name__, e.workload.spec.active if isinstance(e, types.WorkloadObserved) else None)
        for _, e in await log_entries(bus)
        if isinstance(e, types.WorkloadObserved | types.ObjectDeleted)
        and (e.workload.key if isinstance(e, types.WorkloadObserved) else f"{e.namespace}/{e.name}") == limited.key
    ]
    # observed, seen deactivated (spec.active false on its object), deleted (the watcher's report of the Job gone:
    # the dispatcher records no second one), and no new Workload for the deleted Job
    assert about_limited == [("WorkloadObserved", True), ("WorkloadObserved", False), ("ObjectDeleted", None)]
    on_job = [(e["reason"], e["message"]) for e in events if e["involvedObject"]["name"] == "limited"]
    assert ("Deleted", "Deleted job: deactivation retention period expired") in on_job
    # deactivated by hand: kept, well past the period
    assert by_hand_job is not None and by_hand_object is not None
    assert conditions(by_hand_object)["Evicted"]["reason"] == "Deactivated"
    assert wall_clock_ms() >= evicted_since + 1000
    assert not any(d[2] == "by-hand" for d in deletes.deletes)


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_a_dispatcher_restarted_after_the_period_deletes_what_is_due(api, bus: MemoryBus) -> None:
    """The Workload finishes while a dispatcher runs, which stops before ``afterFinished`` has passed: nothing is
    deleted while none runs. A dispatcher started after the period deletes it at once (from its fold of the log);
    a third one, started after that, makes nothing anew (the deletion is on the log)."""
    async with running(*watch_with_workloads(Watcher(bus=bus, api=api)), admitter(bus).run()):
        async with dispatching(bus, api, durable="first") as first:
            await configure(bus, after_finished="2s")
            await set_up(api)
            ref = await started(api, bus, "done")
            await complete(api, "done")
            await eventually(api, resources.WORKLOADS, ref.name, lambda o: "Finished" in conditions(o))
            since = finished_since(first, ref)
        await asyncio.sleep(max(0.0, (since + 2500 - wall_clock_ms()) / 1000))
        kept_while_down = await get_or_none(api, resources.WORKLOADS, ref.name)
        async with dispatching(bus, api, durable="second") as second:
            start = wall_clock_ms()
            gone_at = await gone(api, resources.WORKLOADS, ref.name, timeout=10.0)
            await wait_until(lambda: second.retention.deleted == 1, what="the deletion recorded")
        async with dispatching(bus, api, durable="third") as third:
            await wait_until(
                lambda: third.state.last_seq >= second.state.last_seq, what="the third dispatcher catching up"
            )
            await asyncio.sleep(1.5)
            after_third = await get_or_none(api, resources.WORKLOADS, ref.name)

    assert kept_while_down is not None
    assert gone_at - start < 5000
    assert second.retention.deleted == 1 and third.retention.deleted == 0
    assert after_third is None
    assert len(await events_of(bus, types.ObjectDeleted, kind="Workload")) == 1


def plain_pod(name: str, group: str = "", *, total: int = 1) -> dict[str, Any]:
    """A plain Pod of LocalQueue user-queue (1 CPU), of pod group ``group`` of ``total`` pods when one is named."""
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
    annotations = {}
    if group:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            "restartPolicy": "Never",
        },
    }


async def pod_succeeded(api: Any, name: str) -> None:
    """Pod ``default/name`` Succeeded, as its kubelet reports it."""
    await kube.patch_object(
        api,
        resources.PODS,
        namespace="default",
        name=name,
        patch={"status": {"phase": "Succeeded"}},
        subresource="status",
    )


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_a_finished_pods_workload_is_deleted_once_on_the_log(api, bus: MemoryBus) -> None:
    """A single Pod's and a pod group's finished Workloads deleted by ``afterFinished``: each deletion is one
    ObjectDeleted on the log (the dispatcher's, and the watcher's sighting of the object going shares its
    Msg-Id ``gone@<object UID>``), as for a Job's; the succeeded pods stay, no new Workload is made for them and
    every decision replays. Before, the watcher took the object's going for a deletion by hand while the pods
    remain and published a second ObjectDeleted (Msg-Id ``deleted@<resourceVersion>``)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*pod_services(bus, api, dispatcher, consumer)):
        await configure(bus, after_finished="1s")
        await set_up_queues(api, cpu=9)
        await kube.apply_manifest(api, plain_pod("solo"))
        for name in ("g-a", "g-b"):
            await kube.apply_manifest(api, plain_pod(name, "grp", total=2))
        admitted = await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10)
        refs = {e.workload.name: e.workload for e in admitted}
        for name in ("solo", "g-a", "g-b"):
            await eventually(api, resources.PODS, name, lambda p: not (p["spec"].get("schedulingGates") or []))
            await pod_succeeded(api, name)
        await wait_for(bus, types.WorkloadFinished, count=2, timeout=10)
        for name in refs:
            await gone(api, resources.WORKLOADS, name)
        await wait_until(lambda: dispatcher.retention.deleted == 2, what="the deletions recorded")
        await asyncio.sleep(1.5)  # the watcher's sightings, and anything that would make them anew
        pods, _ = await kube.list_objects(api, resources.PODS, namespace="default")
        workloads_left, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
    entries = await log_entries(bus)
    report = check_log([m for m, _ in entries], deciders.BY_ROLE)

    deleted = [(e.name, e.uid) for _, e in entries if isinstance(e, types.ObjectDeleted) and e.kind == "Workload"]
    assert sorted(deleted) == sorted((ref.name, ref.uid) for ref in refs.values())
    assert len(await events_of(bus, types.WorkloadObserved)) == 2
    assert workloads_left == []
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in pods} == dict.fromkeys(
        ("solo", "g-a", "g-b"), "Succeeded"
    )
    assert not report.mismatches and report.matched == report.decisions > 0


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_a_finished_standalone_workload_is_deleted_once_on_the_log(api, bus: MemoryBus) -> None:
    """A Workload made by hand, finished by its user's condition, deleted by ``afterFinished``: its deletion is
    one ObjectDeleted on the log, with its time, as a Job's Workload's. Before, the watcher's sighting of the
    object going had a Msg-Id of its own (the object's resourceVersion) and was stored next to the
    dispatcher's."""
    async with kueue(api, bus) as dispatcher:
        await configure(bus, after_finished="1s")
        await set_up(api)
        created = await kube.apply_manifest(api, standalone("wl-s", count=1))
        await eventually(api, resources.WORKLOADS, "wl-s", lambda o: "Admitted" in conditions(o))
        await set_condition(api, "wl-s", {"type": "Finished", "status": "True", "reason": "Succeeded"})
        await wait_for(bus, types.WorkloadFinished, timeout=10)
        await gone(api, resources.WORKLOADS, "wl-s")
        await wait_until(lambda: dispatcher.retention.deleted == 1, what="the deletion recorded")
        await asyncio.sleep(1.5)  # the watcher's sighting
    deleted = await events_of(bus, types.ObjectDeleted, kind="Workload")

    assert [(e.name, e.uid) for e in deleted] == [("wl-s", created["metadata"]["uid"])]
    assert isinstance(deleted[0].at_ms, int)


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_a_finished_prebuilt_workload_is_deleted_by_the_dispatcher_once(api, bus: MemoryBus) -> None:
    """A Job's prebuilt Workload (its UID the log's, its job-uid label the Job's), finished with its Job, deleted
    by ``afterFinished``: the dispatcher deletes that object (its UID as precondition) with Kueue's ``Deleted``
    Event, and the deletion is one ObjectDeleted on the log, with its time; the Job stays. Before, the dispatcher
    took the object for another workload's, recorded the deletion without deleting it (no Event) and deleted it
    later as the object of a workload gone, and the watcher's sighting was stored next to that record."""
    deletes = DeleteLog(api)
    async with kueue(api, bus, dispatcher_api=deletes) as dispatcher:
        await configure(bus, after_finished="1s")
        await set_up(api)
        created = await kube.apply_manifest(api, prebuilt_workload("wl-p", count=1))
        await kube.apply_manifest(api, prebuilt_job("job-p", "wl-p", parallelism=1))
        await eventually(api, JOBS, "job-p", lambda o: o["spec"]["suspend"] is False)
        await complete(api, "job-p")
        await wait_for(bus, types.WorkloadFinished, timeout=10)
        await gone(api, resources.WORKLOADS, "wl-p")
        await wait_until(lambda: dispatcher.retention.deleted == 1, what="the deletion recorded")
        await asyncio.sleep(1.5)  # the watcher's sighting
        job_now = await kube.get_object(api, JOBS, namespace="default", name="job-p")
        events, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    uid = created["metadata"]["uid"]
    deleted = await events_of(bus, types.ObjectDeleted, kind="Workload")

    assert [(e.name, e.uid) for e in deleted] == [("wl-p", uid)]
    assert isinstance(deleted[0].at_ms, int)
    assert deletes.deletes == [("Workload", "default", "wl-p", {"preconditions": {"uid": uid}})]
    on_workload = [(e["reason"], e["involvedObject"].get("uid")) for e in events if e["reason"] == "Deleted"]
    assert on_workload == [("Deleted", uid)]
    assert conditions(job_now)["Complete"]["status"] == "True"
