"""A job naming a prebuilt Workload (``kueue.x-k8s.io/prebuilt-workload-name``) adopts it, as Kueue's job reconciler does.

Watcher, admitter and dispatcher in one process on one MemoryBus and one emulated API server (with
Kueue's Job webhook: a queue-labelled Job is created suspended). The Job gets no Workload of its own:
the Workload object it names becomes its (controller owner reference, ``kueue.x-k8s.io/job-uid``), its
spec stays the user's, and the Job is started when that Workload is admitted, also when it was admitted
before the Job came; it is stopped when the Workload is evicted, and its finish is the Workload's. A
Workload that does not match the Job is finished ``OutOfSync`` and the Job waits; a Job whose Workload
does not exist yet waits for it (Kueue jobframework/reconciler.go ensureOneWorkload, handleJobWithNoWorkload;
test/integration/singlecluster/controller/jobs/job "A prebuilt workload is used").
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework.annotations import EVICTED_ANNOTATION
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.kubelet import SimulatedKubelet
from tests.integration.harness import (
    JOBS,
    SPOT_TOLERATION,
    admitter,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    job,
    log_entries,
    running,
    set_up_queues,
    wait_for,
    watch_with_workloads,
)

pytestmark = pytest.mark.timeout(60)

PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
CONTAINERS = [
    {
        "name": "c",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "memory": "200Mi"}},
        # what kube-apiserver defaults in the Job's pod template: a prebuilt Workload (a custom resource, so not
        # defaulted) must carry it too to be equivalent to the Job (Kueue compares containers exactly)
        "imagePullPolicy": "Always",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
]


def prebuilt_job(name: str, workload: str, *, parallelism: int = 3) -> dict[str, Any]:
    """A suspended-on-create Job of ``parallelism`` pods (1 CPU, 200Mi each) naming Workload ``workload``."""
    manifest = job(name, parallelism=parallelism, completions=parallelism)
    manifest["metadata"]["labels"][PREBUILT_LABEL] = workload
    return manifest


def prebuilt_workload(name: str, *, count: int = 3, queue: str = "user-queue") -> dict[str, Any]:
    """The Workload a user writes for :func:`prebuilt_job`: its queue and one pod set ``main`` like the Job's."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {"spec": {"restartPolicy": "Never", "containers": copy.deepcopy(CONTAINERS)}},
                }
            ],
        },
    }


