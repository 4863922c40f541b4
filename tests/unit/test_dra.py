"""DRA device quota (SEMANTICS-ADVANCED F): facts from manifests, the Configuration's mappings, the charge.

The charge and refusals follow Kueue's pkg/dra (claims.go countDevicesPerClass,
GetResourceRequestsForResourceClaimTemplates, extended_resources.go) and the messages its
integration tests check (test/integration/singlecluster/controller/dra/dra_test.go).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kueue_es.events import dra as dra_events
from kueue_es.events import manager_config, manifests, models, types
from kueue_es.jobframework import jobs
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios import specs
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling import dra, explain, queues

MAPPED = models.Configuration(
    resources=models.ResourcesConfig(
        device_class_mappings=[
            models.DeviceClassMapping(name="example.com/gpu", device_class_names=["gpu.example.com"])
        ]
    )
)


def _template(name: str, *requests: dict[str, Any]) -> models.ResourceClaimTemplate:
    fact = dra_events.dra_fact(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": list(requests)}}},
        }
    )
    assert isinstance(fact, types.ResourceClaimTemplateObserved)
    return fact.resource_claim_template


def _workload(count: int = 1, *, claims: list[dict[str, str]] | None = None, requests: dict[str, str] | None = None):
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}]}
    if claims is not None:
        spec["resourceClaims"] = claims
    obj = manifests.parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count, "template": {"spec": spec}}]},
        }
    )
    assert isinstance(obj, models.Workload)
    return obj


def _charge(workload: models.Workload, *templates: models.ResourceClaimTemplate, config=MAPPED, classes=()):
    return dra.charge(
        workload,
        config=config,
        device_classes={dc.metadata.name: dc for dc in classes},
        claim_templates={(t.metadata.namespace, t.metadata.name): t for t in templates},
    )


TPL = [{"name": "gpu", "resourceClaimTemplateName": "gpus"}]


def test_the_api_server_defaults_a_request_to_one_device_of_exact_count() -> None:
    template = _template("gpus", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}})
    exact = template.requests[0].exactly
    assert exact is not None
    assert (exact.allocation_mode, exact.count, exact.admin_access) == ("ExactCount", 1, False)


def test_each_exact_count_request_charges_its_count_per_pod_and_admin_access_is_free() -> None:
    template = _template(
        "gpus",
        {"name": "a", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}},
        {"name": "b", "exactly": {"deviceClassName": "gpu.example.com"}},
        {"name": "watch", "exactly": {"deviceClassName": "gpu.example.com", "adminAccess": True, "count": 5}},
    )
    workload = _workload(3, claims=TPL)
    result = _charge(workload, template)
    assert result.problem == ""
    assert result.charged == {"main": {"example.com/gpu": 3}}
    requests = queues.pod_set_requests(workload, cq=_cq(), config=MAPPED, devices=result)
    assert requests[0].requests == {"cpu": 1000, "example.com/gpu": 3}
    assert requests[0].totals()["example.com/gpu"] == 9  # x 3 pods


def _cq() -> models.ClusterQueue:
    obj = manifests.parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "example.com/gpu"],
                        "flavors": [
                            {
                                "name": "f",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 9},
                                    {"name": "example.com/gpu", "nominalQuota": 9},
                                ],
                            }
                        ],
                    }
                ]
            },
        }
    )
    assert isinstance(obj, models.ClusterQueue)
    return obj


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}},
            "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.allocationMode: "
            "Invalid value: \"All\": ResourceClaimTemplate gpus: AllocationMode 'All' is not supported",
        ),
        (
            {"name": "gpu", "firstAvailable": [{"name": "x", "deviceClassName": "gpu.example.com"}]},
            "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Invalid value: null: "
            "ResourceClaimTemplate gpus: FirstAvailable device selection is not supported",
        ),
        (
            {"name": "gpu", "exactly": {"deviceClassName": "fpga.example.com"}},
            "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "
            '"DeviceClass fpga.example.com is not mapped in DRA configuration for podset main"',
        ),
    ],
    ids=["allocation-mode-all", "first-available", "unmapped"],
)
def test_what_kueue_cannot_count_is_refused_with_its_message(request_: dict[str, Any], message: str) -> None:
    result = _charge(_workload(claims=TPL), _template("gpus", request_))
    assert result.problem == message
    assert result.charged == {}


def test_a_shared_resource_claim_and_dra_with_the_gate_off_are_refused() -> None:
    shared = _workload(claims=[{"name": "gpu", "resourceClaimName": "test-rc"}])
    assert _charge(shared).problem == "KueueDRAIntegration feature does not support use of resource claims"
    off = models.Configuration(resources=MAPPED.resources, feature_gates={"KueueDRAIntegration": False})
    assert _charge(_workload(claims=TPL), config=off).problem == (
        "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
    )
    quiet = models.Configuration(
        feature_gates={"KueueDRAIntegration": False, "KueueDRARejectWorkloadsWhenDRADisabled": False}
    )
    assert _charge(_workload(claims=TPL), config=quiet) is dra.NO_CHARGE


def test_an_extended_resource_a_device_class_backs_is_charged_under_its_mapping_and_dropped() -> None:
    older = models.DeviceClass(
        metadata=models.ObjectMeta(name="a-old", creation_timestamp_ms=1), extended_resource_name="example.com/gpu"
    )
    newer = models.DeviceClass(
        metadata=models.ObjectMeta(name="gpu.example.com", creation_timestamp_ms=2),
        extended_resource_name="example.com/gpu",
    )
    config = models.Configuration(
        resources=models.ResourcesConfig(
            device_class_mappings=[models.DeviceClassMapping(name="gpus", device_class_names=["gpu.example.com"])]
        )
    )
    workload = _workload(2, requests={"cpu": "1", "example.com/gpu": "2"})
    result = _charge(workload, config=config, classes=(older, newer))  # the newest class wins
    assert result.charged == {"main": {"gpus": 2}}
    assert result.replaced == {"main": frozenset({"example.com/gpu"})}
    assert dra.apply({"cpu": 1000, "example.com/gpu": 2}, workload.spec.pod_sets[0], result) == {"cpu": 1000, "gpus": 2}
    # not mapped: charged under the extended name itself; with the gate off: an ordinary resource
    assert _charge(workload, classes=(older,)).charged == {"main": {"example.com/gpu": 2}}
    gate_off = models.Configuration(feature_gates={"KueueDRAIntegrationExtendedResource": False})
    assert _charge(workload, config=gate_off, classes=(newer,)) is dra.NO_CHARGE


def test_a_job_pod_templates_resource_claims_reach_the_workload() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "uid": "u1", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                }
            },
        },
    }
    workload = jobs.job_to_workload(job)
    assert workload.spec.pod_sets[0].resource_claims == [
        models.PodResourceClaim(name="gpu", resource_claim_template_name="single-gpu")
    ]


def _config(mappings: str) -> str:
    return f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nresources:\n  deviceClassMappings:\n{mappings}"


def test_the_configuration_maps_device_classes_as_kueue_validates_them() -> None:
    parsed = manager_config.parse(
        _config("  - {name: example.com/gpu, deviceClassNames: [a.example.com, b.example.com]}\n")
    )
    resources = parsed.configuration.resources
    assert resources is not None
    assert resources.device_class_mappings == [
        models.DeviceClassMapping(name="example.com/gpu", device_class_names=["a.example.com", "b.example.com"])
    ]
    bad = {
        "  - {name: x, deviceClassNames: [a.example.com]}\n  - {name: y, deviceClassNames: [a.example.com]}\n": (
            "resources.deviceClassMappings[1].deviceClassNames[0]",
            "device class already mapped to resource x",
        ),
        "  - {name: x, deviceClassNames: [a.example.com, a.example.com]}\n": (
            "resources.deviceClassMappings[0].deviceClassNames[1]",
            "Duplicate value",
        ),
        "  - {name: x, deviceClassNames: []}\n": (
            "resources.deviceClassMappings[0].deviceClassNames",
            "Required value",
        ),
        "  - {name: x, deviceClassNames: [a]}\n  - {name: x, deviceClassNames: [b]}\n": (
            "resources.deviceClassMappings[1].name",
            "Duplicate value",
        ),
    }
    for text, (field, problem) in bad.items():
        with pytest.raises(manifests.ManifestError) as err:
            manager_config.parse(_config(text))
        assert err.value.field == field
        assert problem in err.value.problem


def test_the_fold_keeps_the_dra_objects_and_explain_shows_the_charge() -> None:
    state = ClusterState()
    apply(state, types.ConfigurationObserved(configuration=MAPPED), seq=1)
    template = _template("gpus", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}})
    apply(state, types.ResourceClaimTemplateObserved(resource_claim_template=template), seq=2)
    assert state.claim_templates == {("default", "gpus"): template}
    workload = _workload(2, claims=TPL)
    apply(state, types.WorkloadObserved(workload=workload), seq=3)
    assert dra.describe(workload, dra.charge_in(state, workload)) == [
        "pod set main: example.com/gpu 2 a pod x 2 pods, from ResourceClaimTemplate gpus"
    ]
    assert explain.needs(state, "default/w").devices == (
        "pod set main: example.com/gpu 2 a pod x 2 pods, from ResourceClaimTemplate gpus",
    )
    version = state.devices_version
    apply(state, types.ObjectDeleted(kind="ResourceClaimTemplate", namespace="default", name="gpus"), seq=4)
    assert state.devices_version > version
    assert 'resourceclaimtemplates.resource.k8s.io "gpus" not found' in dra.charge_in(state, workload).problem


# Kueue #11929 (commit 8edd001ba3): a DeviceClass deleted requeues the pending workloads that asked for its
# extended resource, evaluated again without the DRA translation (dra_test.go 'Should requeue inadmissible
# workload when DeviceClass is deleted'; the scenario dra/device-class-deleted-requeues-pending admits one).

_DELETED_CLASS = Path(__file__).parents[1] / "scenarios" / "dra" / "device-class-deleted-requeues-pending.yaml"


def test_a_deleted_device_class_requeues_the_pending_workload_without_the_translation() -> None:
    """As Kueue's test: the ClusterQueue covers only the mapped gpu-claims, so dc-delete-pending waits for
    gpu-claims; once the DeviceClass is gone it asks for example.com/gpu itself, and its message names it."""
    text = _DELETED_CLASS.read_text()
    text = text.replace("coveredResources: [gpu-claims, example.com/gpu]", "coveredResources: [gpu-claims]")
    text = text.replace(", {name: example.com/gpu, nominalQuota: 4}", "")
    scenario = msgspec.structs.replace(parse_scenario(text), expect=specs.Expect())
    before = run_scenario(msgspec.structs.replace(scenario, events=())).state.workloads["default/dc-delete-pending"]
    assert before.reservation is None
    assert "insufficient unused quota for gpu-claims" in before.pending_message
    after = run_scenario(scenario).state.workloads["default/dc-delete-pending"]
    assert after.reservation is None
    assert after.pending_message == (
        "couldn't assign flavors to pod set main: resource example.com/gpu unavailable in ClusterQueue"
    )
