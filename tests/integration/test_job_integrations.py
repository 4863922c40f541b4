"""The watcher's job integrations end to end: manifests applied to the emulated API server, facts on the log.

Kueue's own example manifests (../shared/kueue-examples: jobs/sample-job.yaml,
jobs/sample-jobset.yaml, jobs/sample-cronjob.yaml, pods-kueue/*) are applied as they
are, through the real client, and the watcher (``Watcher.run``, every kind, in one
process on a MemoryBus) must put on the log the workloads Kueue would create: a
Job's, a JobSet's (one pod set per replicated job), a plain Pod's and a pod group's
(one pod set per role). Around them: the Jobs a JobSet owns, a group that grows and
finishes, a PriorityClass that appears after its Job, manageJobsWithoutQueueName,
and a kind the cluster does not serve.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kueue_es.events import manager_config, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import jobs, jobsets, pods, workloads
from kueue_es.services.kube import client as kube
from kueue_es.services.watcher.kinds import LIMIT_RANGES, PRIORITY_CLASSES, RUNTIME_CLASSES
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator, serve_emulator
from tests.integration.harness import events_of, folded, running, wait_for
from tests.kube import examples

pytestmark = pytest.mark.timeout(30)

Mi = 2**20
JOBS = kube.ref_for("batch/v1", "Job")
JOBSETS = kube.ref_for("jobset.x-k8s.io/v1alpha2", "JobSet")
PODS = kube.ref_for("v1", "Pod")


@pytest.fixture
async def emu() -> AsyncIterator[ClusterEmulator]:
    """The emulator (Kueue's Job, JobSet and Pod webhooks included), serving PriorityClasses,
    RuntimeClasses and LimitRanges too."""
    extra = (PRIORITY_CLASSES, RUNTIME_CLASSES, LIMIT_RANGES)
    async with serve_emulator(bookmark_interval=0.2, extra_resources=extra) as served:
        yield served


async def apply_example(api: Any, relative: str) -> list[dict[str, Any]]:
    """Apply every document of one of Kueue's example files as it is; return the stored objects."""
    return [await kube.apply_manifest(api, doc) for doc in examples.load(relative)]


def observed(facts: list[types.WorkloadObserved], owner_kind: str) -> list[types.WorkloadObserved]:
    return [f for f in facts if f.workload.owner is not None and f.workload.owner.kind == owner_kind]


async def test_kueue_examples_become_the_workloads_kueue_creates(api, bus: MemoryBus) -> None:
    """sample-job, sample-jobset, kueue-pod and kueue-pod-group, applied unchanged, give four workloads
    with Kueue's names and pod sets, queued in user-queue."""
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        await apply_example(api, "admin/single-clusterqueue-setup.yaml")
        [job] = await apply_example(api, "jobs/sample-job.yaml")
        [js] = await apply_example(api, "jobs/sample-jobset.yaml")
        [single] = await apply_example(api, "pods-kueue/kueue-pod.yaml")
        leader, worker = await apply_example(api, "pods-kueue/kueue-pod-group.yaml")
        facts = await wait_for(bus, types.WorkloadObserved, count=4)

    [job_wl] = [f.workload for f in observed(facts, "Job")]
    assert job_wl.metadata.name == jobs.workload_name_for_job(job["metadata"]["name"], job["metadata"]["uid"])
    assert [(ps.name, ps.count, ps.requests) for ps in job_wl.spec.pod_sets] == [
        ("main", 3, {"cpu": 1000, "memory": 200 * Mi})
    ]
    [js_wl] = [f.workload for f in observed(facts, "JobSet")]
    assert js_wl.metadata.name == jobsets.workload_name_for_jobset(js["metadata"]["name"], js["metadata"]["uid"])
    assert [(ps.name, ps.count, ps.requests) for ps in js_wl.spec.pod_sets] == [
        ("workers", 1, {"cpu": 1000, "memory": 200 * Mi}),
        ("driver", 1, {"cpu": 2000, "memory": 200 * Mi}),
    ]
    pod_wls = {f.workload.metadata.name: f.workload for f in observed(facts, "Pod")}
    single_name = pods.workload_name_for_pod(single["metadata"]["name"], single["metadata"]["uid"])
    assert [(ps.name, ps.count, ps.requests) for ps in pod_wls[single_name].spec.pod_sets] == [
        ("main", 1, {"cpu": 3000})
    ]
    group = pod_wls["sample-group"]
    assert [(ps.name, ps.count, ps.requests) for ps in group.spec.pod_sets] == [
        (pods.role_hash(leader), 2, {"cpu": 3000})
    ]
    assert pods.role_hash(leader) == pods.role_hash(worker)
    assert {w.spec.queue_name for w in (job_wl, js_wl, *pod_wls.values())} == {"user-queue"}

    # the emulated webhooks held every job back until admission
    assert job["spec"]["suspend"] is True and js["spec"]["suspend"] is True
    assert all(pods.is_gated(p) for p in (single, leader, worker))
    state = await folded(bus)
    assert len(state.pending) == 4
    # The group's leader may be seen before its worker: Kueue's ErrWorkloadCompose warning for a group short
    # of pods is then recorded once (pod_controller.go validatePodGroupMetadata); nothing else is refused.
    short = pods.fewer_pods_message("sample-group")
    assert [e for e in await events_of(bus, types.ObjectRejected) if e.problem != short] == []


async def test_cronjob_job_and_jobset_children(api, bus: MemoryBus) -> None:
    """A Job a CronJob created is a workload of its own; the Jobs (and their pods) a managed JobSet
    controls are part of the JobSet's workload and give nothing."""
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        await kube.apply_manifest(api, examples.cronjob_job())
        [js] = await apply_example(api, "jobs/sample-jobset.yaml")
        await wait_for(bus, types.WorkloadObserved, count=2)
        owner = {"apiVersion": js["apiVersion"], "kind": "JobSet", "name": js["metadata"]["name"],
                 "uid": js["metadata"]["uid"], "controller": True}  # fmt: skip
        child = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{js['metadata']['name']}-workers-0",
                "namespace": "default",
                "labels": {workloads.QUEUE_LABEL: "user-queue"},
                "ownerReferences": [owner],
            },
            "spec": js["spec"]["replicatedJobs"][0]["template"]["spec"],
        }
        stored_child = await kube.apply_manifest(api, child)
        child_owner = {"apiVersion": "batch/v1", "kind": "Job", "name": child["metadata"]["name"],
                       "uid": stored_child["metadata"]["uid"], "controller": True}  # fmt: skip
        child_pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "workers-0-0",
                "labels": {workloads.QUEUE_LABEL: "user-queue"},
                "ownerReferences": [child_owner],
            },  # fmt: skip
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        await kube.apply_manifest(api, child_pod)
        await kube.apply_manifest(api, examples.load("jobs/sample-job.yaml")[0])  # a later marker
        facts = await wait_for(bus, types.WorkloadObserved, count=3)

    owners = sorted((f.workload.owner.kind, f.workload.owner.name) for f in facts if f.workload.owner)
    assert ("Job", "sample-cronjob-29000000") in owners
    assert not [o for o in owners if o[1] in (child["metadata"]["name"], "workers-0-0")]
    [cron] = [f.workload for f in facts if f.workload.owner and f.workload.owner.name == "sample-cronjob-29000000"]
    assert cron.spec.queue_name == "user-queue" and cron.spec.pod_sets[0].count == 3


