"""When Kueue's pod reconciler lets a pod go: its ``kueue.x-k8s.io/managed`` finalizer off
(pkg/controller/jobs/pod/pod_controller.go Load, Finished, Finalize; :func:`pods.finalizer_released`)."""

from __future__ import annotations

from typing import Any

from kueue_es.jobframework import pods

HELD = ["kueue.x-k8s.io/managed"]


def pod(
    name: str,
    *,
    phase: str = "Pending",
    group: str = "",
    total: int = 2,
    finalizers: list[str] | None = None,
    deleting: bool = False,
    managed: bool = True,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "labels": {"kueue.x-k8s.io/managed": "true"} if managed else {},
        "annotations": dict(annotations or {}),
        "finalizers": HELD if finalizers is None else finalizers,
    }
    if group:
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group
        meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {}, "status": {"phase": phase}}


def test_a_single_pod_goes_once_deleted_or_terminated() -> None:
    assert not pods.finalizer_released(pod("p", phase="Running"))
    assert pods.finalizer_released(pod("p", deleting=True))
    assert pods.finalizer_released(pod("p", phase="Succeeded"))
    assert pods.finalizer_released(pod("p", phase="Failed"))
    assert pods.finalizer_released(pod("p", phase="Running"), workload_finished=True)


def test_only_a_managed_pod_holding_the_finalizer() -> None:
    assert not pods.finalizer_released(pod("p", phase="Succeeded", finalizers=[]))
    assert not pods.finalizer_released(pod("p", phase="Succeeded", finalizers=["example.com/other"]))
    assert not pods.finalizer_released(pod("p", phase="Succeeded", managed=False))  # Skip: not reconciled


def test_a_groups_pods_go_when_the_group_finishes() -> None:
    done = pod("a", phase="Succeeded", group="g")
    running = pod("b", phase="Running", group="g")
    assert not pods.group_has_finished([done, running])
    assert not pods.finalizer_released(done)  # a member that succeeded waits for its group
    both = [done, pod("b", phase="Succeeded", group="g")]
    assert pods.group_has_finished(both)
    assert all(pods.finalizer_released(p, group_finished=True) for p in both)
    assert pods.finalizer_released(running, workload_finished=True)
    # a Failed member keeps it while the group may still retry (a replacement comes)
    failed = pod("b", phase="Failed", group="g")
    assert not pods.group_has_finished([done, failed])
    # unretriable: finished once none runs
    unretriable = pod("b", phase="Failed", group="g", annotations={"kueue.x-k8s.io/retriable-in-group": "false"})
    assert pods.group_has_finished([done, unretriable])
    assert not pods.group_has_finished([done, unretriable, running])


def test_a_groups_deleted_pod_keeps_it_until_replaced_and_a_serving_group_never_finishes() -> None:
    """Kueue keeps a deleted member's finalizer so that its group stays countable (pod_controller.go
    FindMatchingWorkloads: only replaced inactive pods are finalized). Before, it went at once."""
    deleted = pod("a", phase="Running", group="g", deleting=True)
    assert not pods.finalizer_released(deleted)
    assert pods.finalizer_released(deleted, replaced=True)
    assert pods.finalizer_released(deleted, workload_finished=True)  # its Workload deleted: Stop, Finalize
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    members = [pod(n, phase="Succeeded", group="g", annotations=serving) for n in ("a", "b")]
    assert not pods.group_has_finished(members)
    bad_count = [pod("a", phase="Succeeded", group="g", total=0)]
    assert not pods.group_has_finished(bad_count)


