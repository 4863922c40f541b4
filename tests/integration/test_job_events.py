"""The job framework's Kubernetes Events on the jobs themselves, as ``kubectl describe job`` and
``kubectl get events`` show them on Kueue (pkg/controller/jobframework/reconciler.go,
pkg/controller/jobs/pod/pod_controller.go).

Watcher, admitter and dispatcher on one MemoryBus and one emulated API server: ``FinishedWorkload``
"Workload 'NS/NAME' is declared finished" on a batch/v1 Job, a JobSet and a Pod once their Workload is
written Finished (once, also across a restarted dispatcher); and the plain Pod integration's Events pod by
pod: ``CreatedWorkload`` on the pod (a group's first pod), ``Started`` on each pod ungated (a late member
too), ``Stopped`` on each pod an eviction or the Workload's deletion deletes; ``UpdatedWorkload`` when a
Workload takes another priority class or a waiting job's new shape; ``UpdatedAdmissionCheck`` while a Job waits
for its admission checks. Each from the recorder of its integration (``<framework>-kueue-controller``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.service import Dispatcher, bind_decisions
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator
from tests.integration.harness import (
    JOBS,
    RecordingConsumer,
    admitter,
    cluster_queue,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    flavor,
    job,
    local_queue,
    running,
    set_up_queues,
    wait_for,
    wait_until,
    watch_with_workloads,
)
from tests.integration.test_jobset_pod_dispatch import JOBSETS, apply_example, until, write_status
from tests.integration.test_pod_groups import member, pods_until, running_group, services, succeed, ungated
from tests.integration.test_workload_objects import _complete, _kueue, _started, set_up
from tests.kube.test_kubectl import Kubectl

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"

Event = tuple[str, str, str, str]  # (kind, name, reason, message) of the object an Event is about


async def job_events(api: Any) -> list[dict[str, Any]]:
    """The Events in ``default`` about anything but a Workload (the jobs' and pods' own)."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e for e in listed if e["involvedObject"]["kind"] != "Workload"]


def summary(events: list[dict[str, Any]]) -> list[Event]:
    """Each Event as (kind, name, reason, message), sorted."""
    return sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"], e["message"]) for e in events)


async def events_until(api: Any, check: Callable[[list[Event]], bool]) -> list[dict[str, Any]]:
    """Poll the jobs' Events until ``check`` holds of their :func:`summary`."""
    async with asyncio.timeout(15):
        while True:
            events = await job_events(api)
            if check(summary(events)):
                return events
            await asyncio.sleep(0.05)


def finished_message(ref: types.WorkloadRef) -> str:
    """Kueue's FinishedWorkload message (reconciler.go: ``Workload '%s' is declared finished``, workload.Key)."""
    return f"Workload '{ref.namespace}/{ref.name}' is declared finished"


async def test_a_finished_job_gets_finished_workload_once(api, bus: MemoryBus) -> None:
    """A batch/v1 Job completes: its Workload is written Finished and the Job gets Kueue's Normal
    FinishedWorkload from batch/job-kueue-controller, about the Job (its UID). A dispatcher started again on the
    same log and server writes no second one. Before, kubectl describe job showed no FinishedWorkload."""
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        ref = await _started(api, bus, "done", parallelism=1)
        await _complete(api, "done", succeeded=1)
        events = await events_until(api, lambda s: any(e[2] == "FinishedWorkload" for e in s))
        job = await kube.get_object(api, resources.JOBS, namespace="default", name="done")
    restarted = Dispatcher(bus=bus, api=api)
    consumer = RecordingConsumer(await bind_decisions(bus, name="dispatcher-2"))
    last = await bus.last_seq()
    async with running(restarted.fold_forever(), restarted.consume(consumer)):
        await wait_until(lambda: restarted.state.last_seq >= last, what="the restarted dispatcher catching up")
        await asyncio.sleep(1.5)  # its Workload writes run every second
    after = await job_events(api)

    [finished] = [e for e in events if e["reason"] == "FinishedWorkload"]
    assert (finished["type"], finished["message"]) == ("Normal", finished_message(ref))
    assert finished["involvedObject"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": "default",
        "name": "done",
        "uid": job["metadata"]["uid"],
    }
    assert finished["source"] == {"component": "batch/job-kueue-controller"}
    assert finished["count"] == 1
    assert [e["reason"] for e in after].count("FinishedWorkload") == 1
    assert restarted.events_written == 0


