"""A pod spec as Kueue sees it before it counts requests: RuntimeClass overhead and LimitRange defaults.

Why this module exists: Kueue does not count a pod template's requests as written.
Before it queues a workload it adjusts a copy (SEMANTICS §2.3 steps 1-3, Kueue
pkg/workload/resources.go AdjustResources): a pod that names a RuntimeClass and
declares no overhead gets the RuntimeClass's fixed overhead; containers get the
namespace's LimitRange defaults (``default`` as missing limits, ``defaultRequest``
as missing requests); then limits stand in for missing requests
(:func:`kueue_es.events.manifests.pod_requests` does that step). At nomination a pod set whose
requests break the LimitRange ``min``/``max`` is inadmissible
(ValidateLimitRange), which :func:`limit_range_violation` says in a sentence.

A Workload made by hand (no job) is adjusted and checked the same way
(:func:`adjusted_workload`): Kueue's queue manager adjusts every workload it queues, and its
scheduler checks every head (scheduler.go nominate, ValidateAdmissibility), not only the
Workloads its job reconciler made.

Pure: the RuntimeClasses (name -> ``overhead.podFixed``) and the namespace's
LimitRange items come in from the watcher's caches.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kueue_es.events import manifests, models
from kueue_es.events.quantities import QuantityError, to_amount

CONTAINER, POD = "Container", "Pod"

LIMIT_RANGE_PROBLEM = manifests.LIMIT_RANGE_PROBLEM


def adjusted_workload(
    workload: models.Workload,
    manifest: Mapping[str, Any],
    *,
    runtime_classes: Mapping[str, Mapping[str, Any]],
    limit_ranges: Sequence[Mapping[str, Any]],
) -> models.Workload:
    """``workload`` (converted from the Workload object ``manifest``) with each pod set's requests
    counted from its template adjusted by :func:`adjusted_pod_spec`, and ``misconfigured`` set when the
    adjusted template has requests above its limits or breaks the namespace's LimitRanges
    (``limit_ranges``: their ``spec.limits`` items), in Kueue's words (:func:`admissibility_problem`):
    "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: Invalid
    value: [\"cpu\"]: requests must not be above the limitRange max".

    Kueue: workload.AdjustResources on every workload queued (queue manager) and ValidateAdmissibility at
    each nomination (scheduler.go nominate, pkg/workload/resources.go ValidateResources,
    ValidateLimitRange). ``workload`` itself when no LimitRange applies and no pod set names a
    RuntimeClass: nothing to adjust. Raises ManifestError naming the field of a quantity that does not
    parse once adjusted.
    """
    spec = manifest.get("spec")
    raw_pod_sets = spec.get("podSets") if isinstance(spec, dict) else None
    if not isinstance(raw_pod_sets, list) or len(raw_pod_sets) != len(workload.spec.pod_sets):
        return workload
    templates = [_template_spec(ps) for ps in raw_pod_sets]
    if not limit_ranges and not any(t.get("runtimeClassName") for t in templates):
        return workload
    name = workload.metadata.name
    pod_sets = []
    for i, (pod_set, template) in enumerate(zip(workload.spec.pod_sets, templates, strict=True)):
        where = f"spec.podSets[{i}].template.spec"
        adjusted = adjusted_pod_spec(template, runtime_classes=runtime_classes, limit_ranges=limit_ranges)
        requests = manifests.pod_requests(adjusted, where=where, kind="Workload", name=name)
        misconfigured = admissibility_problem(adjusted, limit_ranges=limit_ranges, pod_requests=requests, where=where)
        pod_sets.append(msgspec.structs.replace(pod_set, requests=requests, misconfigured=misconfigured))
    if pod_sets == workload.spec.pod_sets:
        return workload
    return msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, pod_sets=pod_sets))


def _template_spec(pod_set: Any) -> dict[str, Any]:
    """``template.spec`` of a raw pod set (empty when missing: the conversion reported a bad shape)."""
    template = pod_set.get("template") if isinstance(pod_set, dict) else None
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def adjusted_pod_spec(
    pod_spec: Mapping[str, Any],
    *,
    runtime_classes: Mapping[str, Mapping[str, Any]],
    limit_ranges: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """A copy of ``pod_spec`` with the RuntimeClass overhead and the LimitRange defaults applied.

    handlePodOverhead: only when ``runtimeClassName`` is set and ``overhead`` is empty;
    an unknown RuntimeClass adds nothing (Kueue logs it and goes on).
    handlePodLimitRange: per resource, a container's own limit or request wins
    (MergeResourceListKeepFirst); pod-level resources get the ``Pod`` type's defaults.
    """
    spec = copy.deepcopy(dict(pod_spec))
    runtime_class = spec.get("runtimeClassName")
    if runtime_class and not spec.get("overhead"):
        fixed = runtime_classes.get(str(runtime_class))
        if fixed:
            spec["overhead"] = dict(fixed)
    summary = summarize(limit_ranges)
    container_range = summary.get(CONTAINER)
    if container_range:
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or []:
                if isinstance(container, dict):
                    container["resources"] = _with_defaults(container.get("resources"), container_range)
    pod_range = summary.get(POD)
    if pod_range and isinstance(spec.get("resources"), dict):
        spec["resources"] = _with_defaults(spec["resources"], pod_range)
    return spec


def summarize(limit_ranges: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """LimitRange items merged per type (pkg/util/limitrange Summarize): the first ``default`` and
    ``defaultRequest`` of each resource, the lowest ``max``, the highest ``min``."""
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for item in limit_ranges:
        if not isinstance(item, dict) or item.get("type") not in (CONTAINER, POD):
            continue
        merged = summary.setdefault(str(item["type"]), {"default": {}, "defaultRequest": {}, "max": {}, "min": {}})
        for key in ("default", "defaultRequest"):
            for resource, value in (item.get(key) or {}).items():
                merged[key].setdefault(resource, value)
        for key, keep in (("max", min), ("min", max)):
            for resource, value in (item.get(key) or {}).items():
                current = merged[key].get(resource)
                merged[key][resource] = value if current is None else keep(current, value, key=_amount_of(resource))
    return summary


def admissibility_problem(
    pod_spec: Mapping[str, Any],
    *,
    limit_ranges: Sequence[Mapping[str, Any]],
    pod_requests: Mapping[str, int],
    where: str,
) -> str:
    """Kueue's Misconfigured message for one (adjusted) pod spec at ``where`` (``spec.podSets[i].template.spec``),
    "" when it is admissible: requests over limits first (``resources validation failed: ...``,
    :func:`manifests.requests_over_limits`), else the LimitRanges it breaks (``resources didn't satisfy
    LimitRange constraints: ...``), as pkg/workload/resources.go ValidateAdmissibility checks them."""
    problem = manifests.requests_over_limits(dict(pod_spec), where=where)
    if problem:
        return problem
    violation = limit_range_violation(pod_spec, limit_ranges=limit_ranges, pod_requests=pod_requests, where=where)
    return f"{LIMIT_RANGE_PROBLEM}: {violation}" if violation else ""


def limit_range_violation(
    pod_spec: Mapping[str, Any],
    *,
    limit_ranges: Sequence[Mapping[str, Any]],
    pod_requests: Mapping[str, int],
    where: str,
) -> str:
    """How the (adjusted) pod spec breaks the namespace's LimitRanges, as Kueue's field errors aggregated
    (``<path>: Invalid value: ["cpu"]: requests must not be above the limitRange max``, several as
    ``[a, b]``); "" when it does not.

    Kueue pkg/util/limitrange ValidatePodSpec: for each init container and container, the resources
    whose larger of request and limit is above the Container ``max``, then those whose smaller is
    below the ``min`` (a resource the container does not name is not checked); then the pod's total
    requests (``pod_requests``, amounts) against the Pod ``max`` and ``min`` alike.
    """
    summary = summarize(limit_ranges)
    errors: list[str] = []
    container_range = summary.get(CONTAINER)
    if container_range:
        for group in ("initContainers", "containers"):
            for i, container in enumerate(pod_spec.get(group) or []):
                resources = container.get("resources") if isinstance(container, dict) else None
                resources = resources if isinstance(resources, dict) else {}
                amounts = [_amounts(resources.get("requests")), _amounts(resources.get("limits"))]
                high = {r: max(a[r] for a in amounts if r in a) for r in set().union(*amounts)}
                low = {r: min(a[r] for a in amounts if r in a) for r in set().union(*amounts)}
                errors.extend(_outside(f"{where}.{group}[{i}]", high=high, low=low, bounds=container_range))
    pod_range = summary.get(POD)
    if pod_range:
        errors.extend(_outside(where, high=dict(pod_requests), low=dict(pod_requests), bounds=pod_range))
    return manifests.aggregate_errors(errors)


ABOVE_MAX = "requests must not be above the limitRange max"  # Kueue's RequestsMustNotBeAboveLimitRangeMaxMessage
BELOW_MIN = "requests must not be below the limitRange min"  # Kueue's RequestsMustNotBeBelowLimitRangeMinMessage


def _outside(
    path: str, *, high: Mapping[str, int], low: Mapping[str, int], bounds: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """The field errors of ``path`` against one LimitRange type's bounds: its resources above ``max``, then
    those below ``min``; a resource absent from ``high``/``low`` is neither (Kueue's GreaterKeys)."""
    errors = []
    over = [r for r, q in _amounts(bounds.get("max")).items() if r in high and high[r] > q]
    if over:
        errors.append(manifests.field_invalid(path, over, ABOVE_MAX))
    under = [r for r, q in _amounts(bounds.get("min")).items() if r in low and q > low[r]]
    if under:
        errors.append(manifests.field_invalid(path, under, BELOW_MIN))
    return errors


def _with_defaults(given: Any, bounds: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    resources: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    for key, defaults in (("limits", bounds.get("default")), ("requests", bounds.get("defaultRequest"))):
        if defaults:
            own = resources.get(key)
            resources[key] = {**defaults, **(own if isinstance(own, dict) else {})}
    return resources


def _amounts(values: Any) -> dict[str, int]:
    """Quantities as amounts; ones that do not parse are left out (the pod set reports them)."""
    out = {}
    for resource, value in (values or {}).items() if isinstance(values, dict) else ():
        try:
            out[str(resource)] = to_amount(str(resource), value, allow_negative=True)
        except QuantityError:
            continue
    return out


def _amount_of(resource: str) -> Any:
    def amount(value: Any) -> int:
        try:
            return to_amount(resource, value, allow_negative=True)
        except QuantityError:
            return 0

    return amount
