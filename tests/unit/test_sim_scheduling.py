"""The scheduler stand-in's fit rule (:mod:`kueue_es.sim.controllers`): a pod is bound only to a node with room
for its requests, as kube-scheduler's NodeResourcesFit filter decides, beside the node selector, affinity, taint
and cordon filters; a pod that fits no node gets kube-scheduler's FitError message."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kueue_es.events import manifests
from kueue_es.sim import controllers


def node(name: str, *, cpu: str = "8", memory: str = "16Gi", pods: str = "110", **extra: Any) -> dict[str, Any]:
    """A Node whose kubelet reported ``cpu``, ``memory``, ``pods`` and ``extended`` (resource -> quantity)
    allocatable; ``labels``, ``taints`` and ``unschedulable`` go to its metadata and spec."""
    labels, taints, unschedulable = extra.pop("labels", {}), extra.pop("taints", []), extra.pop("unschedulable", False)
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **extra.pop("extended", {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "unschedulable": unschedulable},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def pod(name: str = "p", *, requests: dict[str, str] | None = None, node_name: str = "", **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": requests or {}}}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [container], **spec},
        "status": {"phase": "Running" if node_name else "Pending"},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def test_a_pod_asking_more_cpu_than_any_node_has_fits_none_with_kube_schedulers_message() -> None:
    nodes = [node(f"worker{i}") for i in range(8)]
    big = pod(requests={"cpu": "100"})
    assert controllers.pick_node(big, nodes, {}) is None
    assert controllers.unschedulable_message(big, nodes, {}) == (
        "0/8 nodes are available: 8 Insufficient cpu. "
        "preemption: 0/8 nodes are available: 8 No preemption victims found for incoming pod."
    )


def test_what_the_bound_active_pods_request_is_taken_from_the_node() -> None:
    nodes = [node("a", cpu="4"), node("b", cpu="4")]
    bound = [
        pod("x", requests={"cpu": "3"}, node_name="a"),
        pod("y", requests={"cpu": "2"}, node_name="b"),
        {**pod("done", requests={"cpu": "4"}, node_name="b"), "status": {"phase": "Succeeded"}},
    ]
    used = controllers.node_used(bound)
    assert used == {"a": {"pods": 1, "cpu": 3000}, "b": {"pods": 1, "cpu": 2000}}
    assert controllers.pick_node(pod(requests={"cpu": "2"}), nodes, used) == "b"
    assert controllers.pick_node(pod(requests={"cpu": "1500m"}), nodes, used) == "b"
    assert controllers.pick_node(pod(requests={"cpu": "2500m"}), nodes, used) is None
    # the pod count and memory are limits too; a pod asking for nothing fits anywhere there is a pod slot
    assert controllers.unfit_reasons(pod(), node("full", pods="1"), {"pods": 1}) == (["Too many pods"], True)
    assert controllers.unfit_reasons(pod(requests={"memory": "17Gi"}), node("m"), None)[0] == ["Insufficient memory"]
    assert controllers.pick_node(pod(), nodes, used) in ("a", "b")


def test_extended_resources_are_fitted_and_a_node_without_the_resource_has_none() -> None:
    gpu_node, plain = node("gpu", extended={"nvidia.com/gpu": "2"}), node("plain")
    wants = pod(requests={"nvidia.com/gpu": "2"})
    assert controllers.pick_node(wants, [gpu_node, plain], {}) == "gpu"
    assert controllers.pick_node(wants, [gpu_node, plain], {"gpu": {"pods": 1, "nvidia.com/gpu": 1}}) is None
    assert controllers.unschedulable_message(wants, [gpu_node, plain], {"gpu": {"nvidia.com/gpu": 1}}) == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_init_containers_sidecars_and_overhead_count_as_kubernetes_counts_them() -> None:
    p = pod(requests={"cpu": "1"}, overhead={"cpu": "500m"})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    assert controllers.pod_requests(p) == {"cpu": 3500}
    assert controllers.fits_node(p, node("n", cpu="3500m"))
    assert not controllers.fits_node(p, node("n", cpu="3"))


def test_selectors_taints_cordons_and_affinity_come_first_and_preemption_cannot_help_them() -> None:
    tainted = node("t", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    cordoned = node("c", unschedulable=True)
    labelled = node("l", labels={"flavor": "gpu"})
    small = node("s", cpu="1", labels={"flavor": "cpu"})
    p = pod(requests={"cpu": "2"}, nodeSelector={"flavor": "cpu"})
    assert controllers.unschedulable_message(p, [tainted, cordoned, labelled, small], {}) == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: x}, 1 node(s) were unschedulable. "
        "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling."
    )
    tolerating = pod(tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert controllers.fits_node(tolerating, tainted)
    assert controllers.fits_node(pod(tolerations=[{"operator": "Exists"}]), cordoned)
    never = pod(requests={"cpu": "100"}, preemptionPolicy="Never")
    assert controllers.unschedulable_message(never, [small], {}).endswith(
        "1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )


@pytest.mark.parametrize(
    ("term", "fits"),
    [
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["3"]}]}, True),
        ({"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["3"]}]}, False),
        ({"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}, True),
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}, True),
        ({}, False),
    ],
)
def test_required_node_affinity_terms_are_honoured(term: dict[str, Any], fits: bool) -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert controllers.fits_node(pod(affinity=affinity), node("n", labels={"zone": "a", "gpus": "4"})) is fits


def test_a_node_whose_kubelet_reported_no_resources_does_not_limit_pods() -> None:
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}}
    assert controllers.pick_node(pod(requests={"cpu": "100"}), [bare], {"bare": {"pods": 500}}) == "bare"
    assert controllers.node_allocatable(bare) is None


def test_a_bad_quantity_in_a_pod_is_an_error_naming_the_pod_and_field() -> None:
    with pytest.raises(manifests.ManifestError, match=r"default/p.*spec\.containers\[0\]\.resources\.cpu"):
        controllers.pick_node(pod(requests={"cpu": "lots"}), [node("n")], {})


def test_the_failed_scheduling_event_is_kube_schedulers() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    event = controllers.scheduling_event(pod(), message="0/1 nodes are available: 1 Too many pods.", now=now)
    assert (event["type"], event["reason"], event["source"], event["involvedObject"]["kind"]) == (
        "Warning",
        "FailedScheduling",
        {"component": "default-scheduler"},
        "Pod",
    )


MAINT = {"key": "maint", "value": "true", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("taints", "tolerations", "delay"),
    [
        ([], [], None),  # no taint
        ([{"key": "maint", "value": "true", "effect": "NoSchedule"}], [], None),  # NoSchedule evicts nothing
        ([MAINT], [], 0.0),  # not tolerated: at once
        ([MAINT], [{"key": "maint", "operator": "Exists", "effect": "NoExecute"}], None),  # for good
        ([MAINT], [{"key": "maint", "operator": "Exists", "tolerationSeconds": 30}], 30.0),
        ([MAINT], [{"key": "maint", "value": "true", "tolerationSeconds": 0}], 0.0),
        ([MAINT], [{"key": "maint", "value": "false", "tolerationSeconds": 600}], 0.0),  # another value: not
        ([MAINT], [{"operator": "Exists"}], None),  # tolerates every taint
        # two taints: each must be tolerated; the least tolerationSeconds of the matching tolerations counts
        (
            [MAINT, {"key": "gpu", "effect": "NoExecute"}],
            [{"key": "maint", "operator": "Exists", "tolerationSeconds": 60}, {"key": "gpu", "operator": "Exists"}],
            60.0,
        ),
        ([MAINT, {"key": "gpu", "effect": "NoExecute"}], [{"key": "maint", "operator": "Exists"}], 0.0),
    ],
)
def test_noexecute_taints_evict_as_the_taint_eviction_controller_does(
    taints: list[dict[str, Any]], tolerations: list[dict[str, Any]], delay: float | None
) -> None:
    """kubernetes pkg/controller/tainteviction/taint_eviction.go processPodOnNode and getMinTolerationTime."""
    bound = pod("p", node_name="kind-worker", tolerations=tolerations)
    assert controllers.noexecute_eviction_delay(bound, node("kind-worker", taints=taints)) == delay
