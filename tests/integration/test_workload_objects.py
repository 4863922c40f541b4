"""The dispatcher keeps Kueue's objects in the emulated API server: Workloads and queue status.

Watcher, admitter (or decisions committed by hand) and dispatcher in one process on
one MemoryBus and one emulated API server: the Workload object of each Job (owner
reference, spec, status written with server-side apply as Kueue writes it), the
ClusterQueue and LocalQueue status, idempotency (a redelivered decision and a
restarted dispatcher write nothing), a Job gone before its admission is carried
out (DispatchFailed 404, ObjectDeleted, quota released), and every write going
through the rate limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import manager_config, manifests, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import priority_of
from kueue_es.replay import check_log
from kueue_es.scheduling import visibility
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.service import FIELD_MANAGER, Dispatcher, bind_decisions
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import DeciderLoop, cancel_and_wait
from kueue_es.services.watcher.kinds import KUEUE_KINDS, WORKLOAD_KIND
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator
from tests.integration.harness import (
    JOBS,
    RecordingConsumer,
    admitter,
    cluster_queue,
    commit,
    decision_entries,
    dispatcher_with_consumer,
    events_of,
    eviction,
    flavor,
    folded,
    job,
    local_queue,
    log_entries,
    redeliver,
    running,
    until_steady,
    wait_for,
    wait_until,
    watch_all,
    watch_with_workloads,
)
from tests.kube.test_kubectl import Kubectl

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = [pytest.mark.timeout(30), pytest.mark.slow]

PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 2 more needed"
)


async def set_up(api, *, cpu: int = 3) -> None:
    """Flavor default-flavor, ClusterQueue cluster-queue (``cpu`` CPUs), LocalQueue user-queue."""
    await kube.apply_manifest(api, flavor("default-flavor"))
    await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=cpu))
    await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))


async def eventually(api, ref, *, name: str, namespace: str | None = None, check: Callable[[dict], bool]) -> dict:
    """Poll an object every 20 ms until ``check(obj)`` holds (an absent object does not)."""
    async with asyncio.timeout(10):
        while True:
            try:
                obj = await kube.get_object(api, ref, namespace=namespace, name=name)
            except kube.errors.NotFoundError:
                obj = None
            if obj is not None and check(obj):
                return obj
            await asyncio.sleep(0.02)


async def gone(api, ref, *, name: str, namespace: str | None = None) -> None:
    """Poll until the object no longer exists."""
    async with asyncio.timeout(10):
        while True:
            try:
                await kube.get_object(api, ref, namespace=namespace, name=name)
            except kube.errors.NotFoundError:
                return
            await asyncio.sleep(0.02)


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Workload's conditions by type, without lastTransitionTime."""
    return {
        c["type"]: {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def condition(kind: str, ok: bool, reason: str, message: str, *, generation: int | None = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": message}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


async def workload_of(bus: MemoryBus, job_name: str) -> types.WorkloadRef:
    """The reference of the workload the watcher made for Job ``job_name``."""
    for event in await events_of(bus, types.WorkloadObserved):
        if event.workload.owner is not None and event.workload.owner.name == job_name:
            meta = event.workload.metadata
            return types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
    raise AssertionError(f"no workload for Job {job_name}")


USAGE_3_CPU = [
    {
        "name": "default-flavor",
        "resources": [
            {"name": "cpu", "total": "3", "borrowed": "0"},
            {"name": "memory", "total": "600Mi", "borrowed": "0"},
        ],
    }
]


async def test_admitted_and_pending_workloads_and_queue_status_as_kueue_writes_them(
    api, bus: MemoryBus, emu: ClusterEmulator
) -> None:
    """Job a (3 x 1 CPU) is admitted on a 3-CPU ClusterQueue, Job b (2 x 1 CPU) waits. Each gets its Workload
    object (owner reference to the Job, job-uid label, spec from the workload) with Kueue's status; the queues'
    status counts them. Status writes bring no new facts on the log (the watcher sees nothing that matters)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api)
        job_a = await kube.apply_manifest(api, job("a", parallelism=3))
        await wait_for(bus, types.WorkloadAdmitted)
        await kube.apply_manifest(api, job("b", parallelism=2))
        a, b = await workload_of(bus, "a"), await _pending_workload(bus, "b")
        [waiting] = [e for e in await events_of(bus, types.WorkloadInadmissible) if e.workload == b]

        workload_a = await eventually(
            api, resources.WORKLOADS, namespace="default", name=a.name, check=lambda o: "Admitted" in conditions(o)
        )
        workload_b = await eventually(
            api, resources.WORKLOADS, namespace="default", name=b.name, check=lambda o: "QuotaReserved" in conditions(o)
        )
        cq = await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=one_pending_one_admitted,
        )
        lq = await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=one_pending_one_admitted,
        )
    [admitted] = await events_of(bus, types.WorkloadAdmitted)  # no checks: one message reserves and admits
    reserved = types.reservation_of(admitted)

    assert workload_a["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": job_a["metadata"]["uid"]}
    assert workload_a["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "a",
            "uid": job_a["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    # Kueue's Workload carries the Job's whole pod template (containers, images, restartPolicy, ...) but the
    # labels the API server gave it for the Job controller: of those only batch.kubernetes.io/job-name (cleanLabels)
    assert job_a["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert set(job_a["spec"]["template"]["metadata"]["labels"]) == {
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-name",
        "controller-uid",
        "job-name",
    }
    workload_template = {
        "metadata": {"labels": {"batch.kubernetes.io/job-name": "a"}},
        "spec": job_a["spec"]["template"]["spec"],
    }
    assert workload_a["spec"] == {
        # the rank hint Kueue's job controller writes with the gate TopologyAwareScheduling on (the default)
        "podSets": [
            {
                "name": "main",
                "count": 3,
                "template": workload_template,
                "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
            }
        ],
        "queueName": "user-queue",
        "priority": 0,
        "active": True,
    }
    admitted_conditions = conditions(workload_a)
    pods_ready = admitted_conditions.pop("PodsReady", None)  # the watcher's report of the started Job, if in time
    assert pods_ready in (None, condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded"))
    assert admitted_conditions == {
        "QuotaReserved": condition(
            "QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue"
        ),
        "Admitted": condition("Admitted", True, "Admitted", "The workload is admitted"),
    }
    assert {c["lastTransitionTime"] for c in workload_a["status"]["conditions"] if c["type"] != "PodsReady"} == {
        manifests.format_time_ms(reserved.at_ms)
    }
    assert workload_a["status"]["admission"] == {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                "resourceUsage": {"cpu": "3", "memory": "600Mi"},
                "count": 3,
            }
        ],
    }

    assert waiting.workload == b and waiting.message == PENDING_MESSAGE
    assert conditions(workload_b) == {
        "QuotaReserved": condition("QuotaReserved", False, "WaitingForQuota", PENDING_MESSAGE),
        "Admitted": condition("Admitted", False, "NoReservation", "The workload has no reservation"),
        # waitForPodsReady is on by default: the job reconciler's PodsReady from the workload's creation on
        "PodsReady": condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded"),
    }
    assert "admission" not in workload_b["status"]

    active_cq = cq["status"].pop("conditions")
    assert [{k: c[k] for k in ("type", "status", "reason", "message")} for c in active_cq] == [
        {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
    ]
    active_lq = lq["status"].pop("conditions")
    assert [{k: c[k] for k in ("type", "status", "reason", "message")} for c in active_lq] == [
        {"type": "Active", "status": "True", "reason": "Ready", "message": "Can submit new workloads to localQueue"}
    ]
    assert cq["status"] == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": USAGE_3_CPU,
        "flavorsUsage": USAGE_3_CPU,
    }
    lq_usage = [
        {"name": "default-flavor", "resources": [{"name": "cpu", "total": "3"}, {"name": "memory", "total": "600Mi"}]}
    ]
    assert lq["status"] == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": lq_usage,
        "flavorsUsage": lq_usage,
    }
    assert len(await events_of(bus, types.ClusterQueueObserved)) == 1
    assert len(await events_of(bus, types.LocalQueueObserved)) == 1
    assert dispatcher.object_failures == 0


def one_pending_one_admitted(queue: dict[str, Any]) -> bool:
    """A queue's status once a is admitted and b waits: not only ``pendingWorkloads`` 1, which a's own
    pending moment, written before its admission, has too."""
    status = queue.get("status", {})
    return (status.get("pendingWorkloads"), status.get("admittedWorkloads")) == (1, 1)


async def _pending_workload(bus: MemoryBus, job_name: str) -> types.WorkloadRef:
    """The workload of Job ``job_name`` once a WorkloadInadmissible about it is on the log."""
    async with asyncio.timeout(10):
        while True:
            with contextlib.suppress(AssertionError):
                ref = await workload_of(bus, job_name)
                if any(e.workload == ref for e in await events_of(bus, types.WorkloadInadmissible)):
                    return ref
            await asyncio.sleep(0.02)


async def test_decisions_become_the_kubernetes_events_kueue_records(api, bus: MemoryBus) -> None:
    """kubectl describe workload shows Kueue's Events: QuotaReserved and Admitted (Normal) on the admitted
    workload, the pending reason (Warning) on the waiting one, each about the Workload object (its UID);
    kubectl describe job shows the job framework's: CreatedWorkload, and Started once admitted.
    Re-evaluating the waiting one with the same verdict, or a redelivered decision, adds no Event."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api)
        await kube.apply_manifest(api, job("a", parallelism=3))
        await wait_for(bus, types.WorkloadAdmitted)
        await kube.apply_manifest(api, job("b", parallelism=2))
        a, b = await workload_of(bus, "a"), await _pending_workload(bus, "b")
        await wait_until(lambda: dispatcher.events_written >= 6, what="six Events")
        await asyncio.sleep(0.3)
        # the records carrying them (event schema 17), each once
        decisions = list(
            {
                m.seq: m
                for m, e in await decision_entries(bus)
                if isinstance(e, types.QuotaReserved | types.WorkloadAdmitted | types.WorkloadInadmissible)
            }.values()
        )
        for message in decisions:  # handled again (each record, as the decisions it carries): nothing new
            await redeliver(dispatcher, bus, message.seq)
        workloads = {o["metadata"]["name"]: o for o in (await kube.list_objects(api, resources.WORKLOADS))[0]}
        jobs = {o["metadata"]["name"]: o for o in (await kube.list_objects(api, resources.JOBS))[0]}
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    [admitted] = await events_of(bus, types.WorkloadAdmitted)
    reserved = types.reservation_of(admitted)  # no checks: one message reserves and admits
    by_workload: dict[str, list[tuple[str, str, str]]] = {}
    by_job: dict[str, list[tuple[str, str, str]]] = {}
    for event in listed:
        involved = event["involvedObject"]
        assert event["count"] == 1
        entry = (event["type"], event["reason"], event["message"])
        if involved["kind"] == "Job":  # the job framework's, on the Job itself, from its recorder (setup.go)
            assert event["source"] == {"component": "batch/job-kueue-controller"}
            assert involved["apiVersion"] == "batch/v1" and involved["uid"] == jobs[involved["name"]]["metadata"]["uid"]
            by_job.setdefault(involved["name"], []).append(entry)
            continue
        assert event["source"] == {"component": "kueue-admission"}
        assert involved["kind"] == "Workload" and involved["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert involved["uid"] == workloads[involved["name"]]["metadata"]["uid"]
        by_workload.setdefault(involved["name"], []).append(entry)
    [(kind, reason, message), admitted_event] = by_workload[a.name]
    assert (kind, reason) == ("Normal", "QuotaReserved")
    assert message.startswith("Quota reserved in ClusterQueue cluster-queue, wait time since queued was ")
    assert admitted_event == (
        "Normal",
        "Admitted",
        "Admitted by ClusterQueue cluster-queue, wait time since reservation was 0s",
    )
    assert by_workload[b.name] == [("Warning", "WaitingForQuota", PENDING_MESSAGE)]
    assert sorted(by_job["a"]) == [
        ("Normal", "CreatedWorkload", f"Created Workload: default/{a.name}"),
        ("Normal", "Started", "Admitted by clusterQueue cluster-queue"),
    ]
    assert by_job["b"] == [("Normal", "CreatedWorkload", f"Created Workload: default/{b.name}")]
    assert dispatcher.events_written == 6
    assert reserved.workload == a


async def test_preemption_requeue_readmission_and_finish_on_the_workload_object(api, bus: MemoryBus) -> None:
    """Decisions committed by hand on a running watcher and dispatcher: the evicted workload's object shows
    Evicted and Preempted; once its Job stopped and the quota is released, QuotaReserved=False PendingEvaluation,
    Requeued=True Preempted, no admission; admitted again, Evicted and Preempted turn False "Previously: ...";
    the Job completes: Finished=True Succeeded, and the admission stays."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*watch_all(Watcher(bus=bus, api=api)), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await set_up(api)
        await kube.apply_manifest(api, job("victim"))
        async with running(admitter(bus).run()):
            [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        ref = admitted.workload
        reservation = types.reservation_of(admitted)  # no checks: one message reserves and admits
        name = ref.name

        def workload_where(check: Callable[[dict], bool]) -> Any:
            return eventually(api, resources.WORKLOADS, namespace="default", name=name, check=check)

        await workload_where(lambda o: "Admitted" in conditions(o))
        # started before it is evicted: the Workload's Admitted (and its Events) come before the Job's start, and
        # a Job whose eviction is on the log before its start was written is not started (nor stopped)
        await eventually(api, JOBS, namespace="default", name="victim", check=lambda o: o["spec"]["suspend"] is False)
        await commit(bus, eviction(ref))
        evicted = await workload_where(lambda o: "Evicted" in conditions(o))
        await wait_for(bus, types.WorkloadStopped)  # the Job is suspended and runs no pod
        await commit(
            bus,
            types.QuotaReleased(
                workload=ref,
                cluster_queue="cluster-queue",
                reason="Preempted",
                cause_seq=0,
                at_ms=admitted.at_ms + 9000,
            ),
        )
        requeued = await workload_where(lambda o: "Requeued" in conditions(o))
        await commit(bus, reservation, types.admitted(reservation, at_ms=0))
        readmitted = await workload_where(lambda o: conditions(o)["QuotaReserved"]["status"] == "True")
        # started again before it can finish (the Workload's status is written before the Job's)
        await eventually(api, JOBS, namespace="default", name="victim", check=lambda o: o["spec"]["suspend"] is False)
        # the Job's own finish time (after its Workload was made, as a finish is), kept by Finished
        completed_at = manifests.format_time_ms(int(time.time() * 1000) + 60_000)
        complete = [{"type": "Complete", "status": "True", "lastTransitionTime": completed_at}]
        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="victim",
            patch={"status": {"conditions": complete}},
            subresource="status",
        )
        await wait_for(bus, types.WorkloadFinished)
        finished = await workload_where(lambda o: "Finished" in conditions(o))

    message = eviction(ref).message
    assert conditions(evicted)["Evicted"] == condition("Evicted", True, "Preempted", message)
    assert conditions(evicted)["Preempted"] == condition("Preempted", True, "InClusterQueue", message, generation=None)
    assert evicted["status"]["schedulingStats"] == {
        "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
    }
    assert evicted["status"]["admission"]["clusterQueue"] == "cluster-queue"

    requeued_conditions = conditions(requeued)
    pods_ready = requeued_conditions.pop("PodsReady", None)  # the watcher's report of the started Job, if in time
    assert pods_ready in (
        None,
        condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded"),
    )
    assert requeued_conditions == {
        "QuotaReserved": condition("QuotaReserved", False, "PendingEvaluation", message),
        "Evicted": condition("Evicted", True, "Preempted", message),
        "Admitted": condition("Admitted", False, "NoReservation", "The workload has no reservation"),
        "Preempted": condition("Preempted", True, "InClusterQueue", message, generation=None),
        "Requeued": condition("Requeued", True, "Preempted", message),
    }
    assert "admission" not in requeued["status"]
    assert requeued["status"]["accumulatedPastExecutionTimeSeconds"] == 9

    assert conditions(readmitted)["Evicted"] == condition("Evicted", False, "QuotaReserved", f"Previously: {message}")
    assert conditions(readmitted)["Preempted"] == condition(
        "Preempted", False, "QuotaReserved", f"Previously: {message}"
    )
    assert conditions(readmitted)["Requeued"] == condition("Requeued", True, "Preempted", message)
    assert readmitted["status"]["admission"]["clusterQueue"] == "cluster-queue"

    # the Complete condition carries no message: Kueue's Finished message is then empty (job_controller.go Finished)
    assert conditions(finished)["Finished"] == condition("Finished", True, "Succeeded", "")
    finished_at = [c for c in finished["status"]["conditions"] if c["type"] == "Finished"][0]["lastTransitionTime"]
    assert finished_at == completed_at
    assert finished["status"]["admission"]["clusterQueue"] == "cluster-queue"
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    on_job = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["kind"] == "Job"]
    assert ("Stopped", message) in on_job  # the job framework's Event when the eviction suspended the Job
    assert on_job.count(("Started", "Admitted by clusterQueue cluster-queue")) == 2  # admitted, then again
    on_workload = [e["reason"] for e in listed if e["involvedObject"]["name"] == ref.name]
    assert {"EvictedDueToPreempted", "Preempted"} <= set(on_workload)


@pytest.mark.timeout(60)  # waits for the coalesced queue status writes to settle, slow under load
async def test_redelivered_decisions_and_a_restarted_dispatcher_write_nothing(
    api, bus: MemoryBus, emu: ClusterEmulator
) -> None:
    """Once everything is written, the same decisions handled again leave every object's resourceVersion (and the
    server's) as it was and add nothing to the log; a new dispatcher, which lists what the server holds when it
    starts, catches up with the whole log and writes nothing either."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api)
        await kube.apply_manifest(api, job("a", parallelism=3))
        await kube.apply_manifest(api, job("b", parallelism=2))
        await wait_for(bus, types.WorkloadAdmitted)
        await wait_for(bus, types.WorkloadInadmissible)
        await wait_for(bus, types.DispatchApplied)
        await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=one_pending_one_admitted,
        )

        async def written() -> tuple[int, int, int]:
            return emu.resource_version, await bus.last_seq(), dispatcher.object_writes

        async def settled() -> tuple[int, int, int, int]:  # queue status is coalesced: 1 s apart at most
            return (*await written(), dispatcher.queues.pending())

        await wait_until(lambda: dispatcher.queues.pending() == 0, timeout=15.0, what="the queue status writes")
        await until_steady(settled, quiet=1.5, timeout=15.0, what="the server, the log and the dispatcher's writes")
        # the records carrying them (event schema 17), each once
        decisions = list(
            {
                m.seq: m
                for m, e in await decision_entries(bus)
                if isinstance(e, types.QuotaReserved | types.WorkloadAdmitted | types.WorkloadInadmissible)
            }.values()
        )
        await wait_until(lambda: all(m.seq in consumer.acked for m in decisions), what="the acks")
        version, last, writes = await written()
        objects = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"]
            for ref in (resources.WORKLOADS, resources.CLUSTER_QUEUES, resources.LOCAL_QUEUES)
            for o in (await kube.list_objects(api, ref))[0]
        }

        acked: list[int] = []
        naked: list[int] = []
        for message in decisions:  # each record delivered again, as the decisions it carries
            fresh = await redeliver(dispatcher, bus, message.seq)
            acked += fresh.acked
            naked += fresh.naked
        assert decisions and acked == [m.seq for m in decisions] and naked == []
        assert (emu.resource_version, await bus.last_seq(), dispatcher.object_writes) == (version, last, writes)

    restarted = Dispatcher(bus=bus, api=api)
    restarted_consumer = RecordingConsumer(await bind_decisions(bus, name="dispatcher-2"))
    async with running(restarted.fold_forever(), restarted.consume(restarted_consumer)):
        await wait_until(
            lambda: (
                restarted.state.last_seq >= decisions[-1].seq
                and {m.seq for m in decisions} <= set(restarted_consumer.acked)
            ),
            what="the restarted dispatcher catching up",
        )
        await asyncio.sleep(0.2)
    assert restarted.object_writes == 0  # (its redelivered StartJob patch changes nothing on the server)
    assert emu.resource_version == version
    after = {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"]
        for ref in (resources.WORKLOADS, resources.CLUSTER_QUEUES, resources.LOCAL_QUEUES)
        for o in (await kube.list_objects(api, ref))[0]
    }
    assert after == objects and len(objects) == 4  # two Workloads, the ClusterQueue, the LocalQueue


async def test_job_gone_before_it_is_started_releases_its_quota(api, bus: MemoryBus) -> None:
    """The admitted workload's Job was deleted while the watcher was down: the dispatcher records DispatchFailed
    404 and the workload deleted (ObjectDeleted with its UID, once even if redelivered), so the admitter releases
    the quota (QuotaReleased reason Deleted), the ClusterQueue's status shows nothing reserved, and the Workload
    object goes too (the garbage collector's job in a real cluster)."""
    async with running(*watch_all(Watcher(bus=bus, api=api)), admitter(bus).run()):
        await set_up(api)
        await kube.apply_manifest(api, job("fleeting"))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
    await kube.delete_object(api, JOBS, namespace="default", name="fleeting")

    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        admitter(bus).run(),
    ):
        [failed] = await wait_for(bus, types.DispatchFailed)
        [deleted] = await wait_for(bus, types.ObjectDeleted)
        [released] = await wait_for(bus, types.QuotaReleased)
        cq = await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=lambda o: o.get("status", {}).get("reservingWorkloads") == 0,
        )
        await gone(api, resources.WORKLOADS, namespace="default", name=admitted.workload.name)
        admitted_seq = next(m.seq for m, e in await decision_entries(bus) if isinstance(e, types.WorkloadAdmitted))
        await wait_until(lambda: admitted_seq in consumer.acked, what="the ack")
        await redeliver(dispatcher, bus, admitted_seq)  # its record delivered again

    assert (failed.action, failed.status, failed.reason, failed.workload) == (
        "StartJob",
        404,
        "NotFound",
        admitted.workload,
    )
    ref = admitted.workload
    assert (deleted.kind, deleted.namespace, deleted.name, deleted.uid) == (
        "Workload",
        ref.namespace,
        ref.name,
        ref.uid,
    )
    assert released.workload == ref and released.reason == "Deleted"
    assert cq["status"]["pendingWorkloads"] == 0 and cq["status"]["admittedWorkloads"] == 0
    assert len(await events_of(bus, types.ObjectDeleted)) == 1


