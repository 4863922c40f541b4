"""The steps of Kueue's test/e2e/singlecluster/baseline/statefulset_test.go (Describe "StatefulSet integration") and
deployment_test.go (Describe "Deployment"), run by tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep``.

Each of Kueue's cases is a step with its own namespace, flavor, and ClusterQueue of 5 CPU
preempting lower priorities (both files' BeforeEach), LocalQueue ``sts-lq-NS`` or ``deployment-lq-NS``. Kueue's
"Consistently ... ReadyReplicas is 0" is checked once the Workload says why it waits (its QuotaReserved condition
False), the moment Kueue's decision is known.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    IMAGE,
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    condition,
    flavor,
    is_true,
    local_queue,
    namespace,
    priority_class,
    serving,
)
from tests.e2e.waiting import eventually as eventually_read

OLD_IMAGE = "registry.k8s.io/e2e-test-images/agnhost:2.52"  # util.GetAgnHostImageOld


async def prefixed_queues(e2e: E2E, ns: str, prefix: str) -> str:
    """The BeforeEach of the serving and LeaderWorkerSet files: flavor ``PREFIX-rf-NS`` (instance-type: on-demand), ClusterQueue
    ``PREFIX-cq-NS`` of 5 CPU preempting lower priorities, LocalQueue ``PREFIX-lq-NS``. Returns the LocalQueue."""
    rf, cq, lq = f"{prefix}-rf-{ns}", f"{prefix}-cq-{ns}", f"{prefix}-lq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(rf, node_labels={"instance-type": "on-demand"}),
        cluster_queue(cq, {rf: {"cpu": "5"}}, preemption="LowerPriority"),
        local_queue(lq, ns, cq),
    )
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {lq} active")
    return lq


async def _ready(e2e: E2E, kind: str, name: str, ns: str, count: int) -> dict[str, Any]:
    """Status.ReadyReplicas reaches ``count``."""
    return await e2e.wait(
        kind,
        name,
        ns,
        lambda o: (o.get("status") or {}).get("readyReplicas", 0) == count,
        what=f"{kind} {ns}/{name} with {count} ready replicas",
    )


async def _scale(e2e: E2E, kind: str, name: str, ns: str, replicas: int) -> None:
    await e2e.kubectl.ok("scale", kind, name, "-n", ns, f"--replicas={replicas}")


async def _workload(e2e: E2E, name: str, ns: str) -> dict[str, Any]:
    """The StatefulSet's Workload (statefulset.GetWorkloadName: found by its job-uid label)."""
    return await e2e.wait_workload_of("statefulset", name, ns)


async def _workload_is(e2e: E2E, workload: dict[str, Any], check: Any, what: str) -> dict[str, Any]:
    return await e2e.wait("workload", workload["metadata"]["name"], workload["metadata"]["namespace"], check, what=what)


def _on_hold(w: dict[str, Any]) -> bool:
    """HaveConditionStatusFalseAndReason(QuotaReserved, OnHold)."""
    reserved = condition(w, "QuotaReserved")
    return reserved.get("status") == "False" and reserved.get("reason") == "OnHold"


async def sts_admits_group_that_fits(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should admit group
    that fits"."""
    ns = "sts-e2e-fits"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=3))
    await _ready(e2e, "statefulset", "sts", ns, 3)
    sts = await e2e.must_get("statefulset", "sts", ns)
    workload = await _workload(e2e, "sts", ns)
    assert workload["metadata"]["labels"][JOB_UID_LABEL] == sts["metadata"]["uid"]
    await e2e.create(serving("StatefulSet", "sts-conflict", ns, queue=lq, replicas=1))
    await _ready(e2e, "statefulset", "sts-conflict", ns, 1)
    conflicting = await _workload(e2e, "sts-conflict", ns)
    assert conflicting["metadata"]["name"] != workload["metadata"]["name"]  # no workload name conflict
    for name, wl in (("sts-conflict", conflicting), ("sts", workload)):
        await e2e.kubectl.ok("delete", "statefulset", name, "-n", ns)
        await e2e.wait_gone("pod", f"{name}-0", ns)
        await e2e.wait_gone("workload", wl["metadata"]["name"], ns)