def member(name: str, *, phase: str = "Running", role: str = "r1", **kw: Any) -> dict[str, Any]:
    """A member of group ``g`` of role ``role`` (its role-hash annotation)."""
    out = pod(name, phase=phase, group="g", annotations={"kueue.x-k8s.io/role-hash": role}, **kw)
    out["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{name[-1]}Z"
    return out


NOW = 1_800_000_000_000


def names(members: list[dict[str, Any]]) -> list[str]:
    return sorted(m["metadata"]["name"] for m in members)


def test_a_failed_member_is_let_go_once_a_replacement_counts() -> None:
    """Per role, the inactive members beyond what the active ones leave to fill the Workload's count are let go
    (pod_controller.go FindMatchingWorkloads: min(inactive, inactive + active - count))."""
    a1, a2 = member("a1"), member("a2")
    failed = member("a3", phase="Failed")
    assert pods.replaced_members([a1, a2, failed], [("r1", 3)], now_ms=NOW) == []  # not replaced yet
    replacement = member("a4", phase="Pending")
    assert names(pods.replaced_members([a1, a2, failed, replacement], [("r1", 3)], now_ms=NOW)) == ["a3"]
    # a pod deleted before it got a node counts as inactive too; one of another role is not counted for r1
    gated_gone = member("a5", phase="Pending", deleting=True)
    other = member("b1", role="r2")
    assert names(pods.replaced_members([a1, a2, failed, gated_gone, other], [("r1", 3), ("r2", 1)], now_ms=NOW)) == [
        "a5"
    ]


def test_the_longest_inactive_and_those_without_finalizer_go_first() -> None:
    """sortInactivePods: with the finalizer first, then the later last active first; the last ones go."""
    early = member("a1", phase="Failed", deleting=True)
    early["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    late = member("a2", phase="Failed", deleting=True)
    late["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:09Z"
    bare = member("a3", phase="Failed", finalizers=[])
    active = member("a4")
    assert names(pods.replaced_members([early, late, bare, active], [("r1", 2)], now_ms=NOW)) == ["a1", "a3"]


def test_without_a_workload_every_inactive_member_goes() -> None:
    """A group with no Workload (ConstructComposableWorkload) lets every inactive member go."""
    members = [member("a1"), member("a2", phase="Failed"), member("a3", phase="Pending", deleting=True)]
    assert names(pods.replaced_members(members, None, now_ms=NOW)) == ["a2", "a3"]


def test_absent_pods_per_role_and_with_fast_admission() -> None:
    """countAbsentPods: the count less the members that still count, per role; with fast admission 1 per role
    with none."""
    members = [member("a1"), member("a2", phase="Failed"), member("a3", phase="Succeeded"), member("b1", role="r2")]
    assert pods.absent_pods(members, [("r1", 3), ("r2", 1)]) == 1
    assert pods.absent_pods(members, [("r1", 2), ("r2", 2)]) == 1
    assert pods.absent_pods(members, [("r1", 3), ("r2", 1)], fast=True) == 0
    assert pods.absent_pods([member("a2", phase="Failed")], [("r1", 3)], fast=True) == 1


def test_the_waiting_for_replacement_pods_condition() -> None:
    """pod_controller.go waitingForReplacementPodsCondition: none until a pod is missing; True PodsFailed, or
    the Evicted condition's reason and message while that is True; False PodsReady once replaced."""
    now, later = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
    assert pods.replacement_condition(None, absent=0, evicted=None, generation=1, now=now) is None
    waiting = pods.replacement_condition(None, absent=1, evicted=None, generation=1, now=now)
    assert waiting == {
        "type": "WaitingForReplacementPods",
        "status": "True",
        "reason": "PodsFailed",
        "message": "Some Failed pods need replacement",
        "lastTransitionTime": now,
        "observedGeneration": 1,
    }
    assert pods.replacement_condition(waiting, absent=2, evicted=None, generation=1, now=later) == waiting
    preempted = ("Preempted", "Preempted to accommodate a higher priority Workload")
    evicted = pods.replacement_condition(waiting, absent=2, evicted=preempted, generation=1, now=later)
    assert evicted is not None
    assert (evicted["reason"], evicted["message"], evicted["lastTransitionTime"]) == (*preempted, later)
    # the eviction over, still missing pods: the reason stays
    assert pods.replacement_condition(evicted, absent=1, evicted=None, generation=1, now=now) == evicted
    replaced = pods.replacement_condition(evicted, absent=0, evicted=None, generation=2, now=later)
    assert replaced == {
        "type": "WaitingForReplacementPods",
        "status": "False",
        "reason": "PodsReady",
        "message": "No pods need replacement",
        "lastTransitionTime": later,
        "observedGeneration": 2,
    }
    assert pods.replacement_condition(replaced, absent=0, evicted=None, generation=2, now=now) == replaced