async def test_a_workload_write_refused_by_the_server_is_a_dispatch_failed(
    api, bus: MemoryBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Workload apply the server refuses (403 Forbidden, injected) becomes DispatchFailed action SyncWorkload with
    the status and reason, once per state written (a refusal is not tried again: the Job observed and the Job
    admitted are two states, written once each, or once together when they fall within one sync round); the
    Job is still started."""
    real_apply = kube.apply_object

    async def forbidden(api_client, ref, **options):
        if ref == resources.WORKLOADS:
            raise kube.errors.error_for_status(status=403, reason="Forbidden", message="workloads are forbidden")
        return await real_apply(api_client, ref, **options)

    monkeypatch.setattr(kube, "apply_object", forbidden)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api)
        await kube.apply_manifest(api, job("sample"))
        await wait_for(bus, types.DispatchFailed)
        [applied] = await wait_for(bus, types.DispatchApplied)
        await asyncio.sleep(1.2)  # one more sync round: a refused write must not come back
    failures = await events_of(bus, types.DispatchFailed)
    assert {(f.action, f.status, f.reason) for f in failures} == {("SyncWorkload", 403, "Forbidden")}
    assert applied.action == "StartJob" and {f.workload for f in failures} == {applied.workload}
    seqs = [f.decision_seq for f in failures]
    assert len(seqs) == len(set(seqs)) and 1 <= len(seqs) <= 2, seqs


async def test_every_write_waits_for_the_rate_limiter(api, bus: MemoryBus, emu: ClusterEmulator) -> None:
    """With QPS 20 and burst 2, the dispatcher's writes for three admitted Jobs (Job patches, Workload objects and
    status, queue status) each take a token, and its Events one of a second limiter of the same size: the server
    saw no more writes than tokens were taken, and token k (from 0) came no earlier than (k - burst + 1) / QPS
    seconds after the first."""
    limiter = WriteLimiter(qps=20, burst=2)
    times: list[float] = []
    acquire = limiter.acquire

    async def timed_acquire(write_class: WriteClass = WriteClass.JOBS) -> None:
        await acquire(write_class)
        times.append(asyncio.get_running_loop().time())

    limiter.acquire = timed_acquire  # type: ignore[method-assign]
    dispatcher, consumer = await dispatcher_with_consumer(bus, api, limiter=limiter)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api, cpu=9)
        version = emu.resource_version
        for name in ("a", "b", "c"):
            await kube.apply_manifest(api, job(name))
        await wait_for(bus, types.DispatchApplied, count=3, timeout=10)
        await eventually(
            api,
            resources.CLUSTER_QUEUES,
            name="cluster-queue",
            check=lambda o: o.get("status", {}).get("admittedWorkloads") == 3,
        )
        await asyncio.sleep(0.2)
        manifests_writes = 3
        server_writes = emu.resource_version - version - manifests_writes

    events = dispatcher.event_limiter  # the Events' own budget, of the same size
    assert (events.qps, events.burst) == (limiter.qps, limiter.burst) and events.writes >= 6  # QuotaReserved, Admitted
    assert len(times) == limiter.writes >= server_writes - events.writes >= 3 + 3 * 2 + 2  # Jobs, Workloads, queues
    by_class = limiter.writes_by_class  # each kind of write in its priority class
    assert (
        by_class[WriteClass.JOBS] == 3 and by_class[WriteClass.WORKLOADS] >= 3 * 2 and by_class[WriteClass.QUEUES] >= 2
    )
    for k, moment in enumerate(times):
        assert moment - times[0] >= (k - limiter.burst + 1) / limiter.qps - 0.005, (k, moment - times[0])
    assert FIELD_MANAGER == "kueue-es"


async def test_a_missing_flavor_turns_ready_once_created_and_an_unrelated_one_writes_nothing(
    api, bus: MemoryBus, emu: ClusterEmulator
) -> None:
    """ClusterQueue cluster-queue names flavor default-flavor before it exists: Active=False FlavorNotFound with
    Kueue's message, its LocalQueue ClusterQueueIsInactive. Creating the flavor makes both Ready (a new
    lastTransitionTime); a flavor no ClusterQueue names then writes no status at all (its finalizer only)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*watch_all(Watcher(bus=bus, api=api)), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await kube.apply_manifest(api, cluster_queue("cluster-queue"))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))

        def reason_is(reason: str) -> Callable[[dict], bool]:
            return lambda o: [c.get("reason") for c in o.get("status", {}).get("conditions", [])] == [reason]

        cq = await eventually(api, resources.CLUSTER_QUEUES, name="cluster-queue", check=reason_is("FlavorNotFound"))
        [inactive] = cq["status"]["conditions"]
        assert {k: inactive[k] for k in ("type", "status", "message")} == {
            "type": "Active",
            "status": "False",
            "message": "Can't admit new workloads: references missing ResourceFlavor(s): default-flavor.",
        }
        await eventually(
            api,
            resources.LOCAL_QUEUES,
            name="user-queue",
            namespace="default",
            check=reason_is("ClusterQueueIsInactive"),
        )

        await kube.apply_manifest(api, flavor("default-flavor"))
        cq = await eventually(api, resources.CLUSTER_QUEUES, name="cluster-queue", check=reason_is("Ready"))
        [ready] = cq["status"]["conditions"]
        assert ready["status"] == "True" and ready["lastTransitionTime"] >= inactive["lastTransitionTime"]
        await eventually(api, resources.LOCAL_QUEUES, name="user-queue", namespace="default", check=reason_is("Ready"))

        await asyncio.sleep(0.3)
        writes = dispatcher.object_writes
        await kube.apply_manifest(api, flavor("unrelated"))
        await wait_until(
            lambda: "unrelated" in dispatcher.state.flavors, what="the dispatcher folding the unrelated flavor"
        )
        await asyncio.sleep(0.3)
        unrelated = await kube.get_object(api, resources.RESOURCE_FLAVORS, name="unrelated")
        # its resource-in-use finalizer only (Kueue's webhook puts it on every flavor); no queue status
        assert dispatcher.object_writes == writes + 1
        assert unrelated["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


async def test_an_invalid_object_gets_a_warning_event_not_only_a_log_line(
    emu: ClusterEmulator, api, bus: MemoryBus
) -> None:
    """From a cluster without kueue-es's CRDs (the emulator not validating), a ClusterQueue with a negative
    quota and a Job requesting cpu "lots" reach the watcher: each gives ObjectRejected and is not folded, and
    the dispatcher writes a Warning Event on the object naming the field (Invalid on the ClusterQueue, in
    namespace default; Kueue's ErrWorkloadCompose on the Job)."""
    emu.validate = False
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*watch_all(Watcher(bus=bus, api=api)), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await kube.apply_manifest(api, cluster_queue("broken", cpu=-1))
        await kube.apply_manifest(api, job("greedy", cpu="lots"))
        await wait_until(lambda: dispatcher.events_written >= 2, what="two Warning Events")
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    by_kind = {e["involvedObject"]["kind"]: e for e in listed if e["type"] == "Warning"}
    queue_event, job_event = by_kind["ClusterQueue"], by_kind["Job"]
    assert queue_event["involvedObject"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "name": "broken",
    }
    assert queue_event["reason"] == "Invalid"
    assert queue_event["message"].startswith(
        "ClusterQueue broken is invalid: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
    )
    assert job_event["involvedObject"]["namespace"] == "default" and job_event["involvedObject"]["name"] == "greedy"
    assert job_event["reason"] == "ErrWorkloadCompose" and "lots" in job_event["message"]
    assert len(await events_of(bus, types.ObjectRejected)) == 2
    assert not await events_of(bus, types.ClusterQueueObserved)


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


async def test_preemption_messages_name_the_workload_objects_uids_as_kueue_does(api, bus: MemoryBus) -> None:
    """A real preemption (admitter and preemptor on the bus, WorkloadPriorityClasses low and high,
    ``withinClusterQueue: LowerPriority``): the log knows a Job's workload by the Job's UID, but Kueue's
    messages name the Workload object's UID and the Job's in JobUID (preemption.go). The victim's
    Evicted and Preempted conditions and its Preempted Event name the preemptor's Workload object; the
    preemptor's PreemptedWorkload Event names the victim's; the victim Job's Stopped Event too."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    preemptor = DeciderLoop(bus=bus, decider=deciders.PREEMPTOR, wakeup=0.05)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        preemptor.run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, _priority_class("low", 100))
        await kube.apply_manifest(api, _priority_class("high", 1000))
        await kube.apply_manifest(api, flavor("default-flavor"))
        queue = cluster_queue("cluster-queue", cpu=2)
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await kube.apply_manifest(api, queue)
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        low, high = job("low", cpu="2"), job("high", cpu="2")
        low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
        high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
        await kube.apply_manifest(api, low)
        await wait_for(bus, types.WorkloadAdmitted)
        # started before it is preempted: a Job evicted before its start was written stays suspended and,
        # as in Kueue (a suspended job is not stopped), gets no Stopped Event
        await eventually(api, JOBS, namespace="default", name="low", check=lambda o: o["spec"]["suspend"] is False)
        await kube.apply_manifest(api, high)
        [evicted] = await wait_for(bus, types.EvictionRequested)
        victim, winner = await workload_of(bus, "low"), await workload_of(bus, "high")
        assert evicted.workload == victim and evicted.preemptor == winner

        def object_of(ref: types.WorkloadRef, check: Callable[[dict], bool]) -> Any:
            return eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=check)

        winner_object = await object_of(winner, lambda o: True)
        victim_object = await object_of(victim, lambda o: "Preempted" in conditions(o))
        # every Event this test reads, polled: the Job's Stopped comes with the stop's write, which may land
        # after the Workloads' Events (a fixed count and pause read too early under load)
        wanted = {(victim.name, "Preempted"), (victim.name, "EvictedDueToPreempted")}
        wanted |= {(winner.name, "PreemptedWorkload"), ("low", "Stopped")}
        listed: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
            seen = {(e["involvedObject"]["name"], e["reason"]) for e in listed}
            if wanted <= seen or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)

    winner_uid, victim_uid = winner_object["metadata"]["uid"], victim_object["metadata"]["uid"]
    # the API server gave the Workload objects UIDs of their own: the log's are the Jobs'
    assert winner_uid != winner.uid and victim_uid != victim.uid
    named = f"Preempted to accommodate a workload (UID: {winner_uid}, JobUID: {winner.uid}) due to prioritization"
    for kind in ("Evicted", "Preempted"):
        assert conditions(victim_object)[kind]["message"].startswith(named), conditions(victim_object)[kind]
    assert evicted.message.startswith(f"Preempted to accommodate a workload (UID: {winner.uid}, ")  # the log's
    by_reason = {(e["involvedObject"]["name"], e["reason"]): e["message"] for e in listed}
    assert by_reason[(victim.name, "Preempted")].startswith(named)
    assert by_reason[(victim.name, "EvictedDueToPreempted")].startswith(named)
    assert by_reason[(winner.name, "PreemptedWorkload")].startswith(
        f"Preempted workload {victim.key} (UID: {victim_uid}) in ClusterQueue cluster-queue"
    )
    assert by_reason[("low", "Stopped")].startswith(named)


async def _started(api, bus: MemoryBus, name: str, *, parallelism: int) -> types.WorkloadRef:
    """Job ``name`` created, admitted and unsuspended; its workload."""
    await kube.apply_manifest(api, job(name, parallelism=parallelism))
    [admitted] = await wait_for(bus, types.WorkloadAdmitted, count=1)
    await eventually(api, JOBS, namespace="default", name=name, check=lambda o: o["spec"]["suspend"] is False)
    return admitted.workload


async def _complete(api, name: str, *, succeeded: int) -> None:
    """Job ``name`` completes (its Complete condition, as the Job controller writes it)."""
    await kube.patch_object(
        api,
        JOBS,
        namespace="default",
        name=name,
        patch={"status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": succeeded}},
        subresource="status",
    )


FINALIZER = "kueue.x-k8s.io/resource-in-use"


def has_kueue_finalizer(obj: dict[str, Any]) -> bool:
    """Kueue's ``resource-in-use`` finalizer is on the object."""
    return FINALIZER in (obj["metadata"].get("finalizers") or [])


async def _job_suspended_once_gone(api, workload_object: dict[str, Any], *, job_name: str) -> bool:
    """Poll until ``workload_object`` (by UID) is gone, then say whether Job ``job_name`` is suspended."""
    uid = workload_object["metadata"]["uid"]
    meta = workload_object["metadata"]
    async with asyncio.timeout(10):
        while True:
            try:
                now = await kube.get_object(api, resources.WORKLOADS, namespace=meta["namespace"], name=meta["name"])
            except kube.errors.NotFoundError:
                now = None
            if now is None or now["metadata"]["uid"] != uid:
                job_now = await kube.get_object(api, JOBS, namespace=meta["namespace"], name=job_name)
                return bool(job_now["spec"].get("suspend"))
            await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def _kueue(
    api,
    bus: MemoryBus,
    *,
    watch: tuple[str, ...] = (),
    feature_gates: str = "",
    config: manager_config.ManagerConfig | None = None,
) -> AsyncIterator[tuple[Dispatcher, Any]]:
    """The watcher (Workload objects too, and the kinds ``watch`` names; ``feature_gates``: its
    ``--feature-gates``; ``config``: its manager configuration), an admitter and a dispatcher running against
    ``api``; yields the dispatcher and its consumer."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api, feature_gates=feature_gates, config=config)
    async with running(
        *watch_with_workloads(watcher),
        *(watcher.watch(kind) for kind in watch),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        yield dispatcher, consumer


async def test_a_running_job_deactivated_by_hand_is_stopped(api, bus: MemoryBus) -> None:
    """``kubectl patch workload ... spec.active=false`` on the Workload of a running Job: the admitter evicts it
    ``Deactivated`` (Kueue's workload controller), the dispatcher stops the Job (suspended, Kueue's Stopped
    Event), and only once the Job has stopped is its quota released (Kueue's job reconciler clears the
    reservation of a stopped job's evicted workload) and the waiting Job admitted into it. Before admitter
    logic 16 the quota was released first, while the Job still ran; before that the Job ran on beside the
    next one."""
    async with _kueue(api, bus) as (dispatcher, consumer):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("first", parallelism=3))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        first = admitted.workload
        await eventually(api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is False)
        await kube.apply_manifest(api, job("second", parallelism=3))
        second = await _pending_workload(bus, "second")
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=first.name, patch={"spec": {"active": False}}
        )
        stopped = await eventually(api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"])
        await wait_for(bus, types.WorkloadAdmitted, workload=second)
        await wait_until(lambda: dispatcher.events_written >= 7, what="the Job's Stopped Event")
        await asyncio.sleep(0.3)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        released = [e for e in await events_of(bus, types.QuotaReleased) if e.workload == first]
        evicted = await eventually(
            api, resources.WORKLOADS, namespace="default", name=first.name, check=lambda o: "Requeued" in conditions(o)
        )
        # reactivated by hand (kubectl kueue resume workload): Requeued=True Reactivated, as Kueue writes it
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=first.name, patch={"spec": {"active": True}}
        )
        reactivated = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=first.name,
            check=lambda o: conditions(o)["Requeued"]["status"] == "True",
        )

    assert [(r.reason, r.cluster_queue) for r in released] == [("Deactivated", "cluster-queue")]
    assert stopped["spec"]["suspend"] is True
    at = {}  # the log order: evicted, stopped, released, then the waiting Job admitted
    for message, event in await decision_entries(bus):
        if isinstance(event, types.EvictionRequested | types.WorkloadStopped | types.QuotaReleased):
            at.setdefault((type(event).__name__, event.reason), message.seq)
        elif isinstance(event, types.WorkloadAdmitted) and event.workload == second:
            at.setdefault(("WorkloadAdmitted", "second"), message.seq)
    order = [("EvictionRequested", "Deactivated"), ("WorkloadStopped", "Deactivated"), ("QuotaReleased", "Deactivated")]
    assert sorted(at, key=at.__getitem__) == [*order, ("WorkloadAdmitted", "second")]
    on_first = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == "first"]
    assert ("Stopped", "The workload is deactivated") in on_first
    on_workload = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == first.name]
    assert on_workload.count(("EvictedDueToDeactivated", "The workload is deactivated")) == 1
    assert conditions(evicted)["Evicted"]["reason"] == "Deactivated"
    assert conditions(evicted)["Requeued"]["reason"] == "Deactivated"
    requeued = conditions(reactivated)["Requeued"]
    assert (requeued["reason"], requeued["message"]) == ("Reactivated", "The workload was reactivated")
    applied = [e for e in await events_of(bus, types.DispatchApplied) if e.workload == first and e.action == "Evict"]
    assert [a.decision_seq > 0 for a in applied] == [True]


def _generations_written(obj: dict[str, Any], since: str) -> dict[str, int]:
    """Each condition of ``obj`` whose lastTransitionTime is ``since`` or later: its ``observedGeneration``."""
    return {
        c["type"]: c.get("observedGeneration", 0)
        for c in (obj.get("status") or {}).get("conditions") or []
        if c["lastTransitionTime"] >= since and c["type"] != "Preempted"
    }


@pytest.mark.parametrize("running_job", [True, False], ids=["admitted", "pending"])
async def test_conditions_written_after_a_spec_change_carry_its_generation(
    api, bus: MemoryBus, running_job: bool
) -> None:
    """``kubectl patch kwl X --type=merge -p '{"spec":{"active":false}}'`` (metadata.generation 2), then ``kubectl
    kueue resume workload X`` (3): Kueue writes each condition with the Workload's generation at the time of the
    write (SetStatusCondition with ``wl.Generation``), so Evicted ``Deactivated`` carries 2 and Requeued
    ``Reactivated`` 3. Before, the dispatcher took the generation of the object as its own last write had
    returned it, from before the user's patch: one behind (1, then 2)."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("first", parallelism=3 if running_job else 4))
        if running_job:
            [admitted] = await wait_for(bus, types.WorkloadAdmitted)
            ref = admitted.workload
        else:
            ref = await _pending_workload(bus, "first")
        written = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=ref.name,
            check=lambda o: "QuotaReserved" in conditions(o),
        )
        assert written["metadata"]["generation"] == 1
        await asyncio.sleep(1)  # the conditions written from here on have later lastTransitionTimes
        since = manifests.format_time_ms(int(time.time()) * 1000)
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=ref.name, patch={"spec": {"active": False}}
        )
        deactivated = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=ref.name,
            check=lambda o: (
                conditions(o).get("Evicted", {}).get("reason") == "Deactivated"
                and ("Requeued" in conditions(o) or not running_job)
            ),
        )
        await asyncio.sleep(1)
        again = manifests.format_time_ms(int(time.time()) * 1000)
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=ref.name, patch={"spec": {"active": True}}
        )
        reactivated = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=ref.name,
            check=lambda o: (
                conditions(o)["Requeued"]["reason"] == "Reactivated"
                if running_job
                else conditions(o)["QuotaReserved"]["reason"] != "Deactivated"
            ),
        )
    assert deactivated["metadata"]["generation"] == 2
    assert set(_generations_written(deactivated, since).values()) == {2}
    assert "Evicted" in _generations_written(deactivated, since)
    assert reactivated["metadata"]["generation"] == 3
    # pending again: QuotaReserved stays False (its reason back to Kueue's pending one), so keeps its transition time
    rewritten = "Requeued" if running_job else "QuotaReserved"
    assert conditions(reactivated)[rewritten]["observedGeneration"] == 3
    assert set(_generations_written(reactivated, again).values()) <= {3}


