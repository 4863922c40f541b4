"""Dynamic Resource Allocation objects to facts, and a pod template's resource claims.

Why this module exists: Kueue charges quota for the devices a workload's pods claim
(SEMANTICS-ADVANCED F; Kueue pkg/dra). To decide that on the log alone, the log must
hold what Kueue reads at admission time: the resource.k8s.io/v1 DeviceClasses (their
``spec.extendedResourceName``) and ResourceClaimTemplates (their device requests), and
each pod set's ``spec.resourceClaims``. This module turns those manifests into the
models the facts carry (:class:`kueue_es.events.models.DeviceClass`,
:class:`~kueue_es.events.models.ResourceClaimTemplate`,
:class:`~kueue_es.events.models.PodResourceClaim`); the charge itself is
:mod:`kueue_es.scheduling.dra`. Pure: for the watcher, the scenario loader and the
manifests' Workload conversion.

Defaults are the API server's (k8s.io/api/resource/v1): a device request's
``allocationMode`` is ExactCount and its ``count`` 1 when unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kueue_es.events import manifests, models, quantities, types

RESOURCE_API = "resource.k8s.io/v1"
#: The DRA kinds whose objects go on the log, by (apiVersion, kind).
DRA_KINDS = frozenset(
    {(RESOURCE_API, "DeviceClass"), (RESOURCE_API, "ResourceClaimTemplate"), (RESOURCE_API, "ResourceSlice")}
)
DraFact = types.DeviceClassObserved | types.ResourceClaimTemplateObserved | types.ResourceSliceObserved


def dra_fact(manifest: Mapping[str, Any]) -> DraFact:
    """The fact for a resource.k8s.io/v1 DeviceClass, ResourceClaimTemplate or ResourceSlice manifest.

    Raises :class:`kueue_es.events.manifests.ManifestError` naming the field for another kind,
    a missing or invalid name, a device request that is not a mapping or has a non-integer
    ``count``, a selector without a string ``cel.expression``, or a ResourceSlice without
    ``spec.driver``.
    """
    raw = dict(manifest)
    kind, name = manifests.describe(raw)
    if (raw.get("apiVersion"), kind) not in DRA_KINDS:
        raise manifests.ManifestError(
            kind=kind, name=name, field="apiVersion/kind", problem=f"is not a {RESOURCE_API} DRA kind"
        )
    meta = manifests.normalize_meta(raw.get("metadata"), kind=kind, name=name)
    for unread in ("labels", "annotations", "generation"):  # quota reads none: a change of them is no new fact
        meta.pop(unread, None)
    spec = raw.get("spec") or {}
    if not isinstance(spec, dict):
        raise manifests.ManifestError(kind=kind, name=name, field="spec", problem="must be a mapping")
    if kind == "DeviceClass":
        extended = spec.get("extendedResourceName") or ""
        if not isinstance(extended, str):
            raise manifests.ManifestError(
                kind=kind, name=name, field="spec.extendedResourceName", problem="must be a string"
            )
        return types.DeviceClassObserved(
            device_class=models.DeviceClass(
                metadata=msgspec.convert(meta, models.ObjectMeta),
                extended_resource_name=extended,
                selectors=cel_expressions(spec.get("selectors"), where="spec.selectors", kind=kind, name=name),
            )
        )
    if kind == "ResourceSlice":
        return types.ResourceSliceObserved(resource_slice=resource_slice(meta, spec, name=name))
    meta.setdefault("namespace", "default")
    claim_spec = spec.get("spec") or {}
    devices = claim_spec.get("devices") if isinstance(claim_spec, dict) else None
    requests = (devices or {}).get("requests") if isinstance(devices, dict) else None
    return types.ResourceClaimTemplateObserved(
        resource_claim_template=models.ResourceClaimTemplate(
            metadata=msgspec.convert(meta, models.ObjectMeta),
            requests=device_requests(requests, where="spec.spec.devices.requests", kind=kind, name=name),
        )
    )


def device_requests(raw: Any, *, where: str, kind: str, name: str) -> list[models.DeviceRequest]:
    """``devices.requests`` of a ResourceClaim(Template) spec, with the API server's defaults."""
    out = []
    for index, item in enumerate(_list(raw, where=where, kind=kind, name=name)):
        field = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise manifests.ManifestError(kind=kind, name=name, field=field, problem="must be a mapping")
        exactly = item.get("exactly")
        first = item.get("firstAvailable")
        exact = None
        if isinstance(exactly, dict):
            count = exactly.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise manifests.ManifestError(
                    kind=kind, name=name, field=f"{field}.exactly.count", problem="must be a non-negative integer"
                )
            selectors = exactly.get("selectors")
            exact = models.ExactDeviceRequest(
                device_class_name=str(exactly.get("deviceClassName") or ""),
                allocation_mode=str(exactly.get("allocationMode") or "ExactCount"),
                count=count,
                admin_access=exactly.get("adminAccess") is True,
                selectors=len(selectors) if isinstance(selectors, list) else 0,
                cel=cel_expressions(selectors, where=f"{field}.exactly.selectors", kind=kind, name=name),
                capacity_requests=_quantities(
                    (exactly.get("capacity") or {}).get("requests"),
                    where=f"{field}.exactly.capacity.requests",
                    kind=kind,
                    name=name,
                ),
            )
        out.append(
            models.DeviceRequest(
                name=str(item.get("name") or ""),
                exactly=exact,
                first_available=len(first) if isinstance(first, list) else 0,
            )
        )
    return out