def _controller(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True}  # fmt: skip


def _job(name: str, *, owner: dict[str, Any], queued: bool) -> dict[str, Any]:
    labels = {workloads.QUEUE_LABEL: "user-queue"} if queued else {}
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": [_controller(owner)]},
        "spec": {"template": template},
    }


async def test_a_queued_job_under_an_unqueued_job_of_a_queued_jobset_is_the_jobsets(api, bus: MemoryBus) -> None:
    """Kueue walks through owners that are not managed (FindAncestorJobManagedByKueue): the leaf Job's ancestor
    is the labelled JobSet above the unlabelled middle Job, so the leaf gets no Workload of its own. The watcher
    lists jobs by the queue-name label; it sees the unlabelled middle Job through its owner watch. Under an
    unlabelled JobSet the same chain leaves the leaf a workload of its own."""
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        [js] = await apply_example(api, "jobs/sample-jobset.yaml")
        middle = await kube.apply_manifest(api, _job("middle", owner=js, queued=False))
        await kube.apply_manifest(api, _job("leaf", owner=middle, queued=True))
        plain = await kube.apply_manifest(api, {**js, "metadata": {"name": "plain", "namespace": "default"}})
        plain_middle = await kube.apply_manifest(api, _job("plain-middle", owner=plain, queued=False))
        await kube.apply_manifest(api, _job("plain-leaf", owner=plain_middle, queued=True))
        await kube.apply_manifest(api, examples.load("jobs/sample-job.yaml")[0])  # a later marker
        # the Jobs come in one watch stream, the marker last: once its Workload is there, the leaf was seen
        facts = await wait_for(bus, types.WorkloadObserved, count=3)

    owners = {(f.workload.owner.kind, f.workload.owner.name) for f in facts if f.workload.owner}
    assert any(kind == "Job" and name.startswith("sample-job-") for kind, name in owners)
    assert ("JobSet", js["metadata"]["name"]) in owners and ("Job", "plain-leaf") in owners
    assert not {o for o in owners if o[1] in ("leaf", "middle", "plain-middle", "plain")}


