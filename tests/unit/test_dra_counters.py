"""DRA counter sources (partitionable devices, SEMANTICS-ADVANCED F): the Configuration and the charge.

Kueue pkg/config/validation.go validateDeviceClassMappings (sources), pkg/dra/counters.go
GetCounterResourcesForWorkload: a request of a class with counter sources is charged the largest
``consumesCounters`` value of the counter among the devices of the source's driver that match the
source's, the class's and the request's selectors, times its count; not the device count.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import dra as dra_events
from kueue_es.events import manager_config, manifests, models
from kueue_es.scheduling import dra
from tests.builders import claim_workload

GI = 1024**3
CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: gpu.memory
    deviceClassNames: [gpu.example.com]
    sources:
    - counter:
        name: memory
        driver: gpu.example.com
        deviceSelector: {cel: {expression: "device.driver == 'gpu.example.com'"}}
"""


def _config(text: str = CONFIG, gates: str = "") -> models.Configuration:
    return manager_config.parse(text, feature_gates=gates).configuration


def _slice(
    *devices: tuple[str, str, str], generation: int = 1, count: int = 1, name: str = "s1"
) -> models.ResourceSlice:
    spec = {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": generation, "resourceSliceCount": count},
        "devices": [
            {
                "name": n,
                "attributes": {"profile": {"string": profile}},
                "consumesCounters": [{"counterSet": "cs", "counters": {"memory": {"value": memory}}}] if memory else [],
            }
            for n, profile, memory in devices
        ],
    }
    meta = {"name": name}
    return dra_events.dra_fact(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}
    ).resource_slice


def _template(count: int = 1, selector: str = "") -> models.ResourceClaimTemplate:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    spec = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    meta = {"name": "t", "namespace": "default"}
    return dra_events.dra_fact(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": meta, "spec": spec}
    ).resource_claim_template


def _charge(template, *slices, config=None) -> dra.Charge:
    workload = claim_workload("t", count=2)
    dc = models.DeviceClass(metadata=models.ObjectMeta(name="gpu.example.com"))
    return dra.charge(
        workload,
        config=config or _config(),
        device_classes={"gpu.example.com": dc},
        claim_templates={("default", "t"): template},
        resource_slices={s.metadata.name: s for s in slices},
    )


PARTITIONS = _slice(("gpu-0-1g", "1g.40gb", "40Gi"), ("gpu-0-2g", "2g.80gb", "80Gi"))
REQ = "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]"


def test_counter_sources_are_read_from_the_configuration() -> None:
    [mapping] = _config().resources.device_class_mappings
    assert mapping.counters == [
        models.CounterSource(
            name="memory", driver="gpu.example.com", device_selector="device.driver == 'gpu.example.com'"
        )
    ]


@pytest.mark.parametrize(
    ("change", "gates", "problem"),
    [
        (
            (
                "counter:",
                "capacity: {name: memory, driver: d, deviceSelector: {cel: {expression: 'true'}}}\n      counter:",
            ),
            "KueueDRAIntegrationConsumableCapacity=true",
            "exactly one source type must be set per entry",
        ),
        (("counter:", "capacity:"), "", "capacity sources require KueueDRAIntegrationConsumableCapacity to be enabled"),
        (
            (
                "    sources:\n",
                "    sources:\n    - capacity: {name: memory, driver: d, deviceSelector: {cel: {expression: 'true'}}}\n",
            ),
            "KueueDRAIntegrationConsumableCapacity=true",
            "cannot mix counter and capacity sources in the same mapping",
        ),
        (
            ("", ""),
            "KueueDRAIntegrationPartitionableDevices=false",
            "counter sources require KueueDRAIntegrationPartitionableDevices to be enabled",
        ),
        (("name: memory", "name: Memory_1"), "", "is not a DNS-1123 label"),
        (("== 'gpu.example.com'", "== "), "", "CEL compilation failed"),
    ],
)
def test_counter_sources_are_checked_as_kueue_checks_them(change: tuple[str, str], gates: str, problem: str) -> None:
    text = CONFIG.replace(*change) if change[0] else CONFIG
    with pytest.raises(manifests.ManifestError, match=problem):
        _config(text, gates)


