"""JobSets, plain Pods and pod groups through the whole edge: watcher, admitter and dispatcher on one MemoryBus
and one emulated API server.

Kueue's example manifests (jobs/sample-jobset.yaml, pods-kueue/*) applied as they are: the
admitted JobSet is unsuspended with the flavor's node labels and toleration in every replicated
job's pod template; the pods lose Kueue's scheduling gate and get the same. Their status (written
here as the JobSet controller and the kubelet would) gives WorkloadPodsReady; an eviction suspends
the JobSet and gives its templates back, or deletes the pods, and the watcher reports
WorkloadStopped once nothing runs. The Workload objects carry owner references to the JobSet or
Pod. Then the admission-check side: a check controller's state written on the Workload object
becomes AdmissionCheckStateChanged, and a Ready check's podSetUpdates reach the job at start.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import jobsets, pods
from kueue_es.jobframework.annotations import EVICTED_ANNOTATION, SCHEDULING_GATE
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    SPOT_TOLERATION,
    admitter,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    running,
    set_up_queues,
    wait_for,
)
from tests.kube import examples

pytestmark = pytest.mark.timeout(30)

JOBSETS = kube.ref_for("jobset.x-k8s.io/v1alpha2", "JobSet")
PODS = kube.ref_for("v1", "Pod")
SPOT_SELECTOR = {"instance-type": "spot"}


async def apply_example(api: Any, relative: str) -> list[dict[str, Any]]:
    """Apply every document of one of Kueue's example files as it is; return the stored objects."""
    return [await kube.apply_manifest(api, doc) for doc in examples.load(relative)]


async def until(api: Any, ref: Any, name: str, check: Any, *, namespace: str = "default") -> dict[str, Any]:
    """Poll an object until ``check(obj)`` holds."""
    async with asyncio.timeout(10):
        while True:
            try:
                obj = await kube.get_object(api, ref, namespace=namespace, name=name)
            except kube_errors.NotFoundError:
                obj = None
            if obj is not None and check(obj):
                return obj
            await asyncio.sleep(0.02)


async def gone(api: Any, ref: Any, name: str) -> None:
    async with asyncio.timeout(10):
        while True:
            try:
                await kube.get_object(api, ref, namespace="default", name=name)
            except kube_errors.NotFoundError:
                return
            await asyncio.sleep(0.02)


async def write_status(api: Any, ref: Any, name: str, status: dict[str, Any]) -> None:
    await kube.patch_object(api, ref, namespace="default", name=name, patch={"status": status}, subresource="status")


def pod_templates(js: dict[str, Any]) -> list[dict[str, Any]]:
    return [rjob["template"]["spec"]["template"] for rjob in js["spec"]["replicatedJobs"]]