async def test_an_unqueued_owner_seen_after_its_child_takes_the_childs_workload_back(bus: MemoryBus) -> None:
    """The owner watch and the job watches are separate streams: a leaf Job converted before its unlabelled middle
    Job was kept got a Workload of its own; keeping the middle Job converts the leaf again, and its Workload goes
    (ObjectDeleted), as the JobSet above is its ancestor."""
    watcher = Watcher(bus=bus, api=_Unused())
    await watcher.learn_from_log()
    js = {**examples.load("jobs/sample-jobset.yaml")[0]}
    js["metadata"] = {**js["metadata"], "name": "sample", "namespace": "default", "uid": "u-js", "resourceVersion": "1"}
    middle = _job("middle", owner=js, queued=False)
    middle["metadata"].update(uid="u-middle", resourceVersion="2")
    leaf = _job("leaf", owner=middle, queued=True)
    leaf["metadata"].update(uid="u-leaf", resourceVersion="3")
    await watcher._changed("JobSet", "ADDED", js)
    await watcher._changed("Job", "ADDED", leaf)
    [mine] = [f for f in await events_of(bus, types.WorkloadObserved) if f.workload.owner.name == "leaf"]

    await watcher.unqueued_owner_event("Job", "ADDED", middle)

    gone = await events_of(bus, types.ObjectDeleted, kind="Workload", name=mine.workload.metadata.name)
    assert len(gone) == 1
    await watcher.unqueued_owner_event("Job", "MODIFIED", middle)  # kept already: nothing converted again
    assert len(await events_of(bus, types.ObjectDeleted)) == 1


