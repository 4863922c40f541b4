"""Kueue's ProvisioningRequest admission check, as pure functions (SEMANTICS-ADVANCED B.4).

Why this module exists: the controller of ``kueue.x-k8s.io/provisioning-request``
(services/provisioning) is a thin runner over the Kubernetes API; every rule it applies
lives here, without I/O or clock, so it is unit-tested and read in one place
[src: Kueue pkg/controller/admissionchecks/provisioning/controller.go, provisioning.go,
admissioncheck_reconciler.go; pkg/workload/admissionchecks.go UpdateAdmissionCheckRequeueState].

Objects are the API's dicts (a Workload as the dispatcher writes it, a ProvisioningRequest
of ``autoscaling.x-k8s.io/v1``); the config is :class:`models.ProvisioningRequestConfig`.
A check entry is a ``status.admissionChecks[]`` dict (name, state, message,
requeueAfterSeconds, retryCount, podSetUpdates); the runner stamps lastTransitionTime.

The attempt and backoff logic: the attempt of a request is the number at the end of its
name (``<workload>-<check>-<attempt>``); a Failed (or, before admission, BookingExpired)
request of attempt n is Retry while n <= backoffLimitCount, with requeueAfterSeconds =
min(base * 2^(retryCount), max) (Kueue's wait time for requeue n = retryCount + 1,
jitter left out), and Rejected after; once Kueue's eviction reset the check to Pending,
attempt n + 1 is created.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kueue_es.events import models

CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
CONFIG_KIND = "ProvisioningRequestConfig"
CHECK_INACTIVE_MESSAGE = "the check is not active"
NO_REQUEST_NEEDED = "the provisioning request is not needed"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
POD_TEMPLATE_PREFIX = "ppt"
_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH

DEFAULT_RETRY = models.ProvisioningRequestRetryStrategy()


# -- names --------------------------------------------------------------------------------------


def limit_name(full: str) -> str:
    """``full`` if it is at most 247 characters, else its first 247 and ``-`` and 5 hex digits of its
    SHA-1 (Kueue limitObjectName: names stay within 253)."""
    if len(full) <= _MAX_PREFIX:
        return full
    digest = hashlib.sha1(full.encode(), usedforsecurity=False).hexdigest()
    return f"{full[:_MAX_PREFIX]}-{digest[:_HASH_LENGTH]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    """The ProvisioningRequest of ``attempt`` (1, 2, ...) of ``check`` for ``workload``: ``<wl>-<check>-<n>``."""
    return limit_name(f"{workload}-{check}-{attempt}")


def pod_template_name(request: str, pod_set: str) -> str:
    """The PodTemplate of ``pod_set`` in ``request``: ``ppt-<request>-<podset>``."""
    return limit_name(f"{POD_TEMPLATE_PREFIX}-{request}-{pod_set}")


def attempt_of(name: str, workload: str, check: str) -> int | None:
    """The attempt number of request ``name`` if it is one of ``check`` for ``workload``, else None."""
    prefix = limit_name(f"{workload}-{check}-")
    found = re.fullmatch(re.escape(prefix) + r"([0-9]+)", name)
    return int(found.group(1)) if found else None


# -- backoff ------------------------------------------------------------------------------------


def retry_strategy(config: models.ProvisioningRequestConfig) -> models.ProvisioningRequestRetryStrategy:
    """The config's retryStrategy, or Kueue's default (3 tries, 60 s base, 1800 s cap)."""
    return config.spec.retry_strategy or DEFAULT_RETRY


def backoff_seconds(retry_count: int, strategy: models.ProvisioningRequestRetryStrategy) -> int:
    """requeueAfterSeconds of a Retry after ``retry_count`` earlier retries: base * 2^retry_count,
    at most backoffMaxSeconds (Kueue UpdateAdmissionCheckRequeueState, n = retryCount + 1; its 0.01 %
    jitter is truncated away). Seconds."""
    return min(strategy.backoff_base_seconds * (1 << retry_count), strategy.backoff_max_seconds)


# -- the workload -------------------------------------------------------------------------------


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The status condition ``kind`` of ``obj``, or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether condition ``kind`` of ``obj`` is True."""
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def check_entry(workload: Mapping[str, Any], check: str) -> dict[str, Any] | None:
    """A copy of the ``status.admissionChecks[]`` entry of ``check``, or None."""
    for entry in (workload.get("status") or {}).get("admissionChecks") or []:
        if isinstance(entry, Mapping) and entry.get("name") == check:
            return dict(entry)
    return None


