"""Kueue's Workload admission webhooks as pure functions: what a Workload gets at creation, what is refused.

Why this module exists: Kueue refuses an invalid Workload at the API server twice over. The CRD
(its OpenAPI schema and CEL rules: :mod:`kueue_es.crds`, checked by :mod:`kueue_es.validation`) says
what one object may hold; the Workload webhooks (Kueue pkg/webhooks/workload_webhook.go, ``mworkload.kb.io``
and ``vworkload.kb.io`` on ``workloads`` and ``workloads/status``) add what a schema cannot say: a pod
set's ``pods`` resource reserved for Kueue, at most one pod set with ``minCount``, the admission a
QuotaReserved Workload must carry, pod sets frozen while quota is reserved, ... A Workload created by
hand reaches kueue-es's watcher unchecked without them. The emulated API server
(:mod:`kueue_es.sim.emulator`) and ``kueue-es service webhook`` (:mod:`kueue_es.services.webhook`) both
answer from :func:`validate` and :func:`default`, so the demo and a cluster refuse the same objects with
Kueue's field paths and messages (``spec.podSets[0].template.spec.containers[0].resources.requests[pods]:
Invalid value: "pods": the key is reserved for internal kueue use``).

Objects are JSON (what kubectl sends) after the CRD's defaults (a pod set's ``name: main``, ``count: 1``),
as kube-apiserver hands them to a webhook. Feature gates come in ``gates`` (the Configuration's
``featureGates``), each read with Kueue's default unless set (:data:`GATE_DEFAULTS`). Pure: no I/O, no clock.

Where the messages differ from Kueue's: a value Kubernetes prints as Go's ``%#v`` of a struct (an immutable
pod set, an admission) is abbreviated (``v1beta2.PodSet{...}``), and the resource-usage rule prints the
quantity and the count (Kueue prints the Quantity struct and the count pointer's address).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from kueue_es.events import labels as k8s_labels
from kueue_es.events import models, quantities, slices
from kueue_es.jobframework.webhooks import FieldError, GoLiteral
from kueue_es.projections.cluster import PRIORITY_BOOST_GATE, parse_priority_boost

API_VERSION: Final = "kueue.x-k8s.io/v1beta2"
KIND: Final = "Workload"
#: controller-runtime's paths for Kueue's Workload webhooks (workload_webhook.go kubebuilder markers).
MUTATE_PATH: Final = "/mutate-kueue-x-k8s-io-v1beta2-workload"
VALIDATE_PATH: Final = "/validate-kueue-x-k8s-io-v1beta2-workload"
MUTATING_NAME: Final = "mworkload.kb.io"
VALIDATING_NAME: Final = "vworkload.kb.io"

PARTIAL_ADMISSION: Final = "PartialAdmission"
TOPOLOGY_AWARE_SCHEDULING: Final = "TopologyAwareScheduling"
ADMISSION_GATED_BY: Final = "AdmissionGatedBy"
POD_SET_METADATA: Final = "WorkloadValidationForPodSetMetadata"
NON_NEGATIVE: Final = "WorkloadValidateResourcesAreNonNegative"
TAS_SLICE_SIZE: Final = "TASValidateWorkloadSliceSize"

#: The gates these rules read, with their defaults (Kueue pkg/features/kube_features.go at v0.20; the
#: elastic-job gate on since v0.18, :data:`kueue_es.events.slices.GATE_DEFAULT`).
GATE_DEFAULTS: Final[Mapping[str, bool]] = {
    PARTIAL_ADMISSION: True,
    TOPOLOGY_AWARE_SCHEDULING: True,
    ADMISSION_GATED_BY: True,
    POD_SET_METADATA: True,
    NON_NEGATIVE: True,
    TAS_SLICE_SIZE: True,
    PRIORITY_BOOST_GATE: False,
    slices.GATE: slices.GATE_DEFAULT,
}

ADMISSION_GATED_BY_ANNOTATION: Final = "kueue.x-k8s.io/admission-gated-by"
_GATED_BY_PATH: Final = f"metadata.annotations[{ADMISSION_GATED_BY_ANNOTATION}]"
_BOOST_PATH: Final = f"metadata.annotations[{models.PRIORITY_BOOST_ANNOTATION}]"
_IMMUTABLE: Final = "field is immutable"
_TOTAL_ANNOTATION_SIZE: Final = 256 * 1024

_HTTP_PATH_FMT: Final = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"


def gate(gates: Mapping[str, bool], name: str) -> bool:
    """Whether feature gate ``name`` is on: as ``gates`` sets it, else its default (:data:`GATE_DEFAULTS`)."""
    return bool(gates.get(name, GATE_DEFAULTS.get(name, False)))


def default(obj: Mapping[str, Any], *, gates: Mapping[str, bool]) -> dict[str, Any]:
    """The Workload ``obj`` as Kueue's mutating Workload webhook leaves it at creation (a copy): with the gate
    PartialAdmission off, every pod set's ``minCount`` dropped; else unchanged. (A pod set's ``name: main`` and
    ``count: 1`` are the CRD's defaults, applied by the API server before.) Kueue: workload_webhook.go Default."""
    out = copy.deepcopy(dict(obj))
    if not gate(gates, PARTIAL_ADMISSION):
        for pod_set in _list(_map(out.get("spec")).get("podSets")):
            if isinstance(pod_set, dict):
                pod_set.pop("minCount", None)
    return out


