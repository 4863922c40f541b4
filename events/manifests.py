"""Manifests (YAML/JSON dicts as kubectl sends them) to the models of :mod:`kueue_es.events.models`.

This is the one place where outside input becomes our vocabulary, so it is where
bad input is caught: every error is a :class:`ManifestError` naming the object
(``ClusterQueue cluster-queue``) and the field (``spec.resourceGroups[0]...``),
and nothing is half-converted. Quantities become integer amounts
(:mod:`kueue_es.events.quantities`), ``creationTimestamp`` becomes milliseconds, and pod
templates become per-pod requests following SEMANTICS §2.3 (Kueue
pkg/workload/resources.go, Kubernetes' pod request formula).
"""

from __future__ import annotations

import copy
import datetime
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec
import yaml

from kueue_es.events import models, tas_requests
from kueue_es.events.kueue_fields import KNOWN_FIELDS
from kueue_es.events.quantities import QuantityError, to_amount

KUEUE_API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
KUEUE_KINDS: dict[str, type[models.APIObject | models.ProvisioningRequestConfig]] = {
    "ResourceFlavor": models.ResourceFlavor,
    "ClusterQueue": models.ClusterQueue,
    "Cohort": models.Cohort,
    "LocalQueue": models.LocalQueue,
    "WorkloadPriorityClass": models.WorkloadPriorityClass,
    "Workload": models.Workload,
    "AdmissionCheck": models.AdmissionCheck,
    "ProvisioningRequestConfig": models.ProvisioningRequestConfig,
    "MultiKueueCluster": models.MultiKueueCluster,
    "MultiKueueConfig": models.MultiKueueConfig,
}
NAMESPACED_KINDS = frozenset({"LocalQueue", "Workload"})
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ManifestError(ValueError):
    """A manifest that cannot become a kueue-es object.

    ``kind``, ``name`` (``namespace/name`` for namespaced objects) and ``field`` (a
    dotted path, empty when the whole object is wrong) say where; ``problem`` what.
    """

    def __init__(self, *, kind: str, name: str, field: str, problem: str) -> None:
        self.kind, self.name, self.field, self.problem = kind, name, field, problem
        where = f" field {field}:" if field else ""
        super().__init__(f"{kind or 'object'} {name or '<unnamed>'}:{where} {problem}")


def load_documents(text: str, *, source: str = "<input>") -> list[dict[str, Any]]:
    """Split a YAML (or JSON) stream into its non-empty documents.

    Raises ManifestError naming ``source`` when the YAML does not parse or a
    document is not a mapping.
    """
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ManifestError(kind="file", name=source, field="", problem=f"is not valid YAML: {err}") from err
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ManifestError(kind="file", name=source, field=f"document {index}", problem="is not a mapping")
    return docs


def describe(manifest: dict[str, Any]) -> tuple[str, str]:
    """``(kind, name)`` of a manifest for messages; name is ``ns/name`` when namespaced."""
    kind = str(manifest.get("kind") or "")
    meta = manifest.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    namespace = meta.get("namespace")
    return kind, f"{namespace}/{name}" if namespace else name


