"""DRA CEL device selectors (SEMANTICS-ADVANCED F): compiled, matched against ResourceSlices, Kueue's messages.

Kueue pkg/dra/claims.go: countDevicesPerClass refuses a request whose selector does not compile;
validateCELSelectorsAgainstDevices resolves the request's DeviceClass, counts the devices of all
ResourceSlices matching the class's and the request's selectors (a device serves one request of
the claim) and refuses the workload when fewer match than requested (claims_test.go cases).
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import dra as dra_events
from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scheduling import dra, dra_cel
from tests.builders import claim_workload

MAPPED = models.Configuration(
    resources=models.ResourcesConfig(
        device_class_mappings=[
            models.DeviceClassMapping(name="example.com/gpu", device_class_names=["gpu.example.com"])
        ]
    )
)
WHERE = "spec.podSets[0].template.spec.resourceClaims[0]"


def _fact(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> Any:
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return dra_events.dra_fact({"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": meta, "spec": spec})


def _template(*requests: dict[str, Any]) -> models.ResourceClaimTemplate:
    fact = _fact("ResourceClaimTemplate", "gpus", {"spec": {"devices": {"requests": list(requests)}}}, "default")
    return fact.resource_claim_template


def _class(selectors: list[str] = ()) -> models.DeviceClass:  # type: ignore[assignment]
    spec = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    return _fact("DeviceClass", "gpu.example.com", spec).device_class


def _slice(name: str, *models_: str, driver: str = "gpu.example.com") -> models.ResourceSlice:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": m},
                "ext.example.com/rank": {"int": i},
                "driverVersion": {"version": "1.2.3"},
            },
            "capacity": {"memory": {"value": "80Gi" if m == "a100" else "16Gi"}},
        }
        for i, m in enumerate(models_)
    ]
    spec = {"driver": driver, "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1}, "devices": devices}
    return _fact("ResourceSlice", name, spec).resource_slice


def _request(count: int, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": "gpu", "exactly": exactly}


def _workload() -> models.Workload:
    obj = claim_workload("gpus")
    assert isinstance(obj, models.Workload)
    return obj


def _charge(template: models.ResourceClaimTemplate, *slices: models.ResourceSlice, device_class=None) -> dra.Charge:
    device_class = device_class or _class()
    return dra.charge(
        _workload(),
        config=MAPPED,
        device_classes={device_class.metadata.name: device_class},
        claim_templates={("default", "gpus"): template},
        resource_slices={s.metadata.name: s for s in slices},
    )


def test_selectors_and_slices_become_facts() -> None:
    template = _template(_request(1, 'device.attributes["gpu.example.com"].model == "a100"'))
    assert template.requests[0].exactly.cel == ['device.attributes["gpu.example.com"].model == "a100"']
    dc = _class(['device.driver == "gpu.example.com"'])
    assert dc.selectors == ['device.driver == "gpu.example.com"']
    slc = _slice("s1", "a100")
    assert slc.driver == "gpu.example.com" and slc.pool == "node-1"
    assert slc.devices[0].attributes["model"].string_value == "a100"
    assert slc.devices[0].capacity == {"memory": "80Gi"}


def test_enough_matching_devices_charge_the_request() -> None:
    template = _template(_request(2, 'device.attributes["gpu.example.com"].model == "a100"'))
    result = _charge(template, _slice("s1", "a100", "t4", "a100"))
    assert result.problem == ""
    assert result.charged == {"main": {"example.com/gpu": 2}}


def test_fewer_matching_devices_than_requested_refuse_with_kueues_message() -> None:
    template = _template(_request(2, 'device.attributes["gpu.example.com"].model == "a100"'))
    result = _charge(template, _slice("s1", "a100", "t4"))
    assert result.problem == (
        f"{WHERE}.devices.requests[0].exactly.selectors: Internal error: ResourceClaimTemplate gpus: "
        "insufficient matching devices for CEL selector in DeviceClass gpu.example.com: "
        "1 device(s) match in the cluster but 2 requested"
    )


def test_the_device_class_selectors_filter_devices_too() -> None:
    template = _template(_request(1, 'device.attributes["ext.example.com"].rank == 0'))
    other = _slice("s2", "a100", driver="other.example.com")
    assert _charge(template, other).problem == ""  # no class selector: any driver's device counts
    picky = _class(['device.driver == "gpu.example.com"'])
    assert "0 device(s) match in the cluster but 1 requested" in _charge(template, other, device_class=picky).problem
    assert _charge(template, other, _slice("s1", "a100"), device_class=picky).problem == ""


def test_a_device_serves_one_request_of_the_claim() -> None:
    a100 = 'device.attributes["gpu.example.com"].model == "a100"'
    template = _template(_request(1, a100), {"name": "second", "exactly": _request(1, a100)["exactly"]})
    result = _charge(template, _slice("s1", "a100"))
    assert "devices.requests[1].exactly.selectors: Internal error" in result.problem
    assert _charge(template, _slice("s1", "a100", "a100")).charged == {"main": {"example.com/gpu": 2}}


def test_a_selector_that_does_not_compile_is_refused_before_any_device_is_read() -> None:
    template = _template(_request(1, "device.attributes[ == "))
    result = _charge(template, _slice("s1", "a100"))
    assert result.problem.startswith(
        f"{WHERE}.devices.requests[0].exactly.selectors: Invalid value: null: ResourceClaimTemplate gpus: "
        'devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "device.attributes[ == ": '
        "CEL compilation failed: "
    ), result.problem
    assert result.charged == {}


def test_a_device_class_selector_that_does_not_compile_is_refused() -> None:
    template = _template(_request(1, "true"))
    result = _charge(template, _slice("s1", "a100"), device_class=_class(["device.driver =="]))
    assert result.problem.startswith(
        f'{WHERE}.devices.requests[0][0].cel.expression: Invalid value: "device.driver ==": ResourceClaimTemplate '
        "gpus: DeviceClass gpu.example.com has invalid CEL selector: "
    ), result.problem


def test_a_selector_failing_on_a_device_is_refused_and_unknown_domains_are_empty() -> None:
    template = _template(_request(1, 'device.attributes["gpu.example.com"].nope == "x"'))
    result = _charge(template, _slice("s1", "a100"))
    assert result.problem.startswith(
        f"{WHERE}.devices.requests[0].exactly.selectors: Invalid value: null: ResourceClaimTemplate gpus: "
        "CEL evaluation failed for DeviceClass gpu.example.com: "
    ), result.problem
    absent = _template(_request(1, '!("model" in device.attributes["unknown.example.com"])'))
    assert _charge(absent, _slice("s1", "a100")).problem == ""


def test_kubernetes_cel_libraries_quantity_and_semver() -> None:
    device = dra_cel.devices([_slice("s1", "a100")])[0]
    for expression, expected in [
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("64Gi"))', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("64Gi"))', False),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('device.attributes["ext.example.com"].rank == 0', True),
    ]:
        compiled = dra_cel.compile_selector(expression)
        assert not compiled.error, compiled.error
        assert dra_cel.matches([compiled], device) is expected, expression


def test_a_resource_slice_change_invalidates_the_charge_and_requeues() -> None:
    state = ClusterState()
    version = state.devices_version
    apply(state, types.ResourceSliceObserved(resource_slice=_slice("s1", "a100")), seq=1)
    assert set(state.resource_slices) == {"s1"} and state.devices_version > version
    apply(state, types.ObjectDeleted(kind="ResourceSlice", namespace="", name="s1"), seq=2)
    assert state.resource_slices == {}
