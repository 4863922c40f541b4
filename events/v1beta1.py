"""Kueue's deprecated ``kueue.x-k8s.io/v1beta1`` API as conversions to and from v1beta2, the version
kueue-es stores and reads.

Why this module exists: Kueue still serves v1beta1 beside v1beta2 (storage v1beta2, deprecated with
:data:`DEPRECATION_WARNING`), converted by its conversion webhook, and users' manifests, tutorials
and Kueue's own e2e test (test/e2e/singlecluster/baseline/e2e_v1beta1_test.go) write v1beta1
objects. kueue-es keeps reading and writing v1beta2 only; this module is the one place that knows
how the two versions differ, for the emulated API server (:mod:`kueue_es.sim.emulator`) and for the
conversion webhook a real cluster calls (``/convert`` of the webhook service). It is pure: JSON in,
JSON out, no I/O.

The rules, Kueue's (apis/kueue/v1beta1/*_conversion.go over zz_generated.conversion.go; what the
generator copies field for field is not repeated here, a field both versions share is kept as is):

ClusterQueue (clusterqueue_conversion.go)
    ``spec.cohort`` <-> ``spec.cohortName``; a non-empty v1beta1 ``spec.admissionChecks`` (names)
    becomes ``spec.admissionChecksStrategy.admissionChecks`` (``[{name}]``), replacing a strategy
    written beside it (v1beta2 -> v1beta1 keeps the strategy, never writes the list);
    ``spec.flavorFungibility`` ``whenCanBorrow: Borrow`` and ``whenCanPreempt: Preempt`` become
    ``MayStopSearch``; v1beta1-only ``status.pendingWorkloadsStatus`` and
    ``status.fairSharing.admissionFairSharingStatus`` are dropped, and v1beta2-only
    ``spec.concurrentAdmissionPolicy`` (zz_generated: "does not exist in peer-type").
Cohort (cohort_conversion.go, fairsharing_conversion.go)
    v1beta1-only ``status.fairSharing.admissionFairSharingStatus`` is dropped.
LocalQueue (localqueue_conversion.go)
    ``status.flavorUsage`` <-> ``status.flavorsUsage``; v1beta1-only ``status.flavors`` is dropped.
Workload (workload_conversion.go)
    ``spec.priorityClassSource`` + ``spec.priorityClassName`` <-> ``spec.priorityClassRef``
    (``kueue.x-k8s.io/workloadpriorityclass`` is group kueue.x-k8s.io kind WorkloadPriorityClass,
    ``scheduling.k8s.io/priorityclass`` group scheduling.k8s.io kind PriorityClass; any other
    source, or a ref of another group and kind, converts to nothing);
    ``status.accumulatedPastExexcutionTimeSeconds`` (sic) <-> ``status.accumulatedPastExecutionTimeSeconds``;
    ``status.admission.podSetAssignments[].topologyAssignment``: v1beta1 ``domains``
    (``[{values, count}]``) <-> v1beta2 compact ``slices``, encoded as Kueue's tas.V1Beta2From
    encodes (:func:`kueue_es.events.tas.encode`, hostname-prefix runs: the gate
    TASAssignmentsEncodingByHostnamePrefix's default); v1beta2-only ``spec.preemptionGates``,
    ``status.preemptionGates`` and ``spec.podSets[].topologyRequest.podsetSliceRequiredTopologyConstraints``
    are dropped.
MultiKueueCluster (multikueue_conversion.go)
    v1beta1 ``spec.kubeConfig`` (when its ``location`` is set) and ``spec.clusterProfileRef`` <->
    v1beta2 ``spec.clusterSource.kubeConfig`` and ``spec.clusterSource.clusterProfileRef``.
MultiKueueConfig (multikueue_conversion.go)
    v1beta2-only ``spec.quotaManagement`` is dropped.
AdmissionCheck (admissioncheck_conversion.go)
    v1beta1-only ``spec.retryDelayMinutes`` is dropped.
ResourceFlavor, WorkloadPriorityClass, Topology, ProvisioningRequestConfig
    the same fields in both versions: only ``apiVersion`` changes.

Kueue's CRDs call the webhook for ClusterQueue, Cohort, LocalQueue, Workload and MultiKueueCluster
(:data:`WEBHOOK_KINDS`, config/components/crd/patches/webhook_in_*.yaml) and convert the others
with strategy ``None``, where the API server rewrites ``apiVersion`` and prunes what the target
version's schema does not declare: the drops above for AdmissionCheck and MultiKueueConfig are
that pruning, done here so both paths give the same object.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from kueue_es.events import models, tas

GROUP = "kueue.x-k8s.io"
V1BETA1 = f"{GROUP}/v1beta1"
V1BETA2 = f"{GROUP}/v1beta2"
#: The ``deprecationWarning`` of Kueue's v1beta1 CRD versions (kubectl prints it as ``Warning: ...``).
DEPRECATION_WARNING = "This version is deprecated. Use v1beta2 instead."
#: Every Kueue kind; each is served in both versions.
KINDS = (
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "WorkloadPriorityClass",
    "Workload",
    "Topology",
    "AdmissionCheck",
    "ProvisioningRequestConfig",
    "MultiKueueCluster",
    "MultiKueueConfig",
)
#: The kinds whose CRD converts through Kueue's conversion webhook (``strategy: Webhook``); the others
#: use ``strategy: None`` (config/components/crd/kustomization.yaml, patches/webhook_in_*.yaml).
WEBHOOK_KINDS = frozenset({"ClusterQueue", "Cohort", "LocalQueue", "Workload", "MultiKueueCluster"})
#: Kueue's conversion webhook path (config/components/crd/patches/webhook_in_*.yaml).
WEBHOOK_PATH = "/convert"

WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"
#: v1beta1 ``priorityClassSource`` by v1beta2 ``priorityClassRef`` (group, kind) (apis/kueue/v1beta2/workload_types.go).
_SOURCES = {
    (GROUP, "WorkloadPriorityClass"): WORKLOAD_PRIORITY_CLASS_SOURCE,
    ("scheduling.k8s.io", "PriorityClass"): POD_PRIORITY_CLASS_SOURCE,
}


class ConversionError(ValueError):
    """An object that cannot be converted; the message names the object and the field."""


def to_v1beta2(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kueue object of v1beta1 (a whole object or a partial one, as an apply configuration) as
    v1beta2: a new dict, ``obj`` untouched. An object already of v1beta2 comes back as a copy.

    Raises :class:`ConversionError` for another group or version, a kind Kueue does not have, or a
    field of the wrong shape (naming the object and the field).
    """
    return convert(obj, V1BETA2)