def parse_object(
    manifest: dict[str, Any], *, strict: bool = True
) -> models.APIObject | models.ProvisioningRequestConfig | models.Namespace | models.Configuration | models.Topology:
    """Convert one kueue.x-k8s.io/v1beta2 manifest into its model, validated.

    Raises ManifestError for an unknown kind or API version, a missing or invalid
    name, a bad quantity, a wrong type or enum value, or a rule Kueue's webhooks
    enforce (SEMANTICS §1). ``strict`` (files a user wrote: ``apply``, scenarios) also
    refuses unknown fields of a Workload's pod sets, as strict field validation does;
    objects read from an API server pass ``strict=False``: the server has validated them
    against the CRD installed there, which may be a newer Kueue's.
    """
    kind, name = describe(manifest)
    if (manifest.get("apiVersion"), kind) in _OTHER_KINDS:
        return _parse_other(manifest, kind=kind, name=name)
    if kind == "Topology" and manifest.get("apiVersion") in TOPOLOGY_APIS:
        return parse_topology(manifest)
    model_type = KUEUE_KINDS.get(kind)
    if model_type is None or manifest.get("apiVersion") != KUEUE_API:
        raise ManifestError(
            kind=kind,
            name=name,
            field="apiVersion/kind",
            problem=f"{manifest.get('apiVersion')}/{kind or '?'} is not a kind kueue-es admits with",
        )
    if strict:
        _refuse_unknown_tree(manifest, _known_fields(kind), where="", kind=kind, name=name)
    raw = copy.deepcopy(manifest)
    raw["metadata"] = _normalize_meta(raw.get("metadata"), kind=kind, name=name)
    if kind in NAMESPACED_KINDS and not raw["metadata"].get("namespace"):
        raw["metadata"]["namespace"] = "default"
    spec = raw.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise ManifestError(kind=kind, name=name, field="spec", problem="must be a mapping")
    if kind in ("ClusterQueue", "Cohort") and spec:
        _convert_quotas(spec, kind=kind, name=name)
        _weight_to_string(spec)
    elif kind == "LocalQueue" and spec:
        if spec.get("clusterQueue") == "":  # "" is how the model reads none; Kueue's CRD refuses it written
            raise ManifestError(
                kind=kind,
                name=name,
                field="spec.clusterQueue",
                problem='is "": name a ClusterQueue or leave the field out (Kueue\'s pattern refuses an empty name)',
            )
        _weight_to_string(spec)
    elif kind == "AdmissionCheck":
        # Active only once its controller says so: a missing Active condition makes every
        # ClusterQueue that needs the check inactive (SEMANTICS §10.2, SEMANTICS-ADVANCED B.1).
        conditions = (raw.pop("status", None) or {}).get("conditions") or []
        raw["active"] = any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)
    elif kind == "MultiKueueCluster":
        # conditions without their timestamps (models.Condition): a heartbeat is no new fact
        conditions = (raw.pop("status", None) or {}).get("conditions") or []
        raw["status"] = {
            "conditions": [
                {k: c[k] for k in ("type", "status", "reason", "message") if k in c}
                for c in conditions
                if isinstance(c, dict)
            ]
        }
    elif kind == "Workload" and spec:
        raw["openPreemptionGates"] = _open_preemption_gates(raw.get("status"), kind=kind, name=name)
        priority_class_name_to_ref(spec)
        spec["podSets"] = [
            _convert_pod_set(ps, index=i, kind=kind, name=name, strict=strict)
            for i, ps in enumerate(_as_list(spec.get("podSets"), "spec.podSets", kind, name))
        ]
    try:
        obj = msgspec.convert(raw, model_type)
    except msgspec.ValidationError as err:
        field, problem = _split_validation_error(str(err))
        raise ManifestError(kind=kind, name=name, field=field, problem=problem) from err
    _validate(obj, kind=kind, name=name)
    return obj


_OTHER_KINDS = {("v1", "Namespace"), (CONFIG_API, "Configuration")}


def _open_preemption_gates(status: Any, *, kind: str, name: str) -> list[str]:
    """The names of a Workload's ``status.preemptionGates`` at position ``Open``, sorted (the rest of the
    status is the deciders' own writing, read from the log instead). Raises ManifestError naming the field
    for a status or entry of the wrong shape, or a position other than Open and Closed."""
    if status is None:
        return []
    if not isinstance(status, dict):
        raise ManifestError(kind=kind, name=name, field="status", problem="must be a mapping")
    opened: set[str] = set()
    for i, entry in enumerate(_as_list(status.get("preemptionGates"), "status.preemptionGates", kind, name)):
        where = f"status.preemptionGates[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ManifestError(kind=kind, name=name, field=where, problem="must be a mapping with a name")
        position = entry.get("position", "")
        if position not in ("Open", "Closed", ""):
            raise ManifestError(
                kind=kind, name=name, field=f"{where}.position", problem=f"{position!r} is not one of Closed, Open"
            )
        if position == "Open":
            opened.add(entry["name"])
    return sorted(opened)


def _parse_other(manifest: dict[str, Any], *, kind: str, name: str) -> models.Namespace | models.Configuration:
    """A v1 Namespace or a manager Configuration (which has no metadata in Kueue's files)."""
    raw = {k: v for k, v in copy.deepcopy(manifest).items() if k not in ("apiVersion", "kind")}
    if kind == "Configuration":
        raw["metadata"] = {"name": (manifest.get("metadata") or {}).get("name") or "config"}
        _resource_weights_to_text(raw, kind=kind, name=name)
        target: type[models.Namespace | models.Configuration] = models.Configuration
    else:
        raw = {"metadata": _normalize_meta(raw.get("metadata"), kind=kind, name=name)}
        target = models.Namespace
    try:
        return msgspec.convert(raw, target)
    except msgspec.ValidationError as err:
        field, problem = _split_validation_error(str(err))
        raise ManifestError(kind=kind, name=name, field=field, problem=problem) from err


def weight_text(weight: float) -> str:
    """A resource weight of ``admissionFairSharing.resourceWeights`` as the text the log keeps: a
    whole number without a fraction (``2.0`` -> ``"2"``), else Python's shortest round-trip form."""
    return str(int(weight)) if weight == int(weight) else repr(float(weight))