async def test_conditions_written_after_a_spec_change_the_log_does_not_carry_carry_its_generation(
    api, bus: MemoryBus
) -> None:
    """A spec write on a pending job's Workload object that the log does not read back (``spec.maximumExecution
    TimeSeconds`` patched on the object: the log takes it from the job) moves its generation to 2; the admission
    that follows is written with 2, as Kueue stamps the generation of the object it writes. Before, the dispatcher
    stamped the 1 of its own last write's answer."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("first", parallelism=4))
        ref = await _pending_workload(bus, "first")
        await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=ref.name,
            check=lambda o: "QuotaReserved" in conditions(o),
        )
        patch = {"spec": {"maximumExecutionTimeSeconds": 600}}
        await kube.patch_object(api, resources.WORKLOADS, namespace="default", name=ref.name, patch=patch)
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=4))  # room for it: admitted
        admitted = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=ref.name,
            check=lambda o: conditions(o).get("Admitted", {}).get("status") == "True",
        )
        await asyncio.sleep(0.5)  # every write of the admission made
        admitted = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=ref.name)
    assert admitted["metadata"]["generation"] == 2
    for kind in ("QuotaReserved", "Admitted"):
        assert conditions(admitted)[kind]["observedGeneration"] == 2, kind


async def test_a_running_jobs_workload_deleted_by_hand_stops_it_and_is_made_again(api, bus: MemoryBus) -> None:
    """``kubectl delete workload`` of a running Job's Workload (Kueue's job_controller_test "The workload is
    deleted while admitted"): the quota is released, the Job is suspended with its template given back (the
    flavor's node selector and Kueue's labels out) and gets Kueue's Stopped Event "Workload is deleted", the
    waiting Job is admitted into the quota, and the stopped Job gets a new Workload object (another UID),
    pending, that is admitted once the quota is back. Before, nothing was logged and the Job ran on."""
    async with _kueue(api, bus) as (dispatcher, consumer):
        await kube.apply_manifest(api, flavor("default-flavor", node_labels={"instance-type": "on-demand"}))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=3))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("first", parallelism=3))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        first = admitted.workload
        started = await eventually(
            api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is False
        )
        old_object = await eventually(api, resources.WORKLOADS, namespace="default", name=first.name, check=bool)
        await kube.apply_manifest(api, job("second", parallelism=3))
        second = await _pending_workload(bus, "second")
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=first.name)
        held = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=first.name)
        suspended_when_gone = await _job_suspended_once_gone(api, old_object, job_name="first")
        stopped = await eventually(api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"])
        await wait_for(bus, types.WorkloadAdmitted, workload=second)
        made_again = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=first.name,
            check=lambda o: (
                o["metadata"]["uid"] != old_object["metadata"]["uid"]
                and conditions(o).get("QuotaReserved", {}).get("reason") == "WaitingForQuota"
            ),
        )
        await wait_until(lambda: dispatcher.events_written >= 8, what="the Job's Stopped Event")
        await asyncio.sleep(0.3)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        released = [e for e in await events_of(bus, types.QuotaReleased) if e.workload == first]
        # the second Job finishes: the new Workload of the first is admitted and its Job runs again
        await _complete(api, "second", succeeded=3)
        restarted = await eventually(
            api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is False
        )
        readmitted = [e for e in await events_of(bus, types.WorkloadAdmitted) if e.workload == first]
    report = check_log([m for m, _ in await log_entries(bus)], deciders.BY_ROLE)

    # every decision, the re-created workload's admission included, is re-derived byte for byte
    assert not report.mismatches and report.matched == report.decisions > 0, report.mismatches[:1]
    assert started["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    # Kueue's finalizer holds the deleted Workload until its Job is stopped (reconciler.go step 1.1)
    assert old_object["metadata"]["finalizers"] == [FINALIZER]
    assert held["metadata"]["uid"] == old_object["metadata"]["uid"] and held["metadata"]["deletionTimestamp"]
    assert suspended_when_gone is True
    assert made_again["metadata"]["finalizers"] == [FINALIZER]
    assert [(r.reason, r.cluster_queue) for r in released] == [("Deleted", "cluster-queue")]
    template = stopped["spec"]["template"]
    assert "nodeSelector" not in template["spec"]
    assert "kueue.x-k8s.io/podset" not in (template.get("metadata", {}).get("labels") or {})
    on_first = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == "first"]
    assert ("Stopped", "Workload is deleted") in on_first
    assert on_first.count(("CreatedWorkload", f"Created Workload: default/{first.name}")) == 2
    pending = conditions(made_again)
    assert pending["QuotaReserved"]["status"] == "False"
    # as a new pending Workload's: nothing of the deleted one's admission (no Evicted, Requeued, Admitted=True)
    assert sorted(pending) == ["Admitted", "PodsReady", "QuotaReserved"]
    assert pending["Admitted"]["reason"] == "NoReservation"
    assert made_again["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == first.uid
    assert len(readmitted) == 2  # admitted, deleted, made again and admitted afresh
    assert restarted["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "on-demand"}


async def test_a_pending_jobs_workload_deleted_by_hand_is_made_again_at_once(api, bus: MemoryBus) -> None:
    """``kubectl delete workload`` of a Job still waiting for quota: nothing runs, so the Job gets a new
    Workload at once (a new object, queued again from its creation, as Kueue's reconciler makes one for a job
    that has none), and the Job stays suspended."""
    async with _kueue(api, bus) as (dispatcher, consumer):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("big", parallelism=4))
        big = await _pending_workload(bus, "big")
        old_object = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=big.name,
            check=lambda o: "QuotaReserved" in conditions(o),
        )
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=big.name)
        made_again = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=big.name,
            check=lambda o: o["metadata"]["uid"] != old_object["metadata"]["uid"] and "QuotaReserved" in conditions(o),
        )
        observed = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.key == big.key]
        job_now = await kube.get_object(api, JOBS, namespace="default", name="big")
        new_uid = made_again["metadata"]["uid"]
        await wait_until(lambda: dispatcher.events_written >= 4, what="the new Workload's pending Event")
        await asyncio.sleep(0.3)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")

    deleted = [e for e in await events_of(bus, types.ObjectDeleted) if e.kind == "Workload"]
    assert [(d.name, d.uid) for d in deleted] == [(big.name, big.uid)]
    assert len(observed) == 2 and observed[1].workload.metadata.uid == big.uid
    # created when it was made again, not with the Job: it queues behind the Workloads created before it
    first_created, made_again_created = (o.workload.metadata.creation_timestamp_ms for o in observed)
    assert made_again_created > first_created
    assert conditions(made_again)["QuotaReserved"]["reason"] == "ExceedsMaxQuota"  # 4 CPUs in a 3-CPU queue
    assert job_now["spec"]["suspend"] is True
    # the new object gets its own pending Event, though the old one had the same reason and message
    on_new = [e["reason"] for e in listed if e["involvedObject"].get("uid") == new_uid]
    assert on_new == ["ExceedsMaxQuota"]


def _max_capacity(resource: str, flavor_name: str, request: str, capacity: str) -> str:
    return (
        f"insufficient quota for {resource} in flavor {flavor_name}, previously considered podsets requests (0) + "
        f"current podset request ({request}) > maximum capacity ({capacity})"
    )


async def test_a_workload_no_flavor_can_ever_hold_gets_kueues_reason_and_every_resource(api, bus: MemoryBus) -> None:
    """Found by a user's trial. ClusterQueue pp (on-demand: 4 CPUs, 8Gi; preempting LowerPriority) is full; a
    Job asking 1 CPU and 10Gi can never fit: its Workload is QuotaReserved=False ``ExceedsMaxQuota`` (the flavor's
    most severe reason, its cpu one cleared as preemption could serve it: Kueue's fitsResourceQuota and
    resolveNoFitReason), not ``WaitingForQuota``. team-a (on-demand 4 CPUs with borrowingLimit 2 and 8Gi, then
    spot 4 CPUs and 8Gi, team-b lending its on-demand) gets a Job asking 10 CPUs and 20Gi: its message names the
    memory of both flavors too, as Kueue's findFlavorForPodSets checks every resource of a flavor (admitter
    logic 55)."""
    async with _kueue(api, bus):
        await kube.apply_manifest(api, flavor("on-demand"))
        await kube.apply_manifest(api, flavor("spot"))
        pp = cluster_queue("pp", flavor_name="on-demand", cpu=4, memory="8Gi")
        pp["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        team_a = cluster_queue("team-a", flavor_name="on-demand", cpu=4, memory="8Gi")
        [group] = team_a["spec"]["resourceGroups"]
        group["flavors"][0]["resources"][0]["borrowingLimit"] = 2
        spot = [{"name": "cpu", "nominalQuota": 4}, {"name": "memory", "nominalQuota": "8Gi"}]
        group["flavors"].append({"name": "spot", "resources": spot})
        team_b = cluster_queue("team-b", flavor_name="on-demand", cpu=4, memory="8Gi")
        for queue in (pp, team_a, team_b):
            if queue is not pp:
                queue["spec"]["cohortName"] = "pool"
            await kube.apply_manifest(api, queue)
            await kube.apply_manifest(api, local_queue(queue["metadata"]["name"], queue["metadata"]["name"]))
        await kube.apply_manifest(api, job("full", queue="pp", cpu="4", memory="1Gi"))
        await wait_for(bus, types.WorkloadAdmitted)
        await kube.apply_manifest(api, job("big-memory", queue="pp", cpu="1", memory="10Gi"))
        await kube.apply_manifest(api, job("huge", queue="team-a", cpu="10", memory="20Gi"))
        pending = {}
        for name in ("big-memory", "huge"):
            ref = await _pending_workload(bus, name)
            pending[name] = await eventually(
                api,
                resources.WORKLOADS,
                namespace="default",
                name=ref.name,
                check=lambda o: "QuotaReserved" in conditions(o),
            )

    big_memory = conditions(pending["big-memory"])["QuotaReserved"]
    assert (big_memory["reason"], big_memory["message"]) == (
        "ExceedsMaxQuota",
        f"couldn't assign flavors to pod set main: {_max_capacity('memory', 'on-demand', '10Gi', '8Gi')}, "
        "insufficient unused quota for cpu in flavor on-demand, 1 more needed",
    )
    lines = [
        _max_capacity("cpu", "on-demand", "10", "6"),
        _max_capacity("cpu", "spot", "10", "4"),
        _max_capacity("memory", "on-demand", "20Gi", "16Gi"),
        _max_capacity("memory", "spot", "20Gi", "8Gi"),
    ]
    huge = conditions(pending["huge"])["QuotaReserved"]
    assert (huge["reason"], huge["message"]) == (
        "ExceedsMaxQuota",
        f"couldn't assign flavors to pod set main: {', '.join(lines)}",
    )


async def test_deleting_a_running_job_releases_its_quota_and_writes_nothing_to_it(api, bus: MemoryBus) -> None:
    """A running Job deleted (``kubectl delete job``): its workload is deleted and its quota released (reason
    Deleted); the dispatcher finds the Job gone and writes nothing, records no failure, and no new Workload is
    made for it (its Workload object going, as the garbage collector deletes it, is not a hand deletion)."""
    async with _kueue(api, bus) as (dispatcher, consumer):
        await set_up(api, cpu=3)
        short = await _started(api, bus, "short", parallelism=3)
        await eventually(api, resources.WORKLOADS, namespace="default", name=short.name, check=bool)
        held = await eventually(
            api, resources.WORKLOADS, namespace="default", name=short.name, check=lambda o: bool(o.get("status"))
        )
        await kube.delete_object(api, JOBS, namespace="default", name="short")
        [released] = await wait_for(bus, types.QuotaReleased)
        # Kueue's finalizer off, then the object deleted (FinalizeOrphanedWorkload; the emulator has no collector)
        await gone(api, resources.WORKLOADS, namespace="default", name=short.name)
        release_seq = next(m.seq for m, e in await decision_entries(bus) if isinstance(e, types.QuotaReleased))
        await wait_until(lambda: release_seq in consumer.acked, what="the release's ack")
        await asyncio.sleep(0.3)

    assert (released.reason, released.workload) == ("Deleted", short)
    assert held["metadata"]["finalizers"] == [FINALIZER]
    assert await events_of(bus, types.DispatchFailed) == []
    assert [e.action for e in await events_of(bus, types.DispatchApplied)] == ["StartJob"]
    assert len(await events_of(bus, types.WorkloadObserved)) == 1
    assert dispatcher.view.deleted_stops == {}


async def test_a_job_whose_workload_was_deleted_gets_a_new_one_only_once_its_pods_have_ended(
    api, bus: MemoryBus
) -> None:
    """Kueue's handleJobWithNoWorkload: "Job is suspended but still has active pods, waiting". The Workload of a
    running Job (2 active pods) deleted by hand: the Job is suspended at once, but its new Workload is made only
    once no pod of it is active; before, it was made (and could be admitted) while the old pods still ran."""
    async with _kueue(api, bus) as (dispatcher, _):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "busy", parallelism=2)
        await kube.patch_object(
            api, JOBS, namespace="default", name="busy", patch={"status": {"active": 2}}, subresource="status"
        )
        await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=bool)
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=ref.name)
        await eventually(api, JOBS, namespace="default", name="busy", check=lambda o: o["spec"]["suspend"])
        await wait_for(bus, types.QuotaReleased, workload=ref)
        await asyncio.sleep(0.5)
        while_active = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.key == ref.key]
        await kube.patch_object(
            api, JOBS, namespace="default", name="busy", patch={"status": {"active": 0}}, subresource="status"
        )
        await wait_for(bus, types.WorkloadObserved, count=2)
        readmitted = await wait_for(bus, types.WorkloadAdmitted, count=2)

    assert len(while_active) == 1  # only the first: nothing new while two pods were active
    assert [a.workload for a in readmitted] == [ref, ref]


async def test_a_finished_workload_lets_go_of_kueues_finalizer_and_stays(api, bus: MemoryBus) -> None:
    """Kueue's job reconciler takes its ``resource-in-use`` finalizer off a finished Workload (reconciler.go:
    ``workload.RemoveFinalizer`` once finished); the object stays, Finished, until its job goes."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        done = await _started(api, bus, "done", parallelism=1)
        running_object = await eventually(
            api, resources.WORKLOADS, namespace="default", name=done.name, check=lambda o: bool(o.get("status"))
        )
        await _complete(api, "done", succeeded=1)
        finished = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=done.name,
            check=lambda o: "Finished" in conditions(o) and not o["metadata"].get("finalizers"),
        )

    assert running_object["metadata"]["finalizers"] == [FINALIZER]
    assert finished["metadata"]["uid"] == running_object["metadata"]["uid"]
    assert conditions(finished)["Finished"]["reason"] == "Succeeded"