async def object_where(api: Any, ref: Any, name: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll object ``default/name`` until ``check(object)`` holds (10 s)."""
    async with asyncio.timeout(10):
        while True:
            try:
                current = await kube.get_object(api, ref, namespace="default", name=name)
            except Exception:  # not there yet
                current = None
            if current is not None and check(current):
                return current
            await asyncio.sleep(0.02)


def started(obj: dict[str, Any]) -> bool:
    return obj["spec"].get("suspend") is False


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def owned_by(job_obj: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    uid = job_obj["metadata"]["uid"]
    return lambda wl: any(r.get("uid") == uid for r in wl["metadata"].get("ownerReferences") or [])


async def event_reasons(api: Any, name: str) -> list[str]:
    """The reasons of the Events about object ``default/name``."""
    items, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e["reason"] for e in items if e["involvedObject"]["name"] == name]


async def reasons_when(api: Any, name: str, check: Callable[[list[str]], bool]) -> list[str]:
    """Poll :func:`event_reasons` until ``check(reasons)`` holds (10 s): the dispatcher records an
    Event after the write it tells of has landed, so a test that saw the write may be early for it."""
    async with asyncio.timeout(10):
        while not check(reasons := await event_reasons(api, name)):
            await asyncio.sleep(0.02)
    return reasons


def services(bus: MemoryBus, api: Any, dispatcher: Any, consumer: Any) -> list[Any]:
    return [
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ]


async def test_a_job_adopts_a_workload_admitted_before_it_and_is_started(api, bus: MemoryBus) -> None:
    """The Workload first, admitted as it stands; then the Job naming it: the Job gets no Workload of its own, becomes
    the Workload's controller owner and is started at once with the admission's flavor (Kueue step 7)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        created = await kube.apply_manifest(api, prebuilt_workload("wl-a"))
        await object_where(api, resources.WORKLOADS, "wl-a", lambda o: condition(o, "Admitted").get("status") == "True")
        job_obj = await kube.apply_manifest(api, prebuilt_job("job-a", "wl-a"))
        running_job = await object_where(api, JOBS, "job-a", started)
        wl = await object_where(api, resources.WORKLOADS, "wl-a", owned_by(job_obj))
        reasons = await reasons_when(api, "job-a", lambda r: "Started" in r)
    workloads = {e.workload.metadata.name for e in await events_of(bus, types.WorkloadObserved)}
    assert workloads == {"wl-a"}  # no Workload made for the job
    [admitted] = await events_of(bus, types.WorkloadAdmitted)
    assert admitted.workload.uid == created["metadata"]["uid"]
    pod_spec = running_job["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"instance-type": "spot"} and pod_spec["tolerations"] == [SPOT_TOLERATION]
    [owner] = wl["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "job-a",
        "uid": job_obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job_obj["metadata"]["uid"]
    assert wl["spec"]["podSets"] == created["spec"]["podSets"]  # the user's, not rewritten from the job
    assert "finalizers" not in wl["metadata"]  # Kueue puts none on a prebuilt Workload
    assert "Started" in reasons and "CreatedWorkload" not in reasons


async def test_a_job_waits_for_its_workload_and_its_finish_is_the_workloads(api, bus: MemoryBus) -> None:
    """The Job first: it stays suspended and nothing is queued for it; the Workload created later is adopted,
    admitted and the Job started; the Job's finish finishes that Workload."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=0.5, watch_options={"backoff_seconds": 0.05})
    async with running(*services(bus, api, dispatcher, consumer), kubelet.run()):
        await set_up_queues(api)
        job_obj = await kube.apply_manifest(api, prebuilt_job("job-b", "wl-b"))
        await asyncio.sleep(0.5)
        assert await events_of(bus, types.WorkloadObserved) == []  # it waits: no Workload made for it
        assert (await kube.get_object(api, JOBS, namespace="default", name="job-b"))["spec"]["suspend"] is True
        created = await kube.apply_manifest(api, prebuilt_workload("wl-b"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        await object_where(api, JOBS, "job-b", started)
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=10)
        wl = await object_where(api, resources.WORKLOADS, "wl-b", lambda o: condition(o, "Finished") != {})
    uid = created["metadata"]["uid"]
    assert observed.workload.owner is not None and observed.workload.owner.uid == job_obj["metadata"]["uid"]
    assert observed.workload.metadata.uid == uid
    assert finished.workload.key == "default/wl-b" and finished.workload.uid == uid
    assert (finished.succeeded, finished.reason) == (True, "Succeeded")
    assert condition(wl, "Finished")["reason"] == "Succeeded"
    assert owned_by(job_obj)(wl)


async def test_a_workload_that_does_not_match_its_job_is_finished_out_of_sync(api, bus: MemoryBus) -> None:
    """A Workload of 2 pods named by a Job of 3: the Job still becomes its owner, the Workload is finished with
    Kueue's reason OutOfSync and message, and the Job is never started."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-c", count=2))
        await object_where(api, resources.WORKLOADS, "wl-c", lambda o: condition(o, "Admitted").get("status") == "True")
        job_obj = await kube.apply_manifest(api, prebuilt_job("job-c", "wl-c"))
        [finished] = await wait_for(bus, types.WorkloadFinished)
        wl = await object_where(api, resources.WORKLOADS, "wl-c", lambda o: condition(o, "Finished") != {})
        wl = await object_where(api, resources.WORKLOADS, "wl-c", owned_by(job_obj))
        await wait_for(bus, types.QuotaReleased)  # the finished workload's quota goes back
        await asyncio.sleep(0.5)
        still = await kube.get_object(api, JOBS, namespace="default", name="job-c")
        reasons = await event_reasons(api, "job-c")
    assert (finished.reason, finished.succeeded) == ("OutOfSync", False)
    assert finished.message == "The prebuilt workload is out of sync with its user job"
    assert condition(wl, "Finished")["reason"] == "OutOfSync"
    assert still["spec"]["suspend"] is True
    # never started, not started and stopped again: the Workload admitted already is finished before the adoption
    # is on the log (a 3-pod Job ran on a 2-pod admission before), so the adoption's fold starts nothing
    assert still["metadata"]["generation"] == 1 and "Started" not in reasons and "Stopped" not in reasons, reasons
    entries = await log_entries(bus)
    finished_at = next(m.seq for m, e in entries if isinstance(e, types.WorkloadFinished))
    adopted_at = next(
        m.seq for m, e in entries if isinstance(e, types.WorkloadObserved) and e.workload.owner is not None
    )
    assert finished_at < adopted_at


async def test_a_running_job_that_no_longer_matches_its_workload_is_stopped(api, bus: MemoryBus) -> None:
    """The Job started on its admitted Workload is changed (3 pods to 2): the Workload is finished OutOfSync, its quota
    released, and the Job, left with no workload, is stopped ("missing workload")."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-f"))
        await kube.apply_manifest(api, prebuilt_job("job-f", "wl-f"))
        await object_where(api, JOBS, "job-f", started)
        await kube.patch_object(api, JOBS, namespace="default", name="job-f", patch={"spec": {"parallelism": 2}})
        [finished] = await wait_for(bus, types.WorkloadFinished)
        await wait_for(bus, types.QuotaReleased)
        reasons = await reasons_when(api, "job-f", lambda r: "Stopped" in r)
        # a started Job is stopped in two writes (suspended, then its template given back): read it once the
        # Stopped Event, recorded after both, is there
        stopped = await kube.get_object(api, JOBS, namespace="default", name="job-f")
        await asyncio.sleep(0.3)  # a second start would have been recorded by now
        reasons = await event_reasons(api, "job-f")
    assert finished.reason == "OutOfSync"
    assert stopped["spec"]["suspend"] is True
    assert "nodeSelector" not in stopped["spec"]["template"]["spec"]  # what the start added is taken out again
    assert reasons.count("Started") == 1 and "Stopped" in reasons


async def test_an_evicted_prebuilt_workload_stops_its_job(api, bus: MemoryBus) -> None:
    """The Workload admitted and its Job started; an eviction suspends the Job (template given back), and once no pod of
    it is active the watcher reports the Workload stopped, under the Workload's own UID."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watch = watch_with_workloads(Watcher(bus=bus, api=api))
    async with running(*watch, dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await set_up_queues(api)
        created = await kube.apply_manifest(api, prebuilt_workload("wl-d"))
        original = await kube.apply_manifest(api, prebuilt_job("job-d", "wl-d"))
        async with running(admitter(bus).run()):  # admitted, then no admitter to admit it again
            await object_where(api, JOBS, "job-d", started)
        ref = types.WorkloadRef(namespace="default", name="wl-d", uid=created["metadata"]["uid"])
        await commit(bus, eviction(ref))
        # stopped as Kueue's Job.Stop does, in steps (suspend, then the template given back and the
        # eviction noted): wait for the last of them
        stopped_job = await object_where(
            api,
            JOBS,
            "job-d",
            lambda j: j["spec"].get("suspend") is True and EVICTED_ANNOTATION in j["metadata"].get("annotations", {}),
        )
        await kube.patch_object(
            api, JOBS, namespace="default", name="job-d", patch={"status": {"active": 0}}, subresource="status"
        )
        [stopped] = await wait_for(bus, types.WorkloadStopped)
    assert stopped.workload == ref and stopped.reason == "Preempted"
    assert stopped_job["metadata"]["annotations"][EVICTED_ANNOTATION] == "Preempted"
    assert stopped_job["spec"]["template"] == original["spec"]["template"]


async def test_a_restarted_watcher_keeps_the_adopted_workload(api, bus: MemoryBus) -> None:
    """A watcher started again over the log (Jobs are listed before Workloads) neither deletes the adopted
    Workload nor publishes it anew."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        await kube.apply_manifest(api, prebuilt_workload("wl-e"))
        job_obj = await kube.apply_manifest(api, prebuilt_job("job-e", "wl-e"))
        await object_where(api, JOBS, "job-e", started)
        await object_where(api, resources.WORKLOADS, "wl-e", owned_by(job_obj))
    observed = await events_of(bus, types.WorkloadObserved)
    watcher = Watcher(bus=bus, api=api)
    await watcher.learn_from_log()
    async with running(*watch_with_workloads(watcher)):
        await asyncio.sleep(1.0)
    assert await events_of(bus, types.ObjectDeleted) == []
    assert await events_of(bus, types.WorkloadObserved) == observed
