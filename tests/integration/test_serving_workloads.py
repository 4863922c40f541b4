"""Deployment, StatefulSet and LeaderWorkerSet through the edge, their pods made by the simulated controllers
(kueue_es/sim/controllers.py): Kueue's serving samples applied as they are, admitted through their pods.

Kueue (pkg/controller/jobs/deployment, statefulset, leaderworkerset): a Deployment's pods are single-pod
workloads (scale in deletes pods and their workloads, freeing the quota); a StatefulSet is one serving pod
group ``statefulset-<name>-<hash>`` with pod set ``main`` counting its replicas, whose pods come one by one
(OrderedReady) and are started as they come; a LeaderWorkerSet is one serving group per replica with pod
sets ``leader`` and ``worker``. A preempted group's running pods are deleted; the controllers make them again,
gated, and the group is admitted and started again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import pods as pod_integration
from kueue_es.jobframework import workloads
from kueue_es.jobframework.annotations import SCHEDULING_GATE
from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import DeciderLoop, cancel_and_wait
from kueue_es.services.watcher.kinds import WATCHED_KINDS
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim import controllers
from kueue_es.sim.controllers import LWS_REF, SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import (
    SPOT_TOLERATION,
    admitter,
    cluster_queue,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    flavor,
    local_queue,
    pod_services,
    running,
    set_up_queues,
    wait_for,
    wait_until,
)
from tests.kube import examples

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

SPOT_SELECTOR = {"instance-type": "spot"}


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server that also serves LeaderWorkerSets, and a client for it."""
    async with serve_emulator(bookmark_interval=0.2, extra_resources=(LWS_REF,)) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def services(bus: MemoryBus, api: Any, dispatcher: Any, consumer: Any) -> list[Any]:
    """Watcher, admitter, dispatcher (with its pod watches and ungater) and the simulated controllers."""
    return [
        *pod_services(bus, api, dispatcher, consumer),
        SimulatedControllers(api, watch_options={"timeout_seconds": 5}).run(),
    ]


async def pods_until(
    api: Any, check: Callable[[list[dict[str, Any]]], bool], *, timeout: float = 20
) -> list[dict[str, Any]]:
    """Poll the pods of ``default`` until ``check(pods)`` holds."""
    async with asyncio.timeout(timeout):
        while True:
            listed, _ = await kube.list_objects(api, resources.PODS, namespace="default")
            if check(listed):
                return listed
            await asyncio.sleep(0.05)


def started(pod: dict[str, Any]) -> bool:
    """Ungated with the flavor's node selector, and running (the simulated kubelet)."""
    return (
        not pod_integration.is_gated(pod)
        and pod["spec"].get("nodeSelector") == SPOT_SELECTOR
        and pod.get("status", {}).get("phase") == "Running"
    )


def live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def workload(api: Any, name: str) -> dict[str, Any]:
    return await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)


async def apply(api: Any, relative: str) -> dict[str, Any]:
    [doc] = examples.load(relative)
    return await kube.apply_manifest(api, {**doc, "metadata": {**doc["metadata"], "namespace": "default"}})


async def test_sample_deployment_pods_are_single_pod_workloads(api: Any, bus: MemoryBus) -> None:
    """sample-deployment (3 replicas): three Pod workloads with pod set main, each pod ungated on the flavor and
    running; scaling in to 1 deletes two pods and their workloads; a preempted pod is deleted, its ReplicaSet
    makes another, which is admitted and started."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        deployment = await apply(api, "serving-workloads/sample-deployment.yaml")
        template = deployment["spec"]["template"]["metadata"]
        assert template["annotations"] == {serving.SUSPENDED_BY_PARENT_ANNOTATION: "deployment"}
        assert template["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
        assert template["labels"]["kueue.x-k8s.io/managed"] == "true"
        pods = await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        applied = await wait_for(bus, types.DispatchApplied, action="StartJob", count=3, timeout=10)
        names = sorted(p["metadata"]["name"] for p in pods)
        assert sorted(a.target for a in applied) == [f"Pod default/{n}" for n in names]
        for pod in pods:
            [owner] = pod["metadata"]["ownerReferences"]
            assert owner["kind"] == "ReplicaSet" and owner["name"].startswith("nginx-deployment-")
            wl = await workload(
                api, pod_integration.workload_name_for_pod(pod["metadata"]["name"], pod["metadata"]["uid"])
            )
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 1)]

        # scale in: two pods and their workloads go, their quota is free
        await kube.patch_object(
            api, resources.DEPLOYMENTS, namespace="default", name="nginx-deployment", patch={"spec": {"replicas": 1}}
        )
        await pods_until(api, lambda ps: len(live(ps)) == 1)
        deleted = await wait_for(bus, types.ObjectDeleted, kind="Workload", count=2, timeout=10)
        assert all(d.name.startswith("pod-nginx-deployment-") for d in deleted)

        # preempted: the pod is deleted, the ReplicaSet makes another, admitted and started
        [kept] = [a.workload for a in applied if a.workload.name not in {d.name for d in deleted}]
        await commit(bus, eviction(kept))
        await wait_for(bus, types.DispatchApplied, action="Evict", timeout=10)
        [replacement] = await pods_until(
            api, lambda ps: len(ps) == 1 and ps[0]["metadata"]["name"] not in names and started(ps[0])
        )
        await wait_for(bus, types.DispatchApplied, action="StartJob", count=4, timeout=10)
        assert replacement["metadata"]["annotations"][serving.SUSPENDED_BY_PARENT_ANNOTATION] == "deployment"


async def test_sample_statefulset_is_one_serving_group_started_pod_by_pod(api: Any, bus: MemoryBus) -> None:
    """sample-statefulset (3 replicas, OrderedReady): one workload statefulset-nginx-statefulset-<hash> with pod
    set main of 3, admitted with the first pod; each pod after it is started as it comes; PodsReady once all
    three are ready; preempted: the running pods are deleted, made again gated, and the group admitted again."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        assert sts["spec"]["template"]["metadata"]["annotations"] == {
            serving.SUSPENDED_BY_PARENT_ANNOTATION: "statefulset"
        }
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        pods = await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        assert sorted(p["metadata"]["name"] for p in pods) == [f"nginx-statefulset-{i}" for i in range(3)]
        for pod in pods:
            assert pod_integration.group_name(pod) == name
            assert pod["metadata"]["annotations"][pod_integration.GROUP_TOTAL_COUNT_ANNOTATION] == "3"
            # the reconciler's index-label annotation comes after the pod webhook, which so never copies the index
            # into Kueue's own label (statefulset_pod_reconciler.go setDefault, pod_webhook.go Default)
            assert pod["metadata"]["annotations"][serving.POD_INDEX_LABEL_ANNOTATION] == "apps.kubernetes.io/pod-index"
            assert "kueue.x-k8s.io/pod-group-pod-index" not in pod["metadata"]["labels"]
        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        assert applied.workload.name == name and applied.target == f"Pod group default/{name}"
        wl = await workload(api, name)
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 3)]
        # ranked by the StatefulSet's pod index (statefulset_reconciler.go constructWorkload), not Kueue's group label
        assert wl["spec"]["podSets"][0]["topologyRequest"] == {"podIndexLabel": "apps.kubernetes.io/pod-index"}
        # its template is the StatefulSet's (statefulset_reconciler.go constructWorkload), image and ports too
        template = wl["spec"]["podSets"][0]["template"]["spec"]
        assert template["containers"] == sts["spec"]["template"]["spec"]["containers"]
        await wait_for(bus, types.WorkloadPodsReady, ready=True, workload__name=name, timeout=10)

        before = {p["metadata"]["uid"] for p in pods}
        await commit(bus, eviction(applied.workload))
        await wait_for(bus, types.DispatchApplied, action="Evict", timeout=10)
        await wait_for(bus, types.WorkloadStopped, workload__name=name, timeout=10)
        again = await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=20)
        assert again[1].workload.name == name
        pods = await pods_until(
            api, lambda ps: len(ps) == 3 and all(started(p) and p["metadata"]["uid"] not in before for p in ps)
        )
        assert sorted(p["metadata"]["name"] for p in pods) == [f"nginx-statefulset-{i}" for i in range(3)]