def _uses(template: Mapping[str, Any], managed: set[str]) -> bool:
    spec = template.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = container.get("resources") or {}
        if managed & {*(res.get("requests") or {}), *(res.get("limits") or {})}:
            return True
    return False


def required_pod_sets(workload: Mapping[str, Any], config: models.ProvisioningRequestConfig) -> list[str]:
    """The pod sets with count > 0 that use a managed resource (every one when managedResources is empty)."""
    managed = set(config.spec.managed_resources)
    return [
        str(ps["name"])
        for ps in (workload.get("spec") or {}).get("podSets") or []
        if int(ps.get("count", 1)) > 0 and (not managed or _uses(ps.get("template") or {}, managed))
    ]


def _admitted_counts(workload: Mapping[str, Any]) -> dict[str, int]:
    sizes = {str(ps["name"]): int(ps.get("count", 1)) for ps in (workload.get("spec") or {}).get("podSets") or []}
    admission = (workload.get("status") or {}).get("admission") or {}
    out = {}
    for psa in admission.get("podSetAssignments") or []:
        name = str(psa.get("name"))
        out[name] = int(psa["count"]) if psa.get("count") is not None else sizes.get(name, 0)
    return out


def is_needed(workload: Mapping[str, Any], config: models.ProvisioningRequestConfig) -> bool:
    """Whether a request is needed: some required pod set has an admitted count > 0 (Kueue reqIsNeeded).

    Raises ValueError naming the pod set when a required one has no assignment."""
    counts = _admitted_counts(workload)
    for name in required_pod_sets(workload, config):
        if name not in counts:
            raise ValueError(f"workload {_key(workload)}: no podSetAssignment for pod set {name!r}")
        if counts[name] > 0:
            return True
    return False


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# -- the requests -------------------------------------------------------------------------------


def synced_with_config(request: Mapping[str, Any], config: models.ProvisioningRequestConfig) -> bool:
    """Whether ``request`` has the config's class and every parameter of the config (Kueue provReqSyncedWithConfig)."""
    spec = request.get("spec") or {}
    if spec.get("provisioningClassName") != config.spec.provisioning_class_name:
        return False
    params = spec.get("parameters") or {}
    return all(params.get(k) == v for k, v in config.spec.parameters.items())


def latest_request(
    requests: Sequence[Mapping[str, Any]], workload: str, check: str, config: models.ProvisioningRequestConfig
) -> Mapping[str, Any] | None:
    """The request of the highest attempt of ``check`` for ``workload`` that matches the config."""
    best: tuple[int, Mapping[str, Any]] | None = None
    for req in requests:
        attempt = attempt_of(str((req.get("metadata") or {}).get("name", "")), workload, check)
        if attempt is not None and synced_with_config(req, config) and (best is None or attempt > best[0]):
            best = (attempt, req)
    return None if best is None else best[1]


def _attempt(request: Mapping[str, Any], workload: str, check: str) -> int:
    return attempt_of(str((request.get("metadata") or {}).get("name", "")), workload, check) or 1


