"""The steps of Kueue's test/e2e/singlecluster/extended/leaderworkerset_test.go (Describe "LeaderWorkerSet
integration") that run on the emulated cluster, run by tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo
--keep`` once the LeaderWorkerSet CRD is installed (the simulated controllers then run LeaderWorkerSets: a leader
StatefulSet and a worker StatefulSet per group). Each case is a step with its own namespace, flavor
``lws-rf-NS``, ClusterQueue ``lws-cq-NS`` of 5 CPU preempting lower priorities, LocalQueue ``lws-lq-NS``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kueue_es.services.kube import client as kube
from kueue_es.services.runtime import cancel_and_wait
from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    ADMISSION_GATE,
    E2E,
    IMAGE,
    JOB_UID_LABEL,
    KINDS,
    QUEUE_LABEL,
    Step,
    condition,
    container,
    is_true,
)
from tests.e2e.kueue_e2e_serving import prefixed_queues

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


async def _queues(e2e: E2E, ns: str) -> str:
    """The Describe's BeforeEach (the serving files' own). Returns the LocalQueue's name."""
    return await prefixed_queues(e2e, ns, "lws")


def lws(name: str, ns: str, *, queue: str, size: int, replicas: int) -> dict[str, Any]:
    """leaderworkersettesting.MakeLeaderWorkerSet(name, ns).Size(size).Replicas(replicas).RequestAndLimit(cpu,
    200m).TerminationGracePeriod(1).Queue(queue): a worker template only (no leader template), LeaderCreated."""
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container({"cpu": "200m"})]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "replicas": replicas,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {"size": size, "workerTemplate": template},
        },
    }


async def _ready(e2e: E2E, ns: str, count: int) -> dict[str, Any]:
    """ "Waiting for replicas to be ready": ReadyReplicas ``count``, Available True ``AllGroupsReady``."""

    def ready(o: dict[str, Any]) -> bool:
        available = condition(o, "Available")
        return (o.get("status") or {}).get("readyReplicas") == count and (
            available.get("status"),
            available.get("reason"),
        ) == ("True", "AllGroupsReady")

    return await e2e.wait("leaderworkerset", "lws", ns, ready, what=f"{count} groups ready")


async def _group_workload(e2e: E2E, ns: str, lws_uid: str, index: str) -> dict[str, Any]:
    """util.WorkloadKeyForLeaderWorkerSet(lws, index): the group's Workload ``leaderworkerset-lws-INDEX-<hash>``."""

    async def read() -> dict[str, Any] | None:
        for wl in await e2e.list("workloads", ns, f"{JOB_UID_LABEL}={lws_uid}"):
            if wl["metadata"]["name"].startswith(f"leaderworkerset-lws-{index}-"):
                return wl
        return None

    return dict(await eventually(read, what=f"the Workload of group {index}"))


async def _deleted(e2e: E2E, ns: str, workloads: list[dict[str, Any]]) -> None:
    """Delete the LeaderWorkerSet; its pods and its groups' Workloads go."""
    await e2e.kubectl.ok("delete", "leaderworkerset", "lws", "-n", ns)

    async def no_pods() -> bool:
        return not await e2e.list("pods", ns, f"{LWS_NAME_LABEL}=lws")

    await eventually(no_pods, what="the pods deleted")
    for wl in workloads:
        await e2e.wait_gone("workload", wl["metadata"]["name"], ns)


async def _admits(e2e: E2E, ns: str, *, size: int, replicas: int) -> None:
    lq = await _queues(e2e, ns)
    await e2e.create(lws("lws", ns, queue=lq, size=size, replicas=replicas))
    created = await _ready(e2e, ns, replicas)
    uid = created["metadata"]["uid"]
    workloads = [await _group_workload(e2e, ns, uid, str(i)) for i in range(replicas)]
    for wl in workloads:
        assert wl["metadata"]["labels"][JOB_UID_LABEL] == uid
    await _deleted(e2e, ns, workloads)


async def admits_leader_only(e2e: E2E) -> None:
    """leaderworkerset_test.go, Describe "LeaderWorkerSet integration", When "LeaderWorkerSet created", It "should
    admit group with leader only"."""
    await _admits(e2e, "lws-e2e-leader", size=1, replicas=1)


