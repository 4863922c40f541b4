"""An Evicted condition someone else writes on a Workload evicts it, as in Kueue (admitter logic 45).

Kueue's tests and users evict a workload by writing ``Evicted=True`` into its status (test/util
SetEvictedCondition and a status update; test/e2e/multikueue/baseline/e2e_test.go "Should re-do admission process
when workload gets evicted in the worker"). Kueue's job reconciler acts on the condition whoever wrote it: it stops
the job and, once the job no longer runs, clears the reservation, so the workload is queued and admitted again
(jobframework/reconciler.go "6. handle eviction"). Here: the watcher reports the condition once
(WorkloadEvictionObserved, not for one the dispatcher applied itself), and the running system -- emulated API
server, watcher, admitter, dispatcher, simulated kubelet -- suspends the Job, releases the quota and admits the
workload again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.jobframework.annotations import DISPATCHER_FIELD_MANAGER
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.kubelet import SimulatedKubelet
from tests.builders import workload as workload_manifest
from tests.integration.harness import (
    JOBS,
    admitter,
    dispatcher_with_consumer,
    events_of,
    job,
    running,
    set_up_queues,
    wait_for,
    watch_with_workloads,
)

pytestmark = pytest.mark.timeout(60)

BY_TEST = {
    "type": "Evicted",
    "status": "True",
    "reason": "Preempted",
    "message": "By test",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def _condition(kind: str, status: str = "True", reason: str = "Test", at: str = "2026-01-01T00:00:00Z") -> Any:
    return {"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": at}


ADMISSION = {
    "clusterQueue": "cq",
    "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}],
}


async def _patch_conditions(
    api: Any, name: str, conditions: list[dict[str, Any]], *, admission: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write ``conditions`` (and ``admission``) into Workload ``default/name``'s status, as Kueue's tests do (an
    update, not the dispatcher's server-side apply)."""
    status: dict[str, Any] = {"conditions": conditions}
    if admission is not None:
        status["admission"] = admission
    return await kube.patch_object(
        api, resources.WORKLOADS, namespace="default", name=name, subresource="status", patch={"status": status}
    )


async def test_the_watcher_reports_an_evicted_condition_someone_wrote_once(api: Any, bus: Any) -> None:
    """A standalone Workload holding quota gets Evicted=True from a status update: one WorkloadEvictionObserved
    with the condition's reason, message and time, however often the object changes after, and none from a
    restarted watcher; a second eviction (another lastTransitionTime) is a second fact. A condition the
    dispatcher's own apply wrote, or one on a Workload holding no quota, is none."""
    await kube.create_object(api, resources.WORKLOADS, namespace="default", body=workload_manifest("by-hand", cpu="1"))
    reserved = [_condition("QuotaReserved"), _condition("Admitted")]
    await _patch_conditions(api, "by-hand", reserved, admission=ADMISSION)
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_with_workloads(watcher)):
        await wait_for(bus, types.WorkloadObserved)
        await _patch_conditions(api, "by-hand", [*reserved, BY_TEST])
        [fact] = await wait_for(bus, types.WorkloadEvictionObserved)
        await _patch_conditions(api, "by-hand", [*reserved, BY_TEST, _condition("PodsReady")])
        await kube.create_object(api, resources.WORKLOADS, namespace="default", body=workload_manifest("pending"))
        await _patch_conditions(api, "pending", [BY_TEST])  # holds no quota: nothing to carry out
        # watch events come in order: once the next object is seen, the changes before it were read
        await wait_for(bus, types.WorkloadObserved, workload__metadata__name="pending")
    assert fact.workload.key == "default/by-hand" and fact.workload.uid
    assert (fact.reason, fact.message, fact.at_ms) == ("Preempted", "By test", 1_767_225_600_000)

    restarted = Watcher(bus=bus, api=api)
    await restarted.learn_from_log()
    async with running(*watch_with_workloads(restarted)):
        await kube.create_object(api, resources.WORKLOADS, namespace="default", body=workload_manifest("sentinel"))
        await wait_for(bus, types.WorkloadObserved, workload__metadata__name="sentinel")
        assert len(await events_of(bus, types.WorkloadEvictionObserved)) == 1
        again = {**BY_TEST, "lastTransitionTime": "2026-01-01T00:05:00Z"}
        await _patch_conditions(api, "by-hand", [*reserved, again])
        await wait_for(bus, types.WorkloadEvictionObserved, count=2)

        # the dispatcher's own condition, applied as it applies a status: no fact
        await kube.create_object(api, resources.WORKLOADS, namespace="default", body=workload_manifest("own"))
        own = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "own", "namespace": "default"},
            "status": {
                "admission": ADMISSION,
                "conditions": [_condition("QuotaReserved"), {**BY_TEST, "message": "mine"}],
            },
        }
        await kube.apply_object(
            api,
            resources.WORKLOADS,
            namespace="default",
            name="own",
            body=own,
            field_manager=DISPATCHER_FIELD_MANAGER,
            subresource="status",
        )
        await kube.create_object(api, resources.WORKLOADS, namespace="default", body=workload_manifest("sentinel-2"))
        await wait_for(bus, types.WorkloadObserved, workload__metadata__name="sentinel-2")
    facts = await events_of(bus, types.WorkloadEvictionObserved)
    assert [(f.workload.name, f.at_ms) for f in facts] == [
        ("by-hand", 1_767_225_600_000),
        ("by-hand", 1_767_225_900_000),
    ]