class _Unused:
    """A KubeReader the test never lets the watcher call: events are handed to it directly."""

    def list(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("not listed")

    def watch(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("not watched")


async def test_pod_group_grows_finishes_and_goes(api, bus: MemoryBus) -> None:
    """A group gets its workload only when complete; all pods Succeeded gives WorkloadFinished; deleting
    the last pod gives ObjectDeleted for the group's workload."""
    leader, worker = examples.load("pods-kueue/kueue-pod-group.yaml")
    for doc, name in ((leader, "leader"), (worker, "worker")):
        doc["metadata"].pop("generateName")
        doc["metadata"]["name"] = name
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        await kube.apply_manifest(api, leader)
        marker = examples.load("pods-kueue/kueue-pod.yaml")[0]
        await kube.apply_manifest(api, marker)
        await wait_for(bus, types.WorkloadObserved, count=1)  # the single pod, applied after the leader
        assert not [
            f for f in await events_of(bus, types.WorkloadObserved) if f.workload.metadata.name == "sample-group"
        ]

        await kube.apply_manifest(api, worker)
        [group] = await wait_for(bus, types.WorkloadObserved, workload__metadata__name="sample-group")
        [pod_set] = group.workload.spec.pod_sets
        assert pod_set.count == 2

        for name in ("leader", "worker"):
            status = {"status": {"phase": "Succeeded"}}
            await kube.patch_object(api, PODS, namespace="default", name=name, subresource="status", patch=status)
        [finished] = await wait_for(bus, types.WorkloadFinished, workload__name="sample-group")
        assert (finished.succeeded, finished.message) == (True, "Pods succeeded: 2/2.")

        # no dispatcher runs here to take Kueue's pod finalizer off the finished group's pods: by hand
        no_finalizer = {"metadata": {"finalizers": None}}
        await kube.delete_object(api, PODS, namespace="default", name="leader")
        await kube.patch_object(api, PODS, namespace="default", name="leader", patch=no_finalizer)
        await asyncio.sleep(0.2)
        assert not await events_of(bus, types.ObjectDeleted, name="sample-group")
        await kube.delete_object(api, PODS, namespace="default", name="worker")
        await kube.patch_object(api, PODS, namespace="default", name="worker", patch=no_finalizer)
        [deleted] = await wait_for(bus, types.ObjectDeleted, name="sample-group")

    assert (deleted.kind, deleted.namespace, deleted.uid) == ("Workload", "default", group.workload.metadata.uid)


async def test_priority_class_created_after_its_job(api, bus: MemoryBus) -> None:
    """A Job naming a missing PriorityClass gives ObjectRejected; once the class exists the workload
    appears with its value (Kueue retries until the class exists)."""
    manifest = examples.load("jobs/sample-job.yaml")[0]
    manifest["spec"]["template"]["spec"]["priorityClassName"] = "high"
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        stored = await kube.apply_manifest(api, manifest)
        [rejected] = await wait_for(bus, types.ObjectRejected)
        assert (rejected.kind, rejected.name) == ("Job", stored["metadata"]["name"])
        assert rejected.field == "spec.template.spec.priorityClassName"
        high = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
        await kube.create_object(api, PRIORITY_CLASSES, body=high)
        [fact] = await wait_for(bus, types.WorkloadObserved)

    assert fact.workload.spec.priority == 1000
    assert fact.workload.spec.priority_class_ref is not None
    assert (fact.workload.spec.priority_class_ref.kind, fact.workload.spec.priority_class_ref.name) == (
        "PriorityClass",
        "high",
    )


async def test_manage_jobs_without_queue_name(api, bus: MemoryBus) -> None:
    """With manageJobsWithoutQueueName a Job without the label is managed: no queue while the namespace
    has no ``default`` LocalQueue, and still none once one exists (Kueue defaults the label only in its create
    webhook); a Job created after it gets that label, so its workload goes there."""
    manifest = examples.load("jobs/sample-job.yaml")[0]
    del manifest["metadata"]["labels"]
    manifest["spec"]["suspend"] = True  # as Kueue's webhook does with this option (the emulator's only for labels)
    watcher = Watcher(bus=bus, api=api, manage_jobs_without_queue_name=True)
    async with running(watcher.run()):
        await kube.apply_manifest(api, manifest)
        [first] = await wait_for(bus, types.WorkloadObserved)
        assert first.workload.spec.queue_name == ""
        lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
              "metadata": {"name": "default", "namespace": "default"}, "spec": {"clusterQueue": "cluster-queue"}}  # fmt: skip
        await kube.apply_manifest(api, lq)
        later = {**manifest, "metadata": {**manifest["metadata"], "generateName": "later-"}}
        await kube.apply_manifest(api, later)
        facts = await wait_for(bus, types.WorkloadObserved, count=2)

    by_name = {f.workload.metadata.name: f.workload.spec.queue_name for f in facts}
    assert by_name.pop(first.workload.metadata.name) == ""
    assert list(by_name.values()) == ["default"]


async def test_kinds_the_cluster_does_not_serve_do_not_stop_the_watcher(bus: MemoryBus) -> None:
    """No PriorityClass in this cluster and a JobSet API version it does not serve: the other kinds
    are watched all the same (Kueue sets an integration up once its CRD exists)."""

    class NewerJobSetApi(Watcher):
        def _ref(self, kind: str) -> kube.ResourceRef:
            if kind == "JobSet":
                return kube.ResourceRef(group="jobset.x-k8s.io", version="v9", plural="jobsets", kind="JobSet",
                                        namespaced=True)  # fmt: skip
            return super()._ref(kind)

    async with serve_emulator(bookmark_interval=0.2) as plain:
        api = await kube.make_api_client(server=plain.url)
        try:
            watcher = NewerJobSetApi(bus=bus, api=api, probe_seconds=0.1)
            async with running(watcher.run()) as tasks:
                await kube.apply_manifest(api, examples.load("jobs/sample-job.yaml")[0])
                await wait_for(bus, types.WorkloadObserved)
                await asyncio.sleep(0.3)  # a few probes later
                assert not any(t.done() for t in tasks)
                assert watcher.synced["JobSet"].is_set() and watcher.synced["PriorityClass"].is_set()
        finally:
            await api.close()


async def test_relist_deletes_only_the_workloads_of_its_own_kind(api, bus: MemoryBus) -> None:
    """After a restart each kind's relist finds the deletions of that kind only: the JobSet deleted
    while no watcher ran is gone from the log, the Job's and the pod group's workloads stay."""
    first = Watcher(bus=bus, api=api)
    async with running(first.run()):
        [job] = await apply_example(api, "jobs/sample-job.yaml")
        [js] = await apply_example(api, "jobs/sample-jobset.yaml")
        await apply_example(api, "pods-kueue/kueue-pod-group.yaml")
        await wait_for(bus, types.WorkloadObserved, count=3)

    await kube.delete_object(api, JOBSETS, namespace="default", name=js["metadata"]["name"])
    second = Watcher(bus=bus, api=api)
    await second.learn_from_log()
    assert second.publisher.sources == {
        ("default", jobs.workload_name_for_job(job["metadata"]["name"], job["metadata"]["uid"])): "Job",
        ("default", jobsets.workload_name_for_jobset(js["metadata"]["name"], js["metadata"]["uid"])): "JobSet",
        ("default", "sample-group"): "Pod",
    }
    async with running(second.run()):
        [deleted] = await wait_for(bus, types.ObjectDeleted)
        await apply_example(api, "pods-kueue/kueue-pod.yaml")  # a later marker: every relist is done
        await wait_for(bus, types.WorkloadObserved, count=4)

    assert (deleted.kind, deleted.name, deleted.uid) == (
        "Workload",
        jobsets.workload_name_for_jobset(js["metadata"]["name"], js["metadata"]["uid"]),
        js["metadata"]["uid"],
    )
    assert len(await events_of(bus, types.ObjectDeleted)) == 1
    assert len((await folded(bus)).workloads) == 3


async def test_a_rejection_is_published_once_per_problem(api, bus: MemoryBus) -> None:
    """A bad Job seen again (a status write, a conversion redone) gives no new ObjectRejected; once fixed
    and broken again, the rejection is news again."""
    bad = examples.load("jobs/sample-job.yaml")[0]
    bad["metadata"]["name"] = "flaky"
    del bad["metadata"]["generateName"]
    bad["spec"]["parallelism"] = "three"
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        await kube.apply_manifest(api, bad)
        await wait_for(bus, types.ObjectRejected)
        status = {"status": {"active": 0}}
        await kube.patch_object(api, JOBS, namespace="default", name="flaky", subresource="status", patch=status)
        high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 1}
        await kube.create_object(api, PRIORITY_CLASSES, body=high)  # every job is converted again
        await kube.apply_manifest(api, examples.load("jobs/sample-job.yaml")[0])  # a later marker
        await wait_for(bus, types.WorkloadObserved)
        assert len(await events_of(bus, types.ObjectRejected)) == 1

        await kube.patch_object(api, JOBS, namespace="default", name="flaky", patch={"spec": {"parallelism": 3}})
        await wait_for(bus, types.WorkloadObserved, count=2)
        await kube.patch_object(api, JOBS, namespace="default", name="flaky", patch={"spec": {"parallelism": "three"}})
        rejections = await wait_for(bus, types.ObjectRejected, count=2)

    assert {(r.kind, r.name, r.field) for r in rejections} == {("Job", "flaky", "spec.parallelism")}


