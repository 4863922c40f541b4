"""Leader + workers groups: the job webhooks' rules on a job's pod template annotations, none on a
Workload object.

Kueue's job webhooks refuse a numeric ``kueue.x-k8s.io/podset-group-name``, a group other than exactly two
pod sets, one of them with count 1, both asking for the same level (jobframework/tas_validation.go
ValidatePodSetGroupingTopology), and a group with slices or without a required or preferred level.
Its Workload webhook (pkg/webhooks/workload_webhook.go ValidateWorkload, validatePodSet) and the CRD check
none of them (only the name's length).

A group whose workers carry slices, or whose pod sets are unconstrained: refused on a
job's pod template annotations, accepted on a Workload object.

Kueue forbids ``kueue.x-k8s.io/podset-group-name`` together with the slice annotations, and without a
required or preferred annotation, on a job's pod template (pkg/controller/jobframework/tas_validation.go),
but its Workload webhook checks only the slice fields themselves (pkg/webhooks/workload_webhook.go
validateTASSliceSize), and its placement takes a group's slices from the workers and places an
unconstrained group (tas_flavor_snapshot.go; tas_cache_test.go 'balanced placement; leader worker set',
'find topology assignment for unconstrained grouped podsets spreads leader and worker across domains with
TASProfileMixed').
"""

from __future__ import annotations

import pytest

from kueue_es.events import manifests, models, tas_requests

GROUPED_SLICES = models.PodSetTopologyRequest(
    preferred="cloud.com/topology-rack",
    pod_set_slice_required_topology="kubernetes.io/hostname",
    pod_set_slice_size=5,
    pod_set_group_name="sameGroup",
)


def _workload(workers: dict[str, object], leader: dict[str, object] | None = None) -> dict[str, object]:
    def pod_set(name: str, count: int, request: dict[str, object]) -> dict[str, object]:
        containers = [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
        return {
            "name": name,
            "count": count,
            "topologyRequest": request,
            "template": {"spec": {"containers": containers}},
        }

    leader = leader or {"preferred": "cloud.com/topology-rack", "podSetGroupName": "sameGroup"}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w1", "namespace": "default"},
        "spec": {"queueName": "lq", "podSets": [pod_set("leader", 1, leader), pod_set("workers", 25, workers)]},
    }


def test_job_annotations_refuse_a_group_with_slices() -> None:
    with pytest.raises(tas_requests.TopologyRequestError) as caught:
        tas_requests.validate_topology_request(GROUPED_SLICES, count=25)
    assert caught.value.field == "topologyRequest.podSetGroupName"


def test_a_workload_object_keeps_a_group_with_slices() -> None:
    workers = {
        "preferred": "cloud.com/topology-rack",
        "podSetSliceRequiredTopology": "kubernetes.io/hostname",
        "podSetSliceSize": 5,
        "podSetGroupName": "sameGroup",
    }
    wl = manifests.parse_object(_workload(workers))
    assert isinstance(wl, models.Workload)
    assert wl.spec.pod_sets[1].topology_request == GROUPED_SLICES


def test_a_workload_object_still_needs_both_slice_fields() -> None:
    workers = {"preferred": "cloud.com/topology-rack", "podSetSliceSize": 5, "podSetGroupName": "sameGroup"}
    with pytest.raises(manifests.ManifestError) as caught:
        manifests.parse_object(_workload(workers))
    assert "podSetSliceRequiredTopology" in str(caught.value)


def test_job_annotations_refuse_an_unconstrained_group() -> None:
    request = models.PodSetTopologyRequest(unconstrained=True, pod_set_group_name="sameGroup")
    with pytest.raises(tas_requests.TopologyRequestError) as caught:
        tas_requests.validate_topology_request(request, count=1)
    assert caught.value.field == "topologyRequest.podSetGroupName"


def test_a_workload_object_keeps_an_unconstrained_group() -> None:
    unconstrained = {"unconstrained": True, "podSetGroupName": "sameGroup"}
    wl = manifests.parse_object(_workload(unconstrained, leader=unconstrained))
    assert isinstance(wl, models.Workload)
    assert [ps.topology_request for ps in wl.spec.pod_sets] == [
        models.PodSetTopologyRequest(unconstrained=True, pod_set_group_name="sameGroup")
    ] * 2


def _pod_set(name: str, count: int, request: dict[str, object] | None) -> dict[str, object]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    out: dict[str, object] = {"name": name, "count": count, "template": {"spec": {"containers": containers}}}
    if request is not None:
        out["topologyRequest"] = request
    return out


def _with_pod_sets(*pod_sets: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w1", "namespace": "default"},
        "spec": {"queueName": "lq", "podSets": list(pod_sets)},
    }


RACK = "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("pod_sets", "job_problem"),
    [
        pytest.param(
            [_pod_set("leader", 1, {"required": RACK, "podSetGroupName": "1"}), _pod_set("workers", 3, None)],
            "must not be a number",
            id="numeric-name",
        ),
        pytest.param(
            [
                _pod_set("leader", 1, {"required": HOST, "podSetGroupName": "g"}),
                _pod_set("worker-a", 1, {"required": HOST, "podSetGroupName": "g"}),
                _pod_set("worker-b", 1, {"required": HOST, "podSetGroupName": "g"}),
            ],
            "must have exactly 2 pod sets, has 3",
            id="three-pod-sets",
        ),
        pytest.param(
            [_pod_set("leader", 1, {"required": HOST, "podSetGroupName": "g"})],
            "must have exactly 2 pod sets, has 1",
            id="one-pod-set",
        ),
        pytest.param(
            [
                _pod_set("a", 2, {"required": RACK, "podSetGroupName": "g"}),
                _pod_set("b", 3, {"required": RACK, "podSetGroupName": "g"}),
            ],
            "needs a pod set with count 1",
            id="no-count-1",
        ),
        pytest.param(
            [
                _pod_set("leader", 1, {"required": RACK, "podSetGroupName": "g"}),
                _pod_set("workers", 3, {"preferred": RACK, "podSetGroupName": "g"}),
            ],
            "must request the same topology",
            id="different-levels",
        ),
        pytest.param(
            [
                _pod_set("leader", 1, {"required": HOST, "podSetGroupName": "g"}),
                _pod_set("worker", 1, {"podSetGroupName": "g"}),
            ],
            "needs required or preferred topology",
            id="name-only",
        ),
    ],
)
def test_a_workload_object_has_no_group_rules(pod_sets: list[dict[str, object]], job_problem: str) -> None:
    """Each of these is accepted on a Workload object as written, and refused by the job rules."""
    wl = manifests.parse_object(_with_pod_sets(*pod_sets))
    assert isinstance(wl, models.Workload)
    with pytest.raises(tas_requests.TopologyRequestError) as caught:
        for ps in wl.spec.pod_sets:
            if ps.topology_request is not None:
                tas_requests.validate_topology_request(ps.topology_request, count=ps.count)
        tas_requests.validate_pod_set_groups(wl.spec.pod_sets)
    assert job_problem in caught.value.problem
