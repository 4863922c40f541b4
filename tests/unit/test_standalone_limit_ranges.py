"""A Workload made by hand, counted and checked against its namespace's LimitRanges and the RuntimeClasses.

Kueue adjusts every workload it queues (pkg/workload/resources.go AdjustResources: RuntimeClass overhead,
LimitRange defaults, limits as missing requests) and its scheduler leaves one that breaks the LimitRanges
pending, Misconfigured (ValidateAdmissibility; TestSchedule 'container does not satisfy limitRange
constraints'). The watcher does it for a standalone Workload (services/watcher/convert.py workload_fact).
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.services.watcher.convert import kueue_fact, workload_fact


def _workload(container: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "new", "namespace": "sales"},
        "spec": {
            "queueName": "main",
            "podSets": [{"name": "one", "count": 1, "template": {"spec": {"containers": [container], **pod_spec}}}],
        },
    }


def _pod_set(manifest: dict[str, Any], *, limit_ranges: list[Any], runtime_classes: Any = None) -> Any:
    fact = workload_fact(manifest, runtime_classes=runtime_classes or {}, limit_ranges=limit_ranges)
    assert isinstance(fact, types.WorkloadObserved)
    return fact.workload.spec.pod_sets[0]


def test_a_container_above_the_limit_range_max_is_misconfigured() -> None:
    manifest = _workload({"name": "c", "resources": {"requests": {"cpu": "500m"}}})
    pod_set = _pod_set(manifest, limit_ranges=[{"type": "Container", "max": {"cpu": "300m"}}])
    assert pod_set.requests == {"cpu": 500}
    assert pod_set.misconfigured == (
        "resources didn't satisfy LimitRange constraints: "
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not be above the limitRange max'
    )


def test_the_limit_range_defaults_and_the_runtime_class_overhead_count() -> None:
    manifest = _workload({"name": "c"}, runtimeClassName="kata")
    limit_ranges = [{"type": "Container", "defaultRequest": {"cpu": "500m"}, "default": {"memory": "1Gi"}}]
    pod_set = _pod_set(manifest, limit_ranges=limit_ranges, runtime_classes={"kata": {"cpu": "250m"}})
    assert pod_set.requests == {"cpu": 750, "memory": 2**30}
    assert pod_set.misconfigured == ""


def test_a_pod_below_the_pod_min_is_misconfigured() -> None:
    manifest = _workload({"name": "c", "resources": {"requests": {"cpu": "100m"}}})
    pod_set = _pod_set(manifest, limit_ranges=[{"type": "Pod", "min": {"cpu": "200m"}}])
    assert pod_set.misconfigured == (
        "resources didn't satisfy LimitRange constraints: "
        'spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be below the limitRange min'
    )


def test_without_limit_ranges_or_runtime_class_the_fact_is_the_objects() -> None:
    manifest = _workload({"name": "c", "resources": {"requests": {"cpu": "500m"}}})
    assert workload_fact(manifest, runtime_classes={}, limit_ranges=[]) == kueue_fact(manifest)


_CPU = {"cpu": "1"}


@pytest.mark.parametrize(
    ("pod_spec", "limit_ranges", "runtime_classes", "want"),
    [
        pytest.param(
            {"runtimeClassName": "kata", "containers": [{"name": "c", "resources": {"requests": _CPU}}]},
            [],
            {"kata": _CPU},
            {"cpu": 2000},
            id="Should accumulate RuntimeClass's overhead",
        ),
        pytest.param(
            {"runtimeClassName": "kata", "containers": [{"name": "c", "resources": {"requests": _CPU}}]},
            [],
            {},
            {"cpu": 1000},
            id="Should not accumulate RuntimeClass's overhead",
        ),
        pytest.param(
            {"containers": [{"name": "c"}]},
            [{"type": "Container", "defaultRequest": {"cpu": "3"}}],
            {},
            {"cpu": 3000},
            id="Should use the range defined default requests, if provided",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"requests": _CPU}}]},
            [{"type": "Container", "defaultRequest": {"cpu": "3"}}],
            {},
            {"cpu": 1000},
            id="Should not use the range defined requests, if provided by the workload",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"limits": _CPU}}]},
            [],
            {},
            {"cpu": 1000},
            id="The limits should be used as request values",
        ),
        pytest.param(
            {"resources": {"limits": {"cpu": "2"}}, "containers": [{"name": "c"}]},
            [],
            {},
            {"cpu": 2000},
            id="The pod-level limits should be used as pod-level request values",
        ),
        pytest.param(
            {"resources": {"limits": {"cpu": "4"}}, "containers": [{"name": "c"}]},
            [{"type": "Container", "defaultRequest": {"cpu": "3"}}],
            {},
            {"cpu": 4000},
            id="Should sync the pod-level resource requests with the pod-level limit",
        ),
    ],
)
def test_kueues_workload_controller_cases(
    pod_spec: dict[str, Any], limit_ranges: list[Any], runtime_classes: dict[str, Any], want: dict[str, int]
) -> None:
    """workload_controller_test.go 'Workload controller with scheduler': what a Workload made by hand counts
    for quota, as its ClusterQueue's flavorsReservation shows once it is admitted (resources.go
    AdjustResources: RuntimeClass overhead, LimitRange defaults, limits as missing requests)."""
    manifest = _workload(pod_spec["containers"][0], **{k: v for k, v in pod_spec.items() if k != "containers"})
    pod_set = _pod_set(manifest, limit_ranges=limit_ranges, runtime_classes=runtime_classes)
    assert (pod_set.requests, pod_set.misconfigured) == (want, "")