def _resource_weights_to_text(raw: dict[str, Any], *, kind: str, name: str) -> None:
    """Turn ``admissionFairSharing.resourceWeights`` numbers into the log's texts, in place.

    Kueue's Configuration takes a float64 a resource (apis/config/v1beta2 configuration_types.go
    AdmissionFairSharing.ResourceWeights); a text that reads as a number is kept as older scenario
    files wrote it. Raises ManifestError naming the resource for a weight that is no number or is
    negative (Kueue's validation: ``must be greater than or equal to 0``)."""
    section = raw.get("admissionFairSharing")
    if not isinstance(section, dict) or section.get("resourceWeights") is None:
        return
    weights = section["resourceWeights"]
    if not isinstance(weights, dict):
        raise ManifestError(
            kind=kind, name=name, field="admissionFairSharing.resourceWeights", problem="must be a mapping"
        )
    texts: dict[str, str] = {}
    for resource, weight in weights.items():
        field = f"admissionFairSharing.resourceWeights.{resource}"
        if isinstance(weight, bool) or not isinstance(weight, int | float | str):
            raise ManifestError(kind=kind, name=name, field=field, problem=f"{weight!r} is not a number")
        try:
            value = float(weight)
        except ValueError:
            raise ManifestError(kind=kind, name=name, field=field, problem=f"{weight!r} is not a number") from None
        if not math.isfinite(value):
            raise ManifestError(kind=kind, name=name, field=field, problem=f"{weight!r} is not a finite number")
        if value < 0:
            raise ManifestError(kind=kind, name=name, field=field, problem="must be greater than or equal to 0")
        texts[str(resource)] = weight if isinstance(weight, str) else weight_text(value)
    section["resourceWeights"] = texts


def parse_objects(
    manifests: Iterable[dict[str, Any]],
) -> Iterator[
    models.APIObject | models.ProvisioningRequestConfig | models.Namespace | models.Configuration | models.Topology
]:
    """Parse many manifests; stops at the first error (ManifestError)."""
    for manifest in manifests:
        yield parse_object(manifest)


