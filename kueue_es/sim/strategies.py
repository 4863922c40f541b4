"""What kube-apiserver's registry strategies write into a Pod or a Job as it is created (PrepareForCreate).

Why this module exists: users run the real kubectl against the emulated API server, so a Pod or a Job must
read back as a real cluster stores it, and part of that is written neither by defaulting
(:func:`kueue_es.sim.store.apply_defaults`) nor by a controller but by the API server's create strategy,
after the mutating webhooks (Kueue's scheduling gates) and before validation:

* a Pod (Kubernetes pkg/registry/core/pod/strategy.go PrepareForCreate): ``status.phase`` Pending, its
  ``status.qosClass`` (:func:`pod_qos_class`) and, while it has scheduling gates (Kueue's
  ``kueue.x-k8s.io/admission`` and ``kueue.x-k8s.io/topology``), the condition PodScheduled False with reason
  ``SchedulingGated`` (applySchedulingGatedCondition), which is where ``kubectl get pods`` reads its STATUS
  ``SchedulingGated`` from. The scheduler leaves it there while gates remain; once the pod runs, the
  simulated kubelet (:func:`kueue_es.sim.controllers.running_status`) replaces the conditions;
* a Job (pkg/registry/batch/job/strategy.go generateSelector, unless ``spec.manualSelector`` is true): the
  template labels ``controller-uid``, ``batch.kubernetes.io/controller-uid`` (the Job's UID), ``job-name``,
  ``batch.kubernetes.io/job-name`` (its name), each unless the template has it, and ``spec.selector``
  matching ``batch.kubernetes.io/controller-uid``.

and what its pod status strategy refuses on an update of ``pods/status``
(:func:`pod_status_transition_errors`): a container that terminated and may not restart said to run again, as
a stale status write (one simulated writer's Running after another's Succeeded) would otherwise revert a
finished pod for good.

Pure functions over plain dicts: the caller (:meth:`kueue_es.sim.store.ObjectStore.create`) gives the time.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kueue_es.events import quantities
from kueue_es.jobframework import jobs
from kueue_es.services.kube import resources

#: The PodScheduled reason while a pod has scheduling gates (k8s.io/api core/v1 PodReasonSchedulingGated).
SCHEDULING_GATED_REASON = "SchedulingGated"
#: The message kube-apiserver writes with it (pod strategy applySchedulingGatedCondition).
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
#: The resources a pod's QoS class is computed from (qos.go isSupportedQoSComputeResource).
_QOS_RESOURCES = ("cpu", "memory")


def prepare_for_create(ref: resources.ResourceRef, obj: dict[str, Any], *, now: str) -> None:
    """Write into ``obj``, about to be stored as a new object of kind ``ref``, what the kind's create strategy
    adds (see the module docstring); other kinds are left as they are. ``obj`` has its name and UID already;
    ``now`` is the RFC 3339 time of the create (a condition's ``lastTransitionTime``)."""
    if ref == resources.PODS:
        obj["status"] = pending_status(obj.get("spec") or {}, now=now)
    elif ref == resources.JOBS:
        generate_job_selector(obj)
        # SetDefaults_Job copies the template's labels to a Job that has none; kube-apiserver decodes (so
        # defaults) every object it reads back from storage, so a client sees the generated ones there too
        template_labels = ((obj["spec"].get("template") or {}).get("metadata") or {}).get("labels")
        if template_labels and not obj["metadata"].get("labels"):
            obj["metadata"]["labels"] = dict(template_labels)


def pending_status(spec: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """The status of a Pod of ``spec`` just created: phase Pending, its QoS class and, when the spec has
    scheduling gates, PodScheduled False ``SchedulingGated`` (Kubernetes pod strategy PrepareForCreate)."""
    status: dict[str, Any] = {"phase": "Pending", "qosClass": pod_qos_class(spec)}
    if spec.get("schedulingGates"):
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,  # metav1.Time's zero value, which the API server writes as null
                "lastTransitionTime": now,
                "reason": SCHEDULING_GATED_REASON,
                "message": SCHEDULING_GATED_MESSAGE,
            }
        ]
    return status