def next_entry(
    entry: Mapping[str, Any],
    workload: Mapping[str, Any],
    config: models.ProvisioningRequestConfig | None,
    request: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The check entry after reading ``request`` (Kueue syncCheckStates); equal to ``entry`` when nothing changes.

    ``config`` None: the parameters do not resolve (Pending, "the check is not active"). Not needed:
    Ready "the provisioning request is not needed". Else from the request's conditions: Failed (and
    BookingExpired before admission) -> Retry with the backoff, once per attempt, while the attempt is
    within backoffLimitCount, else Rejected; CapacityRevoked while active and not finished -> Rejected;
    Provisioned -> Ready with :func:`pod_set_updates`; Accepted -> Pending with the Provisioned
    condition's message; none -> Pending, no message.
    """
    out = dict(entry)
    name = str(entry.get("name"))
    if config is None:
        out.update(state="Pending", message=CHECK_INACTIVE_MESSAGE)
        return out
    if not is_needed(workload, config):
        if out.get("state") != "Ready":
            out.update(state="Ready", message=NO_REQUEST_NEEDED)
            out.pop("podSetUpdates", None)
        return out
    if request is None:
        return out
    wl_name = str((workload.get("metadata") or {}).get("name", ""))
    strategy = retry_strategy(config)
    retry_count = int(entry.get("retryCount") or 0)
    attempt = _attempt(request, wl_name, name)

    def failed(kind: str, prefix: str) -> None:
        cond = condition(request, kind) or {}
        if attempt <= strategy.backoff_limit_count:
            out["message"] = f"{prefix}: {cond.get('message', '')}"
            if attempt > retry_count:
                out["state"] = "Retry"
                out["requeueAfterSeconds"] = backoff_seconds(retry_count, strategy)
        else:
            out.update(state="Rejected", message=str(cond.get("message", "")))

    if is_true(request, "Failed"):
        failed("Failed", "Retrying after failure")
    elif is_true(request, "CapacityRevoked"):
        active = (workload.get("spec") or {}).get("active", True) is not False
        if active and not is_true(workload, "Finished"):
            out.update(state="Rejected", message=str((condition(request, "CapacityRevoked") or {}).get("message", "")))
    elif is_true(request, "BookingExpired"):
        if not is_true(workload, "Admitted"):
            failed("BookingExpired", "Retrying after booking expired")
    elif is_true(request, "Provisioned"):
        if out.get("state") != "Ready":
            out.update(state="Ready", message=str((condition(request, "Provisioned") or {}).get("message", "")))
            updates = pod_set_updates(workload, request, config)
            out["podSetUpdates"] = updates
    elif is_true(request, "Accepted"):
        provisioned = condition(request, "Provisioned")
        if provisioned is not None:
            out.update(state="Pending", message=str(provisioned.get("message", "")))
    else:
        out.update(state="Pending", message="")
    return out


def attempt_to_create(
    entry: Mapping[str, Any] | None,
    workload: Mapping[str, Any],
    config: models.ProvisioningRequestConfig,
    request: Mapping[str, Any] | None,
) -> int | None:
    """The attempt whose request must be created now, or None (Kueue syncOwnedProvisionRequest).

    None when not needed or the check is Ready; the first (retryCount + 1) when there is no request;
    the next after a Failed request (or a BookingExpired one before admission) once the check is
    Pending again (Kueue reset it after the Retry's eviction)."""
    if not is_needed(workload, config) or (entry is not None and entry.get("state") == "Ready"):
        return None
    check = str((entry or {}).get("name", ""))
    if request is None:
        return int((entry or {}).get("retryCount") or 0) + 1
    expired = is_true(request, "BookingExpired") and not is_true(workload, "Admitted")
    if (is_true(request, "Failed") or expired) and entry is not None and entry.get("state") == "Pending":
        wl_name = str((workload.get("metadata") or {}).get("name", ""))
        return _attempt(request, wl_name, check) + 1
    return None


def pod_set_updates(
    workload: Mapping[str, Any], request: Mapping[str, Any], config: models.ProvisioningRequestConfig
) -> list[dict[str, Any]]:
    """podSetUpdates of a Provisioned request: per pod set of the request, the two autoscaling
    annotations (request name, class) and the configured nodeSelector keys whose detail is present
    in ``status.provisioningClassDetails`` (Kueue podSetUpdates)."""
    req_name = str((request.get("metadata") or {}).get("name", ""))
    by_template = {
        pod_template_name(req_name, str(ps["name"])): str(ps["name"])
        for ps in (workload.get("spec") or {}).get("podSets") or []
    }
    details = (request.get("status") or {}).get("provisioningClassDetails") or {}
    updates = []
    for ps in (request.get("spec") or {}).get("podSets") or []:
        template = str((ps.get("podTemplateRef") or {}).get("name", ""))
        update: dict[str, Any] = {
            "name": by_template.get(template, template),
            "annotations": {
                CONSUME_ANNOTATION: req_name,
                CLASS_ANNOTATION: str((request.get("spec") or {}).get("provisioningClassName", "")),
            },
        }
        if config.spec.pod_set_updates is not None:
            selector = {
                ns.key: str(details[ns.value_from_provisioning_class_detail])
                for ns in config.spec.pod_set_updates.node_selector
                if ns.value_from_provisioning_class_detail in details
            }
            if selector:
                update["nodeSelector"] = selector
        updates.append(update)
    return updates


@dataclass(frozen=True)
class MergedPodSet:
    """A pod set of the request: the first pod set of its group, its assignment's flavors, the summed count."""

    name: str
    template: Mapping[str, Any]
    flavors: Mapping[str, str]
    count: int


def _scheduling_view(template: Mapping[str, Any]) -> tuple[Any, ...]:
    spec = template.get("spec") or {}
    return (
        [(c.get("resources") or {}).get("requests") for c in spec.get("containers") or []],
        [(c.get("resources") or {}).get("requests") for c in spec.get("initContainers") or []],
        spec.get("resources"),
        spec.get("nodeSelector"),
        spec.get("tolerations"),
        spec.get("affinity"),
        spec.get("resourceClaims"),
    )


def merge_pod_sets(
    workload: Mapping[str, Any],
    config: models.ProvisioningRequestConfig,
    job_templates: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[MergedPodSet]:
    """The pod sets of the request (Kueue mergePodSets): the required ones with an admitted count > 0,
    merged by podSetMergePolicy (IdenticalPodTemplates: equal templates; IdenticalWorkloadSchedulingRequirements:
    equal container requests, pod resources, nodeSelector, tolerations, affinity and resource claims;
    none: no merging). ``job_templates``: the job's own pod templates by pod set name, which Kueue's
    Workload carries (images and all); a pod set without one uses the Workload object's template."""
    pod_sets = {str(ps["name"]): ps for ps in (workload.get("spec") or {}).get("podSets") or []}
    job_templates = job_templates or {}
    assignments = {
        str(a.get("name")): a
        for a in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    }
    counts = _admitted_counts(workload)
    policy = config.spec.pod_set_merge_policy
    merged: list[MergedPodSet] = []
    for name in required_pod_sets(workload, config):
        template = job_templates.get(name) or pod_sets[name].get("template") or {}
        count = counts.get(name, 0)
        if count <= 0:
            continue
        for i, group in enumerate(merged):
            same = (policy == "IdenticalPodTemplates" and group.template == template) or (
                policy == "IdenticalWorkloadSchedulingRequirements"
                and _scheduling_view(group.template) == _scheduling_view(template)
            )
            if same:
                merged[i] = MergedPodSet(group.name, group.template, group.flavors, group.count + count)
                break
        else:
            flavors = dict((assignments.get(name) or {}).get("flavors") or {})
            merged.append(MergedPodSet(name, template, flavors, count))
    return merged


def pod_template(
    workload: Mapping[str, Any],
    request: str,
    pod_set: MergedPodSet,
    flavors: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The PodTemplate ``ppt-<request>-<podset>`` of one merged pod set: the pod set's template with its
    flavors' nodeLabels (nodeSelector) and tolerations merged in, limits copied to missing requests;
    ``flavors``: ResourceFlavor objects by name."""
    meta = workload.get("metadata") or {}
    template = _copy(pod_set.template)
    spec = template.setdefault("spec", {})
    for flavor_name in dict.fromkeys(pod_set.flavors.values()):
        flavor_spec = (flavors.get(flavor_name) or {}).get("spec") or {}
        selector = spec.setdefault("nodeSelector", {})
        selector.update({k: v for k, v in (flavor_spec.get("nodeLabels") or {}).items() if k not in selector})
        if not selector:
            spec.pop("nodeSelector")
        for toleration in flavor_spec.get("tolerations") or []:
            if toleration not in spec.setdefault("tolerations", []):
                spec["tolerations"].append(toleration)
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = container.setdefault("resources", {})
        for resource, value in (res.get("limits") or {}).items():
            res.setdefault("requests", {}).setdefault(resource, value)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {
            "name": pod_template_name(request, pod_set.name),
            "namespace": meta.get("namespace", "default"),
            "labels": {MANAGED_LABEL: "true"},
        },
        "template": template,
    }


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def owner_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A controller owner reference to ``obj`` (an API dict with apiVersion, kind, metadata.name/uid)."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def provisioning_request(
    workload: Mapping[str, Any],
    check: str,
    attempt: int,
    config: models.ProvisioningRequestConfig,
    pod_sets: Sequence[MergedPodSet],
) -> dict[str, Any]:
    """The ProvisioningRequest of ``attempt``: in the workload's namespace, owned by it, label
    ``kueue.x-k8s.io/managed=true``, the config's class and parameters plus every workload annotation
    ``provreq.kueue.x-k8s.io/<name>`` as parameter ``<name>``, one pod set per merged pod set."""
    meta = workload.get("metadata") or {}
    name = request_name(str(meta.get("name")), check, attempt)
    params = dict(config.spec.parameters)
    for key, value in sorted((meta.get("annotations") or {}).items()):
        if key.startswith(PROVREQ_ANNOTATION_PREFIX):
            params[key.removeprefix(PROVREQ_ANNOTATION_PREFIX)] = value
    spec: dict[str, Any] = {
        "provisioningClassName": config.spec.provisioning_class_name,
        "podSets": [
            {"podTemplateRef": {"name": pod_template_name(name, ps.name)}, "count": ps.count} for ps in pod_sets
        ],
    }
    if params:
        spec["parameters"] = params
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": {MANAGED_LABEL: "true"},
            "ownerReferences": [owner_reference(workload)],
        },
        "spec": spec,
    }


def owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Whether ``obj`` has an owner reference to ``owner``'s uid."""
    uid = (owner.get("metadata") or {}).get("uid")
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


# -- the AdmissionCheck -------------------------------------------------------------------------


def active_condition(problem: str | None) -> dict[str, str]:
    """The Active condition of a provisioning check: True "Active", or False "BadParametersRef" with
    ``problem`` (why the parameters do not resolve) (Kueue acReconciler)."""
    if problem is None:
        return {"type": "Active", "status": "True", "reason": "Active", "message": "The admission check is active"}
    return {"type": "Active", "status": "False", "reason": "BadParametersRef", "message": problem}


def parameters_problem(check: Mapping[str, Any], configs: Mapping[str, models.ProvisioningRequestConfig]) -> str | None:
    """Why ``check``'s spec.parameters do not name a ProvisioningRequestConfig in ``configs``, or None."""
    ref = (check.get("spec") or {}).get("parameters")
    if not ref:
        return "missing parameters reference"
    if ref.get("apiGroup") != "kueue.x-k8s.io" or ref.get("kind") != CONFIG_KIND:
        return f"wrong reference {ref.get('apiGroup')}/{ref.get('kind')}, expecting kueue.x-k8s.io/{CONFIG_KIND}"
    if ref.get("name") not in configs:
        return f'provisioningrequestconfigs.kueue.x-k8s.io "{ref.get("name")}" not found'
    return None


# -- Kubernetes Events -------------------------------------------------------------------------

EVENT_COMPONENT = "kueue-provisioning-request-controller"
"""The event source of Kueue's provisioning controller (cmd/kueue/main.go GetEventRecorder)."""

MAX_EVENT_MESSAGE = 1024
"""Kueue's api.maxEventMsgSize (api.TruncateEventMessage)."""


def created_event(request: str) -> tuple[str, str, str, str]:
    """(type, reason, action, message) of the Event on the Workload once its ProvisioningRequest
    ``request`` is created (controller.go syncOwnedProvisionRequest)."""
    return "Normal", "ProvisioningRequestCreated", "Created", f'Created ProvisioningRequest: "{request}"'


def failed_create_event(kind: str, name: str, error: str) -> tuple[str, str, str, str]:
    """(type, reason, action, message) of the Warning on the Workload when creating its ProvisioningRequest
    or one of its PodTemplates (``kind``, ``name``) failed with ``error`` (controller.go handleError)."""
    return "Warning", "FailedCreate", "FailedCreate", f'Error creating {kind} "{name}": {error}'


def check_updated_event(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """(type, reason, action, message) of the Event when a check entry changes state, ``before`` to
    ``after`` (``status.admissionChecks[]`` dicts), or None when its state is the same
    (controller.go syncCheckStates: "Admission check X updated state from A to B with message: M")."""
    old, new = before.get("state"), after.get("state")
    if not old or old == new:
        return None
    message = f"Admission check {after.get('name')} updated state from {old} to {new}"
    if after.get("message"):
        message += f" with message: {after['message']}"
    return "Normal", "AdmissionCheckUpdated", "AdmissionCheckUpdated", message


def event_object(
    workload: Mapping[str, Any], event: tuple[str, str, str, str], *, name: str, at: str
) -> dict[str, Any]:
    """A core v1 Event about ``workload`` (a Workload dict): ``event`` from the functions above, ``name``
    the Event's name, ``at`` its time (RFC 3339). The message is cut to Kueue's 1024 characters."""
    kind, reason, action, message = event
    if len(message) > MAX_EVENT_MESSAGE:
        message = message[: MAX_EVENT_MESSAGE - 3] + "..."
    meta = workload.get("metadata") or {}
    involved = {
        "apiVersion": workload.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
        "kind": "Workload",
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        **({"uid": meta["uid"]} if meta.get("uid") else {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta.get("namespace", "")},
        "involvedObject": involved,
        "type": kind,
        "reason": reason,
        "action": action,
        "message": message,
        "count": 1,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": EVENT_COMPONENT,
    }