async def test_a_finished_workload_deleted_by_hand_stays_gone_and_its_job_gets_no_new_facts(
    api, bus: MemoryBus
) -> None:
    """``kubectl delete workload`` of a finished Job's Workload (as the retention policies' afterFinished does):
    Kueue's job reconciler makes no Workload for a finished job (reconciler.go step 3). The deletion is on the log
    once, and the finished Job gives no fact any more: not at its next change, nor when a restarted watcher lists
    it. Before, the watcher published its WorkloadFinished again after the deletion, and at every restart."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        done = await _started(api, bus, "done", parallelism=1)
        await _complete(api, "done", succeeded=1)
        await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=done.name,
            check=lambda o: "Finished" in conditions(o) and not o["metadata"].get("finalizers"),
        )
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=done.name)
        await wait_for(bus, types.ObjectDeleted, kind="Workload")
        await kube.patch_object(
            api, JOBS, namespace="default", name="done", patch={"metadata": {"annotations": {"touched": "yes"}}}
        )
        await asyncio.sleep(0.5)
    async with running(*watch_with_workloads(Watcher(bus=bus, api=api))):
        await asyncio.sleep(1.0)
    about_done = [
        type(e).__name__
        for _, e in await log_entries(bus)
        if (isinstance(e, types.WorkloadObserved | types.WorkloadFinished) and e.workload.key == done.key)
        or (isinstance(e, types.ObjectDeleted) and f"{e.namespace}/{e.name}" == done.key)
    ]

    assert about_done == ["WorkloadObserved", "WorkloadFinished", "ObjectDeleted"]
    with pytest.raises(kube.errors.NotFoundError):
        await kube.get_object(api, resources.WORKLOADS, namespace="default", name=done.name)


async def test_a_workload_deleted_while_no_watcher_ran_is_seen_when_it_starts(api, bus: MemoryBus) -> None:
    """``kubectl delete workload`` of a running Job while the watcher is down: Kueue's finalizer holds the object,
    so the restarted watcher finds it in its list marked for deletion and reads that as the deletion: the Job
    is stopped (a waiting Job takes the quota), the old object goes and a new one is made; then its DELETED,
    and a third watcher's list, change nothing more. Found by a fresh-user check: it stayed Terminating for
    ever, its Job running."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        async with running(*watch_with_workloads(Watcher(bus=bus, api=api))):
            await set_up(api, cpu=3)
            first = await _started(api, bus, "first", parallelism=3)
            old_object = await eventually(
                api, resources.WORKLOADS, namespace="default", name=first.name, check=has_kueue_finalizer
            )
            await kube.apply_manifest(api, job("second", parallelism=3))
            second = await _pending_workload(bus, "second")
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=first.name)
        restarted = Watcher(bus=bus, api=api)
        await restarted.learn_from_log()
        # as the service runs its watches: the Workload objects listed once the jobs are
        async with running(restarted.run((*KUEUE_KINDS, "Job", WORKLOAD_KIND))):
            stopped = await eventually(
                api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is True
            )
            made_again = await eventually(
                api,
                resources.WORKLOADS,
                namespace="default",
                name=first.name,
                check=lambda o: o["metadata"]["uid"] != old_object["metadata"]["uid"] and has_kueue_finalizer(o),
            )
            await asyncio.sleep(0.5)
        third = Watcher(bus=bus, api=api)
        await third.learn_from_log()
        async with running(third.run((*KUEUE_KINDS, "Job", WORKLOAD_KIND))):
            await asyncio.sleep(0.5)
        deleted = [e for e in await events_of(bus, types.ObjectDeleted) if e.kind == "Workload"]
        admitted = [e.workload for e in await events_of(bus, types.WorkloadAdmitted)]
        job_now = await kube.get_object(api, JOBS, namespace="default", name="first")

    assert stopped["spec"]["suspend"] is True and job_now["spec"]["suspend"] is True
    assert [(d.name, d.uid) for d in deleted] == [(first.name, first.uid)]  # once: not the new one's
    assert admitted == [first, second]  # the waiting Job took the quota given back
    assert not made_again["metadata"].get("deletionTimestamp")


async def test_a_restarted_watcher_does_not_take_an_old_terminating_object_for_the_new_workloads(
    api, bus: MemoryBus
) -> None:
    """A pending Job's Workload deleted by hand while no dispatcher runs: the watcher publishes the deletion and,
    the Job being suspended, its new workload at once; the old object stays, held by Kueue's finalizer (nothing
    lets go of it). A watcher restarted then lists that old object marked for deletion: the log's workload was
    made after that deletion, so it is not deleted again. Once a dispatcher runs, the old object goes and the
    new one is written."""
    dispatcher_stack, watcher_stack = contextlib.AsyncExitStack(), contextlib.AsyncExitStack()
    async with running(admitter(bus).run()):
        dispatcher, consumer = await dispatcher_with_consumer(bus, api)
        await dispatcher_stack.enter_async_context(running(dispatcher.fold_forever(), dispatcher.consume(consumer)))
        await watcher_stack.enter_async_context(running(*watch_with_workloads(Watcher(bus=bus, api=api))))
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("big", parallelism=4))
        big = await _pending_workload(bus, "big")
        old_object = await eventually(
            api, resources.WORKLOADS, namespace="default", name=big.name, check=has_kueue_finalizer
        )
        await dispatcher_stack.aclose()
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name=big.name)
        await wait_for(bus, types.WorkloadObserved, workload__metadata__name=big.name, count=2)
        await watcher_stack.aclose()
        restarted = Watcher(bus=bus, api=api)
        await restarted.learn_from_log()
        async with running(restarted.run((*KUEUE_KINDS, "Job", WORKLOAD_KIND))):
            await asyncio.sleep(0.5)
            still_held = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=big.name)
            deleted = [e for e in await events_of(bus, types.ObjectDeleted) if e.kind == "Workload"]
            dispatcher, consumer = await dispatcher_with_consumer(bus, api)
            async with running(dispatcher.fold_forever(), dispatcher.consume(consumer)):
                made_again = await eventually(
                    api,
                    resources.WORKLOADS,
                    namespace="default",
                    name=big.name,
                    check=lambda o: o["metadata"]["uid"] != old_object["metadata"]["uid"],
                )

    assert (
        still_held["metadata"]["uid"] == old_object["metadata"]["uid"] and still_held["metadata"]["deletionTimestamp"]
    )
    assert [(d.name, d.uid) for d in deleted] == [(big.name, big.uid)]  # the first deletion only
    # and the restarted watcher published none (a second one would carry the first's message id, so a bus
    # within its duplicate window drops it: past that window it would delete the new workload)
    assert restarted.jobs.deleted_objects == {}
    assert has_kueue_finalizer(made_again) and not made_again["metadata"].get("deletionTimestamp")


