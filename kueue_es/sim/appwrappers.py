"""The AppWrapper controller's rules, pure: the components an AppWrapper deploys, and its phase and conditions.

Why this module exists: with an emulated API server no AppWrapper controller (project-codeflare/appwrapper)
runs, so an AppWrapper Kueue unsuspends would deploy nothing and never finish (its quota held for good).
:class:`kueue_es.sim.controllers.SimulatedControllers` feeds each AppWrapper, the objects it owns and the pods
labelled with its name to :func:`sync`, creates what it returns and writes its status; the wrapped Jobs,
Deployments, PyTorchJobs, LeaderWorkerSets, ... then run as any other (:mod:`kueue_es.sim.kubelet`,
:mod:`kueue_es.sim.controllers`, :mod:`kueue_es.sim.training`). The rules are those of the AppWrapper
controller (internal/controller/appwrapper/appwrapper_controller.go, resource_management.go), enough for what
Kueue reads (pkg/controller/jobs/appwrapper), with its phases, reasons and messages:

* a suspended AppWrapper that deployed nothing is phase ``Suspended``, its conditions untouched; one suspended
  while it runs (Kueue's stop) has its components deleted (phase ``Suspending`` until they and their pods are
  gone), then ``ResourcesDeployed`` and ``QuotaReserved`` False ``Suspended`` "Suspend is true" and
  ``PodsReady`` / ``Unhealthy`` False ``Suspended`` when True, phase ``Suspended``;
* once unsuspended (Resuming): ``QuotaReserved`` and ``ResourcesDeployed`` True and ``PodsReady`` and
  ``Unhealthy`` False, reason ``Resuming``, "Suspend is false"; each component's ``template`` to create in the
  AppWrapper's namespace, owned by it, with the ``workload.codeflare.dev/appwrapper`` label on the object and on
  each pod set's pod template, and each pod set's ``podSetInfos`` entry (Kueue's labels, annotations,
  nodeSelector, tolerations, scheduling gates) merged into that template (createComponent); phase ``Running``;
* a component the caller cannot create for good (createComponents' fatal errors: its kind not served, no
  matches for it; the object refused as invalid; one of its name not the AppWrapper's; here also a kind no
  simulated controller runs, which would deploy nothing and never finish: :func:`not_simulated`) fails the
  AppWrapper (:func:`create_failed`): ``Unhealthy`` True ``CreateFailed`` "error creating components: ...",
  phase ``Failed``; then the components it made are deleted and, once they and their pods are gone,
  ``ResourcesDeployed`` False ``Failed`` "Resources deleted for failed AppWrapper" and ``QuotaReserved`` False
  ``Failed`` "No resources deployed", which Kueue reads as finished, failed ("AppWrapper failed");
* running, the pods labelled with its name count against those its pod sets expect (declared ``podSets``,
  else those the AppWrapper infers: replicas, default 1): ``PodsReady`` True ``SufficientPodsReady`` once as
  many run or succeeded, False ``InsufficientPodsReady`` again if they no longer do; phase ``Succeeded`` once
  as many succeeded and none is pending, running or failed, with ``QuotaReserved`` False and
  ``ResourcesDeployed`` True, reason ``Succeeded``.

The conditions are set as apimachinery's SetStatusCondition sets them: in place, a new one appended, the
transition time moved only when the status changes. Not simulated: the warmup, admission and failure grace
periods and retries (a failed pod changes nothing; a component refused otherwise, by a webhook or a quota, is
tried again on the next pass), ``Resetting``, a component deleted while running (made again, not
``MissingComponent``), ``componentStatus`` (Kueue then keeps the pod sets of the spec), the success TTL, the
finalizer, the AppWrapper's webhook, Events.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import appwrapper as integration

Object = dict[str, Any]

#: The label the AppWrapper controller puts on what it deploys and on their pods (AppWrapperLabel).
APPWRAPPER_LABEL = "workload.codeflare.dev/appwrapper"
#: The ``Unhealthy`` reason of an AppWrapper whose component could not be created (createComponents).
CREATE_FAILED = "CreateFailed"


@dataclass
class Sync:
    """What one pass of the AppWrapper controller does: objects to create, owned objects to delete, the
    AppWrapper's new status (whole)."""

    create: list[Object] = field(default_factory=list)
    delete: list[Object] = field(default_factory=list)
    status: Object = field(default_factory=dict)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_sets(aw: Mapping[str, Any], index: int) -> Sequence[Mapping[str, Any]]:
    """Component ``index``'s pod sets: its declared ``podSets``, else those the AppWrapper infers for its kind."""
    component = _mapping((_mapping(aw.get("spec")).get("components") or [])[index])
    declared = component.get("podSets")
    if isinstance(declared, list) and declared:
        return [_mapping(p) for p in declared]
    ref = workloads.job_ref(aw, kind=integration.KIND, api_version=integration.API_VERSION)
    return integration.infer_pod_sets(ref, component, where=f"spec.components[{index}]")