async def test_runtime_class_overhead_and_limit_range_defaults(api, bus: MemoryBus) -> None:
    """A Job naming a RuntimeClass, with a container that requests nothing, in a namespace with a
    LimitRange: the workload counts the LimitRange's defaultRequest plus the RuntimeClass overhead; a
    changed LimitRange changes the pending workload."""
    kata = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
            "handler": "kata", "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}}}  # fmt: skip
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "default"},
              "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "64Mi"}}]}}  # fmt: skip
    manifest = examples.load("jobs/sample-job.yaml")[0]
    pod_spec = manifest["spec"]["template"]["spec"]
    pod_spec["runtimeClassName"] = "kata"
    del pod_spec["containers"][0]["resources"]
    await kube.create_object(api, RUNTIME_CLASSES, body=kata)
    await kube.create_object(api, LIMIT_RANGES, namespace="default", body=limits)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        await kube.apply_manifest(api, manifest)
        [first] = await wait_for(bus, types.WorkloadObserved)
        limits["spec"]["limits"][0]["defaultRequest"]["cpu"] = "1"
        await kube.patch_object(api, LIMIT_RANGES, namespace="default", name="defaults", patch=limits)
        [_, second] = await wait_for(bus, types.WorkloadObserved, count=2)

    assert first.workload.spec.pod_sets[0].requests == {"cpu": 750, "memory": 224 * Mi}
    assert second.workload.spec.pod_sets[0].requests == {"cpu": 1250, "memory": 224 * Mi}