async def sts_pod_template_update(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should allow to update
    the PodTemplate in StatefulSet"."""
    ns = "sts-e2e-update"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=3, image=OLD_IMAGE))
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await e2e.kubectl.ok("set", "image", "statefulset/sts", f"c={IMAGE}", "-n", ns)

    async def replaced() -> bool:
        pods = await e2e.list("pods", ns, "app=sts-pod")
        return len(pods) == 3 and all(p["spec"]["containers"][0]["image"] == IMAGE for p in pods)

    await eventually(replaced, what="the pods replaced with the new template")
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def sts_scale_down_to_zero(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should delete all pods
    on scale down to zero"."""
    ns = "sts-e2e-down"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=3))
    await _ready(e2e, "statefulset", "sts", ns, 3)
    workload = await _workload(e2e, "sts", ns)
    await _scale(e2e, "statefulset", "sts", ns, 0)
    await _ready(e2e, "statefulset", "sts", ns, 0)
    await _workload_is(e2e, workload, _on_hold, "the Workload on hold, its quota released")
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def sts_scale_up_from_zero(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should create pods after
    scale up from zero"."""
    ns = "sts-e2e-up"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=0))
    await _scale(e2e, "statefulset", "sts", ns, 3)
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await _workload(e2e, "sts", ns)
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def sts_scale_up_after_down_to_zero(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should allow to scale up
    after scale down to zero"."""
    ns = "sts-e2e-down-up"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=3))
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await _workload(e2e, "sts", ns)
    await _scale(e2e, "statefulset", "sts", ns, 0)
    await e2e.wait(
        "statefulset", "sts", ns, lambda o: (o.get("status") or {}).get("readyReplicas", 0) < 3, what="ready < 3"
    )
    await _scale(e2e, "statefulset", "sts", ns, 3)
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def sts_queue_name_change_when_not_ready(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should allow to change
    queue name if ReadyReplicas=0"."""
    ns = "sts-e2e-queue"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=f"{lq}-invalid", replicas=3))
    waiting = await _workload(e2e, "sts", ns)
    await _workload_is(
        e2e, waiting, lambda w: condition(w, "QuotaReserved").get("status") == "False", "the Workload waiting"
    )
    assert (await e2e.must_get("statefulset", "sts", ns)).get("status", {}).get("readyReplicas", 0) == 0
    await e2e.kubectl.ok("label", "statefulset", "sts", "-n", ns, f"{QUEUE_LABEL}={lq}", "--overwrite")
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await _workload(e2e, "sts", ns)
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def sts_queue_name_change_after_scale_up_from_zero(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should allow to change
    queue name after scale up from zero (two-phase pattern)"."""
    ns = "sts-e2e-two-phase"
    lq = await prefixed_queues(e2e, ns, "sts")
    invalid = f"{lq}-nonexistent"
    await e2e.create(serving("StatefulSet", "sts", ns, queue=invalid, replicas=0))
    await _scale(e2e, "statefulset", "sts", ns, 1)

    async def gated_pod() -> list[dict[str, Any]] | None:
        pods = await e2e.list("pods", ns)
        return pods if len(pods) == 1 and pods[0]["metadata"]["labels"].get(QUEUE_LABEL) == invalid else None

    await eventually(gated_pod, what="the pod created, scheduling-gated with the invalid queue")
    waiting = await _workload(e2e, "sts", ns)
    await _workload_is(
        e2e, waiting, lambda w: condition(w, "QuotaReserved").get("status") == "False", "the Workload waiting"
    )
    assert (await e2e.must_get("statefulset", "sts", ns)).get("status", {}).get("readyReplicas", 0) == 0
    await e2e.kubectl.ok("label", "statefulset", "sts", "-n", ns, f"{QUEUE_LABEL}={lq}", "--overwrite")

    async def relabelled() -> bool:
        pods = await e2e.list("pods", ns)
        return bool(pods) and all(p["metadata"]["labels"].get(QUEUE_LABEL) == lq for p in pods)

    await eventually(relabelled, what="the pod's queue label updated")
    workload = await _workload(e2e, "sts", ns)
    await _workload_is(e2e, workload, lambda w: w["spec"].get("queueName") == lq, "the Workload's queue updated")
    await _ready(e2e, "statefulset", "sts", ns, 1)
    await _workload_is(e2e, workload, lambda w: is_true(w, "Admitted"), "the Workload admitted")
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def sts_deleted_when_partially_ready(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created", It "should delete all Pods
    if StatefulSet was deleted after being partially ready"."""
    ns = "sts-e2e-partial"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=3))
    workload = await _workload(e2e, "sts", ns)
    await _workload_is(e2e, workload, lambda w: is_true(w, "Admitted"), "the Workload admitted")
    await e2e.wait(
        "statefulset", "sts", ns, lambda o: (o.get("status") or {}).get("readyReplicas", 0) > 0, what="partly ready"
    )
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns, "--wait=false")

    async def no_pods() -> bool:
        return not await e2e.list("pods", ns)

    await eventually(no_pods, what="every pod deleted")