async def workload_until(
    api: Any, name: str, check: Callable[[dict[str, Any]], bool], *, timeout: float = 20
) -> dict[str, Any]:
    """Poll Workload ``default/name`` until ``check(it)`` holds (a missing one is never checked)."""
    async with asyncio.timeout(timeout):
        while True:
            listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            found = [w for w in listed if w["metadata"]["name"] == name]
            if found and check(found[0]):
                return found[0]
            await asyncio.sleep(0.05)


def condition(wl: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == kind), {})


async def scale(api: Any, name: str, replicas: int) -> None:
    await kube.patch_object(
        api, resources.STATEFUL_SETS, namespace="default", name=name, patch={"spec": {"replicas": replicas}}
    )


async def test_a_statefulset_relabelled_before_a_replica_is_ready_moves_its_workload(api: Any, bus: MemoryBus) -> None:
    """statefulset_reconciler.go reconcileWorkload: the webhook lets a StatefulSet's queue-name label change while
    no replica is ready (statefulset_webhook.go ValidateUpdate), and the reconciler then sets the Workload's
    spec.queueName to it; here from a LocalQueue that does not exist, where the Workload waits, to user-queue, where
    it is admitted and its pods start. Before, kueue-es kept the Workload in the queue its first pod named."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        [doc] = examples.load("serving-workloads/sample-statefulset.yaml")
        doc["metadata"] = {**doc["metadata"], "namespace": "default"}
        doc["metadata"]["labels"] = {**doc["metadata"]["labels"], workloads.QUEUE_LABEL: "missing-queue"}
        sts = await kube.apply_manifest(api, doc)
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        waiting = await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("status") == "False")
        assert waiting["spec"]["queueName"] == "missing-queue"
        await kube.patch_object(
            api,
            resources.STATEFUL_SETS,
            namespace="default",
            name="nginx-statefulset",
            patch={"metadata": {"labels": {workloads.QUEUE_LABEL: "user-queue"}}},
        )
        await wait_for(bus, types.WorkloadAdmitted, workload__name=name, timeout=10)
        moved = await workload_until(api, name, lambda w: condition(w, "Admitted").get("status") == "True")
        assert moved["spec"]["queueName"] == "user-queue"
        assert moved["status"]["admission"]["clusterQueue"] == "cluster-queue"
        pods = await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        # syncQueueLabel: the pod made before the change relabelled while gated, those after it made so
        assert {p["metadata"]["labels"][workloads.QUEUE_LABEL] for p in pods} == {"user-queue"}


async def test_a_leaderworkerset_relabelled_before_a_replica_is_ready_moves_its_groups_workloads(
    api: Any, bus: MemoryBus
) -> None:
    """leaderworkerset_reconciler.go updateWorkload: a LeaderWorkerSet's queue-name label changed while no replica
    is ready (leaderworkerset_webhook.go ValidateUpdate lets it) becomes every group Workload's spec.queueName, and
    setDefault relabels the gated pods; here from a LocalQueue that does not exist to another one that does not
    either (nothing is admitted meanwhile), then that LocalQueue is made and both groups are admitted there and their
    pods start. Kueue's webhook writes the new label into the LeaderWorkerSet's templates, so LWS starts a rolling
    update (its revision covers the templates): the pods are made again with the label, and Kueue takes the gates off
    those of the leader StatefulSet's current revision meanwhile (ShouldUngatePod) -- no pod stays gated for sure, but
    no Workload is admitted before the LocalQueue exists."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        [doc] = examples.load("serving-workloads/sample-leaderworkerset.yaml")
        doc["metadata"] = {**doc["metadata"], "namespace": "default"}
        doc["metadata"]["labels"] = {**doc["metadata"]["labels"], workloads.QUEUE_LABEL: "missing-queue"}
        lws = await kube.apply_manifest(api, doc)
        groups = [serving.lws_workload_name("nginx-leaderworkerset", lws["metadata"]["uid"], str(i)) for i in range(2)]
        for group in groups:
            waiting = await workload_until(api, group, lambda w: condition(w, "QuotaReserved").get("status") == "False")
            assert waiting["spec"]["queueName"] == "missing-queue"
        await kube.patch_object(
            api,
            LWS_REF,
            namespace="default",
            name="nginx-leaderworkerset",
            patch={"metadata": {"labels": {workloads.QUEUE_LABEL: "lws-queue"}}},
        )
        for group in groups:
            await workload_until(api, group, lambda w: w["spec"]["queueName"] == "lws-queue")
        relabelled = await pods_until(
            api,
            lambda ps: (
                len(ps) == 6 and all(p["metadata"]["labels"].get(workloads.QUEUE_LABEL) == "lws-queue" for p in ps)
            ),
        )
        assert relabelled
        for group in groups:
            held = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=group)
            assert condition(held, "QuotaReserved").get("status") != "True"
        await kube.apply_manifest(api, local_queue("lws-queue", "cluster-queue"))
        await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10)
        for group in groups:
            moved = await workload_until(api, group, lambda w: condition(w, "Admitted").get("status") == "True")
            assert moved["spec"]["queueName"] == "lws-queue"
        await pods_until(api, lambda ps: len(ps) == 6 and all(started(p) for p in ps))