def test_a_class_may_be_mapped_twice_only_by_counter_sources_of_different_counters() -> None:
    second = """  - name: gpu.compute
    deviceClassNames: [gpu.example.com]
    sources:
    - counter:
        name: COUNTER
        driver: gpu.example.com
        deviceSelector: {cel: {expression: "true"}}
"""
    config = _config(CONFIG + second.replace("COUNTER", "compute"))
    assert [m.name for m in config.resources.device_class_mappings] == ["gpu.memory", "gpu.compute"]
    with pytest.raises(manifests.ManifestError, match='already has a counter source for counter "memory"'):
        _config(CONFIG + second.replace("COUNTER", "memory"))


def test_the_largest_consumed_counter_of_the_matching_devices_times_the_count_is_charged() -> None:
    assert _charge(_template(), PARTITIONS).charged == {"main": {"gpu.memory": 80 * GI}}
    small = _template(selector='device.attributes["gpu.example.com"].profile == "1g.40gb"')
    assert _charge(small, PARTITIONS).charged == {"main": {"gpu.memory": 40 * GI}}
    assert _charge(_template(count=2), PARTITIONS).charged == {"main": {"gpu.memory": 160 * GI}}


def test_counter_refusals_are_kueues() -> None:
    assert _charge(_template(count=3), PARTITIONS).problem == (
        f"{REQ}: Internal error: insufficient matching devices for counter driver: 2 device(s) match but 3 requested"
    )
    bare = _slice(("gpu-0", "full", ""))
    assert _charge(_template(), bare).problem == (
        f'{REQ}: Internal error: matched devices have no consumesCounters entry for counter "memory"'
    )


def test_an_incomplete_or_older_pool_is_not_read() -> None:
    incomplete = _slice(("gpu-0-1g", "1g.40gb", "40Gi"), count=2)
    assert "0 device(s) match but 1 requested" in _charge(_template(), incomplete).problem
    old = _slice(("gpu-0-2g", "2g.80gb", "80Gi"), generation=1, name="old")
    new = _slice(("gpu-0-1g", "1g.40gb", "40Gi"), generation=2, name="new")
    assert _charge(_template(), old, new).charged == {"main": {"gpu.memory": 40 * GI}}


def test_with_the_gate_off_the_mapping_charges_devices() -> None:
    config = _config()
    off = models.Configuration(
        resources=config.resources, feature_gates={"KueueDRAIntegrationPartitionableDevices": False}
    )
    assert _charge(_template(count=2), PARTITIONS, config=off).charged == {"main": {"gpu.memory": 2}}


CAPACITY_CONFIG = CONFIG.replace("counter:", "capacity:")
SHARED = dra_events.dra_fact(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "shared"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "allowMultipleAllocations": True,
                    "capacity": {
                        "memory": {
                            "value": "80Gi",
                            "requestPolicy": {
                                "default": "8Gi",
                                "validRange": {"min": "4Gi", "max": "40Gi", "step": "4Gi"},
                            },
                        }
                    },
                }
            ],
        },
    }
).resource_slice


def _capacity_template(request: str = "") -> models.ResourceClaimTemplate:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com"}
    if request:
        exactly["capacity"] = {"requests": {"memory": request}}
    spec = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    meta = {"name": "t", "namespace": "default"}
    return dra_events.dra_fact(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": meta, "spec": spec}
    ).resource_claim_template


def test_capacity_sources_charge_the_requested_capacity_rounded_by_the_device_policy() -> None:
    config = _config(CAPACITY_CONFIG, "KueueDRAIntegrationConsumableCapacity=true")
    assert config.resources.device_class_mappings[0].capacities[0].name == "memory"
    assert _charge(_capacity_template("10Gi"), SHARED, config=config).charged == {"main": {"gpu.memory": 12 * GI}}
    assert _charge(_capacity_template(), SHARED, config=config).charged == {"main": {"gpu.memory": 8 * GI}}
    assert _charge(_capacity_template("50Gi"), SHARED, config=config).problem == (
        f"{REQ}: Invalid value: null: capacity request cannot be satisfied by any matched device's RequestPolicy "
        'for dimension "memory"'
    )
    assert _charge(_capacity_template(), PARTITIONS, config=config).problem == (
        f'{REQ}: Internal error: matched devices have no capacity dimension "memory"'
    )