async def test_an_evicted_condition_on_a_running_jobs_workload_stops_and_requeues_it(api: Any, bus: Any) -> None:
    """The running system: a Job admitted and running; Evicted=True Preempted "By test" written into its
    Workload's status. The Job is suspended (its pods stop), the quota released with the condition's reason, and
    the workload admitted again: the Job runs again. Kueue counts no eviction for it (no schedulingStats)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=600, watch_options={"backoff_seconds": 0.05})
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        kubelet.run(),
    ):
        await set_up_queues(api)
        await kube.apply_manifest(api, job("victim"))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10.0)
        name = admitted.workload.name
        await _job_where(api, lambda j: (j.get("status") or {}).get("active") == 1)

        stored = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
        kept = [c for c in stored["status"]["conditions"] if c["type"] != "Evicted"]
        await _patch_conditions(api, name, [*kept, BY_TEST])

        [evicted] = await wait_for(bus, types.EvictionRequested, timeout=10.0)
        [stopped] = await wait_for(bus, types.WorkloadStopped, timeout=10.0)
        [released] = await wait_for(bus, types.QuotaReleased, timeout=10.0)
        await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10.0)
        await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=10.0)
        again = await _job_where(api, lambda j: j["spec"].get("suspend") is False and _active(j) == 1)
        final = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)

    assert evicted.observed is True and (evicted.reason, evicted.message) == ("Preempted", "By test")
    assert stopped.workload == admitted.workload and released.reason == "Preempted"
    assert len(await events_of(bus, types.DispatchApplied, action="Evict")) == 1
    assert again["spec"]["suspend"] is False
    conditions = {c["type"]: c for c in final["status"]["conditions"]}
    assert conditions["Admitted"]["status"] == "True"
    assert conditions["Requeued"]["status"] == "True" and conditions["Requeued"]["reason"] == "Preempted"
    assert "evictions" not in (final["status"].get("schedulingStats") or {})


def _active(job_object: dict[str, Any]) -> int:
    return int((job_object.get("status") or {}).get("active") or 0)


async def _job_where(api: Any, check: Any, *, timeout: float = 10.0) -> dict[str, Any]:
    """Job ``default/victim`` once ``check(job)`` holds (polled every 50 ms)."""
    async with asyncio.timeout(timeout):
        while not check(current := await kube.get_object(api, JOBS, namespace="default", name="victim")):
            await asyncio.sleep(0.05)
    return current