async def test_an_unlabelled_leaderworkerset_under_manage_jobs_without_queue_name_waits_then_is_admitted(
    bus: MemoryBus,
) -> None:
    """Kueue #4808 (leaderworkerset_reconciler.go setDefault, constructWorkload, updateWorkload): under
    manageJobsWithoutQueueName a LeaderWorkerSet without the queue-name label has one Workload per group, naming no
    LocalQueue and not admitted, its pods gated; labelled with a LocalQueue, the groups' Workloads move there, are
    admitted and their pods start. Before, its pods stayed gated with no group and no Workload, for good, also
    once it was labelled."""
    async with serve_emulator(
        bookmark_interval=0.2, extra_resources=(LWS_REF,), manage_jobs_without_queue_name=True
    ) as emu:
        api = await kube.make_api_client(server=emu.url)
        try:
            dispatcher, consumer = await dispatcher_with_consumer(bus, api)
            watcher = Watcher(bus=bus, api=api, manage_jobs_without_queue_name=True)
            simulated = SimulatedControllers(api, watch_options={"timeout_seconds": 5})
            async with running(
                watcher.run(),
                admitter(bus).run(),
                dispatcher.fold_forever(),
                dispatcher.consume(consumer),
                dispatcher.watch_pods(),
                dispatcher.ungate_forever(),
                simulated.run(),
            ):
                await set_up_queues(api)
                [doc] = examples.load("serving-workloads/sample-leaderworkerset.yaml")
                labels = {k: v for k, v in doc["metadata"]["labels"].items() if k != workloads.QUEUE_LABEL}
                doc["metadata"] = {**doc["metadata"], "namespace": "default", "labels": labels}
                lws = await kube.apply_manifest(api, doc)
                uid = lws["metadata"]["uid"]
                groups = [serving.lws_workload_name("nginx-leaderworkerset", uid, str(i)) for i in range(2)]
                for group in groups:
                    waiting = await workload_until(
                        api, group, lambda w: condition(w, "QuotaReserved").get("status") == "False"
                    )
                    assert waiting["spec"].get("queueName", "") == ""
                gated = await pods_until(api, lambda ps: len(ps) == 6)
                assert all(pod_integration.is_gated(p) for p in gated)
                assert all(workloads.QUEUE_LABEL not in p["metadata"]["labels"] for p in gated)
                await kube.patch_object(
                    api,
                    LWS_REF,
                    namespace="default",
                    name="nginx-leaderworkerset",
                    patch={"metadata": {"labels": {workloads.QUEUE_LABEL: "user-queue"}}},
                )
                await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=20)
                for group in groups:
                    moved = await workload_until(api, group, lambda w: condition(w, "Admitted").get("status") == "True")
                    assert moved["spec"]["queueName"] == "user-queue"
                await pods_until(api, lambda ps: len(ps) == 6 and all(started(p) for p in ps))
        finally:
            await api.close()


async def test_statefulset_scaled_to_zero_keeps_its_workload_on_hold(api: Any, bus: MemoryBus) -> None:
    """Kueue v0.19 (statefulset_reconciler.go): scaled to zero, the StatefulSet's Workload stays, its quota
    released with QuotaReserved=False ``OnHold`` "StatefulSet scaled to zero; workload on hold" and not queued;
    scaled up again, the same Workload is let go ("Workload no longer on hold; waiting for quota reservation"),
    admitted again and its new pods started, PodsReady ``Started`` (not ``Recovered``)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        await wait_for(bus, types.WorkloadPodsReady, ready=True, workload__name=name, timeout=10)
        uid = applied.workload.uid
        object_uid = (await workload(api, name))["metadata"]["uid"]
        sts_uid = sts["metadata"]["uid"]
        first = await workload_until(api, name, lambda w: len(w["metadata"].get("ownerReferences", [])) == 4)
        assert [(r["kind"], r.get("controller")) for r in first["metadata"]["ownerReferences"]] == [
            ("StatefulSet", None),
            *[("Pod", None)] * 3,
        ]

        await scale(api, "nginx-statefulset", 0)
        [released] = await wait_for(bus, types.QuotaReleased, workload__name=name, timeout=10)
        assert (released.reason, released.workload.uid) == ("OnHold", uid)
        await pods_until(api, lambda ps: not ps)
        held = await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("reason") == "OnHold")
        assert condition(held, "QuotaReserved")["status"] == "False"
        assert condition(held, "QuotaReserved")["message"] == "StatefulSet scaled to zero; workload on hold"
        assert condition(held, "Admitted")["status"] == "False"
        assert "admission" not in held.get("status", {})
        # Kueue's StatefulSet reconciler makes the StatefulSet an owner (not the controller) and keeps it while
        # scaled to zero: the garbage collector keeps the held Workload with its pods gone
        sts_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "nginx-statefulset", "uid": sts_uid}
        assert held["metadata"]["ownerReferences"][0] == sts_ref
        assert held["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == sts_uid
        assert held["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-gvk"] == "apps/v1, Kind=StatefulSet"
        assert held["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-name"] == "nginx-statefulset"
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
        assert (
            len(await events_of(bus, types.QuotaReserved))
            + len([a for a in await events_of(bus, types.WorkloadAdmitted) if a.pod_set_assignments])
            == 1
        )  # not queued again while on hold

        await scale(api, "nginx-statefulset", 3)
        pods = await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        again = await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=20)
        assert (again[1].workload.name, again[1].workload.uid) == (name, uid)
        assert all(pod_integration.group_name(p) == name for p in pods)
        admitted = await workload_until(api, name, lambda w: condition(w, "PodsReady").get("status") == "True")
        assert condition(admitted, "QuotaReserved")["status"] == "True"
        assert condition(admitted, "PodsReady")["reason"] == "Started"
        assert admitted["metadata"]["uid"] == object_uid  # the same Workload object throughout
        assert admitted["metadata"]["ownerReferences"][0] == sts_ref
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")


async def test_statefulset_scaled_up_from_zero_to_another_size_reserves_for_its_new_pods(
    api: Any, bus: MemoryBus
) -> None:
    """Kueue (statefulset_reconciler.go, PR #15279): a StatefulSet scaled 3 -> 0 -> 2 has its held Workload
    resized to 2 pods before it is let go, so the reservation made again is for the 2 pods that run (200m),
    not the 3 it had (300m), and the Workload object counts 2."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)

        await scale(api, "nginx-statefulset", 0)
        await wait_for(bus, types.QuotaReleased, workload__name=name, timeout=10)
        await pods_until(api, lambda ps: not ps)
        await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("reason") == "OnHold")

        await scale(api, "nginx-statefulset", 2)
        await pods_until(api, lambda ps: len(ps) == 2 and all(started(p) for p in ps))
        admissions = await wait_for(bus, types.WorkloadAdmitted, workload__name=name, count=2, timeout=20)
        [assignment] = admissions[1].pod_set_assignments
        assert (assignment.count, assignment.resource_usage) == (2, {"cpu": 200})
        admitted = await workload_until(api, name, lambda w: condition(w, "PodsReady").get("status") == "True")
        assert [ps["count"] for ps in admitted["spec"]["podSets"]] == [2]
        [again] = admitted["status"]["admission"]["podSetAssignments"]
        assert (again["count"], again["resourceUsage"]) == (2, {"cpu": "200m"})


async def held_statefulset(api: Any, bus: MemoryBus) -> tuple[str, types.DispatchApplied]:
    """sample-statefulset admitted and started, then scaled to zero, its workload on hold, every service stopped:
    the workload's name and its first start."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        await scale(api, "nginx-statefulset", 0)
        await pods_until(api, lambda ps: not ps)
        await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("reason") == "OnHold")
    return name, applied


async def restarted_without_statefulsets(api: Any, bus: MemoryBus, watcher: Watcher) -> list[Any]:
    """``watcher`` watching every kind but StatefulSets (so pods are listed first), and the other services."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    return [
        *(watcher.watch(kind) for kind in WATCHED_KINDS if kind != "StatefulSet"),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        dispatcher.watch_pods(),
        dispatcher.ungate_forever(),
        SimulatedControllers(api, watch_options={"timeout_seconds": 5}).run(),
    ]