def to_v1beta1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kueue object of v1beta2 as v1beta1 (what a v1beta1 read shows); see :func:`to_v1beta2`."""
    return convert(obj, V1BETA1)


def convert(obj: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    """``obj`` (a Kueue object of v1beta1 or v1beta2) in ``api_version`` (:data:`V1BETA1` or
    :data:`V1BETA2`): a new dict. Raises :class:`ConversionError` as :func:`to_v1beta2` does."""
    source = str(obj.get("apiVersion") or "")
    kind = str(obj.get("kind") or "")
    name = _name_of(obj)
    if source not in (V1BETA1, V1BETA2):
        raise ConversionError(f"{kind or 'object'} {name}: apiVersion {source!r} is not {V1BETA1} or {V1BETA2}")
    if api_version not in (V1BETA1, V1BETA2):
        raise ConversionError(f"{kind} {name}: cannot convert to {api_version!r}: not {V1BETA1} or {V1BETA2}")
    if kind not in KINDS:
        raise ConversionError(f"{kind or 'object'} {name}: kind {kind!r} is not a Kueue kind")
    out = copy.deepcopy(dict(obj))
    out["apiVersion"] = api_version
    if source == api_version:
        return out
    rules = _UP if api_version == V1BETA2 else _DOWN
    for rule in rules.get(kind, ()):
        rule(out, f"{kind} {name}")
    return out


def convert_review(review: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to an ``apiextensions.k8s.io/v1`` ConversionReview, as Kueue's webhook gives it
    (controller-runtime pkg/webhook/conversion): ``response.uid`` the request's, ``convertedObjects``
    each object of ``request.objects`` in ``request.desiredAPIVersion``, ``result.status`` Success;
    an object that cannot be converted fails the whole review (``result.status`` Failure with the
    message). Raises :class:`ConversionError` when ``review`` is not a ConversionReview with a
    request (the caller answers 400).
    """
    if review.get("kind") != "ConversionReview" or not isinstance(review.get("request"), Mapping):
        raise ConversionError("body: not a ConversionReview with a request")
    request = review["request"]
    uid = request.get("uid")
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(uid, str) or not uid:
        raise ConversionError("request.uid: Required value")
    if not isinstance(desired, str) or not isinstance(objects, list):
        raise ConversionError("request.desiredAPIVersion and request.objects: Required value")
    response: dict[str, Any] = {"uid": uid}
    try:
        for index, item in enumerate(objects):
            if not isinstance(item, Mapping):
                raise ConversionError(f"request.objects[{index}]: not an object")
        response["convertedObjects"] = [convert(item, desired) for item in objects]
        response["result"] = {"status": "Success"}
    except ConversionError as err:
        response = {"uid": uid, "convertedObjects": [], "result": {"status": "Failure", "message": str(err)}}
    return {
        "apiVersion": str(review.get("apiVersion") or "apiextensions.k8s.io/v1"),
        "kind": "ConversionReview",
        "response": response,
    }