async def sts_preempts_low_priority(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet created with WorkloadPriorityClass",
    It "should preempt low-priority StatefulSet"."""
    ns = "sts-e2e-preempt"
    lq = await prefixed_queues(e2e, ns, "sts")
    high, low = f"high-priority-{ns}", f"low-priority-{ns}"
    await e2e.apply(priority_class(high, 5000), priority_class(low, 1000))
    low_sts = serving("StatefulSet", "low-priority", ns, queue=lq, replicas=3, cpu="1")
    low_sts["metadata"]["labels"][PRIORITY_CLASS_LABEL] = low
    await e2e.create(low_sts)
    await _ready(e2e, "statefulset", "low-priority", ns, 3)
    low_wl = await _workload(e2e, "low-priority", ns)
    assert (low_wl["spec"]["priorityClassRef"]["name"], low_wl["spec"]["priority"]) == (low, 1000)
    await _workload_is(e2e, low_wl, lambda w: is_true(w, "Admitted"), "the low-priority Workload admitted")
    high_sts = serving("StatefulSet", "high-priority", ns, queue=lq, replicas=3, cpu="1")
    high_sts["metadata"]["labels"][PRIORITY_CLASS_LABEL] = high
    await e2e.create(high_sts)
    await _ready(e2e, "statefulset", "high-priority", ns, 3)
    await _ready(e2e, "statefulset", "low-priority", ns, 0)  # the low-priority StatefulSet preempted
    high_wl = await _workload(e2e, "high-priority", ns)
    assert (high_wl["spec"]["priorityClassRef"]["name"], high_wl["spec"]["priority"]) == (high, 5000)
    await _workload_is(e2e, high_wl, lambda w: is_true(w, "Admitted"), "the high-priority Workload admitted")
    await _workload_is(
        e2e,
        low_wl,
        lambda w: condition(w, "Admitted").get("status") == "False" and is_true(w, "Preempted"),
        "the low-priority Workload preempted",
    )
    await e2e.kubectl.ok("delete", "statefulsets", "--all", "-n", ns)


async def sts_deactivated_workload_kept(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "Workload deactivated", It "shouldn't delete
    deactivated Workload"."""
    ns = "sts-e2e-deactivate"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=3))
    workload = await _workload(e2e, "sts", ns)
    workload = await _workload_is(e2e, workload, lambda w: is_true(w, "Admitted"), "the Workload admitted")
    uid, name = workload["metadata"]["uid"], workload["metadata"]["name"]
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await e2e.kubectl.ok(
        "patch", "workload", name, "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"active": False}})
    )
    await _workload_is(
        e2e,
        workload,
        lambda w: w["metadata"]["uid"] == uid and w["spec"].get("active") is False and is_true(w, "Evicted"),
        "the Workload deactivated",
    )
    await _ready(e2e, "statefulset", "sts", ns, 0)
    await e2e.kubectl.ok(
        "patch", "workload", name, "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"active": True}})
    )
    await _workload_is(
        e2e, workload, lambda w: w["metadata"]["uid"] == uid and is_true(w, "Admitted"), "the Workload re-admitted"
    )
    await _ready(e2e, "statefulset", "sts", ns, 3)
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns, "--wait=false")

    async def no_pods() -> bool:
        return not await e2e.list("pods", ns)

    await eventually(no_pods, what="every pod deleted")
    await e2e.wait_gone("workload", name, ns)


