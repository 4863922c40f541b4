"""Delayed topology requests (SEMANTICS-ADVANCED A.5.4, A.9): which flavors delay, and the
backward-compatible encoding of ``PodSetAssignment.delayedTopologyRequest``."""

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling.tas import cycle as topology


def _state(
    *checks: tuple[str, str], on_flavors: dict[str, list[str]] | None = None
) -> tuple[ClusterState, models.ClusterQueue]:
    state = ClusterState()
    for name, controller in checks:
        obj = manifests.parse_object(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": name},
                "spec": {"controllerName": controller},
            }
        )
        state.admission_checks[name] = obj  # type: ignore[assignment]
    rules = [{"name": n, "onFlavors": (on_flavors or {}).get(n, [])} for n, _ in checks]
    cq = manifests.parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "tas-a", "resources": [{"name": "cpu", "nominalQuota": 4}]},
                            {"name": "tas-b", "resources": [{"name": "cpu", "nominalQuota": 4}]},
                        ],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": rules},
            },
        }
    )
    assert isinstance(cq, models.ClusterQueue)
    return state, cq


def test_provisioning_check_on_every_flavor_delays_them_all() -> None:
    state, cq = _state(("prov", topology.PROVISIONING_REQUEST_CONTROLLER))
    assert topology.delayed_flavors(state, cq) == {"tas-a", "tas-b"}


def test_provisioning_check_on_one_flavor_delays_only_that_one() -> None:
    state, cq = _state(("prov", topology.PROVISIONING_REQUEST_CONTROLLER), on_flavors={"prov": ["tas-b"]})
    assert topology.delayed_flavors(state, cq) == {"tas-b"}


def test_other_controllers_and_missing_checks_do_not_delay() -> None:
    state, cq = _state(("custom", "example.com/custom"), ("gone", topology.PROVISIONING_REQUEST_CONTROLLER))
    del state.admission_checks["gone"]
    assert topology.delayed_flavors(state, cq) == frozenset()


def test_pod_set_assignment_encoding_is_backward_compatible() -> None:
    plain = types.PodSetAssignment(name="one", flavors={"cpu": "tas-a"}, resource_usage={"cpu": 1000}, count=1)
    encoded = msgspec.json.encode(plain)
    assert b"delayedTopologyRequest" not in encoded  # old bytes unchanged
    old = b'{"name":"one","flavors":{"cpu":"tas-a"},"resourceUsage":{"cpu":1000},"count":1}'
    assert msgspec.json.decode(old, type=types.PodSetAssignment) == plain
    delayed = msgspec.structs.replace(plain, delayed_topology_request=topology.PENDING)
    round_trip = msgspec.json.decode(msgspec.json.encode(delayed), type=types.PodSetAssignment)
    assert round_trip.delayed_topology_request == "Pending"