def parse_time_ms(value: Any, *, kind: str = "", name: str = "", field: str = "") -> int:
    """An RFC 3339 timestamp (or a datetime from YAML) as ms since the epoch; None/"" is 0."""
    if value in (None, ""):
        return 0
    if isinstance(value, datetime.datetime):
        moment = value
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError as err:
            raise ManifestError(
                kind=kind, name=name, field=field, problem=f"{value!r} is not an RFC 3339 time"
            ) from err
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def format_time_ms(ms: int) -> str:
    """Milliseconds since the epoch as RFC 3339 UTC (``2026-01-01T00:00:00Z``), seconds precision."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_requests(
    pod_spec: dict[str, Any], *, where: str = "template.spec", kind: str = "", name: str = ""
) -> dict[str, int]:
    """Effective per-pod requests of a pod spec, as integer amounts (SEMANTICS §2.3).

    Sum over containers (limits stand in for missing requests), max with each init
    container, restartable (sidecar) init containers added to both, plus
    ``overhead``; pod-level ``resources`` win where set. Negative amounts floor to 0.
    Raises ManifestError naming the container field of a bad quantity.
    """

    def mapping(value: Any, field: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ManifestError(kind=kind, name=name, field=field, problem="must be a mapping")
        return value

    def container_requests(container: dict[str, Any], path: str) -> dict[str, int]:
        resources = mapping(container.get("resources"), f"{path}.resources")
        limits = mapping(resources.get("limits"), f"{path}.resources.limits")
        merged = {**limits, **mapping(resources.get("requests"), f"{path}.resources.requests")}
        return {
            res: _amount(res, q, field=f"{path}.resources.{res}", kind=kind, name=name) for res, q in merged.items()
        }

    total: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(pod_spec.get("initContainers") or []):
        req = container_requests(container, f"{where}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            _add_into(sidecars, req)
            continue
        _max_into(init_peak, {r: v + sidecars.get(r, 0) for r, v in req.items()})
    for i, container in enumerate(pod_spec.get("containers") or []):
        _add_into(total, container_requests(container, f"{where}.containers[{i}]"))
    _add_into(total, sidecars)
    _max_into(total, init_peak)
    pod_level = pod_spec.get("resources")
    if pod_level:
        total.update(container_requests({"resources": pod_level}, f"{where}"))
    for res, q in mapping(pod_spec.get("overhead"), f"{where}.overhead").items():
        total[res] = total.get(res, 0) + _amount(res, q, field=f"{where}.overhead.{res}", kind=kind, name=name)
    return {res: max(v, 0) for res, v in sorted(total.items())}


def _add_into(target: dict[str, int], extra: dict[str, int]) -> None:
    for res, value in extra.items():
        target[res] = target.get(res, 0) + value


def _max_into(target: dict[str, int], other: dict[str, int]) -> None:
    for res, value in other.items():
        target[res] = max(target.get(res, 0), value)


def _amount(resource: str, value: Any, *, field: str, kind: str, name: str, allow_negative: bool = True) -> int:
    try:
        return to_amount(resource, value, allow_negative=allow_negative)
    except QuantityError as err:
        raise ManifestError(kind=kind, name=name, field=field, problem=str(err)) from err


def _as_list(value: Any, field: str, kind: str, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(kind=kind, name=name, field=field, problem="must be a list")
    return value


def normalize_meta(meta: Any, *, kind: str, name: str) -> dict[str, Any]:
    """An object's ``metadata`` as the models keep it (no resourceVersion; ``creationTimestampMs``);
    ManifestError when it is not a mapping or its name is missing or not a DNS-1123 subdomain."""
    return _normalize_meta(meta, kind=kind, name=name)


def _normalize_meta(meta: Any, *, kind: str, name: str) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise ManifestError(kind=kind, name=name, field="metadata", problem="is missing or not a mapping")
    # resourceVersion is left out on purpose: it changes on every status write, and a
    # fact must change only when something that decides admission does.
    out = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "labels", "annotations", "generation")
        if meta.get(k) is not None
    }
    out["creationTimestampMs"] = parse_time_ms(
        meta.get("creationTimestamp"), kind=kind, name=name, field="metadata.creationTimestamp"
    )
    if not out.get("name"):
        raise ManifestError(kind=kind, name=name, field="metadata.name", problem="is required")
    if not isinstance(out["name"], str) or len(out["name"]) > 253 or not _DNS_SUBDOMAIN.match(out["name"]):
        raise ManifestError(
            kind=kind, name=name, field="metadata.name", problem=f"{out['name']!r} is not a valid DNS-1123 subdomain"
        )
    return out


def _convert_quotas(spec: dict[str, Any], *, kind: str, name: str) -> None:
    for g, group in enumerate(_as_list(spec.get("resourceGroups"), "spec.resourceGroups", kind, name)):
        for f, flavor in enumerate(
            _as_list((group or {}).get("flavors"), f"spec.resourceGroups[{g}].flavors", kind, name)
        ):
            path = f"spec.resourceGroups[{g}].flavors[{f}].resources"
            for r, quota in enumerate(_as_list((flavor or {}).get("resources"), path, kind, name)):
                if not isinstance(quota, dict):
                    raise ManifestError(kind=kind, name=name, field=f"{path}[{r}]", problem="must be a mapping")
                resource = str(quota.get("name", ""))
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if quota.get(key) is not None:
                        quota[key] = _amount(
                            resource, quota[key], field=f"{path}[{r}].{key}", kind=kind, name=name, allow_negative=False
                        )


def _weight_to_string(spec: dict[str, Any]) -> None:
    fair = spec.get("fairSharing")
    if isinstance(fair, dict) and fair.get("weight") is not None:
        fair["weight"] = str(fair["weight"])


INVALID_RESOURCES = "resources validation failed"
"""What starts the Misconfigured message of a pod set whose requests exceed its limits (Kueue
pkg/workload/resources.go ErrInvalidWLResources)."""

LIMIT_RANGE_PROBLEM = "resources didn't satisfy LimitRange constraints"
"""What starts the Misconfigured message of a pod set outside its namespace's LimitRanges (Kueue
pkg/workload/resources.go ErrLimitRangeConstraintsUnsatisfiedResources)."""

REQUESTS_OVER_LIMITS = "requests must not exceed its limits"  # Kueue's RequestsMustNotExceedLimitMessage


def field_invalid(path: str, resources: Iterable[str], message: str) -> str:
    """One of Kueue's field errors, as apimachinery's ``field.Invalid(path, resNames, message).Error()`` reads:
    ``spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu","memory"]: <message>`` (the
    resource names sorted, written as JSON)."""
    names = ",".join(f'"{name}"' for name in sorted(resources))
    return f"{path}: Invalid value: [{names}]: {message}"


def aggregate_errors(errors: Iterable[str]) -> str:
    """Field errors as apimachinery's ``ErrorList.ToAggregate().Error()`` joins them: one alone as it is,
    several (repeats dropped, order kept) as ``[first, second]``; "" for none."""
    unique = list(dict.fromkeys(errors))
    if len(unique) <= 1:
        return "".join(unique)
    return "[" + ", ".join(unique) + "]"


def requests_over_limits(pod_spec: dict[str, Any], *, where: str = "template.spec") -> str:
    """Kueue's admissibility check (SEMANTICS §4.3 step 5; pkg/workload/resources.go
    ValidateResources): every init container, container and then the pod-level ``resources``
    (KEP-2837) whose requests of some resources exceed its limits, as Kueue's Misconfigured message
    (``resources validation failed: <path>: Invalid value: ["cpu"]: requests must not exceed its
    limits``, several errors aggregated); "" when none does. ``where`` is the pod spec's path
    (``spec.podSets[i].template.spec`` in a Workload). Bad quantities are left to :func:`pod_requests`,
    which reports them."""
    errors = []
    for group in ("initContainers", "containers"):
        for i, container in enumerate(pod_spec.get(group) or []):
            resources = container.get("resources") if isinstance(container, dict) else None
            over = _requests_over_limit(resources if isinstance(resources, dict) else {})
            if over:
                errors.append(field_invalid(f"{where}.{group}[{i}]", over, REQUESTS_OVER_LIMITS))
    # Pod-level requests count for quota in place of the containers' (pod_requests), so Kueue
    # checks them against the pod-level limits as well.
    pod_resources = pod_spec.get("resources")
    over = _requests_over_limit(pod_resources if isinstance(pod_resources, dict) else {})
    if over:
        errors.append(field_invalid(f"{where}.resources", over, REQUESTS_OVER_LIMITS))
    return f"{INVALID_RESOURCES}: {aggregate_errors(errors)}" if errors else ""


def _requests_over_limit(resources: Mapping[str, Any]) -> list[str]:
    """The resources (by name) whose request in ``resources`` (a ResourceRequirements mapping) exceeds
    its limit, as Kueue's GreaterKeysRL: a resource with no limit is not over; one whose quantity does
    not parse is left out."""
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    if not isinstance(limits, dict) or not isinstance(requests, dict):
        return []
    over = []
    for res in sorted(set(limits) & set(requests)):
        try:
            if to_amount(res, requests[res], allow_negative=True) > to_amount(res, limits[res], allow_negative=True):
                over.append(str(res))
        except QuantityError:
            continue
    return over


# Kueue v1beta2 PodSet's fields (apis/kueue/v1beta2/workload_types.go): an API server with
# strict field validation (kubectl's default) refuses any other, so a misspelt one is an error
# here too rather than a field silently dropped (which would change the outcome).
_POD_SET_FIELDS = frozenset({"name", "template", "count", "minCount", "topologyRequest"})


# v1beta1's Workload priority fields (spec.priorityClassName and spec.priorityClassSource), still
# what the scenario format's README names: read as v1beta2's spec.priorityClassRef.
_V1BETA1_PRIORITY_FIELDS = {"priorityClassName": None, "priorityClassSource": None}
_K8S_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"


def _known_fields(kind: str) -> dict[str, Any] | None:
    """The field tree of ``kind`` in Kueue's v1beta2 CRDs (events/kueue_fields.py), with the
    v1beta1 priority fields a Workload may still carry."""
    tree = KNOWN_FIELDS.get(kind)
    if kind == "Workload" and tree is not None:
        tree = {**tree, "spec": {**tree["spec"], **_V1BETA1_PRIORITY_FIELDS}}
    return tree


def _refuse_unknown_tree(value: Any, tree: dict[str, Any] | None, *, where: str, kind: str, name: str) -> None:
    """Strict field validation against Kueue's CRD: raise ManifestError naming the first field
    (path order) that the CRD does not declare; lists are checked item by item."""
    if tree is None:
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_unknown_tree(item, tree, where=f"{where}[{i}]", kind=kind, name=name)
        return
    if not isinstance(value, dict):
        return  # a wrong type is the model's to report, with its expected type
    for key in value:
        if key not in tree:
            raise ManifestError(
                kind=kind,
                name=name,
                field=f"{where}.{key}" if where else str(key),
                problem=f"unknown field (known: {', '.join(sorted(tree))})",
            )
    for key, sub in value.items():
        _refuse_unknown_tree(sub, tree[key], where=f"{where}.{key}" if where else str(key), kind=kind, name=name)


def priority_class_name_to_ref(spec: dict[str, Any]) -> None:
    """v1beta1's ``priorityClassName`` (+ ``priorityClassSource``) as v1beta2's ``priorityClassRef``:
    a WorkloadPriorityClass unless the source names Kubernetes' PriorityClass."""
    class_name = spec.pop("priorityClassName", None)
    source = spec.pop("priorityClassSource", None)
    if class_name and not spec.get("priorityClassRef"):
        if source == _K8S_PRIORITY_CLASS_SOURCE:
            spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": class_name}
        else:
            spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": class_name}