async def sts_on_hold_at_zero_cleared_on_scale_up(e2e: E2E) -> None:
    """statefulset_test.go, Describe "StatefulSet integration", When "StatefulSet scaling to zero with quota release",
    It "should set the workload OnHold on scale-to-zero and clear it on scale-up"."""
    ns = "sts-e2e-on-hold"
    lq = await prefixed_queues(e2e, ns, "sts")
    await e2e.create(serving("StatefulSet", "sts", ns, queue=lq, replicas=2))
    await _ready(e2e, "statefulset", "sts", ns, 2)
    workload = await _workload(e2e, "sts", ns)
    await _workload_is(e2e, workload, lambda w: is_true(w, "Admitted"), "the Workload admitted")
    await _scale(e2e, "statefulset", "sts", ns, 0)
    await _workload_is(e2e, workload, _on_hold, "the Workload on hold, its quota released")
    await e2e.wait("statefulset", "sts", ns, lambda o: (o.get("status") or {}).get("replicas") == 0, what="scaled in")
    await _scale(e2e, "statefulset", "sts", ns, 2)
    await _workload_is(
        e2e, workload, lambda w: is_true(w, "Admitted") and not _on_hold(w), "the Workload re-admitted, not on hold"
    )
    await _ready(e2e, "statefulset", "sts", ns, 2)
    await e2e.kubectl.ok("delete", "statefulset", "sts", "-n", ns)


async def _deployment_workloads(e2e: E2E, ns: str) -> list[dict[str, Any]]:
    """The Workloads of the Deployment's pods (pod.GetWorkloadNameForPod: one per pod, named after it)."""
    pods = await e2e.list("pods", ns, "app=deployment-pod")
    names = {p["metadata"]["uid"] for p in pods}
    return [w for w in await e2e.list("workloads", ns) if w["metadata"].get("labels", {}).get(JOB_UID_LABEL) in names]


async def deployment_admits_workloads_that_fit(e2e: E2E) -> None:
    """deployment_test.go, Describe "Deployment", It "should admit workloads that fits"."""
    ns = "deployment-e2e-fits"
    lq = await prefixed_queues(e2e, ns, "deployment")
    await e2e.create(serving("Deployment", "deployment", ns, queue=lq, replicas=3))
    await _ready(e2e, "deployment", "deployment", ns, 3)

    async def admitted() -> list[dict[str, Any]] | None:
        found = await _deployment_workloads(e2e, ns)
        return found if len(found) == 3 and all(is_true(w, "Admitted") for w in found) else None

    workloads = await eventually(admitted, what="a Workload admitted per pod")
    await e2e.kubectl.ok("delete", "deployment", "deployment", "-n", ns)
    for wl in workloads:
        await e2e.wait_gone("workload", wl["metadata"]["name"], ns)


async def deployment_admitted_after_queue_name_change(e2e: E2E) -> None:
    """deployment_test.go, Describe "Deployment", It "should admit workloads after change queue-name if
    AvailableReplicas = 0"."""
    ns = "deployment-e2e-queue"
    lq = await prefixed_queues(e2e, ns, "deployment")
    await e2e.create(serving("Deployment", "deployment", ns, queue="invalid-queue-name", replicas=3))
    await e2e.wait(
        "deployment",
        "deployment",
        ns,
        lambda o: (
            {k: (o.get("status") or {}).get(k, 0) for k in ("replicas", "unavailableReplicas", "availableReplicas")}
            == {"replicas": 3, "unavailableReplicas": 3, "availableReplicas": 0}
        ),
        what="3 replicas, unavailable",
    )
    assert len(await e2e.list("pods", ns, "app=deployment-pod")) == 3

    async def waiting() -> list[dict[str, Any]] | None:
        found = await e2e.list("workloads", ns)
        ok = len(found) == 3 and all(condition(w, "QuotaReserved").get("status") == "False" for w in found)
        return found if ok else None

    before = await eventually(waiting, what="3 Workloads created, not admitted")
    await e2e.kubectl.ok("label", "deployment", "deployment", "-n", ns, f"{QUEUE_LABEL}={lq}", "--overwrite")
    await _ready(e2e, "deployment", "deployment", ns, 3)
    for wl in before:  # Check previous workloads are deleted
        await e2e.wait_gone("workload", wl["metadata"]["name"], ns)

    async def admitted() -> list[dict[str, Any]] | None:
        found = await e2e.list("workloads", ns)
        return found if len(found) == 3 and all(is_true(w, "Admitted") for w in found) else None

    after = await eventually(admitted, what="3 Workloads admitted")
    assert len(await e2e.list("pods", ns, "app=deployment-pod")) == 3
    await e2e.kubectl.ok("delete", "deployment", "deployment", "-n", ns)
    for wl in after:
        await e2e.wait_gone("workload", wl["metadata"]["name"], ns)