async def test_a_finished_jobset_gets_finished_workload(api, bus: MemoryBus) -> None:
    """sample-jobset admitted and started, then Completed (as the JobSet controller writes it): the JobSet gets
    FinishedWorkload from jobset.x-k8s.io/jobset-kueue-controller, beside its CreatedWorkload and Started, at the
    time it was recorded (Kueue's recorder's clock), not the JobSet's condition's."""
    before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run(), admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await set_up_queues(api)
        [created] = await apply_example(api, "jobs/sample-jobset.yaml")
        name = created["metadata"]["name"]
        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        await until(api, JOBSETS, name, lambda o: o["spec"].get("suspend") is False)
        completed = {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed",
            "lastTransitionTime": "2020-01-01T00:00:00Z",
        }
        await write_status(api, JOBSETS, name, {"conditions": [completed]})
        events = await events_until(api, lambda s: any(e[2] == "FinishedWorkload" for e in s))
    ref = applied.workload

    assert summary(events) == [
        ("JobSet", name, "CreatedWorkload", f"Created Workload: default/{ref.name}"),
        ("JobSet", name, "FinishedWorkload", finished_message(ref)),
        ("JobSet", name, "Started", "Admitted by clusterQueue cluster-queue"),
    ]
    assert {e["source"]["component"] for e in events} == {"jobset.x-k8s.io/jobset-kueue-controller"}
    [finished] = [e for e in events if e["reason"] == "FinishedWorkload"]
    assert finished["firstTimestamp"] == finished["lastTimestamp"] >= before
    assert {e["involvedObject"]["uid"] for e in events} == {created["metadata"]["uid"]}


async def test_a_pod_groups_events_pod_by_pod(api, bus: MemoryBus) -> None:
    """Kueue's pod integration: CreatedWorkload on the group's first pod, Started on each pod it ungates (and on a
    member that joins later, a failed one's replacement), Stopped with the eviction's message on each pod the
    eviction deletes; all from pod-kueue-controller, about each pod (its UID). Before, the pods got none."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    started = "Admitted by clusterQueue cluster-queue"
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "grp", ("g-a", "g-b"))
        uids = {n: p["metadata"]["uid"] for n, p in (await pods_until(api, lambda pods: True)).items()}
        await kube.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name="g-a",
            patch={"status": {"phase": "Failed"}},
            subresource="status",
        )
        await kube.apply_manifest(api, member("g-c", "grp", total=2))
        pods = await pods_until(api, lambda pods: "g-c" in ungated(pods))
        uids["g-c"] = pods["g-c"]["metadata"]["uid"]
        before = await events_until(api, lambda s: ("Pod", "g-c", "Started", started) in s)
        evicted = eviction(admitted.workload)
        await commit(bus, evicted)
        await pods_until(api, lambda pods: set(pods) == {"g-a"})  # the failed one is not running: it stays
        after = await events_until(api, lambda s: sum(e[2] == "Stopped" for e in s) == 2)

    assert summary(before) == [
        ("Pod", "g-a", "CreatedWorkload", "Created Workload: default/grp"),
        ("Pod", "g-a", "Started", started),
        ("Pod", "g-b", "Started", started),
        ("Pod", "g-c", "Started", started),
    ]
    assert summary(after) == sorted(
        [*summary(before), ("Pod", "g-b", "Stopped", evicted.message), ("Pod", "g-c", "Stopped", evicted.message)]
    )
    for event in after:
        involved = event["involvedObject"]
        assert involved["apiVersion"] == "v1" and involved["uid"] == uids[involved["name"]]
        assert event["source"] == {"component": "pod-kueue-controller"} and event["count"] == 1


async def test_a_single_pods_events_and_its_finish(api, bus: MemoryBus) -> None:
    """A single Pod: CreatedWorkload, Started once ungated, and FinishedWorkload once it succeeded."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        await kube.apply_manifest(api, member("solo", "", total=1))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        await pods_until(api, lambda pods: "solo" in ungated(pods))
        await succeed(api, "solo")
        events = await events_until(api, lambda s: any(e[2] == "FinishedWorkload" for e in s))
    ref = admitted.workload

    assert summary(events) == [
        ("Pod", "solo", "CreatedWorkload", f"Created Workload: default/{ref.name}"),
        ("Pod", "solo", "FinishedWorkload", finished_message(ref)),
        ("Pod", "solo", "Started", "Admitted by clusterQueue cluster-queue"),
    ]