async def test_a_pending_job_unsuspended_by_hand_is_suspended_again(api, bus: MemoryBus) -> None:
    """``kubectl patch job ... suspend=false`` on a Job whose workload waits for quota: Kueue's job reconciler
    (reconciler.go step 8) suspends it again with the Stopped Event "Not admitted by cluster queue", so it
    cannot run beside the admitted one with no quota. Before, it ran on (6 CPU in a 3 CPU queue). The write
    answers no decision: no dispatch result names it, and the log replays with every decision matched."""
    async with _kueue(api, bus) as (dispatcher, _):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("first", parallelism=3))
        await wait_for(bus, types.WorkloadAdmitted)
        await eventually(api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is False)
        await kube.apply_manifest(api, job("second", parallelism=3))
        second = await _pending_workload(bus, "second")
        await kube.patch_object(api, JOBS, namespace="default", name="second", patch={"spec": {"suspend": False}})
        suspended = await eventually(
            api, JOBS, namespace="default", name="second", check=lambda o: o["spec"]["suspend"] is True
        )
        await wait_until(lambda: dispatcher.suspension.stopped == 1, what="the stop of the unadmitted Job")
        await asyncio.sleep(0.3)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        first_object = await kube.get_object(api, JOBS, namespace="default", name="first")
    on_second = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == "second"]
    assert ("Stopped", "Not admitted by cluster queue") in on_second
    assert suspended["spec"]["suspend"] is True and first_object["spec"]["suspend"] is False
    assert not [e for e in await events_of(bus, types.WorkloadAdmitted) if e.workload == second]
    dispatched = [e for e in await events_of(bus, types.DispatchApplied) if e.workload == second]
    assert dispatched == []
    report = check_log([m for m, _ in await log_entries(bus)], deciders.BY_ROLE)
    assert report.ok and report.matched == report.decisions > 0, report.mismatches[:1]


async def test_an_admitted_job_suspended_by_hand_is_started_again(api, bus: MemoryBus) -> None:
    """``kubectl patch job ... suspend=true`` on a Job whose workload is admitted: Kueue's job reconciler
    (reconciler.go step 7, "Job admitted, unsuspending") starts it again, with its flavor's node selector and
    a second Started Event. Before, it stayed suspended while its workload held the quota."""
    async with _kueue(api, bus) as (dispatcher, _):
        await kube.apply_manifest(api, flavor("default-flavor", node_labels={"instance-type": "on-demand"}))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=3))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("first", parallelism=3))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        await eventually(api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is False)
        # its pods run and are ready (the Job controller's status), then someone suspends it
        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="first",
            patch={"status": {"active": 3, "ready": 3}},
            subresource="status",
        )
        await wait_for(bus, types.WorkloadPodsReady, workload=admitted.workload, ready=True)
        await kube.patch_object(api, JOBS, namespace="default", name="first", patch={"spec": {"suspend": True}})
        await eventually(api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is True)
        await wait_until(lambda: dispatcher.suspension.restarted == 1, what="the restart of the admitted Job")
        restarted = await eventually(
            api, JOBS, namespace="default", name="first", check=lambda o: o["spec"]["suspend"] is False
        )
        await asyncio.sleep(0.3)
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    selector = restarted["spec"]["template"]["spec"].get("nodeSelector")
    assert selector == {"instance-type": "on-demand"}
    on_first = [(e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == "first"]
    started = [e for e in on_first if e[0] == "Started"]
    assert started and all(m == "Admitted by clusterQueue cluster-queue" for _, m in started)
    assert len(started) == 2 or any(
        e.get("count", 1) == 2 for e in listed if e["involvedObject"]["name"] == "first" and e["reason"] == "Started"
    )
    assert not await events_of(bus, types.EvictionRequested)  # nothing decided: the workload stays admitted


async def test_a_local_queue_made_again_under_its_name_gets_its_status(api, bus: MemoryBus) -> None:
    """``kubectl delete lq user-queue`` then ``kubectl apply`` of the same LocalQueue while a workload admitted
    through it still runs: the new object (another UID) gets its status, as Kueue's LocalQueue reconciler writes
    it, with a transition time of its own. Before, the status write was skipped as unchanged against the old
    object the dispatcher had stored, and ``kubectl get lq`` showed empty columns."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("first", parallelism=3))
        await wait_for(bus, types.WorkloadAdmitted)
        old = await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=lambda o: (o.get("status") or {}).get("admittedWorkloads") == 1,
        )
        await kube.delete_object(api, resources.LOCAL_QUEUES, namespace="default", name="user-queue")
        await wait_for(bus, types.ObjectDeleted, kind="LocalQueue")
        await asyncio.sleep(1.1)  # a transition time of its own, in whole seconds
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        new = await eventually(
            api,
            resources.LOCAL_QUEUES,
            namespace="default",
            name="user-queue",
            check=lambda o: o["metadata"]["uid"] != old["metadata"]["uid"] and bool(o.get("status")),
        )
    assert new["status"]["admittedWorkloads"] == 1
    [active] = new["status"]["conditions"]
    assert (active["type"], active["status"]) == ("Active", "True")
    assert active["lastTransitionTime"] > old["status"]["conditions"][0]["lastTransitionTime"]


async def test_the_max_exec_time_label_is_the_workload_objects_field(api, bus: MemoryBus) -> None:
    """A Job labelled ``kueue.x-k8s.io/max-exec-time-seconds: "300"``: its Workload object carries
    ``spec.maximumExecutionTimeSeconds: 300``, as Kueue's jobframework NewWorkload writes it. Before, the
    admitter enforced the limit but ``kubectl get workload`` did not show it."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        limited = job("limited")
        limited["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "300"
        await kube.apply_manifest(api, limited)
        await kube.apply_manifest(api, job("plain"))
        [one, other] = [(await _pending_or_admitted(bus, name)) for name in ("limited", "plain")]
        with_limit = await eventually(api, resources.WORKLOADS, namespace="default", name=one.name, check=bool)
        without = await eventually(api, resources.WORKLOADS, namespace="default", name=other.name, check=bool)
    assert with_limit["spec"]["maximumExecutionTimeSeconds"] == 300
    assert "maximumExecutionTimeSeconds" not in without["spec"]


async def test_the_configured_labels_and_annotations_are_copied_to_the_workload_object(api, bus: MemoryBus) -> None:
    """job_controller_test.go "Should reconcile workload and job for all jobs" (labelKeysToCopy ``toCopyKey``) and
    "Job controller with CustomMetricLabels" (the gate on, customLabels of sourceKind Workload): the Workload object
    carries the Job's ``toCopyKey`` and ``job-label`` labels and ``job-annotation`` annotation beside its
    ``kueue.x-k8s.io/job-uid``, none of the others (not the queue-name label either). Before, the watcher read
    neither setting (that a later change of the Job's label is not copied: tests/kube/test_job_conversion.py)."""
    config = manager_config.parse(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "integrations: {labelKeysToCopy: [toCopyKey]}\n"
        "metrics: {customLabels: [{name: custom_label_key, sourceLabelKey: job-label, sourceKind: Workload,"
        " trackedValues: [label-value]}, {name: custom_annotation_key, sourceAnnotationKey: job-annotation,"
        " sourceKind: Workload, trackedValues: [annotation-value]}]}\n",
        feature_gates="CustomMetricLabels=true",
    )
    async with _kueue(api, bus, config=config):
        await set_up(api, cpu=3)
        labelled = job("labelled")
        labelled["metadata"]["labels"].update(
            {"toCopyKey": "toCopyValue", "doNotCopyKey": "doNotCopyValue", "job-label": "label-value"}
        )
        labelled["metadata"]["annotations"] = {"job-annotation": "annotation-value", "dont-copy-annotation": "x"}
        await kube.apply_manifest(api, labelled)
        ref = await _pending_or_admitted(bus, "labelled")
        made = await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=bool)
        stored = await kube.get_object(api, JOBS, namespace="default", name="labelled")
    assert made["metadata"]["labels"] == {
        "toCopyKey": "toCopyValue",
        "job-label": "label-value",
        "kueue.x-k8s.io/job-uid": stored["metadata"]["uid"],
    }
    assert made["metadata"].get("annotations") == {"job-annotation": "annotation-value"}


async def test_a_single_pods_workload_object_carries_the_pods_spec(api, bus: MemoryBus) -> None:
    """Kueue pod_controller.go constructPodSet: a single Pod's pod set template is the Pod's spec. The Workload
    object showed a container ``main`` with the requests alone, so a MultiKueue worker (multikueue/pod_test.go)
    found the Pod it runs out of sync with its copy of that Workload and the manager dispatched it again forever."""
    async with _kueue(api, bus, watch=("Pod",)):
        await set_up(api, cpu=3)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "lone", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
        await kube.apply_manifest(api, pod)
        ref = await _pending_or_admitted(bus, "lone")
        obj = await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=bool)
        stored = await kube.get_object(api, resources.PODS, namespace="default", name="lone")
    [pod_set] = obj["spec"]["podSets"]
    assert pod_set["name"] == "main"
    assert pod_set["template"]["spec"]["containers"] == stored["spec"]["containers"]
    assert pod_set["template"]["spec"]["containers"][0]["image"] == "busybox"
    assert pod_set["topologyRequest"] == {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}


async def _pending_or_admitted(bus: MemoryBus, job_name: str) -> types.WorkloadRef:
    """The workload of Job ``job_name`` once the log has observed it."""
    async with asyncio.timeout(10):
        while True:
            for event in await events_of(bus, types.WorkloadObserved):
                owner = event.workload.owner
                if owner is not None and owner.name == job_name:
                    meta = event.workload.metadata
                    return types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
            await asyncio.sleep(0.02)


async def test_a_deleted_workload_priority_class_leaves_its_workloads_priority(api, bus: MemoryBus) -> None:
    """``kubectl delete workloadpriorityclass high`` while a Job naming it runs and another waits: both keep
    priority 50 (Kueue leaves spec.priority as its controller last wrote it), the waiting one is admitted once
    quota frees, and neither is Misconfigured. Before, both fell to priority 0 and a waiting one whose turn
    came was "WorkloadPriorityClass high not found" for ever."""
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}}
    async with _kueue(api, bus):
        await kube.apply_manifest(api, {**wpc, "value": 50})
        await set_up(api, cpu=3)
        runner, waiter = job("runner", parallelism=3), job("waiter", parallelism=3)
        for manifest in (runner, waiter):
            manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
        await kube.apply_manifest(api, runner)
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        await kube.apply_manifest(api, waiter)
        waiting = await _pending_workload(bus, "waiter")
        await kube.delete_object(api, resources.WORKLOAD_PRIORITY_CLASSES, name="high")
        await wait_for(bus, types.ObjectDeleted, kind="WorkloadPriorityClass")
        await asyncio.sleep(0.5)
        kept = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=admitted.workload.name)
        await _complete(api, "runner", succeeded=3)
        await wait_for(bus, types.WorkloadAdmitted, workload=waiting)
        later = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=waiting.name,
            check=lambda o: conditions(o).get("Admitted", {}).get("status") == "True",
        )
    assert kept["spec"]["priority"] == 50 and later["spec"]["priority"] == 50
    pending = [e for e in await events_of(bus, types.WorkloadInadmissible) if e.workload == waiting]
    assert not [p for p in pending if p.reason == "Misconfigured"]