async def test_a_restarted_watcher_listing_pods_first_keeps_the_held_statefulset_workload(
    api: Any, bus: MemoryBus
) -> None:
    """A watcher restarted while a StatefulSet is scaled to zero that lists the pods (none left) before the
    StatefulSets keeps the held workload (the log says it is on hold; the StatefulSets are not known yet), and
    once the StatefulSets are listed it is still held; scaled up, the same workload is admitted again."""
    name, applied = await held_statefulset(api, bus)
    watcher = Watcher(bus=bus, api=api)
    await watcher.learn_from_log()
    async with running(*await restarted_without_statefulsets(api, bus, watcher)):
        async with asyncio.timeout(10):
            await watcher.synced["Pod"].wait()
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
        async with running(watcher.watch("StatefulSet")):
            async with asyncio.timeout(10):
                await watcher.synced["StatefulSet"].wait()
            assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
            assert watcher.publisher.workloads[("default", name)].on_hold

            await scale(api, "nginx-statefulset", 3)
            await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
            again = await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=20)
            assert (again[1].workload.name, again[1].workload.uid) == (name, applied.workload.uid)
    assert not await events_of(bus, types.ObjectDeleted, kind="Workload")


async def test_a_restarted_watcher_deletes_a_held_workload_whose_statefulset_went_meanwhile(
    api: Any, bus: MemoryBus
) -> None:
    """The StatefulSet of a held workload deleted while no watcher ran: a restarted watcher listing the pods first
    keeps the workload until the StatefulSets are listed, then deletes it (nothing holds it any more)."""
    name, _ = await held_statefulset(api, bus)
    await kube.delete_object(api, resources.STATEFUL_SETS, namespace="default", name="nginx-statefulset")
    watcher = Watcher(bus=bus, api=api)
    await watcher.learn_from_log()
    async with running(*await restarted_without_statefulsets(api, bus, watcher)):
        async with asyncio.timeout(10):
            await watcher.synced["Pod"].wait()
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
        async with running(watcher.watch("StatefulSet")):
            [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload", timeout=10)
            assert deleted.name == name


async def test_sample_leaderworkerset_is_one_group_per_replica(api: Any, bus: MemoryBus) -> None:
    """sample-leaderworkerset (2 replicas of size 3): two workloads leaderworkerset-nginx-leaderworkerset-<i>-<hash>
    with pod sets leader (1) and worker (2); all six pods started on the flavor; one group preempted: its pods
    are deleted and made again, and only that group is admitted and started again."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        lws = await apply(api, "serving-workloads/sample-leaderworkerset.yaml")
        worker_meta = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
        assert worker_meta["labels"] == {"kueue.x-k8s.io/queue-name": "user-queue"}
        assert worker_meta["annotations"][serving.SUSPENDED_BY_PARENT_ANNOTATION] == serving.LWS_FRAMEWORK
        assert worker_meta["annotations"][pod_integration.SERVING_ANNOTATION] == "true"
        uid = lws["metadata"]["uid"]
        pods = await pods_until(api, lambda ps: len(ps) == 6 and all(started(p) for p in ps))
        groups = {serving.lws_workload_name("nginx-leaderworkerset", uid, str(i)) for i in range(2)}
        assert {pod_integration.group_name(p) for p in pods} == groups
        applied = await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=10)
        assert {a.workload.name for a in applied} == groups
        for group in groups:
            wl = await workload(api, group)
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 2)]
            # leaderworkerset_reconciler.go podSets: the workers rank by their worker index, the leader by none
            assert [ps.get("topologyRequest") for ps in wl["spec"]["podSets"]] == [
                None,
                {"podIndexLabel": serving.LWS_WORKER_INDEX_LABEL},
            ]

        target = next(
            a.workload for a in applied if a.workload.name.startswith("leaderworkerset-nginx-leaderworkerset-0-")
        )
        before = {p["metadata"]["uid"] for p in pods}
        await commit(bus, eviction(target))
        await wait_for(bus, types.WorkloadStopped, workload__name=target.name, timeout=10)
        again = await wait_for(bus, types.DispatchApplied, action="StartJob", count=3, timeout=20)
        assert again[2].workload.name == target.name
        pods = await pods_until(
            api,
            lambda ps: (
                len(live(ps)) == 6
                and all(started(p) for p in live(ps))
                and sum(p["metadata"]["uid"] not in before for p in live(ps)) == 3
            ),
        )
        renewed = {pod_integration.group_name(p) for p in pods if p["metadata"]["uid"] not in before}
        assert renewed == {target.name}
        assert not any(SCHEDULING_GATE in str(p["spec"].get("schedulingGates")) for p in pods)


async def parent_events(api: Any, reason: str) -> list[dict[str, Any]]:
    """The Events of ``reason`` in ``default`` about anything but a Workload."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e for e in listed if e["reason"] == reason and e["involvedObject"]["kind"] != "Workload"]


async def events_until(api: Any, reason: str, count: int, *, timeout: float = 10) -> list[dict[str, Any]]:
    """Poll until ``count`` Events of ``reason`` (see :func:`parent_events`) are recorded."""
    async with asyncio.timeout(timeout):
        while len(found := await parent_events(api, reason)) < count:
            await asyncio.sleep(0.05)
    return found


async def test_a_statefulsets_created_workload_event_is_on_the_statefulset(api: Any, bus: MemoryBus) -> None:
    """Kueue's StatefulSet reconciler builds the group's Workload and records ``CreatedWorkload`` "Created Workload:
    NS/NAME" on the StatefulSet, from statefulset-kueue-controller (statefulset_reconciler.go
    createPrebuiltWorkload); the pod group reconciler only adopts it, so no pod gets one."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        [created] = await events_until(api, "CreatedWorkload", 1)
    involved = created["involvedObject"]
    assert (involved["apiVersion"], involved["kind"], involved["name"], involved["uid"]) == (
        "apps/v1",
        "StatefulSet",
        "nginx-statefulset",
        sts["metadata"]["uid"],
    )
    assert created["message"] == f"Created Workload: default/{name}"
    assert created["source"]["component"] == "statefulset-kueue-controller"


async def test_a_leaderworkerset_group_keeps_its_workload_when_its_pods_all_go(api: Any, bus: MemoryBus) -> None:
    """Kueue's LeaderWorkerSet reconciler makes each group's Workload the LeaderWorkerSet's (owner reference, the
    job-uid label, job-owner-gvk/-name and component-workload-index annotations; CreatedWorkload on the
    LeaderWorkerSet) and deletes only those past ``spec.replicas`` (leaderworkerset_reconciler.go
    constructWorkload, filterWorkloads). So when every pod of a group goes at once (a group restart) the garbage
    collector keeps the Workload: the same Workload object, still admitted, and the pods made again are started
    without a new admission. Scaled in to one group, the other group's Workload goes with its pods."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        lws = await apply(api, "serving-workloads/sample-leaderworkerset.yaml")
        uid = lws["metadata"]["uid"]
        groups = [serving.lws_workload_name("nginx-leaderworkerset", uid, str(i)) for i in range(2)]
        pods = await pods_until(api, lambda ps: len(ps) == 6 and all(started(p) for p in ps))
        await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=10)
        lws_ref = {
            "apiVersion": serving.LWS_API,
            "kind": "LeaderWorkerSet",
            "name": "nginx-leaderworkerset",
            "uid": uid,
        }
        for index, group in enumerate(groups):
            wl = await workload_until(api, group, lambda w: len(w["metadata"].get("ownerReferences", [])) == 4)
            assert wl["metadata"]["ownerReferences"][0] == lws_ref
            assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
            annotations = wl["metadata"]["annotations"]
            assert annotations["kueue.x-k8s.io/job-owner-gvk"] == "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
            assert annotations["kueue.x-k8s.io/job-owner-name"] == "nginx-leaderworkerset"
            assert annotations["kueue.x-k8s.io/component-workload-index"] == str(index)
        created = await events_until(api, "CreatedWorkload", 2)
        assert sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in created) == [
            ("LeaderWorkerSet", "nginx-leaderworkerset", f"Created Workload: default/{group}")
            for group in sorted(groups)
        ]
        assert {e["source"]["component"] for e in created} == {
            "leaderworkerset.x-k8s.io/leaderworkerset-kueue-controller"
        }
        object_uid = (await workload(api, groups[0]))["metadata"]["uid"]

        # every pod of group 0 deleted at once: the Workload stays, its pods are made again and started
        first = [p for p in pods if pod_integration.group_name(p) == groups[0]]
        await asyncio.gather(
            *(kube.delete_object(api, resources.PODS, namespace="default", name=p["metadata"]["name"]) for p in first)
        )
        before = {p["metadata"]["uid"] for p in first}
        await pods_until(
            api,
            lambda ps: (
                len(live(ps)) == 6
                and all(started(p) for p in live(ps))
                and all(p["metadata"]["uid"] not in before for p in live(ps))
            ),
        )
        kept = await workload(api, groups[0])
        assert kept["metadata"]["uid"] == object_uid
        assert kept["metadata"]["ownerReferences"][0] == lws_ref
        assert condition(kept, "Admitted")["status"] == "True"
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
        assert len([a for a in await events_of(bus, types.WorkloadAdmitted) if a.workload.name == groups[0]]) == 1

        # scaled in to one group: group 1's pods go, and its Workload with them
        await kube.patch_object(
            api, LWS_REF, namespace="default", name="nginx-leaderworkerset", patch={"spec": {"replicas": 1}}
        )
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload", timeout=20)
        assert deleted.name == groups[1]