def validate(
    obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None, gates: Mapping[str, bool]
) -> list[FieldError]:
    """Every reason Kueue's validating Workload webhook refuses ``obj`` (JSON, the CRD's defaults applied):
    a create when ``old`` is None, else the update of ``old`` (through the main resource or ``status`` alike:
    the webhook sees the whole object). ``[]``: allowed. Errors carry Kueue's field paths
    (``spec.podSets[0].count``, ``status.reclaimablePods[main].count``) in Kueue's order.

    Create and update (workload_webhook.go ValidateWorkload): each pod set's template labels and annotations
    (gate WorkloadValidationForPodSetMetadata), its containers', init containers' and pod-level requests and
    limits (the ``pods`` key reserved; no negative quantity under WorkloadValidateResourcesAreNonNegative),
    its topology request's slice size (TASValidateWorkloadSliceSize); at most one pod set with ``minCount``,
    none on an elastic Workload; with the QuotaReserved condition true, ``status.admission`` set, naming only
    pod sets, each usage a multiple of its count; reclaimable pods of known pod sets, no more than their
    count; admission check pod set updates of known pod sets with valid labels, annotations, node selector
    and toleration keys; the ``kueue.x-k8s.io/admission-gated-by`` annotation's format (AdmissionGatedBy)
    and the ``kueue.x-k8s.io/priority-boost`` annotation an integer (PriorityBoost).

    Update only (ValidateWorkloadUpdate): pod sets immutable while ``old`` holds quota (an elastic Workload's
    count may go down), reclaimable counts neither decreasing nor removed while both hold quota, the admission
    immutable (its topology assignments excepted under TopologyAwareScheduling), a Ready check's pod set
    updates immutable, ``status.clusterName`` set only to one of the nominated clusters, and admission gates
    only removed.
    """
    errors = _validate_workload(obj, old, gates)
    if old is not None:
        errors += _validate_update(obj, old, gates)
    return errors


def message(errors: Sequence[FieldError]) -> str:
    """The denial kubectl prints: ``admission webhook "vworkload.kb.io" denied the request: <errors>`` (one
    error as it is, more as ``[e1, e2]``, utilerrors.Aggregate)."""
    listed = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    return f'admission webhook "{VALIDATING_NAME}" denied the request: {listed}'


# -- ValidateWorkload ----------------------------------------------------------------------------