async def test_a_job_naming_a_missing_workload_priority_class_waits_for_it(api, bus: MemoryBus) -> None:
    """A Job labelled ``kueue.x-k8s.io/priority-class: late`` before WorkloadPriorityClass ``late`` exists gets
    no Workload and the Warning Event ``WorkloadPriorityClassNotFound`` 'WorkloadPriorityClass "late" not
    found' (Kueue's ExtractPriority); once the class is created it gets its Workload, with the class's value,
    and is admitted. Before, a Workload was made at once and stayed Misconfigured "not found"."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        late = job("late-job", parallelism=1)
        late["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "late"
        await kube.apply_manifest(api, late)
        [rejected] = await wait_for(bus, types.ObjectRejected)
        warning = await _event_with_reason(api, "WorkloadPriorityClassNotFound")
        assert not await events_of(bus, types.WorkloadObserved)
        class_created_ms = int(time.time() * 1000)
        await kube.apply_manifest(
            api,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "late"},
                "value": 70,
            },
        )
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        [observed] = await events_of(bus, types.WorkloadObserved)
        made = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=admitted.workload.name,
            check=lambda o: conditions(o).get("Admitted", {}).get("status") == "True",
        )
    assert (rejected.kind, rejected.name) == ("Job", "late-job")
    assert warning["type"] == "Warning" and warning["message"] == 'WorkloadPriorityClass "late" not found'
    assert warning["involvedObject"]["kind"] == "Job" and warning["involvedObject"]["name"] == "late-job"
    assert made["spec"]["priorityClassRef"]["name"] == "late" and made["spec"]["priority"] == 70
    # created once the class exists, so it queues from then, behind jobs submitted meanwhile (not with its job)
    assert observed.workload.metadata.creation_timestamp_ms >= class_created_ms


async def _event_with_reason(api, reason: str) -> dict[str, Any]:
    """The first Event in namespace default with ``reason``, waited for up to 10 s."""
    for _ in range(500):
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        found = [e for e in listed if e.get("reason") == reason]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no Event with reason {reason}")


async def test_a_running_jobs_priority_class_label_change_reaches_its_workload(api, bus: MemoryBus) -> None:
    """``kubectl label job runner kueue.x-k8s.io/priority-class=low --overwrite`` while it runs: its Workload
    takes class ``low`` and priority 10 (Kueue's UpdateWorkloadPriority), so preemption sees the new value.
    Before, a running job's changes were all ignored and the Workload kept ``high`` (1000)."""
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    async with _kueue(api, bus):
        await kube.apply_manifest(api, {**wpc, "metadata": {"name": "high"}, "value": 1000})
        await kube.apply_manifest(api, {**wpc, "metadata": {"name": "low"}, "value": 10})
        await set_up(api, cpu=3)
        runner = job("runner", parallelism=3)
        runner["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
        await kube.apply_manifest(api, runner)
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        await eventually(api, JOBS, namespace="default", name="runner", check=lambda o: o["spec"]["suspend"] is False)
        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="runner",
            patch={"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "low"}}},
        )
        updated = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=admitted.workload.name,
            check=lambda o: o["spec"].get("priority") == 10,
        )
        still = await kube.get_object(api, JOBS, namespace="default", name="runner")
    assert updated["spec"]["priorityClassRef"]["name"] == "low"
    assert still["spec"]["suspend"] is False  # the change alone neither stops nor restarts it
    assert not await events_of(bus, types.EvictionRequested)


async def _events_on(api: Any, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events on object ``name`` in namespace default, sorted."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return sorted((e["reason"], e["message"]) for e in listed if e["involvedObject"]["name"] == name)


@pytest.mark.parametrize(("name", "cpu", "resized"), [("runner", 9, 5), ("shrink", 3, 1)], ids=["grown", "shrunk"])
async def test_a_running_job_resized_gets_a_new_workload(
    api, bus: MemoryBus, name: str, cpu: int, resized: int
) -> None:
    """``kubectl patch job NAME -p '{"spec":{"parallelism":N}}'`` while it runs with 3 pods admitted (no partial
    admission): its workload no longer matches it (Kueue's EquivalentToWorkload; ComparePodSets sees the count
    differ both ways, a batch/v1 Job's count being min(parallelism, completions), whatever its pods did), so, as
    Kueue's ensureOneWorkload does, the job is stopped, that workload deleted and its quota released, and a new
    Workload (another UID) of N pods is made, admitted and started. Before, a grown Job ran 5 pods on a 3 pod
    admission, and (found by a new user's trial) a shrunk one kept its admission of 3 running 1 pod."""
    async with _kueue(api, bus):
        await set_up(api, cpu=cpu)
        await kube.apply_manifest(api, job(name, parallelism=3))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        await eventually(api, JOBS, namespace="default", name=name, check=lambda o: o["spec"]["suspend"] is False)
        old = await eventually(api, resources.WORKLOADS, namespace="default", name=admitted.workload.name, check=bool)
        await kube.patch_object(api, JOBS, namespace="default", name=name, patch={"spec": {"parallelism": resized}})
        [released] = await wait_for(bus, types.QuotaReleased, workload=admitted.workload)
        admissions = await wait_for(bus, types.WorkloadAdmitted, count=2)
        new = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=admitted.workload.name,
            check=lambda o: (
                o["metadata"]["uid"] != old["metadata"]["uid"]
                and conditions(o).get("Admitted", {}).get("status") == "True"
            ),
        )
        restarted = await eventually(
            api, JOBS, namespace="default", name=name, check=lambda o: o["spec"]["suspend"] is False
        )
        await asyncio.sleep(0.5)  # the old object's deletion is not taken for a deletion of the new workload
        releases = await events_of(bus, types.QuotaReleased)
        [dropped] = await events_of(bus, types.ObjectDeleted, kind="Workload")
        on_job = await until_steady(lambda: _events_on(api, name), what="the job's Events")
    assert released.reason == "Deleted" and len(releases) == 1
    # Kueue's ensureOneWorkload: the job stopped with its message, the old Workload deleted with an Event
    assert dropped.reason == types.NO_MATCHING_WORKLOAD
    stopped = ("Stopped", "No matching Workload; restoring pod templates according to existent Workload")
    deleted = ("DeletedWorkload", f"Deleted not matching Workload: default/{admitted.workload.name}")
    assert stopped in on_job and deleted in on_job, on_job
    assert ("Stopped", "Workload is deleted") not in on_job
    assert [a.pod_set_assignments[0].count for a in admissions] == [3, resized]
    assert [ps["count"] for ps in new["spec"]["podSets"]] == [resized]
    assert restarted["spec"]["parallelism"] == resized


def _partial_job(name: str, *, parallelism: int, min_parallelism: int) -> dict[str, Any]:
    """A Job of ``parallelism`` pods of 1 CPU that accepts running with ``min_parallelism`` (Kueue's
    job-min-parallelism annotation, as in its sample-job-partial-admission.yaml)."""
    manifest = job(name, parallelism=parallelism, completions=parallelism)
    manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": str(min_parallelism)}
    return manifest


async def _partially_admitted(api, bus: MemoryBus, name: str) -> tuple[types.WorkloadAdmitted, dict[str, Any]]:
    """Job ``name`` (:func:`_partial_job` of 5, at least 2) in a ClusterQueue of 3 CPUs: admitted with 3 pods and
    started with parallelism 3; its admission and its Workload object as admitted."""
    await set_up(api, cpu=3)
    await kube.apply_manifest(api, _partial_job(name, parallelism=5, min_parallelism=2))
    [admitted] = await wait_for(bus, types.WorkloadAdmitted)
    await eventually(api, JOBS, namespace="default", name=name, check=lambda o: o["spec"]["suspend"] is False)
    obj = await eventually(
        api,
        resources.WORKLOADS,
        namespace="default",
        name=admitted.workload.name,
        check=lambda o: conditions(o).get("Admitted", {}).get("status") == "True",
    )
    return admitted, obj


async def test_a_partially_admitted_job_deactivated_keeps_its_workload(api, bus: MemoryBus) -> None:
    """Kueue's sample-job-partial-admission.yaml, scaled down: admitted with 3 of its 5 pods, so started with
    parallelism 3; then ``kubectl patch workload W -p '{"spec":{"active":false}}'``. The dispatcher's stop
    suspends the Job first (parallelism still 3) and gives its parallelism back after; Kueue's
    EquivalentToWorkload compares a job also with the pod sets it is expected to run with while its Workload
    holds quota (reconciler.go expectedRunningPodSets: the admitted count), so the Job stays suspended with
    parallelism 5 and the same Workload (its UID) stays ``active: false``, Evicted Deactivated. Before (found
    by a new user's trial), the suspended Job of parallelism 3 was taken for one no longer matching its Workload
    of 5: the Workload was deleted and a new one made, active, its conditions and admission lost."""
    async with _kueue(api, bus):
        admitted, before = await _partially_admitted(api, bus, "partial")
        assert [a.count for a in admitted.pod_set_assignments] == [3]
        name = admitted.workload.name
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=name, patch={"spec": {"active": False}}
        )
        stopped = await eventually(
            api,
            JOBS,
            namespace="default",
            name="partial",
            check=lambda o: o["spec"]["suspend"] is True and o["spec"]["parallelism"] == 5,
        )
        await wait_for(bus, types.QuotaReleased, workload=admitted.workload)
        after = await until_steady(
            lambda: kube.get_object(api, resources.WORKLOADS, namespace="default", name=name),
            what="the deactivated Workload",
        )
        job_now = await kube.get_object(api, JOBS, namespace="default", name="partial")
    assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
    assert stopped["spec"]["completions"] == 5
    assert (job_now["spec"]["suspend"], job_now["spec"]["parallelism"]) == (True, 5)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["spec"]["active"] is False
    assert [ps["count"] for ps in after["spec"]["podSets"]] == [5]
    assert conditions(after)["Evicted"]["reason"] == "Deactivated"
    assert conditions(after)["QuotaReserved"]["status"] == "False"


async def test_a_job_admitted_at_its_min_parallelism_runs_without_a_rejection(api, bus: MemoryBus) -> None:
    """Kueue's sample-job-partial-admission.yaml, scaled down to a ClusterQueue of 2 CPUs: the Job of 5 pods, at
    least 2, is admitted with exactly 2 and started with parallelism 2 == its job-min-parallelism. Kueue's
    minPodsCount reads the annotation unchecked (its webhook bounds it below the count at creation only), so the
    running Job keeps its Workload and nothing is rejected. Before (found by a new user's trial), the watcher's
    conversion applied the creation bound to the started Job: an ObjectRejected and a Warning Event."""
    async with _kueue(api, bus):
        await set_up(api, cpu=2)
        await kube.apply_manifest(api, _partial_job("partial", parallelism=5, min_parallelism=2))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        started = await eventually(
            api, JOBS, namespace="default", name="partial", check=lambda o: o["spec"]["suspend"] is False
        )
        await asyncio.sleep(0.5)  # the watcher sees the started Job
        after = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=admitted.workload.name)
    assert [a.count for a in admitted.pod_set_assignments] == [2]
    assert started["spec"]["parallelism"] == 2
    assert not await events_of(bus, types.ObjectRejected)
    assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
    assert conditions(after)["Admitted"]["status"] == "True"


async def test_a_partially_admitted_job_suspended_by_hand_keeps_its_workload(api, bus: MemoryBus) -> None:
    """``kubectl patch job partial -p '{"spec":{"suspend":true}}'`` on a Job admitted with 3 of its 5 pods (its
    parallelism 3): the suspended Job matches the pod sets its admitted Workload is expected to run
    (reconciler.go EquivalentToWorkload, expectedRunningPodSets), so Kueue keeps the Workload and starts the Job
    again (step 7, "Job admitted, unsuspending") with parallelism 3. Before (found by a new user's trial), the
    Workload was deleted as not matching a Job of 5 pods and a new one queued."""
    async with _kueue(api, bus) as (dispatcher, _):
        admitted, before = await _partially_admitted(api, bus, "partial")
        # its pods run and are ready (the Job controller's status), then someone suspends it
        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="partial",
            patch={"status": {"active": 3, "ready": 3}},
            subresource="status",
        )
        await wait_for(bus, types.WorkloadPodsReady, workload=admitted.workload, ready=True)
        await kube.patch_object(api, JOBS, namespace="default", name="partial", patch={"spec": {"suspend": True}})
        await wait_until(lambda: dispatcher.suspension.restarted == 1, what="the restart of the admitted Job")
        restarted = await eventually(
            api, JOBS, namespace="default", name="partial", check=lambda o: o["spec"]["suspend"] is False
        )
        await asyncio.sleep(0.5)  # a deletion as not matching would follow the Job's suspension
        after = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=admitted.workload.name)
    assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
    assert not await events_of(bus, types.QuotaReleased)
    assert restarted["spec"]["parallelism"] == 3
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert conditions(after)["Admitted"]["status"] == "True"
    assert [ps["count"] for ps in after["spec"]["podSets"]] == [5]


async def test_a_pending_job_whose_queue_name_label_is_taken_off_keeps_its_workload(api, bus: MemoryBus) -> None:
    """``kubectl label job unq kueue.x-k8s.io/queue-name-`` on a suspended Job waiting for quota: Kueue's
    reconciler ignores a job without a queue name (reconciler.go ReconcileGenericJob, manageJobsWithoutQueueName
    off), so its Workload stays pending in its ClusterQueue, also across a restarted watcher (whose job watch
    lists by that label), and goes only with the Job (the garbage collector's part). Before (found by a new
    user's trial), the job watch's DELETED for the Job leaving its label selector deleted the Workload."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kinds = (*KUEUE_KINDS, "Job", WORKLOAD_KIND)
    async with running(admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        first = Watcher(bus=bus, api=api)
        async with running(first.run(kinds)):
            await set_up(api, cpu=1)
            await kube.apply_manifest(api, job("runner"))
            await wait_for(bus, types.WorkloadAdmitted)
            await kube.apply_manifest(api, job("unq"))
            pending = await _pending_workload(bus, "unq")
            before = await eventually(
                api, resources.WORKLOADS, namespace="default", name=pending.name, check=has_kueue_finalizer
            )
            labels = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": None}}}
            await kube.patch_object(api, JOBS, namespace="default", name="unq", patch=labels)
            await asyncio.sleep(0.5)  # the job watch's DELETED for it, the watch of jobs without the label's ADDED
            kept = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=pending.name)
            deleted_while_running = await events_of(bus, types.ObjectDeleted, kind="Workload")
        restarted = Watcher(bus=bus, api=api)
        await restarted.learn_from_log()
        async with running(restarted.run(kinds)):
            await asyncio.sleep(0.5)
            after_restart = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=pending.name)
            deleted_after_restart = await events_of(bus, types.ObjectDeleted, kind="Workload")
            await kube.delete_object(api, JOBS, namespace="default", name="unq")
            [gone] = await wait_for(bus, types.ObjectDeleted, kind="Workload")
        runner = await kube.get_object(api, JOBS, namespace="default", name="runner")
    assert not deleted_while_running and not deleted_after_restart
    for obj in (kept, after_restart):
        assert obj["metadata"]["uid"] == before["metadata"]["uid"]
        assert obj["spec"]["queueName"] == "user-queue"
        assert conditions(obj)["QuotaReserved"]["status"] == "False"
    assert (gone.name, gone.reason) == (pending.name, msgspec.UNSET)
    assert runner["spec"]["suspend"] is False  # the admitted Job ran on throughout


ORPHANED = {
    "type": "Finished",
    "status": "True",
    "reason": "OwnerNotFound",
    "message": "The workload's owner no longer exists",
}


def _orphaned(obj: dict[str, Any]) -> bool:
    """The Workload object is finished OwnerNotFound, without Kueue's finalizer."""
    finished = conditions(obj).get("Finished") or {}
    return {k: v for k, v in finished.items() if k != "observedGeneration"} == ORPHANED and not has_kueue_finalizer(obj)


async def _about(bus: MemoryBus, ref: types.WorkloadRef) -> list[str]:
    """The log's facts and decisions (those records carry too) about workload ``ref`` (its key), by type name,
    in order."""
    return [
        type(e).__name__
        for _, e in await decision_entries(bus)
        if (isinstance(e, types.ObjectDeleted) and f"{e.namespace}/{e.name}" == ref.key)
        or (hasattr(e, "workload") and getattr(e.workload, "key", None) == ref.key)
    ]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_job_deleted_with_cascade_orphan_leaves_its_workload_finished_owner_not_found(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl delete job runner --cascade=orphan`` on an admitted Job: the garbage collector takes the Job's
    reference off its Workload, which Kueue then finishes (FinishOrphanedWorkloads, on by default:
    workload_controller.go isOrphanedWorkload, workload.go FinalizeOrphanedWorkload): Finished OwnerNotFound "The
    workload's owner no longer exists", its quota released (the waiting Job admitted into it), Kueue's finalizer
    off, the object kept. Before, the Workload was deleted with the Job, taken for a standalone one and admitted
    again for a moment, then deleted again. Deleting the object then deletes the workload from the log."""
    kubectl = Kubectl(emu.url, tmp_path)
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=3)
        before = await eventually(
            api, resources.WORKLOADS, namespace="default", name=ref.name, check=has_kueue_finalizer
        )
        await kube.apply_manifest(api, job("waiting", parallelism=3))
        await kubectl.ok("delete", "job", "runner", "--cascade=orphan")
        [finished] = await wait_for(bus, types.WorkloadFinished, workload=ref)
        [released] = await wait_for(bus, types.QuotaReleased, workload=ref)
        await wait_for(bus, types.WorkloadAdmitted, count=2)
        kept = await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=_orphaned)
        listed = await kubectl.ok(
            "get",
            "workload",
            ref.name,
            "-o",
            "custom-columns=FINISHED:.status.conditions[?(@.type=='Finished')].reason",
            "--no-headers",
        )
        await asyncio.sleep(0.5)  # whatever else the Workload's change and the Job's deletion would bring
        story = await _about(bus, ref)
        await kubectl.ok("delete", "workload", ref.name)
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload")

    assert (finished.reason, finished.message, finished.succeeded) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
        False,
    )
    assert released.reason == "Finished"
    assert kept["metadata"]["uid"] == before["metadata"]["uid"]
    assert "ownerReferences" not in kept["metadata"]
    assert kept["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == ref.uid
    assert listed.strip() == "OwnerNotFound"
    # admitted once, never deleted nor observed again while its job went
    assert story.count("WorkloadAdmitted") == 1 and story.count("WorkloadObserved") == 1
    assert "ObjectDeleted" not in story
    assert (deleted.namespace, deleted.name) == ("default", ref.name)


async def test_an_orphaned_workload_stays_when_its_job_goes_and_after_a_restart(api, bus: MemoryBus) -> None:
    """The owner reference taken off a running Job's Workload (the garbage collector's part of an orphaning
    deletion, seen here before the Job goes): Kueue finishes it OwnerNotFound at once; the Job's deletion after
    that does not delete it, nor does a restarted watcher's list of Jobs that no longer has it."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=1)
        await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=has_kueue_finalizer)
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=ref.name, patch={"metadata": {"ownerReferences": None}}
        )
        [finished] = await wait_for(bus, types.WorkloadFinished, workload=ref)
        await wait_for(bus, types.QuotaReleased, workload=ref)
        await kube.delete_object(api, JOBS, namespace="default", name="runner")
        await gone(api, JOBS, namespace="default", name="runner")
        kept = await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=_orphaned)
        await asyncio.sleep(0.5)
    restarted = Watcher(bus=bus, api=api)
    await restarted.learn_from_log()  # as a restart does (service.run): the log holds it as the Job's workload
    async with running(*watch_with_workloads(restarted)):
        await asyncio.sleep(1.0)
    story = await _about(bus, ref)

    assert finished.reason == "OwnerNotFound"
    assert "ownerReferences" not in kept["metadata"]
    assert "ObjectDeleted" not in story and story.count("WorkloadFinished") == 1
    assert (await kube.get_object(api, resources.WORKLOADS, namespace="default", name=ref.name))["metadata"][
        "uid"
    ] == kept["metadata"]["uid"]