def expected_pods(aw: Mapping[str, Any]) -> int:
    """The pods the AppWrapper's pod sets expect (each's ``replicas``, default 1)."""
    total = 0
    for index in range(len(_mapping(aw.get("spec")).get("components") or [])):
        for pod_set in pod_sets(aw, index):
            replicas = pod_set.get("replicas")
            total += replicas if isinstance(replicas, int) else 1
    return total


def _pod_template(obj: Object, path: tuple[str | int, ...]) -> Object | None:
    """The mapping at ``path`` below the component (its first step, ``template``, is ``obj`` itself)."""
    node: Any = obj
    for step in path[1:]:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
        if node is None:
            return None
    return node if isinstance(node, dict) else None


def component_object(aw: Mapping[str, Any], index: int) -> Object:
    """Component ``index`` as the AppWrapper controller creates it (createComponent): see the module docstring."""
    meta = _mapping(aw.get("metadata"))
    component = _mapping((_mapping(aw.get("spec")).get("components") or [])[index])
    obj = copy.deepcopy(dict(_mapping(component.get("template"))))
    obj_meta = obj.setdefault("metadata", {})
    obj_meta["namespace"] = meta.get("namespace")
    obj_meta.setdefault("labels", {})[APPWRAPPER_LABEL] = str(meta.get("name") or "")
    obj_meta["ownerReferences"] = [
        {
            "apiVersion": integration.API_VERSION,
            "kind": integration.KIND,
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    infos = component.get("podSetInfos")
    for position, pod_set in enumerate(pod_sets(aw, index)):
        path = integration.parse_path(pod_set.get("path"))
        template = _pod_template(obj, path) if path else None
        if template is None:
            continue
        info = _mapping(infos[position]) if isinstance(infos, list) and position < len(infos) else {}
        template_meta = template.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            merged = {**dict(_mapping(template_meta.get(key))), **dict(_mapping(info.get(key)))}
            if merged:
                template_meta[key] = merged
        template_meta.setdefault("labels", {})[APPWRAPPER_LABEL] = str(meta.get("name") or "")
        spec = template.setdefault("spec", {})
        if info.get("nodeSelector"):
            spec["nodeSelector"] = {**dict(_mapping(spec.get("nodeSelector"))), **dict(info["nodeSelector"])}
        for key in ("tolerations", "schedulingGates"):
            if info.get(key):
                spec[key] = [*(spec.get(key) or []), *info[key]]
    return obj


def not_simulated(kind: str, api_version: str) -> str:
    """Why a component of ``kind`` (``api_version``) is not created here: no simulated controller runs that kind,
    so it would deploy nothing and never finish (the AppWrapper fails instead: module docstring)."""
    return f'kind "{kind}" in version "{api_version}" is not simulated: no controller of the emulator runs it'


def no_matches(kind: str, api_version: str) -> str:
    """The error of a component whose kind the API server does not serve (its CRD not installed): the REST
    mapper's NoKindMatchError, a fatal error of createComponent."""
    return f'no matches for kind "{kind}" in version "{api_version}"'


def not_controlled(name: str) -> str:
    """The error of a component whose name an object not controlled by the AppWrapper has (createComponent)."""
    return f"resource {name} exists, but is not controlled by appwrapper"


def _find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _is_true(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    found = _find(conditions, kind)
    return found is not None and found.get("status") == "True"


def _set(conditions: list[Object], kind: str, on: bool, reason: str, message: str, now: str) -> list[Object]:
    """``conditions`` with ``kind`` set as apimachinery's SetStatusCondition sets it: in place (a new one
    appended), its transition time moved only when its status changes."""
    status = "True" if on else "False"
    found = _find(conditions, kind)
    since = found.get("lastTransitionTime", now) if found is not None and found.get("status") == status else now
    new = {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
    if found is None:
        return [*conditions, new]
    return [new if c is found else c for c in conditions]


def _clear(conditions: list[Object], kind: str, reason: str, message: str, now: str) -> list[Object]:
    """clearCondition: ``kind`` set False only when it is True."""
    return _set(conditions, kind, False, reason, message, now) if _is_true(conditions, kind) else conditions


def create_failed(status: Mapping[str, Any], error: str, *, now: str) -> Object:
    """``status`` (the AppWrapper's, as :func:`sync` returned it) once a component could not be created for good
    (``error``, a fatal error of createComponents): ``Unhealthy`` True ``CreateFailed``, phase ``Failed``; the
    next :func:`sync` deletes what was made and gives the quota back."""
    out = copy.deepcopy(dict(status))
    conditions = [dict(c) for c in out.get("conditions") or [] if isinstance(c, Mapping)]
    message = f"error creating components: {error}"
    out["conditions"] = _set(conditions, "Unhealthy", True, CREATE_FAILED, message, now)
    out["phase"] = "Failed"
    return out


def _pod_counts(pods: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The pods by phase, as getPodStatus counts them (no phase: Pending)."""
    counts = dict.fromkeys(("Pending", "Running", "Succeeded", "Failed"), 0)
    for pod in pods:
        phase = str(_mapping(pod.get("status")).get("phase") or "Pending")
        if phase in counts:
            counts[phase] += 1
    return counts


def sync(
    aw: Mapping[str, Any], owned: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], *, now: str
) -> Sync:
    """One reconcile of ``aw`` given the objects it owns (``owned``: those of its components, by their kind and
    name) and the pods labelled with its name, at ``now`` (RFC 3339): the components to create (a component
    whose object exists is not made again) or delete, and its status (module docstring). A component that
    cannot be created is the caller's to report (:func:`create_failed`)."""
    status = copy.deepcopy(dict(_mapping(aw.get("status"))))
    out = Sync(status=status)
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    live = [dict(o) for o in owned if not _mapping(o.get("metadata")).get("deletionTimestamp")]
    phase = status.get("phase") or ""
    suspend = _mapping(aw.get("spec")).get("suspend") is True
    if phase == "Succeeded":
        return out
    if phase == "Failed":
        if _is_true(conditions, "ResourcesDeployed"):
            if owned or pods:  # deleteComponents: not done until the components and their pods are gone
                out.delete = live
                return out
            message = "Resources deleted for failed AppWrapper"
            conditions = _set(conditions, "ResourcesDeployed", False, "Failed", message, now)
        status["conditions"] = _set(conditions, "QuotaReserved", False, "Failed", "No resources deployed", now)
        return out
    if suspend:
        if phase in ("", "Suspended") and not owned:
            status["phase"] = "Suspended"  # nothing deployed: nothing to undo
            return out
        out.delete = live
        if owned or pods:
            status["phase"] = "Suspending"
            return out
        if _is_true(conditions, "ResourcesDeployed"):
            conditions = _set(conditions, "ResourcesDeployed", False, "Suspended", "Suspend is true", now)
        conditions = _set(conditions, "QuotaReserved", False, "Suspended", "Suspend is true", now)
        conditions = _clear(conditions, "PodsReady", "Suspended", "", now)
        status["conditions"] = _clear(conditions, "Unhealthy", "Suspended", "", now)
        status["phase"] = "Suspended"
        return out
    if phase != "Running":  # Resuming: deployment begins
        for kind in ("QuotaReserved", "ResourcesDeployed"):
            conditions = _set(conditions, kind, True, "Resuming", "Suspend is false", now)
        for kind in ("PodsReady", "Unhealthy"):
            conditions = _set(conditions, kind, False, "Resuming", "Suspend is false", now)
    components = _mapping(aw.get("spec")).get("components") or []
    have = {(str(o.get("kind")), str(_mapping(o.get("metadata")).get("name"))) for o in owned}
    for index in range(len(components)):
        obj = component_object(aw, index)
        if (str(obj.get("kind")), str(obj["metadata"].get("name"))) not in have:
            out.create.append(obj)
    status["phase"] = "Running"
    expected = expected_pods(aw)
    counts = _pod_counts(pods)
    pending, running, succeeded, failed = (counts[k] for k in ("Pending", "Running", "Succeeded", "Failed"))
    if expected and not out.create and succeeded >= expected and pending + running + failed == 0:
        message = f"{succeeded} pods succeeded and no running, pending, or failed pods"
        conditions = _set(conditions, "QuotaReserved", False, "Succeeded", message, now)
        conditions = _set(conditions, "ResourcesDeployed", True, "Succeeded", message, now)
        status["phase"] = "Succeeded"
    elif expected and running + succeeded >= expected:
        message = f"{running} pods running; {succeeded} pods succeeded"
        conditions = _set(conditions, "PodsReady", True, "SufficientPodsReady", message, now)
    else:
        message = f"{pending} pods pending; {running} pods running; {succeeded} pods succeeded"
        conditions = _clear(conditions, "PodsReady", "InsufficientPodsReady", message, now)
    status["conditions"] = conditions
    return out
