"""DRA device quota: the quota a workload's device claims take, or why Kueue refuses it.

Why this module exists: Kueue charges the devices a pod asks for through Dynamic Resource
Allocation as quota of the resource names the Configuration's ``resources.deviceClassMappings``
give their DeviceClasses, and refuses (QuotaReserved=False, Misconfigured, not requeued until
something changes) the device requests it cannot count (SEMANTICS-ADVANCED F; Kueue pkg/dra
claims.go, extended_resources.go, pkg/controller/core/workload_controller.go handleDRA). The
log holds what that needs -- each pod set's ``resourceClaims``, the ResourceClaimTemplates and
DeviceClasses (facts), the Configuration -- so this is a pure function of them, and its result
joins a pod set's per-pod requests at step 7 of the request pipeline (SEMANTICS §2.3,
:func:`kueue_es.scheduling.queues.pod_set_requests`).

The rules, per pod set (amounts are per pod, multiplied by the pod count by the quota check):

- every ResourceClaimTemplate a pod names: every device request ``exactly`` with allocation
  mode ExactCount charges ``count`` units of ``mapping(deviceClassName)``; adminAccess requests
  are free; ``firstAvailable``, allocation mode All, an unmapped DeviceClass or a template that
  does not exist refuse the workload;
- a pod naming a ResourceClaim (``resourceClaimName``, shared by every pod) refuses it;
- a positive request of an extended resource that a DeviceClass backs
  (``spec.extendedResourceName``; of several the newest, ties by name) is charged under the
  class's mapping name (the extended name itself when the class is not mapped), and the raw
  request is dropped (gate KueueDRAIntegrationExtendedResource, on by default);
- gate KueueDRAIntegration (on by default) off: a workload with resource claims is refused
  (KueueDRARejectWorkloadsWhenDRADisabled, on by default) or charged for its other requests only.

- the CEL selectors of a template's device requests must compile, and a request with selectors
  needs ``count`` devices in the cluster's ResourceSlices matching them and its DeviceClass's
  selectors (each device serving one request of the claim); otherwise the workload is refused
  until a ResourceSlice, DeviceClass or template changes (:mod:`kueue_es.scheduling.dra_cel`).

Messages are Kueue's: its field errors as Kubernetes prints them (``<field>: <type>: <value>:
<detail>``; several as ``[a, b]``). Counter sources (partitionable devices, gate
KueueDRAIntegrationPartitionableDevices) charge a request of their class the largest consumed
counter of the devices it matches times its count, instead of the count; capacity sources (gate
KueueDRAIntegrationConsumableCapacity, off by default) the capacity it asks, rounded by the
devices' request policies.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kueue_es.events import models, quantities
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import dra_cel

DRA_GATE = "KueueDRAIntegration"
EXTENDED_GATE = "KueueDRAIntegrationExtendedResource"
PARTITIONABLE_GATE = "KueueDRAIntegrationPartitionableDevices"
CAPACITY_GATE = "KueueDRAIntegrationConsumableCapacity"
REJECT_WHEN_DISABLED_GATE = "KueueDRARejectWorkloadsWhenDRADisabled"
DISABLED_MESSAGE = "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
CLAIMS_MESSAGE = "KueueDRAIntegration feature does not support use of resource claims"


@dataclass(frozen=True)
class Charge:
    """What DRA adds to a workload's requests: per pod set name, the quota resources charged per
    pod (``charged``: resource name -> units) and the extended resources those replace
    (``replaced``: dropped from the pod set's requests); or ``problem``, Kueue's message for a
    workload it refuses (then nothing is charged)."""

    charged: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    replaced: Mapping[str, frozenset[str]] = field(default_factory=dict)
    problem: str = ""


NO_CHARGE = Charge()


def uses_dra(workload: models.Workload) -> bool:
    """Whether a pod set names a ResourceClaimTemplate or a ResourceClaim (Kueue workload.HasDRA)."""
    return any(
        claim.resource_claim_template_name is not None or claim.resource_claim_name is not None
        for ps in workload.spec.pod_sets
        for claim in ps.resource_claims
    )


def charge(
    workload: models.Workload,
    *,
    config: models.Configuration,
    device_classes: Mapping[str, models.DeviceClass],
    claim_templates: Mapping[tuple[str, str], models.ResourceClaimTemplate],
    resource_slices: Mapping[str, models.ResourceSlice] | None = None,
) -> Charge:
    """The DRA :class:`Charge` of ``workload`` (:data:`NO_CHARGE` when it uses no DRA).

    ``device_classes`` and ``resource_slices`` by name and ``claim_templates`` by ``(namespace,
    name)``: the objects the log holds. Never raises: what Kueue refuses is the Charge's ``problem``.
    """
    gates = config.feature_gates
    claims = uses_dra(workload)
    if not gates.get(DRA_GATE, True):
        if claims and gates.get(REJECT_WHEN_DISABLED_GATE, True):
            return Charge(problem=DISABLED_MESSAGE)
        return NO_CHARGE
    extended = gates.get(EXTENDED_GATE, True) and _backed(workload, device_classes)
    if not claims and not extended:
        return NO_CHARGE
    if any(c.resource_claim_name is not None for ps in workload.spec.pod_sets for c in ps.resource_claims):
        return Charge(problem=CLAIMS_MESSAGE)
    mapping = _mapping(config)
    counters = _counters(config) if gates.get(PARTITIONABLE_GATE, True) else {}
    capacities = _capacities(config) if gates.get(CAPACITY_GATE, False) else {}
    slices = resource_slices or {}
    cluster_devices: list[dra_cel.Device] | None = None
    charged: dict[str, dict[str, int]] = {}
    replaced: dict[str, frozenset[str]] = {}
    namespace = workload.metadata.namespace
    for i, ps in enumerate(workload.spec.pod_sets):
        amounts: dict[str, int] = {}
        for j, claim in enumerate(ps.resource_claims):
            name = claim.resource_claim_template_name
            if name is None:
                continue
            where = f"spec.podSets[{i}].template.spec.resourceClaims[{j}]"
            template = claim_templates.get((namespace, name))
            if template is None:
                return Charge(
                    problem=f"{where}: Internal error: failed to get claim spec for ResourceClaimTemplate {name} "
                    f'in podset {ps.name}: resourceclaimtemplates.resource.k8s.io "{name}" not found'
                )
            counts, problem = _devices_per_class(template, where=where)
            if problem:
                return Charge(problem=problem)
            if any(r.exactly is not None and r.exactly.cel for r in template.requests):
                if cluster_devices is None:
                    cluster_devices = dra_cel.devices(slices.values())
                errors = _selectors_against_devices(
                    template, where, device_classes, _counter_scoped(template, config, slices) or cluster_devices
                )
                if errors:
                    return Charge(problem=_aggregate(errors))
            for device_class in sorted(counts):
                resource = mapping.get(device_class)
                if resource is None:
                    detail = f"DeviceClass {device_class} is not mapped in DRA configuration for podset {ps.name}"
                    return Charge(problem=f"{where}.resourceClaimTemplateName: Not found: {json.dumps(detail)}")
                if counters.get(device_class) or capacities.get(device_class):
                    continue  # charged by its counters or capacity below
                amounts[resource] = amounts.get(resource, 0) + counts[device_class]
        if extended:
            swapped: set[str] = set()
            for resource_name, amount in sorted(ps.requests.items()):
                if amount <= 0 or not is_extended_resource(resource_name):
                    continue
                backing = backing_class(resource_name, device_classes)
                if backing is None:
                    continue
                key = mapping.get(backing.metadata.name, resource_name)
                if backing.metadata.name in mapping and counters.get(backing.metadata.name):
                    return Charge(
                        problem=f"spec.podSets[{i}].template.spec.containers[0]: Invalid value: "
                        f'"{resource_name}": extended resource {resource_name} resolves to DeviceClass '
                        f"{backing.metadata.name} with counters configured; use ResourceClaimTemplates with CEL "
                        "selectors for counter-based quota"
                    )
                if backing.metadata.name in mapping and capacities.get(backing.metadata.name):
                    return Charge(
                        problem=f"spec.podSets[{i}].template.spec.containers[0]: Invalid value: "
                        f'"{resource_name}": extended resource {resource_name} resolves to DeviceClass '
                        f"{backing.metadata.name} with capacity sources configured; use ResourceClaimTemplates with "
                        "capacity.requests for capacity-based quota"
                    )
                amounts[key] = amounts.get(key, 0) + amount
                swapped.add(resource_name)
            if swapped:
                replaced[ps.name] = frozenset(swapped)
        if amounts:
            charged[ps.name] = dict(sorted(amounts.items()))
    for sources, charge_one in ((counters, _counter_charge), (capacities, _capacity_charge)):
        if not sources:
            continue
        by_sources, problem = _source_charges(
            workload,
            sources=sources,
            charge_one=charge_one,
            mapping=mapping,
            device_classes=device_classes,
            claim_templates=claim_templates,
            slices=slices,
        )
        if problem:
            return Charge(problem=problem)
        for ps_name, amounts in by_sources.items():
            merged = dict(charged.get(ps_name, {}))
            for resource, amount in amounts.items():
                merged[resource] = merged.get(resource, 0) + amount
            charged[ps_name] = dict(sorted(merged.items()))
    return Charge(charged=charged, replaced=replaced)


def apply(requests: dict[str, int], ps: models.PodSet, result: Charge) -> dict[str, int]:
    """A pod set's per-pod ``requests`` (after transformations) with its DRA charge: the replaced
    extended resources dropped, the charged quota resources added (SEMANTICS §2.3 step 7)."""
    gone = result.replaced.get(ps.name, frozenset())
    out = {r: v for r, v in requests.items() if r not in gone}
    for resource, amount in result.charged.get(ps.name, {}).items():
        out[resource] = out.get(resource, 0) + amount
    return out


def is_extended_resource(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: a qualified name outside the ``kubernetes.io/`` namespace,
    with a prefix, not a quota ``requests.`` name."""
    prefix, slash, _ = name.partition("/")
    if not slash or name.startswith("requests."):
        return False
    return prefix != "kubernetes.io" and not prefix.endswith(".kubernetes.io")


def backing_class(resource_name: str, device_classes: Mapping[str, models.DeviceClass]) -> models.DeviceClass | None:
    """The DeviceClass whose ``spec.extendedResourceName`` is ``resource_name``: of several the newest,
    ties by the smaller name (Kueue extended_resources.go selectedDeviceClass); None when none is."""
    found = [dc for dc in device_classes.values() if dc.extended_resource_name == resource_name]
    if not found:
        return None
    return min(found, key=lambda dc: (-dc.metadata.creation_timestamp_ms, dc.metadata.name))


def _backed(workload: models.Workload, device_classes: Mapping[str, models.DeviceClass]) -> bool:
    names = {dc.extended_resource_name for dc in device_classes.values() if dc.extended_resource_name}
    return bool(names) and any(r in names and v > 0 for ps in workload.spec.pod_sets for r, v in ps.requests.items())


def _mapping(config: models.Configuration) -> dict[str, str]:
    """DeviceClass name -> quota resource name; the first mapping that names a class wins."""
    out: dict[str, str] = {}
    for mapping in config.resources.device_class_mappings if config.resources else ():
        for device_class in mapping.device_class_names:
            out.setdefault(device_class, mapping.name)
    return out


def _devices_per_class(template: models.ResourceClaimTemplate, *, where: str) -> tuple[dict[str, int], str]:
    """Devices per DeviceClass one claim from ``template`` asks for (Kueue claims.go countDevicesPerClass),
    or Kueue's message for the first request it cannot count."""
    counts: dict[str, int] = {}
    prefix = f"ResourceClaimTemplate {template.metadata.name}: "
    for k, request in enumerate(template.requests):
        at = f"{where}.devices.requests[{k}]"
        if request.first_available:
            return {}, f"{at}: Invalid value: null: {prefix}FirstAvailable device selection is not supported"
        exact = request.exactly
        if exact is None:
            return {}, f"{at}: Invalid value: null: {prefix}Exactly must be set if FirstAvailable is nil"
        compile_errors = [
            f"devices.requests[{k}].exactly.selectors[{i}].cel.expression: Invalid value: {json.dumps(c.expression)}: "
            f"CEL compilation failed: {c.error}"
            for i, c in enumerate(map(dra_cel.compile_selector, exact.cel))
            if c.error
        ]
        if compile_errors:
            return {}, f"{at}.exactly.selectors: Invalid value: null: {prefix}{_aggregate(compile_errors)}"
        if exact.admin_access:
            continue
        mode = exact.allocation_mode
        if mode == "All":
            return (
                {},
                f"{at}.exactly.allocationMode: Invalid value: \"All\": {prefix}AllocationMode 'All' is not supported",
            )
        if mode != "ExactCount":
            return (
                {},
                f"{at}.exactly.allocationMode: Invalid value: {json.dumps(mode)}: {prefix}unsupported allocation mode: {mode}",
            )
        if exact.device_class_name:
            counts[exact.device_class_name] = counts.get(exact.device_class_name, 0) + exact.count
    return counts, ""


def _counters(config: models.Configuration) -> dict[str, list[tuple[str, models.CounterSource]]]:
    """DeviceClass name -> (quota resource, counter source) of every mapping naming it (Kueue mapper.go)."""
    out: dict[str, list[tuple[str, models.CounterSource]]] = {}
    for mapping in config.resources.device_class_mappings if config.resources else ():
        for device_class in mapping.device_class_names:
            out.setdefault(device_class, []).extend((mapping.name, c) for c in mapping.counters)
    return {k: v for k, v in out.items() if v}


def _counter_scoped(
    template: models.ResourceClaimTemplate, config: models.Configuration, slices: Mapping[str, models.ResourceSlice]
) -> list[dra_cel.Device] | None:
    """When every request of ``template`` with selectors is of a class with counter sources, Kueue matches
    them against the devices of those sources' drivers only; None: against every device."""
    counters = _counters(config)
    classes = {r.exactly.device_class_name for r in template.requests if r.exactly is not None and r.exactly.cel}
    if not classes or not all(counters.get(c) for c in classes):
        return None
    drivers = {source.driver for c in classes for _, source in counters[c]}
    return dra_cel.devices(s for s in slices.values() if s.driver in drivers)


def _class_selectors(
    class_name: str, device_classes: Mapping[str, models.DeviceClass], at: str, prefix: str
) -> tuple[list[dra_cel.Compiled], str]:
    """The compiled selectors of DeviceClass ``class_name`` (none for ""), or Kueue's error for a missing class
    or a selector that does not compile (claims.go resolveAndCompileDeviceClass), prefixed with ``prefix``."""
    if not class_name:
        return [], ""
    device_class = device_classes.get(class_name)
    if device_class is None:
        return [], (
            f'{at}: Internal error: {prefix}failed to get DeviceClass {class_name}: deviceclasses.resource.k8s.io "{class_name}" not found'
        )
    compiled = [dra_cel.compile_selector(e) for e in device_class.selectors]
    for i, c in enumerate(compiled):
        if c.error:
            return [], (
                f"{at}[{i}].cel.expression: Invalid value: {json.dumps(c.expression)}: {prefix}"
                f"DeviceClass {class_name} has invalid CEL selector: {c.error}"
            )
    return compiled, ""


def _capacities(config: models.Configuration) -> dict[str, list[tuple[str, models.CapacitySource]]]:
    """DeviceClass name -> (quota resource, capacity source) of every mapping naming it; the quota resource
    is the class's first mapping's name (Kueue mapper.go, capacity.go)."""
    first = _mapping(config)
    out: dict[str, list[tuple[str, models.CapacitySource]]] = {}
    for mapping in config.resources.device_class_mappings if config.resources else ():
        for device_class in mapping.device_class_names:
            out.setdefault(device_class, []).extend((first[device_class], c) for c in mapping.capacities)
    return {k: v for k, v in out.items() if v}


Source = models.CounterSource | models.CapacitySource
ChargeOne = Callable[
    [
        Any,
        str,
        list[dra_cel.Compiled],
        list[dra_cel.Compiled],
        models.ExactDeviceRequest,
        str,
        Mapping[str, models.ResourceSlice],
    ],
    tuple[int, str],
]


def _source_charges(
    workload: models.Workload,
    *,
    sources: Mapping[str, Sequence[tuple[str, Source]]],
    charge_one: ChargeOne,
    mapping: Mapping[str, str],
    device_classes: Mapping[str, models.DeviceClass],
    claim_templates: Mapping[tuple[str, str], models.ResourceClaimTemplate],
    slices: Mapping[str, models.ResourceSlice],
) -> tuple[dict[str, dict[str, int]], str]:
    """Per pod set, the quota the counter (or capacity) sources charge a pod (Kueue counters.go
    GetCounterResourcesForWorkload, capacity.go DetermineCapacityResourcesForWorkload): every request of a
    class with such sources is charged by ``charge_one`` per source, or Kueue's message for the first
    request that cannot be charged."""
    out: dict[str, dict[str, int]] = {}
    for i, ps in enumerate(workload.spec.pod_sets):
        amounts: dict[str, int] = {}
        for j, claim in enumerate(ps.resource_claims):
            template = claim_templates.get((workload.metadata.namespace, claim.resource_claim_template_name or ""))
            if claim.resource_claim_template_name is None or template is None:
                continue  # a missing template is refused by the device-count pass first
            claim_path = f"spec.podSets[{i}].template.spec.resourceClaims[{j}]"
            for k, request in enumerate(template.requests):
                exact = request.exactly
                if exact is None or exact.admin_access or not sources.get(exact.device_class_name):
                    continue
                if exact.device_class_name not in mapping:
                    continue
                at = f"{claim_path}.devices.requests[{k}]"
                class_selectors, problem = _class_selectors(exact.device_class_name, device_classes, at, "")
                if problem:
                    return {}, problem
                request_selectors = [dra_cel.compile_selector(e) for e in exact.cel]
                for quota, source in sources[exact.device_class_name]:
                    charge, problem = charge_one(source, quota, class_selectors, request_selectors, exact, at, slices)
                    if problem:
                        return {}, problem
                    amounts[quota] = amounts.get(quota, 0) + charge
        if amounts:
            out[ps.name] = dict(sorted(amounts.items()))
    return out, ""


def _source_devices(
    source: Source,
    kind: str,
    class_selectors: list[dra_cel.Compiled],
    request_selectors: list[dra_cel.Compiled],
    count: int,
    at: str,
    slices: Mapping[str, models.ResourceSlice],
) -> tuple[list[models.SliceDevice], str]:
    """The devices of a ``kind`` (counter or capacity) source's driver (complete pools) matching its
    ``deviceSelector``, the class's and the request's selectors (counters.go matchDevicesForSource), at
    least ``count`` of them; or Kueue's message."""
    scope = dra_cel.compile_selector(source.device_selector)
    if scope.error:
        return [], (
            f"{at}[0].cel.expression: Invalid value: {json.dumps(scope.expression)}: deviceSelector CEL compilation "
            f"failed: {scope.error}"
        )
    matched = []
    stages = (
        ("deviceSelector", [scope]),
        ("DeviceClass selector", class_selectors),
        ("request selector", request_selectors),
    )
    for device in dra_cel.pool_devices(slices.values(), source.driver):
        for what, selectors in stages:
            try:
                ok = dra_cel.matches(selectors, device)
            except dra_cel.EvaluationError as err:
                return (
                    [],
                    f"{at}: Internal error: CEL evaluation error in {what} for device {device.source.name}: {err}",
                )
            if not ok:
                break
        else:
            matched.append(device.source)
    if len(matched) < count:
        return [], (
            f"{at}: Internal error: insufficient matching devices for {kind} driver: {len(matched)} device(s) match "
            f"but {count} requested"
        )
    return matched, ""


def _counter_charge(
    source: models.CounterSource,
    quota: str,
    class_selectors: list[dra_cel.Compiled],
    request_selectors: list[dra_cel.Compiled],
    exact: models.ExactDeviceRequest,
    at: str,
    slices: Mapping[str, models.ResourceSlice],
) -> tuple[int, str]:
    """One counter source's charge for one request: the largest consumed counter of the matching devices
    times ``count`` (counters.go processCounterCharge)."""
    matched, problem = _source_devices(source, "counter", class_selectors, request_selectors, exact.count, at, slices)
    if problem:
        return 0, problem
    values = [d.consumes_counters[source.name] for d in matched if source.name in d.consumes_counters]
    if not values:
        return 0, f'{at}: Internal error: matched devices have no consumesCounters entry for counter "{source.name}"'
    largest = max(values, key=quantities.parse_decimal)
    return quantities.to_amount(quota, largest) * exact.count, ""


def _capacity_charge(
    source: models.CapacitySource,
    quota: str,
    class_selectors: list[dra_cel.Compiled],
    request_selectors: list[dra_cel.Compiled],
    exact: models.ExactDeviceRequest,
    at: str,
    slices: Mapping[str, models.ResourceSlice],
) -> tuple[int, str]:
    """One capacity source's charge for one request (capacity.go processCapacityCharge): per matching device
    with the dimension, the request's ``capacity.requests`` amount (else the policy's default, else the whole
    capacity) rounded up by the device's requestPolicy; the largest, times ``count``."""
    matched, problem = _source_devices(source, "capacity", class_selectors, request_selectors, exact.count, at, slices)
    if problem:
        return 0, problem
    asked = exact.capacity_requests.get(source.name)
    found = False
    charges = []
    for device in matched:
        value = device.capacity.get(source.name)
        if value is None:
            continue
        found = True
        policy = device.capacity_policies.get(source.name)
        base = asked or (policy.default if policy and policy.default else None) or value
        rounded = _round_to_policy(quantities.parse_decimal(base), policy)
        if rounded is not None:
            charges.append(rounded)
    if not found:
        return 0, f'{at}: Internal error: matched devices have no capacity dimension "{source.name}"'
    if not charges:
        return 0, (
            f"{at}: Invalid value: null: capacity request cannot be satisfied by any matched device's RequestPolicy "
            f'for dimension "{source.name}"'
        )
    return quantities.to_amount(quota, str(max(charges))) * exact.count, ""


def _round_to_policy(base: Decimal, policy: models.CapacityPolicy | None) -> Decimal | None:
    """``base`` rounded up to the policy's next valid value, or into its range at ``min`` + n x ``step``;
    None when it exceeds them (capacity.go roundToPolicy)."""
    if policy is None:
        return base
    if policy.valid_values:
        return next((v for v in map(quantities.parse_decimal, policy.valid_values) if v >= base), None)
    if policy.valid_min is None and policy.valid_max is None and policy.valid_step is None:
        return base
    value = Decimal(math.ceil(base))
    low = quantities.parse_decimal(policy.valid_min) if policy.valid_min is not None else None
    if low is not None:
        low = Decimal(math.ceil(low))
        value = max(value, low)
        if policy.valid_step is not None:
            step = Decimal(math.ceil(quantities.parse_decimal(policy.valid_step)))
            if step > 0 and (value - low) % step:
                value = low + ((value - low) // step + 1) * step
    if policy.valid_max is not None and value > Decimal(math.ceil(quantities.parse_decimal(policy.valid_max))):
        return None
    return value


def _selectors_against_devices(
    template: models.ResourceClaimTemplate,
    where: str,
    device_classes: Mapping[str, models.DeviceClass],
    cluster_devices: list[dra_cel.Device],
) -> list[str]:
    """Kueue's errors for the requests of ``template`` with CEL selectors that the cluster's devices cannot
    serve: a DeviceClass missing or with a bad selector, a selector failing on a device, fewer matching
    devices than requested (Kueue claims.go validateCELSelectorsAgainstDevices); [] when all can be."""
    prefix = f"ResourceClaimTemplate {template.metadata.name}: "
    taken: set[int] = set()
    errors: list[str] = []
    for k, request in enumerate(template.requests):
        exact = request.exactly
        if exact is None or not exact.cel:
            continue
        at = f"{where}.devices.requests[{k}]"
        class_name = exact.device_class_name
        class_selectors, problem = _class_selectors(class_name, device_classes, at, prefix)
        if problem:
            errors.append(problem)
            continue
        request_selectors = [dra_cel.compile_selector(e) for e in exact.cel]
        try:
            matched = dra_cel.count_matching(
                dra_cel.indexed(cluster_devices), class_selectors, request_selectors, taken, exact.count
            )
        except dra_cel.EvaluationError as err:
            errors.append(
                f"{at}.exactly.selectors: Invalid value: null: {prefix}CEL evaluation failed for DeviceClass "
                f"{class_name}: {err}"
            )
            continue
        if matched < exact.count:
            errors.append(
                f"{at}.exactly.selectors: Internal error: {prefix}insufficient matching devices for CEL selector in "
                f"DeviceClass {class_name}: {matched} device(s) match in the cluster but {exact.count} requested"
            )
    return errors


def _aggregate(messages: list[str]) -> str:
    """Kubernetes' aggregate of field errors: one as itself, several (repeats dropped) as ``[a, b]``."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def charge_in(state: ClusterState, workload: models.Workload) -> Charge:
    """:func:`charge` of ``workload`` against the objects and Configuration ``state`` folded, remembered
    in ``state.caches`` per workload object while the Configuration object and
    ``state.devices_version`` stay the same."""
    if not state.device_classes and not uses_dra(workload):
        return NO_CHARGE  # the common case: nothing of DRA to read
    basis = (state.configuration, state.devices_version)
    memo = state.caches.get("dra.charges")
    if memo is None or memo[0][0] is not basis[0] or memo[0][1] != basis[1]:
        memo = state.caches["dra.charges"] = (basis, {})
    charges: dict[str, tuple[models.Workload, Charge]] = memo[1]
    found = charges.get(workload.key)
    if found is not None and found[0] is workload:
        return found[1]
    result = charge(
        workload,
        config=state.configuration,
        device_classes=state.device_classes,
        claim_templates=state.claim_templates,
        resource_slices=state.resource_slices,
    )
    if len(charges) > 4096:
        charges.clear()
    charges[workload.key] = (workload, result)
    return result


def refused(state: ClusterState, workload: models.Workload) -> bool:
    """Whether pending ``workload`` is refused for DRA reasons now (:func:`charge_in` has a problem).

    Kueue's workload controller keeps such a workload out of the queue manager: its Create and Update
    handlers skip a workload that needs DRA processing ("handled in Reconcile", dra.NeedsDRAReconcile),
    and handleDRA / markDRAInadmissible return before queues.AddOrUpdateWorkload. So it is neither
    pending in its queues' counts and metrics nor listed by the visibility API; it is queued once the
    charge succeeds (a template created, a mapping added). The admitter still parks it with the
    refusal, which a DRA object's change requeues (:func:`kueue_es.projections.cluster.apply`)."""
    return bool(charge_in(state, workload).problem)


def describe(workload: models.Workload, result: Charge) -> list[str]:
    """One line a pod set of what ``result`` charges ``workload`` (per pod, times its pods), and the
    templates and extended resources it comes from; or the refusal. For ``kueue-es explain``."""
    if result.problem:
        return [f"refused (Misconfigured): {result.problem}"]
    lines = []
    for ps in workload.spec.pod_sets:
        charged = result.charged.get(ps.name)
        if not charged:
            continue
        amounts = ", ".join(f"{resource} {amount}" for resource, amount in charged.items())
        sources = [
            f"ResourceClaimTemplate {c.resource_claim_template_name}"
            for c in ps.resource_claims
            if c.resource_claim_template_name
        ]
        sources += [f"extended resource {r}" for r in sorted(result.replaced.get(ps.name, ()))]
        lines.append(f"pod set {ps.name}: {amounts} a pod x {ps.count} pods, from {', '.join(sources)}")
    return lines