async def test_a_job_deleted_with_orphan_propagation_is_seen_orphaned_from_the_job_alone(api, bus: MemoryBus) -> None:
    """The Job's deletion seen before its Workload's change (a watcher not watching Workloads: the two watches
    tell in no set order): the Job went with the ``orphan`` finalizer, so its Workload outlives it and is finished
    OwnerNotFound, not deleted."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=1)
        await kube.delete_object(api, JOBS, namespace="default", name="runner", options={"propagationPolicy": "Orphan"})
        [finished] = await wait_for(bus, types.WorkloadFinished, workload=ref)
        await wait_for(bus, types.QuotaReleased, workload=ref)
        await asyncio.sleep(0.3)
    story = await _about(bus, ref)

    assert (finished.reason, finished.message) == ("OwnerNotFound", "The workload's owner no longer exists")
    assert "ObjectDeleted" not in story


async def test_a_job_gone_with_orphan_propagation_while_unwatched_leaves_its_workload_finished(
    api, bus: MemoryBus
) -> None:
    """The Job deleted with propagationPolicy Orphan while the watcher's Job watch was down (a watch that fell behind
    and lists again: it saw neither the Job marked nor its DELETED), and no Workload watch to tell of the Workload's
    change first: the list without the Job finds the Workload object the garbage collector left without its owner
    reference, as the API server has it now, so the workload is finished OwnerNotFound, never deleted (Kueue's
    workload controller looks at the Workload alone: workload_controller.go isOrphanedWorkload). Before, a Job gone
    from a list was taken for a Job deleted in the background: ObjectDeleted, and the dispatcher deleted the
    Workload object."""
    watcher = Watcher(bus=bus, api=api)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        async with running(*watch_all(watcher)):
            await set_up(api, cpu=3)
            ref = await _started(api, bus, "runner", parallelism=1)
            before = await eventually(
                api, resources.WORKLOADS, namespace="default", name=ref.name, check=has_kueue_finalizer
            )
        await kube.delete_object(api, JOBS, namespace="default", name="runner", options={"propagationPolicy": "Orphan"})
        await gone(api, JOBS, namespace="default", name="runner")
        async with running(*watch_all(watcher)):  # the Job watch listed again, by the same watcher
            await wait_until_about(bus, ref, ("WorkloadFinished", "ObjectDeleted"))
            assert "ObjectDeleted" not in await _about(bus, ref), "the orphaned Job's workload was deleted"
            await wait_for(bus, types.QuotaReleased, workload=ref)
            kept = await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=_orphaned)
    story = await _about(bus, ref)

    assert "ObjectDeleted" not in story and story.count("WorkloadFinished") == 1
    [finished] = await events_of(bus, types.WorkloadFinished, workload=ref)
    assert (finished.reason, finished.message) == ("OwnerNotFound", "The workload's owner no longer exists")
    assert kept["metadata"]["uid"] == before["metadata"]["uid"] and "ownerReferences" not in kept["metadata"]


async def wait_until_about(bus: MemoryBus, ref: types.WorkloadRef, kinds: tuple[str, ...]) -> None:
    """Poll the log every 20 ms until it holds an event of one of ``kinds`` (type names) about ``ref``."""
    async with asyncio.timeout(10):
        while not set(kinds) & set(await _about(bus, ref)):
            await asyncio.sleep(0.02)


async def _record(api, ref, seen: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Every change of kind ``ref`` in namespace default, as (resourceVersion, type, object), until cancelled."""
    async for change in kube.watch_objects(api, ref, namespace="default"):
        if isinstance(change, kube.WatchEvent):
            seen.append((int(change.object["metadata"]["resourceVersion"]), change.type, change.object))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_jobs_deleted_in_the_foreground_take_their_workloads_and_get_no_new_ones(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl delete job waiting runner --cascade=foreground`` on a running admitted Job and a Job waiting
    behind it: each Job gets ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer, the garbage
    collector deletes its Workload first (held by Kueue's finalizer until the dispatcher takes it off), then the
    Job. Kueue's job reconciler only finalizes a job being deleted (reconciler.go ReconcileGenericJob: loadJob's
    shouldFinalize; finalize, FinalizeOrphanedWorkload): a workload is finished OwnerNotFound when its Job is
    seen marked before its Workload (the runner's quota released, Finished; else Deleted: the two watches tell
    in no set order, as Kueue's reconciler and the garbage collector race), then deleted once; no stop, no new
    Workload. Before, the watcher took the collector's deletion for a deletion by hand and gave the waiting Job
    a new Workload, which was admitted into the quota the runner had just released."""
    kubectl = Kubectl(emu.url, tmp_path)
    jobs_seen: list[tuple[int, str, dict[str, Any]]] = []
    workloads_seen: list[tuple[int, str, dict[str, Any]]] = []
    async with (
        _kueue(api, bus),
        running(_record(api, JOBS, jobs_seen), _record(api, resources.WORKLOADS, workloads_seen)),
    ):
        await set_up(api, cpu=3)
        runner = await _started(api, bus, "runner", parallelism=3)
        await kube.apply_manifest(api, job("waiting", parallelism=2))
        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        await eventually(
            api, resources.WORKLOADS, namespace="default", name=waiting.workload.name, check=has_kueue_finalizer
        )
        # the waiting Job first: deleted after the runner, its own Workload could take the quota released meanwhile
        await kubectl.ok("delete", "job", "waiting", "runner", "--cascade=foreground", "--wait=false")
        await gone(api, JOBS, namespace="default", name="runner")
        await gone(api, JOBS, namespace="default", name="waiting")
        [released] = await wait_for(bus, types.QuotaReleased, workload=runner)
        deleted = await wait_for(bus, types.ObjectDeleted, kind="Workload", count=2)
        await asyncio.sleep(0.5)  # whatever else the deletions would bring
        listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")

    finished = await events_of(bus, types.WorkloadFinished)
    assert {(f.reason, f.owner_deleting) for f in finished} <= {("OwnerNotFound", True)}
    assert released.reason == ("Finished" if runner.key in {f.workload.key for f in finished} else "Deleted")
    assert sorted(d.name for d in deleted) == sorted([runner.name, waiting.workload.name])
    assert len(await events_of(bus, types.WorkloadObserved)) == 2  # no new Workload for either Job
    assert [e.workload.key for e in await events_of(bus, types.WorkloadAdmitted)] == [runner.key]
    assert listed == []
    for name, wl in (("runner", runner.name), ("waiting", waiting.workload.name)):
        marked = [
            o
            for _, t, o in jobs_seen
            if t == "MODIFIED" and o["metadata"]["name"] == name and o["metadata"].get("deletionTimestamp")
        ]
        assert marked and marked[0]["metadata"]["finalizers"] == ["foregroundDeletion"], name
        job_gone = next(rv for rv, t, o in jobs_seen if t == "DELETED" and o["metadata"]["name"] == name)
        wl_gone = next(rv for rv, t, o in workloads_seen if t == "DELETED" and o["metadata"]["name"] == wl)
        assert wl_gone < job_gone, name


async def test_a_foreground_deletion_seen_before_the_jobs_own_change_gets_no_new_workload(api, bus: MemoryBus) -> None:
    """The Job and Workload watches tell in no set order: with the Job's watch held back, the watcher sees the
    garbage collector delete the Workload of a Job it still holds unmarked. It reads the Job before taking that
    for a deletion by hand, finds it marked, and neither stops it nor gives it a new Workload. Before, the Job
    got a new Workload, and its Workload was deleted twice (a CI run saw this: two ObjectDeleted for one name)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    kueue_watches = [watcher.watch(kind) for kind in KUEUE_KINDS]
    async with running(*kueue_watches, watcher.watch(WORKLOAD_KIND), admitter(bus).run(), dispatcher.fold_forever()):
        async with running(dispatcher.consume(consumer)):
            job_watch = asyncio.create_task(watcher.watch("Job"))
            try:
                await set_up(api, cpu=1)
                await kube.apply_manifest(api, job("waiting", parallelism=2))
                [waiting] = await wait_for(bus, types.WorkloadInadmissible)
                await eventually(
                    api, resources.WORKLOADS, namespace="default", name=waiting.workload.name, check=has_kueue_finalizer
                )
            finally:
                await cancel_and_wait([job_watch])
            await kube.delete_object(
                api, JOBS, namespace="default", name="waiting", options={"propagationPolicy": "Foreground"}
            )
            [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload")
            await gone(api, JOBS, namespace="default", name="waiting")
            async with running(watcher.watch("Job")):  # the Job's watch again: it lists the Job gone
                await asyncio.sleep(0.5)
    assert deleted.name == waiting.workload.name
    assert len(await events_of(bus, types.ObjectDeleted)) == 1
    assert len(await events_of(bus, types.WorkloadObserved)) == 1  # no new Workload
    listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
    assert listed == []


HOLD = "example.com/hold"
"""A user's finalizer: it holds a Job being deleted (``deletionTimestamp`` set) until taken off."""


def _finished_owner_kept(obj: dict[str, Any]) -> bool:
    """The Workload object is finished OwnerNotFound, without Kueue's finalizer, its owner reference kept."""
    return _orphaned(obj) and bool(obj["metadata"].get("ownerReferences"))


async def _hold(api, name: str) -> None:
    """Job ``name`` gets the user's finalizer :data:`HOLD`."""
    await kube.patch_object(api, JOBS, namespace="default", name=name, patch={"metadata": {"finalizers": [HOLD]}})


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_job_held_in_its_deletion_by_a_finalizer_has_its_workload_finished_owner_not_found(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl delete job runner`` (propagation Background) on an admitted, running Job that a user's finalizer
    holds: the Job stays with a ``deletionTimestamp``. Kueue's job reconciler only finalizes it (reconciler.go
    ReconcileGenericJob: loadJob's shouldFinalize; finalize, finalizeWorkloads; workload.go
    FinalizeOrphanedWorkload): its Workload, which still names it as controller, is finished OwnerNotFound "The
    workload's owner no longer exists" (its quota released: the waiting Job is admitted into it), Kueue's
    finalizer taken off; the Job is not stopped, and the Workload keeps its owner reference and goes with the Job
    once the user's finalizer is off. Before, the workload stayed admitted, holding its quota, while the Job
    waited in its deletion."""
    kubectl = Kubectl(emu.url, tmp_path)
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=3)
        await _hold(api, "runner")
        await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=has_kueue_finalizer)
        await kube.apply_manifest(api, job("waiting", parallelism=3))
        await kubectl.ok("delete", "job", "runner", "--wait=false")
        [finished] = await wait_for(bus, types.WorkloadFinished, workload=ref)
        [released] = await wait_for(bus, types.QuotaReleased, workload=ref)
        await _admitted_job(bus, "waiting")
        kept = await eventually(
            api, resources.WORKLOADS, namespace="default", name=ref.name, check=_finished_owner_kept
        )
        await asyncio.sleep(0.3)  # whatever else the Job's deletion would bring
        held = await kube.get_object(api, JOBS, namespace="default", name="runner")
        story = await _about(bus, ref)
        await kubectl.ok(
            "patch", "job", "runner", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
        )
        await gone(api, JOBS, namespace="default", name="runner")
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload")
        await gone(api, resources.WORKLOADS, namespace="default", name=ref.name)

    assert (finished.reason, finished.message, finished.succeeded, finished.owner_deleting) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
        False,
        True,
    )
    assert released.reason == "Finished"
    assert [(r["kind"], r["name"], r["uid"]) for r in kept["metadata"]["ownerReferences"]] == [
        ("Job", "runner", held["metadata"]["uid"])
    ]
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [HOLD]
    assert held["spec"]["suspend"] is False  # finalized only, not stopped
    assert story.count("WorkloadFinished") == 1 and "ObjectDeleted" not in story
    assert (deleted.namespace, deleted.name) == ("default", ref.name)


async def test_a_job_first_seen_being_deleted_has_its_workload_finished_owner_not_found(api, bus: MemoryBus) -> None:
    """A running Job deleted while no watcher ran, held by a user's finalizer: the restarted watcher lists it with
    its ``deletionTimestamp`` and finalizes it as Kueue's job reconciler does at its next reconcile: its workload
    finished OwnerNotFound, its quota released, the Workload object's owner reference kept; the Job is not
    converted again, stopped nor given a new Workload. Before, the listed Job was converted as a live one and
    its workload held its quota."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=3)
        await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=has_kueue_finalizer)
        await asyncio.sleep(0.3)
    await _hold(api, "runner")
    await kube.delete_object(api, JOBS, namespace="default", name="runner")
    restarted = Watcher(bus=bus, api=api)
    await restarted.learn_from_log()  # as a restart does (service.run)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(restarted),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        [finished] = await wait_for(bus, types.WorkloadFinished, workload=ref)
        [released] = await wait_for(bus, types.QuotaReleased, workload=ref)
        kept = await eventually(
            api, resources.WORKLOADS, namespace="default", name=ref.name, check=_finished_owner_kept
        )
        await asyncio.sleep(0.3)
        held = await kube.get_object(api, JOBS, namespace="default", name="runner")
    story = await _about(bus, ref)

    assert (finished.reason, finished.owner_deleting) == ("OwnerNotFound", True)
    assert released.reason == "Finished"
    assert kept["metadata"]["ownerReferences"][0]["uid"] == held["metadata"]["uid"]
    assert held["spec"]["suspend"] is False
    assert story.count("WorkloadObserved") == 1 and "ObjectDeleted" not in story


HAND_MADE_ORPHAN = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: hand-made
  namespace: default
  labels:
    kueue.x-k8s.io/job-uid: 0b3c3f4e-5a1d-4d7e-9a51-000000000001
  finalizers:
  - kueue.x-k8s.io/resource-in-use
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 3
    template:
      spec:
        containers:
        - name: c
          resources:
            requests:
              cpu: "1"
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_workload_made_by_hand_with_a_job_uid_and_no_owner_is_finished_owner_not_found(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl apply`` of a Workload with the ``kueue.x-k8s.io/job-uid`` label and no owner reference (a job's
    Workload whose owner is gone): Kueue's workload controller finishes it at once (workload_controller.go
    Reconcile: isOrphanedWorkload, FinishOrphanedWorkloads on by default; workload.go FinalizeOrphanedWorkload):
    Finished OwnerNotFound "The workload's owner no longer exists", Kueue's finalizer off, the object kept; it
    holds no quota (a Job that needs all of it is admitted). Deleting it deletes the workload from the log.
    Before, the watcher took it for a job's orphaned Workload the log did not hold and ignored it."""
    kubectl = Kubectl(emu.url, tmp_path)
    manifest = tmp_path / "hand-made.yaml"
    manifest.write_text(HAND_MADE_ORPHAN)
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kubectl.ok("apply", "-f", str(manifest))
        [finished] = await wait_for(bus, types.WorkloadFinished)
        kept = await eventually(api, resources.WORKLOADS, namespace="default", name="hand-made", check=_orphaned)
        await kube.apply_manifest(api, job("after", parallelism=3))
        after = await _admitted_job(bus, "after")
        await asyncio.sleep(0.3)  # whatever else the Workload's changes would bring
        story = await _about(bus, finished.workload)
        settled = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="hand-made")
        recorded, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        await kubectl.ok("delete", "workload", "hand-made")
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload")
        listed = await kubectl.ok("get", "workload", "-o", "name")
    [observed] = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.metadata.name == "hand-made"]

    assert (finished.workload.name, finished.reason, finished.message, finished.succeeded) == (
        "hand-made",
        "OwnerNotFound",
        "The workload's owner no longer exists",
        False,
    )
    assert observed.workload.owner is None
    assert kept["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "0b3c3f4e-5a1d-4d7e-9a51-000000000001"}
    assert "ownerReferences" not in kept["metadata"]
    assert after.pod_set_assignments[0].count == 3  # all the quota: the hand-made Workload holds none
    assert story.count("WorkloadObserved") == 1 and story.count("WorkloadFinished") == 1
    # an admission decided before the finish and landing after it (a cycle between the two facts) is not shown
    shown = {c["type"]: c["status"] for c in settled["status"]["conditions"]}
    assert shown.get("QuotaReserved") != "True" and shown.get("Admitted") != "True", shown
    assert not [
        e
        for e in recorded
        if e["involvedObject"]["name"] == "hand-made" and e["reason"] in ("QuotaReserved", "Admitted")
    ]
    assert (deleted.namespace, deleted.name) == ("default", "hand-made")
    assert listed.split() == [f"workload.kueue.x-k8s.io/{after.workload.name}"]


async def _admitted_job(bus: MemoryBus, job_name: str) -> types.WorkloadAdmitted:
    """The admission of Job ``job_name``'s workload, once on the log."""
    async with asyncio.timeout(10):
        while True:
            for event in await events_of(bus, types.WorkloadAdmitted):
                if event.workload.name.startswith(f"job-{job_name}-"):
                    return event
            await asyncio.sleep(0.02)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_with_finish_orphaned_workloads_off_no_workload_is_finished_owner_not_found(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``--feature-gates=FinishOrphanedWorkloads=false`` (Beta, on by default, not locked: kube_features.go): Kueue
    finishes no Workload OwnerNotFound (workload.go FinalizeOrphanedWorkload, workload_controller.go
    isOrphanedWorkload). A Job held in its deletion by a user's finalizer keeps its workload admitted, holding
    its quota (the waiting Job is not admitted) until it is gone, when its workload is deleted (Deleted); a
    Workload made by hand with a job's UID label and no owner is queued and admitted as any Workload. Before,
    the gate was not read: both were finished OwnerNotFound."""
    kubectl = Kubectl(emu.url, tmp_path)
    manifest = tmp_path / "hand-made.yaml"
    manifest.write_text(HAND_MADE_ORPHAN.replace("count: 3", "count: 1"))
    async with _kueue(api, bus, feature_gates="FinishOrphanedWorkloads=false"):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=2)
        await _hold(api, "runner")
        await eventually(api, resources.WORKLOADS, namespace="default", name=ref.name, check=has_kueue_finalizer)
        await kubectl.ok("apply", "-f", str(manifest))
        hand_made = await wait_for(bus, types.WorkloadAdmitted, count=2)
        await kube.apply_manifest(api, job("waiting", parallelism=1))
        await kubectl.ok("delete", "job", "runner", "--wait=false")
        await eventually(
            api, JOBS, namespace="default", name="runner", check=lambda o: "deletionTimestamp" in o["metadata"]
        )
        [inadmissible] = await wait_for(bus, types.WorkloadInadmissible)
        await asyncio.sleep(0.5)  # whatever else the Job's deletion would bring
        finished_while_held = await events_of(bus, types.WorkloadFinished)
        await kubectl.ok(
            "patch", "job", "runner", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
        )
        [released] = await wait_for(bus, types.QuotaReleased, workload=ref)
        after = await _admitted_job(bus, "waiting")

    assert [a.workload.name for a in hand_made] == [ref.name, "hand-made"]
    assert inadmissible.workload.name == after.workload.name
    assert finished_while_held == []
    assert released.reason == "Deleted"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_workload_status_cleared_by_hand_changes_nothing_on_the_log(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl patch workload W --subresource=status --type=merge -p '{"status":{"conditions":[]}}'`` on a running
    Job's admitted Workload. Kueue repairs nothing and takes the edit for the truth (workload_controller.go Update:
    admitted to pending, its quota dropped from the cache and the Workload queued again; reconciler.go stops the
    Job, NotAdmitted). kueue-es's truth is the log, which the edit does not reach (a known difference,
    docs/lifecycle.md): no fact, no release, the quota still held (the waiting Job stays inadmissible), the Job
    not stopped, and the object keeps the edit until the log changes the workload's status."""
    kubectl = Kubectl(emu.url, tmp_path)
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "runner", parallelism=3)
        await eventually(
            api, resources.WORKLOADS, namespace="default", name=ref.name, check=lambda o: "Admitted" in conditions(o)
        )
        await kube.apply_manifest(api, job("waiting", parallelism=1))
        [inadmissible] = await wait_for(bus, types.WorkloadInadmissible)
        await asyncio.sleep(0.3)
        before = len(await log_entries(bus))
        await kubectl.ok(
            "patch", "workload", ref.name, "--subresource=status", "--type=merge", "-p", '{"status":{"conditions":[]}}'
        )
        await kubectl.ok(
            "patch",
            "workload",
            ref.name,
            "--subresource=status",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/status/admission"}]',
        )
        await asyncio.sleep(1.0)  # whatever the edits would bring
        after = [type(e).__name__ for _, e in (await log_entries(bus))[before:]]
        edited = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=ref.name)
        runner = await kube.get_object(api, JOBS, namespace="default", name="runner")

    assert inadmissible.workload.name.startswith("job-waiting-")
    assert "QuotaReleased" not in after and "WorkloadAdmitted" not in after, after
    assert after.count("WorkloadObserved") == 0 and "WorkloadStopped" not in after, after
    assert len(await events_of(bus, types.WorkloadAdmitted)) == 1  # the runner only, never again
    assert conditions(edited) == {} and "admission" not in edited["status"]
    assert runner["spec"]["suspend"] is False