async def test_sample_jobset_starts_on_its_flavor_reports_pods_ready_and_stops(api, bus: MemoryBus) -> None:
    """sample-jobset: unsuspended with the flavor's nodeSelector and toleration in both replicated jobs, its
    Workload object owned by the JobSet and Admitted; every Job ready -> PodsReady True (Started); evicted ->
    suspended with the templates exactly as created and marked; WorkloadStopped only once no Job is active."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run(), admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await set_up_queues(api)
        [created] = await apply_example(api, "jobs/sample-jobset.yaml")
        name = created["metadata"]["name"]
        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        started = await until(api, JOBSETS, name, lambda o: o["spec"].get("suspend") is False)
        ref = applied.workload
        assert ref.name == jobsets.workload_name_for_jobset(name, created["metadata"]["uid"])
        assert applied.target == f"JobSet default/{name}" and applied.node_selector == SPOT_SELECTOR
        for template in pod_templates(started):
            assert template["spec"]["nodeSelector"] == SPOT_SELECTOR
            assert template["spec"]["tolerations"] == [SPOT_TOLERATION]
        wl = await until(
            api,
            resources.WORKLOADS,
            ref.name,
            lambda o: any(
                c["type"] == "Admitted" and c["status"] == "True" for c in o.get("status", {}).get("conditions", [])
            ),
        )
        [owner] = wl["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("JobSet", name, created["metadata"]["uid"])
        assert [ps["name"] for ps in wl["spec"]["podSets"]] == ["workers", "driver"]
        # the sample's bare numbers (cpu: 1, a custom resource is stored as sent) as Kueue's typed client writes them
        assert [ps["template"]["spec"]["containers"][0]["resources"] for ps in wl["spec"]["podSets"]] == [
            {"requests": {"cpu": "1", "memory": "200Mi"}},
            {"requests": {"cpu": "2", "memory": "200Mi"}},
        ]

        # the JobSet controller: one Job per replicated job, active but not ready yet, then ready
        running_status = [{"name": "workers", "active": 1, "ready": 0}, {"name": "driver", "active": 1, "ready": 0}]
        await write_status(api, JOBSETS, name, {"replicatedJobsStatus": running_status})
        [waiting] = await wait_for(bus, types.WorkloadPodsReady)
        assert (waiting.ready, waiting.reason) == (False, "WaitForStart")
        ready_status = [{**rjs, "ready": 1} for rjs in running_status]
        await write_status(api, JOBSETS, name, {"replicatedJobsStatus": ready_status})
        [ready] = await wait_for(bus, types.WorkloadPodsReady, ready=True)
        assert (ready.workload.name, ready.reason) == (ref.name, "Started")

        [seq] = await commit(bus, eviction(ref))
        stopped = await until(api, JOBSETS, name, lambda o: o["spec"].get("suspend") is True)
        assert pod_templates(stopped) == pod_templates(created)
        assert stopped["metadata"]["annotations"][EVICTED_ANNOTATION] == "Preempted"
        await asyncio.sleep(0.2)
        assert await events_of(bus, types.WorkloadStopped) == []  # its Jobs are still active
        await write_status(
            api, JOBSETS, name, {"replicatedJobsStatus": [{**r, "active": 0, "ready": 0} for r in ready_status]}
        )
        [stop] = await wait_for(bus, types.WorkloadStopped)
        assert (stop.workload.name, stop.reason) == (ref.name, "Preempted")
        history = await wait_for(bus, types.WorkloadPodsReady, count=3)
        assert [(e.workload.name, e.ready, e.reason) for e in history] == [
            (ref.name, False, "WaitForStart"),
            (ref.name, True, "Started"),
            (ref.name, False, "WaitForStart"),  # stopped: waiting for the next start
        ]
        # stopped after a preemption it goes back to its queue and, the quota being free, is started again
        applied_all = await wait_for(bus, types.DispatchApplied, count=3, timeout=10)
        assert [e.action for e in applied_all] == ["StartJob", "Evict", "StartJob"]
        assert all(e.workload == ref for e in applied_all)
    assert seq > 0


async def test_kueue_pod_and_pod_group_are_ungated_on_their_flavor_and_stopped_by_deletion(api, bus: MemoryBus) -> None:
    """kueue-pod and kueue-pod-group: once admitted every pod loses the kueue.x-k8s.io/admission gate and gets
    the flavor's nodeSelector and toleration; PodReady on both pods of the group -> PodsReady True; the group's
    eviction deletes its running pods, and the watcher reports it stopped once they are gone."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    # the dispatcher's pod watch takes Kueue's pod finalizer off the deleted pods, as Kueue's pod reconciler
    services = (dispatcher.fold_forever(), dispatcher.consume(consumer), dispatcher.watch_pods())
    async with running(watcher.run(), admitter(bus).run(), *services, dispatcher.ungate_forever()):
        await set_up_queues(api, cpu=9)
        [single] = await apply_example(api, "pods-kueue/kueue-pod.yaml")
        leader, worker = await apply_example(api, "pods-kueue/kueue-pod-group.yaml")
        applied = await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=10)
        targets = sorted(a.target for a in applied)
        assert targets == sorted([f"Pod default/{single['metadata']['name']}", "Pod group default/sample-group"])
        for pod in (single, leader, worker):
            started = await until(api, PODS, pod["metadata"]["name"], lambda o: not pods.is_gated(o))
            assert started["spec"]["nodeSelector"] == SPOT_SELECTOR
            assert started["spec"]["tolerations"] == [SPOT_TOLERATION]
            assert SCHEDULING_GATE not in str(started["spec"].get("schedulingGates"))
        group = next(a.workload for a in applied if a.target.endswith("sample-group"))
        wl = await until(api, resources.WORKLOADS, "sample-group", lambda o: bool(o.get("status")))
        assert wl["metadata"]["ownerReferences"][0]["kind"] == "Pod"
        assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}

        ready_condition = {"conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}
        await write_status(api, PODS, leader["metadata"]["name"], ready_condition)
        await asyncio.sleep(0.2)
        assert not [e for e in await events_of(bus, types.WorkloadPodsReady, ready=True) if e.workload == group]
        await write_status(api, PODS, worker["metadata"]["name"], ready_condition)
        [ready] = await wait_for(bus, types.WorkloadPodsReady, ready=True, workload__name="sample-group")
        assert ready.reason == "Started"

        await commit(bus, eviction(group))
        for pod in (leader, worker):
            # deleted, and kept by Kueue's finalizer until replaced (pod_controller.go FindMatchingWorkloads)
            deleted = await until(
                api, PODS, pod["metadata"]["name"], lambda o: bool(o["metadata"].get("deletionTimestamp"))
            )
            assert deleted["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
        [stop] = await wait_for(bus, types.WorkloadStopped, workload__name="sample-group")
        assert stop.reason == "Preempted"

        # the group waits for replacement pods (waitingForReplacementPodsCondition; its reason is the Evicted
        # condition's only while that is True, and the admitter here admits the requeued group again at once)
        def waiting(obj: dict[str, Any]) -> bool:
            conditions = obj["status"].get("conditions") or []
            return any(c["type"] == "WaitingForReplacementPods" and c["status"] == "True" for c in conditions)

        await until(api, resources.WORKLOADS, "sample-group", waiting)
        # the single pod was not evicted and still runs
        await kube.get_object(api, PODS, namespace="default", name=single["metadata"]["name"])


async def _checked_jobset(
    api: Any, bus: MemoryBus, *, update: dict[str, Any], workers_labels: dict[str, str] | None = None
) -> tuple[dict[str, Any], types.WorkloadRef]:
    """sample-jobset (``workers_labels`` on its workers' pod template) in a ClusterQueue with check ``prov``:
    quota reserved (committed here, as the admitter would), the check set Ready with ``update`` as its
    podSetUpdate on the Workload object by its controller, then admitted; returns the JobSet as created and
    the workload. The watcher and dispatcher must be running."""
    await set_up_queues(api)
    cq = await kube.get_object(api, kube.ref_for("kueue.x-k8s.io/v1beta2", "ClusterQueue"), name="cluster-queue")
    spec = copy.deepcopy(cq["spec"]) | {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}}
    await kube.apply_manifest(
        api, {**{k: cq[k] for k in ("apiVersion", "kind")}, "metadata": {"name": "cluster-queue"}, "spec": spec}
    )
    [manifest] = examples.load("jobs/sample-jobset.yaml")
    if workers_labels:
        pod_templates(manifest)[0].setdefault("metadata", {})["labels"] = workers_labels
    created = await kube.apply_manifest(api, manifest)
    [observed] = await wait_for(bus, types.WorkloadObserved)
    meta = observed.workload.metadata
    ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
    assignments = [
        types.PodSetAssignment(
            name=ps.name, flavors={"cpu": "spot", "memory": "spot"}, resource_usage=dict(ps.requests), count=1
        )
        for ps in observed.workload.spec.pod_sets
    ]
    await wait_for(bus, types.ClusterQueueObserved, count=2)
    await commit(
        bus,
        types.QuotaReserved(workload=ref, cluster_queue="cluster-queue", pod_set_assignments=assignments, at_ms=1),
    )
    wl = await until(api, resources.WORKLOADS, ref.name, lambda o: bool(o.get("status", {}).get("admissionChecks")))
    [entry] = wl["status"]["admissionChecks"]
    assert (entry["name"], entry["state"]) == ("prov", "Pending")
    conditions = {c["type"]: c for c in wl["status"]["conditions"]}
    assert conditions["Admitted"]["reason"] == "UnsatisfiedAdmissionChecks"

    ready_entry = {**entry, "state": "Ready", "message": "provisioned", "podSetUpdates": [update]}
    await kube.patch_object(
        api, resources.WORKLOADS, namespace="default", name=ref.name,
        patch={"status": {"admissionChecks": [ready_entry]}}, subresource="status",
    )  # fmt: skip
    [changed] = await wait_for(bus, types.AdmissionCheckStateChanged)
    assert (changed.check, changed.state, changed.message) == ("prov", "Ready", "provisioned")
    assert changed.pod_set_updates[0].node_selector == update.get("nodeSelector", {})
    await asyncio.sleep(0.2)  # the dispatcher folds it before the admission
    await commit(bus, types.WorkloadAdmitted(workload=ref, cluster_queue="cluster-queue", at_ms=2))
    return created, ref


async def test_a_check_controller_on_the_workload_object_and_its_pod_set_updates(api, bus: MemoryBus) -> None:
    """A ClusterQueue with an admission check: the workload reserves quota, its Workload object lists the check
    Pending; a check controller writes Ready with podSetUpdates on the object -> AdmissionCheckStateChanged on
    the log; once admitted (committed here, as the admitter would), the JobSet starts with the update's label,
    annotation and nodeSelector merged with the flavor's."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        update = {
            "name": "workers",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
            "nodeSelector": {"pool": "p1"},
        }
        created, ref = await _checked_jobset(api, bus, update=update)
        started = await until(api, JOBSETS, created["metadata"]["name"], lambda o: o["spec"].get("suspend") is False)
        workers, driver = pod_templates(started)
        assert workers["spec"]["nodeSelector"] == {**SPOT_SELECTOR, "pool": "p1"}
        added = {"kueue.x-k8s.io/local-queue-name": "user-queue", "kueue.x-k8s.io/cluster-queue-name": "cluster-queue"}
        assert workers["metadata"]["labels"] == {"team": "a", "kueue.x-k8s.io/podset": "workers", **added}
        assert workers["metadata"]["annotations"] == {"note": "x", "kueue.x-k8s.io/workload": ref.name}
        assert driver["spec"]["nodeSelector"] == SPOT_SELECTOR
        assert driver["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "driver", **added}  # no update of its own
    assert len(await events_of(bus, types.AdmissionCheckStateChanged)) == 1  # the dispatcher's own writes are not news


async def test_a_pod_set_update_against_a_replicated_jobs_own_label_fails_the_start(api, bus: MemoryBus) -> None:
    """jobset_controller_test.go "labels and annotations should be propagated from admission check to job" turned
    around, as job_controller_test.go "should not admit workload if there is a conflict in labels": the workers'
    template has ``team: b`` and the check's podSetUpdate sets ``team: a``. Kueue's RunWithPodSetsInfo cannot
    merge it (podset.go Merge): the JobSet stays suspended with its own label and the Workload finishes
    FailedToStart naming the conflict. Before, kueue-es unsuspended it with ``team: a``."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        update = {"name": "workers", "labels": {"team": "a"}}
        created, ref = await _checked_jobset(api, bus, update=update, workers_labels={"team": "b"})
        [finished] = await wait_for(bus, types.WorkloadFinished)
        stored = await kube.get_object(api, JOBSETS, namespace="default", name=created["metadata"]["name"])
    assert (finished.workload, finished.succeeded, finished.reason) == (ref, False, "FailedToStart")
    assert finished.message == (
        "invalid admission check PodSetUpdate: conflict for labels: conflict for key=team, value1=b, value2=a"
    )
    assert stored["spec"]["suspend"] is True
    assert pod_templates(stored)[0]["metadata"]["labels"] == {"team": "b"}