def _wire_names(model: type[msgspec.Struct]) -> frozenset[str]:
    """The camelCase field names of a model that mirrors a Kueue struct field for field."""
    return frozenset(f.encode_name for f in msgspec.structs.fields(model))


def _refuse_unknown_fields(raw: dict[str, Any], known: frozenset[str], *, where: str, kind: str, name: str) -> None:
    """Raise ManifestError for the first key of ``raw`` (sorted) that is not in ``known``."""
    unknown = sorted(k for k in raw if k not in known)
    if unknown:
        raise ManifestError(
            kind=kind,
            name=name,
            field=f"{where}.{unknown[0]}",
            problem=f"unknown field (known: {', '.join(sorted(known))})",
        )


def _convert_pod_set(pod_set: Any, *, index: int, kind: str, name: str, strict: bool = True) -> dict[str, Any]:
    where = f"spec.podSets[{index}]"
    if not isinstance(pod_set, dict):
        raise ManifestError(kind=kind, name=name, field=where, problem="must be a mapping")
    template = pod_set.get("template") or {}
    pod_spec = template.get("spec") or {}
    out = {k: pod_set[k] for k in ("name", "count", "minCount") if pod_set.get(k) is not None}
    out["requests"] = pod_requests(pod_spec, where=f"{where}.template.spec", kind=kind, name=name)
    if pod_spec.get("nodeSelector"):
        out["nodeSelector"] = pod_spec["nodeSelector"]
    if pod_spec.get("tolerations"):
        out["tolerations"] = pod_spec["tolerations"]
    terms = required_node_affinity(pod_spec)
    if terms:
        out["requiredNodeAffinity"] = terms
    preferred = preferred_node_affinity(pod_spec)
    if preferred:
        out["preferredNodeAffinity"] = preferred
    if strict:
        _refuse_unknown_fields(pod_set, _POD_SET_FIELDS, where=where, kind=kind, name=name)
    if pod_set.get("topologyRequest") is not None:
        request = pod_set["topologyRequest"]
        if strict and isinstance(request, dict):
            _refuse_unknown_fields(
                request,
                _wire_names(models.PodSetTopologyRequest),
                where=f"{where}.topologyRequest",
                kind=kind,
                name=name,
            )
            layers = request.get("podsetSliceRequiredTopologyConstraints")
            for i, layer in enumerate(layers if isinstance(layers, list) else []):
                if isinstance(layer, dict):
                    field = f"{where}.topologyRequest.podsetSliceRequiredTopologyConstraints[{i}]"
                    _refuse_unknown_fields(
                        layer,
                        _wire_names(models.PodsetSliceRequiredTopologyConstraint),
                        where=field,
                        kind=kind,
                        name=name,
                    )
        out["topologyRequest"] = request
    problem = requests_over_limits(pod_spec, where=f"{where}.template.spec")
    if problem:
        out["misconfigured"] = problem
    claims = pod_resource_claims(pod_spec, where=f"{where}.template.spec", kind=kind, name=name)
    if claims:
        out["resourceClaims"] = claims
    return out