BOOST = "kueue.x-k8s.io/priority-boost"


async def _observed_boosts(bus: MemoryBus, ref: types.WorkloadRef) -> list[str | None]:
    """The priority-boost annotation of every WorkloadObserved of ``ref``'s workload on the log, in order."""
    return [
        e.workload.metadata.annotations.get(BOOST)
        for e in await events_of(bus, types.WorkloadObserved)
        if e.workload.metadata.name == ref.name and e.workload.metadata.namespace == ref.namespace
    ]


async def _boost_becomes(bus: MemoryBus, ref: types.WorkloadRef, value: str | None) -> None:
    """Poll until the last WorkloadObserved of ``ref``'s workload carries boost ``value``."""
    async with asyncio.timeout(10):
        while (await _observed_boosts(bus, ref))[-1:] != [value]:
            await asyncio.sleep(0.02)


async def test_a_priority_boost_set_on_a_jobs_workload_object_reaches_the_log(api, bus: MemoryBus) -> None:
    """Kueue's scheduler reads ``kueue.x-k8s.io/priority-boost`` off the Workload object (gate PriorityBoost,
    KEP 7990), where another controller (Kueue's priority booster) sets it. A job's workload is built from
    the job, which knows nothing of it: the watcher copies the object's value onto the log's workload (a
    change, a removal), and the dispatcher's own writes of that object leave the annotation to its owner."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await set_up(api)
        await kube.apply_manifest(api, job("a", parallelism=3))
        await wait_for(bus, types.WorkloadAdmitted)
        await kube.apply_manifest(api, job("b", parallelism=2))
        b = await _pending_workload(bus, "b")
        await eventually(
            api, resources.WORKLOADS, namespace="default", name=b.name, check=lambda o: "QuotaReserved" in conditions(o)
        )
        assert await _observed_boosts(bus, b) == [None]

        await kube.patch_object(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=b.name,
            patch={"metadata": {"annotations": {BOOST: "100"}}},
        )
        await _boost_becomes(bus, b, "100")
        # the job changes (a label the workload copies): the workload published again keeps the object's boost
        await kube.patch_object(api, JOBS, namespace="default", name="b", patch={"metadata": {"labels": {"x": "y"}}})
        await kube.apply_manifest(api, job("c", parallelism=1))  # more writes by the dispatcher meanwhile
        await _pending_workload(bus, "c")
        obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=b.name)
        assert obj["metadata"]["annotations"][BOOST] == "100"  # no write of the dispatcher took it off

        await kube.patch_object(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=b.name,
            patch={"metadata": {"annotations": {BOOST: None}}},
        )
        await _boost_becomes(bus, b, None)
    boosts = await _observed_boosts(bus, b)
    assert boosts[0] is None and "100" in boosts and boosts[-1] is None


async def _priority_on_log(bus: MemoryBus, name: str) -> int:
    """The priority the deciders and the visibility API give pending workload ``name`` (the log folded)."""
    state = await folded(bus)
    wl = state.workloads[f"default/{name}"]
    for pending in visibility.pending_in_cluster_queue(state, "cluster-queue"):
        if pending.name == name:
            assert pending.priority == priority_of(wl.workload, state)
    return priority_of(wl.workload, state)


async def test_a_priority_set_on_a_jobs_workload_object_counts_until_its_class_changes(api, bus: MemoryBus) -> None:
    """``kubectl patch kwl X --type=merge -p '{"spec":{"priority":5000}}'`` on the Workload of a waiting Job of
    WorkloadPriorityClass ``low`` (100): Kueue's scheduler orders by ``spec.priority`` and its job reconciler
    rewrites it only when the job's priority class changes (jobframework/reconciler.go UpdateWorkloadPriority,
    classifyWorkloadsForPriorityUpdate), so the 5000 stays: shown by the visibility API, kept when the job changes
    otherwise, and it is admitted before ``b``, queued before it with the same class, once there is room. Relabelled
    ``high`` (1000), it takes the class's value. Before, the watcher never read the object's value and the
    dispatcher's next write of the object put the class's back."""
    async with _kueue(api, bus):
        await kube.apply_manifest(api, _priority_class("low", 100))
        await kube.apply_manifest(api, _priority_class("high", 1000))
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("first", parallelism=3))
        [first] = await wait_for(bus, types.WorkloadAdmitted)
        waiting = {}
        for name in ("b", "c"):
            manifest = job(name, parallelism=3)
            manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
            await kube.apply_manifest(api, manifest)
            waiting[name] = await _pending_workload(bus, name)
        c = waiting["c"].name
        await eventually(
            api, resources.WORKLOADS, namespace="default", name=c, check=lambda o: "QuotaReserved" in conditions(o)
        )
        assert await _priority_on_log(bus, c) == 100

        patch = {"spec": {"priority": 5000}}
        await kube.patch_object(api, resources.WORKLOADS, namespace="default", name=c, patch=patch)
        await _observed_until(bus, c, lambda wl: wl.spec.priority == 5000)
        assert await _priority_on_log(bus, c) == 5000
        assert await _priority_on_log(bus, waiting["b"].name) == 100
        # the job changes (moved to another LocalQueue of the ClusterQueue): its workload, published again with
        # the new queue, keeps the 5000, as Kueue's reconciler changes only its queueName
        await kube.apply_manifest(api, local_queue("other-queue", "cluster-queue"))
        moved = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other-queue"}}}
        await kube.patch_object(api, JOBS, namespace="default", name="c", patch=moved)
        await _observed_until(bus, c, lambda wl: wl.spec.queue_name == "other-queue")
        assert await _priority_on_log(bus, c) == 5000
        await asyncio.sleep(0.5)  # the dispatcher's writes of the object meanwhile
        obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=c)
        assert obj["spec"]["priority"] == 5000

        await kube.delete_object(api, JOBS, namespace="default", name="first")  # room for one of them
        admitted = await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10)
        assert [a.workload.name for a in admitted] == [first.workload.name, c]
        running_c = await eventually(
            api, resources.WORKLOADS, namespace="default", name=c, check=lambda o: "Admitted" in conditions(o)
        )
        # written after the user's write of spec.priority and the move: the object's generation (Kueue stamps it)
        assert conditions(running_c)["Admitted"]["observedGeneration"] == running_c["metadata"]["generation"]

        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="c",
            patch={"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "high"}}},
        )
        await _observed_until(bus, c, lambda wl: wl.spec.priority == 1000)
        relabelled = await eventually(
            api, resources.WORKLOADS, namespace="default", name=c, check=lambda o: o["spec"]["priority"] == 1000
        )
    assert relabelled["spec"]["priorityClassRef"]["name"] == "high"
    state = await folded(bus)
    assert priority_of(state.workloads[f"default/{c}"].workload, state) == 1000


@pytest.mark.parametrize("kueue_writes", ["class value", "job shape"])
async def test_a_priority_set_on_a_jobs_workload_object_gives_way_to_kueues_next_write(
    api, bus: MemoryBus, kueue_writes: str
) -> None:
    """A user's ``spec.priority`` (5000) on a waiting Job's Workload of class ``low`` (100) lasts until Kueue writes
    the priority again: the class given another value (200; its WorkloadPriorityClass controller writes it into
    every Workload naming it), or the Job's shape changed (``parallelism``; its job reconciler rewrites the
    Workload's spec from the job: reconciler.go updateWorkloadToMatchJob). The class's value is then the
    workload's priority, on the log and on the object, and the user's old value does not come back from the object
    as it was before the dispatcher's write."""
    async with _kueue(api, bus):
        await kube.apply_manifest(api, _priority_class("low", 100))
        await set_up(api, cpu=3)
        manifest = job("big", parallelism=4)  # never fits: it keeps waiting
        manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
        await kube.apply_manifest(api, manifest)
        name = (await _pending_workload(bus, "big")).name
        await eventually(
            api, resources.WORKLOADS, namespace="default", name=name, check=lambda o: "QuotaReserved" in conditions(o)
        )
        patch = {"spec": {"priority": 5000}}
        await kube.patch_object(api, resources.WORKLOADS, namespace="default", name=name, patch=patch)
        await _observed_until(bus, name, lambda wl: wl.spec.priority == 5000)
        if kueue_writes == "class value":
            await kube.apply_manifest(api, _priority_class("low", 200))
            expected = 200
        else:
            await kube.patch_object(api, JOBS, namespace="default", name="big", patch={"spec": {"parallelism": 5}})
            expected = 100
        written = await eventually(
            api, resources.WORKLOADS, namespace="default", name=name, check=lambda o: o["spec"]["priority"] == expected
        )
        await asyncio.sleep(1.0)  # what the watcher reads of the object meanwhile changes nothing
        after = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
        priority = await _priority_on_log(bus, name)
    assert written["spec"]["priority"] == after["spec"]["priority"] == priority == expected


async def test_a_deactivated_workload_stays_inactive_when_its_job_changes(api, bus: MemoryBus) -> None:
    """Kueue #8424 (issue #6719), reconciler_test.go "update workload to match job with changed parallelism
    preserves active=false": a suspended Job's Workload deactivated by hand, then the Job's parallelism changed;
    the Workload is updated to match the Job (its pod set's count) and stays inactive, so the Job, which now
    fits, is not admitted. Kueue's job reconciler used to rebuild the Workload with ``active`` unset, which
    reactivated it."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("big", parallelism=5))
        big = await _pending_workload(bus, "big")
        # the log has the workload before the dispatcher has written its object: deactivate the object
        await eventually(api, resources.WORKLOADS, namespace="default", name=big.name, check=lambda o: True)
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=big.name, patch={"spec": {"active": False}}
        )
        await _observed_until(bus, big.name, lambda wl: not wl.spec.active)
        await kube.patch_object(api, JOBS, namespace="default", name="big", patch={"spec": {"parallelism": 2}})
        await _observed_until(bus, big.name, lambda wl: wl.spec.pod_sets[0].count == 2)
        written = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=big.name,
            check=lambda o: o["spec"]["podSets"][0]["count"] == 2,
        )
        await asyncio.sleep(1.0)  # an admission, were the workload active again, comes within this
        admitted = [e for e in await events_of(bus, types.WorkloadAdmitted) if e.workload.name == big.name]
        still = await kube.get_object(api, JOBS, namespace="default", name="big")

    assert written["spec"]["active"] is False
    assert [wl.spec.active for wl in await _observed(bus, big.name) if wl.spec.pod_sets[0].count == 2] == [False]
    assert admitted == []
    assert still["spec"]["suspend"] is True


async def _observed(bus: MemoryBus, name: str) -> list[Any]:
    """The workloads named ``name`` the watcher published, in log order."""
    return [e.workload for e in await events_of(bus, types.WorkloadObserved) if e.workload.metadata.name == name]


async def _observed_until(bus: MemoryBus, name: str, check: Callable[[Any], bool]) -> None:
    """Wait (10 s at most) for a published workload named ``name`` that passes ``check``."""
    async with asyncio.timeout(10):
        while not any(check(wl) for wl in await _observed(bus, name)):
            await asyncio.sleep(0.02)