def pod_qos_class(spec: Mapping[str, Any]) -> str:
    """``BestEffort``, ``Burstable`` or ``Guaranteed``: the QoS class of a pod of ``spec`` (Kubernetes
    pkg/apis/core/helper/qos/qos.go ComputePodQOS).

    Only cpu and memory count, and only amounts above zero. Without any request or limit: BestEffort.
    Guaranteed when every container (init containers too) limits both cpu and memory and the summed
    requests equal the summed limits; otherwise Burstable. A request left out counts as its limit, as the
    API server defaults it so. Pod-level ``spec.resources``, when given, stand for the containers'. A
    quantity that does not parse is skipped here: validation then refuses the pod, naming the field."""
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping) and (pod_level.get("requests") or pod_level.get("limits")):
        sources: list[Any] = [pod_level]
    else:
        sources = [
            container.get("resources")
            for group in ("containers", "initContainers")
            for container in _list(spec.get(group))
            if isinstance(container, Mapping)
        ]
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for source in sources:
        own = source if isinstance(source, Mapping) else {}
        own_limits = _positive_amounts(own.get("limits"))
        own_requests = _positive_amounts({**_mapping(own.get("limits")), **_mapping(own.get("requests"))})
        for total, amounts in ((requests, own_requests), (limits, own_limits)):
            for name, amount in amounts.items():
                total[name] = total.get(name, Decimal(0)) + amount
        guaranteed = guaranteed and set(_QOS_RESOURCES) <= set(own_limits)
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def generate_job_selector(job: dict[str, Any]) -> None:
    """Give ``job`` (a batch/v1 Job with its name and UID) the selector and the pod template labels the API
    server generates for it unless ``spec.manualSelector`` is true (Kubernetes batch job strategy.go
    generateSelector): the template labels of :data:`kueue_es.jobframework.jobs.JOB_CONTROLLER_LABELS` the
    template lacks, and ``batch.kubernetes.io/controller-uid`` in ``spec.selector.matchLabels`` unless there.
    A selector or label the user set is kept (a wrong one is validation's to refuse)."""
    spec = job.setdefault("spec", {})
    if spec.get("manualSelector") is True:
        return
    metadata = job["metadata"]
    name, uid = str(metadata.get("name") or ""), str(metadata.get("uid") or "")
    template = spec.get("template")
    if not isinstance(template, dict):
        template = spec["template"] = {}
    template_meta = template.get("metadata")
    if not isinstance(template_meta, dict):
        template_meta = template["metadata"] = {}
    labels = template_meta.get("labels")
    if not isinstance(labels, dict):
        labels = template_meta["labels"] = {}
    for key in (jobs.LEGACY_JOB_NAME_LABEL, jobs.JOB_NAME_LABEL):
        labels.setdefault(key, name)
    for key in (jobs.LEGACY_CONTROLLER_UID_LABEL, jobs.CONTROLLER_UID_LABEL):
        labels.setdefault(key, uid)
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    match_labels = selector.get("matchLabels")
    if not isinstance(match_labels, dict):
        match_labels = selector["matchLabels"] = {}
    match_labels.setdefault(jobs.CONTROLLER_UID_LABEL, uid)


def _positive_amounts(values: Any) -> dict[str, Decimal]:
    """The cpu and memory amounts above zero of a resource list; unparseable quantities left out."""
    amounts = {}
    for name, value in _mapping(values).items():
        if name not in _QOS_RESOURCES or isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        try:
            amount = quantities.parse_decimal(value)
        except (quantities.QuantityError, ValueError, ArithmeticError):
            continue
        if amount > 0:
            amounts[name] = amount
    return amounts


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


#: The message of a container status a status update takes out of ``terminated`` when it may not restart
#: (Kubernetes pkg/apis/core/validation ValidateContainerStateTransition).
NOT_TERMINATED_AGAIN = "may not be transitioned to non-terminated state"


def pod_status_transition_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` for each container of the Pod ``old`` whose status says it terminated and that the
    status ``new`` would have running or waiting again, when it may not restart: the pod's ``restartPolicy`` is
    Never, or OnFailure and the container exited 0 (Always: any may); an init container with its own
    ``restartPolicy: Always`` (a sidecar) may too. Fields are ``status.containerStatuses[i].state`` (``i`` its
    place in the old status), likewise ``initContainerStatuses``. Kubernetes validation.go
    ValidatePodStatusUpdate, ValidateContainerStateTransition; [] when nothing is wrong."""
    spec = _mapping(old.get("spec"))
    policy = str(spec.get("restartPolicy") or "Always")
    if policy == "Always":
        return []
    sidecars = {
        str(c.get("name"))
        for c in _list(spec.get("initContainers"))
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    }
    old_status, new_status = _mapping(old.get("status")), _mapping(new.get("status"))
    errors = []
    for group in ("containerStatuses", "initContainerStatuses"):
        running_again = {
            str(c.get("name"))
            for c in _list(new_status.get(group))
            if isinstance(c, Mapping) and "terminated" not in _mapping(c.get("state"))
        }
        for index, before in enumerate(_list(old_status.get(group))):
            if not isinstance(before, Mapping):
                continue
            terminated = _mapping(_mapping(before.get("state")).get("terminated"))
            name = str(before.get("name"))
            if not terminated or name not in running_again:
                continue
            if group == "initContainerStatuses" and name in sidecars:
                continue
            if policy == "OnFailure" and terminated.get("exitCode", 0) != 0:
                continue
            errors.append((f"status.{group}[{index}].state", NOT_TERMINATED_AGAIN))
    return errors