async def admits_leader_and_workers(e2e: E2E) -> None:
    """leaderworkerset_test.go, Describe "LeaderWorkerSet integration", When "LeaderWorkerSet created", It "should
    admit group with leader and workers"."""
    await _admits(e2e, "lws-e2e-workers", size=3, replicas=1)


async def admits_multiple_groups(e2e: E2E) -> None:
    """leaderworkerset_test.go, Describe "LeaderWorkerSet integration", When "LeaderWorkerSet created", It "should
    admit group with multiple leaders and workers that fits"."""
    await _admits(e2e, "lws-e2e-groups", size=3, replicas=2)


async def deactivated_workload_kept(e2e: E2E) -> None:
    """leaderworkerset_test.go, Describe "LeaderWorkerSet integration", When "Workload deactivated", It "shouldn't
    delete deactivated Workload"."""
    ns = "lws-e2e-deactivate"
    lq = await _queues(e2e, ns)
    await e2e.create(lws("lws", ns, queue=lq, size=3, replicas=1))
    created = await _ready(e2e, ns, 1)
    workload = await _group_workload(e2e, ns, created["metadata"]["uid"], "0")
    name, uid = workload["metadata"]["name"], workload["metadata"]["uid"]
    patch = ["patch", "workload", name, "-n", ns, "--type=merge", "-p"]
    await e2e.kubectl.ok(*patch, json.dumps({"spec": {"active": False}}))

    def not_ready(o: dict[str, Any]) -> bool:
        available = condition(o, "Available")
        return (o.get("status") or {}).get("readyReplicas") == 0 and (
            available.get("status"),
            available.get("reason"),
        ) == ("False", "AllGroupsReady")

    await e2e.wait("leaderworkerset", "lws", ns, not_ready, what="the group not ready")

    async def gated() -> bool:
        pods = await e2e.list("pods", ns, f"{LWS_NAME_LABEL}=lws")
        return len(pods) == 3 and all(
            any(g.get("name") == ADMISSION_GATE for g in p["spec"].get("schedulingGates") or []) for p in pods
        )

    await eventually(gated, what="the group's 3 pods made again, gated")
    deactivated = await e2e.must_get("workload", name, ns)
    assert (deactivated["metadata"]["uid"], deactivated["spec"].get("active")) == (uid, False)
    await e2e.kubectl.ok(*patch, json.dumps({"spec": {"active": True}}))
    await _ready(e2e, ns, 1)
    await e2e.wait(
        "workload",
        name,
        ns,
        lambda w: w["metadata"]["uid"] == uid and is_true(w, "Admitted"),
        what="the same Workload admitted again",
    )
    await _deleted(e2e, ns, [workload])


#: util.GetAgnHostImageOld(): the image the rollout cases start from (GetAgnHostImage, :data:`IMAGE`, is the new one).
IMAGE_OLD = "registry.k8s.io/e2e-test-images/agnhost:2.52"


def _images(pods: list[dict[str, Any]]) -> set[str]:
    return {c["image"] for p in pods for c in p["spec"]["containers"]}


async def updates_pod_template(e2e: E2E) -> None:
    """leaderworkerset_test.go, Describe "LeaderWorkerSet integration", It "should allow to update the PodTemplate in
    LeaderWorkerSet": two groups of a leader (150m) and a worker (200m) on the old image, both templates moved to the
    new one; LWS replaces the groups one by one (maxUnavailable 1), Kueue gates and admits the new pods, and both
    groups are ready again on the new image with their Workloads; deleting the LeaderWorkerSet takes pods and
    Workloads."""
    ns = "lws-e2e-update"
    lq = await _queues(e2e, ns)
    obj = lws("lws", ns, queue=lq, size=2, replicas=2)
    template = obj["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["spec"]["containers"][0]["image"] = IMAGE_OLD
    template["leaderTemplate"] = {
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "nodeSelector": {},
            "containers": [{"name": "c", "image": IMAGE_OLD, "resources": {"requests": {"cpu": "150m"}}}],
        }
    }
    await e2e.create(obj)
    await _ready(e2e, ns, 2)
    patch = {
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": {"spec": {"containers": [{"name": "c", "image": IMAGE}]}},
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": IMAGE}]}},
            }
        }
    }
    # a merge patch of CRD objects replaces a list whole: keep the other container fields
    current = await e2e.must_get("leaderworkerset", "lws", ns)
    for role in ("leaderTemplate", "workerTemplate"):
        containers = current["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"]
        patch["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"] = [{**containers[0], "image": IMAGE}]
    await e2e.kubectl.ok("patch", "leaderworkerset", "lws", "-n", ns, "--type=merge", "-p", json.dumps(patch))

    async def replaced() -> bool:
        pods = await e2e.list("pods", ns, f"{LWS_NAME_LABEL}=lws")
        return len(pods) == 4 and _images(pods) == {IMAGE}

    await eventually(replaced, what="the 4 pods made again from the new templates")
    created = await _ready(e2e, ns, 2)
    uid = created["metadata"]["uid"]
    workloads = [await _group_workload(e2e, ns, uid, str(i)) for i in range(2)]
    await _deleted(e2e, ns, workloads)