# -- helpers -------------------------------------------------------------------------------------


def _name_of(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return '""'
    name = str(metadata.get("name") or "")
    namespace = metadata.get("namespace")
    return f'"{namespace}/{name}"' if namespace else f'"{name}"'


def _part(obj: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """``obj[key]`` when it is an object, None when absent or null; raises for another shape."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConversionError(f"{where}: {key}: must be an object, not {type(value).__name__}")
    return value


def _rename(obj: dict[str, Any] | None, old: str, new: str) -> None:
    """Move ``obj[old]`` to ``obj[new]`` (a value under ``new`` already is replaced)."""
    if obj is not None and old in obj:
        obj[new] = obj.pop(old)


def _drop(obj: dict[str, Any] | None, *keys: str) -> None:
    if obj is not None:
        for key in keys:
            obj.pop(key, None)


# -- ClusterQueue --------------------------------------------------------------------------------


def _cluster_queue_up(obj: dict[str, Any], where: str) -> None:
    spec = _part(obj, "spec", where)
    if spec is not None:
        _rename(spec, "cohort", "cohortName")
        checks = spec.pop("admissionChecks", None)
        if checks:  # Go: len(in.AdmissionChecks) > 0 replaces the strategy the generated copy wrote
            if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
                raise ConversionError(f"{where}: spec.admissionChecks: must be a list of names")
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in checks]}
        fungibility = _part(spec, "flavorFungibility", f"{where}: spec")
        if fungibility is not None:
            if fungibility.get("whenCanBorrow") == "Borrow":
                fungibility["whenCanBorrow"] = "MayStopSearch"
            if fungibility.get("whenCanPreempt") == "Preempt":
                fungibility["whenCanPreempt"] = "MayStopSearch"
    status = _part(obj, "status", where)
    if status is not None:
        status.pop("pendingWorkloadsStatus", None)
        _drop(_part(status, "fairSharing", f"{where}: status"), "admissionFairSharingStatus")


def _cluster_queue_down(obj: dict[str, Any], where: str) -> None:
    spec = _part(obj, "spec", where)
    if spec is not None:
        _rename(spec, "cohortName", "cohort")
        spec.pop("concurrentAdmissionPolicy", None)


# -- Cohort --------------------------------------------------------------------------------------


def _cohort_up(obj: dict[str, Any], where: str) -> None:
    status = _part(obj, "status", where)
    if status is not None:
        _drop(_part(status, "fairSharing", f"{where}: status"), "admissionFairSharingStatus")


# -- LocalQueue ----------------------------------------------------------------------------------


def _local_queue_up(obj: dict[str, Any], where: str) -> None:
    status = _part(obj, "status", where)
    if status is not None:
        _rename(status, "flavorUsage", "flavorsUsage")
        status.pop("flavors", None)


def _local_queue_down(obj: dict[str, Any], where: str) -> None:
    _rename(_part(obj, "status", where), "flavorsUsage", "flavorUsage")


# -- Workload ------------------------------------------------------------------------------------


def _workload_up(obj: dict[str, Any], where: str) -> None:
    spec = _part(obj, "spec", where)
    if spec is not None:
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        ref = {v: k for k, v in _SOURCES.items()}.get(source) if isinstance(source, str) else None
        if ref is not None:
            spec["priorityClassRef"] = {"group": ref[0], "kind": ref[1], "name": name or ""}
    status = _part(obj, "status", where)
    if status is not None:
        _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")
        for assignment, at in _topology_assignments(status, where):
            domains = assignment.pop("domains", None) or []
            try:
                plain = tas.Assignment(
                    levels=tuple(assignment.get("levels") or ()),
                    domains=tuple(
                        tas.DomainAssignment(values=tuple(d["values"]), count=int(d["count"])) for d in domains
                    ),
                )
            except (KeyError, TypeError, ValueError) as err:
                raise ConversionError(f"{at}.domains: each domain needs values and count ({err})") from err
            encoded = msgspec.to_builtins(tas.encode(plain))
            assignment["levels"] = encoded["levels"]
            assignment["slices"] = encoded.get("slices", [])


def _workload_down(obj: dict[str, Any], where: str) -> None:
    spec = _part(obj, "spec", where)
    if spec is not None:
        spec.pop("preemptionGates", None)
        ref = _part(spec, "priorityClassRef", f"{where}: spec")
        spec.pop("priorityClassRef", None)
        if ref is not None and (source := _SOURCES.get((str(ref.get("group")), str(ref.get("kind"))))) is not None:
            spec["priorityClassSource"] = source
            spec["priorityClassName"] = ref.get("name") or ""
        for pod_set in spec.get("podSets") or ():
            if isinstance(pod_set, dict):
                _drop(
                    _part(pod_set, "topologyRequest", f"{where}: spec.podSets"),
                    "podsetSliceRequiredTopologyConstraints",
                )
    status = _part(obj, "status", where)
    if status is not None:
        status.pop("preemptionGates", None)
        _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
        for assignment, at in _topology_assignments(status, where):
            try:
                compact = msgspec.convert(
                    {"levels": assignment.get("levels") or [], "slices": assignment.get("slices") or []},
                    models.TopologyAssignment,
                )
                plain = tas.decode(compact)
            except (msgspec.ValidationError, ValueError) as err:
                raise ConversionError(f"{at}.slices: {err}") from err
            assignment.pop("slices", None)
            assignment["levels"] = list(plain.levels)
            assignment["domains"] = [{"values": list(d.values), "count": d.count} for d in plain.domains]


def _topology_assignments(status: dict[str, Any], where: str) -> list[tuple[dict[str, Any], str]]:
    """Each ``status.admission.podSetAssignments[i].topologyAssignment`` with its field path."""
    admission = _part(status, "admission", f"{where}: status")
    found = []
    for index, assignment in enumerate((admission or {}).get("podSetAssignments") or ()):
        if isinstance(assignment, dict):
            at = f"{where}: status.admission.podSetAssignments[{index}].topologyAssignment"
            topology = _part(assignment, "topologyAssignment", at.rpartition(".")[0])
            if topology is not None:
                found.append((topology, at))
    return found


# -- MultiKueue ----------------------------------------------------------------------------------


def _multikueue_cluster_up(obj: dict[str, Any], where: str) -> None:
    spec = _part(obj, "spec", where)
    if spec is None:
        return
    kube_config = _part(spec, "kubeConfig", f"{where}: spec")
    profile = _part(spec, "clusterProfileRef", f"{where}: spec")
    spec.pop("kubeConfig", None)
    spec.pop("clusterProfileRef", None)
    source: dict[str, Any] = {}
    if kube_config is not None and kube_config.get("location"):  # Go: in.KubeConfig.Location != ""
        source["kubeConfig"] = kube_config
    if profile is not None:
        source["clusterProfileRef"] = profile
    if source:
        spec["clusterSource"] = source


def _multikueue_cluster_down(obj: dict[str, Any], where: str) -> None:
    spec = _part(obj, "spec", where)
    if spec is None:
        return
    source = _part(spec, "clusterSource", f"{where}: spec")
    spec.pop("clusterSource", None)
    if source is not None:
        if (kube_config := _part(source, "kubeConfig", f"{where}: spec.clusterSource")) is not None:
            spec["kubeConfig"] = kube_config
        if (profile := _part(source, "clusterProfileRef", f"{where}: spec.clusterSource")) is not None:
            spec["clusterProfileRef"] = profile


def _multikueue_config_down(obj: dict[str, Any], where: str) -> None:
    _drop(_part(obj, "spec", where), "quotaManagement")


def _admission_check_up(obj: dict[str, Any], where: str) -> None:
    _drop(_part(obj, "spec", where), "retryDelayMinutes")


_Rule = Callable[[dict[str, Any], str], None]
#: v1beta1 -> v1beta2 rules by kind.
_UP: dict[str, tuple[_Rule, ...]] = {
    "ClusterQueue": (_cluster_queue_up,),
    "Cohort": (_cohort_up,),
    "LocalQueue": (_local_queue_up,),
    "Workload": (_workload_up,),
    "MultiKueueCluster": (_multikueue_cluster_up,),
    "AdmissionCheck": (_admission_check_up,),
}
#: v1beta2 -> v1beta1 rules by kind.
_DOWN: dict[str, tuple[_Rule, ...]] = {
    "ClusterQueue": (_cluster_queue_down,),
    "LocalQueue": (_local_queue_down,),
    "Workload": (_workload_down,),
    "MultiKueueCluster": (_multikueue_cluster_down,),
    "MultiKueueConfig": (_multikueue_config_down,),
}