def _list(raw: Any, *, where: str, kind: str, name: str) -> list[Any]:
    """``raw`` as a list (None: empty); raises :class:`~kueue_es.events.manifests.ManifestError` otherwise."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise manifests.ManifestError(kind=kind, name=name, field=where, problem="must be a list")
    return raw


def cel_expressions(raw: Any, *, where: str, kind: str, name: str) -> list[str]:
    """The ``cel.expression`` of each entry of a ``selectors`` list (DeviceClass or device request), in
    order; raises :class:`~kueue_es.events.manifests.ManifestError` for an entry without one."""
    out = []
    for index, item in enumerate(_list(raw, where=where, kind=kind, name=name)):
        cel = item.get("cel") if isinstance(item, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if not isinstance(expression, str):
            raise manifests.ManifestError(
                kind=kind, name=name, field=f"{where}[{index}].cel.expression", problem="must be a string"
            )
        out.append(expression)
    return out


def resource_slice(meta: dict[str, Any], spec: Mapping[str, Any], *, name: str) -> models.ResourceSlice:
    """A ResourceSlice model from its normalized metadata and ``spec``: the driver, the pool's name and
    each device's attributes and capacity (quantities canonical, as the API server stores them)."""
    kind = "ResourceSlice"
    driver = spec.get("driver")
    if not isinstance(driver, str) or not driver:
        raise manifests.ManifestError(kind=kind, name=name, field="spec.driver", problem="must be a non-empty string")
    raw_pool = spec.get("pool")
    pool: Mapping[str, Any] = raw_pool if isinstance(raw_pool, dict) else {}
    devices = spec.get("devices") or []
    if not isinstance(devices, list):
        raise manifests.ManifestError(kind=kind, name=name, field="spec.devices", problem="must be a list")
    out = []
    for index, device in enumerate(devices):
        where = f"spec.devices[{index}]"
        if not isinstance(device, dict) or not isinstance(device.get("name"), str):
            raise manifests.ManifestError(kind=kind, name=name, field=where, problem="must be a mapping with a name")
        attributes = {}
        for key, value in (device.get("attributes") or {}).items():
            try:
                attributes[str(key)] = msgspec.convert(value, models.DeviceAttribute)
            except msgspec.ValidationError as err:
                raise manifests.ManifestError(
                    kind=kind, name=name, field=f"{where}.attributes[{key}]", problem=str(err)
                ) from err
        capacity = {}
        policies = {}
        for key, value in (device.get("capacity") or {}).items():
            raw_value = value.get("value") if isinstance(value, dict) else None
            try:
                capacity[str(key)] = quantities.canonical(raw_value)  # type: ignore[arg-type]
            except (quantities.QuantityError, TypeError) as err:
                raise manifests.ManifestError(
                    kind=kind, name=name, field=f"{where}.capacity[{key}].value", problem="must be a quantity"
                ) from err
            policy = value.get("requestPolicy") if isinstance(value, dict) else None
            if isinstance(policy, dict):
                policies[str(key)] = _policy(policy, where=f"{where}.capacity[{key}].requestPolicy", name=name)
        consumes: dict[str, str] = {}
        for k, counter_set in enumerate(
            _list(device.get("consumesCounters"), where=f"{where}.consumesCounters", kind=kind, name=name)
        ):
            counters = counter_set.get("counters") if isinstance(counter_set, dict) else None
            for key, value in (counters or {}).items():
                raw_value = value.get("value") if isinstance(value, dict) else None
                try:
                    amount = quantities.parse_decimal(raw_value)  # type: ignore[arg-type]
                except (quantities.QuantityError, TypeError) as err:
                    raise manifests.ManifestError(
                        kind=kind,
                        name=name,
                        field=f"{where}.consumesCounters[{k}].counters[{key}].value",
                        problem="must be a quantity",
                    ) from err
                if key not in consumes or amount > quantities.parse_decimal(consumes[key]):
                    consumes[str(key)] = quantities.canonical(raw_value)  # type: ignore[arg-type]
        out.append(
            models.SliceDevice(
                name=device["name"],
                attributes=attributes,
                capacity=capacity,
                capacity_policies=policies,
                consumes_counters=consumes,
            )
        )
    generation = pool.get("generation", 0)
    count = pool.get("resourceSliceCount", 1)
    return models.ResourceSlice(
        metadata=msgspec.convert(meta, models.ObjectMeta),
        driver=driver,
        pool=str(pool.get("name") or ""),
        pool_generation=generation if isinstance(generation, int) else 0,
        pool_slice_count=count if isinstance(count, int) else 1,
        devices=out,
    )