async def test_a_held_statefulsets_going_pods_leave_its_pods_ready_wait_for_start(api: Any, bus: MemoryBus) -> None:
    """A StatefulSet's workload on hold is not admitted, so Kueue's PodsReady says WaitForStart whatever its going
    pods still report (jobframework reconciler.go generatePodsReadyCondition: "not admitted" comes first); the
    scale-up's pods are then Started, never Recovered. Here the pods are made by hand (no StatefulSet
    controller), so the one pod stays, ready, after the hold, and reports again once the hold is on the log."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*pod_services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        [doc] = examples.load("serving-workloads/sample-statefulset.yaml")
        doc["metadata"]["namespace"] = "default"
        doc["spec"]["replicas"] = 1
        sts = await kube.apply_manifest(api, doc)
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        pod = await kube.create_object(
            api, resources.PODS, namespace="default", body=controllers.statefulset_pod(sts, 0)
        )
        await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        await kube.patch_object(
            api, resources.PODS, namespace="default", name=pod["metadata"]["name"], patch={"status": ready},
            subresource="status",
        )  # fmt: skip
        await wait_for(bus, types.WorkloadPodsReady, ready=True, workload__name=name, timeout=10)

        await scale(api, "nginx-statefulset", 0)
        await wait_for(bus, types.QuotaReleased, reason="OnHold", workload__name=name, timeout=10)
        # the pod, still there and ready, changes after the hold; then a plain pod, whose workload on the log
        # says the watcher has read the first change
        await kube.patch_object(
            api, resources.PODS, namespace="default", name=pod["metadata"]["name"],
            patch={"metadata": {"annotations": {"touched": "after-the-hold"}}},
        )  # fmt: skip
        marker = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "marker", "namespace": "default", "labels": {workloads.QUEUE_LABEL: "user-queue"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1m"}}}]},
        }
        await kube.create_object(api, resources.PODS, namespace="default", body=marker)
        await wait_for(bus, types.WorkloadObserved, workload__owner__name="marker", timeout=10)
        reports = [(r.ready, r.reason) for r in await events_of(bus, types.WorkloadPodsReady, workload__name=name)]
    assert reports[-2:] == [(True, "Started"), (False, "WaitForStart")]  # the hold's, not Started again


async def test_a_leaderworkerset_seen_after_its_groups_makes_their_workloads_its_own(api: Any, bus: MemoryBus) -> None:
    """A watcher that sees a LeaderWorkerSet only after its groups' workloads were made from their pods (its kind
    served late: the watch retries) publishes the running groups' workloads again with the LeaderWorkerSet's
    marks, so their Workload objects become its (owner reference first), as Kueue's reconciler builds them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    others = [
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        dispatcher.watch_pods(),
        dispatcher.ungate_forever(),
        SimulatedControllers(api, watch_options={"timeout_seconds": 5}).run(),
    ]
    async with running(*(watcher.watch(kind) for kind in WATCHED_KINDS if kind != "LeaderWorkerSet"), *others):
        await set_up_queues(api)
        lws = await apply(api, "serving-workloads/sample-leaderworkerset.yaml")
        groups = [serving.lws_workload_name("nginx-leaderworkerset", lws["metadata"]["uid"], str(i)) for i in range(2)]
        await pods_until(api, lambda ps: len(ps) == 6 and all(started(p) for p in ps))
        unmarked = await workload_until(api, groups[0], lambda w: len(w["metadata"].get("ownerReferences", [])) == 3)
        assert {r["kind"] for r in unmarked["metadata"]["ownerReferences"]} == {"Pod"}
        async with running(watcher.watch("LeaderWorkerSet")):
            for group in groups:
                wl = await workload_until(api, group, lambda w: len(w["metadata"].get("ownerReferences", [])) == 4)
                assert wl["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
                assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == lws["metadata"]["uid"]
    assert len(await events_of(bus, types.WorkloadAdmitted)) == 2  # the same workloads, not admitted again


async def test_a_statefulset_keeps_its_workload_when_its_pods_all_go(api: Any, bus: MemoryBus) -> None:
    """Kueue's StatefulSet reconciler prebuilds the group's Workload owned by the StatefulSet
    (statefulset_reconciler.go createPrebuiltWorkload, constructWorkload), and the pod reconciler only finalizes
    the pods of a group it finds empty (pod_controller.go Load), so with every pod deleted at once (``kubectl
    delete pods -l app=nginx``) the garbage collector keeps the Workload: the same object, still admitted, its
    pods made again by the StatefulSet started on that admission. Its PodsReady, first ``Started``, goes
    ``WaitForRecovery`` while the pods are gone and ``Recovered`` once they are back (jobframework reconciler.go
    generatePodsReadyCondition: the Workload stays admitted). The StatefulSet deleted, the Workload goes."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        pods = await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        first = await workload_until(api, name, lambda w: condition(w, "PodsReady").get("status") == "True")
        assert condition(first, "PodsReady")["reason"] == "Started"
        [ready] = await wait_for(bus, types.WorkloadPodsReady, ready=True, workload__name=name, timeout=10)
        assert ready.reason == "Started"
        object_uid = first["metadata"]["uid"]

        # every pod deleted at once: the Workload stays, the pods made again are started on its admission
        before = {p["metadata"]["uid"] for p in pods}
        await asyncio.gather(
            *(kube.delete_object(api, resources.PODS, namespace="default", name=p["metadata"]["name"]) for p in pods)
        )
        await pods_until(
            api,
            lambda ps: (
                len(live(ps)) == 3
                and all(started(p) for p in live(ps))
                and all(p["metadata"]["uid"] not in before for p in live(ps))
            ),
        )
        kept = await workload_until(api, name, lambda w: condition(w, "PodsReady").get("reason") == "Recovered")
        assert kept["metadata"]["uid"] == object_uid
        assert kept["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
        assert condition(kept, "Admitted")["status"] == "True"
        assert condition(kept, "PodsReady")["status"] == "True"
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
        assert len(await events_of(bus, types.WorkloadAdmitted, workload__name=name)) == 1
        reports = [(r.ready, r.reason) for r in await events_of(bus, types.WorkloadPodsReady, workload__name=name)]
        # admitted with its first pod: WaitForStart until all three are ready, then Started; the pods gone and
        # back on the same admission: WaitForRecovery, then Recovered (not Started again)
        assert reports == [(False, "WaitForStart"), (True, "Started"), (False, "WaitForRecovery"), (True, "Recovered")]

        # the StatefulSet deleted: its pods go, and the Workload with them
        await kube.delete_object(api, resources.STATEFUL_SETS, namespace="default", name="nginx-statefulset")
        [deleted] = await wait_for(bus, types.ObjectDeleted, kind="Workload", timeout=20)
        assert deleted.name == name
        await pods_until(api, lambda ps: not ps)
    assert len(await events_of(bus, types.ObjectDeleted, kind="Workload")) == 1  # not made again from its pods
    observed = await events_of(bus, types.WorkloadObserved, workload__metadata__name=name)
    assert len({o.workload.metadata.uid for o in observed}) == 1


async def test_a_restarted_watcher_keeps_a_statefulsets_workload_whose_pods_went_meanwhile(
    api: Any, bus: MemoryBus
) -> None:
    """Every pod of an admitted StatefulSet deleted while no service ran: a restarted watcher that lists the pods
    (none of the group's) before the StatefulSets keeps the group's workload until they are listed, and then
    still (its StatefulSet wants the group); the pods made again are started on the same admission."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        pods = await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
    for pod in pods:
        await kube.delete_object(api, resources.PODS, namespace="default", name=pod["metadata"]["name"])
    watcher = Watcher(bus=bus, api=api)
    await watcher.learn_from_log()
    async with running(*await restarted_without_statefulsets(api, bus, watcher)):
        async with asyncio.timeout(10):
            await watcher.synced["Pod"].wait()
        assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
        async with running(watcher.watch("StatefulSet")):
            async with asyncio.timeout(10):
                await watcher.synced["StatefulSet"].wait()
            before = {p["metadata"]["uid"] for p in pods}
            await pods_until(
                api, lambda ps: len(ps) == 3 and all(started(p) and p["metadata"]["uid"] not in before for p in ps)
            )
            assert not await events_of(bus, types.ObjectDeleted, kind="Workload")
            assert watcher.publisher.workloads[("default", name)].metadata.uid == applied.workload.uid
    assert len(await events_of(bus, types.WorkloadAdmitted, workload__name=name)) == 1


async def test_a_statefulset_scaled_up_while_its_pods_still_run_is_let_go(api: Any, bus: MemoryBus) -> None:
    """Kueue's e2e "should allow to scale up after scale down to zero" (statefulset_test.go): scaled to zero and up
    again while the watcher still sees pods of the scale-down running, the StatefulSet's Workload is let go and
    admitted again (statefulset_reconciler.go reconcileWorkload clears OnHold once replicas > 0, whatever its pods).
    Before, the watcher let it go only when the group's pods were gone or made again, so the Workload stayed on hold
    and the new pods gated for good (3 times in 10 on a loaded demo). Here no controller deletes the pods."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    simulated = asyncio.create_task(SimulatedControllers(api, watch_options={"timeout_seconds": 5}).run())
    async with running(*pod_services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        await cancel_and_wait([simulated])  # no StatefulSet controller from now on
        await scale(api, "nginx-statefulset", 0)
        await wait_for(bus, types.QuotaReleased, workload__name=name, reason="OnHold", timeout=10)
        await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("reason") == "OnHold")
        assert len(await pods_until(api, lambda ps: len(ps) == 3)) == 3  # the pods still run
        # what the watcher sees when the StatefulSet controller's status comes before the pods' deletions: Kueue's
        # webhook lets the scale-up through once status.replicas is 0 ("scaling down is still in progress")
        await kube.patch_object(
            api,
            resources.STATEFUL_SETS,
            namespace="default",
            name="nginx-statefulset",
            patch={"status": {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0}},
            subresource="status",
        )
        await scale(api, "nginx-statefulset", 3)
        await wait_for(bus, types.WorkloadAdmitted, workload__name=name, count=2, timeout=20)
        again = await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("status") == "True")
        assert condition(again, "Admitted")["status"] == "True"


def rollout_pod(name: str, sts: dict[str, Any], revision: str, *, finalizer: bool = True) -> dict[str, Any]:
    """A pod of StatefulSet ``sts`` at ``revision`` with both Kueue gates, as Kueue's test makes it."""
    meta = sts["metadata"]
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"], "uid": meta["uid"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [{**owner, "controller": True}],
            "labels": {serving.REVISION_LABEL: revision},
            "annotations": {serving.SUSPENDED_BY_PARENT_ANNOTATION: "statefulset"},
            **({"finalizers": ["kueue.x-k8s.io/managed"]} if finalizer else {}),
        },
        "spec": {
            "schedulingGates": [{"name": g} for g in serving.ROLLOUT_UNGATED],
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }


async def test_a_rollout_ungates_the_current_revision_pod_and_keeps_the_update_revision_gated(
    api: Any, bus: MemoryBus
) -> None:
    """statefulset_controller_test.go "Should remove all Kueue scheduling gates from a current-revision Pod without
    removing its finalizer" and "Should keep Kueue scheduling gates on an update-revision Pod during a rollout"
    (Kueue util/statefulset ShouldUngatePod, statefulset_reconciler.go ungatePods): with the StatefulSet's
    status.currentRevision revision-1 and updateRevision revision-2, its pod at revision-1 loses both the
    admission and the topology gate, its finalizer kept, though the group's Workload is not admitted (no quota:
    Kueue's test runs no pod integration, which would start an admitted group's pods); its pod at revision-2 keeps
    both gates."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*pod_services(bus, api, dispatcher, consumer)):  # no simulated controllers: pods by hand
        await set_up_queues(api, cpu=0)
        sts = await kube.apply_manifest(
            api,
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": "test-sts",
                    "namespace": "default",
                    "labels": {workloads.QUEUE_LABEL: "user-queue"},
                },
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "test-sts"}},
                    "template": {
                        "metadata": {"labels": {"app": "test-sts"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                    },
                },
            },
        )
        await kube.patch_object(
            api,
            resources.STATEFUL_SETS,
            namespace="default",
            name="test-sts",
            patch={"status": {"replicas": 0, "currentRevision": "revision-1", "updateRevision": "revision-2"}},
            subresource="status",
        )
        await kube.apply_manifest(api, rollout_pod("test-sts-0", sts, "revision-2"))
        await kube.apply_manifest(api, rollout_pod("test-sts-1", sts, "revision-1"))
        listed = await pods_until(api, lambda ps: any(not p["spec"].get("schedulingGates") for p in ps))
        [current] = [p for p in listed if not p["spec"].get("schedulingGates")]
        assert current["metadata"]["name"] == "test-sts-1"
        assert current["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
        update = await kube.get_object(api, resources.PODS, namespace="default", name="test-sts-0")
        assert [g["name"] for g in update["spec"]["schedulingGates"]] == list(serving.ROLLOUT_UNGATED)
        assert not await events_of(bus, types.DispatchApplied, action="StartJob")


async def test_statefulsets_of_one_generate_name_get_distinct_workloads(api: Any, bus: MemoryBus) -> None:
    """statefulset_controller_test.go "Should create distinct workloads for StatefulSets with generateName": two
    StatefulSets created with generateName ``test-sts-`` get one Workload each, named after their server-assigned
    name and UID (statefulset GetWorkloadName), owned by their StatefulSet and in LocalQueue user-queue."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        made = []
        for _ in range(2):
            body = {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"generateName": "test-sts-", "labels": {workloads.QUEUE_LABEL: "user-queue"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "test-sts"}},
                    "template": {
                        "metadata": {"labels": {"app": "test-sts"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                    },
                },
            }
            made.append(await kube.create_object(api, resources.STATEFUL_SETS, namespace="default", body=body))
        names = [serving.statefulset_workload_name(s["metadata"]["name"], s["metadata"]["uid"]) for s in made]
        assert names[0] != names[1]
        for sts, name in zip(made, names, strict=True):
            meta = sts["metadata"]
            assert meta["name"].startswith("test-sts-")
            owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"], "uid": meta["uid"]}
            wl = await workload_until(api, name, lambda w, o=owner: o in w["metadata"].get("ownerReferences", []))
            assert wl["spec"]["queueName"] == "user-queue"


async def test_a_leaderworkersets_rollout_ungates_its_current_revision_pod(api: Any, bus: MemoryBus) -> None:
    """leaderworkerset_reconciler.go reconcilePod applies util/statefulset ShouldUngatePod to each pod of a
    LeaderWorkerSet with the StatefulSet that controls it: during that StatefulSet's rollout (currentRevision
    revision-1, updateRevision revision-2) its revision-1 pod loses Kueue's gates though the group's Workload is
    not admitted (no quota), its revision-2 pod keeps them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*pod_services(bus, api, dispatcher, consumer)):  # no simulated controllers: pods by hand
        await set_up_queues(api, cpu=0)
        template = {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        lws = await kube.apply_manifest(
            api,
            {
                "apiVersion": serving.LWS_API,
                "kind": "LeaderWorkerSet",
                "metadata": {"name": "lws", "namespace": "default", "labels": {workloads.QUEUE_LABEL: "user-queue"}},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template}},
            },
        )
        lws_owner = {"apiVersion": serving.LWS_API, "kind": "LeaderWorkerSet", "name": "lws"}
        sts = await kube.apply_manifest(
            api,
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": "lws",
                    "namespace": "default",
                    "ownerReferences": [{**lws_owner, "uid": lws["metadata"]["uid"], "controller": True}],
                },
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "lws"}},
                    "template": {
                        "metadata": {
                            "labels": {"app": "lws"},
                            "annotations": {serving.SUSPENDED_BY_PARENT_ANNOTATION: serving.LWS_FRAMEWORK},
                        },
                        **template,
                    },
                },
            },
        )
        await kube.patch_object(
            api,
            resources.STATEFUL_SETS,
            namespace="default",
            name="lws",
            patch={"status": {"replicas": 0, "currentRevision": "revision-1", "updateRevision": "revision-2"}},
            subresource="status",
        )
        for name, revision_hash, worker in (("lws-0", "revision-1", False), ("lws-0-1", "revision-2", True)):
            pod = rollout_pod(name, sts, revision_hash, finalizer=False)
            pod["metadata"]["labels"].update({serving.LWS_NAME_LABEL: "lws", serving.LWS_GROUP_INDEX_LABEL: "0"})
            pod["metadata"]["annotations"][serving.SUSPENDED_BY_PARENT_ANNOTATION] = serving.LWS_FRAMEWORK
            if worker:
                pod["metadata"]["annotations"][serving.LWS_LEADER_NAME_ANNOTATION] = "lws-0"
            await kube.apply_manifest(api, pod)
        listed = await pods_until(api, lambda ps: any(not p["spec"].get("schedulingGates") for p in ps))
        [current] = [p for p in listed if not p["spec"].get("schedulingGates")]
        assert current["metadata"]["name"] == "lws-0"
        assert pod_integration.group_name(current) == serving.lws_workload_name("lws", lws["metadata"]["uid"], "0")
        update = await kube.get_object(api, resources.PODS, namespace="default", name="lws-0-1")
        assert [g["name"] for g in update["spec"]["schedulingGates"]] == list(serving.ROLLOUT_UNGATED)
        assert not await events_of(bus, types.DispatchApplied, action="StartJob")


async def scale_subresource(api: Any, name: str, replicas: int) -> None:
    """``kubectl scale sts NAME --replicas=N``: the ``scale`` subresource, which no webhook of Kueue's sees (its
    StatefulSet webhook is registered for ``statefulsets``, not ``statefulsets/scale``)."""
    await kube.patch_object(
        api,
        resources.STATEFUL_SETS,
        namespace="default",
        name=name,
        patch={"spec": {"replicas": replicas}},
        subresource="scale",
    )


async def test_a_statefulset_scaled_past_its_workload_deletes_no_pod(api: Any, bus: MemoryBus) -> None:
    """A user's trial: sample-statefulset scaled with ``kubectl scale`` to 0, 2, then 4 (no webhook refuses a
    scale) had pod nginx-statefulset-2 deleted as excess ("Excess pod deleted") and made again by its controller
    hundreds of times. Kueue's StatefulSet pods name their Workload in ``kueue.x-k8s.io/prebuilt-workload-name``,
    so its job reconciler takes the prebuilt path (reconciler.go ensureOneWorkload) and never calls
    removeExcessPods (pod_controller.go: only from ConstructComposableWorkload and FindMatchingWorkloads): no pod
    is deleted, those beyond the Workload's 2 stay gated."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        name = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        await pods_until(api, lambda ps: len(ps) == 3 and all(started(p) for p in ps))
        await scale_subresource(api, "nginx-statefulset", 0)
        await pods_until(api, lambda ps: not ps)
        await workload_until(api, name, lambda w: condition(w, "QuotaReserved").get("reason") == "OnHold")
        await scale_subresource(api, "nginx-statefulset", 2)
        await pods_until(api, lambda ps: len(ps) == 2 and all(started(p) for p in ps))
        await workload_until(api, name, lambda w: condition(w, "PodsReady").get("status") == "True")
        await scale_subresource(api, "nginx-statefulset", 4)
        pods = await pods_until(api, lambda ps: len(live(ps)) == 3)
        first_uid = next(p["metadata"]["uid"] for p in pods if p["metadata"]["name"] == "nginx-statefulset-2")
        await asyncio.sleep(2)
        pods = {
            p["metadata"]["name"]: p for p in (await kube.list_objects(api, resources.PODS, namespace="default"))[0]
        }
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        wl = await workload(api, name)
    # nor is its metadata validated (validatePodGroupMetadata runs only while Kueue composes a group's Workload): pod 2
    # states the total count 4, its elders 2, and no Warning says so
    assert not [e for e in listed if e["reason"] in ("ExcessPodDeleted", "ErrWorkloadCompose")]
    # OrderedReady: pod 3 waits for pod 2, which stays gated, the same pod throughout
    assert sorted(pods) == [f"nginx-statefulset-{i}" for i in range(3)]
    assert pods["nginx-statefulset-2"]["metadata"]["uid"] == first_uid
    assert not pods["nginx-statefulset-2"]["metadata"].get("deletionTimestamp")
    assert pod_integration.is_gated(pods["nginx-statefulset-2"])
    assert all(started(pods[f"nginx-statefulset-{i}"]) for i in range(2))
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2]