async def test_deleting_a_running_groups_workload_stops_each_pod_with_an_event(api, bus: MemoryBus) -> None:
    """``kubectl delete workload GROUP``: Kueue's reconciler stops the job of a Workload being deleted, and Pod.Stop
    records Stopped "Workload is deleted" on each pod it deletes."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await running_group(api, bus, "del", ("d-a", "d-b"))
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="del")
        await pods_until(api, lambda pods: not pods)
        events = await events_until(api, lambda s: sum(e[2] == "Stopped" for e in s) == 2)

    assert [e for e in summary(events) if e[2] == "Stopped"] == [
        ("Pod", "d-a", "Stopped", "Workload is deleted"),
        ("Pod", "d-b", "Stopped", "Workload is deleted"),
    ]


async def test_a_priority_class_label_change_gets_updated_workload(api, bus: MemoryBus) -> None:
    """``kubectl label job ... kueue.x-k8s.io/priority-class=...`` on a running Job (high to low) and on a waiting
    one (none to high): each Workload takes the class and its job gets Kueue's UpdatedWorkload "Updated workload
    priority class: NS/NAME" (UpdateWorkloadPriority), once. Before, the Workload changed and no Event said so."""
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    async with _kueue(api, bus):
        await kube.apply_manifest(api, {**wpc, "metadata": {"name": "high"}, "value": 1000})
        await kube.apply_manifest(api, {**wpc, "metadata": {"name": "low"}, "value": 10})
        await set_up(api, cpu=3)
        runner = job("runner", parallelism=3)
        runner["metadata"]["labels"][PRIORITY_LABEL] = "high"
        await kube.apply_manifest(api, runner)
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        await until(api, resources.JOBS, "runner", lambda o: o["spec"]["suspend"] is False)
        await kube.apply_manifest(api, job("waiter", parallelism=1))
        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        # the dispatcher writes the Workload object beside the decision: a label changed before it is written is
        # the class it is created with (CreatedWorkload, no UpdatedWorkload), as on Kueue
        await until(api, resources.WORKLOADS, waiting.workload.name, lambda o: True)
        for name, value in (("runner", "low"), ("waiter", "high")):
            patch = {"metadata": {"labels": {PRIORITY_LABEL: value}}}
            await kube.patch_object(api, resources.JOBS, namespace="default", name=name, patch=patch)
        await until(api, resources.WORKLOADS, admitted.workload.name, lambda o: o["spec"].get("priority") == 10)
        await until(api, resources.WORKLOADS, waiting.workload.name, lambda o: o["spec"].get("priority") == 1000)
        events = await events_until(api, lambda s: sum(e[2] == "UpdatedWorkload" for e in s) == 2)
        await asyncio.sleep(1.5)  # nothing more comes of it
        after = await job_events(api)

    assert [e for e in summary(events) if e[2] == "UpdatedWorkload"] == [
        ("Job", "runner", "UpdatedWorkload", f"Updated workload priority class: default/{admitted.workload.name}"),
        ("Job", "waiter", "UpdatedWorkload", f"Updated workload priority class: default/{waiting.workload.name}"),
    ]
    assert summary(after) == summary(events)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_waiting_jobs_new_shape_updates_its_workload_with_an_event(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl patch job wide -p '{"spec":{"parallelism":2}}'`` on a Job waiting for quota it can never have (4
    pods, 3 CPUs): Kueue finds no matching Workload, rewrites the one it had to the Job's new shape
    (reconciler.go updateWorkloadToMatchJob) and records Normal UpdatedWorkload "Updated not matching Workload for
    suspended job: NS/NAME" on the Job; the same Workload (its UID) is then admitted with 2 pods. Before, the
    Workload was rewritten and admitted with no Event."""
    kubectl = Kubectl(emu.url, tmp_path)
    async with _kueue(api, bus):
        await set_up(api, cpu=3)
        await kube.apply_manifest(api, job("wide", parallelism=4))
        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        # the dispatcher writes the Workload object beside the decision: wait for it, not for the log alone
        before = await until(api, resources.WORKLOADS, waiting.workload.name, lambda o: bool(o["spec"]["podSets"]))
        await kubectl.ok("patch", "job", "wide", "--type=merge", "-p", '{"spec":{"parallelism":2}}')
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)
        await until(api, resources.JOBS, "wide", lambda o: o["spec"]["suspend"] is False)
        events = await events_until(api, lambda s: any(e[2] == "Started" for e in s))
        after = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=waiting.workload.name)
        described = await kubectl.ok("describe", "job", "wide")
        wide = await kube.get_object(api, resources.JOBS, namespace="default", name="wide")
    name = waiting.workload.name
    message = f"Updated not matching Workload for suspended job: default/{name}"

    assert admitted.workload.name == name
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert [ps["count"] for ps in before["spec"]["podSets"]] == [4]
    assert [ps["count"] for ps in after["spec"]["podSets"]] == [2]
    assert after["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "200Mi"}
    }
    assert [(a.name, a.count) for a in admitted.pod_set_assignments or []] == [("main", 2)]
    assert summary(events) == [
        ("Job", "wide", "CreatedWorkload", f"Created Workload: default/{name}"),
        ("Job", "wide", "Started", "Admitted by clusterQueue cluster-queue"),
        ("Job", "wide", "UpdatedWorkload", message),
    ]
    [updated] = [e for e in events if e["reason"] == "UpdatedWorkload"]
    assert updated["type"] == "Normal" and updated["source"] == {"component": "batch/job-kueue-controller"}
    assert updated["involvedObject"]["uid"] == wide["metadata"]["uid"]
    assert "UpdatedWorkload" in described and message in described


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_job_waiting_for_its_checks_gets_updated_admission_check(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """A Job's Workload reserves quota in a ClusterQueue with the AdmissionCheck ``prov``; its controller (here
    ``kubectl patch workload --subresource=status``) sets the check Pending with a message: the suspended Job gets
    Kueue's Normal UpdatedAdmissionCheck "prov: MESSAGE" (reconciler.go recordAdmissionCheckUpdate), once per
    message; none once the check is Ready and the Job started. Before, no Event told why the Job waited."""
    kubectl = Kubectl(emu.url, tmp_path)
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/prov"},
    }
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    active = {"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip

    def entry(state: str, message: str, at: str) -> str:
        body = {"name": "prov", "state": state, "message": message, "lastTransitionTime": at}
        return json.dumps({"status": {"admissionChecks": [body]}})

    async with _kueue(api, bus, watch=("AdmissionCheck",)):
        for manifest in (flavor("default-flavor"), check, queue, local_queue("user-queue", "cluster-queue")):
            await kube.apply_manifest(api, manifest)
        patch = {"status": {"conditions": [active]}}
        await kube.patch_object(api, resources.ADMISSION_CHECKS, name="prov", patch=patch, subresource="status")
        await wait_for(bus, types.AdmissionCheckObserved, count=2)
        await kube.apply_manifest(api, job("checked"))
        [reserved] = await wait_for(bus, types.QuotaReserved)
        name = reserved.workload.name
        await until(api, resources.WORKLOADS, name, lambda o: bool((o.get("status") or {}).get("admissionChecks")))
        for state, message, at in (
            ("Pending", "waiting for capacity", "2026-01-01T00:01:00Z"),
            ("Pending", "waiting for capacity", "2026-01-01T00:01:00Z"),  # written again: no news
            ("Pending", "capacity in zone b", "2026-01-01T00:02:00Z"),
        ):
            await kubectl.ok(
                "patch", "workload", name, "--subresource=status", "--type=merge", "-p", entry(state, message, at)
            )
            await events_until(api, lambda s, m=message: ("Job", "checked", "UpdatedAdmissionCheck", f"prov: {m}") in s)
        await kubectl.ok(
            "patch", "workload", name, "--subresource=status", "--type=merge", "-p",
            entry("Ready", "capacity found", "2026-01-01T00:03:00Z"),
        )  # fmt: skip
        await wait_for(bus, types.WorkloadAdmitted)
        events = await events_until(api, lambda s: any(e[2] == "Started" for e in s))
        described = await kubectl.ok("describe", "job", "checked")
        checked = await kube.get_object(api, resources.JOBS, namespace="default", name="checked")

    assert summary(events) == [
        ("Job", "checked", "CreatedWorkload", f"Created Workload: default/{name}"),
        ("Job", "checked", "Started", "Admitted by clusterQueue cluster-queue"),
        ("Job", "checked", "UpdatedAdmissionCheck", "prov: capacity in zone b"),
        ("Job", "checked", "UpdatedAdmissionCheck", "prov: waiting for capacity"),
    ]
    for event in events:
        assert event["type"] == "Normal" and event["source"] == {"component": "batch/job-kueue-controller"}
        assert event["involvedObject"]["uid"] == checked["metadata"]["uid"]
    assert "prov: capacity in zone b" in described


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_job_holding_quota_with_a_new_shape_gets_a_new_workload(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl patch job checked`` (``parallelism`` 2 -> 1, a toleration added) on a suspended Job whose Workload
    holds quota for 2 pods, waiting for its AdmissionCheck: Kueue rewrites a suspended job's Workload only while it holds no
    quota; this one no longer matches the Job (EquivalentToWorkload), so Kueue's ensureOneWorkload deletes it
    (Normal DeletedWorkload "Deleted not matching Workload: NS/NAME"), its quota goes back, and the Job gets a new
    Workload (another UID, CreatedWorkload, the Job's templates as they are now) that reserves quota for 1 pod.
    Before, the same Workload object was
    rewritten to ``count: 1`` while its ``status.admission`` still assigned 2 pods and the ClusterQueue still held
    2 CPUs for it."""
    kubectl = Kubectl(emu.url, tmp_path)
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/prov"},
    }
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    active = {"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip

    def reserved_object(obj: dict[str, Any]) -> bool:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in conditions)

    async with _kueue(api, bus, watch=("AdmissionCheck",)):
        for manifest in (flavor("default-flavor"), check, queue, local_queue("user-queue", "cluster-queue")):
            await kube.apply_manifest(api, manifest)
        patch = {"status": {"conditions": [active]}}
        await kube.patch_object(api, resources.ADMISSION_CHECKS, name="prov", patch=patch, subresource="status")
        await wait_for(bus, types.AdmissionCheckObserved, count=2)
        await kube.apply_manifest(api, job("checked", parallelism=2))
        [first] = await wait_for(bus, types.QuotaReserved)
        name = first.workload.name
        before = await until(api, resources.WORKLOADS, name, reserved_object)
        toleration = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
        reshaped = {"spec": {"parallelism": 1, "template": {"spec": {"tolerations": [toleration]}}}}
        await kubectl.ok("patch", "job", "checked", "--type=merge", "-p", json.dumps(reshaped))
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload", name=name)
        [_, second] = await wait_for(bus, types.QuotaReserved, count=2)
        after = await until(
            api,
            resources.WORKLOADS,
            name,
            lambda o: o["metadata"]["uid"] != before["metadata"]["uid"] and reserved_object(o),
        )

        def reserves_the_new_shape(obj: dict[str, Any]) -> bool:
            # the old Workload reserved too (reservingWorkloads 1 before the reshape, and the status is coalesced):
            # wait for the status written after the new one reserved, whose CPU is the new shape's
            status = obj.get("status") or {}
            totals = [r.get("total") for f in status.get("flavorsReservation") or [] for r in f.get("resources") or []]
            return status.get("reservingWorkloads") == 1 and "1" in totals

        queue_status = await until(api, resources.CLUSTER_QUEUES, "cluster-queue", reserves_the_new_shape, namespace="")
        events = await events_until(api, lambda s: [e[2] for e in s].count("CreatedWorkload") == 2)
        described = await kubectl.ok("describe", "job", "checked")

    deleted_message = f"Deleted not matching Workload: default/{name}"
    assert deleted.reason == types.NO_MATCHING_WORKLOAD
    assert [(a.name, a.count) for a in first.pod_set_assignments] == [("main", 2)]
    assert [(a.name, a.count) for a in second.pod_set_assignments] == [("main", 1)]
    assert [ps["count"] for ps in before["spec"]["podSets"]] == [2]
    assert [ps["count"] for ps in after["spec"]["podSets"]] == [1]
    assert after["spec"]["podSets"][0]["template"]["spec"]["tolerations"] == [toleration]  # the Job's now
    assert [a["count"] for a in after["status"]["admission"]["podSetAssignments"]] == [1]
    [reservation] = queue_status["status"]["flavorsReservation"]
    assert {r["name"]: r["total"] for r in reservation["resources"]} == {"cpu": "1", "memory": "200Mi"}
    assert summary(events) == [
        ("Job", "checked", "CreatedWorkload", f"Created Workload: default/{name}"),
        ("Job", "checked", "CreatedWorkload", f"Created Workload: default/{name}"),
        ("Job", "checked", "DeletedWorkload", deleted_message),
    ]
    assert deleted_message in described


