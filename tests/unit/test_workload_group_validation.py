"""A leader + workers group whose workers carry slices, or whose pod sets are unconstrained: refused on a
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