async def deployment_rolling_update_admits_as_quota_allows(e2e: E2E) -> None:
    """Not one of Kueue's cases (deployment_test.go has no rolling update): a Deployment rolled out under Kueue, as
    kube-controller-manager rolls it (maxSurge 1, maxUnavailable 0). Two pods of 2 CPU in the 5 CPU ClusterQueue;
    the new image's surge pod would make 6: Kueue gates it and leaves it pending, the old pods keep running and
    `kubectl rollout status` waits. With maxUnavailable 1 the controller scales an old pod down, its Workload goes
    and frees its quota, and the new pods are admitted one by one until the rollout completes with the old
    pods' Workloads gone."""
    ns = "deployment-e2e-rolling"
    lq = await prefixed_queues(e2e, ns, "deployment")
    deployment = serving("Deployment", "deployment", ns, queue=lq, replicas=2, cpu="2", image=OLD_IMAGE)
    deployment["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    await e2e.create(deployment)
    await _ready(e2e, "deployment", "deployment", ns, 2)
    old = await _deployment_workloads(e2e, ns)
    assert len(old) == 2
    await e2e.kubectl.ok("set", "image", "deployment/deployment", f"c={IMAGE}", "-n", ns)

    async def pending() -> dict[str, Any] | None:
        pods = await e2e.list("pods", ns, "app=deployment-pod")
        new = [p for p in pods if p["spec"]["containers"][0]["image"] == IMAGE]
        if len(pods) != 3 or len(new) != 1:
            return None
        found = [
            w
            for w in await _deployment_workloads(e2e, ns)
            if w["metadata"]["labels"][JOB_UID_LABEL] == new[0]["metadata"]["uid"]
        ]
        return found[0] if found and condition(found[0], "QuotaReserved").get("status") == "False" else None

    await eventually(pending, what="the surge pod's Workload pending for quota")

    async def replicas() -> tuple[Any, Any]:
        status = (await e2e.must_get("deployment", "deployment", ns)).get("status", {})
        return status.get("readyReplicas"), status.get("updatedReplicas")

    # the Deployment controller writes its status after it made the pods: waited for, not read at once
    await eventually_read(replicas, lambda ready_updated: ready_updated == (2, 1), what="2 old pods ready, 1 new")
    waiting = await e2e.kubectl.ok("rollout", "status", "deployment/deployment", "-n", ns, "--watch=false")
    assert "1 out of 2 new replicas have been updated" in waiting
    unavailable = {"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 1}}}}
    await e2e.kubectl.ok("patch", "deployment", "deployment", "-n", ns, "-p", json.dumps(unavailable))
    await e2e.kubectl.ok("rollout", "status", "deployment/deployment", "-n", ns, "--timeout=60s")
    for wl in old:
        await e2e.wait_gone("workload", wl["metadata"]["name"], ns)

    async def admitted() -> list[dict[str, Any]] | None:
        pods = await e2e.list("pods", ns, "app=deployment-pod")
        found = await _deployment_workloads(e2e, ns)
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        ok = len(pods) == 2 and images == {IMAGE} and len(found) == 2 and all(is_true(w, "Admitted") for w in found)
        return found if ok else None

    await eventually(admitted, what="2 pods of the new image, each admitted")
    await e2e.kubectl.ok("delete", "deployment", "deployment", "-n", ns)


STEPS: list[Step] = [
    sts_admits_group_that_fits,
    sts_pod_template_update,
    sts_scale_down_to_zero,
    sts_scale_up_from_zero,
    sts_scale_up_after_down_to_zero,
    sts_deleted_when_partially_ready,
    sts_preempts_low_priority,
    sts_on_hold_at_zero_cleared_on_scale_up,
    deployment_admits_workloads_that_fit,
    deployment_admitted_after_queue_name_change,
    sts_deactivated_workload_kept,
    deployment_rolling_update_admits_as_quota_allows,
]