def _validate_workload(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, gates: Mapping[str, bool]
) -> list[FieldError]:
    errors: list[FieldError] = []
    pod_sets = [ps for ps in _list(_spec(obj).get("podSets")) if isinstance(ps, Mapping)]
    with_min_count = 0
    for i, pod_set in enumerate(pod_sets):
        errors += _pod_set(pod_set, f"spec.podSets[{i}]", gates)
        if pod_set.get("minCount") is not None:
            with_min_count += 1
    if with_min_count > 1:
        errors.append(_invalid("spec.podSets", with_min_count, "at most one podSet can use minCount"))
    if with_min_count and _elastic(obj, gates):
        errors.append(
            _invalid("spec.podSets", with_min_count, "partial admission and elastic job cannot be used together")
        )
    if holds_quota(obj):
        errors += _admission(obj, old)
    errors += _reclaimable_pods(obj, old, gates)
    errors += _admission_checks(obj)
    if gate(gates, ADMISSION_GATED_BY):
        errors += _gated_by_format(_annotations(obj).get(ADMISSION_GATED_BY_ANNOTATION) or "")
    if gate(gates, PRIORITY_BOOST_GATE) and models.PRIORITY_BOOST_ANNOTATION in _annotations(obj):
        value = str(_annotations(obj)[models.PRIORITY_BOOST_ANNOTATION])
        if value == "":
            detail = 'must be a valid signed integer; use "0" explicitly, empty string is not allowed'
            errors.append(_invalid(_BOOST_PATH, value, detail))
        elif parse_priority_boost(value) is None:
            errors.append(_invalid(_BOOST_PATH, value, "must be a valid signed integer"))
    return errors


def _pod_set(pod_set: Mapping[str, Any], path: str, gates: Mapping[str, bool]) -> list[FieldError]:
    """workload_webhook.go validatePodSet."""
    errors: list[FieldError] = []
    template = _map(pod_set.get("template"))
    if gate(gates, POD_SET_METADATA):
        meta = _map(template.get("metadata"))
        errors += _labels(_map(meta.get("labels")), f"{path}.template.metadata.labels")
        errors += _annotation_keys(_map(meta.get("annotations")), f"{path}.template.metadata.annotations")
    spec = _map(template.get("spec"))
    for group in ("initContainers", "containers"):
        for c, container in enumerate(_list(spec.get(group))):
            resources = _map(_map(container).get("resources"))
            where = f"{path}.template.spec.{group}[{c}].resources"
            errors += _resource_list(resources.get("requests"), f"{where}.requests", gates)
            errors += _resource_list(resources.get("limits"), f"{where}.limits", gates)
    if isinstance(spec.get("resources"), Mapping):
        where = f"{path}.template.spec.resources"
        errors += _resource_list(spec["resources"].get("requests"), f"{where}.requests", gates)
        errors += _resource_list(spec["resources"].get("limits"), f"{where}.limits", gates)
    if gate(gates, TAS_SLICE_SIZE) and isinstance(pod_set.get("topologyRequest"), Mapping):
        errors += _slice_size(pod_set["topologyRequest"], f"{path}.topologyRequest")
    return errors


def _resource_list(values: Any, path: str, gates: Mapping[str, bool]) -> list[FieldError]:
    """validateResourceList: the ``pods`` key is Kueue's own (it counts pods as a resource), and with
    WorkloadValidateResourcesAreNonNegative no quantity may be negative (IsNegativeErrorMsg)."""
    errors: list[FieldError] = []
    for name, value in sorted(_map(values).items()):
        where = f"{path}[{name}]"
        if name == "pods":
            errors.append(_invalid(where, "pods", "the key is reserved for internal kueue use"))
        if gate(gates, NON_NEGATIVE):
            number = _quantity(value)
            if number is not None and number < 0:
                errors.append(_invalid(where, quantities.canonical(value), "must be greater than or equal to 0"))
    return errors


