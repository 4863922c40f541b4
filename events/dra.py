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

from kueue_es.events import manifests, models, types

RESOURCE_API = "resource.k8s.io/v1"
#: The DRA kinds whose objects go on the log, by (apiVersion, kind).
DRA_KINDS = frozenset({(RESOURCE_API, "DeviceClass"), (RESOURCE_API, "ResourceClaimTemplate")})


def dra_fact(manifest: Mapping[str, Any]) -> types.DeviceClassObserved | types.ResourceClaimTemplateObserved:
    """The fact for a resource.k8s.io/v1 DeviceClass or ResourceClaimTemplate manifest.

    Raises :class:`kueue_es.events.manifests.ManifestError` naming the field for another kind,
    a missing or invalid name, or a device request that is not a mapping or has a
    non-integer ``count``.
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
                metadata=msgspec.convert(meta, models.ObjectMeta), extended_resource_name=extended
            )
        )
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
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise manifests.ManifestError(kind=kind, name=name, field=where, problem="must be a list")
    out = []
    for index, item in enumerate(raw):
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
            )
        out.append(
            models.DeviceRequest(
                name=str(item.get("name") or ""),
                exactly=exact,
                first_available=len(first) if isinstance(first, list) else 0,
            )
        )
    return out
