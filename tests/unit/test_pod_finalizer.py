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


def test_a_groups_pod_goes_once_deleted_and_a_serving_group_never_finishes() -> None:
    assert pods.finalizer_released(pod("a", phase="Running", group="g", deleting=True))
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    members = [pod(n, phase="Succeeded", group="g", annotations=serving) for n in ("a", "b")]
    assert not pods.group_has_finished(members)
    bad_count = [pod("a", phase="Succeeded", group="g", total=0)]
    assert not pods.group_has_finished(bad_count)