def _slice_size(request: Mapping[str, Any], path: str) -> list[FieldError]:
    """validateTASSliceSize: the single-layer slice fields go together, and every slice size is positive."""
    errors: list[FieldError] = []
    size = request.get("podSetSliceSize")
    if request.get("podSetSliceRequiredTopology") is not None:
        if size is None:
            errors.append(
                FieldError(
                    type="Required",
                    field=f"{path}.podSetSliceSize",
                    detail="must be set when podSetSliceRequiredTopology is specified",
                )
            )
        elif _int(size) is not None and size <= 0:
            errors.append(_invalid(f"{path}.podSetSliceSize", size, "must be greater than 0"))
    elif size is not None:
        errors.append(
            FieldError(
                type="Forbidden",
                field=f"{path}.podSetSliceSize",
                detail="may not be set when podSetSliceRequiredTopology is not specified",
            )
        )
    for i, layer in enumerate(_list(request.get("podsetSliceRequiredTopologyConstraints"))):
        layer_size = _int(_map(layer).get("size"))
        if layer_size is not None and layer_size <= 0:
            where = f"{path}.podsetSliceRequiredTopologyConstraints[{i}].size"
            errors.append(_invalid(where, layer_size, "must be greater than 0"))
    return errors


def _admission(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """validateAdmission, for a Workload whose QuotaReserved condition is true."""
    admission = _status(obj).get("admission")
    if not isinstance(admission, Mapping):
        if old is not None and holds_quota(old) and not isinstance(_status(old).get("admission"), Mapping):
            return []  # already so: let it through, so it can converge (reservesQuotaWithoutAdmission)
        return [
            FieldError(
                type="Required",
                field="status.admission",
                detail="must be set while the QuotaReserved condition is true",
            )
        ]
    errors: list[FieldError] = []
    names = set(_pod_set_names(obj))
    for i, assignment in enumerate(_list(admission.get("podSetAssignments"))):
        assignment = _map(assignment)
        where = f"status.admission.podSetAssignments[{i}]"
        if assignment.get("name") not in names:
            errors.append(FieldError(type="NotFound", field=f"{where}.name", detail="", value=assignment.get("name")))
        count = _int(assignment.get("count")) or 0
        if count <= 0:
            continue
        for resource, value in sorted(_map(assignment.get("resourceUsage")).items()):
            amount = _amount(str(resource), value)
            if amount is not None and amount % count:
                errors.append(
                    _invalid(f"{where}.resourceUsage[{resource}]", str(value), f"is not a multiple of {count}")
                )
    return errors


def _reclaimable_pods(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, gates: Mapping[str, bool]
) -> list[FieldError]:
    """validateReclaimablePods: each names a pod set and counts no more than its pods; on an elastic Workload
    an unchanged count over the limit (left by a scale-down) goes through, so the job can converge."""
    entries = [_map(e) for e in _list(_status(obj).get("reclaimablePods"))]
    if not entries:
        return []
    counts = {ps.get("name"): ps.get("count") for ps in _pod_sets(obj)}
    names = list(counts)
    old_entries = [_map(e) for e in _list(_status(old).get("reclaimablePods"))] if old is not None else []
    errors: list[FieldError] = []
    for entry in entries:
        name, count = entry.get("name"), entry.get("count")
        where = f"status.reclaimablePods[{name}]"
        if name not in counts:
            errors.append(_not_supported(f"{where}.name", name, names))
            continue
        limit, count = _int(counts[name]), _int(count)
        if count is None or limit is None or count <= limit:
            continue
        stale = (
            old is not None
            and _elastic(obj, gates)
            and any(e.get("name") == name and e.get("count") == count for e in old_entries)
        )
        if not stale:
            errors.append(_invalid(f"{where}.count", count, f"should be less or equal to {limit}"))
    return errors


def _admission_checks(obj: Mapping[str, Any]) -> list[FieldError]:
    """validateAdmissionChecks / validatePodSetUpdates: a check's pod set updates name known pod sets and carry
    valid toleration keys, annotations, node selector and labels."""
    errors: list[FieldError] = []
    names = _pod_set_names(obj)
    for i, check in enumerate(_list(_status(obj).get("admissionChecks"))):
        for u, update in enumerate(_list(_map(check).get("podSetUpdates"))):
            update = _map(update)
            where = f"status.admissionChecks[{i}].podSetUpdates[{u}]"
            if update.get("name") not in names:
                errors.append(_not_supported(f"{where}.name", update.get("name"), sorted(map(str, names))))
            for t, toleration in enumerate(_list(update.get("tolerations"))):
                key = _map(toleration).get("key")
                if isinstance(key, str) and key:
                    errors += [
                        _invalid(f"{where}.tolerations[{t}].key", key, problem)
                        for problem in k8s_labels.qualified_name_problems(key)
                    ]
            errors += _annotation_keys(_map(update.get("annotations")), f"{where}.annotations")
            errors += _labels(_map(update.get("nodeSelector")), f"{where}.nodeSelector")
            errors += _labels(_map(update.get("labels")), f"{where}.labels")
    return errors


# -- ValidateWorkloadUpdate ----------------------------------------------------------------------


def _validate_update(new: Mapping[str, Any], old: Mapping[str, Any], gates: Mapping[str, bool]) -> list[FieldError]:
    errors: list[FieldError] = []
    if holds_quota(old):
        errors += _immutable_pod_sets(_pod_sets(new), _pod_sets(old), gates)
    if holds_quota(new) and holds_quota(old):
        errors += _reclaimable_pods_update(new, old, gates)
    errors += _admission_update(_status(new).get("admission"), _status(old).get("admission"), gates)
    errors += _immutable_pod_set_updates(new, old)
    errors += _cluster_name_update(new, old, gates)
    if gate(gates, ADMISSION_GATED_BY):
        errors += _gated_by_update(old, new)
    return errors


def _immutable_pod_sets(
    new: list[Mapping[str, Any]], old: list[Mapping[str, Any]], gates: Mapping[str, bool]
) -> list[FieldError]:
    """validateImmutablePodSets: while quota is reserved the pod sets may not change, but for an elastic
    Workload's count going down (ElasticJobsViaWorkloadSlices). Kueue names a pod set ``spec.podSets.<i>``
    (``path.Child(strconv.Itoa(i))``), not ``[i]``."""
    if len(new) != len(old):
        return [_invalid("spec.podSets", GoLiteral("[]v1beta2.PodSet{...}"), _IMMUTABLE)]
    errors: list[FieldError] = []
    for i, (now, before) in enumerate(zip(new, old, strict=True)):
        compared = dict(now)
        count, old_count = _int(now.get("count")), _int(before.get("count"))
        if gate(gates, slices.GATE) and count is not None and old_count is not None and count < old_count:
            compared["count"] = before.get("count")
        if not semantically_equal(compared, before):
            errors.append(_invalid(f"spec.podSets.{i}", GoLiteral("v1beta2.PodSet{...}"), _IMMUTABLE))
    return errors


def _reclaimable_pods_update(
    new: Mapping[str, Any], old: Mapping[str, Any], gates: Mapping[str, bool]
) -> list[FieldError]:
    """validateReclaimablePodsUpdate: while quota is reserved a reclaimable count may not go down nor be
    removed, except for a pod set an elastic Workload scaled down below its admitted count."""
    now = [_map(e) for e in _list(_status(new).get("reclaimablePods"))]
    before = {e.get("name"): e.get("count") for e in map(_map, _list(_status(old).get("reclaimablePods")))}
    if not before or {e.get("name"): e.get("count") for e in now} == before:
        return []
    scaled_down = _scaled_down(new, gates)
    errors: list[FieldError] = []
    for entry in now:
        name, count = entry.get("name"), _int(entry.get("count"))
        old_count = _int(before.get(name))
        if count is None or old_count is None or name in scaled_down:
            continue
        if count < old_count:
            errors.append(_invalid(f"status.reclaimablePods[{name}].count", count, f"cannot be less than {old_count}"))
    present = {e.get("name") for e in now}
    for name in sorted(before, key=str):
        if name not in present and name not in scaled_down:
            errors.append(
                FieldError(type="Required", field=f"status.reclaimablePods[{name}]", detail="cannot be removed")
            )
    return errors


def _scaled_down(obj: Mapping[str, Any], gates: Mapping[str, bool]) -> set[Any]:
    """scaledDownPodSetNames: the pod sets of an elastic Workload now smaller than their admitted count."""
    admission = _status(obj).get("admission")
    if not _elastic(obj, gates) or not isinstance(admission, Mapping):
        return set()
    sizes = {ps.get("name"): ps.get("count") for ps in _pod_sets(obj)}
    found = set()
    for assignment in map(_map, _list(admission.get("podSetAssignments"))):
        admitted, size = _int(assignment.get("count")), _int(sizes.get(assignment.get("name"), 0))
        if admitted is not None and size is not None and admitted > size:
            found.add(assignment.get("name"))
    return found


def admission_change_refused(new: Any, old: Any, *, gates: Mapping[str, bool]) -> bool:
    """Whether Kueue's Workload webhook refuses replacing admission ``old`` by ``new`` in one write (both a
    ``status.admission`` as JSON): an admission may be set or cleared, not changed (:func:`_admission_update`)."""
    return bool(_admission_update(new, old, gates))


def _admission_update(new: Any, old: Any, gates: Mapping[str, bool]) -> list[FieldError]:
    """validateAdmissionUpdate: an admission may be set or cleared but not changed; under TopologyAwareScheduling
    its assignments' ``topologyAssignment`` and ``delayedTopologyRequest`` may be set, when the number of
    assignments is the same."""
    if not isinstance(new, Mapping) or not isinstance(old, Mapping):
        return []
    before: Mapping[str, Any] = old
    new_assignments, old_assignments = _list(new.get("podSetAssignments")), _list(old.get("podSetAssignments"))
    if gate(gates, TOPOLOGY_AWARE_SCHEDULING) and len(new_assignments) == len(old_assignments):
        carried = []
        for now, was in zip(new_assignments, old_assignments, strict=True):
            was = dict(_map(was))
            for key in ("topologyAssignment", "delayedTopologyRequest"):
                was.pop(key, None)
                if key in _map(now):
                    was[key] = _map(now)[key]
            carried.append(was)
        before = {**old, "podSetAssignments": carried}
    if semantically_equal(new, before):
        return []
    return [_invalid("status.admission", GoLiteral("v1beta2.Admission{...}"), _IMMUTABLE)]


def _immutable_pod_set_updates(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """validateImmutablePodSetUpdates: a check Ready before and after keeps its pod set updates (the path is the
    check's index in the old status)."""
    now = {_map(c).get("name"): _map(c) for c in _list(_status(new).get("admissionChecks"))}
    errors: list[FieldError] = []
    for i, was in enumerate(map(_map, _list(_status(old).get("admissionChecks")))):
        check = now.get(was.get("name"))
        if check is None or was.get("state") != "Ready" or check.get("state") != "Ready":
            continue
        if not semantically_equal(check.get("podSetUpdates"), was.get("podSetUpdates")):
            errors.append(
                _invalid(
                    f"status.admissionChecks[{i}].podSetUpdates", GoLiteral("[]v1beta2.PodSetUpdate{...}"), _IMMUTABLE
                )
            )
    return errors


def _cluster_name_update(new: Mapping[str, Any], old: Mapping[str, Any], gates: Mapping[str, bool]) -> list[FieldError]:
    """validateClusterNameUpdate: ``status.clusterName`` is set to one of the nominated clusters (an elastic
    replacement slice excepted)."""
    if gate(gates, slices.GATE) and _annotations(new).get(slices.REPLACEMENT_FOR_ANNOTATION):
        return []
    cluster = _status(new).get("clusterName")
    if _status(old).get("clusterName") is not None or cluster is None:
        return []
    if cluster in _list(_status(old).get("nominatedClusterNames")):
        return []
    return [
        _invalid("status.clusterName", cluster, "when setting clusterName it must be one of the nominatedClusterNames")
    ]


# -- the admission-gated-by annotation (pkg/util/webhook/validation_admissiongatedby.go) --------------


def _gates_of(value: str) -> list[str]:
    """pkg/util/csv Parse: comma-separated names, spaces around them trimmed; none for a blank value."""
    return [] if not value.strip() else [part.strip() for part in value.split(",")]


def _gated_by_format(value: str) -> list[FieldError]:
    """validateAdmissionGatedByAnnotationFormat: no empty nor repeated gate, each a domain-prefixed path of
    at most 63 characters (the rule of a Job's ``spec.managedBy``)."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for name in _gates_of(value):
        if not name:
            errors.append(_invalid(_GATED_BY_PATH, value, "cannot contain empty gate names"))
            continue
        if name in seen:
            errors.append(_invalid(_GATED_BY_PATH, value, f"duplicate gate name: {name}"))
            continue
        seen.add(name)
        errors += _domain_prefixed_path(_GATED_BY_PATH, name)
        if len(name) > 63:
            errors.append(FieldError(type="TooLong", field=_GATED_BY_PATH, detail="may not be more than 63 bytes"))
    return errors


def _gated_by_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """ValidateAdmissionGatedByAnnotationOnUpdate: gates may only be removed, never added after creation."""
    before = str(_annotations(old).get(ADMISSION_GATED_BY_ANNOTATION) or "")
    now = str(_annotations(new).get(ADMISSION_GATED_BY_ANNOTATION) or "")
    errors: list[FieldError] = []
    if not before and now:
        errors.append(
            FieldError(type="Forbidden", field=_GATED_BY_PATH, detail="cannot add admission gate after creation")
        )
    if before and now and any(name not in _gates_of(before) for name in _gates_of(now)):
        errors.append(
            FieldError(type="Forbidden", field=_GATED_BY_PATH, detail="can only remove gates, not add new ones")
        )
    return errors + _gated_by_format(now)


def _domain_prefixed_path(path: str, value: str) -> list[FieldError]:
    """apimachinery validation.IsDomainPrefixedPath."""
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        return [_invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors = [_invalid(path, host, problem) for problem in k8s_labels.subdomain_problems(host)]
    if not re.fullmatch(_HTTP_PATH_FMT, rest):
        errors.append(_invalid(path, rest, f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')"))
    return errors


# -- labels and annotations (apimachinery metav1 validation, api/validation) -----------------------------


def _labels(labels: Mapping[str, Any], path: str) -> list[FieldError]:
    """metav1validation.ValidateLabels: qualified keys and valid values, each error at the map's path (keys in
    sorted order; Go's map order is random)."""
    errors: list[FieldError] = []
    for key, value in sorted(labels.items()):
        errors += label_name_errors(str(key), path)
        errors += [_invalid(path, str(value), problem) for problem in label_value_problems(str(value))]
    return errors


def label_errors(labels: Mapping[str, Any], path: str) -> list[FieldError]:
    """metav1validation.ValidateLabels over ``labels`` (a ResourceFlavor's ``spec.nodeLabels``, ...): each key a
    qualified name, each value a label value, every error at ``path`` itself, keys in sorted order."""
    return _labels(labels, path)


def label_name_errors(name: str, path: str) -> list[FieldError]:
    """metav1validation.ValidateLabelName (a label key, a taint's or toleration's key; Kueue's resource names,
    content.IsLabelKey): ``Invalid value: "@cpu": name part must consist of ...`` at ``path``, one per problem."""
    return [_invalid(path, name, problem) for problem in k8s_labels.qualified_name_problems(name)]


def label_value_problems(value: str) -> list[str]:
    """validation.IsValidLabelValue (:func:`k8s_labels.label_value_problems`): the problems as Kubernetes words them."""
    return k8s_labels.label_value_problems(value)


def label_selector_errors(selector: Mapping[str, Any], path: str) -> list[FieldError]:
    """metav1validation.ValidateLabelSelector (a ClusterQueue's ``spec.namespaceSelector``; Kueue
    clusterqueue_webhook.go validateClusterQueueSpec): ``matchLabels`` as :func:`label_errors`; each
    ``matchExpressions[i]`` with values for In and NotIn and none for Exists and DoesNotExist, a known
    ``operator``, a qualified ``key`` and valid ``values[j]``."""
    errors = label_errors(_map(selector.get("matchLabels")), f"{path}.matchLabels")
    for i, requirement in enumerate(_list(selector.get("matchExpressions"))):
        where, requirement = f"{path}.matchExpressions[{i}]", _map(requirement)
        operator, values = requirement.get("operator"), [str(v) for v in _list(requirement.get("values"))]
        if operator in ("In", "NotIn") and not values:
            errors.append(
                FieldError(
                    type="Required",
                    field=f"{where}.values",
                    detail="must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
        elif operator in ("Exists", "DoesNotExist") and values:
            detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            errors.append(FieldError(type="Forbidden", field=f"{where}.values", detail=detail))
        elif operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errors.append(_invalid(f"{where}.operator", operator, "not a valid selector operator"))
        errors += label_name_errors(str(requirement.get("key") or ""), f"{where}.key")
        for j, value in enumerate(values):
            errors += [_invalid(f"{where}.values[{j}]", value, problem) for problem in label_value_problems(value)]
    return errors


def _annotation_keys(annotations: Mapping[str, Any], path: str) -> list[FieldError]:
    """apivalidation.ValidateAnnotations: keys are qualified names, case aside, and all of them with their
    values take at most 256 KiB."""
    errors: list[FieldError] = []
    for key in sorted(annotations):
        errors += [_invalid(path, key, problem) for problem in k8s_labels.qualified_name_problems(str(key).lower())]
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > _TOTAL_ANNOTATION_SIZE:
        errors.append(
            FieldError(type="TooLong", field=path, detail=f"may not be more than {_TOTAL_ANNOTATION_SIZE} bytes")
        )
    return errors


# -- helpers -------------------------------------------------------------------------------------------


def holds_quota(obj: Mapping[str, Any] | None) -> bool:
    """Whether the Workload's ``QuotaReserved`` condition is ``True`` (Kueue workload.go HasQuotaReservation)."""
    if obj is None:
        return False
    return any(
        _map(c).get("type") == "QuotaReserved" and _map(c).get("status") == "True"
        for c in _list(_status(obj).get("conditions"))
    )


def semantically_equal(a: Any, b: Any) -> bool:
    """Kubernetes' ``equality.Semantic.DeepEqual`` on JSON: quantities compared by value (``1`` is ``1000m``), an
    absent field, a null, an empty list and an empty map alike."""
    return bool(_normal(a) == _normal(b))


_QUANTITY_MAPS: Final = frozenset({"requests", "limits", "resourceUsage", "overhead"})


def _normal(value: Any, key: str = "") -> Any:
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if key in _QUANTITY_MAPS and (number := _quantity(v)) is not None:
                out[k] = number
                continue
            normal = _normal(v, str(k))
            if normal not in (None, [], {}):
                out[k] = normal
        return out
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _elastic(obj: Mapping[str, Any], gates: Mapping[str, bool]) -> bool:
    """workloadslicing.Enabled: the gate on and the Workload annotated ``kueue.x-k8s.io/elastic-job: "true"``."""
    return gate(gates, slices.GATE) and _annotations(obj).get(slices.ELASTIC_JOB_ANNOTATION) == "true"


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(type="Invalid", field=path, value=value, detail=detail)


def _not_supported(path: str, value: Any, supported: Sequence[Any]) -> FieldError:
    """field.NotSupported: ``Unsupported value: "x": supported values: "a", "b"``."""
    listed = ", ".join(f'"{s}"' for s in supported)
    return FieldError(
        type="NotSupported", field=path, value=value, detail=f"supported values: {listed}" if supported else ""
    )


def _quantity(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        return quantities.parse_decimal(value)
    except (quantities.QuantityError, ValueError, ArithmeticError):
        return None


def _amount(resource: str, value: Any) -> int | None:
    """resources.ResourceValue: a quantity as Kueue counts it (cpu in millicores, rounded up), None unparsed."""
    if _quantity(value) is None:
        return None
    return quantities.to_amount(resource, value, allow_negative=True)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _map(_map(obj).get("spec"))


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _map(_map(obj).get("status"))


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(obj.get("metadata")).get("annotations"))


def _pod_sets(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [ps for ps in _list(_spec(obj).get("podSets")) if isinstance(ps, Mapping)]


def _pod_set_names(obj: Mapping[str, Any]) -> list[Any]:
    return [ps.get("name") for ps in _pod_sets(obj)]