async def rolling_update_with_max_surge(e2e: E2E) -> None:
    """leaderworkerset_test.go, Describe "LeaderWorkerSet integration", It "Rolling update with maxSurge creates
    workloads for surge pods and completes successfully": 4 groups of 1 (200m), maxSurge 2 and maxUnavailable 2, the
    image changed: the Workloads of surge groups 4 and 5 appear, the rollout completes (updatedReplicas 4,
    readyReplicas 4, Available, every pod Running) and the surge groups' Workloads go."""
    ns = "lws-e2e-surge"
    lq = await _queues(e2e, ns)
    obj = lws("lws", ns, queue=lq, size=1, replicas=4)
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = IMAGE_OLD
    obj["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": 2},
    }
    await e2e.create(obj)
    created = await _ready(e2e, ns, 4)
    uid = created["metadata"]["uid"]
    for i in range(4):
        await _group_workload(e2e, ns, uid, str(i))
    containers = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    patch = {
        "spec": {
            "leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [{**containers[0], "image": IMAGE}]}}}
        }
    }
    surge = {"4", "5"}
    seen: dict[str, str] = {}

    async def watch() -> None:
        # a watch, not Kueue's 10 ms polls: the simulated pods start at once, so a surge group lives well under a
        # second here
        selector = f"{JOB_UID_LABEL}={uid}"
        async for item in kube.watch_objects(e2e.api, KINDS["workloads"], namespace=ns, label_selector=selector):
            found = item.objects if isinstance(item, kube.Resynced) else [item.object]
            for wl in found:
                for index in surge:
                    if wl["metadata"]["name"].startswith(f"leaderworkerset-lws-{index}-"):
                        seen[index] = wl["metadata"]["name"]

    watching = asyncio.create_task(watch())
    try:
        await asyncio.sleep(0.5)  # the watch's first list done
        await e2e.kubectl.ok("patch", "leaderworkerset", "lws", "-n", ns, "--type=merge", "-p", json.dumps(patch))

        async def surge_seen() -> bool:
            return set(seen) == surge

        await eventually(surge_seen, what="the Workloads of surge groups 4 and 5")
    finally:
        await cancel_and_wait([watching])

    def complete(o: dict[str, Any]) -> bool:
        status = o.get("status") or {}
        available = condition(o, "Available")
        return (
            status.get("updatedReplicas") == 4
            and status.get("readyReplicas") == 4
            and (available.get("status"), available.get("reason")) == ("True", "AllGroupsReady")
        )

    await e2e.wait("leaderworkerset", "lws", ns, complete, what="the rollout complete")

    async def running() -> bool:
        pods = await e2e.list("pods", ns, f"{LWS_NAME_LABEL}=lws")
        return bool(pods) and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    await eventually(running, what="every pod Running")
    for name in seen.values():
        await e2e.wait_gone("workload", name, ns)
    await e2e.kubectl.ok("delete", "leaderworkerset", "lws", "-n", ns)


STEPS: list[Step] = [
    admits_leader_only,
    admits_leader_and_workers,
    admits_multiple_groups,
    deactivated_workload_kept,
    updates_pod_template,
    rolling_update_with_max_surge,
]