def pod_resource_claims(pod_spec: Mapping[str, Any], *, where: str, kind: str, name: str) -> list[dict[str, str]]:
    """A pod spec's ``resourceClaims`` in the wire shape of :class:`models.PodResourceClaim` (camelCase),
    for a pod set; ManifestError when it is not a list of mappings with a name."""
    raw = pod_spec.get("resourceClaims")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ManifestError(kind=kind, name=name, field=f"{where}.resourceClaims", problem="must be a list")
    out = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ManifestError(
                kind=kind, name=name, field=f"{where}.resourceClaims[{index}]", problem="must be a mapping with a name"
            )
        claim = {"name": item["name"]}
        for key in ("resourceClaimTemplateName", "resourceClaimName"):
            if isinstance(item.get(key), str):
                claim[key] = item[key]
        out.append(claim)
    return out


def required_node_affinity(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec's requiredDuringSchedulingIgnoredDuringExecution node selector terms (raw)."""
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return [{"matchExpressions": t.get("matchExpressions") or []} for t in required.get("nodeSelectorTerms") or []]


def preferred_node_affinity(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec's preferredDuringSchedulingIgnoredDuringExecution terms (raw: weight and the
    preference's matchExpressions)."""
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return [
        {
            "weight": t.get("weight"),
            "preference": {"matchExpressions": (t.get("preference") or {}).get("matchExpressions") or []},
        }
        for t in terms
        if isinstance(t, dict)
    ]


def _split_validation_error(message: str) -> tuple[str, str]:
    """msgspec says ``Expected `int`, got `str` - at `$.spec.x[0]```: split into field and problem."""
    problem, _, path = message.partition(" - at `")
    field = path.rstrip("`").removeprefix("$").removeprefix(".")
    missing = re.search(r"missing required field `([^`]+)`", problem)
    if missing:
        field = f"{field}.{missing.group(1)}" if field else missing.group(1)
    for pattern, replacement in _LIMIT_PROBLEMS:
        problem = re.sub(pattern, replacement, problem)
    return field, problem


#: msgspec's words for a broken model limit (models.py Meta), as Kubernetes says them.
_LIMIT_PROBLEMS = (
    (r"^Expected `array` of length >= (\d+)$", r"must have at least \1 items"),
    (r"^Expected `array` of length <= (\d+)$", r"must have at most \1 items"),
    (r"^Expected `object` of length <= (\d+)$", r"must have at most \1 entries"),
    (r"^Expected `int` >= (-?\d+)$", r"must be greater than or equal to \1"),
    (r"^Expected `str` of length <= (\d+)$", r"may not be more than \1 characters"),
    (r"^Expected `str` of length >= (\d+)$", r"must be at least \1 characters"),
    (r"^Expected `str` matching regex (.*)$", r"must match \1"),
)


def _validate(obj: models.APIObject | models.ProvisioningRequestConfig, *, kind: str, name: str) -> None:
    """The webhook rules of SEMANTICS §1 that this version enforces."""
    match obj:
        case models.ClusterQueue() | models.Cohort():
            _validate_groups(obj.spec.resource_groups, kind=kind, name=name)
            has_parent = obj.spec.cohort_name if isinstance(obj, models.ClusterQueue) else obj.spec.parent_name
            for g, group in enumerate(obj.spec.resource_groups):
                for f, flavor in enumerate(group.flavors):
                    for r, quota in enumerate(flavor.resources):
                        path = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]"
                        if not has_parent and (quota.borrowing_limit is not None or quota.lending_limit is not None):
                            parent = "cohortName" if kind == "ClusterQueue" else "parentName"
                            raise ManifestError(
                                kind=kind,
                                name=name,
                                field=path,
                                problem=f"borrowingLimit and lendingLimit need spec.{parent}",
                            )
                        if (
                            kind == "ClusterQueue"
                            and quota.lending_limit is not None
                            and quota.lending_limit > quota.nominal_quota
                        ):
                            raise ManifestError(
                                kind=kind,
                                name=name,
                                field=f"{path}.lendingLimit",
                                problem="must be less than or equal to nominalQuota",
                            )
        case models.MultiKueueCluster():
            source = obj.spec.cluster_source
            if (source.kube_config is None) == (source.cluster_profile_ref is None):
                raise ManifestError(
                    kind=kind,
                    name=name,
                    field="spec.clusterSource",
                    problem="exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
                )
        case models.MultiKueueConfig():
            seen: set[str] = set()
            for i, cluster in enumerate(obj.spec.clusters):
                if cluster in seen:
                    raise ManifestError(
                        kind=kind, name=name, field=f"spec.clusters[{i}]", problem=f"must be unique ({cluster!r} again)"
                    )
                seen.add(cluster)
        case models.Workload():
            if not obj.spec.pod_sets:
                raise ManifestError(kind=kind, name=name, field="spec.podSets", problem="needs at least one pod set")
            gate_names = [gate.name for gate in obj.spec.preemption_gates]
            for i, gate_name in enumerate(gate_names):
                if gate_name in gate_names[:i]:  # +listType=map, +listMapKey=name
                    raise ManifestError(
                        kind=kind, name=name, field=f"spec.preemptionGates[{i}].name", problem=f"{gate_name!r} again"
                    )
            for i, ps in enumerate(obj.spec.pod_sets):
                if ps.count < 0:
                    raise ManifestError(kind=kind, name=name, field=f"spec.podSets[{i}].count", problem="must be >= 0")
                if ps.min_count is not None and not 1 <= ps.min_count <= ps.count:
                    raise ManifestError(
                        kind=kind, name=name, field=f"spec.podSets[{i}].minCount", problem="must be between 1 and count"
                    )
                if ps.topology_request is not None:
                    try:
                        tas_requests.validate_topology_request(
                            ps.topology_request,
                            count=ps.count,
                            field=f"spec.podSets[{i}].topologyRequest",
                            workload_object=True,
                        )
                    except tas_requests.TopologyRequestError as err:
                        raise ManifestError(kind=kind, name=name, field=err.field, problem=err.problem) from err
            # No leader + workers group rules here: they are the job webhooks' (validate_pod_set_groups);
            # Kueue's Workload webhook has none of them.
        case _:
            pass


def _validate_groups(groups: list[models.ResourceGroup], *, kind: str, name: str) -> None:
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g, group in enumerate(groups):
        for res in group.covered_resources:
            if res in seen_resources:
                raise ManifestError(
                    kind=kind,
                    name=name,
                    field=f"spec.resourceGroups[{g}].coveredResources",
                    problem=f"resource {res} is covered by more than one resource group",
                )
            seen_resources.add(res)
        for f, flavor in enumerate(group.flavors):
            path = f"spec.resourceGroups[{g}].flavors[{f}]"
            if flavor.name in seen_flavors:
                raise ManifestError(
                    kind=kind,
                    name=name,
                    field=f"{path}.name",
                    problem=f"flavor {flavor.name} appears in more than one resource group",
                )
            seen_flavors.add(flavor.name)
            listed = [q.name for q in flavor.resources]
            if listed != list(group.covered_resources):
                raise ManifestError(
                    kind=kind,
                    name=name,
                    field=f"{path}.resources",
                    problem=f"must list exactly the covered resources {group.covered_resources} in order, got {listed}",
                )


# --- TAS inputs: Topology, v1 Node, v1 Pod (SEMANTICS-ADVANCED A.1, A.2) --------------------

TOPOLOGY_APIS = frozenset({KUEUE_API, "kueue.x-k8s.io/v1alpha1"})


def parse_topology(manifest: dict[str, Any]) -> models.Topology:
    """A kueue.x-k8s.io Topology (v1beta2 or v1alpha1) with Kueue's validation (A.1): 1..16
    levels of valid, unique label keys, ``kubernetes.io/hostname`` only as the last level.
    Raises ManifestError naming the field."""
    kind, name = describe(manifest)
    if manifest.get("apiVersion") not in TOPOLOGY_APIS or kind != "Topology":
        raise ManifestError(kind=kind, name=name, field="apiVersion/kind", problem="is not a kueue.x-k8s.io Topology")
    raw = {"metadata": _normalize_meta(manifest.get("metadata"), kind=kind, name=name), "spec": manifest.get("spec")}
    try:
        topology = msgspec.convert(raw, models.Topology)
    except msgspec.ValidationError as err:
        field, problem = _split_validation_error(str(err))
        raise ManifestError(kind=kind, name=name, field=field, problem=problem) from err
    keys = topology.level_keys
    if not 1 <= len(keys) <= 16:
        raise ManifestError(kind=kind, name=name, field="spec.levels", problem="must have 1 to 16 levels")
    for i, key in enumerate(keys):
        where = f"spec.levels[{i}].nodeLabel"
        if not tas_requests.valid_label_key(key) or len(key) > 316:
            raise ManifestError(kind=kind, name=name, field=where, problem=f"{key!r} is not a valid label key")
        if key in keys[:i]:
            raise ManifestError(kind=kind, name=name, field=where, problem=f"{key!r} appears twice")
        if key == tas_requests.HOSTNAME_LABEL and i != len(keys) - 1:
            raise ManifestError(
                kind=kind, name=name, field=where, problem="kubernetes.io/hostname must be the last level"
            )
    return topology


def parse_node(manifest: dict[str, Any]) -> models.Node:
    """A v1 Node as TAS reads it (A.2.1): labels, ``spec.taints``, ``spec.unschedulable``,
    ``status.allocatable`` as integer amounts and the status of the Ready condition.
    Raises ManifestError naming the field of a bad quantity or a wrong type."""
    kind, name = describe(manifest)
    if manifest.get("apiVersion") != "v1" or kind != "Node":
        raise ManifestError(kind=kind, name=name, field="apiVersion/kind", problem="is not a v1 Node")
    spec = manifest.get("spec") or {}
    status = manifest.get("status") or {}
    if not isinstance(spec, dict) or not isinstance(status, dict):
        raise ManifestError(kind=kind, name=name, field="spec/status", problem="must be mappings")
    allocatable = {
        str(res): _amount(str(res), q, field=f"status.allocatable.{res}", kind=kind, name=name, allow_negative=False)
        for res, q in sorted((status.get("allocatable") or {}).items())
    }
    ready = ""
    for cond in _as_list(status.get("conditions"), "status.conditions", kind, name):
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            ready = str(cond.get("status") or "")
            break
    raw = {
        "metadata": _normalize_meta(manifest.get("metadata"), kind=kind, name=name),
        "spec": {
            "taints": [
                {k: t[k] for k in ("key", "value", "effect") if k in t}
                for t in _as_list(spec.get("taints"), "spec.taints", kind, name)
                if isinstance(t, dict)
            ],
            "unschedulable": bool(spec.get("unschedulable")),
        },
        "status": {"allocatable": allocatable, "ready": ready},
    }
    try:
        return msgspec.convert(raw, models.Node)
    except msgspec.ValidationError as err:
        field, problem = _split_validation_error(str(err))
        raise ManifestError(kind=kind, name=name, field=field, problem=problem) from err


def parse_pod_usage(manifest: dict[str, Any]) -> models.PodUsage | None:
    """What a v1 Pod takes from its node for TAS (A.2.2), or None for a TAS pod (one carrying
    any topology annotation, Kueue utiltas.IsTAS): those are counted through their workload's
    assignment instead. ``requests`` = the pod request formula (:func:`pod_requests`) plus
    ``pods: 1``. The caller decides which pods to report (kueue-es-managed pods are not
    non-TAS usage when their workload has a topology assignment). Raises ManifestError."""
    kind, name = describe(manifest)
    if manifest.get("apiVersion") != "v1" or kind != "Pod":
        raise ManifestError(kind=kind, name=name, field="apiVersion/kind", problem="is not a v1 Pod")
    meta = _normalize_meta(manifest.get("metadata"), kind=kind, name=name)
    if any(a in (meta.get("annotations") or {}) for a in tas_requests.TAS_POD_ANNOTATIONS):
        return None
    spec = manifest.get("spec") or {}
    requests = pod_requests(spec, where="spec", kind=kind, name=name)
    requests["pods"] = requests.get("pods", 0) + 1
    return models.PodUsage(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        node_name=str(spec.get("nodeName") or ""),
        phase=str((manifest.get("status") or {}).get("phase") or ""),
        requests=dict(sorted(requests.items())),
    )