def _quantities(raw: Any, *, where: str, kind: str, name: str) -> dict[str, str]:
    """A map of quantities (canonical); raises :class:`~kueue_es.events.manifests.ManifestError` otherwise."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise manifests.ManifestError(kind=kind, name=name, field=where, problem="must be a mapping")
    out = {}
    for key, value in raw.items():
        try:
            out[str(key)] = quantities.canonical(value)
        except (quantities.QuantityError, TypeError) as err:
            raise manifests.ManifestError(
                kind=kind, name=name, field=f"{where}[{key}]", problem="must be a quantity"
            ) from err
    return out


def _policy(raw: dict[str, Any], *, where: str, name: str) -> models.CapacityPolicy:
    """A device capacity's ``requestPolicy`` (``default``, ``validValues``, ``validRange``)."""
    one = _quantities({k: v for k, v in raw.items() if k == "default"}, where=where, kind="ResourceSlice", name=name)
    valid_range = raw.get("validRange") if isinstance(raw.get("validRange"), dict) else {}
    bounds = _quantities(valid_range, where=f"{where}.validRange", kind="ResourceSlice", name=name)
    values = [
        _quantities({"v": v}, where=f"{where}.validValues", kind="ResourceSlice", name=name)["v"]
        for v in _list(raw.get("validValues"), where=f"{where}.validValues", kind="ResourceSlice", name=name)
    ]
    return models.CapacityPolicy(
        default=one.get("default"),
        valid_values=values,
        valid_min=bounds.get("min"),
        valid_max=bounds.get("max"),
        valid_step=bounds.get("step"),
    )
