"""The steps of Kueue's test/e2e/singlecluster/baseline/pod_test.go (Describe "Pod groups"), run by
tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep``.

Each of Kueue's cases is a step with its own namespace, flavor ``on-demand-NS`` and
ClusterQueue ``cq-NS`` of 5 CPU preempting lower priorities (When "Single CQ"'s BeforeEach), LocalQueue ``queue``.
A pod that Kueue's test makes exit by exec (WaitForActivePodsAndTerminate) is finished here by writing the phase its
kubelet would write (Succeeded) on its status.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import yaml

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    ADMISSION_GATE,
    E2E,
    FOREVER,
    PRIORITY_CLASS_LABEL,
    Step,
    cluster_queue,
    flavor,
    is_true,
    local_queue,
    namespace,
    pod,
    priority_class,
    run_for,
)

ON_DEMAND = {"instance-type": "on-demand"}


async def _single_cq(e2e: E2E, ns: str) -> str:
    """BeforeEach of Describe "Pod groups" and When "Single CQ". Returns the ClusterQueue's name."""
    cq = f"cq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(f"on-demand-{ns}", node_labels=ON_DEMAND),
        cluster_queue(cq, {f"on-demand-{ns}": {"cpu": "5"}}, preemption="LowerPriority"),
        local_queue("queue", ns, cq),
    )
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", "queue", ns, lambda o: is_true(o, "Active"), what="LocalQueue active")
    return cq


def _group(
    name: str, ns: str, count: int, *, cpu: str, seconds: float | None = None, **kw: Any
) -> list[dict[str, Any]]:
    """podtesting.MakePod(name, ns)...MakeGroup(count): pods ``name-0`` .. of group ``name``."""
    return [
        pod(f"{name}-{i}", ns, queue="queue", cpu=cpu, seconds=seconds, group=(name, count), **kw) for i in range(count)
    ]


def _gated(p: dict[str, Any]) -> bool:
    return any(g.get("name") == ADMISSION_GATE for g in p["spec"].get("schedulingGates") or [])


async def _all_ungated(e2e: E2E, ns: str, names: list[str], *, what: str) -> list[dict[str, Any]]:
    """Every named pod exists and has no scheduling gate left."""

    async def read() -> list[dict[str, Any]] | None:
        pods = [await e2e.get("pod", n, ns) for n in names]
        if all(p is not None and not p["spec"].get("schedulingGates") for p in pods):
            return [p for p in pods if p is not None]
        return None

    return list(await eventually(read, what=what))


async def _finished(e2e: E2E, name: str, ns: str) -> None:
    """ExpectWorkloadToFinishWithTimeout."""
    await e2e.wait("workload", name, ns, lambda w: is_true(w, "Finished"), what=f"Workload {ns}/{name} finished")


async def _finalized_or_gone(e2e: E2E, name: str, ns: str) -> None:
    """ExpectWorkloadsFinalizedOrGone: the Workload is gone or has no finalizer left."""

    async def done() -> bool:
        wl = await e2e.get("workload", name, ns)
        return wl is None or not wl["metadata"].get("finalizers")

    await eventually(done, what=f"Workload {ns}/{name} finalized or gone")


async def _delete_pods(e2e: E2E, ns: str, names: list[str]) -> None:
    """ExpectObjectToBeDeleted for each pod."""
    await e2e.kubectl.ok("delete", "pod", *names, "-n", ns, "--wait=false")
    for name in names:
        await e2e.wait_gone("pod", name, ns)


