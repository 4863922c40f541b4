"""The AppWrapper controller's rules, pure: the components an AppWrapper deploys, and its phase and conditions.

Why this module exists: with an emulated API server no AppWrapper controller (project-codeflare/appwrapper)
runs, so an AppWrapper Kueue unsuspends would deploy nothing and never finish (its quota held for good).
:class:`kueue_es.sim.controllers.SimulatedControllers` feeds each AppWrapper, the objects it owns and the pods
labelled with its name to :func:`sync` and writes what it returns; the wrapped Jobs, Deployments, ... then run
as any other (:mod:`kueue_es.sim.kubelet`, :mod:`kueue_es.sim.controllers`). The rules are those of the
AppWrapper controller (internal/controller/appwrapper/appwrapper_controller.go, resource_management.go), enough
for what Kueue reads (pkg/controller/jobs/appwrapper):

* a suspended AppWrapper is phase ``Suspended`` with ``QuotaReserved`` and ``ResourcesDeployed`` False and no
  components (those of a running one being suspended are deleted);
* once unsuspended: ``QuotaReserved`` True, each component's ``template`` created in the AppWrapper's
  namespace, owned by it, with the ``workload.codeflare.dev/appwrapper`` label on the object and on each pod
  set's pod template, and each pod set's ``podSetInfos`` entry (Kueue's labels, annotations, nodeSelector,
  tolerations, scheduling gates) merged into that template (createComponent); ``ResourcesDeployed`` True and
  phase ``Running``;
* ``PodsReady`` True once running and succeeded pods (by that label) reach the pods its pod sets expect
  (declared ``podSets``, else those the AppWrapper infers: replicas, default 1); phase ``Succeeded`` once as
  many pods succeeded and none is pending, running or failed, then ``QuotaReserved`` False.

Not simulated: the warmup, failure and retry grace periods (a failed pod changes nothing), ``Resetting``,
``componentStatus`` (Kueue then keeps the pod sets of the spec), the AppWrapper's webhook, Events.
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
_CONDITIONS = {
    "QuotaReserved": ("AppWrapperRunnable", "AppWrapperSuspended"),
    "ResourcesDeployed": ("AppWrapperRunnable", "AppWrapperSuspended"),
    "PodsReady": ("AppWrapperPodsReady", "InsufficientPodsReady"),
}


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


def _condition(conditions: list[Object], kind: str, on: bool, now: str) -> list[Object]:
    status = "True" if on else "False"
    reason = _CONDITIONS[kind][0 if on else 1]
    found = next((c for c in conditions if c.get("type") == kind), None)
    if found is not None and found.get("status") == status:
        return conditions
    new = {"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": now}
    return [*(c for c in conditions if c.get("type") != kind), new]


def sync(
    aw: Mapping[str, Any], owned: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], *, now: str
) -> Sync:
    """One reconcile of ``aw`` given the objects it owns (``owned``: those of its components, by their kind and
    name) and the pods labelled with its name, at ``now`` (RFC 3339): see the module docstring. A component
    whose object exists is not made again."""
    status = copy.deepcopy(dict(_mapping(aw.get("status"))))
    out = Sync(status=status)
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    live = [o for o in owned if not _mapping(o.get("metadata")).get("deletionTimestamp")]
    if status.get("phase") in ("Succeeded", "Failed"):
        return out
    if _mapping(aw.get("spec")).get("suspend") is True:
        out.delete = [dict(o) for o in live]
        status["phase"] = "Suspended"
        for kind in ("QuotaReserved", "ResourcesDeployed"):
            conditions = _condition(conditions, kind, False, now)
        status["conditions"] = conditions
        return out
    components = _mapping(aw.get("spec")).get("components") or []
    have = {(str(o.get("kind")), str(_mapping(o.get("metadata")).get("name"))) for o in owned}
    for index in range(len(components)):
        obj = component_object(aw, index)
        if (str(obj.get("kind")), str(obj["metadata"].get("name"))) not in have:
            out.create.append(obj)
    conditions = _condition(conditions, "QuotaReserved", True, now)
    conditions = _condition(conditions, "ResourcesDeployed", True, now)
    expected = expected_pods(aw)
    phases = [str(_mapping(p.get("status")).get("phase") or "Pending") for p in pods]
    succeeded = phases.count("Succeeded")
    running = phases.count("Running")
    conditions = _condition(conditions, "PodsReady", expected > 0 and running + succeeded >= expected, now)
    status["phase"] = "Running"
    if expected and not out.create and succeeded >= expected and len(phases) == succeeded:
        status["phase"] = "Succeeded"
        conditions = _condition(conditions, "QuotaReserved", False, now)
    status["conditions"] = conditions
    return out