async def test_managed_jobs_namespace_selector_from_the_configuration(api, bus: MemoryBus) -> None:
    """The Configuration's managedJobsNamespaceSelector (matchLabels here) decides which namespaces' jobs
    are managed, queue label or not (Kueue v0.20: ManagedJobsNamespaceSelectorAlwaysRespected is GA);
    labelling a namespace later converts its jobs then."""
    config = manager_config.parse(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "managedJobsNamespaceSelector:\n  matchLabels:\n    kueue: enabled\n",
        source="test",
    )
    for name, labels in (("team-a", {"kueue": "enabled"}), ("team-b", {})):
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        await kube.apply_manifest(api, ns)
    watcher = Watcher(bus=bus, api=api, config=config)
    assert watcher.inputs.managed_jobs_namespace_selector == config.managed_jobs_namespace_selector
    async with running(watcher.run()):
        for namespace in ("team-a", "team-b"):
            manifest = examples.load("jobs/sample-job.yaml")[0]
            manifest["metadata"]["namespace"] = namespace
            await kube.apply_manifest(api, manifest)
        [first] = await wait_for(bus, types.WorkloadObserved)
        await asyncio.sleep(0.5)  # team-b's Job has been seen by now: still no workload for it
        assert [f.workload.metadata.namespace for f in await events_of(bus, types.WorkloadObserved)] == ["team-a"]
        labelled = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b", "labels": {"kueue": "enabled"}}}  # fmt: skip
        await kube.apply_manifest(api, labelled)
        facts = await wait_for(bus, types.WorkloadObserved, count=2)
    assert first.workload.metadata.namespace == "team-a"
    assert facts[-1].workload.metadata.namespace == "team-b"
    assert facts[-1].workload.spec.queue_name == "user-queue"


async def test_a_job_seen_deleted_gives_its_workloads_deletion_the_time_it_was_seen(api, bus: MemoryBus) -> None:
    """The watcher's ObjectDeleted of a Job's workload says when the Job was seen gone (``at_ms``): without it,
    ``kueue-es explain`` could only put the deletion at the latest time before it, which can be a second or
    more before the ``kubectl delete``."""
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        [job] = await apply_example(api, "jobs/sample-job.yaml")
        await wait_for(bus, types.WorkloadObserved)
        before = time.time_ns() // 1_000_000
        await kube.delete_object(api, JOBS, namespace="default", name=job["metadata"]["name"])
        [deleted] = await wait_for(bus, types.ObjectDeleted)
        after = time.time_ns() // 1_000_000
    assert deleted.kind == "Workload" and deleted.uid == job["metadata"]["uid"]
    assert isinstance(deleted.at_ms, int) and before <= deleted.at_ms <= after