async def _terminate(e2e: E2E, ns: str, name: str) -> None:
    """WaitForActivePodsAndTerminate: the pod's container exits 0, as its kubelet reports it."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {"exitCode": 0, "reason": "Completed", "finishedAt": now}
    status = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "c", "image": "agnhost", "ready": False, "restartCount": 0, "state": {"terminated": terminated}}
        ],
    }
    await e2e.status_patch("pod", name, ns, status)


async def admits_group_that_fits(e2e: E2E) -> None:
    """pod_test.go, Describe "Pod groups", When "Single CQ", It "should admit group that fits"."""
    ns = "pod-e2e-fits"
    cq = await _single_cq(e2e, ns)
    group = _group("group", ns, 2, cpu="1")
    for p in group:
        created = await e2e.kubectl.ok("create", "-o", "json", "-f", "-", stdin=yaml.safe_dump(p))
        assert ADMISSION_GATE in created, created  # the webhook gated it
    await e2e.wait("workload", "group", ns, lambda w: True, what="the Workload created")
    await e2e.wait(
        "workload",
        "group",
        ns,
        lambda w: is_true(w, "QuotaReserved") and (w["status"].get("admission") or {}).get("clusterQueue") == cq,
        what="the Workload admitted",
    )
    for started in await _all_ungated(e2e, ns, ["group-0", "group-1"], what="the group started"):
        assert started["spec"].get("nodeSelector") == ON_DEMAND, started["spec"]
    await _finished(e2e, "group", ns)
    await _delete_pods(e2e, ns, ["group-0", "group-1"])  # Deleting finished Pods
    await _finalized_or_gone(e2e, "group", ns)


async def admits_only_a_complete_group(e2e: E2E) -> None:
    """pod_test.go, Describe "Pod groups", When "Single CQ", It "Should only admit a complete group"."""
    ns = "pod-e2e-complete"
    await _single_cq(e2e, ns)
    group = _group("group", ns, 3, cpu="1")
    await e2e.create(*group[:2])  # Incomplete group should not start

    async def composed_and_refused() -> bool:
        events = await e2e.list("events", ns)
        return any(e.get("reason") == "ErrWorkloadCompose" for e in events)

    # Kueue's pod reconciler has looked at the pods and cannot compose the group's Workload yet
    await eventually(composed_and_refused, what="Kueue's ErrWorkloadCompose warning on the incomplete group")
    for name in ("group-0", "group-1"):
        assert _gated(await e2e.must_get("pod", name, ns)), name
    await _delete_pods(e2e, ns, ["group-0", "group-1"])  # Incomplete group can be deleted
    await e2e.create(*group)  # Complete group runs successfully
    await _finished(e2e, "group", ns)
    await e2e.kubectl.ok("delete", "pods", "--all", "-n", ns)


async def admits_a_group_of_diverse_pods(e2e: E2E) -> None:
    """pod_test.go, Describe "Pod groups", When "Single CQ", It "should allow to schedule a group of diverse
    pods"."""
    ns = "pod-e2e-diverse"
    await _single_cq(e2e, ns)
    group = _group("group", ns, 2, cpu="3")
    # make the group of pods diverse using different amount of resources
    group[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    await e2e.create(*group)
    await _all_ungated(e2e, ns, ["group-0", "group-1"], what="the group started")
    await _finished(e2e, "group", ns)  # Group completes
    await _delete_pods(e2e, ns, ["group-0", "group-1"])  # Deleting finished Pods
    await _finalized_or_gone(e2e, "group", ns)


async def preempts_the_lower_priority_group(e2e: E2E) -> None:
    """pod_test.go, Describe "Pod groups", When "Single CQ", It "should allow to preempt the lower priority group":
    the preempted pods stay, Failed, under Kueue's pod finalizer, keeping the group's Workload, until the
    replacement pods come; then they are let go."""
    ns = "pod-e2e-preempt"
    await _single_cq(e2e, ns)
    high_class = f"high-{ns}"
    await e2e.apply(priority_class(high_class, 100))
    default = _group("default-priority-group", ns, 2, cpu="2", seconds=FOREVER)
    await e2e.create(*default)
    default_names = [p["metadata"]["name"] for p in default]
    await _all_ungated(e2e, ns, default_names, what="the default-priority group started")
    high = _group("high-priority-group", ns, 2, cpu="1", seconds=FOREVER, labels={PRIORITY_CLASS_LABEL: high_class})
    await e2e.create(*high)
    high_names = [p["metadata"]["name"] for p in high]
    await _all_ungated(e2e, ns, high_names, what="the high-priority group started")

    async def stopped_preempted() -> bool:  # Use events to observe the default-priority pods are getting preempted
        events = await e2e.list("events", ns)
        stopped = {
            e["involvedObject"]["name"]
            for e in events
            if e.get("reason") == "Stopped" and "Preempted" in (e.get("message") or "")
        }
        return set(default_names) <= stopped

    await eventually(stopped_preempted, what="Stopped (Preempted) Events on the default-priority pods")
    replacements = []
    for p in default:  # Create replacement pods
        replacement = {**p, "metadata": {**p["metadata"], "name": "replacement-for-" + p["metadata"]["name"]}}
        replacement["metadata"]["annotations"] = {
            k: v for k, v in p["metadata"]["annotations"].items() if not k.startswith("kueue-es.dev/")
        }  # BehaviorExitFast
        replacements.append(replacement)
    await e2e.create(*replacements)
    for name in default_names:  # Check that the preempted pods are deleted
        await e2e.wait_gone("pod", name, ns)
    await _all_ungated(e2e, ns, high_names, what="the high-priority pods still scheduled")
    for name in high_names:  # Call high priority group pods to complete
        await _terminate(e2e, ns, name)
    await _finished(e2e, "high-priority-group", ns)
    replacement_names = [p["metadata"]["name"] for p in replacements]
    await _all_ungated(e2e, ns, replacement_names, what="the replacement pods ungated")

    async def succeeded() -> bool:
        pods = [await e2e.get("pod", n, ns) for n in replacement_names]
        return all(p is not None and p["status"].get("phase") == "Succeeded" for p in pods)

    await eventually(succeeded, what="the replacement pods succeeded")
    await _finished(e2e, "default-priority-group", ns)
    await e2e.kubectl.ok("delete", "pods", "--all", "-n", ns)


def _replacement_condition(status: str, reason: str, message: str) -> Any:
    """Whether a Workload has WaitingForReplacementPods ``status`` with ``reason`` and ``message``."""

    def check(wl: dict[str, Any]) -> bool:
        conditions = (wl.get("status") or {}).get("conditions") or []
        want = {"type": "WaitingForReplacementPods", "status": status, "reason": reason, "message": message}
        return any(want.items() <= c.items() for c in conditions)

    return check


async def replaces_a_failed_pod_in_the_group(e2e: E2E) -> None:
    """pod_test.go, Describe "Pod groups", When "Single CQ", It "Failed Pod can be replaced in group"."""
    ns = "pod-e2e-replace"
    await _single_cq(e2e, ns)
    group = _group("group", ns, 3, cpu="1")
    # First pod runs for much longer, so that there is time to terminate it.
    group[0]["metadata"]["annotations"].update(run_for(FOREVER))
    await e2e.create(*group)  # Group starts
    names = [p["metadata"]["name"] for p in group]
    await _all_ungated(e2e, ns, names, what="the group started")
    await e2e.wait(  # Wait for the pod to be running to allow fast termination by Kubelet
        "pod", "group-0", ns, lambda p: p["status"].get("phase") == "Running", what="group-0 running"
    )
    await e2e.kubectl.ok("delete", "pod", "group-0", "-n", ns, "--wait=false")  # Fail a pod
    await e2e.wait("pod", "group-0", ns, lambda p: p["status"].get("phase") == "Failed", what="group-0 Failed")
    await e2e.wait(  # Checking that WaitingForReplacementPods status is set to true
        "workload",
        "group",
        ns,
        _replacement_condition("True", "PodsFailed", "Some Failed pods need replacement"),
        what="WaitingForReplacementPods True",
    )
    # Replacement pod starts, and the failed one is deleted (a pod template that can succeed fast: here it runs
    # a little longer than the demo's default, as Kueue's takes its container's start-up on a kind cluster, so
    # that the group has not finished when the excess pod comes)
    replacement_meta = {**group[2]["metadata"], "name": "replacement"}
    replacement_meta["annotations"] = {**replacement_meta["annotations"], **run_for(20)}
    replacement = {**group[2], "metadata": replacement_meta}
    await e2e.create(replacement)
    await _all_ungated(e2e, ns, ["replacement"], what="the replacement started")
    await _pods_finalized_or_gone(e2e, ns, "group-0")
    excess = {**group[2], "metadata": {**group[2]["metadata"], "name": "excess"}}
    await e2e.create(excess)  # Excess pod is deleted

    async def excess_deleted_event() -> bool:  # Use events to observe the excess pods are getting stopped
        events = await e2e.list("events", ns)
        return any(
            e.get("reason") == "ExcessPodDeleted" and e["involvedObject"].get("name") == "excess" for e in events
        )

    await eventually(excess_deleted_event, what="the ExcessPodDeleted Event of the excess pod")
    await e2e.wait_gone("pod", "excess", ns)  # Verify the excess pod is deleted
    await e2e.wait(  # Checking that WaitingForReplacementPods status is set to false
        "workload",
        "group",
        ns,
        _replacement_condition("False", "PodsReady", "No pods need replacement"),
        what="WaitingForReplacementPods False",
    )
    await _finished(e2e, "group", ns)
    await e2e.kubectl.ok("delete", "pods", "--all", "-n", ns, "--wait=false")


async def _pods_finalized_or_gone(e2e: E2E, ns: str, name: str) -> None:
    """ExpectPodsFinalizedOrGone: the pod is gone or has no finalizer left."""

    async def done() -> bool:
        found = await e2e.get("pod", name, ns)
        return found is None or not found["metadata"].get("finalizers")

    await eventually(done, what=f"pod {ns}/{name} finalized or gone")


async def admitted_after_group_labels_added(e2e: E2E) -> None:
    """pod_test.go, Describe "Pod groups", When "Single CQ", It "Pod should be admitted after the group labels are
    added" (without its check of the ``kueue.x-k8s.io/role-hash`` annotation: kueue-es's webhook does not write it,
    docs/webhooks.md)."""
    ns = "pod-e2e-late-labels"
    cq = await _single_cq(e2e, ns)
    p = pod(
        "pod-0",
        ns,
        queue=None,
        cpu="1",
        labels={"app-role": "worker"},
        annotations={"kueue.x-k8s.io/pod-suspending-parent": "OtherController"},
    )
    p["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]  # KueueSchedulingGate()
    await e2e.create(p)
    assert _gated(await e2e.must_get("pod", "pod-0", ns))
    patch = {
        "metadata": {
            "labels": {
                "kueue.x-k8s.io/pod-group-name": "test-group",
                "kueue.x-k8s.io/queue-name": "queue",
                "kueue.x-k8s.io/managed": "true",
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "1"},
        }
    }
    await e2e.kubectl.ok("patch", "pod", "pod-0", "-n", ns, "--type=merge", "-p", json.dumps(patch))
    labelled = await e2e.wait(
        "pod",
        "pod-0",
        ns,
        lambda o: o["metadata"]["labels"].get("kueue.x-k8s.io/cluster-queue-name") == cq,
        what="the pod's queue labels assigned",
    )
    assert labelled["metadata"]["labels"].get("kueue.x-k8s.io/local-queue-name") == "queue"
    await _all_ungated(e2e, ns, ["pod-0"], what="the pod scheduled")
    await _finished(e2e, "test-group", ns)
    await _delete_pods(e2e, ns, ["pod-0"])  # Ensure the pod is deleted
    await _finalized_or_gone(e2e, "test-group", ns)


STEPS: list[Step] = [
    admits_group_that_fits,
    admits_only_a_complete_group,
    admits_a_group_of_diverse_pods,
    preempts_the_lower_priority_group,
    replaces_a_failed_pod_in_the_group,
    admitted_after_group_labels_added,
]