async def test_serving_groups_never_wait_for_replacement_pods(api: Any, bus: MemoryBus) -> None:
    """A user's trial stopped and resumed a StatefulSet's and a LeaderWorkerSet's Workloads: both got
    ``WaitingForReplacementPods`` False ``PodsReady`` "No pods need replacement". Kueue counts a group's absent
    pods in FindMatchingWorkloads only, which the pods of these groups never reach (they name their Workload as
    prebuilt: reconciler.go ensureOneWorkload), so waitingForReplacementPodsCondition never sets it on them
    (pod_controller.go). Here each is evicted, its pods deleted and made again, and admitted and started again."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    seen: list[tuple[str, str, str]] = []

    async def watch_conditions() -> None:
        while True:
            listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            for wl in listed:
                for c in wl.get("status", {}).get("conditions", []):
                    if c["type"] == "WaitingForReplacementPods":
                        seen.append((wl["metadata"]["name"], c["status"], c["reason"]))
            await asyncio.sleep(0.05)

    async with running(*services(bus, api, dispatcher, consumer), watch_conditions()):
        await set_up_queues(api)
        sts = await apply(api, "serving-workloads/sample-statefulset.yaml")
        lws = await apply(api, "serving-workloads/sample-leaderworkerset.yaml")
        sts_group = serving.statefulset_workload_name("nginx-statefulset", sts["metadata"]["uid"])
        lws_group = serving.lws_workload_name("nginx-leaderworkerset", lws["metadata"]["uid"], "0")
        pods = await pods_until(api, lambda ps: len(ps) == 9 and all(started(p) for p in ps))
        applied = await wait_for(bus, types.DispatchApplied, action="StartJob", count=3, timeout=10)
        before = {p["metadata"]["uid"] for p in pods}
        for group in (sts_group, lws_group):
            [ref] = [a.workload for a in applied if a.workload.name == group]
            await commit(bus, eviction(ref))
            await wait_for(bus, types.WorkloadStopped, workload__name=group, timeout=10)
        await wait_for(bus, types.DispatchApplied, action="StartJob", count=5, timeout=20)
        await pods_until(
            api,
            lambda ps: (
                len(live(ps)) == 9
                and all(started(p) for p in live(ps))
                and sum(p["metadata"]["uid"] not in before for p in live(ps)) == 6
            ),
        )
        for group in (sts_group, lws_group):
            await workload_until(api, group, lambda w: condition(w, "PodsReady").get("status") == "True")
        await asyncio.sleep(1)
    assert seen == []


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


class _StoppedEventsHeld:
    """The dispatcher's API for its Events, a ``Stopped`` Event (a pod's delete is written) held until the
    dispatcher's fold has no evicted workload left: a loaded machine's order, made sure."""

    def __init__(self, api: Any, dispatcher: Any) -> None:
        self.api, self.dispatcher = api, dispatcher

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    async def create_object(self, ref: Any, *, namespace: str | None, body: dict[str, Any]) -> Any:
        if body.get("reason") == "Stopped":
            workloads_now = lambda: self.dispatcher.state.workloads.values()  # noqa: E731
            with contextlib.suppress(AssertionError):
                await wait_until(lambda: all(wl.eviction is None for wl in workloads_now()), timeout=10)
        return await self.api.create_object(ref, namespace=namespace, body=body)


async def test_a_preempted_deployment_pods_workload_gets_its_preemption_events(api: Any, bus: MemoryBus) -> None:
    """A Deployment's pods of priority class ``low`` (10) preempted by a Pod of ``high`` (1000) in a ClusterQueue
    preempting ``withinClusterQueue: LowerPriority``. Kueue's scheduler records ``Preempted`` and
    ``EvictedDueToPreempted`` on the victim's Workload and ``PreemptedWorkload`` on the preemptor's, both
    priorities read from the workloads as it decided (preemption.go IssuePreemptions, priorityInfo), before the
    job reconciler deletes the pod (whose Workload the garbage collector then takes). Found by a user's trial:
    the Events were made after the pod's delete, from a fold that had lost the victim: none on the victim, and
    "preemptee effective priority: 0 (base: 0, boost: 0)". The job Events are held here until the fold has lost
    the victim, as a loaded machine does."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    preemptor = DeciderLoop(bus=bus, decider=deciders.PREEMPTOR, wakeup=0.05)
    dispatcher.recording.api = _StoppedEventsHeld(dispatcher.recording.api, dispatcher)
    async with running(*services(bus, api, dispatcher, consumer), preemptor.run()):
        await kube.apply_manifest(api, _priority_class("low", 10))
        await kube.apply_manifest(api, _priority_class("high", 1000))
        await kube.apply_manifest(api, flavor("spot", node_labels=SPOT_SELECTOR, tolerations=[SPOT_TOLERATION]))
        queue = cluster_queue("cluster-queue", flavor_name="spot", cpu=2)
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await kube.apply_manifest(api, queue)
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        [doc] = examples.load("serving-workloads/sample-deployment.yaml")
        doc["metadata"] = {**doc["metadata"], "namespace": "default"}
        doc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
        doc["spec"]["replicas"] = 2
        doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
        await kube.apply_manifest(api, doc)
        await pods_until(api, lambda ps: len(ps) == 2 and all(started(p) for p in ps))
        await kube.apply_manifest(
            api,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "urgent",
                    "namespace": "default",
                    "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "high"},
                },
                "spec": {
                    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                    "restartPolicy": "Never",
                },
            },
        )
        [evicted] = await wait_for(bus, types.EvictionRequested, timeout=20)
        victim = evicted.workload
        await wait_until(lambda: victim.key not in dispatcher.state.workloads, timeout=20, what="the victim gone")
        async with asyncio.timeout(20):
            while True:
                listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
                reasons = {(e["involvedObject"]["name"], e["reason"]): e for e in listed}
                if any(reason == "PreemptedWorkload" for _, reason in reasons):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(1)
            listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    by_reason = {(e["involvedObject"]["name"], e["reason"]): e for e in listed}
    priorities = "preemptor effective priority: 1000 (base: 1000, boost: 0); preemptee effective priority: 10 (base: 10, boost: 0)"
    [preempted_workload] = [e for (_, reason), e in by_reason.items() if reason == "PreemptedWorkload"]
    assert preempted_workload["message"].endswith(priorities), preempted_workload["message"]
    assert (victim.name, "EvictedDueToPreempted") in by_reason, sorted(by_reason)
    assert by_reason[(victim.name, "Preempted")]["message"].endswith(priorities)