async def test_a_new_shape_published_as_quota_is_reserved_still_gets_a_new_workload(api, bus: MemoryBus) -> None:
    """The race of the test above: the Job's new shape (``parallelism`` 2 -> 1) is published after the admitter
    reserved quota for the old one, before any Workload object showed it (here: no dispatcher runs yet). The log
    keeps the pod sets reserved for, as Kueue's Workload webhook refuses the update; once the dispatcher writes
    the Workload object holding quota for 2 pods, the watcher finds it no longer matches the suspended Job and
    replaces it (reason NoMatchingWorkload); the new one reserves quota for 1 pod. Before, the log's workload
    took ``count: 1`` under its reservation for 2."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/prov"},
    }
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    active = {"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_with_workloads(watcher), watcher.watch("AdmissionCheck"), admitter(bus).run()):
        for manifest in (flavor("default-flavor"), check, queue, local_queue("user-queue", "cluster-queue")):
            await kube.apply_manifest(api, manifest)
        patch = {"status": {"conditions": [active]}}
        await kube.patch_object(api, resources.ADMISSION_CHECKS, name="prov", patch=patch, subresource="status")
        await wait_for(bus, types.AdmissionCheckObserved, count=2)
        await kube.apply_manifest(api, job("checked", parallelism=2))
        [first] = await wait_for(bus, types.QuotaReserved)
        name = first.workload.name
        await kube.patch_object(api, resources.JOBS, namespace="default", name="checked", patch={"spec": {"parallelism": 1}})  # fmt: skip
        observed = await wait_for(bus, types.WorkloadObserved, count=2, workload__metadata__name=name)
        dispatcher, consumer = await dispatcher_with_consumer(bus, api)
        async with running(dispatcher.fold_forever(), dispatcher.consume(consumer)):
            [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload", name=name)
            [_, second] = await wait_for(bus, types.QuotaReserved, count=2)
            after = await until(
                api,
                resources.WORKLOADS,
                name,
                lambda o: bool((o.get("status") or {}).get("admission")) and o["spec"]["podSets"][0]["count"] == 1,
            )

    assert [[ps.count for ps in o.workload.spec.pod_sets] for o in observed] == [[2], [1]]
    assert deleted.reason == types.NO_MATCHING_WORKLOAD
    assert [(a.name, a.count) for a in first.pod_set_assignments] == [("main", 2)]
    assert [(a.name, a.count) for a in second.pod_set_assignments] == [("main", 1)]
    assert [a["count"] for a in after["status"]["admission"]["podSetAssignments"]] == [1]


def pod_manifest_yaml(name: str, group: str, *, total: int) -> str:
    """A pod of pod group ``group`` of ``total`` pods, as ``kubectl apply -f -`` reads it."""
    return json.dumps(member(name, group, total=total))


async def all_events(api: Any) -> list[dict[str, Any]]:
    """Every Event in ``default`` (the Workloads' too)."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return listed


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_pod_group_short_of_pods_gets_kueues_warning(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl apply`` of the first pod of a group of two: Kueue's pod reconciler cannot compose its Workload and
    records Warning ErrWorkloadCompose "'grp' group has fewer runnable pods than expected" on it
    (validatePodGroupMetadata), once; the second pod completes the group, which gets its Workload and runs, and
    nothing more is said of it. Before, the group waited with no Event."""
    kubectl = Kubectl(emu.url, tmp_path)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        await kubectl.ok("apply", "-f", "-", stdin=pod_manifest_yaml("g-a", "grp", total=2))
        waiting = await events_until(api, lambda s: any(e[2] == "ErrWorkloadCompose" for e in s))
        described = await kubectl.ok("describe", "pod", "g-a")
        await kubectl.ok("apply", "-f", "-", stdin=pod_manifest_yaml("g-b", "grp", total=2))
        await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        pods = await pods_until(api, lambda pods: ungated(pods) == {"g-a", "g-b"})
        after = await events_until(api, lambda s: sum(e[2] == "Started" for e in s) == 2)
    message = "'grp' group has fewer runnable pods than expected"

    [warning] = [e for e in waiting if e["reason"] == "ErrWorkloadCompose"]
    assert (warning["type"], warning["message"], warning["count"]) == ("Warning", message, 1)
    assert warning["involvedObject"]["kind"] == "Pod" and warning["involvedObject"]["name"] == "g-a"
    assert warning["source"] == {"component": "pod-kueue-controller"}
    assert "ErrWorkloadCompose" in described and message in described
    assert [e for e in summary(after) if e[2] == "ErrWorkloadCompose"] == [
        ("Pod", "g-a", "ErrWorkloadCompose", message)
    ]
    assert set(pods) == {"g-a", "g-b"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_pod_group_named_like_another_workload_is_refused(
    api, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    """A standalone Workload ``taken`` exists; pods of pod group ``taken`` come: Kueue refuses to adopt a Workload
    the pod group framework did not make (FindMatchingWorkloads, PodIntegrationValidateGroupOwner) and records
    Warning WorkloadNameConflict on the group's pod, action Admission; the Workload stays as its user wrote it and
    the pods stay gated. ``kubectl delete workload taken``: the group gets its own Workload and runs. Before, the
    group took the user's Workload over (its spec, annotation and owners rewritten)."""
    kubectl = Kubectl(emu.url, tmp_path)
    standalone = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "taken", "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "active": False,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(
        *watch_with_workloads(watcher),
        watcher.watch("Pod"),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        dispatcher.watch_pods(),
        dispatcher.ungate_forever(),
    ):
        await set_up_queues(api, cpu=9)
        await kubectl.ok("apply", "-f", "-", stdin=json.dumps(standalone))
        await wait_for(bus, types.WorkloadObserved, timeout=10)
        for name in ("t-a", "t-b"):
            await kubectl.ok("apply", "-f", "-", stdin=pod_manifest_yaml(name, "taken", total=2))
        refused = await events_until(api, lambda s: any(e[2] == "WorkloadNameConflict" for e in s))
        await asyncio.sleep(1.5)  # the Workload writes run every second: none may touch the user's Workload
        kept = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="taken")
        gated = await pods_until(api, lambda pods: {"t-a", "t-b"} <= set(pods))
        await kubectl.ok("delete", "workload", "taken")
        await pods_until(api, lambda pods: ungated(pods) == {"t-a", "t-b"})
        own = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="taken")
    message = (
        'A Workload named "taken" already exists but is not a pod group workload; this pod group cannot be admitted'
    )

    [warning] = [e for e in refused if e["reason"] == "WorkloadNameConflict"]
    assert (warning["type"], warning["message"], warning["action"]) == ("Warning", message, "Admission")
    assert (warning["involvedObject"]["kind"], warning["involvedObject"]["name"]) == ("Pod", "t-a")
    assert "kueue.x-k8s.io/is-group-workload" not in (kept["metadata"].get("annotations") or {})
    assert "ownerReferences" not in kept["metadata"]
    assert [ps["name"] for ps in kept["spec"]["podSets"]] == ["main"]
    assert ungated(gated) == set()
    assert own["metadata"]["uid"] != kept["metadata"]["uid"]
    assert own["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"


async def test_pods_joining_a_groups_workload_get_owner_references_added(api, bus: MemoryBus) -> None:
    """A running pod group's pod fails and its replacement joins: Kueue makes the new pod an owner of the group's
    Workload and records Normal OwnerReferencesAdded "Added 1 owner reference(s)" on the Workload
    (EnsureWorkloadOwnedByAllMembers), from pod-kueue-controller; none when the Workload was created with its
    pods as owners. Before, the owner was added with no Event."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "own", ("o-a", "o-b"))
        await asyncio.sleep(1.5)  # the Workload's owners as created, written
        before = [e for e in await all_events(api) if e["reason"] == "OwnerReferencesAdded"]
        failed = {"status": {"phase": "Failed"}}
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="o-a", patch=failed, subresource="status"
        )
        await kube.apply_manifest(api, member("o-c", "own", total=2))
        await pods_until(api, lambda pods: "o-c" in ungated(pods))
        async with asyncio.timeout(10):
            while not (added := [e for e in await all_events(api) if e["reason"] == "OwnerReferencesAdded"]):
                await asyncio.sleep(0.05)
        workload = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="own")

    assert before == []
    [event] = added
    assert (event["type"], event["message"], event["source"]) == (
        "Normal",
        "Added 1 owner reference(s)",
        {"component": "pod-kueue-controller"},
    )
    assert event["involvedObject"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "namespace": "default",
        "name": admitted.workload.name,
        "uid": workload["metadata"]["uid"],
    }


async def test_a_pod_group_gone_does_not_finish_another_jobs_workload_of_its_name(api, bus: MemoryBus) -> None:
    """Kueue #13960, pod_controller_test.go "Should not finalize a foreign Workload sharing the group name when the
    pod group has no pods": a Job's admitted Workload ``victim``; a queued pod of pod group ``victim`` comes (refused:
    the name is the Job's Workload's) and is deleted, leaving the group with no pods. The Job's Workload stays as it
    was: admitted, not finished, not deleted, its Job running. Kueue's pod reconciler used to finalize the
    Workload named after a group that lost its pods (Finished OwnerNotFound, its quota released)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        await kube.apply_manifest(api, job("victim"))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        victim = admitted.workload
        await kube.apply_manifest(api, member("attacker", victim.name, total=1))
        await events_until(api, lambda s: any(e[2] == "WorkloadNameConflict" for e in s))
        attacker = await kube.get_object(api, resources.PODS, namespace="default", name="attacker")
        await kube.delete_object(api, resources.PODS, namespace="default", name="attacker")
        # gone, not left Terminating: Kueue lets a refused group's inactive pods go (finalizePods)
        await _gone(api, resources.PODS, "attacker")
        await asyncio.sleep(1.5)  # a finish or a deletion of the Job's Workload would be on the log by now
        kept = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=victim.name)
        job_now = await kube.get_object(api, JOBS, namespace="default", name="victim")
        finished = [e for e in await events_of(bus, types.WorkloadFinished) if e.workload.name == victim.name]
        deleted = [
            e for e in await events_of(bus, types.ObjectDeleted) if (e.kind, e.name) == ("Workload", victim.name)
        ]
        released = [e for e in await events_of(bus, types.QuotaReleased) if e.workload == victim]

    conditions = {c["type"]: c["status"] for c in kept["status"]["conditions"]}
    assert conditions.get("Admitted") == "True" and conditions.get("Finished") != "True"
    assert "kueue.x-k8s.io/resource-in-use" in kept["metadata"]["finalizers"]
    assert "kueue.x-k8s.io/is-group-workload" not in (kept["metadata"].get("annotations") or {})
    assert [o["kind"] for o in kept["metadata"]["ownerReferences"]] == ["Job"]
    assert (finished, deleted, released) == ([], [], [])
    assert job_now["spec"]["suspend"] is False
    assert "kueue.x-k8s.io/managed" in attacker["metadata"]["finalizers"]  # gated and held, as Kueue's webhook does


async def _gone(api: Any, ref: Any, name: str) -> None:
    """Wait (10 s at most) until object ``name`` of ``ref`` in ``default`` no longer exists, finalizers and all."""
    async with asyncio.timeout(10):
        while True:
            try:
                await kube.get_object(api, ref, namespace="default", name=name)
            except kube_errors.NotFoundError:
                return
            await asyncio.sleep(0.05)
